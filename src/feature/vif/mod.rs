//! Integer VIF (libvmaf's `vif` extractor): visual information fidelity over four dyadic scales
//! of the luma plane, bit-exact with upstream's scalar C path.
//!
//! Layout: `cpu.rs` is the CPU reference ([`compute_accums`] reduces a picture pair to four
//! integer accumulators per scale; [`vif_scores`] / `vif_num_den` finish them in upstream's
//! float/double order), `gpu.rs` computes the same accumulators on the device
//! (kernels/vif.hip), and this file holds the extractor, its options and the dispatch.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod cpu;
pub mod gpu;
#[cfg(test)]
pub(crate) mod hipcpu_tests;
pub(crate) mod launch;
mod pipeline;
#[cfg(target_arch = "x86_64")]
mod x86;
use crate::gpu::GpuSet;

use crate::error::Result;
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::job::Queued;

pub use cpu::{compute_accums, log2_table, vif_debug_scores, vif_scores, VifAccums};

/// Full feature names this extractor provides: the four scale scores, then the debug extras.
pub const PROVIDED_FEATURES: &[&str] = &[
    "VMAF_integer_feature_vif_scale0_score",
    "VMAF_integer_feature_vif_scale1_score",
    "VMAF_integer_feature_vif_scale2_score",
    "VMAF_integer_feature_vif_scale3_score",
    "integer_vif",
    "integer_vif_num",
    "integer_vif_den",
    "integer_vif_num_scale0",
    "integer_vif_den_scale0",
    "integer_vif_num_scale1",
    "integer_vif_den_scale1",
    "integer_vif_num_scale2",
    "integer_vif_den_scale2",
    "integer_vif_num_scale3",
    "integer_vif_den_scale3",
];

/// Option table, as upstream declares it.
pub static OPTIONS: [OptSpec; 3] = [
    OptSpec::boolean("debug", None, false, false),
    OptSpec::double(
        "vif_enhn_gain_limit",
        Some("egl"),
        DEFAULT_EGL,
        1.0,
        DEFAULT_EGL,
        true,
    ),
    OptSpec::boolean("vif_skip_scale0", Some("ssclz"), false, true),
];

/// Default (and maximum) enhancement gain limit.
pub const DEFAULT_EGL: f64 = 100.0;

/// The vif extractor.
pub struct Vif {
    opts: Opts,
    debug: bool,
    egl: f64,
    skip_scale0: bool,
    /// Stored names of `PROVIDED_FEATURES`, same order.
    names: Vec<String>,
    /// GPU used for the integer sums, when one was imported.
    gpu: Option<GpuSet>,
}

impl Vif {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let opts = Opts::parse(&OPTIONS, opts)?;
        let names = PROVIDED_FEATURES
            .iter()
            .map(|f| opts.feature_name(f))
            .collect();
        Ok(Vif {
            debug: opts.bool("debug"),
            egl: opts.double("vif_enhn_gain_limit"),
            skip_scale0: opts.bool("vif_skip_scale0"),
            opts,
            names,
            gpu: None,
        })
    }

    /// Computes the integer sums on `gpu` (when given and the frame is large enough).
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for Vif {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

    fn host_planes(&self) -> u8 {
        crate::feature::LUMA
    }

    fn name(&self) -> &'static str {
        "vif"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        // The GPU path has one entry, `queue`; extracting there is queueing and waiting.
        if let Some(queued) = self.queue(input)? {
            out.extend(queued()?);
            return Ok(());
        }
        let (r, d) = (&**input.reference, &**input.distorted);
        let acc = compute_accums(r, d, self.egl, self.skip_scale0, input.cpu)?;
        self.emit(&acc, out);
        Ok(())
    }

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let r = &**input.reference;
        let Some(g) = &self.gpu else { return Ok(None) };
        if r.w[0] < gpu::MIN_SIDE || r.h[0] < gpu::MIN_SIDE {
            return Ok(None);
        }
        let q = gpu::queue_accums(
            g.for_frame(input.index),
            input.reference,
            input.distorted,
            self.egl,
            self.skip_scale0,
        )?;
        Ok(Some(Box::new(move || {
            let mut out = Scores::new();
            self.emit(&q()?, &mut out);
            Ok(out)
        })))
    }
}

