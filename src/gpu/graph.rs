//! Replaying a frame's fixed sequence of device work as one graph launch.
//!
//! Each runtime call costs the host several microseconds, and the driver serialises calls into
//! one context: at 1080p on an H100 the 20-odd launches, memsets and read-backs of a frame's
//! VIF, ADM and motion work took about 130 µs of host time per frame, which bounded the device
//! path near 7,000 fps whatever the GPU could do. Work whose operations, buffers and arguments
//! stay the same from frame to frame (everything after the kernel that reads the frame's
//! pictures) is recorded once by stream capture and then launched as one graph.
//!
//! [`Replay`] runs the work directly the first time (so kernels are loaded, and a capture never
//! meets a module load), records it the second time, and launches the graph from then on. A
//! runtime without graphs, failed captures or `VMAF_HIP_GRAPHS=0` leave it on direct calls;
//! nothing is lost but speed. AMD runs direct unless `VMAF_HIP_GRAPHS=1`: HIP's capture of
//! module launches has not been run on AMD hardware here.
//!
//! A device-wide wait (`cuCtxSynchronize`) while any stream of the context is capturing fails
//! and spoils the capture, so our own such waits (releasing memory) hold the device's capture
//! lock exclusively; a caller's own device-wide wait on a shared context can still meet one of
//! the few captures (one per scratch set and key), which then falls back to direct calls.

use std::sync::Arc;

use super::device::Device;
use super::sys::{self, GraphFns, Vendor};
use super::{DeviceBuffer, PinnedHostBuffer, Stream};
use crate::error::Result;

/// Whether frames' fixed work may be replayed as graphs on `dev` (the setting is read once).
pub(crate) fn enabled(dev: &Device) -> Option<&'static GraphFns> {
    static SETTING: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let setting = *SETTING.get_or_init(|| match std::env::var("VMAF_HIP_GRAPHS").ok().as_deref() {
        Some("0") => Some(false),
        Some("1") => Some(true),
        _ => None,
    });
    let graph = dev.api().common().graph.as_ref()?;
    setting
        .unwrap_or(dev.api().vendor() == Vendor::Nvidia)
        .then_some(graph)
}

/// Keys one replay keeps recordings for (extractors with different options share scratch
/// sets, e.g. VIF for a model and its NEG variant).
const KEYS: usize = 4;
/// Failed captures after which a replay stays on direct calls.
const MAX_FAILURES: u32 = 3;

/// An instantiated graph; destroyed with its device still alive.
struct Exec {
    dev: Arc<Device>,
    fns: &'static GraphFns,
    raw: sys::RawGraphExec,
}

// SAFETY: a graph exec handle may be launched and destroyed from any thread; `Replay` (its
// only owner) hands it out behind `&mut`, so launches of one exec never overlap on the host.
unsafe impl Send for Exec {}

