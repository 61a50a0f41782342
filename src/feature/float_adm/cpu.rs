//! The float ADM pipeline on the CPU, bit-exact with libvmaf's scalar `adm.c`/`adm_tools.c`.
//!
//! Per scale: a db2 wavelet step of both luma planes, decoupling of the distorted detail bands
//! into a restored part (what is left of the reference detail) and an additive part,
//! CSF weighting, contrast masking of one part by the other, and p-norm pooling inside the
//! score window. The numerator pools the restored part masked by the additive one (detail
//! loss), AIM pools the additive part masked by the restored one, the denominator pools the
//! CSF-weighted reference.
//!
//! Bit-exactness notes (upstream is built without fast-math and without FMA contraction):
//! * pixel arithmetic is `f32` in upstream's order; pooled sums are per-row `f32` sums added
//!   to an `f32` total, converted to `f64` only when the four scales are added up;
//! * the masking filter's `1/15` and `1/30` weights are double constants: their products
//!   are formed in double and rounded once, as the C promotion does;
//! * the decoupling ratio divides through the CPU's reciprocal estimate plus one Newton step
//!   on x86_64 (as upstream does wherever SSE2 is on) and with a true division elsewhere.
//!
//! Stages that only feed the masking filter run on the score window grown by one tap
//! ([`csf_window`]); values outside it are never read, so buffers keep stale data there.

use crate::error::{Error, Result};
use crate::feature::adm::cpu::{csf_window, score_window};
use crate::feature::adm::tables::COS_1DEG_SQ;
use crate::limits::try_filled;

/// Number of wavelet scales.
pub const NUM_SCALES: usize = 4;

/// Smallest frame side: the coarsest band must keep at least 2 rows and columns, since the
/// masking filter mirrors index -1 onto index 1.
pub const MIN_SIDE: usize = 17;

/// db2 analysis taps, rounded to `f32` from upstream's double literals.
const DWT_LO: [f32; 4] = [
    0.482962913144690_f64 as f32,
    0.836516303737469_f64 as f32,
    0.224143868041857_f64 as f32,
    -0.129409522550921_f64 as f32,
];
const DWT_HI: [f32; 4] = [
    -0.129409522550921_f64 as f32,
    -0.224143868041857_f64 as f32,
    0.836516303737469_f64 as f32,
    -0.482962913144690_f64 as f32,
];

/// Weight of the centre sample in the masking threshold (a double: 1/15 rounded to float).
const CENTRE_WEIGHT: f64 = 0.0666666701;
/// Weight of each masker sample in the masking filter (a double: 1/30 rounded to float).
const MASKER_WEIGHT: f64 = 0.0333333351;

/// Added to the reference coefficient before dividing by it.
const DIV_EPS: f32 = 1e-30_f64 as f32;

/// Everything the pipeline needs, derived once from the options.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Enhancement gain limit (>= 1).
    pub egl: f64,
    /// Weight of the noise floor added to every numerator and denominator band.
    pub noise_weight: f64,
    /// Skip contrast masking (the threshold stays 0).
    pub bypass_cm: bool,
    /// Exponent of the pooling norm.
    pub p_norm: f64,
    /// Scale left out of the AIM sums (-1: none).
    pub skip_aim_scale: i32,
    /// Scale 0 contributes numerator 0 and denominator 1e-10.
    pub skip_scale0: bool,
    /// CSF weights per scale for the h, v and d bands.
    pub rfactor: [[f32; 3]; NUM_SCALES],
}

/// One frame's pooled sums.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sums {
    /// Per-scale numerator and denominator (as upstream's `float`s).
    pub num_scale: [f32; NUM_SCALES],
    pub den_scale: [f32; NUM_SCALES],
    /// Totals over the scales, zeroed when below the size-dependent floor.
    pub num: f64,
    pub den: f64,
    /// AIM numerator and denominator over the scales not skipped.
    pub aim_num: f64,
    pub aim_den: f64,
}

/// The four subbands of one wavelet step, each `(w + 1) / 2` wide (that is also the stride).
#[derive(Debug, Default)]
struct Bands {
    a: Vec<f32>,
    h: Vec<f32>,
    v: Vec<f32>,
    d: Vec<f32>,
}

impl Bands {
    fn fit(&mut self, n: usize) -> Result<()> {
        for b in [&mut self.a, &mut self.h, &mut self.v, &mut self.d] {
            fit(b, n)?;
        }
        Ok(())
    }

