//! AVX-512 (F, BW, DQ, CD, VL) row kernels, used where they beat the AVX2 ones: decoupling of
//! scales 1-3, whose int64 -> f32 rounding (`vcvtqq2ps`), 64-bit shifts and minima and
//! leading-zero counts AVX2 has to emulate. Same contract as `x86.rs` (bit-exact with
//! `cpu.rs`). The other stages gained nothing measurable from 512-bit vectors on Zen 4
//! (double-pumped), so they run the AVX2 kernels at this level too.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::super::tables::{div_lookup, COS_1DEG_SQ};
use super::{ld_i32x8, st_i32x8, starts};

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
