//! `picture.h`: pictures shared between the caller and the library.
//!
//! A `VmafPicture` is a C view (pointers and sizes) of a Rust [`PictureData`]; its `ref` field
//! owns one reference to the shared [`Picture`]. Unref drops that reference: the buffer is freed
//! (or returned to its pool) once extractors holding clones are done with it too.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ffi::{ffi_boundary, non_null};
use crate::picture::{Picture, PictureData, PixelFormat};

/// Pixel layouts. Chroma planes of 4:2:0 and 4:2:2 pictures have half the luma width
/// (rounded down); 4:2:0 also halves the height; 4:0:0 has no chroma planes.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmafPixelFormat {
    VMAF_PIX_FMT_UNKNOWN = 0,
    VMAF_PIX_FMT_YUV420P = 1,
    VMAF_PIX_FMT_YUV422P = 2,
    VMAF_PIX_FMT_YUV444P = 3,
    VMAF_PIX_FMT_YUV400P = 4,
}

/// `enum VmafPixelFormat` as it crosses the ABI: any value may arrive from C.
pub type RawPixelFormat = c_uint;

/// Writes the picture `make` returns into `*pic`, which is emptied first so that a refusal
/// leaves it empty.
///
/// # Safety
/// `pic` is NULL or writable.
pub(crate) unsafe fn write_picture(
    pic: *mut VmafPicture,
    make: impl FnOnce() -> Result<VmafPicture>,
) -> Result<()> {
    non_null(pic, "picture")?;
    // SAFETY: non-NULL and writable (caller's contract); the old content is not read.
    unsafe { pic.write(std::mem::zeroed()) };
    let out = make()?;
    // SAFETY: as above.
    unsafe { pic.write(out) };
    Ok(())
}

/// Opaque reference to the shared picture behind a `VmafPicture`.
pub struct VmafRef {
    pub(crate) pic: Picture,
}

/// A picture: plane sizes, strides and sample pointers, plus the reference that keeps them alive.
/// Samples are `uint8_t` when `bpc` is 8 and native-endian `uint16_t` for 9 to 16 bits.
/// Get one from `vmaf_picture_alloc()` or `vmaf_fetch_preallocated_picture()`, write the samples
/// through `data`, then pass it to `vmaf_read_pictures()` (which takes it over) or release it
/// with `vmaf_picture_unref()`. Do not change the size, format or pointer fields.
#[repr(C)]
pub struct VmafPicture {
    /// Pixel layout (`enum VmafPixelFormat`).
    pub pix_fmt: RawPixelFormat,
    /// Bits per sample, 8 to 16.
    pub bpc: c_uint,
    /// Width of each plane in samples.
    pub w: [c_uint; 3],
    /// Height of each plane in rows.
    pub h: [c_uint; 3],
    /// Distance between rows of each plane, in bytes.
    pub stride: [isize; 3],
    /// First sample of each plane (NULL for absent planes).
    pub data: [*mut c_void; 3],
    /// Owned reference; NULL once released.
    pub r#ref: *mut VmafRef,
    /// Reserved; NULL.
    pub r#priv: *mut c_void,
}

/// Converts the C pixel format value.
pub(crate) fn pixel_format(raw: RawPixelFormat) -> Result<PixelFormat> {
    match PixelFormat::from_raw(raw) {
        Some(PixelFormat::Unknown) | None => {
            Err(Error::inval(format!("invalid pixel format {raw}")))
        }
        Some(f) => Ok(f),
    }
}

/// Checks `bpc` and the size, then allocates a picture for the caller to fill (a recycled
/// buffer is not cleared: upstream's samples start uninitialised too).
pub(crate) fn new_picture_data(
    pix_fmt: RawPixelFormat,
    bpc: c_uint,
    w: c_uint,
    h: c_uint,
) -> Result<PictureData> {
    let fmt = pixel_format(pix_fmt)?;
    if !(8..=16).contains(&bpc) {
        return Err(Error::inval(format!("bpc {bpc} is outside 8..16")));
    }
    if w == 0 || h == 0 {
        return Err(Error::inval(format!("invalid picture size {w}x{h}")));
    }
    PictureData::for_writing(fmt, bpc, w as usize, h as usize)
}

/// The C view of `data`'s planes: (w, h, stride in bytes, sample pointer) per plane.
fn c_layout(data: &mut PictureData) -> Result<[(c_uint, c_uint, isize, *mut c_void); 3]> {
    let bps = data.bytes_per_sample();
    let mut out = [(0, 0, 0, std::ptr::null_mut()); 3];
    for (i, o) in out.iter_mut().enumerate() {
        let too_big = || Error::inval("picture too large");
        let w = c_uint::try_from(data.w[i]).map_err(|_| too_big())?;
        let h = c_uint::try_from(data.h[i]).map_err(|_| too_big())?;
        let stride = isize::try_from(data.stride[i] * bps).map_err(|_| too_big())?;
        let ptr = if h == 0 {
            std::ptr::null_mut()
        } else {
            data.plane_ptr(i).cast::<c_void>()
        };
        *o = (w, h, stride, ptr);
    }
    Ok(out)
}

