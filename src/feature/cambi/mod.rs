//! cambi: Netflix's contrast-aware multi-scale banding index (no-reference, luma only).
//!
//! Per frame, the distorted luma is brought to the encoding resolution at 10 bits (nearest
//! neighbour decimation, anti-dithering below 10-bit encodes), a mask of flat areas is taken
//! from 7x7 counts of zero-derivative pixels, and then over five dyadic scales: a 3x3 mode
//! filter, a per-pixel "c-value" from windowed histograms of nearby luma levels, and top-k
//! spatial pooling. The scale scores are weighted 16:8:4:2:1 and normalised by the window area.
//!
//! Everything up to the c-values is integer; the c-values are `f32` products with upstream's
//! reciprocal table, and pooling sums them in `f64` in the order left by upstream's
//! quickselect, which is therefore reproduced exactly.

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::feature::alias::alias;
pub mod gpu;
use crate::feature::options::{fmt_g, normalize_value};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::GpuSet;
use crate::picture::{Picture, PictureData, PlaneRef};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["Cambi_feature_cambi_score"];

/// Extra scores written in full-reference mode (never renamed by options).
const SOURCE_NAME: &str = "cambi_source";
const FULL_REF_NAME: &str = "cambi_full_reference";

const DEFAULT_TOPK: f64 = 0.6;
const DEFAULT_EOTF: &str = "bt1886";

pub(super) const NUM_SCALES: usize = 5;
const SCALE_WEIGHTS: [u32; NUM_SCALES] = [16, 8, 4, 2, 1];
/// Supra-threshold contrast response, indexed by luma difference − 1.
const CONTRAST_WEIGHTS: [i32; 32] = [
    1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
];

/// Side of the square over which zero-derivative pixels are counted for the mask.
const MASK_FILTER_SIZE: usize = 7;
/// Inputs with both sides below this are rejected.
const MIN_WIDTH_HEIGHT: u32 = 216;
/// Entries of the reciprocal table: covers counts up to a 65x65 window.
const RECIPROCAL_LUT_SIZE: usize = 4226;
/// Internal bit depth and its limited ("TV") luma range.
const LUMA_FOOT: i32 = 64;
const LUMA_HEAD: i32 = 940;

