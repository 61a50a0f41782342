//! `model.h`: loading VMAF models and bootstrap model collections.

use std::ffi::{c_char, c_int, c_uint};

use crate::error::{Error, Result};
use crate::ffi::feature::{take_dict, VmafFeatureDictionary};
use crate::ffi::{c_path, c_str, ffi_boundary, non_null};
use crate::model::{Model, ModelCollection, ModelConfig, ModelFlags};

/// Opaque loaded model.
pub type VmafModel = crate::model::Model;

/// Opaque bootstrap model collection.
pub type VmafModelCollection = crate::model::ModelCollection;

/// Load flags for `VmafModelConfig.flags` (bits may be combined).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafModelFlags {
    VMAF_MODEL_FLAGS_DEFAULT = 0,
    /// Do not clip predictions to the model's score range.
    VMAF_MODEL_FLAG_DISABLE_CLIP = 1,
    /// Apply the model's score transform.
    VMAF_MODEL_FLAG_ENABLE_TRANSFORM = 2,
    /// Never apply the score transform (used internally by bootstrap prediction).
    VMAF_MODEL_FLAG_DISABLE_TRANSFORM = 4,
}

/// How to load a model.
#[repr(C)]
pub struct VmafModelConfig {
    /// Name under which per-frame scores are stored and written; NULL means `"vmaf"`.
    pub name: *const c_char,
    /// `VmafModelFlags` bits.
    pub flags: u64,
}

/// Kind of score in a `VmafModelCollectionScore`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafModelCollectionScoreType {
    VMAF_MODEL_COLLECTION_SCORE_UNKNOWN = 0,
    VMAF_MODEL_COLLECTION_SCORE_BOOTSTRAP = 1,
}

/// `enum VmafModelCollectionScoreType` as it crosses the ABI.
pub type RawModelCollectionScoreType = c_uint;

/// A confidence interval.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct VmafConfidenceInterval {
    pub lo: f64,
    pub hi: f64,
}

/// Confidence intervals of a bootstrap score.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct VmafBootstrapCi {
    /// 95% interval.
    pub p95: VmafConfidenceInterval,
}

/// Summary of the member predictions of a bootstrap collection.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct VmafBootstrapScore {
    /// Mean of the member scores.
    pub bagging_score: f64,
    /// Standard deviation of the member scores.
    pub stddev: f64,
    pub ci: VmafBootstrapCi,
}

/// Score of a model collection (`score.bootstrap.ci.p95.lo` etc., as in libvmaf).
#[repr(C)]
pub struct VmafModelCollectionScore {
    /// `enum VmafModelCollectionScoreType`.
    pub r#type: RawModelCollectionScoreType,
    pub bootstrap: VmafBootstrapScore,
}

impl VmafModelCollectionScore {
    pub(crate) fn bootstrap(s: &crate::model::BootstrapScore) -> Self {
        VmafModelCollectionScore {
            r#type: VmafModelCollectionScoreType::VMAF_MODEL_COLLECTION_SCORE_BOOTSTRAP as c_uint,
            bootstrap: VmafBootstrapScore {
                bagging_score: s.bagging_score,
                stddev: s.stddev,
                ci: VmafBootstrapCi {
                    p95: VmafConfidenceInterval {
                        lo: s.ci_p95_lo,
                        hi: s.ci_p95_hi,
                    },
                },
            },
        }
    }
}

/// Reads a C model configuration.
///
/// # Safety
/// `cfg` is NULL or points to a valid `VmafModelConfig` whose `name` is NULL or a C string.
unsafe fn model_config(cfg: *const VmafModelConfig) -> Result<ModelConfig> {
    non_null(cfg, "model configuration")?;
    // SAFETY: non-NULL and valid (caller's contract).
    let cfg = unsafe { &*cfg };
    let name = if cfg.name.is_null() {
        None
    } else {
        // SAFETY: a NUL-terminated string (caller's contract).
        Some(unsafe { c_str(cfg.name, "model name") }?.to_string())
    };
    Ok(ModelConfig {
        name,
        flags: ModelFlags::from_bits_retain(cfg.flags),
    })
}

/// Stores `v` through the out-pointer `out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn store<T>(out: *mut *mut T, what: &str, v: T) -> Result<()> {
    non_null(out, what)?;
    // SAFETY: non-NULL and writable (caller's contract).
    unsafe { out.write(Box::into_raw(Box::new(v))) };
    Ok(())
}

/// Loads built-in model `version` (e.g. `"vmaf_v0.6.1"`, `"vmaf_4k_v0.6.1"`) into `*model`.
/// Returns 0, or -EINVAL for NULL arguments or an unknown version.
///
/// # Safety
/// Pointers are NULL or valid: `model` writable, `cfg` readable, `version` a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_load(
    model: *mut *mut VmafModel,
    cfg: *mut VmafModelConfig,
    version: *const c_char,
) -> c_int {
    ffi_boundary!("vmaf_model_load", {
        non_null(model, "model pointer")?;
        // SAFETY: valid or NULL (caller's contract).
        let (cfg, version) = unsafe { (model_config(cfg)?, c_str(version, "model version")?) };
        let m = Model::load(version, &cfg)?;
        // SAFETY: checked non-NULL above; writable (caller's contract).
        unsafe { store(model, "model pointer", m) }
    })
}

