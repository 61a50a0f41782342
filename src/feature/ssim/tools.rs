//! Shared float arithmetic of the `float_ssim` and `float_ms_ssim` extractors: libvmaf's bundled
//! IQA code (luma to float, symmetric-boundary decimation, separable Gaussian "valid"
//! convolution and the SSIM map with its luminance/contrast/structure means).
//!
//! Bit-exactness notes (upstream is built without fast-math or FMA contraction):
//! * every filter tap is a float product added to a double accumulator, taps in kernel order;
//! * the SSIM terms mix float and double exactly as the C expressions promote them (see
//!   [`ssim_means`]);
//! * loops here run over x innermost so independent outputs vectorise, but each output still
//!   sees its taps in upstream's order, so results are unchanged.
//! * the SIMD kernels (`x86.rs`, `aarch64.rs`, at the context's [`CpuLevel`]) vectorise across
//!   outputs too: `dot_taps_one` and `ssim_terms_one` state what each lane computes, and
//!   the SIMD paths of [`decimate`] and [`ssim_means`] only change where intermediate rows are
//!   kept, never an operation or its order.

use crate::error::{Error, Result};
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

#[cfg(target_arch = "aarch64")]
use super::aarch64::Simd;
#[cfg(target_arch = "x86_64")]
use super::x86::Simd;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
use no_simd::Simd;

/// Taps of the 11-tap Gaussian window (sigma 1.5) applied along rows, then columns.
pub const GAUSSIAN: [f32; 11] = [
    0.001028, 0.007599, 0.036001, 0.109361, 0.213006, 0.266012, 0.213006, 0.109361, 0.036001,
    0.007599, 0.001028,
];

/// Side of the Gaussian window: the smallest image SSIM can be computed on.
pub const GAUSSIAN_LEN: usize = GAUSSIAN.len();

/// 9x9 low-pass filter (9/7 biorthogonal wavelet) MS-SSIM decimates with, row-major.
pub const LPF_9X9: [f32; 81] = [
    0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714,
    -0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450,
    -0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090,
    0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132,
    0.016114, -0.010146, -0.047149, 0.160885, 0.363505, 0.160885, -0.047149, -0.010146, 0.016114,
    0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132,
    -0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090,
    -0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450,
    0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714,
];

/// A float image with stride equal to its width.
#[derive(Debug, Clone, Default)]
pub struct FloatImage {
    pub w: usize,
    pub h: usize,
    pub data: Vec<f32>,
}

/// Checks that two pictures can be compared by the float SSIM extractors.
pub fn check_pair(name: &str, reference: &PictureData, distorted: &PictureData) -> Result<()> {
    // Upstream reads any other depth as bytes (garbage); refuse it instead.
    if !matches!(reference.bpc, 8 | 10 | 12 | 16) {
        return Err(Error::inval(format!(
            "{name}: unsupported bit depth {}",
            reference.bpc
        )));
    }
    if reference.bpc != distorted.bpc
        || reference.w[0] != distorted.w[0]
        || reference.h[0] != distorted.h[0]
    {
        return Err(Error::inval(format!(
            "{name}: reference and distorted pictures differ in depth or size"
        )));
    }
    Ok(())
}

/// What `bpc`-bit samples are divided by to reach the 8-bit scale.
pub fn luma_scaler(bpc: u32) -> Result<f32> {
    match bpc {
        8 => Ok(1.0),
        10 => Ok(4.0),
        12 => Ok(16.0),
        16 => Ok(256.0),
        b => Err(Error::inval(format!("unsupported bit depth {b}"))),
    }
}

