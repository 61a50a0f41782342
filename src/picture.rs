//! Pictures: planar YUV frames at 8..16 bits, the input of every feature extractor.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

pub mod pool;
pub mod semiplanar;

/// Plane masks for [`PictureData::fetch_host`] and what extractors read on the host: bit `i` =
/// plane `i`.
pub(crate) const LUMA: u8 = 0b001;
pub(crate) const ALL_PLANES: u8 = 0b111;

/// Pixel layouts, numbered as libvmaf's `enum VmafPixelFormat`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    Unknown = 0,
    Yuv420p = 1,
    Yuv422p = 2,
    Yuv444p = 3,
    Yuv400p = 4,
}

impl PixelFormat {
    /// From the C enum value.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => PixelFormat::Unknown,
            1 => PixelFormat::Yuv420p,
            2 => PixelFormat::Yuv422p,
            3 => PixelFormat::Yuv444p,
            4 => PixelFormat::Yuv400p,
            _ => return None,
        })
    }

    /// Horizontal and vertical chroma subsampling shifts.
    pub fn chroma_shift(self) -> (u32, u32) {
        match self {
            PixelFormat::Yuv420p => (1, 1),
            PixelFormat::Yuv422p => (1, 0),
            _ => (0, 0),
        }
    }

    /// Number of planes that carry samples.
    pub fn plane_count(self) -> usize {
        match self {
            PixelFormat::Yuv400p => 1,
            PixelFormat::Unknown => 0,
            _ => 3,
        }
    }
}

/// Plane dimensions of a `w`x`h` picture, with libvmaf's chroma rule: `w >> ss_hor`, `h >> ss_ver`
/// (floor; zero for 4:0:0).
pub fn plane_dims(pix_fmt: PixelFormat, w: usize, h: usize) -> [(usize, usize); 3] {
    let (sx, sy) = pix_fmt.chroma_shift();
    if pix_fmt == PixelFormat::Yuv400p {
        return [(w, h), (0, 0), (0, 0)];
    }
    let c = (w >> sx, h >> sy);
    [(w, h), c, c]
}

/// Sample storage: 8-bit pictures hold bytes, deeper ones native-endian `u16`; or memory the
/// picture reads in place (see [`ExternalPlanes`]).
pub enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
    External(Box<dyn ExternalPlanes>),
    Device(Box<dyn DeviceSamples>),
}

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Samples::U8(v) => write!(f, "U8({} samples)", v.len()),
            Samples::U16(v) => write!(f, "U16({} samples)", v.len()),
            Samples::External(_) => f.write_str("External"),
            Samples::Device(_) => f.write_str("Device"),
        }
    }
}

/// Samples in GPU memory (pictures of a DEVICE pool, which the caller fills on the device).
/// GPU extractors read them in place; CPU code reads a host copy of the planes it needs, made
/// by [`PictureData::fetch_host`] before it runs. The GPU layer implements it.
pub trait DeviceSamples: std::any::Any + Send + Sync {
    fn as_any(&self) -> &dyn std::any::Any;
    /// Device address of plane `i`'s first sample (for the C view's `data[i]`).
    fn address(&self, i: usize) -> usize;
    /// The host copy of plane `i`, if [`Self::fetch_host`] made it.
    fn host(&self, i: usize) -> Option<PlaneRef<'_>>;
    /// Makes the host copy of plane `i` (once; later calls return at once).
    fn fetch_host(&self, i: usize) -> Result<()>;
    /// Called when the caller gets the picture (again): the content is new, so the host copies
    /// of the previous content go.
    fn forget_host(&mut self);
    /// Orders the GPU's later reads after the caller's writes so far (at `vmaf_read_pictures`).
    fn mark_written(&self) -> Result<()>;
}

/// Sample memory a picture reads in place but does not own: a caller's decoded frame, a
/// mapped file. Plane `i` holds `h[i]` rows of `stride[i]` samples; the memory is let go when
/// the implementor drops, after the picture's last reader.
pub trait ExternalPlanes: Send + Sync {
    /// Plane `i` of an 8-bit picture (empty for deeper ones).
    fn plane_u8(&self, i: usize) -> &[u8];
    /// Plane `i` of a deeper picture (empty for 8-bit ones).
    fn plane_u16(&self, i: usize) -> &[u16];
}

