//! AVX2 row kernels of the integer ADM stages (AVX-512 ones in `x86_512.rs`). Each one
//! reproduces a scalar loop of `cpu.rs` exactly on a prefix of its row and returns that
//! prefix's length (0 when `cpu` has no level it can use); the scalar code finishes the row.
//! Element-wise kernels cover the whole row when it holds at least one vector (see
//! [`starts`]); the reductions stop at the last whole vector.
//!
//! Where the scalar code widens to 64 bits, so do these (`mul_epi32`/`mul_epu32` products);
//! where it truncates (`as i16`, `as i32` of a wider value), these keep the low bits. The
//! float parts of decoupling run lane-wise in the scalar order (no FMA, no reassociation).

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::tables::{div_lookup, COS_1DEG_SQ, DWT_HI, DWT_LO, DWT_LO_SUM};
use crate::simd::CpuLevel;

#[path = "x86_512.rs"]
mod avx512;

// ---------------------------------------------------------------------------------------------
// Loads and stores: the only memory accesses, each on a slice checked to hold the vector.

#[inline]
#[target_feature(enable = "avx2")]
fn ld_u8x16(s: &[u8]) -> __m128i {
    let s = &s[..16];
    // SAFETY: `s` holds 16 bytes; unaligned load.
    unsafe { _mm_loadu_si128(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn ld_u16x16(s: &[u16]) -> __m256i {
    let s = &s[..16];
    // SAFETY: `s` holds 32 bytes; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn ld_i16x16(s: &[i16]) -> __m256i {
    let s = &s[..16];
    // SAFETY: `s` holds 32 bytes; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn ld_i16x8(s: &[i16]) -> __m128i {
    let s = &s[..8];
    // SAFETY: `s` holds 16 bytes; unaligned load.
    unsafe { _mm_loadu_si128(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn ld_i32x8(s: &[i32]) -> __m256i {
    let s = &s[..8];
    // SAFETY: `s` holds 32 bytes; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn st_i16x16(d: &mut [i16], v: __m256i) {
    let d = &mut d[..16];
    // SAFETY: `d` holds 32 bytes; unaligned store.
    unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn st_i16x8(d: &mut [i16], v: __m128i) {
    let d = &mut d[..8];
    // SAFETY: `d` holds 16 bytes; unaligned store.
    unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn st_i32x8(d: &mut [i32], v: __m256i) {
    let d = &mut d[..8];
    // SAFETY: `d` holds 32 bytes; unaligned store.
    unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), v) }
}

/// `lut[idx]` for 8 lanes of the reciprocal table.
#[inline]
#[target_feature(enable = "avx2")]
fn gather_lut(lut: &[i32; 32769], idx: __m256i) -> __m256i {
    // The callers' indices are at most 32768; clamping makes that a local fact (min is free
    // next to the gather).
    let idx = _mm256_min_epu32(idx, _mm256_set1_epi32(32768));
    // SAFETY: every index is in 0..=32768 (unsigned min above) and `lut` has 32769 entries.
    unsafe { _mm256_i32gather_epi32::<4>(lut.as_ptr(), idx) }
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

/// Starts of the vectors of `w` elements covering `0..n` (n >= w): the last one is moved back
/// to end at n, recomputing a few outputs of the one before it. For element-wise kernels,
/// whose outputs depend only on their own inputs, this finishes the row without scalar code.
fn starts(n: usize, w: usize) -> impl Iterator<Item = usize> {
    (0..n).step_by(w).map(move |j| j.min(n - w))
}

/// Two i16 taps as the (low, high) pair `madd_epi16` multiplies adjacent lanes with.
const fn pair(a: i32, b: i32) -> i32 {
    (a & 0xffff) | (b << 16)
}

/// 16 x i32 (two vectors, each in `unpack{lo,hi}_epi16` lane order) truncated to i16 (`as i16`)
/// in the original order.
#[inline]
#[target_feature(enable = "avx2")]
fn trunc_pack_unpacked(a: __m256i, b: __m256i) -> __m256i {
    let m = _mm256_set1_epi32(0xffff);
    _mm256_packus_epi32(_mm256_and_si256(a, m), _mm256_and_si256(b, m))
}

/// 16 x i32 (two vectors in order) that fit in i16, packed in order.
#[inline]
#[target_feature(enable = "avx2")]
fn pack16(a: __m256i, b: __m256i) -> __m256i {
    _mm256_permute4x64_epi64::<0xd8>(_mm256_packs_epi32(a, b))
}

/// Interleaves the low dwords of the 64-bit lanes of `even` and `odd` (lane pairs 2k, 2k+1).
#[inline]
#[target_feature(enable = "avx2")]
fn low_dwords(even: __m256i, odd: __m256i) -> __m256i {
    _mm256_blend_epi32::<0xaa>(even, _mm256_slli_epi64::<32>(odd))
}

/// Interleaves the high dwords of the 64-bit lanes of `even` and `odd`.
#[inline]
#[target_feature(enable = "avx2")]
fn high_dwords(even: __m256i, odd: __m256i) -> __m256i {
    _mm256_blend_epi32::<0xaa>(_mm256_srli_epi64::<32>(even), odd)
}

/// The odd dwords moved to the even positions (where `mul_ep{i,u}32` reads).
#[inline]
#[target_feature(enable = "avx2")]
fn odd(v: __m256i) -> __m256i {
    _mm256_srli_epi64::<32>(v)
}

#[inline]
#[target_feature(enable = "avx2")]
fn hsum64(v: __m256i) -> u64 {
    let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    (_mm_cvtsi128_si64(s) as u64).wrapping_add(_mm_extract_epi64::<1>(s) as u64)
}

// ---------------------------------------------------------------------------------------------
// DWT, scale 0.

/// Constants of the scale-0 vertical pass: `madd` tap pairs, the added constant of each
/// filter and the shift.
struct Vert0 {
    lo01: __m256i,
    lo23: __m256i,
    hi01: __m256i,
    hi23: __m256i,
    kl: __m256i,
    kh: __m256i,
    shift: __m128i,
}

#[inline]
#[target_feature(enable = "avx2")]
fn vert0_consts(bpc: u32, xor_bias: bool) -> Vert0 {
    let round = 1i32 << (bpc - 1);
    let centre = DWT_LO_SUM.wrapping_mul(round);
    // 16-bit samples enter `madd` as `s ^ 0x8000 = s - 32768`: add back 32768 * (tap sum),
    // which is exact modulo 2^32 like the scalar wrapping sum (high-pass taps sum to 0).
    let bias = if xor_bias {
        32768i32.wrapping_mul(DWT_LO_SUM)
    } else {
        0
    };
    Vert0 {
        lo01: _mm256_set1_epi32(pair(DWT_LO[0], DWT_LO[1])),
        lo23: _mm256_set1_epi32(pair(DWT_LO[2], DWT_LO[3])),
        hi01: _mm256_set1_epi32(pair(DWT_HI[0], DWT_HI[1])),
        hi23: _mm256_set1_epi32(pair(DWT_HI[2], DWT_HI[3])),
        kl: _mm256_set1_epi32(round.wrapping_sub(centre).wrapping_add(bias)),
        kh: _mm256_set1_epi32(round),
        shift: _mm_cvtsi32_si128(bpc as i32),
    }
}

/// Vertical taps of 16 columns (rows `a`..`d` as i16 lanes): the low- and high-pass i16 rows.
/// `FITS`: the results are known to fit in i16 (8-bit samples), so a saturating pack is the
/// truncating `as i16`.
#[inline]
#[target_feature(enable = "avx2")]
fn vert0_16<const FITS: bool>(
    k: &Vert0,
    a: __m256i,
    b: __m256i,
    c: __m256i,
    d: __m256i,
) -> (__m256i, __m256i) {
    let (ab0, ab1) = (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
    let (cd0, cd1) = (_mm256_unpacklo_epi16(c, d), _mm256_unpackhi_epi16(c, d));
    let f = |p01, p23, kk| {
        let s0 = _mm256_add_epi32(_mm256_madd_epi16(ab0, p01), _mm256_madd_epi16(cd0, p23));
        let s1 = _mm256_add_epi32(_mm256_madd_epi16(ab1, p01), _mm256_madd_epi16(cd1, p23));
        let s0 = _mm256_sra_epi32(_mm256_add_epi32(s0, kk), k.shift);
        let s1 = _mm256_sra_epi32(_mm256_add_epi32(s1, kk), k.shift);
        if FITS {
            _mm256_packs_epi32(s0, s1)
        } else {
            trunc_pack_unpacked(s0, s1)
        }
    };
    (f(k.lo01, k.lo23, k.kl), f(k.hi01, k.hi23, k.kh))
}

/// Prefetches column `x` of the rows the next output row will add: the picture is read once,
/// from memory, and its rows are short streams for the hardware prefetchers.
#[inline]
#[target_feature(enable = "avx2")]
fn prefetch<T>(rows: &[&[T]; 2], x: usize) {
    for r in rows {
        if x < r.len() {
            _mm_prefetch::<_MM_HINT_T0>(r[x..].as_ptr().cast());
        }
    }
}

/// Scale-0 vertical pass of 8-bit rows into `lo`/`hi` (the row's columns, unpadded); `ahead`
/// are the rows of the next output row (prefetched).
pub fn dwt0_vert_u8(
    cpu: CpuLevel,
    rows: [&[u8]; 4],
    ahead: [&[u8]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { dwt0_vert_u8_avx2(rows, ahead, bpc, lo, hi) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn dwt0_vert_u8_avx2(
    rows: [&[u8]; 4],
    ahead: [&[u8]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    let k = vert0_consts(bpc, false);
    let n = lo.len();
    if n < 16 {
        return 0;
    }
    for x in starts(n, 16) {
        prefetch(&ahead, x);
        let v = rows.map(|r| _mm256_cvtepu8_epi16(ld_u8x16(&r[x..])));
        // 0..=255 samples: |result| <= 27411 * 255 / 2^8 < 2^15 for any bpc >= 8.
        let (l, h) = vert0_16::<true>(&k, v[0], v[1], v[2], v[3]);
        st_i16x16(&mut lo[x..], l);
        st_i16x16(&mut hi[x..], h);
    }
    n
}

/// Scale-0 vertical pass of 9..16-bit rows.
pub fn dwt0_vert_u16(
    cpu: CpuLevel,
    rows: [&[u16]; 4],
    ahead: [&[u16]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { dwt0_vert_u16_avx2(rows, ahead, bpc, lo, hi) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn dwt0_vert_u16_avx2(
    rows: [&[u16]; 4],
    ahead: [&[u16]; 2],
    bpc: u32,
    lo: &mut [i16],
    hi: &mut [i16],
) -> usize {
    let k = vert0_consts(bpc, true);
    let flip = _mm256_set1_epi16(i16::MIN);
    let n = lo.len();
    if n < 16 {
        return 0;
    }
    for x in starts(n, 16) {
        prefetch(&ahead, x);
        let v = rows.map(|r| _mm256_xor_si256(ld_u16x16(&r[x..]), flip));
        let (l, h) = vert0_16::<false>(&k, v[0], v[1], v[2], v[3]);
        st_i16x16(&mut lo[x..], l);
        st_i16x16(&mut hi[x..], h);
    }
    n
}

/// Scale-0 horizontal pass: output `j` reads `lo[2j..2j+4]` (padded rows, at least
/// `2 * approx.len() + 2` long) and writes the approximation and the v, h, d bands.
pub fn dwt0_horiz(
    cpu: CpuLevel,
    lo: &[i16],
    hi: &[i16],
    approx: &mut [i32],
    v: &mut [i16],
    h: &mut [i16],
    d: &mut [i16],
) -> usize {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { dwt0_horiz_avx2(lo, hi, approx, v, h, d) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn dwt0_horiz_avx2(
    lo: &[i16],
    hi: &[i16],
    approx: &mut [i32],
    v: &mut [i16],
    h: &mut [i16],
    d: &mut [i16],
) -> usize {
    let lo01 = _mm256_set1_epi32(pair(DWT_LO[0], DWT_LO[1]));
    let lo23 = _mm256_set1_epi32(pair(DWT_LO[2], DWT_LO[3]));
    let hi01 = _mm256_set1_epi32(pair(DWT_HI[0], DWT_HI[1]));
    let hi23 = _mm256_set1_epi32(pair(DWT_HI[2], DWT_HI[3]));
    let round = _mm256_set1_epi32(32768);
    // i32 lane m of a load at 2j is the pair (x[2j+2m], x[2j+2m+1]): `madd` with two taps.
    let dot = |a: __m256i, b: __m256i, p01, p23| {
        let s = _mm256_add_epi32(_mm256_madd_epi16(a, p01), _mm256_madd_epi16(b, p23));
        _mm256_srai_epi32::<16>(_mm256_add_epi32(s, round))
    };
    let n = approx.len();
    if n < 16 {
        return 0;
    }
    for j in starts(n, 16) {
        let x = 2 * j;
        let (l0, l1) = (ld_i16x16(&lo[x..]), ld_i16x16(&lo[x + 2..]));
        let (l2, l3) = (ld_i16x16(&lo[x + 16..]), ld_i16x16(&lo[x + 18..]));
        let (h0, h1) = (ld_i16x16(&hi[x..]), ld_i16x16(&hi[x + 2..]));
        let (h2, h3) = (ld_i16x16(&hi[x + 16..]), ld_i16x16(&hi[x + 18..]));
        st_i32x8(&mut approx[j..], dot(l0, l1, lo01, lo23));
        st_i32x8(&mut approx[j + 8..], dot(l2, l3, lo01, lo23));
        st_i16x16(
            &mut v[j..],
            pack16(dot(l0, l1, hi01, hi23), dot(l2, l3, hi01, hi23)),
        );
        st_i16x16(
            &mut h[j..],
            pack16(dot(h0, h1, lo01, lo23), dot(h2, h3, lo01, lo23)),
        );
        st_i16x16(
            &mut d[j..],
            pack16(dot(h0, h1, hi01, hi23), dot(h2, h3, hi01, hi23)),
        );
    }
    n
}

// ---------------------------------------------------------------------------------------------
// DWT, scales 1-3.
//
// The scalar code sums `tap * x` in i64 and keeps the low 32 bits of `(sum + r) >> s`. Without
// a shift that is the wrapping i32 sum of wrapping i32 products. With s = 15 or 16, each x is
// split as `hi * 2^16 + lo` (hi = x >> 16 signed, lo = x & 0xffff), so that
// `sum = 2^16 A + B` with `A = sum tap * hi` and `B = sum tap * lo`; with lo entering `madd`
// as `lo - 32768`, `B = B' + 2^15 T` (T the tap sum) and every `madd` and both A and B' stay
// below 2^31 in magnitude (sum |tap| * 2^15 < 1.8e9). Then, exactly and modulo 2^32:
// `(sum + r) >> s = (A << (16 - s)) + (2^15 T >> s) + ((B' + r) >> s)`.

/// Shift, rounding and tap sum of one filter of the split form above.
struct Split {
    r: __m256i,
    s: __m128i,
    a_shift: __m128i,
    t: __m256i,
}

#[inline]
#[target_feature(enable = "avx2")]
fn split_consts(r: i64, s: u32, tap_sum: i32) -> Split {
    Split {
        r: _mm256_set1_epi32(r as i32),
        s: _mm_cvtsi32_si128(s as i32),
        a_shift: _mm_cvtsi32_si128(16 - s as i32),
        t: _mm256_set1_epi32((tap_sum << 15) >> s),
    }
}

/// Whether the split form applies: s of 15 or 16 (2^15 T divisible by 2^s for both filters),
/// 0 <= r <= 2^16 (B' + r stays in i32).
fn split_ok(r: i64, s: u32) -> bool {
    (s == 15 || s == 16) && (0..=65536).contains(&r)
}

/// `(A << (16 - s)) + (2^15 T >> s) + ((B' + r) >> s)`.
#[inline]
#[target_feature(enable = "avx2")]
fn split_fin(k: &Split, a: __m256i, b: __m256i) -> __m256i {
    let b = _mm256_sra_epi32(_mm256_add_epi32(b, k.r), k.s);
    _mm256_add_epi32(_mm256_add_epi32(_mm256_sll_epi32(a, k.a_shift), k.t), b)
}

/// `madd` pairs of two rows' (hi, lo - 32768) halves: i32 lane c holds column c of `a` and `b`.
#[inline]
#[target_feature(enable = "avx2")]
fn row_pairs(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    let hi = _mm256_blend_epi16::<0xaa>(_mm256_srli_epi32::<16>(a), b);
    let lo = _mm256_blend_epi16::<0xaa>(a, _mm256_slli_epi32::<16>(b));
    (
        hi,
        _mm256_xor_si256(lo, _mm256_set1_epi32(0x8000_8000u32 as i32)),
    )
}

/// `madd` pairs of adjacent samples of 16 i32 (`x`, then `y`): i32 lane m holds samples 2m and
/// 2m + 1, lanes in the order [0, 1, 4, 5 | 2, 3, 6, 7] (undone by `permute4x64(0xd8)`).
#[inline]
#[target_feature(enable = "avx2")]
fn adjacent_pairs(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    let hi = _mm256_packs_epi32(_mm256_srai_epi32::<16>(x), _mm256_srai_epi32::<16>(y));
    let m = _mm256_set1_epi32(0xffff);
    let lo = _mm256_packus_epi32(_mm256_and_si256(x, m), _mm256_and_si256(y, m));
    (hi, _mm256_xor_si256(lo, _mm256_set1_epi16(i16::MIN)))
}

/// Scales 1-3 vertical pass: `((sum + rv) >> sv) as i32` per column.
pub fn dwt123_vert(
    cpu: CpuLevel,
    rows: [&[i32]; 4],
    ahead: [&[i32]; 2],
    rv: i64,
    sv: u32,
    lo: &mut [i32],
    hi: &mut [i32],
) -> usize {
    if cpu.has_avx2() && ((sv == 0 && rv == 0) || split_ok(rv, sv)) {
        // SAFETY: the level proves AVX2.
        return unsafe { dwt123_vert_avx2(rows, ahead, rv, sv, lo, hi) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn dwt123_vert_avx2(
    rows: [&[i32]; 4],
    ahead: [&[i32]; 2],
    rv: i64,
    sv: u32,
    lo: &mut [i32],
    hi: &mut [i32],
) -> usize {
    let n = lo.len();
    if n < 8 {
        return 0;
    }
    if sv == 0 {
        let tl = DWT_LO.map(|t| _mm256_set1_epi32(t));
        let th = DWT_HI.map(|t| _mm256_set1_epi32(t));
        let dot = |t: &[__m256i; 4], x: &[__m256i; 4]| {
            let a = _mm256_add_epi32(
                _mm256_mullo_epi32(x[0], t[0]),
                _mm256_mullo_epi32(x[1], t[1]),
            );
            let b = _mm256_add_epi32(
                _mm256_mullo_epi32(x[2], t[2]),
                _mm256_mullo_epi32(x[3], t[3]),
            );
            _mm256_add_epi32(a, b)
        };
        for x in starts(n, 8) {
            prefetch(&ahead, x);
            let v = rows.map(|r| ld_i32x8(&r[x..]));
            st_i32x8(&mut lo[x..], dot(&tl, &v));
            st_i32x8(&mut hi[x..], dot(&th, &v));
        }
        return n;
    }
    let (lo01, lo23) = (
        _mm256_set1_epi32(pair(DWT_LO[0], DWT_LO[1])),
        _mm256_set1_epi32(pair(DWT_LO[2], DWT_LO[3])),
    );
    let (hi01, hi23) = (
        _mm256_set1_epi32(pair(DWT_HI[0], DWT_HI[1])),
        _mm256_set1_epi32(pair(DWT_HI[2], DWT_HI[3])),
    );
    let kl = split_consts(rv, sv, DWT_LO_SUM);
    let kh = split_consts(rv, sv, 0);
    for x in starts(n, 8) {
        prefetch(&ahead, x);
        let v = rows.map(|r| ld_i32x8(&r[x..]));
        let (h01, l01) = row_pairs(v[0], v[1]);
        let (h23, l23) = row_pairs(v[2], v[3]);
        let dot = |p01, p23, a: __m256i, b: __m256i| {
            _mm256_add_epi32(_mm256_madd_epi16(a, p01), _mm256_madd_epi16(b, p23))
        };
        let l = split_fin(&kl, dot(lo01, lo23, h01, h23), dot(lo01, lo23, l01, l23));
        let h = split_fin(&kh, dot(hi01, hi23, h01, h23), dot(hi01, hi23, l01, l23));
        st_i32x8(&mut lo[x..], l);
        st_i32x8(&mut hi[x..], h);
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
    if cpu.has_avx2() && split_ok(rh, sh) {
        // SAFETY: the level proves AVX2.
        return unsafe { dwt123_horiz_avx2(lo, hi, rh, sh, approx, v, h, d) };
    }
    0
}

#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
fn dwt123_horiz_avx2(
    lo: &[i32],
    hi: &[i32],
    rh: i64,
    sh: u32,
    approx: &mut [i32],
    v: &mut [i32],
    h: &mut [i32],
    d: &mut [i32],
) -> usize {
    let (lo01, lo23) = (
        _mm256_set1_epi32(pair(DWT_LO[0], DWT_LO[1])),
        _mm256_set1_epi32(pair(DWT_LO[2], DWT_LO[3])),
    );
    let (hi01, hi23) = (
        _mm256_set1_epi32(pair(DWT_HI[0], DWT_HI[1])),
        _mm256_set1_epi32(pair(DWT_HI[2], DWT_HI[3])),
    );
    let kl = split_consts(rh, sh, DWT_LO_SUM);
    let kh = split_consts(rh, sh, 0);
    // Output j + m reads samples 2(j+m) .. 2(j+m)+3: pairs of the loads at 2j and 2j + 2.
    let both = |x: &[i32], j: usize| {
        let x = &x[2 * j..];
        let (h0, l0) = adjacent_pairs(ld_i32x8(x), ld_i32x8(&x[8..]));
        let (h1, l1) = adjacent_pairs(ld_i32x8(&x[2..]), ld_i32x8(&x[10..]));
        let f = |k: &Split, p01, p23| {
            let a = _mm256_add_epi32(_mm256_madd_epi16(h0, p01), _mm256_madd_epi16(h1, p23));
            let b = _mm256_add_epi32(_mm256_madd_epi16(l0, p01), _mm256_madd_epi16(l1, p23));
            _mm256_permute4x64_epi64::<0xd8>(split_fin(k, a, b))
        };
        (f(&kl, lo01, lo23), f(&kh, hi01, hi23))
    };
    let n = approx.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let (a, vv) = both(lo, j);
        st_i32x8(&mut approx[j..], a);
        st_i32x8(&mut v[j..], vv);
        let (hh, dd) = both(hi, j);
        st_i32x8(&mut h[j..], hh);
        st_i32x8(&mut d[j..], dd);
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Decoupling.

/// The angle test of 8 pixels from their f32-rounded dot product and squared magnitudes:
/// `dp >= 0 && dp * dp >= cos^2 * om * tm` in f64, each value `f32 as f64 / 4096` (the
/// division by a power of two is exact, so a multiplication by its inverse is the same).
/// Returns an all-ones i32 lane where it holds.
#[inline]
#[target_feature(enable = "avx2")]
fn angle8(dp: __m256, om: __m256, tm: __m256) -> __m256i {
    let scale = _mm256_set1_pd(1.0 / 4096.0);
    let cos = _mm256_set1_pd(COS_1DEG_SQ as f64);
    let half = |dp: __m128, om: __m128, tm: __m128| {
        let dp = _mm256_mul_pd(_mm256_cvtps_pd(dp), scale);
        let om = _mm256_mul_pd(_mm256_cvtps_pd(om), scale);
        let tm = _mm256_mul_pd(_mm256_cvtps_pd(tm), scale);
        let pos = _mm256_cmp_pd::<_CMP_GE_OQ>(dp, _mm256_setzero_pd());
        let rhs = _mm256_mul_pd(_mm256_mul_pd(cos, om), tm);
        let ok = _mm256_cmp_pd::<_CMP_GE_OQ>(_mm256_mul_pd(dp, dp), rhs);
        _mm256_castpd_si256(_mm256_and_pd(pos, ok))
    };
    let lo = half(
        _mm256_castps256_ps128(dp),
        _mm256_castps256_ps128(om),
        _mm256_castps256_ps128(tm),
    );
    let hi = half(
        _mm256_extractf128_ps::<1>(dp),
        _mm256_extractf128_ps::<1>(om),
        _mm256_extractf128_ps::<1>(tm),
    );
    let idx = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    let lo = _mm256_permutevar8x32_epi32(lo, idx);
    let hi = _mm256_permutevar8x32_epi32(hi, idx);
    _mm256_permute2x128_si256::<0x20>(lo, hi)
}

/// Enhancement of the restored coefficients `rst` (i32 lanes) where `cond` holds, towards the
/// distorted `t`: `o > 0` ? `min(rst * egl, t)` : `max(rst * egl, t)` in f64, truncated.
/// With `egl == 1` the product is `rst` itself and the integer min/max is the same.
#[inline]
#[target_feature(enable = "avx2")]
fn enhance8(rst: __m256i, o: __m256i, t: __m256i, cond: __m256i, egl: f64) -> __m256i {
    let pos = _mm256_cmpgt_epi32(o, _mm256_setzero_si256());
    let en = if egl == 1.0 {
        _mm256_blendv_epi8(_mm256_max_epi32(rst, t), _mm256_min_epi32(rst, t), pos)
    } else {
        let egl = _mm256_set1_pd(egl);
        let half = |r: __m128i, t: __m128i, p: __m128i| {
            let g = _mm256_mul_pd(_mm256_cvtepi32_pd(r), egl);
            let t = _mm256_cvtepi32_pd(t);
            // MINPD/MAXPD return the second operand unless the first is strictly
            // smaller/greater: exactly `if g < t { g } else { t }` and its mirror.
            let p = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(p));
            let e = _mm256_blendv_pd(_mm256_max_pd(g, t), _mm256_min_pd(g, t), p);
            // In range of i32 (between 0 and t), so truncation is Rust's `as`.
            _mm256_cvttpd_epi32(e)
        };
        let lo = half(
            _mm256_castsi256_si128(rst),
            _mm256_castsi256_si128(t),
            _mm256_castsi256_si128(pos),
        );
        let hi = half(
            _mm256_extracti128_si256::<1>(rst),
            _mm256_extracti128_si256::<1>(t),
            _mm256_extracti128_si256::<1>(pos),
        );
        _mm256_set_m128i(hi, lo)
    };
    _mm256_blendv_epi8(rst, en, cond)
}

/// The gain `k` of pixels whose sign test leaves `kq`: 0 where o and t differ in sign or t is
/// 0 (the scalar quotient is <= 0 there), 32768 where o is 0.
#[inline]
#[target_feature(enable = "avx2")]
fn gain_signs(kq: __m256i, o: __m256i, t: __m256i) -> __m256i {
    let zero = _mm256_setzero_si256();
    let differ = _mm256_srai_epi32::<31>(_mm256_xor_si256(o, t));
    let k = _mm256_andnot_si256(_mm256_or_si256(differ, _mm256_cmpeq_epi32(t, zero)), kq);
    _mm256_blendv_epi8(k, _mm256_set1_epi32(32768), _mm256_cmpeq_epi32(o, zero))
}

/// `if angle && k > 0 && o != 0`: the pixels that get enhanced.
#[inline]
#[target_feature(enable = "avx2")]
fn enhance_cond(angle: __m256i, k: __m256i, o: __m256i) -> __m256i {
    let zero = _mm256_setzero_si256();
    let kpos = _mm256_cmpgt_epi32(k, zero);
    _mm256_andnot_si256(_mm256_cmpeq_epi32(o, zero), _mm256_and_si256(angle, kpos))
}

/// f32 of an i32 dot product of i16 pairs, where i32::MIN stands for +2^31 (the only value
/// that wraps: -32768 * -32768 twice).
#[inline]
#[target_feature(enable = "avx2")]
fn cvt_wrapped(x: __m256i) -> __m256 {
    let min = _mm256_set1_epi32(i32::MIN);
    let f = _mm256_cvtepi32_ps(x);
    _mm256_xor_ps(
        f,
        _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpeq_epi32(x, min), min)),
    )
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
    // An AVX-512 version (16 lanes, mask registers) measured no faster on Zen 4.
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { decouple0_avx2(o, t, egl, r, a) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn decouple0_avx2(
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
    let k32768 = _mm256_set1_epi32(32768);
    for j in starts(n, 8) {
        let ov = o.map(|p| ld_i16x8(&p[j..]));
        let tv = t.map(|p| ld_i16x8(&p[j..]));
        // (h, v) pairs in i32 lanes, pixel order: one madd per dot product (exact, except
        // 2^31 which wraps to i32::MIN, see `cvt_wrapped`).
        let pairs = |h, v| _mm256_set_m128i(_mm_unpackhi_epi16(h, v), _mm_unpacklo_epi16(h, v));
        let (op, tp) = (pairs(ov[0], ov[1]), pairs(tv[0], tv[1]));
        // Squared magnitudes are >= 0: |f32| undoes the wrap.
        let sign = _mm256_set1_ps(-0.0);
        let angle = angle8(
            cvt_wrapped(_mm256_madd_epi16(op, tp)),
            _mm256_andnot_ps(sign, _mm256_cvtepi32_ps(_mm256_madd_epi16(op, op))),
            _mm256_andnot_ps(sign, _mm256_cvtepi32_ps(_mm256_madd_epi16(tp, tp))),
        );
        for b in 0..3 {
            let ob = _mm256_cvtepi16_epi32(ov[b]);
            let tb = _mm256_cvtepi16_epi32(tv[b]);
            let (ao, at) = (_mm256_abs_epi32(ob), _mm256_abs_epi32(tb));
            // With |t| <= |o| the product lut[|o|] * |t| is at most 2^30; with |t| > |o| it
            // is at least 2^30, whose gain clamps to 32768.
            let q = _mm256_mullo_epi32(gather_lut(lut, ao), at);
            let kq = _mm256_srai_epi32::<15>(_mm256_add_epi32(q, _mm256_set1_epi32(16384)));
            let kq = _mm256_blendv_epi8(
                _mm256_min_epi32(kq, k32768),
                k32768,
                _mm256_cmpgt_epi32(at, ao),
            );
            let k = gain_signs(kq, ob, tb);
            let rst = _mm256_mullo_epi32(k, ob);
            let rst = _mm256_srai_epi32::<15>(_mm256_add_epi32(rst, _mm256_set1_epi32(16384)));
            let cond = enhance_cond(angle, k, ob);
            let rst = if _mm256_testz_si256(cond, cond) == 0 {
                enhance8(rst, ob, tb, cond, egl)
            } else {
                rst
            };
            // rst fits in i16; `(t - rst) as i16` is the wrapping i16 difference.
            let r16 = _mm_packs_epi32(
                _mm256_castsi256_si128(rst),
                _mm256_extracti128_si256::<1>(rst),
            );
            st_i16x8(&mut r[b][j..], r16);
            st_i16x8(&mut a[b][j..], _mm_sub_epi16(tv[b], r16));
        }
    }
    n
}

/// Scales 1-3 decoupling of a row. The angle test's int64 dot products: while every
/// coefficient of the 8 pixels is below 2^26, in f64 (exact: products below 2^52, sums below
/// 2^53), whose f32 rounding is the scalar `i64 as f32`; otherwise in i64 lanes and rounded
/// by [`i64_to_f32`].
pub fn decouple123(
    cpu: CpuLevel,
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) -> usize {
    if cpu.has_avx512() {
        // SAFETY: the level proves AVX-512 F, BW, DQ, CD and VL (and AVX2).
        return unsafe { avx512::decouple123(o, t, egl, r, a) };
    }
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { decouple123_avx2(o, t, egl, r, a) };
    }
    0
}

/// Exact i32 -> f64 -> (rounded) f32 of `x * y + z * w` for 4 lanes whose values are < 2^26.
#[inline]
#[target_feature(enable = "avx2")]
fn dot2_f32(x: __m128i, y: __m128i, z: __m128i, w: __m128i) -> __m128 {
    let p = _mm256_mul_pd(_mm256_cvtepi32_pd(x), _mm256_cvtepi32_pd(y));
    let q = _mm256_mul_pd(_mm256_cvtepi32_pd(z), _mm256_cvtepi32_pd(w));
    _mm256_cvtpd_ps(_mm256_add_pd(p, q))
}

/// `x as f32` of 4 i64 lanes (round to nearest, ties to even). |x| below 2^53 converts to f64
/// exactly, so the one rounding is f64 -> f32. Above, |x| >> 11 with the dropped bits ORed
/// into bit 0 (sticky) rounds the same way (the f32 rounding point is far above bit 11), then
/// scales back by 2^11 exactly.
#[inline]
#[target_feature(enable = "avx2")]
fn i64_to_f32(x: __m256i) -> __m128 {
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
    // u < 2^53 to f64 exactly: (2^84 + hi * 2^32) - (2^84 + 2^52) + (2^52 + lo), each step exact.
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
}

#[target_feature(enable = "avx2")]
fn decouple123_avx2(
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
    let k32768_64 = _mm256_set1_epi64x(32768);
    let one64 = _mm256_set1_epi64x(1);
    let low32 = _mm256_set1_epi64x(0xffff_ffff);
    for j in starts(n, 8) {
        let ov = o.map(|p| ld_i32x8(&p[j..]));
        let tv = t.map(|p| ld_i32x8(&p[j..]));
        let mag = _mm256_or_si256(
            _mm256_or_si256(_mm256_abs_epi32(ov[0]), _mm256_abs_epi32(ov[1])),
            _mm256_or_si256(_mm256_abs_epi32(tv[0]), _mm256_abs_epi32(tv[1])),
        );
        // abs(i32::MIN) keeps bit 31, so this also catches it.
        let angle = if _mm256_testz_si256(mag, _mm256_set1_epi32(!((1 << 26) - 1))) != 0 {
            let f32s = |oh, ovv, th, tvv| {
                (
                    dot2_f32(oh, th, ovv, tvv),
                    dot2_f32(oh, oh, ovv, ovv),
                    dot2_f32(th, th, tvv, tvv),
                )
            };
            let lo = |v| _mm256_castsi256_si128(v);
            let hi = |v| _mm256_extracti128_si256::<1>(v);
            let (d0, m0, n0) = f32s(lo(ov[0]), lo(ov[1]), lo(tv[0]), lo(tv[1]));
            let (d1, m1, n1) = f32s(hi(ov[0]), hi(ov[1]), hi(tv[0]), hi(tv[1]));
            angle8(
                _mm256_set_m128(d1, d0),
                _mm256_set_m128(m1, m0),
                _mm256_set_m128(n1, n0),
            )
        } else {
            // Exact int64 sums (wrapping like the scalar code), rounded to f32 as `as` does.
            let dot = |x: __m256i, y: __m256i, z: __m256i, w: __m256i| {
                let e = _mm256_add_epi64(_mm256_mul_epi32(x, y), _mm256_mul_epi32(z, w));
                let o = _mm256_add_epi64(
                    _mm256_mul_epi32(odd(x), odd(y)),
                    _mm256_mul_epi32(odd(z), odd(w)),
                );
                let (e, o) = (i64_to_f32(e), i64_to_f32(o));
                // Even and odd pixels back in order.
                _mm256_set_m128(_mm_unpackhi_ps(e, o), _mm_unpacklo_ps(e, o))
            };
            let (oh, ovv, th, tvv) = (ov[0], ov[1], tv[0], tv[1]);
            angle8(
                dot(oh, th, ovv, tvv),
                dot(oh, oh, ovv, ovv),
                dot(th, th, tvv, tvv),
            )
        };
        for b in 0..3 {
            let (ob, tb) = (ov[b], tv[b]);
            let (ao, at) = (_mm256_abs_epi32(ob), _mm256_abs_epi32(tb));
            // reduce15: |o| >= 2^15 is rounded to 15 significant bits, shift s = bits - 15.
            // floor(log2 |o|) from the exponent of the f32 of |o| >> 8 (exact: < 2^24).
            let small = _mm256_cmpeq_epi32(_mm256_srli_epi32::<15>(ao), _mm256_setzero_si256());
            let e = _mm256_srli_epi32::<23>(_mm256_castps_si256(_mm256_cvtepi32_ps(
                _mm256_srli_epi32::<8>(ao),
            )));
            // s = floor(log2) - 14 = (biased exponent - 127 + 8) - 14.
            let s = _mm256_andnot_si256(small, _mm256_sub_epi32(e, _mm256_set1_epi32(133)));
            // 1 << (s - 1) is 0 for s = 0 (count >= 32).
            let rnd = _mm256_sllv_epi32(
                _mm256_set1_epi32(1),
                _mm256_sub_epi32(s, _mm256_set1_epi32(1)),
            );
            let m = _mm256_srlv_epi32(_mm256_add_epi32(ao, rnd), s);
            let l = gather_lut(lut, m);
            // Same signs: k = min((l * |t| + 2^(14+s)) >> (15+s), 32768) in u64 lanes.
            let kq = |l: __m256i, at: __m256i, s: __m256i| {
                let q = _mm256_mul_epu32(l, at);
                let sh = _mm256_add_epi64(s, _mm256_set1_epi64x(14));
                let q = _mm256_add_epi64(q, _mm256_sllv_epi64(one64, sh));
                let q = _mm256_srlv_epi64(q, _mm256_add_epi64(sh, one64));
                _mm256_blendv_epi8(q, k32768_64, _mm256_cmpgt_epi64(q, k32768_64))
            };
            let ke = kq(l, at, _mm256_and_si256(s, low32));
            let ko = kq(odd(l), odd(at), odd(s));
            let k = gain_signs(low_dwords(ke, ko), ob, tb);
            // ((k * o + 16384) >> 15) as i32 in i64 lanes.
            let rnd = _mm256_set1_epi64x(16384);
            let re = _mm256_srli_epi64::<15>(_mm256_add_epi64(_mm256_mul_epi32(k, ob), rnd));
            let ro =
                _mm256_srli_epi64::<15>(_mm256_add_epi64(_mm256_mul_epi32(odd(k), odd(ob)), rnd));
            let rst = low_dwords(re, ro);
            let cond = enhance_cond(angle, k, ob);
            let rst = if _mm256_testz_si256(cond, cond) == 0 {
                enhance8(rst, ob, tb, cond, egl)
            } else {
                rst
            };
            st_i32x8(&mut r[b][j..], rst);
            st_i32x8(&mut a[b][j..], _mm256_sub_epi32(tb, rst));
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
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { csf0_avx2(src, w, round, shift, dst, flt) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn csf0_avx2(
    src: &[i16],
    w: i32,
    round: i32,
    shift: u32,
    dst: &mut [i16],
    flt: &mut [i16],
) -> usize {
    let (w, round) = (_mm256_set1_epi32(w), _mm256_set1_epi32(round));
    let shift = _mm_cvtsi32_si128(shift as i32);
    let (k4369, k2048) = (_mm256_set1_epi32(4369), _mm256_set1_epi32(2048));
    let one = |s: __m128i| {
        let v = _mm256_mullo_epi32(_mm256_cvtepi16_epi32(s), w);
        let v = _mm256_sra_epi32(_mm256_add_epi32(v, round), shift);
        // as i16, sign-extended again.
        let v = _mm256_srai_epi32::<16>(_mm256_slli_epi32::<16>(v));
        let f = _mm256_mullo_epi32(_mm256_abs_epi32(v), k4369);
        (v, _mm256_srai_epi32::<12>(_mm256_add_epi32(f, k2048)))
    };
    let n = src.len();
    if n < 16 {
        return 0;
    }
    for j in starts(n, 16) {
        let s = ld_i16x16(&src[j..]);
        let (v0, f0) = one(_mm256_castsi256_si128(s));
        let (v1, f1) = one(_mm256_extracti128_si256::<1>(s));
        st_i16x16(&mut dst[j..], pack16(v0, v1));
        let f = trunc_pack_unpacked(f0, f1);
        st_i16x16(&mut flt[j..], _mm256_permute4x64_epi64::<0xd8>(f));
    }
    n
}

/// `(s * w + 2^27) >> 28` as i32, with `w` an unsigned 32-bit weight, in i64 lanes (even
/// dwords of `s`).
#[inline]
#[target_feature(enable = "avx2")]
fn q28(s: __m256i, w: __m256i, w_neg: bool) -> __m256i {
    let mut p = _mm256_mul_epi32(s, w);
    if w_neg {
        // mul_epi32 read w as w - 2^32: add s * 2^32 back.
        p = _mm256_add_epi64(p, _mm256_slli_epi64::<32>(s));
    }
    _mm256_srli_epi64::<28>(_mm256_add_epi64(p, _mm256_set1_epi64x(1 << 27)))
}

/// `((c * |x| - 2^31) >> 32) as i32` for 8 lanes: the high dwords of the i64 results.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_hi_wrapped(x: __m256i, c: i32) -> __m256i {
    let a = _mm256_abs_epi32(x);
    let c = _mm256_set1_epi32(c);
    let bias = _mm256_set1_epi64x(i32::MIN as i64);
    let e = _mm256_add_epi64(_mm256_mul_epu32(a, c), bias);
    let o = _mm256_add_epi64(_mm256_mul_epu32(odd(a), c), bias);
    high_dwords(e, o)
}

/// Scales 1-3 CSF of a row (Q32 weight `w`).
pub fn csf123(cpu: CpuLevel, src: &[i32], w: u32, dst: &mut [i32], flt: &mut [i32]) -> usize {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { csf123_avx2(src, w, dst, flt) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn csf123_avx2(src: &[i32], w: u32, dst: &mut [i32], flt: &mut [i32]) -> usize {
    let (wv, neg) = (_mm256_set1_epi32(w as i32), w > i32::MAX as u32);
    let n = src.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let s = ld_i32x8(&src[j..]);
        let v = low_dwords(q28(s, wv, neg), q28(odd(s), wv, neg));
        st_i32x8(&mut dst[j..], v);
        st_i32x8(&mut flt[j..], mul_hi_wrapped(v, 143165577));
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Denominator.

/// Scale-0 denominator of a row: `sum |c|^3` (u64).
pub fn den0(cpu: CpuLevel, row: &[i16]) -> (u64, usize) {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { den0_avx2(row) };
    }
    (0, 0)
}

#[target_feature(enable = "avx2")]
fn den0_avx2(row: &[i16]) -> (u64, usize) {
    let mut acc = _mm256_setzero_si256();
    let cube = |a: __m128i| {
        let a = _mm256_cvtepu16_epi32(a);
        let sq = _mm256_mullo_epi32(a, a);
        _mm256_add_epi64(_mm256_mul_epu32(sq, a), _mm256_mul_epu32(odd(sq), odd(a)))
    };
    let n = row.len() / 16 * 16;
    for j in (0..n).step_by(16) {
        // |-32768| = 0x8000 read as unsigned.
        let a = _mm256_abs_epi16(ld_i16x16(&row[j..]));
        acc = _mm256_add_epi64(acc, cube(_mm256_castsi256_si128(a)));
        acc = _mm256_add_epi64(acc, cube(_mm256_extracti128_si256::<1>(a)));
    }
    (hsum64(acc), n)
}

/// Scales 1-3 denominator of a row: `sum ((((m*m + 2^ssq) >> ssq) * m + add) >> cube)`.
pub fn den123(cpu: CpuLevel, row: &[i32], ssq: u32, add: u64, cube: u32) -> (u64, usize) {
    if cpu.has_avx2() && ssq < 64 && cube < 64 {
        // SAFETY: the level proves AVX2.
        return unsafe { den123_avx2(row, ssq, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "avx2")]
fn den123_avx2(row: &[i32], ssq: u32, add: u64, cube: u32) -> (u64, usize) {
    let rsq = _mm256_set1_epi64x((1u64 << ssq) as i64);
    let ssq = _mm_cvtsi32_si128(ssq as i32);
    let add = _mm256_set1_epi64x(add as i64);
    let cube = _mm_cvtsi32_si128(cube as i32);
    // m in the even dwords (m <= 2^31): m*m exact; the rounded square has up to 33 bits, so
    // its product with m takes two 32-bit multiplies.
    let one = |m: __m256i| {
        let t = _mm256_srl_epi64(_mm256_add_epi64(_mm256_mul_epu32(m, m), rsq), ssq);
        let p = _mm256_add_epi64(
            _mm256_mul_epu32(t, m),
            _mm256_slli_epi64::<32>(_mm256_mul_epu32(odd(t), m)),
        );
        _mm256_srl_epi64(_mm256_add_epi64(p, add), cube)
    };
    let mut acc = _mm256_setzero_si256();
    let n = row.len() / 8 * 8;
    for j in (0..n).step_by(8) {
        let m = _mm256_abs_epi32(ld_i32x8(&row[j..]));
        acc = _mm256_add_epi64(acc, _mm256_add_epi64(one(m), one(odd(m))));
    }
    (hsum64(acc), n)
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
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { cm_cols0_avx2(fu, fm, fd, dm, col, cen) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn cm_cols0_avx2(
    fu: [&[i16]; 3],
    fm: [&[i16]; 3],
    fd: [&[i16]; 3],
    dm: [&[i16]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    let (k8738, k2048) = (_mm256_set1_epi32(8738), _mm256_set1_epi32(2048));
    let ld = |s: &[i16]| _mm256_cvtepi16_epi32(ld_i16x8(s));
    let n = col.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let mut c = _mm256_setzero_si256();
        let mut e = _mm256_setzero_si256();
        for b in 0..3 {
            let m = ld(&fm[b][j..]);
            c = _mm256_add_epi32(c, _mm256_add_epi32(ld(&fu[b][j..]), ld(&fd[b][j..])));
            c = _mm256_add_epi32(c, m);
            let x = _mm256_mullo_epi32(_mm256_abs_epi32(ld(&dm[b][j..])), k8738);
            let x = _mm256_srai_epi32::<12>(_mm256_add_epi32(x, k2048));
            let x = _mm256_srai_epi32::<16>(_mm256_slli_epi32::<16>(x));
            e = _mm256_add_epi32(e, _mm256_sub_epi32(x, m));
        }
        st_i32x8(&mut col[j..], c);
        st_i32x8(&mut cen[j..], e);
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
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { cm_cols123_avx2(fu, fm, fd, dm, col, cen) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn cm_cols123_avx2(
    fu: [&[i32]; 3],
    fm: [&[i32]; 3],
    fd: [&[i32]; 3],
    dm: [&[i32]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    let n = col.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let mut c = _mm256_setzero_si256();
        let mut e = _mm256_setzero_si256();
        for b in 0..3 {
            let m = ld_i32x8(&fm[b][j..]);
            let ud = _mm256_add_epi32(ld_i32x8(&fu[b][j..]), ld_i32x8(&fd[b][j..]));
            c = _mm256_add_epi32(c, _mm256_add_epi32(ud, m));
            let x = mul_hi_wrapped(ld_i32x8(&dm[b][j..]), 286331153);
            e = _mm256_add_epi32(e, _mm256_sub_epi32(x, m));
        }
        st_i32x8(&mut col[j..], c);
        st_i32x8(&mut cen[j..], e);
    }
    n
}

/// Masking thresholds: `thr[k] = col[k] + col[k+1] + col[k+2] + cen[k]` (`col` starts one
/// column left of `thr`).
pub fn cm_thr(cpu: CpuLevel, col: &[i32], cen: &[i32], thr: &mut [i32]) -> usize {
    if cpu.has_avx2() {
        // SAFETY: the level proves AVX2.
        return unsafe { cm_thr_avx2(col, cen, thr) };
    }
    0
}

#[target_feature(enable = "avx2")]
fn cm_thr_avx2(col: &[i32], cen: &[i32], thr: &mut [i32]) -> usize {
    let n = thr.len();
    if n < 8 {
        return 0;
    }
    for j in starts(n, 8) {
        let a = _mm256_add_epi32(ld_i32x8(&col[j..]), ld_i32x8(&col[j + 1..]));
        let b = _mm256_add_epi32(ld_i32x8(&col[j + 2..]), ld_i32x8(&cen[j..]));
        st_i32x8(&mut thr[j..], _mm256_add_epi32(a, b));
    }
    n
}

/// `sum (xsq * x + add) >> cube` over i64 lanes `p = xsq * x` (|p| < 2^62): the arithmetic
/// shift is done as a logical one on `p + 2^62 >= 0`, whose extra `2^(62 - cube)` per pixel
/// the caller removes.
#[inline]
#[target_feature(enable = "avx2")]
fn cube_shift(p: __m256i, add: __m256i, cube: __m128i) -> __m256i {
    _mm256_srl_epi64(_mm256_add_epi64(p, add), cube)
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
    if cpu.has_avx2() && cube < 62 && (1..63).contains(&k[2]) && (0..32).contains(&k[1]) {
        // SAFETY: the level proves AVX2.
        return unsafe { cm_pix0_avx2(src, thr, k, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "avx2")]
fn cm_pix0_avx2(src: &[i16], thr: &[i32], k: [i32; 3], add: i64, cube: u32) -> (i64, usize) {
    let irf = _mm256_set1_epi32(k[0]);
    let sub = _mm_cvtsi32_si128(k[1]);
    let sq = _mm_cvtsi32_si128(k[2]);
    let rsq = _mm256_set1_epi64x(1i64 << (k[2] - 1));
    let bias = _mm256_set1_epi64x(add + (1i64 << 62));
    let cube_c = _mm_cvtsi32_si128(cube as i32);
    let zero = _mm256_setzero_si256();
    let mut acc = zero;
    let n = src.len() / 8 * 8;
    for j in (0..n).step_by(8) {
        let s = _mm256_cvtepi16_epi32(ld_i16x8(&src[j..]));
        let x = _mm256_abs_epi32(_mm256_mullo_epi32(s, irf));
        let t = _mm256_sll_epi32(ld_i32x8(&thr[j..]), sub);
        let x = _mm256_max_epi32(_mm256_sub_epi32(x, t), zero);
        // x in 0..2^31: unsigned and signed products agree.
        let one = |x: __m256i| {
            let xsq = _mm256_srl_epi64(_mm256_add_epi64(_mm256_mul_epu32(x, x), rsq), sq);
            cube_shift(_mm256_mul_epi32(xsq, x), bias, cube_c)
        };
        acc = _mm256_add_epi64(acc, _mm256_add_epi64(one(x), one(odd(x))));
    }
    let sum = hsum64(acc).wrapping_sub((n as u64).wrapping_mul(1u64 << (62 - cube)));
    (sum as i64, n)
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
    if cpu.has_avx2() && cube < 62 {
        // SAFETY: the level proves AVX2.
        return unsafe { cm_pix123_avx2(src, thr, irf, add, cube) };
    }
    (0, 0)
}

#[target_feature(enable = "avx2")]
fn cm_pix123_avx2(src: &[i32], thr: &[i32], irf: u32, add: i64, cube: u32) -> (i64, usize) {
    let (wv, neg) = (_mm256_set1_epi32(irf as i32), irf > i32::MAX as u32);
    let rsq = _mm256_set1_epi64x(1i64 << 29);
    let bias = _mm256_set1_epi64x(add + (1i64 << 62));
    let cube_c = _mm_cvtsi32_si128(cube as i32);
    let zero = _mm256_setzero_si256();
    let mut acc = zero;
    let n = src.len() / 8 * 8;
    for j in (0..n).step_by(8) {
        let s = ld_i32x8(&src[j..]);
        let x = low_dwords(q28(s, wv, neg), q28(odd(s), wv, neg));
        let x = _mm256_sub_epi32(_mm256_abs_epi32(x), ld_i32x8(&thr[j..]));
        let x = _mm256_max_epi32(x, zero);
        let one = |x: __m256i| {
            let xsq = _mm256_srli_epi64::<30>(_mm256_add_epi64(_mm256_mul_epu32(x, x), rsq));
            cube_shift(_mm256_mul_epi32(xsq, x), bias, cube_c)
        };
        acc = _mm256_add_epi64(acc, _mm256_add_epi64(one(x), one(odd(x))));
    }
    let sum = hsum64(acc).wrapping_sub((n as u64).wrapping_mul(1u64 << (62 - cube)));
    (sum as i64, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::checkasm::Rng;

    /// i64 values whose f32 rounding is delicate: exact ties of the f32 grid at every
    /// magnitude (where an f64 intermediate would double-round), one off either side, the
    /// extremes, and random values of every bit length.
    pub(crate) fn rounding_cases() -> Vec<i64> {
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

    #[target_feature(enable = "avx2")]
    fn convert4(x: [i64; 4]) -> [f32; 4] {
        let f = i64_to_f32(_mm256_setr_epi64x(x[0], x[1], x[2], x[3]));
        [
            f32::from_bits(_mm_extract_ps::<0>(f) as u32),
            f32::from_bits(_mm_extract_ps::<1>(f) as u32),
            f32::from_bits(_mm_extract_ps::<2>(f) as u32),
            f32::from_bits(_mm_extract_ps::<3>(f) as u32),
        ]
    }

    #[test]
    fn i64_to_f32_rounds_like_as() {
        if !CpuLevel::detect().has_avx2() {
            return;
        }
        for c in rounding_cases().chunks(4) {
            let mut x = [0i64; 4];
            x[..c.len()].copy_from_slice(c);
            // SAFETY: AVX2 was detected above.
            let got = unsafe { convert4(x) };
            for (g, v) in got.iter().zip(x) {
                assert_eq!(g.to_bits(), (v as f32).to_bits(), "{v}");
            }
        }
    }
}