/// The luma plane as floats on the 8-bit scale: deeper samples are divided by 2^(bpc-8)
/// (a float division, exact for these powers of two).
pub fn luma_to_float(pic: &PictureData) -> Result<FloatImage> {
    let (w, h, stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let mut data = Vec::new();
    data.try_reserve_exact(w * h)
        .map_err(|_| Error::NoMem(format!("ssim: {w}x{h} float luma plane")))?;
    match pic.plane(0) {
        PlaneRef::U8(p) => {
            for row in p.chunks(stride).take(h) {
                data.extend(row[..w].iter().map(|&v| f32::from(v)));
            }
        }
        PlaneRef::U16(p) => {
            let scaler = luma_scaler(pic.bpc)?;
            for row in p.chunks(stride).take(h) {
                data.extend(row[..w].iter().map(|&v| f32::from(v) / scaler));
            }
        }
    }
    if data.len() != w * h {
        return Err(Error::inval("picture plane shorter than its size"));
    }
    Ok(FloatImage { w, h, data })
}

/// Mirror index `i` into `0..n` the way IQA's symmetric boundary does (one reflection, edge
/// sample repeated). The clamp only guards sizes the callers already reject.
#[inline]
fn reflect(i: isize, n: usize) -> usize {
    let n = n as isize;
    let r = if i < 0 {
        -1 - i
    } else if i >= n {
        2 * n - i - 1
    } else {
        i
    };
    r.clamp(0, n - 1) as usize
}

/// One output of a square `size`x`size` kernel centred at (x, y) (taps from -size/2 to
/// size/2, one fewer on the high side for even sizes), with mirrored samples near the border.
fn filter_pixel(img: &FloatImage, x: usize, y: usize, kernel: &[f32], size: usize) -> f32 {
    let half = (size / 2) as isize;
    let hi = half - isize::from(size.is_multiple_of(2));
    let (x, y) = (x as isize, y as isize);
    let mut sum = 0.0f64;
    let mut k = kernel.iter();
    for v in -half..=hi {
        let row = reflect(y + v, img.h) * img.w;
        for u in -half..=hi {
            let tap = *k.next().unwrap_or(&0.0);
            sum += f64::from(img.data[row + reflect(x + u, img.w)] * tap);
        }
    }
    sum as f32
}

/// Size of an image decimated by `factor`: `n / factor`, plus one when `n` is odd (even for
/// factors other than 2, as upstream computes it).
pub fn decimated_len(n: usize, factor: usize) -> usize {
    n / factor + (n & 1)
}

/// Decimates `src` by `factor`, filtering each kept sample with the square `size`x`size`
/// `kernel` (no normalisation), with the SIMD kernels of `cpu`. Upstream decimates float SSIM's
/// images in place; with the sizes accepted here no output ever overwrites a sample a later
/// output reads, so writing to a new image gives the same values.
pub fn decimate(
    src: &FloatImage,
    factor: usize,
    kernel: &[f32],
    size: usize,
    cpu: CpuLevel,
) -> FloatImage {
    let (w, h) = (src.w, src.h);
    let (sw, sh) = (decimated_len(w, factor), decimated_len(h, factor));
    let half = size / 2;
    let hi = half - usize::from(size.is_multiple_of(2));
    let taps = half + hi + 1;
    let mut data = vec![0.0f32; sw * sh];
    // Outputs whose full kernel footprint lies inside the image take the direct path upstream;
    // the values are identical to the mirrored path there, only faster to compute.
    let x0 = half.div_ceil(factor).min(sw);
    let x1 = w.saturating_sub(half).div_ceil(factor).clamp(x0, sw);
    // SIMD: source rows split into their `factor` phases (samples r, r + factor, ...), so the
    // samples a run of outputs reads for one tap are consecutive; row s in slot s % taps.
    // Splitting costs about one output's taps per `factor²` samples, so kernels with few taps
    // per output (the box filters) stay on the scalar loop, which measured faster for them.
    let simd = Simd::new(cpu).filter(|_| taps * taps >= 4 * factor * factor);
    let len = w.div_ceil(factor);
    let split_len = simd.map_or(0, |_| taps * factor * len);
    let mut split = vec![0.0f32; split_len];
    let mut next = 0;
    let mut acc = vec![0.0f64; x1 - x0];
    for (y, out) in data.chunks_mut(sw.max(1)).enumerate() {
        let ys = y * factor;
        if ys < half || ys + half >= h {
            for (x, o) in out.iter_mut().enumerate() {
                *o = filter_pixel(src, x * factor, ys, kernel, size);
            }
            continue;
        }
        if let Some(k) = simd {
            let lo = ys - half;
            next = next.max(lo);
            while next < lo + taps {
                let dst = &mut split[(next % taps) * factor * len..][..factor * len];
                split_phases(&src.data[next * w..][..w], factor, dst);
                next += 1;
            }
            let srcs: Vec<&[f32]> = (0..taps * taps)
                .map(|t| {
                    let (v, u) = (t / taps, t % taps);
                    // Sample x * factor + u - half of the row, for x from x0.
                    let o = u as isize - half as isize;
                    let r = o.rem_euclid(factor as isize) as usize;
                    let k0 = (x0 as isize + o.div_euclid(factor as isize)) as usize;
                    let row = ((lo + v) % taps) * factor + r;
                    &split[row * len + k0..][..x1 - x0]
                })
                .collect();
            k.dot_taps(&srcs, &kernel[..taps * taps], &mut out[x0..x1]);
            for x in (0..x0).chain(x1..sw) {
                out[x] = filter_pixel(src, x * factor, ys, kernel, size);
            }
            continue;
        }
        acc.iter_mut().for_each(|a| *a = 0.0);
        for v in 0..taps {
            let row = (ys + v - half) * w;
            for u in 0..taps {
                let tap = kernel[v * taps + u];
                let start = row + x0 * factor + u - half;
                for (a, &p) in acc.iter_mut().zip(src.data[start..].iter().step_by(factor)) {
                    *a += f64::from(p * tap);
                }
            }
        }
        for (x, o) in out.iter_mut().enumerate() {
            *o = if (x0..x1).contains(&x) {
                acc[x - x0] as f32
            } else {
                filter_pixel(src, x * factor, ys, kernel, size)
            };
        }
    }
    FloatImage { w: sw, h: sh, data }
}

/// `row` split into its `factor` phases, each `dst.len() / factor` long: sample `k * factor + r`
/// goes to `dst[r * len + k]` (a phase one shorter leaves its last slot as it was).
fn split_phases(row: &[f32], factor: usize, dst: &mut [f32]) {
    let len = dst.len() / factor;
    for (r, phase) in dst.chunks_mut(len).enumerate() {
        for (d, &v) in phase.iter_mut().zip(row.iter().skip(r).step_by(factor)) {
            *d = v;
        }
    }
}

/// One output of the tap sums the SIMD kernels compute for many:
/// `(Σ_t f64(srcs[t][x] * taps[t])) as f32`, summed from 0.0 in tap order like every filter here.
#[inline]
pub(super) fn dot_taps_one(srcs: &[&[f32]], taps: &[f32], x: usize) -> f32 {
    let mut acc = 0.0f64;
    for (s, &tap) in srcs.iter().zip(taps) {
        acc += f64::from(s[x] * tap);
    }
    acc as f32
}

/// Scratch space for [`Convolver::convolve`].
#[derive(Default)]
struct Convolver {
    cache: Vec<f32>,
    acc: Vec<f64>,
}

impl Convolver {
    /// The 11x11 Gaussian applied separably over the positions where it fits entirely inside
    /// the `w`x`h` image produced by `sample` (a row-major index to value map), written to
    /// `out` (`(w - 10) x (h - 10)`). Rows are filtered first and rounded to float, then
    /// columns, each tap a float product summed in double.
    fn convolve(&mut self, w: usize, h: usize, src: &[f32], out: &mut [f32]) {
        let n = GAUSSIAN_LEN;
        let (dw, dh) = (w + 1 - n, h + 1 - n);
        self.cache.resize(dw * h, 0.0);
        self.acc.resize(dw, 0.0);
        for (y, cache_row) in self.cache.chunks_mut(dw).enumerate() {
            let row = &src[y * w..(y + 1) * w];
            self.acc.iter_mut().for_each(|a| *a = 0.0);
            for (u, &tap) in GAUSSIAN.iter().enumerate() {
                for (a, &p) in self.acc.iter_mut().zip(&row[u..u + dw]) {
                    *a += f64::from(p * tap);
                }
            }
            for (c, &a) in cache_row.iter_mut().zip(&self.acc) {
                *c = a as f32;
            }
        }
        for (y, out_row) in out.chunks_mut(dw).take(dh).enumerate() {
            self.acc.iter_mut().for_each(|a| *a = 0.0);
            for (v, &tap) in GAUSSIAN.iter().enumerate() {
                let row = &self.cache[(y + v) * dw..(y + v + 1) * dw];
                for (a, &p) in self.acc.iter_mut().zip(row) {
                    *a += f64::from(p * tap);
                }
            }
            for (o, &a) in out_row.iter_mut().zip(&self.acc) {
                *o = a as f32;
            }
        }
    }
}

/// Means of the SSIM map and of its luminance, contrast and structure terms, as upstream's
/// IQA code returns them (rounded to float).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SsimMeans {
    pub ssim: f32,
    pub l: f32,
    pub c: f32,
    pub s: f32,
}

