//! Feature extractors: one module per feature, CPU reference beside its GPU dispatch.
//!
//! An extractor is created from an options dictionary, computes per-frame scores from a
//! reference/distorted picture pair, and may finish scores at flush time (motion2).
//!
//! Only the SIMD files (`<name>/x86.rs`, `<name>/aarch64.rs`) may use `unsafe`, for calling
//! `#[target_feature]` kernels at a detected [`CpuLevel`] and for vector loads and stores; each
//! such file opts in with `#![allow(unsafe_code)]`.

#![deny(unsafe_code)]

use bitflags::bitflags;

use crate::collector::FeatureCollector;
use crate::error::{Error, Result};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::Picture;
use crate::simd::CpuLevel;

pub(crate) mod adm;
pub(crate) mod alias;
pub(crate) mod cambi;
pub(crate) mod ciede;
pub(crate) mod float_adm;
pub(crate) mod float_ansnr;
pub(crate) mod float_moment;
pub(crate) mod float_motion;
pub(crate) mod float_psnr;
pub(crate) mod float_vif;
pub(crate) mod motion;
pub(crate) mod null;
pub(crate) mod options;
pub(crate) mod psnr;
pub(crate) mod psnr_hvs;
pub(crate) mod speed;
pub(crate) mod ssim;
use ssim::{float_ms_ssim, float_ssim};
pub(crate) mod vif;

pub use options::Dict;

/// C's `MIN(a, b)`, `a < b ? a : b` (so `b` when either is NaN), as libvmaf clamps scores.
#[inline]
pub(crate) fn c_min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// C's `MAX(a, b)`, `a > b ? a : b` (so `b` when either is NaN).
#[inline]
pub(crate) fn c_max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}
pub(crate) use options::{OptSpec, OptValue, Opts};

bitflags! {
    /// Scheduling needs of an extractor (libvmaf's `VMAF_FEATURE_EXTRACTOR_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct ExtractorFlags: u32 {
        /// Stateful: must see every frame in order, on the submitting thread.
        const TEMPORAL = 1;
        /// Needs the previous reference picture(s); never subsampled.
        const PREV_REF = 8;
    }
}

/// What one `extract` call sees.
pub(crate) struct FrameInput<'a> {
    /// Frame index as submitted.
    pub index: usize,
    pub reference: &'a Picture,
    pub distorted: &'a Picture,
    /// Reference of the previously submitted frame (PREV_REF extractors).
    pub prev_ref: Option<&'a Picture>,
    /// Reference submitted two frames ago.
    pub prev_prev_ref: Option<&'a Picture>,
    /// Instruction sets the CPU code may use.
    pub cpu: CpuLevel,
}

/// [`Extractor::host_planes`] masks: bit `i` = plane `i`.
pub(crate) const LUMA: u8 = 0b001;
pub(crate) const ALL_PLANES: u8 = 0b111;

impl<'a> FrameInput<'a> {
    /// Makes host copies of the `mask` planes of every picture held in GPU memory, for an
    /// extractor about to read them on the CPU.
    pub(crate) fn fetch_host(&self, mask: u8) -> Result<()> {
        if mask == 0 {
            return Ok(());
        }
        [
            Some(self.reference),
            Some(self.distorted),
            self.prev_ref,
            self.prev_prev_ref,
        ]
        .into_iter()
        .flatten()
        .try_for_each(|p| p.fetch_host(mask))
    }

    /// Frame `index` of a picture pair, without previous references.
    #[cfg(test)]
    pub(crate) fn pair(index: usize, reference: &'a Picture, distorted: &'a Picture) -> Self {
        FrameInput {
            index,
            reference,
            distorted,
            prev_ref: None,
            prev_prev_ref: None,
            cpu: CpuLevel::default(),
        }
    }
}

/// Scores produced by one `extract` call: (stored feature name, value).
pub(crate) type Scores = Vec<(String, f64)>;

/// A configured feature extractor. `extract` may run on several threads at once for different
/// frames (unless TEMPORAL), so per-frame scratch memory is allocated inside the call.
pub(crate) trait Extractor: Send + Sync {
    /// Extractor name as registered (`"vif"`, `"adm"`, `"motion"`, `"psnr"`).
    fn name(&self) -> &'static str;

    /// Scheduling flags.
    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::empty()
    }

    /// Identity for deduplication: two registrations with the same key are the same extractor.
    /// By default the extractor name plus its stored feature names.
    fn dedup_key(&self) -> String {
        self.feature_name(self.name())
    }

    /// The name under which this instance stores the provided feature `full_name` (e.g.
    /// `VMAF_integer_feature_adm2_score` -> `integer_adm2_egl_1` when egl=1).
    fn feature_name(&self, full_name: &str) -> String {
        full_name.to_string()
    }

    /// The planes `extract` reads on the host (see [`FrameInput::fetch_host`]): all of them
    /// unless the extractor says less; 0 for work done on the GPU from device pictures.
    fn host_planes(&self) -> u8 {
        ALL_PLANES
    }

    /// Whether this extractor's per-frame work runs on a GPU (the host queues it and waits):
    /// such frames need no worker of their own to overlap, only a few frames in flight.
    fn on_gpu(&self) -> bool {
        false
    }

    /// Computes this frame's scores.
    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()>;

    /// Queues this frame's GPU work without waiting for it, so a frame's extractors keep the
    /// device busy back to back and CPU extractors run meanwhile; the returned closure waits
    /// and gives the scores `extract` would have written. None (the default): use `extract`.
    fn queue<'a>(&'a self, _input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        Ok(None)
    }

    /// Stream-level metrics for the writers' `aggregate_metrics` (e.g. `apsnr_y`).
    fn aggregate(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Called once at end of stream, after every frame's scores are in `collector`; may append
    /// more scores (motion2/motion3).
    fn flush(&self, _collector: &FeatureCollector) -> Result<()> {
        Ok(())
    }
}

