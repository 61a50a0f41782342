//! Replaying a frame's fixed sequence of device work as one graph launch.
//!
//! Each runtime call costs the host several microseconds, and the driver serialises calls into
//! one context: at 1080p on an H100 the 20-odd launches, memsets and read-backs of a frame's
//! VIF, ADM and motion work took about 130 µs of host time per frame, which bounded the device
//! path near 7,000 fps whatever the GPU could do. Work whose operations, buffers and arguments
//! stay the same from frame to frame (everything after the kernel that reads the frame's
//! pictures) is recorded once by stream capture and then launched as one graph.
//!
//! The kernel that reads the frame's pictures (the *head*) is recorded too, as the graph's first
//! node: before each launch its arguments are replaced with the frame's
//! (`cuGraphExecKernelNodeSetParams`, about 0.25 µs on an H100 host against 3.5 µs for a
//! launch), so a frame's extractor costs one launch. Runtimes without that update call launch
//! the head directly and replay the rest. The head is handed over as a prepared [`Launch`], not
//! run: the replay queues it, records it, or turns it into that update, so which of the three a
//! frame gets is decided here and nowhere else (kernel launches themselves never look at it).
//!
//! [`Replay`] runs the work directly the first time (so kernels are loaded, and a capture never
//! meets a module load), records it the second time, and launches the graph from then on. A
//! runtime without graphs, failed captures or `VMAF_HIP_GRAPHS=0` leave it on direct calls;
//! nothing is lost but speed. AMD runs direct unless `VMAF_HIP_GRAPHS=1`: HIP's capture of
//! module launches has not been run on AMD hardware here.
//!
//! A device-wide wait (`cuCtxSynchronize`) while any stream of the context is capturing fails
//! and spoils the capture, so our own such waits (releasing memory) hold the process's capture
//! lock exclusively (every state's `Device` shares the primary context); a caller's own
//! device-wide wait on a shared context can still meet one of the few captures (one per scratch
//! set and key), which then falls back to direct calls.

use std::ffi::c_void;
use std::sync::Arc;

use super::device::Device;
use super::launch::Launch;
use super::module::{self, LaunchConfig};
use super::sys::{self, GraphFns, HeadFns, SetKernelFn, Vendor};
use super::{DeviceBuffer, PinnedHostBuffer, Stream};
use crate::error::{Error, Result};

/// Whether frames' fixed work may be replayed as graphs on `dev` (the setting is read once).
pub(crate) fn enabled(dev: &Device) -> Option<&'static GraphFns> {
    let setting = crate::settings::get().graphs;
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

/// Gives the recorded head `node` of `exec` the arguments of a launch of `func`.
fn set_kernel(
    dev: &Device,
    fns: &HeadFns,
    exec: sys::RawGraphExec,
    node: sys::RawGraphNode,
    func: sys::RawFunction,
    cfg: &LaunchConfig,
    params: *mut *mut c_void,
) -> Result<()> {
    let (g, b) = (cfg.grid, cfg.block);
    dev.try_call("update graph head", |_| match fns.set_kernel {
        SetKernelFn::Cuda(f) => {
            let p = sys::CudaKernelNodeParams {
                func,
                grid: [g.0, g.1, g.2],
                block: [b.0, b.1, b.2],
                shared_mem_bytes: cfg.shared_mem_bytes,
                kernel_params: params,
                extra: std::ptr::null_mut(),
            };
            // SAFETY: `exec` is live and `node` is the kernel node of the graph it was made
            // from (kept alive with it); `params` are a `Launch`'s values for `func`, which meet
            // the kernel's contract as queueing them would (`Launch::queue`), and the runtime
            // copies them during the call, while the caller keeps them alive.
            unsafe { f(exec, node, &p) }
        }
        SetKernelFn::Hip(f) => {
            let p = sys::HipKernelNodeParams {
                block: [b.0, b.1, b.2],
                extra: std::ptr::null_mut(),
                func,
                grid: [g.0, g.1, g.2],
                kernel_params: params,
                shared_mem_bytes: cfg.shared_mem_bytes,
            };
            // SAFETY: as above.
            unsafe { f(exec, node, &p) }
        }
    })
}

/// An instantiated graph and the graph it was made from (its head node belongs to that one);
/// destroyed with its device still alive.
struct Exec {
    dev: Arc<Device>,
    fns: &'static GraphFns,
    raw: sys::RawGraphExec,
    graph: sys::RawGraph,
    /// The recorded head's node, when the runtime can update it.
    head: Option<(&'static HeadFns, sys::RawGraphNode)>,
}

// SAFETY: graph and exec handles may be launched, updated and destroyed from any thread;
// `Replay` (their only owner) hands them out behind `&mut`, so uses of one exec never overlap
// on the host.
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

