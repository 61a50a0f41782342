//! CPU reference of integer VIF, bit-exact with upstream's scalar C path.
//!
//! [`compute_accums`] reduces a picture pair to four integer accumulators per scale (integer
//! sums are order independent, so the GPU path in `gpu.rs` produces the same ones), and
//! [`vif_scores`] / [`vif_num_den`] turn those into scores with the same float/double evaluation
//! order as upstream.

use std::sync::OnceLock;

use super::pipeline::{self, Sample};
use crate::error::{Error, Result};
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

/// Q16 Gaussian kernels, one per scale; each sums to 65536.
pub(super) const FILTERS: [&[u16]; 4] = [
    &[
        489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640,
        935, 489,
    ],
    &[1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244],
    &[3571, 16004, 26386, 16004, 3571],
    &[10904, 43728, 10904],
];

/// Rows reflected above and below the scale-0 picture (half the widest kernel).
pub(super) const PAD0: usize = 8;

/// Noise variance 2.0 in the Q16 units every scale works in.
pub(super) const SIGMA_NSQ: i32 = 2 << 16;

/// Regulariser of the gain division.
pub(super) const EPS: f64 = 65536.0 * 1.0e-10;

/// Integer sums of one scale; everything the score needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VifAccums {
    /// Σ log2 numerator terms (Q11) over pixels with enough reference variance.
    pub num_log: i64,
    /// Σ log2 denominator terms (Q11) over the same pixels.
    pub den_log: i64,
    /// Σ clamped distorted variance over low-variance pixels.
    pub num_non_log: i64,
    /// Number of low-variance pixels.
    pub den_non_log: i64,
}

/// The log2 table upstream generates: entry `i` (32767..=65535) is `round(log2f(i) * 2048)`,
/// computed in `f32` and rounded half away from zero. Other entries are unused and zero.
pub fn log2_table() -> &'static [u16] {
    static TABLE: OnceLock<Box<[u16]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u16; 1 << 16];
        for (i, v) in t.iter_mut().enumerate().skip(32767) {
            *v = ((i as f32).log2() * 2048.0f32).round() as u16;
        }
        t.into_boxed_slice()
    })
}

/// Q11 log2 of `t >= 2^17` from the 16 most significant bits (truncated).
#[inline(always)]
fn log2_32(table: &[u16], t: u32) -> i32 {
    let k = 16 - t.leading_zeros() as i32;
    i32::from(table[(t >> k) as usize & 0xffff]) + 2048 * k
}

/// Q11 log2 of a 64-bit `t >= 2^17`, same truncation.
#[inline(always)]
fn log2_64(table: &[u16], t: u64) -> i32 {
    let k = 48 - t.leading_zeros() as i32;
    i32::from(table[(t >> k) as usize & 0xffff]) + 2048 * k
}

/// Source index of every padded position `-p..n+p` (stored at offset `+p`), reproducing the
/// order of upstream's in-place reflect copies: plain reflect-101 when `n > p`, iterated
/// reflection for shorter runs. Positions upstream fills from stale memory (only when `n == 1`)
/// map to 0.
pub(super) fn pad_map(n: usize, p: usize) -> Vec<usize> {
    if n == 0 {
        return vec![0; 2 * p];
    }
    let mut m: Vec<Option<usize>> = (0..n + 2 * p)
        .map(|v| (p..p + n).contains(&v).then(|| v - p))
        .collect();
    for i in 1..=p {
        m[p - i] = m[p + i];
        m[p + n - 1 + i] = m[p + n - 1 - i];
    }
    m.into_iter().map(|x| x.unwrap_or(0)).collect()
}

/// A read-only image: `h` rows of `w` samples, `stride` apart.
pub(super) struct Img<'a, T> {
    data: &'a [T],
    stride: usize,
    pub(super) w: usize,
    pub(super) h: usize,
}

impl<'a, T> Img<'a, T> {
    pub(super) fn new(data: &'a [T], stride: usize, w: usize, h: usize) -> Self {
        Img { data, stride, w, h }
    }

    #[inline(always)]
    pub(super) fn row(&self, r: usize) -> &[T] {
        &self.data[r * self.stride..r * self.stride + self.w]
    }
}

/// `(add, shift)` rounding applied to a vertical sum before it is stored.
#[derive(Clone, Copy)]
pub(super) struct Round {
    pub(super) add: u64,
    pub(super) shift: u32,
}

/// Row buffers of one scale's statistics pass, reused for every row.
///
/// Integer sums in the filter loops are bounded by `65536 * max_input` (times `max_input` for
/// squares) and fit their types, so nothing ever wraps: the wrapping operations only keep debug
/// overflow checks out of loops that must vectorise. Horizontal squared sums are carried in
/// `f64`, which is exact here: every operand and partial sum is an integer below 2^49.
pub(super) struct Scratch {
    /// Vertical sums: means (both kernels) and, for 8-bit input, squares.
    v32: [Vec<u32>; 5],
    /// Vertical squared sums of deeper input.
    v64: [Vec<u64>; 3],
    /// Rounded vertical means, padded by `half` on both sides.
    t_mu: [Vec<u16>; 2],
    /// Rounded vertical squares (values of u32), padded likewise.
    t_sq: [Vec<f64>; 3],
    /// Horizontal sums.
    h_mu: [Vec<u32>; 2],
    h_sq: [Vec<f64>; 3],
}

