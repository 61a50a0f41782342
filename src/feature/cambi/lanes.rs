//! Vector forms of the `cpu.rs` stages: the same integer and `f32` results, written so that a
//! compiler vectorises them (fixed-size chunks, branch-free selects) and, for the c-values, an
//! update order that touches far fewer histogram cells. `x86.rs` and `aarch64.rs` compile these
//! bodies with their instruction sets enabled and add hand-written kernels where the compiler
//! cannot (gathers). The scalar level never runs this file.

use super::cpu::CValueCtx;
use crate::picture::{PictureData, PlaneRef};

// ---------------------------------------------------------------------------------------------
// Preprocessing
// ---------------------------------------------------------------------------------------------

/// `cpu::preprocess` after validation: samples to 10 bits at `out_w`x`out_h`, then the
/// anti-dithering average below 10-bit encodes. Each row is averaged as soon as the row below
/// it is converted (the average reads a row and the unaveraged row below), while both are in
/// cache.
#[inline(always)]
pub(super) fn preprocess(
    pic: &PictureData,
    dst: &mut [u16],
    stride: usize,
    out_w: usize,
    out_h: usize,
    enc_bitdepth: u32,
) {
    let (in_w, in_h) = (pic.w[0], pic.h[0]);
    let same = in_w == out_w && in_h == out_h;
    let taps = (!same).then(|| {
        (
            super::cpu::decimation_taps(in_w, out_w),
            super::cpu::decimation_taps(in_h, out_h),
        )
    });
    let dither = enc_bitdepth < 10;
    for i in 0..out_h {
        let sy = taps.as_ref().map_or(i, |(_, ys)| ys[i]);
        let xs = taps.as_ref().map(|(xs, _)| &xs[..]);
        convert_row(pic, sy, xs, &mut dst[i * stride..i * stride + out_w]);
        if dither && i > 0 {
            average_rows(dst, stride, out_w, i - 1);
        }
    }
    if dither {
        average_last_row(&mut dst[(out_h - 1) * stride..(out_h - 1) * stride + out_w]);
    }
}

/// Row `sy` of the picture's luma at 10 bits, at the columns `xs` (all when None).
#[inline(always)]
fn convert_row(pic: &PictureData, sy: usize, xs: Option<&[usize]>, out: &mut [u16]) {
    let (in_w, in_stride, bpc) = (pic.w[0], pic.stride[0], pic.bpc);
    match pic.plane(0) {
        PlaneRef::U8(p) => {
            let row = &p[sy * in_stride..sy * in_stride + in_w];
            // Byte planes hold at most 8 bits: always a shift up.
            let shift = 10 - bpc.min(10);
            match xs {
                None => out
                    .iter_mut()
                    .zip(row)
                    .for_each(|(o, &v)| *o = u16::from(v) << shift),
                Some(xs) => out
                    .iter_mut()
                    .zip(xs)
                    .for_each(|(o, &sx)| *o = u16::from(row[sx]) << shift),
            }
        }
        PlaneRef::U16(p) => {
            let row = &p[sy * in_stride..sy * in_stride + in_w];
            // The reference's rescale: shift up, or round-half-up shift down.
            let (up, down) = if bpc >= 10 {
                (0, bpc - 10)
            } else {
                (10 - bpc, 0)
            };
            let round = if down == 0 { 0 } else { 1u32 << (down - 1) };
            let to10 = |v: u16| (((u32::from(v) + round) >> down) << up) as u16;
            match xs {
                None => out.iter_mut().zip(row).for_each(|(o, &v)| *o = to10(v)),
                Some(xs) => out
                    .iter_mut()
                    .zip(xs)
                    .for_each(|(o, &sx)| *o = to10(row[sx])),
            }
        }
    }
}

#[inline(always)]
fn avg4(a: u16, b: u16, c: u16, e: u16) -> u16 {
    ((u32::from(a) + u32::from(b) + u32::from(c) + u32::from(e)) >> 2) as u16
}

#[inline(always)]
fn avg2(a: u16, b: u16) -> u16 {
    ((u32::from(a) + u32::from(b)) >> 1) as u16
}

