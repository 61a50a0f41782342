//! The scoring driver: a distorted video file scored against its reference through a
//! [`Context`], as the `vmaf` command and the Python bindings' `score_files` run it.
//!
//! [`Inputs::open`] opens both files ([`crate::io`] readers) and checks they can be scored
//! together; the caller then sets up a context (models, features, GPU states: front ends word
//! those errors their own way); [`Inputs::score`] skips the first frames of each input, reads
//! both ahead of the scorer on threads of their own, feeds the frame pairs to the context and
//! flushes it; [`pool`] pools each model's scores, and [`Context::write_output`] or
//! [`Context::write_output_to`] writes them. Subsampling is the context's
//! ([`crate::context::Config::n_subsample`]): every frame is read and handed over.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::context::Context;
use crate::io::{self, FrameLayout, FrameReaderAt, VideoInfo, VideoReader};
use crate::model::{BootstrapScore, LoadedModel};
use crate::picture::{Picture, PictureData, PlaneRef};
use crate::pooling::PoolingMethod;

mod read_ahead;
#[cfg(test)]
mod tests;

use read_ahead::ReadAhead;

/// Frames each reading thread reads ahead of the scorer by default: enough to hide a slow
/// read, few enough to bound memory.
pub const READ_AHEAD: usize = 3;

/// What to score and how to read it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Reference video: y4m, or raw planar video as `raw` describes.
    pub reference: PathBuf,
    /// Distorted video, likewise.
    pub distorted: PathBuf,
    /// Size, pixel format and bit depth of raw `.yuv` inputs; `None` for y4m. A y4m file is
    /// read as y4m even with `raw` (see [`io::open`]).
    pub raw: Option<VideoInfo>,
    /// The inputs may differ in bit depth: the lower one is shifted up to the higher.
    pub common_bitdepth: bool,
    /// Reference frames skipped before the first one scored.
    pub frame_skip_ref: u32,
    /// Distorted frames skipped before the first one scored.
    pub frame_skip_dist: u32,
    /// Frames scored at most; 0 scores until an input ends.
    pub frame_cnt: u32,
    /// Frames each reading thread holds ahead of the scorer (0: only the one it reads).
    pub read_ahead: usize,
    /// Threads reading an input whose frames lie at fixed offsets; `None`: the
    /// `VMAF_HIP_READ_THREADS` variable (1 to 16), else a quarter of the cores (1 to 4).
    pub readers: Option<usize>,
    /// With a context on a GPU, frames are read into page-locked pictures, so the uploads
    /// read them in place (a context on the CPU takes ordinary pictures either way).
    pub page_locked: bool,
    /// Once set (from any thread), scoring stops before the next frame with an I/O error of
    /// kind `Interrupted`.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Options {
    /// Every frame of two y4m files, read ahead [`READ_AHEAD`] frames, page-locked on a GPU.
    pub fn new(reference: impl Into<PathBuf>, distorted: impl Into<PathBuf>) -> Options {
        Options {
            reference: reference.into(),
            distorted: distorted.into(),
            raw: None,
            common_bitdepth: false,
            frame_skip_ref: 0,
            frame_skip_dist: 0,
            frame_cnt: 0,
            read_ahead: READ_AHEAD,
            readers: None,
            page_locked: true,
            cancel: None,
        }
    }
}

/// Why scoring failed: the library's error, and the step it failed in where the library's
/// message does not name it. Displays as `step: error`; `?` into [`crate::Error`] folds the
/// step into the message and keeps the kind (so the errno, or a binding's exception, stays).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error whose message says what failed (which file, which frame of it).
    #[error(transparent)]
    Library(#[from] crate::Error),
    /// An error in the step `context` names: a frame of the context, the flush, an input
    /// whose reader ran out of memory.
    #[error("{context}: {source}")]
    In {
        context: String,
        #[source]
        source: crate::Error,
    },
}

impl Error {
    /// The library's error.
    pub fn library(&self) -> &crate::Error {
        match self {
            Error::Library(e) | Error::In { source: e, .. } => e,
        }
    }

    fn within(context: impl std::fmt::Display) -> impl FnOnce(crate::Error) -> Error {
        move |source| Error::In {
            context: context.to_string(),
            source,
        }
    }
}

impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Library(e) => e,
            Error::In { context, source } => source.prefixed(context),
        }
    }
}