/// Wraps `data` into a C picture that owns one reference to it.
pub(crate) fn export_picture(mut data: PictureData) -> Result<VmafPicture> {
    let layout = c_layout(&mut data)?;
    let bpc = data.bpc;
    let pix_fmt = data.pix_fmt as RawPixelFormat;
    // The sample buffer does not move: Arc::new moves only the struct holding its pointer.
    let r = Box::new(VmafRef {
        pic: Arc::new(data),
    });
    Ok(VmafPicture {
        pix_fmt,
        bpc,
        w: layout.map(|l| l.0),
        h: layout.map(|l| l.1),
        stride: layout.map(|l| l.2),
        data: layout.map(|l| l.3),
        r#ref: Box::into_raw(r),
        r#priv: std::ptr::null_mut(),
    })
}

/// The shared picture behind `pic`, after checking the C fields still describe it.
///
/// # Safety
/// `pic.ref` is NULL or was set by [`export_picture`] and not released yet.
pub(crate) unsafe fn shared_picture(pic: &VmafPicture, what: &str) -> Result<Picture> {
    if pic.r#ref.is_null() {
        return Err(Error::inval(format!(
            "{what} picture has no reference (never allocated or already released)"
        )));
    }
    // SAFETY: a live VmafRef created by export_picture (caller's contract).
    let shared = unsafe { &*pic.r#ref }.pic.clone();
    let bps = shared.bytes_per_sample();
    let intact = pic.pix_fmt == shared.pix_fmt as RawPixelFormat
        && pic.bpc == shared.bpc
        && (0..3).all(|i| pic.w[i] as usize == shared.w[i] && pic.h[i] as usize == shared.h[i]);
    if !intact {
        return Err(Error::inval(format!(
            "{what} picture fields differ from those vmaf_picture_alloc set (pix_fmt {}, bpc {}, {}x{})",
            pic.pix_fmt, pic.bpc, pic.w[0], pic.h[0]
        )));
    }
    let own = c_layout_of(&shared);
    let moved =
        (0..3).any(|i| shared.h[i] > 0 && (pic.data[i], pic.stride[i]) != (own[i].0, own[i].1));
    if !moved {
        return Ok(shared);
    }
    if shared.device_samples().is_some() {
        return Err(Error::inval(format!(
            "{what} picture: the planes of a device picture cannot be moved"
        )));
    }
    // The caller pointed planes elsewhere: score what the struct points to, as libvmaf does.
    let mut copy = PictureData::new(shared.pix_fmt, shared.bpc, shared.w[0], shared.h[0])?;
    for i in 0..3 {
        let (w, h) = (shared.w[i], shared.h[i]);
        if h == 0 {
            continue;
        }
        let row = w * bps;
        let stride = pic.stride[i];
        if pic.data[i].is_null() || stride.unsigned_abs() < row {
            return Err(Error::inval(format!(
                "{what} picture plane {i}: data is NULL or stride {stride} is below its row size {row}"
            )));
        }
        let dst_stride = copy.stride[i] * bps;
        let dst_off = copy.plane_offset(i) * bps;
        let base = copy.base_ptr_mut();
        for y in 0..h {
            // SAFETY: the caller's contract for a VmafPicture: `data[i]` addresses `h` rows of
            // `w` samples, `stride` bytes apart (negative strides go upwards).
            let src = unsafe { pic.data[i].cast::<u8>().offset(y as isize * stride) };
            // SAFETY: row `y` of plane `i` lies inside `copy`'s own buffer, which `src` cannot
            // overlap (it was just allocated).
            unsafe { std::ptr::copy_nonoverlapping(src, base.add(dst_off + y * dst_stride), row) };
        }
    }
    crate::log_debug!(
        "{what} picture: planes moved by the caller, copied from where data[] points"
    );
    Ok(Arc::new(copy))
}

/// The (sample pointer, stride in bytes) of each plane of `data`, as [`export_picture`] set
/// them (computed for comparison, never dereferenced).
fn c_layout_of(data: &PictureData) -> [(*mut c_void, isize); 3] {
    let bps = data.bytes_per_sample();
    std::array::from_fn(|i| {
        (
            std::ptr::without_provenance_mut(data.plane_addr(i)),
            (data.stride[i] * bps) as isize,
        )
    })
}

