//! The 25x25 linear algebra of SpEED: eigenvalues (Householder tridiagonalisation, implicit
//! QR) and the QR solve, reproduced operation by operation from upstream's own routines.

use super::{EIG_EPS, EIG_MAX_ITERS, NB};
use crate::simd::CpuLevel;

/// A square `NB`x`NB` row-major matrix.
pub(super) type Mat = [f32; NB * NB];

#[inline]
fn sign(x: f32) -> f32 {
    if x >= 0.0 {
        1.0
    } else {
        -1.0
    }
}

/// `sqrt` of a float through double, as C's `sqrt` on a float argument returned as float.
#[inline]
fn sqrt_f(x: f32) -> f32 {
    f64::from(x).sqrt() as f32
}

#[inline]
fn hypot_f(x: f32, y: f32) -> f32 {
    sqrt_f(x * x + y * y)
}

/// Householder reflector zeroing `a[start+1.., col]`; returns tau and leaves the scaled vector
/// (implicit leading 1) below `a[start][col]`, which becomes beta.
fn householder(a: &mut Mat, col: usize, start: usize) -> f32 {
    if NB - start == 1 {
        return 0.0;
    }
    let mut norm = 0.0f32;
    for i in start + 1..NB {
        norm += a[i * NB + col] * a[i * NB + col];
    }
    let xnorm = sqrt_f(norm);
    if xnorm == 0.0 {
        return 0.0;
    }
    let alpha = a[start * NB + col];
    let beta = -sign(alpha) * hypot_f(alpha, xnorm);
    let tau = (beta - alpha) / beta;
    let s = alpha - beta;
    if s != 0.0 {
        for i in start..NB {
            a[i * NB + col] /= s;
        }
        a[start * NB + col] = beta;
    }
    tau
}

/// Reduces symmetric `a` to tridiagonal form (GSL's symmtd): diagonal and subdiagonal.
fn tridiagonalize(a: &mut Mat) -> ([f32; NB], [f32; NB]) {
    let mut v = [0.0f32; NB];
    let mut x = [0.0f32; NB];
    for i in 0..NB - 2 {
        let tau = householder(a, i, i + 1);
        for j in i + 1..NB {
            v[j] = a[j * NB + i];
        }
        if tau != 0.0 {
            v[i + 1] = 1.0;
            let r = i + 1..NB;
            for k in r.clone() {
                let mut acc = 0.0f32;
                for j in r.clone() {
                    acc += tau * a[k * NB + j] * v[j];
                }
                x[k] = acc;
            }
            let mut xv = 0.0f32;
            for k in r.clone() {
                xv += x[k] * v[k];
            }
            let alpha = (-0.5 * f64::from(tau) * f64::from(xv)) as f32;
            for k in r.clone() {
                x[k] += alpha * v[k];
            }
            for k in r.clone() {
                for j in r.clone() {
                    a[k * NB + j] -= x[k] * v[j] + v[k] * x[j];
                }
            }
        }
    }
    let mut d = [0.0f32; NB];
    let mut sd = [0.0f32; NB];
    for i in 0..NB {
        d[i] = a[i * NB + i];
    }
    for i in 0..NB - 1 {
        sd[i] = a[(i + 1) * NB + i];
    }
    (d, sd)
}

/// Zeroes negligible subdiagonal entries of the `n`x`n` tridiagonal `(d, sd)`.
fn chop_small(d: &[f32], sd: &mut [f32], n: usize) {
    for i in 0..n - 1 {
        let bound = EIG_EPS * f64::from(d[i].abs() + d[i + 1].abs());
        if f64::from(sd[i].abs()) < bound {
            sd[i] = 0.0;
        }
    }
}

/// Wilkinson shift from the trailing 2x2 block.
fn trailing_eigenvalue(d: &[f32], sd: &[f32], n: usize) -> f32 {
    let (ta, tb, tab) = (d[n - 2], d[n - 1], sd[n - 2]);
    let dt = (ta - tb) / 2.0;
    if dt > 0.0 {
        tb - tab * (tab / (dt + hypot_f(dt, tab)))
    } else if dt == 0.0 {
        tb - tab.abs()
    } else {
        tb + tab * (tab / (-dt + hypot_f(dt, tab)))
    }
}

