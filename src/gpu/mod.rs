//! The vendor-neutral GPU runtime (HIP on AMD, the CUDA driver on NVIDIA), loaded at run time.
//!
//! Layers, after cudarc: `sys` (crate-private) holds our own C types and the per-library
//! function tables (resolved with `libloading`, all-or-nothing, once), plus one `CommonFns`
//! table per vendor for the calls both runtimes shape alike. RAII types over them bind the
//! device on every thread they are used from, split by concern: [`device`] (runtime, device,
//! faults), [`stream`] (streams, events), [`memory`] (device, pinned and registered host memory)
//! and [`module`] (loaded code, kernels, launches). [`code`] finds device code for a kernel
//! source (ahead-of-time object, else a cached hiprtc/nvrtc compile, else on NVIDIA the embedded
//! clang PTX the driver JITs); `launch` (crate-private) is the typed, bounds-checked launch core
//! the features' launchers (`feature/<f>/launch.rs`, one per kernels/*.hip file) are written
//! against, with the signature checks; `job` is one extractor's work for one frame, `graph` the
//! recording and replay of a frame's fixed work, `planes` caches uploaded luma planes, and
//! `hipcpu` (tests) runs the kernels on a CPU model of the GPU's waves. Nothing here knows a
//! feature. [`GpuState`] is what `vmaf_hip_state_init` creates: one device, one compute stream,
//! the loaded kernels, pooled per-feature scratch buffers and the plane caches.
//!
//! Without a usable runtime or device every entry point returns [`Error::NoDevice`] with the
//! reasons; nothing here panics or aborts on a missing library or symbol.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

use crate::error::{Error, Result};

pub mod code;
pub mod device;
pub mod frames;
pub(crate) mod graph;
#[cfg(test)]
pub(crate) mod hipcpu;
pub(crate) mod job;
pub(crate) mod launch;
pub mod memory;
pub mod module;
pub(crate) mod planes;
pub mod stream;
pub(crate) mod sys;
#[cfg(test)]
mod tests;

pub use device::{enumerate, Device, DeviceInfo, Fault};
pub use memory::{DeviceBuffer, DeviceCopy, DevicePtr, HostRegistration, PinnedHostBuffer};
pub use module::{Kernel, KernelArg, LaunchConfig, Module};
pub use stream::{Event, Stream};
pub use sys::Vendor;

/// One device and its compute stream, shared by the contexts it is imported into.
pub struct GpuState {
    device: Arc<Device>,
    stream: Stream,
    kernels: Mutex<HashMap<(&'static str, &'static str), Arc<Kernel>>>,
    /// Per scratch type, the idle values: a call takes one (or starts with none) and puts it
    /// back, so concurrent frames never share buffers, and buffers are allocated only up to the
    /// peak number of frames in flight, whichever threads or contexts score them.
    scratch: Mutex<HashMap<TypeId, Vec<Box<dyn Any + Send>>>>,
    /// One stream per worker thread, so frames in flight on different threads overlap on the
    /// device (uploads of one frame with kernels of another).
    lanes: Mutex<HashMap<ThreadId, Arc<Stream>>>,
    /// The uploaded luma planes, shared by every worker thread (see [`planes`]).
    planes: planes::StatePlanes,
}

