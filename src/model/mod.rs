//! VMAF models: JSON parsing, the libsvm nu-SVR predictor, normalisation, transform, clipping and
//! bootstrap model collections. Built-in models are the JSON files under `models/`.

use bitflags::bitflags;

use crate::error::{Error, Result};
use crate::feature::Dict;

bitflags! {
    /// libvmaf's `enum VmafModelFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct ModelFlags: u64 {
        const DISABLE_CLIP = 1;
        const ENABLE_TRANSFORM = 2;
        const DISABLE_TRANSFORM = 4;
    }
}

/// How to load a model (libvmaf's `VmafModelConfig`).
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    /// Name under which scores are stored; `None` means `"vmaf"`.
    pub name: Option<String>,
    pub flags: ModelFlags,
}

/// One feature a model reads: its full name and the extractor options that go with it.
#[derive(Debug, Clone)]
pub struct ModelFeature {
    /// Full provided feature name, e.g. `VMAF_integer_feature_adm2_score`.
    pub name: String,
    /// Extractor options from `feature_opts_dicts` plus overloads.
    pub opts: Dict,
}

/// A loaded model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Feature name under which predictions are stored.
    pub name: String,
    /// Features in libsvm node order.
    pub features: Vec<ModelFeature>,
}

impl Model {
    /// Loads built-in model `version`.
    pub fn load(_version: &str, _cfg: &ModelConfig) -> Result<Model> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }

    /// Loads a model JSON file.
    pub fn load_from_path(_path: &std::path::Path, _cfg: &ModelConfig) -> Result<Model> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }

    /// Merges `opts` into the options of every feature provided by extractor `extractor_name`.
    pub fn feature_overload(&mut self, _extractor_name: &str, _opts: &Dict) -> Result<()> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }

    /// Predicts one frame's score from its feature values (in `self.features` order), applying
    /// normalisation, SVM, denormalisation, transform and clip as configured (`flags` may add
    /// DISABLE_TRANSFORM / DISABLE_CLIP-like behaviour used by bootstrap).
    pub fn predict(&self, _values: &[f64], _flags: ModelFlags) -> Result<f64> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }
}

/// libvmaf's `VmafModelCollectionScore` contents for a bootstrap collection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BootstrapScore {
    pub bagging_score: f64,
    pub stddev: f64,
    pub ci_p95_lo: f64,
    pub ci_p95_hi: f64,
}

/// A bootstrap model collection (`vmaf_b_v0.6.3`).
#[derive(Debug, Clone)]
pub struct ModelCollection {
    /// Collection name (scores stored as `<name>_bagging` etc.).
    pub name: String,
    /// Member models, named `<name>_0001`…
    pub models: Vec<Model>,
}

impl ModelCollection {
    /// Loads built-in collection `version`: model `"0"` as the main model (named `cfg.name`),
    /// the others as the collection (libvmaf's `vmaf_model_collection_load`).
    pub fn load(_version: &str, _cfg: &ModelConfig) -> Result<(Model, ModelCollection)> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }

    /// Loads a collection JSON file (libvmaf's `vmaf_model_collection_load_from_path`).
    pub fn load_from_path(
        _path: &std::path::Path,
        _cfg: &ModelConfig,
    ) -> Result<(Model, ModelCollection)> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }

    /// Predicts one frame with every member: returns each member's ordinary (clipped,
    /// transformed) score in member order and the bootstrap summary. `values[i]` are member
    /// `i`'s feature values in its feature order.
    pub fn predict(&self, _values: &[Vec<f64>]) -> Result<(Vec<f64>, BootstrapScore)> {
        Err(Error::NotSupported("models not implemented yet".into()))
    }
}
