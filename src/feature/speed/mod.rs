//! SpEED-QA (libvmaf's `speed_chroma` and `speed_temporal` extractors): entropy differences of
//! locally normalised, 16x downscaled planes, estimated per 5x5 block with a Gaussian scale
//! mixture model.
//!
//! Per plane pair: optional prescaling (nearest/bilinear/bicubic/lanczos4), a Gaussian
//! anti-aliasing filter, decimation by 16, local mean removal with a 3-tap Gaussian, then for
//! each picture the 25x25 covariance matrix of 5x5 neighbourhoods, its eigenvalues, and per block
//! the GSM variance (from `K x = y`) and entropy. The score is the mean absolute difference of
//! variance-weighted entropies over the blocks where either entropy exceeds the noise floor.
//!
//! Everything runs in `f32` except where upstream's C promotes to `double` (calls to `log2`,
//! `exp`, `sqrt`, and `double` literals); each such spot converts exactly where C does, so the
//! scores are bit-identical with upstream's scalar path.
//!
//! `speed_chroma` scores the U and V planes (and their mean); `speed_temporal` scores the
//! difference of consecutive luma planes.

use std::f64::consts::PI;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::feature::alias::alias;
use crate::feature::options::fmt_g;
use crate::feature::{
    Dict, Extractor, ExtractorFlags, FrameInput, OptSpec, OptValue, Opts, Scores,
};
use crate::picture::{PictureData, PixelFormat, PlaneRef};

/// Features of `speed_chroma`.
pub const CHROMA_FEATURES: &[&str] = &[
    "Speed_chroma_feature_speed_chroma_u_score",
    "Speed_chroma_feature_speed_chroma_v_score",
    "Speed_chroma_feature_speed_chroma_uv_score",
];

/// Features of `speed_temporal`.
pub const TEMPORAL_FEATURES: &[&str] = &["Speed_temporal_feature_speed_temporal_score"];

/// Side of the square neighbourhood the GSM model works on.
const BLOCK: usize = 5;
/// Entries of one neighbourhood vector (and side of the covariance matrix).
const NB: usize = BLOCK * BLOCK;
/// Decimation steps: frames are analysed at 1/16 of the (prescaled) size.
const NUM_SCALES: u32 = 4;
/// Threshold for eigenvalue deflation, regularity and pivots.
const EIG_EPS: f64 = 1e-6;
/// Cap on QR sweeps of the tridiagonal eigenvalue solver.
const EIG_MAX_ITERS: usize = 500;

/// Kernel scales upstream accepts (as `f32`, like its table).
const VALID_KERNELSCALES: [f32; 21] = [
    1.0,
    1.0 / 2.0,
    3.0 / 2.0,
    2.0,
    2.0 / 3.0,
    24.0 / 10.0,
    360.0 / 97.0,
    4.0 / 3.0,
    3.5 / 3.0,
    3.75 / 3.0,
    4.25 / 3.0,
    5.0 / 3.0,
    3.0,
    1.0 / 2.25,
    1.4746,
    1.54,
    1.6,
    1.06667,
    0.711111,
    0.740740,
    1.111111,
];

/// Option name of the prescaling method (a string option, kept out of the typed tables).
const OPT_PRESCALE_METHOD: &str = "speed_prescale_method";
const DEFAULT_PRESCALE_METHOD: &str = "nearest";