/// Givens rotation `(c, s)` for `(a, b)`; the reciprocal square root is taken in double.
fn givens(a: f32, b: f32) -> (f32, f32) {
    if b == 0.0 {
        (1.0, 0.0)
    } else if b.abs() > a.abs() {
        let t = -a / b;
        let s1 = (1.0 / f64::from(1.0 + t * t).sqrt()) as f32;
        (s1 * t, s1)
    } else {
        let t = -b / a;
        let c1 = (1.0 / f64::from(1.0 + t * t).sqrt()) as f32;
        (c1, c1 * t)
    }
}

/// One implicit symmetric QR sweep on the unreduced `n`x`n` block `(d, sd)`.
fn qr_step(d: &mut [f32], sd: &mut [f32], n: usize) {
    let mut mu = trailing_eigenvalue(d, sd, n);
    if EIG_EPS * f64::from(mu.abs()) > f64::from(d[0].abs() + sd[0].abs()) {
        mu = 0.0;
    }
    let mut x = d[0] - mu;
    let mut z = sd[0];
    let (mut bk, mut zk) = (0.0f32, 0.0f32);
    let mut ap = d[0];
    let mut bp = sd[0];
    let mut aq = d[1];
    if n == 2 {
        let (c, s) = givens(x, z);
        let ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp);
        let bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq);
        let aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq);
        d[0] = ap1;
        sd[0] = bp1;
        d[1] = aq1;
        return;
    }
    let mut bq = sd[1];
    for k in 0..n - 1 {
        let (c, s) = givens(x, z);
        let bk1 = c * bk - s * zk;
        let ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp);
        let bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq);
        let zp1 = -s * bq;
        let aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq);
        let bq1 = c * bq;
        let ak = ap1;
        bk = bp1;
        zk = zp1;
        ap = aq1;
        bp = bq1;
        if k < n - 2 {
            aq = d[k + 2];
        }
        if k < n - 3 {
            bq = sd[k + 2];
        }
        d[k] = ak;
        if k > 0 {
            sd[k - 1] = bk1;
        }
        if k < n - 2 {
            sd[k + 1] = bp;
        }
        x = bk;
        z = zk;
    }
    d[n - 1] = ap;
    sd[n - 2] = bk;
}

/// Eigenvalues of the symmetric matrix `k` (GSL's symm algorithm, unsorted).
pub(super) fn eigenvalues(k: &Mat) -> [f32; NB] {
    let mut a = *k;
    let (mut d, mut sd) = tridiagonalize(&mut a);
    chop_small(&d, &mut sd, NB);
    let mut b = NB - 1;
    let mut iter = 0;
    while b > 0 && iter < EIG_MAX_ITERS {
        if sd[b - 1] == 0.0 {
            b -= 1;
            continue;
        }
        let mut a = b - 1;
        while a > 0 && sd[a - 1] != 0.0 {
            a -= 1;
        }
        let n = b - a + 1;
        qr_step(&mut d[a..], &mut sd[a..], n);
        chop_small(&d[a..], &mut sd[a..], n);
        iter += 1;
    }
    d
}

/// `dst = x * y` for `NB`-row `x` (`NB`x`NB`) and `y` (`NB`x`cols`), summing over k in order.
#[inline(always)]
fn mat_mul(dst: &mut [f32], x: &[f32], y: &[f32], cols: usize) {
    dst.fill(0.0);
    for i in 0..NB {
        for k in 0..NB {
            let xik = x[i * NB + k];
            let yrow = &y[k * cols..(k + 1) * cols];
            for (o, &v) in dst[i * cols..(i + 1) * cols].iter_mut().zip(yrow) {
                *o += xik * v;
            }
        }
    }
}

