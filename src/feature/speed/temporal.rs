//! The `speed_temporal` extractor: SpEED of consecutive luma frame differences.

use std::sync::Mutex;

use super::gsm::extract_score;
use super::scale::{load, Rows};
use super::{check_pair, Dims, SpeedOpts, TEMPORAL_FEATURES, TEMPORAL_OPTIONS};
use crate::error::Result;
use crate::feature::{Dict, Extractor, ExtractorFlags, FrameInput, Scores};

/// The `speed_temporal` extractor: SpEED of frame differences (previous minus current).
pub struct SpeedTemporal {
    opts: SpeedOpts,
    use_ref_diff: bool,
    /// Float luma rows of the previous frame (reference, distorted).
    prev: Mutex<Option<(Rows, Rows)>>,
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
        let p = &self.opts.params;
        let cur_r = load(r, 0, &d, p)?;
        let cur_d = load(dp, 0, &d, p)?;
        let name = self.opts.feature_name(TEMPORAL_FEATURES[0]);
        // The current rows become the next frame's predecessor without a copy: the
        // differences are formed in the previous frame's buffers.
        let mut slot = self.prev.lock().unwrap_or_else(|e| e.into_inner());
        let prev = slot.take();
        // The first frame has no predecessor: upstream stores 0. (Upstream keys this on index 0.)
        let Some((mut pr, mut pd)) = prev.filter(|_| input.index != 0) else {
            *slot = Some((cur_r, cur_d));
            out.push((name, 0.0));
            return Ok(());
        };
        let diffs = pr
            .subtract(&cur_r)
            .and_then(|()| pd.subtract(if self.use_ref_diff { &cur_r } else { &cur_d }));
        *slot = Some((cur_r, cur_d));
        drop(slot);
        diffs?;
        // No max_val clipping here: upstream's temporal extractor stores the raw score.
        let (score, _) = extract_score(input.cpu, &d, p, pr, pd)?;
        out.push((name, f64::from(score)));
        Ok(())
    }
}
