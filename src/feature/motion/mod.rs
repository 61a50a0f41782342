//! motion feature extractor (CPU reference; GPU dispatch when a HIP state is imported).
//!
//! v3.2.0 semantics: per frame, the SAD of the 5-tap blurred *difference* between the current
//! reference and the previous (or, with the five-frame window, the one before) reference gives
//! `motion_sad`. motion2/motion3 need the next frame's value, so they are derived from the
//! collected `motion_sad` scores only at flush. The extractor keeps no per-frame state, so frames
//! may be extracted in any order on any thread.
//!
//! Layout: `cpu.rs` is the CPU reference ([`motion_sad`] and the C helpers of the finishing)
//! with the SIMD driver, `x86.rs` / `aarch64.rs` its AVX2, AVX-512 and NEON row kernels,
//! `gpu.rs` the same SAD on the device (kernels/motion.hip); this file holds the extractor, its
//! options, the dispatch and the host finishing (motion2/motion3 at flush).

use crate::collector::FeatureCollector;
use crate::error::{Error, Result};
#[cfg(target_arch = "aarch64")]
mod aarch64;
mod cpu;
pub mod gpu;
#[cfg(test)]
pub(crate) mod hipcpu_tests;
pub(crate) mod launch;
#[cfg(target_arch = "x86_64")]
mod x86;
use crate::feature::{Dict, Extractor, ExtractorFlags, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::Picture;

use super::c_min;
pub(crate) use cpu::blend;
pub use cpu::motion_sad;

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[
    SAD_FEATURE,
    MOTION_FEATURE,
    MOTION2_FEATURE,
    MOTION3_FEATURE,
];

const SAD_FEATURE: &str = "VMAF_integer_feature_motion_sad_score";
/// Only written with `debug=true` (same value as the SAD score).
const MOTION_FEATURE: &str = "VMAF_integer_feature_motion_score";
const MOTION2_FEATURE: &str = "VMAF_integer_feature_motion2_score";
const MOTION3_FEATURE: &str = "VMAF_integer_feature_motion3_score";

static OPTIONS: [OptSpec; 8] = [
    OptSpec::boolean("motion_force_zero", Some("force_0"), false, true),
    OptSpec::double("motion_blend_factor", Some("mbf"), 1.0, 0.0, 1.0, true),
    OptSpec::double("motion_blend_offset", Some("mbo"), 40.0, 0.0, 1000.0, true),
    OptSpec::double("motion_fps_weight", Some("mfw"), 1.0, 0.0, 5.0, true),
    OptSpec::double("motion_max_val", Some("mmxv"), 10000.0, 0.0, 10000.0, true),
    OptSpec::boolean("motion_five_frame_window", Some("mffw"), false, true),
    OptSpec::boolean("motion_moving_average", Some("mma"), false, true),
    OptSpec::boolean("debug", None, false, false),
];

/// The motion extractor.
pub struct Motion {
    opts: Opts,
    force_zero: bool,
    blend_factor: f64,
    blend_offset: f64,
    fps_weight: f64,
    max_val: f64,
    five_frame_window: bool,
    moving_average: bool,
    debug: bool,
    sad_name: String,
    /// GPU used for the SAD, when one was imported.
    gpu: Option<GpuSet>,
    motion_name: String,
    motion2_name: String,
    motion3_name: String,
}

impl Motion {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, opts)?;
        Ok(Motion {
            force_zero: o.bool("motion_force_zero"),
            blend_factor: o.double("motion_blend_factor"),
            blend_offset: o.double("motion_blend_offset"),
            fps_weight: o.double("motion_fps_weight"),
            max_val: o.double("motion_max_val"),
            five_frame_window: o.bool("motion_five_frame_window"),
            moving_average: o.bool("motion_moving_average"),
            debug: o.bool("debug"),
            sad_name: o.feature_name(SAD_FEATURE),
            motion_name: o.feature_name(MOTION_FEATURE),
            motion2_name: o.feature_name(MOTION2_FEATURE),
            motion3_name: o.feature_name(MOTION3_FEATURE),
            opts: o,
            gpu: None,
        })
    }

    /// Computes the SAD on `gpu` when given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }

    /// First frame index that has a predecessor to compare with.
    pub fn min_idx(&self) -> usize {
        if self.five_frame_window {
            2
        } else {
            1
        }
    }

    /// The (earlier, current) reference pair whose SAD frame `input` needs, or `None` when the
    /// frame's score is 0 without computation (forced zero, or before `min_idx`).
    pub fn sad_pair<'a>(
        &self,
        input: &FrameInput<'a>,
    ) -> Result<Option<(&'a Picture, &'a Picture)>> {
        if self.force_zero || input.index < self.min_idx() {
            return Ok(None);
        }
        let prev = if self.five_frame_window {
            input.prev_prev_ref
        } else {
            input.prev_ref
        };
        let prev = prev.ok_or_else(|| {
            Error::inval(format!(
                "motion: no previous reference for frame {}",
                input.index
            ))
        })?;
        Ok(Some((prev, input.reference)))
    }

    /// The frame's motion score from its SAD over a `w`x`h` luma plane.
    pub fn score_from_sad(&self, sad: u64, w: usize, h: usize) -> f64 {
        // libvmaf divides by the unsigned 32-bit product.
        let area = (w as u32).wrapping_mul(h as u32);
        c_min(
            sad as f64 / 256.0 / f64::from(area) * self.fps_weight,
            self.max_val,
        )
    }

    /// Host finishing of one frame: `sad` is `None` when [`Motion::sad_pair`] gave `None`.
    pub fn finish(&self, sad: Option<u64>, w: usize, h: usize, out: &mut Scores) {
        let score = sad.map_or(0.0, |s| self.score_from_sad(s, w, h));
        out.push((self.sad_name.clone(), score));
        if self.debug {
            out.push((self.motion_name.clone(), score));
        }
    }
}

