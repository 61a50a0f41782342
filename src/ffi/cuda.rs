//! `libvmaf_cuda.h`: upstream libvmaf's CUDA API, served by our GPU backend on NVIDIA, so
//! programs written for upstream's CUDA build (FFmpeg's `libvmaf_cuda` filter among them)
//! compile and link against us unchanged.
//!
//! Upstream has no call that frees a `VmafCudaState`; its contexts take the state over at
//! import. So the handle gives its device to the first context that imports it and keeps only
//! a weak reference: the device is let go with the last context that uses it, even when the
//! caller never frees anything (a later import while a context still holds the device
//! shares it; one after that opens the same context again).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, Weak};

use crate::error::Error;
use crate::ffi::ffi_boundary;
use crate::ffi::libvmaf::{context, VmafContext, VmafPictureParams};
use crate::gpu::GpuState;

/// The opaque `VmafCudaState`.
pub struct CudaStateHandle {
    /// The caller's `CUcontext`, or NULL for the primary context.
    cu_ctx: usize,
    state: Mutex<(Option<Arc<GpuState>>, Weak<GpuState>)>,
}

/// `VmafCudaConfiguration`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafCudaConfiguration {
    /// A `CUcontext` to run in (the caller keeps it alive while contexts use the state), or
    /// NULL for the primary context of the first NVIDIA GPU.
    pub cu_ctx: *mut c_void,
}

/// `enum VmafCudaPicturePreallocationMethod`: numbered as the HIP extension's methods.
pub type VmafCudaPicturePreallocationMethod = c_int;

/// `VmafCudaPictureConfiguration`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafCudaPictureConfiguration {
    pub pic_params: VmafPictureParams,
    pub pic_prealloc_method: VmafCudaPicturePreallocationMethod,
}

/// Opens the GPU behind `cfg.cu_ctx`. 0 and `*out` set; `-EINVAL` for a NULL `out`; `-ENODEV`
/// without the CUDA driver or an NVIDIA GPU, or for a context the driver refuses (`*out` NULL).
///
/// # Safety
/// `out` is NULL or writable; `cfg.cu_ctx` is NULL or a live `CUcontext` that outlives every
/// context the state is imported into.
#[no_mangle]
pub unsafe extern "C" fn vmaf_cuda_state_init(
    out: *mut *mut CudaStateHandle,
    cfg: VmafCudaConfiguration,
) -> c_int {
    ffi_boundary!("vmaf_cuda_state_init", {
        if out.is_null() {
            return Err(Error::inval("state pointer is NULL"));
        }
        // SAFETY: non-NULL and writable (caller's contract); cleared so failures leave NULL.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: forwarded contract on `cu_ctx`.
        let state = unsafe { open(cfg.cu_ctx as usize) }?;
        let handle = Box::new(CudaStateHandle {
            cu_ctx: cfg.cu_ctx as usize,
            state: Mutex::new((Some(state), Weak::new())),
        });
        // SAFETY: as above.
        unsafe { *out = Box::into_raw(handle) };
        Ok(0)
    })
}

/// # Safety
/// `cu_ctx` is 0 or a live `CUcontext`.
unsafe fn open(cu_ctx: usize) -> crate::error::Result<Arc<GpuState>> {
    // SAFETY: forwarded contract.
    unsafe { GpuState::with_cuda_context(cu_ctx as *mut c_void) }.map_err(|e| match e {
        e @ Error::NoDevice(_) => e,
        // A context the driver refuses is no device for us either.
        e => Error::NoDevice(e.to_string()),
    })
}

/// Makes `ctx` extract on the state's GPU (as `vmaf_hip_import_state`). `-EINVAL` for NULL
/// arguments; `-ENODEV` when the device cannot be opened again.
///
/// # Safety
/// `ctx` is NULL or a live context not used concurrently; `cu_state` is NULL or from
/// `vmaf_cuda_state_init`.
#[no_mangle]
pub unsafe extern "C" fn vmaf_cuda_import_state(
    ctx: *mut VmafContext,
    cu_state: *mut CudaStateHandle,
) -> c_int {
    ffi_boundary!("vmaf_cuda_import_state", {
        if ctx.is_null() || cu_state.is_null() {
            return Err(Error::inval("context or state is NULL"));
        }
        // SAFETY: both live (caller's contract); the context guard makes its use exclusive.
        let (mut c, h) = unsafe { (context(ctx)?, &*cu_state) };
        let state = {
            let mut s = h.state.lock().unwrap_or_else(|e| e.into_inner());
            match s.0.take().or_else(|| s.1.upgrade()) {
                Some(st) => st,
                // SAFETY: the caller's context is still live (contract of state_init).
                None => unsafe { open(h.cu_ctx) }?,
            }
        };
        h.state.lock().unwrap_or_else(|e| e.into_inner()).1 = Arc::downgrade(&state);
        c.import_gpu_state(state)?;
        Ok(0)
    })
}

/// Allocates the context's picture pool: DEVICE (device memory the caller fills, as FFmpeg's
/// `libvmaf_cuda` does with `cuMemcpy2D`), HOST or HOST_PINNED; NONE does nothing. `-EINVAL`
/// for NULL, a bad size/format/depth, an unknown method, or DEVICE/HOST_PINNED before
/// `vmaf_cuda_import_state`; `-ENOMEM` when memory runs out.
///
/// # Safety
/// `ctx` is NULL or a live context not used concurrently.
#[no_mangle]
pub unsafe extern "C" fn vmaf_cuda_preallocate_pictures(
    ctx: *mut VmafContext,
    cfg: VmafCudaPictureConfiguration,
) -> c_int {
    ffi_boundary!("vmaf_cuda_preallocate_pictures", {
        if ctx.is_null() {
            return Err(Error::inval("context is NULL"));
        }
        // SAFETY: forwarded caller's contract.
        unsafe { super::hip::preallocate(ctx, cfg.pic_params, cfg.pic_prealloc_method, 0) }?;
        Ok(0)
    })
}

/// Takes a picture from the pool (blocking while all are in use). `-EINVAL` for NULL
/// arguments, no pool, or a pool closed by `vmaf_close`.
///
/// # Safety
/// `ctx` is NULL or live; `pic` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_cuda_fetch_preallocated_picture(
    ctx: *mut VmafContext,
    pic: *mut crate::ffi::picture::VmafPicture,
) -> c_int {
    ffi_boundary!("vmaf_cuda_fetch_preallocated_picture", {
        // SAFETY: forwarded caller's contract.
        unsafe { crate::ffi::libvmaf::fetch_pooled(ctx, pic) }?;
        Ok(0)
    })
}