/// A borrowed plane of samples.
#[derive(Debug, Clone, Copy)]
pub enum PlaneRef<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
}

/// The owned content of a picture. Planes live in one buffer; strides are in samples.
#[derive(Debug)]
pub struct PictureData {
    pub pix_fmt: PixelFormat,
    pub bpc: u32,
    pub w: [usize; 3],
    pub h: [usize; 3],
    /// Row pitch of each plane, in samples.
    pub stride: [usize; 3],
    offset: [usize; 3],
    /// Identity of the content: a fresh value for every allocation and every fetch from a pool,
    /// so caches keyed by it never mistake a recycled buffer for the picture it held before.
    id: u64,
    /// Page-locking of `samples` (pictures from a pinned pool). Declared before `samples`
    /// so it drops first: unlocking waits for any upload still reading the memory.
    pinned: std::sync::OnceLock<Box<dyn HostPin>>,
    samples: Samples,
    /// Receives the buffer when the last reference drops (picture pools recycle it).
    release: Option<ReleaseHook>,
    /// Whether the buffer served an earlier picture (so it is likely to serve later ones).
    reused: bool,
}

/// A page-locking of a picture's sample buffer, owned by the picture and released (unlocked)
/// when it drops. The GPU layer implements it (`gpu::HostRegistration`) and recognises its own
/// through `as_any`, so pictures do not depend on the GPU runtime.
pub trait HostPin: std::any::Any + std::fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Callback that takes over a picture's buffer instead of freeing it.
pub struct ReleaseHook(Box<dyn FnOnce(PictureData) + Send + Sync>);

impl std::fmt::Debug for ReleaseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReleaseHook")
    }
}

impl PictureData {
    /// A deep copy of the samples and geometry (without any release hook); external planes are
    /// copied into a buffer of the picture's own.
    pub fn duplicate(&self) -> PictureData {
        let (samples, stride, offset) = match &self.samples {
            Samples::U8(v) => (Samples::U8(v.clone()), self.stride, self.offset),
            Samples::U16(v) => (Samples::U16(v.clone()), self.stride, self.offset),
            Samples::External(_) | Samples::Device(_) => {
                let mut offset = [0; 3];
                let mut total = 0;
                for (i, o) in offset.iter_mut().enumerate() {
                    *o = total;
                    total += self.stride[i] * self.h[i];
                }
                let samples = match self.plane(0) {
                    PlaneRef::U8(_) => {
                        let mut v = Vec::with_capacity(total);
                        (0..3).for_each(|i| v.extend_from_slice(self.plane_u8(i)));
                        Samples::U8(v)
                    }
                    PlaneRef::U16(_) => {
                        let mut v = Vec::with_capacity(total);
                        (0..3).for_each(|i| v.extend_from_slice(self.plane_u16(i)));
                        Samples::U16(v)
                    }
                };
                (samples, self.stride, offset)
            }
        };
        PictureData {
            pix_fmt: self.pix_fmt,
            bpc: self.bpc,
            w: self.w,
            h: self.h,
            stride,
            offset,
            id: next_id(),
            pinned: std::sync::OnceLock::new(),
            samples,
            release: None,
            reused: false,
        }
    }

    /// A picture of `pix_fmt` at `bpc` bits, `w`x`h` luma samples, that reads `planes` in
    /// place; `stride` in samples. Checks the geometry and that every plane is as long as its
    /// rows say, so reading it never goes out of bounds.
    pub fn external(
        pix_fmt: PixelFormat,
        bpc: u32,
        w: usize,
        h: usize,
        stride: [usize; 3],
        planes: Box<dyn ExternalPlanes>,
    ) -> Result<Self> {
        check_geometry(pix_fmt, bpc, w, h)?;
        let dims = plane_dims(pix_fmt, w, h);
        for (i, &(pw, ph)) in dims.iter().enumerate() {
            if ph == 0 {
                continue;
            }
            let len = if bpc == 8 {
                planes.plane_u8(i).len()
            } else {
                planes.plane_u16(i).len()
            };
            let need = stride[i].checked_mul(ph);
            if stride[i] < pw || need.is_none_or(|n| len < n) {
                return Err(Error::inval(format!(
                    "plane {i}: {len} samples cannot hold {ph} rows of {pw} samples, {} apart",
                    stride[i]
                )));
            }
        }
        let mut stride = stride;
        for (i, &(_, ph)) in dims.iter().enumerate() {
            if ph == 0 {
                stride[i] = 0;
            }
        }
        Ok(Self::not_owned(
            pix_fmt,
            bpc,
            dims,
            stride,
            Samples::External(planes),
        ))
    }