    /// Points the recorded head at `head`'s arguments (or, when the recording has no head, queues
    /// it). `Ok(false)`: the runtime refused the update.
    fn update_head(&self, stream: &Stream, head: &Launch<'_>) -> Result<bool> {
        let Some((fns, node)) = self.head else {
            head.queue(stream)?;
            return Ok(true);
        };
        let (kernel, cfg, args) = head.parts();
        let mut params = module::params(&args);
        let set = set_kernel(
            &stream.dev,
            fns,
            self.raw,
            node,
            kernel.raw(),
            cfg,
            params.as_mut_ptr(),
        );
        match set {
            Ok(()) => Ok(true),
            Err(e) => {
                crate::log_debug!("graph head update refused: {e}");
                Ok(false)
            }
        }
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        let (fns, raw, graph) = (self.fns, self.raw, self.graph);
        // None of its launches is running: a scratch (which owns its replay) goes back to the
        // pool only after the host waited for an event recorded after the graph's launch, and a
        // dropped scratch first frees its buffers (declared before its replay), which waits for
        // the device.
        let exec = self.dev.call("graph exec destroy", |_| {
            // SAFETY: `raw` came from a successful instantiate and is destroyed once.
            unsafe { (fns.exec_destroy)(raw) }
        });
        let graph = self.dev.call("graph destroy", |_| {
            // SAFETY: `graph` came from the capture and is destroyed once, after the exec made
            // from it.
            unsafe { (fns.destroy)(graph) }
        });
        if let Err(e) = exec.and(graph) {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// The replay state of one fixed piece of work, kept with the buffers it uses. `K` is what
/// the recorded work depends on besides those buffers and the head's arguments (options that
/// change the tail's kernels or arguments, or which kernel the head is); each key is recorded
/// on its second run.
pub(crate) struct Replay<K> {
    /// Keys run directly once, not recorded yet (most recent last).
    seen: Vec<K>,
    /// Recordings by key (most recently recorded last).
    execs: Vec<(K, Exec)>,
    /// Failed captures so far.
    failures: u32,
    /// Whether to record the head (cleared when the runtime rejects a recorded head or its
    /// update: the rest is then recorded without it).
    heads: bool,
    /// Recordings put aside when their head could not be updated, destroyed with the replay
    /// (after the device has finished with them).
    retired: Vec<Exec>,
}

impl<K> Default for Replay<K> {
    fn default() -> Self {
        Replay {
            seen: Vec::new(),
            execs: Vec::new(),
            failures: 0,
            heads: true,
            retired: Vec::new(),
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

    /// Whether the recordings include their head (updated per frame), for tests.
    #[cfg(test)]
    pub(crate) fn heads_recorded(&self) -> bool {
        !self.execs.is_empty() && self.execs.iter().all(|(_, e)| e.head.is_some())
    }
}

impl<K: PartialEq + Clone> Replay<K> {
    /// Queues `head` then `work` on `stream`, or launches their recording. `head` is the kernel
    /// that reads the frame's pictures (its arguments may change from frame to frame); `work`
    /// must queue only stream operations (launches, copies, memsets) that are the same whenever
    /// `key` is, and may not record events the host waits on: mark those after this returns.
    pub(crate) fn run(
        &mut self,
        key: &K,
        stream: &Stream,
        head: &Launch<'_>,
        work: impl Fn(&Stream) -> Result<()>,
    ) -> Result<()> {
        self.run_inner(key, stream, Some(head), work)
    }

    /// [`Self::run`] for work that reads nothing that changes from frame to frame (its inputs
    /// were copied into the caller's buffers before it): all of it is recorded and replayed.
    pub(crate) fn run_fixed(
        &mut self,
        key: &K,
        stream: &Stream,
        work: impl Fn(&Stream) -> Result<()>,
    ) -> Result<()> {
        self.run_inner(key, stream, None, work)
    }

    fn run_inner(
        &mut self,
        key: &K,
        stream: &Stream,
        head: Option<&Launch<'_>>,
        work: impl Fn(&Stream) -> Result<()>,
    ) -> Result<()> {
        let direct = |stream: &Stream| {
            if let Some(h) = head {
                h.queue(stream)?;
            }
            work(stream)
        };
        let fns = match enabled(&stream.dev) {
            Some(f) if self.failures < MAX_FAILURES => f,
            _ => return direct(stream),
        };
        if let Some((_, exec)) = self.execs.iter().find(|(k, _)| k == key) {
            let Some(head) = head else {
                // One replay takes either `run` or `run_fixed`, never both: a recorded head
                // would be launched with the arguments of another frame.
                debug_assert!(
                    exec.head.is_none(),
                    "fixed work replayed with a recorded head"
                );
                return exec.launch(stream);
            };
            if exec.update_head(stream, head)? {
                return exec.launch(stream);
            }
            // The runtime took the recording but not the update: record the rest again, with
            // the head launched directly.
            self.heads = false;
            self.seen.clear();
            self.retired.extend(self.execs.drain(..).map(|(_, e)| e));
            return direct(stream);
        }
        let Some(i) = self.seen.iter().position(|k| k == key) else {
            if self.seen.len() == KEYS {
                self.seen.remove(0);
            }
            self.seen.push(key.clone());
            return direct(stream);
        };
        // Without the update call the head stays outside the recording, launched each frame.
        let head_fns = fns.head.as_ref().filter(|_| self.heads);
        let recorded_head = match (head, head_fns) {
            (Some(h), Some(_)) => Some(h),
            (Some(h), None) => {
                h.queue(stream)?;
                None
            }
            (None, _) => None,
        };
        match record(fns, stream, recorded_head, &work) {
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
                match recorded_head {
                    Some(_) => {
                        // The next capture leaves the head out, in case it was the cause.
                        self.heads = false;
                        direct(stream)
                    }
                    None => work(stream),
                }
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
        head: &Launch<'_>,
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
        self.run(key, stream, head, |s| {
            work(s)?;
            from.queue_download(s, dst, count)?;
            reset.zero(s)
        })?;
        into.mark_in_use(stream)
    }
}

/// Records `head` (when given) and `work` on `stream` (left in its normal state whatever
/// happens), instantiates the graph and finds the head's node.
fn record(
    fns: &'static GraphFns,
    stream: &Stream,
    head: Option<&Launch<'_>>,
    work: &impl Fn(&Stream) -> Result<()>,
) -> Result<Exec> {
    let dev = &stream.dev;
    let _capturing = dev.capture_guard();
    dev.try_call("begin capture", |_| {
        // SAFETY: `stream` is a live stream of this device, not capturing (captures begin and
        // end within this function, on the calling thread).
        unsafe { (fns.begin_capture)(stream.raw, sys::CAPTURE_MODE_THREAD_LOCAL) }
    })?;
    let queued = match head {
        Some(h) => h.queue(stream).and_then(|()| work(stream)),
        None => work(stream),
    };
    let mut graph: sys::RawGraph = std::ptr::null_mut();
    // Directly, not through `Device::call`: nothing (a failed bind, an injected fault) may
    // keep the stream from leaving capture. The begin above made the device current here.
    // SAFETY: ends the capture begun above on this thread; writes one handle.
    let st = unsafe { (fns.end_capture)(stream.raw, &mut graph) };
    let ended = dev.api().check(st, "end capture");
    let destroy = |graph: sys::RawGraph| {
        if !graph.is_null() {
            // SAFETY: a graph from the capture above, destroyed once, on a path where no exec
            // keeps it.
            let _ = dev.try_call("graph destroy", |_| unsafe { (fns.destroy)(graph) });
        }
    };
    if let Err(e) = queued.and(ended) {
        destroy(graph);
        return Err(e);
    }
    let head_node = match (head, fns.head.as_ref()) {
        (Some(_), Some(h)) => match head_node(dev, h, graph) {
            Ok(node) => Some((h, node)),
            Err(e) => {
                destroy(graph);
                return Err(e);
            }
        },
        _ => None,
    };
    let mut raw: sys::RawGraphExec = std::ptr::null_mut();
    let made = dev.try_call("graph instantiate", |_| {
        // SAFETY: `graph` is the live graph captured above; writes one handle.
        unsafe { (fns.instantiate)(&mut raw, graph, 0) }
    });
    if let Err(e) = made {
        destroy(graph);
        return Err(e);
    }
    Ok(Exec {
        dev: dev.clone(),
        fns,
        raw,
        graph,
        head: head_node,
    })
}

/// The recorded head: the graph's only root, a kernel node (the capture began with it).
fn head_node(dev: &Device, fns: &HeadFns, graph: sys::RawGraph) -> Result<sys::RawGraphNode> {
    let mut n = 0usize;
    dev.try_call("graph root nodes", |_| {
        // SAFETY: `graph` is live; a NULL list asks for the count only.
        unsafe { (fns.root_nodes)(graph, std::ptr::null_mut(), &mut n) }
    })?;
    if n != 1 {
        return Err(Error::inval(format!(
            "recorded frame work has {n} first nodes, not its head alone"
        )));
    }
    let mut node: sys::RawGraphNode = std::ptr::null_mut();
    dev.try_call("graph root nodes", |_| {
        // SAFETY: room for the one node counted above.
        unsafe { (fns.root_nodes)(graph, &mut node, &mut n) }
    })?;
    let mut kind: std::ffi::c_int = -1;
    dev.try_call("graph node type", |_| {
        // SAFETY: `node` is a node of the live `graph`; writes one value.
        unsafe { (fns.node_type)(node, &mut kind) }
    })?;
    // HIP numbered its node types differently before 6.0 (kernel 1, not 0); the capture began
    // with the head's launch (one kernel), so there the count above suffices.
    let kernel = match fns.set_kernel {
        SetKernelFn::Cuda(_) => kind == sys::GRAPH_NODE_KERNEL_CUDA,
        SetKernelFn::Hip(_) => true,
    };
    if node.is_null() || !kernel {
        return Err(Error::inval(
            "recorded frame work does not begin with a kernel",
        ));
    }
    Ok(node)
}
