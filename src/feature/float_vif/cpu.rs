//! Float VIF arithmetic (upstream's `compute_vif` and the `vif_tools` statistic), bit-exact
//! with upstream's scalar path.
//!
//! Precision follows the C expressions: filters, local statistics and the per-row and total
//! sums are `f32`; the noise variance and the gain limit are `double` options, so the two
//! log arguments are formed in double and rounded to float, and the logarithm is upstream's
//! polynomial approximation of `log2f`, not the library one. The separable filters are SpEED's
//! [`filter1d`] (the same per-sample operations as `vif_filter1d_s`, vectorised bit-exactly);
//! the squared and cross-product filters are that filter applied to the float products, which
//! is how upstream multiplies inside its taps.

use crate::error::{Error, Result};
#[cfg(test)]
use crate::feature::speed::scale::filter1d;
use crate::feature::speed::scale::{reflect, vif_filter};
use crate::limits::try_filled;
use crate::simd::CpuLevel;

/// Number of VIF scales.
pub const SCALES: usize = 4;

/// Options of one VIF computation.
#[derive(Debug, Clone, Copy)]
pub struct VifParams {
    pub enhn_gain_limit: f64,
    /// A valid kernel scale (see `speed::valid_kernelscale`).
    pub kernelscale: f32,
    pub skip_scale0: bool,
    pub sigma_nsq: f64,
}

/// Per-scale numerator and denominator sums (scale 0 left at 0 when skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VifSums {
    pub num: [f32; SCALES],
    pub den: [f32; SCALES],
}

/// Coefficients of the log2 approximation on [1, 2) (upstream's double literals as floats).
const LOG2_POLY: [f32; 9] = [
    -0.012671635276421f64 as f32,
    0.064841182402670f64 as f32,
    -0.157048836463065f64 as f32,
    0.257167726303123f64 as f32,
    -0.353800560300520f64 as f32,
    0.480131410397451f64 as f32,
    -0.721314327952201f64 as f32,
    1.442694803896991f64 as f32,
    0.0,
];

#[cfg(test)]
/// Upstream's fast `log2f`: the unbiased exponent plus a polynomial in the mantissa minus 1
/// (Horner, in float). Zero gives -inf, negatives NaN.
pub fn log2_approx(x: f32) -> f32 {
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x < 0.0 {
        return f32::NAN;
    }
    let bits = x.to_bits();
    let exponent = ((bits & 0x7F80_0000) >> 23) as i32;
    let mantissa = f32::from_bits((bits & 0x007F_FFFF) | 0x3F80_0000);
    let t = mantissa - 1.0;
    let mut poly = 0.0f32;
    for &c in &LOG2_POLY {
        poly = poly * t + c;
    }
    (exponent - 127) as f32 + poly
}