/// `speed_chroma` options, as upstream declares them (all change the stored names).
static CHROMA_OPTIONS: [OptSpec; 6] = [
    OptSpec::double("speed_kernelscale", Some("ks"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_prescale", Some("ps"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_sigma_nn", Some("snn"), 0.29, 0.1, 2.0, true),
    OptSpec::double("speed_nn_floor", Some("nnf"), 0.0, 0.0, 1.0, true),
    OptSpec::double("speed_max_val", Some("mxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::int("speed_weight_var_mode", Some("wvm"), 0, 0.0, 6.0, true),
];

/// `speed_temporal` options.
static TEMPORAL_OPTIONS: [OptSpec; 6] = [
    OptSpec::double("speed_kernelscale", Some("ks"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_prescale", Some("ps"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_sigma_nn", Some("snn"), 0.29, 0.1, 2.0, true),
    OptSpec::double("speed_nn_floor", Some("nnf"), 0.0, 0.0, 1.0, true),
    OptSpec::double("speed_max_val", Some("mxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::boolean("speed_use_ref_diff", Some("urd"), false, true),
];

/// `log2(2·pi·e)` (of the double `2·pi·e`), the Gaussian entropy constant. Upstream's compiler
/// folds it, correctly rounded; spelled out so no run-time libm can differ.
const LOG2_2PIE: f64 = 4.094191170361282;

/// Prescaling interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScaleMethod {
    Nearest,
    Bilinear,
    Bicubic,
    Lanczos4,
}

impl ScaleMethod {
    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "nearest" => ScaleMethod::Nearest,
            "bilinear" => ScaleMethod::Bilinear,
            "bicubic" => ScaleMethod::Bicubic,
            "lanczos4" => ScaleMethod::Lanczos4,
            _ => {
                return Err(Error::inval(format!(
                    "speed: invalid scale method {s:?}, expected nearest, bilinear, bicubic or lanczos4"
                )))
            }
        })
    }
}

/// Options shared by both extractors, in the precision upstream's computation uses them.
#[derive(Debug, Clone, Copy)]
struct Params {
    kernelscale: f32,
    prescale: f64,
    method: ScaleMethod,
    sigma_nn: f32,
    nn_floor: f32,
    weight_var_mode: i32,
}

/// Parsed options plus the stored-name builder (numeric options and the string method).
#[derive(Debug, Clone)]
struct SpeedOpts {
    specs: &'static [OptSpec],
    opts: Opts,
    method: String,
    params: Params,
}

impl SpeedOpts {
    fn parse(specs: &'static [OptSpec], dict: &Dict, weight_var_mode: bool) -> Result<Self> {
        let opts = Opts::parse(specs, dict)?;
        let method = dict
            .get(OPT_PRESCALE_METHOD)
            .unwrap_or(DEFAULT_PRESCALE_METHOD)
            .to_string();
        let kernelscale = opts.double("speed_kernelscale") as f32;
        if !VALID_KERNELSCALES
            .iter()
            .any(|&k| f64::from((kernelscale - k).abs()) < 1e-3)
        {
            return Err(Error::inval(format!(
                "speed: invalid speed_kernelscale {kernelscale}"
            )));
        }
        let params = Params {
            kernelscale,
            prescale: opts.double("speed_prescale"),
            method: ScaleMethod::parse(&method)?,
            sigma_nn: opts.double("speed_sigma_nn") as f32,
            nn_floor: opts.double("speed_nn_floor") as f32,
            weight_var_mode: if weight_var_mode {
                opts.int("speed_weight_var_mode")
            } else {
                0
            },
        };
        Ok(SpeedOpts {
            specs,
            opts,
            method,
            params,
        })
    }

    /// Upstream's option-dependent name: the alias, then `_key_value` (`_key` for bools) for
    /// every non-default option, sorted by option name; the full name when all are default.
    fn feature_name(&self, full_name: &str) -> String {
        let mut params: Vec<(&str, String)> = Vec::new();
        for spec in self.specs {
            let key = spec.alias.unwrap_or(spec.name);
            let part = match spec.default {
                OptValue::Bool(d) if self.opts.bool(spec.name) != d => format!("_{key}"),
                OptValue::Int(d) if self.opts.int(spec.name) != d => {
                    format!("_{key}_{}", self.opts.int(spec.name))
                }
                OptValue::Double(d) if self.opts.double(spec.name) != d => {
                    format!("_{key}_{}", fmt_g(self.opts.double(spec.name)))
                }
                _ => continue,
            };
            params.push((spec.name, part));
        }
        if self.method != DEFAULT_PRESCALE_METHOD {
            params.push((OPT_PRESCALE_METHOD, format!("_psm_{}", self.method)));
        }
        if params.is_empty() {
            return full_name.to_string();
        }
        params.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = alias(full_name).to_string();
        for (_, part) in params {
            out.push_str(&part);
        }
        out
    }
}

/// Frame geometry of one SpEED computation.
#[derive(Debug, Clone, Copy)]
struct Dims {
    /// Input plane size.
    w: usize,
    h: usize,
    /// Size after prescaling.
    sw: usize,
    sh: usize,
    /// Row pitch of the float buffers (`max(w, sw)`); buffers hold `stride * max(h, sh)`.
    stride: usize,
    rows: usize,
    /// Blocks across, down, and in all.
    bw: usize,
    bh: usize,
    blocks: usize,
    /// Size of the shifted windows whose covariances form the covariance matrix.
    subw: usize,
    subh: usize,
}

impl Dims {
    fn new(w: usize, h: usize, prescale: f64) -> Result<Self> {
        // Upstream: (int)(size * prescale + 0.5), in double.
        let sw = (w as f64 * prescale + 0.5) as usize;
        let sh = (h as f64 * prescale + 0.5) as usize;
        let (ow, oh) = (sw >> NUM_SCALES, sh >> NUM_SCALES);
        let (tw, th) = (ow / BLOCK * BLOCK, oh / BLOCK * BLOCK);
        if tw == 0 || th == 0 {
            return Err(Error::inval(format!(
                "speed: {w}x{h} plane is too small (needs at least {} samples each way after prescaling)",
                BLOCK << NUM_SCALES
            )));
        }
        Ok(Dims {
            w,
            h,
            sw,
            sh,
            stride: w.max(sw),
            rows: h.max(sh),
            bw: tw / BLOCK,
            bh: th / BLOCK,
            blocks: (tw / BLOCK) * (th / BLOCK),
            subw: tw - BLOCK + 1,
            subh: th - BLOCK + 1,
        })
    }

    fn buffer(&self) -> Vec<f32> {
        vec![0.0; self.stride * self.rows]
    }
}

/// Copies plane `c` of `pic` (its top-left `d.w`x`d.h`) into a fresh buffer as floats on the
/// 8-bit scale, minus 128 (upstream's `picture_copy` with offset -128).
fn plane_to_float(pic: &PictureData, c: usize, d: &Dims) -> Result<Vec<f32>> {
    if d.w > pic.w[c] || d.h > pic.h[c] {
        return Err(Error::inval("speed: plane smaller than expected"));
    }
    let stride = pic.stride[c];
    let mut buf = crate::limits::try_filled(d.stride * d.rows, 0.0, "speed: float plane")?;
    match pic.plane(c) {
        PlaneRef::U8(p) => {
            for (dst, src) in buf.chunks_mut(d.stride).zip(p.chunks(stride)).take(d.h) {
                for (o, &v) in dst[..d.w].iter_mut().zip(&src[..d.w]) {
                    *o = f32::from(v) + -128.0;
                }
            }
        }
        PlaneRef::U16(p) => {
            let scaler = match pic.bpc {
                10 => 4.0f32,
                12 => 16.0,
                16 => 256.0,
                b => {
                    return Err(Error::inval(format!("speed: unsupported bit depth {b}")));
                }
            };
            for (dst, src) in buf.chunks_mut(d.stride).zip(p.chunks(stride)).take(d.h) {
                for (o, &v) in dst[..d.w].iter_mut().zip(&src[..d.w]) {
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
fn filter_size(scale: u32, kernelscale: f32) -> usize {
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

/// The local-mean filter at the analysis scale.
fn mean_filter(kernelscale: f32) -> Vec<f32> {
    let size = filter_size(NUM_SCALES, kernelscale);
    gaussian_kernel(size, size as f32 / 5.0f32)
}

/// The anti-aliasing filter applied before decimation: the scale-1 length with the standard
/// deviation widened by `sqrt(NUM_SCALES)` (upstream's "sigma trick").
fn antialias_filter(kernelscale: f32) -> Vec<f32> {
    let size = filter_size(1, kernelscale);
    let stdev = f64::from(NUM_SCALES).sqrt() * size as f64 / f64::from(5.0f32);
    gaussian_kernel(size, stdev as f32)
}

/// Mirrors index `i` of `0..n` once at each edge (edge sample not repeated).
#[inline]
fn reflect(i: isize, n: usize) -> usize {
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
fn filter1d(f: &[f32], src: &[f32], dst: &mut [f32], w: usize, h: usize, stride: usize) {
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
    #[inline]
    fn at(&self, x: i32, y: i32) -> f32 {
        self.data[y as usize * self.stride + x as usize]
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

/// Resamples `src` (`d.w`x`d.h`) to `dst` (`d.sw`x`d.sh`), both with pitch `d.stride`.
fn rescale(method: ScaleMethod, src: &[f32], dst: &mut [f32], d: &Dims) {
    if d.w == d.sw && d.h == d.sh {
        dst.copy_from_slice(src);
        return;
    }
    let s = Src {
        data: src,
        w: d.w,
        h: d.h,
        stride: d.stride,
    };
    let ratio_x = d.w as f32 / d.sw as f32;
    let ratio_y = d.h as f32 / d.sh as f32;
    for y in 0..d.sh {
        // Sample centres, computed in double then stored as float.
        let yy = ((y as f64 + 0.5) * f64::from(ratio_y) - 0.5) as f32;
        let row = &mut dst[y * d.stride..y * d.stride + d.sw];
        for (x, o) in row.iter_mut().enumerate() {
            let xx = ((x as f64 + 0.5) * f64::from(ratio_x) - 0.5) as f32;
            *o = match method {
                ScaleMethod::Nearest => {
                    let ry = (y as f32 * ratio_y) as usize;
                    let rx = (x as f32 * ratio_x) as usize;
                    src[ry * d.stride + rx]
                }
                ScaleMethod::Bilinear => s.bilinear(xx, yy),
                ScaleMethod::Bicubic => s.bicubic(xx, yy),
                ScaleMethod::Lanczos4 => s.lanczos4(xx, yy),
            };
        }
    }
}

/// Prescales `frame` in place, low-passes and decimates it by 16, and removes the local mean:
/// on return its top-left `(sw>>4)`x`(sh>>4)` holds the normalised plane.
fn filter_and_downscale(d: &Dims, p: &Params, frame: &mut [f32]) {
    let mut cur = d.buffer();
    // Prescales within 1e-3 of 1 skip resampling but keep their rounded size, as upstream does
    // (a size one sample larger then reads never-written samples there; zeros here).
    if (p.prescale - 1.0).abs() >= 1.0e-3 {
        let src = frame.to_vec();
        rescale(p.method, &src, frame, d);
    }
    filter1d(
        &antialias_filter(p.kernelscale),
        frame,
        &mut cur,
        d.sw,
        d.sh,
        d.stride,
    );
    let (dw, dh) = (d.sw >> NUM_SCALES, d.sh >> NUM_SCALES);
    for i in 0..d.sh / 16 {
        for j in 0..d.sw / 16 {
            frame[i * d.stride + j] = cur[(i * 16) * d.stride + j * 16];
        }
    }
    filter1d(
        &mean_filter(p.kernelscale),
        frame,
        &mut cur,
        dw,
        dh,
        d.stride,
    );
    for i in 0..dh {
        let r = i * d.stride;
        for (f, &m) in frame[r..r + dw].iter_mut().zip(&cur[r..r + dw]) {
            *f -= m;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 25x25 linear algebra (upstream's own routines, reproduced operation by operation)

/// A square `NB`x`NB` row-major matrix.
type Mat = [f32; NB * NB];

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
fn eigenvalues(k: &Mat) -> [f32; NB] {
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
fn solve(k: &Mat, b: &[f32], cols: usize) -> Option<Vec<f32>> {
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

// ---------------------------------------------------------------------------------------------
// GSM parameter estimation and the score

/// Per-block entropies and variances of one picture.
struct Stats {
    entropies: Vec<f32>,
    variances: Vec<f32>,
}

/// Covariance matrix of the 25 shifted `subw`x`subh` windows of `data` (pitch `stride`).
fn covariance_matrix(d: &Dims, data: &[f32]) -> Mat {
    let n = d.subw * d.subh;
    let mut means = [0.0f32; NB];
    for (idx, m) in means.iter_mut().enumerate() {
        let (r0, c0) = (idx / BLOCK, idx % BLOCK);
        let mut acc = 0.0f32;
        for i in 0..d.subh {
            let row = &data[(r0 + i) * d.stride + c0..][..d.subw];
            for &v in row {
                acc += v;
            }
        }
        *m = acc / n as f32;
    }
    let mut k = [0.0f32; NB * NB];
    for xi in 0..NB {
        for yi in 0..=xi {
            let (mx, my) = (f64::from(means[xi]), f64::from(means[yi]));
            let ox = (xi / BLOCK) * d.stride + xi % BLOCK;
            let oy = (yi / BLOCK) * d.stride + yi % BLOCK;
            let mut acc = 0.0f64;
            for i in 0..d.subh {
                let rx = &data[ox + i * d.stride..][..d.subw];
                let ry = &data[oy + i * d.stride..][..d.subw];
                for (&a, &b) in rx.iter().zip(ry) {
                    acc += (f64::from(a) - mx) * (f64::from(b) - my);
                }
            }
            let c = (acc / n as f64) as f32;
            k[xi * NB + yi] = c;
            k[yi * NB + xi] = c;
        }
    }
    k
}

/// Estimates the GSM variance and entropy of every block of the normalised plane `data`.
/// The flag is false when the covariance matrix could not be inverted (variances are then 0).
fn est_params(d: &Dims, data: &[f32], sigma_nn: f32) -> (Stats, bool) {
    let k = covariance_matrix(d, data);
    let eig = eigenvalues(&k);

    // Row r = in-block position (r / 5, r % 5); column = block index.
    let nbk = d.blocks;
    let mut y = vec![0.0f32; NB * nbk];
    for (r, row) in y.chunks_mut(nbk).enumerate() {
        let (si, sj) = (r / BLOCK, r % BLOCK);
        for bi in 0..d.bh {
            for bj in 0..d.bw {
                row[bi * d.bw + bj] = data[(si + bi * BLOCK) * d.stride + sj + bj * BLOCK];
            }
        }
    }

    // Written as "no eigenvalue below": a NaN eigenvalue does not count as singular upstream.
    let regular = !eig.iter().any(|&e| f64::from(e) < EIG_EPS);
    let sol = if regular { solve(&k, &y, nbk) } else { None };
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

/// Scores one pair of float planes (consumed: they are filtered in place). Returns the score
/// and whether either covariance matrix was singular; when exactly one was, the score is 0.
fn extract_score(d: &Dims, p: &Params, mut r: Vec<f32>, mut s: Vec<f32>) -> (f32, bool) {
    filter_and_downscale(d, p, &mut r);
    let (rs, rok) = est_params(d, &r, p.sigma_nn);
    filter_and_downscale(d, p, &mut s);
    let (ds, dok) = est_params(d, &s, p.sigma_nn);
    let score = if rok != dok {
        0.0
    } else {
        speed_score(d, &rs, &ds, p)
    };
    (score, !rok || !dok)
}

/// Upstream's `MIN(score, max_val)`: the float score against the double cap (NaN gives the cap).
fn cap(score: f32, max: f64) -> f64 {
    let s = f64::from(score);
    if s < max {
        s
    } else {
        max
    }
}

fn check_pair(name: &str, r: &PictureData, d: &PictureData) -> Result<()> {
    if r.pix_fmt != d.pix_fmt || r.bpc != d.bpc || r.w != d.w || r.h != d.h {
        return Err(Error::inval(format!(
            "{name}: reference and distorted pictures differ in format or size"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Extractors

/// The `speed_chroma` extractor.
pub struct SpeedChroma {
    opts: SpeedOpts,
    max_val: f64,
}

impl SpeedChroma {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = SpeedOpts::parse(&CHROMA_OPTIONS, dict, true)?;
        Ok(SpeedChroma {
            max_val: opts.opts.double("speed_max_val"),
            opts,
        })
    }
}

impl Extractor for SpeedChroma {
    fn name(&self) -> &'static str {
        "speed_chroma"
    }

    fn dedup_key(&self) -> String {
        format!(
            "speed_chroma/{}",
            self.opts.feature_name(CHROMA_FEATURES[2])
        )
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, dp) = (&**input.reference, &**input.distorted);
        check_pair("speed_chroma", r, dp)?;
        // Chroma size from the luma size, as upstream's init derives it.
        let (w, h) = (r.w[0], r.h[0]);
        let (w, h) = match r.pix_fmt {
            PixelFormat::Yuv420p => (w / 2, h / 2),
            PixelFormat::Yuv422p => (w / 2, h),
            PixelFormat::Yuv444p => (w, h),
            PixelFormat::Yuv400p | PixelFormat::Unknown => {
                return Err(Error::inval("speed_chroma: needs chroma planes"));
            }
        };
        let d = Dims::new(w, h, self.opts.params.prescale)?;
        let p = &self.opts.params;
        let (su, eu) = extract_score(&d, p, plane_to_float(r, 1, &d)?, plane_to_float(dp, 1, &d)?);
        let (sv, ev) = extract_score(&d, p, plane_to_float(r, 2, &d)?, plane_to_float(dp, 2, &d)?);
        // A channel whose covariance is singular (e.g. flat) takes the other channel's score.
        let suv = match (eu, ev) {
            (true, false) => sv,
            (false, true) => su,
            _ => (f64::from(su + sv) / 2.0) as f32,
        };
        for (full, s) in CHROMA_FEATURES.iter().zip([su, sv, suv]) {
            out.push((self.opts.feature_name(full), cap(s, self.max_val)));
        }
        Ok(())
    }
}

/// The `speed_temporal` extractor: SpEED of frame differences (previous minus current).
pub struct SpeedTemporal {
    opts: SpeedOpts,
    use_ref_diff: bool,
    /// Float luma planes of the previous frame (reference, distorted) and their geometry.
    prev: Mutex<Option<(Vec<f32>, Vec<f32>)>>,
}

impl SpeedTemporal {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = SpeedOpts::parse(&TEMPORAL_OPTIONS, dict, false)?;
        Ok(SpeedTemporal {
            use_ref_diff: opts.opts.bool("speed_use_ref_diff"),
            opts,
            prev: Mutex::new(None),
        })
    }
}

impl Extractor for SpeedTemporal {
    fn name(&self) -> &'static str {
        "speed_temporal"
    }

    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::TEMPORAL
    }

    fn dedup_key(&self) -> String {
        format!(
            "speed_temporal/{}",
            self.opts.feature_name(TEMPORAL_FEATURES[0])
        )
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, dp) = (&**input.reference, &**input.distorted);
        check_pair("speed_temporal", r, dp)?;
        let d = Dims::new(r.w[0], r.h[0], self.opts.params.prescale)?;
        let cur_r = plane_to_float(r, 0, &d)?;
        let cur_d = plane_to_float(dp, 0, &d)?;
        let name = self.opts.feature_name(TEMPORAL_FEATURES[0]);
        let prev = {
            let mut g = self.prev.lock().unwrap_or_else(|e| e.into_inner());
            g.replace((cur_r.clone(), cur_d.clone()))
        };
        // The first frame has no predecessor: upstream stores 0. (Upstream keys this on index 0.)
        let Some((mut pr, mut pd)) = prev.filter(|_| input.index != 0) else {
            out.push((name, 0.0));
            return Ok(());
        };
        if pr.len() != cur_r.len() {
            return Err(Error::inval("speed_temporal: picture size changed"));
        }
        let sub = |a: &mut [f32], b: &[f32]| {
            for i in 0..d.h {
                let row = i * d.stride;
                for (x, &y) in a[row..row + d.w].iter_mut().zip(&b[row..row + d.w]) {
                    *x -= y;
                }
            }
        };
        sub(&mut pr, &cur_r);
        sub(&mut pd, if self.use_ref_diff { &cur_r } else { &cur_d });
        // No max_val clipping here: upstream's temporal extractor stores the raw score.
        let (score, _) = extract_score(&d, &self.opts.params, pr, pd);
        out.push((name, f64::from(score)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::create;
    use crate::picture::Picture;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip};

    fn model_opts(prescale: bool) -> Dict {
        let mut o = Dict::new();
        if !prescale {
            o.set("speed_kernelscale", "1.0");
        }
        o.set("speed_nn_floor", "0.1");
        o.set("speed_sigma_nn", "0.19");
        o.set("speed_weight_var_mode", "5");
        if prescale {
            o.set("speed_prescale", "0.6");
            o.set("speed_prescale_method", "bilinear");
        }
        o.set("speed_max_val", "45.0");
        o
    }

    fn run(x: &dyn Extractor, clip: &str) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, x)
    }

    fn check_model(model: &str, prescale: bool) {
        let x = SpeedChroma::new(&model_opts(prescale)).unwrap();
        let log = expected_json(&format!("natural_1920x1080_420p8.{model}.json"));
        let scores = run(&x, "natural_1920x1080_420p8");
        assert_eq!(scores.len(), 8);
        for (i, out) in scores.iter().enumerate() {
            assert_eq!(out.len(), 3);
            for (name, v) in out {
                let want = expected_metric(&log, i, name)
                    .unwrap_or_else(|| panic!("{model} frame {i}: no {name}"));
                assert_eq!(
                    format!("{v:.6}"),
                    format!("{want:.6}"),
                    "{model} frame {i} {name}"
                );
            }
        }
    }

    #[test]
    fn v1_3d0h_options_match_upstream() {
        check_model("vmaf_v1.0.16_3d0h", false);
    }

    #[test]
    fn v1_5d0h_bilinear_prescale_matches_upstream() {
        check_model("vmaf_v1.0.16_5d0h", true);
    }

    /// (clip, extractor, options, printed name -> first three frames) from upstream's `vmaf`
    /// tool (v3.2.0 built without assembly, i.e. the scalar C path; JSON writer patched to
    /// print `%.17g`), so the comparison below is exact to the bit.
    type UpstreamCase = (
        &'static str,
        &'static str,
        &'static str,
        &'static [(&'static str, [f64; 3])],
    );

    const UPSTREAM_CASES: &[UpstreamCase] = &[
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_kernelscale=1.0:speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_max_val=45.0",
            &[
                ("speed_chroma_u_mxv_45_nnf_0.1_snn_0.19_wvm_5", [5.480644702911377, 4.453373432159424, 5.066553115844727]),
                ("speed_chroma_v_mxv_45_nnf_0.1_snn_0.19_wvm_5", [3.6291399002075195, 2.990539073944092, 2.876007318496704]),
                ("speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5", [4.554892539978027, 3.721956253051758, 3.971280097961426]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_prescale=0.6:speed_prescale_method=bilinear:speed_max_val=45.0",
            &[
                ("speed_chroma_u_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.747060537338257, 2.869520425796509, 1.860650897026062]),
                ("speed_chroma_v_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.2761921882629395, 1.373055100440979, 1.4050829410552979]),
                ("speed_chroma_uv_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.5116262435913086, 2.1212878227233887, 1.6328668594360352]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [10.662699699401855, 7.840482234954834, 12.040542602539062]),
                ("speed_chroma_v", [11.66856861114502, 15.197166442871094, 12.103507995605469]),
                ("speed_chroma_uv", [11.165634155273438, 11.518824577331543, 12.072025299072266]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [6.140331268310547, 4.078641891479492, 5.029851913452148]),
                ("speed_chroma_v", [7.189605236053467, 7.309563636779785, 5.887149810791016]),
                ("speed_chroma_uv", [6.664968490600586, 5.694102764129639, 5.458500862121582]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_chroma",
            "speed_weight_var_mode=3",
            &[
                ("speed_chroma_u_wvm_3", [3.274195671081543, 1.949026107788086, 2.0572824478149414]),
                ("speed_chroma_v_wvm_3", [2.9165682792663574, 2.744145393371582, 1.990917682647705]),
                ("speed_chroma_uv_wvm_3", [3.09538197517395, 2.346585750579834, 2.0241000652313232]),
            ],
        ),
        (
            "mandel_352x288_422p8",
            "speed_chroma",
            "speed_weight_var_mode=4",
            &[
                ("speed_chroma_u_wvm_4", [2.796290636062622, 3.2384519577026367, 2.6985929012298584]),
                ("speed_chroma_v_wvm_4", [2.518521308898926, 1.3121552467346191, 0.842121422290802]),
                ("speed_chroma_uv_wvm_4", [2.6574058532714844, 2.275303602218628, 1.7703571319580078]),
            ],
        ),
        (
            "testsrc_480x270_444p8",
            "speed_chroma",
            "speed_weight_var_mode=6:speed_kernelscale=2",
            &[
                ("speed_chroma_u_ks_2_wvm_6", [0.9893830418586731, 1.2315424680709839, 1.0857939720153809]),
                ("speed_chroma_v_ks_2_wvm_6", [1.539316177368164, 1.744372844696045, 1.2282463312149048]),
                ("speed_chroma_uv_ks_2_wvm_6", [1.2643495798110962, 1.4879577159881592, 1.157020092010498]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.5:speed_prescale_method=bicubic:speed_weight_var_mode=1",
            &[
                ("speed_chroma_u_ps_0.5_psm_bicubic_wvm_1", [1.4530463218688965, 1.1306085586547852, 1.4243192672729492]),
                ("speed_chroma_v_ps_0.5_psm_bicubic_wvm_1", [0.6718130111694336, 0.7096696496009827, 0.8219540119171143]),
                ("speed_chroma_uv_ps_0.5_psm_bicubic_wvm_1", [1.062429666519165, 0.9201390743255615, 1.1231366395950317]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.7:speed_prescale_method=lanczos4:speed_weight_var_mode=2",
            &[
                ("speed_chroma_u_ps_0.7_psm_lanczos4_wvm_2", [2.083195686340332, 1.985361099243164, 2.020236015319824]),
                ("speed_chroma_v_ps_0.7_psm_lanczos4_wvm_2", [1.4989222288131714, 1.130126714706421, 1.038780689239502]),
                ("speed_chroma_uv_ps_0.7_psm_lanczos4_wvm_2", [1.7910590171813965, 1.5577439069747925, 1.529508352279663]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.5:speed_prescale_method=bilinear",
            &[
                ("speed_chroma_u_ps_1.5_psm_bilinear", [11.827473640441895, 20.338085174560547, 19.257246017456055]),
                ("speed_chroma_v_ps_1.5_psm_bilinear", [14.92762279510498, 17.41127586364746, 21.58837890625]),
                ("speed_chroma_uv_ps_1.5_psm_bilinear", [13.377548217773438, 18.874679565429688, 20.422813415527344]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.25:speed_prescale_method=lanczos4",
            &[
                ("speed_chroma_u_ps_1.25_psm_lanczos4", [15.998275756835938, 19.435813903808594, 9.982866287231445]),
                ("speed_chroma_v_ps_1.25_psm_lanczos4", [17.935800552368164, 13.708138465881348, 24.730131149291992]),
                ("speed_chroma_uv_ps_1.25_psm_lanczos4", [16.967037200927734, 16.571975708007812, 17.35649871826172]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.3:speed_prescale_method=bicubic",
            &[
                ("speed_chroma_u_ps_1.3_psm_bicubic", [15.171297073364258, 18.88933563232422, 19.260204315185547]),
                ("speed_chroma_v_ps_1.3_psm_bicubic", [19.411293029785156, 14.573933601379395, 17.828964233398438]),
                ("speed_chroma_uv_ps_1.3_psm_bicubic", [17.29129409790039, 16.73163414001465, 18.544584274291992]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.8",
            &[
                ("speed_chroma_u_ps_0.8", [7.147597312927246, 9.071478843688965, 7.851896286010742]),
                ("speed_chroma_v_ps_0.8", [5.332176208496094, 4.924671649932861, 5.002601623535156]),
                ("speed_chroma_uv_ps_0.8", [6.23988676071167, 6.998075485229492, 6.427248954772949]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_kernelscale=0.5:speed_sigma_nn=1.5:speed_nn_floor=0.5",
            &[
                ("speed_chroma_u_ks_0.5_nnf_0.5_snn_1.5", [20.417970657348633, 18.56672477722168, 20.7810001373291]),
                ("speed_chroma_v_ks_0.5_nnf_0.5_snn_1.5", [16.774795532226562, 28.46953773498535, 17.768404006958008]),
                ("speed_chroma_uv_ks_0.5_nnf_0.5_snn_1.5", [18.59638214111328, 23.518131256103516, 19.274702072143555]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_max_val=11.2",
            &[
                ("speed_chroma_u_mxv_11.2", [10.662699699401855, 7.840482234954834, 11.2]),
                ("speed_chroma_v_mxv_11.2", [11.2, 11.2, 11.2]),
                ("speed_chroma_uv_mxv_11.2", [11.165634155273438, 11.2, 11.2]),
            ],
        ),
        (
            "life_320x240_420p8",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [0.0, 0.0, 0.0]),
                ("speed_chroma_v", [0.0, 0.0, 0.0]),
                ("speed_chroma_uv", [0.0, 0.0, 0.0]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_temporal",
            "",
            &[
                ("speed_temporal", [0.0, 6.7393388748168945, 8.764799118041992]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_temporal",
            "speed_use_ref_diff=true",
            &[
                ("speed_temporal_urd", [0.0, 2.3083043098449707, 2.606563091278076]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_temporal",
            "speed_prescale=0.5:speed_prescale_method=bicubic:speed_kernelscale=1.5",
            &[
                ("speed_temporal_ks_1.5_ps_0.5_psm_bicubic", [0.0, 4.715276718139648, 3.8717546463012695]),
            ],
        ),
        (
            "life_320x240_420p8",
            "speed_temporal",
            "speed_use_ref_diff=true",
            &[
                ("speed_temporal_urd", [0.0, 0.0, 0.0]),
            ],
        ),
        (
            "natural_320x180_420p12",
            "speed_temporal",
            "speed_weight_var_mode=2",
            &[
                ("speed_temporal", [0.0, 2.1633830070495605, 1.7499322891235352]),
            ],
        ),
    ];

    #[test]
    fn options_formats_and_depths_match_upstream_bit_for_bit() {
        type Clip = (Vec<Picture>, Vec<Picture>);
        let mut last: Option<(&str, Clip)> = None;
        for &(clip, fex, opts, want) in UPSTREAM_CASES {
            if last.as_ref().map(|l| l.0) != Some(clip) {
                last = Some((clip, load_parity_clip(clip)));
            }
            let (refs, dists) = &last.as_ref().unwrap().1;
            let mut d = Dict::new();
            for kv in opts.split(':').filter(|s| !s.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap();
                d.set(k, v);
            }
            let x = create(fex, &d).unwrap();
            let what = format!("{clip} {fex}={opts}");
            for (i, (r, dp)) in refs.iter().zip(dists).take(3).enumerate() {
                let input = FrameInput::pair(i, r, dp);
                let mut out = Scores::new();
                x.extract(&input, &mut out).unwrap();
                assert_eq!(out.len(), want.len(), "{what}");
                for ((name, v), (wname, wv)) in out.iter().zip(want) {
                    assert_eq!(alias(name), *wname, "{what}");
                    assert_eq!(*v, wv[i], "{what} frame {i} {wname}");
                }
            }
        }
    }

    #[test]
    fn entropy_constant_is_the_rounded_log() {
        assert_eq!(LOG2_2PIE, (2.0 * PI * std::f64::consts::E).log2());
    }

    #[test]
    fn stored_names_follow_options() {
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        assert_eq!(
            x.feature_name(CHROMA_FEATURES[2]),
            "Speed_chroma_feature_speed_chroma_uv_score"
        );
        let x = SpeedChroma::new(&model_opts(true)).unwrap();
        assert_eq!(
            x.feature_name(CHROMA_FEATURES[0]),
            "speed_chroma_u_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5"
        );
        let mut o = Dict::new();
        o.set("speed_use_ref_diff", "true");
        o.set("speed_kernelscale", "2");
        let t = SpeedTemporal::new(&o).unwrap();
        assert_eq!(
            t.feature_name(TEMPORAL_FEATURES[0]),
            "speed_temporal_ks_2_urd"
        );
    }

    #[test]
    fn rejects_bad_options_and_inputs() {
        for (k, v) in [
            ("speed_kernelscale", "1.3"),
            ("speed_prescale_method", "area"),
            ("speed_weight_var_mode", "7"),
            ("speed_sigma_nn", "0.05"),
        ] {
            let mut o = Dict::new();
            o.set(k, v);
            assert!(SpeedChroma::new(&o).is_err(), "{k}={v}");
        }
        use std::sync::Arc;
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        let small = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 150, 150).unwrap());
        let gray = Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 320, 320).unwrap());
        for p in [&small, &gray] {
            let input = FrameInput::pair(0, p, p);
            assert!(x.extract(&input, &mut Scores::new()).is_err());
        }
    }

    /// A copy of `src` with chroma plane `c` (if any) filled with `fill`.
    fn with_flat_plane(src: &PictureData, c: Option<usize>, fill: u8) -> Picture {
        let mut p = PictureData::new(src.pix_fmt, src.bpc, src.w[0], src.h[0]).unwrap();
        for i in 0..3 {
            p.plane_u8_mut(i).copy_from_slice(src.plane_u8(i));
        }
        if let Some(c) = c {
            p.plane_u8_mut(c).fill(fill);
        }
        std::sync::Arc::new(p)
    }

    #[test]
    fn singular_channels_follow_upstream() {
        // Upstream (scalar v3.2.0) on the first frame of natural_576x324_420p8: a flat U plane
        // in the reference only makes U score 0 and uv take V's score; with U flat in both and V
        // flat in the distorted picture, every score is 0.
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        let score = |r: &Picture, d: &Picture| {
            let input = FrameInput::pair(0, r, d);
            let mut out = Scores::new();
            x.extract(&input, &mut out).unwrap();
            out.iter().map(|s| s.1).collect::<Vec<_>>()
        };
        let flat_u = with_flat_plane(&refs[0], Some(1), 128);
        assert_eq!(
            score(&flat_u, &dists[0]),
            [0.0, 11.66856861114502, 11.66856861114502]
        );
        let mut d = with_flat_plane(&dists[0], Some(1), 90);
        d = with_flat_plane(&d, Some(2), 100);
        assert_eq!(score(&flat_u, &d), [0.0; 3]);
    }

    #[test]
    fn temporal_identical_frames_score_zero() {
        let t = SpeedTemporal::new(&Dict::new()).unwrap();
        assert_eq!(t.flags(), ExtractorFlags::TEMPORAL);
        let scores = run(&t, "life_320x240_420p8");
        assert_eq!(
            scores[0],
            vec![("Speed_temporal_feature_speed_temporal_score".into(), 0.0)]
        );
        // ref == dist: the two difference planes are equal, so every block difference is 0.
        for s in &scores[1..] {
            assert_eq!(s[0].1, 0.0);
        }
    }
}