/// C's `MAX(0.0, v)` stored back into a float (a NaN stays NaN).
#[inline]
fn floor_zero(v: f32) -> f32 {
    if 0.0 > v {
        0.0
    } else {
        v
    }
}

/// Positions the SIMD kernels turn into SSIM terms at a time, before they are summed in order.
pub(super) const TERMS_CHUNK: usize = 256;

/// SSIM of two same-sized images with the 11x11 Gaussian window and the default constants
/// (K1 0.01, K2 0.03, L 255, C3 = C2/2), over the window's valid positions, with the SIMD
/// kernels of `cpu`.
pub fn ssim_means(r: &FloatImage, d: &FloatImage, cpu: CpuLevel) -> Result<SsimMeans> {
    let (w, h) = (r.w, r.h);
    if d.w != w || d.h != h || r.data.len() != w * h || d.data.len() != w * h {
        return Err(Error::inval("ssim: images differ in size"));
    }
    if w < GAUSSIAN_LEN || h < GAUSSIAN_LEN {
        return Err(Error::inval(format!(
            "ssim: {w}x{h} is smaller than the {GAUSSIAN_LEN}x{GAUSSIAN_LEN} window"
        )));
    }
    if let Some(k) = Simd::new(cpu) {
        return Ok(ssim_means_rows(k, r, d));
    }
    let (dw, dh) = (w + 1 - GAUSSIAN_LEN, h + 1 - GAUSSIAN_LEN);
    let n = dw * dh;
    let mut conv = Convolver::default();
    let scratch = || crate::limits::try_filled(n, 0.0f32, "ssim: statistics maps");
    let mut mu_r = scratch()?;
    let mut mu_d = scratch()?;
    let mut var_r = scratch()?;
    let mut var_d = scratch()?;
    let mut cov = scratch()?;
    conv.convolve(w, h, &r.data, &mut mu_r);
    conv.convolve(w, h, &d.data, &mut mu_d);
    let mut prod: Vec<f32> = r.data.iter().map(|&a| a * a).collect();
    conv.convolve(w, h, &prod, &mut var_r);
    prod.iter_mut().zip(&d.data).for_each(|(p, &b)| *p = b * b);
    conv.convolve(w, h, &prod, &mut var_d);
    prod.iter_mut()
        .zip(r.data.iter().zip(&d.data))
        .for_each(|(p, (&a, &b))| *p = a * b);
    conv.convolve(w, h, &prod, &mut cov);
    drop(prod);

    let consts = ssim_constants();
    let (mut ssim_sum, mut l_sum, mut c_sum, mut s_sum) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        let [lcs, l, c, s] = ssim_terms_one([mu_r[i], mu_d[i], var_r[i], var_d[i], cov[i]], consts);
        ssim_sum += lcs;
        l_sum += l;
        c_sum += c;
        s_sum += s;
    }
    Ok(means_from_sums([ssim_sum, l_sum, c_sum, s_sum], n))
}

