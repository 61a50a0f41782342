//! AVX2 and AVX-512 sums of squared differences (exact: integer sums only change order).

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::cpu::{sse_row_u16, sse_row_u8};
use crate::simd::CpuLevel;

/// [`super::cpu::sse_u8`] with AVX-512 or AVX2; `None` when `cpu` has neither.
pub(super) fn sse_u8(
    cpu: CpuLevel,
    r: &[u8],
    rs: usize,
    d: &[u8],
    ds: usize,
    w: usize,
    h: usize,
) -> Option<u64> {
    let row: fn(&[u8], &[u8]) -> u32 = if cpu.has_avx512() {
        // SAFETY: the CPU runs AVX-512 (and AVX2): `cpu.has_avx512()`.
        |a: &[u8], b: &[u8]| unsafe { sse_row_u8_avx512(a, b) }
    } else if cpu.has_avx2() {
        // SAFETY: the CPU runs AVX2: `cpu.has_avx2()`.
        |a: &[u8], b: &[u8]| unsafe { sse_row_u8_avx2(a, b) }
    } else {
        return None;
    };
    Some(
        (0..h)
            .map(|y| u64::from(row(&r[y * rs..][..w], &d[y * ds..][..w])))
            .sum(),
    )
}

/// [`super::cpu::sse_u16`] with AVX-512 or AVX2; `None` when `cpu` has neither.
pub(super) fn sse_u16(
    cpu: CpuLevel,
    r: &[u16],
    rs: usize,
    d: &[u16],
    ds: usize,
    w: usize,
    h: usize,
) -> Option<u64> {
    let row: fn(&[u16], &[u16]) -> u64 = if cpu.has_avx512() {
        // SAFETY: the CPU runs AVX-512 (and AVX2): `cpu.has_avx512()`.
        |a: &[u16], b: &[u16]| unsafe { sse_row_u16_avx512(a, b) }
    } else if cpu.has_avx2() {
        // SAFETY: the CPU runs AVX2: `cpu.has_avx2()`.
        |a: &[u16], b: &[u16]| unsafe { sse_row_u16_avx2(a, b) }
    } else {
        return None;
    };
    Some(
        (0..h)
            .map(|y| row(&r[y * rs..][..w], &d[y * ds..][..w]))
            .sum(),
    )
}

// ---- AVX2 ----

#[inline]
#[target_feature(enable = "avx2")]
fn load32_u8(s: &[u8]) -> __m256i {
    let s = &s[..32];
    // SAFETY: `s` holds the 32 bytes read; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn load16_u16(s: &[u16]) -> __m256i {
    let s = &s[..16];
    // SAFETY: `s` holds the 16 samples read; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

/// Wrapping sum of the 8 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn hsum_u32(v: __m256i) -> u32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
    _mm_cvtsi128_si32(s) as u32
}

/// Sum of the 4 64-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn hsum_u64(v: __m256i) -> u64 {
    let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si64(s) as u64
}

/// The 8-bit row sum: `|a - b|` in bytes, widened to 16 bits and squared and paired by
/// `madd` (at most 2·255², positive), summed in wrapping 32-bit lanes: equal mod 2^32 to the
/// reference's wrapping row sum.
#[target_feature(enable = "avx2")]
fn sse_row_u8_avx2(a: &[u8], b: &[u8]) -> u32 {
    let w = a.len().min(b.len());
    let zero = _mm256_setzero_si256();
    let mut acc = zero;
    let mut j = 0;
    while j + 32 <= w {
        let (x, y) = (load32_u8(&a[j..]), load32_u8(&b[j..]));
        let e = _mm256_or_si256(_mm256_subs_epu8(x, y), _mm256_subs_epu8(y, x));
        let lo = _mm256_unpacklo_epi8(e, zero);
        let hi = _mm256_unpackhi_epi8(e, zero);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, lo));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(hi, hi));
        j += 32;
    }
    hsum_u32(acc).wrapping_add(sse_row_u8(&a[j..w], &b[j..w]))
}

