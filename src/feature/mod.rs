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
#[cfg(test)]
mod gpu_tests;
pub(crate) mod motion;
pub(crate) mod null;
pub(crate) mod options;
pub(crate) mod psnr;
pub(crate) mod psnr_hvs;
pub(crate) mod speed;
pub(crate) mod ssim;
use ssim::{float_ms_ssim, float_ssim};
pub(crate) mod vif;

/// See `float_adm`'s division: tests compare it with the reference host's.
#[doc(hidden)]
pub use float_adm::cpu::reciprocal_fingerprint as float_adm_reciprocal_fingerprint;
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
        /// Needs the previous distorted picture too (with PREV_REF).
        const PREV_DIST = 16;
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
    /// Distorted picture of the previously submitted frame (PREV_DIST extractors).
    pub prev_dist: Option<&'a Picture>,
    /// Instruction sets the CPU code may use.
    pub cpu: CpuLevel,
}

/// [`Extractor::host_planes`] masks (the picture's plane masks).
pub(crate) use crate::picture::{ALL_PLANES, LUMA};

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
            self.prev_dist,
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
            prev_dist: None,
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

    /// Every plane the extractor reads, on the host or on a GPU: a semi-planar frame in device
    /// memory has its chroma unpacked only when an extractor of the context reads it. All of
    /// them unless the extractor says less.
    fn planes_read(&self) -> u8 {
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

/// Makes an extractor from its options, on a GPU where it has a GPU version and one is given.
pub(crate) type Constructor = fn(&Dict, Option<GpuSet>) -> Result<Box<dyn Extractor>>;

/// One extractor of the registry: its name, the model features it provides (libvmaf's
/// `provided_features`, which maps a model's feature names to extractors) and how to make it.
pub(crate) struct Descriptor {
    /// The name `vmaf_use_feature` and `--feature` take.
    pub name: &'static str,
    /// Full feature names a model may ask for.
    pub provides: &'static [&'static str],
    /// Makes it with its options; extractors with a GPU version use `gpu` when given.
    pub create: Constructor,
}

/// Every extractor, in lookup order (the first that provides a model feature makes it). The
/// name list, creation and the feature lookup all come from here.
pub(crate) const REGISTRY: &[Descriptor] = &[
    Descriptor {
        name: "vif",
        provides: vif::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(vif::Vif::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "adm",
        provides: adm::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(adm::Adm::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "motion",
        provides: motion::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(motion::Motion::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "psnr",
        provides: psnr::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(psnr::Psnr::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "cambi",
        provides: cambi::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(cambi::Cambi::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "float_ssim",
        provides: float_ssim::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(float_ssim::FloatSsim::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "float_ms_ssim",
        provides: float_ms_ssim::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(float_ms_ssim::FloatMsSsim::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "speed_chroma",
        provides: speed::CHROMA_FEATURES,
        create: |o, gpu| Ok(Box::new(speed::SpeedChroma::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "speed_temporal",
        provides: speed::TEMPORAL_FEATURES,
        create: |o, gpu| Ok(Box::new(speed::SpeedTemporal::new(o)?.with_gpu(gpu))),
    },
    // CPU only from here on: no GPU version (the GPU state is not used).
    Descriptor {
        name: "psnr_hvs",
        provides: psnr_hvs::PROVIDED_FEATURES,
        create: |o, gpu| Ok(Box::new(psnr_hvs::PsnrHvs::new(o)?.with_gpu(gpu))),
    },
    Descriptor {
        name: "ciede",
        provides: ciede::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(ciede::Ciede::new(o)?)),
    },
    Descriptor {
        name: "float_motion",
        provides: float_motion::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_motion::FloatMotion::new(o)?)),
    },
    Descriptor {
        name: "float_vif",
        provides: float_vif::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_vif::FloatVif::new(o)?)),
    },
    Descriptor {
        name: "float_adm",
        provides: float_adm::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_adm::FloatAdm::new(o)?)),
    },
    Descriptor {
        name: "float_psnr",
        provides: float_psnr::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_psnr::FloatPsnr::new(o)?)),
    },
    Descriptor {
        name: "float_ansnr",
        provides: float_ansnr::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_ansnr::FloatAnsnr::new(o)?)),
    },
    Descriptor {
        name: "float_moment",
        provides: float_moment::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(float_moment::FloatMoment::new(o)?)),
    },
    Descriptor {
        name: "null",
        provides: null::PROVIDED_FEATURES,
        create: |o, _| Ok(Box::new(null::Null::new(o)?)),
    },
];

/// Names of every extractor `vmaf_use_feature` and `--feature` accept, in lookup order.
pub fn extractor_names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|d| d.name)
}

/// The registry entry of extractor `name`, or an error listing the known names.
pub(crate) fn descriptor(name: &str) -> Result<&'static Descriptor> {
    REGISTRY.iter().find(|d| d.name == name).ok_or_else(|| {
        Error::inval(format!(
            "no such feature extractor: {name} (known: {})",
            extractor_names().collect::<Vec<_>>().join(", ")
        ))
    })
}

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
    (descriptor(name)?.create)(opts, gpu.cloned())
}

/// Which extractor provides the model feature `feature_name` (a full name such as
/// `VMAF_integer_feature_adm2_score`), as libvmaf's provided-features lookup does.
pub(crate) fn extractor_for_feature(feature_name: &str) -> Option<&'static str> {
    REGISTRY
        .iter()
        .find(|d| d.provides.contains(&feature_name))
        .map(|d| d.name)
}