/// [`ssim_means`] with SIMD kernels, one output row at a time: each input row is filtered along
/// x once into a ring of the last 11 (for the reference, the distorted, their squares and
/// their product), each output row is filtered along y from the ring, and its SSIM terms are
/// summed in position order. Every value comes from the same operations as in the whole-image
/// passes; only where the intermediate rows live changes (a few hundred KiB instead of seven
/// images).
fn ssim_means_rows(k: Simd, r: &FloatImage, d: &FloatImage) -> SsimMeans {
    let (w, h) = (r.w, r.h);
    let n = GAUSSIAN_LEN;
    let (dw, dh) = (w + 1 - n, h + 1 - n);
    let mut ring = vec![0.0f32; 5 * n * dw];
    let mut prod = vec![0.0f32; w];
    let mut stats = vec![0.0f32; 5 * dw];
    let consts = ssim_constants();
    let mut sums = [0.0f64; 4];
    let mut terms = [[0.0f64; TERMS_CHUNK]; 4];
    let mut next = 0;
    for y in 0..dh {
        // Source row `next` goes to slot `next % 11` of each image's part of the ring.
        while next < y + n {
            let (rr, dr) = (&r.data[next * w..][..w], &d.data[next * w..][..w]);
            for img in 0..5 {
                match img {
                    2 => prod.iter_mut().zip(rr).for_each(|(p, &a)| *p = a * a),
                    3 => prod.iter_mut().zip(dr).for_each(|(p, &b)| *p = b * b),
                    4 => prod
                        .iter_mut()
                        .zip(rr.iter().zip(dr))
                        .for_each(|(p, (&a, &b))| *p = a * b),
                    _ => {}
                }
                let src = match img {
                    0 => rr,
                    1 => dr,
                    _ => &prod[..],
                };
                let srcs: [&[f32]; GAUSSIAN_LEN] = std::array::from_fn(|u| &src[u..]);
                k.dot_taps(
                    &srcs,
                    &GAUSSIAN,
                    &mut ring[(img * n + next % n) * dw..][..dw],
                );
            }
            next += 1;
        }
        for (img, out) in stats.chunks_mut(dw).enumerate() {
            let srcs: [&[f32]; GAUSSIAN_LEN] =
                std::array::from_fn(|v| &ring[(img * n + (y + v) % n) * dw..][..dw]);
            k.dot_taps(&srcs, &GAUSSIAN, out);
        }
        for start in (0..dw).step_by(TERMS_CHUNK) {
            let end = (start + TERMS_CHUNK).min(dw);
            let maps: [&[f32]; 5] = std::array::from_fn(|img| &stats[img * dw..][start..end]);
            k.ssim_terms(maps, consts, &mut terms);
            for i in 0..end - start {
                for (sum, t) in sums.iter_mut().zip(&terms) {
                    *sum += t[i];
                }
            }
        }
    }
    means_from_sums(sums, dw * dh)
}

