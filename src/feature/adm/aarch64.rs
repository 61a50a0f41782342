//! NEON row kernels of the integer ADM stages, the same contract as `x86.rs`: each reproduces
//! a scalar loop of `cpu.rs` exactly on a prefix of its row and returns the prefix's length
//! (0 when `cpu` has no NEON); the scalar code finishes the row. Element-wise kernels cover
//! the whole row when it holds at least one vector (see [`starts`]).
//!
//! NEON widens natively (`vmull`/`vmlal` to 32 or 64 bits) and narrows by truncation
//! (`vmovn`, `vshrn`), which are the scalar `as` casts; its shifts by a negative vector count
//! are arithmetic right shifts. The float parts of decoupling run lane-wise in the scalar
//! order (no fused multiply-add).

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::tables::{div_lookup, COS_1DEG_SQ, DWT_HI, DWT_LO, DWT_LO_SUM};
use crate::simd::CpuLevel;

// ---------------------------------------------------------------------------------------------
// Loads and stores: the only memory accesses, each on a slice checked to hold the vector.

#[inline]
#[target_feature(enable = "neon")]
fn ld_u8x8(s: &[u8]) -> uint8x8_t {
    let s = &s[..8];
    // SAFETY: `s` holds 8 bytes.
    unsafe { vld1_u8(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn ld_u16x8(s: &[u16]) -> uint16x8_t {
    let s = &s[..8];
    // SAFETY: `s` holds 8 samples.
    unsafe { vld1q_u16(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn ld_i16x8(s: &[i16]) -> int16x8_t {
    let s = &s[..8];
    // SAFETY: `s` holds 8 samples.
    unsafe { vld1q_s16(s.as_ptr()) }
}

/// 16 samples deinterleaved: `.0` the even ones, `.1` the odd ones.
#[inline]
#[target_feature(enable = "neon")]
fn ld2_i16x8(s: &[i16]) -> int16x8x2_t {
    let s = &s[..16];
    // SAFETY: `s` holds 16 samples.
    unsafe { vld2q_s16(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn ld_i32x4(s: &[i32]) -> int32x4_t {
    let s = &s[..4];
    // SAFETY: `s` holds 4 values.
    unsafe { vld1q_s32(s.as_ptr()) }
}

/// 8 values deinterleaved: `.0` the even ones, `.1` the odd ones.
#[inline]
#[target_feature(enable = "neon")]
fn ld2_i32x4(s: &[i32]) -> int32x4x2_t {
    let s = &s[..8];
    // SAFETY: `s` holds 8 values.
    unsafe { vld2q_s32(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn st_i16x8(d: &mut [i16], v: int16x8_t) {
    let d = &mut d[..8];
    // SAFETY: `d` holds 8 samples.
    unsafe { vst1q_s16(d.as_mut_ptr(), v) }
}

#[inline]
#[target_feature(enable = "neon")]
fn st_i32x4(d: &mut [i32], v: int32x4_t) {
    let d = &mut d[..4];
    // SAFETY: `d` holds 4 values.
    unsafe { vst1q_s32(d.as_mut_ptr(), v) }
}

/// `lut[|x|]` for 4 lanes (indices at most 32768; bounds-checked).
#[inline]
#[target_feature(enable = "neon")]
fn lookup(lut: &[i32; 32769], idx: int32x4_t) -> int32x4_t {
    let i = |v: i32| lut[(v as u32).min(32768) as usize];
    let v = [
        i(vgetq_lane_s32::<0>(idx)),
        i(vgetq_lane_s32::<1>(idx)),
        i(vgetq_lane_s32::<2>(idx)),
        i(vgetq_lane_s32::<3>(idx)),
    ];
    ld_i32x4(&v)
}

/// Starts of the vectors of `w` elements covering `0..n` (n >= w): the last one is moved back
/// to end at n, recomputing a few outputs of the one before it. For element-wise kernels,
/// whose outputs depend only on their own inputs, this finishes the row without scalar code.
fn starts(n: usize, w: usize) -> impl Iterator<Item = usize> {
    (0..n).step_by(w).map(move |j| j.min(n - w))
}

const fn taps16(t: [i32; 4]) -> [i16; 4] {
    [t[0] as i16, t[1] as i16, t[2] as i16, t[3] as i16]
}

const LO16: [i16; 4] = taps16(DWT_LO);
const HI16: [i16; 4] = taps16(DWT_HI);

// ---------------------------------------------------------------------------------------------
// DWT, scale 0.

/// `sum t[k] * x[k]` (wrapping i32) of the low and high halves of 8 i16 lanes.
#[inline]
#[target_feature(enable = "neon")]
fn dot4_16(t: [i16; 4], x: [int16x8_t; 4]) -> (int32x4_t, int32x4_t) {
    let lo = vmull_n_s16(vget_low_s16(x[0]), t[0]);
    let lo = vmlal_n_s16(lo, vget_low_s16(x[1]), t[1]);
    let lo = vmlal_n_s16(lo, vget_low_s16(x[2]), t[2]);
    let lo = vmlal_n_s16(lo, vget_low_s16(x[3]), t[3]);
    let hi = vmull_high_n_s16(x[0], t[0]);
    let hi = vmlal_high_n_s16(hi, x[1], t[1]);
    let hi = vmlal_high_n_s16(hi, x[2], t[2]);
    let hi = vmlal_high_n_s16(hi, x[3], t[3]);
    (lo, hi)
}

/// Vertical taps of 8 columns: `((sum + k) >> bpc) as i16` for both filters.
#[inline]
#[target_feature(enable = "neon")]
fn vert0_8(x: [int16x8_t; 4], kl: i32, kh: i32, bpc: i32) -> (int16x8_t, int16x8_t) {
    let sh = vdupq_n_s32(-bpc);
    let f = |t, k: i32| {
        let (lo, hi) = dot4_16(t, x);
        let lo = vshlq_s32(vaddq_s32(lo, vdupq_n_s32(k)), sh);
        let hi = vshlq_s32(vaddq_s32(hi, vdupq_n_s32(k)), sh);
        vmovn_high_s32(vmovn_s32(lo), hi)
    };
    (f(LO16, kl), f(HI16, kh))
}

/// The added constants of the vertical pass: `round - centre` (plus `32768 * tap sum` when the
/// samples enter as `s - 32768`) and `round`.
fn vert0_consts(bpc: u32, bias: bool) -> (i32, i32) {
    let round = 1i32 << (bpc - 1);
    let b = if bias {
        32768i32.wrapping_mul(DWT_LO_SUM)
    } else {
        0
    };
    (
        round
            .wrapping_sub(DWT_LO_SUM.wrapping_mul(round))
            .wrapping_add(b),
        round,
    )
}

/// Scale-0 vertical pass of 8-bit rows into `lo`/`hi` (the row's columns, unpadded).
pub fn dwt0_vert_u8(
    cpu: CpuLevel,
    rows: [&[u8]; 4],
    ahead: [&[u8]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    if cpu.has_neon() {
        let _ = ahead; // no stable prefetch intrinsic on aarch64
                       // SAFETY: the level proves NEON.
        return unsafe { dwt0_vert_u8_neon(rows, bpc, lo, hi) };
    }
    0
}

#[target_feature(enable = "neon")]
fn dwt0_vert_u8_neon(rows: [&[u8]; 4], bpc: u32, lo: &mut [i16], hi: &mut [i16]) -> usize {
    let (kl, kh) = vert0_consts(bpc, false);
    let n = lo.len();
    if n < 8 {
        return 0;
    }
    for x in starts(n, 8) {
        let v = rows.map(|r| vreinterpretq_s16_u16(vmovl_u8(ld_u8x8(&r[x..]))));
        let (l, h) = vert0_8(v, kl, kh, bpc as i32);
        st_i16x8(&mut lo[x..], l);
        st_i16x8(&mut hi[x..], h);
    }
    n
}

/// Scale-0 vertical pass of 9..16-bit rows: samples enter as `s ^ 0x8000 = s - 32768`,
/// corrected by a constant (exact modulo 2^32 like the scalar wrapping sum).
pub fn dwt0_vert_u16(
    cpu: CpuLevel,
    rows: [&[u16]; 4],
    ahead: [&[u16]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    if cpu.has_neon() {
        let _ = ahead; // no stable prefetch intrinsic on aarch64
                       // SAFETY: the level proves NEON.
        return unsafe { dwt0_vert_u16_neon(rows, bpc, lo, hi) };
    }
    0
}

#[target_feature(enable = "neon")]
fn dwt0_vert_u16_neon(rows: [&[u16]; 4], bpc: u32, lo: &mut [i16], hi: &mut [i16]) -> usize {
    let (kl, kh) = vert0_consts(bpc, true);
    let flip = vdupq_n_u16(0x8000);
    let n = lo.len();
    if n < 8 {
        return 0;
    }
    for x in starts(n, 8) {
        let v = rows.map(|r| vreinterpretq_s16_u16(veorq_u16(ld_u16x8(&r[x..]), flip)));
        let (l, h) = vert0_8(v, kl, kh, bpc as i32);
        st_i16x8(&mut lo[x..], l);
        st_i16x8(&mut hi[x..], h);
    }
    n
}

/// Scale-0 horizontal pass: output `j` reads `lo[2j..2j+4]` (padded rows, at least
/// `2 * approx.len() + 2` long).
pub fn dwt0_horiz(
    cpu: CpuLevel,
    lo: &[i16],
    hi: &[i16],
    approx: &mut [i32],
    v: &mut [i16],
    h: &mut [i16],
    d: &mut [i16],
) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { dwt0_horiz_neon(lo, hi, approx, v, h, d) };
    }
    0
}

#[target_feature(enable = "neon")]
fn dwt0_horiz_neon(
    lo: &[i16],
    hi: &[i16],
    approx: &mut [i32],
    v: &mut [i16],
    h: &mut [i16],
    d: &mut [i16],
) -> usize {
    let round = vdupq_n_s32(32768);
    // Outputs j..j+8: taps on the even/odd samples from 2j and from 2j + 2.
    let taps = |x: &[i16], j: usize| {
        let a = ld2_i16x8(&x[2 * j..]);
        let b = ld2_i16x8(&x[2 * j + 2..]);
        [a.0, a.1, b.0, b.1]
    };
    let fin = |(lo, hi): (int32x4_t, int32x4_t)| {
        (
            vshrq_n_s32::<16>(vaddq_s32(lo, round)),
            vshrq_n_s32::<16>(vaddq_s32(hi, round)),
        )
    };
    let narrow = |(lo, hi): (int32x4_t, int32x4_t)| vmovn_high_s32(vmovn_s32(lo), hi);
    let n = approx.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let l = taps(lo, j);
        let hh = taps(hi, j);
        let (a0, a1) = fin(dot4_16(LO16, l));
        st_i32x4(&mut approx[j..], a0);
        st_i32x4(&mut approx[j + 4..], a1);
        st_i16x8(&mut v[j..], narrow(fin(dot4_16(HI16, l))));
        st_i16x8(&mut h[j..], narrow(fin(dot4_16(LO16, hh))));
        st_i16x8(&mut d[j..], narrow(fin(dot4_16(HI16, hh))));
    }
    n
}

// ---------------------------------------------------------------------------------------------
// DWT, scales 1-3 (int64 products, low 32 bits kept).

/// `sum t[k] * x[k]` in i64 lanes: (lanes 0-1, lanes 2-3).
#[inline]
#[target_feature(enable = "neon")]
fn dot4_64(t: [i32; 4], x: [int32x4_t; 4]) -> (int64x2_t, int64x2_t) {
    let lo = vmull_n_s32(vget_low_s32(x[0]), t[0]);
    let lo = vmlal_n_s32(lo, vget_low_s32(x[1]), t[1]);
    let lo = vmlal_n_s32(lo, vget_low_s32(x[2]), t[2]);
    let lo = vmlal_n_s32(lo, vget_low_s32(x[3]), t[3]);
    let hi = vmull_high_n_s32(x[0], t[0]);
    let hi = vmlal_high_n_s32(hi, x[1], t[1]);
    let hi = vmlal_high_n_s32(hi, x[2], t[2]);
    let hi = vmlal_high_n_s32(hi, x[3], t[3]);
    (lo, hi)
}

/// `((sum + r) >> s) as i32` of 4 lanes.
#[inline]
#[target_feature(enable = "neon")]
fn fin64((lo, hi): (int64x2_t, int64x2_t), r: int64x2_t, s: int64x2_t) -> int32x4_t {
    let lo = vshlq_s64(vaddq_s64(lo, r), s);
    let hi = vshlq_s64(vaddq_s64(hi, r), s);
    vmovn_high_s64(vmovn_s64(lo), hi)
}

/// Scales 1-3 vertical pass: `((sum + rv) >> sv) as i32` per column (without a shift, the
/// wrapping i32 sum of wrapping products is the same low 32 bits).
pub fn dwt123_vert(
    cpu: CpuLevel,
    rows: [&[i32]; 4],
    ahead: [&[i32]; 2],
    rv: i64,
    sv: u32,
    lo: &mut [i32],
    hi: &mut [i32],
) -> usize {
    if cpu.has_neon() && sv < 64 {
        let _ = ahead; // no stable prefetch intrinsic on aarch64
                       // SAFETY: the level proves NEON.
        return unsafe { dwt123_vert_neon(rows, rv, sv, lo, hi) };
    }
    0
}

#[target_feature(enable = "neon")]
fn dwt123_vert_neon(rows: [&[i32]; 4], rv: i64, sv: u32, lo: &mut [i32], hi: &mut [i32]) -> usize {
    let n = lo.len();
    if n < 4 {
        return 0;
    }
    if sv == 0 && rv == 0 {
        let dot = |t: [i32; 4], x: [int32x4_t; 4]| {
            let s = vmulq_n_s32(x[0], t[0]);
            let s = vmlaq_n_s32(s, x[1], t[1]);
            let s = vmlaq_n_s32(s, x[2], t[2]);
            vmlaq_n_s32(s, x[3], t[3])
        };
        for x in starts(n, 4) {
            let v = rows.map(|r| ld_i32x4(&r[x..]));
            st_i32x4(&mut lo[x..], dot(DWT_LO, v));
            st_i32x4(&mut hi[x..], dot(DWT_HI, v));
        }
        return n;
    }
    let (r, s) = (vdupq_n_s64(rv), vdupq_n_s64(-(sv as i64)));
    for x in starts(n, 4) {
        let v = rows.map(|r| ld_i32x4(&r[x..]));
        st_i32x4(&mut lo[x..], fin64(dot4_64(DWT_LO, v), r, s));
        st_i32x4(&mut hi[x..], fin64(dot4_64(DWT_HI, v), r, s));
    }
    n
}

/// Scales 1-3 horizontal pass (same layout as [`dwt0_horiz`]).
#[allow(clippy::too_many_arguments)]
pub fn dwt123_horiz(
    cpu: CpuLevel,
    lo: &[i32],
    hi: &[i32],
    rh: i64,
    sh: u32,
    approx: &mut [i32],
    v: &mut [i32],
    h: &mut [i32],
    d: &mut [i32],
) -> usize {
    if cpu.has_neon() && sh < 64 {
        // SAFETY: the level proves NEON.
        return unsafe { dwt123_horiz_neon(lo, hi, rh, sh, approx, v, h, d) };
    }
    0
}

#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "neon")]
fn dwt123_horiz_neon(
    lo: &[i32],
    hi: &[i32],
    rh: i64,
    sh: u32,
    approx: &mut [i32],
    v: &mut [i32],
    h: &mut [i32],
    d: &mut [i32],
) -> usize {
    let (r, s) = (vdupq_n_s64(rh), vdupq_n_s64(-(sh as i64)));
    let taps = |x: &[i32], j: usize| {
        let a = ld2_i32x4(&x[2 * j..]);
        let b = ld2_i32x4(&x[2 * j + 2..]);
        [a.0, a.1, b.0, b.1]
    };
    let n = approx.len();
    if n < 4 {
        return 0;
    }
    for j in starts(n, 4) {
        let l = taps(lo, j);
        let hh = taps(hi, j);
        st_i32x4(&mut approx[j..], fin64(dot4_64(DWT_LO, l), r, s));
        st_i32x4(&mut v[j..], fin64(dot4_64(DWT_HI, l), r, s));
        st_i32x4(&mut h[j..], fin64(dot4_64(DWT_LO, hh), r, s));
        st_i32x4(&mut d[j..], fin64(dot4_64(DWT_HI, hh), r, s));
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Decoupling.

/// The angle test of 4 pixels from their f32-rounded dot product and squared magnitudes:
/// `dp >= 0 && dp * dp >= cos^2 * om * tm` in f64, each value `f32 as f64 / 4096` (the
/// division by a power of two is exact, so a multiplication by its inverse is the same).
#[inline]
#[target_feature(enable = "neon")]
fn angle4(dp: float32x4_t, om: float32x4_t, tm: float32x4_t) -> uint32x4_t {
    let scale = vdupq_n_f64(1.0 / 4096.0);
    let cos = vdupq_n_f64(COS_1DEG_SQ as f64);
    let half = |dp: float64x2_t, om: float64x2_t, tm: float64x2_t| {
        let (dp, om, tm) = (
            vmulq_f64(dp, scale),
            vmulq_f64(om, scale),
            vmulq_f64(tm, scale),
        );
        let pos = vcgezq_f64(dp);
        let ok = vcgeq_f64(vmulq_f64(dp, dp), vmulq_f64(vmulq_f64(cos, om), tm));
        vandq_u64(pos, ok)
    };
    let lo = half(
        vcvt_f64_f32(vget_low_f32(dp)),
        vcvt_f64_f32(vget_low_f32(om)),
        vcvt_f64_f32(vget_low_f32(tm)),
    );
    let hi = half(
        vcvt_high_f64_f32(dp),
        vcvt_high_f64_f32(om),
        vcvt_high_f64_f32(tm),
    );
    vmovn_high_u64(vmovn_u64(lo), hi)
}

/// Enhancement of `rst` where `cond` holds, towards the distorted `t`: `o > 0` ?
/// `min(rst * egl, t)` : `max(rst * egl, t)` in f64, truncated. FMIN/FMAX differ from the
/// scalar `if g < t { g } else { t }` only for NaNs and zeros of opposite signs, which cannot
/// occur (g and t are finite and t != 0 where it applies). With `egl == 1` the product is
/// `rst` itself and the integer min/max is the same.
#[inline]
#[target_feature(enable = "neon")]
fn enhance4(rst: int32x4_t, o: int32x4_t, t: int32x4_t, cond: uint32x4_t, egl: f64) -> int32x4_t {
    let pos = vcgtzq_s32(o);
    let en = if egl == 1.0 {
        vbslq_s32(pos, vminq_s32(rst, t), vmaxq_s32(rst, t))
    } else {
        let egl = vdupq_n_f64(egl);
        let half = |r: int64x2_t, t: int64x2_t, p: uint64x2_t| {
            let g = vmulq_f64(vcvtq_f64_s64(r), egl);
            let t = vcvtq_f64_s64(t);
            vcvtq_s64_f64(vbslq_f64(p, vminq_f64(g, t), vmaxq_f64(g, t)))
        };
        let p = vreinterpretq_s32_u32(pos);
        let lo = half(
            vmovl_s32(vget_low_s32(rst)),
            vmovl_s32(vget_low_s32(t)),
            vreinterpretq_u64_s64(vmovl_s32(vget_low_s32(p))),
        );
        let hi = half(
            vmovl_high_s32(rst),
            vmovl_high_s32(t),
            vreinterpretq_u64_s64(vmovl_high_s32(p)),
        );
        vmovn_high_s64(vmovn_s64(lo), hi)
    };
    vbslq_s32(cond, en, rst)
}

/// The gain of pixels from `kq`: 0 where o and t differ in sign or t is 0 (the scalar
/// quotient is <= 0 there), 32768 where o is 0.
#[inline]
#[target_feature(enable = "neon")]
fn gain_signs(kq: int32x4_t, o: int32x4_t, t: int32x4_t) -> int32x4_t {
    let drop = vorrq_u32(vcltzq_s32(veorq_s32(o, t)), vceqzq_s32(t));
    let k = vbicq_s32(kq, vreinterpretq_s32_u32(drop));
    vbslq_s32(vceqzq_s32(o), vdupq_n_s32(32768), k)
}

/// `angle && k > 0 && o != 0`.
#[inline]
#[target_feature(enable = "neon")]
fn enhance_cond(angle: uint32x4_t, k: int32x4_t, o: int32x4_t) -> uint32x4_t {
    vbicq_u32(vandq_u32(angle, vcgtzq_s32(k)), vceqzq_s32(o))
}

/// Enhances `rst` if any lane needs it.
#[inline]
#[target_feature(enable = "neon")]
fn maybe_enhance(
    rst: int32x4_t,
    o: int32x4_t,
    t: int32x4_t,
    angle: uint32x4_t,
    k: int32x4_t,
    egl: f64,
) -> int32x4_t {
    let cond = enhance_cond(angle, k, o);
    if vmaxvq_u32(cond) != 0 {
        enhance4(rst, o, t, cond, egl)
    } else {
        rst
    }
}

/// f32 of an i32 dot product of i16 pairs, where i32::MIN stands for +2^31 (the only value
/// that wraps: -32768 * -32768 twice).
#[inline]
#[target_feature(enable = "neon")]
fn cvt_wrapped(x: int32x4_t) -> float32x4_t {
    let f = vreinterpretq_u32_f32(vcvtq_f32_s32(x));
    let fix = vandq_u32(
        vceqq_s32(x, vdupq_n_s32(i32::MIN)),
        vdupq_n_u32(0x8000_0000),
    );
    vreinterpretq_f32_u32(veorq_u32(f, fix))
}

/// Scale-0 decoupling of a row (the CSF window's part of it).
pub fn decouple0(
    cpu: CpuLevel,
    o: [&[i16]; 3],
    t: [&[i16]; 3],
    egl: f64,
    r: [&mut [i16]; 3],
    a: [&mut [i16]; 3],
) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { decouple0_neon(o, t, egl, r, a) };
    }
    0
}

/// Restored coefficients of 4 scale-0 pixels (i32 lanes).
#[inline]
#[target_feature(enable = "neon")]
fn split0(
    lut: &[i32; 32769],
    o: int32x4_t,
    t: int32x4_t,
    angle: uint32x4_t,
    egl: f64,
) -> int32x4_t {
    let (ao, at) = (vabsq_s32(o), vabsq_s32(t));
    // With |t| <= |o| the product lut[|o|] * |t| is at most 2^30; with |t| > |o| it is at
    // least 2^30, whose gain clamps to 32768.
    let q = vmulq_s32(lookup(lut, ao), at);
    let k32768 = vdupq_n_s32(32768);
    let kq = vminq_s32(vshrq_n_s32::<15>(vaddq_s32(q, vdupq_n_s32(16384))), k32768);
    let kq = vbslq_s32(vcgtq_s32(at, ao), k32768, kq);
    let k = gain_signs(kq, o, t);
    let rst = vshrq_n_s32::<15>(vaddq_s32(vmulq_s32(k, o), vdupq_n_s32(16384)));
    maybe_enhance(rst, o, t, angle, k, egl)
}

#[target_feature(enable = "neon")]
fn decouple0_neon(
    o: [&[i16]; 3],
    t: [&[i16]; 3],
    egl: f64,
    r: [&mut [i16]; 3],
    a: [&mut [i16]; 3],
) -> usize {
    let lut = div_lookup();
    let n = o[0].len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let ov = o.map(|p| ld_i16x8(&p[j..]));
        let tv = t.map(|p| ld_i16x8(&p[j..]));
        let dot = |a: [int16x8_t; 2], b: [int16x8_t; 2]| {
            let lo = vmlal_s16(
                vmull_s16(vget_low_s16(a[0]), vget_low_s16(b[0])),
                vget_low_s16(a[1]),
                vget_low_s16(b[1]),
            );
            let hi = vmlal_high_s16(vmull_high_s16(a[0], b[0]), a[1], b[1]);
            (lo, hi)
        };
        let (oo, tt) = ([ov[0], ov[1]], [tv[0], tv[1]]);
        let (d0, d1) = dot(oo, tt);
        let (m0, m1) = dot(oo, oo);
        let (n0, n1) = dot(tt, tt);
        // Squared magnitudes are >= 0: |f32| undoes the wrap.
        let mag = |x| vabsq_f32(vcvtq_f32_s32(x));
        let angle0 = angle4(cvt_wrapped(d0), mag(m0), mag(n0));
        let angle1 = angle4(cvt_wrapped(d1), mag(m1), mag(n1));
        for b in 0..3 {
            let (ob, tb) = (ov[b], tv[b]);
            let r0 = split0(
                lut,
                vmovl_s16(vget_low_s16(ob)),
                vmovl_s16(vget_low_s16(tb)),
                angle0,
                egl,
            );
            let r1 = split0(lut, vmovl_high_s16(ob), vmovl_high_s16(tb), angle1, egl);
            // rst fits in i16; `(t - rst) as i16` is the wrapping i16 difference.
            let r16 = vmovn_high_s32(vmovn_s32(r0), r1);
            st_i16x8(&mut r[b][j..], r16);
            st_i16x8(&mut a[b][j..], vsubq_s16(tb, r16));
        }
    }
    n
}

/// `x as f32` of 2 i64 lanes (round to nearest, ties to even). |x| below 2^53 converts to f64
/// exactly, so the one rounding is f64 -> f32. Above, |x| >> 11 with the dropped bits ORed
/// into bit 0 (sticky) rounds the same way (the f32 rounding point is far above bit 11), then
/// scales back by 2^11 exactly.
#[inline]
#[target_feature(enable = "neon")]
fn i64_to_f32(x: int64x2_t) -> float32x2_t {
    // |x| as u64 (i64::MIN gives 2^63).
    let u = vreinterpretq_u64_s64(vabsq_s64(x));
    let small = vceqzq_u64(vshrq_n_u64::<53>(u));
    let sticky = vandq_u64(vtstq_u64(u, vdupq_n_u64(0x7ff)), vdupq_n_u64(1));
    let u = vbslq_u64(small, u, vorrq_u64(vshrq_n_u64::<11>(u), sticky));
    let f = vmulq_f64(
        vcvtq_f64_u64(u),
        vbslq_f64(small, vdupq_n_f64(1.0), vdupq_n_f64(2048.0)),
    );
    let f = vbslq_f64(vcltzq_s64(x), vnegq_f64(f), f);
    vcvt_f32_f64(f)
}

/// Scales 1-3 decoupling of a row: the angle test's int64 dot products exactly in i64 lanes,
/// rounded by [`i64_to_f32`].
pub fn decouple123(
    cpu: CpuLevel,
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { decouple123_neon(o, t, egl, r, a) };
    }
    0
}

/// `(lut[m] * |t| + 2^(14+s)) >> (15+s)`, clamped to 32768, of 2 lanes (u64).
#[inline]
#[target_feature(enable = "neon")]
fn gain64(l: uint32x2_t, at: uint32x2_t, s: uint32x2_t) -> uint32x2_t {
    let q = vmull_u32(l, at);
    let sh = vaddq_s64(vreinterpretq_s64_u64(vmovl_u32(s)), vdupq_n_s64(14));
    let q = vaddq_u64(q, vshlq_u64(vdupq_n_u64(1), sh));
    let q = vshlq_u64(q, vnegq_s64(vaddq_s64(sh, vdupq_n_s64(1))));
    let k = vdupq_n_u64(32768);
    vmovn_u64(vbslq_u64(vcgtq_u64(q, k), k, q))
}

#[target_feature(enable = "neon")]
fn decouple123_neon(
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) -> usize {
    let lut = div_lookup();
    let n = o[0].len();
    if n < 4 {
        return 0;
    }
    for j in starts(n, 4) {
        let ov = o.map(|p| ld_i32x4(&p[j..]));
        let tv = t.map(|p| ld_i32x4(&p[j..]));
        // Exact int64 sums (wrapping like the scalar code), rounded to f32 as `as` does.
        let dot = |x: int32x4_t, y: int32x4_t, z: int32x4_t, w: int32x4_t| {
            let lo = vmlal_s32(
                vmull_s32(vget_low_s32(x), vget_low_s32(y)),
                vget_low_s32(z),
                vget_low_s32(w),
            );
            let hi = vmlal_high_s32(vmull_high_s32(x, y), z, w);
            vcombine_f32(i64_to_f32(lo), i64_to_f32(hi))
        };
        let (oh, ovv, th, tvv) = (ov[0], ov[1], tv[0], tv[1]);
        let angle = angle4(
            dot(oh, th, ovv, tvv),
            dot(oh, oh, ovv, ovv),
            dot(th, th, tvv, tvv),
        );
        for b in 0..3 {
            let (ob, tb) = (ov[b], tv[b]);
            let ao = vreinterpretq_u32_s32(vabsq_s32(ob));
            let at = vreinterpretq_u32_s32(vabsq_s32(tb));
            // reduce15: |o| >= 2^15 is rounded to 15 significant bits, shift s = bits - 15.
            let small = vcltq_u32(ao, vdupq_n_u32(32768));
            let s = vbicq_u32(vsubq_u32(vdupq_n_u32(17), vclzq_u32(ao)), small);
            let si = vreinterpretq_s32_u32(s);
            // 1 << (s - 1), which is 0 for s = 0 (a right shift by 1).
            let rnd = vshlq_u32(vdupq_n_u32(1), vsubq_s32(si, vdupq_n_s32(1)));
            let m = vshlq_u32(vaddq_u32(ao, rnd), vnegq_s32(si));
            let l = vreinterpretq_u32_s32(lookup(lut, vreinterpretq_s32_u32(m)));
            let kq = vcombine_u32(
                gain64(vget_low_u32(l), vget_low_u32(at), vget_low_u32(s)),
                gain64(vget_high_u32(l), vget_high_u32(at), vget_high_u32(s)),
            );
            let k = gain_signs(vreinterpretq_s32_u32(kq), ob, tb);
            // ((k * o + 16384) >> 15) as i32.
            let rnd = vdupq_n_s64(16384);
            let lo = vaddq_s64(vmull_s32(vget_low_s32(k), vget_low_s32(ob)), rnd);
            let hi = vaddq_s64(vmull_high_s32(k, ob), rnd);
            let rst = vshrn_high_n_s64::<15>(vshrn_n_s64::<15>(lo), hi);
            let rst = maybe_enhance(rst, ob, tb, angle, k, egl);
            st_i32x4(&mut r[b][j..], rst);
            st_i32x4(&mut a[b][j..], vsubq_s32(tb, rst));
        }
    }
    n
}

// ---------------------------------------------------------------------------------------------
// CSF.

/// Scale-0 CSF of a row: `dst = ((w * s + round) >> shift) as i16` and
/// `flt = ((4369 * |dst| + 2048) >> 12) as i16`.
pub fn csf0(
    cpu: CpuLevel,
    src: &[i16],
    w: i32,
    round: i32,
    shift: u32,
    dst: &mut [i16],
    flt: &mut [i16],
) -> usize {
    if cpu.has_neon() && shift < 32 {
        // SAFETY: the level proves NEON.
        return unsafe { csf0_neon(src, w, round, shift, dst, flt) };
    }
    0
}

#[target_feature(enable = "neon")]
fn csf0_neon(
    src: &[i16],
    w: i32,
    round: i32,
    shift: u32,
    dst: &mut [i16],
    flt: &mut [i16],
) -> usize {
    let (round, sh) = (vdupq_n_s32(round), vdupq_n_s32(-(shift as i32)));
    let k2048 = vdupq_n_u32(2048);
    let n = src.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let s = ld_i16x8(&src[j..]);
        let v0 = vshlq_s32(
            vaddq_s32(vmulq_n_s32(vmovl_s16(vget_low_s16(s)), w), round),
            sh,
        );
        let v1 = vshlq_s32(vaddq_s32(vmulq_n_s32(vmovl_high_s16(s), w), round), sh);
        let v = vmovn_high_s32(vmovn_s32(v0), v1);
        st_i16x8(&mut dst[j..], v);
        // |-32768| wraps to 0x8000, read as unsigned 32768.
        let a = vreinterpretq_u16_s16(vabsq_s16(v));
        let f0 = vshrq_n_u32::<12>(vaddq_u32(vmull_n_u16(vget_low_u16(a), 4369), k2048));
        let f1 = vshrq_n_u32::<12>(vaddq_u32(vmull_high_n_u16(a, 4369), k2048));
        let f = vmovn_high_u32(vmovn_u32(f0), f1);
        st_i16x8(&mut flt[j..], vreinterpretq_s16_u16(f));
    }
    n
}

/// `((s * w + 2^27) >> 28) as i32` for 4 lanes, `w` an unsigned 32-bit weight.
#[inline]
#[target_feature(enable = "neon")]
fn q28(s: int32x4_t, w: u32) -> int32x4_t {
    let ws = w as i32;
    let mut lo = vmull_n_s32(vget_low_s32(s), ws);
    let mut hi = vmull_high_n_s32(s, ws);
    if ws < 0 {
        // The signed multiply read w as w - 2^32: add s * 2^32 back.
        lo = vaddq_s64(lo, vshlq_n_s64::<32>(vmovl_s32(vget_low_s32(s))));
        hi = vaddq_s64(hi, vshlq_n_s64::<32>(vmovl_high_s32(s)));
    }
    let r = vdupq_n_s64(1 << 27);
    vshrn_high_n_s64::<28>(vshrn_n_s64::<28>(vaddq_s64(lo, r)), vaddq_s64(hi, r))
}

/// `((c * |x| - 2^31) >> 32) as i32` for 4 lanes.
#[inline]
#[target_feature(enable = "neon")]
fn mul_hi_wrapped(x: int32x4_t, c: u32) -> int32x4_t {
    let a = vreinterpretq_u32_s32(vabsq_s32(x));
    let bias = vdupq_n_s64(i32::MIN as i64);
    let lo = vaddq_s64(vreinterpretq_s64_u64(vmull_n_u32(vget_low_u32(a), c)), bias);
    let hi = vaddq_s64(vreinterpretq_s64_u64(vmull_high_n_u32(a, c)), bias);
    vshrn_high_n_s64::<32>(vshrn_n_s64::<32>(lo), hi)
}

/// Scales 1-3 CSF of a row (Q32 weight `w`).
pub fn csf123(cpu: CpuLevel, src: &[i32], w: u32, dst: &mut [i32], flt: &mut [i32]) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { csf123_neon(src, w, dst, flt) };
    }
    0
}

#[target_feature(enable = "neon")]
fn csf123_neon(src: &[i32], w: u32, dst: &mut [i32], flt: &mut [i32]) -> usize {
    let n = src.len();
    if n < 4 {
        return 0;
    }
    for j in starts(n, 4) {
        let v = q28(ld_i32x4(&src[j..]), w);
        st_i32x4(&mut dst[j..], v);
        st_i32x4(&mut flt[j..], mul_hi_wrapped(v, 143165577));
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Denominator.

/// Scale-0 denominator of a row: `sum |c|^3` (u64).
pub fn den0(cpu: CpuLevel, row: &[i16]) -> (u64, usize) {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { den0_neon(row) };
    }
    (0, 0)
}

#[target_feature(enable = "neon")]
fn den0_neon(row: &[i16]) -> (u64, usize) {
    let mut acc = vdupq_n_u64(0);
    let n = row.len() / 8 * 8;
    for j in (0..n).step_by(8) {
        let a = vreinterpretq_u16_s16(vabsq_s16(ld_i16x8(&row[j..])));
        let (a0, a1) = (vmovl_u16(vget_low_u16(a)), vmovl_high_u16(a));
        let (s0, s1) = (vmulq_u32(a0, a0), vmulq_u32(a1, a1));
        acc = vmlal_u32(acc, vget_low_u32(s0), vget_low_u32(a0));
        acc = vmlal_high_u32(acc, s0, a0);
        acc = vmlal_u32(acc, vget_low_u32(s1), vget_low_u32(a1));
        acc = vmlal_high_u32(acc, s1, a1);
    }
    (vaddvq_u64(acc), n)
}

/// Scales 1-3 denominator of a row: `sum ((((m*m + 2^ssq) >> ssq) * m + add) >> cube)`.
pub fn den123(cpu: CpuLevel, row: &[i32], ssq: u32, add: u64, cube: u32) -> (u64, usize) {
    if cpu.has_neon() && ssq < 64 && cube < 64 {
        // SAFETY: the level proves NEON.
        return unsafe { den123_neon(row, ssq, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "neon")]
fn den123_neon(row: &[i32], ssq: u32, add: u64, cube: u32) -> (u64, usize) {
    let rsq = vdupq_n_u64(1u64 << ssq);
    let ssq = vdupq_n_s64(-(ssq as i64));
    let add = vdupq_n_u64(add);
    let cube = vdupq_n_s64(-(cube as i64));
    // The rounded square has up to 33 bits: its product with m takes two 32-bit multiplies.
    let one = |m: uint32x2_t| {
        let t = vshlq_u64(vaddq_u64(vmull_u32(m, m), rsq), ssq);
        let p = vaddq_u64(
            vmull_u32(vmovn_u64(t), m),
            vshlq_n_u64::<32>(vmull_u32(vshrn_n_u64::<32>(t), m)),
        );
        vshlq_u64(vaddq_u64(p, add), cube)
    };
    let mut acc = vdupq_n_u64(0);
    let n = row.len() / 4 * 4;
    for j in (0..n).step_by(4) {
        let m = vreinterpretq_u32_s32(vabsq_s32(ld_i32x4(&row[j..])));
        acc = vaddq_u64(acc, vaddq_u64(one(vget_low_u32(m)), one(vget_high_u32(m))));
    }
    (vaddvq_u64(acc), n)
}

// ---------------------------------------------------------------------------------------------
// Contrast masking.

/// Scale-0 column sums of a row: `col = sum_b fu + fm + fd`,
/// `cen = sum_b ((8738 * |dm| + 2048) >> 12) as i16 - fm`.
pub fn cm_cols0(
    cpu: CpuLevel,
    fu: [&[i16]; 3],
    fm: [&[i16]; 3],
    fd: [&[i16]; 3],
    dm: [&[i16]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { cm_cols0_neon(fu, fm, fd, dm, col, cen) };
    }
    0
}

#[target_feature(enable = "neon")]
fn cm_cols0_neon(
    fu: [&[i16]; 3],
    fm: [&[i16]; 3],
    fd: [&[i16]; 3],
    dm: [&[i16]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    let k2048 = vdupq_n_u32(2048);
    let n = col.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let (mut c0, mut c1) = (vdupq_n_s32(0), vdupq_n_s32(0));
        let (mut e0, mut e1) = (vdupq_n_s32(0), vdupq_n_s32(0));
        for b in 0..3 {
            let (u, m, d) = (
                ld_i16x8(&fu[b][j..]),
                ld_i16x8(&fm[b][j..]),
                ld_i16x8(&fd[b][j..]),
            );
            // i16 sums widened: u + d + m per lane in i32.
            c0 = vaddq_s32(c0, vaddl_s16(vget_low_s16(u), vget_low_s16(d)));
            c1 = vaddq_s32(c1, vaddl_high_s16(u, d));
            c0 = vaddw_s16(c0, vget_low_s16(m));
            c1 = vaddw_high_s16(c1, m);
            let a = vreinterpretq_u16_s16(vabsq_s16(ld_i16x8(&dm[b][j..])));
            let x0 = vshrq_n_u32::<12>(vaddq_u32(vmull_n_u16(vget_low_u16(a), 8738), k2048));
            let x1 = vshrq_n_u32::<12>(vaddq_u32(vmull_high_n_u16(a, 8738), k2048));
            // as i16 as i32, minus the middle flt value.
            let x = vreinterpretq_s16_u16(vmovn_high_u32(vmovn_u32(x0), x1));
            e0 = vaddq_s32(e0, vsubl_s16(vget_low_s16(x), vget_low_s16(m)));
            e1 = vaddq_s32(e1, vsubl_high_s16(x, m));
        }
        st_i32x4(&mut col[j..], c0);
        st_i32x4(&mut col[j + 4..], c1);
        st_i32x4(&mut cen[j..], e0);
        st_i32x4(&mut cen[j + 4..], e1);
    }
    n
}

/// Scales 1-3 column sums of a row (centre term `((286331153 * |dm| - 2^31) >> 32) as i32`).
pub fn cm_cols123(
    cpu: CpuLevel,
    fu: [&[i32]; 3],
    fm: [&[i32]; 3],
    fd: [&[i32]; 3],
    dm: [&[i32]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { cm_cols123_neon(fu, fm, fd, dm, col, cen) };
    }
    0
}

#[target_feature(enable = "neon")]
fn cm_cols123_neon(
    fu: [&[i32]; 3],
    fm: [&[i32]; 3],
    fd: [&[i32]; 3],
    dm: [&[i32]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    let n = col.len();
    if n < 4 {
        return 0;
    }
    for j in starts(n, 4) {
        let mut c = vdupq_n_s32(0);
        let mut e = vdupq_n_s32(0);
        for b in 0..3 {
            let m = ld_i32x4(&fm[b][j..]);
            let ud = vaddq_s32(ld_i32x4(&fu[b][j..]), ld_i32x4(&fd[b][j..]));
            c = vaddq_s32(c, vaddq_s32(ud, m));
            let x = mul_hi_wrapped(ld_i32x4(&dm[b][j..]), 286331153);
            e = vaddq_s32(e, vsubq_s32(x, m));
        }
        st_i32x4(&mut col[j..], c);
        st_i32x4(&mut cen[j..], e);
    }
    n
}

/// Masking thresholds: `thr[k] = col[k] + col[k+1] + col[k+2] + cen[k]` (`col` starts one
/// column left of `thr`).
pub fn cm_thr(cpu: CpuLevel, col: &[i32], cen: &[i32], thr: &mut [i32]) -> usize {
    if cpu.has_neon() {
        // SAFETY: the level proves NEON.
        return unsafe { cm_thr_neon(col, cen, thr) };
    }
    0
}

#[target_feature(enable = "neon")]
fn cm_thr_neon(col: &[i32], cen: &[i32], thr: &mut [i32]) -> usize {
    let n = thr.len();
    if n < 4 {
        return 0;
    }
    for j in starts(n, 4) {
        let a = vaddq_s32(ld_i32x4(&col[j..]), ld_i32x4(&col[j + 1..]));
        let b = vaddq_s32(ld_i32x4(&col[j + 2..]), ld_i32x4(&cen[j..]));
        st_i32x4(&mut thr[j..], vaddq_s32(a, b));
    }
    n
}

/// `(((x * x + rsq) >> sq) as i32 * x + add) >> cube`, summed, for 2 lanes of x >= 0.
#[inline]
#[target_feature(enable = "neon")]
fn cube2(
    x: int32x2_t,
    rsq: int64x2_t,
    sq: int64x2_t,
    add: int64x2_t,
    cube: int64x2_t,
) -> int64x2_t {
    let xsq = vmovn_s64(vshlq_s64(vaddq_s64(vmull_s32(x, x), rsq), sq));
    vshlq_s64(vaddq_s64(vmull_s32(xsq, x), add), cube)
}

/// Scale-0 masked sum of a row: `x = max(|s * irf| - (thr << sub), 0)`,
/// `xsq = ((x * x + 2^(sq-1)) >> sq) as i32`, sum of `(xsq * x + add) >> cube`.
/// `k` is `[irf, sub, sq]`.
pub fn cm_pix0(
    cpu: CpuLevel,
    src: &[i16],
    thr: &[i32],
    k: [i32; 3],
    add: i64,
    cube: u32,
) -> (i64, usize) {
    if cpu.has_neon() && cube < 64 && (1..63).contains(&k[2]) && (0..32).contains(&k[1]) {
        // SAFETY: the level proves NEON.
        return unsafe { cm_pix0_neon(src, thr, k, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "neon")]
fn cm_pix0_neon(src: &[i16], thr: &[i32], k: [i32; 3], add: i64, cube: u32) -> (i64, usize) {
    let sub = vdupq_n_s32(k[1]);
    let rsq = vdupq_n_s64(1i64 << (k[2] - 1));
    let sq = vdupq_n_s64(-(k[2] as i64));
    let add = vdupq_n_s64(add);
    let cube = vdupq_n_s64(-(cube as i64));
    let zero = vdupq_n_s32(0);
    let one = |s: int32x4_t, t: int32x4_t| {
        let x = vabsq_s32(vmulq_n_s32(s, k[0]));
        let x = vmaxq_s32(vsubq_s32(x, vshlq_s32(t, sub)), zero);
        vaddq_s64(
            cube2(vget_low_s32(x), rsq, sq, add, cube),
            cube2(vget_high_s32(x), rsq, sq, add, cube),
        )
    };
    let mut acc = vdupq_n_s64(0);
    let n = src.len() / 8 * 8;
    for j in (0..n).step_by(8) {
        let s = ld_i16x8(&src[j..]);
        acc = vaddq_s64(acc, one(vmovl_s16(vget_low_s16(s)), ld_i32x4(&thr[j..])));
        acc = vaddq_s64(acc, one(vmovl_high_s16(s), ld_i32x4(&thr[j + 4..])));
    }
    (vaddvq_s64(acc), n)
}

/// Scales 1-3 masked sum of a row: `x = ((s * irf + 2^27) >> 28) as i32`,
/// `x = max(|x| - thr, 0)`, `xsq = ((x * x + 2^29) >> 30) as i32`, sum of
/// `(xsq * x + add) >> cube`.
pub fn cm_pix123(
    cpu: CpuLevel,
    src: &[i32],
    thr: &[i32],
    irf: u32,
    add: i64,
    cube: u32,
) -> (i64, usize) {
    if cpu.has_neon() && cube < 64 {
        // SAFETY: the level proves NEON.
        return unsafe { cm_pix123_neon(src, thr, irf, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "neon")]
fn cm_pix123_neon(src: &[i32], thr: &[i32], irf: u32, add: i64, cube: u32) -> (i64, usize) {
    let rsq = vdupq_n_s64(1 << 29);
    let sq = vdupq_n_s64(-30);
    let add = vdupq_n_s64(add);
    let cube = vdupq_n_s64(-(cube as i64));
    let zero = vdupq_n_s32(0);
    let mut acc = vdupq_n_s64(0);
    let n = src.len() / 4 * 4;
    for j in (0..n).step_by(4) {
        let x = q28(ld_i32x4(&src[j..]), irf);
        let x = vmaxq_s32(vsubq_s32(vabsq_s32(x), ld_i32x4(&thr[j..])), zero);
        acc = vaddq_s64(acc, cube2(vget_low_s32(x), rsq, sq, add, cube));
        acc = vaddq_s64(acc, cube2(vget_high_s32(x), rsq, sq, add, cube));
    }
    (vaddvq_s64(acc), n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::checkasm::Rng;

    /// See x86.rs: ties of the f32 grid at every magnitude, neighbours, extremes, random.
    fn rounding_cases() -> Vec<i64> {
        let mut v = vec![
            0,
            1,
            -1,
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            1 << 53,
            (1 << 53) + 1,
        ];
        for bits in 24..63 {
            let ulp = 1i64 << (bits - 23);
            // Ties between an even and an odd multiple of the ulp, in both orders.
            for m in [4, 5] {
                let base = (1i64 << bits) + ulp * m;
                for d in [0, 1, -1, 2, -2, 1 << 10, (1 << 11) - 1, 1 << 11] {
                    let tie = base + ulp / 2;
                    for x in [tie + d, tie - d, base + d, -(tie + d), -(base - d)] {
                        v.push(x);
                    }
                }
            }
        }
        let mut rng = Rng::new(9);
        for _ in 0..4000 {
            let x = ((rng.next_u32() as u64) << 32 | rng.next_u32() as u64) as i64;
            v.push(x >> rng.below(64));
        }
        v
    }

    #[target_feature(enable = "neon")]
    fn convert2(x: [i64; 2]) -> [f32; 2] {
        let f = i64_to_f32(vcombine_s64(vdup_n_s64(x[0]), vdup_n_s64(x[1])));
        [vget_lane_f32::<0>(f), vget_lane_f32::<1>(f)]
    }

    #[test]
    fn i64_to_f32_rounds_like_as() {
        if !CpuLevel::detect().has_neon() {
            return;
        }
        for c in rounding_cases().chunks(2) {
            let mut x = [0i64; 2];
            x[..c.len()].copy_from_slice(c);
            // SAFETY: NEON was detected above.
            let got = unsafe { convert2(x) };
            for (g, v) in got.iter().zip(x) {
                assert_eq!(g.to_bits(), (v as f32).to_bits(), "{v}");
            }
        }
    }
}