    /// The detail bands in upstream's orientation order (h, v, d).
    fn details(&self) -> [&[f32]; 3] {
        [&self.h, &self.v, &self.d]
    }
}

/// Working memory of one frame, reused across frames.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Input of the current scale per picture (reference, distorted): the luma plane as
    /// float, then the previous scale's approximation band.
    pub(super) src: [Vec<f32>; 2],
    bands: [Bands; 2],
    /// Decoupled restored and additive parts (h, v, d).
    restored: [Vec<f32>; 3],
    additive: [Vec<f32>; 3],
    /// CSF-weighted masker and its filter input.
    masker: [Vec<f32>; 3],
    masker_flt: [Vec<f32>; 3],
    row_lo: Vec<f32>,
    row_hi: Vec<f32>,
    col_taps: Vec<[usize; 4]>,
}

fn fit(buf: &mut Vec<f32>, n: usize) -> Result<()> {
    if buf.len() < n {
        *buf = try_filled(n, 0.0, "float_adm: band buffer")?;
    }
    Ok(())
}

impl Scratch {
    /// Sizes every buffer for a `w`x`h` frame.
    pub(super) fn fit(&mut self, w: usize, h: usize) -> Result<()> {
        let n = w
            .checked_mul(h)
            .ok_or_else(|| Error::inval("float_adm: picture too large"))?;
        let band = w.div_ceil(2) * h.div_ceil(2);
        for s in &mut self.src {
            fit(s, n)?;
        }
        for b in &mut self.bands {
            b.fit(band)?;
        }
        for b in self
            .restored
            .iter_mut()
            .chain(&mut self.additive)
            .chain(&mut self.masker)
            .chain(&mut self.masker_flt)
        {
            fit(b, band)?;
        }
        fit(&mut self.row_lo, w)?;
        fit(&mut self.row_hi, w)?;
        if self.col_taps.len() < w.div_ceil(2) {
            self.col_taps = try_filled(w.div_ceil(2), [0; 4], "float_adm: column taps")?;
        }
        Ok(())
    }
}

/// `n / d` as upstream's SSE build divides: the reciprocal estimate refined by one Newton step.
#[cfg(target_arch = "x86_64")]
#[inline]
fn div(n: f32, d: f32) -> f32 {
    let e = super::x86::rcp_estimate(d);
    n * (e + e * (1.0 - d * e))
}