impl Exec {
    fn launch(&self, stream: &Stream) -> Result<()> {
        let (fns, raw) = (self.fns, self.raw);
        stream.dev.call("launch graph", |_| {
            // SAFETY: `raw` is a live exec of this device and `stream` a live stream of it; the
            // buffers the graph uses belong to the caller, who keeps them (with this replay)
            // until the work has finished.
            unsafe { (fns.launch)(raw, stream.raw) }
        })
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        let (fns, raw) = (self.fns, self.raw);
        // None of its launches is running: a scratch (which owns its replay) goes back to the
        // pool only after the host waited for an event recorded after the graph's launch, and a
        // dropped scratch first frees its buffers (declared before its replay), which waits for
        // the device.
        let r = self.dev.call("graph exec destroy", |_| {
            // SAFETY: `raw` came from a successful instantiate and is destroyed once.
            unsafe { (fns.exec_destroy)(raw) }
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// The replay state of one fixed piece of work, kept with the buffers it uses. `K` is what
/// the recorded work depends on besides those buffers (kernel arguments such as model
/// options); each key is recorded on its second run.
pub(crate) struct Replay<K> {
    /// Keys run directly once, not recorded yet (most recent last).
    seen: Vec<K>,
    /// Recordings by key (most recently recorded last).
    execs: Vec<(K, Exec)>,
    /// Failed captures so far.
    failures: u32,
}

impl<K> Default for Replay<K> {
    fn default() -> Self {
        Replay {
            seen: Vec::new(),
            execs: Vec::new(),
            failures: 0,
        }
    }
}

impl<K> Replay<K> {
    /// How many keys the work is recorded for (their later runs launch the graph), for tests.
    #[cfg(test)]
    pub(crate) fn recordings(&self) -> usize {
        self.execs.len()
    }

    /// Whether the work is launched call by call for good (captures failed), for tests.
    #[cfg(test)]
    pub(crate) fn direct(&self) -> bool {
        self.failures >= MAX_FAILURES
    }
}

impl<K: PartialEq + Clone> Replay<K> {
    /// Queues `work` on `stream`, or launches its recording. `work` must queue only stream
    /// operations (launches, copies, memsets) that are the same whenever `key` is, and must not
    /// record events the host waits on: mark those after this returns.
    pub(crate) fn run(
        &mut self,
        key: &K,
        stream: &Stream,
        work: impl Fn(&Stream) -> Result<()>,
    ) -> Result<()> {
        let fns = match enabled(&stream.dev) {
            Some(f) if self.failures < MAX_FAILURES => f,
            _ => return work(stream),
        };
        if let Some((_, exec)) = self.execs.iter().find(|(k, _)| k == key) {
            return exec.launch(stream);
        }
        let Some(i) = self.seen.iter().position(|k| k == key) else {
            if self.seen.len() == KEYS {
                self.seen.remove(0);
            }
            self.seen.push(key.clone());
            return work(stream);
        };
        match record(fns, stream, &work) {
            Ok(exec) => {
                self.seen.remove(i);
                if self.execs.len() == KEYS {
                    self.execs.remove(0);
                }
                exec.launch(stream)?;
                self.execs.push((key.clone(), exec));
                Ok(())
            }
            Err(e) => {
                self.failures += 1;
                crate::log_debug!(
                    "graph capture failed ({} of {MAX_FAILURES}), launching call by call: {e}",
                    self.failures
                );
                work(stream)
            }
        }
    }
}

/// Where a replayed frame leaves its results: `from[..count]` is copied into `into` (which the
/// host then reads, waiting for the copy), and `reset` is zeroed for the next frame, both at the
/// end of the recorded work.
pub(crate) struct ReadBack<'a> {
    pub from: &'a DeviceBuffer<u64>,
    pub into: &'a mut PinnedHostBuffer<u64>,
    pub count: usize,
    pub reset: &'a DeviceBuffer<u64>,
}

impl<K: PartialEq + Clone> Replay<K> {
    /// [`Self::run`] with the frame's read-back and reset recorded after `work`, and `into`
    /// marked so that reading it waits for the copy.
    pub(crate) fn run_and_read_back(
        &mut self,
        key: &K,
        stream: &Stream,
        rb: ReadBack<'_>,
        work: impl Fn(&Stream) -> Result<()>,
    ) -> Result<()> {
        let ReadBack {
            from,
            into,
            count,
            reset,
        } = rb;
        into.prepare_download()?;
        let dst: &PinnedHostBuffer<u64> = into;
        self.run(key, stream, |s| {
            work(s)?;
            from.queue_download(s, dst, count)?;
            reset.zero(s)
        })?;
        into.mark_in_use(stream)
    }
}

/// Records `work` on `stream` (left in its normal state whatever happens) and instantiates it.
fn record(
    fns: &'static GraphFns,
    stream: &Stream,
    work: &impl Fn(&Stream) -> Result<()>,
) -> Result<Exec> {
    let dev = &stream.dev;
    let _capturing = dev.capture_guard();
    dev.call("begin capture", |_| {
        // SAFETY: `stream` is a live stream of this device, not capturing (captures begin and
        // end within this function, on the calling thread).
        unsafe { (fns.begin_capture)(stream.raw, sys::CAPTURE_MODE_THREAD_LOCAL) }
    })?;
    let queued = work(stream);
    let mut graph: sys::RawGraph = std::ptr::null_mut();
    // Directly, not through `Device::call`: nothing (a failed bind, an injected fault) may
    // keep the stream from leaving capture. The begin above made the device current here.
    // SAFETY: ends the capture begun above on this thread; writes one handle.
    let st = unsafe { (fns.end_capture)(stream.raw, &mut graph) };
    let ended = dev.api().check(st, "end capture");
    let destroy = |graph: sys::RawGraph| {
        if !graph.is_null() {
            // SAFETY: a graph from the capture above, destroyed once (an exec made from it
            // does not need it).
            let _ = dev.call("graph destroy", |_| unsafe { (fns.destroy)(graph) });
        }
    };
    if let Err(e) = queued.and(ended) {
        destroy(graph);
        return Err(e);
    }
    let mut raw: sys::RawGraphExec = std::ptr::null_mut();
    let made = dev.call("graph instantiate", |_| {
        // SAFETY: `graph` is the live graph captured above; writes one handle.
        unsafe { (fns.instantiate)(&mut raw, graph, 0) }
    });
    destroy(graph);
    made?;
    Ok(Exec {
        dev: dev.clone(),
        fns,
        raw,
    })
}