/// `cpu::anti_dither` of row `i` (not the last) in place, 16 outputs at a time: a chunk reads
/// its inputs (including the next chunk's first column, not yet overwritten) before storing.
#[inline(always)]
fn average_rows(d: &mut [u16], stride: usize, w: usize, i: usize) {
    const N: usize = 16;
    let (top, bottom) = d[i * stride..].split_at_mut(stride);
    let (top, bottom) = (&mut top[..w], &bottom[..w]);
    let mut j = 0;
    while j + N < w {
        let t: [u16; N + 1] = top[j..j + N + 1].try_into().unwrap();
        let b: &[u16; N + 1] = bottom[j..j + N + 1].try_into().unwrap();
        let mut o = [0u16; N];
        for x in 0..N {
            o[x] = avg4(t[x], t[x + 1], b[x], b[x + 1]);
        }
        top[j..j + N].copy_from_slice(&o);
        j += N;
    }
    for j in j..w - 1 {
        top[j] = avg4(top[j], top[j + 1], bottom[j], bottom[j + 1]);
    }
    top[w - 1] = avg2(top[w - 1], bottom[w - 1]);
}

/// `cpu::anti_dither` of the last row in place.
#[inline(always)]
fn average_last_row(last: &mut [u16]) {
    const N: usize = 16;
    let w = last.len();
    let mut j = 0;
    while j + N < w {
        let t: [u16; N + 1] = last[j..j + N + 1].try_into().unwrap();
        let mut o = [0u16; N];
        for x in 0..N {
            o[x] = avg2(t[x], t[x + 1]);
        }
        last[j..j + N].copy_from_slice(&o);
        j += N;
    }
    for j in j..w - 1 {
        last[j] = avg2(last[j], last[j + 1]);
    }
}

// ---------------------------------------------------------------------------------------------
// Flat-area mask
// ---------------------------------------------------------------------------------------------

