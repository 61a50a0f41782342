//! The row pipeline that the SIMD kernels (`x86.rs`, `aarch64.rs`) run under: the reference
//! passes of `cpu.rs` ([`super::cpu::scale_stats`], [`super::cpu::downsample`]) reorganised so
//! that every filter tap is a 16x16->32 multiply-add, with identical results.
//!
//! ## One statistics row
//!
//! The vertical pass writes eight *planes* of 16-bit samples, each padded by half the kernel
//! on both sides like the reference's tmp rows: the two rounded means `t_mu` (u16) and the low
//! and high halves of the three rounded squares `t_sq` (u32), in the order mu1, mu2, xx lo,
//! xx hi, yy lo, yy hi, xy lo, xy hi. Samples are stored *biased*, `v - 2^15` as i16 (see
//! [`bias`]), which is what a signed multiply-add takes. The horizontal pass then needs, per
//! pixel, `Σ c·t_mu` (u32, exact) and `(Σ c·t_sq + 2^15) >> 16`. With `Σ c = 2^16`, a biased
//! plane sums to its true sum minus `2^31` (wrapping), and for the squares
//! `Σ c·t_sq = 2^16·H + L` with `H = Σ c·hi`, `L = Σ c·lo` both below `2^32`, so
//! `(Σ c·t_sq + 2^15) >> 16 = H + ((L + 2^15) >> 16)`: both terms are exact in u32 and so is
//! their sum, which is the reference's value and below `2^32` (shown in `cpu.rs`). Nothing
//! here needs more than 32-bit lanes.
//!
//! Vertical sums of 16-bit input work the same way: `x`, and the low and high halves of `x·x`,
//! `y·y`, `x·y`, biased, give `Σ c·x` and `Σ c·x·x = 2^16·H + L`; the rounding
//! `(v + add) >> s` with `s <= 16` splits as `(H << (16 - s)) + ((L + add) >> s)`. For 8-bit
//! input the kernels fold the symmetric taps first (`k` and `f-1-k`) with `u = x - 128`: sums
//! of two `u` fit i16, `u_a² + u_b² - 2^15` and `u_a·v_a + u_b·v_b - 256` too, and
//! `x² = u² + 256·x - 2^14`, `x·y = u·v + 128·(x + y) - 2^14` bring the folded sums back to the
//! reference's (all arithmetic wrapping u32; every true value fits u32). The rows of `u` are
//! made once per source row ([`I8Rows`]), not once per tap. Plane samples are the low 16 bits
//! of the rounded sums, as the reference's `as u16` keeps them (samples beyond `bpc` bits
//! included).
//!
//! Multiply-add coefficients must be below `2^15`: the only larger one (43728, the centre of
//! the 3-tap kernel) is split in two halves, by [`pair_plan`] and [`tap_plan`].
//!
//! ## The per-pixel step
//!
//! Integer parts are lane-wise copies of the reference's `pixel()`; the `f64` gain arithmetic
//! uses the same operations in the same order (IEEE results are per lane). Conversions: the
//! `sv_sq` value is below `2^31` and either in range or large negative, where the hardware's
//! out-of-range result (`i32::MIN`) and Rust's saturation both clamp to 0; `g·g·σ1²` is
//! non-negative and below `2^51` when `|egl| <= EGL_MAX`, so a truncating conversion is exact
//! (other gain limits, never produced by the option parser, use the reference). NEON's
//! conversions saturate as Rust's `as` does. The step accumulates in 32-bit lanes, which
//! [`SEGMENT`] keeps from overflowing, then in i64.

use super::cpu::{pad_map, Img, LumaSample, Passes, Round, StatParams, VifAccums};
use crate::error::Result;
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Planes of one statistics row.
pub(super) const PLANES: usize = 8;

/// Largest gain limit (in magnitude) the SIMD per-pixel step takes.
pub(super) const EGL_MAX: f64 = 1024.0;

/// Samples after each padded plane row that the kernels' last, partial chunk may read.
const SLACK: usize = 96;

/// Columns per `Kernels::horizontal` call: bounds the kernels' per-lane 32-bit partial sums
/// (at most `SEGMENT / 8` pixels per lane, each adding below `2^17`).
pub(super) const SEGMENT: usize = 4096;

/// A u16 sample as the kernels store it: `v - 2^15` as i16.
#[inline]
pub(super) fn bias(v: u16) -> i16 {
    (v ^ 0x8000) as i16
}