/// A failure reading `input`: the reader's messages name the file, except an allocation's.
fn reading(input: &Path) -> impl FnOnce(crate::Error) -> Error + '_ {
    move |e| match e {
        crate::Error::NoMem(_) => Error::within(input.display())(e),
        e => Error::Library(e),
    }
}

/// What a caller hears of while [`Inputs::score`] runs (a progress display, say). Every
/// method does nothing unless implemented; `()` implements none.
pub trait Progress {
    /// Reading starts: `frames` to score, where the input sizes tell.
    fn start(&mut self, _frames: Option<u64>) {}
    /// One more frame pair went to the context.
    fn advance(&mut self) {}
    /// Something to tell the user, such as an input ending before the other.
    fn warning(&mut self, _message: &str) {}
    /// Reading ended after `frames` frame pairs; the flush comes next.
    fn finish(&mut self, _frames: usize) {}
}

impl Progress for () {}

/// The two inputs, open and checked, positioned at their first frame.
pub struct Inputs {
    opts: Options,
    reference: Box<dyn VideoReader>,
    distorted: Box<dyn VideoReader>,
}

impl Inputs {
    /// Opens both inputs and checks that they can be scored together (same size and pixel
    /// format; same bit depth unless `common_bitdepth`).
    pub fn open(opts: Options) -> Result<Inputs, Error> {
        let reference = io::open(&opts.reference, opts.raw).map_err(reading(&opts.reference))?;
        let distorted = io::open(&opts.distorted, opts.raw).map_err(reading(&opts.distorted))?;
        io::check_compatible(
            &opts.reference,
            &reference.info(),
            &opts.distorted,
            &distorted.info(),
            opts.common_bitdepth,
        )?;
        Ok(Inputs {
            opts,
            reference,
            distorted,
        })
    }

    /// Things about the inputs a user should hear of (bytes that will be ignored, flags not
    /// needed), reference first.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.reference.warnings();
        w.extend(self.distorted.warnings());
        w
    }

    /// Scores the frame pairs with `ctx` (set up with its models and features) and flushes
    /// it: skips the first frames of each input, then reads both ahead on threads of their own
    /// until one ends or the frame count is reached. Returns the frames scored; none is an
    /// error. An input ending before the other is a [`Progress::warning`], not an error.
    pub fn score(self, ctx: &mut Context, progress: &mut dyn Progress) -> Result<usize, Error> {
        let t0 = Instant::now();
        let ms = move || t0.elapsed().as_secs_f64() * 1e3;
        let Inputs {
            opts,
            mut reference,
            mut distorted,
        } = self;
        let (ref_path, dist_path) = (opts.reference.as_path(), opts.distorted.as_path());
        skip(reference.as_mut(), opts.frame_skip_ref, ref_path)?;
        skip(distorted.as_mut(), opts.frame_skip_dist, dist_path)?;

        let mut len = match (reference.frames_left_hint(), distorted.frames_left_hint()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        if opts.frame_cnt > 0 {
            let cnt = u64::from(opts.frame_cnt);
            len = Some(len.map_or(cnt, |l| l.min(cnt)));
        }
        progress.start(len);

        // Reference and distorted are read ahead on their own threads, so reading overlaps
        // scoring and the two files are read at once; inputs with frames at fixed offsets are
        // read by several threads each.
        let plan = ReadPlan {
            limit: (opts.frame_cnt > 0).then_some(opts.frame_cnt as usize),
            depth: opts.read_ahead,
            readers: opts.readers.unwrap_or_else(read_ahead::readers_per_input),
            device: opts
                .page_locked
                .then(|| ctx.gpu_states().first().map(|s| s.device().clone()))
                .flatten(),
            workers: ctx.worker_count(),
        };
        let (ref_layout, dist_layout) = reference.layout().zip(distorted.layout()).unzip();
        let ref_frames = plan.start(reference, ref_layout, ref_path)?;
        let dist_frames = plan.start(distorted, dist_layout, dist_path)?;
        crate::log_debug!("{:.0} ms: readers started", ms());

        let mut n = 0usize;
        let mut waited = 0.0;
        while opts.frame_cnt == 0 || n < opts.frame_cnt as usize {
            if opts
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(Error::Library(crate::Error::io(
                    format!("scoring cancelled at frame {n}"),
                    std::io::ErrorKind::Interrupted.into(),
                )));
            }
            let t = Instant::now();
            let r = ref_frames.next().map_err(reading(ref_path))?;
            let d = dist_frames.next().map_err(reading(dist_path))?;
            waited += t.elapsed().as_secs_f64();
            let (r, d) = match (r, d) {
                (Some(r), Some(d)) => (r, d),
                (None, None) => break,
                (r, _) => {
                    let (short, long) = if r.is_none() {
                        (ref_path, dist_path)
                    } else {
                        (dist_path, ref_path)
                    };
                    progress.warning(&format!(
                        "{} ended before {}; scoring the first {n} frames",
                        short.display(),
                        long.display()
                    ));
                    break;
                }
            };
            let (r, d) = if r.bpc != d.bpc {
                common_depth(r, d).map_err(Error::within(format_args!("frame {n}")))?
            } else {
                (r, d)
            };
            ctx.read_pictures(r, d, n)
                .map_err(Error::within(format_args!("frame {n}")))?;
            n += 1;
            progress.advance();
        }
        crate::log_debug!("scorer: waited {:.0} ms for the readers", waited * 1e3);
        // Frames read past the end go back to their pool now, not after the flush.
        drop((ref_frames, dist_frames));
        progress.finish(n);
        if n == 0 {
            let what = if opts.frame_skip_ref > 0 || opts.frame_skip_dist > 0 {
                "the inputs after skipping".to_string()
            } else {
                ref_path.display().to_string()
            };
            return Err(Error::Library(crate::Error::inval(format!(
                "no frames to score in {what}"
            ))));
        }
        crate::log_debug!("{:.0} ms: {n} frames read", ms());
        ctx.flush()
            .map_err(Error::within("problem flushing the context"))?;
        crate::log_debug!("{:.0} ms: flushed", ms());
        Ok(n)
    }
}