/// C's `MAX(a, b)` on floats: `a > b ? a : b`.
#[inline]
fn fmax(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// C's `MIN(a, b)` on floats: `a < b ? a : b`.
#[inline]
fn fmin(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else {
        b
    }
}

#[cfg(test)]
/// The filtered planes of one scale, `w`x`h` with pitch `w`.
struct Filtered {
    mu1: Vec<f32>,
    mu2: Vec<f32>,
    xx: Vec<f32>,
    yy: Vec<f32>,
    xy: Vec<f32>,
}

#[cfg(test)]
/// The VIF numerator and denominator sums of one scale from its local statistics: per sample
/// the Matlab-matching statistic of upstream's `vif_statistic_s`, summed per row, then rows
/// summed, in float.
fn statistic(f: &Filtered, w: usize, p: &VifParams) -> (f32, f32) {
    let sigma_nsq = p.sigma_nsq;
    let sigma_max_inv = (f64::from((sigma_nsq as f32).powf(2.0)) / (255.0 * 255.0)) as f32;
    let eps = 1.0e-10f32;
    let gain_limit = p.enhn_gain_limit as f32;
    let (mut acc_num, mut acc_den) = (0.0f32, 0.0f32);
    let rows = f
        .mu1
        .chunks(w)
        .zip(f.mu2.chunks(w))
        .zip(f.xx.chunks(w).zip(f.yy.chunks(w)).zip(f.xy.chunks(w)));
    for ((m1, m2), ((xx, yy), xy)) in rows {
        let (mut row_num, mut row_den) = (0.0f32, 0.0f32);
        for j in 0..w {
            let (mu1, mu2) = (m1[j], m2[j]);
            let mut sigma1_sq = fmax(xx[j] - mu1 * mu1, 0.0);
            let sigma2_sq = fmax(yy[j] - mu2 * mu2, 0.0);
            let sigma12 = xy[j] - mu1 * mu2;

            let mut g = sigma12 / (sigma1_sq + eps);
            let mut sv_sq = sigma2_sq - g * sigma12;
            if sigma1_sq < eps {
                g = 0.0;
                sv_sq = sigma2_sq;
                sigma1_sq = 0.0;
            }
            if sigma2_sq < eps {
                g = 0.0;
                sv_sq = 0.0;
            }
            if g < 0.0 {
                sv_sq = sigma2_sq;
                g = 0.0;
            }
            sv_sq = fmax(sv_sq, eps);
            g = fmin(g, gain_limit);

            let num_arg = 1.0 + f64::from(g * g * sigma1_sq) / (f64::from(sv_sq) + sigma_nsq);
            let mut num = log2_approx(num_arg as f32);
            let mut den = log2_approx((1.0 + f64::from(sigma1_sq) / sigma_nsq) as f32);
            if sigma12 < 0.0 {
                num = 0.0;
            }
            if f64::from(sigma1_sq) < sigma_nsq {
                num = 1.0 - sigma2_sq * sigma_max_inv;
                den = 1.0;
            }
            row_num += num;
            row_den += den;
        }
        acc_num += row_num;
        acc_den += row_den;
    }
    (acc_num, acc_den)
}

#[cfg(test)]
/// Filters `src` (`w`x`h`, pitch `w`) with `taps` into a fresh plane.
fn filtered(cpu: CpuLevel, taps: &[f32], src: &[f32], w: usize, h: usize) -> Result<Vec<f32>> {
    let mut out = try_filled(w * h, 0.0f32, "float_vif: filtered plane")?;
    filter1d(cpu, taps, src, &mut out, w, h, w);
    Ok(out)
}

#[cfg(test)]
/// The element-wise float product of two planes.
fn product(a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    let mut out = try_filled(a.len(), 0.0f32, "float_vif: product plane")?;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x * y;
    }
    Ok(out)
}

/// Refuses a `w`x`h` plane at `scale` that a filter of `len` taps would mirror past (upstream
/// reads outside the image there).
fn check_size(w: usize, h: usize, len: usize, scale: usize) -> Result<()> {
    if w <= len / 2 || h <= len / 2 {
        return Err(Error::inval(format!(
            "float_vif: picture too small: {w}x{h} at scale {scale} for a {len}-tap filter"
        )));
    }
    Ok(())
}

#[cfg(test)]
/// Every other sample of every other row of the filtered plane: the next scale.
fn decimate(src: &[f32], w: usize, h: usize) -> Result<Vec<f32>> {
    let (dw, dh) = (w / 2, h / 2);
    let mut out = try_filled(dw * dh, 0.0f32, "float_vif: decimated plane")?;
    if dw == 0 {
        return Ok(out);
    }
    for (o, row) in out.chunks_mut(dw).zip(src.chunks(w).step_by(2)) {
        for (d, &s) in o.iter_mut().zip(row.iter().step_by(2)) {
            *d = s;
        }
    }
    Ok(out)
}

/// VIF sums of a reference and a distorted `w`x`h` float plane (pitch `w`, minus 128 as
/// upstream prepares them) at each of the four scales; each scale after the first is the
/// previous one low-passed with that scale's Gaussian and decimated by 2.
///
/// Computed row by row ([`scale_sums_rows`], [`filter_decimate_rows`]): the same operations
/// per sample, in the same order, as filtering whole planes ([`compute_vif_ref`]).
pub fn compute_vif(
    reference: &[f32],
    distorted: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
    cpu: CpuLevel,
) -> Result<VifSums> {
    if reference.len() < w * h || distorted.len() < w * h {
        return Err(Error::inval("float_vif: plane shorter than its size"));
    }
    let mut sums = VifSums::default();
    let (mut w, mut h) = (w, h);
    // The current scale's planes once decimated (the input planes before that).
    let mut scaled: Option<(Vec<f32>, Vec<f32>)> = None;
    let start = usize::from(p.skip_scale0);
    for scale in start..SCALES {
        let taps = vif_filter(scale as u32, p.kernelscale);
        if scale > 0 {
            let (r, d) = match &scaled {
                Some((r, d)) => (&r[..], &d[..]),
                None => (&reference[..w * h], &distorted[..w * h]),
            };
            check_size(w, h, taps.len(), scale)?;
            let (dw, dh) = (w / 2, h / 2);
            let mut nr = try_filled(dw * dh, 0.0f32, "float_vif: decimated plane")?;
            let mut nd = try_filled(dw * dh, 0.0f32, "float_vif: decimated plane")?;
            filter_decimate(cpu, &taps, r, &mut nr, w, h);
            filter_decimate(cpu, &taps, d, &mut nd, w, h);
            scaled = Some((nr, nd));
            w = dw;
            h = dh;
        }
        let (r, d) = match &scaled {
            Some((r, d)) => (&r[..], &d[..]),
            None => (&reference[..w * h], &distorted[..w * h]),
        };
        check_size(w, h, taps.len(), scale)?;
        let (num, den) = scale_sums(cpu, &taps, r, d, w, h, p);
        sums.num[scale] = num;
        sums.den[scale] = den;
    }
    Ok(sums)
}