/// The inverse of [`bias`].
#[inline]
pub(super) fn unbias(b: i16) -> u32 {
    u32::from(b as u16 ^ 0x8000)
}

/// The upstream log2 table from entry 32768 on (every index the per-pixel step uses has its
/// top bit set), plus one zero entry so that a 32-bit gather of the last entry stays inside.
pub(super) fn log2_compact() -> &'static [u16] {
    use std::sync::OnceLock;
    static T: OnceLock<Box<[u16]>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = super::log2_table()[32768..].to_vec();
        t.push(0);
        t.into_boxed_slice()
    })
}

/// Most terms of a [`pair_plan`].
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) const MAX_PAIRS: usize = 9;

/// Most terms of a [`tap_plan`].
pub(super) const MAX_TAPS: usize = 18;

/// Horizontal pair plan of a kernel: `len` terms `(o, a, b)` with
/// `Σ_k c_k·t[j+k] = Σ (a·t[j+o] + b·t[j+o+1])` and every `a, b < 2^15`. Plain pairs
/// `(c_0, c_1), (c_2, c_3), ..` when all coefficients allow; else one term per offset with
/// each coefficient split between two terms.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) fn pair_plan(filt: &[u16]) -> ([(usize, i16, i16); MAX_PAIRS], usize) {
    let f = filt.len();
    let mut plan = [(0, 0, 0); MAX_PAIRS];
    let mut len = 0;
    let mut push = |o: usize, a: u16, b: u16| {
        assert!(a < 0x8000 && b < 0x8000, "vif: kernel does not split");
        plan[len] = (o, a as i16, b as i16);
        len += 1;
    };
    if filt.iter().all(|&c| c < 0x8000) {
        for o in (0..f).step_by(2) {
            push(o, filt[o], filt.get(o + 1).copied().unwrap_or(0));
        }
    } else {
        let mut prev_b = 0;
        for o in 0..f - 1 {
            let b = if o + 2 == f {
                filt[o + 1]
            } else {
                filt[o + 1] / 2
            };
            push(o, filt[o] - prev_b, b);
            prev_b = b;
        }
    }
    (plan, len)
}

/// Tap plan of a kernel: `len` terms `(k, c)` whose coefficients sum to `filt[k]` per tap,
/// every `c < 2^15` (a larger coefficient becomes two terms of the same tap).
pub(super) fn tap_plan(filt: &[u16]) -> ([(usize, i16); MAX_TAPS], usize) {
    let mut plan = [(0, 0); MAX_TAPS];
    let mut len = 0;
    for (k, &c) in filt.iter().enumerate() {
        let h = if c < 0x8000 { 0 } else { c / 2 };
        for part in [h, c - h] {
            if part > 0 {
                assert!(part < 0x8000, "vif: kernel does not split");
                plan[len] = (k, part as i16);
                len += 1;
            }
        }
    }
    (plan, len)
}