/// `cpu::spatial_mask` with its 7x7 window (`pad` 3): the column sums slide as in the
/// reference; the 7-wide horizontal sum is taken directly over a zero-padded copy (integers, so
/// the order is free).
#[inline(always)]
pub(super) fn spatial_mask(
    img: &[u16],
    mask: &mut [u16],
    stride: usize,
    w: usize,
    h: usize,
    threshold: u32,
) {
    const PAD: usize = 3;
    // Sums are at most 49: u16 lanes, and a threshold beyond them never passes.
    let threshold = u16::try_from(threshold).unwrap_or(u16::MAX);
    // Plain functions, not closures: a closure would not inherit the caller's instruction
    // sets.
    #[inline(always)]
    fn flat_row(img: &[u16], stride: usize, w: usize, h: usize, r: usize, out: &mut [u16]) {
        let row = &img[r * stride..r * stride + w];
        let out = &mut out[..w];
        if r + 1 < h {
            let below = &img[(r + 1) * stride..(r + 1) * stride + w];
            for c in 0..w - 1 {
                out[c] = u16::from((row[c] == row[c + 1]) & (row[c] == below[c]));
            }
            out[w - 1] = u16::from(row[w - 1] == below[w - 1]);
        } else {
            for c in 0..w - 1 {
                out[c] = u16::from(row[c] == row[c + 1]);
            }
            out[w - 1] = 1;
        }
    }
    #[inline(always)]
    fn add(sum: &mut [u16], flat: &[u16]) {
        sum.iter_mut().zip(flat).for_each(|(s, &f)| *s += f)
    }
    #[inline(always)]
    fn sub(sum: &mut [u16], flat: &[u16]) {
        sum.iter_mut().zip(flat).for_each(|(s, &f)| *s -= f)
    }
    // Column sums with PAD zero columns on both sides.
    let mut col_sum = vec![0u16; w + 2 * PAD];
    let mut flat = vec![0u16; w];
    for r in 0..h.min(PAD + 1) {
        flat_row(img, stride, w, h, r, &mut flat);
        add(&mut col_sum[PAD..PAD + w], &flat);
    }
    for r in 0..h {
        if r > 0 {
            if r + PAD < h {
                flat_row(img, stride, w, h, r + PAD, &mut flat);
                add(&mut col_sum[PAD..PAD + w], &flat);
            }
            if r > PAD {
                flat_row(img, stride, w, h, r - PAD - 1, &mut flat);
                sub(&mut col_sum[PAD..PAD + w], &flat);
            }
        }
        let out = &mut mask[r * stride..r * stride + w];
        let cs = &col_sum[..w + 2 * PAD];
        for (c, m) in out.iter_mut().enumerate() {
            let sum = cs[c] + cs[c + 1] + cs[c + 2] + cs[c + 3] + cs[c + 4] + cs[c + 5] + cs[c + 6];
            *m = u16::from(sum > threshold);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decimation and mode filter
// ---------------------------------------------------------------------------------------------

/// `cpu::decimate` in place, 16 outputs at a time (the NEON form; x86 has its own).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
pub(super) fn decimate(d: &mut [u16], stride: usize, w: usize, h: usize) {
    const N: usize = 16;
    if h == 0 || w == 0 {
        return;
    }
    // Row 0 maps onto itself: each chunk is read (from at or after where it lands) before it
    // is written.
    {
        let row = &mut d[..2 * w - 1];
        let mut j = 0;
        while j + N <= w {
            let s: [u16; 2 * N - 1] = row[2 * j..2 * j + 2 * N - 1].try_into().unwrap();
            let o: [u16; N] = std::array::from_fn(|x| s[2 * x]);
            row[j..j + N].copy_from_slice(&o);
            j += N;
        }
        for j in j..w {
            row[j] = row[2 * j];
        }
    }
    // Row i > 0 reads row 2i > i, which no earlier output row has reached.
    for i in 1..h {
        let (lo, hi) = d.split_at_mut(2 * i * stride);
        let out = &mut lo[i * stride..i * stride + w];
        let src = &hi[..2 * w - 1];
        let mut j = 0;
        while j + N <= w {
            let s: &[u16; 2 * N - 1] = src[2 * j..2 * j + 2 * N - 1].try_into().unwrap();
            let o: &mut [u16; N] = (&mut out[j..j + N]).try_into().unwrap();
            for x in 0..N {
                o[x] = s[2 * x];
            }
            j += N;
        }
        for j in j..w {
            out[j] = src[2 * j];
        }
    }
}

/// `cpu::mode3` without branches: the value that occurs at least twice, else the minimum.
#[inline(always)]
fn mode3(a: u16, b: u16, c: u16) -> u16 {
    let m = a.min(b).min(c);
    let r = if b == c { b } else { m };
    if a == b || a == c {
        a
    } else {
        r
    }
}

/// `cpu::filter_mode`: the same two passes, each a branch-free loop over a row.
#[inline(always)]
pub(super) fn filter_mode(d: &mut [u16], stride: usize, w: usize, h: usize, ring: &mut [u16]) {
    const N: usize = 16;
    let mut cur = 0;
    for i in 0..h {
        {
            let row = &d[i * stride..i * stride + w];
            let out = &mut ring[cur * w..cur * w + w];
            out[0] = row[0];
            let mut j = 1;
            while j + N < w {
                let s: &[u16; N + 2] = row[j - 1..j + N + 1].try_into().unwrap();
                let o: &mut [u16; N] = (&mut out[j..j + N]).try_into().unwrap();
                for x in 0..N {
                    o[x] = mode3(s[x], s[x + 1], s[x + 2]);
                }
                j += N;
            }
            for j in j..w.saturating_sub(1) {
                out[j] = mode3(row[j - 1], row[j], row[j + 1]);
            }
            out[w - 1] = row[w - 1];
        }
        if i > 1 {
            let dst = &mut d[(i - 1) * stride..(i - 1) * stride + w];
            let (r0, rest) = ring.split_at(w);
            let (r1, r2) = rest.split_at(w);
            for (((o, &a), &b), &c) in dst.iter_mut().zip(r0).zip(r1).zip(&r2[..w]) {
                *o = mode3(a, b, c);
            }
        }
        cur = if cur == 2 { 0 } else { cur + 1 };
    }
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

/// `cpu::spatial_pooling`'s mean of the top `k` values, when it provably does not depend on the
/// order quickselect leaves (None otherwise: the caller runs the reference).
///
/// The reference adds the top `k` values in `f64`, in quickselect's order. When at most `k`
/// values are non-zero (and none is negative or not finite), the top `k` are all of them plus
/// zeros, and adding a zero leaves the sum as it is. Each value is a whole multiple of the
/// unit in the last place of the smallest one (`2^(e - 150)` for biased exponent `e`); if the
/// total is below 2^53 such units, every partial sum, in any order, is an exact `f64`, so the
/// reference's sum is the exact total, computed here in integers.
///
/// One pass: each chunk (in cache) is scanned for its count and exponents, then summed in
/// its own units, and the chunk sums are brought to the smallest unit seen so far.
#[inline(always)]
pub(super) fn pooled_exact(cv: &[f32], k: usize) -> Option<f64> {
    const CHUNK: usize = 1024;
    const LIMIT: u64 = 1 << 53;
    let (mut nonzero, mut low, mut total) = (0usize, 255u32, 0u64);
    for c in cv.chunks(CHUNK) {
        // Non-zero count, smallest and largest exponent among them, anything else.
        let (mut nz, mut lo, mut hi, mut bad) = (0u32, 255u32, 0u32, 0u32);
        for &v in c {
            let bits = v.to_bits();
            let mag = bits & 0x7fff_ffff;
            let is_nz = u32::from(mag != 0);
            // Subnormals count in units of exponent 1.
            let e = (mag >> 23).max(1);
            nz += is_nz;
            lo = lo.min(if mag != 0 { e } else { 255 });
            hi = hi.max(e * is_nz);
            // Negative non-zero, infinite or NaN.
            bad |= u32::from(bits > 0x8000_0000) | u32::from(mag >= 0x7f80_0000);
        }
        nonzero += nz as usize;
        // A value of exponent `lo + 30` is at least 2^53 units of `lo` on its own.
        if bad != 0 || nonzero > k || (nz != 0 && hi - lo >= 30) {
            return None;
        }
        if nz == 0 {
            continue;
        }
        // The chunk in units of 2^(lo - 150): terms below 2^53, their sum below 2^63.
        let mut sum = 0u64;
        for &v in c {
            let mag = v.to_bits() & 0x7fff_ffff;
            let e = mag >> 23;
            let significand = (mag & 0x7f_ffff) | (u32::from(e != 0) << 23);
            // Zeros add nothing (their significand is 0); their shift is kept in range.
            let shift = e.max(1).saturating_sub(lo).min(31);
            sum += u64::from(significand) << shift;
        }
        // Both in the smaller unit; every shift below keeps a value under 2^53 or gives up.
        let (small, up_total, up_sum) = if lo < low {
            (lo, low - lo, 0)
        } else {
            (low, 0, lo - low)
        };
        let scale = |v: u64, by: u32| match v {
            0 => Some(0),
            _ => (by < 53 && v < LIMIT >> by).then(|| v << by),
        };
        total = match (scale(total, up_total), scale(sum, up_sum)) {
            (Some(t), Some(s)) if t + s < LIMIT => t + s,
            _ => return None,
        };
        low = small;
    }
    if nonzero == 0 {
        return Some(0.0 / k as f64);
    }
    // 2^(low - 150) is a normal f64; total is exact in f64.
    let unit = f64::from_bits(((i64::from(low) - 150 + 1023) as u64) << 52);
    Some(total as f64 * unit / k as f64)
}

// ---------------------------------------------------------------------------------------------
// c-values
// ---------------------------------------------------------------------------------------------

/// Histogram layout of the vector levels: `nd` zero guard rows on both sides of the
/// `band_size` band rows (so the cells `compact ± step` never need a range test), rows `w`
/// apart, and a few slack cells (32-bit gathers of the last cell read one past it).
pub(super) fn hist_len(band_size: usize, nd: usize, w: usize) -> usize {
    (band_size + 2 * nd) * w + HIST_SLACK
}

const HIST_SLACK: usize = 32;

/// Cells after the last row of the differences and of the histograms that a flush kernel may
/// read and rewrite unchanged.
pub(super) const FLUSH_SLACK: usize = 32;

/// No histogram row (unmasked or out of band).
const NONE: u16 = u16::MAX;
/// Span of a band with no pending update (the first `min` and `max` take the new range).
const IDLE: (u32, u32) = (u32::MAX, 0);
/// Pending updates of one band row merge when their column ranges are at most this far apart
/// (walking a few unchanged cells is cheaper than a separate flush).
const GAP: u32 = 8;

/// Scratch of the c-value pass at the vector levels.
///
/// The reference adds or removes each changed pixel over its `2 pad + 1` columns. Here a row
/// transition's changes are collected per band row in difference form and applied by running
/// sums over the merged range, so neighbouring pixels of one band share the cells they overlap
/// on. A pixel adds 1 to the first differences where its column range starts and -1 after it
/// ends; a run of neighbouring pixels of one band makes runs of such ±1, kept as second
/// differences (4 cells per run, 2 more for ranges clipped at the picture's edges), so the
/// flush takes two running sums. Counts are u16 modulo 2^16 in every form and end as the true
/// window counts, so the cells are identical.
#[derive(Default)]
pub(super) struct Merge {
    /// Per band row: `w + 2` second differences (two past the row's end). All zero between
    /// transitions.
    diff: Vec<i16>,
    /// Per band row: the pending column range `[lo, hi)`, or [`IDLE`].
    span: Vec<(u32, u32)>,
    /// Bands with a pending range, in the order they got one (room for every band).
    touched: Vec<u32>,
    /// Histogram rows of the picture rows in the window and the one leaving it (`2 pad + 2`
    /// rows, row `r` at `r % (2 pad + 2)`), each computed once from the sample and mask rows.
    ring: Vec<u16>,
    /// A row of [`NONE`].
    none: Vec<u16>,
    changed: Vec<u64>,
    same: Vec<u64>,
}

/// The constants of one c-value row, shared by the row kernels (the per-lane threshold test
/// of x86's gather path reads the raw thresholds).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct CvRow<'a> {
    pub(super) w: usize,
    pub(super) nd: usize,
    pub(super) band_base: u16,
    pub(super) band_size: u16,
    pub(super) vlt: u16,
    pub(super) tvi: &'a [u16],
    pub(super) diff_weights: &'a [i32],
    pub(super) lut: &'a [f32],
    /// Per histogram row: bit `d` set when the reference's threshold test for difference `d`
    /// passes for that row's value (it depends on nothing else).
    pub(super) cond: Vec<u32>,
}

/// The c-value of the pixel at column `col` whose histogram row is `compact` (or [`NONE`])
/// from the guarded histograms: the reference's per-pixel loop without its range tests.
#[inline(always)]
pub(super) fn cv_pixel(p: &CvRow, hist: &[u16], compact: u16, col: usize) -> f32 {
    if compact >= p.band_size {
        return 0.0;
    }
    // The sample is `band_base + compact`.
    let w = p.w;
    let at = (usize::from(compact) + p.nd) * w + col;
    let p0 = hist[at];
    let mut c_value = 0.0f32;
    // The differences whose threshold test passes, in order.
    let mut bits = p.cond[usize::from(compact)];
    while bits != 0 {
        let d = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let step = d + 1;
        let p1 = hist[at + step * w];
        let p2 = hist[at - step * w];
        let pm = if p1 > p2 { p1 } else { p2 };
        let num = p.diff_weights[d] * i32::from(p0) * i32::from(pm);
        let val = num as f32 * p.lut[usize::from(pm) + usize::from(p0)];
        if val > c_value {
            c_value = val;
        }
    }
    c_value
}

/// A row of [`cv_pixel`]s (the NEON row; x86 has gather kernels).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
pub(super) fn cv_row(p: &CvRow, hist: &[u16], bands: &[u16], cv: &mut [f32]) {
    for (col, (o, &k)) in cv[..p.w].iter_mut().zip(bands).enumerate() {
        *o = cv_pixel(p, hist, k, col);
    }
}

impl CValueCtx<'_> {
    pub(super) fn cv_row_params(&self) -> CvRow<'_> {
        let s = self.setup;
        let nd = s.tvi.len();
        let cond = (0..s.band_size)
            .map(|k| {
                // The reference's adjusted value: sample + nd, as u16.
                let value = k.wrapping_add(s.band_base).wrapping_add(nd as u16);
                (0..nd).fold(0u32, |bits, d| {
                    let pass = value <= s.tvi[d]
                        && i32::from(value) + d as i32 + 1 > i32::from(s.vlt_luma);
                    bits | u32::from(pass) << d
                })
            })
            .collect();
        CvRow {
            w: self.w,
            nd: s.tvi.len(),
            band_base: s.band_base,
            band_size: s.band_size,
            vlt: s.vlt_luma,
            tvi: &s.tvi,
            diff_weights: &s.diff_weights,
            lut: self.lut,
            cond,
        }
    }
}

/// Histogram row of each pixel of a row, or [`NONE`].
#[inline(always)]
fn band_row(out: &mut [u16], img: &[u16], mask: &[u16], base: u16, size: u16) {
    for ((o, &v), &m) in out.iter_mut().zip(img).zip(mask) {
        let k = v.wrapping_sub(base);
        *o = if (m != 0) & (k < size) { k } else { NONE };
    }
}

/// Applies a band row's pending second differences (cells `lo..hi + 2` of `diff`) to its
/// histogram row (cells `lo..hi` of `hist` change) and clears them. Both slices start at the
/// row and run to the end of their buffers, which leaves [`FLUSH_SLACK`] cells after the last
/// row for vector kernels (which must leave every other cell as it was).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
pub(super) fn flush(diff: &mut [i16], hist: &mut [u16], lo: usize, hi: usize) {
    let (mut d1, mut d0) = (0i16, 0i16);
    for (h, d) in hist[lo..hi].iter_mut().zip(&mut diff[lo..hi]) {
        d1 = d1.wrapping_add(*d);
        d0 = d0.wrapping_add(d1);
        *d = 0;
        *h = h.wrapping_add(d0 as u16);
    }
    diff[hi] = 0;
    diff[hi + 1] = 0;
}

/// For each 64 columns of a row (the last word partial): in `changed`, bit `x` set where band
/// row `this` holds a band that `other` does not (`this[j] != other[j]` and `this[j] !=
/// NONE`); in `same`, bit `x` (`x > 0`) set where `this[j] == this[j - 1]` (bit 0 is 0).
#[inline(always)]
pub(super) fn changed_bits(this: &[u16], other: &[u16], changed: &mut [u64], same: &mut [u64]) {
    let w = this.len();
    for (i, (c, s)) in changed.iter_mut().zip(same.iter_mut()).enumerate() {
        let j0 = i * 64;
        let n = (w - j0).min(64);
        let (t, o) = (&this[j0..j0 + n], &other[j0..j0 + n]);
        *c = t.iter().zip(o).enumerate().fold(0, |acc, (x, (&t, &o))| {
            acc | u64::from((t != o) & (t != NONE)) << x
        });
        *s = t
            .windows(2)
            .enumerate()
            .fold(0, |acc, (x, p)| acc | u64::from(p[0] == p[1]) << (x + 1));
    }
}

/// The band rows' pending ranges of one transition (the borrowed parts of [`Merge`]).
struct Pending<'a> {
    diff: &'a mut [i16],
    span: &'a mut [(u32, u32)],
    touched: &'a mut [u32],
    n_touched: usize,
}

