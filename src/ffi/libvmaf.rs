//! `libvmaf.h`: the scoring context.

use std::cell::UnsafeCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_uint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use crate::context::{Config, Context};
use crate::error::{Error, Result};
use crate::ffi::feature::{take_dict, VmafFeatureDictionary};
use crate::ffi::model::{VmafModel, VmafModelCollection, VmafModelCollectionScore};
use crate::ffi::picture::{
    export_picture, new_picture_data, release_picture, shared_picture, VmafPicture,
};
use crate::ffi::{c_path, c_str, ffi_boundary, non_null, pool};
use crate::log::LogLevel;
use crate::output::OutputFormat;
use crate::pooling::PoolingMethod;

/// Log verbosity (process-wide, set by `vmaf_init()`); messages go to stderr.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafLogLevel {
    VMAF_LOG_LEVEL_NONE = 0,
    VMAF_LOG_LEVEL_ERROR = 1,
    VMAF_LOG_LEVEL_WARNING = 2,
    VMAF_LOG_LEVEL_INFO = 3,
    VMAF_LOG_LEVEL_DEBUG = 4,
}

/// `enum VmafLogLevel` as it crosses the ABI.
pub type RawLogLevel = c_uint;

/// Formats of `vmaf_write_output()`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafOutputFormat {
    VMAF_OUTPUT_FORMAT_NONE = 0,
    VMAF_OUTPUT_FORMAT_XML = 1,
    VMAF_OUTPUT_FORMAT_JSON = 2,
    VMAF_OUTPUT_FORMAT_CSV = 3,
    VMAF_OUTPUT_FORMAT_SUB = 4,
}

/// `enum VmafOutputFormat` as it crosses the ABI.
pub type RawOutputFormat = c_uint;

/// How per-frame scores are pooled over a range of frames.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafPoolingMethod {
    VMAF_POOL_METHOD_UNKNOWN = 0,
    VMAF_POOL_METHOD_MIN = 1,
    VMAF_POOL_METHOD_MAX = 2,
    VMAF_POOL_METHOD_MEAN = 3,
    /// `n / sum(1 / (score + 1)) - 1`.
    VMAF_POOL_METHOD_HARMONIC_MEAN = 4,
    /// Number of methods (not a method).
    VMAF_POOL_METHOD_NB = 5,
}

/// `enum VmafPoolingMethod` as it crosses the ABI.
pub type RawPoolingMethod = c_uint;

/// Settings of a context, passed by value to `vmaf_init()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafConfiguration {
    /// `enum VmafLogLevel`.
    pub log_level: RawLogLevel,
    /// Worker threads for feature extraction; 0 extracts on the calling thread.
    pub n_threads: c_uint,
    /// Score only every n-th frame (0 and 1 score every frame).
    pub n_subsample: c_uint,
    /// CPU features to disable, upstream's bits: they lower the SIMD level (8 = no AVX2,
    /// 16 = no AVX-512, 1 = no NEON, 255 = scalar). Scores are the same at every level.
    pub cpumask: u64,
    /// Non-zero disables GPU extraction.
    pub gpumask: u64,
}

/// Opaque scoring context: the Rust context plus a flag that catches concurrent calls.
pub struct VmafContext {
    busy: AtomicBool,
    ctx: UnsafeCell<Context>,
}

impl VmafContext {
    /// A live handle for `ctx`: boxed and registered, so calls accept it until
    /// [`release_handle`] (in `vmaf_close`) unregisters and frees it.
    pub(crate) fn into_handle(ctx: Context) -> *mut VmafContext {
        let raw = Box::into_raw(Box::new(VmafContext {
            busy: AtomicBool::new(false),
            ctx: UnsafeCell::new(ctx),
        }));
        live_handles().insert(raw as usize);
        raw
    }
}

/// The addresses of the handles `vmaf_init` gave out and `vmaf_close` has not freed. A call
/// with any other pointer (a second `vmaf_close`, a stale copy) gets -EINVAL without a read of
/// the memory it points at. A freed address that a later `vmaf_init` hands out again is live
/// again: the guard catches the common mistakes, not every use of a dangling pointer.
static LIVE_HANDLES: RwLock<Option<HashSet<usize>>> = RwLock::new(None);

fn live_handles() -> LiveSetMut {
    LiveSetMut(LIVE_HANDLES.write().unwrap_or_else(|e| e.into_inner()))
}