/// Extractor names `vmaf_use_feature` accepts, in lookup order.
pub const EXTRACTOR_NAMES: &[&str] = &[
    "vif",
    "adm",
    "motion",
    "psnr",
    "cambi",
    "float_ssim",
    "float_ms_ssim",
    "speed_chroma",
    "speed_temporal",
    "psnr_hvs",
    "ciede",
    "float_motion",
    "float_vif",
    "float_adm",
    "float_psnr",
    "float_ansnr",
    "float_moment",
    "null",
];

/// Creates extractor `name` with `opts`, on the CPU.
pub(crate) fn create(name: &str, opts: &Dict) -> Result<Box<dyn Extractor>> {
    create_on(name, opts, None)
}

/// Creates extractor `name` with `opts`; with a GPU state, extractors that have a GPU version
/// use it (the others stay on the CPU).
pub(crate) fn create_on(
    name: &str,
    opts: &Dict,
    gpu: Option<&GpuSet>,
) -> Result<Box<dyn Extractor>> {
    let gpu = gpu.cloned();
    Ok(match name {
        "vif" => Box::new(vif::Vif::new(opts)?.with_gpu(gpu)),
        "adm" => Box::new(adm::Adm::new(opts)?.with_gpu(gpu)),
        "motion" => Box::new(motion::Motion::new(opts)?.with_gpu(gpu)),
        "psnr" => Box::new(psnr::Psnr::new(opts)?.with_gpu(gpu)),
        "float_ssim" => Box::new(float_ssim::FloatSsim::new(opts)?.with_gpu(gpu)),
        "float_ms_ssim" => Box::new(float_ms_ssim::FloatMsSsim::new(opts)?.with_gpu(gpu)),
        "cambi" => Box::new(cambi::Cambi::new(opts)?.with_gpu(gpu)),
        "speed_chroma" => Box::new(speed::SpeedChroma::new(opts)?),
        "speed_temporal" => Box::new(speed::SpeedTemporal::new(opts)?),
        "psnr_hvs" => Box::new(psnr_hvs::PsnrHvs::new(opts)?),
        "ciede" => Box::new(ciede::Ciede::new(opts)?),
        "float_motion" => Box::new(float_motion::FloatMotion::new(opts)?),
        "float_vif" => Box::new(float_vif::FloatVif::new(opts)?),
        "float_adm" => Box::new(float_adm::FloatAdm::new(opts)?),
        // CPU only: no GPU version.
        "float_psnr" => Box::new(float_psnr::FloatPsnr::new(opts)?),
        "float_ansnr" => Box::new(float_ansnr::FloatAnsnr::new(opts)?),
        "float_moment" => Box::new(float_moment::FloatMoment::new(opts)?),
        "null" => Box::new(null::Null::new(opts)?),
        _ => {
            return Err(Error::inval(format!(
                "no such feature extractor: {name} (known: {})",
                EXTRACTOR_NAMES.join(", ")
            )))
        }
    })
}

/// Which extractor provides the model feature `feature_name` (a full name such as
/// `VMAF_integer_feature_adm2_score`), as libvmaf's provided-features lookup does.
pub(crate) fn extractor_for_feature(feature_name: &str) -> Option<&'static str> {
    const TABLE: &[(&str, &[&str])] = &[
        ("vif", vif::PROVIDED_FEATURES),
        ("adm", adm::PROVIDED_FEATURES),
        ("motion", motion::PROVIDED_FEATURES),
        ("psnr", psnr::PROVIDED_FEATURES),
        ("float_ssim", float_ssim::PROVIDED_FEATURES),
        ("float_ms_ssim", float_ms_ssim::PROVIDED_FEATURES),
        ("cambi", cambi::PROVIDED_FEATURES),
        ("speed_chroma", speed::CHROMA_FEATURES),
        ("speed_temporal", speed::TEMPORAL_FEATURES),
        ("psnr_hvs", psnr_hvs::PROVIDED_FEATURES),
        ("ciede", ciede::PROVIDED_FEATURES),
        ("float_motion", float_motion::PROVIDED_FEATURES),
        ("float_vif", float_vif::PROVIDED_FEATURES),
        ("float_adm", float_adm::PROVIDED_FEATURES),
        ("float_psnr", float_psnr::PROVIDED_FEATURES),
        ("float_ansnr", float_ansnr::PROVIDED_FEATURES),
        ("float_moment", float_moment::PROVIDED_FEATURES),
        ("null", null::PROVIDED_FEATURES),
    ];
    TABLE
        .iter()
        .find(|(_, feats)| feats.contains(&feature_name))
        .map(|(n, _)| *n)
}
