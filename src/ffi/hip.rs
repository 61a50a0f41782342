//! `libvmaf_hip.h`: creating a GPU state and handing it to a context.
//!
//! `VmafHipState*` is a `Box<HipStateHandle>` holding an `Arc<GpuState>`; importing clones the
//! `Arc` into the context, so the context keeps the device alive even if the caller frees the
//! state first. Every body runs in `ffi_boundary!`, as in the other C API files: a panic becomes
//! `-EINVAL` (or nothing for `void` functions), never an unwind into C.

use std::ffi::c_int;
use std::sync::Arc;

use crate::error::Error;
use crate::ffi::ffi_boundary;
use crate::ffi::libvmaf::{context, VmafContext};
use crate::ffi::picture::{picture_wrap, wrapped_layout, write_picture, WrappedLayout};
use crate::gpu::GpuState;
use crate::picture::semiplanar::{unpack_host, HostSemiPlanar, SemiPlanar};

/// The opaque `VmafHipState`.
pub struct HipStateHandle {
    state: Arc<GpuState>,
}

/// `VmafHipConfiguration`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafHipConfiguration {
    /// Device ordinal as `vmaf_hip_list_devices` prints it; -1 picks the first usable one.
    pub device_index: c_int,
    /// Reserved, must be 0.
    pub flags: c_int,
}

/// 1: this library always has GPU support (the runtime is loaded when a state is created).
#[no_mangle]
pub extern "C" fn vmaf_hip_available() -> c_int {
    1
}

/// Opens a device and its compute stream. 0 and `*out` set on success; `-ENODEV` when there is
/// no usable device or the index is past the last one (`*out` left NULL); `-EINVAL` for a NULL
/// `out`, an index below -1 or unknown flags.
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_state_init(
    out: *mut *mut HipStateHandle,
    cfg: VmafHipConfiguration,
) -> c_int {
    ffi_boundary!("vmaf_hip_state_init", {
        if out.is_null() {
            return Err(Error::inval("state pointer is NULL"));
        }
        // SAFETY: non-NULL and writable (caller's contract). Cleared first so that every failure
        // below leaves NULL behind.
        unsafe { *out = std::ptr::null_mut() };
        if cfg.device_index < -1 {
            return Err(Error::inval(format!("device index {}", cfg.device_index)));
        }
        if cfg.flags != 0 {
            return Err(Error::inval(format!("unknown flags {:#x}", cfg.flags)));
        }
        let index = usize::try_from(cfg.device_index).ok();
        let state = GpuState::new(index)?;
        let handle = Box::into_raw(Box::new(HipStateHandle { state }));
        // SAFETY: as above.
        unsafe { *out = handle };
        Ok(0)
    })
}

/// Extension: as `vmaf_hip_state_init`, in the caller's CUDA context `cu_ctx` (FFmpeg's
/// `AVCUDADeviceContext.cuda_ctx`), so pictures over memory of that context can be read in
/// place. `-EXDEV` when `cfg.device_index` (not -1) names another device than the context's;
/// `-ENODEV` without the CUDA driver or for a context it refuses; `-EINVAL` for a NULL `out` or
/// `cu_ctx`, an index below -1 or unknown flags (`*out` is NULL after every failure).
///
/// # Safety
/// `out` is NULL or writable; `cu_ctx` is NULL or a live `CUcontext` that outlives every
/// context the state is imported into.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_state_init_cuda(
    out: *mut *mut HipStateHandle,
    cfg: VmafHipConfiguration,
    cu_ctx: *mut std::ffi::c_void,
) -> c_int {
    ffi_boundary!("vmaf_hip_state_init_cuda", {
        if out.is_null() {
            return Err(Error::inval("state pointer is NULL"));
        }
        // SAFETY: non-NULL and writable (caller's contract); cleared so failures leave NULL.
        unsafe { *out = std::ptr::null_mut() };
        if cu_ctx.is_null() {
            return Err(Error::inval("CUDA context is NULL"));
        }
        if cfg.device_index < -1 {
            return Err(Error::inval(format!("device index {}", cfg.device_index)));
        }
        if cfg.flags != 0 {
            return Err(Error::inval(format!("unknown flags {:#x}", cfg.flags)));
        }
        // SAFETY: forwarded contract on `cu_ctx`.
        let state = unsafe { GpuState::with_cuda_context(cu_ctx) }.map_err(|e| match e {
            e @ (Error::NoDevice(_) | Error::NoMem(_)) => e,
            // A context the driver refuses is no device for us either.
            e => Error::NoDevice(e.to_string()),
        })?;
        // Numbered as vmaf_hip_list_devices() prints them, as `device_index` is.
        let on = state.device().info().ordinal;
        if let Ok(want) = usize::try_from(cfg.device_index) {
            if want != on {
                return Err(Error::CrossDevice(format!(
                    "the CUDA context is on GPU {on}, not on GPU {want}"
                )));
            }
        }
        let handle = Box::into_raw(Box::new(HipStateHandle { state }));
        // SAFETY: as above.
        unsafe { *out = handle };
        Ok(0)
    })
}