    /// A picture over samples it does not own (no offsets, no pool, nothing to recycle).
    fn not_owned(
        pix_fmt: PixelFormat,
        bpc: u32,
        dims: [(usize, usize); 3],
        stride: [usize; 3],
        samples: Samples,
    ) -> Self {
        PictureData {
            pix_fmt,
            bpc,
            w: dims.map(|d| d.0),
            h: dims.map(|d| d.1),
            stride,
            offset: [0; 3],
            id: next_id(),
            pinned: std::sync::OnceLock::new(),
            samples,
            release: None,
            reused: false,
        }
    }

    /// Identity of the content (see the field): equal ids mean equal samples.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The device memory of a picture from a DEVICE pool.
    pub fn device_samples(&self) -> Option<&dyn DeviceSamples> {
        match &self.samples {
            Samples::Device(d) => Some(d.as_ref()),
            _ => None,
        }
    }

    /// A picture of `pix_fmt` at `bpc` bits whose samples live in GPU memory; `stride` in
    /// samples, as the device planes are laid out.
    pub fn on_device(
        pix_fmt: PixelFormat,
        bpc: u32,
        w: usize,
        h: usize,
        stride: [usize; 3],
        samples: Box<dyn DeviceSamples>,
    ) -> Result<Self> {
        check_geometry(pix_fmt, bpc, w, h)?;
        let dims = plane_dims(pix_fmt, w, h);
        Ok(Self::not_owned(
            pix_fmt,
            bpc,
            dims,
            stride,
            Samples::Device(samples),
        ))
    }

    /// For a picture in GPU memory: makes host copies of the planes in `mask` (bit `i` = plane
    /// `i`) for CPU code to read through [`Self::plane`]. Nothing for other pictures.
    pub fn fetch_host(&self, mask: u8) -> Result<()> {
        if let Samples::Device(d) = &self.samples {
            for i in 0..3 {
                if mask & (1 << i) != 0 && self.h[i] > 0 {
                    d.fetch_host(i)?;
                }
            }
        }
        Ok(())
    }

    /// Whether the buffer goes back to a pool when released (so holding it starves the pool).
    pub fn is_pooled(&self) -> bool {
        self.release.is_some()
    }

    /// The sample buffer's address and size in bytes (for page-locking it).
    pub fn sample_buffer(&mut self) -> (*mut u8, usize) {
        match &mut self.samples {
            Samples::U8(v) => (v.as_mut_ptr(), v.len()),
            Samples::U16(v) => (v.as_mut_ptr().cast(), v.len() * 2),
            // Not the picture's to lock.
            Samples::External(_) | Samples::Device(_) => (std::ptr::null_mut(), 0),
        }
    }

    /// Attaches the page-locking of this picture's sample buffer (see [`Self::sample_buffer`]).
    pub fn set_pinned(&mut self, reg: Box<dyn HostPin>) {
        self.pinned = std::sync::OnceLock::from(reg);
    }

    /// Releases the page-locking of the sample buffer, if any (a closed pool's pictures: their
    /// locking belongs to the pool, not to the free list the buffer goes to).
    pub fn unpin(&mut self) {
        drop(self.pinned.take());
    }

    /// The page-locking of the sample buffer: pictures from a pinned pool, and buffers that
    /// [`Self::pin_shared`] locked.
    pub fn pinned(&self) -> Option<&dyn HostPin> {
        self.pinned.get().map(|b| b.as_ref())
    }