/// Write access to the live set (created on first use).
struct LiveSetMut(std::sync::RwLockWriteGuard<'static, Option<HashSet<usize>>>);

impl LiveSetMut {
    fn insert(&mut self, handle: usize) {
        self.0.get_or_insert_with(HashSet::new).insert(handle);
    }

    fn remove(&mut self, handle: usize) -> bool {
        self.0.as_mut().is_some_and(|set| set.remove(&handle))
    }
}

/// Unregisters and frees a handle whose context the caller holds (its busy flag set).
///
/// # Safety
/// `vmaf` is a live handle from [`VmafContext::into_handle`], borrowed by no other call.
unsafe fn release_handle(vmaf: *mut VmafContext) {
    // Waits for calls still checking the handle; none can find it afterwards.
    live_handles().remove(vmaf as usize);
    // SAFETY: live and from `Box::into_raw` (caller's contract); unregistered above, so no
    // other call can reach it any more.
    drop(unsafe { Box::from_raw(vmaf) });
}

/// Exclusive use of a context for one C call; ends (and frees the context for the next call)
/// on drop.
pub(crate) struct ContextGuard<'a> {
    handle: &'a VmafContext,
}

impl std::ops::Deref for ContextGuard<'_> {
    type Target = Context;
    fn deref(&self) -> &Context {
        // SAFETY: the busy flag, set by `context()` and cleared only by this guard's drop,
        // gives this guard the only access to the cell.
        unsafe { &*self.handle.ctx.get() }
    }
}

impl std::ops::DerefMut for ContextGuard<'_> {
    fn deref_mut(&mut self) -> &mut Context {
        // SAFETY: as in `deref`; `&mut self` keeps the borrow unique.
        unsafe { &mut *self.handle.ctx.get() }
    }
}

impl Drop for ContextGuard<'_> {
    fn drop(&mut self) {
        self.handle.busy.store(false, Ordering::Release);
    }
}

/// Size and layout of preallocated pictures.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafPictureParams {
    /// Luma width.
    pub w: c_uint,
    /// Luma height.
    pub h: c_uint,
    /// Bits per sample, 8 to 16.
    pub bpc: c_uint,
    /// `enum VmafPixelFormat`.
    pub pix_fmt: crate::ffi::picture::RawPixelFormat,
}

/// Argument of `vmaf_preallocate_pictures()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafPictureConfiguration {
    pub pic_params: VmafPictureParams,
    /// Number of pictures in the pool.
    pub pic_cnt: c_uint,
}

/// Borrows the context behind a handle for one call. A call made while another thread is
/// inside one on the same context fails with -EBUSY instead of racing it (libvmaf contexts are
/// not thread-safe; upstream gives undefined results).
///
/// # Safety
/// `vmaf` is NULL or a live handle from `vmaf_init()`.
pub(crate) unsafe fn context<'a>(vmaf: *mut VmafContext) -> Result<ContextGuard<'a>> {
    non_null(vmaf, "context")?;
    // Held while the busy flag is taken, so `vmaf_close` cannot free the handle in between.
    let live = LIVE_HANDLES.read().unwrap_or_else(|e| e.into_inner());
    if !live
        .as_ref()
        .is_some_and(|set| set.contains(&(vmaf as usize)))
    {
        return Err(Error::inval(
            "not a live context (closed already, or not from vmaf_init)",
        ));
    }
    // SAFETY: registered, so live until `release_handle`, which waits for `live`; only the
    // atomic flag is touched before the guard is made.
    let handle = unsafe { &*vmaf };
    let taken = handle
        .busy
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed);
    drop(live);
    if taken.is_err() {
        return Err(Error::Busy(
            "the context is in use by another thread (calls on one context must not overlap)"
                .into(),
        ));
    }
    Ok(ContextGuard { handle })
}

/// Writes through a non-NULL out-pointer.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn put<T>(out: *mut T, what: &str, v: T) -> Result<()> {
    non_null(out, what)?;
    // SAFETY: non-NULL and writable (caller's contract).
    unsafe { out.write(v) };
    Ok(())
}

fn pooling_method(raw: RawPoolingMethod) -> Result<PoolingMethod> {
    PoolingMethod::from_raw(raw)
        .ok_or_else(|| Error::inval(format!("invalid pooling method {raw}")))
}

fn output_format(raw: RawOutputFormat) -> Result<OutputFormat> {
    Ok(match raw {
        1 => OutputFormat::Xml,
        2 => OutputFormat::Json,
        3 => OutputFormat::Csv,
        4 => OutputFormat::Sub,
        _ => return Err(Error::inval(format!("invalid output format {raw}"))),
    })
}