/// Reads and drops the first `count` frames of `input` (fewer if it ends first).
fn skip(input: &mut dyn VideoReader, count: u32, path: &Path) -> Result<(), Error> {
    for _ in 0..count {
        if input.read_frame().map_err(reading(path))?.is_none() {
            break;
        }
    }
    Ok(())
}

/// How both inputs are read ahead.
struct ReadPlan {
    /// Frames to read at most.
    limit: Option<usize>,
    depth: usize,
    /// Threads per input read by position.
    readers: usize,
    /// The GPU whose uploads read the pictures, when they are page-locked.
    device: Option<Arc<crate::gpu::Device>>,
    /// The context's worker threads (frames in flight).
    workers: usize,
}

impl ReadPlan {
    /// Starts reading `input` (at `path`) ahead: by position where `layout` says its frames
    /// allow, else in order.
    fn start(
        &self,
        input: Box<dyn VideoReader>,
        layout: Option<FrameLayout>,
        path: &Path,
    ) -> Result<ReadAhead, Error> {
        let info = input.info();
        let pool = read_ahead::pinned_pool(
            self.device.as_ref(),
            info,
            self.workers,
            self.depth,
            self.readers,
        );
        let at = match layout {
            Some(l) => FrameReaderAt::open(path, l).map_err(reading(path))?,
            None => None,
        };
        let started = match at {
            Some(at) => ReadAhead::start_at(
                Arc::new(at),
                info,
                self.readers,
                self.depth,
                self.limit,
                pool,
            ),
            None => ReadAhead::start(input, self.depth, self.limit, pool),
        };
        started.map_err(|e| {
            Error::Library(crate::Error::NoMem(format!(
                "cannot start a reader thread for {}: {e}",
                path.display()
            )))
        })
    }
}

