//! float_motion (libvmaf's `float_motion` extractor): motion of the reference video from the
//! mean absolute difference of consecutive blurred float luma planes.
//!
//! Per frame the reference luma (minus 128, on the 8-bit scale) is blurred with a 5-tap
//! Gaussian (`motion_filter_size` 3: a 3-tap one, 1: none); the frame's score is the mean
//! absolute difference from the previous frame's blurred plane (frame 0 scores 0). Options
//! add the same at half size (`motion_add_scale1`) and the chroma planes' scores
//! (`motion_add_uv`).
//!
//! Stored features: `motion` (debug output, on by default) is the frame's score; `motion2` of
//! frame i is the smaller of frames i's and i+1's scores (the last frame keeps its own, frame
//! 0 has 0); `motion3` is motion2 blended towards `motion_blend_offset`, except that frame 0
//! takes frame 1's score. All are weighted by `motion_fps_weight` and capped at
//! `motion_max_val`. motion2 and motion3 need the next frame, so apart from frame 0's motion2
//! they are written at flush, from the scores kept here. (Upstream writes frame i-1's while
//! extracting frame i; it also recomputes frame i-1's score from the blurred planes, which
//! gives the kept value again: the difference is symmetric.)
//!
//! Layout: `cpu.rs` holds the blur and the differences; this file the extractor, its options
//! and the temporal state. There is no GPU version.

mod cpu;

use std::sync::Mutex;

use crate::collector::FeatureCollector;
use crate::error::{Error, Result};
use crate::feature::motion::blend;
use crate::feature::{
    c_min, Dict, Extractor, ExtractorFlags, FrameInput, OptSpec, Opts, Scores, ALL_PLANES, LUMA,
};
use crate::picture::{PictureData, PixelFormat};
use crate::simd::CpuLevel;
use cpu::BlurredPlane;

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[MOTION_FEATURE, MOTION2_FEATURE, MOTION3_FEATURE];

const MOTION_FEATURE: &str = "VMAF_feature_motion_score";
const MOTION2_FEATURE: &str = "VMAF_feature_motion2_score";
const MOTION3_FEATURE: &str = "VMAF_feature_motion3_score";

/// Option table, as upstream declares it (`debug` is on by default here).
static OPTIONS: [OptSpec; 9] = [
    OptSpec::boolean("debug", None, true, false),
    OptSpec::boolean("motion_force_zero", Some("force_0"), false, true),
    OptSpec::double("motion_fps_weight", Some("mfw"), 1.0, 0.0, 5.0, true),
    OptSpec::double("motion_blend_factor", Some("mbf"), 1.0, 0.0, 1.0, true),
    OptSpec::double("motion_blend_offset", Some("mbo"), 40.0, 0.0, 1000.0, true),
    OptSpec::boolean("motion_add_scale1", Some("mdc"), false, true),
    OptSpec::int("motion_filter_size", Some("mfs"), 5, 0.0, 9.0, true),
    OptSpec::boolean("motion_add_uv", Some("mau"), false, true),
    OptSpec::double("motion_max_val", Some("mmxv"), 10000.0, 0.0, 10000.0, true),
];

/// What the extractor carries from frame to frame.
#[derive(Default)]
struct State {
    /// Blurred planes of the last frame extracted (luma, then U and V with `motion_add_uv`).
    prev: Vec<BlurredPlane>,
    /// Unweighted score of every frame extracted so far, by index (frame 0's is 0).
    scores: Vec<f64>,
}

/// The float_motion extractor.
pub struct FloatMotion {
    opts: Opts,
    debug: bool,
    force_zero: bool,
    fps_weight: f64,
    blend_factor: f64,
    blend_offset: f64,
    add_scale1: bool,
    filter_size: i32,
    add_uv: bool,
    max_val: f64,
    motion_name: String,
    motion2_name: String,
    motion3_name: String,
    state: Mutex<State>,
}

