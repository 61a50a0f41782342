//! AVX2 and AVX-512 row kernels of integer motion (see [`super::cpu::sad_rows`] for the driver
//! and the proof that its 32-bit lanes are exact).

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::cpu::{horizontal_one, sad_rows, vertical_one, RowKernels, Sample};
use crate::simd::CpuLevel;

/// [`super::cpu::blurred_diff_sad`] with AVX-512 or AVX2 kernels; `None` when `cpu` has
/// neither or the input leaves the kernels' exact range.
#[allow(clippy::too_many_arguments)]
pub(super) fn blurred_diff_sad<T: Sample>(
    cpu: CpuLevel,
    prev: &[T],
    prev_stride: usize,
    cur: &[T],
    cur_stride: usize,
    w: usize,
    h: usize,
    shift: u32,
) -> Option<u64> {
    if cpu.has_avx512() {
        sad_rows(Avx512(()), prev, prev_stride, cur, cur_stride, w, h, shift)
    } else if cpu.has_avx2() {
        sad_rows(Avx2(()), prev, prev_stride, cur, cur_stride, w, h, shift)
    } else {
        None
    }
}

/// Proof that the CPU runs AVX2: only made after `CpuLevel::has_avx2()`.
#[derive(Clone, Copy)]
pub(super) struct Avx2(());

/// Proof that the CPU runs AVX-512 (F, BW, VL) and AVX2: only made after
/// `CpuLevel::has_avx512()`.
#[derive(Clone, Copy)]
pub(super) struct Avx512(());

impl Avx2 {
    /// The token, when `cpu` runs AVX2.
    #[cfg(test)]
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx2().then_some(Avx2(()))
    }
}

impl Avx512 {
    /// The token, when `cpu` runs AVX-512.
    #[cfg(test)]
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx512().then_some(Avx512(()))
    }
}

impl RowKernels for Avx2 {
    fn diff_u8(self, p: &[u8], c: &[u8], d: &mut [i32]) {
        // SAFETY: an `Avx2` exists only when the CPU runs AVX2.
        unsafe { diff_u8_avx2(p, c, d) }
    }
    fn diff_u16(self, p: &[u16], c: &[u16], d: &mut [i32]) {
        // SAFETY: an `Avx2` exists only when the CPU runs AVX2.
        unsafe { diff_u16_avx2(p, c, d) }
    }
    fn vertical(self, rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
        // SAFETY: an `Avx2` exists only when the CPU runs AVX2.
        unsafe { vertical_avx2(rows, shift, out) }
    }
    fn horizontal(self, ext: &[i32]) -> u32 {
        // SAFETY: an `Avx2` exists only when the CPU runs AVX2.
        unsafe { horizontal_avx2(ext) }
    }
}

impl RowKernels for Avx512 {
    fn diff_u8(self, p: &[u8], c: &[u8], d: &mut [i32]) {
        // SAFETY: an `Avx512` exists only when the CPU runs AVX-512 and AVX2.
        unsafe { diff_u8_avx512(p, c, d) }
    }
    fn diff_u16(self, p: &[u16], c: &[u16], d: &mut [i32]) {
        // SAFETY: an `Avx512` exists only when the CPU runs AVX-512 and AVX2.
        unsafe { diff_u16_avx512(p, c, d) }
    }
    fn vertical(self, rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
        // SAFETY: an `Avx512` exists only when the CPU runs AVX-512 and AVX2.
        unsafe { vertical_avx512(rows, shift, out) }
    }
    fn horizontal(self, ext: &[i32]) -> u32 {
        // SAFETY: an `Avx512` exists only when the CPU runs AVX-512 and AVX2.
        unsafe { horizontal_avx512(ext) }
    }
}

// ---- AVX2 ----

#[inline]
#[target_feature(enable = "avx2")]
fn load8(s: &[i32]) -> __m256i {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 lanes read; unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn store8(d: &mut [i32], v: __m256i) {
    let d = &mut d[..8];
    // SAFETY: `d` holds the 8 lanes written; unaligned store.
    unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), v) }
}

/// 8 bytes widened to 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn load8_u8(s: &[u8]) -> __m256i {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 bytes read; unaligned load.
    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(s.as_ptr().cast()) })
}

/// 8 u16 widened to 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn load8_u16(s: &[u16]) -> __m256i {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 samples read; unaligned load.
    _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(s.as_ptr().cast()) })
}

