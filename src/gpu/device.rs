//! Devices: the loaded runtime of a vendor (`Api`), what a device is ([`DeviceInfo`],
//! [`enumerate`]), an opened device ([`Device`]) and the failures a device can be told to report
//! ([`Fault`]).
//!
//! Every operation first binds the device to the calling thread (`cuCtxSetCurrent` with the
//! primary context on NVIDIA, `hipSetDevice` on AMD): both runtimes keep the current device per
//! thread, and worker threads of a pool may issue work for a state they never initialised.

use std::ffi::{c_char, c_int, c_uint};
use std::sync::Arc;

use super::sys::{self, CommonFns, CudaApi, HipApi, RawContext, Status, Vendor};
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

    /// The calls both runtimes shape alike.
    pub(crate) fn common(self) -> &'static CommonFns {
        match self {
            Api::Hip(h) => &h.common,
            Api::Cuda(c) => &c.common,
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
    /// Shared memory one block may use (on NVIDIA after the kernel opts in: see
    /// `Kernel::allow_dynamic_shared`).
    pub block_shared: usize,
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
        .map(|&c| c.to_ne_bytes()[0])
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
                    block_shared: sys::HIP_SHARED_PER_BLOCK,
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
                let block_shared = attr(sys::CU_ATTR_SHARED_PER_BLOCK_OPTIN)?;
                Ok(DeviceInfo {
                    vendor: Vendor::Nvidia,
                    ordinal,
                    vendor_ordinal,
                    name: name_from_buf(&name),
                    arch: format!("sm_{major}{minor}"),
                    total_mem,
                    compute_capable: mode != sys::CU_COMPUTEMODE_PROHIBITED,
                    block_shared: usize::try_from(block_shared).unwrap_or(0),
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
    /// Whether `ctx` is a caller's context (used, never retained or released) rather than
    /// the primary context we retain.
    borrowed: bool,
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
    /// Device-wide waits made by [`Self::synchronize_for_release`] (tests check which releases wait).
    release_waits: std::sync::atomic::AtomicUsize,
}

/// Held shared while one of our streams records a graph, exclusively while we wait for a whole
/// device: a device-wide wait during a capture fails and spoils the capture. One lock for the
/// process, not one per [`Device`]: every state opens its own `Device` over the same primary
/// context (and callers may share theirs), and one state's release wait meeting another's
/// capture crashed the CUDA driver (SIGSEGV in `cuCtxSynchronize`, found with the GPU tests'
/// fault injection running beside other tests' captures).
static CAPTURING: std::sync::RwLock<()> = std::sync::RwLock::new(());

thread_local! {
    /// Captures this thread is recording now: a release on the same thread (a bug of ours, as
    /// nothing is freed mid-capture) must not wait for its own shared hold.
    static CAPTURING_HERE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A shared hold of [`CAPTURING`] by a thread recording a graph.
pub(super) struct CaptureGuard {
    _guard: std::sync::RwLockReadGuard<'static, ()>,
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURING_HERE.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Whether this thread is recording a graph now.
pub(super) fn capturing_here() -> bool {
    CAPTURING_HERE.with(|c| c.get()) > 0
}

/// The exclusive hold for a release: none on a thread that is itself recording (it would wait
/// for itself forever); that case is logged instead.
fn release_guard() -> Option<std::sync::RwLockWriteGuard<'static, ()>> {
    if capturing_here() {
        crate::log_warn!("GPU release during a graph capture on the same thread");
        return None;
    }
    Some(CAPTURING.write().unwrap_or_else(|e| e.into_inner()))
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
        Self::finish_open(api, raw, ctx, false, info)
    }

    /// The NVIDIA device of a caller's CUDA context `ctx` (upstream's `VmafCudaConfiguration.
    /// cu_ctx`), which our work then runs in. The caller keeps it alive while we use it.
    ///
    /// # Safety
    /// `ctx` is a live `CUcontext` for as long as the returned device lives.
    pub(crate) unsafe fn open_context(api: Api, ctx: RawContext) -> Result<Arc<Device>> {
        let Api::Cuda(c) = api else {
            return Err(Error::NoDevice(
                "a CUDA context needs the CUDA driver".into(),
            ));
        };
        // SAFETY: `ctx` is live (contract); it becomes this thread's current context, as every
        // later call of ours makes it anyway.
        api.check(unsafe { (c.fns.ctx_set_current)(ctx) }, "cuCtxSetCurrent")?;
        let mut dev: sys::RawDevice = 0;
        // SAFETY: writes one CUdevice to a live local.
        let st = unsafe { (c.fns.ctx_get_device)(&mut dev) };
        api.check(st, "cuCtxGetDevice")?;
        let (devices, _) = enumerate();
        let info = devices
            .into_iter()
            .find(|d| d.vendor == Vendor::Nvidia && d.vendor_ordinal == dev)
            .ok_or_else(|| {
                Error::NoDevice(format!("CUDA device {dev} of the context is not listed"))
            })?;
        Self::finish_open(api, dev, ctx, true, info)
    }

    fn finish_open(
        api: Api,
        raw: sys::RawDevice,
        ctx: RawContext,
        borrowed: bool,
        info: DeviceInfo,
    ) -> Result<Arc<Device>> {
        let d = Device {
            api,
            raw,
            ctx,
            borrowed,
            info,
            fault: std::sync::atomic::AtomicU8::new(Fault::None as u8),
            fault_delay: std::sync::atomic::AtomicU64::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
            mem_in_use: std::sync::atomic::AtomicUsize::new(0),
            mem_peak: std::sync::atomic::AtomicUsize::new(0),
            release_waits: std::sync::atomic::AtomicUsize::new(0),
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

    pub(super) fn account(&self, bytes: usize, alloc: bool) {
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
            Api::Cuda(c) => {
                // Every runtime call binds first: reading the thread's current context is
                // cheaper than setting it again (a worker's calls all use one context), and a
                // caller's thread that bound another one in between still gets ours.
                let mut cur: sys::RawContext = std::ptr::null_mut();
                // SAFETY: writes one handle to a live local.
                if unsafe { (c.fns.ctx_get_current)(&mut cur) } == 0 && cur == self.ctx {
                    return Ok(());
                }
                // SAFETY: `ctx` is retained until Drop, so it is a live context.
                self.api.check(
                    unsafe { (c.fns.ctx_set_current)(self.ctx) },
                    "cuCtxSetCurrent",
                )
            }
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

    pub(super) fn call(&self, call: &str, f: impl FnOnce(Api) -> Status) -> Result<()> {
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

    /// [`Self::call`] for a call whose failure is an answer, not a fault: the caller falls back
    /// (a runtime that rejects a graph capture or an update runs the work call by call), so
    /// the device is not marked failed and later release warnings stay warnings.
    pub(super) fn try_call(&self, call: &str, f: impl FnOnce(Api) -> Status) -> Result<()> {
        self.injected_fault(call)
            .and_then(|()| self.bind())
            .and_then(|()| self.api.check(f(self.api), call))
    }

    /// Checks that `bytes` bytes from device address `addr` are memory the runtime knows
    /// (device, stream-ordered, managed or page-locked, of any context; a range mapped from
    /// several pieces is walked piece by piece) and, on NVIDIA, that device memory among it is
    /// this device's: a caller's planes are checked before kernels read them, since a stray
    /// address would fault every later call of the context, the caller's own work included.
    /// `-EINVAL` (naming `what`) otherwise; a failing runtime's own error passes through.
    /// Returns the extent checked, `[start, end)`: the whole allocations the span lies in, so
    /// other planes inside it need no lookup of their own.
    pub(crate) fn check_span(&self, what: &str, addr: u64, bytes: usize) -> Result<(u64, u64)> {
        let bad = |why: String| Error::inval(format!("{what}: {why}"));
        let end = addr
            .checked_add(bytes as u64)
            .ok_or_else(|| bad(format!("{bytes} bytes at {addr:#x} wrap around")))?;
        // A piece of a mapped range (PyTorch's expandable segments) is a few MiB at least, so
        // this bounds the walk far beyond any plane.
        const MAX_PIECES: usize = 4096;
        let (mut cur, mut start) = (addr, addr);
        for _ in 0..MAX_PIECES {
            let (base, size) = self.address_range(cur).map_err(|e| match e {
                // Invalid value, not found: an address the runtime does not know.
                Error::Gpu {
                    status: 1 | 500, ..
                } => bad(format!(
                    "device address {cur:#x} is not GPU memory this device's runtime knows ({e})"
                )),
                other => other,
            })?;
            if base > cur || size == 0 {
                return Err(bad(format!("no allocation holds device address {cur:#x}")));
            }
            start = start.min(base);
            cur = base.saturating_add(size as u64);
            if cur >= end {
                self.check_owner(addr).map_err(|e| match e {
                    Error::Invalid(m) => bad(m),
                    other => other,
                })?;
                return Ok((start, cur));
            }
        }
        Err(bad(format!(
            "{bytes} bytes at {addr:#x} span more than {MAX_PIECES} allocations"
        )))
    }

    /// The (base, size) of the allocation (or mapped piece) holding `addr`.
    fn address_range(&self, addr: u64) -> Result<(u64, usize)> {
        let (mut base, mut size) = (0u64, 0usize);
        self.try_call("memory address range", |api| match api {
            // SAFETY: out-pointers to locals of the types the call writes (a pointer-sized
            // base address and a size); the address is only looked up, never dereferenced.
            Api::Hip(h) => unsafe {
                (h.fns.mem_get_address_range)(
                    std::ptr::from_mut(&mut base).cast(),
                    &mut size,
                    std::ptr::without_provenance_mut(addr as usize),
                )
            },
            // SAFETY: as above.
            Api::Cuda(c) => unsafe { (c.fns.mem_get_address_range)(&mut base, &mut size, addr) },
        })?;
        Ok((base, size))
    }

    /// On NVIDIA: refuses device memory (not managed) of another GPU at `addr`, or of another
    /// CUDA context on this GPU (a context's allocations are not mapped in the others, so a
    /// kernel reading them would fault and poison the caller's context); memory that names no
    /// context (virtual-memory mappings) or comes from a stream-ordered pool passes. HIP has no
    /// such query in every ROCm we load, so AMD relies on the caller's contract there.
    fn check_owner(&self, addr: u64) -> Result<()> {
        let Api::Cuda(c) = self.api else {
            return Ok(());
        };
        // CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _DEVICE_ORDINAL, _IS_MANAGED, _CONTEXT.
        let mut attrs: [c_int; 4] = [2, 9, 8, 1];
        let (mut kind, mut ordinal, mut managed): (c_uint, c_int, c_int) = (0, -1, 0);
        let mut owner: RawContext = std::ptr::null_mut();
        let mut out: [*mut std::ffi::c_void; 4] = [
            std::ptr::from_mut(&mut kind).cast(),
            std::ptr::from_mut(&mut ordinal).cast(),
            std::ptr::from_mut(&mut managed).cast(),
            std::ptr::from_mut(&mut owner).cast(),
        ];
        self.try_call("pointer attributes", |_| {
            // SAFETY: four attribute codes and four out-pointers to locals of the sizes those
            // attributes write (an unsigned memory type, an int ordinal, a bool as int, a
            // context handle); the address is only looked up.
            unsafe { (c.fns.pointer_get_attributes)(4, attrs.as_mut_ptr(), out.as_mut_ptr(), addr) }
        })?;
        const DEVICE_MEMORY: c_uint = 2;
        if kind != DEVICE_MEMORY || managed != 0 {
            return Ok(());
        }
        if ordinal != self.info.vendor_ordinal {
            return Err(Error::inval(format!(
                "device address {addr:#x} is memory of CUDA device {ordinal}, not of device {} \
                 ({})",
                self.info.vendor_ordinal, self.info.name
            )));
        }
        if !owner.is_null() && owner != self.ctx && !self.in_memory_pool(addr) {
            return Err(Error::inval(format!(
                "device address {addr:#x} is memory of another CUDA context on device {} ({}) \
                 than the GPU state's",
                self.info.vendor_ordinal, self.info.name
            )));
        }
        Ok(())
    }

    /// Whether `addr` (CUDA) is memory of a stream-ordered pool (`cuMemAllocAsync`), which
    /// every context of its device may read whatever context allocated it. Drivers older
    /// than pools do not know the attribute: no pool then.
    fn in_memory_pool(&self, addr: u64) -> bool {
        let Api::Cuda(c) = self.api else {
            return false;
        };
        // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
        let mut attr: c_int = 17;
        let mut pool: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut out: *mut std::ffi::c_void = std::ptr::from_mut(&mut pool).cast();
        // SAFETY: one attribute code and one out-pointer to a local of the size it writes (a
        // pool handle); the address is only looked up.
        let st = unsafe { (c.fns.pointer_get_attributes)(1, &mut attr, &mut out, addr) };
        st == 0 && !pool.is_null()
    }

    /// [`Self::call`] for a call both runtimes shape alike: `f` gets the vendor's
    /// [`CommonFns`].
    pub(super) fn call_common(
        &self,
        call: &str,
        f: impl FnOnce(&'static CommonFns) -> Status,
    ) -> Result<()> {
        self.call(call, |api| f(api.common()))
    }

    /// Waits for all queued work of the device, reporting a failure as a release warning (for
    /// releases of memory the device may still be using).
    pub(crate) fn synchronize_for_release(&self) {
        let _no_capture = release_guard();
        self.release_waits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.synchronize_locked();
    }

    /// How many [`Self::synchronize_for_release`] waits this device object has made.
    #[cfg(test)]
    pub(crate) fn release_waits(&self) -> usize {
        self.release_waits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn synchronize_locked(&self) {
        let r = self.call_common("device synchronize", |f| {
            // SAFETY: no arguments; waits for all work of the bound device (HIP) or bound
            // primary context (CUDA).
            unsafe { (f.synchronize)() }
        });
        if let Err(e) = r {
            self.teardown_warn(format_args!("{e}"));
        }
    }

    /// Gives memory back to the runtime with `free`, first waiting for all queued work of the
    /// device when `wait_device` is set. Both happen with the capture lock held exclusively:
    /// the runtimes' frees synchronise implicitly, so a free meeting another state's capture
    /// is the device-wide wait that crashed the driver, by another name. A failure is a
    /// release warning.
    pub(crate) fn release(&self, call: &str, wait_device: bool, free: impl FnOnce(Api) -> Status) {
        let _no_capture = release_guard();
        if wait_device {
            self.synchronize_locked();
        }
        if let Err(e) = self.call(call, free) {
            self.teardown_warn(format_args!("{e}"));
        }
    }

    /// Shared hold for recording a graph on one of this device's streams (see [`CAPTURING`]).
    pub(super) fn capture_guard(&self) -> CaptureGuard {
        let guard = CAPTURING.read().unwrap_or_else(|e| e.into_inner());
        CAPTURING_HERE.with(|c| c.set(c.get() + 1));
        CaptureGuard { _guard: guard }
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
        if let (Api::Cuda(c), false) = (self.api, self.borrowed) {
            let dev = self.raw;
            let release = move || {
                // SAFETY: balances the retain in `open`; every object using the context holds
                // an `Arc<Device>`, so none is left.
                let st = unsafe { (c.fns.primary_ctx_release)(dev) };
                // CUDA_ERROR_DEINITIALIZED: the process is exiting and the driver has let the
                // context go already (a worker thread ending late drops the last reference).
                const DEINITIALIZED: i32 = 4;
                if st != 0 && st != DEINITIALIZED {
                    crate::log_warn!("cuDevicePrimaryCtxRelease: status {st}");
                }
            };
            linger::defer(context_linger(), Box::new(release));
        }
    }
}

/// How long a primary context we retained stays retained after its device closed:
/// `VMAF_HIP_CONTEXT_LINGER_MS` (default 2000; 0 releases at once). Creating a context takes
/// 100–200 ms and destroying one tens of ms, and programs often close a state only to open
/// another: FFmpeg's command line initialises a filter graph once to check it, frees it, and
/// builds it again for the frames, so the libvmaf filter's device was opened twice.
fn context_linger() -> std::time::Duration {
    crate::settings::get().context_linger
}

/// Releases run later, on one background thread, each once its delay has passed.
pub(super) mod linger {
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    type Release = Box<dyn FnOnce() + Send>;

    struct Pending {
        due: Vec<(Instant, Release)>,
        /// Whether the releasing thread runs (it stays once started).
        started: bool,
    }

    static PENDING: Mutex<Pending> = Mutex::new(Pending {
        due: Vec::new(),
        started: false,
    });
    static WAKE: Condvar = Condvar::new();

    /// Runs `release` after `delay`: at once, on this thread, for a zero delay or when no
    /// thread can be started for it.
    pub(crate) fn defer(delay: Duration, release: Release) {
        if delay.is_zero() {
            release();
            return;
        }
        let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        if !p.started {
            let spawned = std::thread::Builder::new()
                .name("vmaf-hip-release".into())
                .spawn(run);
            if spawned.is_err() {
                drop(p);
                release();
                return;
            }
            p.started = true;
        }
        // A delay past what `Instant` can hold is never due (and must not panic in a drop).
        let now = Instant::now();
        let due = now
            .checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365));
        p.due.push((due, release));
        WAKE.notify_one();
    }

    fn run() {
        let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            if let Some(i) = p.due.iter().position(|(at, _)| *at <= now) {
                let (_, release) = p.due.swap_remove(i);
                drop(p);
                release();
                p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            p = match p.due.iter().map(|(at, _)| *at).min() {
                Some(next) => {
                    WAKE.wait_timeout(p, next - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => WAKE.wait(p).unwrap_or_else(|e| e.into_inner()),
            };
        }
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

/// A runtime failure a device can be told to report, to check that errors reach the caller as
/// error codes (never a crash): [`Device::inject_fault`], or for whole programs built with the
/// `fault-injection` feature `VMAF_HIP_INJECT_FAULT=oom|launch|lost[@N]`, read when a state is
/// created (`@N`: the first N calls it applies to succeed, so it strikes mid-stream).
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
        crate::settings::get().inject_fault
    }
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
