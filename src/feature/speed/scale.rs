//! Plane preparation of SpEED: float conversion, prescaling (nearest, bilinear, bicubic,
//! lanczos4), Gaussian anti-aliasing and decimation by 16, local mean removal.
//!
//! The filter, kernel and resampling helpers are upstream's `vif_tools` float code, which
//! `float_vif` and `float_motion` use too (hence `pub(crate)`).

use std::f64::consts::PI;

use super::{Dims, Params, NUM_SCALES};
use crate::error::{Error, Result};
use crate::feature::ssim::tools::luma_scaler;
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

/// Prescaling interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScaleMethod {
    Nearest,
    Bilinear,
    Bicubic,
    Lanczos4,
}

impl ScaleMethod {
    /// The method named `s`, or an error naming extractor `who`.
    pub(crate) fn parse(who: &str, s: &str) -> Result<Self> {
        Ok(match s {
            "nearest" => ScaleMethod::Nearest,
            "bilinear" => ScaleMethod::Bilinear,
            "bicubic" => ScaleMethod::Bicubic,
            "lanczos4" => ScaleMethod::Lanczos4,
            _ => {
                return Err(Error::inval(format!(
                    "{who}: invalid scale method {s:?}, expected nearest, bilinear, bicubic or lanczos4"
                )))
            }
        })
    }
}

/// Upstream's `picture_copy` with offset -128: the top-left `w`x`h` of plane `c` of `pic` as
/// floats on the 8-bit scale (deeper samples divided by 2^(bpc-8), exact), minus 128, in a
/// fresh zeroed buffer of `rows` rows `stride` apart. `who` names the caller in errors.
pub(crate) fn plane_to_float_sized(
    pic: &PictureData,
    c: usize,
    w: usize,
    h: usize,
    stride: usize,
    rows: usize,
    who: &str,
) -> Result<Vec<f32>> {
    if c >= pic.pix_fmt.plane_count() || w > pic.w[c] || h > pic.h[c] || w > stride || h > rows {
        return Err(Error::inval(format!("{who}: plane smaller than expected")));
    }
    let len = stride
        .checked_mul(rows)
        .ok_or_else(|| Error::inval(format!("{who}: plane too large")))?;
    let mut buf = crate::limits::try_filled(len, 0.0, &format!("{who}: float plane"))?;
    if w == 0 || h == 0 {
        return Ok(buf);
    }
    let src_stride = pic.stride[c];
    let need = (h - 1) * src_stride + w;
    let short = || Error::inval(format!("{who}: picture plane shorter than its size"));
    match pic.plane(c) {
        PlaneRef::U8(p) => {
            if p.len() < need {
                return Err(short());
            }
            for (dst, src) in buf.chunks_mut(stride).zip(p.chunks(src_stride)).take(h) {
                for (o, &v) in dst[..w].iter_mut().zip(&src[..w]) {
                    *o = f32::from(v) + -128.0;
                }
            }
        }
        PlaneRef::U16(p) => {
            let scaler = luma_scaler(pic.bpc).map_err(|e| e.prefixed(who))?;
            if p.len() < need {
                return Err(short());
            }
            for (dst, src) in buf.chunks_mut(stride).zip(p.chunks(src_stride)).take(h) {
                for (o, &v) in dst[..w].iter_mut().zip(&src[..w]) {
                    *o = f32::from(v) / scaler + -128.0;
                }
            }
        }
    }
    Ok(buf)
}

// ---------------------------------------------------------------------------------------------
// Filters and scaling (upstream's vif_tools float helpers)

fn round_up_to_odd(f: f32) -> i32 {
    let c = f64::from(f).ceil() as i32;
    if c % 2 == 0 {
        c + 1
    } else {
        c
    }
}

/// Gaussian window length for `scale` (0..=4) and `kernelscale`: `2^(4-scale)+1` scaled and
/// rounded up to odd, at least 3.
pub(crate) fn filter_size(scale: u32, kernelscale: f32) -> usize {
    let n = (1i32 << (4 - scale)) + 1;
    round_up_to_odd(n as f32 * kernelscale).max(3) as usize
}

/// Normal density at `x`; the exponent and normaliser are evaluated in double as in C.
fn gaussian_pdf(x: f32, stdev: f32) -> f32 {
    let dx = f64::from(x - 0.0);
    let s = f64::from(stdev);
    let num = ((-0.5 * dx) / s * dx / s).exp() as f32;
    let den = (1.0 / (s * (2.0 * PI).sqrt())) as f32;
    num / den
}

/// Normalised Gaussian taps of odd length `size`.
fn gaussian_kernel(size: usize, stdev: f32) -> Vec<f32> {
    let k = (size as i32 - 1) / 2;
    let mut out: Vec<f32> = (0..size as i32)
        .map(|i| gaussian_pdf((i - k) as f32, stdev))
        .collect();
    let mut sum = 0.0f32;
    for &v in &out {
        sum += v;
    }
    for v in &mut out {
        *v /= sum;
    }
    out
}