fn index_range(lo: c_uint, hi: c_uint) -> Result<(usize, usize)> {
    if lo > hi {
        return Err(Error::inval(format!("index range {lo}..{hi} is empty")));
    }
    Ok((lo as usize, hi as usize))
}

/// Creates a context in `*vmaf` with settings `cfg` (which also set the process-wide log
/// level). Returns 0, -EINVAL when `vmaf` is NULL or `cfg.n_threads` exceeds 1024, or -ENOMEM
/// when the worker threads cannot be started.
///
/// # Safety
/// `vmaf` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_init(vmaf: *mut *mut VmafContext, cfg: VmafConfiguration) -> c_int {
    ffi_boundary!("vmaf_init", {
        non_null(vmaf, "context pointer")?;
        let ctx = Context::new(Config {
            log_level: LogLevel::from_raw(cfg.log_level),
            n_threads: cfg.n_threads,
            n_subsample: cfg.n_subsample,
            cpumask: cfg.cpumask,
            gpumask: cfg.gpumask,
        })?;
        // SAFETY: non-NULL and writable (caller's contract).
        unsafe { put(vmaf, "context pointer", VmafContext::into_handle(ctx)) }
    })
}

/// Registers the feature extractors `model` needs (with the model's options). Call before the
/// first picture. Returns 0 or -EINVAL.
///
/// # Safety
/// Handles are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn vmaf_use_features_from_model(
    vmaf: *mut VmafContext,
    model: *mut VmafModel,
) -> c_int {
    ffi_boundary!("vmaf_use_features_from_model", {
        // SAFETY: live or NULL handle (caller's contract).
        let mut ctx = unsafe { context(vmaf) }?;
        non_null(model, "model")?;
        // SAFETY: live handle (caller's contract).
        ctx.use_features_from_model(unsafe { &*model })
    })
}

/// Registers the feature extractors every model of `model_collection` needs.
/// Returns 0 or -EINVAL.
///
/// # Safety
/// Handles are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn vmaf_use_features_from_model_collection(
    vmaf: *mut VmafContext,
    model_collection: *mut VmafModelCollection,
) -> c_int {
    ffi_boundary!("vmaf_use_features_from_model_collection", {
        // SAFETY: live or NULL handle (caller's contract).
        let mut ctx = unsafe { context(vmaf) }?;
        non_null(model_collection, "model collection")?;
        // SAFETY: live handle (caller's contract).
        ctx.use_features_from_model_collection(unsafe { &*model_collection })
    })
}

/// Registers extractor `feature_name` (e.g. `"psnr"`, `"float_ssim"`, `"cambi"`) with options
/// `opts_dict` (may be NULL). Takes ownership of `opts_dict` once the name is known.
/// Returns 0, or -EINVAL for NULL arguments, an unknown extractor or invalid options.
///
/// # Safety
/// `vmaf` and `opts_dict` are NULL or live handles; `feature_name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_use_feature(
    vmaf: *mut VmafContext,
    feature_name: *const c_char,
    opts_dict: *mut VmafFeatureDictionary,
) -> c_int {
    ffi_boundary!("vmaf_use_feature", {
        // SAFETY: live or NULL handle (caller's contract).
        let mut ctx = unsafe { context(vmaf) }?;
        // SAFETY: NULL or a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "feature name") }?;
        // An unknown name leaves the dictionary with the caller, as in libvmaf.
        crate::feature::descriptor(name)?;
        // SAFETY: NULL or a live handle handed over by the caller.
        let opts = unsafe { take_dict(opts_dict) };
        ctx.use_feature(name, &opts)
    })
}

/// Stores an externally computed score `value` of feature `feature_name` for frame `index`.
/// Returns 0, -EINVAL (NULL arguments, a score already stored there, or `index` not below
/// 2^26), or -ENOMEM when the feature's score vector cannot grow to `index`.
///
/// # Safety
/// `vmaf` is NULL or live; `feature_name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_import_feature_score(
    vmaf: *mut VmafContext,
    feature_name: *const c_char,
    value: f64,
    index: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_import_feature_score", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        // SAFETY: NULL or a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "feature name") }?;
        ctx.import_feature_score(name, value, index as usize)
    })
}

