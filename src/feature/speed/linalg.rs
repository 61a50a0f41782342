//! The 25x25 linear algebra of SpEED: eigenvalues (Householder tridiagonalisation, implicit
//! QR) and the QR solve, reproduced operation by operation from upstream's own routines.

use super::{EIG_EPS, EIG_MAX_ITERS, NB};

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
fn qr(a: &Mat) -> (Mat, Mat) {
    let mut z = *a;
    let mut q = identity();
    let mut h = [0.0f32; NB * NB];
    let mut tmp = [0.0f32; NB * NB];
    let mut v = [0.0f32; NB];
    for k in 0..NB - 1 {
        // Embed the trailing block in an identity.
        for i in 0..NB {
            for j in 0..NB {
                if i < k || j < k {
                    z[i * NB + j] = if i == j { 1.0 } else { 0.0 };
                }
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
        mat_mul(&mut tmp, &h, &z, NB);
        z = tmp;
        mat_mul(&mut tmp, &h, &q, NB);
        q = tmp;
    }
    let mut r = [0.0f32; NB * NB];
    mat_mul(&mut r, &q, a, NB);
    // Upstream transposes Q here and back again in the solver (an exact no-op pair).
    (q, r)
}

/// Solves `K X = B` (`B` is `NB`x`cols`) through QR and back substitution; `None` when a pivot
/// of R is below the threshold.
pub(super) fn solve(k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
    let (qt, r) = qr(k);
    let mut rhs = vec![0.0f32; NB * cols];
    mat_mul(&mut rhs, &qt, b, cols);
    let mut x = vec![0.0f32; NB * cols];
    for i in (0..NB).rev() {
        let den = r[i * NB + i];
        if f64::from(den.abs()) < EIG_EPS {
            return None;
        }
        for j in 0..cols {
            let mut t = rhs[i * cols + j];
            for kk in i + 1..NB {
                t -= x[kk * cols + j] * r[i * NB + kk];
            }
            x[i * cols + j] = t / den;
        }
    }
    Some(x)
}
