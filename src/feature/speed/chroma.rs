//! The `speed_chroma` extractor: SpEED of the U and V planes and their mean.

use super::gsm::{cap, extract_score};
use super::scale::load;
use super::{check_pair, Dims, SpeedOpts, CHROMA_FEATURES, CHROMA_OPTIONS};
use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::PictureData;
use crate::picture::PixelFormat;

/// The `speed_chroma` extractor.
pub struct SpeedChroma {
    opts: SpeedOpts,
    max_val: f64,
    gpu: Option<GpuSet>,
}

impl SpeedChroma {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = SpeedOpts::parse(&CHROMA_OPTIONS, dict, true)?;
        Ok(SpeedChroma {
            max_val: opts.opts.double("speed_max_val"),
            opts,
            gpu: None,
        })
    }

    /// Computes the planes' moments on `gpu` when given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for SpeedChroma {
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

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let Some(g) = &self.gpu else { return Ok(None) };
        let (r, dp) = (&**input.reference, &**input.distorted);
        let d = self.dims(r, dp)?;
        let q = super::gpu::queue_chroma(
            g.for_frame(input.index),
            input.cpu,
            &d,
            &self.opts.params,
            r,
            dp,
        )?;
        Ok(Some(Box::new(move || {
            let mut out = Scores::new();
            self.finish(q()?, &mut out);
            Ok(out)
        })))
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        if let Some(q) = self.queue(input)? {
            out.extend(q()?);
            return Ok(());
        }
        let (r, dp) = (&**input.reference, &**input.distorted);
        let d = self.dims(r, dp)?;
        let p = &self.opts.params;
        let planes = [
            extract_score(input.cpu, &d, p, load(r, 1, &d, p)?, load(dp, 1, &d, p)?)?,
            extract_score(input.cpu, &d, p, load(r, 2, &d, p)?, load(dp, 2, &d, p)?)?,
        ];
        self.finish(planes, out);
        Ok(())
    }
}

impl SpeedChroma {
    /// The chroma geometry of a checked picture pair (from the luma size, as upstream's init
    /// derives it).
    fn dims(&self, r: &PictureData, dp: &PictureData) -> Result<Dims> {
        check_pair("speed_chroma", r, dp)?;
        let (w, h) = (r.w[0], r.h[0]);
        let (w, h) = match r.pix_fmt {
            PixelFormat::Yuv420p => (w / 2, h / 2),
            PixelFormat::Yuv422p => (w / 2, h),
            PixelFormat::Yuv444p => (w, h),
            PixelFormat::Yuv400p | PixelFormat::Unknown => {
                return Err(Error::inval("speed_chroma: needs chroma planes"));
            }
        };
        Dims::new(w, h, self.opts.params.prescale)
    }

    /// The three scores from each plane's (score, singular).
    fn finish(&self, [(su, eu), (sv, ev)]: [(f32, bool); 2], out: &mut Scores) {
        // A channel whose covariance is singular (e.g. flat) takes the other channel's score.
        let suv = match (eu, ev) {
            (true, false) => sv,
            (false, true) => su,
            _ => (f64::from(su + sv) / 2.0) as f32,
        };
        for (full, s) in CHROMA_FEATURES.iter().zip([su, sv, suv]) {
            out.push((self.opts.feature_name(full), cap(s, self.max_val)));
        }
    }
}