impl Scratch {
    fn new(w: usize, half: usize, wide: bool) -> Self {
        let tw = w + 2 * half;
        let n32 = if wide { 2 } else { 5 };
        let n64 = if wide { w } else { 0 };
        Scratch {
            v32: std::array::from_fn(|i| vec![0; if i < n32 { w } else { 0 }]),
            v64: std::array::from_fn(|_| vec![0; n64]),
            t_mu: std::array::from_fn(|_| vec![0; tw]),
            t_sq: std::array::from_fn(|_| vec![0.0; tw]),
            h_mu: std::array::from_fn(|_| vec![0; w]),
            h_sq: std::array::from_fn(|_| vec![0.0; w]),
        }
    }
}

/// A CPU luma sample type (`u8` or `u16`) with its vertical statistics kernel. (The GPU side
/// has its own, unrelated `crate::gpu::launch::Sample`: a device-copyable sample.)
pub(super) trait LumaSample: Copy + Into<u32> {
    /// Whether the kernel needs 64-bit vertical squared sums.
    const WIDE: bool;

    /// Vertical pass for one output row whose taps read source rows `rows`: fills
    /// `s.t_mu`/`s.t_sq` at `half..half + w` with the rounded sums.
    #[allow(clippy::too_many_arguments)]
    fn vertical(
        r: &Img<'_, Self>,
        d: &Img<'_, Self>,
        rows: &[usize],
        filt: &[u16],
        mu: Round,
        sq: Round,
        s: &mut Scratch,
    );
}

/// Stores rounded vertical means into a padded tmp row.
#[inline(always)]
fn store_mu(dst: &mut [u16], src: &[u32], r: Round) {
    let (add, sh) = (r.add as u32, r.shift);
    for (t, &v) in dst.iter_mut().zip(src) {
        *t = (v.wrapping_add(add) >> sh) as u16;
    }
}

/// Stores rounded vertical squares (as u32, carried in f64) into a padded tmp row.
#[inline(always)]
fn store_sq<V: Copy + Into<u64>>(dst: &mut [f64], src: &[V], r: Round) {
    for (t, &v) in dst.iter_mut().zip(src) {
        *t = f64::from((v.into().wrapping_add(r.add) >> r.shift) as u32);
    }
}

impl LumaSample for u8 {
    const WIDE: bool = false;

    fn vertical(
        r: &Img<'_, u8>,
        d: &Img<'_, u8>,
        rows: &[usize],
        filt: &[u16],
        mu: Round,
        sq: Round,
        s: &mut Scratch,
    ) {
        let (w, f) = (r.w, filt.len());
        let half = f / 2;
        let [m1, m2, xx, yy, xy] = &mut s.v32;
        let (m1, m2) = (&mut m1[..w], &mut m2[..w]);
        let (xx, yy, xy) = (&mut xx[..w], &mut yy[..w], &mut xy[..w]);
        // Centre tap initialises the sums.
        let c = u32::from(filt[half]);
        let (rc, dc) = (r.row(rows[half]), d.row(rows[half]));
        for j in 0..w {
            let (x, y) = (u16::from(rc[j]), u16::from(dc[j]));
            m1[j] = c.wrapping_mul(u32::from(x));
            m2[j] = c.wrapping_mul(u32::from(y));
            xx[j] = c.wrapping_mul(u32::from(x.wrapping_mul(x)));
            yy[j] = c.wrapping_mul(u32::from(y.wrapping_mul(y)));
            xy[j] = c.wrapping_mul(u32::from(x.wrapping_mul(y)));
        }
        // Symmetric kernels: taps k and f-1-k share a coefficient. Sums of two samples fit u16
        // and 8-bit squares fit u16, so every product is a 16x16->32 multiply.
        for k in 0..half {
            let c = u32::from(filt[k]);
            let (ra, rb) = (r.row(rows[k]), r.row(rows[f - 1 - k]));
            let (da, db) = (d.row(rows[k]), d.row(rows[f - 1 - k]));
            for j in 0..w {
                let (xa, xb) = (u16::from(ra[j]), u16::from(rb[j]));
                let (ya, yb) = (u16::from(da[j]), u16::from(db[j]));
                m1[j] = m1[j].wrapping_add(c.wrapping_mul(u32::from(xa.wrapping_add(xb))));
                m2[j] = m2[j].wrapping_add(c.wrapping_mul(u32::from(ya.wrapping_add(yb))));
                let sq2 = |a: u16, b: u16| u32::from(a.wrapping_mul(b));
                xx[j] = xx[j]
                    .wrapping_add(c.wrapping_mul(sq2(xa, xa)))
                    .wrapping_add(c.wrapping_mul(sq2(xb, xb)));
                yy[j] = yy[j]
                    .wrapping_add(c.wrapping_mul(sq2(ya, ya)))
                    .wrapping_add(c.wrapping_mul(sq2(yb, yb)));
                xy[j] = xy[j]
                    .wrapping_add(c.wrapping_mul(sq2(xa, ya)))
                    .wrapping_add(c.wrapping_mul(sq2(xb, yb)));
            }
        }
        let [t1, t2] = &mut s.t_mu;
        store_mu(&mut t1[half..half + w], m1, mu);
        store_mu(&mut t2[half..half + w], m2, mu);
        let [txx, tyy, txy] = &mut s.t_sq;
        store_sq(&mut txx[half..half + w], xx, sq);
        store_sq(&mut tyy[half..half + w], yy, sq);
        store_sq(&mut txy[half..half + w], xy, sq);
    }
}

impl LumaSample for u16 {
    const WIDE: bool = true;