/// The 5-tap filter in 32-bit lanes: `(Σ F[k]·v[k] + 2^(s-1)) >> s`, computed as
/// `(a + T + 2^(s-2)) >> (s-1)` (see `sad_rows`); `round` holds `2^(s-2)`, `sh` holds `s-1`.
#[inline]
#[target_feature(enable = "avx2")]
fn taps5(v: [__m256i; 5], round: __m256i, sh: __m128i) -> __m256i {
    let a = _mm256_srai_epi32::<1>(_mm256_mullo_epi32(
        _mm256_add_epi32(v[0], v[4]),
        _mm256_set1_epi32(3571),
    ));
    let t = _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_add_epi32(v[1], v[3]), _mm256_set1_epi32(8002)),
        _mm256_mullo_epi32(v[2], _mm256_set1_epi32(13193)),
    );
    _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(a, t), round), sh)
}

/// Wrapping sum of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn hsum8(v: __m256i) -> u32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
    _mm_cvtsi128_si32(s) as u32
}

/// Bitwise OR of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn hor8(v: __m256i) -> u32 {
    let s = _mm_or_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_or_si128(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_or_si128(s, _mm_shuffle_epi32::<1>(s));
    _mm_cvtsi128_si32(s) as u32
}

#[target_feature(enable = "avx2")]
fn diff_u8_avx2(p: &[u8], c: &[u8], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 8 <= w {
        store8(
            &mut d[j..],
            _mm256_sub_epi32(load8_u8(&p[j..]), load8_u8(&c[j..])),
        );
        j += 8;
    }
    for j in j..w {
        d[j] = i32::from(p[j]) - i32::from(c[j]);
    }
}

#[target_feature(enable = "avx2")]
fn diff_u16_avx2(p: &[u16], c: &[u16], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 8 <= w {
        store8(
            &mut d[j..],
            _mm256_sub_epi32(load8_u16(&p[j..]), load8_u16(&c[j..])),
        );
        j += 8;
    }
    for j in j..w {
        d[j] = i32::from(p[j]) - i32::from(c[j]);
    }
}

#[target_feature(enable = "avx2")]
fn vertical_avx2(rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
    let w = out.len();
    let rows = rows.map(|r| &r[..w]);
    let round = _mm256_set1_epi32(1 << (shift - 2));
    let sh = _mm_cvtsi32_si128(shift as i32 - 1);
    let mut mag = _mm256_setzero_si256();
    let mut j = 0;
    while j + 8 <= w {
        let y = taps5(rows.map(|r| load8(&r[j..])), round, sh);
        mag = _mm256_or_si256(mag, _mm256_abs_epi32(y));
        store8(&mut out[j..], y);
        j += 8;
    }
    let mut mag = hor8(mag);
    for j in j..w {
        let y = vertical_one(rows.map(|r| r[j]), shift);
        mag |= y.unsigned_abs();
        out[j] = y;
    }
    mag
}

#[target_feature(enable = "avx2")]
fn horizontal_avx2(ext: &[i32]) -> u32 {
    let w = ext.len() - 4;
    let round = _mm256_set1_epi32(1 << 14);
    let sh = _mm_cvtsi32_si128(15);
    let mut acc = _mm256_setzero_si256();
    let mut j = 0;
    while j + 8 <= w {
        let e = &ext[j..j + 12];
        let v = taps5(std::array::from_fn(|k| load8(&e[k..])), round, sh);
        acc = _mm256_add_epi32(acc, _mm256_abs_epi32(v));
        j += 8;
    }
    let mut sad = hsum8(acc);
    for j in j..w {
        sad = sad.wrapping_add(horizontal_one(&ext[j..]).unsigned_abs());
    }
    sad
}

// ---- AVX-512 ----

#[inline]
#[target_feature(enable = "avx512f")]
fn load16(s: &[i32]) -> __m512i {
    let s = &s[..16];
    // SAFETY: `s` holds the 16 lanes read; unaligned load.
    unsafe { _mm512_loadu_si512(s.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store16(d: &mut [i32], v: __m512i) {
    let d = &mut d[..16];
    // SAFETY: `d` holds the 16 lanes written; unaligned store.
    unsafe { _mm512_storeu_si512(d.as_mut_ptr().cast(), v) }
}

/// 16 bytes widened to 32-bit lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn load16_u8(s: &[u8]) -> __m512i {
    let s = &s[..16];
    // SAFETY: `s` holds the 16 bytes read; unaligned load.
    _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(s.as_ptr().cast()) })
}