/// Squares of the 16 u16 lanes of `e`, summed pairwise into the 4 64-bit lanes of `acc`:
/// `mullo`/`mulhi` give each square's 32 bits exactly (any u16, no sign trouble).
#[inline]
#[target_feature(enable = "avx2")]
fn add_squares_u16(acc: __m256i, e: __m256i) -> __m256i {
    let (lo, hi) = (_mm256_mullo_epi16(e, e), _mm256_mulhi_epu16(e, e));
    let low32 = _mm256_set1_epi64x(0xffff_ffff);
    let mut acc = acc;
    for sq in [_mm256_unpacklo_epi16(lo, hi), _mm256_unpackhi_epi16(lo, hi)] {
        acc = _mm256_add_epi64(acc, _mm256_and_si256(sq, low32));
        acc = _mm256_add_epi64(acc, _mm256_srli_epi64::<32>(sq));
    }
    acc
}

/// The row sum of deeper samples: exact `|a - b|` by saturating subtraction both ways, squared
/// into 32 bits, summed in 64-bit lanes.
#[target_feature(enable = "avx2")]
fn sse_row_u16_avx2(a: &[u16], b: &[u16]) -> u64 {
    let w = a.len().min(b.len());
    let mut acc = _mm256_setzero_si256();
    let mut j = 0;
    while j + 16 <= w {
        let (x, y) = (load16_u16(&a[j..]), load16_u16(&b[j..]));
        let e = _mm256_or_si256(_mm256_subs_epu16(x, y), _mm256_subs_epu16(y, x));
        acc = add_squares_u16(acc, e);
        j += 16;
    }
    hsum_u64(acc) + sse_row_u16(&a[j..w], &b[j..w])
}

// ---- AVX-512 ----

#[inline]
#[target_feature(enable = "avx512f")]
fn load64_u8(s: &[u8]) -> __m512i {
    let s = &s[..64];
    // SAFETY: `s` holds the 64 bytes read; unaligned load.
    unsafe { _mm512_loadu_si512(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load32_u16(s: &[u16]) -> __m512i {
    let s = &s[..32];
    // SAFETY: `s` holds the 32 samples read; unaligned load.
    unsafe { _mm512_loadu_si512(s.as_ptr().cast()) }
}

/// [`sse_row_u8_avx2`] on 64 bytes a step.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn sse_row_u8_avx512(a: &[u8], b: &[u8]) -> u32 {
    let w = a.len().min(b.len());
    let zero = _mm512_setzero_si512();
    let mut acc = zero;
    let mut j = 0;
    while j + 64 <= w {
        let (x, y) = (load64_u8(&a[j..]), load64_u8(&b[j..]));
        let e = _mm512_or_si512(_mm512_subs_epu8(x, y), _mm512_subs_epu8(y, x));
        let lo = _mm512_unpacklo_epi8(e, zero);
        let hi = _mm512_unpackhi_epi8(e, zero);
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(lo, lo));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(hi, hi));
        j += 64;
    }
    // Wrapping lane sum, like the reference's row sum.
    (_mm512_reduce_add_epi32(acc) as u32).wrapping_add(sse_row_u8_avx2(&a[j..w], &b[j..w]))
}

/// [`sse_row_u16_avx2`] on 32 samples a step.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn sse_row_u16_avx512(a: &[u16], b: &[u16]) -> u64 {
    let w = a.len().min(b.len());
    let mut acc = _mm512_setzero_si512();
    let low32 = _mm512_set1_epi64(0xffff_ffff);
    let mut j = 0;
    while j + 32 <= w {
        let (x, y) = (load32_u16(&a[j..]), load32_u16(&b[j..]));
        let e = _mm512_or_si512(_mm512_subs_epu16(x, y), _mm512_subs_epu16(y, x));
        let (lo, hi) = (_mm512_mullo_epi16(e, e), _mm512_mulhi_epu16(e, e));
        for sq in [_mm512_unpacklo_epi16(lo, hi), _mm512_unpackhi_epi16(lo, hi)] {
            acc = _mm512_add_epi64(acc, _mm512_and_si512(sq, low32));
            acc = _mm512_add_epi64(acc, _mm512_srli_epi64::<32>(sq));
        }
        j += 32;
    }
    _mm512_reduce_add_epi64(acc) as u64 + sse_row_u16_avx2(&a[j..w], &b[j..w])
}

#[cfg(test)]
mod tests {
    use super::super::cpu::{sse_u16, sse_u8};
    use super::*;
    use crate::testutil::checkasm::{plane, sizes, Rng, CONTENTS};

