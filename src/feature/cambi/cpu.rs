//! CPU reference of cambi: constants and tables, the visibility thresholds and [`Setup`], then
//! the per-frame stages (preprocessing to 10 bits, flat-area mask, mode filter, c-values,
//! top-k pooling) and the weighted score.

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::feature::c_max;
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

pub(super) const NUM_SCALES: usize = 5;
const SCALE_WEIGHTS: [u32; NUM_SCALES] = [16, 8, 4, 2, 1];
/// Supra-threshold contrast response, indexed by luma difference − 1.
pub(super) const CONTRAST_WEIGHTS: [i32; 32] = [
    1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
];

/// Side of the square over which zero-derivative pixels are counted for the mask.
const MASK_FILTER_SIZE: usize = 7;
/// Inputs with both sides below this are rejected.
pub(super) const MIN_WIDTH_HEIGHT: u32 = 216;
/// Entries of the reciprocal table: covers counts up to a 65x65 window.
pub(super) const RECIPROCAL_LUT_SIZE: usize = 4226;
/// Internal bit depth and its limited ("TV") luma range.
const LUMA_FOOT: i32 = 64;
const LUMA_HEAD: i32 = 940;

/// Upstream's reciprocal table: `1/i` printed with 9 significant digits and read back as an
/// `f32` (42 entries differ from a correctly rounded `1.0f32 / i`, so it is rebuilt this way).
pub(super) fn reciprocal_lut() -> &'static [f32] {
    static LUT: OnceLock<Vec<f32>> = OnceLock::new();
    LUT.get_or_init(|| {
        (0..RECIPROCAL_LUT_SIZE)
            .map(|i| {
                if i == 0 {
                    0.0
                } else {
                    format!("{:.8e}", 1.0 / i as f64)
                        .parse::<f32>()
                        .unwrap_or(0.0)
                }
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Luminance model (visibility thresholds)
// ---------------------------------------------------------------------------------------------

/// Electro-optical transfer function used for the visibility thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Eotf {
    Bt1886,
    Pq,
}

impl Eotf {
    pub(super) fn from_name(s: &str) -> Option<Self> {
        match s {
            "bt1886" => Some(Eotf::Bt1886),
            "pq" => Some(Eotf::Pq),
            _ => None,
        }
    }

    /// Display luminance (cd/m²) of normalised signal `v`.
    fn apply(self, v: f64) -> f64 {
        match self {
            Eotf::Bt1886 => {
                let (gamma, lw, lb) = (2.4f64, 300.0f64, 0.01f64);
                let lw_root = lw.powf(1.0 / gamma);
                let lb_root = lb.powf(1.0 / gamma);
                let a = (lw_root - lb_root).powf(gamma);
                let b = lb_root / (lw_root - lb_root);
                a * c_max(v + b, 0.0).powf(gamma)
            }
            Eotf::Pq => {
                let m1 = 0.1593017578125f64;
                let m2 = 78.84375f64;
                let c1 = 0.8359375f64;
                let c2 = 18.8515625f64;
                let c3 = 18.6875f64;
                let num = v.powf(1.0 / m2) - c1;
                let den = c2 - c3 * v.powf(1.0 / m2);
                10000.0 * (c_max(num, 0.0) / den).powf(1.0 / m1)
            }
        }
    }

    /// Luminance of 10-bit limited-range code value `sample`.
    fn luminance(self, sample: i32) -> f64 {
        let clipped = sample.clamp(LUMA_FOOT, LUMA_HEAD);
        let normalized = f64::from(clipped - LUMA_FOOT) / f64::from(LUMA_HEAD - LUMA_FOOT);
        self.apply(normalized)
    }
}

/// Whether a step of `diff` code values above `sample` is visible.
fn tvi_visible(sample: i32, diff: i32, threshold: f64, eotf: Eotf) -> bool {
    let base = eotf.luminance(sample);
    let stepped = eotf.luminance(sample + diff);
    stepped - base > threshold * base
}

enum Bisect {
    TooSmall,
    Correct,
    TooBig,
}

/// `sample` is the answer when the step is visible there but no longer one code value up.
fn tvi_probe(sample: i32, diff: i32, threshold: f64, eotf: Eotf) -> Bisect {
    if !tvi_visible(sample, diff, threshold, eotf) {
        Bisect::TooBig
    } else if tvi_visible(sample + 1, diff, threshold, eotf) {
        Bisect::TooSmall
    } else {
        Bisect::Correct
    }
}

/// Largest 10-bit code value at which a step of `diff` is still visible (0 when it never is,
/// 1023 when it always is), found by bisection over the limited range.
pub(super) fn tvi_for_diff(diff: i32, threshold: f64, eotf: Eotf) -> Result<i32> {
    let mut foot = LUMA_FOOT;
    let mut head = LUMA_HEAD - diff - 1;
    match tvi_probe(foot, diff, threshold, eotf) {
        Bisect::TooBig => return Ok(0),
        Bisect::Correct => return Ok(foot),
        Bisect::TooSmall => {}
    }
    match tvi_probe(head, diff, threshold, eotf) {
        Bisect::TooSmall => return Ok(1023),
        Bisect::Correct => return Ok(head),
        Bisect::TooBig => {}
    }
    // The interval halves each step; a non-monotonic condition could cycle, so cap it.
    for _ in 0..64 {
        let mid = foot + (head - foot) / 2;
        match tvi_probe(mid, diff, threshold, eotf) {
            Bisect::TooBig => head = mid,
            Bisect::TooSmall => foot = mid,
            Bisect::Correct => return Ok(mid),
        }
    }
    Err(Error::inval(
        "cambi: visibility threshold bisection did not converge",
    ))
}

/// Smallest code value whose luminance reaches `threshold`, or 0 when the range foot does.
pub(super) fn vlt_luma(threshold: f64, eotf: Eotf) -> Result<u16> {
    let mut sample = LUMA_FOOT as u16;
    while eotf.luminance(i32::from(sample)) < threshold {
        sample = sample
            .checked_add(1)
            .ok_or_else(|| Error::inval("cambi: cambi_vis_lum_threshold is never reached"))?;
    }
    Ok(if i32::from(sample) == LUMA_FOOT {
        0
    } else {
        sample
    })
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Everything fixed by the options and the first picture (upstream's `init`).
#[derive(Debug)]
pub(super) struct Setup {
    pub(super) enc_w: usize,
    pub(super) enc_h: usize,
    pub(super) src_w: usize,
    pub(super) src_h: usize,
    pub(super) enc_bitdepth: u32,
    pub(super) window: usize,
    pub(super) src_window: usize,
    pub(super) speedup: bool,
    pub(super) topk: f64,
    /// Contrast weight per luma difference 1..=num_diffs.
    pub(super) diff_weights: Vec<i32>,
    /// Per difference: largest visible code value, plus `num_diffs`.
    pub(super) tvi: Vec<u16>,
    pub(super) vlt_luma: u16,
    /// Histograms only track raw values in `band_base .. band_base + band_size`: other values
    /// can never contribute to a non-zero c-value.
    pub(super) band_base: u16,
    pub(super) band_size: u16,
    /// Working buffer size (the larger of the two resolutions in full-reference mode).
    pub(super) alloc_w: usize,
    pub(super) alloc_h: usize,
}

impl Setup {
    /// Processing size and window of the distorted picture, or of the source (full-reference
    /// mode).
    pub(super) fn geometry(&self, is_src: bool) -> (usize, usize, usize) {
        if is_src {
            (self.src_w, self.src_h, self.src_window)
        } else {
            (self.enc_w, self.enc_h, self.window)
        }
    }
}

/// Upstream's window scaling: 65 is about one degree at 4K; scale by (w + h) / 6000.
pub(super) fn adjust_window(window: u32, w: u32, h: u32, speedup: bool) -> usize {
    let mut ws = ((window.wrapping_mul(w + h) / 375) >> 4) as u16;
    if speedup {
        ws = (ws + 1) >> 1;
    }
    usize::from(ws | 1)
}

// ---------------------------------------------------------------------------------------------
// Preprocessing: luma to 10 bits at the processing resolution
// ---------------------------------------------------------------------------------------------

/// Rejects samples above the picture's bit depth (8- and 16-bit pictures cannot have any).
pub(super) fn validate(pic: &PictureData) -> Result<()> {
    if pic.bpc == 8 || pic.bpc == 16 {
        return Ok(());
    }
    let max = (1u32 << pic.bpc) - 1;
    let (w, h, stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let bad = match pic.plane(0) {
        PlaneRef::U8(p) => (0..h).any(|y| {
            p[y * stride..y * stride + w]
                .iter()
                .any(|&v| u32::from(v) > max)
        }),
        PlaneRef::U16(p) => (0..h).any(|y| {
            p[y * stride..y * stride + w]
                .iter()
                .any(|&v| u32::from(v) > max)
        }),
    };
    if bad {
        return Err(Error::inval(format!(
            "cambi: input has values above the {}-bit maximum {max}",
            pic.bpc
        )));
    }
    Ok(())
}

/// Source positions of upstream's nearest-neighbour decimation along one axis: an `f32`
/// position starting half a step in, advanced by repeated `f32` addition, rounded by
/// truncating `pos + 0.5` in double precision.
pub(super) fn decimation_taps(in_len: usize, out_len: usize) -> Vec<usize> {
    let ratio = in_len as f32 / out_len as f32;
    let mut pos = (f64::from(ratio / 2.0) - 0.5) as f32;
    (0..out_len)
        .map(|_| {
            let src = (f64::from(pos) + 0.5) as i32;
            pos += ratio;
            (src.max(0) as usize).min(in_len - 1)
        })
        .collect()
}

/// Writes the luma of `pic` as 10-bit samples at `out_w`x`out_h` into `dst` (pitch `stride`),
/// then applies the anti-dithering 2x2 average for encodes below 10 bits.
fn preprocess(
    pic: &PictureData,
    dst: &mut [u16],
    stride: usize,
    out_w: usize,
    out_h: usize,
    enc_bitdepth: u32,
    cpu: CpuLevel,
) -> Result<()> {
    validate(pic)?;
    #[cfg(target_arch = "x86_64")]
    if super::x86::preprocess(cpu, pic, dst, stride, out_w, out_h, enc_bitdepth) {
        return Ok(());
    }
    #[cfg(target_arch = "aarch64")]
    if super::aarch64::preprocess(cpu, pic, dst, stride, out_w, out_h, enc_bitdepth) {
        return Ok(());
    }
    let (in_w, in_h, in_stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let bpc = pic.bpc;
    // Rescale a sample to 10 bits: shift up, or round-half-up shift down.
    let to10 = |v: u16| -> u16 {
        if bpc >= 10 {
            let shift = bpc - 10;
            let round = if shift == 0 { 0 } else { 1u32 << (shift - 1) };
            ((u32::from(v) + round) >> shift) as u16
        } else {
            v << (10 - bpc)
        }
    };
    let same = in_w == out_w && in_h == out_h;
    let (xs, ys) = if same {
        ((0..out_w).collect(), (0..out_h).collect())
    } else {
        (decimation_taps(in_w, out_w), decimation_taps(in_h, out_h))
    };
    for (i, &sy) in ys.iter().enumerate() {
        let out = &mut dst[i * stride..i * stride + out_w];
        match pic.plane(0) {
            PlaneRef::U8(p) => {
                let row = &p[sy * in_stride..sy * in_stride + in_w];
                for (o, &sx) in out.iter_mut().zip(&xs) {
                    *o = to10(u16::from(row[sx]));
                }
            }
            PlaneRef::U16(p) => {
                let row = &p[sy * in_stride..sy * in_stride + in_w];
                for (o, &sx) in out.iter_mut().zip(&xs) {
                    *o = to10(row[sx]);
                }
            }
        }
    }
    if enc_bitdepth < 10 {
        anti_dither(dst, stride, out_w, out_h);
    }
    Ok(())
}

/// In-place 2x2 box average (1x2 / 2x1 on the last column / row, last pixel untouched). Each
/// output only reads pixels to its right and below, which are not yet overwritten.
fn anti_dither(d: &mut [u16], stride: usize, w: usize, h: usize) {
    for i in 0..h - 1 {
        let (top, bottom) = d[i * stride..].split_at_mut(stride);
        for j in 0..w - 1 {
            let s = u32::from(top[j])
                + u32::from(top[j + 1])
                + u32::from(bottom[j])
                + u32::from(bottom[j + 1]);
            top[j] = (s >> 2) as u16;
        }
        top[w - 1] = ((u32::from(top[w - 1]) + u32::from(bottom[w - 1])) >> 1) as u16;
    }
    let last = &mut d[(h - 1) * stride..(h - 1) * stride + w];
    for j in 0..w - 1 {
        last[j] = ((u32::from(last[j]) + u32::from(last[j + 1])) >> 1) as u16;
    }
}

// ---------------------------------------------------------------------------------------------
// Banding detection
// ---------------------------------------------------------------------------------------------

fn ceil_log2(n: u32) -> i32 {
    if n == 0 {
        0
    } else {
        (32 - (n - 1).leading_zeros()) as i32
    }
}

/// Count threshold of the flat-area mask, growing slowly with the picture area.
pub(super) fn mask_index(w: usize, h: usize) -> u32 {
    let blocks = ((w >> 6) as u32).wrapping_mul((h >> 6) as u32);
    let f = MASK_FILTER_SIZE as i32;
    u32::from(((f * f + 3 * (ceil_log2(blocks) - 11) - 1) >> 1) as u16)
}

/// Flat-area mask: a pixel is set when more than `mask_index` pixels of the 7x7 square around
/// it (outside counts as zero) equal both their right and lower neighbours (picture edges
/// count as equal).
fn spatial_mask(img: &[u16], mask: &mut [u16], stride: usize, w: usize, h: usize, cpu: CpuLevel) {
    let pad = MASK_FILTER_SIZE / 2;
    let threshold = mask_index(w, h);
    #[cfg(target_arch = "x86_64")]
    if super::x86::spatial_mask(cpu, img, mask, stride, w, h, threshold) {
        return;
    }
    #[cfg(target_arch = "aarch64")]
    if super::aarch64::spatial_mask(cpu, img, mask, stride, w, h, threshold) {
        return;
    }
    let flat_row = |r: usize, out: &mut [u32]| {
        let row = &img[r * stride..r * stride + w];
        let below = (r + 1 < h).then(|| &img[(r + 1) * stride..(r + 1) * stride + w]);
        for c in 0..w {
            let right_eq = c + 1 == w || row[c] == row[c + 1];
            let down_eq = below.is_none_or(|b| row[c] == b[c]);
            out[c] = u32::from(right_eq && down_eq);
        }
    };
    // Vertical window sums per column, slid down the picture.
    let mut col_sum = vec![0u32; w];
    let mut flat = vec![0u32; w];
    let mut prefix = vec![0u32; w + 1];
    for r in 0..h.min(pad + 1) {
        flat_row(r, &mut flat);
        col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s += f);
    }
    for r in 0..h {
        if r > 0 {
            if r + pad < h {
                flat_row(r + pad, &mut flat);
                col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s += f);
            }
            if r > pad {
                flat_row(r - pad - 1, &mut flat);
                col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s -= f);
            }
        }
        for c in 0..w {
            prefix[c + 1] = prefix[c] + col_sum[c];
        }
        let out = &mut mask[r * stride..r * stride + w];
        for (c, m) in out.iter_mut().enumerate() {
            let sum = prefix[(c + pad + 1).min(w)] - prefix[c.saturating_sub(pad)];
            *m = u16::from(sum > threshold);
        }
    }
}

/// In-place 2:1 subsampling in both directions (keeps even rows and columns).
fn decimate(d: &mut [u16], stride: usize, w: usize, h: usize, cpu: CpuLevel) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::decimate(cpu, d, stride, w, h) {
        return;
    }
    #[cfg(target_arch = "aarch64")]
    if super::aarch64::decimate(cpu, d, stride, w, h) {
        return;
    }
    for i in 0..h {
        for j in 0..w {
            d[i * stride + j] = d[2 * i * stride + 2 * j];
        }
    }
}

#[inline]
fn mode3(a: u16, b: u16, c: u16) -> u16 {
    if a == b || a == c {
        a
    } else if b == c {
        b
    } else {
        a.min(b).min(c)
    }
}

/// Separable 3x3 mode filter in place: a horizontal pass (edge columns kept), then a vertical
/// pass over the horizontal results for the interior rows; the first and last rows keep their
/// unfiltered values. `ring` holds three filtered rows.
fn filter_mode(d: &mut [u16], stride: usize, w: usize, h: usize, ring: &mut [u16], cpu: CpuLevel) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::filter_mode(cpu, d, stride, w, h, ring) {
        return;
    }
    #[cfg(target_arch = "aarch64")]
    if super::aarch64::filter_mode(cpu, d, stride, w, h, ring) {
        return;
    }
    let mut cur = 0;
    for i in 0..h {
        {
            let row = &d[i * stride..i * stride + w];
            let out = &mut ring[cur * w..cur * w + w];
            out[0] = row[0];
            for j in 1..w.saturating_sub(1) {
                out[j] = mode3(row[j - 1], row[j], row[j + 1]);
            }
            out[w - 1] = row[w - 1];
        }
        if i > 1 {
            let dst = &mut d[(i - 1) * stride..(i - 1) * stride + w];
            for (j, o) in dst.iter_mut().enumerate() {
                *o = mode3(ring[j], ring[w + j], ring[2 * w + j]);
            }
        }
        cur = if cur == 2 { 0 } else { cur + 1 };
    }
}

/// Per-scale buffers and constants for the c-value pass.
pub(super) struct CValueCtx<'a> {
    pub(super) setup: &'a Setup,
    pub(super) lut: &'a [f32],
    pub(super) stride: usize,
    pub(super) w: usize,
    pub(super) h: usize,
    pub(super) pad: usize,
    pub(super) cpu: CpuLevel,
}

impl CValueCtx<'_> {
    /// Histogram row of a masked in-band pixel, or `None`.
    #[inline]
    fn band_row(&self, img: &[u16], mask: &[u16], r: usize, j: usize) -> Option<usize> {
        let idx = r * self.stride + j;
        if mask[idx] == 0 {
            return None;
        }
        let k = img[idx].wrapping_sub(self.setup.band_base);
        (k < self.setup.band_size).then_some(usize::from(k))
    }

    #[inline]
    fn cols(&self, j: usize) -> std::ops::Range<usize> {
        j.saturating_sub(self.pad)..(j + self.pad + 1).min(self.w)
    }

    /// Adds (or removes) every pixel of row `r` to the histograms of the columns within `pad`.
    fn update_row(&self, hist: &mut [u16], img: &[u16], mask: &[u16], r: usize, add: bool) {
        let w = self.w;
        for j in 0..w {
            if let Some(k) = self.band_row(img, mask, r, j) {
                let cells = &mut hist[k * w..k * w + w][self.cols(j)];
                if add {
                    cells.iter_mut().for_each(|c| *c = c.wrapping_add(1));
                } else {
                    cells.iter_mut().for_each(|c| *c = c.wrapping_sub(1));
                }
            }
        }
    }

    /// Moves the window down one row: removes row `out_r`, adds row `in_r`; equal in-band
    /// values cancel and are skipped.
    fn slide_row(&self, hist: &mut [u16], img: &[u16], mask: &[u16], out_r: usize, in_r: usize) {
        let w = self.w;
        for j in 0..w {
            let sub = self.band_row(img, mask, out_r, j);
            let add = self.band_row(img, mask, in_r, j);
            if sub.is_some() && sub == add {
                continue;
            }
            let cols = self.cols(j);
            if let Some(k) = sub {
                hist[k * w..k * w + w][cols.clone()]
                    .iter_mut()
                    .for_each(|c| *c = c.wrapping_sub(1));
            }
            if let Some(k) = add {
                hist[k * w..k * w + w][cols]
                    .iter_mut()
                    .for_each(|c| *c = c.wrapping_add(1));
            }
        }
    }

    /// c-values of row `r` from the current histograms (unmasked pixels stay 0).
    fn c_values_row(&self, hist: &[u16], img: &[u16], mask: &[u16], r: usize, cv: &mut [f32]) {
        let s = self.setup;
        let w = self.w;
        let nd = s.tvi.len();
        let vlt = i32::from(s.vlt_luma);
        let band = i32::from(s.band_size);
        let cell = |k: i32, col: usize| -> u16 {
            if (0..band).contains(&k) {
                hist[k as usize * w + col]
            } else {
                0
            }
        };
        for col in 0..w {
            let idx = r * self.stride + col;
            if mask[idx] == 0 {
                continue;
            }
            // Upstream works in "adjusted" values (raw + num_diffs) for the threshold tests.
            let value = img[idx].wrapping_add(nd as u16);
            let compact = i32::from(img[idx]) - i32::from(s.band_base);
            if !(0..band).contains(&compact) {
                cv[r * w + col] = 0.0;
                continue;
            }
            let p0 = hist[compact as usize * w + col];
            let mut c_value = 0.0f32;
            for d in 0..nd {
                let step = d as i32 + 1;
                if value <= s.tvi[d] && i32::from(value) + step > vlt {
                    let p1 = cell(compact + step, col);
                    let p2 = cell(compact - step, col);
                    let p = if p1 > p2 { p1 } else { p2 };
                    let num = s.diff_weights[d] * i32::from(p0) * i32::from(p);
                    let val = num as f32 * self.lut[usize::from(p) + usize::from(p0)];
                    if val > c_value {
                        c_value = val;
                    }
                }
            }
            cv[r * w + col] = c_value;
        }
    }

    /// All c-values of the scale, in upstream's row order: the window starts with rows
    /// `0..pad`, grows to full height, slides, then shrinks at the bottom. `merge` is scratch
    /// of the vector levels.
    fn c_values(
        &self,
        hist: &mut [u16],
        merge: &mut super::lanes::Merge,
        img: &[u16],
        mask: &[u16],
        cv: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if super::x86::c_values(self, merge, hist, img, mask, cv) {
            return;
        }
        #[cfg(target_arch = "aarch64")]
        if super::aarch64::c_values(self, merge, hist, img, mask, cv) {
            return;
        }
        let (w, h, pad) = (self.w, self.h, self.pad);
        cv[..w * h].fill(0.0);
        hist[..w * usize::from(self.setup.band_size)].fill(0);
        // Rows past the bottom only exist for windows taller than the picture; upstream then
        // reads stale buffer rows, here they are skipped.
        for r in 0..pad.min(h) {
            self.update_row(hist, img, mask, r, true);
        }
        for i in 0..=pad {
            if i + pad < h {
                self.update_row(hist, img, mask, i + pad, true);
            }
            if i < h {
                self.c_values_row(hist, img, mask, i, cv);
            }
        }
        for i in pad + 1..h.saturating_sub(pad) {
            self.slide_row(hist, img, mask, i - pad - 1, i + pad);
            self.c_values_row(hist, img, mask, i, cv);
        }
        for i in h.saturating_sub(pad)..h {
            if i > pad {
                self.update_row(hist, img, mask, i - pad - 1, false);
            }
            self.c_values_row(hist, img, mask, i, cv);
        }
    }
}