impl FloatMotion {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, opts)?;
        Ok(FloatMotion {
            debug: o.bool("debug"),
            force_zero: o.bool("motion_force_zero"),
            fps_weight: o.double("motion_fps_weight"),
            blend_factor: o.double("motion_blend_factor"),
            blend_offset: o.double("motion_blend_offset"),
            add_scale1: o.bool("motion_add_scale1"),
            filter_size: o.int("motion_filter_size"),
            add_uv: o.bool("motion_add_uv"),
            max_val: o.double("motion_max_val"),
            motion_name: o.feature_name(MOTION_FEATURE),
            motion2_name: o.feature_name(MOTION2_FEATURE),
            motion3_name: o.feature_name(MOTION3_FEATURE),
            opts: o,
            state: Mutex::new(State::default()),
        })
    }

    /// The stored motion / motion2 value of an unweighted score.
    fn weighted(&self, score: f64) -> f64 {
        c_min(score * self.fps_weight, self.max_val)
    }

    /// The stored motion3 value of an unweighted score.
    fn blended(&self, score: f64) -> f64 {
        c_min(
            blend(
                score * self.fps_weight,
                self.blend_factor,
                self.blend_offset,
            ),
            self.max_val,
        )
    }

    /// The blurred planes of `pic` this extractor compares.
    fn blur(&self, pic: &PictureData, cpu: CpuLevel) -> Result<Vec<BlurredPlane>> {
        let planes = if self.add_uv {
            if matches!(pic.pix_fmt, PixelFormat::Yuv400p | PixelFormat::Unknown) {
                return Err(Error::inval(
                    "float_motion: motion_add_uv needs a picture with chroma planes",
                ));
            }
            3
        } else {
            1
        };
        // Every plane keeps the luma pitch, as upstream allocates them.
        let stride = cpu::aligned_stride(pic.w[0]);
        let taps = cpu::taps(self.filter_size);
        (0..planes)
            .map(|c| cpu::blur_plane(pic, c, stride, taps, cpu))
            .collect()
    }

    /// Unweighted score between the blurred planes of two consecutive frames: the luma score
    /// plus, with `motion_add_uv`, the U and V scores (summed in double).
    fn score(&self, prev: &[BlurredPlane], cur: &[BlurredPlane]) -> Result<f64> {
        if prev.len() != cur.len() {
            return Err(Error::inval("float_motion: picture format changed"));
        }
        let mut score = 0.0f64;
        for (a, b) in prev.iter().zip(cur) {
            score += f64::from(cpu::motion(a, b, self.add_scale1)?);
        }
        Ok(score)
    }
}

impl Extractor for FloatMotion {
    fn name(&self) -> &'static str {
        "float_motion"
    }

    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::TEMPORAL
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn planes_read(&self) -> u8 {
        self.host_planes()
    }

    fn host_planes(&self) -> u8 {
        if self.force_zero {
            0
        } else if self.add_uv {
            ALL_PLANES
        } else {
            LUMA
        }
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        if self.force_zero {
            out.push((self.motion2_name.clone(), 0.0));
            out.push((self.motion3_name.clone(), 0.0));
            if self.debug {
                out.push((self.motion_name.clone(), 0.0));
            }
            return Ok(());
        }
        let cur = self.blur(input.reference, input.cpu)?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if input.index != st.scores.len() {
            return Err(Error::inval(format!(
                "float_motion: frame {} out of order (expected frame {})",
                input.index,
                st.scores.len()
            )));
        }
        let score = if input.index == 0 {
            out.push((self.motion2_name.clone(), 0.0));
            if self.debug {
                out.push((self.motion_name.clone(), 0.0));
            }
            0.0
        } else {
            let score = self.score(&st.prev, &cur)?;
            if self.debug {
                out.push((self.motion_name.clone(), self.weighted(score)));
            }
            score
        };
        st.scores.try_reserve(1).map_err(|_| {
            Error::NoMem("float_motion: cannot keep another frame's score".to_string())
        })?;
        st.scores.push(score);
        st.prev = cur;
        Ok(())
    }

    fn flush(&self, collector: &FeatureCollector) -> Result<()> {
        if self.force_zero {
            return Ok(());
        }
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let s = &st.scores;
        let Some(&next) = s.get(1) else {
            // At most one frame: no motion anywhere.
            return collector.append(&self.motion3_name, 0.0, 0);
        };
        collector.append(&self.motion3_name, self.blended(next), 0)?;
        for i in 1..s.len() {
            let m = match s.get(i + 1) {
                Some(&next) => c_min(s[i], next),
                None => s[i],
            };
            collector.append(&self.motion2_name, self.weighted(m), i)?;
            collector.append(&self.motion3_name, self.blended(m), i)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