    #[test]
    fn checkasm_sse() {
        let mut rng = Rng::new(0x9513);
        for cpu in CpuLevel::available().into_iter().skip(1) {
            for (w, h) in sizes(&mut rng, 24) {
                for content in CONTENTS {
                    for bpc in [8u32, 9, 10, 12, 16] {
                        let what = format!("{} {w}x{h} {content:?} {bpc}-bit", cpu.name());
                        let (rs, ds) = (w + rng.below(70), w + rng.below(3) * 32);
                        let r = plane(&mut rng, w, h, rs, bpc, content);
                        let d = plane(&mut rng, w, h, ds, bpc, content);
                        if bpc == 8 {
                            let n =
                                |v: Vec<u16>| v.into_iter().map(|x| x as u8).collect::<Vec<_>>();
                            let (r, d) = (n(r), n(d));
                            let want = sse_u8(&r, rs, &d, ds, w, h);
                            assert_eq!(sse_u8_at(cpu, &r, rs, &d, ds, w, h), want, "sse {what}");
                        } else {
                            let want = sse_u16(&r, rs, &d, ds, w, h);
                            assert_eq!(sse_u16_at(cpu, &r, rs, &d, ds, w, h), want, "sse {what}");
                        }
                    }
                }
            }
        }
    }

    fn sse_u8_at(
        cpu: CpuLevel,
        r: &[u8],
        rs: usize,
        d: &[u8],
        ds: usize,
        w: usize,
        h: usize,
    ) -> u64 {
        super::sse_u8(cpu, r, rs, d, ds, w, h).expect("a SIMD level")
    }

    fn sse_u16_at(
        cpu: CpuLevel,
        r: &[u16],
        rs: usize,
        d: &[u16],
        ds: usize,
        w: usize,
        h: usize,
    ) -> u64 {
        super::sse_u16(cpu, r, rs, d, ds, w, h).expect("a SIMD level")
    }

    /// Rows long enough to wrap the 8-bit row sum, and 16-bit values of any size (also above
    /// the picture's depth): every square of 32 bits.
    #[test]
    fn checkasm_sse_extremes() {
        let mut rng = Rng::new(0xe5);
        for cpu in CpuLevel::available().into_iter().skip(1) {
            // 70000 · 255² > 2^32: the row sum wraps.
            let w = 70_001;
            let r: Vec<u8> = (0..w).map(|i| if i % 3 == 0 { 255 } else { 0 }).collect();
            let d: Vec<u8> = r.iter().map(|&v| 255 - v).collect();
            let want = sse_u8(&r, w, &d, w, w, 1);
            assert_eq!(
                sse_u8_at(cpu, &r, w, &d, w, w, 1),
                want,
                "{} wrap",
                cpu.name()
            );
            for w in [1usize, 15, 16, 17, 31, 32, 33, 100, 1000] {
                let r: Vec<u16> = (0..w).map(|_| rng.next_u32() as u16).collect();
                let d: Vec<u16> = (0..w).map(|i| if i % 2 == 0 { 0 } else { 65535 }).collect();
                let want = sse_u16(&r, w, &d, w, w, 1);
                assert_eq!(
                    sse_u16_at(cpu, &r, w, &d, w, w, 1),
                    want,
                    "{} u16 {w}",
                    cpu.name()
                );
            }
        }
    }
}

/// Timing per 1080p 4:2:0 frame (all three planes), one thread:
/// `cargo test --release --lib psnr::x86::bench -- --ignored --nocapture`.
#[cfg(test)]
mod bench {
    use crate::picture::PixelFormat;
    use crate::simd::CpuLevel;
    use crate::testutil::noise_picture;
    use std::hint::black_box;

    use crate::testutil::checkasm::best_cpu_ms as ms;

    #[test]
    #[ignore]
    fn bench_sse_1080p() {
        for bpc in [8u32, 10] {
            let r = noise_picture(PixelFormat::Yuv420p, bpc, 1920, 1080, 1);
            let d = noise_picture(PixelFormat::Yuv420p, bpc, 1920, 1080, 2);
            for cpu in CpuLevel::available() {
                let best = ms(30, || {
                    for p in 0..3 {
                        black_box(super::super::sse_plane(&r, &d, p, cpu));
                    }
                });
                println!("{bpc}-bit {}: {best:.3} ms", cpu.name());
            }
        }
    }
}
