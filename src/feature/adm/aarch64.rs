//! NEON operations of ADM's row kernels (`kernels.rs`), methods of the token [`Neon`].
//!
//! NEON widens natively (`vmull`/`vmlal` to 32 or 64 bits) and narrows by truncation
//! (`vmovn`, `vshrn`), which are the scalar `as` casts; its shifts by a negative vector count
//! are right shifts. So the DWT's taps are widening multiply-accumulates by a scalar, in i32
//! at scale 0 and in i64 at scales 1-3 (no splitting as on x86), and a horizontal pass reads
//! its even and odd samples with `vld2`. Halves of a register are its low and high lanes, and
//! 64-bit lanes (`Ops::D`) the products of the low and of the high two 32-bit lanes. NEON has
//! no gather: table lookups are scalar.

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::kernels::Ops;
use super::tables::COS_1DEG_SQ;
use crate::simd::CpuLevel;

/// Proof that the CPU runs NEON (and that the level allows it): only made after
/// `CpuLevel::has_neon()`.
#[derive(Clone, Copy)]
pub(super) struct Neon(());

/// Calls intrinsics of the token's instruction sets on values.
macro_rules! isa {
    ($e:expr) => {{
        // SAFETY: a token (`self`) exists only on a CPU that runs NEON.
        unsafe { $e }
    }};
}

/// Reinterpretations: the lanes' bits unchanged.
#[inline(always)]
fn u32s(v: int32x4_t) -> uint32x4_t {
    // SAFETY: a no-op on the register, on a CPU with NEON (every caller holds a token).
    unsafe { vreinterpretq_u32_s32(v) }
}

#[inline(always)]
fn s32s(v: uint32x4_t) -> int32x4_t {
    // SAFETY: as `u32s`.
    unsafe { vreinterpretq_s32_u32(v) }
}

#[inline(always)]
fn u64s(v: int64x2_t) -> uint64x2_t {
    // SAFETY: as `u32s`.
    unsafe { vreinterpretq_u64_s64(v) }
}

#[inline(always)]
fn s64s(v: uint64x2_t) -> int64x2_t {
    // SAFETY: as `u32s`.
    unsafe { vreinterpretq_s64_u64(v) }
}