/// 16 u16 widened to 32-bit lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn load16_u16(s: &[u16]) -> __m512i {
    let s = &s[..16];
    // SAFETY: `s` holds the 16 samples read; unaligned load.
    _mm512_cvtepu16_epi32(unsafe { _mm256_loadu_si256(s.as_ptr().cast()) })
}

/// [`taps5`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn taps5_512(v: [__m512i; 5], round: __m512i, sh: __m128i) -> __m512i {
    let a = _mm512_srai_epi32::<1>(_mm512_mullo_epi32(
        _mm512_add_epi32(v[0], v[4]),
        _mm512_set1_epi32(3571),
    ));
    let t = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_add_epi32(v[1], v[3]), _mm512_set1_epi32(8002)),
        _mm512_mullo_epi32(v[2], _mm512_set1_epi32(13193)),
    );
    _mm512_sra_epi32(_mm512_add_epi32(_mm512_add_epi32(a, t), round), sh)
}

#[target_feature(enable = "avx512f,avx2")]
fn diff_u8_avx512(p: &[u8], c: &[u8], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 16 <= w {
        store16(
            &mut d[j..],
            _mm512_sub_epi32(load16_u8(&p[j..]), load16_u8(&c[j..])),
        );
        j += 16;
    }
    diff_u8_avx2(&p[j..], &c[j..], &mut d[j..]);
}

#[target_feature(enable = "avx512f,avx2")]
fn diff_u16_avx512(p: &[u16], c: &[u16], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 16 <= w {
        store16(
            &mut d[j..],
            _mm512_sub_epi32(load16_u16(&p[j..]), load16_u16(&c[j..])),
        );
        j += 16;
    }
    diff_u16_avx2(&p[j..], &c[j..], &mut d[j..]);
}

#[target_feature(enable = "avx512f,avx2")]
fn vertical_avx512(rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
    let w = out.len();
    let rows = rows.map(|r| &r[..w]);
    let round = _mm512_set1_epi32(1 << (shift - 2));
    let sh = _mm_cvtsi32_si128(shift as i32 - 1);
    let mut mag = _mm512_setzero_si512();
    let mut j = 0;
    while j + 16 <= w {
        let y = taps5_512(rows.map(|r| load16(&r[j..])), round, sh);
        mag = _mm512_or_si512(mag, _mm512_abs_epi32(y));
        store16(&mut out[j..], y);
        j += 16;
    }
    let mag = _mm512_reduce_or_epi32(mag) as u32;
    mag | vertical_avx2(rows.map(|r| &r[j..]), shift, &mut out[j..])
}

