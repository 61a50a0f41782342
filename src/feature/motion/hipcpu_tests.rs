//! Motion's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    cases, dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, WAVES,
};
use crate::picture::{Picture, PictureData};
use crate::testutil::{load_parity_clip, PARITY_CLIPS};

/// The rows + reduce kernels of kernels/motion.hip with the launch of
/// launch.rs, against `motion::motion_sad` at the scalar level.
pub(crate) fn motion_on_model(
    f: LaunchFn,
    prev: &PictureData,
    cur: &PictureData,
    warp: c_int,
) -> u64 {
    let (w, h) = (cur.w[0], cur.h[0]);
    let shift = if cur.bpc == 8 { 8 } else { cur.bpc as i32 };
    let mut rows = vec![0u64; h];
    let mut out = [0u64; 1];
    let (p8, c8, p16, c16);
    let (kernel, pp, cp) = if cur.bpc == 8 {
        (p8, c8) = (dense_u8(prev, 0), dense_u8(cur, 0));
        ("vmaf_motion_rows_u8", ptr(&p8), ptr(&c8))
    } else {
        (p16, c16) = (dense_u16(prev, 0), dense_u16(cur, 0));
        ("vmaf_motion_rows_u16", ptr(&p16), ptr(&c16))
    };
    let (wi, hi) = (w as i32, h as i32);
    // dense w x h planes, read at mirrored coordinates inside them; rows[row] for
    // row < h.
    launch(
        f,
        kernel,
        ((w as u32).div_ceil(32), (h as u32).div_ceil(32), 1),
        (32, 8, 1),
        warp,
        &[
            pp,
            cp,
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
            A::I32(shift),
            mptr(&mut rows),
        ],
    )
    .unwrap_or_else(|e| panic!("motion rows wave {warp}: {e}"));
    // reads rows[0..h], writes out[0].
    launch(
        f,
        "vmaf_motion_reduce",
        (1, 1, 1),
        (256, 1, 1),
        warp,
        &[ptr(&rows), A::I32(hi), mptr(&mut out)],
    )
    .unwrap_or_else(|e| panic!("motion reduce wave {warp}: {e}"));
    out[0]
}

#[test]
fn motion_sad_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    let mut pairs: Vec<(String, Picture, Picture)> = Vec::new();
    for clip in PARITY_CLIPS {
        let (refs, _) = load_parity_clip(clip);
        let n = if clip.contains("1920x1080") { 1 } else { 3 };
        for (i, p) in refs.windows(2).enumerate().take(n) {
            pairs.push((
                format!("{clip} frames {i}..{}", i + 1),
                p[0].clone(),
                p[1].clone(),
            ));
        }
    }
    for (what, r, d) in cases(0, 3) {
        pairs.push((what, r, d));
    }
    for (what, prev, cur) in &pairs {
        let want = super::motion_sad(prev, cur, crate::simd::CpuLevel::SCALAR).unwrap();
        for warp in WAVES {
            assert_eq!(
                motion_on_model(f, prev, cur, warp),
                want,
                "{what} wave {warp}"
            );
        }
    }
    println!("motion: {:.1?}", t0.elapsed());
}
