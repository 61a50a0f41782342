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
//! runtime without graphs, a failed capture or `VMAF_HIP_GRAPHS=0` leaves it on direct calls;
//! nothing is lost but speed. AMD runs direct unless `VMAF_HIP_GRAPHS=1`: HIP's capture of
//! module launches has not been run on AMD hardware here.

use std::sync::Arc;

use super::device::Device;
use super::sys::{self, GraphFns, Vendor};
use super::Stream;
use crate::error::Result;

/// Whether frames' fixed work may be replayed as graphs on `dev`.
fn enabled(dev: &Device) -> Option<&'static GraphFns> {
    let graph = dev.api().common().graph.as_ref()?;
    let on = match std::env::var("VMAF_HIP_GRAPHS").ok().as_deref() {
        Some("0") => false,
        Some("1") => true,
        _ => dev.api().vendor() == Vendor::Nvidia,
    };
    on.then_some(graph)
}

/// An instantiated graph; destroyed with its device still alive.
struct Exec {
    dev: Arc<Device>,
    fns: &'static GraphFns,
    raw: sys::RawGraphExec,
}

// SAFETY: a graph exec handle may be launched and destroyed from any thread; `Replay` (its
// only owner) hands it out behind `&mut`, so launches of one exec never overlap on the host.
unsafe impl Send for Exec {}

impl Drop for Exec {
    fn drop(&mut self) {
        let (fns, raw) = (self.fns, self.raw);
        // Launched copies of the graph may still run: the runtime keeps what they need alive
        // until they finish, so destroying the exec here does not wait.
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
/// options); a new key records again.
pub(crate) struct Replay<K> {
    /// The key of the last direct run: the next run with it records.
    seen: Option<K>,
    /// The recorded work and its key.
    exec: Option<(K, Exec)>,
    /// Direct calls only (capture failed, or graphs are off).
    direct: bool,
}

impl<K> Default for Replay<K> {
    fn default() -> Self {
        Replay {
            seen: None,
            exec: None,
            direct: false,
        }
    }
}

impl<K> Replay<K> {
    /// Whether the work is recorded (later runs launch the graph), for tests.
    #[cfg(test)]
    pub(crate) fn recorded(&self) -> bool {
        self.exec.is_some()
    }

    /// Whether the work is launched call by call for good (a capture failed), for tests.
    #[cfg(test)]
    pub(crate) fn direct(&self) -> bool {
        self.direct
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
            Some(f) if !self.direct => f,
            _ => return work(stream),
        };
        if let Some((k, exec)) = &self.exec {
            if k == key {
                let raw = exec.raw;
                return stream.dev.call("launch graph", |_| {
                    // SAFETY: `raw` is a live exec of this device and `stream` a live stream of
                    // it; the buffers the graph uses belong to the caller, who keeps them (with
                    // this replay) until the work has finished.
                    unsafe { (fns.launch)(raw, stream.raw) }
                });
            }
        }
        if self.seen.as_ref() != Some(key) {
            self.exec = None;
            self.seen = Some(key.clone());
            return work(stream);
        }
        match record(fns, stream, &work) {
            Ok(exec) => {
                let raw = exec.raw;
                self.exec = Some((key.clone(), exec));
                stream.dev.call("launch graph", |_| {
                    // SAFETY: as above.
                    unsafe { (fns.launch)(raw, stream.raw) }
                })
            }
            Err(e) => {
                crate::log_debug!("graph capture failed, launching call by call: {e}");
                self.direct = true;
                work(stream)
            }
        }
    }
}

/// Records `work` on `stream` (left in its normal state whatever happens) and instantiates it.
fn record(
    fns: &'static GraphFns,
    stream: &Stream,
    work: &impl Fn(&Stream) -> Result<()>,
) -> Result<Exec> {
    let dev = &stream.dev;
    dev.call("begin capture", |_| {
        // SAFETY: `stream` is a live stream of this device, not capturing (captures begin and
        // end within this function, on the calling thread).
        unsafe { (fns.begin_capture)(stream.raw, sys::CAPTURE_MODE_THREAD_LOCAL) }
    })?;
    let queued = work(stream);
    let mut graph: sys::RawGraph = std::ptr::null_mut();
    let ended = dev.call("end capture", |_| {
        // SAFETY: ends the capture begun above; writes one handle.
        unsafe { (fns.end_capture)(stream.raw, &mut graph) }
    });
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