impl Neon {
    /// The token, when `cpu` runs NEON.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_neon().then_some(Neon(()))
    }

    /// `x as f32` of 2 i64 lanes (round to nearest, ties to even). |x| below 2^53 converts to
    /// f64 exactly, so the one rounding is f64 -> f32. Above, |x| >> 11 with the dropped bits
    /// ORed into bit 0 (sticky) rounds the same way (the f32 rounding point is far above bit
    /// 11), then scales back by 2^11 exactly.
    #[inline(always)]
    fn i64_to_f32(self, x: int64x2_t) -> float32x2_t {
        isa!({
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
        })
    }

    #[cfg(test)]
    fn ld64(self, s: &[i64; 2]) -> int64x2_t {
        // SAFETY: `s` holds 2 values; NEON runs (the token).
        unsafe { vld1q_s64(s.as_ptr()) }
    }

    /// `x * y + z * w` in wrapping i64, rounded to f32 as `as` does (bits).
    #[inline(always)]
    fn dot2_i64(self, x: int32x4_t, y: int32x4_t, z: int32x4_t, w: int32x4_t) -> int32x4_t {
        isa!({
            let d = self.add64(self.mulw_i32(x, y), self.mulw_i32(z, w));
            let f = vcombine_f32(self.i64_to_f32(d[0]), self.i64_to_f32(d[1]));
            vreinterpretq_s32_f32(f)
        })
    }

    /// The angle test of 2 lanes of f64 values (see [`Ops::angle`]).
    #[inline(always)]
    fn angle2(self, dp: float64x2_t, om: float64x2_t, tm: float64x2_t) -> uint64x2_t {
        isa!({
            let scale = vdupq_n_f64(1.0 / 4096.0);
            let (dp, om, tm) = (
                vmulq_f64(dp, scale),
                vmulq_f64(om, scale),
                vmulq_f64(tm, scale),
            );
            let rhs = vmulq_f64(vmulq_f64(vdupq_n_f64(COS_1DEG_SQ as f64), om), tm);
            vandq_u64(vcgezq_f64(dp), vcgeq_f64(vmulq_f64(dp, dp), rhs))
        })
    }

    /// [`Ops::enhance_f64`] of 2 lanes.
    #[inline(always)]
    fn enhance2(self, r: int64x2_t, t: int64x2_t, p: int64x2_t, egl: f64) -> int64x2_t {
        isa!({
            let g = vmulq_f64(vcvtq_f64_s64(r), vdupq_n_f64(egl));
            let t = vcvtq_f64_s64(t);
            let p = vreinterpretq_u64_s64(p);
            vcvtq_s64_f64(vbslq_f64(p, vminq_f64(g, t), vmaxq_f64(g, t)))
        })
    }

    /// `Σ t_k·x_k` in i32 of the low and the high halves of four rows of i16 lanes.
    #[inline(always)]
    fn dot4_16(self, x: [int32x4_t; 4], t: [i16; 4]) -> [int32x4_t; 2] {
        isa!({
            let x = [
                vreinterpretq_s16_s32(x[0]),
                vreinterpretq_s16_s32(x[1]),
                vreinterpretq_s16_s32(x[2]),
                vreinterpretq_s16_s32(x[3]),
            ];
            let lo = vmull_n_s16(vget_low_s16(x[0]), t[0]);
            let lo = vmlal_n_s16(lo, vget_low_s16(x[1]), t[1]);
            let lo = vmlal_n_s16(lo, vget_low_s16(x[2]), t[2]);
            let lo = vmlal_n_s16(lo, vget_low_s16(x[3]), t[3]);
            let hi = vmull_high_n_s16(x[0], t[0]);
            let hi = vmlal_high_n_s16(hi, x[1], t[1]);
            let hi = vmlal_high_n_s16(hi, x[2], t[2]);
            let hi = vmlal_high_n_s16(hi, x[3], t[3]);
            [lo, hi]
        })
    }

    /// The low 64 bits of `a * b`, `a` below 2^64 and `b` below 2^32.
    #[inline(always)]
    fn mul64x32(self, a: int64x2_t, b: uint32x2_t) -> int64x2_t {
        isa!({
            let a = vreinterpretq_u64_s64(a);
            let lo = vmull_u32(vmovn_u64(a), b);
            let hi = vmull_u32(vshrn_n_u64::<32>(a), b);
            vreinterpretq_s64_u64(vaddq_u64(lo, vshlq_n_u64::<32>(hi)))
        })
    }
}

/// `f()` with NEON enabled (`Ops::run`).
#[target_feature(enable = "neon")]
#[inline]
fn with_neon<R>(f: impl FnOnce() -> R) -> R {
    f()
}

impl Ops for Neon {
    type V = int32x4_t;
    type H = int16x4_t;
    type D = [int64x2_t; 2];
    const L: usize = 4;

    #[inline(always)]
    fn run<R>(self, f: impl FnOnce() -> R) -> R {
        // SAFETY: a `Neon` exists only on a CPU that runs NEON.
        unsafe { with_neon(f) }
    }