/// Worker threads for a context scoring on `states` (the GPU states it imports) that
/// [`Inputs::score`] feeds with `readers` threads per input (`None`: its default): the cores
/// the two inputs' readers leave, 2 to 16, and no more than the smallest device's memory allows
/// (as for pipeline threads). `None` without a GPU state (the CPU path keeps its own rule) or
/// when `VMAF_HIP_PIPELINE_THREADS` sets the number (the context's pipeline threads then
/// apply). On a 16-core H200 host the `vmaf` tool scored VMAF v1.0.16 1.27x faster with 8
/// workers beside its 8 readers than with 16, and v0.6.1 within 2% of it: the readers' copies
/// and the workers' host work and runtime calls compete for the same cores.
pub fn gpu_workers(readers: Option<usize>, states: &[Arc<crate::gpu::GpuState>]) -> Option<u32> {
    let mem = states.iter().map(|s| s.info().total_mem).min()?;
    if crate::settings::get().pipeline_threads.is_some() {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let readers = readers.unwrap_or_else(read_ahead::readers_per_input);
    let n = workers_beside_readers(cores, readers).min(crate::context::gpu_threads_by_memory(mem));
    Some(n as u32)
}

/// The `n_threads` of a context that [`Inputs::score`] feeds: `requested` when non-zero or
/// when `gpumask` turns the GPU off, else [`gpu_workers`] with the default readers (0, the
/// CPU's rule, without a GPU state). What the `vmaf` tool and the Python package's file
/// scoring both use.
pub fn fed_context_threads(
    requested: u32,
    gpumask: u64,
    states: &[Arc<crate::gpu::GpuState>],
) -> u32 {
    if requested != 0 || gpumask != 0 {
        return requested;
    }
    gpu_workers(None, states).unwrap_or(0)
}

/// [`gpu_workers`] for `cores` cores and `readers` readers per input.
fn workers_beside_readers(cores: usize, readers: usize) -> usize {
    cores.saturating_sub(2 * readers).clamp(2, 16)
}

/// The two pictures at one bit depth: the one of the lower depth shifted up to the other's
/// (samples shifted left by the difference), the other as it is.
pub fn common_depth(r: Picture, d: Picture) -> crate::Result<(Picture, Picture)> {
    Ok(if r.bpc < d.bpc {
        (shift_up(&r, d.bpc)?, d)
    } else if d.bpc < r.bpc {
        let d = shift_up(&d, r.bpc)?;
        (r, d)
    } else {
        (r, d)
    })
}

fn shift_up(p: &PictureData, bpc: u32) -> crate::Result<Picture> {
    let mut out = PictureData::new(p.pix_fmt, bpc, p.w[0], p.h[0])?;
    let shift = bpc - p.bpc;
    for i in 0..p.pix_fmt.plane_count() {
        let (w, h, src_stride, dst_stride) = (p.w[i], p.h[i], p.stride[i], out.stride[i]);
        let dst = out.plane_u16_mut(i);
        for y in 0..h {
            let row = &mut dst[y * dst_stride..][..w];
            match p.plane(i) {
                PlaneRef::U8(s) => {
                    for (o, &v) in row.iter_mut().zip(&s[y * src_stride..][..w]) {
                        *o = u16::from(v) << shift;
                    }
                }
                PlaneRef::U16(s) => {
                    for (o, &v) in row.iter_mut().zip(&s[y * src_stride..][..w]) {
                        *o = v << shift;
                    }
                }
            }
        }
    }
    Ok(Arc::new(out))
}

/// A model's score pooled over the frames (the mean, as libvmaf's tool prints it).
#[derive(Debug, Clone, PartialEq)]
pub enum Pooled {
    Model {
        label: String,
        score: f64,
    },
    /// A bootstrap collection's bagged score and spread.
    Collection {
        label: String,
        score: BootstrapScore,
    },
}

/// Pools every model's per-frame scores over frames `0..frames` (their mean), predicting them
/// first, which also stores them for the output writers: each model's score in `models`
/// order, then each collection's.
pub fn pool(ctx: &Context, models: &[LoadedModel], frames: usize) -> Result<Vec<Pooled>, Error> {
    let Some(last) = frames.checked_sub(1) else {
        return Err(Error::Library(crate::Error::inval("no frames were scored")));
    };
    let mut pooled = Vec::with_capacity(models.len());
    for l in models {
        let score = ctx
            .score_pooled(&l.model, PoolingMethod::Mean, 0, last)
            .map_err(Error::within(format_args!(
                "problem pooling model {}",
                l.label
            )))?;
        pooled.push(Pooled::Model {
            label: l.label.clone(),
            score,
        });
    }
    for l in models {
        let Some(c) = &l.collection else { continue };
        let score = ctx
            .score_pooled_model_collection(c, PoolingMethod::Mean, 0, last)
            .map_err(Error::within(format_args!(
                "problem pooling model collection {}",
                l.label
            )))?;
        pooled.push(Pooled::Collection {
            label: l.label.clone(),
            score,
        });
    }
    Ok(pooled)
}