impl std::fmt::Debug for GpuState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuState")
            .field("device", self.device.info())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuState {
    /// Opens device `index` of [`enumerate`]'s list, or the first compute-capable one.
    pub fn new(index: Option<usize>) -> Result<Arc<GpuState>> {
        let t = std::time::Instant::now();
        let (devices, notes) = enumerate();
        let found = t.elapsed();
        let why = || {
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            }
        };
        let info = match index {
            Some(i) => devices.get(i).cloned().ok_or_else(|| {
                Error::NoDevice(format!(
                    "device index {i} out of range: {} device(s){}",
                    devices.len(),
                    why()
                ))
            })?,
            None => devices
                .iter()
                .find(|d| d.compute_capable)
                .cloned()
                .ok_or_else(|| Error::NoDevice(format!("no GPU found{}", why())))?,
        };
        let api = device::Api::load(info.vendor).map_err(|e| Error::NoDevice(e.to_string()))?;
        let device = Device::open(api, info)?;
        Self::on_device(device, t, found)
    }

    /// A state on the NVIDIA device of the caller's CUDA context `ctx` (work runs in that
    /// context), or with `ctx` NULL on the primary context of the first NVIDIA device:
    /// upstream's `vmaf_cuda_state_init`. `NoDevice` without the CUDA driver or a device.
    ///
    /// # Safety
    /// `ctx` is NULL or a live `CUcontext` that outlives the state.
    pub unsafe fn with_cuda_context(ctx: *mut std::ffi::c_void) -> Result<Arc<GpuState>> {
        let t = std::time::Instant::now();
        let api = device::Api::load(Vendor::Nvidia).map_err(|e| Error::NoDevice(e.to_string()))?;
        let device = if ctx.is_null() {
            let (devices, notes) = enumerate();
            let info = devices
                .into_iter()
                .find(|d| d.vendor == Vendor::Nvidia && d.compute_capable)
                .ok_or_else(|| {
                    Error::NoDevice(format!("no NVIDIA GPU found ({})", notes.join("; ")))
                })?;
            Device::open(api, info)?
        } else {
            // SAFETY: forwarded contract.
            unsafe { Device::open_context(api, ctx) }?
        };
        Self::on_device(device, t, std::time::Duration::ZERO)
    }

    fn on_device(
        device: Arc<Device>,
        t: std::time::Instant,
        found: std::time::Duration,
    ) -> Result<Arc<GpuState>> {
        let stream = Stream::new(&device)?;
        crate::log_debug!(
            "GPU {}: runtime loaded and devices listed in {:.0} ms, context ready in {:.0} ms",
            device.info().name,
            found.as_secs_f64() * 1e3,
            (t.elapsed() - found).as_secs_f64() * 1e3
        );
        if let Some((f, after)) = Fault::from_env() {
            device.inject_fault_after(f, after);
        }
        Ok(Arc::new(GpuState {
            device,
            stream,
            kernels: Mutex::new(HashMap::new()),
            scratch: Mutex::new(HashMap::new()),
            lanes: Mutex::new(HashMap::new()),
            planes: planes::StatePlanes::default(),
        }))
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The state's compute stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The calling thread's stream (created on first use). GPU extractors queue a frame's
    /// uploads, kernels and read-back on it, in order.
    pub fn lane_stream(&self) -> Result<Arc<Stream>> {
        let id = std::thread::current().id();
        let mut lanes = lock(&self.lanes);
        if let Some(s) = lanes.get(&id) {
            return Ok(s.clone());
        }
        let s = Arc::new(Stream::new(&self.device)?);
        lanes.insert(id, s.clone());
        Ok(s)
    }

    /// Drops the streams of `threads` (a context's workers, when the context closes): worker
    /// threads die with their pool, and their streams would otherwise stay for the state's
    /// lifetime. Scratch buffers are pooled by type, not by thread, and serve the next context.
    pub fn forget_threads(&self, threads: &[ThreadId]) {
        lock(&self.lanes).retain(|t, _| !threads.contains(t));
    }

    /// (idle scratch values, threads with a stream), for tests.
    #[cfg(test)]
    pub(crate) fn thread_entries(&self) -> (usize, usize) {
        let idle = lock(&self.scratch).values().map(Vec::len).sum();
        (idle, lock(&self.lanes).len())
    }

    /// Makes the device current on the calling thread (every operation does this itself; this
    /// is for callers that mix in their own runtime calls).
    pub fn bind(&self) -> Result<()> {
        self.device.bind()
    }

    /// Entry point `entry` of kernels/`file`.hip, loading the module on first use.
    pub fn kernel(&self, file: &'static str, entry: &'static str) -> Result<Arc<Kernel>> {
        let mut map = lock(&self.kernels);
        if let Some(k) = map.get(&(file, entry)) {
            return Ok(k.clone());
        }
        let module = match map.iter().find(|((f, _), _)| *f == file) {
            Some((_, k)) => k.module().clone(),
            None => code::load_module(&self.device, code::embedded(file)?)?,
        };
        let k = Arc::new(module.kernel(entry)?);
        map.insert((file, entry), k.clone());
        Ok(k)
    }

    /// The uploaded luma planes every worker thread of this state shares.
    pub(crate) fn planes(&self) -> &planes::StatePlanes {
        &self.planes
    }

    /// An idle scratch value of type `S` from the state's pool (None when there is none yet:
    /// the caller creates one). Give it back with [`Self::put_scratch`] once the GPU work using
    /// it has finished; a value dropped instead is freed (dropping device buffers waits for
    /// the device).
    pub(crate) fn take_scratch<S: Any + Send>(&self) -> Option<S> {
        lock(&self.scratch)
            .get_mut(&TypeId::of::<S>())
            .and_then(Vec::pop)
            .and_then(|b| b.downcast::<S>().ok())
            .map(|b| *b)
    }

    /// An idle scratch value of type `S` for which `fits` holds, if any, and the idle values
    /// that neither fit nor are kept any longer (`stale`), taken out of the pool for the caller
    /// to drop: so the pool lets go of values of another shape left from before a change of
    /// picture size, but not of those another context on the state is using in turn.
    pub(crate) fn take_scratch_fitting<S: Any + Send>(
        &self,
        fits: impl Fn(&S) -> bool,
        stale: impl Fn(&S) -> bool,
    ) -> (Option<S>, Vec<S>) {
        let mut pool = lock(&self.scratch);
        let Some(kept) = pool.get_mut(&TypeId::of::<S>()) else {
            return (None, Vec::new());
        };
        let mut found = None;
        let mut dropped = Vec::new();
        // Newest first, so the value returned last (warm in the caches) serves first.
        for b in std::mem::take(kept).into_iter().rev() {
            match b.downcast::<S>() {
                Ok(v) if found.is_none() && fits(&v) => found = Some(*v),
                Ok(v) if !fits(&v) && stale(&v) => dropped.push(*v),
                Ok(v) => kept.insert(0, v),
                Err(other) => kept.insert(0, other),
            }
        }
        (found, dropped)
    }

    /// Returns a scratch value to the pool, for later calls on any thread.
    pub(crate) fn put_scratch<S: Any + Send>(&self, value: S) {
        lock(&self.scratch)
            .entry(TypeId::of::<S>())
            .or_default()
            .push(Box::new(value));
    }
}

