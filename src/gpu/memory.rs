//! Memory: [`DeviceBuffer`] (device memory), [`PinnedHostBuffer`] (page-locked host memory),
//! [`HostRegistration`] (existing host memory page-locked in place), the element types that may
//! cross ([`DeviceCopy`]) and the device addresses kernels take ([`DevicePtr`]).
//!
//! Host memory a pending copy may touch is guarded by an event that is waited on before the host
//! reads, writes or frees it.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use super::device::{Api, Device};
use super::stream::{Event, Stream};
use super::sys::{self, RawDevPtr};
use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// Element types that may cross to and from the device: plain integers and floats, for which
/// every bit pattern (including all-zero) is a valid value.
pub trait DeviceCopy: Copy + Default + Send + Sync + 'static + sealed::Sealed {}
macro_rules! device_copy {
    ($($t:ty),*) => { $( impl sealed::Sealed for $t {} impl DeviceCopy for $t {} )* };
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// Page-locked host memory: the only host memory the DMA engines read and write
/// asynchronously. Host access waits for the last copy that used it.
pub struct PinnedHostBuffer<T: DeviceCopy> {
    dev: Arc<Device>,
    ptr: *mut T,
    len: usize,
    /// Recorded after the last queued copy that touches this memory (created on first use).
    event: Option<Event>,
    /// Whether `event` guards a copy the host has not waited for yet.
    pending: bool,
}

// SAFETY: the buffer is owned memory like a Box<[T]>; T is Send + Sync.
unsafe impl<T: DeviceCopy> Send for PinnedHostBuffer<T> {}
// SAFETY: shared access only reads (after syncing through &mut); T is Sync.
unsafe impl<T: DeviceCopy> Sync for PinnedHostBuffer<T> {}

fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b > 0)
        .ok_or_else(|| Error::inval(format!("bad GPU buffer length {len}")))
}

