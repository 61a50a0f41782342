//! The libsvm model text embedded in VMAF models (`svm_type nu_svr`, `kernel_type rbf`) and its
//! regression predictor.
//!
//! Support vectors are stored densely: libsvm's sparse merge adds `v*v` for an index present in
//! only one vector, which is bit-identical to `(v - 0.0)^2`, so a dense walk in ascending index
//! order gives the same sums.

use crate::error::{Error, Result};

/// Largest support-vector index accepted (models have at most 64 features).
const MAX_SV_INDEX: usize = 1024;

/// A parsed epsilon/nu support-vector regression model with an RBF kernel.
#[derive(Debug, Clone)]
pub(crate) struct Svm {
    gamma: f64,
    rho: f64,
    /// One coefficient per support vector, in file order.
    coefs: Vec<f64>,
    /// Row width of `svs` (largest index present).
    dim: usize,
    /// Support vectors, row-major, `dim` values each; absent entries are 0.
    svs: Vec<f64>,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::inval(format!("libsvm model: {msg}"))
}

fn num<T: std::str::FromStr>(tok: Option<&str>, what: &str) -> Result<T> {
    tok.and_then(|t| t.parse().ok())
        .ok_or_else(|| bad(format!("cannot read {what}")))
}

/// Splits the header into tokens on spaces and newlines (as libsvm's reader does), stopping at
/// the `SV` token; returns the tokens and the text after the delimiter that follows `SV`.
fn split_header(text: &str) -> Result<(Vec<&str>, &str)> {
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c != ' ' && c != '\n' {
            continue;
        }
        let tok = &text[start..i];
        start = i + 1;
        if tok.is_empty() {
            continue;
        }
        if tok == "SV" {
            return Ok((tokens, &text[start..]));
        }
        tokens.push(tok);
    }
    Err(bad("no SV section"))
}

impl Svm {
    /// Parses libsvm's model text format.
    pub(crate) fn parse(text: &str) -> Result<Svm> {
        let (header, body) = split_header(text)?;
        let mut gamma = None;
        let mut rho = None;
        let mut nr_class: Option<usize> = None;
        let mut total_sv: Option<usize> = None;
        let mut regression = false;
        let mut rbf = false;
        let mut it = header.into_iter();
        while let Some(key) = it.next() {
            // Array-valued keys hold one entry per class or per class pair.
            let pairs = nr_class
                .map(|n| n.saturating_mul(n.saturating_sub(1)) / 2)
                .unwrap_or(0);
            match key {
                "svm_type" => {
                    let t = it.next().ok_or_else(|| bad("cannot read svm_type"))?;
                    regression = match t {
                        "nu_svr" | "epsilon_svr" => true,
                        "c_svc" | "nu_svc" | "one_class" => false,
                        _ => return Err(bad(format!("unknown svm_type {t}"))),
                    };
                }
                "kernel_type" => {
                    let t = it.next().ok_or_else(|| bad("cannot read kernel_type"))?;
                    rbf = match t {
                        "rbf" => true,
                        "linear" | "polynomial" | "sigmoid" | "precomputed" => false,
                        _ => return Err(bad(format!("unknown kernel_type {t}"))),
                    };
                }
                "degree" => {
                    num::<i32>(it.next(), "degree")?;
                }
                "gamma" => gamma = Some(num::<f64>(it.next(), "gamma")?),
                "coef0" => {
                    num::<f64>(it.next(), "coef0")?;
                }
                "nr_class" => nr_class = Some(num(it.next(), "nr_class")?),
                "total_sv" => total_sv = Some(num(it.next(), "total_sv")?),
                "rho" => {
                    for k in 0..pairs {
                        let v: f64 = num(it.next(), "rho")?;
                        if k == 0 {
                            rho = Some(v);
                        }
                    }
                }
                "probA" | "probB" => {
                    for _ in 0..pairs {
                        num::<f64>(it.next(), key)?;
                    }
                }
                "label" | "nr_sv" => {
                    for _ in 0..nr_class.unwrap_or(0) {
                        num::<i32>(it.next(), key)?;
                    }
                }
                _ => return Err(bad(format!("unknown header entry {key}"))),
            }
        }
        if !regression {
            return Err(Error::NotSupported(
                "libsvm model: only epsilon_svr/nu_svr models are supported".into(),
            ));
        }
        if !rbf {
            return Err(Error::NotSupported(
                "libsvm model: only the rbf kernel is supported".into(),
            ));
        }
        let gamma = gamma.ok_or_else(|| bad("no gamma"))?;
        let nr_class = nr_class.ok_or_else(|| bad("no nr_class"))?;
        if nr_class < 2 {
            return Err(bad("nr_class must be at least 2"));
        }
        let rho = rho.ok_or_else(|| bad("no rho"))?;
        let total_sv = total_sv.ok_or_else(|| bad("no total_sv"))?;

        let mut coefs = Vec::new();
        let mut rows: Vec<Vec<(usize, f64)>> = Vec::new();
        let mut lines = body.split('\n');
        let mut dim = 0;
        for n in 0..total_sv {
            let line = lines
                .next()
                .ok_or_else(|| bad(format!("missing support vector {n}")))?;
            let mut toks = line.split_whitespace();
            // SVR models carry nr_class - 1 (= 1) coefficients; only the first is used.
            for c in 0..nr_class - 1 {
                let v: f64 = num(toks.next(), "support vector coefficient")?;
                if c == 0 {
                    coefs.push(v);
                }
            }
            let mut row = Vec::new();
            let mut last = 0;
            for tok in toks {
                let (idx, val) = tok
                    .split_once(':')
                    .ok_or_else(|| bad(format!("bad support vector entry {tok}")))?;
                let idx: usize = num(Some(idx), "support vector index")?;
                let val: f64 = num(Some(val), "support vector value")?;
                if idx <= last || idx > MAX_SV_INDEX {
                    return Err(bad(format!("bad support vector index {idx}")));
                }
                last = idx;
                row.push((idx, val));
            }
            dim = dim.max(last);
            rows.push(row);
        }
        // Dense rows cost up to 8 KiB per (possibly 9-byte) line of the file: fallible.
        let mut svs = crate::limits::try_filled(dim * rows.len(), 0.0, "svm: support vectors")?;
        for (r, row) in rows.iter().enumerate() {
            for &(idx, val) in row {
                svs[r * dim + idx - 1] = val;
            }
        }
        Ok(Svm {
            gamma,
            rho,
            coefs,
            dim,
            svs,
        })
    }

    /// Decision value for the dense node vector `x` (`x[k]` is libsvm index `k + 1`):
    /// `sum_i coef_i * exp(-gamma * |x - sv_i|^2) - rho`, summed in file order.
    pub(crate) fn predict(&self, x: &[f64]) -> f64 {
        let neg_gamma = -self.gamma;
        let width = self.dim.max(x.len());
        let mut sum = 0.0;
        for (i, &coef) in self.coefs.iter().enumerate() {
            let sv = &self.svs[i * self.dim..(i + 1) * self.dim];
            let mut d2 = 0.0;
            for k in 0..width {
                let d = x.get(k).copied().unwrap_or(0.0) - sv.get(k).copied().unwrap_or(0.0);
                d2 += d * d;
            }
            sum += coef * (neg_gamma * d2).exp();
        }
        sum - self.rho
    }

    /// Number of support vectors.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.coefs.len()
    }
}
