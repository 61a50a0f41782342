//! The one x86 instruction float ADM needs: SSE's approximate reciprocal.

#![allow(unsafe_code)]

use std::arch::x86_64::{_mm_cvtss_f32, _mm_rcp_ss, _mm_set_ss};

/// RCPSS of `x`: a reciprocal good to about 12 bits whose exact bits are the CPU's own (Intel
/// and AMD tables differ), which is why it is the instruction and not a formula.
#[inline]
pub(super) fn rcp_estimate(x: f32) -> f32 {
    // SAFETY: SSE belongs to the x86_64 baseline, so every CPU this code runs on has RCPSS;
    // the intrinsics touch registers only.
    unsafe { _mm_cvtss_f32(_mm_rcp_ss(_mm_set_ss(x))) }
}