/// Scores frame `index` of `ref` (reference) against `dist` (distorted). Takes over both
/// pictures: they are released and zeroed whether or not the call succeeds, so the caller never
/// unrefs them, except where the call reads no pair: -EBUSY, exactly one NULL picture and a
/// call after the flush leave them with the caller. Planes are read where `data[]` points, with
/// `stride[]` (a caller may point them at its own memory; they are copied then). Passing two
/// NULL pictures flushes (end of stream; needed before model scores are available); afterwards
/// every call returns -EINVAL. Returns 0; -EINVAL for exactly one NULL picture, released
/// pictures, changed size/format/depth fields, NULL plane pointers or strides below a row,
/// pictures that differ from each other or from the first pair, an `index` not below 2^26, or a
/// call after the flush; -EBUSY (pictures left untouched) while another thread is inside a call
/// on the same context; -ENOMEM when pictures or scores cannot be stored; or a negative errno
/// from the GPU (-EIO, -ENODEV, -ENOMEM) for this or an earlier queued frame.
///
/// # Safety
/// `vmaf` is NULL or live; `ref` and `dist` are NULL or pictures filled by this library.
#[no_mangle]
pub unsafe extern "C" fn vmaf_read_pictures(
    vmaf: *mut VmafContext,
    r#ref: *mut VmafPicture,
    dist: *mut VmafPicture,
    index: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_read_pictures", {
        // SAFETY: live or NULL handle (caller's contract).
        let mut ctx = unsafe { context(vmaf) }?;
        if ctx.is_flushed() {
            return Err(Error::inval("pictures read after the flush"));
        }
        match (r#ref.is_null(), dist.is_null()) {
            (true, true) => return ctx.flush(),
            (false, false) => {}
            _ => {
                return Err(Error::inval(
                    "one picture is NULL (pass two NULL pictures to flush)",
                ))
            }
        }
        // SAFETY: non-NULL pictures filled by this library (caller's contract); the same
        // struct passed twice is borrowed once.
        let (r, d) = unsafe { (&mut *r#ref, (dist != r#ref).then(|| &mut *dist)) };
        // SAFETY: as above; their refs are live or NULL.
        let shared = unsafe {
            let rs = shared_picture(r, "reference");
            let ds = match &d {
                Some(d) => shared_picture(d, "distorted"),
                None => rs
                    .as_ref()
                    .map(Clone::clone)
                    .map_err(|e| Error::inval(e.to_string())),
            };
            (rs, ds)
        };
        // The caller gives both up in every case; a NULL ref just stays as it is.
        // SAFETY: as above.
        unsafe {
            let _ = release_picture(r);
            if let Some(d) = d {
                let _ = release_picture(d);
            }
        }
        ctx.read_pictures(shared.0?, shared.1?, index as usize)
    })
}

/// The score of `model` for frame `index` in `*score` (predicted and stored on first use).
/// Returns 0, or -EINVAL for NULL arguments or missing features (before the flush, motion
/// features are not complete).
///
/// # Safety
/// Handles are NULL or live; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_score_at_index(
    vmaf: *mut VmafContext,
    model: *mut VmafModel,
    score: *mut f64,
    index: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_score_at_index", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        non_null(model, "model")?;
        non_null(score, "score")?;
        // SAFETY: live handle (caller's contract).
        let v = ctx.score_at_index(unsafe { &*model }, index as usize)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", v) }
    })
}

/// The bootstrap score of `model_collection` for frame `index` in `*score`.
/// Returns 0 or -EINVAL.
///
/// # Safety
/// Handles are NULL or live; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_score_at_index_model_collection(
    vmaf: *mut VmafContext,
    model_collection: *mut VmafModelCollection,
    score: *mut VmafModelCollectionScore,
    index: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_score_at_index_model_collection", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        non_null(model_collection, "model collection")?;
        non_null(score, "score")?;
        // SAFETY: live handle (caller's contract).
        let s =
            ctx.score_at_index_model_collection(unsafe { &*model_collection }, index as usize)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", VmafModelCollectionScore::bootstrap(&s)) }
    })
}

/// The stored score of feature `feature_name` (full name, e.g.
/// `"VMAF_integer_feature_vif_scale0_score"` or `"psnr_y"`) for frame `index` in `*score`.
/// Returns 0 or -EINVAL.
///
/// # Safety
/// `vmaf` is NULL or live; `feature_name` is NULL or a C string; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_feature_score_at_index(
    vmaf: *mut VmafContext,
    feature_name: *const c_char,
    score: *mut f64,
    index: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_feature_score_at_index", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        // SAFETY: NULL or a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "feature name") }?;
        non_null(score, "score")?;
        let v = ctx.feature_score_at_index(name, index as usize)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", v) }
    })
}