impl Pending<'_> {
    /// The pixels of band row `this[j]` leaving (`delta` -1) or entering (+1) at each column
    /// `j` whose bit is set in `changed`, taken as runs of neighbouring columns of one band
    /// (`same`). A run's column range joins its band's pending range unless they are more than
    /// [`GAP`] apart; then the pending range is applied first.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn events(
        &mut self,
        hist: &mut [u16],
        g: &Geom,
        flush: &mut impl FnMut(&mut [i16], &mut [u16], usize, usize),
        changed: &[u64],
        same: &[u64],
        this: &[u16],
        delta: i16,
    ) {
        let (w, pad, nd) = (g.w, g.pad, g.nd);
        let mut n_touched = self.n_touched;
        for (i, (&ch, &sm)) in changed.iter().zip(same).enumerate() {
            // Columns continuing the run of the column before them.
            let cont = ch & (ch << 1) & sm;
            let mut starts = ch & !cont;
            while starts != 0 {
                let x = starts.trailing_zeros();
                starts &= starts - 1;
                let len = if x == 63 {
                    1
                } else {
                    (!(cont >> (x + 1))).trailing_zeros() + 1
                };
                let j0 = i * 64 + x as usize;
                let j1 = j0 + len as usize;
                let k = usize::from(this[j0]);
                let a = j0.saturating_sub(pad);
                let b = (j1 + pad).min(w);
                let (lo, hi) = self.span[k];
                // The band's first range in this transition: list it (branch-free).
                self.touched[n_touched] = k as u32;
                n_touched += usize::from(lo == IDLE.0);
                let row = k * (w + 2);
                let (a32, b32) = (a as u32, b as u32);
                let apart = (a32 > hi + GAP) | (b32 + GAP < lo);
                self.span[k] = if apart & (lo != IDLE.0) {
                    flush(
                        &mut self.diff[row..],
                        &mut hist[(k + nd) * w..],
                        lo as usize,
                        hi as usize,
                    );
                    (a32, b32)
                } else {
                    (lo.min(a32), hi.max(b32))
                };
                // Column j's range is [max(j - pad, 0), min(j + pad + 1, w)): the run's starts
                // and ends are consecutive first differences, apart from those clipped to 0 and
                // to w. A run of `n` first differences `v` from cell `x` is `v` at `x` and `-v`
                // at `x + n` in second differences. Empty runs touch one cell twice (clamped
                // into the row), which cancels.
                let clip0 = j1.min(pad).saturating_sub(j0);
                let clip_w = j1.saturating_sub(j0.max(w.saturating_sub(pad + 1)));
                let d = &mut self.diff[row..row + w + 2];
                let mut add = |x: usize, v: i16| d[x] = d[x].wrapping_add(v);
                // Clipped runs are rare (picture edges): a branch spares two cache lines.
                if clip0 != 0 {
                    add(0, clip0 as i16 * delta);
                    add(1, -(clip0 as i16) * delta);
                }
                if clip_w != 0 {
                    add(w, -(clip_w as i16) * delta);
                    add(w + 1, clip_w as i16 * delta);
                }
                let starts = (j0 + clip0).saturating_sub(pad);
                add(starts, delta);
                add(j1.saturating_sub(pad), -delta);
                let ends = (j0 + pad + 1).min(w + 1);
                add(ends, -delta);
                add((j1 - clip_w + pad + 1).min(w + 1), delta);
            }
        }
        self.n_touched = n_touched;
    }

    /// Applies every pending range.
    #[inline(always)]
    fn flush_all(
        &mut self,
        hist: &mut [u16],
        g: &Geom,
        flush: &mut impl FnMut(&mut [i16], &mut [u16], usize, usize),
    ) {
        let w = g.w;
        for &k in &self.touched[..self.n_touched] {
            let k = k as usize;
            let (lo, hi) = self.span[k];
            let dr = &mut self.diff[k * (w + 2)..];
            let hr = &mut hist[(k + g.nd) * w..];
            flush(dr, hr, lo as usize, hi as usize);
            self.span[k] = IDLE;
        }
        self.n_touched = 0;
    }
}