    #[inline(always)]
    fn ld32(self, s: &[i32]) -> int32x4_t {
        let s = &s[..4];
        // SAFETY: `s` holds 4 values.
        unsafe { vld1q_s32(s.as_ptr()) }
    }
    #[inline(always)]
    fn st32(self, d: &mut [i32], v: int32x4_t) {
        let d = &mut d[..4];
        // SAFETY: `d` holds 4 values.
        unsafe { vst1q_s32(d.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn ld16(self, s: &[i16]) -> int32x4_t {
        let s = &s[..8];
        // SAFETY: `s` holds 8 values; NEON runs (the token).
        unsafe { vreinterpretq_s32_s16(vld1q_s16(s.as_ptr())) }
    }
    #[inline(always)]
    fn st16(self, d: &mut [i16], v: int32x4_t) {
        let d = &mut d[..8];
        // SAFETY: `d` holds 8 values; NEON runs (the token).
        unsafe { vst1q_s16(d.as_mut_ptr(), vreinterpretq_s16_s32(v)) }
    }
    #[inline(always)]
    fn ld16h(self, s: &[i16]) -> int16x4_t {
        let s = &s[..4];
        // SAFETY: `s` holds 4 values.
        unsafe { vld1_s16(s.as_ptr()) }
    }
    #[inline(always)]
    fn st16h(self, d: &mut [i16], v: int16x4_t) {
        let d = &mut d[..4];
        // SAFETY: `d` holds 4 values.
        unsafe { vst1_s16(d.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn ld_u8(self, s: &[u8]) -> int32x4_t {
        let s = &s[..8];
        // SAFETY: `s` holds 8 bytes; NEON runs (the token).
        unsafe { vreinterpretq_s32_u16(vmovl_u8(vld1_u8(s.as_ptr()))) }
    }
    #[inline(always)]
    fn ld_u16(self, s: &[u16]) -> int32x4_t {
        let s = &s[..8];
        // SAFETY: `s` holds 8 values; NEON runs (the token).
        unsafe { vreinterpretq_s32_u16(vld1q_u16(s.as_ptr())) }
    }

    #[inline(always)]
    fn zero(self) -> int32x4_t {
        isa!(vdupq_n_s32(0))
    }
    #[inline(always)]
    fn splat32(self, x: i32) -> int32x4_t {
        isa!(vdupq_n_s32(x))
    }
    #[inline(always)]
    fn splat16(self, x: i16) -> int32x4_t {
        isa!(vreinterpretq_s32_s16(vdupq_n_s16(x)))
    }
    #[inline(always)]
    fn add32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vaddq_s32(a, b))
    }
    #[inline(always)]
    fn sub32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vsubq_s32(a, b))
    }
    #[inline(always)]
    fn mullo32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vmulq_s32(a, b))
    }
    #[inline(always)]
    fn and(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vandq_s32(a, b))
    }
    #[inline(always)]
    fn or(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vorrq_s32(a, b))
    }
    #[inline(always)]
    fn xor(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(veorq_s32(a, b))
    }
    #[inline(always)]
    fn andnot(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vbicq_s32(b, a))
    }
    /// `ABS`, not the saturating `SQABS`.
    #[inline(always)]
    fn abs32(self, a: int32x4_t) -> int32x4_t {
        isa!(vabsq_s32(a))
    }
    #[inline(always)]
    fn min32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vminq_s32(a, b))
    }
    #[inline(always)]
    fn max32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vmaxq_s32(a, b))
    }
    #[inline(always)]
    fn cmpgt32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(s32s(vcgtq_s32(a, b)))
    }
    #[inline(always)]
    fn cmpeq32(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(s32s(vceqq_s32(a, b)))
    }
    #[inline(always)]
    fn select(self, m: int32x4_t, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        isa!(vbslq_s32(u32s(m), a, b))
    }
    #[inline(always)]
    fn any(self, m: int32x4_t) -> bool {
        isa!(vmaxvq_u32(u32s(m)) != 0)
    }
    #[inline(always)]
    fn sra32(self, a: int32x4_t, n: u32) -> int32x4_t {
        isa!(vshlq_s32(a, vdupq_n_s32(-(n as i32))))
    }
    #[inline(always)]
    fn sll32(self, a: int32x4_t, n: u32) -> int32x4_t {
        isa!(vshlq_s32(a, vdupq_n_s32(n as i32)))
    }
    /// A count of -1 shifts right by one, which is 0 for the kernels' `1 << (s - 1)`.
    #[inline(always)]
    fn sllv32(self, a: int32x4_t, n: int32x4_t) -> int32x4_t {
        isa!(s32s(vshlq_u32(u32s(a), n)))
    }
    #[inline(always)]
    fn srlv32(self, a: int32x4_t, n: int32x4_t) -> int32x4_t {
        isa!(s32s(vshlq_u32(u32s(a), vnegq_s32(n))))
    }

    #[inline(always)]
    fn abs16(self, a: int32x4_t) -> int32x4_t {
        isa!(vreinterpretq_s32_s16(vabsq_s16(vreinterpretq_s16_s32(a))))
    }
    #[inline(always)]
    fn widen(self, a: int16x4_t) -> int32x4_t {
        isa!(vmovl_s16(a))
    }
    #[inline(always)]
    fn narrow(self, a: int32x4_t) -> int16x4_t {
        isa!(vmovn_s32(a))
    }
    #[inline(always)]
    fn sub16h(self, a: int16x4_t, b: int16x4_t) -> int16x4_t {
        isa!(vsub_s16(a, b))
    }
    #[inline(always)]
    fn widen16(self, a: int32x4_t) -> [int32x4_t; 2] {
        isa!({
            let a = vreinterpretq_s16_s32(a);
            [vmovl_s16(vget_low_s16(a)), vmovl_high_s16(a)]
        })
    }
    #[inline(always)]
    fn widen_u16(self, a: int32x4_t) -> [int32x4_t; 2] {
        isa!({
            let a = vreinterpretq_u16_s32(a);
            [s32s(vmovl_u16(vget_low_u16(a))), s32s(vmovl_high_u16(a))]
        })
    }
    #[inline(always)]
    fn narrow16(self, a: [int32x4_t; 2]) -> int32x4_t {
        isa!(vreinterpretq_s32_s16(vmovn_high_s32(vmovn_s32(a[0]), a[1])))
    }

    #[inline(always)]
    fn dot16(self, x: [int32x4_t; 4], t: [i16; 4]) -> [int32x4_t; 2] {
        self.dot4_16(x, t)
    }
    #[inline(always)]
    fn narrow_dot(self, a: [int32x4_t; 2], _fits: bool) -> int32x4_t {
        self.narrow16(a)
    }
    /// The even and odd samples from 0 and from 2.
    #[inline(always)]
    fn hload16(self, x: &[i16]) -> [int32x4_t; 4] {
        let (a, b) = (&x[..16], &x[2..18]);
        // SAFETY: `a` and `b` hold 16 values.
        let (a, b) = unsafe { (vld2q_s16(a.as_ptr()), vld2q_s16(b.as_ptr())) };
        isa!([
            vreinterpretq_s32_s16(a.0),
            vreinterpretq_s32_s16(a.1),
            vreinterpretq_s32_s16(b.0),
            vreinterpretq_s32_s16(b.1),
        ])
    }
    #[inline(always)]
    fn hdot16(self, x: [int32x4_t; 4], t: [i16; 4]) -> [int32x4_t; 2] {
        self.dot4_16(x, t)
    }
    #[inline(always)]
    fn pairs64(self, x: [int32x4_t; 4]) -> [int32x4_t; 4] {
        x
    }
    /// The even and odd samples from 0 and from 2.
    #[inline(always)]
    fn hpairs64(self, x: &[i32]) -> [int32x4_t; 4] {
        let (a, b) = (&x[..8], &x[2..10]);
        // SAFETY: `a` and `b` hold 8 values.
        let (a, b) = unsafe { (vld2q_s32(a.as_ptr()), vld2q_s32(b.as_ptr())) };
        [a.0, a.1, b.0, b.1]
    }
    /// In i64 lanes: any rounding and shift.
    #[inline(always)]
    fn dot64(self, p: [int32x4_t; 4], t: [i32; 4], r: i64, s: u32) -> int32x4_t {
        isa!({
            let lo = vmull_n_s32(vget_low_s32(p[0]), t[0]);
            let lo = vmlal_n_s32(lo, vget_low_s32(p[1]), t[1]);
            let lo = vmlal_n_s32(lo, vget_low_s32(p[2]), t[2]);
            let lo = vmlal_n_s32(lo, vget_low_s32(p[3]), t[3]);
            let hi = vmull_high_n_s32(p[0], t[0]);
            let hi = vmlal_high_n_s32(hi, p[1], t[1]);
            let hi = vmlal_high_n_s32(hi, p[2], t[2]);
            let hi = vmlal_high_n_s32(hi, p[3], t[3]);
            let (r, s) = (vdupq_n_s64(r), vdupq_n_s64(-(s as i64)));
            let lo = vshlq_s64(vaddq_s64(lo, r), s);
            let hi = vshlq_s64(vaddq_s64(hi, r), s);
            vmovn_high_s64(vmovn_s64(lo), hi)
        })
    }

    /// Indices are clamped (and bounds-checked).
    #[inline(always)]
    fn lut(self, lut: &[i32; 32769], idx: int32x4_t) -> int32x4_t {
        let mut i = [0u32; 4];
        // SAFETY: `i` holds 4 values; NEON runs (the token).
        unsafe { vst1q_u32(i.as_mut_ptr(), u32s(idx)) };
        let v = i.map(|k| lut[k.min(32768) as usize]);
        self.ld32(&v)
    }
    #[inline(always)]
    fn dots16(self, o: [int16x4_t; 2], t: [int16x4_t; 2]) -> [int32x4_t; 3] {
        isa!({
            [
                vmlal_s16(vmull_s16(o[0], t[0]), o[1], t[1]),
                vmlal_s16(vmull_s16(o[0], o[0]), o[1], o[1]),
                vmlal_s16(vmull_s16(t[0], t[0]), t[1], t[1]),
            ]
        })
    }
    #[inline(always)]
    fn dots32(self, o: [int32x4_t; 2], t: [int32x4_t; 2]) -> [int32x4_t; 3] {
        [
            self.dot2_i64(o[0], t[0], o[1], t[1]),
            self.dot2_i64(o[0], o[0], o[1], o[1]),
            self.dot2_i64(t[0], t[0], t[1], t[1]),
        ]
    }
    #[inline(always)]
    fn cvt_f32(self, a: int32x4_t) -> int32x4_t {
        isa!(vreinterpretq_s32_f32(vcvtq_f32_s32(a)))
    }
    /// The division by 4096 is by a power of two, so a multiplication by its inverse is the
    /// same.
    #[inline(always)]
    fn angle(self, dp: int32x4_t, om: int32x4_t, tm: int32x4_t) -> int32x4_t {
        isa!({
            let (dp, om, tm) = (
                vreinterpretq_f32_s32(dp),
                vreinterpretq_f32_s32(om),
                vreinterpretq_f32_s32(tm),
            );
            let lo = self.angle2(
                vcvt_f64_f32(vget_low_f32(dp)),
                vcvt_f64_f32(vget_low_f32(om)),
                vcvt_f64_f32(vget_low_f32(tm)),
            );
            let hi = self.angle2(
                vcvt_high_f64_f32(dp),
                vcvt_high_f64_f32(om),
                vcvt_high_f64_f32(tm),
            );
            s32s(vmovn_high_u64(vmovn_u64(lo), hi))
        })
    }
    /// FMIN/FMAX differ from the scalar `if g < t { g } else { t }` only for NaNs and zeros
    /// of opposite signs, which cannot occur (g and t are finite and t != 0 where it
    /// applies). The result lies between 0 and t, so the saturating conversion is Rust's `as`.
    #[inline(always)]
    fn enhance_f64(self, rst: int32x4_t, t: int32x4_t, pos: int32x4_t, egl: f64) -> int32x4_t {
        isa!({
            let lo = self.enhance2(
                vmovl_s32(vget_low_s32(rst)),
                vmovl_s32(vget_low_s32(t)),
                vmovl_s32(vget_low_s32(pos)),
                egl,
            );
            let hi = self.enhance2(
                vmovl_high_s32(rst),
                vmovl_high_s32(t),
                vmovl_high_s32(pos),
                egl,
            );
            vmovn_high_s64(vmovn_s64(lo), hi)
        })
    }
    #[inline(always)]
    fn shift15(self, a: int32x4_t) -> int32x4_t {
        isa!({
            let a = u32s(a);
            let small = vcltq_u32(a, vdupq_n_u32(32768));
            s32s(vbicq_u32(vsubq_u32(vdupq_n_u32(17), vclzq_u32(a)), small))
        })
    }

    #[inline(always)]
    fn mulw_i32(self, a: int32x4_t, b: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            [
                vmull_s32(vget_low_s32(a), vget_low_s32(b)),
                vmull_high_s32(a, b),
            ]
        })
    }
    #[inline(always)]
    fn mulw_u32(self, a: int32x4_t, b: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            let (a, b) = (u32s(a), u32s(b));
            [
                s64s(vmull_u32(vget_low_u32(a), vget_low_u32(b))),
                s64s(vmull_high_u32(a, b)),
            ]
        })
    }
    #[inline(always)]
    fn shl32_64(self, a: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            [
                vshll_n_s32::<32>(vget_low_s32(a)),
                vshll_high_n_s32::<32>(a),
            ]
        })
    }
    #[inline(always)]
    fn widen_u32(self, a: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            let a = u32s(a);
            [s64s(vmovl_u32(vget_low_u32(a))), s64s(vmovl_high_u32(a))]
        })
    }
    #[inline(always)]
    fn splat64(self, x: i64) -> [int64x2_t; 2] {
        isa!([vdupq_n_s64(x); 2])
    }
    #[inline(always)]
    fn add64(self, a: [int64x2_t; 2], b: [int64x2_t; 2]) -> [int64x2_t; 2] {
        isa!([vaddq_s64(a[0], b[0]), vaddq_s64(a[1], b[1])])
    }
    #[inline(always)]
    fn srl64(self, a: [int64x2_t; 2], n: u32) -> [int64x2_t; 2] {
        isa!({
            let n = vdupq_n_s64(-(n as i64));
            [
                s64s(vshlq_u64(u64s(a[0]), n)),
                s64s(vshlq_u64(u64s(a[1]), n)),
            ]
        })
    }
    #[inline(always)]
    fn sllv64(self, a: [int64x2_t; 2], n: [int64x2_t; 2]) -> [int64x2_t; 2] {
        isa!({
            [
                s64s(vshlq_u64(u64s(a[0]), n[0])),
                s64s(vshlq_u64(u64s(a[1]), n[1])),
            ]
        })
    }
    #[inline(always)]
    fn srlv64(self, a: [int64x2_t; 2], n: [int64x2_t; 2]) -> [int64x2_t; 2] {
        isa!({
            [
                s64s(vshlq_u64(u64s(a[0]), vnegq_s64(n[0]))),
                s64s(vshlq_u64(u64s(a[1]), vnegq_s64(n[1]))),
            ]
        })
    }
    #[inline(always)]
    fn min_u64(self, a: [int64x2_t; 2], b: [int64x2_t; 2]) -> [int64x2_t; 2] {
        isa!({
            let (a0, a1, b0, b1) = (u64s(a[0]), u64s(a[1]), u64s(b[0]), u64s(b[1]));
            [
                s64s(vbslq_u64(vcgtq_u64(a0, b0), b0, a0)),
                s64s(vbslq_u64(vcgtq_u64(a1, b1), b1, a1)),
            ]
        })
    }
    #[inline(always)]
    fn narrow64(self, a: [int64x2_t; 2]) -> int32x4_t {
        isa!(vmovn_high_s64(vmovn_s64(a[0]), a[1]))
    }
    #[inline(always)]
    fn high64(self, a: [int64x2_t; 2]) -> int32x4_t {
        isa!(vshrn_high_n_s64::<32>(vshrn_n_s64::<32>(a[0]), a[1]))
    }
    #[inline(always)]
    fn mul_lo32(self, a: [int64x2_t; 2], b: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            [
                vmull_s32(vmovn_s64(a[0]), vget_low_s32(b)),
                vmull_s32(vmovn_s64(a[1]), vget_high_s32(b)),
            ]
        })
    }
    #[inline(always)]
    fn mul64_u32(self, a: [int64x2_t; 2], b: int32x4_t) -> [int64x2_t; 2] {
        isa!({
            let b = u32s(b);
            [
                self.mul64x32(a[0], vget_low_u32(b)),
                self.mul64x32(a[1], vget_high_u32(b)),
            ]
        })
    }
    #[inline(always)]
    fn sum64(self, a: [int64x2_t; 2]) -> u64 {
        isa!(vaddvq_u64(vaddq_u64(u64s(a[0]), u64s(a[1]))))
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::tests::rounding_cases;
    use super::*;

    #[test]
    fn i64_to_f32_rounds_like_as() {
        let Some(s) = Neon::new(CpuLevel::detect()) else {
            return;
        };
        for c in rounding_cases().chunks(2) {
            let mut x = [0i64; 2];
            x[..c.len()].copy_from_slice(c);
            let mut got = [0f32; 2];
            s.run(
                #[inline(always)]
                || {
                    let v = s.ld64(&x);
                    // SAFETY: `got` holds 2 values; NEON runs (the token).
                    unsafe { vst1_f32(got.as_mut_ptr(), s.i64_to_f32(v)) }
                },
            );
            for (g, v) in got.iter().zip(x) {
                assert_eq!(g.to_bits(), (v as f32).to_bits(), "{v}");
            }
        }
    }
}