/// [`mat_mul`] of two `NB`x`NB` matrices: the same products summed in the same order, each
/// output row kept in registers across its sum. The QR's 49 products per solve dominate a
/// SpEED frame's host work; x86 has a faster form of this with the same sums
/// (`x86::mat_mul_square_avx512`).
#[inline(always)]
pub(super) fn mat_mul_square(dst: &mut Mat, x: &Mat, y: &Mat) {
    for (drow, xrow) in dst.chunks_exact_mut(NB).zip(x.chunks_exact(NB)) {
        let mut acc = [0.0f32; NB];
        for (&xik, yrow) in xrow.iter().zip(y.chunks_exact(NB)) {
            for (a, &v) in acc.iter_mut().zip(yrow) {
                *a += xik * v;
            }
        }
        drow.copy_from_slice(&acc);
    }
}

fn identity() -> Mat {
    let mut m = [0.0f32; NB * NB];
    for i in 0..NB {
        m[i * NB + i] = 1.0;
    }
    m
}

fn vec_norm(v: &[f32; NB]) -> f32 {
    let mut s = 0.0f32;
    for &x in v {
        s += x * x;
    }
    sqrt_f(s)
}

/// Householder QR of `a` as upstream computes it; returns `(Qᵀ, R)` with `Qᵀ` the product of
/// the reflectors (what the solver multiplies the right-hand side by).
#[inline(always)]
fn qr(a: &Mat, mm: impl Fn(&mut Mat, &Mat, &Mat)) -> (Mat, Mat) {
    let mut z = *a;
    let mut q = identity();
    let mut h = [0.0f32; NB * NB];
    let mut tmp = [0.0f32; NB * NB];
    let mut v = [0.0f32; NB];
    for k in 0..NB - 1 {
        // Embed the trailing block in an identity: rows above k become rows of the identity,
        // the columns left of k in the rows below become zero.
        for (i, row) in z.chunks_exact_mut(NB).enumerate() {
            if i < k {
                row.fill(0.0);
                row[i] = 1.0;
            } else {
                row[..k].fill(0.0);
            }
        }
        for i in 0..NB {
            v[i] = z[i * NB + k];
        }
        let norm = vec_norm(&v);
        // The sign comes from the input's diagonal, not the partially reduced matrix.
        v[k] += sign(a[k * NB + k]) * norm;
        let n2 = vec_norm(&v);
        for x in &mut v {
            *x /= n2;
        }
        for i in 0..NB {
            for j in 0..NB {
                h[i * NB + j] = -2.0 * v[i] * v[j];
            }
        }
        for i in 0..NB {
            h[i * NB + i] += 1.0;
        }
        mm(&mut tmp, &h, &z);
        z = tmp;
        mm(&mut tmp, &h, &q);
        q = tmp;
    }
    let mut r = [0.0f32; NB * NB];
    mm(&mut r, &q, a);
    // Upstream transposes Q here and back again in the solver (an exact no-op pair).
    (q, r)
}

/// Solves `K X = B` (`B` is `NB`x`cols`) through QR and back substitution; `None` when a pivot
/// of R is below the threshold. Vector code where `cpu` allows it (the same operations in the
/// same order, so the same result).
pub(super) fn solve(cpu: CpuLevel, k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = super::x86::solve(cpu, k, b, cols) {
        return x;
    }
    let _ = cpu;
    solve_scalar(k, b, cols)
}

/// [`solve`]'s scalar reference, inlined into the x86 vector builds.
#[inline(always)]
pub(super) fn solve_scalar(k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
    solve_with(k, b, cols, mat_mul_square)
}