impl Merge {
    /// The histogram rows of picture row `r` (in the ring), or of no row.
    fn bands(&self, r: Option<usize>, g: &Geom) -> &[u16] {
        match r {
            Some(r) => &self.ring[(r % (2 * g.pad + 2)) * g.w..][..g.w],
            None => &self.none[..g.w],
        }
    }

    /// Computes picture row `r`'s histogram rows into the ring.
    #[inline(always)]
    fn enter(&mut self, r: usize, g: &Geom) {
        let (w, stride) = (g.w, g.stride);
        band_row(
            &mut self.ring[(r % (2 * g.pad + 2)) * w..][..w],
            &g.img[r * stride..r * stride + w],
            &g.mask[r * stride..r * stride + w],
            g.band_base,
            g.band_size,
        );
    }

    /// Moves the window: removes row `out` and adds row `inn` (either may be absent, `inn`
    /// already in the ring); a column whose two pixels fall in the same band (or in none)
    /// changes nothing. `changed` is [`changed_bits`] and `flush` [`flush`] (or kernels equal
    /// to them).
    #[inline(always)]
    fn transition(
        &mut self,
        hist: &mut [u16],
        g: &Geom,
        out: Option<usize>,
        inn: Option<usize>,
        changed: &mut impl FnMut(&[u16], &[u16], &mut [u64], &mut [u64]),
        flush: &mut impl FnMut(&mut [i16], &mut [u16], usize, usize),
    ) {
        let w = g.w;
        let mut ch = std::mem::take(&mut self.changed);
        let mut sm = std::mem::take(&mut self.same);
        ch.resize(w.div_ceil(64), 0);
        sm.resize(w.div_ceil(64), 0);
        let mut diff = std::mem::take(&mut self.diff);
        let mut span = std::mem::take(&mut self.span);
        let mut touched = std::mem::take(&mut self.touched);
        let mut p = Pending {
            diff: &mut diff,
            span: &mut span,
            touched: &mut touched,
            n_touched: 0,
        };
        let (bo, bi) = (self.bands(out, g), self.bands(inn, g));
        // Removals, then additions, each in column order, visiting only the columns that
        // change.
        for (this, other, delta, present) in
            [(bo, bi, -1, out.is_some()), (bi, bo, 1, inn.is_some())]
        {
            if present {
                changed(this, other, &mut ch, &mut sm);
                p.events(hist, g, flush, &ch, &sm, this, delta);
            }
        }
        p.flush_all(hist, g, flush);
        (self.changed, self.same) = (ch, sm);
        (self.diff, self.span, self.touched) = (diff, span, touched);
    }
}