/// Makes `ctx` extract on `state`'s device (features registered afterwards use their GPU
/// versions where they have one). The context holds its own reference to the device.
///
/// # Safety
/// `ctx` is NULL or a live context from `vmaf_init` not used concurrently; `state` is NULL or a
/// live state from `vmaf_hip_state_init`.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_import_state(
    ctx: *mut VmafContext,
    state: *mut HipStateHandle,
) -> c_int {
    ffi_boundary!("vmaf_hip_import_state", {
        if ctx.is_null() || state.is_null() {
            return Err(Error::inval("context or state is NULL"));
        }
        // SAFETY: both live (caller's contract); the context guard makes its use exclusive.
        let (mut ctx, state) = unsafe { (context(ctx)?, &*state) };
        ctx.import_gpu_state(state.state.clone())?;
        Ok(0)
    })
}

/// Releases a state and sets `*state` to NULL. NULL and pointers to NULL are accepted. A
/// primary context it retained is released after a delay (see `device::context_linger`).
///
/// # Safety
/// `state` is NULL or points to NULL or to a live state not used concurrently.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_state_free(state: *mut *mut HipStateHandle) {
    ffi_boundary!("vmaf_hip_state_free", {
        if state.is_null() {
            return;
        }
        // SAFETY: readable and writable (caller's contract).
        let handle = unsafe { std::mem::replace(&mut *state, std::ptr::null_mut()) };
        if !handle.is_null() {
            // SAFETY: came from Box::into_raw in vmaf_hip_state_init and is released once, since
            // the caller's pointer is now NULL.
            drop(unsafe { Box::from_raw(handle) });
        }
    })
}

/// `enum VmafHipPicturePreallocationMethod` (extension): where pooled pictures live.
pub type VmafHipPicturePreallocationMethod = c_int;
/// No pool; `vmaf_hip_preallocate_pictures` does nothing.
pub const VMAF_HIP_PICTURE_PREALLOCATION_METHOD_NONE: c_int = 0;
/// Device memory of the imported state's device, which the caller fills (device addresses in
/// `data[]`, every plane dense: `stride[i]` = width times bytes per sample).
pub const VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE: c_int = 1;
/// Host memory, as `vmaf_preallocate_pictures`: with an imported GPU state, pictures of 1 MiB
/// and more are page-locked when the pool is made where the system allows it (else their uploads
/// go through staging copies).
pub const VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST: c_int = 2;
/// Page-locked host memory: uploads read the luma plane in place, without a staging copy.
pub const VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED: c_int = 3;

/// `VmafHipPictureConfiguration` (extension), passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VmafHipPictureConfiguration {
    pub pic_params: crate::ffi::libvmaf::VmafPictureParams,
    pub pic_prealloc_method: VmafHipPicturePreallocationMethod,
    /// Pictures in the pool (at most 1024); 0 picks 2 per worker thread plus 4, at most 1024
    /// (a GPU context with n_threads 0 counts its pipeline threads).
    pub pic_cnt: std::ffi::c_uint,
}