/// A hash of the reciprocals [`div`] computes for 4096 divisors spanning every mantissa step
/// of RCPSS's table, so tests can tell whether this CPU divides as the CPU that made a set of
/// upstream logs did (Intel's and AMD's RCPSS tables differ in their last bits).
pub fn reciprocal_fingerprint() -> u64 {
    (0..4096u32).fold(0xcbf2_9ce4_8422_2325, |h, i| {
        let d = 1.0 + i as f32 / 4096.0;
        (h ^ u64::from(div(1.0, d).to_bits())).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `n / d`: without SSE upstream divides plainly.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn div(n: f32, d: f32) -> f32 {
    n / d
}

/// `|x|^p`, as a product of three when `p` is 3 (upstream's fast path) and `powf` otherwise.
#[inline]
fn pow_p(x: f32, p: f64) -> f32 {
    if p == 3.0 {
        x * x * x
    } else {
        x.powf(p as f32)
    }
}

/// The four source indices of wavelet output `i` along a side of `n` samples: 2i-1 .. 2i+2,
/// with -1 reflected onto 1 and indices past the end reflected onto the last ones (n-1, n-2).
fn dwt_taps(i: usize, n: usize) -> [usize; 4] {
    let reflect = |k: usize| if k >= n { 2 * n - k - 1 } else { k };
    let first = if i == 0 { 1 } else { reflect(2 * i - 1) };
    [
        first,
        reflect(2 * i),
        reflect(2 * i + 1),
        reflect(2 * i + 2),
    ]
}

#[inline]
fn filter(taps: &[f32; 4], s: [f32; 4]) -> f32 {
    let mut acc = 0f32;
    acc += taps[0] * s[0];
    acc += taps[1] * s[1];
    acc += taps[2] * s[2];
    acc += taps[3] * s[3];
    acc
}

/// One db2 step of the `w`x`h` image `src` (stride `w`) into `out`; only the approximation
/// band when `lo_only`.
#[allow(clippy::too_many_arguments)]
fn dwt(
    src: &[f32],
    w: usize,
    h: usize,
    col_taps: &mut [[usize; 4]],
    row_lo: &mut [f32],
    row_hi: &mut [f32],
    out: &mut Bands,
    lo_only: bool,
) {
    let (ow, oh) = (w.div_ceil(2), h.div_ceil(2));
    let col_taps = &mut col_taps[..ow];
    for (j, t) in col_taps.iter_mut().enumerate() {
        *t = dwt_taps(j, w);
    }
    let (row_lo, row_hi) = (&mut row_lo[..w], &mut row_hi[..w]);
    for i in 0..oh {
        let rows = dwt_taps(i, h).map(|r| &src[r * w..][..w]);
        for j in 0..w {
            let s = [rows[0][j], rows[1][j], rows[2][j], rows[3][j]];
            row_lo[j] = filter(&DWT_LO, s);
            if !lo_only {
                row_hi[j] = filter(&DWT_HI, s);
            }
        }
        let o = i * ow;
        for (j, t) in col_taps.iter().enumerate() {
            let lo = t.map(|c| row_lo[c]);
            out.a[o + j] = filter(&DWT_LO, lo);
            if lo_only {
                continue;
            }
            out.v[o + j] = filter(&DWT_HI, lo);
            let hi = t.map(|c| row_hi[c]);
            out.h[o + j] = filter(&DWT_LO, hi);
            out.d[o + j] = filter(&DWT_HI, hi);
        }
    }
}

/// `(double)(f * egl)` clipped to `t` in double and stored as float, applied in the direction of
/// `f`'s sign: upstream's bounded enhancement gain.
#[inline]
fn limit_gain(rst: f32, t: f32, egl: f64) -> f32 {
    let mut r = rst;
    if r > 0.0 {
        let g = f64::from(r) * egl;
        r = if g < f64::from(t) { g as f32 } else { t };
    }
    if r < 0.0 {
        let g = f64::from(r) * egl;
        r = if g > f64::from(t) { g as f32 } else { t };
    }
    r
}

/// Splits the distorted detail bands into the part explained by the reference (each band's
/// ratio to the reference clamped to [0, 1], or the distorted value itself, within the gain
/// limit, when the (h, v) orientations agree within one degree) and the additive rest.
fn decouple(
    rf: &Bands,
    ds: &Bands,
    w: usize,
    h: usize,
    egl: f64,
    restored: &mut [Vec<f32>; 3],
    additive: &mut [Vec<f32>; 3],
) {
    let (left, right) = csf_window(w);
    let (top, bottom) = csf_window(h);
    for i in top..bottom {
        for k in i * w + left..i * w + right {
            let o = [rf.h[k], rf.v[k], rf.d[k]];
            let t = [ds.h[k], ds.v[k], ds.d[k]];
            let dot = o[0] * t[0] + o[1] * t[1];
            let o_mag = o[0] * o[0] + o[1] * o[1];
            let t_mag = t[0] * t[0] + t[1] * t[1];
            let aligned = dot >= 0.0 && dot * dot >= COS_1DEG_SQ * o_mag * t_mag;
            for b in 0..3 {
                // NaN (from a zero divisor) passes through, as upstream's comparisons let it.
                let ratio = div(t[b], o[b] + DIV_EPS).clamp(0.0, 1.0);
                let mut rst = ratio * o[b];
                if aligned {
                    rst = limit_gain(rst, t[b], egl);
                }
                restored[b][k] = rst;
                additive[b][k] = t[b] - rst;
            }
        }
    }
}

/// CSF weighting of `src` into `masker`, and the masking filter's input `|masker| / 30` into
/// `flt`.
fn csf(
    src: &[Vec<f32>; 3],
    rfactor: &[f32; 3],
    w: usize,
    h: usize,
    masker: &mut [Vec<f32>; 3],
    flt: &mut [Vec<f32>; 3],
) {
    let (left, right) = csf_window(w);
    let (top, bottom) = csf_window(h);
    for b in 0..3 {
        for i in top..bottom {
            for k in i * w + left..i * w + right {
                let m = rfactor[b] * src[b][k];
                masker[b][k] = m;
                flt[b][k] = (MASKER_WEIGHT * f64::from(m.abs())) as f32;
            }
        }
    }
}

/// `powf(x, 1/p)` with upstream's float exponent.
#[inline]
fn root(x: f32, p: f64) -> f32 {
    x.powf((1.0 / p) as f32)
}

/// The noise floor of a `ww`x`wh` window: `powf(area * weight, 1/p)`.
fn noise_floor(ww: usize, wh: usize, weight: f64, p: f64) -> f32 {
    root(((ww * wh) as f64 * weight) as f32, p)
}

/// Pools the CSF-weighted reference detail bands over the score window: per band the p-norm
/// plus the noise floor, summed over h, v, d.
fn denominator(rf: &Bands, rfactor: &[f32; 3], w: usize, h: usize, p: &Params) -> f32 {
    let (left, right) = score_window(w);
    let (top, bottom) = score_window(h);
    let bands = rf.details();
    let mut acc = [0f32; 3];
    for i in top..bottom {
        for b in 0..3 {
            let row = &bands[b][i * w + left..i * w + right];
            acc[b] += row
                .iter()
                .fold(0f32, |s, &x| s + pow_p((rfactor[b] * x).abs(), p.p_norm));
        }
    }
    let nf = noise_floor(right - left, bottom - top, p.noise_weight, p.p_norm);
    let per_band = acc.map(|a| root(a, p.p_norm) + nf);
    per_band[0] + per_band[1] + per_band[2]
}

/// Pools the CSF-weighted `src` bands over the score window after subtracting the masking
/// threshold set by `masker` (its 3x3 neighbourhood of `flt` around each sample, the centre
/// replaced by `|masker| / 15`, summed over the three orientations).
#[allow(clippy::too_many_arguments)]
fn masked_sum(
    src: &[Vec<f32>; 3],
    rfactor: &[f32; 3],
    masker: &[Vec<f32>; 3],
    flt: &[Vec<f32>; 3],
    w: usize,
    h: usize,
    noise_weight: f64,
    p: &Params,
) -> f32 {
    let (left, right) = score_window(w);
    let (top, bottom) = score_window(h);
    let mut acc = [0f32; 3];
    for i in top..bottom {
        // Above the first row is the second one; below the last row is the last row itself.
        let up = (if i == 0 { 1 } else { i - 1 }) * w;
        let mid = i * w;
        let down = (if i + 1 == h { i } else { i + 1 }) * w;
        let mut row = [0f32; 3];
        for j in left..right {
            let threshold = if p.bypass_cm {
                0.0
            } else {
                let l = if j == 0 { 1 } else { j - 1 };
                let r = if j + 1 == w { j } else { j + 1 };
                let mut t = 0f32;
                for b in 0..3 {
                    let f = &flt[b];
                    let mut s = 0f32;
                    s += f[up + l];
                    s += f[up + j];
                    s += f[up + r];
                    s += f[mid + l];
                    s = (f64::from(s) + CENTRE_WEIGHT * f64::from(masker[b][mid + j].abs())) as f32;
                    s += f[mid + r];
                    s += f[down + l];
                    s += f[down + j];
                    s += f[down + r];
                    t += s;
                }
                t
            };
            for b in 0..3 {
                let x = (src[b][mid + j] * rfactor[b]).abs() - threshold;
                let x = if x < 0.0 { 0.0 } else { x };
                row[b] += pow_p(x, p.p_norm);
            }
        }
        for b in 0..3 {
            acc[b] += row[b];
        }
    }
    let nf = noise_floor(right - left, bottom - top, noise_weight, p.p_norm);
    let per_band = acc.map(|a| root(a, p.p_norm) + nf);
    per_band[0] + per_band[1] + per_band[2]
}

/// Runs the four scales on the `w`x`h` float planes in `sc.src` (reference, distorted; both
/// already offset by -128) and returns the pooled sums. Both sides must be at least
/// [`MIN_SIDE`] and `sc` must be [`Scratch::fit`] for this size.
pub fn compute(sc: &mut Scratch, w: usize, h: usize, p: &Params) -> Sums {
    let mut num_scale = [0f32; NUM_SCALES];
    let mut den_scale = [0f32; NUM_SCALES];
    let (mut num, mut den, mut aim_num, mut aim_den) = (0f64, 0f64, 0f64, 0f64);
    let (mut cw, mut ch) = (w, h);
    for s in 0..NUM_SCALES {
        let lo_only = s == 0 && p.skip_scale0;
        for k in 0..2 {
            dwt(
                &sc.src[k],
                cw,
                ch,
                &mut sc.col_taps,
                &mut sc.row_lo,
                &mut sc.row_hi,
                &mut sc.bands[k],
                lo_only,
            );
        }
        (cw, ch) = (cw.div_ceil(2), ch.div_ceil(2));
        let (ns, ds, ans) = if lo_only {
            (0f32, 1e-10f32, 0f32)
        } else {
            let rfactor = &p.rfactor[s];
            let [rb, db] = &sc.bands;
            decouple(rb, db, cw, ch, p.egl, &mut sc.restored, &mut sc.additive);
            let ds = denominator(rb, rfactor, cw, ch, p);
            // Detail loss: the restored part masked by the additive one.
            csf(
                &sc.additive,
                rfactor,
                cw,
                ch,
                &mut sc.masker,
                &mut sc.masker_flt,
            );
            let ns = masked_sum(
                &sc.restored,
                rfactor,
                &sc.masker,
                &sc.masker_flt,
                cw,
                ch,
                p.noise_weight,
                p,
            );
            // Additive impairment: the additive part masked by the restored one, without
            // noise floor. A skipped scale's value would be dropped, so it is not computed.
            let ans = if p.skip_aim_scale == s as i32 {
                0.0
            } else {
                csf(
                    &sc.restored,
                    rfactor,
                    cw,
                    ch,
                    &mut sc.masker,
                    &mut sc.masker_flt,
                );
                masked_sum(
                    &sc.additive,
                    rfactor,
                    &sc.masker,
                    &sc.masker_flt,
                    cw,
                    ch,
                    0.0,
                    p,
                )
            };
            (ns, ds, ans)
        };
        num += f64::from(ns);
        den += f64::from(ds);
        if p.skip_aim_scale != s as i32 {
            aim_num += f64::from(ans);
            aim_den += f64::from(ds);
        }
        num_scale[s] = ns;
        den_scale[s] = ds;
        for k in 0..2 {
            std::mem::swap(&mut sc.src[k], &mut sc.bands[k].a);
        }
    }
    let floor = 1e-10 * (w * h) as f64 / (1920.0 * 1080.0);
    if num < floor {
        num = 0.0;
    }
    if den < floor {
        den = 0.0;
    }
    Sums {
        num_scale,
        den_scale,
        num,
        den,
        aim_num,
        aim_den,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wavelet_taps_reflect_like_upstream() {
        assert_eq!(dwt_taps(0, 5), [1, 0, 1, 2]);
        assert_eq!(dwt_taps(2, 5), [3, 4, 4, 3]);
        assert_eq!(dwt_taps(1, 4), [1, 2, 3, 3]);
        assert_eq!(dwt_taps(0, 2), [1, 0, 1, 1]);
        // Low-pass taps sum to about sqrt(2), high-pass taps to about 0.
        let lo: f32 = DWT_LO.iter().sum();
        let hi: f32 = DWT_HI.iter().sum();
        assert!((lo - std::f32::consts::SQRT_2).abs() < 1e-6 && hi.abs() < 1e-6);
    }

    #[test]
    fn refined_reciprocal_is_close_to_division() {
        for (n, d) in [(1.0f32, 3.0f32), (-2.5, 7.25), (1e-3, 1e-30), (5.0, -0.1)] {
            let q = div(n, d);
            assert!(((q - n / d) / (n / d)).abs() < 1e-6, "{n}/{d}: {q}");
        }
        // A zero divisor gives NaN (inf * 0 in the Newton step), which the clamp keeps.
        assert!(div(1.0, 0.0).is_nan() || cfg!(not(target_arch = "x86_64")));
    }

    #[test]
    fn gain_limit_follows_the_sign() {
        assert_eq!(limit_gain(0.5, 2.0, 100.0), 2.0);
        assert_eq!(limit_gain(0.5, 2.0, 1.0), 0.5);
        assert_eq!(limit_gain(-0.5, -2.0, 100.0), -2.0);
        assert_eq!(limit_gain(-0.5, -0.7, 1.2), -0.6f64 as f32);
        assert_eq!(limit_gain(0.0, 3.0, 100.0), 0.0);
    }
}