    fn vertical(
        r: &Img<'_, u16>,
        d: &Img<'_, u16>,
        rows: &[usize],
        filt: &[u16],
        mu: Round,
        sq: Round,
        s: &mut Scratch,
    ) {
        let w = r.w;
        let half = filt.len() / 2;
        let [m1, m2, ..] = &mut s.v32;
        let (m1, m2) = (&mut m1[..w], &mut m2[..w]);
        let [xx, yy, xy] = &mut s.v64;
        let (xx, yy, xy) = (&mut xx[..w], &mut yy[..w], &mut xy[..w]);
        m1.fill(0);
        m2.fill(0);
        xx.fill(0);
        yy.fill(0);
        xy.fill(0);
        for (k, &c) in filt.iter().enumerate() {
            let c = u32::from(c);
            let (rr, dr) = (r.row(rows[k]), d.row(rows[k]));
            for j in 0..w {
                let (x, y) = (u32::from(rr[j]), u32::from(dr[j]));
                let (cx, cy) = (c.wrapping_mul(x), c.wrapping_mul(y));
                m1[j] = m1[j].wrapping_add(cx);
                m2[j] = m2[j].wrapping_add(cy);
                let p = |a: u32, b: u32| u64::from(a).wrapping_mul(u64::from(b));
                xx[j] = xx[j].wrapping_add(p(cx, x));
                yy[j] = yy[j].wrapping_add(p(cy, y));
                xy[j] = xy[j].wrapping_add(p(cx, y));
            }
        }
        let [t1, t2] = &mut s.t_mu;
        store_mu(&mut t1[half..half + w], m1, mu);
        store_mu(&mut t2[half..half + w], m2, mu);
        let [txx, tyy, txy] = &mut s.t_sq;
        store_sq(&mut txx[half..half + w], xx, sq);
        store_sq(&mut tyy[half..half + w], yy, sq);
        store_sq(&mut txy[half..half + w], xy, sq);
    }
}

/// Parameters of one scale's statistics pass.
pub(super) struct StatParams<'a> {
    pub(super) filt: &'a [u16],
    /// Source row of each padded row index (offset by `row_pad`).
    pub(super) row_map: &'a [usize],
    pub(super) row_pad: usize,
    pub(super) mu_round: Round,
    pub(super) sq_round: Round,
    pub(super) egl: f64,
}

/// Local means, variances and covariance of one scale, reduced to its accumulators.
pub(super) fn scale_stats<T: LumaSample>(
    r: &Img<'_, T>,
    d: &Img<'_, T>,
    p: &StatParams<'_>,
) -> VifAccums {
    let table = log2_table();
    let (w, h) = (r.w, r.h);
    let f = p.filt.len();
    let half = f / 2;
    let col_map = pad_map(w, half);
    let tw = w + 2 * half;
    let mut s = Scratch::new(w, half, T::WIDE);
    let mut acc = VifAccums::default();
    let mut rows = vec![0usize; f];

    for i in 0..h {
        for (k, src) in rows.iter_mut().enumerate() {
            *src = p.row_map[p.row_pad + i + k - half];
        }
        T::vertical(r, d, &rows, p.filt, p.mu_round, p.sq_round, &mut s);
        for v in (0..half).chain(half + w..tw) {
            let src = half + col_map[v];
            for t in &mut s.t_mu {
                t[v] = t[src];
            }
            for t in &mut s.t_sq {
                t[v] = t[src];
            }
        }

        // Horizontal pass, tap by tap over the row so the inner loops vectorise.
        for (hm, tm) in s.h_mu.iter_mut().zip(&s.t_mu) {
            let hm = &mut hm[..w];
            hm.fill(0);
            for (k, &c) in p.filt.iter().enumerate() {
                let c = u32::from(c);
                for (a, &t) in hm.iter_mut().zip(&tm[k..k + w]) {
                    *a = a.wrapping_add(c.wrapping_mul(u32::from(t)));
                }
            }
        }
        for (hs, ts) in s.h_sq.iter_mut().zip(&s.t_sq) {
            let hs = &mut hs[..w];
            let c = f64::from(p.filt[half]);
            for (a, &t) in hs.iter_mut().zip(&ts[half..half + w]) {
                *a = c * t;
            }
            for k in 0..half {
                let c = f64::from(p.filt[k]);
                let (ta, tb) = (&ts[k..k + w], &ts[f - 1 - k..f - 1 - k + w]);
                for j in 0..w {
                    hs[j] += c * (ta[j] + tb[j]);
                }
            }
        }

        let [hm1, hm2] = &s.h_mu;
        let [hxx, hyy, hxy] = &s.h_sq;
        for j in 0..w {
            pixel(
                &mut acc,
                hm1[j],
                hm2[j],
                hxx[j] as u64,
                hyy[j] as u64,
                hxy[j] as u64,
                p.egl,
                table,
            );
        }
    }
    acc
}