/// Extension: allocates the context's picture pool for `vmaf_hip_fetch_preallocated_picture`
/// (replacing an earlier pool). HOST_PINNED page-locks every picture for the devices of the
/// imported GPU states, so their luma uploads need no staging copy; DEVICE allocates them in the
/// first imported state's device memory. Returns 0; -EINVAL for NULL, a bad size/format/depth, a
/// count above 1024, an unknown method, or HOST_PINNED/DEVICE before `vmaf_hip_import_state`;
/// -ENOMEM when memory cannot be allocated or page-locked.
///
/// # Safety
/// `ctx` is NULL or a live context not used concurrently.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_preallocate_pictures(
    ctx: *mut VmafContext,
    cfg: VmafHipPictureConfiguration,
) -> c_int {
    ffi_boundary!("vmaf_hip_preallocate_pictures", {
        if ctx.is_null() {
            return Err(Error::inval("context is NULL"));
        }
        // SAFETY: forwarded caller's contract.
        unsafe { preallocate(ctx, cfg.pic_params, cfg.pic_prealloc_method, cfg.pic_cnt) }?;
        Ok(0)
    })
}

/// The pool behind `vmaf_hip_preallocate_pictures` and `vmaf_cuda_preallocate_pictures`
/// (whose methods are numbered alike); `cnt` 0 picks the default size.
///
/// # Safety
/// `ctx` is a live context not used concurrently.
pub(crate) unsafe fn preallocate(
    ctx: *mut VmafContext,
    p: crate::ffi::libvmaf::VmafPictureParams,
    method: c_int,
    cnt: std::ffi::c_uint,
) -> crate::error::Result<()> {
    // SAFETY: live (caller's contract); the guard makes its use exclusive.
    let c = unsafe { context(ctx) }?;
    let cnt = match cnt {
        0 => (2 * c.worker_count() + 4).min(crate::limits::MAX_POOL_PICTURES),
        n => n as usize,
    };
    let first_device = |what: &str| {
        c.gpu_set()
            .map(|g| g.states()[0].device().clone())
            .ok_or_else(|| Error::inval(format!("{what} needs an imported GPU state first")))
    };
    let make = move || crate::ffi::picture::new_picture_data(p.pix_fmt, p.bpc, p.w, p.h);
    match method {
        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_NONE => Ok(()),
        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE => {
            let dev = first_device("DEVICE")?;
            let fmt = crate::ffi::picture::pixel_format(p.pix_fmt)?;
            let (w, h) = (p.w as usize, p.h as usize);
            super::pool::preallocate(ctx as usize, cnt, move || {
                crate::gpu::frames::device_picture(&dev, fmt, p.bpc, w, h)
            })
        }
        // As `vmaf_preallocate_pictures`.
        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST => {
            super::pool::preallocate_host(ctx as usize, cnt, first_device("HOST").ok(), make)
        }
        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED => {
            let dev = first_device("HOST_PINNED")?;
            super::pool::preallocate(ctx as usize, cnt, move || {
                crate::gpu::pin_picture(&dev, make()?)
                    .map_err(|e| Error::NoMem(format!("page-locking a picture: {e}")))
            })
        }
        m => Err(Error::inval(format!("unknown preallocation method {m}"))),
    }
}

/// Extension: takes a picture from the pool made by `vmaf_hip_preallocate_pictures` (blocking
/// while every pooled picture is in use); it returns to the pool when released. Returns 0, or
/// -EINVAL for NULL arguments, no pool, or a pool closed by `vmaf_close` while waiting.
///
/// # Safety
/// `ctx` is NULL or live; `pic` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn vmaf_hip_fetch_preallocated_picture(
    ctx: *mut VmafContext,
    pic: *mut crate::ffi::picture::VmafPicture,
) -> c_int {
    ffi_boundary!("vmaf_hip_fetch_preallocated_picture", {
        // SAFETY: forwarded caller's contract.
        unsafe { crate::ffi::libvmaf::fetch_pooled(ctx, pic) }?;
        Ok(0)
    })
}

