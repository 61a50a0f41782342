//! cambi at the x86-64 SIMD levels: the vector forms of `lanes.rs` compiled with AVX2 (or
//! AVX-512 where that measured faster: preprocessing and pooling), and explicit AVX2 kernels
//! for the c-value pass (its rows, whose histogram cells and reciprocals are gathers; the
//! changed columns of a window move; the pending histogram updates). The AVX-512 level runs
//! the AVX2 code elsewhere: 512-bit forms measured no faster. Every result equals the scalar
//! reference in `cpu.rs` bit for bit.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::cpu::CValueCtx;
use super::lanes::{self, CvRow, Merge};
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Expands to a dispatcher `$name(cpu, args..) -> bool` that runs `lanes::$name` compiled for
/// AVX2 (at the AVX2 and AVX-512 levels), or returns false when `cpu` allows neither.
macro_rules! dispatch_avx2 {
    ($name:ident, $avx2:ident, ($($arg:ident: $ty:ty),*)) => {
        pub(super) fn $name(cpu: CpuLevel, $($arg: $ty),*) -> bool {
            if cpu.has_avx2() {
                // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
                unsafe { $avx2($($arg),*) };
                true
            } else {
                false
            }
        }

        #[target_feature(enable = "avx2")]
        fn $avx2($($arg: $ty),*) {
            lanes::$name($($arg),*)
        }
    };
}

/// Expands to a dispatcher `$name(cpu, args..) -> bool` that runs `lanes::$name` compiled for
/// AVX-512 or AVX2, or returns false when `cpu` allows neither.
macro_rules! dispatch {
    ($name:ident, $avx2:ident, $avx512:ident, ($($arg:ident: $ty:ty),*)) => {
        pub(super) fn $name(cpu: CpuLevel, $($arg: $ty),*) -> bool {
            if cpu.has_avx512() {
                // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
                unsafe { $avx512($($arg),*) };
                true
            } else if cpu.has_avx2() {
                // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
                unsafe { $avx2($($arg),*) };
                true
            } else {
                false
            }
        }

        #[target_feature(enable = "avx2")]
        fn $avx2($($arg: $ty),*) {
            lanes::$name($($arg),*)
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
        fn $avx512($($arg: $ty),*) {
            lanes::$name($($arg),*)
        }
    };
}

dispatch!(
    preprocess,
    preprocess_avx2,
    preprocess_avx512,
    (
        pic: &PictureData,
        dst: &mut [u16],
        stride: usize,
        out_w: usize,
        out_h: usize,
        enc_bitdepth: u32
    )
);
dispatch_avx2!(
    spatial_mask,
    spatial_mask_avx2,
    (
        img: &[u16],
        mask: &mut [u16],
        stride: usize,
        w: usize,
        h: usize,
        threshold: u32
    )
);
/// `cpu::decimate` with AVX2 when `cpu` allows it (false otherwise).
pub(super) fn decimate(cpu: CpuLevel, d: &mut [u16], stride: usize, w: usize, h: usize) -> bool {
    if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { decimate_avx2(d, stride, w, h) };
        true
    } else {
        false
    }
}

/// `cpu::decimate`, 16 outputs from 32 loaded samples (the even ones, packed). Row 0 maps
/// onto itself: each step loads before it stores, and stores only where it has read. Row
/// `i > 0` reads row `2 i`, which no output row has reached.
#[target_feature(enable = "avx2")]
fn decimate_avx2(d: &mut [u16], stride: usize, w: usize, h: usize) {
    let low = _mm256_set1_epi32(0xffff);
    for i in 0..h {
        let (src, dst) = (2 * i * stride, i * stride);
        let mut j = 0;
        while j + 16 <= w && src + 2 * j + 32 <= d.len() {
            let a = _mm256_and_si256(load16(&d[src + 2 * j..]), low);
            let b = _mm256_and_si256(load16(&d[src + 2 * j + 16..]), low);
            // Packing interleaves 128-bit halves: a[0..4] b[0..4] a[4..8] b[4..8].
            let even = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(a, b));
            store16(&mut d[dst + j..], even);
            j += 16;
        }
        for j in j..w {
            d[dst + j] = d[src + 2 * j];
        }
    }
}
dispatch_avx2!(
    filter_mode,
    filter_mode_avx2,
    (
        d: &mut [u16],
        stride: usize,
        w: usize,
        h: usize,
        ring: &mut [u16]
    )
);