impl<T: DeviceCopy> PinnedHostBuffer<T> {
    /// `len` zeroed elements.
    pub fn new(dev: &Arc<Device>, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        dev.call_common("pinned host alloc", |f| {
            // SAFETY: writes one pointer; freed in Drop with the matching call.
            unsafe { (f.host_alloc)(&mut p, bytes, 0) }
        })?;
        if p.is_null() {
            return Err(Error::NoMem("pinned host alloc returned NULL".into()));
        }
        // SAFETY: `p` points to `bytes` writable bytes we own; zero is valid for DeviceCopy.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedHostBuffer {
            dev: dev.clone(),
            ptr: p.cast(),
            len,
            event: None,
            pending: false,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn settle(&mut self) -> Result<()> {
        if self.pending {
            if let Some(ev) = &self.event {
                ev.synchronize()?;
            }
            self.pending = false;
        }
        Ok(())
    }

    /// The contents, after any copy in flight has finished.
    pub fn as_slice(&mut self) -> Result<&[T]> {
        self.settle()?;
        // SAFETY: `ptr` holds `len` initialised elements and no copy is in flight.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// Mutable contents, after any copy in flight has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.settle()?;
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Waits for any copy in flight and creates the guard event, before a copy into this buffer
    /// is queued (see [`DeviceBuffer::queue_download`]).
    pub(crate) fn prepare_download(&mut self) -> Result<()> {
        self.settle()?;
        self.ensure_event()
    }

    /// Creates the guard event; done before a copy is queued so that failing to create it
    /// cannot leave a copy unguarded.
    fn ensure_event(&mut self) -> Result<()> {
        if self.event.is_none() {
            self.event = Some(Event::new(&self.dev)?);
        }
        Ok(())
    }

    /// Records that a copy just queued on `stream` uses this memory.
    pub(crate) fn mark_in_use(&mut self, stream: &Stream) -> Result<()> {
        let Some(ev) = &self.event else {
            return stream.synchronize();
        };
        match ev.record(stream) {
            Ok(()) => {
                self.pending = true;
                Ok(())
            }
            Err(e) => {
                // Without the marker, wait for the copy here instead.
                let _ = stream.synchronize();
                Err(e)
            }
        }
    }
}

/// Streams a registration keeps a copy marker for before it waits for all and starts afresh
/// (a context's workers each have one: the default of at most 16 pipeline threads stays well
/// below; a context with more worker threads than this makes recycled buffers start afresh
/// more often, each time after waiting for their copies).
const COPY_STREAMS_KEPT: usize = 64;

/// Existing host memory page-locked for DMA (`hipHostRegister` / `cuMemHostRegister`, portable
/// to every device), so uploads read it directly instead of through a staging copy. Every copy
/// from it leaves an event here, and dropping the registration waits for those copies before
/// unlocking, so the memory cannot be released under a DMA while its owner drops this first.
pub struct HostRegistration {
    dev: Arc<Device>,
    ptr: *mut c_void,
    bytes: usize,
    /// Per stream (by [`Stream::id`] and device) that copied from this memory, an event recorded after
    /// its latest copy: one per device would let two states' streams on one device overwrite
    /// each other's marker.
    copies: std::sync::Mutex<Vec<(u64, Arc<Event>)>>,
}

// SAFETY: the registration only describes memory owned elsewhere; the raw pointer is used for
// runtime calls and range checks, never dereferenced here.
unsafe impl Send for HostRegistration {}
// SAFETY: as above; the event list is behind a mutex.
unsafe impl Sync for HostRegistration {}

impl std::fmt::Debug for HostRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRegistration")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl crate::picture::HostPin for HostRegistration {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl HostRegistration {
    /// Page-locks `bytes` bytes at `ptr`.
    ///
    /// # Safety
    /// The range must be one live allocation that neither moves nor is freed until this value
    /// has been dropped.
    pub unsafe fn new(dev: &Arc<Device>, ptr: *mut u8, bytes: usize) -> Result<Self> {
        if ptr.is_null() || bytes == 0 {
            return Err(Error::inval("nothing to page-lock"));
        }
        let p = ptr.cast::<c_void>();
        let flags = sys::HOST_REGISTER_PORTABLE;
        dev.call_common("host register", |f| {
            // SAFETY: the caller guarantees the range stays allocated until Drop unregisters it.
            unsafe { (f.host_register)(p, bytes, flags) }
        })?;
        Ok(HostRegistration {
            dev: dev.clone(),
            ptr: p,
            bytes,
            copies: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Streams holding a copy marker, for tests.
    #[cfg(test)]
    pub(crate) fn copy_streams(&self) -> usize {
        self.copies.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether `data` lies inside the registered range.
    pub fn covers<T>(&self, data: &[T]) -> bool {
        let start = data.as_ptr() as usize;
        let end = start + std::mem::size_of_val(data);
        let base = self.ptr as usize;
        start >= base && end <= base + self.bytes
    }

    /// The completion marker of copies on `stream`, created if there is none yet: done before
    /// a copy is queued, so that failing to create it cannot leave a copy unguarded.
    fn prepare_copy(&self, stream: &Stream) -> Result<Arc<Event>> {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        // Legacy streams all have id 0: the device tells them apart.
        let mine =
            |(id, e): &&(u64, Arc<Event>)| *id == stream.id() && Arc::ptr_eq(&e.dev, &stream.dev);
        if let Some((_, ev)) = copies.iter().find(mine) {
            return Ok(ev.clone());
        }
        // Streams of closed contexts never come back: once the list is long, wait for its
        // copies (long done, as a rule) and start afresh. A failed wait (a lost device) is
        // logged; the marker goes all the same, as when the registration is dropped.
        if copies.len() >= COPY_STREAMS_KEPT {
            for (_, ev) in copies.iter() {
                if let Err(e) = ev.synchronize() {
                    crate::log_warn!("page-locked picture: {e}");
                }
            }
            copies.clear();
        }
        let ev = Arc::new(Event::new(&stream.dev)?);
        copies.push((stream.id(), ev.clone()));
        Ok(ev)
    }

    /// Records on `ev` (from [`Self::prepare_copy`]) that a copy just queued on `stream`
    /// reads this memory; puts the marker back if another thread's clean-up took it meanwhile.
    fn mark_copy(&self, stream: &Stream, ev: &Arc<Event>) -> Result<()> {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        ev.record(stream)?;
        if !copies.iter().any(|(_, e)| Arc::ptr_eq(e, ev)) {
            copies.push((stream.id(), ev.clone()));
        }
        Ok(())
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        let copies = std::mem::take(self.copies.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, ev) in &copies {
            if let Err(e) = ev.synchronize() {
                self.dev
                    .teardown_warn(format_args!("page-locked picture: {e}"));
            }
        }
        let p = self.ptr;
        self.dev.release("host unregister", false, |api| {
            // SAFETY: `p` was registered in `new` and is unregistered once, after its copies.
            unsafe { (api.common().host_unregister)(p) }
        });
    }
}

impl<T: DeviceCopy> Drop for PinnedHostBuffer<T> {
    fn drop(&mut self) {
        // A DMA still reading or writing this memory must finish before it is freed.
        if let Err(e) = self.settle() {
            self.dev.teardown_warn(format_args!("pinned buffer: {e}"));
        }
        let p = self.ptr.cast::<c_void>();
        self.dev.release("pinned host free", false, |api| {
            // SAFETY: `p` came from this runtime's `host_alloc` (hipHostMalloc /
            // cuMemHostAlloc) and is freed once, with the matching call.
            unsafe { (api.common().host_free)(p) }
        });
    }
}

/// A device address of `T`s, as passed to kernels. Obtained from a [`DeviceBuffer`]; carries no
/// lifetime, so only the typed launch wrappers (which check bounds) turn it into a kernel
/// argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct DevicePtr<T> {
    addr: RawDevPtr,
    _t: PhantomData<*const T>,
}

impl<T> DevicePtr<T> {
    pub fn addr(self) -> u64 {
        self.addr
    }

    pub(crate) fn from_addr(addr: u64) -> Self {
        DevicePtr {
            addr,
            _t: PhantomData,
        }
    }
}

/// Device memory holding `len` elements of `T`.
pub struct DeviceBuffer<T: DeviceCopy> {
    dev: Arc<Device>,
    ptr: RawDevPtr,
    len: usize,
    /// False for a caller's memory ([`DeviceBuffer::borrowed`]): never freed here.
    owned: bool,
    _t: PhantomData<T>,
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {})", self.ptr, self.len)
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// `len` uninitialised elements (device memory is never read by the host without a copy,
    /// so garbage is harmless; callers that need zeros queue [`DeviceBuffer::zero`]).
    pub fn new(dev: &Arc<Device>, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let mut ptr: RawDevPtr = 0;
        dev.call("device alloc", |api| match api {
            // SAFETY: writes one device pointer (64 bits, like RawDevPtr); freed in Drop.
            Api::Hip(h) => unsafe {
                (h.fns.malloc)((&mut ptr as *mut RawDevPtr).cast::<*mut c_void>(), bytes)
            },
            // SAFETY: writes one CUdeviceptr; freed in Drop.
            Api::Cuda(c) => unsafe { (c.fns.mem_alloc)(&mut ptr, bytes) },
        })?;
        dev.account(bytes, true);
        Ok(DeviceBuffer {
            dev: dev.clone(),
            ptr,
            len,
            owned: true,
            _t: PhantomData,
        })
    }

    /// `len` elements at device address `addr` that belong to someone else (a caller's tensor):
    /// dropping the buffer neither frees nor waits. Whoever keeps the memory alive waits for
    /// the device (`Device::synchronize_for_release`) before letting it go, once for all the
    /// buffers over it (a device picture waits once, not once per plane).
    ///
    /// # Safety
    /// `addr` addresses `len` elements of device memory usable on `dev` (its primary context
    /// on NVIDIA, its device on AMD) that stays allocated until the buffer has been dropped and
    /// the device's work queued on it has finished.
    pub unsafe fn borrowed(dev: &Arc<Device>, addr: u64, len: usize) -> Result<Self> {
        byte_len::<T>(len)?;
        // An empty plane (never read) may come with any address.
        let addr = if len == 0 { 0 } else { addr };
        if len > 0 && (addr == 0 || !addr.is_multiple_of(std::mem::align_of::<T>() as u64)) {
            return Err(Error::inval(format!(
                "bad device address {addr:#x} for {}-byte samples",
                std::mem::size_of::<T>()
            )));
        }
        Ok(DeviceBuffer {
            dev: dev.clone(),
            ptr: addr,
            len,
            owned: false,
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ptr(&self) -> DevicePtr<T> {
        DevicePtr {
            addr: self.ptr,
            _t: PhantomData,
        }
    }

    fn check_range(&self, what: &str, count: usize, other: usize) -> Result<usize> {
        if count > self.len || count > other {
            return Err(Error::inval(format!(
                "{what}: {count} elements exceed buffer lengths {} / {other}",
                self.len
            )));
        }
        Ok(count * std::mem::size_of::<T>())
    }

    /// Queues a copy of the first `count` elements of `src` to the start of this buffer.
    pub fn upload_async(
        &mut self,
        stream: &Stream,
        src: &mut PinnedHostBuffer<T>,
        count: usize,
    ) -> Result<()> {
        let bytes = self.check_range("upload", count, src.len)?;
        if bytes == 0 {
            return Ok(());
        }
        // Host writes to `src` must be complete before the DMA reads it.
        src.settle()?;
        src.ensure_event()?;
        // SAFETY: `src` holds at least `bytes` bytes (checked) and stays alive and untouched by
        // the host until the event recorded below has passed (PinnedHostBuffer waits on it).
        unsafe { self.queue_htod(stream, src.ptr.cast::<c_void>().cast_const(), bytes)? };
        src.mark_in_use(stream)
    }

    /// Queues a copy of `bytes` bytes from host address `src` to the start of this buffer.
    ///
    /// # Safety
    /// `bytes` fits this buffer, and `src` points to `bytes` readable bytes that stay allocated
    /// and unwritten until the copy has finished (the caller orders that after the copy).
    unsafe fn queue_htod(&self, stream: &Stream, src: *const c_void, bytes: usize) -> Result<()> {
        // SAFETY: the caller's contract, at offset 0.
        unsafe { self.queue_htod_at(stream, 0, src, bytes) }
    }

    /// [`Self::queue_htod`] to element `offset` of this buffer.
    ///
    /// # Safety
    /// `offset` elements plus `bytes` fit this buffer; otherwise as [`Self::queue_htod`].
    unsafe fn queue_htod_at(
        &self,
        stream: &Stream,
        offset: usize,
        src: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let dst = self.ptr + (offset * std::mem::size_of::<T>()) as RawDevPtr;
        self.dev.call("copy host to device", |api| match api {
            // SAFETY: the ranges hold `bytes` bytes and `src` outlives the copy (contract).
            Api::Hip(h) => unsafe {
                (h.fns.memcpy_htod_async)(dst as *mut c_void, src, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memcpy_htod_async)(dst, src, bytes, stream.raw) },
        })
    }

    /// Queues a copy of `src`, which must lie in page-locked memory `reg`, to the start of
    /// this buffer. `reg` waits for the copy before it can be dropped.
    pub fn upload_registered_async(
        &mut self,
        stream: &Stream,
        reg: &HostRegistration,
        src: &[T],
    ) -> Result<()> {
        self.upload_registered_at_async(stream, reg, src, 0)
    }

    /// [`Self::upload_registered_async`] to element `offset` of this buffer.
    pub fn upload_registered_at_async(
        &mut self,
        stream: &Stream,
        reg: &HostRegistration,
        src: &[T],
        offset: usize,
    ) -> Result<()> {
        if !reg.covers(src) {
            return Err(Error::inval(
                "upload source is not in the page-locked range",
            ));
        }
        let end = offset
            .checked_add(src.len())
            .ok_or_else(|| Error::inval("upload: offset overflows"))?;
        self.check_range("upload", end, end)?;
        let bytes = std::mem::size_of_val(src);
        if bytes == 0 {
            return Ok(());
        }
        // Create the completion marker before queueing, so a copy is never left unguarded.
        let marker = reg.prepare_copy(stream)?;
        // SAFETY: `src` holds `bytes` bytes inside `reg`, whose Drop waits for the event
        // recorded below before the memory can be unlocked and freed; elements `offset..end`
        // lie in this buffer (checked).
        unsafe { self.queue_htod_at(stream, offset, src.as_ptr().cast::<c_void>(), bytes)? };
        reg.mark_copy(stream, &marker).inspect_err(|_| {
            // Without the marker, wait for the copy here instead.
            let _ = stream.synchronize();
        })
    }

    /// Queues a copy of the first `count` elements of this buffer into `dst`.
    pub fn download_async(
        &self,
        stream: &Stream,
        dst: &mut PinnedHostBuffer<T>,
        count: usize,
    ) -> Result<()> {
        let bytes = self.check_range("download", count, dst.len)?;
        if bytes == 0 {
            return Ok(());
        }
        dst.prepare_download()?;
        self.queue_download_bytes(stream, dst, bytes)?;
        dst.mark_in_use(stream)
    }

    /// The copy of [`Self::download_async`] alone, for work recorded into a graph: call
    /// `dst.prepare_download()` before and `dst.mark_in_use(stream)` once the copy (or the
    /// graph holding it) is queued, so that reading `dst` waits for it.
    pub(crate) fn queue_download(
        &self,
        stream: &Stream,
        dst: &PinnedHostBuffer<T>,
        count: usize,
    ) -> Result<()> {
        match self.check_range("download", count, dst.len)? {
            0 => Ok(()),
            bytes => self.queue_download_bytes(stream, dst, bytes),
        }
    }

    /// The copy of the first `bytes` bytes, already checked against both buffers.
    fn queue_download_bytes(
        &self,
        stream: &Stream,
        dst: &PinnedHostBuffer<T>,
        bytes: usize,
    ) -> Result<()> {
        let (d, src) = (dst.ptr.cast::<c_void>(), self.ptr);
        self.dev.call("copy device to host", |api| match api {
            // SAFETY: both ranges hold `bytes` bytes; the host cannot see `dst` until the event
            // its owner records after queueing this copy has passed.
            Api::Hip(h) => unsafe {
                (h.fns.memcpy_dtoh_async)(d, src as *mut c_void, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memcpy_dtoh_async)(d, src, bytes, stream.raw) },
        })
    }

    /// Copies the first `dst.len()` elements of this buffer into ordinary host memory after
    /// the work queued on `stream`, and waits for it.
    pub fn download_blocking(&self, stream: &Stream, dst: &mut [T]) -> Result<()> {
        let bytes = self.check_range("download", dst.len(), dst.len())?;
        if bytes == 0 {
            return Ok(());
        }
        let (d, src) = (dst.as_mut_ptr().cast::<c_void>(), self.ptr);
        self.dev.call("copy device to host", |api| match api {
            // SAFETY: both ranges hold `bytes` bytes; `dst` is borrowed until the
            // synchronisation below.
            Api::Hip(h) => unsafe {
                (h.fns.memcpy_dtoh_async)(d, src as *mut c_void, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memcpy_dtoh_async)(d, src, bytes, stream.raw) },
        })?;
        stream.synchronize()
    }

    /// Queues a copy of `bytes` bytes from `offset` bytes into this buffer to device address
    /// `dst` (a caller's device picture: how a decoder hands frames over).
    ///
    /// # Safety
    /// `dst` addresses `bytes` writable bytes of device memory on this device that nothing
    /// else uses until the copy has finished.
    pub unsafe fn copy_to_address_async(
        &self,
        stream: &Stream,
        offset: usize,
        dst: u64,
        bytes: usize,
    ) -> Result<()> {
        let total = self.len * std::mem::size_of::<T>();
        if offset.checked_add(bytes).is_none_or(|end| end > total) {
            return Err(Error::inval("device copy past the end of the buffer"));
        }
        let src = self.ptr + offset as u64;
        self.dev.call("copy device to device", |api| match api {
            // SAFETY: the source range lies in this buffer (checked); `dst` per the contract.
            Api::Hip(h) => unsafe {
                (h.fns.memcpy_dtod_async)(dst as *mut c_void, src as *mut c_void, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memcpy_dtod_async)(dst, src, bytes, stream.raw) },
        })
    }

    /// Copies `src` (ordinary host memory) to the start of this buffer and waits for it.
    pub fn upload_blocking(&mut self, stream: &Stream, src: &[T]) -> Result<()> {
        let bytes = self.check_range("upload", src.len(), src.len())?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: `src` holds `bytes` bytes; we synchronise before it is released.
        unsafe { self.queue_htod(stream, src.as_ptr().cast::<c_void>(), bytes)? };
        stream.synchronize()
    }

    /// Queues filling the whole buffer with zero bytes.
    pub fn zero(&self, stream: &Stream) -> Result<()> {
        let bytes = self.len * std::mem::size_of::<T>();
        let dst = self.ptr;
        self.dev.call("memset", |api| match api {
            // SAFETY: the buffer holds `bytes` bytes.
            Api::Hip(h) => unsafe {
                (h.fns.memset_d8_async)(dst as *mut c_void, 0, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memset_d8_async)(dst, 0, bytes, stream.raw) },
        })
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if !self.owned {
            // A caller's memory: whoever lets it go waits for the device (`borrowed`).
            return;
        }
        let p = self.ptr;
        self.dev.account(self.len * std::mem::size_of::<T>(), false);
        // Queued kernels or copies may still use the memory: wait for the device first (frees
        // are rare: buffers are cached and reused).
        self.dev.release("device free", true, |api| match api {
            // SAFETY: `p` came from hipMalloc and is freed once.
            Api::Hip(h) => unsafe { (h.fns.free)(p as *mut c_void) },
            // SAFETY: `p` came from cuMemAlloc and is freed once.
            Api::Cuda(c) => unsafe { (c.fns.mem_free)(p) },
        });
    }
}