/// [`solve`] with `mm` computing the QR's `NB`x`NB` products (as [`mat_mul_square`] does).
#[inline(always)]
pub(super) fn solve_with(
    k: &Mat,
    b: &[f32],
    cols: usize,
    mm: impl Fn(&mut Mat, &Mat, &Mat),
) -> Option<Vec<f32>> {
    let (qt, r) = qr(k, mm);
    let mut rhs = vec![0.0f32; NB * cols];
    mat_mul(&mut rhs, &qt, b, cols);
    let mut x = vec![0.0f32; NB * cols];
    for i in (0..NB).rev() {
        let den = r[i * NB + i];
        if f64::from(den.abs()) < EIG_EPS {
            return None;
        }
        // Row i of X: each entry starts from the right-hand side and takes off the terms of
        // the rows below in order of k; all columns advance together, so they vectorise.
        let (head, below) = x.split_at_mut((i + 1) * cols);
        let xi = &mut head[i * cols..];
        xi.copy_from_slice(&rhs[i * cols..(i + 1) * cols]);
        for (xk, &rik) in below
            .chunks_exact(cols)
            .zip(&r[i * NB + i + 1..(i + 1) * NB])
        {
            for (t, &v) in xi.iter_mut().zip(xk) {
                *t -= v * rik;
            }
        }
        for t in xi.iter_mut() {
            *t /= den;
        }
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random floats in [-0.5, 0.5).
    fn noise(seed: u32, n: usize) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / 16_777_216.0 - 0.5
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// A symmetric positive definite matrix (a covariance) from `seed`, scaled by `scale`.
    fn covariance(seed: u32, scale: f32) -> Mat {
        let g = noise(seed, NB * NB);
        let mut k = [0.0f32; NB * NB];
        for i in 0..NB {
            for j in 0..NB {
                let mut s = 0.0f32;
                for t in 0..NB {
                    s += g[i * NB + t] * g[j * NB + t];
                }
                k[i * NB + j] = s * scale + if i == j { 1e-3 } else { 0.0 };
            }
        }
        k
    }

    /// The vector solves at every level this CPU has give the scalar solve's bits, on
    /// well-conditioned, badly scaled and singular systems (the solve's pivot test).
    #[test]
    fn solve_is_the_same_at_every_cpu_level() {
        let mut cases: Vec<Mat> = (1..6).map(|s| covariance(s, 1.0)).collect();
        cases.push(covariance(7, 1e-6));
        cases.push(covariance(8, 3e4));
        // Singular: a repeated row and column.
        let mut sing = covariance(9, 1.0);
        for j in 0..NB {
            sing[NB + j] = sing[j];
        }
        for i in 0..NB {
            sing[i * NB + 1] = sing[i * NB];
        }
        cases.push(sing);
        cases.push([0.0; NB * NB]);
        for (c, k) in cases.iter().enumerate() {
            for cols in [1, 7, 72, 130] {
                let b = noise(100 + c as u32, NB * cols);
                let want = solve_scalar(k, &b, cols).map(|x| bits(&x));
                for cpu in CpuLevel::available() {
                    let got = solve(cpu, k, &b, cols).map(|x| bits(&x));
                    assert_eq!(got, want, "case {c}, {cols} columns, {cpu}");
                }
            }
        }
    }

    /// The square product keeps the scalar sums' rounding, signed zeros, infinities and NaN
    /// at every level.
    #[test]
    fn square_products_are_the_same_at_every_cpu_level() {
        let mut x: Mat = noise(1, NB * NB).try_into().unwrap();
        let mut y: Mat = noise(2, NB * NB).try_into().unwrap();
        x[3] = -0.0;
        y[4 * NB + 2] = f32::INFINITY;
        x[NB + 7] = f32::NAN;
        y[NB * NB - 1] = 1e30;
        x[NB * NB - 2] = -1e30;
        for row in 10..15 {
            x[row * NB..(row + 1) * NB].fill(-0.0);
        }
        let mut want = [0.0f32; NB * NB];
        mat_mul(&mut want, &x, &y, NB);
        let mut fast = [0.0f32; NB * NB];
        mat_mul_square(&mut fast, &x, &y);
        assert_eq!(bits(&fast), bits(&want));
        #[cfg(target_arch = "x86_64")]
        for cpu in CpuLevel::available() {
            if let Some(got) = super::super::x86::mat_mul_square_at(cpu, &x, &y) {
                assert_eq!(bits(&got), bits(&want), "{cpu}");
            }
        }
    }
}