/// `model`'s scores of frames `index_low..=index_high` (predicted as needed), pooled with
/// `pool_method`, in `*score`. Returns 0 or -EINVAL.
///
/// # Safety
/// Handles are NULL or live; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_score_pooled(
    vmaf: *mut VmafContext,
    model: *mut VmafModel,
    pool_method: RawPoolingMethod,
    score: *mut f64,
    index_low: c_uint,
    index_high: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_score_pooled", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        non_null(model, "model")?;
        non_null(score, "score")?;
        let (lo, hi) = index_range(index_low, index_high)?;
        let method = pooling_method(pool_method)?;
        // SAFETY: live handle (caller's contract).
        let v = ctx.score_pooled(unsafe { &*model }, method, lo, hi)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", v) }
    })
}

/// Bootstrap scores of `model_collection` over `index_low..=index_high`, each of the four
/// values pooled with `pool_method`, in `*score`. Returns 0 or -EINVAL.
///
/// # Safety
/// Handles are NULL or live; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_score_pooled_model_collection(
    vmaf: *mut VmafContext,
    model_collection: *mut VmafModelCollection,
    pool_method: RawPoolingMethod,
    score: *mut VmafModelCollectionScore,
    index_low: c_uint,
    index_high: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_score_pooled_model_collection", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        non_null(model_collection, "model collection")?;
        non_null(score, "score")?;
        let (lo, hi) = index_range(index_low, index_high)?;
        let method = pooling_method(pool_method)?;
        // SAFETY: live handle (caller's contract).
        let s = ctx.score_pooled_model_collection(unsafe { &*model_collection }, method, lo, hi)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", VmafModelCollectionScore::bootstrap(&s)) }
    })
}

/// Stored feature `feature_name` over `index_low..=index_high`, pooled with `pool_method`, in
/// `*score`. Returns 0 or -EINVAL.
///
/// # Safety
/// `vmaf` is NULL or live; `feature_name` is NULL or a C string; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_feature_score_pooled(
    vmaf: *mut VmafContext,
    feature_name: *const c_char,
    pool_method: RawPoolingMethod,
    score: *mut f64,
    index_low: c_uint,
    index_high: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_feature_score_pooled", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        // SAFETY: NULL or a C string (caller's contract).
        let name = unsafe { c_str(feature_name, "feature name") }?;
        non_null(score, "score")?;
        let (lo, hi) = index_range(index_low, index_high)?;
        let method = pooling_method(pool_method)?;
        let v = ctx.feature_score_pooled(name, method, lo, hi)?;
        // SAFETY: checked non-NULL; writable (caller's contract).
        unsafe { put(score, "score", v) }
    })
}

/// Allocates `cfg.pic_cnt` pictures for `vmaf_fetch_preallocated_picture()` (replacing an
/// earlier pool); on a context with an imported GPU state, pictures of 1 MiB and more are
/// page-locked now where the system allows it, so their uploads need no staging copy. Returns 0,
/// -EINVAL for a zero count or size, a count above 1024, a side above 65536, an unknown format
/// or a depth outside 8..16, -EBUSY while another call runs on the context, or -ENOMEM when the
/// pictures cannot be allocated (those already allocated are freed and an earlier pool stays in
/// place).
///
/// # Safety
/// `vmaf` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn vmaf_preallocate_pictures(
    vmaf: *mut VmafContext,
    cfg: VmafPictureConfiguration,
) -> c_int {
    ffi_boundary!("vmaf_preallocate_pictures", {
        non_null(vmaf, "context")?;
        if cfg.pic_cnt == 0 {
            return Err(Error::inval("pic_cnt is 0"));
        }
        let p = cfg.pic_params;
        // SAFETY: live (caller's contract); the guard makes its use exclusive.
        let dev = unsafe { context(vmaf) }?
            .gpu_set()
            .map(|g| g.states()[0].device().clone());
        pool::preallocate_host(vmaf as usize, cfg.pic_cnt as usize, dev, move || {
            new_picture_data(p.pix_fmt, p.bpc, p.w, p.h)
        })
    })
}

