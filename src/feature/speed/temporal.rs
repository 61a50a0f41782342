//! The `speed_temporal` extractor: SpEED of consecutive luma frame differences.

use super::gsm::extract_score;
use super::scale::load;
use super::{check_pair, Dims, SpeedOpts, TEMPORAL_FEATURES, TEMPORAL_OPTIONS};
use crate::error::Result;
use crate::feature::{Dict, Extractor, ExtractorFlags, FrameInput, Scores};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::Picture;

/// The `speed_temporal` extractor: SpEED of frame differences (previous minus current). It
/// reads the previous pictures the context keeps (PREV_REF, PREV_DIST) rather than state of
/// its own, so frames need not run in order.
pub struct SpeedTemporal {
    opts: SpeedOpts,
    use_ref_diff: bool,
    gpu: Option<GpuSet>,
}

impl SpeedTemporal {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = SpeedOpts::parse(&TEMPORAL_OPTIONS, dict, false)?;
        Ok(SpeedTemporal {
            use_ref_diff: opts.opts.bool("speed_use_ref_diff"),
            opts,
            gpu: None,
        })
    }

    /// Computes the difference planes' moments on `gpu` when given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for SpeedTemporal {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn host_planes(&self) -> u8 {
        // The GPU path reads device pictures in place (and fetches what it needs otherwise).
        if self.gpu.is_some() {
            0
        } else {
            crate::picture::ALL_PLANES
        }
    }

    fn name(&self) -> &'static str {
        "speed_temporal"
    }

    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::PREV_REF | ExtractorFlags::PREV_DIST
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

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let Some(g) = &self.gpu else { return Ok(None) };
        let name = self.opts.feature_name(TEMPORAL_FEATURES[0]);
        let Some((pr, pd, d)) = self.frames(input)? else {
            return Ok(Some(Box::new(move || Ok(vec![(name, 0.0)]))));
        };
        let pics = [pr, pd, input.reference, input.distorted];
        let state = g.for_frame(input.index);
        let q = super::gpu::queue_temporal(
            state,
            input.cpu,
            &d,
            &self.opts.params,
            pics,
            self.use_ref_diff,
        )?;
        Ok(Some(Box::new(move || {
            let (score, _) = q()?;
            Ok(vec![(name, f64::from(score))])
        })))
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        if let Some(q) = self.queue(input)? {
            out.extend(q()?);
            return Ok(());
        }
        let name = self.opts.feature_name(TEMPORAL_FEATURES[0]);
        let Some((pr, pd, d)) = self.frames(input)? else {
            out.push((name, 0.0));
            return Ok(());
        };
        let (r, dp) = (&**input.reference, &**input.distorted);
        let p = &self.opts.params;
        let cur_r = load(r, 0, &d, p)?;
        let mut diff_r = load(pr, 0, &d, p)?;
        let mut diff_d = load(pd, 0, &d, p)?;
        diff_r.subtract(&cur_r)?;
        if self.use_ref_diff {
            diff_d.subtract(&cur_r)?;
        } else {
            diff_d.subtract(&load(dp, 0, &d, p)?)?;
        }
        let (score, _) = extract_score(input.cpu, &d, p, diff_r, diff_d)?;
        // No max_val clipping here: upstream's temporal extractor stores the raw score.
        out.push((name, f64::from(score)));
        Ok(())
    }
}

impl SpeedTemporal {
    /// The previous reference and distorted pictures and the geometry, after checking all four
    /// pictures agree; None for a frame without a predecessor, which upstream scores 0 (it keys
    /// this on index 0).
    fn frames<'a>(
        &self,
        input: &FrameInput<'a>,
    ) -> Result<Option<(&'a Picture, &'a Picture, Dims)>> {
        let (r, dp) = (&**input.reference, &**input.distorted);
        check_pair("speed_temporal", r, dp)?;
        let (Some(pr), Some(pd)) = (input.prev_ref, input.prev_dist) else {
            return Ok(None);
        };
        if input.index == 0 {
            return Ok(None);
        }
        check_pair("speed_temporal", pr, r)?;
        check_pair("speed_temporal", pd, dp)?;
        Ok(Some((
            pr,
            pd,
            Dims::new(r.w[0], r.h[0], self.opts.params.prescale)?,
        )))
    }
}
