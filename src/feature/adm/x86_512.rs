//! AVX-512 (F, BW, DQ, CD, VL) row kernels, used where they beat the AVX2 ones: the
//! decoupling stages, whose int64 -> f32 rounding (`vcvtqq2ps`), 64-bit shifts and minima,
//! leading-zero counts, mask registers and truncating narrows AVX2 has to emulate. Same
//! contract as `x86.rs` (bit-exact with `cpu.rs`; rows shorter than a vector are left to
//! the AVX2 kernels).

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::super::tables::{div_lookup, COS_1DEG_SQ};
use super::{ld_i16x16, ld_i32x8, st_i16x16, st_i32x8, starts};

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")]
fn gather_lut16(lut: &[i32; 32769], idx: __m512i) -> __m512i {
    let idx = _mm512_min_epu32(idx, _mm512_set1_epi32(32768));
    // SAFETY: every index is in 0..=32768 (unsigned min above) and `lut` has 32769 entries.
    unsafe { _mm512_i32gather_epi32::<4>(idx, lut.as_ptr()) }
}

/// The angle test of 8 pixels (see `x86::angle8`): a mask of the pixels where it holds.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")]
fn angle8(dp: __m256, om: __m256, tm: __m256) -> __mmask8 {
    let scale = _mm512_set1_pd(1.0 / 4096.0);
    let dp = _mm512_mul_pd(_mm512_cvtps_pd(dp), scale);
    let om = _mm512_mul_pd(_mm512_cvtps_pd(om), scale);
    let tm = _mm512_mul_pd(_mm512_cvtps_pd(tm), scale);
    let cos = _mm512_set1_pd(COS_1DEG_SQ as f64);
    let pos = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(dp, _mm512_setzero_pd());
    let rhs = _mm512_mul_pd(_mm512_mul_pd(cos, om), tm);
    pos & _mm512_cmp_pd_mask::<_CMP_GE_OQ>(_mm512_mul_pd(dp, dp), rhs)
}

/// Enhancement of 8 restored coefficients (see `x86::enhance8`).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")]
fn enhance8(rst: __m256i, o: __m256i, t: __m256i, cond: __mmask8, egl: f64) -> __m256i {
    let pos = _mm256_cmpgt_epi32_mask(o, _mm256_setzero_si256());
    let en = if egl == 1.0 {
        _mm256_mask_blend_epi32(pos, _mm256_max_epi32(rst, t), _mm256_min_epi32(rst, t))
    } else {
        let g = _mm512_mul_pd(_mm512_cvtepi32_pd(rst), _mm512_set1_pd(egl));
        let t = _mm512_cvtepi32_pd(t);
        // MAXPD/MINPD: `if g > t { g } else { t }` and `if g < t { g } else { t }`.
        let e = _mm512_mask_blend_pd(pos, _mm512_max_pd(g, t), _mm512_min_pd(g, t));
        // In range of i32 (between 0 and t), so truncation is Rust's `as`.
        _mm512_cvttpd_epi32(e)
    };
    _mm256_mask_blend_epi32(cond, rst, en)
}