/// Loads a JSON model file into `*model`. Returns 0 or a negative errno (-EINVAL for NULL
/// arguments or an invalid file).
///
/// # Safety
/// Pointers are NULL or valid: `model` writable, `cfg` readable, `path` a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_load_from_path(
    model: *mut *mut VmafModel,
    cfg: *mut VmafModelConfig,
    path: *const c_char,
) -> c_int {
    ffi_boundary!("vmaf_model_load_from_path", {
        non_null(model, "model pointer")?;
        // SAFETY: valid or NULL (caller's contract).
        let (cfg, path) = unsafe { (model_config(cfg)?, c_path(path, "model path")?) };
        let m = Model::load_from_path(&path, &cfg)?;
        // SAFETY: checked non-NULL above; writable (caller's contract).
        unsafe { store(model, "model pointer", m) }
    })
}

/// Merges `opts_dict` into the options of every model feature computed by extractor
/// `feature_name` (e.g. `"adm"`), overriding values already set. Takes ownership of
/// `opts_dict` unless an argument is NULL. Returns 0 or a negative errno.
///
/// # Safety
/// `model` and `opts_dict` are NULL or live handles; `feature_name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_feature_overload(
    model: *mut VmafModel,
    feature_name: *const c_char,
    opts_dict: *mut VmafFeatureDictionary,
) -> c_int {
    ffi_boundary!("vmaf_model_feature_overload", {
        non_null(model, "model")?;
        non_null(opts_dict, "options dictionary")?;
        // SAFETY: a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "extractor name") }?;
        // SAFETY: live handle handed over by the caller.
        let opts = unsafe { take_dict(opts_dict) };
        // SAFETY: live handle (caller's contract).
        unsafe { &mut *model }.feature_overload(name, &opts)
    })
}

/// Frees a model (NULL is ignored).
///
/// # Safety
/// `model` is NULL or a live handle not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_destroy(model: *mut VmafModel) {
    ffi_boundary!("vmaf_model_destroy", {
        if !model.is_null() {
            // SAFETY: a live handle from vmaf_model_load*, given up by the caller.
            drop(unsafe { Box::from_raw(model) });
        }
    })
}

/// Loads built-in bootstrap collection `version` (e.g. `"vmaf_b_v0.6.3"`): `*model` receives
/// the main model, `*model_collection` the bootstrap members. Returns 0 or a negative errno.
///
/// # Safety
/// Pointers are NULL or valid: out-pointers writable, `cfg` readable, `version` a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_collection_load(
    model: *mut *mut VmafModel,
    model_collection: *mut *mut VmafModelCollection,
    cfg: *mut VmafModelConfig,
    version: *const c_char,
) -> c_int {
    ffi_boundary!("vmaf_model_collection_load", {
        non_null(model, "model pointer")?;
        non_null(model_collection, "model collection pointer")?;
        // SAFETY: valid or NULL (caller's contract).
        let (cfg, version) = unsafe { (model_config(cfg)?, c_str(version, "model version")?) };
        let (m, mc) = ModelCollection::load(version, &cfg)?;
        // SAFETY: checked non-NULL above; writable (caller's contract).
        unsafe {
            store(model, "model pointer", m)?;
            store(model_collection, "model collection pointer", mc)
        }
    })
}

/// Loads a JSON bootstrap collection file; see `vmaf_model_collection_load()`.
///
/// # Safety
/// Pointers are NULL or valid: out-pointers writable, `cfg` readable, `path` a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_collection_load_from_path(
    model: *mut *mut VmafModel,
    model_collection: *mut *mut VmafModelCollection,
    cfg: *mut VmafModelConfig,
    path: *const c_char,
) -> c_int {
    ffi_boundary!("vmaf_model_collection_load_from_path", {
        non_null(model, "model pointer")?;
        non_null(model_collection, "model collection pointer")?;
        // SAFETY: valid or NULL (caller's contract).
        let (cfg, path) = unsafe { (model_config(cfg)?, c_path(path, "model path")?) };
        let (m, mc) = ModelCollection::load_from_path(&path, &cfg)?;
        // SAFETY: checked non-NULL above; writable (caller's contract).
        unsafe {
            store(model, "model pointer", m)?;
            store(model_collection, "model collection pointer", mc)
        }
    })
}

/// `vmaf_model_feature_overload()` applied to every member of `*model_collection` and to
/// `model`. Takes ownership of `opts_dict` unless an argument is NULL.
///
/// # Safety
/// Handles are NULL or live; `model_collection` is NULL or points to a live handle;
/// `feature_name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_collection_feature_overload(
    model: *mut VmafModel,
    model_collection: *mut *mut VmafModelCollection,
    feature_name: *const c_char,
    opts_dict: *mut VmafFeatureDictionary,
) -> c_int {
    ffi_boundary!("vmaf_model_collection_feature_overload", {
        non_null(model_collection, "model collection pointer")?;
        // SAFETY: non-NULL, points to a handle (caller's contract).
        let mc = unsafe { *model_collection };
        non_null(mc, "model collection")?;
        non_null(model, "model")?;
        non_null(opts_dict, "options dictionary")?;
        // SAFETY: a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "extractor name") }?;
        // SAFETY: live handle handed over by the caller.
        let opts = unsafe { take_dict(opts_dict) };
        // SAFETY: live handles (caller's contract).
        let (mc, model) = unsafe { (&mut *mc, &mut *model) };
        let mut first_err: Option<Error> = None;
        for m in mc.models.iter_mut().chain(std::iter::once(model)) {
            if let Err(e) = m.feature_overload(name, &opts) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    })
}

/// Frees a model collection (NULL is ignored). The main model is freed separately.
///
/// # Safety
/// `model_collection` is NULL or a live handle not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn vmaf_model_collection_destroy(model_collection: *mut VmafModelCollection) {
    ffi_boundary!("vmaf_model_collection_destroy", {
        if !model_collection.is_null() {
            // SAFETY: a live handle from vmaf_model_collection_load*, given up by the caller.
            drop(unsafe { Box::from_raw(model_collection) });
        }
    })
}