/// Upstream's `vif_get_filter`: the Gaussian window of `scale`, its deviation a fifth of its
/// length.
pub(crate) fn vif_filter(scale: u32, kernelscale: f32) -> Vec<f32> {
    let size = filter_size(scale, kernelscale);
    gaussian_kernel(size, size as f32 / 5.0f32)
}

/// The local-mean filter at the analysis scale.
pub(super) fn mean_filter(kernelscale: f32) -> Vec<f32> {
    vif_filter(NUM_SCALES, kernelscale)
}

/// The anti-aliasing filter applied before decimation: the scale-1 length with the standard
/// deviation widened by `sqrt(NUM_SCALES)` (upstream's "sigma trick").
pub(super) fn antialias_filter(kernelscale: f32) -> Vec<f32> {
    let size = filter_size(1, kernelscale);
    let stdev = f64::from(NUM_SCALES).sqrt() * size as f64 / f64::from(5.0f32);
    gaussian_kernel(size, stdev as f32)
}

/// Mirrors index `i` of `0..n` once at each edge (edge sample not repeated).
#[inline(always)]
pub(crate) fn reflect(i: isize, n: usize) -> usize {
    let n = n as isize;
    let r = if i < 0 {
        -i
    } else if i >= n {
        2 * n - i - 2
    } else {
        i
    };
    r as usize
}

/// Separable filtering of the `w`x`h` top-left of `src` into `dst` (both with row pitch
/// `stride`): vertical pass into a row, then horizontal, accumulating taps in order in `f32`.
/// The scalar reference; [`filter1d`] dispatches to the vector form at SIMD levels.
fn filter1d_ref(f: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize, stride: usize) {
    let half = (f.len() / 2) as isize;
    let mut row = vec![0.0f32; w];
    for i in 0..h {
        for (j, t) in row.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for (fi, &c) in f.iter().enumerate() {
                let ii = reflect(i as isize - half + fi as isize, h);
                acc += c * src[ii * stride + j];
            }
            *t = acc;
        }
        let out = &mut dst[i * stride..i * stride + w];
        for (j, o) in out.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for (fj, &c) in f.iter().enumerate() {
                acc += c * row[reflect(j as isize - half + fj as isize, w)];
            }
            *o = acc;
        }
    }
}

/// [`filter1d_ref`] at the level `cpu`: the same value for every sample, bit for bit.
/// Both sides must exceed half the filter length (the mirror reflects once).
pub(crate) fn filter1d(
    cpu: CpuLevel,
    f: &[f32],
    src: &[f32],
    dst: &mut [f32],
    w: usize,
    h: usize,
    stride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::filter1d(cpu, f, src, dst, w, h, stride) {
        return;
    }
    // NEON is part of every aarch64 target: the vector form needs no target feature there.
    if cpu.has_neon() {
        return filter1d_rows(f, src, dst, w, h, stride);
    }
    filter1d_ref(f, src, dst, w, h, stride)
}

/// [`filter1d_ref`] reorganised so each tap runs over a whole row: every output still starts at
/// `0.0` and adds `c * x` tap by tap in the same order (no contraction, no reassociation), so
/// the results are identical, and the inner loops are independent per sample, which the
/// compiler turns into vector code at whatever level the caller is compiled for. Inlined into
/// the `#[target_feature]` wrappers of `x86.rs`.
#[inline(always)]
pub(super) fn filter1d_rows(
    f: &[f32],
    src: &[f32],
    dst: &mut [f32],
    w: usize,
    h: usize,
    stride: usize,
) {
    let half = f.len() / 2;
    let mut row = vec![0.0f32; w];
    // The row with its reflected margins: `ext[half + j] = row[j]`.
    let mut ext = vec![0.0f32; w + 2 * half];
    for i in 0..h {
        row.fill(0.0);
        for (fi, &c) in f.iter().enumerate() {
            let ii = reflect(i as isize - half as isize + fi as isize, h);
            let s = &src[ii * stride..ii * stride + w];
            for (t, &x) in row.iter_mut().zip(s) {
                *t += c * x;
            }
        }
        for (k, e) in ext.iter_mut().enumerate() {
            *e = row[reflect(k as isize - half as isize, w)];
        }
        let out = &mut dst[i * stride..i * stride + w];
        out.fill(0.0);
        for (fj, &c) in f.iter().enumerate() {
            for (o, &x) in out.iter_mut().zip(&ext[fj..fj + w]) {
                *o += c * x;
            }
        }
    }
}

