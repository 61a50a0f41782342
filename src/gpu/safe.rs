//! Safe RAII types over both runtimes: [`Device`], [`Stream`], [`Event`], [`DeviceBuffer`],
//! [`PinnedHostBuffer`], [`Module`] and [`Kernel`].
//!
//! Every operation first binds the device to the calling thread (`cuCtxSetCurrent` with the
//! primary context on NVIDIA, `hipSetDevice` on AMD): both runtimes keep the current device per
//! thread, and worker threads of a pool may issue work for a state they never initialised.
//! Host memory a pending copy may touch is guarded by an event that is waited on before the host
//! reads, writes or frees it.

use std::ffi::{c_char, c_int, c_void, CString};
use std::marker::PhantomData;
use std::sync::Arc;

use super::sys::{self, CudaApi, HipApi, RawContext, RawDevPtr, Status, Vendor};
use crate::error::{Error, Result};

/// A vendor's loaded runtime.
#[derive(Clone, Copy)]
pub(crate) enum Api {
    Hip(&'static HipApi),
    Cuda(&'static CudaApi),
}

impl Api {
    /// Loads (once) the runtime of `vendor`.
    pub(crate) fn load(vendor: Vendor) -> std::result::Result<Api, &'static str> {
        match vendor {
            Vendor::Amd => sys::hip().map(Api::Hip),
            Vendor::Nvidia => sys::cuda().map(Api::Cuda),
        }
    }

    pub(crate) fn vendor(self) -> Vendor {
        match self {
            Api::Hip(_) => Vendor::Amd,
            Api::Cuda(_) => Vendor::Nvidia,
        }
    }

    /// The runtime (HIP) or driver (CUDA) version number as the vendor encodes it.
    pub(crate) fn version(self) -> i32 {
        match self {
            Api::Hip(h) => h.version,
            Api::Cuda(c) => c.version,
        }
    }

    /// Maps a status to our error type, naming the call that failed.
    pub(crate) fn check(self, st: Status, call: &str) -> Result<()> {
        if st == 0 {
            return Ok(());
        }
        let (text, oom) = match self {
            Api::Hip(h) => (
                sys::hip_error_text(&h.fns, st),
                st == sys::ERR_OUT_OF_MEMORY_HIP,
            ),
            Api::Cuda(c) => (
                sys::cuda_error_text(&c.fns, st),
                st == sys::ERR_OUT_OF_MEMORY_CUDA,
            ),
        };
        Err(if oom {
            Error::NoMem(format!("{call}: {text}"))
        } else if st == sys::ERR_NO_DEVICE || st == sys::ERR_INSUFFICIENT_DRIVER {
            Error::NoDevice(format!("{call}: {text}"))
        } else {
            Error::gpu(call, st, text)
        })
    }

    /// Number of devices this runtime sees.
    pub(crate) fn device_count(self) -> Result<usize> {
        let mut n: c_int = 0;
        let st = match self {
            // SAFETY: writes one int to a live local.
            Api::Hip(h) => unsafe { (h.fns.get_device_count)(&mut n) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.device_get_count)(&mut n) },
        };
        if st == sys::ERR_NO_DEVICE {
            return Ok(0);
        }
        self.check(st, "device count")?;
        Ok(n.max(0) as usize)
    }
}

/// What a device is, without opening it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub vendor: Vendor,
    /// Index among all devices we enumerate (AMD first, then NVIDIA); what
    /// `VmafHipConfiguration.device_index` selects.
    pub ordinal: usize,
    /// Index within the vendor's runtime.
    pub vendor_ordinal: i32,
    pub name: String,
    /// `sm_90` on NVIDIA; the full `gcnArchName` (e.g. `gfx90a:sramecc+:xnack-`) on AMD.
    pub arch: String,
    pub total_mem: usize,
    /// False for CUDA devices in prohibited compute mode.
    pub compute_capable: bool,
}

impl DeviceInfo {
    /// The arch without AMD feature suffixes (`gfx90a`), the key for code objects.
    pub fn base_arch(&self) -> &str {
        self.arch.split(':').next().unwrap_or(&self.arch)
    }
}

