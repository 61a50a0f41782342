//! NEON kernels of the float SSIM filters and statistics. Vectorised across output pixels
//! only: every output sees the scalar code's float operations on the same values in the same
//! order (f32 products widened exactly to f64, f64 sums tap by tap from 0.0, no fused
//! multiply-add, IEEE division and square root, round-to-nearest conversions): bit-exact.

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::tools::{dot_taps_one, ssim_terms_one, TERMS_CHUNK};
use crate::simd::CpuLevel;

/// The NEON kernels (only made when `cpu` has NEON).
#[derive(Clone, Copy)]
pub(super) struct Simd(());

impl Simd {
    /// The kernels `cpu` runs, if any.
    pub(super) fn new(cpu: CpuLevel) -> Option<Simd> {
        cpu.has_neon().then_some(Simd(()))
    }

    /// `out[x] = (Σ_t f64(srcs[t][x] * taps[t])) as f32`, the sum from 0.0 in tap order.
    pub(super) fn dot_taps(self, srcs: &[&[f32]], taps: &[f32], out: &mut [f32]) {
        // SAFETY: a `Simd` exists only when the CPU runs NEON.
        unsafe { dot_taps_neon(srcs, taps, out) }
    }

    /// The SSIM terms `[l·c·s, l, c, s]` of each position of the five statistics maps
    /// `[mu_r, mu_d, sq_r, sq_d, cross]` (at most [`TERMS_CHUNK`] positions).
    pub(super) fn ssim_terms(
        self,
        maps: [&[f32]; 5],
        consts: [f32; 3],
        terms: &mut [[f64; TERMS_CHUNK]; 4],
    ) {
        // SAFETY: a `Simd` exists only when the CPU runs NEON.
        unsafe { ssim_terms_neon(maps, consts, terms) }
    }
}

