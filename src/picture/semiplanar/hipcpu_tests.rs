//! kernels/semiplanar.hip on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the
//! geometry of [`super::launch`], against the host unpacking bit for bit.

use super::tests::pack;
use super::{unpack_host, HostSemiPlanar, SemiPlanar};
use crate::gpu::hipcpu::{cases, launch, model_or_skip, mptr, ptr, A, WAVES};

/// Every layout on the model's test pictures (odd sizes among them), rows padded: the luma
/// and chroma kernels give the planes the host unpacking gives.
#[test]
fn semiplanar_kernels_equal_host_unpacking_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let mut checked = 0;
    for (what, pic, _) in cases(1, 1) {
        if pic.pix_fmt != crate::picture::PixelFormat::Yuv420p {
            continue;
        }
        let fmt = match pic.bpc {
            8 => SemiPlanar::Nv12,
            10 => SemiPlanar::P010,
            12 => SemiPlanar::P012,
            _ => SemiPlanar::P016,
        };
        let (w, h) = (pic.w[0], pic.h[0]);
        let (cw, ch) = SemiPlanar::chroma_dims(w, h);
        let (y, yp, c, cp) = pack(fmt, &pic, 3);
        let grid = |w: usize, h: usize| ((w as u32).div_ceil(256), (h as u32).min(512), 1);
        for warp in WAVES {
            let at = |p: usize| format!("{what} {fmt:?} plane {p} wave {warp}");
            if fmt == SemiPlanar::Nv12 {
                let c8: Vec<u8> = c.iter().map(|&v| v as u8).collect();
                let y8: Vec<u8> = y.iter().map(|&v| v as u8).collect();
                let want = unpack_host(
                    fmt,
                    w,
                    h,
                    HostSemiPlanar::U8 {
                        luma: (&y8, yp),
                        chroma: (&c8, cp),
                    },
                )
                .unwrap();
                let (mut u, mut v) = (vec![0u8; cw * ch], vec![0u8; cw * ch]);
                launch(
                    f,
                    "vmaf_semiplanar_chroma_u8",
                    grid(cw, ch),
                    (256, 1, 1),
                    warp,
                    &[
                        ptr(&c8),
                        A::U32(cp as u32),
                        mptr(&mut u),
                        mptr(&mut v),
                        A::U32(cw as u32),
                        A::U32(ch as u32),
                    ],
                )
                .unwrap_or_else(|e| panic!("{}: {e}", at(1)));
                for (plane, got) in [(1, &u), (2, &v)] {
                    for row in 0..ch {
                        for x in 0..cw {
                            let want = want.sample(plane, x, row);
                            assert_eq!(
                                got[row * cw + x] as u16,
                                want,
                                "{} ({x}, {row})",
                                at(plane)
                            );
                        }
                    }
                }
            } else {
                let want = unpack_host(
                    fmt,
                    w,
                    h,
                    HostSemiPlanar::U16 {
                        luma: (&y, yp),
                        chroma: (&c, cp),
                    },
                )
                .unwrap();
                let mut luma = vec![0u16; w * h];
                launch(
                    f,
                    "vmaf_semiplanar_luma_u16",
                    grid(w, h),
                    (256, 1, 1),
                    warp,
                    &[
                        ptr(&y),
                        A::U32(yp as u32),
                        mptr(&mut luma),
                        A::U32(w as u32),
                        A::U32(h as u32),
                        A::U32(fmt.shift()),
                    ],
                )
                .unwrap_or_else(|e| panic!("{}: {e}", at(0)));
                let (mut u, mut v) = (vec![0u16; cw * ch], vec![0u16; cw * ch]);
                launch(
                    f,
                    "vmaf_semiplanar_chroma_u16",
                    grid(cw, ch),
                    (256, 1, 1),
                    warp,
                    &[
                        ptr(&c),
                        A::U32(cp as u32),
                        mptr(&mut u),
                        mptr(&mut v),
                        A::U32(cw as u32),
                        A::U32(ch as u32),
                        A::U32(fmt.shift()),
                    ],
                )
                .unwrap_or_else(|e| panic!("{}: {e}", at(1)));
                for (plane, got, pw, ph) in [(0, &luma, w, h), (1, &u, cw, ch), (2, &v, cw, ch)] {
                    for row in 0..ph {
                        for x in 0..pw {
                            let want = want.sample(plane, x, row);
                            assert_eq!(got[row * pw + x], want, "{} ({x}, {row})", at(plane));
                        }
                    }
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} 4:2:0 cases");
}
