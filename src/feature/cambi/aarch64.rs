//! cambi at the aarch64 NEON level: the vector forms of `lanes.rs` compiled with NEON enabled
//! (the compiler vectorises them; NEON has no gathers, so the c-value row stays per pixel,
//! on the guarded histogram layout). Every result equals the scalar reference in `cpu.rs`.

#![allow(unsafe_code)]

use super::cpu::CValueCtx;
use super::lanes::{self, Merge};
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Expands to a dispatcher `$name(cpu, args..) -> bool` that runs `lanes::$name` compiled for
/// NEON, or returns false when `cpu` does not allow it.
macro_rules! dispatch {
    ($name:ident, $neon:ident, ($($arg:ident: $ty:ty),*)) => {
        pub(super) fn $name(cpu: CpuLevel, $($arg: $ty),*) -> bool {
            if cpu.has_neon() {
                // SAFETY: a CpuLevel reports NEON only when this CPU has it (crate::simd).
                unsafe { $neon($($arg),*) };
                true
            } else {
                false
            }
        }

        #[target_feature(enable = "neon")]
        fn $neon($($arg: $ty),*) {
            lanes::$name($($arg),*)
        }
    };
}

dispatch!(
    preprocess,
    preprocess_neon,
    (
        pic: &PictureData,
        dst: &mut [u16],
        stride: usize,
        out_w: usize,
        out_h: usize,
        enc_bitdepth: u32
    )
);
dispatch!(
    spatial_mask,
    spatial_mask_neon,
    (
        img: &[u16],
        mask: &mut [u16],
        stride: usize,
        w: usize,
        h: usize,
        threshold: u32
    )
);
dispatch!(
    decimate,
    decimate_neon,
    (d: &mut [u16], stride: usize, w: usize, h: usize)
);
dispatch!(
    filter_mode,
    filter_mode_neon,
    (
        d: &mut [u16],
        stride: usize,
        w: usize,
        h: usize,
        ring: &mut [u16]
    )
);

/// `lanes::pooled_exact` at the NEON level; None when `cpu` does not allow it or the shortcut
/// does not apply.
pub(super) fn pooled_exact(cpu: CpuLevel, cv: &[f32], k: usize) -> Option<f64> {
    if cpu.has_neon() {
        // SAFETY: a CpuLevel reports NEON only when this CPU has it (crate::simd).
        unsafe { pooled_exact_neon(cv, k) }
    } else {
        None
    }
}

#[target_feature(enable = "neon")]
fn pooled_exact_neon(cv: &[f32], k: usize) -> Option<f64> {
    lanes::pooled_exact(cv, k)
}

/// `CValueCtx::c_values` at the NEON level; false when `ctx.cpu` does not allow it.
pub(super) fn c_values(
    ctx: &CValueCtx,
    m: &mut Merge,
    hist: &mut [u16],
    img: &[u16],
    mask: &[u16],
    cv: &mut [f32],
) -> bool {
    if ctx.cpu.has_neon() {
        // SAFETY: a CpuLevel reports NEON only when this CPU has it (crate::simd).
        unsafe { c_values_neon(ctx, m, hist, img, mask, cv) };
        true
    } else {
        false
    }
}

#[target_feature(enable = "neon")]
fn c_values_neon(
    ctx: &CValueCtx,
    m: &mut Merge,
    hist: &mut [u16],
    img: &[u16],
    mask: &[u16],
    cv: &mut [f32],
) {
    let p = ctx.cv_row_params();
    lanes::c_values(
        ctx,
        m,
        hist,
        img,
        mask,
        cv,
        lanes::CvKernels {
            row: |hist: &[u16], bands: &[u16], cv: &mut [f32]| lanes::cv_row(&p, hist, bands, cv),
            changed: lanes::changed_bits,
            flush: lanes::flush,
        },
    );
}