static OPTIONS: [OptSpec; 13] = [
    OptSpec::double("cambi_max_val", Some("cmxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::int("enc_width", Some("encw"), 0, 180.0, 7680.0, true),
    OptSpec::int("enc_height", Some("ench"), 0, 150.0, 7680.0, true),
    OptSpec::int("enc_bitdepth", Some("encbd"), 0, 6.0, 16.0, true),
    OptSpec::int("src_width", Some("srcw"), 0, 320.0, 7680.0, true),
    OptSpec::int("src_height", Some("srch"), 0, 200.0, 4320.0, true),
    OptSpec::int("window_size", Some("ws"), 65, 15.0, 127.0, true),
    OptSpec::double("topk", None, DEFAULT_TOPK, 0.0001, 1.0, true),
    OptSpec::double("cambi_topk", Some("ctpk"), DEFAULT_TOPK, 0.0001, 1.0, true),
    OptSpec::double("tvi_threshold", Some("tvit"), 0.019, 0.0001, 1.0, true),
    OptSpec::double(
        "cambi_vis_lum_threshold",
        Some("vlt"),
        0.0,
        0.0,
        300.0,
        true,
    ),
    OptSpec::int("max_log_contrast", Some("mlc"), 2, 0.0, 5.0, true),
    OptSpec::int("cambi_high_res_speedup", Some("hrs"), 0, 0.0, 2160.0, true),
];

/// String options that are feature parameters: (name, alias for stored names).
const STRING_OPTIONS: [(&str, Option<&str>); 2] = [("eotf", None), ("cambi_eotf", Some("ceot"))];

/// C's `MIN(a, b)`.
#[inline]
fn c_min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// C's `MAX(a, b)`.
#[inline]
fn c_max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// Upstream's reciprocal table: `1/i` printed with 9 significant digits and read back as an
/// `f32` (42 entries differ from a correctly rounded `1.0f32 / i`, so it is rebuilt this way).
pub(super) fn reciprocal_lut() -> &'static [f32] {
    static LUT: OnceLock<Vec<f32>> = OnceLock::new();
    LUT.get_or_init(|| {
        (0..RECIPROCAL_LUT_SIZE)
            .map(|i| {
                if i == 0 {
                    0.0
                } else {
                    format!("{:.8e}", 1.0 / i as f64)
                        .parse::<f32>()
                        .unwrap_or(0.0)
                }
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Luminance model (visibility thresholds)
// ---------------------------------------------------------------------------------------------

/// Electro-optical transfer function used for the visibility thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eotf {
    Bt1886,
    Pq,
}

impl Eotf {
    fn from_name(s: &str) -> Option<Self> {
        match s {
            "bt1886" => Some(Eotf::Bt1886),
            "pq" => Some(Eotf::Pq),
            _ => None,
        }
    }

    /// Display luminance (cd/m²) of normalised signal `v`.
    fn apply(self, v: f64) -> f64 {
        match self {
            Eotf::Bt1886 => {
                let (gamma, lw, lb) = (2.4f64, 300.0f64, 0.01f64);
                let lw_root = lw.powf(1.0 / gamma);
                let lb_root = lb.powf(1.0 / gamma);
                let a = (lw_root - lb_root).powf(gamma);
                let b = lb_root / (lw_root - lb_root);
                a * c_max(v + b, 0.0).powf(gamma)
            }
            Eotf::Pq => {
                let m1 = 0.1593017578125f64;
                let m2 = 78.84375f64;
                let c1 = 0.8359375f64;
                let c2 = 18.8515625f64;
                let c3 = 18.6875f64;
                let num = v.powf(1.0 / m2) - c1;
                let den = c2 - c3 * v.powf(1.0 / m2);
                10000.0 * (c_max(num, 0.0) / den).powf(1.0 / m1)
            }
        }
    }

    /// Luminance of 10-bit limited-range code value `sample`.
    fn luminance(self, sample: i32) -> f64 {
        let clipped = sample.clamp(LUMA_FOOT, LUMA_HEAD);
        let normalized = f64::from(clipped - LUMA_FOOT) / f64::from(LUMA_HEAD - LUMA_FOOT);
        self.apply(normalized)
    }
}

/// Whether a step of `diff` code values above `sample` is visible.
fn tvi_visible(sample: i32, diff: i32, threshold: f64, eotf: Eotf) -> bool {
    let base = eotf.luminance(sample);
    let stepped = eotf.luminance(sample + diff);
    stepped - base > threshold * base
}

enum Bisect {
    TooSmall,
    Correct,
    TooBig,
}

/// `sample` is the answer when the step is visible there but no longer one code value up.
fn tvi_probe(sample: i32, diff: i32, threshold: f64, eotf: Eotf) -> Bisect {
    if !tvi_visible(sample, diff, threshold, eotf) {
        Bisect::TooBig
    } else if tvi_visible(sample + 1, diff, threshold, eotf) {
        Bisect::TooSmall
    } else {
        Bisect::Correct
    }
}

/// Largest 10-bit code value at which a step of `diff` is still visible (0 when it never is,
/// 1023 when it always is), found by bisection over the limited range.
fn tvi_for_diff(diff: i32, threshold: f64, eotf: Eotf) -> Result<i32> {
    let mut foot = LUMA_FOOT;
    let mut head = LUMA_HEAD - diff - 1;
    match tvi_probe(foot, diff, threshold, eotf) {
        Bisect::TooBig => return Ok(0),
        Bisect::Correct => return Ok(foot),
        Bisect::TooSmall => {}
    }
    match tvi_probe(head, diff, threshold, eotf) {
        Bisect::TooSmall => return Ok(1023),
        Bisect::Correct => return Ok(head),
        Bisect::TooBig => {}
    }
    // The interval halves each step; a non-monotonic condition could cycle, so cap it.
    for _ in 0..64 {
        let mid = foot + (head - foot) / 2;
        match tvi_probe(mid, diff, threshold, eotf) {
            Bisect::TooBig => head = mid,
            Bisect::TooSmall => foot = mid,
            Bisect::Correct => return Ok(mid),
        }
    }
    Err(Error::inval(
        "cambi: visibility threshold bisection did not converge",
    ))
}

/// Smallest code value whose luminance reaches `threshold`, or 0 when the range foot does.
fn vlt_luma(threshold: f64, eotf: Eotf) -> Result<u16> {
    let mut sample = LUMA_FOOT as u16;
    while eotf.luminance(i32::from(sample)) < threshold {
        sample = sample
            .checked_add(1)
            .ok_or_else(|| Error::inval("cambi: cambi_vis_lum_threshold is never reached"))?;
    }
    Ok(if i32::from(sample) == LUMA_FOOT {
        0
    } else {
        sample
    })
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Everything fixed by the options and the first picture (upstream's `init`).
#[derive(Debug)]
pub(super) struct Setup {
    pub(super) enc_w: usize,
    pub(super) enc_h: usize,
    pub(super) src_w: usize,
    pub(super) src_h: usize,
    pub(super) enc_bitdepth: u32,
    pub(super) window: usize,
    pub(super) src_window: usize,
    pub(super) speedup: bool,
    pub(super) topk: f64,
    /// Contrast weight per luma difference 1..=num_diffs.
    pub(super) diff_weights: Vec<i32>,
    /// Per difference: largest visible code value, plus `num_diffs`.
    pub(super) tvi: Vec<u16>,
    pub(super) vlt_luma: u16,
    /// Histograms only track raw values in `band_base .. band_base + band_size`: other values
    /// can never contribute to a non-zero c-value.
    pub(super) band_base: u16,
    pub(super) band_size: u16,
    /// Working buffer size (the larger of the two resolutions in full-reference mode).
    pub(super) alloc_w: usize,
    pub(super) alloc_h: usize,
}

impl Setup {
    /// Processing size and window of the distorted picture, or of the source (full-reference
    /// mode).
    pub(super) fn geometry(&self, is_src: bool) -> (usize, usize, usize) {
        if is_src {
            (self.src_w, self.src_h, self.src_window)
        } else {
            (self.enc_w, self.enc_h, self.window)
        }
    }
}

/// Upstream's window scaling: 65 is about one degree at 4K; scale by (w + h) / 6000.
fn adjust_window(window: u32, w: u32, h: u32, speedup: bool) -> usize {
    let mut ws = ((window.wrapping_mul(w + h) / 375) >> 4) as u16;
    if speedup {
        ws = (ws + 1) >> 1;
    }
    usize::from(ws | 1)
}

/// The cambi extractor.
pub struct Cambi {
    opts: Opts,
    /// Non-default feature parameters as (option name, key, value text), sorted by name.
    name_params: Vec<(&'static str, &'static str, String)>,
    score_name: String,
    full_ref: bool,
    max_val: f64,
    eotf: String,
    cambi_eotf: String,
    setup: OnceLock<std::result::Result<Setup, String>>,
    gpu: Option<GpuSet>,
}

impl Cambi {
    /// Creates the extractor from its options. Heatmap dumping is not supported.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = Opts::parse(&OPTIONS, dict)?;
        let full_ref = match dict.get("full_ref") {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => return Err(Error::inval(format!("bad value {v:?} for option full_ref"))),
        };
        if dict.get("heatmaps_path").is_some() {
            return Err(Error::NotSupported(
                "cambi: heatmaps_path (heatmap dumping) is not supported".into(),
            ));
        }
        let eotf = dict.get("eotf").unwrap_or(DEFAULT_EOTF).to_string();
        let cambi_eotf = dict.get("cambi_eotf").unwrap_or(DEFAULT_EOTF).to_string();

        let mut name_params = Vec::new();
        for spec in OPTIONS.iter().filter(|s| s.feature_param) {
            let key = spec.alias.unwrap_or(spec.name);
            let text = match spec.default {
                crate::feature::OptValue::Int(d) => {
                    let v = opts.int(spec.name);
                    (v != d).then(|| normalize_value(&v.to_string()))
                }
                crate::feature::OptValue::Double(d) => {
                    let v = opts.double(spec.name);
                    (v != d).then(|| normalize_value(&fmt_g(v)))
                }
                crate::feature::OptValue::Bool(_) => None,
            };
            if let Some(t) = text {
                name_params.push((spec.name, key, t));
            }
        }
        for (name, (value, (_, key))) in [
            ("eotf", (&eotf, STRING_OPTIONS[0])),
            ("cambi_eotf", (&cambi_eotf, STRING_OPTIONS[1])),
        ] {
            if value != DEFAULT_EOTF {
                name_params.push((name, key.unwrap_or(name), value.clone()));
            }
        }
        name_params.sort_by(|a, b| a.0.cmp(b.0));

        let mut c = Cambi {
            max_val: opts.double("cambi_max_val"),
            opts,
            name_params,
            score_name: String::new(),
            full_ref,
            eotf,
            cambi_eotf,
            setup: OnceLock::new(),
            gpu: None,
        };
        c.score_name = c.stored_name(PROVIDED_FEATURES[0]);
        Ok(c)
    }

    /// Runs the per-pixel stages on `gpu` when given (pooling stays on the host).
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }

    /// Option-dependent stored name, as libvmaf builds it (string options included).
    fn stored_name(&self, full_name: &str) -> String {
        if self.name_params.is_empty() {
            return full_name.to_string();
        }
        let mut out = alias(full_name).to_string();
        for (_, key, val) in &self.name_params {
            out.push_str(&format!("_{key}_{val}"));
        }
        out
    }

    /// Upstream's `init`, run on the first picture's luma geometry and bit depth.
    fn build_setup(&self, w: usize, h: usize, bpc: u32) -> Result<Setup> {
        let o = &self.opts;
        let (w32, h32) = (w as u32, h as u32);
        let mut enc_bitdepth = o.int("enc_bitdepth") as u32;
        if enc_bitdepth == 0 {
            enc_bitdepth = bpc;
        }
        let (mut enc_w, mut enc_h) = (o.int("enc_width") as u32, o.int("enc_height") as u32);
        if enc_w == 0 || enc_h == 0 {
            (enc_w, enc_h) = (w32, h32);
        }
        let (mut src_w, mut src_h) = (o.int("src_width") as u32, o.int("src_height") as u32);
        if src_w == 0 || src_h == 0 {
            (src_w, src_h) = (w32, h32);
        }
        // A downscaled encode is measured at its own size, never upscaled back.
        if enc_h > h32 || enc_w > w32 {
            (enc_w, enc_h) = (w32, h32);
        }
        if enc_w < MIN_WIDTH_HEIGHT && enc_h < MIN_WIDTH_HEIGHT {
            return Err(Error::inval("cambi: encoding resolution too small"));
        }
        if src_w < MIN_WIDTH_HEIGHT && src_h < MIN_WIDTH_HEIGHT {
            return Err(Error::inval("cambi: source resolution too small"));
        }
        if (src_w > enc_w && src_h < enc_h) || (src_w < enc_w && src_h > enc_h) {
            return Err(Error::inval(
                "cambi: source and encoding aspect ratios are inconsistent",
            ));
        }

        let enc_pix = u64::from(enc_w) * u64::from(enc_h);
        let speedup = match o.int("cambi_high_res_speedup") {
            1080 => enc_pix >= 1920 * 1080,
            1440 => enc_pix >= 2560 * 1440,
            2160 => enc_pix >= 3840 * 2160,
            _ => false,
        };

        let alloc_w = if self.full_ref {
            src_w.max(enc_w)
        } else {
            enc_w
        } as usize;
        let alloc_h = if self.full_ref {
            src_h.max(enc_h)
        } else {
            enc_h
        } as usize;

        let num_diffs = 1usize << o.int("max_log_contrast");
        let diff_weights = CONTRAST_WEIGHTS[..num_diffs].to_vec();

        // A non-default cambi_eotf wins over eotf.
        let eotf_name = if self.cambi_eotf != DEFAULT_EOTF {
            &self.cambi_eotf
        } else {
            &self.eotf
        };
        let eotf = Eotf::from_name(eotf_name)
            .ok_or_else(|| Error::inval(format!("cambi: unknown EOTF {eotf_name:?}")))?;

        let tvi_threshold = o.double("tvi_threshold");
        let tvi = (0..num_diffs)
            .map(|d| {
                let t = tvi_for_diff(d as i32 + 1, tvi_threshold, eotf)?;
                Ok((t as u16).wrapping_add(num_diffs as u16))
            })
            .collect::<Result<Vec<u16>>>()?;
        let vlt_luma = vlt_luma(o.double("cambi_vis_lum_threshold"), eotf)?;

        let window_opt = o.int("window_size") as u32;
        let window = adjust_window(window_opt, enc_w, enc_h, speedup);
        let src_window = adjust_window(window_opt, src_w, src_h, speedup);
        let max_window = window.max(src_window);
        if max_window * max_window >= RECIPROCAL_LUT_SIZE {
            return Err(Error::inval(format!(
                "cambi: window_size {max_window} too large for reciprocal LUT"
            )));
        }

        let lo = i32::from(vlt_luma) - 3 * num_diffs as i32 + 1;
        let band_base = if lo > 0 { lo as u16 } else { 0 };
        let band_size = tvi[num_diffs - 1].wrapping_add(1).wrapping_sub(band_base);

        // Upstream reads topk only when it was changed, else cambi_topk.
        let topk = if o.double("topk") != DEFAULT_TOPK {
            o.double("topk")
        } else {
            o.double("cambi_topk")
        };

        Ok(Setup {
            enc_w: enc_w as usize,
            enc_h: enc_h as usize,
            src_w: src_w as usize,
            src_h: src_h as usize,
            enc_bitdepth,
            window,
            src_window,
            speedup,
            topk,
            diff_weights,
            tvi,
            vlt_luma,
            band_base,
            band_size,
            alloc_w,
            alloc_h,
        })
    }

    pub(super) fn setup_for(&self, pic: &PictureData) -> Result<&Setup> {
        self.setup
            .get_or_init(|| {
                self.build_setup(pic.w[0], pic.h[0], pic.bpc)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| Error::inval(e.clone()))
    }
}

// ---------------------------------------------------------------------------------------------
// Preprocessing: luma to 10 bits at the processing resolution
// ---------------------------------------------------------------------------------------------

/// Rejects samples above the picture's bit depth (8- and 16-bit pictures cannot have any).
pub(super) fn validate(pic: &PictureData) -> Result<()> {
    if pic.bpc == 8 || pic.bpc == 16 {
        return Ok(());
    }
    let max = (1u32 << pic.bpc) - 1;
    let (w, h, stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let bad = match pic.plane(0) {
        PlaneRef::U8(p) => (0..h).any(|y| {
            p[y * stride..y * stride + w]
                .iter()
                .any(|&v| u32::from(v) > max)
        }),
        PlaneRef::U16(p) => (0..h).any(|y| {
            p[y * stride..y * stride + w]
                .iter()
                .any(|&v| u32::from(v) > max)
        }),
    };
    if bad {
        return Err(Error::inval(format!(
            "cambi: input has values above the {}-bit maximum {max}",
            pic.bpc
        )));
    }
    Ok(())
}

/// Source positions of upstream's nearest-neighbour decimation along one axis: an `f32`
/// position starting half a step in, advanced by repeated `f32` addition, rounded by
/// truncating `pos + 0.5` in double precision.
pub(super) fn decimation_taps(in_len: usize, out_len: usize) -> Vec<usize> {
    let ratio = in_len as f32 / out_len as f32;
    let mut pos = (f64::from(ratio / 2.0) - 0.5) as f32;
    (0..out_len)
        .map(|_| {
            let src = (f64::from(pos) + 0.5) as i32;
            pos += ratio;
            (src.max(0) as usize).min(in_len - 1)
        })
        .collect()
}

/// Writes the luma of `pic` as 10-bit samples at `out_w`x`out_h` into `dst` (pitch `stride`),
/// then applies the anti-dithering 2x2 average for encodes below 10 bits.
fn preprocess(
    pic: &PictureData,
    dst: &mut [u16],
    stride: usize,
    out_w: usize,
    out_h: usize,
    enc_bitdepth: u32,
) -> Result<()> {
    validate(pic)?;
    let (in_w, in_h, in_stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let bpc = pic.bpc;
    // Rescale a sample to 10 bits: shift up, or round-half-up shift down.
    let to10 = |v: u16| -> u16 {
        if bpc >= 10 {
            let shift = bpc - 10;
            let round = if shift == 0 { 0 } else { 1u32 << (shift - 1) };
            ((u32::from(v) + round) >> shift) as u16
        } else {
            v << (10 - bpc)
        }
    };
    let same = in_w == out_w && in_h == out_h;
    let (xs, ys) = if same {
        ((0..out_w).collect(), (0..out_h).collect())
    } else {
        (decimation_taps(in_w, out_w), decimation_taps(in_h, out_h))
    };
    for (i, &sy) in ys.iter().enumerate() {
        let out = &mut dst[i * stride..i * stride + out_w];
        match pic.plane(0) {
            PlaneRef::U8(p) => {
                let row = &p[sy * in_stride..sy * in_stride + in_w];
                for (o, &sx) in out.iter_mut().zip(&xs) {
                    *o = to10(u16::from(row[sx]));
                }
            }
            PlaneRef::U16(p) => {
                let row = &p[sy * in_stride..sy * in_stride + in_w];
                for (o, &sx) in out.iter_mut().zip(&xs) {
                    *o = to10(row[sx]);
                }
            }
        }
    }
    if enc_bitdepth < 10 {
        anti_dither(dst, stride, out_w, out_h);
    }
    Ok(())
}

/// In-place 2x2 box average (1x2 / 2x1 on the last column / row, last pixel untouched). Each
/// output only reads pixels to its right and below, which are not yet overwritten.
fn anti_dither(d: &mut [u16], stride: usize, w: usize, h: usize) {
    for i in 0..h - 1 {
        let (top, bottom) = d[i * stride..].split_at_mut(stride);
        for j in 0..w - 1 {
            let s = u32::from(top[j])
                + u32::from(top[j + 1])
                + u32::from(bottom[j])
                + u32::from(bottom[j + 1]);
            top[j] = (s >> 2) as u16;
        }
        top[w - 1] = ((u32::from(top[w - 1]) + u32::from(bottom[w - 1])) >> 1) as u16;
    }
    let last = &mut d[(h - 1) * stride..(h - 1) * stride + w];
    for j in 0..w - 1 {
        last[j] = ((u32::from(last[j]) + u32::from(last[j + 1])) >> 1) as u16;
    }
}

// ---------------------------------------------------------------------------------------------
// Banding detection
// ---------------------------------------------------------------------------------------------

fn ceil_log2(n: u32) -> i32 {
    if n == 0 {
        0
    } else {
        (32 - (n - 1).leading_zeros()) as i32
    }
}

/// Count threshold of the flat-area mask, growing slowly with the picture area.
pub(super) fn mask_index(w: usize, h: usize) -> u32 {
    let blocks = ((w >> 6) as u32).wrapping_mul((h >> 6) as u32);
    let f = MASK_FILTER_SIZE as i32;
    u32::from(((f * f + 3 * (ceil_log2(blocks) - 11) - 1) >> 1) as u16)
}

/// Flat-area mask: a pixel is set when more than `mask_index` pixels of the 7x7 square around
/// it (outside counts as zero) equal both their right and lower neighbours (picture edges
/// count as equal).
fn spatial_mask(img: &[u16], mask: &mut [u16], stride: usize, w: usize, h: usize) {
    let pad = MASK_FILTER_SIZE / 2;
    let threshold = mask_index(w, h);
    let flat_row = |r: usize, out: &mut [u32]| {
        let row = &img[r * stride..r * stride + w];
        let below = (r + 1 < h).then(|| &img[(r + 1) * stride..(r + 1) * stride + w]);
        for c in 0..w {
            let right_eq = c + 1 == w || row[c] == row[c + 1];
            let down_eq = below.is_none_or(|b| row[c] == b[c]);
            out[c] = u32::from(right_eq && down_eq);
        }
    };
    // Vertical window sums per column, slid down the picture.
    let mut col_sum = vec![0u32; w];
    let mut flat = vec![0u32; w];
    let mut prefix = vec![0u32; w + 1];
    for r in 0..h.min(pad + 1) {
        flat_row(r, &mut flat);
        col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s += f);
    }
    for r in 0..h {
        if r > 0 {
            if r + pad < h {
                flat_row(r + pad, &mut flat);
                col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s += f);
            }
            if r > pad {
                flat_row(r - pad - 1, &mut flat);
                col_sum.iter_mut().zip(&flat).for_each(|(s, &f)| *s -= f);
            }
        }
        for c in 0..w {
            prefix[c + 1] = prefix[c] + col_sum[c];
        }
        let out = &mut mask[r * stride..r * stride + w];
        for (c, m) in out.iter_mut().enumerate() {
            let sum = prefix[(c + pad + 1).min(w)] - prefix[c.saturating_sub(pad)];
            *m = u16::from(sum > threshold);
        }
    }
}

/// In-place 2:1 subsampling in both directions (keeps even rows and columns).
fn decimate(d: &mut [u16], stride: usize, w: usize, h: usize) {
    for i in 0..h {
        for j in 0..w {
            d[i * stride + j] = d[2 * i * stride + 2 * j];
        }
    }
}

#[inline]
fn mode3(a: u16, b: u16, c: u16) -> u16 {
    if a == b || a == c {
        a
    } else if b == c {
        b
    } else {
        a.min(b).min(c)
    }
}

/// Separable 3x3 mode filter in place: a horizontal pass (edge columns kept), then a vertical
/// pass over the horizontal results for the interior rows; the first and last rows keep their
/// unfiltered values. `ring` holds three filtered rows.
fn filter_mode(d: &mut [u16], stride: usize, w: usize, h: usize, ring: &mut [u16]) {
    let mut cur = 0;
    for i in 0..h {
        {
            let row = &d[i * stride..i * stride + w];
            let out = &mut ring[cur * w..cur * w + w];
            out[0] = row[0];
            for j in 1..w.saturating_sub(1) {
                out[j] = mode3(row[j - 1], row[j], row[j + 1]);
            }
            out[w - 1] = row[w - 1];
        }
        if i > 1 {
            let dst = &mut d[(i - 1) * stride..(i - 1) * stride + w];
            for (j, o) in dst.iter_mut().enumerate() {
                *o = mode3(ring[j], ring[w + j], ring[2 * w + j]);
            }
        }
        cur = if cur == 2 { 0 } else { cur + 1 };
    }
}

/// Per-scale buffers and constants for the c-value pass.
struct CValueCtx<'a> {
    setup: &'a Setup,
    lut: &'a [f32],
    stride: usize,
    w: usize,
    h: usize,
    pad: usize,
}

impl CValueCtx<'_> {
    /// Histogram row of a masked in-band pixel, or `None`.
    #[inline]
    fn band_row(&self, img: &[u16], mask: &[u16], r: usize, j: usize) -> Option<usize> {
        let idx = r * self.stride + j;
        if mask[idx] == 0 {
            return None;
        }
        let k = img[idx].wrapping_sub(self.setup.band_base);
        (k < self.setup.band_size).then_some(usize::from(k))
    }

    #[inline]
    fn cols(&self, j: usize) -> std::ops::Range<usize> {
        j.saturating_sub(self.pad)..(j + self.pad + 1).min(self.w)
    }

    /// Adds (or removes) every pixel of row `r` to the histograms of the columns within `pad`.
    fn update_row(&self, hist: &mut [u16], img: &[u16], mask: &[u16], r: usize, add: bool) {
        let w = self.w;
        for j in 0..w {
            if let Some(k) = self.band_row(img, mask, r, j) {
                let cells = &mut hist[k * w..k * w + w][self.cols(j)];
                if add {
                    cells.iter_mut().for_each(|c| *c = c.wrapping_add(1));
                } else {
                    cells.iter_mut().for_each(|c| *c = c.wrapping_sub(1));
                }
            }
        }
    }

    /// Moves the window down one row: removes row `out_r`, adds row `in_r`; equal in-band
    /// values cancel and are skipped.
    fn slide_row(&self, hist: &mut [u16], img: &[u16], mask: &[u16], out_r: usize, in_r: usize) {
        let w = self.w;
        for j in 0..w {
            let sub = self.band_row(img, mask, out_r, j);
            let add = self.band_row(img, mask, in_r, j);
            if sub.is_some() && sub == add {
                continue;
            }
            let cols = self.cols(j);
            if let Some(k) = sub {
                hist[k * w..k * w + w][cols.clone()]
                    .iter_mut()
                    .for_each(|c| *c = c.wrapping_sub(1));
            }
            if let Some(k) = add {
                hist[k * w..k * w + w][cols]
                    .iter_mut()
                    .for_each(|c| *c = c.wrapping_add(1));
            }
        }
    }

    /// c-values of row `r` from the current histograms (unmasked pixels stay 0).
    fn c_values_row(&self, hist: &[u16], img: &[u16], mask: &[u16], r: usize, cv: &mut [f32]) {
        let s = self.setup;
        let w = self.w;
        let nd = s.tvi.len();
        let vlt = i32::from(s.vlt_luma);
        let band = i32::from(s.band_size);
        let cell = |k: i32, col: usize| -> u16 {
            if (0..band).contains(&k) {
                hist[k as usize * w + col]
            } else {
                0
            }
        };
        for col in 0..w {
            let idx = r * self.stride + col;
            if mask[idx] == 0 {
                continue;
            }
            // Upstream works in "adjusted" values (raw + num_diffs) for the threshold tests.
            let value = img[idx].wrapping_add(nd as u16);
            let compact = i32::from(img[idx]) - i32::from(s.band_base);
            if !(0..band).contains(&compact) {
                cv[r * w + col] = 0.0;
                continue;
            }
            let p0 = hist[compact as usize * w + col];
            let mut c_value = 0.0f32;
            for d in 0..nd {
                let step = d as i32 + 1;
                if value <= s.tvi[d] && i32::from(value) + step > vlt {
                    let p1 = cell(compact + step, col);
                    let p2 = cell(compact - step, col);
                    let p = if p1 > p2 { p1 } else { p2 };
                    let num = s.diff_weights[d] * i32::from(p0) * i32::from(p);
                    let val = num as f32 * self.lut[usize::from(p) + usize::from(p0)];
                    if val > c_value {
                        c_value = val;
                    }
                }
            }
            cv[r * w + col] = c_value;
        }
    }

    /// All c-values of the scale, in upstream's row order: the window starts with rows
    /// `0..pad`, grows to full height, slides, then shrinks at the bottom.
    fn c_values(&self, hist: &mut [u16], img: &[u16], mask: &[u16], cv: &mut [f32]) {
        let (w, h, pad) = (self.w, self.h, self.pad);
        cv[..w * h].fill(0.0);
        hist[..w * usize::from(self.setup.band_size)].fill(0);
        // Rows past the bottom only exist for windows taller than the picture; upstream then
        // reads stale buffer rows, here they are skipped.
        for r in 0..pad.min(h) {
            self.update_row(hist, img, mask, r, true);
        }
        for i in 0..=pad {
            if i + pad < h {
                self.update_row(hist, img, mask, i + pad, true);
            }
            if i < h {
                self.c_values_row(hist, img, mask, i, cv);
            }
        }
        for i in pad + 1..h.saturating_sub(pad) {
            self.slide_row(hist, img, mask, i - pad - 1, i + pad);
            self.c_values_row(hist, img, mask, i, cv);
        }
        for i in h.saturating_sub(pad)..h {
            if i > pad {
                self.update_row(hist, img, mask, i - pad - 1, false);
            }
            self.c_values_row(hist, img, mask, i, cv);
        }
    }
}

/// Upstream's quickselect (Hoare partitioning around `a[k]`): afterwards `a[..k]` holds the
/// `k` largest values, in the order the summation must follow.
fn quick_select(a: &mut [f32], k: usize) {
    let n = a.len();
    if n == k {
        return;
    }
    let k = k as isize;
    let (mut left, mut right) = (0isize, n as isize - 1);
    while left < right {
        let pivot = a[k as usize];
        let (mut i, mut j) = (left, right);
        loop {
            while a[i as usize] > pivot {
                i += 1;
            }
            while a[j as usize] < pivot {
                j -= 1;
            }
            if i <= j {
                a.swap(i as usize, j as usize);
                i += 1;
                j -= 1;
            }
            if i > j {
                break;
            }
        }
        if j < k {
            left = i;
        }
        if k < i {
            right = j;
        }
    }
}

/// Mean of the top `topk` fraction of the c-values (at least one).
pub(super) fn spatial_pooling(cv: &mut [f32], topk: f64) -> f64 {
    let n = cv.len() as i32;
    let k = ((topk * f64::from(n)) as i32).clamp(1, n);
    quick_select(cv, k as usize);
    let sum: f64 = cv[..k as usize]
        .iter()
        .fold(0.0, |acc, &v| acc + f64::from(v));
    sum / f64::from(k)
}

/// Scratch buffers for one picture (upstream keeps them in the extractor state).
struct Work {
    stride: usize,
    image: Vec<u16>,
    mask: Vec<u16>,
    c_values: Vec<f32>,
    hist: Vec<u16>,
    ring: Vec<u16>,
}

impl Work {
    fn new(s: &Setup) -> Result<Self> {
        let n = s.alloc_w * s.alloc_h;
        let what = "cambi: work buffers";
        Ok(Work {
            stride: s.alloc_w,
            image: crate::limits::try_filled(n, 0, what)?,
            mask: crate::limits::try_filled(n, 0, what)?,
            c_values: crate::limits::try_filled(n, 0.0, what)?,
            hist: vec![0; s.alloc_w * usize::from(s.band_size)],
            ring: vec![0; 3 * s.alloc_w],
        })
    }

    /// cambi score of `pic` at the encoding (or, for the source, the source) resolution.
    fn score(&mut self, s: &Setup, pic: &PictureData, is_src: bool) -> Result<f64> {
        self.score_with(s, pic, is_src, &mut |_, _| {})
    }

    /// [`Work::score`], showing each scale's c-value map to `peek` before it is pooled.
    fn score_with(
        &mut self,
        s: &Setup,
        pic: &PictureData,
        is_src: bool,
        peek: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<f64> {
        let (w, h, window) = s.geometry(is_src);
        let stride = self.stride;
        preprocess(pic, &mut self.image, stride, w, h, s.enc_bitdepth)?;
        spatial_mask(&self.image, &mut self.mask, stride, w, h);

        let lut = reciprocal_lut();
        let (mut sw, mut sh) = (w, h);
        let mut per_scale = [0.0f64; NUM_SCALES];
        for (scale, score) in per_scale.iter_mut().enumerate() {
            if scale > 0 || s.speedup {
                sw = (sw + 1) >> 1;
                sh = (sh + 1) >> 1;
                decimate(&mut self.image, stride, sw, sh);
                decimate(&mut self.mask, stride, sw, sh);
            }
            filter_mode(&mut self.image, stride, sw, sh, &mut self.ring);
            let ctx = CValueCtx {
                setup: s,
                lut,
                stride,
                w: sw,
                h: sh,
                pad: window >> 1,
            };
            ctx.c_values(&mut self.hist, &self.image, &self.mask, &mut self.c_values);
            peek(scale, &self.c_values[..sw * sh]);
            *score = spatial_pooling(&mut self.c_values[..sw * sh], s.topk);
        }
        Ok(weighted_score(&per_scale, window))
    }
}

/// Each scale's c-value map of `pic` computed on the CPU (to compare the GPU's maps).
#[cfg(test)]
pub(super) fn cpu_c_value_maps(s: &Setup, pic: &PictureData, is_src: bool) -> Vec<Vec<f32>> {
    let mut maps = Vec::new();
    Work::new(s)
        .unwrap()
        .score_with(s, pic, is_src, &mut |_, cv| maps.push(cv.to_vec()))
        .unwrap();
    maps
}

/// Size of each scale's picture, starting from the processing size `w`x`h`.
pub(super) fn scale_sizes(s: &Setup, w: usize, h: usize) -> [(usize, usize); NUM_SCALES] {
    let (mut sw, mut sh) = (w, h);
    std::array::from_fn(|scale| {
        if scale > 0 || s.speedup {
            sw = (sw + 1) >> 1;
            sh = (sh + 1) >> 1;
        }
        (sw, sh)
    })
}

/// The frame score from the pooled c-values of each scale: weighted 16:8:4:2:1 and divided by
/// the window area.
pub(super) fn weighted_score(per_scale: &[f64; NUM_SCALES], window: usize) -> f64 {
    let side = 2 * (window >> 1) + 1;
    let pixels_in_window = (side * side) as u16;
    let weighted = per_scale
        .iter()
        .zip(SCALE_WEIGHTS)
        .fold(0.0f64, |acc, (&v, wt)| acc + v * f64::from(wt));
    weighted / f64::from(pixels_in_window)
}

impl Extractor for Cambi {
    fn name(&self) -> &'static str {
        "cambi"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.stored_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let setup = self.setup_for(input.distorted)?;
        let gpu = self.gpu.as_ref().map(|g| g.for_frame(input.index));
        let mut work = None;
        let mut score = |pic: &Picture, is_src: bool| match gpu {
            Some(state) => gpu::score(state, setup, pic, is_src),
            None => {
                let mut w = match work.take() {
                    Some(w) => w,
                    None => Work::new(setup)?,
                };
                let r = w.score(setup, pic, is_src);
                work = Some(w);
                r
            }
        };
        let dist_score = score(input.distorted, false)?;
        out.push((self.score_name.clone(), c_min(dist_score, self.max_val)));
        if self.full_ref {
            let src_score = score(input.reference, true)?;
            out.push((SOURCE_NAME.to_string(), c_min(src_score, self.max_val)));
            // C's MAX(0, x) with an integer zero.
            let diff = dist_score - src_score;
            let combined = if 0.0 > diff { 0.0 } else { diff };
            out.push((FULL_REF_NAME.to_string(), c_min(combined, self.max_val)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip, PARITY_CLIPS};

    fn scores(clip: &str, cambi: &Cambi) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, cambi)
    }

    fn check_clip(clip: &str, log: &str, cambi: &Cambi, printed: &str) {
        let log = expected_json(log);
        let got = scores(clip, cambi);
        let n = log["frames"].as_array().unwrap().len();
        assert_eq!(got.len(), n, "{clip}: frame count");
        for (i, s) in got.iter().enumerate() {
            assert_eq!(s.len(), 1);
            assert_eq!(alias(&s[0].0), printed);
            let want = expected_metric(&log, i, printed).unwrap();
            assert_eq!(
                format!("{:.6}", s[0].1),
                format!("{want:.6}"),
                "{clip} frame {i}"
            );
        }
    }

    #[test]
    fn parity_clips_match_upstream() {
        let cambi = Cambi::new(&Dict::new()).unwrap();
        for clip in PARITY_CLIPS {
            // Each clip needs its own instance: upstream fixes the geometry on the first frame.
            let cambi_clip = Cambi::new(&Dict::new()).unwrap();
            check_clip(clip, &format!("{clip}.json"), &cambi_clip, "cambi");
        }
        assert_eq!(cambi.score_name, "Cambi_feature_cambi_score");
    }

    #[test]
    fn v1_0_16_model_options_match_upstream() {
        // feature_opts_dicts of vmaf_v1.0.16_3d0h: high-res speedup, clipping, a luminance floor.
        let mut d = Dict::new();
        d.set("cambi_high_res_speedup", "1080");
        d.set("cambi_vis_lum_threshold", "0.06");
        d.set("cambi_max_val", "17.0");
        let cambi = Cambi::new(&d).unwrap();
        assert_eq!(cambi.score_name, "cambi_hrs_1080_cmxv_17_vlt_0.06");
        check_clip(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.vmaf_v1.0.16_3d0h.json",
            &cambi,
            "cambi_hrs_1080_cmxv_17_vlt_0.06",
        );
    }

    /// (clip, options, stored names, per-frame printed values) from upstream's `vmaf` tool
    /// (v3.2.0, scalar path) on the first three frames.
    type OptionCase = (
        &'static str,
        &'static str,
        &'static [&'static str],
        [&'static [f64]; 3],
    );

    const OPTION_CASES: &[OptionCase] = &[
        (
            "natural_1920x1080_420p8",
            "enc_width=960:enc_height=540",
            &["cambi_ench_540_encw_960"],
            [&[1.081384], &[1.071860], &[1.055673]],
        ),
        (
            "natural_1920x1080_420p8",
            "enc_width=1280:enc_height=720",
            &["cambi_ench_720_encw_1280"],
            [&[1.466876], &[1.452434], &[1.462174]],
        ),
        (
            "natural_1920x1080_420p8",
            "cambi_high_res_speedup=1080:eotf=pq:cambi_vis_lum_threshold=1",
            &["cambi_hrs_1080_vlt_1_eotf_pq"],
            [&[1.275845], &[1.382825], &[1.571585]],
        ),
        (
            "natural_640x360_420p10",
            "full_ref=true",
            &["Cambi_feature_cambi_score", SOURCE_NAME, FULL_REF_NAME],
            [
                &[0.168236, 0.020145, 0.148091],
                &[0.181832, 0.020641, 0.161191],
                &[0.165555, 0.019206, 0.146349],
            ],
        ),
        (
            "natural_640x360_420p10",
            "enc_bitdepth=8",
            &["cambi_encbd_8"],
            [&[0.143994], &[0.147767], &[0.144815]],
        ),
        (
            "natural_640x360_420p10",
            "window_size=127:max_log_contrast=5:cambi_vis_lum_threshold=10",
            &["cambi_vlt_10_mlc_5_ws_127"],
            [&[0.052280], &[0.079092], &[0.070241]],
        ),
        (
            "natural_576x324_420p8",
            "eotf=pq:max_log_contrast=3:topk=0.3",
            &["cambi_eotf_pq_mlc_3_topk_0.3"],
            [&[3.370018], &[3.100546], &[3.055687]],
        ),
        (
            "natural_576x324_420p8",
            "cambi_eotf=pq:tvi_threshold=0.05:cambi_topk=0.9",
            &["cambi_ceot_pq_ctpk_0.9_tvit_0.05"],
            [&[0.300411], &[0.271427], &[0.289587]],
        ),
        (
            "natural_576x324_420p8",
            "enc_width=400:enc_height=300",
            &["cambi_ench_300_encw_400"],
            [&[0.262099], &[0.264735], &[0.300109]],
        ),
        (
            "natural_576x324_420p8",
            "window_size=15:max_log_contrast=1",
            &["cambi_mlc_1_ws_15"],
            [&[0.019472], &[0.012029], &[0.011213]],
        ),
        (
            "testsrc_480x270_444p8",
            "full_ref=true:src_width=400:src_height=240:enc_width=460:enc_height=260",
            &[
                "cambi_ench_260_encw_460_srch_240_srcw_400",
                SOURCE_NAME,
                FULL_REF_NAME,
            ],
            [
                &[0.090476, 0.045584, 0.044893],
                &[0.094349, 0.035188, 0.059161],
                &[0.048699, 0.043955, 0.004745],
            ],
        ),
    ];

    #[test]
    fn options_match_upstream() {
        for (clip, opts, names, frames) in OPTION_CASES {
            let mut d = Dict::new();
            for kv in opts.split(':') {
                let (k, v) = kv.split_once('=').unwrap();
                d.set(k, v);
            }
            let cambi = Cambi::new(&d).unwrap();
            let (refs, dists) = load_parity_clip(clip);
            for (i, want) in frames.iter().enumerate() {
                let input = FrameInput::pair(i, &refs[i], &dists[i]);
                let mut out = Scores::new();
                cambi.extract(&input, &mut out).unwrap();
                let got_names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(&got_names[..], *names, "{clip} {opts}");
                for ((_, v), w) in out.iter().zip(want.iter()) {
                    assert_eq!(
                        format!("{v:.6}"),
                        format!("{w:.6}"),
                        "{clip} {opts} frame {i}"
                    );
                }
            }
        }
    }

    #[test]
    // The literals are upstream's table entries, digit for digit.
    #[allow(clippy::excessive_precision)]
    fn reciprocal_table_follows_upstream_rounding() {
        let lut = reciprocal_lut();
        assert_eq!(lut.len(), RECIPROCAL_LUT_SIZE);
        assert_eq!(lut[0], 0.0);
        assert_eq!(lut[4], 0.25);
        // Entries where the 9-digit literal does not round to 1.0f32 / i.
        assert_eq!(lut[82], 0.012195122f32);
        assert_ne!(lut[82], 1.0f32 / 82.0);
        assert_eq!(lut[4225], 0.000236686391f32);
    }

    #[test]
    fn default_thresholds() {
        let c = Cambi::new(&Dict::new()).unwrap();
        let s = c.build_setup(1920, 1080, 8).unwrap();
        assert_eq!(s.window, 33);
        assert_eq!(s.vlt_luma, 0);
        assert_eq!(s.band_base, 0);
        assert_eq!(s.diff_weights, vec![1, 2, 3, 4]);
        assert!(!s.speedup);
        assert_eq!(mask_index(1920, 1080), 21);
        assert_eq!(mask_index(320, 180), 13);
        assert_eq!(mask_index(100, 100), 7);
    }

    #[test]
    fn visibility_thresholds_match_upstream() {
        // Values printed by upstream's luminance tools and bisection (diffs 1..=32).
        let mut bt = vec![178, 305, 432, 559, 686, 813];
        bt.resize(32, 1023);
        let bt_loose = [
            76, 101, 125, 150, 175, 199, 224, 249, 274, 298, 323, 348, 372, 397, 422, 446, 471,
            496, 520, 545, 570, 594, 619, 644, 669, 693, 718, 743, 767, 792, 817, 841,
        ];
        let mut pq = vec![233];
        pq.resize(32, 1023);
        let mut pq_loose = vec![84, 111, 143, 182, 228, 284, 355, 453];
        pq_loose.resize(32, 1023);
        let cases: [(Eotf, f64, &[i32]); 6] = [
            (Eotf::Bt1886, 0.019, &bt),
            (Eotf::Bt1886, 0.001, &[1023; 32]),
            (Eotf::Bt1886, 0.1, &bt_loose),
            (Eotf::Pq, 0.019, &pq),
            (Eotf::Pq, 0.001, &[1023; 32]),
            (Eotf::Pq, 0.1, &pq_loose),
        ];
        for (eotf, t, want) in cases {
            let got: Vec<i32> = (1..=32)
                .map(|d| tvi_for_diff(d, t, eotf).unwrap())
                .collect();
            assert_eq!(got, want, "{eotf:?} {t}");
        }
        let vlt = |e| [0.06, 1.0, 10.0, 100.0].map(|t| vlt_luma(t, e).unwrap());
        assert_eq!(vlt(Eotf::Bt1886), [78, 135, 268, 614]);
        assert_eq!(vlt(Eotf::Pq), [108, 196, 327, 510]);
        assert_eq!(vlt_luma(0.0, Eotf::Bt1886).unwrap(), 0);
    }

    #[test]
    fn names_and_option_errors() {
        let mut d = Dict::new();
        d.set("eotf", "pq");
        d.set("window_size", "63");
        let c = Cambi::new(&d).unwrap();
        assert_eq!(c.score_name, "cambi_eotf_pq_ws_63");
        assert_eq!(c.dedup_key(), "cambi_eotf_pq_ws_63");

        let mut d = Dict::new();
        d.set("full_ref", "true");
        d.set("topk", "0.5");
        let c = Cambi::new(&d).unwrap();
        assert_eq!(c.score_name, "cambi_topk_0.5");
        assert!(c.full_ref);

        let mut d = Dict::new();
        d.set("enc_width", "100");
        assert!(Cambi::new(&d).is_err());

        let mut d = Dict::new();
        d.set("heatmaps_path", "/tmp/x");
        assert!(Cambi::new(&d).is_err());

        // An unknown EOTF fails when the geometry is fixed, as upstream's init does.
        let mut d = Dict::new();
        d.set("cambi_eotf", "hlg");
        let c = Cambi::new(&d).unwrap();
        assert!(c.build_setup(640, 360, 8).is_err());
        // Both sides below 216 are rejected.
        let c = Cambi::new(&Dict::new()).unwrap();
        assert!(c.build_setup(200, 200, 8).is_err());
    }

    #[test]
    fn quick_select_puts_top_k_first() {
        let mut v = [3.0f32, 9.0, 1.0, 7.0, 5.0, 7.0, 0.0, 2.0];
        quick_select(&mut v, 3);
        let mut top = v[..3].to_vec();
        top.sort_by(|a, b| b.partial_cmp(a).unwrap());
        assert_eq!(top, vec![9.0, 7.0, 7.0]);
        assert!(v[3..].iter().all(|&x| x <= 7.0));
    }
}
