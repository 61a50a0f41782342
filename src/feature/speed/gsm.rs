//! GSM parameter estimation and the score: per-block covariance, variances and entropies of
//! each picture, and the weighted entropy difference.

pub(super) use super::linalg::Mat;
use super::linalg::{eigenvalues, solve};
use super::scale::{filter_and_downscale, Rows};
use super::{Dims, Params, BLOCK, EIG_EPS, NB};
use crate::error::Result;
use crate::simd::CpuLevel;

/// `log2(2·pi·e)` (of the double `2·pi·e`), the Gaussian entropy constant. Upstream's compiler
/// folds it, correctly rounded; spelled out so no run-time libm can differ.
const LOG2_2PIE: f64 = 4.094191170361282;

/// Per-block entropies and variances of one picture.
struct Stats {
    entropies: Vec<f32>,
    variances: Vec<f32>,
}

/// Covariance matrix of the 25 shifted `subw`x`subh` windows of `data` (rows `dw` apart).
pub(super) fn covariance_matrix(d: &Dims, data: &[f32]) -> Mat {
    let n = d.subw * d.subh;
    let mut means = [0.0f32; NB];
    for (idx, m) in means.iter_mut().enumerate() {
        let (r0, c0) = (idx / BLOCK, idx % BLOCK);
        let mut acc = 0.0f32;
        for i in 0..d.subh {
            let row = &data[(r0 + i) * d.dw + c0..][..d.subw];
            for &v in row {
                acc += v;
            }
        }
        *m = acc / n as f32;
    }
    let mut k = [0.0f32; NB * NB];
    for xi in 0..NB {
        // The covariances of window `xi` with windows `0..=xi`, `LANES` at a time: each sum
        // still runs over the samples in order (rows, then columns) exactly as one would alone;
        // interleaving independent sums only hides the latency of the dependent additions.
        let mut yi = 0;
        while yi <= xi {
            let n_lanes = (xi + 1 - yi).min(LANES);
            let sums = covariance_sums(d, data, &means, xi, yi, n_lanes);
            for (l, &acc) in sums.iter().enumerate().take(n_lanes) {
                let c = (acc / n as f64) as f32;
                k[xi * NB + yi + l] = c;
                k[(yi + l) * NB + xi] = c;
            }
            yi += n_lanes;
        }
    }
    k
}

/// Covariance sums computed side by side in [`covariance_matrix`].
const LANES: usize = 8;

/// The sums over the windows' samples of `(x - mean_x) * (y - mean_y)` for window `xi` against
/// windows `y0..y0 + n_lanes` (`n_lanes <= LANES`; unused lanes return 0), in `f64`.
#[inline(always)]
fn covariance_sums(
    d: &Dims,
    data: &[f32],
    means: &[f32; NB],
    xi: usize,
    y0: usize,
    n_lanes: usize,
) -> [f64; LANES] {
    let off = |w: usize| (w / BLOCK) * d.dw + w % BLOCK;
    let mx = f64::from(means[xi]);
    let mut my = [0.0f64; LANES];
    let mut oy = [off(xi); LANES];
    for l in 0..n_lanes {
        my[l] = f64::from(means[y0 + l]);
        oy[l] = off(y0 + l);
    }
    let ox = off(xi);
    let mut acc = [0.0f64; LANES];
    for i in 0..d.subh {
        let row = i * d.dw;
        let rx = &data[ox + row..][..d.subw];
        let ry: [&[f32]; LANES] = std::array::from_fn(|l| &data[oy[l] + row..][..d.subw]);
        for (j, &a) in rx.iter().enumerate() {
            let a = f64::from(a) - mx;
            for l in 0..LANES {
                acc[l] += a * (f64::from(ry[l][j]) - my[l]);
            }
        }
    }
    acc
}