#[target_feature(enable = "avx512f,avx2")]
fn horizontal_avx512(ext: &[i32]) -> u32 {
    let w = ext.len() - 4;
    let round = _mm512_set1_epi32(1 << 14);
    let sh = _mm_cvtsi32_si128(15);
    let mut acc = _mm512_setzero_si512();
    let mut j = 0;
    while j + 16 <= w {
        let e = &ext[j..j + 20];
        let v = taps5_512(std::array::from_fn(|k| load16(&e[k..])), round, sh);
        acc = _mm512_add_epi32(acc, _mm512_abs_epi32(v));
        j += 16;
    }
    // Lane sums wrap like the reference's row sum: addition mod 2^32 in any order.
    let sad = _mm512_reduce_add_epi32(acc) as u32;
    sad.wrapping_add(horizontal_avx2(&ext[j..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::motion::cpu::{blurred_diff_sad, check_row_kernels};

    #[test]
    fn checkasm_row_kernels() {
        for cpu in CpuLevel::available() {
            if let Some(k) = Avx512::new(cpu) {
                check_row_kernels(k, "avx512");
            } else if let Some(k) = Avx2::new(cpu) {
                check_row_kernels(k, "avx2");
            }
        }
    }

    /// The kernels themselves (no fallback) give the reference's SAD on in-range samples at
    /// their largest magnitudes, and refuse samples above the bit depth.
    #[test]
    fn kernels_take_every_in_range_input() {
        let (w, h) = (37, 11);
        for bpc in [9u32, 10, 12, 16] {
            let max = ((1u32 << bpc) - 1) as u16;
            let p: Vec<u16> = (0..w * h)
                .map(|i| if i % 7 < 4 { max } else { 0 })
                .collect();
            let c: Vec<u16> = p.iter().map(|&v| max - v).collect();
            let want = blurred_diff_sad(&p, w, &c, w, w, h, bpc);
            let over: Vec<u16> = p.iter().map(|&v| v | 0x8000).collect();
            for cpu in CpuLevel::available() {
                let got = [
                    Avx2::new(cpu).map(|k| sad_rows(k, &p, w, &c, w, w, h, bpc)),
                    Avx512::new(cpu).map(|k| sad_rows(k, &p, w, &c, w, w, h, bpc)),
                ];
                for g in got.into_iter().flatten() {
                    assert_eq!(g, Some(want), "{bpc}-bit");
                }
                if bpc < 16 {
                    let got = [
                        Avx2::new(cpu).map(|k| sad_rows(k, &over, w, &c, w, w, h, bpc)),
                        Avx512::new(cpu).map(|k| sad_rows(k, &over, w, &c, w, w, h, bpc)),
                    ];
                    for g in got.into_iter().flatten() {
                        assert_eq!(g, None, "{bpc}-bit over range");
                    }
                }
            }
        }
        let p: Vec<u8> = (0..w * h)
            .map(|i| if i % 3 == 0 { 255 } else { 0 })
            .collect();
        let c: Vec<u8> = p.iter().map(|&v| 255 - v).collect();
        let want = blurred_diff_sad(&p, w, &c, w, w, h, 8);
        for cpu in CpuLevel::available() {
            if let Some(k) = Avx2::new(cpu) {
                assert_eq!(sad_rows(k, &p, w, &c, w, w, h, 8), Some(want));
            }
            if let Some(k) = Avx512::new(cpu) {
                assert_eq!(sad_rows(k, &p, w, &c, w, w, h, 8), Some(want));
            }
        }
    }
}

/// Timing of the kernels and the whole SAD per 1080p 8-bit frame, one thread:
/// `cargo test --release --lib motion::x86::bench -- --ignored --nocapture`.
#[cfg(test)]
mod bench {
    use super::*;
    use crate::feature::motion::cpu::blurred_diff_sad;
    use crate::picture::PlaneRef;
    use std::hint::black_box;

    use crate::testutil::checkasm::best_cpu_ms as ms;

    fn kernels<K: RowKernels>(k: K, name: &str, p: &[u8], c: &[u8], w: usize, h: usize) {
        let mut d = vec![0i32; w * 5];
        let mut ext = vec![0i32; w + 4];
        let diff = ms(20, || {
            for y in 0..h {
                k.diff_u8(
                    &p[y * w..][..w],
                    &c[y * w..][..w],
                    &mut d[(y % 5) * w..][..w],
                );
            }
        });
        let vert = ms(20, || {
            for _ in 0..h {
                let rows = std::array::from_fn(|t| &d[t * w..][..w]);
                black_box(k.vertical(rows, 8, &mut ext[2..w + 2]));
            }
        });
        let hor = ms(20, || {
            for _ in 0..h {
                black_box(k.horizontal(&ext));
            }
        });
        let all = ms(20, || {
            black_box(sad_rows(k, p, w, c, w, w, h, 8));
        });
        println!(
            "{name}: diff {diff:.3} ms, vertical {vert:.3} ms, horizontal {hor:.3} ms, whole {all:.3} ms"
        );
    }

    #[test]
    #[ignore]
    fn bench_motion_1080p() {
        let (refs, _) = crate::testutil::load_parity_clip("natural_1920x1080_420p8");
        let (a, b) = (&refs[0], &refs[1]);
        let (w, h) = (a.w[0], a.h[0]);
        let (PlaneRef::U8(pa), PlaneRef::U8(pb)) = (a.plane(0), b.plane(0)) else {
            panic!("8-bit clip");
        };
        let (sa, sb) = (a.stride[0], b.stride[0]);
        let p: Vec<u8> = (0..h).flat_map(|y| pa[y * sa..][..w].to_vec()).collect();
        let c: Vec<u8> = (0..h).flat_map(|y| pb[y * sb..][..w].to_vec()).collect();
        let scalar = ms(10, || {
            black_box(blurred_diff_sad(&p, w, &c, w, w, h, 8));
        });
        println!("scalar: whole {scalar:.3} ms");
        for cpu in CpuLevel::available() {
            if let Some(k) = Avx512::new(cpu) {
                kernels(k, "avx512", &p, &c, w, h);
            } else if let Some(k) = Avx2::new(cpu) {
                kernels(k, "avx2", &p, &c, w, h);
            }
        }
    }
}