impl Vif {
    /// The scores of one frame's sums.
    fn emit(&self, acc: &[VifAccums; 4], out: &mut Scores) {
        let scores = vif_scores(acc, self.skip_scale0);
        out.extend(self.names.iter().cloned().zip(scores));
        if self.debug {
            let extra = vif_debug_scores(acc, self.skip_scale0);
            out.extend(self.names[4..].iter().cloned().zip(extra));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::alias::alias;
    use crate::picture::Picture;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip};

    fn frame_scores(vif: &Vif, r: &Picture, d: &Picture, index: usize) -> Scores {
        let input = FrameInput {
            index,
            reference: r,
            distorted: d,
            prev_ref: None,
            prev_prev_ref: None,
            prev_dist: None,
            cpu: crate::simd::CpuLevel::default(),
        };
        let mut out = Scores::new();
        vif.extract(&input, &mut out).expect("extract");
        out
    }

    fn check_clip(clip: &str, log: &str, opts: &Dict) {
        let (refs, dists) = load_parity_clip(clip);
        let json = expected_json(log);
        let vif = Vif::new(opts).unwrap();
        assert!(!refs.is_empty());
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
            let scores = frame_scores(&vif, r, d, i);
            assert_eq!(scores.len(), 4);
            for (name, v) in &scores {
                let key = alias(name);
                let want = expected_metric(&json, i, key)
                    .unwrap_or_else(|| panic!("{log}: no {key} at frame {i}"));
                assert_eq!(
                    format!("{v:.6}"),
                    format!("{want:.6}"),
                    "{clip} frame {i} {key}"
                );
            }
        }
    }

    #[test]
    fn parity_natural_576x324_8bit() {
        check_clip(
            "natural_576x324_420p8",
            "natural_576x324_420p8.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_natural_640x360_10bit() {
        check_clip(
            "natural_640x360_420p10",
            "natural_640x360_420p10.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_natural_320x180_12bit() {
        check_clip(
            "natural_320x180_420p12",
            "natural_320x180_420p12.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_testsrc_8bit() {
        check_clip(
            "testsrc_321x241_420p8",
            "testsrc_321x241_420p8.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_mandel_422() {
        check_clip(
            "mandel_352x288_422p8",
            "mandel_352x288_422p8.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_life_identical() {
        check_clip(
            "life_320x240_420p8",
            "life_320x240_420p8.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_testsrc_444() {
        check_clip(
            "testsrc_480x270_444p8",
            "testsrc_480x270_444p8.json",
            &Dict::new(),
        );
    }

    #[test]
    fn parity_natural_1080p() {
        let t = std::time::Instant::now();
        check_clip(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.json",
            &Dict::new(),
        );
        eprintln!(
            "1080p vif: {:.1} ms/frame",
            t.elapsed().as_secs_f64() * 1000.0 / 8.0
        );
    }

    #[test]
    fn parity_gain_limit_one() {
        let mut d = Dict::new();
        d.set("vif_enhn_gain_limit", "1.0");
        let vif = Vif::new(&d).unwrap();
        assert_eq!(vif.dedup_key(), "vif_egl_1");
        assert_eq!(
            vif.feature_name("VMAF_integer_feature_vif_scale0_score"),
            "integer_vif_scale0_egl_1"
        );
        check_clip(
            "natural_576x324_420p8",
            "natural_576x324_420p8.neg.json",
            &d,
        );
        check_clip(
            "natural_576x324_420p8",
            "natural_576x324_420p8.two_models.json",
            &d,
        );
    }

    #[test]
    fn skip_scale0_and_debug_outputs() {
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let mut d = Dict::new();
        d.set("vif_skip_scale0", "true");
        d.set("debug", "true");
        let vif = Vif::new(&d).unwrap();
        let s = frame_scores(&vif, &refs[0], &dists[0], 0);
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.len(), 15);
        assert_eq!(names[0], "integer_vif_scale0_ssclz");
        assert_eq!(names[4], "integer_vif_ssclz");
        assert_eq!(names[14], "integer_vif_den_scale3_ssclz");
        assert_eq!(s[0].1, 0.0);
        assert_eq!((s[7].1, s[8].1), (0.0, -1.0));
        // Skipping scale 0 leaves the other scales untouched.
        let plain = frame_scores(&Vif::new(&Dict::new()).unwrap(), &refs[0], &dists[0], 0);
        for k in 1..4 {
            assert_eq!(s[k].1, plain[k].1);
        }
        let json = expected_json("natural_576x324_420p8.json");
        let want = expected_metric(&json, 0, "integer_vif_scale1").unwrap();
        assert_eq!(format!("{:.6}", s[1].1), format!("{want:.6}"));
    }
}