/// Scale-0 decoupling of a row, 16 pixels at a time.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")]
pub(super) fn decouple0(
    o: [&[i16]; 3],
    t: [&[i16]; 3],
    egl: f64,
    r: [&mut [i16]; 3],
    a: [&mut [i16]; 3],
) -> usize {
    let lut = div_lookup();
    let n = o[0].len();
    if n < 16 {
        return 0;
    }
    let zero = _mm512_setzero_si512();
    let k32768 = _mm512_set1_epi32(32768);
    let k16384 = _mm512_set1_epi32(16384);
    let low16 = _mm512_set1_epi32(0xffff);
    for j in starts(n, 16) {
        let o16 = o.map(|p| ld_i16x16(&p[j..]));
        let t16 = t.map(|p| ld_i16x16(&p[j..]));
        let ov = o16.map(|v| _mm512_cvtepi16_epi32(v));
        let tv = t16.map(|v| _mm512_cvtepi16_epi32(v));
        // (h, v) pairs in i32 lanes: one madd per dot product (exact, except 2^31 which wraps
        // to i32::MIN and is put back below).
        let pair = |h: __m512i, v: __m512i| {
            _mm512_or_si512(_mm512_and_si512(h, low16), _mm512_slli_epi32::<16>(v))
        };
        let (op, tp) = (pair(ov[0], ov[1]), pair(tv[0], tv[1]));
        let dp = _mm512_madd_epi16(op, tp);
        let dpf = _mm512_cvtepi32_ps(dp);
        let wrapped = _mm512_cmpeq_epi32_mask(dp, _mm512_set1_epi32(i32::MIN));
        let dpf = _mm512_mask_mov_ps(dpf, wrapped, _mm512_set1_ps(2147483648.0));
        // Squared magnitudes are >= 0: |f32| undoes the wrap.
        let omf = _mm512_abs_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(op, op)));
        let tmf = _mm512_abs_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(tp, tp)));
        let lo = |v: __m512| _mm512_castps512_ps256(v);
        let hi = |v: __m512| _mm512_extractf32x8_ps::<1>(v);
        let angle = (angle8(lo(dpf), lo(omf), lo(tmf)) as u16)
            | ((angle8(hi(dpf), hi(omf), hi(tmf)) as u16) << 8);
        for b in 0..3 {
            let (ob, tb) = (ov[b], tv[b]);
            let (ao, at) = (_mm512_abs_epi32(ob), _mm512_abs_epi32(tb));
            // With |t| <= |o| the product lut[|o|] * |t| is at most 2^30; with |t| > |o| it
            // is at least 2^30, whose gain clamps to 32768.
            let q = _mm512_mullo_epi32(gather_lut16(lut, ao), at);
            let kq = _mm512_srai_epi32::<15>(_mm512_add_epi32(q, k16384));
            let kq = _mm512_min_epi32(kq, k32768);
            let kq = _mm512_mask_mov_epi32(kq, _mm512_cmpgt_epi32_mask(at, ao), k32768);
            // 0 where o and t differ in sign or t is 0; 32768 where o is 0.
            let differ = _mm512_cmplt_epi32_mask(_mm512_xor_si512(ob, tb), zero);
            let t0 = _mm512_cmpeq_epi32_mask(tb, zero);
            let o0 = _mm512_cmpeq_epi32_mask(ob, zero);
            let k = _mm512_maskz_mov_epi32(!(differ | t0), kq);
            let k = _mm512_mask_mov_epi32(k, o0, k32768);
            let rst = _mm512_mullo_epi32(k, ob);
            let mut rst = _mm512_srai_epi32::<15>(_mm512_add_epi32(rst, k16384));
            let cond = angle & _mm512_cmpgt_epi32_mask(k, zero) & !o0;
            if cond != 0 {
                let lo = |v: __m512i| _mm512_castsi512_si256(v);
                let hi = |v: __m512i| _mm512_extracti64x4_epi64::<1>(v);
                let e0 = enhance8(lo(rst), lo(ob), lo(tb), cond as u8, egl);
                let e1 = enhance8(hi(rst), hi(ob), hi(tb), (cond >> 8) as u8, egl);
                rst = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(e0), e1);
            }
            // rst fits in i16; `(t - rst) as i16` is the wrapping i16 difference.
            let r16 = _mm512_cvtepi32_epi16(rst);
            st_i16x16(&mut r[b][j..], r16);
            st_i16x16(&mut a[b][j..], _mm256_sub_epi16(t16[b], r16));
        }
    }
    n
}

