//! AVX2 and AVX-512 operations of ADM's row kernels (`kernels.rs`), methods of the tokens
//! [`Avx2`] and [`Avx512`]: one type, [`X86`], on 256-bit registers at both levels (512-bit
//! ones gained nothing measurable on Zen 4, which double-pumps them). The AVX-512 form differs
//! where AVX2 has to emulate: int64 -> f32 rounding (`vcvtqq2ps`), leading-zero counts, 64-bit
//! minima, selects (`vpternlogd`), and the f64 work of decoupling, done on 8 lanes at once.
//!
//! Filter taps are `vpmaddwd`, two taps per 32-bit lane: vertically on the rows of two taps
//! interleaved by `vpunpck[lh]wd` (whose sums `vpack[us]sdw` puts back in order), horizontally
//! on one unaligned load per pair of taps. The 32-bit sums of scales 1-3 are split in 16-bit
//! halves first (see [`Ops::dot64`]'s implementation). 64-bit lanes (`Ops::D`) are the products
//! of the even and of the odd 32-bit lanes (`vpmul[u]dq`), one register each.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::kernels::Ops;
use super::tables::COS_1DEG_SQ;
use crate::simd::CpuLevel;

/// Proof that the CPU runs AVX2 and, with `AVX512`, AVX-512 F, BW, DQ, CD and VL: only made
/// after `CpuLevel::has_avx2()` (`has_avx512()`).
#[derive(Clone, Copy)]
pub(super) struct X86<const AVX512: bool>(());

pub(super) type Avx2 = X86<false>;
pub(super) type Avx512 = X86<true>;

impl Avx2 {
    /// The token, when `cpu` runs AVX2.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx2().then_some(X86(()))
    }
}

impl Avx512 {
    /// The token, when `cpu` runs AVX-512.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx512().then_some(X86(()))
    }
}