fn name_from_buf(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// Finds the `gfx...` arch name in a `hipDeviceProp_t` of unknown layout: it is the only field
/// holding that text (ROCm 5 and 6 place it at different offsets).
fn scan_gfx_name(props: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 4 <= props.len() {
        if &props[i..i + 3] == b"gfx" && props[i + 3].is_ascii_hexdigit() {
            let at_field_start = i == 0 || props[i - 1] == 0;
            let end = props[i..].iter().position(|&b| b == 0)? + i;
            let s = &props[i..end];
            let plausible = s
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b':' || b == b'+' || b == b'-');
            if at_field_start && plausible {
                return Some(String::from_utf8_lossy(s).into_owned());
            }
            i = end;
        }
        i += 1;
    }
    None
}

impl Api {
    /// Describes device `vendor_ordinal` of this runtime.
    pub(crate) fn device_info(self, vendor_ordinal: i32, ordinal: usize) -> Result<DeviceInfo> {
        let mut name = [0 as c_char; 256];
        let mut total_mem = 0usize;
        match self {
            Api::Hip(h) => {
                let f = &h.fns;
                // SAFETY: the buffer holds 256 chars and we pass that length.
                let st = unsafe { (f.device_get_name)(name.as_mut_ptr(), 256, vendor_ordinal) };
                self.check(st, "hipDeviceGetName")?;
                // SAFETY: writes one size_t to a live local.
                let st = unsafe { (f.device_total_mem)(&mut total_mem, vendor_ordinal) };
                self.check(st, "hipDeviceTotalMem")?;
                let arch = match h.get_props {
                    Some(get) => {
                        // Far larger than any hipDeviceProp_t so far (about 1.5 KiB in ROCm 6).
                        let mut props = vec![0u8; 16 << 10];
                        // SAFETY: the buffer outlives the call and exceeds the struct size.
                        let st = unsafe { get(props.as_mut_ptr().cast(), vendor_ordinal) };
                        self.check(st, "hipGetDeviceProperties")?;
                        scan_gfx_name(&props[256..]).unwrap_or_default()
                    }
                    None => String::new(),
                };
                Ok(DeviceInfo {
                    vendor: Vendor::Amd,
                    ordinal,
                    vendor_ordinal,
                    name: name_from_buf(&name),
                    arch,
                    total_mem,
                    compute_capable: true,
                })
            }
            Api::Cuda(c) => {
                let f = &c.fns;
                let mut dev = 0;
                // SAFETY: writes one CUdevice to a live local.
                let st = unsafe { (f.device_get)(&mut dev, vendor_ordinal) };
                self.check(st, "cuDeviceGet")?;
                // SAFETY: the buffer holds 256 chars and we pass that length.
                let st = unsafe { (f.device_get_name)(name.as_mut_ptr(), 256, dev) };
                self.check(st, "cuDeviceGetName")?;
                // SAFETY: writes one size_t to a live local.
                let st = unsafe { (f.device_total_mem)(&mut total_mem, dev) };
                self.check(st, "cuDeviceTotalMem")?;
                let attr = |a: c_int| -> Result<c_int> {
                    let mut v = 0;
                    // SAFETY: writes one int to a live local.
                    let st = unsafe { (f.device_get_attribute)(&mut v, a, dev) };
                    self.check(st, "cuDeviceGetAttribute")?;
                    Ok(v)
                };
                let (major, minor) = (attr(sys::CU_ATTR_CC_MAJOR)?, attr(sys::CU_ATTR_CC_MINOR)?);
                let mode = attr(sys::CU_ATTR_COMPUTE_MODE)?;
                Ok(DeviceInfo {
                    vendor: Vendor::Nvidia,
                    ordinal,
                    vendor_ordinal,
                    name: name_from_buf(&name),
                    arch: format!("sm_{major}{minor}"),
                    total_mem,
                    compute_capable: mode != sys::CU_COMPUTEMODE_PROHIBITED,
                })
            }
        }
    }
}

