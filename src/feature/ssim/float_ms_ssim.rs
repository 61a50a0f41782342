//! Float MS-SSIM (libvmaf's `float_ms_ssim` extractor): Wang's multi-scale SSIM of the luma
//! plane over five dyadic scales, each built with the 9x9 biorthogonal low-pass filter.
//!
//! Options: `enable_lcs` (also store each scale's mean luminance, contrast and structure),
//! `enable_db` (store `-10·log10(1 - ms_ssim)`) and `clip_db` (cap that at a size-dependent
//! maximum).

use super::gpu;
use crate::error::{Error, Result};
use crate::feature::ssim::tools::{
    check_pair, decimate, luma_to_float, max_db, ssim_means, to_db, SsimMeans, GAUSSIAN_LEN,
    LPF_9X9,
};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::GpuSet;
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["float_ms_ssim"];

/// Option table, as upstream declares it (none changes the stored names).
static OPTIONS: [OptSpec; 3] = [
    OptSpec::boolean("enable_lcs", None, false, false),
    OptSpec::boolean("enable_db", None, false, false),
    OptSpec::boolean("clip_db", None, false, false),
];

/// Number of scales.
pub const SCALES: usize = 5;

/// Per-scale exponents of the luminance, contrast and structure means (float constants).
const ALPHAS: [f32; SCALES] = [0.0, 0.0, 0.0, 0.0, 0.1333];
const BETAS: [f32; SCALES] = [0.0448, 0.2856, 0.3001, 0.2363, 0.1333];
const GAMMAS: [f32; SCALES] = [0.0448, 0.2856, 0.3001, 0.2363, 0.1333];

const LCS_NAMES: [[&str; SCALES]; 3] = [
    [
        "float_ms_ssim_l_scale0",
        "float_ms_ssim_l_scale1",
        "float_ms_ssim_l_scale2",
        "float_ms_ssim_l_scale3",
        "float_ms_ssim_l_scale4",
    ],
    [
        "float_ms_ssim_c_scale0",
        "float_ms_ssim_c_scale1",
        "float_ms_ssim_c_scale2",
        "float_ms_ssim_c_scale3",
        "float_ms_ssim_c_scale4",
    ],
    [
        "float_ms_ssim_s_scale0",
        "float_ms_ssim_s_scale1",
        "float_ms_ssim_s_scale2",
        "float_ms_ssim_s_scale3",
        "float_ms_ssim_s_scale4",
    ],
];

/// MS-SSIM of a picture pair with each scale's luminance, contrast and structure means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MsSsim {
    pub score: f64,
    pub l: [f64; SCALES],
    pub c: [f64; SCALES],
    pub s: [f64; SCALES],
}

/// Checks that a `w`x`h` luma plane is large enough for every scale.
pub fn check_size(w: usize, h: usize) -> Result<()> {
    // Upstream's size check halves with truncation, although the pyramid rounds up.
    let (mut cw, mut ch) = (w, h);
    for _ in 0..SCALES {
        if cw < GAUSSIAN_LEN || ch < GAUSSIAN_LEN {
            return Err(Error::inval(format!(
                "float_ms_ssim: {w}x{h} is too small for {SCALES} scales"
            )));
        }
        cw /= 2;
        ch /= 2;
    }
    Ok(())
}

/// Computes MS-SSIM of the luma planes with the SIMD kernels of `cpu`.
pub fn compute(reference: &PictureData, distorted: &PictureData, cpu: CpuLevel) -> Result<MsSsim> {
    check_size(reference.w[0], reference.h[0])?;
    let mut r = luma_to_float(reference)?;
    let mut d = luma_to_float(distorted)?;
    let mut means = [SsimMeans {
        ssim: 0.0,
        l: 0.0,
        c: 0.0,
        s: 0.0,
    }; SCALES];
    for (i, m) in means.iter_mut().enumerate() {
        if i > 0 {
            r = decimate(&r, 2, &LPF_9X9, 9, cpu);
            d = decimate(&d, 2, &LPF_9X9, 9, cpu);
        }
        *m = ssim_means(&r, &d, cpu)?;
    }
    finish(&means)
}

/// MS-SSIM from each scale's SSIM means.
pub fn finish(means: &[SsimMeans; SCALES]) -> Result<MsSsim> {
    let mut out = MsSsim {
        score: 1.0,
        l: [0.0; SCALES],
        c: [0.0; SCALES],
        s: [0.0; SCALES],
    };
    for (i, m) in means.iter().enumerate() {
        let (l, c, s) = (f64::from(m.l), f64::from(m.c), f64::from(m.s));
        out.score *= l.powf(f64::from(ALPHAS[i]))
            * c.powf(f64::from(BETAS[i]))
            * s.powf(f64::from(GAMMAS[i]));
        out.l[i] = l;
        out.c[i] = c;
        out.s[i] = s;
        if out.score == f64::INFINITY {
            return Err(Error::inval("float_ms_ssim: score is infinite"));
        }
    }
    Ok(out)
}

/// The float_ms_ssim extractor.
pub struct FloatMsSsim {
    opts: Opts,
    /// GPU the scores are computed on, when one was imported.
    gpu: Option<GpuSet>,
    enable_lcs: bool,
    enable_db: bool,
    clip_db: bool,
}

impl FloatMsSsim {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, opts)?;
        Ok(FloatMsSsim {
            gpu: None,
            enable_lcs: o.bool("enable_lcs"),
            enable_db: o.bool("enable_db"),
            clip_db: o.bool("clip_db"),
            opts: o,
        })
    }
}

impl FloatMsSsim {
    /// Computes on `gpu` when given (same scores as the CPU).
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for FloatMsSsim {
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
        "float_ms_ssim"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair("float_ms_ssim", r, d)?;
        let m = match &self.gpu {
            Some(g) => {
                gpu::float_ms_ssim(g.for_frame(input.index), input.reference, input.distorted)?
            }
            None => compute(r, d, input.cpu)?,
        };
        let mut score = m.score;
        if self.enable_db {
            let cap = if self.clip_db {
                max_db(r.bpc, r.w[0], r.h[0])
            } else {
                f64::INFINITY
            };
            score = to_db(score, cap);
        }
        out.push(("float_ms_ssim".to_string(), score));
        if self.enable_lcs {
            for (names, vals) in LCS_NAMES.iter().zip([&m.l, &m.c, &m.s]) {
                for (n, &v) in names.iter().zip(vals) {
                    out.push((n.to_string(), v));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::PARITY_CLIPS;

    fn run(clip: &str, x: &FloatMsSsim) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, x)
    }

    #[test]
    fn parity_clips_at_every_level() {
        let x = FloatMsSsim::new(&Dict::new()).unwrap();
        for cpu in crate::simd::CpuLevel::available() {
            crate::feature::ssim::tools::tests::assert_matches_upstream_at(
                &x,
                "float_ms_ssim",
                "float_ms_ssim",
                cpu,
            );
        }
    }

    #[test]
    fn parity_clips_match_upstream() {
        let x = FloatMsSsim::new(&Dict::new()).unwrap();
        crate::testutil::assert_matches_upstream(&x, "float_ms_ssim", "float_ms_ssim");
        // Default options store exactly one score per frame.
        assert!(run(PARITY_CLIPS[0], &x).iter().all(|s| s.len() == 1));
    }
}