/// [`scale_sums_rows`] at the level `cpu` (the same values at every level).
fn scale_sums(
    cpu: CpuLevel,
    taps: &[f32],
    r: &[f32],
    d: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(s) = super::x86::scale_sums(cpu, taps, r, d, w, h, p) {
        return s;
    }
    let _ = cpu;
    scale_sums_rows(taps, r, d, w, h, p)
}

/// [`filter_decimate_rows`] at the level `cpu` (the same values at every level).
fn filter_decimate(cpu: CpuLevel, taps: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::filter_decimate(cpu, taps, src, dst, w, h) {
        return;
    }
    let _ = cpu;
    filter_decimate_rows(taps, src, dst, w, h)
}

/// Vertical taps of the five planes (mu1, mu2, xx, yy, xy) for the `B` samples from `j` of
/// one output row: each sum starts at 0 and adds `c * x` tap by tap, `x` being the sample or
/// the float product of the two samples, as filtering the product planes does.
#[inline(always)]
fn vertical5<const B: usize>(
    taps: &[f32],
    rows: &[usize],
    r: &[f32],
    d: &[f32],
    j: usize,
    out: &mut [Vec<f32>; 5],
) {
    let mut a = [[0.0f32; B]; 5];
    for (&c, &off) in taps.iter().zip(rows) {
        let rr = &r[off + j..off + j + B];
        let dd = &d[off + j..off + j + B];
        for l in 0..B {
            let (x, y) = (rr[l], dd[l]);
            a[0][l] += c * x;
            a[1][l] += c * y;
            a[2][l] += c * (x * x);
            a[3][l] += c * (y * y);
            a[4][l] += c * (x * y);
        }
    }
    for (o, a) in out.iter_mut().zip(&a) {
        o[j..j + B].copy_from_slice(a);
    }
}

/// Horizontal taps for the `B` outputs from `j`: `out[j] = sum c_k * ext[j + k]`, in order.
#[inline(always)]
fn horizontal<const B: usize>(taps: &[f32], ext: &[f32], j: usize, out: &mut [f32]) {
    let mut a = [0.0f32; B];
    for (k, &c) in taps.iter().enumerate() {
        let e = &ext[j + k..j + k + B];
        for l in 0..B {
            a[l] += c * e[l];
        }
    }
    out[j..j + B].copy_from_slice(&a);
}

/// Lanes per block of the row loops.
const BLOCK: usize = 16;

/// The horizontal pass of `row` (reflected into `ext`) into `out`.
#[inline(always)]
fn horizontal_row(taps: &[f32], row: &[f32], ext: &mut [f32], out: &mut [f32]) {
    let w = row.len();
    let half = taps.len() / 2;
    for (k, e) in ext.iter_mut().enumerate() {
        *e = row[reflect(k as isize - half as isize, w)];
    }
    let mut j = 0;
    while j + BLOCK <= w {
        horizontal::<BLOCK>(taps, ext, j, out);
        j += BLOCK;
    }
    while j < w {
        horizontal::<1>(taps, ext, j, out);
        j += 1;
    }
}