/// The terms `[l·c·s, l, c, s]` of one window position from its Gaussian means of the
/// reference, the distorted, their squares and their product (`[mu_r, mu_d, sq_r, sq_d,
/// cross]`), with the constants `[c1, c2, c3]`.
#[inline]
pub(super) fn ssim_terms_one(
    [mr, md, sq_r, sq_d, cross]: [f32; 5],
    [c1, c2, c3]: [f32; 3],
) -> [f64; 4] {
    let vr = floor_zero(sq_r - mr * mr);
    let vd = floor_zero(sq_d - md * md);
    let cv = cross - mr * md;
    // sqrt of the float product in double, stored as float.
    let sd = f64::from(vr * vd).sqrt() as f32;
    // Numerators are promoted to double by the 2.0 literal; denominators stay float.
    let l =
        (2.0 * f64::from(mr) * f64::from(md) + f64::from(c1)) / f64::from(mr * mr + md * md + c1);
    let c = (2.0 * f64::from(sd) + f64::from(c2)) / f64::from(vr + vd + c2);
    // Flat identical windows can leave a tiny negative covariance with zero deviations;
    // upstream treats it as zero so such windows score 1.
    let cv = if cv < 0.0 && sd <= 0.0 { 0.0 } else { cv };
    let s = f64::from((cv + c3) / (sd + c3));
    [l * c * s, l, c, s]
}

/// SSIM's stabilising constants C1, C2 and C3 = C2/2 (K1 0.01, K2 0.03, L 255).
pub fn ssim_constants() -> [f32; 3] {
    // K·L is a float times the int 255, squared in float.
    let c1 = (0.01f32 * 255.0) * (0.01f32 * 255.0);
    let c2 = (0.03f32 * 255.0) * (0.03f32 * 255.0);
    [c1, c2, c2 / 2.0]
}

/// The means from the sums of the ssim, l, c and s terms over `count` window positions.
pub fn means_from_sums(sums: [f64; 4], count: usize) -> SsimMeans {
    let count = count as f64;
    SsimMeans {
        ssim: (sums[0] / count) as f32,
        l: (sums[1] / count) as f32,
        c: (sums[2] / count) as f32,
        s: (sums[3] / count) as f32,
    }
}

/// Peak-SNR style cap for dB scores: `ceil(10·log10(peak² / (0.5 / (w·h))))`, with upstream's
/// unsigned 32-bit products.
pub fn max_db(bpc: u32, w: usize, h: usize) -> f64 {
    let peak = (1u32 << bpc) - 1;
    let mse = 0.5 / f64::from((w as u32).wrapping_mul(h as u32));
    (10.0 * (f64::from(peak.wrapping_mul(peak)) / mse).log10()).ceil()
}

/// A similarity score in dB, `-10·log10(1 - score)`, capped at `max_db` (C's `MIN`).
pub fn to_db(score: f64, max_db: f64) -> f64 {
    let db = -10.0 * (1.0 - score).log10();
    if db < max_db {
        db
    } else {
        max_db
    }
}

