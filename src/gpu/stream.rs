//! Ordering of device work: [`Stream`] (an in-order queue) and [`Event`] (a marker in one).

use std::sync::Arc;

use super::device::Device;
use super::lock;
use super::sys;
use crate::error::Result;

/// An in-order queue of device work (created non-blocking: it never waits on the legacy
/// default stream other libraries in the process may use).
pub struct Stream {
    pub(super) dev: Arc<Device>,
    pub(super) raw: sys::RawStream,
    /// Unique for the process (handles of destroyed streams are reused); 0 for the legacy
    /// stream, whose handle names a different stream in each context.
    id: u64,
    /// The last event records this stream waited for, as (event id, record number): a frame's
    /// extractors wait for the same upload or caller's write one after another on a worker's
    /// stream, and each runtime call costs the host time under the driver's context lock.
    waited: std::sync::Mutex<Waited>,
    /// Event records made on this stream and how far the host has seen them complete.
    progress: Arc<Progress>,
}

/// Records on one stream complete in the order they were made: once the host has seen record
/// `done` complete, every earlier one has too, and waiting for it again costs a runtime call
/// for nothing. A frame's extractors each wait for their own read-back on one worker's stream;
/// waited for last to first, the first wait covers the rest.
#[derive(Default)]
pub(super) struct Progress {
    /// Records made so far (also held while one is made, so numbers follow the stream's order).
    recorded: std::sync::Mutex<u64>,
    /// The highest record number the host has seen complete.
    done: std::sync::atomic::AtomicU64,
}

impl Progress {
    fn complete_through(&self, n: u64) {
        self.done.fetch_max(n, std::sync::atomic::Ordering::AcqRel);
    }

    fn is_complete(&self, n: u64) -> bool {
        n > 0 && self.done.load(std::sync::atomic::Ordering::Acquire) >= n
    }
}

/// A small ring of (event id, record number) pairs.
#[derive(Default)]
struct Waited {
    keys: [(u64, u64); 8],
    next: usize,
    #[cfg(test)]
    skipped: u64,
}