    /// Page-locks the buffer of a shared picture with `lock(address, bytes)` unless it is
    /// locked already, for a picture whose buffer the library recycles and has recycled
    /// before (a caller allocating pictures per frame, or a pool picture lent again): the
    /// locking then stays with the buffer, and later pictures that get it are uploaded
    /// without a staging copy. None for other pictures (locking costs more than a staging
    /// copy for a buffer used once) and when `lock` fails.
    pub fn pin_shared(
        &self,
        lock: impl FnOnce(*const u8, usize) -> Result<Box<dyn HostPin>>,
    ) -> Option<&dyn HostPin> {
        if let Some(p) = self.pinned.get() {
            return Some(p.as_ref());
        }
        if !self.reused {
            return None;
        }
        let (ptr, bytes) = match &self.samples {
            Samples::U8(v) => (v.as_ptr(), v.len()),
            Samples::U16(v) => (v.as_ptr().cast::<u8>(), v.len() * 2),
            Samples::External(_) | Samples::Device(_) => return None,
        };
        if bytes < PIN_MIN_BYTES {
            return None;
        }
        match lock(ptr, bytes) {
            // Another thread may have locked it meanwhile: its locking stays, this one goes.
            Ok(reg) => Some(self.pinned.get_or_init(|| reg).as_ref()),
            Err(e) => {
                crate::log_debug!("picture buffer not page-locked: {e}");
                None
            }
        }
    }
}

impl Drop for PictureData {
    fn drop(&mut self) {
        if let Some(hook) = self.release.take() {
            let samples = std::mem::replace(&mut self.samples, Samples::U8(Vec::new()));
            (hook.0)(PictureData {
                pix_fmt: self.pix_fmt,
                bpc: self.bpc,
                w: self.w,
                h: self.h,
                stride: self.stride,
                offset: self.offset,
                id: self.id,
                pinned: std::mem::take(&mut self.pinned),
                samples,
                release: None,
                reused: false,
            });
        } else {
            // The buffer serves the next picture of the same size, page-locking included.
            recycled::put(
                std::mem::replace(&mut self.samples, Samples::U8(Vec::new())),
                self.pinned.take(),
            );
        }
    }
}

impl Samples {
    fn len(&self) -> usize {
        match self {
            Samples::U8(v) => v.len(),
            Samples::U16(v) => v.len(),
            Samples::External(_) | Samples::Device(_) => 0,
        }
    }

    /// Bytes of an owned host buffer (0 for external and device memory, never recycled).
    fn bytes(&self) -> usize {
        match self {
            Samples::U8(v) => v.len(),
            Samples::U16(v) => v.len() * 2,
            Samples::External(_) | Samples::Device(_) => 0,
        }
    }

    /// `n` zero samples, or out-of-memory naming `what`. When memory is short, the recycled
    /// buffers are let go and the allocation tried once more.
    fn zeroed(u8_samples: bool, n: usize, what: &str) -> Result<Samples> {
        let alloc = || -> Result<Samples> {
            Ok(if u8_samples {
                Samples::U8(crate::limits::try_filled(n, 0, what)?)
            } else {
                Samples::U16(crate::limits::try_filled(n, 0, what)?)
            })
        };
        alloc().or_else(|_| {
            recycled::clear();
            alloc()
        })
    }
}

/// Sample buffers of dropped pictures, kept for the next picture of the same size: a caller
/// that allocates a picture per frame (FFmpeg's filter, most C programs) then reuses warm
/// memory instead of page-faulting a fresh buffer every frame. Bounded in count and bytes; the
/// oldest go first, and all of them when an allocation fails.
mod recycled {
    use std::sync::{Mutex, MutexGuard};

    use super::{HostPin, Samples};

    /// Buffers kept: enough for the pictures of every frame in flight of a busy context.
    const MAX_BUFFERS: usize = 64;
    /// Bytes kept at most (a 4K 16-bit 4:4:4 picture is 48 MiB).
    const MAX_BYTES: usize = 512 << 20;

    /// A kept buffer and its page-locking, if any (declared first: unlocked before freed).
    pub(super) struct Kept {
        pub(super) pin: Option<Box<dyn HostPin>>,
        pub(super) samples: Samples,
    }

    static FREE: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

    fn free() -> MutexGuard<'static, Vec<Kept>> {
        FREE.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kept buffer of `n` samples of that kind (zeroed when `zero`), if there is one.
    pub(super) fn take(u8_samples: bool, n: usize, zero: bool) -> Option<Kept> {
        let mut k = {
            let mut f = free();
            let i = f.iter().rposition(|b| {
                matches!(b.samples, Samples::U8(_)) == u8_samples && b.samples.len() == n
            })?;
            f.remove(i)
        };
        if zero {
            match &mut k.samples {
                Samples::U8(v) => v.fill(0),
                Samples::U16(v) => v.fill(0),
                Samples::External(_) | Samples::Device(_) => {}
            }
        }
        Some(k)
    }