/// Upstream's float mirror used by the interpolators (coordinates as `f32`).
#[inline]
fn mirror_f(i: f32, left: f32, right: f32) -> f32 {
    if i < left {
        -i
    } else if i > right {
        2.0 * right - i
    } else {
        i
    }
}

fn bicubic_weight(t: f32) -> f32 {
    let a = -0.75f32;
    let t = if t < 0.0 { -t } else { t };
    if t < 1.0 {
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    } else if t < 2.0 {
        (((t - 5.0) * t + 8.0) * t - 4.0) * a
    } else {
        0.0
    }
}

fn lanczos4_weight(x: f32, a: f32) -> f32 {
    if x == 0.0 {
        return 1.0;
    }
    if x > -a && x < a {
        let (xd, ad) = (f64::from(x), f64::from(a));
        return (ad * (PI * xd).sin() * (PI * xd / ad).sin() / (PI * PI * xd * xd)) as f32;
    }
    0.0
}

/// A source image for interpolation.
struct Src<'a> {
    data: &'a [f32],
    w: usize,
    h: usize,
    stride: usize,
}

impl Src<'_> {
    /// The sample at (x, y). Callers keep the sides at least [`min_resample_side`], so the
    /// clamp never moves a coordinate; it only keeps a bad size from indexing out of bounds.
    #[inline]
    fn at(&self, x: i32, y: i32) -> f32 {
        let x = x.min(self.w as i32 - 1).max(0) as usize;
        let y = y.min(self.h as i32 - 1).max(0) as usize;
        self.data[y * self.stride + x]
    }

    /// Mirrored integer coordinate, through float as upstream does.
    #[inline]
    fn mx(&self, v: f32) -> i32 {
        mirror_f(v, 0.0, (self.w as i32 - 1) as f32) as i32
    }

    #[inline]
    fn my(&self, v: f32) -> i32 {
        mirror_f(v, 0.0, (self.h as i32 - 1) as f32) as i32
    }

    fn bilinear(&self, x: f32, y: f32) -> f32 {
        let x1 = self.mx(f64::from(x).floor() as f32);
        let x2 = self.mx(f64::from(x).ceil() as f32);
        let y1 = self.my(f64::from(y).floor() as f32);
        let y2 = self.my(f64::from(y).ceil() as f32);
        let dx = x - x1 as f32;
        let dy = y - y1 as f32;
        (1.0 - dy) * (1.0 - dx) * self.at(x1, y1)
            + (1.0 - dy) * dx * self.at(x2, y1)
            + dy * (1.0 - dx) * self.at(x1, y2)
            + dy * dx * self.at(x2, y2)
    }

    fn bicubic(&self, x: f32, y: f32) -> f32 {
        let x0 = f64::from(x).floor() as i32;
        let y0 = f64::from(y).floor() as i32;
        let dx = x - x0 as f32;
        let dy = y - y0 as f32;
        let mut wx = [0.0f32; 4];
        let mut wy = [0.0f32; 4];
        for i in -1..=2i32 {
            wx[(i + 1) as usize] = bicubic_weight(i as f32 - dx);
            wy[(i + 1) as usize] = bicubic_weight(i as f32 - dy);
        }
        let mut acc = 0.0f32;
        for j in -1..=2i32 {
            for i in -1..=2i32 {
                let xi = self.mx((x0 + i) as f32);
                let yi = self.my((y0 + j) as f32);
                let weight = wx[(i + 1) as usize] * wy[(j + 1) as usize];
                acc += self.at(xi, yi) * weight;
            }
        }
        acc
    }

    fn lanczos4(&self, x: f32, y: f32) -> f32 {
        const A: i32 = 4;
        let x0 = f64::from(x).floor() as i32;
        let y0 = f64::from(y).floor() as i32;
        let dx = x - x0 as f32;
        let dy = y - y0 as f32;
        let mut wx = [0.0f32; 9];
        let mut wy = [0.0f32; 9];
        for i in -A..=A {
            wx[(i + A) as usize] = lanczos4_weight(i as f32 - dx, A as f32);
            wy[(i + A) as usize] = lanczos4_weight(i as f32 - dy, A as f32);
        }
        let (mut value, mut weight_sum) = (0.0f32, 0.0f32);
        for iy in -A..=A {
            for ix in -A..=A {
                let weight = wx[(ix + A) as usize] * wy[(iy + A) as usize];
                weight_sum += weight;
                let xi = self.mx((x0 + ix) as f32);
                let yi = self.my((y0 + iy) as f32);
                value += self.at(xi, yi) * weight;
            }
        }
        value / weight_sum
    }
}

/// A read-only float plane: `w`x`h` samples, rows `stride` apart.
#[derive(Clone, Copy)]
pub(crate) struct Plane<'a> {
    pub data: &'a [f32],
    pub w: usize,
    pub h: usize,
    pub stride: usize,
}