impl Drop for GpuState {
    fn drop(&mut self) {
        let (_, peak) = self.device.memory_use();
        // What a state holds, let go part by part and timed: freeing device and page-locked
        // memory is what a short run's tail is made of.
        let t = std::time::Instant::now();
        drop(std::mem::take(
            self.scratch.get_mut().unwrap_or_else(|e| e.into_inner()),
        ));
        let scratch = t.elapsed();
        drop(std::mem::take(
            self.lanes.get_mut().unwrap_or_else(|e| e.into_inner()),
        ));
        let lanes = t.elapsed() - scratch;
        drop(std::mem::take(
            self.kernels.get_mut().unwrap_or_else(|e| e.into_inner()),
        ));
        let kernels = t.elapsed() - scratch - lanes;
        // Debug level: the CLI's error paths promise a single line on stderr.
        crate::log_debug!(
            "GPU {}: peak device memory {} MiB; released scratch buffers in {:.1} ms, streams \
             in {:.1} ms, kernels in {:.1} ms",
            self.device.info().name,
            peak.div_ceil(1 << 20),
            scratch.as_secs_f64() * 1e3,
            lanes.as_secs_f64() * 1e3,
            kernels.as_secs_f64() * 1e3
        );
    }
}

/// The GPU states a context spreads its frames over: one per device, in runs of
/// [`SPREAD_RUN`] frames (frame `i` on state `(i / SPREAD_RUN) % n`). Each state keeps its own
/// buffers, so the devices work independently.
#[derive(Debug, Clone)]
pub struct GpuSet(Arc<[Arc<GpuState>]>);

/// Consecutive frames scored by one state of a [`GpuSet`]. Motion reads the previous frame's
/// reference: within a run it is already in that device's plane cache, while across devices
/// it is uploaded again (frame by frame alternation uploaded half as much again as one device,
/// and one feeder over two H200s scored slower than over one).
pub const SPREAD_RUN: usize = 16;

impl GpuSet {
    /// A set of `states`; None when empty.
    pub fn new(states: Vec<Arc<GpuState>>) -> Option<GpuSet> {
        (!states.is_empty()).then(|| GpuSet(states.into()))
    }

    /// The state that scores frame `index`.
    pub fn for_frame(&self, index: usize) -> &Arc<GpuState> {
        &self.0[(index / SPREAD_RUN) % self.0.len()]
    }

    /// The states, in import order.
    pub fn states(&self) -> &[Arc<GpuState>] {
        &self.0
    }
}

/// Which devices to open with [`open_states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The first compute-capable device.
    First,
    /// Device `i` of [`enumerate`]'s list.
    Index(usize),
    /// Every compute-capable device (or, with none, the first's error).
    All,
}