/// A level's kernels for [`c_values`]: `row` computes a row of c-values from the histograms
/// and the row's histogram rows (as [`cv_row`]), `changed` is [`changed_bits`] and `flush`
/// is [`flush`] (or kernels equal to them).
pub(super) struct CvKernels<R, C, F> {
    pub(super) row: R,
    pub(super) changed: C,
    pub(super) flush: F,
}

/// The picture and geometry of one scale's c-value pass.
struct Geom<'a> {
    img: &'a [u16],
    mask: &'a [u16],
    stride: usize,
    w: usize,
    pad: usize,
    nd: usize,
    band_base: u16,
    band_size: u16,
}

/// `CValueCtx::c_values` with merged histogram updates ([`Merge`]) and the guarded layout of
/// [`hist_len`]; `row` computes one row of c-values like [`cv_row`]. Each row `i` is computed
/// from the counts of rows `[i - pad, i + pad]` within the picture, as in the reference.
#[inline(always)]
pub(super) fn c_values(
    ctx: &CValueCtx,
    m: &mut Merge,
    hist: &mut [u16],
    img: &[u16],
    mask: &[u16],
    cv: &mut [f32],
    kernels: CvKernels<
        impl FnMut(&[u16], &[u16], &mut [f32]),
        impl FnMut(&[u16], &[u16], &mut [u64], &mut [u64]),
        impl FnMut(&mut [i16], &mut [u16], usize, usize),
    >,
) {
    let CvKernels {
        mut row,
        mut changed,
        mut flush,
    } = kernels;
    let (w, h, pad, stride) = (ctx.w, ctx.h, ctx.pad, ctx.stride);
    if w == 0 || h == 0 {
        return;
    }
    let s = ctx.setup;
    let nd = s.tvi.len();
    let band = usize::from(s.band_size);
    hist[..hist_len(band, nd, w)].fill(0);
    // Every transition leaves the differences zero again: only a new buffer is filled.
    if m.diff.len() < band * (w + 2) + FLUSH_SLACK {
        m.diff.clear();
        m.diff.resize(band * (w + 2) + FLUSH_SLACK, 0);
    }
    m.span.clear();
    m.span.resize(band, IDLE);
    m.touched.clear();
    m.touched.resize(band + 1, 0);
    let g = Geom {
        img,
        mask,
        stride,
        w,
        pad,
        nd,
        band_base: s.band_base,
        band_size: s.band_size,
    };
    m.ring.resize((2 * pad + 2) * w, NONE);
    m.none.clear();
    m.none.resize(w, NONE);
    for r in 0..=pad.min(h - 1) {
        m.enter(r, &g);
        m.transition(hist, &g, None, Some(r), &mut changed, &mut flush);
    }
    for i in 0..h {
        if i > 0 {
            let out = i.checked_sub(pad + 1);
            let inn = (i + pad < h).then_some(i + pad);
            if let Some(r) = inn {
                m.enter(r, &g);
            }
            if out.is_some() || inn.is_some() {
                m.transition(hist, &g, out, inn, &mut changed, &mut flush);
            }
        }
        row(hist, m.bands(Some(i), &g), &mut cv[i * w..(i + 1) * w]);
    }
}