/// No SIMD kernels on other architectures.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod no_simd {
    use super::TERMS_CHUNK;
    use crate::simd::CpuLevel;

    #[derive(Clone, Copy)]
    pub(super) enum Simd {}

    impl Simd {
        pub(super) fn new(_: CpuLevel) -> Option<Simd> {
            None
        }
        pub(super) fn dot_taps(self, _: &[&[f32]], _: &[f32], _: &mut [f32]) {
            match self {}
        }
        pub(super) fn ssim_terms(
            self,
            _: [&[f32]; 5],
            _: [f32; 3],
            _: &mut [[f64; TERMS_CHUNK]; 4],
        ) {
            match self {}
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::feature::{float_ms_ssim, float_ssim};
    use crate::testutil::load_parity_clip;

    /// Full-precision outputs of upstream's v3.2.0 `compute_ssim` / `compute_ms_ssim` (built
    /// locally with gcc -O3, printed with `%.17g`): clip, frame, float_ssim scale option, then
    /// ssim, l, c, s, ms_ssim and each scale's (l, c, s).
    // The literals are the C program's exact `%.17g` output, kept verbatim.
    #[allow(clippy::type_complexity, clippy::excessive_precision)]
    const UPSTREAM: &[(&str, usize, i32, [f64; 20])] = &[
        (
            "natural_576x324_420p8",
            0,
            0,
            [
                0.92597007751464844,
                0.99909907579421997,
                0.98217189311981201,
                0.94250661134719849,
                0.9803944963597796,
                0.99909907579421997,
                0.98217189311981201,
                0.94250661134719849,
                0.99970680475234985,
                0.99383270740509033,
                0.96660178899765015,
                0.99993401765823364,
                0.99864155054092407,
                0.98774868249893188,
                0.99998611211776733,
                0.99976867437362671,
                0.9971919059753418,
                0.99999779462814331,
                0.99998438358306885,
                0.99966597557067871,
            ],
        ),
        (
            "natural_1920x1080_420p8",
            1,
            0,
            [
                0.96314972639083862,
                0.99985480308532715,
                0.99409490823745728,
                0.96880179643630981,
                0.95163773661127948,
                0.99855023622512817,
                0.94874900579452515,
                0.91515201330184937,
                0.99951505661010742,
                0.97382050752639771,
                0.93213564157485962,
                0.9998587965965271,
                0.99329936504364014,
                0.96610939502716064,
                0.99995964765548706,
                0.99899184703826904,
                0.98890084028244019,
                0.99998825788497925,
                0.99986869096755981,
                0.99749183654785156,
            ],
        ),
        (
            "natural_320x180_420p12",
            1,
            3,
            [
                0.98994505405426025,
                0.99998927116394043,
                0.99879878759384155,
                0.99113094806671143,
                0.98332477123660311,
                0.99993312358856201,
                0.93928712606430054,
                0.92223620414733887,
                0.99998116493225098,
                0.99246358871459961,
                0.97669500112533569,
                0.99999308586120605,
                0.99973040819168091,
                0.99581629037857056,
                0.99999815225601196,
                0.9999847412109375,
                0.99941742420196533,
                0.99999839067459106,
                0.9999995231628418,
                0.99994617700576782,
            ],
        ),
    ];

    /// At every CPU level this machine runs.
    #[test]
    fn bit_exact_with_upstream_c() {
        for (clip, frame, scale, want) in UPSTREAM {
            let (refs, dists) = load_parity_clip(clip);
            let (r, d) = (&refs[*frame], &dists[*frame]);
            for cpu in CpuLevel::available() {
                let s = float_ssim::compute(r, d, *scale, cpu).unwrap();
                let m = float_ms_ssim::compute(r, d, cpu).unwrap();
                let mut got = vec![
                    f64::from(s.ssim),
                    f64::from(s.l),
                    f64::from(s.c),
                    f64::from(s.s),
                    m.score,
                ];
                for i in 0..float_ms_ssim::SCALES {
                    got.extend([m.l[i], m.c[i], m.s[i]]);
                }
                assert_eq!(
                    &got[..],
                    &want[..],
                    "{clip} frame {frame} at {}",
                    cpu.name()
                );
            }
        }
    }

    #[test]
    fn decimation_sizes_and_box_filter() {
        assert_eq!(decimated_len(321, 2), 161);
        assert_eq!(decimated_len(320, 2), 160);
        // Odd sizes gain one sample even for other factors, reaching past the edge (mirrored).
        assert_eq!(decimated_len(33, 3), 12);
        let img = FloatImage {
            w: 33,
            h: 4,
            data: (0..33 * 4).map(|i| (i % 33) as f32).collect(),
        };
        let taps = [1.0f32 / 9.0; 9];
        let out = decimate(&img, 3, &taps, 3, CpuLevel::SCALAR);
        assert_eq!((out.w, out.h), (12, 1));
        // The last column is centred on x = 33 (past the edge): taps read x = 32, 32, 31. All
        // rows are equal, so the three kernel rows repeat.
        let last = out.data[11];
        let mut sum = 0.0f64;
        for _ in 0..3 {
            for x in [32.0f32, 32.0, 31.0] {
                sum += f64::from(x * (1.0f32 / 9.0));
            }
        }
        assert_eq!(last, sum as f32);
    }

    use crate::testutil::checkasm::{plane, sizes, Content, Rng, CONTENTS};

    /// `testutil::assert_matches_upstream` with the CPU kernels of `cpu`: every frame of every
    /// parity clip prints (`%.6f`) as upstream's `printed` metric.
    pub(in crate::feature::ssim) fn assert_matches_upstream_at(
        ext: &dyn crate::feature::Extractor,
        stored: &str,
        printed: &str,
        cpu: CpuLevel,
    ) {
        use crate::testutil::{expected_json, expected_metric, load_parity_clip, PARITY_CLIPS};
        for clip in PARITY_CLIPS {
            let log = expected_json(&format!("{clip}.json"));
            let (refs, dists) = load_parity_clip(clip);
            assert_eq!(
                refs.len(),
                log["frames"].as_array().unwrap().len(),
                "{clip}"
            );
            for i in 0..refs.len() {
                let input = crate::feature::FrameInput {
                    cpu,
                    ..crate::feature::FrameInput::pair(i, &refs[i], &dists[i])
                };
                let mut out = Vec::new();
                ext.extract(&input, &mut out).unwrap();
                let got = out.iter().find(|(n, _)| n == stored).unwrap().1;
                let want = expected_metric(&log, i, printed).unwrap();
                assert_eq!(
                    format!("{got:.6}"),
                    format!("{want:.6}"),
                    "{clip} frame {i} {printed} at {}",
                    cpu.name()
                );
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// A `w`x`h` float image of `content` at `bpc`, on the 8-bit scale like `luma_to_float`.
    fn image(rng: &mut Rng, w: usize, h: usize, bpc: u32, content: Content) -> FloatImage {
        let scaler = luma_scaler(bpc).unwrap();
        let data = plane(rng, w, h, w, bpc, content)
            .into_iter()
            .map(|v| f32::from(v) / scaler)
            .collect();
        FloatImage { w, h, data }
    }

    /// The SIMD levels this machine runs, with their kernels.
    fn simd_levels() -> Vec<(CpuLevel, Simd)> {
        CpuLevel::available()
            .into_iter()
            .filter_map(|l| Simd::new(l).map(|k| (l, k)))
            .collect()
    }

    #[test]
    fn checkasm_dot_taps() {
        let mut rng = Rng::new(0xd07);
        let kernels: Vec<Vec<f32>> = vec![
            GAUSSIAN.to_vec(),
            LPF_9X9.to_vec(),
            vec![1.0 / 9.0; 9],
            vec![1.0 / 100.0; 100],
            vec![0.5],
            (0..16).map(|i| (i as f32 - 7.5) * 0.37).collect(),
        ];
        for (level, k) in simd_levels() {
            for (n, _) in sizes(&mut rng, 20) {
                for taps in &kernels {
                    for content in CONTENTS {
                        let pad = rng.below(5);
                        let img = image(&mut rng, n + pad, taps.len(), 12, content);
                        // Signed samples too: the LPF and the statistics see them.
                        let srcs: Vec<Vec<f32>> = img
                            .data
                            .chunks(n + pad)
                            .map(|r| r.iter().map(|&v| v - 100.0).collect())
                            .collect();
                        let srcs: Vec<&[f32]> = srcs.iter().map(|r| &r[..]).collect();
                        let want: Vec<f32> = (0..n).map(|x| dot_taps_one(&srcs, taps, x)).collect();
                        let mut got = vec![f32::NAN; n];
                        k.dot_taps(&srcs, taps, &mut got);
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "dot_taps {} n {n} taps {} {content:?}",
                            level.name(),
                            taps.len()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn checkasm_ssim_terms() {
        let mut rng = Rng::new(0x7e5);
        let consts = ssim_constants();
        for (level, k) in simd_levels() {
            for (w, h) in sizes(&mut rng, 10) {
                let n = (w * h).min(TERMS_CHUNK);
                for content in CONTENTS {
                    let r = image(&mut rng, n, 1, 8, content).data;
                    let d = image(&mut rng, n, 1, 8, content).data;
                    // Means, then second moments near (and at, for flat content) their squares,
                    // so variances are tiny, zero or slightly negative like real windows.
                    let jitter = |rng: &mut Rng| (rng.below(5) as f32 - 2.0) * 0.001;
                    let sq_r: Vec<f32> = r.iter().map(|&v| v * v + jitter(&mut rng)).collect();
                    let sq_d: Vec<f32> = d.iter().map(|&v| v * v + jitter(&mut rng)).collect();
                    let cross: Vec<f32> = r
                        .iter()
                        .zip(&d)
                        .map(|(&a, &b)| a * b + jitter(&mut rng))
                        .collect();
                    let maps = [&r[..], &d[..], &sq_r[..], &sq_d[..], &cross[..]];
                    let mut got = [[f64::NAN; TERMS_CHUNK]; 4];
                    k.ssim_terms(maps, consts, &mut got);
                    for i in 0..n {
                        let want = ssim_terms_one(maps.map(|m| m[i]), consts);
                        let got: [f64; 4] = std::array::from_fn(|t| got[t][i]);
                        assert_eq!(
                            got.map(f64::to_bits),
                            want.map(f64::to_bits),
                            "ssim_terms {} n {n} {content:?} at {i}",
                            level.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn checkasm_decimate() {
        let mut rng = Rng::new(0xdec);
        for (level, _) in simd_levels() {
            for (w, h) in sizes(&mut rng, 12) {
                let (w, h) = (w.max(11), h.max(11));
                for content in CONTENTS {
                    let bpc = [8, 10, 12, 16][rng.below(4)];
                    let img = image(&mut rng, w, h, bpc, content);
                    let factor = rng.range(2, 10);
                    let boxed = float_ssim::box_taps(factor);
                    let box4 = float_ssim::box_taps(4);
                    // MS-SSIM's and float_ssim's kernels, and others that take the SIMD path
                    // with other factors and an even size.
                    for (f, taps, size) in [
                        (2, &LPF_9X9[..], 9),
                        (factor, &boxed[..], factor),
                        (rng.range(3, 4), &LPF_9X9[..], 9),
                        (2, &box4[..], 4),
                    ] {
                        let want = decimate(&img, f, taps, size, CpuLevel::SCALAR);
                        let got = decimate(&img, f, taps, size, level);
                        assert_eq!(
                            bits(&got.data),
                            bits(&want.data),
                            "decimate {} {w}x{h} {content:?} {bpc}-bit factor {f} size {size}",
                            level.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn checkasm_ssim_means() {
        let mut rng = Rng::new(0x55);
        for (level, _) in simd_levels() {
            for (w, h) in sizes(&mut rng, 12) {
                let (w, h) = (w.max(11), h.max(11));
                for content in CONTENTS {
                    // One content at full HD keeps the test short.
                    if w * h > 1_000_000 && content != Content::Smooth {
                        continue;
                    }
                    let bpc = [8, 10, 12, 16][rng.below(4)];
                    let r = image(&mut rng, w, h, bpc, content);
                    let d = match rng.below(3) {
                        0 => r.clone(),
                        _ => image(&mut rng, w, h, bpc, content),
                    };
                    let want = ssim_means(&r, &d, CpuLevel::SCALAR).unwrap();
                    let got = ssim_means(&r, &d, level).unwrap();
                    let b = |m: SsimMeans| [m.ssim, m.l, m.c, m.s].map(f32::to_bits);
                    assert_eq!(
                        b(got),
                        b(want),
                        "ssim_means {} {w}x{h} {content:?} {bpc}-bit",
                        level.name()
                    );
                }
            }
        }
    }
}