/// Upstream's quickselect (Hoare partitioning around `a[k]`): afterwards `a[..k]` holds the
/// `k` largest values, in the order the summation must follow.
fn quick_select(a: &mut [f32], k: usize) {
    let n = a.len();
    if n == k {
        return;
    }
    let k = k as isize;
    let (mut left, mut right) = (0isize, n as isize - 1);
    while left < right {
        let pivot = a[k as usize];
        let (mut i, mut j) = (left, right);
        loop {
            while a[i as usize] > pivot {
                i += 1;
            }
            while a[j as usize] < pivot {
                j -= 1;
            }
            if i <= j {
                a.swap(i as usize, j as usize);
                i += 1;
                j -= 1;
            }
            if i > j {
                break;
            }
        }
        if j < k {
            left = i;
        }
        if k < i {
            right = j;
        }
    }
}

/// Mean of the top `topk` fraction of the c-values (at least one).
pub(super) fn spatial_pooling(cv: &mut [f32], topk: f64) -> f64 {
    spatial_pooling_at(cv, topk, CpuLevel::SCALAR)
}

/// [`spatial_pooling`] at level `cpu` (the order of `cv` afterwards is unspecified).
pub(super) fn spatial_pooling_at(cv: &mut [f32], topk: f64, cpu: CpuLevel) -> f64 {
    let n = cv.len() as i32;
    let k = ((topk * f64::from(n)) as i32).clamp(1, n);
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = super::x86::pooled_exact(cpu, cv, k as usize) {
        return v;
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(v) = super::aarch64::pooled_exact(cpu, cv, k as usize) {
        return v;
    }
    let _ = cpu;
    quick_select(cv, k as usize);
    let sum: f64 = cv[..k as usize]
        .iter()
        .fold(0.0, |acc, &v| acc + f64::from(v));
    sum / f64::from(k)
}

/// Scratch buffers for one picture (upstream keeps them in the extractor state).
pub(super) struct Work {
    stride: usize,
    image: Vec<u16>,
    mask: Vec<u16>,
    c_values: Vec<f32>,
    hist: Vec<u16>,
    merge: super::lanes::Merge,
    ring: Vec<u16>,
}

impl Work {
    pub(super) fn new(s: &Setup) -> Result<Self> {
        let n = s.alloc_w * s.alloc_h;
        let what = "cambi: work buffers";
        Ok(Work {
            stride: s.alloc_w,
            image: crate::limits::try_filled(n, 0, what)?,
            mask: crate::limits::try_filled(n, 0, what)?,
            c_values: crate::limits::try_filled(n, 0.0, what)?,
            // Room for the guarded layout of the vector levels too.
            hist: vec![0; super::lanes::hist_len(usize::from(s.band_size), s.tvi.len(), s.alloc_w)],
            merge: super::lanes::Merge::default(),
            ring: vec![0; 3 * s.alloc_w],
        })
    }

    /// cambi score of `pic` at the encoding (or, for the source, the source) resolution.
    pub(super) fn score(
        &mut self,
        s: &Setup,
        pic: &PictureData,
        is_src: bool,
        cpu: CpuLevel,
    ) -> Result<f64> {
        self.score_with(s, pic, is_src, cpu, &mut |_, _| {})
    }

    /// [`Work::score`], showing each scale's c-value map to `peek` before it is pooled.
    fn score_with(
        &mut self,
        s: &Setup,
        pic: &PictureData,
        is_src: bool,
        cpu: CpuLevel,
        peek: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<f64> {
        let (w, h, window) = s.geometry(is_src);
        let stride = self.stride;
        preprocess(pic, &mut self.image, stride, w, h, s.enc_bitdepth, cpu)?;
        spatial_mask(&self.image, &mut self.mask, stride, w, h, cpu);

        let lut = reciprocal_lut();
        let (mut sw, mut sh) = (w, h);
        let mut per_scale = [0.0f64; NUM_SCALES];
        for (scale, score) in per_scale.iter_mut().enumerate() {
            if scale > 0 || s.speedup {
                sw = (sw + 1) >> 1;
                sh = (sh + 1) >> 1;
                decimate(&mut self.image, stride, sw, sh, cpu);
                decimate(&mut self.mask, stride, sw, sh, cpu);
            }
            filter_mode(&mut self.image, stride, sw, sh, &mut self.ring, cpu);
            let ctx = CValueCtx {
                setup: s,
                lut,
                stride,
                w: sw,
                h: sh,
                pad: window >> 1,
                cpu,
            };
            ctx.c_values(
                &mut self.hist,
                &mut self.merge,
                &self.image,
                &self.mask,
                &mut self.c_values,
            );
            peek(scale, &self.c_values[..sw * sh]);
            *score = spatial_pooling_at(&mut self.c_values[..sw * sh], s.topk, cpu);
        }
        Ok(weighted_score(&per_scale, window))
    }
}

/// Each scale's c-value map of `pic` computed on the CPU (to compare the GPU's maps).
#[cfg(test)]
pub(super) fn cpu_c_value_maps(s: &Setup, pic: &PictureData, is_src: bool) -> Vec<Vec<f32>> {
    cpu_c_value_maps_at(s, pic, is_src, CpuLevel::default())
}

/// [`cpu_c_value_maps`] with the CPU code at level `cpu`.
#[cfg(test)]
pub(super) fn cpu_c_value_maps_at(
    s: &Setup,
    pic: &PictureData,
    is_src: bool,
    cpu: CpuLevel,
) -> Vec<Vec<f32>> {
    let mut maps = Vec::new();
    Work::new(s)
        .unwrap()
        .score_with(s, pic, is_src, cpu, &mut |_, cv| maps.push(cv.to_vec()))
        .unwrap();
    maps
}

/// Size of each scale's picture, starting from the processing size `w`x`h`.
pub(super) fn scale_sizes(s: &Setup, w: usize, h: usize) -> [(usize, usize); NUM_SCALES] {
    let (mut sw, mut sh) = (w, h);
    std::array::from_fn(|scale| {
        if scale > 0 || s.speedup {
            sw = (sw + 1) >> 1;
            sh = (sh + 1) >> 1;
        }
        (sw, sh)
    })
}

/// The frame score from the pooled c-values of each scale: weighted 16:8:4:2:1 and divided by
/// the window area.
pub(super) fn weighted_score(per_scale: &[f64; NUM_SCALES], window: usize) -> f64 {
    let side = 2 * (window >> 1) + 1;
    let pixels_in_window = (side * side) as u16;
    let weighted = per_scale
        .iter()
        .zip(SCALE_WEIGHTS)
        .fold(0.0f64, |acc, (&v, wt)| acc + v * f64::from(wt));
    weighted / f64::from(pixels_in_window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The literals are upstream's table entries, digit for digit.
    #[allow(clippy::excessive_precision)]
    fn reciprocal_table_follows_upstream_rounding() {
        let lut = reciprocal_lut();
        assert_eq!(lut.len(), RECIPROCAL_LUT_SIZE);
        assert_eq!(lut[0], 0.0);
        assert_eq!(lut[4], 0.25);
        // Entries where the 9-digit literal does not round to 1.0f32 / i.
        assert_eq!(lut[82], 0.012195122f32);
        assert_ne!(lut[82], 1.0f32 / 82.0);
        assert_eq!(lut[4225], 0.000236686391f32);
    }

    #[test]
    fn visibility_thresholds_match_upstream() {
        // Values printed by upstream's luminance tools and bisection (diffs 1..=32).
        let mut bt = vec![178, 305, 432, 559, 686, 813];
        bt.resize(32, 1023);
        let bt_loose = [
            76, 101, 125, 150, 175, 199, 224, 249, 274, 298, 323, 348, 372, 397, 422, 446, 471,
            496, 520, 545, 570, 594, 619, 644, 669, 693, 718, 743, 767, 792, 817, 841,
        ];
        let mut pq = vec![233];
        pq.resize(32, 1023);
        let mut pq_loose = vec![84, 111, 143, 182, 228, 284, 355, 453];
        pq_loose.resize(32, 1023);
        let cases: [(Eotf, f64, &[i32]); 6] = [
            (Eotf::Bt1886, 0.019, &bt),
            (Eotf::Bt1886, 0.001, &[1023; 32]),
            (Eotf::Bt1886, 0.1, &bt_loose),
            (Eotf::Pq, 0.019, &pq),
            (Eotf::Pq, 0.001, &[1023; 32]),
            (Eotf::Pq, 0.1, &pq_loose),
        ];
        for (eotf, t, want) in cases {
            let got: Vec<i32> = (1..=32)
                .map(|d| tvi_for_diff(d, t, eotf).unwrap())
                .collect();
            assert_eq!(got, want, "{eotf:?} {t}");
        }
        let vlt = |e| [0.06, 1.0, 10.0, 100.0].map(|t| vlt_luma(t, e).unwrap());
        assert_eq!(vlt(Eotf::Bt1886), [78, 135, 268, 614]);
        assert_eq!(vlt(Eotf::Pq), [108, 196, 327, 510]);
        assert_eq!(vlt_luma(0.0, Eotf::Bt1886).unwrap(), 0);
    }

    /// Time per 1080p 8-bit frame (one thread) of each stage and of the whole score at every
    /// level: `cargo test --release --lib cambi_timing -- --ignored --nocapture`. Levels take
    /// turns within each repetition (so a shared machine's load hits them alike); each time is
    /// the best of the repetitions, averaged over the frames. `CAMBI_TIMING_REPS` (default 5)
    /// and `CAMBI_TIMING_LEVELS` (comma-separated names) narrow a run.
    #[test]
    #[ignore]
    fn cambi_timing_1080p() {
        use std::time::{Duration, Instant};
        const STAGES: [&str; 7] = [
            "preprocess",
            "spatial_mask",
            "decimate",
            "filter_mode",
            "c_values",
            "pooling",
            "whole score",
        ];
        let reps: usize = std::env::var("CAMBI_TIMING_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5);
        let levels: Vec<CpuLevel> = CpuLevel::available()
            .into_iter()
            .filter(|l| {
                std::env::var("CAMBI_TIMING_LEVELS")
                    .map_or(true, |v| v.split(',').any(|n| n == l.name()))
            })
            .collect();
        let cambi = super::super::Cambi::new(&crate::feature::Dict::new()).unwrap();
        let (_, dists) = crate::testutil::load_parity_clip("natural_1920x1080_420p8");
        let frames = &dists[..dists.len().min(4)];
        let s = cambi.build_setup(1920, 1080, 8).unwrap();
        let lut = reciprocal_lut();
        let mut works: Vec<Work> = levels.iter().map(|_| Work::new(&s).unwrap()).collect();
        // best[level][frame][stage]
        let mut best = vec![vec![[Duration::MAX; STAGES.len()]; frames.len()]; levels.len()];
        let mut scores = vec![vec![0.0; frames.len()]; levels.len()];
        for _ in 0..reps {
            for (f, pic) in frames.iter().enumerate() {
                for (l, (&cpu, work)) in levels.iter().zip(&mut works).enumerate() {
                    let mut t = [Duration::ZERO; STAGES.len()];
                    let (w, h, window) = s.geometry(false);
                    let stride = work.stride;
                    let t0 = Instant::now();
                    preprocess(pic, &mut work.image, stride, w, h, s.enc_bitdepth, cpu).unwrap();
                    t[0] += t0.elapsed();
                    let t0 = Instant::now();
                    spatial_mask(&work.image, &mut work.mask, stride, w, h, cpu);
                    t[1] += t0.elapsed();
                    let (mut sw, mut sh) = (w, h);
                    for scale in 0..NUM_SCALES {
                        if scale > 0 || s.speedup {
                            sw = (sw + 1) >> 1;
                            sh = (sh + 1) >> 1;
                            let t0 = Instant::now();
                            decimate(&mut work.image, stride, sw, sh, cpu);
                            decimate(&mut work.mask, stride, sw, sh, cpu);
                            t[2] += t0.elapsed();
                        }
                        let t0 = Instant::now();
                        filter_mode(&mut work.image, stride, sw, sh, &mut work.ring, cpu);
                        t[3] += t0.elapsed();
                        let ctx = CValueCtx {
                            setup: &s,
                            lut,
                            stride,
                            w: sw,
                            h: sh,
                            pad: window >> 1,
                            cpu,
                        };
                        let t0 = Instant::now();
                        ctx.c_values(
                            &mut work.hist,
                            &mut work.merge,
                            &work.image,
                            &work.mask,
                            &mut work.c_values,
                        );
                        t[4] += t0.elapsed();
                        let t0 = Instant::now();
                        std::hint::black_box(spatial_pooling_at(
                            &mut work.c_values[..sw * sh],
                            s.topk,
                            cpu,
                        ));
                        t[5] += t0.elapsed();
                    }
                    let t0 = Instant::now();
                    scores[l][f] = work.score(&s, pic, false, cpu).unwrap();
                    t[6] += t0.elapsed();
                    for (b, t) in best[l][f].iter_mut().zip(t) {
                        *b = (*b).min(t);
                    }
                }
            }
        }
        let ms = |l: usize, st: usize| {
            best[l].iter().map(|b| b[st].as_secs_f64()).sum::<f64>() * 1e3 / frames.len() as f64
        };
        let names: Vec<String> = levels.iter().map(|l| format!("{:>9}", l.name())).collect();
        println!(
            "cambi 1080p 8-bit, ms per frame, one thread: {}",
            names.join("")
        );
        for (st, name) in STAGES.iter().enumerate() {
            let cols: Vec<String> = (0..levels.len())
                .map(|l| format!("{:9.3}", ms(l, st)))
                .collect();
            let speedups: Vec<String> = (1..levels.len())
                .map(|l| format!("{:5.2}x", ms(0, st) / ms(l, st)))
                .collect();
            println!("  {name:>12}: {}   {}", cols.join(""), speedups.join(" "));
        }
        // Every level scored every frame alike.
        for (l, v) in scores.iter().enumerate() {
            assert_eq!(v, &scores[0], "{}", levels[l]);
        }
    }

    #[test]
    fn quick_select_puts_top_k_first() {
        let mut v = [3.0f32, 9.0, 1.0, 7.0, 5.0, 7.0, 0.0, 2.0];
        quick_select(&mut v, 3);
        let mut top = v[..3].to_vec();
        top.sort_by(|a, b| b.partial_cmp(a).unwrap());
        assert_eq!(top, vec![9.0, 7.0, 7.0]);
        assert!(v[3..].iter().all(|&x| x <= 7.0));
    }
}

/// checkasm: every stage at every available level against the scalar reference, compared
/// exactly (c-values as `f32` bit patterns), on random sizes, strides and contents. Buffers
/// start with noise outside the written area, which must survive.
#[cfg(test)]
mod checkasm {
    use super::*;
    use crate::picture::PixelFormat;
    use crate::testutil::checkasm::{plane, sizes, Content, Rng, CONTENTS};

    fn simd_levels() -> Vec<CpuLevel> {
        CpuLevel::available()
            .into_iter()
            .filter(|&l| l != CpuLevel::SCALAR)
            .collect()
    }

    /// A 10-bit plane of `content`, or (`dense`) one squeezed into 8 neighbouring code values
    /// so that the histograms hold many counts.
    fn plane10(rng: &mut Rng, w: usize, h: usize, stride: usize, content: Content) -> Vec<u16> {
        let mut p = plane(rng, w, h, stride, 10, content);
        if rng.below(2) == 0 {
            let base = rng.range(0, 1015) as u16;
            p.iter_mut().for_each(|v| *v = base + *v % 8);
        }
        p
    }

    #[test]
    fn checkasm_cambi_preprocess() {
        let mut rng = Rng::new(0xca_0001);
        for (w, h) in sizes(&mut rng, 10) {
            for bpc in [8, 9, 10, 12, 16] {
                let content = CONTENTS[rng.below(CONTENTS.len())];
                let mut pic = PictureData::new(PixelFormat::Yuv400p, bpc, w, h).unwrap();
                let stride = pic.stride[0];
                let src = plane(&mut rng, w, h, stride, bpc, content);
                if bpc == 8 {
                    let p = pic.plane_u8_mut(0);
                    p.iter_mut().zip(&src).for_each(|(d, &s)| *d = s as u8);
                } else {
                    pic.plane_u16_mut(0).copy_from_slice(&src[..stride * h]);
                }
                // Same size, or nearest-neighbour decimation to a smaller one.
                let (out_w, out_h) = if rng.below(2) == 0 {
                    (w, h)
                } else {
                    (rng.range(1, w), rng.range(1, h))
                };
                let dst_stride = out_w + rng.below(9);
                let enc_bitdepth = [6, 8, 9, 10, 12][rng.below(5)];
                let noise = plane(&mut rng, dst_stride, out_h, dst_stride, 16, Content::Noise);
                let mut want = noise.clone();
                preprocess(
                    &pic,
                    &mut want,
                    dst_stride,
                    out_w,
                    out_h,
                    enc_bitdepth,
                    CpuLevel::SCALAR,
                )
                .unwrap();
                for cpu in simd_levels() {
                    let mut got = noise.clone();
                    preprocess(&pic, &mut got, dst_stride, out_w, out_h, enc_bitdepth, cpu)
                        .unwrap();
                    assert!(
                        got == want,
                        "preprocess {cpu} {w}x{h} -> {out_w}x{out_h} {content:?} bpc {bpc} \
                         enc {enc_bitdepth}"
                    );
                }
            }
        }
    }

    #[test]
    fn checkasm_cambi_spatial_mask() {
        let mut rng = Rng::new(0xca_0002);
        for (w, h) in sizes(&mut rng, 24) {
            for content in CONTENTS {
                let stride = w + rng.below(9);
                let img = plane10(&mut rng, w, h, stride, content);
                let noise = plane(&mut rng, w, h, stride, 16, Content::Noise);
                let mut want = noise.clone();
                spatial_mask(&img, &mut want, stride, w, h, CpuLevel::SCALAR);
                for cpu in simd_levels() {
                    let mut got = noise.clone();
                    spatial_mask(&img, &mut got, stride, w, h, cpu);
                    assert!(got == want, "spatial_mask {cpu} {w}x{h} {content:?} bpc 10");
                }
            }
        }
    }

    #[test]
    fn checkasm_cambi_decimate_and_filter_mode() {
        let mut rng = Rng::new(0xca_0003);
        for (w, h) in sizes(&mut rng, 24) {
            for content in CONTENTS {
                let stride = w + rng.below(9);
                let img = plane10(&mut rng, w, h, stride, content);
                let (sw, sh) = ((w + 1) >> 1, (h + 1) >> 1);
                let mut want = img.clone();
                decimate(&mut want, stride, sw, sh, CpuLevel::SCALAR);
                for cpu in simd_levels() {
                    let mut got = img.clone();
                    decimate(&mut got, stride, sw, sh, cpu);
                    assert!(got == want, "decimate {cpu} {w}x{h} {content:?} bpc 10");
                }
                let ring_noise: Vec<u16> = (0..3 * w).map(|_| rng.next_u32() as u16).collect();
                let mut want = img.clone();
                filter_mode(
                    &mut want,
                    stride,
                    w,
                    h,
                    &mut ring_noise.clone(),
                    CpuLevel::SCALAR,
                );
                for cpu in simd_levels() {
                    let mut got = img.clone();
                    filter_mode(&mut got, stride, w, h, &mut ring_noise.clone(), cpu);
                    assert!(got == want, "filter_mode {cpu} {w}x{h} {content:?} bpc 10");
                }
            }
        }
    }

    #[test]
    fn checkasm_cambi_pooling() {
        let mut rng = Rng::new(0xca_0005);
        let lut = reciprocal_lut();
        for (w, h) in sizes(&mut rng, 40) {
            let n = w * h;
            // How the map looks: share of non-zero values, and their kind.
            let nonzero = [0, 1, 5, 20, 50, 90, 100][rng.below(7)];
            let kind = rng.below(5);
            let topk = [0.0001, 0.01, 0.3, 0.6, 0.9, 1.0][rng.below(6)];
            let mut cv: Vec<f32> = (0..n)
                .map(|_| {
                    if rng.below(100) >= nonzero {
                        return if rng.below(8) == 0 { -0.0 } else { 0.0 };
                    }
                    let (p0, p) = (rng.range(1, 500) as i32, rng.range(1, 500) as i32);
                    let c = (rng.range(1, 9) as i32 * p0 * p) as f32 * lut[(p0 + p) as usize];
                    match kind {
                        // c-value-like products.
                        0 | 1 => c,
                        // Repeats of a few values (ties at the pivot).
                        2 => [0.5, 1.0, 3.25][rng.below(3)],
                        // Exponents far apart (the exact sum needs 2^53 units or more).
                        3 => {
                            c * [1.0, 1e-12, 1e12, 1e-40, 1.0 / 1048576.0, 67108864.0][rng.below(6)]
                        }
                        // A few negative or non-finite values.
                        _ => [c, -c, f32::INFINITY, f32::NAN][rng.below(4)],
                    }
                })
                .collect();
            if kind == 4 && rng.below(2) == 0 {
                cv.iter_mut().for_each(|v| *v = v.abs());
            }
            let want = spatial_pooling(&mut cv.clone(), topk);
            for cpu in simd_levels() {
                let got = spatial_pooling_at(&mut cv.clone(), topk, cpu);
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "spatial_pooling {cpu} {w}x{h} {nonzero}% kind {kind} topk {topk}: \
                     {got} != {want}"
                );
            }
        }
    }

    /// The setup fields the c-value pass reads, as `Cambi::build_setup` derives them.
    fn cv_setup(nd: usize, eotf: Eotf, tvi_threshold: f64, vlt: f64, w: usize) -> Setup {
        let tvi: Vec<u16> = (0..nd)
            .map(|d| {
                let t = tvi_for_diff(d as i32 + 1, tvi_threshold, eotf).unwrap();
                (t as u16).wrapping_add(nd as u16)
            })
            .collect();
        let vlt_luma = vlt_luma(vlt, eotf).unwrap();
        let lo = i32::from(vlt_luma) - 3 * nd as i32 + 1;
        let band_base = if lo > 0 { lo as u16 } else { 0 };
        let band_size = tvi[nd - 1].wrapping_add(1).wrapping_sub(band_base);
        Setup {
            enc_w: w,
            enc_h: 1,
            src_w: w,
            src_h: 1,
            enc_bitdepth: 10,
            window: 1,
            src_window: 1,
            speedup: false,
            topk: 0.6,
            diff_weights: CONTRAST_WEIGHTS[..nd].to_vec(),
            tvi,
            vlt_luma,
            band_base,
            band_size,
            alloc_w: w,
            alloc_h: 1,
        }
    }

    #[test]
    fn checkasm_cambi_c_values() {
        let mut rng = Rng::new(0xca_0004);
        let lut = reciprocal_lut();
        for (i, (w, h)) in sizes(&mut rng, 16).into_iter().enumerate() {
            // One setup per size at the largest ones, several elsewhere (time).
            let runs = if w * h > 200_000 { 1 } else { 4 };
            for _ in 0..runs {
                let content = CONTENTS[rng.below(CONTENTS.len())];
                let nd = [1, 2, 4, 8, 32][rng.below(5)];
                let eotf = [Eotf::Bt1886, Eotf::Pq][rng.below(2)];
                let tvi_threshold = [0.019, 0.001, 0.1][rng.below(3)];
                let vlt = [0.0, 0.06, 1.0, 10.0][rng.below(4)];
                // Windows up to 65 wide: larger ones are rejected (reciprocal table size).
                let pad = [0, 1, 2, 7, 16, 32][rng.below(6)];
                let s = cv_setup(nd, eotf, tvi_threshold, vlt, w);
                let stride = w + rng.below(9);
                let img = plane10(&mut rng, w, h, stride, content);
                let mut mask = vec![0u16; stride * h];
                match i % 3 {
                    0 => mask.fill(1),
                    1 => mask
                        .iter_mut()
                        .for_each(|m| *m = (rng.next_u32() & 1) as u16),
                    _ => spatial_mask(&img, &mut mask, stride, w, h, CpuLevel::SCALAR),
                }
                let hist_len = super::super::lanes::hist_len(usize::from(s.band_size), nd, w);
                let run = |cpu: CpuLevel| {
                    let ctx = CValueCtx {
                        setup: &s,
                        lut,
                        stride,
                        w,
                        h,
                        pad,
                        cpu,
                    };
                    let mut hist = vec![7u16; hist_len];
                    let mut cv = vec![-1.0f32; w * h];
                    let mut merge = super::super::lanes::Merge::default();
                    ctx.c_values(&mut hist, &mut merge, &img, &mask, &mut cv);
                    // A second pass on the same scratch (pooled work buffers are reused).
                    let first: Vec<u32> = cv.iter().map(|v| v.to_bits()).collect();
                    ctx.c_values(&mut hist, &mut merge, &img, &mask, &mut cv);
                    let second: Vec<u32> = cv.iter().map(|v| v.to_bits()).collect();
                    assert!(first == second, "c_values {cpu} differs when run again");
                    first
                };
                let want = run(CpuLevel::SCALAR);
                for cpu in simd_levels() {
                    assert!(
                        run(cpu) == want,
                        "c_values {cpu} {w}x{h} {content:?} bpc 10 nd {nd} {eotf:?} \
                         tvi {tvi_threshold} vlt {vlt} pad {pad} mask {}",
                        i % 3
                    );
                }
            }
        }
    }
}