/// Upstream's `log2f` approximation as [`log2_approx`], without branches (selects).
#[inline(always)]
fn log2_select(x: f32) -> f32 {
    let bits = x.to_bits();
    let exponent = ((bits & 0x7F80_0000) >> 23) as i32;
    let mantissa = f32::from_bits((bits & 0x007F_FFFF) | 0x3F80_0000);
    let t = mantissa - 1.0;
    let mut poly = 0.0f32;
    for &c in &LOG2_POLY {
        poly = poly * t + c;
    }
    let v = (exponent - 127) as f32 + poly;
    let v = if x < 0.0 { f32::NAN } else { v };
    if x == 0.0 {
        f32::NEG_INFINITY
    } else {
        v
    }
}

/// The constants of the statistic.
#[derive(Clone, Copy)]
struct StatConsts {
    sigma_nsq: f64,
    sigma_max_inv: f32,
    eps: f32,
    gain_limit: f32,
}

impl StatConsts {
    fn new(p: &VifParams) -> Self {
        let sigma_nsq = p.sigma_nsq;
        StatConsts {
            sigma_nsq,
            sigma_max_inv: (f64::from((sigma_nsq as f32).powf(2.0)) / (255.0 * 255.0)) as f32,
            eps: 1.0e-10f32,
            gain_limit: p.enhn_gain_limit as f32,
        }
    }
}

/// The per-sample statistic of [`statistic`] (the same operations), for one sample.
#[inline(always)]
fn stat_sample(k: StatConsts, mu1: f32, mu2: f32, xx: f32, yy: f32, xy: f32) -> (f32, f32) {
    let eps = k.eps;
    let sigma_nsq = k.sigma_nsq;
    let mut sigma1_sq = fmax(xx - mu1 * mu1, 0.0);
    let sigma2_sq = fmax(yy - mu2 * mu2, 0.0);
    let sigma12 = xy - mu1 * mu2;

    let mut g = sigma12 / (sigma1_sq + eps);
    let mut sv_sq = sigma2_sq - g * sigma12;
    let small1 = sigma1_sq < eps;
    g = if small1 { 0.0 } else { g };
    sv_sq = if small1 { sigma2_sq } else { sv_sq };
    sigma1_sq = if small1 { 0.0 } else { sigma1_sq };
    let small2 = sigma2_sq < eps;
    g = if small2 { 0.0 } else { g };
    sv_sq = if small2 { 0.0 } else { sv_sq };
    let neg = g < 0.0;
    sv_sq = if neg { sigma2_sq } else { sv_sq };
    g = if neg { 0.0 } else { g };
    sv_sq = fmax(sv_sq, eps);
    g = fmin(g, k.gain_limit);

    let num_arg = 1.0 + f64::from(g * g * sigma1_sq) / (f64::from(sv_sq) + sigma_nsq);
    let num = log2_select(num_arg as f32);
    let den = log2_select((1.0 + f64::from(sigma1_sq) / sigma_nsq) as f32);
    let num = if sigma12 < 0.0 { 0.0 } else { num };
    let low = f64::from(sigma1_sq) < sigma_nsq;
    let num = if low {
        1.0 - sigma2_sq * k.sigma_max_inv
    } else {
        num
    };
    let den = if low { 1.0 } else { den };
    (num, den)
}

/// The VIF numerator and denominator sums of one `w`x`h` scale (pitch `w`) filtered with
/// `taps`: per output row the five planes' vertical then horizontal passes, the statistic per
/// sample, then the row's sums in sample order and the total in row order, all as
/// [`statistic`] of the whole filtered planes. Inlined into the level wrappers of `x86.rs`.
#[inline(always)]
pub(super) fn scale_sums_rows(
    taps: &[f32],
    r: &[f32],
    d: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
) -> (f32, f32) {
    let k = StatConsts::new(p);
    let half = taps.len() / 2;
    let mut v: [Vec<f32>; 5] = std::array::from_fn(|_| vec![0.0f32; w]);
    let mut f: [Vec<f32>; 5] = std::array::from_fn(|_| vec![0.0f32; w]);
    let mut ext = vec![0.0f32; w + 2 * half];
    let mut rows = vec![0usize; taps.len()];
    let mut num = vec![0.0f32; w];
    let mut den = vec![0.0f32; w];
    let (mut acc_num, mut acc_den) = (0.0f32, 0.0f32);
    for i in 0..h {
        for (fi, o) in rows.iter_mut().enumerate() {
            *o = reflect(i as isize - half as isize + fi as isize, h) * w;
        }
        let mut j = 0;
        while j + BLOCK <= w {
            vertical5::<BLOCK>(taps, &rows, r, d, j, &mut v);
            j += BLOCK;
        }
        while j < w {
            vertical5::<1>(taps, &rows, r, d, j, &mut v);
            j += 1;
        }
        for (row, out) in v.iter().zip(f.iter_mut()) {
            horizontal_row(taps, row, &mut ext, out);
        }
        let [mu1, mu2, xx, yy, xy] = &f;
        for j in 0..w {
            let (n, e) = stat_sample(k, mu1[j], mu2[j], xx[j], yy[j], xy[j]);
            num[j] = n;
            den[j] = e;
        }
        let (mut row_num, mut row_den) = (0.0f32, 0.0f32);
        for (&n, &e) in num.iter().zip(&den) {
            row_num += n;
            row_den += e;
        }
        acc_num += row_num;
        acc_den += row_den;
    }
    (acc_num, acc_den)
}

