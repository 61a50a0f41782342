//! The float_ssim and float_ms_ssim kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, WAVES,
};
use crate::picture::{Picture, PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture};

/// The float_ssim / float_ms_ssim sequence of gpu.rs (`Pipeline::queue`: to
/// float, the decimated levels, then per SSIM level the horizontal pass and the row sums) with
/// the launches of launch.rs; the host's means from those row sums.
fn ssim_on_model(
    f: LaunchFn,
    plan: &super::gpu::Plan,
    r: &PictureData,
    d: &PictureData,
    warp: c_int,
) -> Vec<super::tools::SsimMeans> {
    use super::tools::{luma_scaler, ssim_constants, GAUSSIAN, GAUSSIAN_LEN};
    let fail = |e: String| panic!("ssim wave {warp}: {e}");
    let grid = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(8), 1);
    let mut refs: Vec<Vec<f32>> = plan.dims.iter().map(|&(w, h)| vec![0.0; w * h]).collect();
    let mut dis = refs.clone();
    let (w, h) = plan.dims[0];
    let (wi, hi) = (w as i32, h as i32);
    let (r8, d8, r16, d16);
    let (kernel, rp, dp) = if r.bpc == 8 {
        (r8, d8) = (dense_u8(r, 0), dense_u8(d, 0));
        ("vmaf_ssim_to_float_u8", ptr(&r8), ptr(&d8))
    } else {
        (r16, d16) = (dense_u16(r, 0), dense_u16(d, 0));
        ("vmaf_ssim_to_float_u16", ptr(&r16), ptr(&d16))
    };
    // dense w x h inputs and outputs.
    launch(
        f,
        kernel,
        grid(w, h),
        (32, 8, 1),
        warp,
        &[
            rp,
            dp,
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
            A::F32(luma_scaler(r.bpc).unwrap()),
            mptr(&mut refs[0]),
            mptr(&mut dis[0]),
        ],
    )
    .unwrap_or_else(fail);
    for l in 1..plan.dims.len() {
        let ((pw, ph), (lw, lh)) = (plan.dims[l - 1], plan.dims[l]);
        let (rlo, rhi) = refs.split_at_mut(l);
        let (dlo, dhi) = dis.split_at_mut(l);
        // pw x ph inputs read at mirrored coordinates inside them; lw x lh outputs;
        // size * size taps (as ssim_decimate checks).
        launch(
            f,
            "vmaf_ssim_decimate",
            grid(lw, lh),
            (32, 8, 1),
            warp,
            &[
                ptr(&rlo[l - 1]),
                ptr(&dlo[l - 1]),
                A::I32(pw as i32),
                A::I32(ph as i32),
                ptr(&plan.taps),
                A::I32(plan.size as i32),
                A::I32(plan.factor as i32),
                mptr(&mut rhi[0]),
                mptr(&mut dhi[0]),
                A::I32(lw as i32),
                A::I32(lh as i32),
            ],
        )
        .unwrap_or_else(fail);
    }
    let layout = plan.sum_layout();
    let n_sums = layout.last().map_or(0, |&(off, rows, _)| off + 4 * rows);
    let mut sums = vec![0f64; n_sums];
    let [c1, c2, c3] = ssim_constants();
    for (&l, &(offset, _, _)) in plan.ssim_levels.iter().zip(&layout) {
        let (lw, lh) = plan.dims[l];
        let plane = super::launch::ssim_hconv_plane(lw, lh);
        let mut hbuf = vec![0f32; 5 * plane];
        let (lwi, lhi) = (lw as i32, lh as i32);
        // lw x lh inputs; 11 Gaussian taps; five (lw - 10) x lh planes in hbuf.
        launch(
            f,
            "vmaf_ssim_hconv",
            grid(lw - (GAUSSIAN_LEN - 1), lh),
            (32, 8, 1),
            warp,
            &[
                ptr(&refs[l]),
                ptr(&dis[l]),
                A::I32(lwi),
                A::I32(lhi),
                ptr(&GAUSSIAN),
                mptr(&mut hbuf),
                A::I64(plane as i64),
            ],
        )
        .unwrap_or_else(fail);
        let (dw, dh) = (lw + 1 - GAUSSIAN_LEN, lh + 1 - GAUSSIAN_LEN);
        // reads the five planes of hbuf; writes sums[offset + 4 * row ..][..4] for
        // row < dh, inside `sums` (the layout's extent).
        launch(
            f,
            "vmaf_ssim_rows",
            (dh as u32, 1, 1),
            (256, 1, 1),
            warp,
            &[
                ptr(&hbuf),
                A::I32(dw as i32),
                A::I32(lhi),
                A::I64(plane as i64),
                ptr(&GAUSSIAN),
                A::F32(c1),
                A::F32(c2),
                A::F32(c3),
                mptr(&mut sums[offset..]),
            ],
        )
        .unwrap_or_else(fail);
    }
    plan.means(&sums)
}

