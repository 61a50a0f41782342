//! SpEED's filters and its 25x25 solve at the x86-64 SIMD levels: the scalar reference
//! (`scale::filter1d_rows`, `linalg::solve_scalar`: the same operations per value in the same
//! order) compiled with AVX2 or AVX-512 enabled, so the compiler's vector code uses 8 or 16
//! float lanes.

#![allow(unsafe_code)]

use super::linalg::{solve_scalar, solve_with, Mat};
use super::scale::{antialias_decimate_rows, filter1d_rows, Rows};
use super::NB;
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

/// `linalg::solve` at the best x86 level `cpu` allows; `None` when it allows none.
#[allow(clippy::option_option)]
pub(super) fn solve(cpu: CpuLevel, k: &Mat, b: &[f32], cols: usize) -> Option<Option<Vec<f32>>> {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        Some(unsafe { solve_avx512(k, b, cols) })
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        Some(unsafe { solve_avx2(k, b, cols) })
    } else {
        None
    }
}

#[target_feature(enable = "avx2")]
fn solve_avx2(k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
    solve_scalar(k, b, cols)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn solve_avx512(k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
    // The closure inherits this function's target features, so the call needs no `unsafe`.
    solve_with(k, b, cols, |d, x, y| mat_mul_square_avx512(d, x, y))
}

/// Rows of [`mat_mul_square_avx512`] summed side by side (`NB` is a multiple).
const ROWS: usize = 5;

/// `linalg::mat_mul_square` with 16-lane vectors: each output row is one full and one
/// 9-lane vector, five rows at a time so their sums are independent chains. Every entry is
/// still `0 + x[i][0]·y[0][j] + x[i][1]·y[1][j] + …` in order of k, each product rounded
/// before its addition (separate multiply and add, never fused), so the result is the
/// scalar one bit for bit.
#[target_feature(enable = "avx512f")]
fn mat_mul_square_avx512(dst: &mut Mat, x: &Mat, y: &Mat) {
    use std::arch::x86_64::*;
    const TAIL: __mmask16 = (1 << (NB - 16)) - 1;
    const _: () = assert!(NB > 16 && NB <= 32 && NB.is_multiple_of(ROWS));
    for i0 in (0..NB).step_by(ROWS) {
        let mut lo = [_mm512_setzero_ps(); ROWS];
        let mut hi = [_mm512_setzero_ps(); ROWS];
        for (k, yrow) in y.chunks_exact(NB).enumerate() {
            // SAFETY: `yrow` holds NB (25) floats: 16 from its start, then 9 under the mask.
            let (ylo, yhi) = unsafe {
                (
                    _mm512_loadu_ps(yrow.as_ptr()),
                    _mm512_maskz_loadu_ps(TAIL, yrow.as_ptr().add(16)),
                )
            };
            for r in 0..ROWS {
                let xv = _mm512_set1_ps(x[(i0 + r) * NB + k]);
                lo[r] = _mm512_add_ps(lo[r], _mm512_mul_ps(xv, ylo));
                hi[r] = _mm512_add_ps(hi[r], _mm512_mul_ps(xv, yhi));
            }
        }
        for r in 0..ROWS {
            let row = &mut dst[(i0 + r) * NB..(i0 + r + 1) * NB];
            // SAFETY: `row` holds NB floats: 16 stored from its start, 9 more under the mask.
            unsafe {
                _mm512_storeu_ps(row.as_mut_ptr(), lo[r]);
                _mm512_mask_storeu_ps(row.as_mut_ptr().add(16), TAIL, hi[r]);
            }
        }
    }
}

/// The vector square product `cpu` selects, for tests; `None` where it selects none.
#[cfg(test)]
pub(super) fn mat_mul_square_at(cpu: CpuLevel, x: &Mat, y: &Mat) -> Option<Mat> {
    let mut d = [0.0f32; NB * NB];
    if !cpu.has_avx512() {
        return None;
    }
    // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
    unsafe { mat_mul_square_avx512(&mut d, x, y) };
    Some(d)
}