/// `lanes::pooled_exact` at the best x86 level `cpu` allows; None when it allows none or the
/// shortcut does not apply.
pub(super) fn pooled_exact(cpu: CpuLevel, cv: &[f32], k: usize) -> Option<f64> {
    if cpu.has_avx512() {
        // SAFETY: a CpuLevel reports AVX-512 only when this CPU has it (crate::simd).
        unsafe { pooled_exact_avx512(cv, k) }
    } else if cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { pooled_exact_avx2(cv, k) }
    } else {
        None
    }
}

#[target_feature(enable = "avx2")]
fn pooled_exact_avx2(cv: &[f32], k: usize) -> Option<f64> {
    lanes::pooled_exact(cv, k)
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
fn pooled_exact_avx512(cv: &[f32], k: usize) -> Option<f64> {
    lanes::pooled_exact(cv, k)
}

/// `CValueCtx::c_values` with the AVX2 kernels when `ctx.cpu` allows them (AVX2 and AVX-512
/// levels); false otherwise.
pub(super) fn c_values(
    ctx: &CValueCtx,
    m: &mut Merge,
    hist: &mut [u16],
    img: &[u16],
    mask: &[u16],
    cv: &mut [f32],
) -> bool {
    if ctx.cpu.has_avx2() {
        // SAFETY: a CpuLevel reports AVX2 only when this CPU has it (crate::simd).
        unsafe { c_values_avx2(ctx, m, hist, img, mask, cv) };
        true
    } else {
        false
    }
}

#[target_feature(enable = "avx2")]
fn c_values_avx2(
    ctx: &CValueCtx,
    m: &mut Merge,
    hist: &mut [u16],
    img: &[u16],
    mask: &[u16],
    cv: &mut [f32],
) {
    let p = ctx.cv_row_params();
    lanes::c_values(
        ctx,
        m,
        hist,
        img,
        mask,
        cv,
        lanes::CvKernels {
            row: |hist: &[u16], bands: &[u16], cv: &mut [f32]| cv_row_avx2(&p, hist, bands, cv),
            changed: |this: &[u16], other: &[u16], ch: &mut [u64], sm: &mut [u64]| {
                changed_bits_avx2(this, other, ch, sm)
            },
            flush: |diff: &mut [i16], hist: &mut [u16], lo, hi| flush_avx2(diff, hist, lo, hi),
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Loads and gathers: the only memory accesses of the kernels, each checked against its slice.
// ---------------------------------------------------------------------------------------------

/// Eight u16 from the start of `s`, widened to i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn load8_wide(s: &[u16]) -> __m256i {
    let s = &s[..8];
    // SAFETY: `s` holds the 16 bytes read.
    _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(s.as_ptr().cast()) })
}

/// Eight u16 from the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn load8(s: &[u16]) -> __m128i {
    let s = &s[..8];
    // SAFETY: `s` holds the 16 bytes read.
    unsafe { _mm_loadu_si128(s.as_ptr().cast()) }
}

/// u16 cells of a slice fetched by per-lane index. Indices are clamped into the slice first,
/// so any index vector is safe; callers only use lanes whose index was in range anyway.
struct Cells<'a> {
    s: &'a [u16],
    /// Largest index whose 4-byte read (the cell and the one after it) stays in the slice.
    last: i32,
}

