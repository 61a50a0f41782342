//! Float SSIM (libvmaf's `float_ssim` extractor): single-scale SSIM of the luma plane with an
//! 11x11 Gaussian window, after box-filter decimation of large pictures.
//!
//! Options: `enable_lcs` (also store the mean luminance, contrast and structure terms),
//! `enable_db` (store `-10·log10(1 - ssim)`), `clip_db` (cap that at a size-dependent maximum)
//! and `scale` (decimation factor; 0 picks `round(min(w, h) / 256)`, at least 1).

use super::gpu;
use crate::error::{Error, Result};
use crate::feature::ssim::tools::{
    check_pair, decimate, decimated_len, luma_to_float, max_db, ssim_means, to_db, SsimMeans,
    GAUSSIAN_LEN,
};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::GpuSet;
use crate::simd::CpuLevel;

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["float_ssim"];

/// Option table, as upstream declares it (none changes the stored names).
static OPTIONS: [OptSpec; 4] = [
    OptSpec::boolean("enable_lcs", None, false, false),
    OptSpec::boolean("enable_db", None, false, false),
    OptSpec::boolean("clip_db", None, false, false),
    OptSpec::int("scale", None, 0, 0.0, 10.0, false),
];

/// IQA's float rounding: halves round away from zero (the fraction is compared in double).
fn iqa_round(a: f32) -> i32 {
    let t = a as i32;
    let sign = if a > 0.0 { 1 } else { -1 };
    if f64::from(a - t as f32) >= 0.5 {
        t + sign
    } else {
        t
    }
}

/// Decimation factor for a `w`x`h` picture: `scale` when positive, else `round(min/256)`
/// computed in float, at least 1.
pub fn auto_scale(scale: i32, w: usize, h: usize) -> usize {
    if scale > 0 {
        return scale as usize;
    }
    let min = w.min(h) as i32;
    iqa_round(min as f32 / 256.0f32).max(1) as usize
}

/// The decimation factor for a `w`x`h` luma plane (see [`auto_scale`]), or an error when the
/// decimated picture is smaller than the SSIM window.
pub fn checked_scale(scale: i32, w: usize, h: usize) -> Result<usize> {
    let scale = auto_scale(scale, w, h);
    if scale > 1
        && (decimated_len(w, scale) < GAUSSIAN_LEN || decimated_len(h, scale) < GAUSSIAN_LEN)
    {
        return Err(Error::inval(format!(
            "float_ssim: {w}x{h} is too small for decimation by {scale}"
        )));
    }
    Ok(scale)
}

/// Upstream's box taps for decimation by `scale`: 1/(scale²) in float, applied without
/// normalisation.
pub fn box_taps(scale: usize) -> Vec<f32> {
    vec![1.0f32 / (scale * scale) as f32; scale * scale]
}

/// SSIM means of a luma pair after decimating by `scale` with a `scale`x`scale` box filter,
/// with the SIMD kernels of `cpu`.
pub fn compute(
    reference: &crate::picture::PictureData,
    distorted: &crate::picture::PictureData,
    scale: i32,
    cpu: CpuLevel,
) -> Result<SsimMeans> {
    let scale = checked_scale(scale, reference.w[0], reference.h[0])?;
    let mut r = luma_to_float(reference)?;
    let mut d = luma_to_float(distorted)?;
    if scale > 1 {
        let taps = box_taps(scale);
        r = decimate(&r, scale, &taps, scale, cpu);
        d = decimate(&d, scale, &taps, scale, cpu);
    }
    ssim_means(&r, &d, cpu)
}

/// The float_ssim extractor.
pub struct FloatSsim {
    opts: Opts,
    /// GPU the scores are computed on, when one was imported.
    gpu: Option<GpuSet>,
    enable_lcs: bool,
    enable_db: bool,
    clip_db: bool,
    scale: i32,
}

impl FloatSsim {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, opts)?;
        Ok(FloatSsim {
            gpu: None,
            enable_lcs: o.bool("enable_lcs"),
            enable_db: o.bool("enable_db"),
            clip_db: o.bool("clip_db"),
            scale: o.int("scale"),
            opts: o,
        })
    }
}