#[inline]
#[target_feature(enable = "neon")]
fn load4(s: &[f32]) -> float32x4_t {
    let s = &s[..4];
    // SAFETY: `s` holds the 4 lanes read.
    unsafe { vld1q_f32(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn store4(d: &mut [f32], v: float32x4_t) {
    let d = &mut d[..4];
    // SAFETY: `d` holds the 4 lanes written.
    unsafe { vst1q_f32(d.as_mut_ptr(), v) }
}

#[inline]
#[target_feature(enable = "neon")]
fn store2_f64(d: &mut [f64], v: float64x2_t) {
    let d = &mut d[..2];
    // SAFETY: `d` holds the 2 lanes written.
    unsafe { vst1q_f64(d.as_mut_ptr(), v) }
}

/// `acc += f64(p * tap)` on 4 lanes held as two f64x2 halves.
#[inline]
#[target_feature(enable = "neon")]
fn add_product(acc: &mut [float64x2_t; 2], p: float32x4_t, tap: f32) {
    let prod = vmulq_n_f32(p, tap);
    acc[0] = vaddq_f64(acc[0], vcvt_f64_f32(vget_low_f32(prod)));
    acc[1] = vaddq_f64(acc[1], vcvt_high_f64_f32(prod));
}

#[inline]
#[target_feature(enable = "neon")]
fn narrow(acc: [float64x2_t; 2]) -> float32x4_t {
    vcvt_high_f32_f64(vcvt_f32_f64(acc[0]), acc[1])
}

/// Blocks of 16 outputs (8 independent f64 sums in flight hide the add latency), then of 4,
/// then one output at a time.
#[target_feature(enable = "neon")]
fn dot_taps_neon(srcs: &[&[f32]], taps: &[f32], out: &mut [f32]) {
    let n = out.len();
    let zero = vdupq_n_f64(0.0);
    let mut x = 0;
    while x + 16 <= n {
        let mut acc = [[zero; 2]; 4];
        for (s, &tap) in srcs.iter().zip(taps) {
            let s = &s[x..x + 16];
            for (b, a) in acc.iter_mut().enumerate() {
                add_product(a, load4(&s[4 * b..]), tap);
            }
        }
        for (b, a) in acc.into_iter().enumerate() {
            store4(&mut out[x + 4 * b..], narrow(a));
        }
        x += 16;
    }
    while x + 4 <= n {
        let mut acc = [zero; 2];
        for (s, &tap) in srcs.iter().zip(taps) {
            add_product(&mut acc, load4(&s[x..]), tap);
        }
        store4(&mut out[x..], narrow(acc));
        x += 4;
    }
    for (x, o) in out.iter_mut().enumerate().skip(x) {
        *o = dot_taps_one(srcs, taps, x);
    }
}

/// Both f64x2 halves of 4 floats (exact).
#[inline]
#[target_feature(enable = "neon")]
fn widen(v: float32x4_t) -> [float64x2_t; 2] {
    [vcvt_f64_f32(vget_low_f32(v)), vcvt_high_f64_f32(v)]
}

/// C's `MAX(0.0, v)` per lane (a NaN stays NaN: the ordered compare is false).
#[inline]
#[target_feature(enable = "neon")]
fn floor_zero4(v: float32x4_t) -> float32x4_t {
    let zero = vdupq_n_f32(0.0);
    vbslq_f32(vcgtq_f32(zero, v), zero, v)
}

/// The terms of 4 positions, each operation as `ssim_terms_one` does it.
#[inline]
#[target_feature(enable = "neon")]
fn terms4([mr, md, sr, sd2, x]: [float32x4_t; 5], [c1, c2, c3]: [f32; 3]) -> [[float64x2_t; 2]; 4] {
    let zero = vdupq_n_f32(0.0);
    let vr = floor_zero4(vsubq_f32(sr, vmulq_f32(mr, mr)));
    let vd = floor_zero4(vsubq_f32(sd2, vmulq_f32(md, md)));
    let cv = vsubq_f32(x, vmulq_f32(mr, md));
    let [p0, p1] = widen(vmulq_f32(vr, vd));
    let sd = vcvt_high_f32_f64(vcvt_f32_f64(vsqrtq_f64(p0)), vsqrtq_f64(p1));
    let l_den = widen(vaddq_f32(
        vaddq_f32(vmulq_f32(mr, mr), vmulq_f32(md, md)),
        vdupq_n_f32(c1),
    ));
    let c_den = widen(vaddq_f32(vaddq_f32(vr, vd), vdupq_n_f32(c2)));
    let flat = vandq_u32(vcltq_f32(cv, zero), vcleq_f32(sd, zero));
    let cv = vbslq_f32(flat, zero, cv);
    let c3 = vdupq_n_f32(c3);
    let s = widen(vdivq_f32(vaddq_f32(cv, c3), vaddq_f32(sd, c3)));
    let (mr, md, sd) = (widen(mr), widen(md), widen(sd));
    let two = vdupq_n_f64(2.0);
    let mut out = [[vdupq_n_f64(0.0); 2]; 4];
    for h in 0..2 {
        let l_num = vaddq_f64(
            vmulq_f64(vmulq_f64(two, mr[h]), md[h]),
            vdupq_n_f64(f64::from(c1)),
        );
        let l = vdivq_f64(l_num, l_den[h]);
        let c_num = vaddq_f64(vmulq_f64(two, sd[h]), vdupq_n_f64(f64::from(c2)));
        let c = vdivq_f64(c_num, c_den[h]);
        out[0][h] = vmulq_f64(vmulq_f64(l, c), s[h]);
        out[1][h] = l;
        out[2][h] = c;
        out[3][h] = s[h];
    }
    out
}

#[target_feature(enable = "neon")]
fn ssim_terms_neon(maps: [&[f32]; 5], consts: [f32; 3], terms: &mut [[f64; TERMS_CHUNK]; 4]) {
    let n = maps[0].len().min(TERMS_CHUNK);
    let maps = maps.map(|m| &m[..n]);
    let mut i = 0;
    while i + 4 <= n {
        let t = terms4(maps.map(|m| load4(&m[i..])), consts);
        for (dst, v) in terms.iter_mut().zip(t) {
            store2_f64(&mut dst[i..], v[0]);
            store2_f64(&mut dst[i + 2..], v[1]);
        }
        i += 4;
    }
    for i in i..n {
        let t = ssim_terms_one(maps.map(|m| m[i]), consts);
        for (dst, v) in terms.iter_mut().zip(t) {
            dst[i] = v;
        }
    }
}