/// Prints one line per device to stdout and returns how many there are (0 when none).
#[no_mangle]
pub extern "C" fn vmaf_hip_list_devices() -> c_int {
    let n = ffi_boundary!("vmaf_hip_list_devices", {
        let lines = crate::gpu::describe_devices();
        for l in &lines {
            println!("{l}");
        }
        Ok(c_int::try_from(lines.len()).unwrap_or(c_int::MAX))
    });
    // A panic (-EINVAL) counts as no device: the contract is a count.
    n.max(0)
}

/// Extension: makes `*pic` a picture that reads the caller's planes in place (see
/// `libvmaf_hip.h`); `release(opaque)` is called once the library is done with them. Returns 0,
/// or -EINVAL for NULL or bad arguments (then `*pic` is left empty and release not called).
///
/// # Safety
/// `pic` is NULL or writable; `data` and `stride` are NULL or point to 3 elements; each used
/// plane addresses `h` rows of `stride` bytes that stay valid and unchanged until release.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn vmaf_hip_picture_wrap(
    pic: *mut crate::ffi::picture::VmafPicture,
    pix_fmt: crate::ffi::picture::RawPixelFormat,
    bpc: std::ffi::c_uint,
    w: std::ffi::c_uint,
    h: std::ffi::c_uint,
    data: *const *mut std::ffi::c_void,
    stride: *const isize,
    release: crate::ffi::picture::ReleaseCallback,
    opaque: *mut std::ffi::c_void,
) -> c_int {
    ffi_boundary!("vmaf_hip_picture_wrap", {
        // SAFETY: `pic` per the caller's contract; the layout call reads 3 elements of each
        // non-NULL array, and each used plane is readable memory until release (forwarded).
        unsafe {
            write_picture(pic, || {
                let layout = wrapped_layout(pix_fmt, bpc, w, h, data, stride)?;
                picture_wrap(layout, (bpc, w, h), release, opaque)
            })
        }?;
        Ok(0)
    })
}

/// Extension: makes `*pic` a picture over planes in device memory of the GPU of `vmaf`'s first
/// imported state (see `libvmaf_hip.h`), read in place; `release(opaque)` is called once the
/// library and the device are done with them. Returns 0; -EINVAL for NULL or bad arguments or
/// a context without a GPU state (then `*pic` is left empty and release not called); -EBUSY
/// when another call on `vmaf` is running.
///
/// # Safety
/// `vmaf` is NULL or live; `pic` is NULL or writable; `data` and `stride` are NULL or point to
/// 3 elements; each used plane's `h` rows of `stride` bytes are device memory usable in the
/// state's GPU context that stays valid and unwritten until release.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn vmaf_hip_picture_wrap_device(
    vmaf: *mut VmafContext,
    pic: *mut crate::ffi::picture::VmafPicture,
    pix_fmt: crate::ffi::picture::RawPixelFormat,
    bpc: std::ffi::c_uint,
    w: std::ffi::c_uint,
    h: std::ffi::c_uint,
    data: *const *mut std::ffi::c_void,
    stride: *const isize,
    release: crate::ffi::picture::ReleaseCallback,
    opaque: *mut std::ffi::c_void,
) -> c_int {
    ffi_boundary!("vmaf_hip_picture_wrap_device", {
        // SAFETY: `pic` per the caller's contract; the layout call reads 3 elements of each
        // non-NULL array.
        unsafe {
            write_picture(pic, || {
                let layout = wrapped_layout(pix_fmt, bpc, w, h, data, stride)?;
                // SAFETY: as above for `vmaf`; each used plane is device memory of the state's
                // GPU, valid and unwritten until release (forwarded).
                wrap_device(vmaf, layout, (bpc, w, h), release, opaque)
            })
        }?;
        Ok(0)
    })
}