/// Opens the states of `choice`. Errors are [`GpuState::new`]'s, unworded: callers say what
/// they were opening the device for.
pub fn open_states(choice: DeviceChoice) -> Result<Vec<Arc<GpuState>>> {
    let usable: Vec<usize> = match choice {
        DeviceChoice::First => return Ok(vec![GpuState::new(None)?]),
        DeviceChoice::Index(i) => return Ok(vec![GpuState::new(Some(i))?]),
        DeviceChoice::All => {
            let (devices, _) = enumerate();
            (0..devices.len())
                .filter(|&i| devices[i].compute_capable)
                .collect()
        }
    };
    if usable.is_empty() {
        // Report why through the single-device path.
        return Ok(vec![GpuState::new(None)?]);
    }
    // A device takes about 0.2 s to start (its context): start them all at once. A thread
    // that cannot start leaves its device to this one.
    std::thread::scope(|s| {
        let started: Vec<_> = usable
            .iter()
            .map(|&i| {
                let t = std::thread::Builder::new()
                    .name("vmaf-gpu-open".into())
                    .spawn_scoped(s, move || GpuState::new(Some(i)));
                (i, t)
            })
            .collect();
        started
            .into_iter()
            .map(|(i, t)| match t {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(Error::NoDevice(format!(
                        "opening GPU {i} failed unexpectedly"
                    )))
                }),
                Err(_) => GpuState::new(Some(i)),
            })
            .collect()
    })
}

/// Page-locks the sample buffer of `pic` for every device (`dev` names the runtime to use), so
/// GPU uploads read its luma plane in place instead of through a staging copy.
pub fn pin_picture(
    dev: &Arc<Device>,
    mut pic: crate::picture::PictureData,
) -> Result<crate::picture::PictureData> {
    lock_buffer(dev, &mut pic)?;
    Ok(pic)
}

/// Page-locks `pic`'s buffer as [`pin_picture`] does when it is large enough to be worth it
/// (see [`crate::picture::PIN_MIN_BYTES`]), and keeps it as it is when locking fails: for
/// pictures that will be uploaded again and again (an upstream-style pool on a context with a
/// GPU), where locking up front keeps the page-locking off the feeding thread's first reads.
pub fn pin_picture_if_worth(
    dev: &Arc<Device>,
    mut pic: crate::picture::PictureData,
) -> crate::picture::PictureData {
    if pic.sample_buffer().1 >= crate::picture::PIN_MIN_BYTES {
        if let Err(e) = lock_buffer(dev, &mut pic) {
            crate::log_debug!("pool picture not page-locked, uploads stage it: {e}");
        }
    }
    pic
}

fn lock_buffer(dev: &Arc<Device>, pic: &mut crate::picture::PictureData) -> Result<()> {
    // A recycled buffer may be locked already (see `PictureData::pin_shared`): locking it
    // again would fail.
    if pic
        .pinned()
        .is_some_and(|p| p.as_any().is::<HostRegistration>())
    {
        return Ok(());
    }
    let (ptr, bytes) = pic.sample_buffer();
    // SAFETY: the buffer belongs to `pic` and is never reallocated; the registration is stored
    // in `pic`, whose field order drops it (waiting for copies, then unlocking) before the
    // buffer is freed, and it moves with the buffer when a pool recycles the picture.
    let reg = unsafe { HostRegistration::new(dev, ptr, bytes) }?;
    pic.set_pinned(Box::new(reg));
    Ok(())
}

/// Ends the process at once with `code`, without exit handlers: the GPU driver's take about
/// 0.1 s, a tenth of a short CLI run. Only for a program that has written all its output.
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` accepts any status and does not return; the output is flushed above and
    // the kernel closes files and frees memory, device mappings included.
    unsafe { libc::_exit(code) }
}

/// Human-readable description of every device, one per line, as `vmaf_hip_list_devices`
/// prints it.
pub fn describe_devices() -> Vec<String> {
    enumerate()
        .0
        .iter()
        .map(|d| {
            format!(
                "{}: {} [{}] arch {} memory {} MiB",
                d.ordinal,
                d.name,
                d.vendor.name(),
                if d.arch.is_empty() {
                    "unknown"
                } else {
                    &d.arch
                },
                d.total_mem >> 20
            )
        })
        .collect()
}

/// A state for tests, or None (after printing why) on machines without a GPU.
#[cfg(test)]
pub(crate) fn test_state() -> Option<Arc<GpuState>> {
    match GpuState::new(None) {
        Ok(s) => Some(s),
        Err(Error::NoDevice(why)) => {
            crate::testutil::skip_no_device(&why);
            None
        }
        Err(e) => panic!("GPU present but unusable: {e}"),
    }
}