/// What the GPU tests of gpu.rs require of the device (bit-exact, no
/// tolerance): the float_ssim means at scales auto, 2 and 3 and the float_ms_ssim result, bit for
/// bit the CPU's at the scalar level.
#[test]
fn float_ssim_equals_cpu_at_wave64_and_wave32() {
    use super::{float_ms_ssim, float_ssim, gpu::Plan, tools::GAUSSIAN_LEN};
    let f = model_or_skip!();
    let t0 = Instant::now();
    let mut pairs: Vec<(String, Picture, Picture)> = Vec::new();
    for clip in [
        "natural_576x324_420p8",
        "life_320x240_420p8",
        "natural_320x180_420p12",
    ] {
        let (refs, dists) = load_parity_clip(clip);
        pairs.push((format!("{clip} frame 1"), refs[1].clone(), dists[1].clone()));
    }
    for (k, (bpc, w, h)) in [(8u32, 203usize, 181usize), (10, 99, 67), (16, 177, 176)]
        .into_iter()
        .enumerate()
    {
        let r = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 60 + 2 * k as u64);
        let d = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 61 + 2 * k as u64);
        pairs.push((format!("noise {w}x{h} {bpc}-bit"), r, d));
    }
    let bits = |m: &super::tools::SsimMeans| [m.ssim, m.l, m.c, m.s].map(f32::to_bits);
    let mut runs = 0;
    for (what, r, d) in &pairs {
        let (w, h) = (r.w[0], r.h[0]);
        for scale in [0, 2, 3] {
            let want = float_ssim::compute(r, d, scale, crate::simd::CpuLevel::SCALAR).unwrap();
            let s = float_ssim::checked_scale(scale, w, h).unwrap();
            let plan = Plan::float_ssim(w, h, s);
            let (lw, lh) = plan.dims[plan.dims.len() - 1];
            if lw < GAUSSIAN_LEN || lh < GAUSSIAN_LEN {
                continue;
            }
            for warp in WAVES {
                let got = ssim_on_model(f, &plan, r, d, warp);
                assert_eq!(
                    bits(&got[0]),
                    bits(&want),
                    "{what} float_ssim scale {scale} wave {warp}: model {:?} cpu {want:?}",
                    got[0]
                );
                runs += 1;
            }
        }
        if float_ms_ssim::check_size(w, h).is_ok() {
            let want = float_ms_ssim::compute(r, d, crate::simd::CpuLevel::SCALAR).unwrap();
            for warp in WAVES {
                let m = ssim_on_model(f, &Plan::ms_ssim(w, h), r, d, warp);
                let got = float_ms_ssim::finish(&m.try_into().unwrap()).unwrap();
                let all = |x: &float_ms_ssim::MsSsim| {
                    let mut v = vec![x.score.to_bits()];
                    v.extend(x.l.iter().chain(&x.c).chain(&x.s).map(|v| v.to_bits()));
                    v
                };
                assert_eq!(all(&got), all(&want), "{what} float_ms_ssim wave {warp}");
                runs += 1;
            }
        }
    }
    println!("float_ssim: {runs} runs in {:.1?}", t0.elapsed());
    assert!(runs >= 40, "only {runs} runs");
}
