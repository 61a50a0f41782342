//! float_vif's row loops at the x86-64 SIMD levels: the safe generic forms of `cpu.rs`
//! (`scale_sums_rows`, `filter_decimate_rows`: the same operations per sample in the same
//! order) compiled with AVX2 or AVX-512 enabled, so the compiler's vector code uses 8 or 16
//! float lanes. No FMA is enabled, and Rust does not contract `a * b + c` anyway.

#![allow(unsafe_code)]

use super::cpu::{filter_decimate_rows, scale_sums_rows, VifParams};
use crate::simd::CpuLevel;

/// `cpu::scale_sums_rows` at the best x86 level `cpu` allows; `None` when it allows none.
pub(super) fn scale_sums(
    cpu: CpuLevel,
    taps: &[f32],
    r: &[f32],
    d: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
) -> Option<(f32, f32)> {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        Some(unsafe { scale_sums_avx512(taps, r, d, w, h, p) })
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        Some(unsafe { scale_sums_avx2(taps, r, d, w, h, p) })
    } else {
        None
    }
}

/// `cpu::filter_decimate_rows` at the best x86 level `cpu` allows; false when it allows none.
pub(super) fn filter_decimate(
    cpu: CpuLevel,
    taps: &[f32],
    src: &[f32],
    dst: &mut [f32],
    w: usize,
    h: usize,
) -> bool {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        unsafe { filter_decimate_avx512(taps, src, dst, w, h) };
        true
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { filter_decimate_avx2(taps, src, dst, w, h) };
        true
    } else {
        false
    }
}

#[target_feature(enable = "avx2")]
fn scale_sums_avx2(
    taps: &[f32],
    r: &[f32],
    d: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
) -> (f32, f32) {
    scale_sums_rows(taps, r, d, w, h, p)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn scale_sums_avx512(
    taps: &[f32],
    r: &[f32],
    d: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
) -> (f32, f32) {
    scale_sums_rows(taps, r, d, w, h, p)
}

#[target_feature(enable = "avx2")]
fn filter_decimate_avx2(taps: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize) {
    filter_decimate_rows(taps, src, dst, w, h)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn filter_decimate_avx512(taps: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize) {
    filter_decimate_rows(taps, src, dst, w, h)
}