impl<'a> Plane<'a> {
    pub(crate) fn new(data: &'a [f32], w: usize, h: usize, stride: usize) -> Self {
        Plane { data, w, h, stride }
    }
}

/// The smallest source side `method` can resample from: its taps reach up to this far past
/// an edge, and upstream mirrors only once (smaller planes read outside the image there).
pub(crate) fn min_resample_side(method: ScaleMethod) -> usize {
    match method {
        ScaleMethod::Nearest => 1,
        ScaleMethod::Bilinear => 2,
        ScaleMethod::Bicubic => 3,
        ScaleMethod::Lanczos4 => 6,
    }
}

/// Upstream's `vif_scale_frame_s`: resamples `src` to `dw`x`dh` into `dst` (pitch
/// `dst_stride`), sampling at pixel centres; equal sizes copy. The source sides must be at least
/// [`min_resample_side`].
pub(crate) fn resample(
    method: ScaleMethod,
    src: &Plane<'_>,
    dst: &mut [f32],
    dw: usize,
    dh: usize,
    dst_stride: usize,
) {
    if src.w == dw && src.h == dh {
        for (o, i) in dst
            .chunks_mut(dst_stride)
            .zip(src.data.chunks(src.stride))
            .take(dh)
        {
            o[..dw].copy_from_slice(&i[..dw]);
        }
        return;
    }
    let s = Src {
        data: src.data,
        w: src.w,
        h: src.h,
        stride: src.stride,
    };
    let ratio_x = src.w as f32 / dw as f32;
    let ratio_y = src.h as f32 / dh as f32;
    for (y, row) in dst.chunks_mut(dst_stride).take(dh).enumerate() {
        resample_row(method, &s, ratio_x, ratio_y, y, &mut row[..dw]);
    }
}

/// Row `y` of `s` resampled at the ratios `ratio_x`, `ratio_y` (source over destination size),
/// sampling at pixel centres, into `row` (the destination width).
fn resample_row(
    method: ScaleMethod,
    s: &Src<'_>,
    ratio_x: f32,
    ratio_y: f32,
    y: usize,
    row: &mut [f32],
) {
    // Sample centres, computed in double then stored as float.
    let yy = ((y as f64 + 0.5) * f64::from(ratio_y) - 0.5) as f32;
    for (x, o) in row.iter_mut().enumerate() {
        let xx = ((x as f64 + 0.5) * f64::from(ratio_x) - 0.5) as f32;
        *o = match method {
            ScaleMethod::Nearest => {
                let ry = (y as f32 * ratio_y) as usize;
                let rx = (x as f32 * ratio_x) as usize;
                s.at(rx as i32, ry as i32)
            }
            ScaleMethod::Bilinear => s.bilinear(xx, yy),
            ScaleMethod::Bicubic => s.bicubic(xx, yy),
            ScaleMethod::Lanczos4 => s.lanczos4(xx, yy),
        };
    }
}

/// One axis of [`resample`] as tables, for a device that repeats its arithmetic: per output
/// coordinate, `taps` source indices (mirrored and clamped as the CPU's reads are) and weights;
/// bilinear keeps its fractional offset in weight 0, nearest uses index 0 alone.
pub(crate) struct AxisTable {
    pub taps: usize,
    pub idx: Vec<i32>,
    pub wt: Vec<f32>,
}

/// The [`AxisTable`] of `method` from `src_n` to `dst_n` samples, each entry computed with the
/// CPU resampler's own steps (the weights of bicubic and lanczos4 included).
pub(crate) fn resample_axis(method: ScaleMethod, src_n: usize, dst_n: usize) -> AxisTable {
    let n = src_n as i32;
    let ratio = src_n as f32 / dst_n as f32;
    let mirror = |v: f32| mirror_f(v, 0.0, (n - 1) as f32) as i32;
    let clamp = |i: i32| i.min(n - 1).max(0);
    let taps = match method {
        ScaleMethod::Nearest => 1,
        ScaleMethod::Bilinear => 2,
        ScaleMethod::Bicubic => 4,
        ScaleMethod::Lanczos4 => 9,
    };
    let mut idx = Vec::with_capacity(dst_n * taps);
    let mut wt = Vec::with_capacity(dst_n * taps);
    for o in 0..dst_n {
        // Sample centres, computed in double then stored as float (as `resample_row`).
        let c = ((o as f64 + 0.5) * f64::from(ratio) - 0.5) as f32;
        match method {
            ScaleMethod::Nearest => {
                idx.push(clamp((o as f32 * ratio) as usize as i32));
                wt.push(0.0);
            }
            ScaleMethod::Bilinear => {
                let x1 = mirror(f64::from(c).floor() as f32);
                let x2 = mirror(f64::from(c).ceil() as f32);
                idx.extend([clamp(x1), clamp(x2)]);
                wt.extend([c - x1 as f32, 0.0]);
            }
            ScaleMethod::Bicubic | ScaleMethod::Lanczos4 => {
                let x0 = f64::from(c).floor() as i32;
                let dx = c - x0 as f32;
                let half = (taps / 2) as i32 - i32::from(taps == 4);
                for i in -half..taps as i32 - half {
                    idx.push(clamp(mirror((x0 + i) as f32)));
                    wt.push(if taps == 4 {
                        bicubic_weight(i as f32 - dx)
                    } else {
                        lanczos4_weight(i as f32 - dx, 4.0)
                    });
                }
            }
        }
    }
    AxisTable { taps, idx, wt }
}