/// Folds one pixel's filtered moments into the accumulators.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pixel(
    acc: &mut VifAccums,
    mu1: u32,
    mu2: u32,
    xx: u64,
    yy: u64,
    xy: u64,
    egl: f64,
    table: &[u16],
) {
    // Products of Q32 means, rounded back to Q16.
    let q = |a: u32, b: u32| ((u64::from(a) * u64::from(b) + (1 << 31)) >> 32) as u32;
    let xx = ((xx + 32768) >> 16) as u32;
    let yy = ((yy + 32768) >> 16) as u32;
    let xy = ((xy + 32768) >> 16) as u32;
    // Differences wrap in u32 and are then read as signed, as upstream does.
    let sigma1_sq = xx.wrapping_sub(q(mu1, mu1)) as i32;
    let sigma2_sq = (yy.wrapping_sub(q(mu2, mu2)) as i32).max(0);
    let sigma12 = xy.wrapping_sub(q(mu1, mu2)) as i32;

    if sigma1_sq >= SIGMA_NSQ {
        acc.den_log += i64::from(
            log2_32(table, (SIGMA_NSQ as u32).wrapping_add(sigma1_sq as u32)) - 2048 * 17,
        );
        if sigma12 > 0 && sigma2_sq > 0 {
            let g = f64::from(sigma12) / (f64::from(sigma1_sq) + EPS);
            // Truncating conversion; a large negative saturates and is clamped to 0 either way.
            let sv_sq = ((f64::from(sigma2_sq) - g * f64::from(sigma12)) as i32).max(0);
            // The gain limit applies only after sv_sq has used the unclamped gain.
            let g = if g < egl { g } else { egl };
            let numer1 = (sv_sq as u32).wrapping_add(SIGMA_NSQ as u32);
            let numer1_tmp = ((g * g * f64::from(sigma1_sq)) as i64) + i64::from(numer1);
            acc.num_log +=
                i64::from(log2_64(table, numer1_tmp as u64) - log2_64(table, u64::from(numer1)));
        }
    } else {
        acc.num_non_log += i64::from(sigma2_sq);
        acc.den_non_log += 1;
    }
}

/// Blurs with `filt` and keeps even rows and columns: a `w/2 x h/2` image (floor).
pub(super) fn downsample<T: Copy + Into<u32>>(
    src: &Img<'_, T>,
    filt: &[u16],
    row_map: &[usize],
    row_pad: usize,
    v_round: Round,
) -> Vec<u16> {
    let (w, h) = (src.w, src.h);
    let (ow, oh) = (w / 2, h / 2);
    let half = filt.len() / 2;
    let col_map = pad_map(w, half);
    let tw = w + 2 * half;
    let mut v_acc = vec![0u32; w];
    let mut tmp = vec![0u32; tw];
    let mut out = vec![0u16; ow * oh];
    let (v_add, v_sh) = (v_round.add as u32, v_round.shift);
    for oi in 0..oh {
        let i = 2 * oi;
        v_acc.fill(0);
        for (k, &c) in filt.iter().enumerate() {
            let row = src.row(row_map[row_pad + i + k - half]);
            let c = u32::from(c);
            for (a, &x) in v_acc.iter_mut().zip(row) {
                *a = a.wrapping_add(c.wrapping_mul(x.into()));
            }
        }
        for (t, &a) in tmp[half..half + w].iter_mut().zip(&v_acc) {
            *t = u32::from((a.wrapping_add(v_add) >> v_sh) as u16);
        }
        for v in (0..half).chain(half + w..tw) {
            tmp[v] = tmp[half + col_map[v]];
        }
        for (oj, o) in out[oi * ow..(oi + 1) * ow].iter_mut().enumerate() {
            let taps = &tmp[2 * oj..2 * oj + filt.len()];
            let a = taps.iter().zip(filt).fold(0u32, |a, (&t, &c)| {
                a.wrapping_add(u32::from(c).wrapping_mul(t))
            });
            *o = (a.wrapping_add(32768) >> 16) as u16;
        }
    }
    out
}

/// Rounding of the scale-0 vertical means at `bpc` bits (brings them to Q16 of 8-bit units).
pub(super) fn mu_round0(bpc: u32) -> Round {
    Round {
        add: 1 << (bpc - 1),
        shift: bpc,
    }
}

/// Rounding of the scale-0 vertical squares at `bpc` bits.
pub(super) fn sq_round0(bpc: u32) -> Round {
    let shift = (bpc - 8) * 2;
    Round {
        add: if shift == 0 { 0 } else { 1 << (shift - 1) },
        shift,
    }
}

/// Rounding of every vertical sum at scales 1..3 (inputs are already Q16).
pub(super) const ROUND16: Round = Round {
    add: 32768,
    shift: 16,
};

/// The two heavy passes of every scale, run by the reference below ([`Reference`]) or by the
/// SIMD row pipeline (`pipeline.rs` over the kernels of `x86.rs` / `aarch64.rs`); both give
/// identical results.
pub(super) trait Passes: Copy {
    /// [`scale_stats`].
    fn stats<T: Sample>(self, r: &Img<'_, T>, d: &Img<'_, T>, p: &StatParams<'_>) -> VifAccums;

    /// [`downsample`].
    fn downsample<T: Sample>(
        self,
        src: &Img<'_, T>,
        filt: &[u16],
        row_map: &[usize],
        row_pad: usize,
        v_round: Round,
    ) -> Vec<u16>;
}

/// The scalar reference passes of this file.
#[derive(Clone, Copy)]
pub(super) struct Reference;

impl Passes for Reference {
    fn stats<T: Sample>(self, r: &Img<'_, T>, d: &Img<'_, T>, p: &StatParams<'_>) -> VifAccums {
        scale_stats(r, d, p)
    }