/// Row kernels of one instruction set. Planes are [`PLANES`] rows of `stride` biased samples
/// in one slice; "fills `n`" means columns `0..n`, `n` the largest multiple of the kernel's
/// chunk not above `w` (the pipeline does the rest with [`vertical_column`] and friends).
pub(super) trait Kernels: Copy {
    /// Vertical statistics of one row of 8-bit input: `r`, `d` hold the rows of each tap (at
    /// least `w` samples each) as `x - 128` (see [`I8Rows`]), written to the planes at
    /// `off + j`. Fills `n`, returned.
    #[allow(clippy::too_many_arguments)]
    fn vertical_u8(
        self,
        r: &[&[i8]],
        d: &[&[i8]],
        filt: &[u16],
        mu: Round,
        w: usize,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize;

    /// [`Kernels::vertical_u8`] of 16-bit input, with square rounding `sq` (shift 1..=16).
    #[allow(clippy::too_many_arguments)]
    fn vertical_u16(
        self,
        r: &[&[u16]],
        d: &[&[u16]],
        filt: &[u16],
        mu: Round,
        sq: Round,
        w: usize,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize;

    /// Horizontal sums and per-pixel statistics of pixels `j0..j1` of a row whose padded
    /// planes are complete (`j0` a multiple of the chunk, `j1 - j0 <= SEGMENT`).
    fn horizontal(
        self,
        planes: &[i16],
        stride: usize,
        filt: &[u16],
        j0: usize,
        j1: usize,
        egl: f64,
    ) -> VifAccums;

    /// Vertical pass of decimation on 8-bit rows: rounded means, biased, into `out[j]`.
    /// Fills `n`, returned.
    fn down_vertical_u8(
        self,
        rows: &[&[u8]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize;

    /// [`Kernels::down_vertical_u8`] of 16-bit rows.
    fn down_vertical_u16(
        self,
        rows: &[&[u16]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize;

    /// Horizontal pass of decimation: `out[oj]` from the padded biased row `tmp` at `2·oj`;
    /// fills a multiple of the kernel's output chunk not above `out.len()`, returned.
    fn down_horizontal(self, tmp: &[i16], filt: &[u16], out: &mut [u16]) -> usize;
}

/// Sample types the pipeline runs on.
pub(super) trait Sample: LumaSample {
    /// What the vertical pass keeps between rows.
    type Rows: Default;

    /// Vertical statistics of the row whose taps read source rows `srcs` (see
    /// [`Kernels::vertical_u8`]); returns the columns filled.
    #[allow(clippy::too_many_arguments)]
    fn vertical<K: Kernels>(
        k: K,
        rows: &mut Self::Rows,
        r: &Img<'_, Self>,
        d: &Img<'_, Self>,
        srcs: &[usize],
        p: &StatParams<'_>,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize;

    fn down_vertical<K: Kernels>(
        k: K,
        rows: &[&[Self]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize;
}

/// Source rows of 8-bit input as `x - 128` (`x ^ 0x80` read as i8), each converted once
/// while the vertical window passes over it: a ring of 17 slots per picture, slot
/// `row % 17` (the rows of one window are at most 16 apart, so they never share a slot).
#[derive(Default)]
pub(super) struct I8Rows {
    r: Vec<Vec<i8>>,
    d: Vec<Vec<i8>>,
    tag: Vec<usize>,
}

/// Slots of [`I8Rows`]: the widest kernel's taps.
const RING: usize = 17;

impl I8Rows {
    /// The biased slots of source row `src` of both pictures.
    fn get(&mut self, r: &Img<'_, u8>, d: &Img<'_, u8>, src: usize) -> usize {
        if self.tag.is_empty() {
            self.r = vec![vec![0; r.w]; RING];
            self.d = vec![vec![0; r.w]; RING];
            self.tag = vec![usize::MAX; RING];
        }
        let slot = src % RING;
        if self.tag[slot] != src {
            for (o, &x) in self.r[slot].iter_mut().zip(r.row(src)) {
                *o = (x ^ 0x80) as i8;
            }
            for (o, &x) in self.d[slot].iter_mut().zip(d.row(src)) {
                *o = (x ^ 0x80) as i8;
            }
            self.tag[slot] = src;
        }
        slot
    }
}

impl Sample for u8 {
    type Rows = I8Rows;

    fn vertical<K: Kernels>(
        k: K,
        rows: &mut I8Rows,
        r: &Img<'_, u8>,
        d: &Img<'_, u8>,
        srcs: &[usize],
        p: &StatParams<'_>,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize {
        // 8-bit squares are not rounded (scale 0 at 8 bits is the only 8-bit pass).
        assert_eq!((p.sq_round.add, p.sq_round.shift), (0, 0));
        assert!(srcs.len() <= RING);
        let slots: Vec<usize> = srcs.iter().map(|&s| rows.get(r, d, s)).collect();
        let rr: Vec<&[i8]> = slots.iter().map(|&s| &rows.r[s][..]).collect();
        let dr: Vec<&[i8]> = slots.iter().map(|&s| &rows.d[s][..]).collect();
        k.vertical_u8(&rr, &dr, p.filt, p.mu_round, r.w, planes, stride, off)
    }

    fn down_vertical<K: Kernels>(
        k: K,
        rows: &[&[u8]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize {
        k.down_vertical_u8(rows, filt, round, w, out)
    }
}

impl Sample for u16 {
    type Rows = ();

    fn vertical<K: Kernels>(
        k: K,
        _: &mut (),
        r: &Img<'_, u16>,
        d: &Img<'_, u16>,
        srcs: &[usize],
        p: &StatParams<'_>,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize {
        let rr: Vec<&[u16]> = srcs.iter().map(|&s| r.row(s)).collect();
        let dr: Vec<&[u16]> = srcs.iter().map(|&s| d.row(s)).collect();
        k.vertical_u16(
            &rr, &dr, p.filt, p.mu_round, p.sq_round, r.w, planes, stride, off,
        )
    }

    fn down_vertical<K: Kernels>(
        k: K,
        rows: &[&[u16]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize {
        k.down_vertical_u16(rows, filt, round, w, out)
    }
}

/// The reference's vertical statistics of column `j`, as the eight biased plane samples.
pub(super) fn vertical_column<T: Copy + Into<u32>>(
    r: &[&[T]],
    d: &[&[T]],
    filt: &[u16],
    mu: Round,
    sq: Round,
    j: usize,
) -> [i16; PLANES] {
    let (mut m1, mut m2) = (0u32, 0u32);
    let (mut xx, mut yy, mut xy) = (0u64, 0u64, 0u64);
    for ((&c, rr), dr) in filt.iter().zip(r).zip(d) {
        let c = u32::from(c);
        let (x, y) = (rr[j].into(), dr[j].into());
        let (cx, cy) = (c * x, c * y);
        m1 += cx;
        m2 += cy;
        xx += u64::from(cx) * u64::from(x);
        yy += u64::from(cy) * u64::from(y);
        xy += u64::from(cx) * u64::from(y);
    }
    let tm = |m: u32| bias(((m + mu.add as u32) >> mu.shift) as u16);
    let ts = |v: u64| ((v + sq.add) >> sq.shift) as u32;
    let (txx, tyy, txy) = (ts(xx), ts(yy), ts(xy));
    let lo = |t: u32| bias(t as u16);
    let hi = |t: u32| bias((t >> 16) as u16);
    [
        tm(m1),
        tm(m2),
        lo(txx),
        hi(txx),
        lo(tyy),
        hi(tyy),
        lo(txy),
        hi(txy),
    ]
}

/// [`super::cpu::scale_stats`] through `k`.
pub(super) fn scale_stats<K: Kernels, T: Sample>(
    k: K,
    r: &Img<'_, T>,
    d: &Img<'_, T>,
    p: &StatParams<'_>,
) -> VifAccums {
    let (w, h) = (r.w, r.h);
    let f = p.filt.len();
    let half = f / 2;
    let col_map = pad_map(w, half);
    let tw = w + 2 * half;
    let stride = (tw + SLACK).next_multiple_of(32);
    let mut planes = vec![0i16; PLANES * stride];
    let mut acc = VifAccums::default();
    let mut rows = T::Rows::default();
    let mut srcs = vec![0; f];
    for i in 0..h {
        for (kk, src) in srcs.iter_mut().enumerate() {
            *src = p.row_map[p.row_pad + i + kk - half];
        }
        let n = <T as Sample>::vertical(k, &mut rows, r, d, &srcs, p, &mut planes, stride, half);
        if n < w {
            let rr: Vec<&[T]> = srcs.iter().map(|&s| r.row(s)).collect();
            let dr: Vec<&[T]> = srcs.iter().map(|&s| d.row(s)).collect();
            for j in n..w {
                let v = vertical_column(&rr, &dr, p.filt, p.mu_round, p.sq_round, j);
                for (q, &v) in v.iter().enumerate() {
                    planes[q * stride + half + j] = v;
                }
            }
        }
        for plane in planes.chunks_exact_mut(stride) {
            for v in (0..half).chain(half + w..tw) {
                plane[v] = plane[half + col_map[v]];
            }
        }
        let mut j0 = 0;
        while j0 < w {
            let j1 = (j0 + SEGMENT).min(w);
            let a = k.horizontal(&planes, stride, p.filt, j0, j1, p.egl);
            acc.num_log += a.num_log;
            acc.den_log += a.den_log;
            acc.num_non_log += a.num_non_log;
            acc.den_non_log += a.den_non_log;
            j0 = j1;
        }
    }
    acc
}

/// [`super::cpu::downsample`] through `k`.
pub(super) fn downsample<K: Kernels, T: Sample>(
    k: K,
    src: &Img<'_, T>,
    filt: &[u16],
    row_map: &[usize],
    row_pad: usize,
    v_round: Round,
) -> Vec<u16> {
    let (w, h) = (src.w, src.h);
    let (ow, oh) = (w / 2, h / 2);
    let f = filt.len();
    let half = f / 2;
    let col_map = pad_map(w, half);
    let tw = w + 2 * half;
    let mut tmp = vec![0i16; (tw + SLACK).next_multiple_of(32)];
    let mut out = vec![0u16; ow * oh];
    let mut rows: Vec<&[T]> = Vec::with_capacity(f);
    for oi in 0..oh {
        let i = 2 * oi;
        rows.clear();
        rows.extend((0..f).map(|kk| src.row(row_map[row_pad + i + kk - half])));
        let n = T::down_vertical(k, &rows, filt, v_round, w, &mut tmp[half..]);
        for j in n..w {
            let a = filt
                .iter()
                .zip(&rows)
                .fold(0u32, |a, (&c, row)| a + u32::from(c) * row[j].into());
            tmp[half + j] = bias(((a + v_round.add as u32) >> v_round.shift) as u16);
        }
        for v in (0..half).chain(half + w..tw) {
            tmp[v] = tmp[half + col_map[v]];
        }
        let orow = &mut out[oi * ow..(oi + 1) * ow];
        let done = k.down_horizontal(&tmp, filt, orow);
        for (oj, o) in orow.iter_mut().enumerate().skip(done) {
            let taps = &tmp[2 * oj..2 * oj + f];
            let a = taps
                .iter()
                .zip(filt)
                .fold(0u32, |a, (&t, &c)| a + u32::from(c) * unbias(t));
            *o = ((a + 32768) >> 16) as u16;
        }
    }
    out
}

/// The pipeline's passes over the kernels `K`.
#[derive(Clone, Copy)]
pub(super) struct Fast<K>(pub(super) K);

impl<K: Kernels> Passes for Fast<K> {
    fn stats<T: Sample>(self, r: &Img<'_, T>, d: &Img<'_, T>, p: &StatParams<'_>) -> VifAccums {
        scale_stats(self.0, r, d, p)
    }

    fn downsample<T: Sample>(
        self,
        src: &Img<'_, T>,
        filt: &[u16],
        row_map: &[usize],
        row_pad: usize,
        v_round: Round,
    ) -> Vec<u16> {
        downsample(self.0, src, filt, row_map, row_pad, v_round)
    }
}

/// `compute_accums` on the SIMD kernels `cpu` allows, or None (use the reference).
pub(super) fn compute(
    cpu: CpuLevel,
    ref_pic: &PictureData,
    dis_pic: &PictureData,
    egl: f64,
    skip_scale0: bool,
) -> Option<Result<[VifAccums; 4]>> {
    if egl.is_nan() || egl.abs() > EGL_MAX {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    return super::x86::compute(cpu, true, ref_pic, dis_pic, egl, skip_scale0);
    #[cfg(target_arch = "aarch64")]
    return super::aarch64::compute(cpu, ref_pic, dis_pic, egl, skip_scale0);
    #[allow(unreachable_code)]
    {
        let _ = (cpu, ref_pic, dis_pic, skip_scale0);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::vif::cpu::FILTERS;

    #[test]
    fn plans_rebuild_the_kernels() {
        for filt in FILTERS {
            let mut from_pairs = vec![0u32; filt.len() + 1];
            let (pairs, np) = pair_plan(filt);
            for &(o, a, b) in &pairs[..np] {
                from_pairs[o] += a as u32;
                from_pairs[o + 1] += b as u32;
            }
            assert_eq!(from_pairs.pop(), Some(0));
            let mut from_taps = vec![0u32; filt.len()];
            let (taps, nt) = tap_plan(filt);
            for &(k, c) in &taps[..nt] {
                from_taps[k] += c as u32;
            }
            let want: Vec<u32> = filt.iter().map(|&c| u32::from(c)).collect();
            assert_eq!(from_pairs, want);
            assert_eq!(from_taps, want);
        }
        // Only the 3-tap kernel needs splitting.
        assert_eq!(pair_plan(FILTERS[3]).1, 2);
        assert_eq!(pair_plan(FILTERS[0]).1, 9);
        assert_eq!(tap_plan(FILTERS[3]).1, 4);
    }

    #[test]
    fn bias_round_trips() {
        for v in [0u16, 1, 0x7fff, 0x8000, 0xffff] {
            assert_eq!(unbias(bias(v)), u32::from(v));
        }
        assert_eq!(log2_compact().len(), 32769);
        assert_eq!(log2_compact()[0], super::super::log2_table()[32768]);
    }
}