/// The rows of a float plane that SpEED reads: row `r` is `data[slot[r] * w..][..w]` where
/// `slot[r]` is not [`SKIPPED`]. The anti-aliasing filter is only sampled on every 16th row and
/// column, so only the rows within its reach of those are converted (or resampled) at all.
#[derive(Clone)]
pub(super) struct Rows {
    w: usize,
    slot: Vec<usize>,
    data: Vec<f32>,
}

/// Slot of a row nobody reads.
const SKIPPED: usize = usize::MAX;

impl Rows {
    /// Zeroed rows of width `w` for the plane rows `keep` marks.
    fn zeroed(w: usize, keep: &[bool]) -> Result<Self> {
        let mut slot = vec![SKIPPED; keep.len()];
        let mut n = 0;
        for (s, _) in slot.iter_mut().zip(keep).filter(|(_, &k)| k) {
            *s = n;
            n += 1;
        }
        let len = n
            .checked_mul(w)
            .ok_or_else(|| Error::inval("speed: plane too large"))?;
        let data = crate::limits::try_filled(len, 0.0, "speed: float rows")?;
        Ok(Rows { w, slot, data })
    }

    fn row(&self, r: usize) -> &[f32] {
        &self.data[self.slot[r] * self.w..][..self.w]
    }

    /// The kept rows in plane order, with their plane row index.
    fn rows_mut(&mut self) -> impl Iterator<Item = (usize, &mut [f32])> {
        let w = self.w;
        let mut order: Vec<(usize, usize)> = self
            .slot
            .iter()
            .enumerate()
            .filter(|(_, &s)| s != SKIPPED)
            .map(|(r, &s)| (s, r))
            .collect();
        order.sort_unstable();
        self.data
            .chunks_mut(w.max(1))
            .zip(order)
            .map(|(row, (_, r))| (r, row))
    }

    /// `self - other` sample by sample (upstream subtracts whole float planes; only the kept
    /// samples are ever read). Both must keep the same rows.
    pub(super) fn subtract(&mut self, other: &Rows) -> Result<()> {
        if self.w != other.w || self.slot != other.slot {
            return Err(Error::inval("speed: picture size changed"));
        }
        for (a, &b) in self.data.iter_mut().zip(&other.data) {
            *a -= b;
        }
        Ok(())
    }
}

/// Which rows of the `h`-row plane the vertical pass of `taps` reads for outputs on every 16th
/// row (`out_rows` of them).
fn rows_read(h: usize, taps: usize, out_rows: usize) -> Vec<bool> {
    let half = (taps / 2) as isize;
    let mut keep = vec![false; h];
    for i in 0..out_rows {
        for fi in 0..taps {
            keep[reflect((i * 16) as isize - half + fi as isize, h)] = true;
        }
    }
    keep
}

/// Whether the options resample the plane (prescales within 1e-3 of 1 do not, as upstream).
pub(super) fn prescales(p: &Params) -> bool {
    (p.prescale - 1.0).abs() >= 1.0e-3
}

/// Upstream's `picture_copy` with offset -128 of plane `c` of `pic`, as SpEED reads it: the
/// whole `d.w`x`d.h` plane when prescaling (the resampler reads anywhere), else just the rows
/// the anti-aliasing filter reaches, `d.sw` wide. Samples outside the picture (a prescale
/// within 1e-3 of 1 can round the size up by one) are zero, as in upstream's zeroed buffer.
pub(super) fn load(pic: &PictureData, c: usize, d: &Dims, p: &Params) -> Result<Rows> {
    if c >= pic.pix_fmt.plane_count() || d.w > pic.w[c] || d.h > pic.h[c] {
        return Err(Error::inval("speed: plane smaller than expected"));
    }
    let mut rows = if prescales(p) {
        Rows::zeroed(d.w, &vec![true; d.h])?
    } else {
        let taps = filter_size(1, p.kernelscale);
        Rows::zeroed(d.sw, &rows_read(d.sh, taps, d.dh))?
    };
    let cols = d.w.min(rows.w);
    let stride = pic.stride[c];
    let short = || Error::inval("speed: picture plane shorter than its size");
    match pic.plane(c) {
        PlaneRef::U8(px) => {
            for (r, out) in rows.rows_mut().filter(|(r, _)| *r < d.h) {
                let src = px.get(r * stride..r * stride + cols).ok_or_else(short)?;
                for (o, &v) in out.iter_mut().zip(src) {
                    *o = f32::from(v) + -128.0;
                }
            }
        }
        PlaneRef::U16(px) => {
            let scaler = luma_scaler(pic.bpc).map_err(|e| e.prefixed("speed"))?;
            for (r, out) in rows.rows_mut().filter(|(r, _)| *r < d.h) {
                let src = px.get(r * stride..r * stride + cols).ok_or_else(short)?;
                for (o, &v) in out.iter_mut().zip(src) {
                    *o = f32::from(v) / scaler + -128.0;
                }
            }
        }
    }
    Ok(rows)
}