/// The layout and the two planes (address, pitch in samples) of a semi-planar wrap, checked.
///
/// # Safety
/// `data` and `stride` are NULL or point to 2 elements.
unsafe fn semiplanar_args(
    fmt: std::ffi::c_uint,
    (w, h): (std::ffi::c_uint, std::ffi::c_uint),
    data: *const *mut std::ffi::c_void,
    stride: *const isize,
) -> crate::error::Result<(SemiPlanar, [(usize, usize); 2])> {
    let fmt = SemiPlanar::from_raw(fmt)
        .ok_or_else(|| Error::inval(format!("unknown semi-planar format {fmt}")))?;
    if data.is_null() || stride.is_null() {
        return Err(Error::inval("data or stride is NULL"));
    }
    // SAFETY: non-NULL, 2 elements each (caller's contract).
    let (data, stride) = unsafe {
        (
            std::slice::from_raw_parts(data, 2),
            std::slice::from_raw_parts(stride, 2),
        )
    };
    let bps = fmt.bytes_per_sample();
    let mut planes = [(0usize, 0usize); 2];
    for (i, plane) in planes.iter_mut().enumerate() {
        let (p, s) = (data[i].addr(), stride[i]);
        if p == 0 {
            return Err(Error::inval(format!("data[{i}] is NULL")));
        }
        let s =
            usize::try_from(s).map_err(|_| Error::inval(format!("stride[{i}] {s} is negative")))?;
        if bps == 2 && (!p.is_multiple_of(2) || !s.is_multiple_of(2)) {
            return Err(Error::inval(format!(
                "plane {i}: odd address or stride for 16-bit samples"
            )));
        }
        *plane = (p, s / bps);
    }
    fmt.check(w as usize, h as usize, [planes[0].1, planes[1].1])?;
    Ok((fmt, planes))
}

/// The `len` samples of type `T` at address `addr`.
///
/// # Safety
/// They are readable, and aligned for `T`, for as long as the slice is used.
unsafe fn samples<'a, T>((addr, len): (usize, usize)) -> &'a [T] {
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(addr as *const T, len) }
}

/// Extension: makes `*pic` the yuv420p picture (8, 10, 12 or 16 bits) of a semi-planar frame in
/// host memory (NV12, P010, P012, P016; see `libvmaf_hip.h`), unpacked at once into memory of
/// the library's; `release(opaque)` is called when the picture goes. Returns 0, -EINVAL for
/// NULL or bad arguments (then `*pic` is left empty and release not called), -ENOMEM.
///
/// # Safety
/// `pic` is NULL or writable; `data` and `stride` are NULL or point to 2 elements; the luma's
/// `h` rows and the chroma's `(h + 1) / 2` rows at their strides (the last row's padding
/// excepted) are readable memory during the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn vmaf_hip_picture_wrap_semiplanar(
    pic: *mut crate::ffi::picture::VmafPicture,
    fmt: std::ffi::c_uint,
    w: std::ffi::c_uint,
    h: std::ffi::c_uint,
    data: *const *mut std::ffi::c_void,
    stride: *const isize,
    release: crate::ffi::picture::ReleaseCallback,
    opaque: *mut std::ffi::c_void,
) -> c_int {
    ffi_boundary!("vmaf_hip_picture_wrap_semiplanar", {
        // SAFETY: `pic` per the caller's contract; the argument check reads 2 elements of each
        // non-NULL array.
        unsafe {
            write_picture(pic, || {
                let (fmt, planes) = semiplanar_args(fmt, (w, h), data, stride)?;
                let (w, h) = (w as usize, h as usize);
                let (cw, ch) = SemiPlanar::chroma_dims(w, h);
                // The samples read: the last row's padding need not exist.
                let len = |(p, s): (usize, usize), rows: usize, row: usize| {
                    (p, if rows == 0 { 0 } else { (rows - 1) * s + row })
                };
                let (y, c) = (len(planes[0], h, w), len(planes[1], ch, 2 * cw));
                // SAFETY: the rows checked above are readable during the call (contract);
                // samples are u8 for NV12, else u16 at even addresses (checked).
                let frame = if fmt.bytes_per_sample() == 1 {
                    HostSemiPlanar::U8 {
                        luma: (samples(y), planes[0].1),
                        chroma: (samples(c), planes[1].1),
                    }
                } else {
                    HostSemiPlanar::U16 {
                        luma: (samples(y), planes[0].1),
                        chroma: (samples(c), planes[1].1),
                    }
                };
                crate::ffi::picture::wrap_with_release(release, opaque, |armed| {
                    let mut p = unpack_host(fmt, w, h, frame)?;
                    p.set_release(move |_| drop(armed));
                    Ok(p)
                })
            })
        }?;
        Ok(0)
    })
}

