//! SpEED's filters at the x86-64 SIMD levels: the vector form of the scalar reference
//! (`scale::filter1d_rows`, the same operations per sample in the same order) compiled with
//! AVX2 or AVX-512 enabled, so the compiler's vector code uses 8 or 16 float lanes.

#![allow(unsafe_code)]

use super::scale::{antialias_decimate_rows, filter1d_rows, Rows};
use crate::simd::CpuLevel;

/// `scale::filter1d` at the best x86 level `cpu` allows; false when it allows none (the caller
/// runs the scalar reference).
pub(super) fn filter1d(
    cpu: CpuLevel,
    f: &[f32],
    src: &[f32],
    dst: &mut [f32],
    w: usize,
    h: usize,
    stride: usize,
) -> bool {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        unsafe { filter1d_avx512(f, src, dst, w, h, stride) };
        true
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { filter1d_avx2(f, src, dst, w, h, stride) };
        true
    } else {
        false
    }
}

#[target_feature(enable = "avx2")]
fn filter1d_avx2(f: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize, stride: usize) {
    filter1d_rows(f, src, dst, w, h, stride)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn filter1d_avx512(f: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize, stride: usize) {
    filter1d_rows(f, src, dst, w, h, stride)
}

/// `scale::antialias_decimate_rows` at the best x86 level `cpu` allows; false when it allows
/// none.
pub(super) fn antialias_decimate(
    cpu: CpuLevel,
    f: &[f32],
    rows: &Rows,
    sw: usize,
    sh: usize,
    dw: usize,
    out: &mut [f32],
) -> bool {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        unsafe { antialias_decimate_avx512(f, rows, sw, sh, dw, out) };
        true
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { antialias_decimate_avx2(f, rows, sw, sh, dw, out) };
        true
    } else {
        false
    }
}

#[target_feature(enable = "avx2")]
fn antialias_decimate_avx2(
    f: &[f32],
    rows: &Rows,
    sw: usize,
    sh: usize,
    dw: usize,
    out: &mut [f32],
) {
    antialias_decimate_rows(f, rows, sw, sh, dw, out)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn antialias_decimate_avx512(
    f: &[f32],
    rows: &Rows,
    sw: usize,
    sh: usize,
    dw: usize,
    out: &mut [f32],
) {
    antialias_decimate_rows(f, rows, sw, sh, dw, out)
}