    fn downsample<T: Sample>(
        self,
        src: &Img<'_, T>,
        filt: &[u16],
        row_map: &[usize],
        row_pad: usize,
        v_round: Round,
    ) -> Vec<u16> {
        downsample(src, filt, row_map, row_pad, v_round)
    }
}

/// Scale-0 statistics (unless skipped) and the scale-1 image for one sample type.
fn scale0<P: Passes, T: Sample>(
    passes: P,
    r: &Img<'_, T>,
    d: &Img<'_, T>,
    bpc: u32,
    egl: f64,
    skip: bool,
) -> (VifAccums, Vec<u16>, Vec<u16>) {
    let row_map = pad_map(r.h, PAD0);
    let acc = if skip {
        VifAccums::default()
    } else {
        let p = StatParams {
            filt: FILTERS[0],
            row_map: &row_map,
            row_pad: PAD0,
            mu_round: mu_round0(bpc),
            sq_round: sq_round0(bpc),
            egl,
        };
        passes.stats(r, d, &p)
    };
    let nr = passes.downsample(r, FILTERS[1], &row_map, PAD0, mu_round0(bpc));
    let nd = passes.downsample(d, FILTERS[1], &row_map, PAD0, mu_round0(bpc));
    (acc, nr, nd)
}

/// Per-scale integer accumulators of the luma planes of `ref_pic` and `dis_pic`.
/// With `skip_scale0` scale 0 is left at zero (its statistics are not computed).
///
/// `cpu` picks the code: SIMD kernels where it allows them (and the gain limit is within
/// `pipeline::EGL_MAX`, always so for the option's range), else the scalar reference; the
/// accumulators are the same either way.
pub fn compute_accums(
    ref_pic: &PictureData,
    dis_pic: &PictureData,
    egl: f64,
    skip_scale0: bool,
    cpu: CpuLevel,
) -> Result<[VifAccums; 4]> {
    pipeline::compute(cpu, ref_pic, dis_pic, egl, skip_scale0)
        .unwrap_or_else(|| accums(Reference, ref_pic, dis_pic, egl, skip_scale0))
}

/// [`compute_accums`] with the given passes.
pub(super) fn accums<P: Passes>(
    passes: P,
    ref_pic: &PictureData,
    dis_pic: &PictureData,
    egl: f64,
    skip_scale0: bool,
) -> Result<[VifAccums; 4]> {
    let (w, h, bpc) = (ref_pic.w[0], ref_pic.h[0], ref_pic.bpc);
    if (dis_pic.w[0], dis_pic.h[0], dis_pic.bpc) != (w, h, bpc) {
        return Err(Error::inval(
            "vif: reference and distorted pictures differ in size or depth",
        ));
    }
    if !(8..=16).contains(&bpc) || w == 0 || h == 0 {
        return Err(Error::inval(format!(
            "vif: unsupported picture {w}x{h} at {bpc} bits"
        )));
    }
    let mut out = [VifAccums::default(); 4];
    let (stride_r, stride_d) = (ref_pic.stride[0], dis_pic.stride[0]);
    let (mut cur_r, mut cur_d) = match (ref_pic.plane(0), dis_pic.plane(0)) {
        (PlaneRef::U8(r), PlaneRef::U8(d)) if bpc == 8 => {
            let ri = Img::new(r, stride_r, w, h);
            let di = Img::new(d, stride_d, w, h);
            let (a, nr, nd) = scale0::<P, u8>(passes, &ri, &di, bpc, egl, skip_scale0);
            out[0] = a;
            (nr, nd)
        }
        (PlaneRef::U16(r), PlaneRef::U16(d)) if bpc > 8 => {
            let ri = Img::new(r, stride_r, w, h);
            let di = Img::new(d, stride_d, w, h);
            let (a, nr, nd) = scale0::<P, u16>(passes, &ri, &di, bpc, egl, skip_scale0);
            out[0] = a;
            (nr, nd)
        }
        _ => return Err(Error::inval("vif: sample storage does not match bpc")),
    };
    let (mut cw, mut ch) = (w / 2, h / 2);
    for (scale, slot) in out.iter_mut().enumerate().skip(1) {
        // Upstream pads each decimated image by half the previous scale's kernel.
        let row_pad = FILTERS[scale - 1].len() / 2;
        let row_map = pad_map(ch, row_pad);
        let ri = Img::new(&cur_r, cw, cw, ch);
        let di = Img::new(&cur_d, cw, cw, ch);
        let p = StatParams {
            filt: FILTERS[scale],
            row_map: &row_map,
            row_pad,
            mu_round: ROUND16,
            sq_round: ROUND16,
            egl,
        };
        *slot = passes.stats::<u16>(&ri, &di, &p);
        if scale < 3 {
            let nr = passes.downsample(&ri, FILTERS[scale + 1], &row_map, row_pad, ROUND16);
            let nd = passes.downsample(&di, FILTERS[scale + 1], &row_map, row_pad, ROUND16);
            (cur_r, cur_d) = (nr, nd);
            (cw, ch) = (cw / 2, ch / 2);
        }
    }
    Ok(out)
}

/// A scale's numerator and denominator, evaluated in double and stored as float like upstream.
pub fn vif_num_den(a: &VifAccums) -> (f32, f32) {
    let num = a.num_log as f64 / 2048.0
        + (a.den_non_log as f64 - (a.num_non_log as f64 / 16384.0) / 65025.0);
    let den = a.den_log as f64 / 2048.0 + a.den_non_log as f64;
    (num as f32, den as f32)
}

/// The four scale scores (`num / den` divided in float, then widened); scale 0 is 0 when skipped.
pub fn vif_scores(acc: &[VifAccums; 4], skip_scale0: bool) -> [f64; 4] {
    let mut s = [0.0; 4];
    for (i, (o, a)) in s.iter_mut().zip(acc).enumerate() {
        if i == 0 && skip_scale0 {
            continue;
        }
        let (n, d) = vif_num_den(a);
        *o = f64::from(n / d);
    }
    s
}

/// The debug features (`integer_vif` .. `integer_vif_den_scale3`, in provided order).
pub fn vif_debug_scores(acc: &[VifAccums; 4], skip_scale0: bool) -> [f64; 11] {
    let nd: Vec<(f32, f32)> = acc.iter().map(vif_num_den).collect();
    let first = usize::from(skip_scale0);
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for &(n, d) in &nd[first..] {
        num += f64::from(n);
        den += f64::from(d);
    }
    let score = if den == 0.0 { 1.0 } else { num / den };
    let (n0, d0) = if skip_scale0 {
        (0.0, -1.0)
    } else {
        (f64::from(nd[0].0), f64::from(nd[0].1))
    };
    [
        score,
        num,
        den,
        n0,
        d0,
        f64::from(nd[1].0),
        f64::from(nd[1].1),
        f64::from(nd[2].0),
        f64::from(nd[2].1),
        f64::from(nd[3].0),
        f64::from(nd[3].1),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::feature::vif::DEFAULT_EGL;
    use crate::picture::{Picture, PixelFormat};
    use crate::testutil::load_parity_clip;

    #[test]
    fn log2_table_matches_upstream() {
        let t = log2_table();
        let mut h: u64 = 0xcbf29ce484222325;
        for &v in &t[32767..=65535] {
            h = (h ^ u64::from(v)).wrapping_mul(0x100000001b3);
        }
        // FNV-1a-64 per u16 value over i = 32767..=65535, as produced by upstream's own
        // generator (`round(log2f((float)i) * 2048)`) compiled against glibc 2.36.
        assert_eq!(h, 0x8ea6630de60c86d0);
        assert_eq!((t[32768], t[40000], t[65535]), (30720, 31309, 32768));
        // The f32 evaluation differs from a double-precision table at exactly 38 entries.
        let differs: Vec<usize> = (32767..=65535usize)
            .filter(|&i| t[i] != ((i as f64).log2() * 2048.0).round() as u16)
            .collect();
        assert_eq!(differs.len(), 38);
        assert_eq!((differs[0], t[33108]), (33108, 30751));
    }

    #[test]
    fn kernels_are_symmetric_and_normalised() {
        // The row kernels fold taps k and f-1-k together.
        for f in FILTERS {
            assert!(f.iter().eq(f.iter().rev()));
            assert_eq!(f.iter().map(|&c| u32::from(c)).sum::<u32>(), 65536);
        }
    }

    #[test]
    fn pad_map_reflects() {
        // Plain reflect-101.
        assert_eq!(pad_map(5, 2), vec![2, 1, 0, 1, 2, 3, 4, 3, 2]);
        // Iterated reflection on a run shorter than the pad.
        assert_eq!(pad_map(3, 4), vec![0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2]);
    }

    fn widen(p: &PictureData, bpc: u32, shift: u32) -> Picture {
        let mut q = PictureData::new(p.pix_fmt, bpc, p.w[0], p.h[0]).unwrap();
        let (w, h, s, qs) = (p.w[0], p.h[0], p.stride[0], q.stride[0]);
        let src = p.plane_u8(0);
        let dst = q.plane_u16_mut(0);
        for y in 0..h {
            for x in 0..w {
                dst[y * qs + x] = u16::from(src[y * s + x]) << shift;
            }
        }
        Arc::new(q)
    }

    #[test]
    fn deep_input_equal_to_shifted_8bit_is_identical() {
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        for (r, d) in refs.iter().zip(&dists).take(3) {
            let a8 = compute_accums(r, d, DEFAULT_EGL, false, CpuLevel::SCALAR).unwrap();
            let a10 = compute_accums(
                &widen(r, 10, 2),
                &widen(d, 10, 2),
                DEFAULT_EGL,
                false,
                CpuLevel::SCALAR,
            );
            assert_eq!(a8, a10.unwrap());
            let a16 = compute_accums(
                &widen(r, 16, 8),
                &widen(d, 16, 8),
                DEFAULT_EGL,
                false,
                CpuLevel::SCALAR,
            );
            assert_eq!(a8, a16.unwrap());
        }
    }

    #[test]
    fn small_and_odd_sizes_do_not_panic() {
        for (w, h) in [(1, 1), (2, 3), (7, 5), (17, 9), (33, 25)] {
            let mut p = PictureData::new(PixelFormat::Yuv420p, 8, w, h).unwrap();
            let s = p.stride[0];
            for (i, v) in p.plane_u8_mut(0).iter_mut().enumerate() {
                *v = ((i % s) * 7 + (i / s) * 13) as u8;
            }
            let p: Picture = Arc::new(p);
            assert!(compute_accums(&p, &p, DEFAULT_EGL, false, CpuLevel::SCALAR).is_ok());
        }
        let a = PictureData::new(PixelFormat::Yuv420p, 8, 64, 64).unwrap();
        let b = PictureData::new(PixelFormat::Yuv420p, 10, 64, 64).unwrap();
        assert!(compute_accums(&a, &b, DEFAULT_EGL, false, CpuLevel::SCALAR).is_err());
    }

    /// A `w`x`h` picture pair at `bpc`: the reference of `content`, the distorted one a noisy,
    /// scaled copy of it (so every branch of the per-pixel step is taken).
    fn random_pair(
        rng: &mut crate::testutil::checkasm::Rng,
        w: usize,
        h: usize,
        bpc: u32,
        content: crate::testutil::checkasm::Content,
    ) -> (Picture, Picture) {
        use crate::testutil::checkasm::plane;
        let max = (1i64 << bpc) - 1;
        let r = plane(rng, w, h, w, bpc, content);
        let amp = [0, 1, 3, 40][rng.below(4)] << (bpc - 8);
        let gain = [1.0, 0.5, 1.3][rng.below(3)];
        let d: Vec<u16> = r
            .iter()
            .map(|&v| {
                let n = if amp == 0 {
                    0
                } else {
                    rng.below(2 * amp + 1) as i64 - amp as i64
                };
                ((f64::from(v) * gain) as i64 + n).clamp(0, max) as u16
            })
            .collect();
        let pic = |v: &[u16]| -> Picture {
            let mut p = PictureData::new(PixelFormat::Yuv420p, bpc, w, h).unwrap();
            let s = p.stride[0];
            for y in 0..h {
                for x in 0..w {
                    if bpc == 8 {
                        p.plane_u8_mut(0)[y * s + x] = v[y * w + x] as u8;
                    } else {
                        p.plane_u16_mut(0)[y * s + x] = v[y * w + x];
                    }
                }
            }
            Arc::new(p)
        };
        (pic(&r), pic(&d))
    }

    /// `compute_accums` at `cpu`, and at every kernel variant the CPU runs at that level (the
    /// AVX-512 kernels without VNNI too), each with its name.
    fn simd_variants(
        cpu: CpuLevel,
        r: &PictureData,
        d: &PictureData,
        egl: f64,
        skip: bool,
    ) -> Vec<(String, [VifAccums; 4])> {
        #[allow(unused_mut)]
        let mut v = vec![(
            cpu.to_string(),
            compute_accums(r, d, egl, skip, cpu).unwrap(),
        )];
        #[cfg(target_arch = "x86_64")]
        if cpu.has_avx512() {
            let a = super::super::x86::compute(cpu, false, r, d, egl, skip).unwrap();
            v.push((format!("{cpu} without VNNI"), a.unwrap()));
        }
        v
    }

    /// Every SIMD level against the reference on random geometry, depth and content.
    #[test]
    fn checkasm_compute_accums() {
        use crate::testutil::checkasm::{sizes, Rng, CONTENTS};
        let mut rng = Rng::new(0x76_69_66);
        let levels: Vec<CpuLevel> = CpuLevel::available().into_iter().skip(1).collect();
        for (w, h) in sizes(&mut rng, 24) {
            let big = w * h > 1 << 18;
            for (ci, content) in CONTENTS.into_iter().enumerate() {
                for bpc in [8u32, 9, 10, 12, 16] {
                    if big && !(ci + bpc as usize).is_multiple_of(4) {
                        continue;
                    }
                    let (r, d) = random_pair(&mut rng, w, h, bpc, content);
                    let egl = [DEFAULT_EGL, 1.0, 7.5][rng.below(3)];
                    let skip = rng.below(5) == 0;
                    let want = accums(Reference, &r, &d, egl, skip).unwrap();
                    for &cpu in &levels {
                        for (variant, got) in simd_variants(cpu, &r, &d, egl, skip) {
                            assert_eq!(
                                got, want,
                                "{variant} {w}x{h} {content:?} {bpc}-bit egl {egl} skip {skip}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Deep pictures whose samples exceed `bpc` bits (the reference truncates its rounded
    /// means to u16 then): every level still gives the reference's accumulators.
    #[test]
    fn checkasm_out_of_range_samples() {
        use crate::testutil::checkasm::Rng;
        let mut rng = Rng::new(0x0dd);
        for (w, h) in [(64, 40), (97, 33), (200, 70)] {
            for bpc in [9u32, 10, 12] {
                let pic = |rng: &mut Rng| -> Picture {
                    let mut p = PictureData::new(PixelFormat::Yuv420p, bpc, w, h).unwrap();
                    for v in p.plane_u16_mut(0) {
                        *v = rng.next_u32() as u16;
                    }
                    Arc::new(p)
                };
                let (r, d) = (pic(&mut rng), pic(&mut rng));
                let want = accums(Reference, &r, &d, DEFAULT_EGL, false).unwrap();
                for cpu in CpuLevel::available() {
                    for (variant, got) in simd_variants(cpu, &r, &d, DEFAULT_EGL, false) {
                        assert_eq!(got, want, "{variant} {w}x{h} {bpc}-bit");
                    }
                }
            }
        }
    }

    /// The parity clips at every level give the reference's accumulators.
    #[test]
    fn simd_levels_match_reference_on_parity_clips() {
        for clip in crate::testutil::PARITY_CLIPS {
            let (refs, dists) = load_parity_clip(clip);
            for (r, d) in refs.iter().zip(&dists).take(2) {
                let want = accums(Reference, r, d, DEFAULT_EGL, false).unwrap();
                for cpu in CpuLevel::available() {
                    for (variant, got) in simd_variants(cpu, r, d, DEFAULT_EGL, false) {
                        assert_eq!(got, want, "{clip} {variant}");
                    }
                }
            }
        }
    }

    /// Single-thread timing of every level on the 1080p parity clip:
    /// `cargo test --release --lib time_levels_1080p -- --ignored --nocapture` (`VIF_REPS`
    /// repetitions, interleaved; each frame's fastest counts).
    #[test]
    #[ignore]
    fn time_levels_1080p() {
        let (refs, dists) = load_parity_clip("natural_1920x1080_420p8");
        let reps = std::env::var("VIF_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        type Run = Box<dyn Fn(&PictureData, &PictureData) -> [VifAccums; 4]>;
        let mut runs: Vec<(String, Run)> = Vec::new();
        for cpu in CpuLevel::available() {
            runs.push((
                cpu.to_string(),
                Box::new(move |r, d| compute_accums(r, d, DEFAULT_EGL, false, cpu).unwrap()),
            ));
            #[cfg(target_arch = "x86_64")]
            if cpu.has_avx512() {
                runs.push((
                    format!("{cpu} without VNNI"),
                    Box::new(move |r, d| {
                        let a = super::super::x86::compute(cpu, false, r, d, DEFAULT_EGL, false);
                        a.unwrap().unwrap()
                    }),
                ));
            }
        }
        let mut best = vec![vec![f64::MAX; refs.len()]; runs.len()];
        for _ in 0..reps {
            for ((_, run), best) in runs.iter().zip(&mut best) {
                for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
                    let t = std::time::Instant::now();
                    std::hint::black_box(run(r, d));
                    best[i] = best[i].min(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        for ((name, _), best) in runs.iter().zip(&best) {
            let ms = best.iter().sum::<f64>() / best.len() as f64;
            eprintln!("vif 1080p 8-bit {name}: {ms:.2} ms/frame");
        }
    }

    /// Timing of the passes of scales 0 and 1 at 1080p, per kernel set (as
    /// [`time_levels_1080p`]; `VIF_NO_SCALAR` skips the reference).
    #[test]
    #[ignore]
    fn time_passes_1080p() {
        let (refs, dists) = load_parity_clip("natural_1920x1080_420p8");
        let (r, d) = (&refs[0], &dists[0]);
        let (w, h) = (r.w[0], r.h[0]);
        let ri = Img::new(r.plane_u8(0), r.stride[0], w, h);
        let di = Img::new(d.plane_u8(0), d.stride[0], w, h);
        let row_map = pad_map(h, PAD0);
        let p = StatParams {
            filt: FILTERS[0],
            row_map: &row_map,
            row_pad: PAD0,
            mu_round: mu_round0(8),
            sq_round: sq_round0(8),
            egl: DEFAULT_EGL,
        };
        let reps = std::env::var("VIF_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10);
        let time = |name: &str, f: &mut dyn FnMut()| {
            f();
            let mut best = f64::MAX;
            for _ in 0..reps {
                let t = std::time::Instant::now();
                f();
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
            }
            eprintln!("{name}: {best:.2} ms");
        };
        let passes = |name: &str, pp: &WithPasses<'_>| {
            pp(&mut |pp| {
                time(&format!("{name} stats0"), &mut || {
                    std::hint::black_box(pp.stats_u8(&ri, &di, &p));
                });
                time(&format!("{name} downsample0 x2"), &mut || {
                    for img in [&ri, &di] {
                        std::hint::black_box(pp.down_u8(img, &row_map));
                    }
                });
                let (nr, nd) = (pp.down_u8(&ri, &row_map), pp.down_u8(&di, &row_map));
                let (cw, ch) = (w / 2, h / 2);
                let rm = pad_map(ch, PAD0);
                let (r1, d1) = (Img::new(&nr, cw, cw, ch), Img::new(&nd, cw, cw, ch));
                let p1 = StatParams {
                    filt: FILTERS[1],
                    row_map: &rm,
                    row_pad: PAD0,
                    mu_round: ROUND16,
                    sq_round: ROUND16,
                    egl: DEFAULT_EGL,
                };
                time(&format!("{name} stats1"), &mut || {
                    std::hint::black_box(pp.stats_u16(&r1, &d1, &p1));
                });
            })
        };
        if std::env::var_os("VIF_NO_SCALAR").is_none() {
            passes("scalar", &|f| f(&Reference));
        }
        #[cfg(target_arch = "x86_64")]
        {
            use super::super::x86::{Avx2, Avx512};
            let cpu = CpuLevel::detect();
            if let Some(k) = Avx2::new(cpu) {
                passes("avx2", &|f| f(&pipeline::Fast(k)));
            }
            if let Some(k) = Avx512::<false>::new(cpu) {
                passes("avx512 without VNNI", &|f| f(&pipeline::Fast(k)));
            }
            if let Some(k) = Avx512::<true>::new(cpu) {
                passes("avx512", &|f| f(&pipeline::Fast(k)));
            }
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(k) = super::super::aarch64::Neon::new(CpuLevel::detect()) {
            passes("neon", &|f| f(&pipeline::Fast(k)));
        }
    }

    /// Calls its argument with one set of passes.
    type WithPasses<'a> = dyn Fn(&mut dyn FnMut(&dyn PassesDyn)) + 'a;

    /// [`Passes`] of one sample type each, as trait objects for the timing above.
    trait PassesDyn {
        fn stats_u8(&self, r: &Img<'_, u8>, d: &Img<'_, u8>, p: &StatParams<'_>) -> VifAccums;
        fn stats_u16(&self, r: &Img<'_, u16>, d: &Img<'_, u16>, p: &StatParams<'_>) -> VifAccums;
        fn down_u8(&self, src: &Img<'_, u8>, row_map: &[usize]) -> Vec<u16>;
    }

    impl<P: Passes> PassesDyn for P {
        fn stats_u8(&self, r: &Img<'_, u8>, d: &Img<'_, u8>, p: &StatParams<'_>) -> VifAccums {
            self.stats(r, d, p)
        }
        fn stats_u16(&self, r: &Img<'_, u16>, d: &Img<'_, u16>, p: &StatParams<'_>) -> VifAccums {
            self.stats(r, d, p)
        }
        fn down_u8(&self, src: &Img<'_, u8>, row_map: &[usize]) -> Vec<u16> {
            self.downsample(src, FILTERS[1], row_map, PAD0, mu_round0(8))
        }
    }
}