/// `f()` with AVX2 enabled (`Ops::run`).
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
#[inline]
fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()` with AVX-512 enabled (`Ops::run`).
#[target_feature(
    enable = "avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx2,bmi1,bmi2,lzcnt,popcnt"
)]
#[inline]
fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Calls intrinsics of the token's instruction sets on values.
macro_rules! isa {
    ($e:expr) => {{
        // SAFETY: a token (`self`) exists only on a CPU that runs its instruction sets.
        unsafe { $e }
    }};
}

/// The first 32 bytes of `s`.
#[inline(always)]
fn load256<T: Copy>(s: &[T]) -> __m256i {
    let s = &s[..32 / size_of::<T>()];
    // SAFETY: `s` holds 32 bytes; unaligned load. Callers hold a token, so AVX runs.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

/// The first 16 bytes of `s`.
#[inline(always)]
fn load128<T: Copy>(s: &[T]) -> __m128i {
    let s = &s[..16 / size_of::<T>()];
    // SAFETY: `s` holds 16 bytes; unaligned load (SSE2, part of x86-64).
    unsafe { _mm_loadu_si128(s.as_ptr().cast()) }
}

#[inline(always)]
fn store256<T: Copy>(d: &mut [T], v: __m256i) {
    let d = &mut d[..32 / size_of::<T>()];
    // SAFETY: `d` holds 32 bytes; unaligned store. Callers hold a token, so AVX runs.
    unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), v) }
}

#[inline(always)]
fn store128<T: Copy>(d: &mut [T], v: __m128i) {
    let d = &mut d[..16 / size_of::<T>()];
    // SAFETY: `d` holds 16 bytes; unaligned store (SSE2, part of x86-64).
    unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), v) }
}

/// Two i16 taps as the (low, high) pair `vpmaddwd` multiplies neighbouring lanes with.
const fn pair(a: i16, b: i16) -> i32 {
    (a as u16 as i32) | ((b as i32) << 16)
}

impl<const AVX512: bool> X86<AVX512> {
    /// The odd 32-bit lanes copied to the even positions, where `vpmul[u]dq` reads. A shuffle,
    /// not a 64-bit shift, which LLVM would fold with the multiply into a full 64-bit one.
    #[inline(always)]
    fn odd(self, v: __m256i) -> __m256i {
        isa!(_mm256_shuffle_epi32::<0xf5>(v))
    }

    /// `madd(a, t0 t1) + madd(b, t2 t3)`.
    #[inline(always)]
    fn madd2(self, a: __m256i, b: __m256i, t: [i16; 4]) -> __m256i {
        let p01 = self.splat32(pair(t[0], t[1]));
        let p23 = self.splat32(pair(t[2], t[3]));
        isa!(_mm256_add_epi32(
            _mm256_madd_epi16(a, p01),
            _mm256_madd_epi16(b, p23)
        ))
    }

    /// `madd` pairs of two rows' (hi, lo - 32768) 16-bit halves: i32 lane c holds column c of
    /// `a` and `b`.
    #[inline(always)]
    fn row_pairs(self, a: __m256i, b: __m256i) -> [__m256i; 2] {
        isa!({
            let hi = _mm256_blend_epi16::<0xaa>(_mm256_srli_epi32::<16>(a), b);
            let lo = _mm256_blend_epi16::<0xaa>(a, _mm256_slli_epi32::<16>(b));
            [hi, self.xor(lo, _mm256_set1_epi16(i16::MIN))]
        })
    }

    /// `madd` pairs of neighbouring samples of 16 i32 (`x`, then `y`): i32 lane m holds
    /// samples 2m and 2m + 1, lanes in the order [0, 1, 4, 5 | 2, 3, 6, 7].
    #[inline(always)]
    fn adjacent_pairs(self, x: __m256i, y: __m256i) -> [__m256i; 2] {
        isa!({
            let hi = _mm256_packs_epi32(_mm256_srai_epi32::<16>(x), _mm256_srai_epi32::<16>(y));
            let m = _mm256_set1_epi32(0xffff);
            let lo = _mm256_packus_epi32(_mm256_and_si256(x, m), _mm256_and_si256(y, m));
            [hi, self.xor(lo, _mm256_set1_epi16(i16::MIN))]
        })
    }

    /// Exact i32 -> f64 -> (rounded) f32 of `x * y + z * w` for 4 lanes whose values are
    /// below 2^26 in magnitude (products below 2^52, sums below 2^53).
    #[inline(always)]
    fn dot2_f32(self, x: __m128i, y: __m128i, z: __m128i, w: __m128i) -> __m128 {
        isa!({
            let p = _mm256_mul_pd(_mm256_cvtepi32_pd(x), _mm256_cvtepi32_pd(y));
            let q = _mm256_mul_pd(_mm256_cvtepi32_pd(z), _mm256_cvtepi32_pd(w));
            _mm256_cvtpd_ps(_mm256_add_pd(p, q))
        })
    }

    /// `x as f32` of 4 i64 lanes (round to nearest, ties to even). |x| below 2^53 converts to
    /// f64 exactly, so the one rounding is f64 -> f32. Above, |x| >> 11 with the dropped bits
    /// ORed into bit 0 (sticky) rounds the same way (the f32 rounding point is far above bit
    /// 11), then scales back by 2^11 exactly.
    #[inline(always)]
    fn i64_to_f32(self, x: __m256i) -> __m128 {
        isa!({
            let zero = _mm256_setzero_si256();
            let neg = _mm256_cmpgt_epi64(zero, x);
            // |x| as u64 (i64::MIN gives 2^63).
            let u = _mm256_sub_epi64(_mm256_xor_si256(x, neg), neg);
            let small = _mm256_cmpeq_epi64(_mm256_srli_epi64::<53>(u), zero);
            let low = _mm256_and_si256(u, _mm256_set1_epi64x(0x7ff));
            let sticky = _mm256_andnot_si256(_mm256_cmpeq_epi64(low, zero), _mm256_set1_epi64x(1));
            let u = _mm256_blendv_epi8(
                _mm256_or_si256(_mm256_srli_epi64::<11>(u), sticky),
                u,
                small,
            );
            // u < 2^53 to f64 exactly: (2^84 + hi * 2^32) - (2^84 + 2^52) + (2^52 + lo), each
            // step exact.
            let lo = _mm256_or_si256(
                _mm256_and_si256(u, _mm256_set1_epi64x(0xffff_ffff)),
                _mm256_set1_epi64x(0x4330_0000_0000_0000),
            );
            let hi = _mm256_or_si256(
                _mm256_srli_epi64::<32>(u),
                _mm256_set1_epi64x(0x4530_0000_0000_0000),
            );
            let magic = _mm256_set1_pd(f64::from_bits(0x4530_0000_0010_0000));
            let f = _mm256_add_pd(
                _mm256_sub_pd(_mm256_castsi256_pd(hi), magic),
                _mm256_castsi256_pd(lo),
            );
            let scale = _mm256_blendv_pd(
                _mm256_set1_pd(2048.0),
                _mm256_set1_pd(1.0),
                _mm256_castsi256_pd(small),
            );
            let f = _mm256_mul_pd(f, scale);
            let sign = _mm256_and_si256(neg, _mm256_set1_epi64x(i64::MIN));
            _mm256_cvtpd_ps(_mm256_xor_pd(f, _mm256_castsi256_pd(sign)))
        })
    }

    /// The low and high 128-bit halves.
    #[inline(always)]
    fn halves(self, v: __m256i) -> [__m128i; 2] {
        isa!([_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v)])
    }

    /// [`Self::dot2_f32`] of 8 lanes (f32 bits).
    #[inline(always)]
    fn dot2_f32x8(self, x: __m256i, y: __m256i, z: __m256i, w: __m256i) -> __m256i {
        let (x, y) = (self.halves(x), self.halves(y));
        let (z, w) = (self.halves(z), self.halves(w));
        let lo = self.dot2_f32(x[0], y[0], z[0], w[0]);
        let hi = self.dot2_f32(x[1], y[1], z[1], w[1]);
        isa!(_mm256_castps_si256(_mm256_set_m128(hi, lo)))
    }

    /// `x * y + z * w` in wrapping i64, rounded to f32 as `as` does (bits).
    #[inline(always)]
    fn dot2_i64(self, x: __m256i, y: __m256i, z: __m256i, w: __m256i) -> __m256i {
        let d = self.add64(self.mulw_i32(x, y), self.mulw_i32(z, w));
        let (e, o) = (self.i64_to_f32(d[0]), self.i64_to_f32(d[1]));
        // Even and odd pixels back in order.
        isa!(_mm256_castps_si256(_mm256_set_m128(
            _mm_unpackhi_ps(e, o),
            _mm_unpacklo_ps(e, o)
        )))
    }

    /// [`Ops::dots32`] on AVX2: while every coefficient of the 8 pixels is below 2^26, in f64
    /// ([`Self::dot2_f32`]); otherwise in i64 lanes rounded by [`Self::i64_to_f32`].
    #[inline(always)]
    fn dots32_avx2(self, o: [__m256i; 2], t: [__m256i; 2]) -> [__m256i; 3] {
        let [oh, ov] = o;
        let [th, tv] = t;
        let mag = self.or(
            self.or(self.abs32(oh), self.abs32(ov)),
            self.or(self.abs32(th), self.abs32(tv)),
        );
        // abs(i32::MIN) keeps bit 31, so this also catches it.
        let large = self.splat32(!((1 << 26) - 1));
        if isa!(_mm256_testz_si256(mag, large)) != 0 {
            [
                self.dot2_f32x8(oh, th, ov, tv),
                self.dot2_f32x8(oh, oh, ov, ov),
                self.dot2_f32x8(th, th, tv, tv),
            ]
        } else {
            [
                self.dot2_i64(oh, th, ov, tv),
                self.dot2_i64(oh, oh, ov, ov),
                self.dot2_i64(th, th, tv, tv),
            ]
        }
    }

    /// `a * b + c * d` of 8 i64 lanes in wrapping i64, rounded by `vcvtqq2ps` (round to
    /// nearest even, as `as`). AVX-512 only.
    #[inline(always)]
    fn dot2_i64_512(self, a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m256i {
        isa!({
            let s = _mm512_add_epi64(_mm512_mul_epi32(a, b), _mm512_mul_epi32(c, d));
            _mm256_castps_si256(_mm512_cvtepi64_ps(s))
        })
    }

    /// The angle test of 4 pixels in f64 (see [`Ops::angle`]): all-ones 64-bit lanes where it
    /// holds.
    #[inline(always)]
    fn angle4(self, dp: __m128i, om: __m128i, tm: __m128i) -> __m256i {
        isa!({
            let scale = _mm256_set1_pd(1.0 / 4096.0);
            let dp = _mm256_mul_pd(_mm256_cvtps_pd(_mm_castsi128_ps(dp)), scale);
            let om = _mm256_mul_pd(_mm256_cvtps_pd(_mm_castsi128_ps(om)), scale);
            let tm = _mm256_mul_pd(_mm256_cvtps_pd(_mm_castsi128_ps(tm)), scale);
            let pos = _mm256_cmp_pd::<_CMP_GE_OQ>(dp, _mm256_setzero_pd());
            let rhs = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(COS_1DEG_SQ as f64), om), tm);
            let ok = _mm256_cmp_pd::<_CMP_GE_OQ>(_mm256_mul_pd(dp, dp), rhs);
            _mm256_castpd_si256(_mm256_and_pd(pos, ok))
        })
    }

    /// [`Ops::enhance_f64`] of 4 lanes.
    #[inline(always)]
    fn enhance4(self, r: __m128i, t: __m128i, p: __m128i, egl: f64) -> __m128i {
        isa!({
            let g = _mm256_mul_pd(_mm256_cvtepi32_pd(r), _mm256_set1_pd(egl));
            let t = _mm256_cvtepi32_pd(t);
            let p = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(p));
            _mm256_cvttpd_epi32(_mm256_blendv_pd(
                _mm256_max_pd(g, t),
                _mm256_min_pd(g, t),
                p,
            ))
        })
    }

    /// `a < b ? a : b` of 64-bit lanes below 2^63.
    #[inline(always)]
    fn min64(self, a: __m256i, b: __m256i) -> __m256i {
        if AVX512 {
            isa!(_mm256_min_epu64(a, b))
        } else {
            isa!(_mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)))
        }
    }

    /// The low 64 bits of `a * b`, `a` below 2^64 and `b` below 2^32 (even 32-bit lanes).
    #[inline(always)]
    fn mul64x32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_add_epi64(
            _mm256_mul_epu32(a, b),
            _mm256_slli_epi64::<32>(_mm256_mul_epu32(self.odd(a), b))
        ))
    }

    /// (h, v) pairs of 8 i16 pixels in i32 lanes, pixel order.
    #[inline(always)]
    fn hv_pairs(self, h: __m128i, v: __m128i) -> __m256i {
        isa!(_mm256_set_m128i(
            _mm_unpackhi_epi16(h, v),
            _mm_unpacklo_epi16(h, v)
        ))
    }
}

impl<const AVX512: bool> Ops for X86<AVX512> {
    type V = __m256i;
    type H = __m128i;
    type D = [__m256i; 2];
    const L: usize = 8;

    #[inline(always)]
    fn run<R>(self, f: impl FnOnce() -> R) -> R {
        if AVX512 {
            // SAFETY: an `X86<true>` exists only on a CPU that runs AVX-512 (F, BW, DQ, CD,
            // VL) and AVX2.
            unsafe { with_avx512(f) }
        } else {
            // SAFETY: an `X86` exists only on a CPU that runs AVX2.
            unsafe { with_avx2(f) }
        }
    }

    #[inline(always)]
    fn ld32(self, s: &[i32]) -> __m256i {
        load256(s)
    }
    #[inline(always)]
    fn st32(self, d: &mut [i32], v: __m256i) {
        store256(d, v)
    }
    #[inline(always)]
    fn ld16(self, s: &[i16]) -> __m256i {
        load256(s)
    }
    #[inline(always)]
    fn st16(self, d: &mut [i16], v: __m256i) {
        store256(d, v)
    }
    #[inline(always)]
    fn ld16h(self, s: &[i16]) -> __m128i {
        load128(s)
    }
    #[inline(always)]
    fn st16h(self, d: &mut [i16], v: __m128i) {
        store128(d, v)
    }
    #[inline(always)]
    fn ld_u8(self, s: &[u8]) -> __m256i {
        isa!(_mm256_cvtepu8_epi16(load128(s)))
    }
    #[inline(always)]
    fn ld_u16(self, s: &[u16]) -> __m256i {
        load256(s)
    }
    /// The picture is read once, from memory, and its rows are short streams for the hardware
    /// prefetchers: the rows of the next output row are fetched ahead.
    #[inline(always)]
    fn prefetch<T>(self, rows: &[&[T]; 2], x: usize) {
        for r in rows {
            if let Some(p) = r.get(x) {
                // SAFETY: a prefetch reads nothing a program can see and never faults.
                unsafe { _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast()) }
            }
        }
    }

    #[inline(always)]
    fn zero(self) -> __m256i {
        isa!(_mm256_setzero_si256())
    }
    #[inline(always)]
    fn splat32(self, x: i32) -> __m256i {
        isa!(_mm256_set1_epi32(x))
    }
    #[inline(always)]
    fn splat16(self, x: i16) -> __m256i {
        isa!(_mm256_set1_epi16(x))
    }
    #[inline(always)]
    fn add32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_add_epi32(a, b))
    }
    #[inline(always)]
    fn sub32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_sub_epi32(a, b))
    }
    #[inline(always)]
    fn mullo32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_mullo_epi32(a, b))
    }
    #[inline(always)]
    fn and(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_and_si256(a, b))
    }
    #[inline(always)]
    fn or(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_or_si256(a, b))
    }
    #[inline(always)]
    fn xor(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_xor_si256(a, b))
    }
    #[inline(always)]
    fn andnot(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_andnot_si256(a, b))
    }
    #[inline(always)]
    fn abs32(self, a: __m256i) -> __m256i {
        isa!(_mm256_abs_epi32(a))
    }
    #[inline(always)]
    fn min32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_min_epi32(a, b))
    }
    #[inline(always)]
    fn max32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_max_epi32(a, b))
    }
    #[inline(always)]
    fn cmpgt32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_cmpgt_epi32(a, b))
    }
    #[inline(always)]
    fn cmpeq32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_cmpeq_epi32(a, b))
    }
    /// AVX-512: a bitwise select (`vpternlogd`), which the all-ones or zero lanes of a mask
    /// make a lane select; LLVM would turn `vpblendvb` into a mask move and a masked move.
    #[inline(always)]
    fn select(self, m: __m256i, a: __m256i, b: __m256i) -> __m256i {
        if AVX512 {
            isa!(_mm256_ternarylogic_epi32::<0xca>(m, a, b))
        } else {
            isa!(_mm256_blendv_epi8(b, a, m))
        }
    }
    #[inline(always)]
    fn any(self, m: __m256i) -> bool {
        isa!(_mm256_testz_si256(m, m)) == 0
    }
    #[inline(always)]
    fn sra32(self, a: __m256i, n: u32) -> __m256i {
        isa!(_mm256_sra_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn sll32(self, a: __m256i, n: u32) -> __m256i {
        isa!(_mm256_sll_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn sllv32(self, a: __m256i, n: __m256i) -> __m256i {
        isa!(_mm256_sllv_epi32(a, n))
    }
    #[inline(always)]
    fn srlv32(self, a: __m256i, n: __m256i) -> __m256i {
        isa!(_mm256_srlv_epi32(a, n))
    }

    #[inline(always)]
    fn abs16(self, a: __m256i) -> __m256i {
        isa!(_mm256_abs_epi16(a))
    }
    #[inline(always)]
    fn widen(self, a: __m128i) -> __m256i {
        isa!(_mm256_cvtepi16_epi32(a))
    }
    #[inline(always)]
    fn narrow(self, a: __m256i) -> __m128i {
        isa!(_mm_packs_epi32(
            _mm256_castsi256_si128(a),
            _mm256_extracti128_si256::<1>(a)
        ))
    }
    #[inline(always)]
    fn sub16h(self, a: __m128i, b: __m128i) -> __m128i {
        isa!(_mm_sub_epi16(a, b))
    }
    #[inline(always)]
    fn widen16(self, a: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_cvtepi16_epi32(_mm256_castsi256_si128(a)),
            _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(a)),
        ])
    }
    #[inline(always)]
    fn widen_u16(self, a: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)),
            _mm256_cvtepu16_epi32(_mm256_extracti128_si256::<1>(a)),
        ])
    }
    #[inline(always)]
    fn narrow16(self, a: [__m256i; 2]) -> __m256i {
        isa!(_mm256_permute4x64_epi64::<0xd8>(self.narrow_dot(a, false)))
    }
    #[inline(always)]
    fn pack16(self, a: [__m256i; 2]) -> __m256i {
        isa!(_mm256_permute4x64_epi64::<0xd8>(self.narrow_dot(a, true)))
    }

    #[inline(always)]
    fn dot16(self, x: [__m256i; 4], t: [i16; 4]) -> [__m256i; 2] {
        isa!({
            let (ab0, ab1) = (
                _mm256_unpacklo_epi16(x[0], x[1]),
                _mm256_unpackhi_epi16(x[0], x[1]),
            );
            let (cd0, cd1) = (
                _mm256_unpacklo_epi16(x[2], x[3]),
                _mm256_unpackhi_epi16(x[2], x[3]),
            );
            [self.madd2(ab0, cd0, t), self.madd2(ab1, cd1, t)]
        })
    }
    /// The 32-bit lanes of `[lo, hi]` hold columns 0-3 and 4-7 of each 128-bit lane, which
    /// `vpack[us]dw` interleaves back.
    #[inline(always)]
    fn narrow_dot(self, a: [__m256i; 2], fits: bool) -> __m256i {
        if fits {
            isa!(_mm256_packs_epi32(a[0], a[1]))
        } else {
            let m = self.splat32(0xffff);
            isa!(_mm256_packus_epi32(self.and(a[0], m), self.and(a[1], m)))
        }
    }
    /// Lane m of a load at 2j holds the pair (x[2j+2m], x[2j+2m+1]), whose taps `vpmaddwd`
    /// applies: the loads at 0 and 2 give outputs 0-7, those at 16 and 18 outputs 8-15.
    #[inline(always)]
    fn hload16(self, x: &[i16]) -> [__m256i; 4] {
        [
            load256(x),
            load256(&x[2..]),
            load256(&x[16..]),
            load256(&x[18..]),
        ]
    }
    #[inline(always)]
    fn hdot16(self, x: [__m256i; 4], t: [i16; 4]) -> [__m256i; 2] {
        [self.madd2(x[0], x[1], t), self.madd2(x[2], x[3], t)]
    }
    #[inline(always)]
    fn pairs64(self, x: [__m256i; 4]) -> [__m256i; 4] {
        let [h01, l01] = self.row_pairs(x[0], x[1]);
        let [h23, l23] = self.row_pairs(x[2], x[3]);
        [h01, l01, h23, l23]
    }
    /// Output j + m reads samples 2(j+m) .. 2(j+m)+3: pairs of the loads at 2j and 2j + 2.
    #[inline(always)]
    fn hpairs64(self, x: &[i32]) -> [__m256i; 4] {
        let [h0, l0] = self.adjacent_pairs(load256(x), load256(&x[8..]));
        let [h1, l1] = self.adjacent_pairs(load256(&x[2..]), load256(&x[10..]));
        [h0, l0, h1, l1]
    }
    /// The scalar code keeps the low 32 bits of `(sum + r) >> s`. Each sample is split as
    /// `hi * 2^16 + lo` (hi = x >> 16 signed, lo = x & 0xffff), so that `sum = 2^16 A + B`
    /// with `A = Σ tap * hi` and `B = Σ tap * lo`; with lo entering `vpmaddwd` as
    /// `lo - 32768`, `B = B' + 2^15 T` (T the tap sum) and every `madd`, A and B' stay below
    /// 2^31 in magnitude (Σ |tap| * 2^15 < 1.8e9). With s of 15 or 16 and 0 <= r <= 2^16,
    /// exactly and modulo 2^32: `(sum + r) >> s = (A << (16 - s)) + (2^15 T >> s) + ((B' + r) >> s)`.
    #[inline(always)]
    fn dot64(self, p: [__m256i; 4], t: [i32; 4], r: i64, s: u32) -> __m256i {
        let t16 = [t[0] as i16, t[1] as i16, t[2] as i16, t[3] as i16];
        let a = self.madd2(p[0], p[2], t16);
        let b = self.madd2(p[1], p[3], t16);
        let b = self.sra32(self.add32(b, self.splat32(r as i32)), s);
        let tsum: i32 = t.iter().sum();
        let a = self.add32(self.sll32(a, 16 - s), self.splat32((tsum << 15) >> s));
        self.add32(a, b)
    }
    /// [`Self::adjacent_pairs`]' order undone.
    #[inline(always)]
    fn hdot64(self, p: [__m256i; 4], t: [i32; 4], r: i64, s: u32) -> __m256i {
        isa!(_mm256_permute4x64_epi64::<0xd8>(self.dot64(p, t, r, s)))
    }

    #[inline(always)]
    fn lut(self, lut: &[i32; 32769], idx: __m256i) -> __m256i {
        // The callers' indices are at most 32768; clamping makes that a local fact (min is
        // free next to the gather).
        let idx = isa!(_mm256_min_epu32(idx, _mm256_set1_epi32(32768)));
        // SAFETY: every index is in 0..=32768 (unsigned min above) and `lut` has 32769
        // entries; AVX2 runs (the token).
        unsafe { _mm256_i32gather_epi32::<4>(lut.as_ptr(), idx) }
    }
    /// `vpmaddwd` of (h, v) pairs: exact, except 2^31 which wraps to i32::MIN.
    #[inline(always)]
    fn dots16(self, o: [__m128i; 2], t: [__m128i; 2]) -> [__m256i; 3] {
        let (op, tp) = (self.hv_pairs(o[0], o[1]), self.hv_pairs(t[0], t[1]));
        isa!([
            _mm256_madd_epi16(op, tp),
            _mm256_madd_epi16(op, op),
            _mm256_madd_epi16(tp, tp),
        ])
    }
    /// AVX-512: exact i64 lanes rounded by `vcvtqq2ps` (round to nearest even, as `as`).
    #[inline(always)]
    fn dots32(self, o: [__m256i; 2], t: [__m256i; 2]) -> [__m256i; 3] {
        if !AVX512 {
            return self.dots32_avx2(o, t);
        }
        let (oh, ov, th, tv) = isa!((
            _mm512_cvtepi32_epi64(o[0]),
            _mm512_cvtepi32_epi64(o[1]),
            _mm512_cvtepi32_epi64(t[0]),
            _mm512_cvtepi32_epi64(t[1]),
        ));
        [
            self.dot2_i64_512(oh, th, ov, tv),
            self.dot2_i64_512(oh, oh, ov, ov),
            self.dot2_i64_512(th, th, tv, tv),
        ]
    }
    #[inline(always)]
    fn cvt_f32(self, a: __m256i) -> __m256i {
        isa!(_mm256_castps_si256(_mm256_cvtepi32_ps(a)))
    }
    /// The division by 4096 is by a power of two, so a multiplication by its inverse is the
    /// same.
    #[inline(always)]
    fn angle(self, dp: __m256i, om: __m256i, tm: __m256i) -> __m256i {
        if AVX512 {
            return isa!({
                let scale = _mm512_set1_pd(1.0 / 4096.0);
                let dp = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(dp)), scale);
                let om = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(om)), scale);
                let tm = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(tm)), scale);
                let pos = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(dp, _mm512_setzero_pd());
                let rhs = _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(COS_1DEG_SQ as f64), om), tm);
                let ok = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(_mm512_mul_pd(dp, dp), rhs);
                _mm256_movm_epi32(pos & ok)
            });
        }
        let (dp, om, tm) = (self.halves(dp), self.halves(om), self.halves(tm));
        let lo = self.angle4(dp[0], om[0], tm[0]);
        let hi = self.angle4(dp[1], om[1], tm[1]);
        isa!({
            // The low 32 bits of each 64-bit mask lane, in order.
            let idx = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
            let lo = _mm256_permutevar8x32_epi32(lo, idx);
            let hi = _mm256_permutevar8x32_epi32(hi, idx);
            _mm256_permute2x128_si256::<0x20>(lo, hi)
        })
    }
    /// MINPD/MAXPD return the second operand unless the first is strictly smaller/greater:
    /// exactly `if g < t { g } else { t }` and its mirror. The result lies between 0 and t,
    /// so truncation is Rust's `as`.
    #[inline(always)]
    fn enhance_f64(self, rst: __m256i, t: __m256i, pos: __m256i, egl: f64) -> __m256i {
        if AVX512 {
            return isa!({
                let g = _mm512_mul_pd(_mm512_cvtepi32_pd(rst), _mm512_set1_pd(egl));
                let t = _mm512_cvtepi32_pd(t);
                let p = _mm256_movepi32_mask(pos);
                let e = _mm512_mask_blend_pd(p, _mm512_max_pd(g, t), _mm512_min_pd(g, t));
                _mm512_cvttpd_epi32(e)
            });
        }
        let (r, t, p) = (self.halves(rst), self.halves(t), self.halves(pos));
        let lo = self.enhance4(r[0], t[0], p[0], egl);
        let hi = self.enhance4(r[1], t[1], p[1], egl);
        isa!(_mm256_set_m128i(hi, lo))
    }
    #[inline(always)]
    fn shift15(self, a: __m256i) -> __m256i {
        if AVX512 {
            return isa!({
                let small = _mm256_cmplt_epu32_mask(a, _mm256_set1_epi32(32768));
                _mm256_maskz_sub_epi32(!small, _mm256_set1_epi32(17), _mm256_lzcnt_epi32(a))
            });
        }
        // floor(log2 a) from the exponent of the f32 of a >> 8 (exact: below 2^24);
        // shift = floor(log2 a) - 14 = (biased exponent - 127 + 8) - 14.
        isa!({
            let small = _mm256_cmpeq_epi32(_mm256_srli_epi32::<15>(a), _mm256_setzero_si256());
            let f = _mm256_cvtepi32_ps(_mm256_srli_epi32::<8>(a));
            let e = _mm256_srli_epi32::<23>(_mm256_castps_si256(f));
            _mm256_andnot_si256(small, _mm256_sub_epi32(e, _mm256_set1_epi32(133)))
        })
    }

    #[inline(always)]
    fn mulw_i32(self, a: __m256i, b: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_mul_epi32(a, b),
            _mm256_mul_epi32(self.odd(a), self.odd(b))
        ])
    }
    #[inline(always)]
    fn mulw_u32(self, a: __m256i, b: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_mul_epu32(a, b),
            _mm256_mul_epu32(self.odd(a), self.odd(b))
        ])
    }
    #[inline(always)]
    fn shl32_64(self, a: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_slli_epi64::<32>(a),
            _mm256_and_si256(a, _mm256_set1_epi64x(!0xffff_ffff))
        ])
    }
    #[inline(always)]
    fn widen_u32(self, a: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_and_si256(a, _mm256_set1_epi64x(0xffff_ffff)),
            _mm256_srli_epi64::<32>(a)
        ])
    }
    #[inline(always)]
    fn splat64(self, x: i64) -> [__m256i; 2] {
        [isa!(_mm256_set1_epi64x(x)); 2]
    }
    #[inline(always)]
    fn add64(self, a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
        isa!([_mm256_add_epi64(a[0], b[0]), _mm256_add_epi64(a[1], b[1])])
    }
    #[inline(always)]
    fn srl64(self, a: [__m256i; 2], n: u32) -> [__m256i; 2] {
        let n = isa!(_mm_cvtsi32_si128(n as i32));
        isa!([_mm256_srl_epi64(a[0], n), _mm256_srl_epi64(a[1], n)])
    }
    #[inline(always)]
    fn sllv64(self, a: [__m256i; 2], n: [__m256i; 2]) -> [__m256i; 2] {
        isa!([_mm256_sllv_epi64(a[0], n[0]), _mm256_sllv_epi64(a[1], n[1])])
    }
    #[inline(always)]
    fn srlv64(self, a: [__m256i; 2], n: [__m256i; 2]) -> [__m256i; 2] {
        isa!([_mm256_srlv_epi64(a[0], n[0]), _mm256_srlv_epi64(a[1], n[1])])
    }
    #[inline(always)]
    fn min_u64(self, a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
        [self.min64(a[0], b[0]), self.min64(a[1], b[1])]
    }
    #[inline(always)]
    fn narrow64(self, a: [__m256i; 2]) -> __m256i {
        isa!(_mm256_blend_epi32::<0xaa>(
            a[0],
            _mm256_slli_epi64::<32>(a[1])
        ))
    }
    #[inline(always)]
    fn high64(self, a: [__m256i; 2]) -> __m256i {
        isa!(_mm256_blend_epi32::<0xaa>(
            _mm256_srli_epi64::<32>(a[0]),
            a[1]
        ))
    }
    #[inline(always)]
    fn mul_lo32(self, a: [__m256i; 2], b: __m256i) -> [__m256i; 2] {
        isa!([
            _mm256_mul_epi32(a[0], b),
            _mm256_mul_epi32(a[1], self.odd(b))
        ])
    }
    #[inline(always)]
    fn mul64_u32(self, a: [__m256i; 2], b: __m256i) -> [__m256i; 2] {
        [self.mul64x32(a[0], b), self.mul64x32(a[1], self.odd(b))]
    }
    #[inline(always)]
    fn sum64(self, a: [__m256i; 2]) -> u64 {
        isa!({
            let v = _mm256_add_epi64(a[0], a[1]);
            let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            (_mm_cvtsi128_si64(s) as u64).wrapping_add(_mm_extract_epi64::<1>(s) as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::tests::rounding_cases;
    use super::*;

    #[test]
    fn i64_to_f32_rounds_like_as() {
        let Some(s) = Avx2::new(CpuLevel::detect()) else {
            return;
        };
        for c in rounding_cases().chunks(4) {
            let mut x = [0i64; 4];
            x[..c.len()].copy_from_slice(c);
            let mut got = [0f32; 4];
            s.run(
                #[inline(always)]
                || {
                    let v = s.i64_to_f32(load256(&x));
                    // SAFETY: `got` holds 16 bytes.
                    unsafe { _mm_storeu_ps(got.as_mut_ptr(), v) }
                },
            );
            for (g, v) in got.iter().zip(x) {
                assert_eq!(g.to_bits(), (v as f32).to_bits(), "{v}");
            }
        }
    }
}