/// An opened device: on NVIDIA it holds a reference on the device's primary context (the one
/// the CUDA runtime and FFmpeg share), released on drop.
pub struct Device {
    api: Api,
    raw: sys::RawDevice,
    ctx: RawContext,
    info: DeviceInfo,
    /// Injected failure (`Fault` as u8) for error-path tests.
    fault: std::sync::atomic::AtomicU8,
    /// Calls the fault applies to that still succeed before it strikes (mid-stream faults).
    fault_delay: std::sync::atomic::AtomicU64,
    /// Set once any runtime call has failed (see [`Self::teardown_warn`]).
    failed: std::sync::atomic::AtomicBool,
    /// Bytes of device memory our buffers hold now, and the most they have held.
    mem_in_use: std::sync::atomic::AtomicUsize,
    mem_peak: std::sync::atomic::AtomicUsize,
}

// SAFETY: the primary context handle and the ordinal are plain identifiers that both runtimes
// accept from any thread; every call binds the device to the calling thread first.
unsafe impl Send for Device {}
// SAFETY: as above; the runtimes are thread-safe and `Device` has no interior mutability.
unsafe impl Sync for Device {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.info).finish()
    }
}

impl Device {
    /// Opens the device `info` describes.
    pub(crate) fn open(api: Api, info: DeviceInfo) -> Result<Arc<Device>> {
        let (raw, ctx) = match api {
            Api::Hip(_) => (info.vendor_ordinal, std::ptr::null_mut()),
            Api::Cuda(c) => {
                let mut dev = 0;
                // SAFETY: writes one CUdevice to a live local.
                let st = unsafe { (c.fns.device_get)(&mut dev, info.vendor_ordinal) };
                api.check(st, "cuDeviceGet")?;
                let mut ctx: RawContext = std::ptr::null_mut();
                // SAFETY: writes one CUcontext; balanced by the release in Drop.
                let st = unsafe { (c.fns.primary_ctx_retain)(&mut ctx, dev) };
                api.check(st, "cuDevicePrimaryCtxRetain")?;
                (dev, ctx)
            }
        };
        let d = Device {
            api,
            raw,
            ctx,
            info,
            fault: std::sync::atomic::AtomicU8::new(Fault::None as u8),
            fault_delay: std::sync::atomic::AtomicU64::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
            mem_in_use: std::sync::atomic::AtomicUsize::new(0),
            mem_peak: std::sync::atomic::AtomicUsize::new(0),
        };
        d.bind()?;
        Ok(Arc::new(d))
    }