/// Takes a picture from the pool into `*pic`, blocking while every pooled picture is in use (a
/// pool that runs dry first makes up to three pictures more, once, for the previous pictures a
/// context keeps).
/// It returns to the pool when released (by `vmaf_picture_unref()` or after
/// `vmaf_read_pictures()` is done with it). Sample contents are not cleared. Safe to call from
/// several threads. Returns 0, or -EINVAL for NULL arguments, no pool, or a pool closed by
/// `vmaf_close()` while waiting.
///
/// # Safety
/// `vmaf` is NULL or live; `pic` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_fetch_preallocated_picture(
    vmaf: *mut VmafContext,
    pic: *mut VmafPicture,
) -> c_int {
    ffi_boundary!("vmaf_fetch_preallocated_picture", {
        // SAFETY: forwarded caller's contract.
        unsafe { fetch_pooled(vmaf, pic) }
    })
}

/// Takes a picture from the pool of `vmaf` into `*pic` (blocking while none is free).
///
/// # Safety
/// `vmaf` is NULL or live; `pic` is NULL or writable.
pub(crate) unsafe fn fetch_pooled(vmaf: *mut VmafContext, pic: *mut VmafPicture) -> Result<()> {
    // The context itself is never dereferenced here: other threads may be using it.
    non_null(vmaf, "context")?;
    non_null(pic, "picture")?;
    let data = pool::get(vmaf as usize)?.fetch()?;
    let out = export_picture(data)?;
    // SAFETY: non-NULL and writable (caller's contract); the old content is not read.
    unsafe { pic.write(out) };
    Ok(())
}

/// Waits for queued extraction, then frees the context (models are freed separately).
/// Unlike libvmaf, it does not wait for preallocated pictures the caller still holds: those
/// stay valid and are freed when released, and threads blocked in
/// `vmaf_fetch_preallocated_picture()` get -EINVAL. Returns 0, or -EINVAL when `vmaf` is NULL
/// or not a live context (a second `vmaf_close` on the same pointer is refused, not a read of
/// freed memory).
///
/// # Safety
/// `vmaf` is NULL or a live handle not used afterwards (nor concurrently, except by fetches).
#[no_mangle]
pub unsafe extern "C" fn vmaf_close(vmaf: *mut VmafContext) -> c_int {
    ffi_boundary!("vmaf_close", {
        // Refuse while a call is running on another thread: freeing under it would crash.
        // SAFETY: live or NULL handle (caller's contract).
        let guard = unsafe { context(vmaf) }?;
        std::mem::forget(guard);
        let out = pool::close(vmaf as usize);
        if out > 0 {
            crate::log_warn!(
                "vmaf_close: {out} preallocated picture(s) not released yet; freed on release"
            );
        }
        let t = std::time::Instant::now();
        // SAFETY: live (checked by `context`) and held by this call (the forgotten guard).
        unsafe { release_handle(vmaf) };
        crate::log_debug!("vmaf_close: context released in {:.1?}", t.elapsed());
        Ok(())
    })
}

/// Writes every per-frame score and the pooled scores to `output_path` in format `fmt`
/// (call `vmaf_score_pooled()` first so model scores are included).
/// Returns 0, or -EINVAL for NULL arguments, an invalid format or a file that cannot be written.
///
/// # Safety
/// `vmaf` is NULL or live; `output_path` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn vmaf_write_output(
    vmaf: *mut VmafContext,
    output_path: *const c_char,
    fmt: RawOutputFormat,
) -> c_int {
    ffi_boundary!("vmaf_write_output", {
        // SAFETY: live or NULL handle (caller's contract).
        let ctx = unsafe { context(vmaf) }?;
        // SAFETY: NULL or a C string (caller's contract).
        let path = unsafe { c_path(output_path, "output path") }?;
        let fmt = output_format(fmt)?;
        ctx.write_output(&path, fmt).map_err(|e| match e {
            Error::Io { .. } => Error::inval(e.to_string()),
            e => e,
        })
    })
}