/// The even samples of the even rows of `src` (`w`x`h`, pitch `w`) filtered with `taps`, into
/// `dst` (`w/2`x`h/2`, pitch `w/2`): [`filter1d`] then [`decimate`], computing only the rows
/// kept. Inlined into the level wrappers of `x86.rs`.
#[inline(always)]
pub(super) fn filter_decimate_rows(taps: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize) {
    let (dw, dh) = (w / 2, h / 2);
    if dw == 0 {
        return;
    }
    let half = taps.len() / 2;
    let mut row = vec![0.0f32; w];
    let mut ext = vec![0.0f32; w + 2 * half];
    let mut out = vec![0.0f32; w];
    for (di, o) in dst.chunks_mut(dw).take(dh).enumerate() {
        let i = 2 * di;
        row.fill(0.0);
        for (fi, &c) in taps.iter().enumerate() {
            let ii = reflect(i as isize - half as isize + fi as isize, h);
            let s = &src[ii * w..ii * w + w];
            for (t, &x) in row.iter_mut().zip(s) {
                *t += c * x;
            }
        }
        horizontal_row(taps, &row, &mut ext, &mut out);
        for (d, &s) in o.iter_mut().zip(out.iter().step_by(2)) {
            *d = s;
        }
    }
}

/// The whole-plane form of [`compute_vif`] (upstream's structure: filtered planes, then the
/// statistic): the reference the row form is checked against.
#[cfg(test)]
pub(super) fn compute_vif_ref(
    reference: &[f32],
    distorted: &[f32],
    w: usize,
    h: usize,
    p: &VifParams,
    cpu: CpuLevel,
) -> Result<VifSums> {
    if reference.len() < w * h || distorted.len() < w * h {
        return Err(Error::inval("float_vif: plane shorter than its size"));
    }
    let mut sums = VifSums::default();
    let (mut w, mut h) = (w, h);
    let mut scaled: Option<(Vec<f32>, Vec<f32>)> = None;
    let start = usize::from(p.skip_scale0);
    for scale in start..SCALES {
        let taps = vif_filter(scale as u32, p.kernelscale);
        if scale > 0 {
            let (r, d) = match &scaled {
                Some((r, d)) => (&r[..], &d[..]),
                None => (&reference[..w * h], &distorted[..w * h]),
            };
            check_size(w, h, taps.len(), scale)?;
            let r = decimate(&filtered(cpu, &taps, r, w, h)?, w, h)?;
            let d = decimate(&filtered(cpu, &taps, d, w, h)?, w, h)?;
            scaled = Some((r, d));
            w /= 2;
            h /= 2;
        }
        let (r, d) = match &scaled {
            Some((r, d)) => (&r[..], &d[..]),
            None => (&reference[..w * h], &distorted[..w * h]),
        };
        check_size(w, h, taps.len(), scale)?;
        let f = Filtered {
            mu1: filtered(cpu, &taps, r, w, h)?,
            mu2: filtered(cpu, &taps, d, w, h)?,
            xx: filtered(cpu, &taps, &product(r, r)?, w, h)?,
            yy: filtered(cpu, &taps, &product(d, d)?, w, h)?,
            xy: filtered(cpu, &taps, &product(r, d)?, w, h)?,
        };
        let (num, den) = statistic(&f, w, p);
        sums.num[scale] = num;
        sums.den[scale] = den;
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::checkasm::{sizes, Rng};

    /// checkasm: the row form of `compute_vif` at every available level equals the
    /// whole-plane reference bit for bit, on random sizes, samples, kernel scales and options.
    #[test]
    fn checkasm_float_vif_rows() {
        let mut rng = Rng::new(0xf1f);
        let levels = CpuLevel::available();
        for (w, h) in sizes(&mut rng, 16) {
            let (w, h) = (w + 16, h + 16);
            let r: Vec<f32> = (0..w * h)
                .map(|_| match rng.below(8) {
                    0 => -128.0,
                    1 => 127.0,
                    2 => 0.0,
                    _ => (rng.below(256) as f32 - 128.0) + (rng.below(4) as f32) * 0.25,
                })
                .collect();
            let d: Vec<f32> = r
                .iter()
                .map(|&x| match rng.below(4) {
                    0 => x,
                    1 => -x,
                    _ => x + rng.below(41) as f32 - 20.0,
                })
                .collect();
            for (ks, skip, gain, nsq) in [
                (1.0f32, false, 100.0, 2.0),
                (0.5, true, 1.0, 2.0),
                (1.0, false, 1.0, 0.4),
            ] {
                let p = VifParams {
                    enhn_gain_limit: gain,
                    kernelscale: ks,
                    skip_scale0: skip,
                    sigma_nsq: nsq,
                };
                let want = compute_vif_ref(&r, &d, w, h, &p, CpuLevel::SCALAR);
                for &cpu in &levels {
                    let got = compute_vif(&r, &d, w, h, &p, cpu);
                    match (&want, &got) {
                        (Ok(a), Ok(b)) => {
                            let same = a
                                .num
                                .iter()
                                .chain(&a.den)
                                .zip(b.num.iter().chain(&b.den))
                                .all(|(x, y)| x.to_bits() == y.to_bits());
                            assert!(same, "{cpu} {w}x{h} {p:?}: {a:?} vs {b:?}");
                        }
                        (Err(_), Err(_)) => {}
                        _ => panic!("{cpu} {w}x{h} {p:?}: {want:?} vs {got:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn log2_select_matches() {
        let mut rng = Rng::new(7);
        for x in [
            0.0f32,
            -0.0,
            -1.0,
            1.0,
            f32::INFINITY,
            f32::MIN_POSITIVE,
            1.0e-42,
        ] {
            assert_eq!(log2_select(x).to_bits(), log2_approx(x).to_bits(), "{x}");
        }
        for _ in 0..100_000 {
            let x = f32::from_bits(rng.next_u32());
            let (a, b) = (log2_select(x), log2_approx(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{x}"
            );
        }
    }

    #[test]
    fn log2_approximation() {
        assert_eq!(log2_approx(1.0), 0.0);
        assert_eq!(log2_approx(2.0), 1.0);
        assert_eq!(log2_approx(0.25), -2.0);
        assert_eq!(log2_approx(0.0), f32::NEG_INFINITY);
        assert!(log2_approx(-1.0).is_nan());
        for x in [1.5f32, 3.0, 10.0, 1000.0, 1.0e-3] {
            assert!((log2_approx(x) - x.log2()).abs() < 1e-4, "{x}");
        }
    }

    #[test]
    fn identical_planes_score_one_per_scale() {
        let (w, h) = (64, 48);
        let plane: Vec<f32> = (0..w * h)
            .map(|i| ((i * 7919) % 251) as f32 - 128.0)
            .collect();
        let p = VifParams {
            enhn_gain_limit: 100.0,
            kernelscale: 1.0,
            skip_scale0: false,
            sigma_nsq: 2.0,
        };
        let s = compute_vif(&plane, &plane, w, h, &p, CpuLevel::default()).unwrap();
        for i in 0..SCALES {
            let r = s.num[i] / s.den[i];
            assert!((r - 1.0).abs() < 1e-3, "scale {i}: {s:?}");
        }
        let skip = VifParams {
            skip_scale0: true,
            ..p
        };
        let t = compute_vif(&plane, &plane, w, h, &skip, CpuLevel::default()).unwrap();
        assert_eq!((t.num[0], t.den[0]), (0.0, 0.0));
        assert_eq!(t.num[1..], s.num[1..]);
        // Scale 3 of 15x15 is 1x1: too small for its 3-tap filter.
        assert!(compute_vif(&plane, &plane, 15, 15, &p, CpuLevel::default()).is_err());
        assert!(compute_vif(&plane[..10], &plane, w, h, &p, CpuLevel::default()).is_err());
    }
}