/// Estimates the GSM variance and entropy of every block of the normalised plane `data` given
/// its covariance matrix `k`. The flag is false when `k` could not be inverted (variances are
/// then 0).
fn est_params_with(cpu: CpuLevel, d: &Dims, data: &[f32], k: &Mat, sigma_nn: f32) -> (Stats, bool) {
    let eig = eigenvalues(k);

    // Row r = in-block position (r / 5, r % 5); column = block index.
    let nbk = d.blocks;
    let mut y = vec![0.0f32; NB * nbk];
    for (r, row) in y.chunks_mut(nbk).enumerate() {
        let (si, sj) = (r / BLOCK, r % BLOCK);
        for bi in 0..d.bh {
            for bj in 0..d.bw {
                row[bi * d.bw + bj] = data[(si + bi * BLOCK) * d.dw + sj + bj * BLOCK];
            }
        }
    }

    // Written as "no eigenvalue below": a NaN eigenvalue does not count as singular upstream.
    let regular = !eig.iter().any(|&e| f64::from(e) < EIG_EPS);
    let sol = if regular {
        solve(cpu, k, &y, nbk)
    } else {
        None
    };
    let ok = sol.is_some();
    let mut z = sol.unwrap_or_else(|| vec![0.0f32; NB * nbk]);

    let denom = NB as f32;
    for (zv, &yv) in z.iter_mut().zip(&y) {
        *zv = (*zv * yv) / denom;
    }
    let (first, rest) = z.split_at_mut(nbk);
    for row in rest.chunks(nbk) {
        for (s, &v) in first.iter_mut().zip(row) {
            *s += v;
        }
    }
    let variances = first.to_vec();

    let c = LOG2_2PIE;
    let mut entropies = vec![0.0f32; nbk];
    for &e in &eig {
        let l = if e < 0.0 { 0.0 } else { e };
        for (h, &s) in entropies.iter_mut().zip(&variances) {
            *h = (f64::from(*h) + (f64::from(l * s + sigma_nn).log2() + c)) as f32;
        }
    }
    (
        Stats {
            entropies,
            variances,
        },
        ok,
    )
}

/// `log2(1 + v)` with `1 + v` in float (C's int + float), the log in double.
#[inline]
fn log2_1p_f(v: f32) -> f64 {
    f64::from(1.0 + v).log2()
}

/// Mean over blocks of |weighted entropy difference|, blocks below the noise floor skipped.
fn speed_score(d: &Dims, r: &Stats, s: &Stats, p: &Params) -> f32 {
    let base = (NB as f64 * (f64::from((1.0 + p.nn_floor) * p.sigma_nn).log2() + LOG2_2PIE)) as f32;
    let mut score = 0.0f32;
    for i in 0..d.blocks {
        let (re, de) = (r.entropies[i], s.entropies[i]);
        if re < base && de < base {
            continue;
        }
        let (rv, dv) = (r.variances[i], s.variances[i]);
        let mean_v = || 1.0 + f64::from(rv + dv) / 2.0;
        let (wr, wd): (f64, f64) = match p.weight_var_mode {
            0 => (log2_1p_f(rv), log2_1p_f(dv)),
            1 => (log2_1p_f(rv), log2_1p_f(rv)),
            2 => (log2_1p_f(dv), log2_1p_f(dv)),
            3 => (mean_v().log2(), mean_v().log2()),
            4 => (log2_1p_f(rv), mean_v().log2()),
            5 => (
                log2_1p_f(rv),
                (1.0 + (0.75 * f64::from(rv) + 0.25 * f64::from(dv))).log2(),
            ),
            6 => (
                log2_1p_f(rv),
                (1.0 + (0.25 * f64::from(rv) + 0.75 * f64::from(dv))).log2(),
            ),
            // Rejected by the option range.
            _ => return f32::NAN,
        };
        let sr = (f64::from(re) * wr) as f32;
        let sd = (f64::from(de) * wd) as f32;
        score += (sr - sd).abs();
    }
    score / d.blocks as f32
}

/// Scores one pair of planes (from `scale::load`, or differences of two such). Returns the
/// score and whether either covariance matrix was singular; when exactly one was, the score
/// is 0.
pub(super) fn extract_score(
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    r: Rows,
    s: Rows,
) -> Result<(f32, bool)> {
    let r = filter_and_downscale(cpu, d, p, r)?;
    let kr = covariance_matrix(d, &r);
    let s = filter_and_downscale(cpu, d, p, s)?;
    let ks = covariance_matrix(d, &s);
    Ok(score_from_moments(cpu, d, p, (&r, &kr), (&s, &ks)))
}

/// The score of a pair of normalised planes given with their covariance matrices (the CPU's
/// or the GPU's, identical), and whether either matrix was singular; when exactly one was,
/// the score is 0.
pub(super) fn score_from_moments(
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    (r, kr): (&[f32], &Mat),
    (s, ks): (&[f32], &Mat),
) -> (f32, bool) {
    let (rs, rok) = est_params_with(cpu, d, r, kr, p.sigma_nn);
    let (ds, dok) = est_params_with(cpu, d, s, ks, p.sigma_nn);
    let score = if rok != dok {
        0.0
    } else {
        speed_score(d, &rs, &ds, p)
    };
    (score, !rok || !dok)
}

/// Upstream's `MIN(score, max_val)`: the float score against the double cap (NaN gives the cap).
pub(super) fn cap(score: f32, max: f64) -> f64 {
    let s = f64::from(score);
    if s < max {
        s
    } else {
        max
    }
}

#[cfg(test)]
mod tests {
    use std::f64::consts::PI;

    use super::*;

    #[test]
    fn entropy_constant_is_the_rounded_log() {
        assert_eq!(LOG2_2PIE, (2.0 * PI * std::f64::consts::E).log2());
    }
}