/// The library version, e.g. `"3.2.0"` (static string).
#[no_mangle]
pub extern "C" fn vmaf_version() -> *const c_char {
    ffi_boundary!("vmaf_version", {
        static VERSION: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
        VERSION
            .get_or_init(|| std::ffi::CString::new(crate::VMAF_VERSION).unwrap_or_default())
            .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::picture::{vmaf_picture_alloc, vmaf_picture_unref};

    fn config(n_threads: u32) -> VmafConfiguration {
        VmafConfiguration {
            log_level: 0,
            n_threads,
            n_subsample: 1,
            cpumask: 0,
            gpumask: 0,
        }
    }

    /// A context with the psnr extractor.
    fn psnr_context() -> *mut VmafContext {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the name is a C string literal.
        unsafe {
            assert_eq!(vmaf_init(&mut ctx, config(0)), 0);
            assert_eq!(
                vmaf_use_feature(ctx, c"psnr".as_ptr(), std::ptr::null_mut()),
                0
            );
        }
        ctx
    }

    fn alloc(w: u32, h: u32) -> VmafPicture {
        // SAFETY: all-zero is the empty VmafPicture.
        let mut p: VmafPicture = unsafe { std::mem::zeroed() };
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { vmaf_picture_alloc(&mut p, 1, 8, w, h) }, 0);
        p
    }

    /// Writes `f(x, y)` into every plane of `p` through its own pointers.
    fn fill(p: &VmafPicture, f: impl Fn(usize, usize) -> u8) {
        for i in 0..3 {
            for y in 0..p.h[i] as usize {
                for x in 0..p.w[i] as usize {
                    // SAFETY: inside plane `i` as vmaf_picture_alloc laid it out.
                    unsafe {
                        *p.data[i]
                            .cast::<u8>()
                            .offset(y as isize * p.stride[i])
                            .add(x) = f(x, y)
                    };
                }
            }
        }
    }

    fn psnr_y(ctx: *mut VmafContext) -> f64 {
        let mut v = 0.0;
        // SAFETY: live context, valid out-pointer.
        let rc = unsafe { vmaf_feature_score_at_index(ctx, c"psnr_y".as_ptr(), &mut v, 0) };
        assert_eq!(rc, 0);
        v
    }

    /// A call that overlaps another call on the same context fails with -EBUSY (here the
    /// other call is simulated by holding the context's guard) and changes nothing; afterwards
    /// the context works.
    #[test]
    fn overlapping_calls_get_ebusy() {
        let ctx = psnr_context();
        let (mut r, mut d) = (alloc(64, 48), alloc(64, 48));
        fill(&d, |x, _| (x % 7) as u8);
        {
            // SAFETY: live context.
            let _busy = unsafe { context(ctx) }.unwrap();
            // SAFETY: live context and pictures.
            unsafe {
                assert_eq!(vmaf_read_pictures(ctx, &mut r, &mut d, 0), -libc::EBUSY);
                assert_eq!(
                    vmaf_use_feature(ctx, c"psnr".as_ptr(), std::ptr::null_mut()),
                    -libc::EBUSY
                );
                assert_eq!(vmaf_close(ctx), -libc::EBUSY);
            }
        }
        // The refused call did nothing: the pictures are still the caller's, to submit again.
        assert!(!r.r#ref.is_null() && !d.r#ref.is_null());
        // SAFETY: live context and pictures; NULL pairs flush.
        unsafe {
            assert_eq!(vmaf_read_pictures(ctx, &mut r, &mut d, 0), 0);
            assert_eq!(
                vmaf_read_pictures(ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0),
                0
            );
        }
        assert!(psnr_y(ctx) > 0.0);
        // SAFETY: live context, closed once.
        assert_eq!(unsafe { vmaf_close(ctx) }, 0);
    }

    /// Planes the caller points elsewhere (own buffer, own stride) are scored from there, as
    /// libvmaf reads what `data[]` points to: the same PSNR as the same samples written into
    /// the allocated planes.
    #[test]
    fn moved_data_pointers_are_honoured() {
        let content = |x: usize, y: usize| ((x * 3 + y * 5) % 251) as u8;
        let noisy = |x: usize, y: usize| ((x * 3 + y * 5 + (x ^ y) % 5) % 251) as u8;
        let (w, h) = (64usize, 48usize);

        let expected = {
            let ctx = psnr_context();
            let (mut r, mut d) = (alloc(64, 48), alloc(64, 48));
            fill(&r, content);
            fill(&d, noisy);
            // SAFETY: live context and pictures.
            unsafe {
                assert_eq!(vmaf_read_pictures(ctx, &mut r, &mut d, 0), 0);
                assert_eq!(
                    vmaf_read_pictures(ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0),
                    0
                );
            }
            let v = psnr_y(ctx);
            // SAFETY: live context.
            assert_eq!(unsafe { vmaf_close(ctx) }, 0);
            v
        };

        let ctx = psnr_context();
        let (mut r, mut d) = (alloc(64, 48), alloc(64, 48));
        // The allocated planes stay zero; the reference's planes live in the caller's buffers
        // with a wider stride, the luma one bottom-up (negative stride).
        fill(&d, noisy);
        let stride = w + 40;
        let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; stride * h]).collect();
        for (i, b) in bufs.iter_mut().enumerate() {
            let (pw, ph) = (r.w[i] as usize, r.h[i] as usize);
            for y in 0..ph {
                let row = if i == 0 { ph - 1 - y } else { y };
                for x in 0..pw {
                    b[row * stride + x] = content(x, y);
                }
            }
        }
        r.data[0] = bufs[0][(h - 1) * stride..].as_mut_ptr().cast();
        r.stride[0] = -(stride as isize);
        for (i, b) in bufs.iter_mut().enumerate().skip(1) {
            r.data[i] = b.as_mut_ptr().cast();
            r.stride[i] = stride as isize;
        }
        // SAFETY: live context; the moved planes are valid for their sizes and strides.
        unsafe {
            assert_eq!(vmaf_read_pictures(ctx, &mut r, &mut d, 0), 0);
            assert_eq!(
                vmaf_read_pictures(ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0),
                0
            );
        }
        assert_eq!(psnr_y(ctx).to_bits(), expected.to_bits());
        // SAFETY: live context.
        assert_eq!(unsafe { vmaf_close(ctx) }, 0);

        // A NULL plane pointer or a stride below the row size is refused.
        let ctx = psnr_context();
        let (mut r, mut d) = (alloc(64, 48), alloc(64, 48));
        r.data[1] = std::ptr::null_mut();
        // SAFETY: live context and pictures.
        let rc = unsafe { vmaf_read_pictures(ctx, &mut r, &mut d, 0) };
        assert_eq!(rc, -libc::EINVAL);
        let (mut r, mut d) = (alloc(64, 48), alloc(64, 48));
        d.stride[0] = 10;
        // SAFETY: as above.
        let rc = unsafe { vmaf_read_pictures(ctx, &mut r, &mut d, 0) };
        assert_eq!(rc, -libc::EINVAL);
        // SAFETY: live context; pictures are released (already zeroed ones give -EINVAL).
        unsafe {
            let _ = vmaf_picture_unref(&mut r);
            assert_eq!(vmaf_close(ctx), 0);
        }
    }

    /// Whether a picture fetched from the context's upstream-style pool is page-locked.
    fn pooled_is_locked(ctx: *mut VmafContext, w: u32, h: u32) -> bool {
        let cfg = VmafPictureConfiguration {
            pic_params: VmafPictureParams {
                w,
                h,
                bpc: 8,
                pix_fmt: 1,
            },
            pic_cnt: 2,
        };
        // SAFETY: live context; all-zero is the empty VmafPicture, written by the fetch.
        unsafe {
            assert_eq!(vmaf_preallocate_pictures(ctx, cfg), 0);
            let mut pic: VmafPicture = std::mem::zeroed();
            assert_eq!(vmaf_fetch_preallocated_picture(ctx, &mut pic), 0);
            let locked = crate::ffi::picture::shared_picture(&pic, "pooled")
                .unwrap()
                .pinned()
                .is_some();
            assert_eq!(vmaf_picture_unref(&mut pic), 0);
            locked
        }
    }

    /// On a context with a GPU, an upstream-style pool's pictures are page-locked when the pool
    /// is made (not at their first uploads, on the feeding thread); small ones, and any on a
    /// CPU context, are not.
    #[test]
    fn pools_of_gpu_contexts_are_locked_up_front() {
        // A size no other test allocates: the library recycles freed buffers of the same size
        // with their page-locking, which a GPU test running beside this one may have left.
        let (w, h) = (1936, 1096);
        let ctx = psnr_context();
        assert!(!pooled_is_locked(ctx, w, h), "no GPU, no locking");
        // SAFETY: live context.
        assert_eq!(unsafe { vmaf_close(ctx) }, 0);
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let ctx = psnr_context();
        // SAFETY: live context, no other call on it.
        unsafe { context(ctx) }
            .unwrap()
            .import_gpu_state(state)
            .unwrap();
        assert!(pooled_is_locked(ctx, w, h), "locked before any upload");
        assert!(
            !pooled_is_locked(ctx, 64, 48),
            "below the size worth locking"
        );
        // SAFETY: live context.
        assert_eq!(unsafe { vmaf_close(ctx) }, 0);
    }
}
