//! PSNR's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::time::Instant;

use crate::gpu::hipcpu::{cases, dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, A, WAVES};

/// kernels/psnr.hip with the launch of launch.rs, every plane, against
/// `psnr::cpu::sse_plane` at the scalar level.
#[test]
fn psnr_sse_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    for (what, r, d) in cases(3, 1) {
        for plane in 0..r.pix_fmt.plane_count() {
            let (w, h) = (r.w[plane] as u32, r.h[plane] as u32);
            let want = super::sse_plane(&r, &d, plane, crate::simd::CpuLevel::SCALAR);
            let (rd8, dd8, rd16, dd16);
            let (kernel, rp, dp) = if r.bpc == 8 {
                (rd8, dd8) = (dense_u8(&r, plane), dense_u8(&d, plane));
                ("vmaf_psnr_sse_u8", ptr(&rd8), ptr(&dd8))
            } else {
                (rd16, dd16) = (dense_u16(&r, plane), dense_u16(&d, plane));
                ("vmaf_psnr_sse_u16", ptr(&rd16), ptr(&dd16))
            };
            for warp in WAVES {
                let mut out = [0u64; 1];
                // both planes are dense w x h; the kernel reads rows < h, columns < w
                // and adds to out[0].
                launch(
                    f,
                    kernel,
                    (w.div_ceil(256), h.min(512), 1),
                    (256, 1, 1),
                    warp,
                    &[
                        rp,
                        dp,
                        A::U32(w),
                        A::U32(h),
                        A::U32(w),
                        A::U32(w),
                        mptr(&mut out),
                    ],
                )
                .unwrap_or_else(|e| panic!("{what} plane {plane} wave {warp}: {e}"));
                assert_eq!(out[0], want, "{what} plane {plane} wave {warp}");
            }
        }
    }
    println!("psnr: {:.1?}", t0.elapsed());
}