impl<'a> Cells<'a> {
    fn new(s: &'a [u16]) -> Self {
        assert!(s.len() >= 2 && s.len() <= i32::MAX as usize);
        Cells {
            s,
            last: (s.len() - 2) as i32,
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn gather8(&self, idx: __m256i) -> __m256i {
        let idx = _mm256_min_epu32(idx, _mm256_set1_epi32(self.last));
        // SAFETY: every lane reads bytes 2i..2i+4 with 0 <= i <= len - 2 (unsigned minimum
        // above), inside the slice.
        let v = unsafe { _mm256_i32gather_epi32::<2>(self.s.as_ptr().cast(), idx) };
        _mm256_and_si256(v, _mm256_set1_epi32(0xffff))
    }
}

/// f32 table entries fetched by per-lane index, clamped into the table like [`Cells`].
struct Table<'a> {
    s: &'a [f32],
    last: i32,
}

impl<'a> Table<'a> {
    fn new(s: &'a [f32]) -> Self {
        assert!(!s.is_empty() && s.len() <= i32::MAX as usize);
        Table {
            s,
            last: (s.len() - 1) as i32,
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn gather8(&self, idx: __m256i) -> __m256 {
        let idx = _mm256_min_epu32(idx, _mm256_set1_epi32(self.last));
        // SAFETY: every lane reads entry i with 0 <= i <= len - 1.
        unsafe { _mm256_i32gather_ps::<4>(self.s.as_ptr(), idx) }
    }
}

/// Sixteen u16 from the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn load16(s: &[u16]) -> __m256i {
    let s = &s[..16];
    // SAFETY: `s` holds the 32 bytes read.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

// ---------------------------------------------------------------------------------------------
// Changed columns of a window transition
// ---------------------------------------------------------------------------------------------

/// Bits of the 32 u16 compares `a[x] == b[x]` (two 16-lane halves), in column order.
#[inline]
#[target_feature(enable = "avx2")]
fn eq_bits32(a0: __m256i, b0: __m256i, a1: __m256i, b1: __m256i) -> u32 {
    let (e0, e1) = (_mm256_cmpeq_epi16(a0, b0), _mm256_cmpeq_epi16(a1, b1));
    // Bytes in 64-bit groups e0[0..8], e1[0..8], e0[8..16], e1[8..16]; put them in order.
    let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(e0, e1));
    _mm256_movemask_epi8(packed) as u32
}

/// `lanes::changed_bits` with 16-lane compares (word 0, whose `same` bits look one column
/// back, and a partial last word by the portable code).
#[target_feature(enable = "avx2")]
fn changed_bits_avx2(this: &[u16], other: &[u16], changed: &mut [u64], same: &mut [u64]) {
    let w = this.len();
    let other = &other[..w];
    let full = w / 64;
    let none = _mm256_set1_epi16(-1);
    lanes::changed_bits(
        &this[..w.min(64)],
        &other[..w.min(64)],
        &mut changed[..1],
        &mut same[..1],
    );
    for i in 1..full {
        let mut words = [0u64; 2];
        for half in 0..2 {
            let j = i * 64 + half * 32;
            let t = [load16(&this[j..]), load16(&this[j + 16..])];
            let o = [load16(&other[j..]), load16(&other[j + 16..])];
            let p = [load16(&this[j - 1..]), load16(&this[j + 15..])];
            let unchanged = eq_bits32(t[0], o[0], t[1], o[1]) | eq_bits32(t[0], none, t[1], none);
            words[0] |= u64::from(!unchanged) << (32 * half);
            words[1] |= u64::from(eq_bits32(t[0], p[0], t[1], p[1])) << (32 * half);
        }
        changed[i] = words[0];
        same[i] = words[1] & !1;
    }
    if full >= 1 && full < changed.len() {
        let j = full * 64;
        lanes::changed_bits(
            &this[j..],
            &other[j..],
            &mut changed[full..],
            &mut same[full..],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Pending histogram updates
// ---------------------------------------------------------------------------------------------

/// Inclusive prefix sums of 16 i16 lanes (wrapping).
#[inline]
#[target_feature(enable = "avx2")]
fn prefix16(x: __m256i) -> __m256i {
    let x = _mm256_add_epi16(x, _mm256_slli_si256::<2>(x));
    let x = _mm256_add_epi16(x, _mm256_slli_si256::<4>(x));
    let x = _mm256_add_epi16(x, _mm256_slli_si256::<8>(x));
    // Each 128-bit half holds its own sums: add the low half's total to the high half.
    let total = _mm256_shuffle_epi32::<0xff>(_mm256_shufflehi_epi16::<0xff>(x));
    _mm256_add_epi16(x, _mm256_permute2x128_si256::<0x08>(total, total))
}

/// Lane 15 of `x` in every lane.
#[inline]
#[target_feature(enable = "avx2")]
fn last16(x: __m256i) -> __m256i {
    let t = _mm256_shuffle_epi32::<0xff>(_mm256_shufflehi_epi16::<0xff>(x));
    _mm256_permute2x128_si256::<0x11>(t, t)
}

/// `lanes::flush`, 16 cells at a time: the two running sums as vector prefix sums carried
/// from one vector to the next. Lanes past the range are read and stored back unchanged
/// (the slices run to the end of their buffers, with `lanes::FLUSH_SLACK` cells to spare).
#[target_feature(enable = "avx2")]
fn flush_avx2(diff: &mut [i16], hist: &mut [u16], lo: usize, hi: usize) {
    let lane = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let (mut d1, mut d0) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut x = lo;
    while x < hi {
        // Lanes of the range: [x, hi).
        let inside = _mm256_cmpgt_epi16(_mm256_set1_epi16((hi - x).min(16) as i16), lane);
        let d = load16_i16(&diff[x..x + 16]);
        let s1 = _mm256_add_epi16(prefix16(_mm256_and_si256(d, inside)), d1);
        let s0 = _mm256_add_epi16(prefix16(s1), d0);
        let h = load16(&hist[x..x + 16]);
        let h = _mm256_blendv_epi8(h, _mm256_add_epi16(h, s0), inside);
        store16(&mut hist[x..x + 16], h);
        store16_i16(&mut diff[x..x + 16], _mm256_andnot_si256(inside, d));
        (d1, d0) = (last16(s1), last16(s0));
        x += 16;
    }
    diff[hi] = 0;
    diff[hi + 1] = 0;
}

/// Sixteen i16 from the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn load16_i16(s: &[i16]) -> __m256i {
    let s = &s[..16];
    // SAFETY: `s` holds the 32 bytes read.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

/// Sixteen u16 to the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn store16(s: &mut [u16], v: __m256i) {
    let s = &mut s[..16];
    // SAFETY: `s` holds the 32 bytes written.
    unsafe { _mm256_storeu_si256(s.as_mut_ptr().cast(), v) }
}

/// Sixteen i16 to the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn store16_i16(s: &mut [i16], v: __m256i) {
    let s = &mut s[..16];
    // SAFETY: `s` holds the 32 bytes written.
    unsafe { _mm256_storeu_si256(s.as_mut_ptr().cast(), v) }
}

// ---------------------------------------------------------------------------------------------
// c-value rows
// ---------------------------------------------------------------------------------------------

/// `lanes::cv_row`, 8 columns at a time: per lane the same integer products, the same `f32`
/// conversion and multiplication, and the same strict `>` running maximum over the diffs.
/// Where all active lanes share one band row, the cells are plain loads instead of gathers.
#[target_feature(enable = "avx2")]
fn cv_row_avx2(p: &CvRow, hist: &[u16], bands: &[u16], cv: &mut [f32]) {
    let w = p.w;
    let (bands, cv) = (&bands[..w], &mut cv[..w]);
    let nd = p.nd;
    let hist = &hist[..lanes::hist_len(usize::from(p.band_size), nd, w)];
    let cells = Cells::new(hist);
    let table = Table::new(p.lut);
    let band = _mm256_set1_epi32(i32::from(p.band_size));
    let ndv = _mm256_set1_epi32(nd as i32);
    // The adjusted value of histogram row k is `band_base + k + nd` (u16).
    let to_value = _mm256_set1_epi32(i32::from(p.band_base) + nd as i32);
    let wv = _mm256_set1_epi32(w as i32);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let low16 = _mm256_set1_epi32(0xffff);
    let mut col = 0;
    while col + 8 <= w {
        // Pixels without a histogram row (most of a picture: `NONE`, sign bit set) are
        // skipped eight at a time.
        let b = load8(&bands[col..col + 8]);
        if _mm_movemask_epi8(b) == 0xffff {
            store8_f32(&mut cv[col..col + 8], _mm256_setzero_ps());
            col += 8;
            continue;
        }
        let compact = _mm256_cvtepu16_epi32(b);
        let valid = _mm256_cmpgt_epi32(band, compact);
        let valid_bits = _mm256_movemask_ps(_mm256_castsi256_ps(valid)) as u32;
        if valid_bits == 0 {
            store8_f32(&mut cv[col..col + 8], _mm256_setzero_ps());
            col += 8;
            continue;
        }
        let kk = _mm256_and_si256(valid, compact);
        let first =
            _mm256_permutevar8x32_epi32(kk, _mm256_set1_epi32(valid_bits.trailing_zeros() as i32));
        let same_bits =
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(kk, first))) as u32;
        let c = if (same_bits | !valid_bits) & 0xff == 0xff {
            // One histogram row for every active lane (the common case: flat areas): its
            // cells are contiguous, and the threshold tests are the same for all lanes.
            let k = _mm256_cvtsi256_si32(first) as usize;
            let row0 = (k + nd) * w + col;
            let p0 = load8_wide(&hist[row0..]);
            let mut c = _mm256_setzero_ps();
            let mut bits = p.cond[k];
            while bits != 0 {
                let d = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let step = d + 1;
                let p1 = load8_wide(&hist[row0 + step * w..]);
                let p2 = load8_wide(&hist[row0 - step * w..]);
                let pm = _mm256_max_epi32(p1, p2);
                // No count `step` away (a flat window): every candidate is 0, which never
                // raises the maximum. Skips the gather.
                if _mm256_testz_si256(pm, pm) != 0 {
                    continue;
                }
                let val = c_term(&table, p.diff_weights[d], p0, pm);
                let gt = _mm256_and_ps(
                    _mm256_cmp_ps::<_CMP_GT_OQ>(val, c),
                    _mm256_castsi256_ps(valid),
                );
                c = _mm256_blendv_ps(c, val, gt);
            }
            c
        } else {
            // Cells by gather, threshold tests per lane.
            let value = _mm256_and_si256(_mm256_add_epi32(compact, to_value), low16);
            let at = _mm256_add_epi32(
                _mm256_mullo_epi32(_mm256_add_epi32(kk, ndv), wv),
                _mm256_add_epi32(_mm256_set1_epi32(col as i32), lane),
            );
            let p0 = cells.gather8(at);
            let mut c = _mm256_setzero_ps();
            for d in 0..nd {
                let step = d + 1;
                // value <= tvi[d] && value + step > vlt
                let cond = _mm256_andnot_si256(
                    _mm256_cmpgt_epi32(value, _mm256_set1_epi32(i32::from(p.tvi[d]))),
                    _mm256_cmpgt_epi32(
                        _mm256_add_epi32(value, _mm256_set1_epi32(step as i32)),
                        _mm256_set1_epi32(i32::from(p.vlt)),
                    ),
                );
                let cond = _mm256_and_si256(cond, valid);
                if _mm256_testz_si256(cond, cond) != 0 {
                    continue;
                }
                let off = _mm256_set1_epi32((step * w) as i32);
                let p1 = cells.gather8(_mm256_add_epi32(at, off));
                let p2 = cells.gather8(_mm256_sub_epi32(at, off));
                let pm = _mm256_max_epi32(p1, p2);
                if _mm256_testz_si256(pm, pm) != 0 {
                    continue;
                }
                let val = c_term(&table, p.diff_weights[d], p0, pm);
                let gt = _mm256_and_ps(
                    _mm256_cmp_ps::<_CMP_GT_OQ>(val, c),
                    _mm256_castsi256_ps(cond),
                );
                c = _mm256_blendv_ps(c, val, gt);
            }
            c
        };
        store8_f32(&mut cv[col..], c);
        col += 8;
    }
    for col in col..w {
        cv[col] = lanes::cv_pixel(p, hist, bands[col], col);
    }
}

/// One difference's candidate c-values: `weight * p0 * p` (i32, exact) as f32, times the
/// reciprocal table's entry for `p + p0`, per lane as the reference computes them.
#[inline]
#[target_feature(enable = "avx2")]
fn c_term(table: &Table, weight: i32, p0: __m256i, p: __m256i) -> __m256 {
    let num = _mm256_mullo_epi32(_mm256_mullo_epi32(_mm256_set1_epi32(weight), p0), p);
    let recip = table.gather8(_mm256_add_epi32(p, p0));
    _mm256_mul_ps(_mm256_cvtepi32_ps(num), recip)
}

/// Eight f32 to the start of `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn store8_f32(s: &mut [f32], v: __m256) {
    let s = &mut s[..8];
    // SAFETY: `s` holds the 32 bytes written.
    unsafe { _mm256_storeu_ps(s.as_mut_ptr(), v) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::checkasm::{sizes, Rng};

    fn avx2() -> bool {
        CpuLevel::available().iter().any(|l| l.has_avx2())
    }

    /// checkasm: `changed_bits_avx2` equals the portable `lanes::changed_bits` on random band
    /// rows (few distinct bands, runs, and rows without a band).
    #[test]
    fn checkasm_cambi_changed_bits() {
        if !avx2() {
            return;
        }
        let mut rng = Rng::new(0xca_0101);
        for (w, _) in sizes(&mut rng, 40) {
            let row = |rng: &mut Rng| -> Vec<u16> {
                let mut v = 0u16;
                (0..w)
                    .map(|_| {
                        if rng.below(4) == 0 {
                            v = [u16::MAX, 0, 1, 2, 500][rng.below(5)];
                        }
                        v
                    })
                    .collect()
            };
            let (this, other) = (row(&mut rng), row(&mut rng));
            let words = w.div_ceil(64);
            let (mut ch, mut sm) = (vec![0u64; words], vec![0u64; words]);
            lanes::changed_bits(&this, &other, &mut ch, &mut sm);
            let (mut ch2, mut sm2) = (vec![!0u64; words], vec![!0u64; words]);
            // SAFETY: some available level has AVX2, so this CPU has it.
            unsafe { changed_bits_avx2(&this, &other, &mut ch2, &mut sm2) };
            assert_eq!((ch2, sm2), (ch, sm), "changed_bits avx2 w {w}");
        }
    }

    /// checkasm: `flush_avx2` equals the portable `lanes::flush` on random pending ranges
    /// (anywhere in a row, up to the buffers' ends), leaving every other cell alone.
    #[test]
    fn checkasm_cambi_flush() {
        if !avx2() {
            return;
        }
        let mut rng = Rng::new(0xca_0102);
        for (w, rows) in sizes(&mut rng, 40) {
            let rows = rows.min(8);
            for _ in 0..8 {
                let k = rng.below(rows);
                let lo = rng.below(w);
                let hi = rng.range(lo + 1, w);
                // Differences: zero outside the pending range, noise in other rows.
                let mut diff: Vec<i16> = (0..rows * (w + 2) + lanes::FLUSH_SLACK)
                    .map(|_| rng.next_u32() as i16)
                    .collect();
                let row = k * (w + 2);
                diff[row..row + w + 2].fill(0);
                for x in lo..hi + 2 {
                    diff[row + x] = (rng.below(9) as i16 - 4) * [1, 1, 33][rng.below(3)];
                }
                let hist: Vec<u16> = (0..rows * w + lanes::FLUSH_SLACK)
                    .map(|_| rng.next_u32() as u16)
                    .collect();
                let (mut d1, mut h1) = (diff.clone(), hist.clone());
                lanes::flush(&mut d1[row..], &mut h1[k * w..], lo, hi);
                let (mut d2, mut h2) = (diff.clone(), hist.clone());
                // SAFETY: some available level has AVX2, so this CPU has it.
                unsafe { flush_avx2(&mut d2[row..], &mut h2[k * w..], lo, hi) };
                assert!(d2 == d1 && h2 == h1, "flush avx2 w {w} [{lo}, {hi})");
            }
        }
    }
}
