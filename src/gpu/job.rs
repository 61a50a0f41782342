//! One extractor's GPU work for one frame: the single dispatch path every GPU feature takes.
//!
//! A [`Job`] takes the extractor's scratch buffers from the state's pool (or makes them), binds
//! the calling thread's stream, and holds the uploaded luma planes of its pictures as a guard.
//! The feature queues its kernels and read-back through [`Job::parts`], then [`Job::finish`]
//! returns a [`Queued`] closure that waits for the read-back, turns it into results and gives
//! the planes and the scratch back. Nothing calls back into feature code while planes
//! are locked, and an error anywhere drops the job, which releases the planes (the scratch is
//! freed, since queued work may still use it).
//!
//! Kernels are queued in one of two ways, both explicit at the call: a [`Launch`] queued on the
//! job's stream, or a frame's fixed work handed to the scratch's [`Replay`] with its head (the
//! one launch that reads the frame's pictures) as a [`Launch`] value and the rest as work on a
//! stream, which the replay queues call by call, records as a graph, or replays with the head's
//! node updated, and then reads back ([`ReadBack`]).
//!
//! [`Launch`]: crate::gpu::launch::Launch

use std::any::Any;
use std::sync::Arc;

use crate::error::Result;
pub(crate) use crate::gpu::graph::{ReadBack, Replay};
use crate::gpu::planes::{Luma, PlaneAs, UploadedLuma};
use crate::gpu::{GpuState, Stream};
use crate::picture::Picture;

/// Work queued for one frame: calling it waits for the results. Also what a feature
/// extractor's `queue` returns (its results are the frame's scores).
pub(crate) type Queued<'a, R> = Box<dyn FnOnce() -> Result<R> + Send + 'a>;

/// A frame's GPU work in the making: pooled scratch `S`, the thread's stream, and the luma
/// planes (samples `T`) of `N` pictures.
pub(crate) struct Job<S: Any + Send, T: PlaneAs, const N: usize> {
    state: Arc<GpuState>,
    stream: Arc<Stream>,
    scratch: S,
    luma: UploadedLuma<T, N>,
}

/// What a job's work is queued with.
pub(crate) struct Parts<'j, S, T: PlaneAs, const N: usize> {
    pub state: &'j GpuState,
    pub stream: &'j Stream,
    pub scratch: &'j mut S,
    /// The pictures' luma planes on the device, in the order given to [`Job::start`].
    pub luma: [Luma<'j, T>; N],
}

impl<S: Any + Send, T: PlaneAs, const N: usize> Job<S, T, N> {
    /// Starts a job on `pics`: an idle scratch value the job `fits` (else one from `make`),
    /// the calling thread's stream, and the pictures' luma planes uploaded and waited for.
    pub(crate) fn start(
        state: &Arc<GpuState>,
        pics: [&Picture; N],
        fits: impl Fn(&S) -> bool,
        make: impl FnOnce(&GpuState) -> Result<S>,
    ) -> Result<Self> {
        let scratch = match state.take_scratch::<S>() {
            Some(s) if fits(&s) => s,
            // A misfit (another size) is dropped: its buffers are freed before new ones.
            other => {
                drop(other);
                make(state)?
            }
        };
        let stream = state.lane_stream()?;
        let luma = UploadedLuma::acquire(state, &stream, pics)?;
        Ok(Job {
            state: state.clone(),
            stream,
            scratch,
            luma,
        })
    }

    /// The state, stream, scratch and planes to queue work with.
    pub(crate) fn parts(&mut self) -> Parts<'_, S, T, N> {
        Parts {
            state: &self.state,
            stream: &self.stream,
            scratch: &mut self.scratch,
            luma: self.luma.get(),
        }
    }

    /// Ends the queueing: the returned closure waits for the results with `read` and returns
    /// the scratch to the pool. `read` must wait for something queued on the stream after all
    /// of the job's work (its read-back), which lets the planes go back without a recorded
    /// release; if it fails, or the closure is dropped uncalled, the planes are released after
    /// the work queued on the stream so far.
    pub(crate) fn finish<R: 'static>(
        self,
        read: impl FnOnce(&mut S) -> Result<R> + Send + 'static,
    ) -> Queued<'static, R> {
        self.finish_then(move |s, _| read(s))
    }

    /// [`Self::finish`] for a `read` that may queue more copies on the job's stream once the
    /// first read-back shows what else it needs (and then waits for them); its first wait must
    /// cover all of the job's earlier work.
    pub(crate) fn finish_then<R: 'static>(
        self,
        read: impl FnOnce(&mut S, &Stream) -> Result<R> + Send + 'static,
    ) -> Queued<'static, R> {
        let Job {
            state,
            stream,
            mut scratch,
            luma,
        } = self;
        Box::new(move || {
            let r = read(&mut scratch, &stream)?;
            luma.release_waited();
            state.put_scratch(scratch);
            Ok(r)
        })
    }

    /// [`Self::finish`] and wait, on the calling thread: for features whose host side needs
    /// the results to decide what else to read back (`read` may queue more copies on the
    /// scratch and wait again; its first wait must cover all of the job's work).
    pub(crate) fn wait<R>(self, read: impl FnOnce(&mut S, &Stream) -> Result<R>) -> Result<R> {
        let Job {
            state,
            stream,
            mut scratch,
            luma,
        } = self;
        let r = read(&mut scratch, &stream)?;
        luma.release_waited();
        state.put_scratch(scratch);
        Ok(r)
    }
}