    /// Keeps `samples` (and its page-locking) for a later picture; dropped when it does not
    /// fit the bounds.
    pub(super) fn put(samples: Samples, pin: Option<Box<dyn HostPin>>) {
        let bytes = samples.bytes();
        if bytes == 0 || bytes > MAX_BYTES {
            return;
        }
        let mut evicted = Vec::new();
        let mut f = free();
        let mut total: usize = f.iter().map(|k| k.samples.bytes()).sum::<usize>() + bytes;
        while !f.is_empty() && (f.len() >= MAX_BUFFERS || total > MAX_BYTES) {
            total -= f[0].samples.bytes();
            evicted.push(f.remove(0));
        }
        if f.try_reserve(1).is_ok() {
            f.push(Kept { pin, samples });
        }
        drop(f);
        // Unlocking may wait for copies: not under the lock.
        drop(evicted);
    }

    /// Lets every kept buffer go (memory is short).
    pub(super) fn clear() {
        let kept = std::mem::take(&mut *free());
        // Unlocking may wait for copies: not under the lock.
        drop(kept);
    }

    #[cfg(test)]
    pub(super) fn kept() -> usize {
        free().len()
    }
}

/// A picture identity never handed out before.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A known format, 8..=16 bits, and a size within the limits.
pub(crate) fn check_geometry(pix_fmt: PixelFormat, bpc: u32, w: usize, h: usize) -> Result<()> {
    if pix_fmt == PixelFormat::Unknown {
        return Err(Error::inval("unknown pixel format"));
    }
    if !(8..=16).contains(&bpc) {
        return Err(Error::inval(format!("bpc {bpc} outside 8..16")));
    }
    if w == 0 || h == 0 {
        return Err(Error::inval("zero picture size"));
    }
    let max = crate::limits::MAX_PICTURE_SIDE;
    if w > max || h > max {
        return Err(Error::inval(format!(
            "picture size {w}x{h} exceeds the limit of {max} samples per side"
        )));
    }
    Ok(())
}

/// Buffers smaller than this are not page-locked for uploads: small pictures upload quickly
/// through staging memory, and their buffers may share pages, which can be locked only once.
pub const PIN_MIN_BYTES: usize = 1 << 20;

/// Rows are padded to 32 samples, as libvmaf's allocator does.
const ROW_ALIGN: usize = 32;

impl PictureData {
    /// A zeroed picture. `bpc` must be 8..=16 and the format known.
    pub fn new(pix_fmt: PixelFormat, bpc: u32, w: usize, h: usize) -> Result<Self> {
        Self::alloc(pix_fmt, bpc, w, h, true)
    }

    /// A picture whose samples the caller is about to write: like [`Self::new`], but a recycled
    /// buffer keeps what its last picture held instead of being cleared (as upstream's
    /// `vmaf_picture_alloc` gives uninitialised memory), which saves a pass over the buffer on
    /// every per-frame allocation.
    pub fn for_writing(pix_fmt: PixelFormat, bpc: u32, w: usize, h: usize) -> Result<Self> {
        Self::alloc(pix_fmt, bpc, w, h, false)
    }

    fn alloc(pix_fmt: PixelFormat, bpc: u32, w: usize, h: usize, zero: bool) -> Result<Self> {
        check_geometry(pix_fmt, bpc, w, h)?;
        let dims = plane_dims(pix_fmt, w, h);
        let mut stride = [0usize; 3];
        let mut offset = [0usize; 3];
        let mut total = 0usize;
        for (i, &(pw, ph)) in dims.iter().enumerate() {
            stride[i] = pw.div_ceil(ROW_ALIGN) * ROW_ALIGN;
            offset[i] = total;
            total = stride[i]
                .checked_mul(ph)
                .and_then(|n| n.checked_add(total))
                .ok_or_else(|| Error::inval("picture too large"))?;
        }
        let what = format!("{w}x{h} {pix_fmt:?} {bpc}-bit picture");
        let (samples, pinned, reused) = match recycled::take(bpc == 8, total, zero) {
            Some(k) => (
                k.samples,
                k.pin.map_or_else(std::sync::OnceLock::new, Into::into),
                true,
            ),
            None => (
                Samples::zeroed(bpc == 8, total, &what)?,
                std::sync::OnceLock::new(),
                false,
            ),
        };
        Ok(PictureData {
            pix_fmt,
            bpc,
            w: [dims[0].0, dims[1].0, dims[2].0],
            h: [dims[0].1, dims[1].1, dims[2].1],
            stride,
            offset,
            id: next_id(),
            pinned,
            samples,
            release: None,
            reused,
        })
    }