/// The rows of the prescaled `d.sw`x`d.sh` plane the anti-aliasing filter reads: `src` itself
/// without prescaling, else those rows resampled from the whole plane in `src`.
fn prescaled(d: &Dims, p: &Params, src: Rows) -> Result<Rows> {
    // A prescale that rounds to the same size copies the plane, as upstream's resampler does.
    if !prescales(p) || (d.sw, d.sh) == (d.w, d.h) {
        return Ok(src);
    }
    let taps = filter_size(1, p.kernelscale);
    let mut out = Rows::zeroed(d.sw, &rows_read(d.sh, taps, d.dh))?;
    let from = Src {
        data: &src.data,
        w: d.w,
        h: d.h,
        stride: d.w,
    };
    let ratio_x = d.w as f32 / d.sw as f32;
    let ratio_y = d.h as f32 / d.sh as f32;
    for (y, row) in out.rows_mut() {
        resample_row(p.method, &from, ratio_x, ratio_y, y, row);
    }
    Ok(out)
}

/// The anti-aliasing filter of `f` over the `sw`x`sh` plane in `rows`, evaluated only where
/// decimation by 16 samples it: `out[i * dw + j]` is the filtered sample at (16i, 16j), each
/// computed with exactly the operations of the whole-plane [`filter1d_ref`] (vertical taps
/// in order into the row, then horizontal taps in order), so the values are identical.
#[inline(always)]
pub(super) fn antialias_decimate_rows(
    f: &[f32],
    rows: &Rows,
    sw: usize,
    sh: usize,
    dw: usize,
    out: &mut [f32],
) {
    let half = f.len() / 2;
    let mut vrow = vec![0.0f32; sw];
    for (i, dst) in out.chunks_mut(dw.max(1)).enumerate() {
        vrow.fill(0.0);
        for (fi, &c) in f.iter().enumerate() {
            let src = rows.row(reflect((i * 16 + fi) as isize - half as isize, sh));
            for (t, &x) in vrow.iter_mut().zip(src) {
                *t += c * x;
            }
        }
        for (j, o) in dst.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for (fj, &c) in f.iter().enumerate() {
                acc += c * vrow[reflect((j * 16 + fj) as isize - half as isize, sw)];
            }
            *o = acc;
        }
    }
}

/// [`antialias_decimate_rows`] at the SIMD level `cpu`.
fn antialias_decimate(cpu: CpuLevel, f: &[f32], rows: &Rows, d: &Dims, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::antialias_decimate(cpu, f, rows, d.sw, d.sh, d.dw, out) {
        return;
    }
    let _ = cpu;
    antialias_decimate_rows(f, rows, d.sw, d.sh, d.dw, out)
}