/// Scales 1-3 decoupling of a row, 8 pixels at a time: the angle test's int64 dot products
/// exactly in i64 lanes, rounded to f32 by `vcvtqq2ps` (round to nearest even, as `as`).
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")]
pub(super) fn decouple123(
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) -> usize {
    let lut = div_lookup();
    let n = o[0].len();
    if n < 8 {
        return 0;
    }
    let zero = _mm256_setzero_si256();
    let one = _mm256_set1_epi32(1);
    let one64 = _mm512_set1_epi64(1);
    let k32768 = _mm256_set1_epi32(32768);
    for j in starts(n, 8) {
        let ov = o.map(|p| ld_i32x8(&p[j..]));
        let tv = t.map(|p| ld_i32x8(&p[j..]));
        let w = |x| _mm512_cvtepi32_epi64(x);
        let (oh, ovv, th, tvv) = (w(ov[0]), w(ov[1]), w(tv[0]), w(tv[1]));
        // Wrapping int64 sums like the scalar code.
        let dot = |a, b, c, d| {
            _mm512_cvtepi64_ps(_mm512_add_epi64(
                _mm512_mul_epi32(a, b),
                _mm512_mul_epi32(c, d),
            ))
        };
        let angle = angle8(
            dot(oh, th, ovv, tvv),
            dot(oh, oh, ovv, ovv),
            dot(th, th, tvv, tvv),
        );
        for b in 0..3 {
            let (ob, tb) = (ov[b], tv[b]);
            let (ao, at) = (_mm256_abs_epi32(ob), _mm256_abs_epi32(tb));
            // reduce15: |o| >= 2^15 is rounded to 15 significant bits, shift s = bits - 15.
            let small = _mm256_cmplt_epu32_mask(ao, k32768);
            let s = _mm256_maskz_sub_epi32(!small, _mm256_set1_epi32(17), _mm256_lzcnt_epi32(ao));
            // 1 << (s - 1) is 0 for s = 0 (count >= 32).
            let rnd = _mm256_sllv_epi32(one, _mm256_sub_epi32(s, one));
            let m = _mm256_srlv_epi32(_mm256_add_epi32(ao, rnd), s);
            let l = super::gather_lut(lut, m);
            // Same signs: k = min((l * |t| + 2^(14+s)) >> (15+s), 32768) in u64 lanes.
            let sh = _mm512_add_epi64(_mm512_cvtepu32_epi64(s), _mm512_set1_epi64(14));
            let q = _mm512_mul_epu32(_mm512_cvtepu32_epi64(l), _mm512_cvtepu32_epi64(at));
            let q = _mm512_add_epi64(q, _mm512_sllv_epi64(one64, sh));
            let q = _mm512_srlv_epi64(q, _mm512_add_epi64(sh, one64));
            let kq = _mm512_cvtepi64_epi32(_mm512_min_epu64(q, _mm512_set1_epi64(32768)));
            // 0 where o and t differ in sign or t is 0; 32768 where o is 0.
            let differ = _mm256_cmplt_epi32_mask(_mm256_xor_si256(ob, tb), zero);
            let t0 = _mm256_cmpeq_epi32_mask(tb, zero);
            let o0 = _mm256_cmpeq_epi32_mask(ob, zero);
            let k = _mm256_maskz_mov_epi32(!(differ | t0), kq);
            let k = _mm256_mask_mov_epi32(k, o0, k32768);
            // ((k * o + 16384) >> 15) as i32.
            let p = _mm512_mul_epi32(_mm512_cvtepu32_epi64(k), _mm512_cvtepi32_epi64(ob));
            let p = _mm512_srai_epi64::<15>(_mm512_add_epi64(p, _mm512_set1_epi64(16384)));
            let mut rst = _mm512_cvtepi64_epi32(p);
            let cond = angle & _mm256_cmpgt_epi32_mask(k, zero) & !o0;
            if cond != 0 {
                rst = enhance8(rst, ob, tb, cond, egl);
            }
            st_i32x8(&mut r[b][j..], rst);
            st_i32x8(&mut a[b][j..], _mm256_sub_epi32(tb, rst));
        }
    }
    n
}