    /// Bytes per sample (1 or 2).
    pub fn bytes_per_sample(&self) -> usize {
        if self.bpc == 8 {
            1
        } else {
            2
        }
    }

    fn range(&self, i: usize) -> std::ops::Range<usize> {
        let len = self.stride[i] * self.h[i];
        self.offset[i]..self.offset[i] + len
    }

    /// Plane `i` (stride `self.stride[i]` samples, `h[i]` rows).
    pub fn plane(&self, i: usize) -> PlaneRef<'_> {
        let r = self.range(i);
        match &self.samples {
            Samples::U8(v) => PlaneRef::U8(&v[r]),
            Samples::U16(v) => PlaneRef::U16(&v[r]),
            Samples::External(e) if self.bpc == 8 => PlaneRef::U8(&e.plane_u8(i)[r]),
            Samples::External(e) => PlaneRef::U16(&e.plane_u16(i)[r]),
            // Empty until fetched: CPU code reads only planes fetched for it.
            Samples::Device(d) => d.host(i).unwrap_or(if self.bpc == 8 {
                PlaneRef::U8(&[])
            } else {
                PlaneRef::U16(&[])
            }),
        }
    }

    /// Plane `i` of an 8-bit picture. Panics on deeper pictures (internal misuse).
    pub fn plane_u8(&self, i: usize) -> &[u8] {
        match self.plane(i) {
            PlaneRef::U8(p) => p,
            PlaneRef::U16(_) => panic!("plane_u8 on a {}-bit picture", self.bpc),
        }
    }

    /// Plane `i` of a 9..16-bit picture. Panics on 8-bit pictures (internal misuse).
    pub fn plane_u16(&self, i: usize) -> &[u16] {
        match self.plane(i) {
            PlaneRef::U16(p) => p,
            PlaneRef::U8(_) => panic!("plane_u16 on an 8-bit picture"),
        }
    }

    /// Mutable plane of an 8-bit picture.
    pub fn plane_u8_mut(&mut self, i: usize) -> &mut [u8] {
        let r = self.range(i);
        match &mut self.samples {
            Samples::U8(v) => &mut v[r],
            Samples::U16(_) => panic!("plane_u8_mut on a deep picture"),
            Samples::External(_) | Samples::Device(_) => {
                panic!("plane_u8_mut on memory the picture does not own")
            }
        }
    }

    /// Mutable plane of a 9..16-bit picture.
    pub fn plane_u16_mut(&mut self, i: usize) -> &mut [u16] {
        let r = self.range(i);
        match &mut self.samples {
            Samples::U16(v) => &mut v[r],
            Samples::U8(_) => panic!("plane_u16_mut on an 8-bit picture"),
            Samples::External(_) | Samples::Device(_) => {
                panic!("plane_u16_mut on memory the picture does not own")
            }
        }
    }

    /// Sample at (x, y) of plane `i`, widened.
    #[inline]
    pub fn sample(&self, i: usize, x: usize, y: usize) -> u16 {
        let idx = y * self.stride[i] + x;
        match self.plane(i) {
            PlaneRef::U8(p) => p[idx] as u16,
            PlaneRef::U16(p) => p[idx],
        }
    }

    /// Hands the buffer to `hook` instead of freeing it when this picture is dropped (the same
    /// buffer, so pointers into it stay valid for the next user).
    /// The buffer then holds new content, so the picture gets a fresh [`Self::id`].
    pub fn set_release(&mut self, hook: impl FnOnce(PictureData) + Send + Sync + 'static) {
        self.release = Some(ReleaseHook(Box::new(hook)));
        self.id = next_id();
        if let Samples::Device(d) = &mut self.samples {
            d.forget_host();
        }
    }

    /// Raw base pointer of the sample buffer, for the C boundary (null for external memory:
    /// see [`Self::plane_ptr`]).
    pub fn base_ptr_mut(&mut self) -> *mut u8 {
        match &mut self.samples {
            Samples::U8(v) => v.as_mut_ptr(),
            Samples::U16(v) => v.as_mut_ptr() as *mut u8,
            Samples::External(_) | Samples::Device(_) => std::ptr::null_mut(),
        }
    }

    /// Address of plane `i`'s first sample, for the C boundary.
    pub fn plane_ptr(&mut self, i: usize) -> *mut u8 {
        if let Samples::External(e) = &self.samples {
            let p = if self.bpc == 8 {
                e.plane_u8(i).as_ptr()
            } else {
                e.plane_u16(i).as_ptr().cast()
            };
            // The C view is `void *`; the library itself never writes through it.
            return p.cast_mut();
        }
        if let Samples::Device(d) = &self.samples {
            // A device address: the C view only hands it back to the caller.
            return std::ptr::without_provenance_mut(d.address(i));
        }
        let bps = self.bytes_per_sample();
        self.base_ptr_mut().wrapping_add(self.offset[i] * bps)
    }

    /// The C view's address of plane `i` (a device address for device pictures); compared,
    /// never dereferenced.
    pub fn plane_addr(&self, i: usize) -> usize {
        match (&self.samples, self.plane(i)) {
            (Samples::Device(d), _) => d.address(i),
            (_, PlaneRef::U8(p)) => p.as_ptr() as usize,
            (_, PlaneRef::U16(p)) => p.as_ptr() as usize,
        }
    }

    /// Bytes of the picture's own host sample buffer (one the library allocated and recycles);
    /// 0 for external memory read in place and for device memory.
    pub fn owned_host_bytes(&self) -> usize {
        self.samples.bytes()
    }

    /// Whether the samples are external memory read in place.
    pub fn is_external(&self) -> bool {
        matches!(self.samples, Samples::External(_))
    }

    /// Offset of plane `i` in samples from the buffer start.
    pub fn plane_offset(&self, i: usize) -> usize {
        self.offset[i]
    }

    /// Planes `first..=last` (indices 0–2) as one slice of the picture's own buffer (padding
    /// and all), so they can travel in one copy; None for memory the picture does not own.
    pub fn planes_span(&self, first: usize, last: usize) -> Option<PlaneRef<'_>> {
        let r = self.offset[first]..self.range(last).end;
        match &self.samples {
            Samples::U8(v) => v.get(r).map(PlaneRef::U8),
            Samples::U16(v) => v.get(r).map(PlaneRef::U16),
            Samples::External(_) | Samples::Device(_) => None,
        }
    }

    /// Copies the luma plane into a dense `u16` buffer (row pitch = width).
    pub fn luma_u16(&self) -> Vec<u16> {
        let (w, h, s) = (self.w[0], self.h[0], self.stride[0]);
        let mut out = Vec::with_capacity(w * h);
        match self.plane(0) {
            PlaneRef::U8(p) => {
                for y in 0..h {
                    out.extend(p[y * s..y * s + w].iter().map(|&v| v as u16));
                }
            }
            PlaneRef::U16(p) => {
                for y in 0..h {
                    out.extend_from_slice(&p[y * s..y * s + w]);
                }
            }
        }
        out
    }
}