/// Drops the reference `pic` owns and zeroes it.
///
/// # Safety
/// As for [`shared_picture`].
pub(crate) unsafe fn release_picture(pic: &mut VmafPicture) -> Result<()> {
    if pic.r#ref.is_null() {
        return Err(Error::inval(
            "picture has no reference (never allocated or already released)",
        ));
    }
    // SAFETY: the pointer came from Box::into_raw in export_picture and is released only here,
    // after which the struct is zeroed so it cannot be released twice through it.
    drop(unsafe { Box::from_raw(pic.r#ref) });
    // SAFETY: VmafPicture is plain data; all-zero is its "empty" state.
    *pic = unsafe { std::mem::zeroed() };
    Ok(())
}

/// Allocates a zeroed picture of `w`x`h` luma samples in `pix_fmt` at `bpc` bits into `*pic`
/// (its previous content is overwritten, not released). Rows are padded to 32 samples.
/// Returns 0, -EINVAL for a NULL `pic`, an unknown format, `bpc` outside 8..16, a zero size or a
/// side above 65536, or -ENOMEM when the samples cannot be allocated.
///
/// # Safety
/// `pic` is NULL or points to writable memory for one `VmafPicture`.
#[no_mangle]
pub unsafe extern "C" fn vmaf_picture_alloc(
    pic: *mut VmafPicture,
    pix_fmt: RawPixelFormat,
    bpc: c_uint,
    w: c_uint,
    h: c_uint,
) -> c_int {
    ffi_boundary!("vmaf_picture_alloc", {
        non_null(pic, "picture")?;
        let out = export_picture(new_picture_data(pix_fmt, bpc, w, h)?)?;
        // SAFETY: non-NULL and writable (caller's contract); the old content is not read.
        unsafe { pic.write(out) };
        Ok(())
    })
}

/// Releases the caller's reference to `pic` and zeroes the struct. The samples are freed (or
/// returned to their pool) when the library no longer needs them either.
/// Returns 0, or -EINVAL if `pic` is NULL or holds no reference (e.g. released twice).
///
/// # Safety
/// `pic` is NULL or points to a `VmafPicture` that is zeroed or was filled by this library.
#[no_mangle]
pub unsafe extern "C" fn vmaf_picture_unref(pic: *mut VmafPicture) -> c_int {
    ffi_boundary!("vmaf_picture_unref", {
        non_null(pic, "picture")?;
        // SAFETY: non-NULL, and filled by this library or zeroed (caller's contract).
        unsafe { release_picture(&mut *pic) }
    })
}

/// Called once a wrapped picture's memory is no longer read (`VmafHipReleaseCallback`).
pub type ReleaseCallback = Option<unsafe extern "C" fn(opaque: *mut c_void)>;

/// A caller's release callback, called once when dropped (from any thread).
pub(crate) struct Release {
    release: ReleaseCallback,
    opaque: *mut c_void,
}

// SAFETY: libvmaf_hip.h lets the callback run on any thread, once, with the caller's pointer.
unsafe impl Send for Release {}
// SAFETY: nothing is reached through a shared reference.
unsafe impl Sync for Release {}

impl Release {
    pub(crate) fn new(release: ReleaseCallback, opaque: *mut c_void) -> Release {
        Release { release, opaque }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(f) = self.release {
            // SAFETY: the caller's callback, called exactly once with its own pointer.
            unsafe { f(self.opaque) };
        }
    }
}

/// The picture `make` builds over a caller's memory, exported, with `release(opaque)` armed
/// only once that has succeeded: `make` gets the slot to keep alive as long as the memory is
/// read, and a refusal anywhere releases nothing.
pub(crate) fn wrap_with_release(
    release: ReleaseCallback,
    opaque: *mut c_void,
    make: impl FnOnce(Arc<std::sync::OnceLock<Release>>) -> Result<PictureData>,
) -> Result<VmafPicture> {
    let armed = Arc::new(std::sync::OnceLock::new());
    let out = export_picture(make(armed.clone())?)?;
    let _ = armed.set(Release::new(release, opaque));
    Ok(out)
}

/// A caller's planes read in place (`vmaf_hip_picture_wrap`): pointer and length in samples
/// of each, handed back through the callback when the picture goes.
struct CallerPlanes {
    planes: [(*const c_void, usize); 3],
    deep: bool,
    _release: Arc<std::sync::OnceLock<Release>>,
}

// SAFETY: the caller guarantees the planes stay valid and unchanged until `release`, which
// may run on any thread (libvmaf_hip.h); the library only reads them.
unsafe impl Send for CallerPlanes {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for CallerPlanes {}

impl crate::picture::ExternalPlanes for CallerPlanes {
    fn plane_u8(&self, i: usize) -> &[u8] {
        match self.planes[i] {
            (p, n) if !self.deep && !p.is_null() => {
                // SAFETY: checked by `picture_wrap`: `p` addresses `n` readable bytes that
                // stay valid while `self` lives.
                unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }
            }
            _ => &[],
        }
    }

    fn plane_u16(&self, i: usize) -> &[u16] {
        match self.planes[i] {
            (p, n) if self.deep && !p.is_null() => {
                // SAFETY: as for `plane_u8`, with `p` 2-byte aligned (checked) and `n` samples.
                unsafe { std::slice::from_raw_parts(p.cast::<u16>(), n) }
            }
            _ => &[],
        }
    }
}

/// The planes a caller hands over (`vmaf_hip_picture_wrap`, `vmaf_hip_picture_wrap_device`),
/// checked: per used plane its address, its span in samples (`h` rows of its stride) and its
/// stride in samples; unused planes are (NULL, 0, 0).
pub(crate) struct WrappedLayout {
    pub(crate) fmt: PixelFormat,
    pub(crate) planes: [(*const c_void, usize, usize); 3],
}

/// Checks the arguments of the wrap calls: format, depth, size, non-NULL used planes, strides
/// no shorter than a row and not negative, even addresses and strides for deep samples, spans
/// that fit in memory.
///
/// # Safety
/// `data` and `stride` are NULL or point to 3 elements.
pub(crate) unsafe fn wrapped_layout(
    pix_fmt: RawPixelFormat,
    bpc: c_uint,
    w: c_uint,
    h: c_uint,
    data: *const *mut c_void,
    stride: *const isize,
) -> Result<WrappedLayout> {
    let fmt = pixel_format(pix_fmt)?;
    if !(8..=16).contains(&bpc) {
        return Err(Error::inval(format!("bpc {bpc} is outside 8..16")));
    }
    crate::picture::check_geometry(fmt, bpc, w as usize, h as usize)?;
    non_null(data, "data")?;
    non_null(stride, "stride")?;
    // SAFETY: non-NULL, 3 elements each (caller's contract).
    let (data, stride) = unsafe {
        (
            std::slice::from_raw_parts(data, 3),
            std::slice::from_raw_parts(stride, 3),
        )
    };
    let deep = bpc > 8;
    let bps = if deep { 2 } else { 1 };
    let dims = crate::picture::plane_dims(fmt, w as usize, h as usize);
    let mut planes = [(std::ptr::null::<c_void>(), 0usize, 0usize); 3];
    for (i, &(pw, ph)) in dims.iter().enumerate() {
        if ph == 0 {
            continue;
        }
        let (p, s) = (data[i], stride[i]);
        if p.is_null() {
            return Err(Error::inval(format!("data[{i}] is NULL")));
        }
        if s < 0 || (s as usize) < pw * bps {
            return Err(Error::inval(format!(
                "stride[{i}] {s} is negative or shorter than a row of {pw} samples"
            )));
        }
        if deep && !((p as usize).is_multiple_of(2) && (s as usize).is_multiple_of(2)) {
            return Err(Error::inval(format!(
                "data[{i}] or stride[{i}] is odd for {bpc}-bit samples"
            )));
        }
        let s = s as usize / bps;
        // The plane spans `ph` rows of `s` samples, padding included (libvmaf_hip.h); a slice
        // may not exceed isize::MAX bytes.
        let len = s
            .checked_mul(ph)
            .filter(|n| n.checked_mul(bps).is_some_and(|b| b <= isize::MAX as usize))
            .ok_or_else(|| Error::inval(format!("plane {i} is larger than memory")))?;
        planes[i] = (p.cast_const(), len, s);
    }
    Ok(WrappedLayout { fmt, planes })
}

/// `vmaf_hip_picture_wrap`: a picture reading the caller's planes (checked by
/// [`wrapped_layout`]) in place. Nothing is released on failure.
///
/// # Safety
/// Each used plane of `layout` addresses its span of readable memory, valid and unchanged
/// until `release(opaque)`.
pub(crate) unsafe fn picture_wrap(
    layout: WrappedLayout,
    (bpc, w, h): (c_uint, c_uint, c_uint),
    release: ReleaseCallback,
    opaque: *mut c_void,
) -> Result<VmafPicture> {
    wrap_with_release(release, opaque, |armed| {
        let planes = CallerPlanes {
            planes: layout.planes.map(|(p, n, _)| (p, n)),
            deep: bpc > 8,
            _release: armed,
        };
        let strides = layout.planes.map(|p| p.2);
        PictureData::external(
            layout.fmt,
            bpc,
            w as usize,
            h as usize,
            strides,
            Box::new(planes),
        )
    })
}