    /// What this device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// (bytes of device memory held by this library's buffers now, the peak so far).
    pub fn memory_use(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.mem_in_use.load(Relaxed), self.mem_peak.load(Relaxed))
    }

    fn account(&self, bytes: usize, alloc: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        if alloc {
            let now = self.mem_in_use.fetch_add(bytes, Relaxed) + bytes;
            self.mem_peak.fetch_max(now, Relaxed);
        } else {
            self.mem_in_use.fetch_sub(bytes, Relaxed);
        }
    }

    pub(crate) fn api(&self) -> Api {
        self.api
    }

    /// Makes this device current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        match self.api {
            // SAFETY: the ordinal was valid at open time; HIP validates it again.
            Api::Hip(h) => self
                .api
                .check(unsafe { (h.fns.set_device)(self.raw) }, "hipSetDevice"),
            // SAFETY: `ctx` is retained until Drop, so it is a live context.
            Api::Cuda(c) => self.api.check(
                unsafe { (c.fns.ctx_set_current)(self.ctx) },
                "cuCtxSetCurrent",
            ),
        }
    }

    /// Makes this device's following runtime calls fail as `fault` describes.
    pub fn inject_fault(&self, fault: Fault) {
        self.inject_fault_after(fault, 0);
    }

    /// Like [`Self::inject_fault`], but the first `calls` calls the fault applies to (device
    /// allocations for out-of-memory, launches for a launch failure, any call for device loss)
    /// still succeed: the fault strikes in the middle of a stream.
    pub fn inject_fault_after(&self, fault: Fault, calls: u64) {
        use std::sync::atomic::Ordering::SeqCst;
        self.fault.store(Fault::None as u8, SeqCst);
        self.fault_delay.store(calls, SeqCst);
        self.fault.store(fault as u8, SeqCst);
    }

    fn injected_fault(&self, call: &str) -> Result<()> {
        // Teardown still works on the real device: injected faults model failing work.
        if ["destroy", "free", "unload"]
            .iter()
            .any(|t| call.contains(t))
        {
            return Ok(());
        }
        use std::sync::atomic::Ordering::SeqCst;
        let fault = self.fault.load(std::sync::atomic::Ordering::Relaxed);
        let applies = match fault {
            1 => call.starts_with("device alloc") || call.starts_with("pinned host alloc"),
            2 => call.starts_with("launch"),
            3 => true,
            _ => false,
        };
        if !applies {
            return Ok(());
        }
        // Count down the calls that still succeed; once at zero, every such call fails.
        if self
            .fault_delay
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Ok(());
        }
        Err(match fault {
            1 => Error::NoMem(format!("{call}: injected out-of-memory")),
            // The status CUDA gives a failed launch (CUDA_ERROR_LAUNCH_FAILED).
            2 => Error::gpu(call, 719, "injected launch failure"),
            _ => Error::NoDevice(format!("{call}: injected device loss")),
        })
    }

    fn call(&self, call: &str, f: impl FnOnce(Api) -> Status) -> Result<()> {
        let r = self
            .injected_fault(call)
            .and_then(|()| self.bind())
            .and_then(|()| self.api.check(f(self.api), call));
        if r.is_err() {
            self.failed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    /// Reports a failure while releasing a resource: a warning the first time, and only at
    /// debug level once the device has failed (a lost device fails every release, and the
    /// caller already got the error that matters).
    pub(crate) fn teardown_warn(&self, msg: std::fmt::Arguments<'_>) {
        if self.failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
            crate::log_debug!("{msg}");
        } else {
            crate::log_warn!("{msg}");
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Api::Cuda(c) = self.api {
            // SAFETY: balances the retain in `open`; every object using the context holds an
            // `Arc<Device>`, so none is left.
            let st = unsafe { (c.fns.primary_ctx_release)(self.raw) };
            if st != 0 {
                crate::log_warn!("cuDevicePrimaryCtxRelease: status {st}");
            }
        }
    }
}

/// An in-order queue of device work (created non-blocking: it never waits on the legacy
/// default stream other libraries in the process may use).
pub struct Stream {
    dev: Arc<Device>,
    raw: sys::RawStream,
}

// SAFETY: stream handles may be used from any thread; the runtimes serialise submissions.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new(dev: &Arc<Device>) -> Result<Stream> {
        let mut raw: sys::RawStream = std::ptr::null_mut();
        dev.call("stream create", |api| match api {
            // SAFETY: writes one handle; destroyed in Drop.
            Api::Hip(h) => unsafe { (h.fns.stream_create)(&mut raw, sys::STREAM_NON_BLOCKING) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.stream_create)(&mut raw, sys::STREAM_NON_BLOCKING) },
        })?;
        Ok(Stream {
            dev: dev.clone(),
            raw,
        })
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// Blocks until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.dev.call("stream synchronize", |api| match api {
            // SAFETY: `raw` is a live stream of this device.
            Api::Hip(h) => unsafe { (h.fns.stream_synchronize)(self.raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.stream_synchronize)(self.raw) },
        })
    }

    /// Makes later work on this stream wait for `event` (recorded on any stream).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.dev.call("stream wait event", |api| match api {
            // SAFETY: both handles are live objects of this device.
            Api::Hip(h) => unsafe { (h.fns.stream_wait_event)(self.raw, event.raw, 0) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.stream_wait_event)(self.raw, event.raw, 0) },
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let raw = self.raw;
        let r = self.dev.call("stream destroy", |api| match api {
            // SAFETY: destroying our own handle once; queued work still completes.
            Api::Hip(h) => unsafe { (h.fns.stream_destroy)(raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.stream_destroy)(raw) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// A marker in a stream, for ordering and host waits (timing disabled: cheaper).
pub struct Event {
    dev: Arc<Device>,
    raw: sys::RawEvent,
}

// SAFETY: event handles may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    pub fn new(dev: &Arc<Device>) -> Result<Event> {
        let mut raw: sys::RawEvent = std::ptr::null_mut();
        dev.call("event create", |api| match api {
            // SAFETY: writes one handle; destroyed in Drop.
            Api::Hip(h) => unsafe { (h.fns.event_create)(&mut raw, sys::EVENT_DISABLE_TIMING) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.event_create)(&mut raw, sys::EVENT_DISABLE_TIMING) },
        })?;
        Ok(Event {
            dev: dev.clone(),
            raw,
        })
    }

    /// Captures the work queued on `stream` so far.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.dev.call("event record", |api| match api {
            // SAFETY: both handles are live objects of this device.
            Api::Hip(h) => unsafe { (h.fns.event_record)(self.raw, stream.raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.event_record)(self.raw, stream.raw) },
        })
    }

    /// Blocks until the captured work has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.dev.call("event synchronize", |api| match api {
            // SAFETY: `raw` is a live event.
            Api::Hip(h) => unsafe { (h.fns.event_synchronize)(self.raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.event_synchronize)(self.raw) },
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let raw = self.raw;
        let r = self.dev.call("event destroy", |api| match api {
            // SAFETY: destroying our own handle once.
            Api::Hip(h) => unsafe { (h.fns.event_destroy)(raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.event_destroy)(raw) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

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
        dev.call("pinned host alloc", |api| match api {
            // SAFETY: writes one pointer; freed in Drop with the matching call.
            Api::Hip(h) => unsafe { (h.fns.host_malloc)(&mut p, bytes, 0) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.mem_host_alloc)(&mut p, bytes, 0) },
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

    /// Records that a copy queued on `stream` uses this memory.
    /// Creates the guard event; done before a copy is queued so that failing to create it
    /// cannot leave a copy unguarded.
    fn ensure_event(&mut self) -> Result<()> {
        if self.event.is_none() {
            self.event = Some(Event::new(&self.dev)?);
        }
        Ok(())
    }

    /// Records that a copy just queued on `stream` uses this memory.
    fn mark_in_use(&mut self, stream: &Stream) -> Result<()> {
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

/// Existing host memory page-locked for DMA (`hipHostRegister` / `cuMemHostRegister`, portable
/// to every device), so uploads read it directly instead of through a staging copy. Every copy
/// from it leaves an event here, and dropping the registration waits for those copies before
/// unlocking, so the memory cannot be released under a DMA while its owner drops this first.
pub struct HostRegistration {
    dev: Arc<Device>,
    ptr: *mut c_void,
    bytes: usize,
    /// One event per device that copied from this memory, recorded after its latest copy.
    copies: std::sync::Mutex<Vec<Event>>,
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
        dev.call("host register", |api| match api {
            // SAFETY: the caller guarantees the range stays allocated until Drop unregisters it.
            Api::Hip(h) => unsafe { (h.fns.host_register)(p, bytes, flags) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.mem_host_register)(p, bytes, flags) },
        })?;
        Ok(HostRegistration {
            dev: dev.clone(),
            ptr: p,
            bytes,
            copies: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Whether `data` lies inside the registered range.
    pub fn covers<T>(&self, data: &[T]) -> bool {
        let start = data.as_ptr() as usize;
        let end = start + std::mem::size_of_val(data);
        let base = self.ptr as usize;
        start >= base && end <= base + self.bytes
    }

    /// Records that a copy just queued on `stream` reads this memory.
    fn mark_copy(&self, stream: &Stream) -> Result<()> {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        let i = match copies.iter().position(|e| Arc::ptr_eq(&e.dev, &stream.dev)) {
            Some(i) => i,
            None => {
                copies.push(Event::new(&stream.dev)?);
                copies.len() - 1
            }
        };
        copies[i].record(stream)
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        let copies = std::mem::take(self.copies.get_mut().unwrap_or_else(|e| e.into_inner()));
        for ev in &copies {
            if let Err(e) = ev.synchronize() {
                self.dev
                    .teardown_warn(format_args!("page-locked picture: {e}"));
            }
        }
        let p = self.ptr;
        let r = self.dev.call("host unregister", |api| match api {
            // SAFETY: `p` was registered in `new` and is unregistered once, after its copies.
            Api::Hip(h) => unsafe { (h.fns.host_unregister)(p) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.mem_host_unregister)(p) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

impl<T: DeviceCopy> Drop for PinnedHostBuffer<T> {
    fn drop(&mut self) {
        // A DMA still reading or writing this memory must finish before it is freed.
        if let Err(e) = self.settle() {
            self.dev.teardown_warn(format_args!("pinned buffer: {e}"));
        }
        let p = self.ptr.cast::<c_void>();
        let r = self.dev.call("pinned host free", |api| match api {
            // SAFETY: `p` came from hipHostMalloc and is freed once.
            Api::Hip(h) => unsafe { (h.fns.host_free)(p) },
            // SAFETY: `p` came from cuMemHostAlloc and is freed once.
            Api::Cuda(c) => unsafe { (c.fns.mem_free_host)(p) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
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
        let dst = self.ptr;
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
        if !reg.covers(src) {
            return Err(Error::inval(
                "upload source is not in the page-locked range",
            ));
        }
        let bytes = self.check_range("upload", src.len(), src.len())?;
        if bytes == 0 {
            return Ok(());
        }
        // Create the completion marker before queueing, so a copy is never left unguarded.
        reg.mark_copy(stream)?;
        // SAFETY: `src` holds `bytes` bytes inside `reg`, whose Drop waits for the event
        // recorded below before the memory can be unlocked and freed.
        unsafe { self.queue_htod(stream, src.as_ptr().cast::<c_void>(), bytes)? };
        reg.mark_copy(stream).inspect_err(|_| {
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
        dst.settle()?;
        dst.ensure_event()?;
        let (d, src) = (dst.ptr.cast::<c_void>(), self.ptr);
        self.dev.call("copy device to host", |api| match api {
            // SAFETY: both ranges hold `bytes` bytes; the host cannot see `dst` until the event
            // recorded below has passed.
            Api::Hip(h) => unsafe {
                (h.fns.memcpy_dtoh_async)(d, src as *mut c_void, bytes, stream.raw)
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.memcpy_dtoh_async)(d, src, bytes, stream.raw) },
        })?;
        dst.mark_in_use(stream)
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
    pub fn zero(&mut self, stream: &Stream) -> Result<()> {
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
        let p = self.ptr;
        // Queued kernels or copies may still use the memory: wait for the device first (frees
        // are rare: buffers are cached and reused).
        let r = self.dev.call("device synchronize", |api| match api {
            // SAFETY: no arguments; waits for all work of the bound device.
            Api::Hip(h) => unsafe { (h.fns.device_synchronize)() },
            // SAFETY: as above, for the bound (primary) context.
            Api::Cuda(c) => unsafe { (c.fns.ctx_synchronize)() },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
        self.dev.account(self.len * std::mem::size_of::<T>(), false);
        let r = self.dev.call("device free", |api| match api {
            // SAFETY: `p` came from hipMalloc and is freed once.
            Api::Hip(h) => unsafe { (h.fns.free)(p as *mut c_void) },
            // SAFETY: `p` came from cuMemAlloc and is freed once.
            Api::Cuda(c) => unsafe { (c.fns.mem_free)(p) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// Loaded device code (a CUBIN/fatbin on NVIDIA, an AMD code object or offload bundle).
pub struct Module {
    dev: Arc<Device>,
    raw: sys::RawModule,
}

// SAFETY: module handles may be used from any thread.
unsafe impl Send for Module {}
// SAFETY: as above; function lookup is thread-safe in both runtimes.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a code image. The runtimes validate the image and fail cleanly on a foreign arch.
    pub fn load(dev: &Arc<Device>, image: &[u8]) -> Result<Arc<Module>> {
        if image.is_empty() {
            return Err(Error::inval("empty code image"));
        }
        // Embedded images are only byte-aligned; the loaders parse headers in place, so hand
        // them an 8-byte aligned copy.
        let mut aligned = vec![0u64; image.len().div_ceil(8)];
        // SAFETY: `aligned` has at least `image.len()` bytes and does not overlap `image`.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), aligned.as_mut_ptr().cast(), image.len())
        };
        let mut raw: sys::RawModule = std::ptr::null_mut();
        let p = aligned.as_ptr().cast::<c_void>();
        dev.call("module load", |api| match api {
            // SAFETY: `image` is a whole code object the runtime parses (and copies) during the
            // call; the handle is unloaded in Drop.
            Api::Hip(h) => unsafe { (h.fns.module_load_data)(&mut raw, p) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.module_load_data)(&mut raw, p) },
        })?;
        Ok(Arc::new(Module {
            dev: dev.clone(),
            raw,
        }))
    }

    /// Looks up entry point `name`.
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel> {
        let cname = CString::new(name).map_err(|_| Error::inval("kernel name has NUL"))?;
        let mut raw: sys::RawFunction = std::ptr::null_mut();
        self.dev
            .call(&format!("get function {name}"), |api| match api {
                // SAFETY: the module is live and `cname` NUL-terminated.
                Api::Hip(h) => unsafe {
                    (h.fns.module_get_function)(&mut raw, self.raw, cname.as_ptr())
                },
                // SAFETY: as above.
                Api::Cuda(c) => unsafe {
                    (c.fns.module_get_function)(&mut raw, self.raw, cname.as_ptr())
                },
            })?;
        Ok(Kernel {
            module: self.clone(),
            raw,
            name: name.to_string(),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let raw = self.raw;
        let r = self.dev.call("module unload", |api| match api {
            // SAFETY: unloading our own handle once; kernels hold an Arc so none are left.
            Api::Hip(h) => unsafe { (h.fns.module_unload)(raw) },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.module_unload)(raw) },
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// A kernel argument: a value whose bytes the launch copies. Implemented for the scalar types of
/// our kernels and for device pointers.
///
/// # Safety
/// `arg_ptr` must point at `size_of::<Self>()` bytes laid out as the matching C parameter.
pub unsafe trait KernelArg {
    fn arg_ptr(&self) -> *mut c_void {
        (self as *const Self).cast_mut().cast()
    }
}
// SAFETY: the Rust and C layouts of these scalars are identical.
unsafe impl KernelArg for u32 {}
// SAFETY: as above.
unsafe impl KernelArg for i32 {}
// SAFETY: as above.
unsafe impl KernelArg for u64 {}
// SAFETY: as above.
unsafe impl KernelArg for i64 {}
// SAFETY: as above.
unsafe impl KernelArg for f32 {}
// SAFETY: as above.
unsafe impl KernelArg for f64 {}
// SAFETY: repr(transparent) over a 64-bit address, the layout of a device `T *` parameter.
unsafe impl<T> KernelArg for DevicePtr<T> {}

/// Launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_mem_bytes: u32,
}

/// An entry point of a loaded [`Module`].
pub struct Kernel {
    module: Arc<Module>,
    raw: sys::RawFunction,
    name: String,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for Kernel {}
// SAFETY: as above; launching is thread-safe in both runtimes.
unsafe impl Sync for Kernel {}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module this entry point lives in.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// Queues the kernel on `stream`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and type, and every
    /// device pointer must cover all elements the kernel will touch for this geometry; memory
    /// the kernel writes must not be read by the host until the stream has passed this launch.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let mut ptrs: Vec<*mut c_void> = args.iter().map(|a| a.arg_ptr()).collect();
        let (g, b) = (cfg.grid, cfg.block);
        let params = ptrs.as_mut_ptr();
        let name = &self.name;
        self.module
            .dev
            .call(&format!("launch {name}"), |api| match api {
                // SAFETY: the argument pointers live until the call returns (the runtime copies
                // the values at launch); the caller guarantees they match the kernel.
                Api::Hip(h) => unsafe {
                    (h.fns.module_launch_kernel)(
                        self.raw,
                        g.0,
                        g.1,
                        g.2,
                        b.0,
                        b.1,
                        b.2,
                        cfg.shared_mem_bytes,
                        stream.raw,
                        params,
                        std::ptr::null_mut(),
                    )
                },
                // SAFETY: as above.
                Api::Cuda(c) => unsafe {
                    (c.fns.launch_kernel)(
                        self.raw,
                        g.0,
                        g.1,
                        g.2,
                        b.0,
                        b.1,
                        b.2,
                        cfg.shared_mem_bytes,
                        stream.raw,
                        params,
                        std::ptr::null_mut(),
                    )
                },
            })
    }
}

/// Every device the selected vendors expose, in ordinal order, plus why a vendor offered none.
pub fn enumerate() -> (Vec<DeviceInfo>, Vec<String>) {
    let mut devices = Vec::new();
    let mut notes = Vec::new();
    for vendor in sys::vendor_order() {
        let api = match Api::load(vendor) {
            Ok(a) => a,
            Err(e) => {
                notes.push(format!("{}: {e}", vendor.name()));
                continue;
            }
        };
        let n = match api.device_count() {
            Ok(n) => n,
            Err(e) => {
                notes.push(format!("{}: {e}", vendor.name()));
                continue;
            }
        };
        if n == 0 {
            notes.push(format!("{}: runtime loaded but no devices", vendor.name()));
        }
        for i in 0..n {
            match api.device_info(i as i32, devices.len()) {
                Ok(info) => devices.push(info),
                Err(e) => notes.push(format!("{} device {i}: {e}", vendor.name())),
            }
        }
    }
    (devices, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_name_found_in_any_layout() {
        let mut props = vec![0u8; 2048];
        props[..12].copy_from_slice(b"AMD Instinct");
        let at = 700;
        let arch = b"gfx90a:sramecc+:xnack-";
        props[at..at + arch.len()].copy_from_slice(arch);
        assert_eq!(
            scan_gfx_name(&props[256..]).as_deref(),
            Some("gfx90a:sramecc+:xnack-")
        );
        // "gfx" in the middle of other text is not a field start.
        let mut noise = vec![0u8; 64];
        noise[1..8].copy_from_slice(b"xgfx906");
        assert_eq!(scan_gfx_name(&noise), None);
    }
}

/// A runtime failure a device can be told to report, to check that errors reach the caller as
/// error codes (never a crash): [`Device::inject_fault`], or for whole programs
/// `VMAF_HIP_INJECT_FAULT=oom|launch|lost[@N]`, read when a state is created (`@N`: the first N
/// calls it applies to succeed, so it strikes mid-stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No injected failure.
    None = 0,
    /// Device and pinned allocations fail with out-of-memory.
    OutOfMemory = 1,
    /// Kernel launches fail.
    LaunchFailure = 2,
    /// Every runtime call fails as if the device was lost.
    DeviceLost = 3,
}

impl Fault {
    /// The fault named by `VMAF_HIP_INJECT_FAULT` and the calls it lets pass first, if any.
    pub fn from_env() -> Option<(Fault, u64)> {
        let v = std::env::var("VMAF_HIP_INJECT_FAULT").ok()?;
        let (name, after) = match v.split_once('@') {
            Some((n, a)) => (n.to_string(), a.parse().ok()?),
            None => (v, 0),
        };
        let fault = match name.as_str() {
            "oom" => Fault::OutOfMemory,
            "launch" => Fault::LaunchFailure,
            "lost" => Fault::DeviceLost,
            _ => return None,
        };
        Some((fault, after))
    }
}