// SAFETY: stream handles may be used from any thread; the runtimes serialise submissions.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// The stream's process-unique id (0: the legacy stream).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub fn new(dev: &Arc<Device>) -> Result<Stream> {
        let mut raw: sys::RawStream = std::ptr::null_mut();
        dev.call_common("stream create", |f| {
            // SAFETY: writes one handle; destroyed in Drop.
            unsafe { (f.stream_create)(&mut raw, sys::STREAM_NON_BLOCKING) }
        })?;
        Ok(Stream {
            dev: dev.clone(),
            raw,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            waited: Default::default(),
            progress: Default::default(),
        })
    }

    /// The device's legacy default stream (stream 0 of its context), where a caller's
    /// synchronous copies go: work queued here comes before what a device picture's reader
    /// does after `vmaf_read_pictures` (see `frames`). Never destroyed.
    pub fn legacy(dev: &Arc<Device>) -> Stream {
        Stream {
            dev: dev.clone(),
            raw: std::ptr::null_mut(),
            id: 0,
            waited: Default::default(),
            progress: Default::default(),
        }
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// Blocks until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        let recorded = *lock(&self.progress.recorded);
        self.dev.call_common("stream synchronize", |f| {
            // SAFETY: `raw` is a live stream of this device.
            unsafe { (f.stream_synchronize)(self.raw) }
        })?;
        // Records made before the call are behind it.
        self.progress.complete_through(recorded);
        Ok(())
    }

    /// Makes later work on this stream wait for `event`'s latest record (on any stream). No
    /// runtime call when that record is already behind this stream's later work: made on this
    /// stream, or waited for here already. Never skipped while this thread records a graph
    /// (a skipped wait would be missing from the graph).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let (records, on) = event.last_record();
        let key = (event.id, records);
        let capturing = super::device::capturing_here();
        if records > 0 && !capturing {
            if on != 0 && on == self.id {
                self.note_skip();
                return Ok(());
            }
            if lock(&self.waited).keys.contains(&key) {
                self.note_skip();
                return Ok(());
            }
        }
        self.dev.call_common("stream wait event", |f| {
            // SAFETY: both handles are live objects of this device.
            unsafe { (f.stream_wait_event)(self.raw, event.raw, 0) }
        })?;
        if records > 0 && !capturing {
            let mut w = lock(&self.waited);
            let i = w.next;
            w.keys[i] = key;
            w.next = (i + 1) % w.keys.len();
        }
        Ok(())
    }

    fn note_skip(&self) {
        #[cfg(test)]
        {
            lock(&self.waited).skipped += 1;
        }
    }

    /// Waits this stream left out ([`Self::wait_event`]), for tests.
    #[cfg(test)]
    pub(crate) fn skipped_waits(&self) -> u64 {
        lock(&self.waited).skipped
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let raw = self.raw;
        if raw.is_null() {
            return;
        }
        let r = self.dev.call_common("stream destroy", |f| {
            // SAFETY: destroying our own handle once; queued work still completes.
            unsafe { (f.stream_destroy)(raw) }
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}

/// Whether host waits on events sleep (`VMAF_HIP_WAIT=sleep`, read once) instead of the
/// runtimes' default, which spins while the process has fewer contexts than cores. Sleeping
/// frees the cores a waiting worker would burn, for pipelines that share the host with
/// decoders and encoders, at a wake-up per wait: frames in GPU memory from three feeding
/// threads mostly ran 4-13% slower on H100 hosts (docs/gpu.md, "Waiting for the GPU").
fn sleep_on_wait() -> bool {
    crate::settings::get().wait_sleep
}

/// Identities of streams and events for [`Stream::wait_event`]'s memory (handles of destroyed
/// ones are reused).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A marker in a stream, for ordering and host waits (timing disabled: cheaper).
pub struct Event {
    pub(super) dev: Arc<Device>,
    pub(super) raw: sys::RawEvent,
    id: u64,
    last: std::sync::Mutex<LastRecord>,
}

/// An event's latest record.
#[derive(Default)]
struct LastRecord {
    /// Records of the event so far.
    count: u64,
    /// The id of the stream it was made on (0: the legacy stream).
    stream: u64,
    /// Its number among that stream's records, with the stream's progress (None on the legacy
    /// stream, which other code in the process also uses).
    on_stream: Option<(u64, Arc<Progress>)>,
}

impl LastRecord {
    /// Describes the next record, made on stream `stream`.
    fn advance(&mut self, stream: u64, on_stream: Option<(u64, Arc<Progress>)>) {
        *self = LastRecord {
            count: self.count + 1,
            stream,
            on_stream,
        };
    }
}

// SAFETY: event handles may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    pub fn new(dev: &Arc<Device>) -> Result<Event> {
        let mut raw: sys::RawEvent = std::ptr::null_mut();
        dev.call_common("event create", |f| {
            let sleep = if sleep_on_wait() {
                sys::EVENT_BLOCKING_SYNC
            } else {
                0
            };
            // SAFETY: writes one handle; destroyed in Drop.
            unsafe { (f.event_create)(&mut raw, sys::EVENT_DISABLE_TIMING | sleep) }
        })?;
        Ok(Event {
            dev: dev.clone(),
            raw,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            last: Default::default(),
        })
    }

    /// (records so far, stream of the last one).
    fn last_record(&self) -> (u64, u64) {
        let l = lock(&self.last);
        (l.count, l.stream)
    }

    /// Captures the work queued on `stream` so far.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // The event's description changes with the record itself (a concurrent `synchronize`
        // must not credit a wait for this record to the previous one), and the number is
        // taken under the stream's lock, so numbers follow the order the runtime saw.
        let mut last = lock(&self.last);
        let mut recorded = lock(&stream.progress.recorded);
        self.dev.call_common("event record", |f| {
            // SAFETY: both handles are live objects of this device.
            unsafe { (f.event_record)(self.raw, stream.raw) }
        })?;
        *recorded += 1;
        let n = *recorded;
        drop(recorded);
        // A record made while capturing belongs to a graph, not to the stream's order.
        let tracked = stream.id != 0 && !super::device::capturing_here();
        last.advance(stream.id, tracked.then(|| (n, stream.progress.clone())));
        Ok(())
    }

    /// Captures the work queued so far on the device's legacy default stream (stream 0 of
    /// the bound context), where a caller's synchronous copies (`cuMemcpy2D`, `hipMemcpy2D`)
    /// and work on its blocking streams are ordered.
    pub fn record_legacy(&self) -> Result<()> {
        // Described under the same lock as the record itself, as in `record`.
        let mut last = lock(&self.last);
        self.dev.call_common("event record", |f| {
            // SAFETY: a live event of this device; the null stream is always valid.
            unsafe { (f.event_record)(self.raw, std::ptr::null_mut()) }
        })?;
        last.advance(0, None);
        Ok(())
    }

    /// Blocks until the captured work has finished. No runtime call when the host has already
    /// seen a later record of the same stream complete.
    pub fn synchronize(&self) -> Result<()> {
        let (count, on_stream) = {
            let l = lock(&self.last);
            (l.count, l.on_stream.clone())
        };
        if let Some((n, p)) = &on_stream {
            if p.is_complete(*n) {
                return Ok(());
            }
        }
        self.dev.call_common("event synchronize", |f| {
            // SAFETY: `raw` is a live event.
            unsafe { (f.event_synchronize)(self.raw) }
        })?;
        // Credit the stream only if the record waited for is the one read above (another
        // thread may have recorded the event again, elsewhere, in between).
        if let Some((n, p)) = on_stream {
            if lock(&self.last).count == count {
                p.complete_through(n);
            }
        }
        Ok(())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let raw = self.raw;
        let r = self.dev.call_common("event destroy", |f| {
            // SAFETY: destroying our own handle once.
            unsafe { (f.event_destroy)(raw) }
        });
        if let Err(e) = r {
            self.dev.teardown_warn(format_args!("{e}"));
        }
    }
}