/// Extension: makes `*pic` the yuv420p picture (8, 10, 12 or 16 bits) of a semi-planar frame
/// in device memory of the GPU of `vmaf`'s first imported state (see `libvmaf_hip.h`). Returns
/// 0; -EINVAL for NULL or bad arguments or a context without a GPU state (then `*pic` is left
/// empty and release not called); -EBUSY when another call on `vmaf` is running; -ENOMEM.
///
/// # Safety
/// `vmaf` is NULL or live; `pic` is NULL or writable; `data` and `stride` are NULL or point to
/// 2 elements; the luma's `h` rows and the chroma's `(h + 1) / 2` rows at their strides are
/// device memory usable in the state's GPU context that stays valid and unwritten until
/// release.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn vmaf_hip_picture_wrap_device_semiplanar(
    vmaf: *mut VmafContext,
    pic: *mut crate::ffi::picture::VmafPicture,
    fmt: std::ffi::c_uint,
    w: std::ffi::c_uint,
    h: std::ffi::c_uint,
    data: *const *mut std::ffi::c_void,
    stride: *const isize,
    release: crate::ffi::picture::ReleaseCallback,
    opaque: *mut std::ffi::c_void,
) -> c_int {
    ffi_boundary!("vmaf_hip_picture_wrap_device_semiplanar", {
        // SAFETY: `pic` per the caller's contract; the argument check reads 2 elements of each
        // non-NULL array.
        unsafe {
            write_picture(pic, || {
                let (fmt, planes) = semiplanar_args(fmt, (w, h), data, stride)?;
                // SAFETY: live or NULL (caller's contract); the guard is dropped at once.
                let (state, with_chroma) = {
                    let c = context(vmaf)?;
                    let state = c.gpu_states().first().cloned().ok_or_else(|| {
                        Error::inval("device pictures need an imported GPU state first")
                    })?;
                    (state, c.reads_chroma())
                };
                crate::ffi::picture::wrap_with_release(release, opaque, |armed| {
                    // SAFETY: per the caller's contract both planes' rows are device memory of
                    // the state's GPU, valid and unwritten until `release`, which runs when
                    // `armed` drops: after the picture's last reader and the device's work.
                    let (w, h) = (w as usize, h as usize);
                    let unpacker =
                        crate::picture::semiplanar::gpu::unpacker(state.clone(), fmt, (w, h));
                    crate::gpu::frames::wrap_device_semiplanar(
                        &state,
                        fmt,
                        (w, h),
                        (planes[0].0 as u64, planes[0].1),
                        (planes[1].0 as u64, planes[1].1),
                        with_chroma,
                        unpacker,
                        Box::new(armed),
                    )
                })
            })
        }?;
        Ok(0)
    })
}