impl FloatSsim {
    /// Computes on `gpu` when given (same scores as the CPU).
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for FloatSsim {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

    fn host_planes(&self) -> u8 {
        // The GPU path reads device pictures in place (and fetches host pictures' luma
        // itself), so device pictures are not copied back for it.
        if self.gpu.is_some() {
            0
        } else {
            crate::feature::LUMA
        }
    }

    fn name(&self) -> &'static str {
        "float_ssim"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair("float_ssim", r, d)?;
        let m = match &self.gpu {
            Some(g) => gpu::float_ssim(
                g.for_frame(input.index),
                input.reference,
                input.distorted,
                self.scale,
            )?,
            None => compute(r, d, self.scale, input.cpu)?,
        };
        let mut score = f64::from(m.ssim);
        if self.enable_db {
            let cap = if self.clip_db {
                max_db(r.bpc, r.w[0], r.h[0])
            } else {
                f64::INFINITY
            };
            score = to_db(score, cap);
        }
        out.push(("float_ssim".to_string(), score));
        if self.enable_lcs {
            out.push(("float_ssim_l".to_string(), f64::from(m.l)));
            out.push(("float_ssim_c".to_string(), f64::from(m.c)));
            out.push(("float_ssim_s".to_string(), f64::from(m.s)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{load_parity_clip, PARITY_CLIPS};

    fn run(clip: &str, x: &FloatSsim) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, x)
    }

    #[test]
    fn parity_clips_at_every_level() {
        let x = FloatSsim::new(&Dict::new()).unwrap();
        for cpu in crate::simd::CpuLevel::available() {
            crate::feature::ssim::tools::tests::assert_matches_upstream_at(
                &x,
                "float_ssim",
                "float_ssim",
                cpu,
            );
        }
    }

    #[test]
    fn parity_clips_match_upstream() {
        let x = FloatSsim::new(&Dict::new()).unwrap();
        crate::testutil::assert_matches_upstream(&x, "float_ssim", "float_ssim");
        // Default options store exactly one score per frame.
        assert!(run(PARITY_CLIPS[0], &x).iter().all(|s| s.len() == 1));
    }

    #[test]
    fn scale_rule() {
        assert_eq!(auto_scale(0, 1920, 1080), 4);
        assert_eq!(auto_scale(0, 576, 324), 1);
        assert_eq!(auto_scale(0, 320, 180), 1);
        assert_eq!(auto_scale(0, 3840, 2160), 8);
        // 384/256 = 1.5 rounds up; 383/256 rounds down.
        assert_eq!(auto_scale(0, 400, 384), 2);
        assert_eq!(auto_scale(0, 400, 383), 1);
        assert_eq!(auto_scale(3, 1920, 1080), 3);
        // Negative halves truncate: the fraction -0.5 is below 0.5.
        assert_eq!(iqa_round(-1.5), -1);
        assert_eq!(iqa_round(2.5), 3);
    }

    #[test]
    fn options_lcs_and_db() {
        let plain = run(
            "natural_320x180_420p12",
            &FloatSsim::new(&Dict::new()).unwrap(),
        );
        let mut o = Dict::new();
        o.set("enable_lcs", "true");
        o.set("enable_db", "true");
        let x = FloatSsim::new(&o).unwrap();
        assert_eq!(x.dedup_key(), "float_ssim");
        assert_eq!(x.feature_name("float_ssim"), "float_ssim");
        let lcs = run("natural_320x180_420p12", &x);
        for (p, q) in plain.iter().zip(&lcs) {
            let names: Vec<&str> = q.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                ["float_ssim", "float_ssim_l", "float_ssim_c", "float_ssim_s"]
            );
            assert_eq!(q[0].1, -10.0 * (1.0 - p[0].1).log10());
            // Luminance is near 1 for a mild distortion; contrast and structure below 1.
            assert!(q[1].1 > 0.99 && q[1].1 <= 1.0, "{q:?}");
            assert!(q[2].1 > 0.0 && q[2].1 <= 1.0 && q[3].1 > 0.0 && q[3].1 <= 1.0);
        }

        // Identical pictures: SSIM exactly 1, so the dB value is infinite unless clipped.
        let (refs, _) = load_parity_clip("life_320x240_420p8");
        let input = FrameInput::pair(0, &refs[0], &refs[0]);
        let mut out = Scores::new();
        x.extract(&input, &mut out).unwrap();
        assert_eq!(out[0].1, f64::INFINITY);
        assert_eq!(&out[1..].iter().map(|s| s.1).collect::<Vec<_>>(), &[1.0; 3]);
        o.set("clip_db", "true");
        let x = FloatSsim::new(&o).unwrap();
        let mut out = Scores::new();
        x.extract(&input, &mut out).unwrap();
        let cap = (10.0 * (65025.0f64 / (0.5 / (320.0 * 240.0))).log10()).ceil();
        assert_eq!(out[0].1, cap);

        let mut o = Dict::new();
        o.set("scale", "11");
        assert!(FloatSsim::new(&o).is_err());
        o.set("scale", "2");
        let x = FloatSsim::new(&o).unwrap();
        let mut out = Scores::new();
        x.extract(&input, &mut out).unwrap();
        assert_eq!(out[0].1, 1.0);
    }

    #[test]
    fn rejects_small_and_mismatched_pictures() {
        use crate::picture::{PictureData, PixelFormat};
        use std::sync::Arc;
        let x = FloatSsim::new(&Dict::new()).unwrap();
        let small = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 10, 40).unwrap());
        let big = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 40, 40).unwrap());
        let deep = Arc::new(PictureData::new(PixelFormat::Yuv420p, 9, 40, 40).unwrap());
        for (a, b) in [(&small, &small), (&big, &small), (&deep, &deep)] {
            let input = FrameInput::pair(0, a, b);
            assert!(x.extract(&input, &mut Scores::new()).is_err());
        }
    }
}