/// A shared, immutable picture handed to extractors (cheap to clone).
pub type Picture = Arc<PictureData>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A dropped picture's buffer serves the next picture of its size, zeroed again; pooled
    /// pictures (with a release hook) are not taken.
    #[test]
    fn buffers_are_recycled_zeroed() {
        // A size no other test uses, so the global free list hands this buffer back.
        let (w, h) = (1234, 77);
        let mut a = PictureData::new(PixelFormat::Yuv444p, 12, w, h).unwrap();
        a.plane_u16_mut(2)[5] = 4095;
        let ptr = a.base_ptr_mut();
        drop(a);
        assert!(recycled::kept() > 0);
        let mut b = PictureData::new(PixelFormat::Yuv444p, 12, w, h).unwrap();
        assert_eq!(b.base_ptr_mut(), ptr, "buffer not reused");
        assert!((0..3).all(|i| b.plane_u16(i).iter().all(|&v| v == 0)));
        // Another depth of the same sample count does not match.
        let mut c = PictureData::new(PixelFormat::Yuv444p, 8, w, h).unwrap();
        assert_ne!(c.base_ptr_mut(), ptr);
        // A pooled picture goes to its hook, not to the free list.
        let (tx, rx) = std::sync::mpsc::channel();
        b.set_release(move |p| tx.send(p).unwrap());
        drop(b);
        let mut back = rx.recv().unwrap();
        assert_eq!(back.base_ptr_mut(), ptr);
        let mut d = PictureData::new(PixelFormat::Yuv444p, 12, w, h).unwrap();
        assert_ne!(d.base_ptr_mut(), ptr, "a pooled buffer was recycled");
    }

    /// A picture made for writing takes a recycled buffer as it is (no clearing pass).
    #[test]
    fn buffers_for_writing_are_recycled_as_they_are() {
        let (w, h) = (1236, 75);
        let mut a = PictureData::for_writing(PixelFormat::Yuv420p, 8, w, h).unwrap();
        a.plane_u8_mut(0)[7] = 200;
        let ptr = a.base_ptr_mut();
        drop(a);
        let mut b = PictureData::for_writing(PixelFormat::Yuv420p, 8, w, h).unwrap();
        assert_eq!(b.base_ptr_mut(), ptr, "buffer not reused");
        assert_eq!(b.plane_u8(0)[7], 200);
        drop(b);
        let c = PictureData::new(PixelFormat::Yuv420p, 8, w, h).unwrap();
        assert_eq!(c.plane_u8(0)[7], 0);
    }

    /// A page-locking stand-in that counts its unlocks (also the pool's tests').
    #[derive(Debug)]
    pub(super) struct FakePin(pub(super) Arc<std::sync::atomic::AtomicUsize>);

    impl HostPin for FakePin {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    impl Drop for FakePin {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Only a buffer that came back for reuse is locked, once; the locking travels with it
    /// through the free list; small and external pictures are never locked, nor a picture
    /// with a release hook that no pool lent again (see the pool's tests).
    #[test]
    fn reused_buffers_are_locked_once_and_keep_it() {
        let (w, h) = (1056, 1000);
        let unlocked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let locks = std::sync::atomic::AtomicUsize::new(0);
        let lock = |_: *const u8, bytes: usize| -> Result<Box<dyn HostPin>> {
            assert_eq!(bytes, w * h);
            locks.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(FakePin(unlocked.clone())))
        };
        let fresh = PictureData::for_writing(PixelFormat::Yuv400p, 8, w, h).unwrap();
        assert!(
            fresh.pin_shared(lock).is_none(),
            "a fresh buffer is not locked"
        );
        drop(fresh);
        let reused = PictureData::for_writing(PixelFormat::Yuv400p, 8, w, h).unwrap();
        assert!(reused.pin_shared(lock).is_some());
        assert!(reused.pin_shared(lock).is_some());
        assert_eq!(locks.load(Ordering::SeqCst), 1);
        drop(reused);
        assert_eq!(
            unlocked.load(Ordering::SeqCst),
            0,
            "kept locked in the free list"
        );
        let again = PictureData::for_writing(PixelFormat::Yuv400p, 8, w, h).unwrap();
        assert!(again.pinned().is_some());
        assert_eq!(locks.load(Ordering::SeqCst), 1);
        // A hook alone does not make a buffer reused.
        let fresh_pin =
            |_: *const u8, _: usize| -> Result<Box<dyn HostPin>> { panic!("must not lock") };
        let mut hooked = PictureData::new(PixelFormat::Yuv400p, 8, w, h).unwrap();
        hooked.set_release(|_| {});
        assert!(hooked.pin_shared(fresh_pin).is_none());
        drop(hooked);
        drop(again);
        let small = PictureData::for_writing(PixelFormat::Yuv400p, 8, 64, 64).unwrap();
        drop(small);
        let small = PictureData::for_writing(PixelFormat::Yuv400p, 8, 64, 64).unwrap();
        assert!(small.pin_shared(fresh_pin).is_none());
    }
}
