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
use crate::feature::speed::scale::{filter1d, vif_filter};
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

/// The filtered planes of one scale, `w`x`h` with pitch `w`.
struct Filtered {
    mu1: Vec<f32>,
    mu2: Vec<f32>,
    xx: Vec<f32>,
    yy: Vec<f32>,
    xy: Vec<f32>,
}

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

/// Filters `src` (`w`x`h`, pitch `w`) with `taps` into a fresh plane.
fn filtered(cpu: CpuLevel, taps: &[f32], src: &[f32], w: usize, h: usize) -> Result<Vec<f32>> {
    let mut out = try_filled(w * h, 0.0f32, "float_vif: filtered plane")?;
    filter1d(cpu, taps, src, &mut out, w, h, w);
    Ok(out)
}

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