/// The picture of `vmaf_hip_picture_wrap_device` over checked planes.
///
/// # Safety
/// `vmaf` is NULL or live; each used plane of `layout` is device memory of the GPU of `vmaf`'s
/// first state, valid and unwritten until `release(opaque)`.
unsafe fn wrap_device(
    vmaf: *mut VmafContext,
    layout: WrappedLayout,
    (bpc, w, h): (std::ffi::c_uint, std::ffi::c_uint, std::ffi::c_uint),
    release: crate::ffi::picture::ReleaseCallback,
    opaque: *mut std::ffi::c_void,
) -> crate::error::Result<crate::ffi::picture::VmafPicture> {
    // SAFETY: live or NULL (caller's contract); the guard is dropped at once.
    let dev = unsafe { context(vmaf) }?
        .gpu_states()
        .first()
        .map(|s| s.device().clone())
        .ok_or_else(|| Error::inval("device pictures need an imported GPU state first"))?;
    let planes = layout.planes.map(|(p, _, s)| (p.addr() as u64, s));
    crate::ffi::picture::wrap_with_release(release, opaque, |armed| {
        // SAFETY: per the caller's contract each used plane is `h` rows of its stride in
        // device memory of the state's GPU, valid and unwritten until `release`, which runs
        // when `armed` drops: after the picture's last reader and the device's work on it.
        unsafe {
            crate::gpu::frames::wrap_device_planes(
                &dev,
                layout.fmt,
                bpc,
                w as usize,
                h as usize,
                &planes[..layout.fmt.plane_count()],
                Box::new(armed),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_without_or_with_device() {
        assert_eq!(vmaf_hip_available(), 1);
        let cfg = |device_index, flags| VmafHipConfiguration {
            device_index,
            flags,
        };
        // SAFETY: NULL is part of the contract.
        unsafe {
            assert_eq!(
                vmaf_hip_state_init(std::ptr::null_mut(), cfg(-1, 0)),
                -libc::EINVAL
            );
            assert_eq!(
                vmaf_hip_import_state(std::ptr::null_mut(), std::ptr::null_mut()),
                -libc::EINVAL
            );
            vmaf_hip_state_free(std::ptr::null_mut());
        }
        let mut s: *mut HipStateHandle = std::ptr::null_mut();
        // SAFETY: `s` is a valid out-pointer.
        unsafe {
            assert_eq!(vmaf_hip_state_init(&mut s, cfg(-2, 0)), -libc::EINVAL);
            assert!(s.is_null());
            assert_eq!(vmaf_hip_state_init(&mut s, cfg(-1, 4)), -libc::EINVAL);
            assert!(s.is_null());
            assert_eq!(vmaf_hip_state_init(&mut s, cfg(4096, 0)), -libc::ENODEV);
            assert!(s.is_null());
            vmaf_hip_state_free(&mut s);
        }
        let n = vmaf_hip_list_devices();
        // SAFETY: `s` is a valid out-pointer.
        let rc = unsafe { vmaf_hip_state_init(&mut s, cfg(-1, 0)) };
        if n == 0 {
            assert_eq!(rc, -libc::ENODEV);
            assert!(s.is_null());
            crate::testutil::skip_no_device("vmaf_hip_list_devices found none");
            return;
        }
        assert_eq!(rc, 0);
        assert!(!s.is_null());
        let ctx =
            VmafContext::into_handle(crate::context::Context::new(Default::default()).unwrap());
        // SAFETY: both live.
        assert_eq!(unsafe { vmaf_hip_import_state(ctx, s) }, 0);
        // SAFETY: live, and no other call is running on it.
        assert!(!unsafe { context(ctx) }.unwrap().gpu_states().is_empty());
        // SAFETY: `s` is live and freed once; the context keeps its own reference.
        unsafe { vmaf_hip_state_free(&mut s) };
        assert!(s.is_null());
        // SAFETY: as above.
        assert!(!unsafe { context(ctx) }.unwrap().gpu_states().is_empty());
        // SAFETY: live, closed once.
        assert_eq!(unsafe { crate::ffi::libvmaf::vmaf_close(ctx) }, 0);
    }

    /// `vmaf_hip_state_init_cuda` refuses NULL and bad arguments with -EINVAL and leaves NULL;
    /// without the CUDA driver a context is no device.
    #[test]
    fn cuda_context_state_arguments() {
        let cfg = |device_index, flags| VmafHipConfiguration {
            device_index,
            flags,
        };
        let mut s: *mut HipStateHandle = std::ptr::dangling_mut();
        // SAFETY: NULL is part of the contract; `s` is a valid out-pointer, and no call below
        // reaches the driver with the made-up context.
        unsafe {
            assert_eq!(
                vmaf_hip_state_init_cuda(std::ptr::null_mut(), cfg(-1, 0), std::ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                vmaf_hip_state_init_cuda(&mut s, cfg(0, 0), std::ptr::null_mut()),
                -libc::EINVAL
            );
            assert!(s.is_null());
            let ctx = std::ptr::dangling_mut::<std::ffi::c_void>();
            assert_eq!(
                vmaf_hip_state_init_cuda(&mut s, cfg(-2, 0), ctx),
                -libc::EINVAL
            );
            assert_eq!(
                vmaf_hip_state_init_cuda(&mut s, cfg(0, 1), ctx),
                -libc::EINVAL
            );
            assert!(s.is_null());
        }
        assert_eq!(Error::CrossDevice("x".into()).errno(), -libc::EXDEV);
    }

    /// A semi-planar frame in host memory through the C call: the picture is the planar one
    /// it was stored from, release runs once when the picture goes; bad arguments give -EINVAL
    /// with release not called and the picture left empty.
    #[test]
    fn host_semiplanar_wrap() {
        use crate::ffi::picture::{vmaf_picture_unref, VmafPicture};
        use crate::picture::semiplanar::tests::pack;
        use std::sync::atomic::{AtomicUsize, Ordering};

        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        extern "C" fn release(_: *mut std::ffi::c_void) {
            RELEASED.fetch_add(1, Ordering::SeqCst);
        }
        let (refs, _) = crate::testutil::load_parity_clip("natural_640x360_420p10");
        let want = &refs[0];
        let (y, yp, c, cp) = pack(SemiPlanar::P010, want, 8);
        let data = [y.as_ptr() as *mut std::ffi::c_void, c.as_ptr() as *mut _];
        let stride = [2 * yp as isize, 2 * cp as isize];
        let (w, h) = (want.w[0] as u32, want.h[0] as u32);
        // SAFETY: zeroed is a valid empty picture.
        let mut pic: VmafPicture = unsafe { std::mem::zeroed() };
        let before = RELEASED.load(Ordering::SeqCst);
        // SAFETY: both planes hold their rows at their strides for the call.
        let rc = unsafe {
            vmaf_hip_picture_wrap_semiplanar(
                &mut pic,
                2,
                w,
                h,
                data.as_ptr(),
                stride.as_ptr(),
                Some(release),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(
            (pic.bpc, pic.w, pic.h),
            (10, [w, w / 2, w / 2], [h, h / 2, h / 2])
        );
        for plane in 0..3 {
            let p = pic.data[plane] as *const u16;
            let s = pic.stride[plane] as usize / 2;
            for row in 0..want.h[plane] {
                for x in 0..want.w[plane] {
                    // SAFETY: inside the picture's plane.
                    let got = unsafe { *p.add(row * s + x) };
                    assert_eq!(
                        got,
                        want.sample(plane, x, row),
                        "plane {plane} ({x}, {row})"
                    );
                }
            }
        }
        assert_eq!(RELEASED.load(Ordering::SeqCst), before);
        // SAFETY: a live picture, released once.
        assert_eq!(unsafe { vmaf_picture_unref(&mut pic) }, 0);
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1);
        // Bad arguments: unknown format, 8-bit layout over odd strides is fine but a negative
        // stride is not, odd strides for 16-bit words, NULL planes.
        let bad: [(u32, [isize; 2], bool); 4] = [
            (9, stride, false),
            (2, [-(stride[0]), stride[1]], false),
            (2, [stride[0] + 1, stride[1]], false),
            (2, stride, true),
        ];
        for (fmt, st, null) in bad {
            let d = if null {
                [data[0], std::ptr::null_mut()]
            } else {
                data
            };
            // SAFETY: as above; refused before any plane is read.
            let rc = unsafe {
                vmaf_hip_picture_wrap_semiplanar(
                    &mut pic,
                    fmt,
                    w,
                    h,
                    d.as_ptr(),
                    st.as_ptr(),
                    Some(release),
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(
                rc,
                -libc::EINVAL,
                "format {fmt}, strides {st:?}, NULL {null}"
            );
            assert!(pic.data[0].is_null());
        }
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1);
        // A device frame needs a context with a GPU state.
        let ctx =
            VmafContext::into_handle(crate::context::Context::new(Default::default()).unwrap());
        // SAFETY: a live context; the planes are never read.
        let rc = unsafe {
            vmaf_hip_picture_wrap_device_semiplanar(
                ctx,
                &mut pic,
                2,
                w,
                h,
                data.as_ptr(),
                stride.as_ptr(),
                Some(release),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, -libc::EINVAL);
        // SAFETY: live, closed once.
        assert_eq!(unsafe { crate::ffi::libvmaf::vmaf_close(ctx) }, 0);
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1);
    }
}
