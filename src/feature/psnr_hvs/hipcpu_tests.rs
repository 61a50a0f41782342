//! psnr_hvs's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the
//! geometry of [`super::launch`], against the CPU's plane sums bit for bit.

use crate::gpu::hipcpu::{dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, A, WAVES};
use crate::picture::{PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture};

use super::launch::{blocks, TABLE_LEN};
use super::{device_tables, plane_sums as cpu_sums};

/// Each plane's (sum, count) from the terms and sum kernels on the model.
fn sums_on_model(
    f: crate::gpu::hipcpu::LaunchFn,
    r: &PictureData,
    d: &PictureData,
    warp: i32,
) -> [(f32, i32); 3] {
    let tables = device_tables();
    let mut starts = [0usize; 4];
    for p in 0..3 {
        starts[p + 1] = starts[p] + 64 * blocks(r.w[p]) * blocks(r.h[p]);
    }
    let mut terms = vec![0f32; starts[3].max(1)];
    for p in 0..3 {
        let (nbx, nby) = (blocks(r.w[p]), blocks(r.h[p]));
        if nbx * nby == 0 {
            continue;
        }
        let (r8, d8, r16, d16);
        let (kernel, rp, dp) = if r.bpc == 8 {
            (r8, d8) = (dense_u8(r, p), dense_u8(d, p));
            ("vmaf_psnr_hvs_terms_u8", ptr(&r8), ptr(&d8))
        } else {
            (r16, d16) = (dense_u16(r, p), dense_u16(d, p));
            ("vmaf_psnr_hvs_terms_u16", ptr(&r16), ptr(&d16))
        };
        let out = &mut terms[starts[p]..starts[p + 1]];
        // dense w x h planes read in the blocks `blocks` counts; tables hold 3 * 128 floats;
        // out holds 64 terms per block.
        launch(
            f,
            kernel,
            (((nbx * nby) as u32).div_ceil(64), 1, 1),
            (64, 1, 1),
            warp,
            &[
                rp,
                A::I32(r.w[p] as i32),
                dp,
                A::I32(r.w[p] as i32),
                A::I32(nbx as i32),
                A::I32(nby as i32),
                ptr(&tables[p * TABLE_LEN..]),
                mptr(out),
            ],
        )
        .unwrap_or_else(|e| panic!("psnr_hvs terms wave {warp}: {e}"));
    }
    let mut sums = [0f32; 3];
    // terms holds starts[3] values in ordered ranges; sums holds 3.
    launch(
        f,
        "vmaf_psnr_hvs_sum",
        (3, 1, 1),
        (256, 1, 1),
        warp,
        &[
            ptr(&terms),
            A::U32(starts[0] as u32),
            A::U32(starts[1] as u32),
            A::U32(starts[2] as u32),
            A::U32(starts[3] as u32),
            mptr(&mut sums),
        ],
    )
    .unwrap_or_else(|e| panic!("psnr_hvs sum wave {warp}: {e}"));
    std::array::from_fn(|p| (sums[p], ((starts[p + 1] - starts[p]) as i32)))
}

#[test]
fn psnr_hvs_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let mut cases: Vec<(String, crate::picture::Picture, crate::picture::Picture)> = Vec::new();
    for clip in [
        "natural_576x324_420p8",
        "natural_320x180_420p12",
        "mandel_352x288_422p8",
    ] {
        let (refs, dists) = load_parity_clip(clip);
        cases.push((clip.to_string(), refs[1].clone(), dists[1].clone()));
    }
    for (k, (fmt, bpc, w, h)) in [
        (PixelFormat::Yuv444p, 10, 99, 37),
        (PixelFormat::Yuv420p, 8, 15, 15),
    ]
    .into_iter()
    .enumerate()
    {
        cases.push((
            format!("noise {w}x{h}"),
            noise_picture(fmt, bpc, w, h, 5 + k as u64),
            noise_picture(fmt, bpc, w, h, 9 + k as u64),
        ));
    }
    for (what, r, d) in &cases {
        let want = cpu_sums(r, d).map(|(s, n)| (s.to_bits(), n));
        for warp in WAVES {
            let got = sums_on_model(f, r, d, warp).map(|(s, n)| (s.to_bits(), n));
            assert_eq!(got, want, "{what} wave {warp}");
        }
    }
}