/// Prescales, low-passes and decimates by 16 the plane in `src` (from [`load`], or a
/// difference of two such), then removes the local mean: the normalised `d.dw`x`d.dh` plane,
/// rows `d.dw` apart.
pub(super) fn filter_and_downscale(
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    src: Rows,
) -> Result<Vec<f32>> {
    let rows = prescaled(d, p, src)?;
    let n = d.dw * d.dh;
    let mut frame = crate::limits::try_filled(n, 0.0f32, "speed: decimated plane")?;
    antialias_decimate(cpu, &antialias_filter(p.kernelscale), &rows, d, &mut frame);
    let mut mean = crate::limits::try_filled(n, 0.0f32, "speed: local mean")?;
    filter1d(
        cpu,
        &mean_filter(p.kernelscale),
        &frame,
        &mut mean,
        d.dw,
        d.dh,
        d.dw,
    );
    for (f, &m) in frame.iter_mut().zip(&mean) {
        *f -= m;
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::checkasm::{sizes, Rng};

    /// The decimating filter at every level equals the whole-plane scalar filter sampled on
    /// every 16th row and column, bit for bit, with only the rows it reads present.
    #[test]
    fn checkasm_speed_antialias_decimate() {
        let mut rng = Rng::new(0xdec1);
        let levels = CpuLevel::available();
        for _ in 0..40 {
            let (w, h) = (80 + rng.below(300), 80 + rng.below(200));
            let ks = [0.5f32, 1.0, 1.5, 2.0, 4.0][rng.below(5)];
            let f = antialias_filter(ks);
            let src: Vec<f32> = (0..w * h)
                .map(|_| rng.next_u32() as f32 / 65536.0 - 32768.0)
                .collect();
            let mut full = vec![0.0f32; w * h];
            filter1d_ref(&f, &src, &mut full, w, h, w);
            let (dw, dh) = (w / 16, h / 16);
            let mut rows = Rows::zeroed(w, &rows_read(h, f.len(), dh)).unwrap();
            for (r, row) in rows.rows_mut() {
                row.copy_from_slice(&src[r * w..][..w]);
            }
            let kept = rows.slot.iter().filter(|&&s| s != SKIPPED).count();
            assert!(
                f.len() > 16 || kept < h,
                "{w}x{h} taps {}: every row kept",
                f.len()
            );
            for &cpu in &levels {
                let d = Dims::new(w, h, 1.0).unwrap();
                let mut got = vec![1.5f32; dw * dh];
                antialias_decimate(cpu, &f, &rows, &d, &mut got);
                for i in 0..dh {
                    for j in 0..dw {
                        let (a, b) = (full[i * 16 * w + j * 16], got[i * dw + j]);
                        assert_eq!(a.to_bits(), b.to_bits(), "{cpu} {w}x{h} ks {ks} ({i},{j})");
                    }
                }
            }
        }
    }

    /// The whole-plane pipeline as upstream runs it: every sample converted, the whole plane
    /// resampled and filtered, then sampled on every 16th row and column.
    fn dense_reference(pic: &PictureData, c: usize, d: &Dims, p: &Params) -> Vec<f32> {
        let (stride, rows) = (d.w.max(d.sw), d.h.max(d.sh));
        let mut frame = plane_to_float_sized(pic, c, d.w, d.h, stride, rows, "test").unwrap();
        if prescales(p) {
            let src = frame.clone();
            let from = Plane::new(&src, d.w, d.h, stride);
            resample(p.method, &from, &mut frame, d.sw, d.sh, stride);
        }
        let mut cur = vec![0.0f32; stride * rows];
        filter1d_ref(
            &antialias_filter(p.kernelscale),
            &frame,
            &mut cur,
            d.sw,
            d.sh,
            stride,
        );
        let dec: Vec<f32> = (0..d.dh)
            .flat_map(|i| (0..d.dw).map(move |j| (i, j)))
            .map(|(i, j)| cur[i * 16 * stride + j * 16])
            .collect();
        let mut mean = vec![0.0f32; dec.len()];
        filter1d_ref(
            &mean_filter(p.kernelscale),
            &dec,
            &mut mean,
            d.dw,
            d.dh,
            d.dw,
        );
        dec.iter().zip(&mean).map(|(a, b)| a - b).collect()
    }

    /// The row-sparse pipeline equals the whole-plane one bit for bit, for every prescaling
    /// method (sizes that round up, down or to the same size included), kernel scale, bit
    /// depth and chroma layout, at every SIMD level.
    #[test]
    fn sparse_pipeline_equals_whole_plane() {
        use crate::picture::PixelFormat;
        let cases: &[(PixelFormat, u32, usize, usize, f64, ScaleMethod, f32)] = &[
            (
                PixelFormat::Yuv420p,
                8,
                352,
                288,
                1.0,
                ScaleMethod::Nearest,
                1.0,
            ),
            (
                PixelFormat::Yuv422p,
                10,
                333,
                190,
                1.0,
                ScaleMethod::Nearest,
                2.0,
            ),
            (
                PixelFormat::Yuv444p,
                12,
                181,
                97,
                1.0005,
                ScaleMethod::Nearest,
                0.5,
            ),
            (
                PixelFormat::Yuv420p,
                8,
                560,
                320,
                0.6,
                ScaleMethod::Bilinear,
                1.0,
            ),
            (
                PixelFormat::Yuv420p,
                10,
                250,
                140,
                1.5,
                ScaleMethod::Bicubic,
                1.5,
            ),
            (
                PixelFormat::Yuv444p,
                8,
                260,
                150,
                0.7,
                ScaleMethod::Lanczos4,
                1.0,
            ),
            (
                PixelFormat::Yuv444p,
                8,
                170,
                90,
                1.25,
                ScaleMethod::Nearest,
                4.0,
            ),
            // 1.002 rounds 170 and 90 to themselves: the resampler copies.
            (
                PixelFormat::Yuv444p,
                8,
                170,
                90,
                1.002,
                ScaleMethod::Lanczos4,
                1.0,
            ),
        ];
        for (n, &(fmt, bpc, w, h, prescale, method, kernelscale)) in cases.iter().enumerate() {
            let pic = crate::testutil::noise_picture(fmt, bpc, w, h, n as u64 + 7);
            let p = Params {
                kernelscale,
                prescale,
                method,
                sigma_nn: 0.29,
                nn_floor: 0.0,
                weight_var_mode: 0,
            };
            for c in 0..3 {
                let d = Dims::new(pic.w[c], pic.h[c], prescale).unwrap();
                let want = dense_reference(&pic, c, &d, &p);
                for cpu in CpuLevel::available() {
                    let got =
                        filter_and_downscale(cpu, &d, &p, load(&pic, c, &d, &p).unwrap()).unwrap();
                    assert_eq!(got.len(), want.len());
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "case {n} plane {c} at {cpu}");
                }
            }
        }
    }

    /// The resampling tables, combined with the device's formulas (kernels/speed.hip), give
    /// `resample`'s values bit for bit for every method, up and down.
    #[test]
    fn resample_tables_reproduce_resample() {
        let mut rng = Rng::new(0x7ab1e);
        for &(w, h, dw, dh) in &[(97, 61, 58, 37), (40, 30, 71, 52), (33, 20, 33, 25)] {
            let src: Vec<f32> = (0..w * h)
                .map(|_| rng.next_u32() as f32 / 65536.0 - 32768.0)
                .collect();
            for method in [
                ScaleMethod::Nearest,
                ScaleMethod::Bilinear,
                ScaleMethod::Bicubic,
                ScaleMethod::Lanczos4,
            ] {
                let mut want = vec![0.0f32; dw * dh];
                resample(method, &Plane::new(&src, w, h, w), &mut want, dw, dh, dw);
                let (tx, ty) = (resample_axis(method, w, dw), resample_axis(method, h, dh));
                let k = tx.taps;
                for y in 0..dh {
                    for x in 0..dw {
                        let at = |c: usize, r: usize| {
                            src[ty.idx[y * k + r] as usize * w + tx.idx[x * k + c] as usize]
                        };
                        let v = match method {
                            ScaleMethod::Nearest => at(0, 0),
                            ScaleMethod::Bilinear => {
                                let (dx, dy) = (tx.wt[x * k], ty.wt[y * k]);
                                let (ex, ey) = (1.0 - dx, 1.0 - dy);
                                ey * ex * at(0, 0)
                                    + ey * dx * at(1, 0)
                                    + dy * ex * at(0, 1)
                                    + dy * dx * at(1, 1)
                            }
                            _ => {
                                let (mut acc, mut wsum) = (0.0f32, 0.0f32);
                                for r in 0..k {
                                    for c in 0..k {
                                        let wgt = tx.wt[x * k + c] * ty.wt[y * k + r];
                                        wsum += wgt;
                                        acc += at(c, r) * wgt;
                                    }
                                }
                                if method == ScaleMethod::Lanczos4 {
                                    acc / wsum
                                } else {
                                    acc
                                }
                            }
                        };
                        let got = want[y * dw + x];
                        assert_eq!(
                            v.to_bits(),
                            got.to_bits(),
                            "{method:?} {w}x{h}->{dw}x{dh} ({x},{y})"
                        );
                    }
                }
            }
        }
    }

    /// checkasm: `filter1d` at every available level equals the scalar reference bit for bit
    /// (signed zeros included) on random sizes, strides, taps and samples.
    #[test]
    fn checkasm_speed_filter1d() {
        let mut rng = Rng::new(0x5eed);
        let levels = CpuLevel::available();
        for (w, h) in sizes(&mut rng, 24) {
            for taps in [1usize, 3, 5, 9, 13, 21] {
                let half = taps / 2;
                // The reflection needs a side longer than half the filter (as upstream).
                if w <= half || h <= half {
                    continue;
                }
                let stride = w + rng.below(9);
                let mut f: Vec<f32> = (0..taps)
                    .map(|_| rng.next_u32() as f32 / u32::MAX as f32 - 0.25)
                    .collect();
                f[rng.below(taps)] = 0.0;
                let src: Vec<f32> = (0..stride * h)
                    .map(|_| match rng.below(8) {
                        0 => 0.0,
                        1 => -0.0,
                        2 => 255.0,
                        _ => rng.next_u32() as f32 / 65536.0 - 32768.0,
                    })
                    .collect();
                let mut want = vec![1.5f32; stride * h];
                filter1d_ref(&f, &src, &mut want, w, h, stride);
                for &cpu in &levels {
                    let mut got = vec![1.5f32; stride * h];
                    filter1d(cpu, &f, &src, &mut got, w, h, stride);
                    let same = want
                        .iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "filter1d {cpu} {w}x{h} stride {stride} taps {taps}");
                }
            }
        }
    }
}