impl Extractor for Motion {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

    fn host_planes(&self) -> u8 {
        // With a GPU the host computes only the first frame, which reads no samples (the GPU
        // path fetches what it needs itself): device pictures are not copied back for it.
        if self.gpu.is_some() {
            0
        } else {
            crate::feature::LUMA
        }
    }

    fn name(&self) -> &'static str {
        "motion"
    }

    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::PREV_REF
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
        let sad = match self.sad_pair(input)? {
            Some((prev, cur)) => Some(motion_sad(prev, cur, input.cpu)?),
            None => None,
        };
        let r = input.reference;
        self.finish(sad, r.w[0], r.h[0], out);
        Ok(())
    }

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let Some(g) = &self.gpu else { return Ok(None) };
        let Some((prev, cur)) = self.sad_pair(input)? else {
            return Ok(None);
        };
        let q = gpu::queue_motion_sad(g.for_frame(input.index), prev, cur)?;
        let (w, h) = (input.reference.w[0], input.reference.h[0]);
        Ok(Some(Box::new(move || {
            let mut out = Scores::new();
            self.finish(Some(q()?), w, h, &mut out);
            Ok(out)
        })))
    }

    fn flush(&self, collector: &FeatureCollector) -> Result<()> {
        // The run of consecutive motion_sad scores starting at frame 0.
        let sads: Vec<f64> = match collector.vector(&self.sad_name) {
            Some(v) => v.scores.iter().map_while(|s| *s).collect(),
            None => Vec::new(),
        };
        let n = sads.len();
        let min_idx = self.min_idx();
        let clip = |x: f64| c_min(blend(x, self.blend_factor, self.blend_offset), self.max_val);

        // Frames before min_idx get motion3 from the first real value.
        let stamp = if n > min_idx {
            clip(sads[min_idx])
        } else {
            0.0
        };
        // With the five-frame window the lower neighbour is one frame further back.
        let lo_back = if self.five_frame_window { 1 } else { 0 };

        let mut prev_processed = 0.0;
        for i in 0..n {
            let motion2 = if i < min_idx {
                0.0
            } else {
                match sads.get(i + 1) {
                    None => sads[i],
                    Some(&hi) if i - lo_back >= min_idx => c_min(sads[i - lo_back], hi),
                    Some(&hi) => hi,
                }
            };
            collector.append(&self.motion2_name, motion2, i)?;

            let motion3 = if i < min_idx {
                prev_processed = stamp;
                stamp
            } else {
                let processed = clip(motion2);
                let m = if self.moving_average {
                    (processed + prev_processed) / 2.0
                } else {
                    processed
                };
                prev_processed = processed;
                m
            };
            collector.append(&self.motion3_name, motion3, i)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::PictureData;
    use crate::simd::CpuLevel;
    use crate::testutil::{expected_json, load_parity_clip};

    /// Runs `clip` through a motion extractor with `opts`, frames in reverse order to show
    /// that extraction order does not matter, and returns the collector after flush.
    fn run(clip: &str, opts: &Dict) -> FeatureCollector {
        run_at(clip, opts, CpuLevel::default())
    }

    /// [`run`] with the CPU kernels of `cpu`.
    fn run_at(clip: &str, opts: &Dict, cpu: CpuLevel) -> FeatureCollector {
        let (refs, dists) = load_parity_clip(clip);
        let m = Motion::new(opts).unwrap();
        let c = FeatureCollector::new();
        for i in (0..refs.len()).rev() {
            let input = FrameInput {
                index: i,
                reference: &refs[i],
                distorted: &dists[i],
                prev_ref: i.checked_sub(1).map(|p| &refs[p]),
                prev_prev_ref: i.checked_sub(2).map(|p| &refs[p]),
                prev_dist: i.checked_sub(1).map(|p| &dists[p]),
                cpu,
            };
            let mut out = Scores::new();
            m.extract(&input, &mut out).unwrap();
            for (name, v) in out {
                c.append(&name, v, i).unwrap();
            }
        }
        m.flush(&c).unwrap();
        c
    }

    /// Compares stored features against upstream's JSON log (`metric` is the printed name).
    fn check(c: &FeatureCollector, json: &str, pairs: &[(&str, &str)]) {
        let log = expected_json(json);
        let frames = log["frames"].as_array().unwrap();
        assert!(!frames.is_empty());
        for fr in frames {
            let idx = fr["frameNum"].as_u64().unwrap() as usize;
            for (stored, printed) in pairs {
                let want = fr["metrics"][*printed].as_f64().unwrap();
                let got = c
                    .get(stored, idx)
                    .unwrap_or_else(|| panic!("{stored} missing at {idx}"));
                assert_eq!(
                    format!("{got:.6}"),
                    format!("{want:.6}"),
                    "{json} frame {idx} {printed}"
                );
            }
        }
    }

    const DEFAULT_NAMES: &[(&str, &str)] = &[
        (SAD_FEATURE, SAD_FEATURE),
        (MOTION2_FEATURE, "integer_motion2"),
        (MOTION3_FEATURE, "integer_motion3"),
    ];

    fn check_clip(clip: &str) {
        let c = run(clip, &Dict::new());
        check(&c, &format!("{clip}.json"), DEFAULT_NAMES);
    }

    /// Every parity clip matches upstream at every CPU level this machine runs.
    #[test]
    fn parity_clips_at_every_level() {
        for cpu in CpuLevel::available() {
            for clip in crate::testutil::PARITY_CLIPS {
                let c = run_at(clip, &Dict::new(), cpu);
                check(&c, &format!("{clip}.json"), DEFAULT_NAMES);
            }
        }
    }

    #[test]
    fn natural_8bit() {
        check_clip("natural_576x324_420p8");
    }

    #[test]
    fn natural_10bit() {
        check_clip("natural_640x360_420p10");
    }

    #[test]
    fn natural_12bit() {
        check_clip("natural_320x180_420p12");
    }

    #[test]
    fn testsrc_odd_name() {
        check_clip("testsrc_321x241_420p8");
    }

    #[test]
    fn mandel_422() {
        check_clip("mandel_352x288_422p8");
    }

    #[test]
    fn testsrc_444_and_static_life() {
        check_clip("testsrc_480x270_444p8");
        check_clip("life_320x240_420p8");
    }

    #[test]
    fn subsample_keeps_motion_on_every_frame() {
        // The context still extracts motion on every frame; the log only lists every third.
        let c = run("natural_576x324_420p8", &Dict::new());
        check(&c, "natural_576x324_420p8.subsample3.json", DEFAULT_NAMES);
    }

    #[test]
    fn max_val_option_changes_names_and_clips() {
        let mut d = Dict::new();
        d.set("motion_max_val", "18");
        let m = Motion::new(&d).unwrap();
        assert_eq!(m.dedup_key(), "motion_mmxv_18");
        let c = run("natural_1920x1080_420p8", &d);
        check(
            &c,
            "natural_1920x1080_420p8.vmaf_v1.0.16_3d0h.json",
            &[
                (
                    "VMAF_integer_feature_motion_sad_score_mmxv_18",
                    "VMAF_integer_feature_motion_sad_score_mmxv_18",
                ),
                ("integer_motion2_mmxv_18", "integer_motion2_mmxv_18"),
                ("integer_motion3_mmxv_18", "integer_motion3_mmxv_18"),
            ],
        );
    }

    #[test]
    fn option_names_and_force_zero() {
        let mut d = Dict::new();
        d.set("motion_force_zero", "true");
        d.set("debug", "true");
        let m = Motion::new(&d).unwrap();
        assert_eq!(m.dedup_key(), "motion_force_0");
        assert_eq!(m.feature_name(MOTION2_FEATURE), "integer_motion2_force_0");
        let c = run("testsrc_321x241_420p8", &d);
        for i in 0..12 {
            assert_eq!(c.get("integer_motion2_force_0", i), Some(0.0));
            assert_eq!(c.get("integer_motion3_force_0", i), Some(0.0));
            assert_eq!(c.get("integer_motion_force_0", i), Some(0.0));
        }
        let mut d = Dict::new();
        d.set("motion_blend_factor", "0.5");
        d.set("motion_five_frame_window", "true");
        let m = Motion::new(&d).unwrap();
        assert_eq!(
            m.feature_name(MOTION3_FEATURE),
            "integer_motion3_mbf_0.5_mffw"
        );
        let mut d = Dict::new();
        d.set("motion_fps_weight", "6");
        assert!(Motion::new(&d).is_err());
    }

    #[test]
    fn five_frame_window_and_moving_average_follow_the_sads() {
        let mut d = Dict::new();
        d.set("motion_five_frame_window", "true");
        d.set("motion_moving_average", "true");
        d.set("motion_blend_factor", "0.5");
        d.set("motion_blend_offset", "10");
        let c = run("testsrc_321x241_420p8", &d);
        let sfx = "_mbf_0.5_mbo_10_mffw_mma";
        let sad = |i| {
            c.get(&format!("VMAF_integer_feature_motion_sad_score{sfx}"), i)
                .unwrap()
        };
        let m2 = |i| c.get(&format!("integer_motion2{sfx}"), i).unwrap();
        let m3 = |i| c.get(&format!("integer_motion3{sfx}"), i).unwrap();
        let bl = |x: f64| x * 0.5 + 0.5 * x.min(10.0);
        assert_eq!(sad(0), 0.0);
        assert_eq!(sad(1), 0.0);
        assert!(sad(2) > 0.0);
        assert_eq!(m2(0), 0.0);
        assert_eq!(m2(1), 0.0);
        // Lower neighbour i-1 is below min_idx at i=2.
        assert_eq!(m2(2), sad(3));
        assert_eq!(m2(5), sad(4).min(sad(6)));
        assert_eq!(m2(11), sad(11));
        assert_eq!(m3(0), bl(sad(2)));
        assert_eq!(m3(1), bl(sad(2)));
        assert_eq!(m3(2), (bl(m2(2)) + bl(sad(2))) / 2.0);
        assert_eq!(m3(6), (bl(m2(6)) + bl(m2(5))) / 2.0);
    }

    #[test]
    fn rejects_missing_previous_and_tiny_frames() {
        let (refs, dists) = load_parity_clip("testsrc_321x241_420p8");
        let m = Motion::new(&Dict::new()).unwrap();
        let input = FrameInput::pair(3, &refs[3], &dists[3]);
        assert!(m.extract(&input, &mut Scores::new()).is_err());
        let tiny = PictureData::new(crate::picture::PixelFormat::Yuv420p, 8, 2, 8).unwrap();
        assert!(motion_sad(&tiny, &tiny, CpuLevel::default()).is_err());
    }
}
