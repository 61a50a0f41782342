//! VIF's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    cases, dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, NULL, WAVES,
};
use crate::picture::PictureData;

/// The VIF sequence of gpu.rs (scale 0 statistics with the fused decimation,
/// or the decimation alone when scale 0 is skipped; then statistics and decimation per scale)
/// with the launches of launch.rs. `alt` runs the statistics kernels built with
/// the other horizontal-sum variant (integer or FP64, kernels/vif.hip `VIF_F64`).
pub(crate) fn vif_on_model(
    f: LaunchFn,
    r: &PictureData,
    d: &PictureData,
    egl: f64,
    skip0: bool,
    warp: c_int,
    alt: bool,
) -> [super::VifAccums; 4] {
    let sfx = if alt { "_alt" } else { "" };
    let stats_u16 = format!("vmaf_vif_stats_u16{sfx}");
    let (w, h, bpc) = (r.w[0], r.h[0], r.bpc as i32);
    let table = super::gpu::log2_steps();
    let mut acc = [0u64; 16];
    let mut pyr: Vec<(Vec<u16>, Vec<u16>)> = Vec::new();
    let (mut cw, mut ch) = (w, h);
    for _ in 1..4 {
        cw /= 2;
        ch /= 2;
        pyr.push((vec![0u16; cw * ch], vec![0u16; cw * ch]));
    }
    let fail = |e: String| panic!("vif wave {warp}: {e}");
    let stats_grid = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(32), 1);
    let down_grid = |w: usize, h: usize| {
        (
            ((w / 2) as u32).div_ceil(32),
            ((h / 2) as u32).div_ceil(8),
            1,
        )
    };
    let (r8, d8, r16, d16);
    let (k_stats, k_down, rp, dp) = if r.bpc == 8 {
        (r8, d8) = (dense_u8(r, 0), dense_u8(d, 0));
        (
            format!("vmaf_vif_stats_u8{sfx}"),
            "vmaf_vif_down_u8",
            ptr(&r8),
            ptr(&d8),
        )
    } else {
        (r16, d16) = (dense_u16(r, 0), dense_u16(d, 0));
        (stats_u16.clone(), "vmaf_vif_down_u16", ptr(&r16), ptr(&d16))
    };
    let (wi, hi) = (w as i32, h as i32);
    {
        let (pr, pd) = &mut pyr[0];
        let (pr, pd) = (mptr(pr), mptr(pd));
        let half = (w / 2) as i32;
        // dense w x h inputs read at reflected coordinates; the (w/2) x (h/2) outputs
        // hold w/2 * h/2 samples; acc[0..4].
        let res = if skip0 {
            launch(
                f,
                k_down,
                down_grid(w, h),
                (32, 8, 1),
                warp,
                &[
                    rp,
                    dp,
                    A::I32(wi),
                    A::I32(hi),
                    A::I32(wi),
                    A::I32(0),
                    A::I32(bpc),
                    pr,
                    pd,
                    A::I32(half),
                ],
            )
        } else {
            launch(
                f,
                &k_stats,
                stats_grid(w, h),
                (32, 8, 1),
                warp,
                &[
                    rp,
                    dp,
                    A::I32(wi),
                    A::I32(hi),
                    A::I32(wi),
                    A::I32(0),
                    A::I32(bpc),
                    ptr(table),
                    A::F64(egl),
                    mptr(&mut acc),
                    pr,
                    pd,
                    A::I32(half),
                ],
            )
        };
        res.unwrap_or_else(fail);
    }
    let (mut cw, mut ch) = (w / 2, h / 2);
    for scale in 1..4usize {
        let (lo, hi_) = pyr.split_at_mut(scale);
        let (pr, pd) = &lo[scale - 1];
        let (cwi, chi) = (cw as i32, ch as i32);
        // dense cw x ch 16-bit inputs; acc[4 * scale .. 4 * scale + 4].
        launch(
            f,
            &stats_u16,
            stats_grid(cw, ch),
            (32, 8, 1),
            warp,
            &[
                ptr(pr),
                ptr(pd),
                A::I32(cwi),
                A::I32(chi),
                A::I32(cwi),
                A::I32(scale as i32),
                A::I32(bpc),
                ptr(table),
                A::F64(egl),
                mptr(&mut acc[4 * scale..]),
                NULL,
                NULL,
                A::I32(0),
            ],
        )
        .unwrap_or_else(fail);
        if scale < 3 {
            let (nr, nd) = &mut hi_[0];
            // dense cw x ch inputs; (cw/2) x (ch/2) outputs.
            launch(
                f,
                "vmaf_vif_down_u16",
                down_grid(cw, ch),
                (32, 8, 1),
                warp,
                &[
                    ptr(pr),
                    ptr(pd),
                    A::I32(cwi),
                    A::I32(chi),
                    A::I32(cwi),
                    A::I32(scale as i32),
                    A::I32(bpc),
                    mptr(nr),
                    mptr(nd),
                    A::I32((cw / 2) as i32),
                ],
            )
            .unwrap_or_else(fail);
        }
        cw /= 2;
        ch /= 2;
    }
    std::array::from_fn(|i| super::VifAccums {
        num_log: acc[4 * i] as i64,
        den_log: acc[4 * i + 1] as i64,
        num_non_log: acc[4 * i + 2] as i64,
        den_non_log: acc[4 * i + 3] as i64,
    })
}

#[test]
fn vif_accums_equal_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    for (what, r, d) in cases(2, super::gpu::MIN_SIDE) {
        for (egl, skip) in [(100.0, false), (1.0, false), (100.0, true)] {
            let want =
                super::compute_accums(&r, &d, egl, skip, crate::simd::CpuLevel::SCALAR).unwrap();
            for warp in WAVES {
                for alt in [false, true] {
                    let got = vif_on_model(f, &r, &d, egl, skip, warp, alt);
                    assert_eq!(
                        got, want,
                        "{what} egl {egl} skip_scale0 {skip} wave {warp} alt {alt}"
                    );
                }
            }
        }
    }
    println!("vif: {:.1?}", t0.elapsed());
}
