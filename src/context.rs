//! The scoring context (libvmaf's `VmafContext`): registers extractors, schedules frames (in order
//! on the caller's thread or in parallel on a worker pool), flushes, predicts and pools.

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::collector::FeatureCollector;
use crate::error::{Error, Result};
use crate::feature::{self, Dict, Extractor, ExtractorFlags, FrameInput, Scores};
use crate::gpu::job::Queued;
use crate::log::LogLevel;
use crate::model::{BootstrapScore, Model, ModelCollection, ModelFeature, ModelFlags};
use crate::output::OutputFormat;
use crate::picture::{Picture, PixelFormat};
use crate::pooling::{self, PoolingMethod};

mod frame_times;
#[cfg(test)]
mod gpu_tests;

pub use frame_times::{summary as frame_times_summary, ExtractorTimes};
use frame_times::{FrameSample, FrameTimes, Part};

/// libvmaf's `VmafConfiguration`, in Rust terms.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub log_level: LogLevel,
    /// 0 = extract synchronously on the caller's thread.
    pub n_threads: u32,
    /// Score every n-th frame only (0 or 1 = every frame).
    pub n_subsample: u32,
    /// CPU instruction sets to disable, upstream's bits (8 = AVX2, 16 = AVX-512, 1 = NEON on
    /// aarch64; 255 = scalar only). See [`crate::simd`].
    pub cpumask: u64,
    /// Non-zero disables the GPU.
    pub gpumask: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            log_level: LogLevel::Info,
            n_threads: 0,
            n_subsample: 1,
            cpumask: 0,
            gpumask: 0,
        }
    }
}

/// At most this many worker threads for a GPU context with `n_threads = 0`, which it starts so
/// the caller's thread only queues frames (several in flight) instead of waiting for each on
/// the GPU. FFmpeg's filter on an H100 host (16 cores) ran closer to decoding alone with 16
/// than with 4 (docs/benchmarks.md, "Pipeline threads").
const GPU_PIPELINE_THREADS: usize = 16;

/// GPU memory set aside per pipeline thread when choosing their number: each frame in flight
/// holds its own scratch buffers (about 140 MB at 2160p 8-bit on an H100).
const GPU_MEMORY_PER_PIPELINE_THREAD: usize = 512 << 20;

/// The pipeline threads of a GPU context with `n_threads = 0` whose first imported device has
/// `gpu_mem` bytes: `VMAF_HIP_PIPELINE_THREADS` (1 to 64) if set, else one per core, at least
/// 2 and at most [`GPU_PIPELINE_THREADS`] or one per [`GPU_MEMORY_PER_PIPELINE_THREAD`].
fn gpu_pipeline_threads(gpu_mem: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    pipeline_threads_from(crate::settings::get().pipeline_threads, cores, gpu_mem)
}

/// Worker threads `gpu_mem` bytes of device memory allow (at least 2; see
/// [`GPU_MEMORY_PER_PIPELINE_THREAD`]).
pub(crate) fn gpu_threads_by_memory(gpu_mem: usize) -> usize {
    (gpu_mem / GPU_MEMORY_PER_PIPELINE_THREAD).max(2)
}

fn pipeline_threads_from(setting: Option<usize>, cores: usize, gpu_mem: usize) -> usize {
    if let Some(n) = setting {
        return n;
    }
    let by_memory = gpu_mem / GPU_MEMORY_PER_PIPELINE_THREAD;
    cores.min(GPU_PIPELINE_THREADS).min(by_memory).max(2)
}

/// Pipeline threads shared by the GPU contexts with `n_threads = 0` on one device that are
/// alive at once: a program scoring several streams, a context each, gets one pool per GPU
/// instead of a pool per context that oversubscribes the host (three contexts of 16 threads
/// each on one H100 scored wrapped frames 25% slower than three of 4), and a second GPU still
/// gets threads of its own. It goes when the last of them closes.
struct SharedPipeline {
    pool: rayon::ThreadPool,
    ids: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    /// The states whose per-thread streams these threads may hold, forgotten when they go.
    states: Mutex<Vec<std::sync::Weak<crate::gpu::GpuState>>>,
}

impl SharedPipeline {
    /// The live shared pool of `state`'s device, or a new one sized for it.
    fn get(state: &crate::gpu::GpuState) -> Result<Arc<SharedPipeline>> {
        type Pools = std::collections::BTreeMap<usize, std::sync::Weak<SharedPipeline>>;
        static SHARED: Mutex<Pools> = Mutex::new(Pools::new());
        let mut pools = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|_, p| p.strong_count() > 0);
        let device = state.info().ordinal;
        if let Some(p) = pools.get(&device).and_then(std::sync::Weak::upgrade) {
            return Ok(p);
        }
        let gpu_mem = state.info().total_mem;
        let ids = Arc::default();
        let n = gpu_pipeline_threads(gpu_mem);
        let pool = start_workers(n, &ids)?;
        crate::log_debug!("n_threads 0 on a GPU: {n} pipeline threads, shared");
        let p = Arc::new(SharedPipeline {
            pool,
            ids,
            states: Mutex::default(),
        });
        pools.insert(device, Arc::downgrade(&p));
        Ok(p)
    }

    /// Notes that the pool's threads may take streams of `state`.
    fn serve(&self, state: &Arc<crate::gpu::GpuState>) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states.retain(|s| s.strong_count() > 0);
        if !states
            .iter()
            .any(|s| std::ptr::eq(s.as_ptr(), Arc::as_ptr(state)))
        {
            states.push(Arc::downgrade(state));
        }
    }
}

impl Drop for SharedPipeline {
    fn drop(&mut self) {
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let states = self.states.get_mut().unwrap_or_else(|e| e.into_inner());
        for state in states.iter().filter_map(std::sync::Weak::upgrade) {
            state.forget_threads(&ids);
        }
    }
}

/// A context's worker threads: its own (`n_threads`), or the shared pipeline threads.
enum Workers {
    Own(rayon::ThreadPool),
    Shared(Arc<SharedPipeline>),
}

impl Workers {
    fn pool(&self) -> &rayon::ThreadPool {
        match self {
            Workers::Own(p) => p,
            Workers::Shared(s) => &s.pool,
        }
    }
}

/// A pool of `n` worker threads whose ids go to `ids` (their GPU buffers are released by id).
fn start_workers(
    n: usize,
    ids: &Arc<Mutex<Vec<std::thread::ThreadId>>>,
) -> Result<rayon::ThreadPool> {
    let ids = ids.clone();
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("vmaf-worker-{i}"))
        .start_handler(move |_| {
            ids.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(std::thread::current().id())
        })
        .build()
        .map_err(|e| Error::NoMem(format!("cannot start {n} worker threads: {e}")))
}

/// Frames queued to the worker pool and the first error any of them hit.
#[derive(Default)]
struct InFlight {
    count: Mutex<(usize, Option<Error>)>,
    done: Condvar,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Option<Error>)> {
        self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until at most `max` jobs are in flight; returns the first recorded error.
    fn wait_below(&self, max: usize) -> Result<()> {
        let mut g = self.lock();
        while g.0 > max {
            g = self.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        match g.1.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn finish(&self, err: Option<Error>) {
        let mut g = self.lock();
        g.0 -= 1;
        if g.1.is_none() {
            g.1 = err;
        }
        self.done.notify_all();
    }
}

/// A frame handed to the worker threads: its pictures and the extractors to run.
struct Job {
    index: usize,
    reference: Picture,
    distorted: Picture,
    prev_ref: Option<Picture>,
    prev_prev_ref: Option<Picture>,
    prev_dist: Option<Picture>,
    extractors: Vec<Arc<dyn Extractor>>,
}

/// A context's frames waiting for a worker, oldest first.
///
/// Each frame is pushed with one task spawned on the pool, and a task runs the oldest frame
/// waiting, if any. With `VMAF_HIP_WORKER_FRAMES` above one, a worker whose frame has GPU work
/// queued takes the next waiting frame while the device computes, up to that many frames
/// (nested, so their pictures and queued work stay borrowed on its stack), and then finishes
/// them, the newest first: one wait on its stream covers the older frames' read-backs. A frame
/// is there to take only while no idle worker has taken its task yet (mostly: while every
/// worker is busy), and each frame a worker keeps queued holds its own scratch buffers on the
/// device. It was meant for paths bound by a frame's device latency, such as the `vmaf` tool on
/// VMAF v1.0.16 models, where each of 8 workers waited about 0.9 ms per 1080p frame; on an H200
/// it made them slower (docs/benchmarks.md), so the default keeps one.
struct Jobs {
    waiting: Mutex<std::collections::VecDeque<Job>>,
    collector: Arc<FeatureCollector>,
    times: Arc<FrameTimes>,
    in_flight: Arc<InFlight>,
    cpu: crate::simd::CpuLevel,
    /// Frames one worker keeps queued on the device at once (`VMAF_HIP_WORKER_FRAMES`).
    depth: usize,
}

impl Jobs {
    fn new(
        collector: &Arc<FeatureCollector>,
        times: &Arc<FrameTimes>,
        in_flight: &Arc<InFlight>,
        cpu: crate::simd::CpuLevel,
    ) -> Self {
        Jobs {
            waiting: Mutex::default(),
            collector: collector.clone(),
            times: times.clone(),
            in_flight: in_flight.clone(),
            cpu,
            depth: crate::settings::get()
                .worker_frames
                .unwrap_or(WORKER_FRAMES),
        }
    }

    fn push(&self, job: Job) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
    }

    /// Runs the oldest waiting frame, if any, taking up to `depth - 1` more while its device
    /// work runs.
    fn run_next(&self, depth: usize) {
        let next = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        if let Some(job) = next {
            self.run(job, depth);
        }
    }

    fn run(&self, job: Job, depth: usize) {
        let input = FrameInput {
            index: job.index,
            reference: &job.reference,
            distorted: &job.distorted,
            prev_ref: job.prev_ref.as_ref(),
            prev_prev_ref: job.prev_prev_ref.as_ref(),
            prev_dist: job.prev_dist.as_ref(),
            cpu: self.cpu,
        };
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_extractors(
                &job.extractors,
                &input,
                &self.collector,
                &self.times,
                &mut || {
                    if depth > 1 {
                        self.run_next(depth - 1);
                    }
                },
            )
        }));
        let mut err = match res {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(Error::inval("feature extractor panicked")),
        };
        // The pictures go back (to a pool, or to a wrapping caller's release callback) before
        // the frame counts as done: after the flush or `vmaf_close` no worker holds one. A
        // panic there must not skip `finish` (the flush would wait for this frame for ever),
        // nor unwind into the frame this one was nested in.
        let released = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(job)));
        if released.is_err() && err.is_none() {
            err = Some(Error::inval("releasing a frame's pictures panicked"));
        }
        self.in_flight.finish(err);
    }
}

/// First-picture parameters every later picture must match.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PicParams {
    w: usize,
    h: usize,
    pix_fmt: PixelFormat,
    bpc: u32,
}

/// A VMAF scoring session.
pub struct Context {
    cfg: Config,
    /// Instruction sets of the CPU code: detected, lowered by `cfg.cpumask`.
    cpu: crate::simd::CpuLevel,
    extractors: Vec<Arc<dyn Extractor>>,
    /// How each registered extractor was created, to rebuild it when a GPU state arrives.
    specs: Vec<(String, Dict)>,
    collector: Arc<FeatureCollector>,
    prev_ref: Option<Picture>,
    prev_prev_ref: Option<Picture>,
    prev_dist: Option<Picture>,
    params: Option<PicParams>,
    pic_cnt: usize,
    flushed: bool,
    pool: Option<Workers>,
    in_flight: Arc<InFlight>,
    /// Frames waiting for a worker thread.
    jobs: Arc<Jobs>,
    /// Imported GPU states (one per device); frames are spread over them.
    gpu: Option<crate::gpu::GpuSet>,
    /// The worker pool's threads, whose GPU buffers are released when the context drops.
    workers: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    /// Time `read_pictures` spent waiting for frames in flight (logged at the flush).
    feed_wait: std::time::Duration,
    /// Where the extracting threads' time went, per extractor.
    times: Arc<FrameTimes>,
    /// Stored feature names of model features, by name and options (see `stored_name`).
    stored_names: Mutex<std::collections::HashMap<String, String>>,
}

fn run_extractors(
    exts: &[Arc<dyn Extractor>],
    input: &FrameInput<'_>,
    collector: &FeatureCollector,
    times: &FrameTimes,
    meanwhile: &mut dyn FnMut(),
) -> Result<()> {
    // GPU work of every extractor is queued first; the CPU-only extractors run while it
    // computes. Then the queued ones are waited for, last queued first: their read-backs are
    // on one worker's stream, so the first wait covers the others and they cost no runtime
    // call (`Event::synchronize`). Scores go to the collector in registration order, which
    // fixes the output's column order.
    let mut sample = FrameSample::with_capacity(exts.len());
    let mut queued = Vec::with_capacity(exts.len());
    for e in exts {
        let t = Instant::now();
        match e.queue(input) {
            Ok(q) => {
                if q.is_some() {
                    sample.add(e.name(), Part::Queue, t.elapsed());
                }
                queued.push(q)
            }
            Err(err) => {
                drain(queued);
                return Err(err);
            }
        }
    }
    let mut results: Vec<Result<Scores>> = exts
        .iter()
        .zip(&queued)
        .map(|(e, q)| {
            let mut scores = Vec::new();
            if q.is_none() {
                let t = Instant::now();
                input
                    .fetch_host(e.host_planes())
                    .and_then(|()| e.extract(input, &mut scores))?;
                sample.add(e.name(), Part::Cpu, t.elapsed());
            }
            Ok(scores)
        })
        .collect();
    // The device works on this frame while the thread does something else (a worker queues
    // its next frame).
    if queued.iter().any(Option::is_some) {
        meanwhile();
    }
    for ((e, q), r) in exts.iter().zip(queued).zip(results.iter_mut()).rev() {
        if let Some(finish) = q {
            let t = Instant::now();
            *r = finish();
            sample.add(e.name(), Part::Finish, t.elapsed());
        }
    }
    for scores in results {
        for (name, v) in &scores? {
            collector.append(name, *v, input.index)?;
        }
    }
    times.add(sample);
    Ok(())
}

/// Waits for GPU work already queued for a frame that failed, so no upload or kernel still
/// reads its pictures when they go back to the caller's pool (their results are dropped).
fn drain<'a>(queued: impl IntoIterator<Item = Option<Queued<'a, Scores>>>) {
    for finish in queued.into_iter().flatten() {
        let _ = finish();
    }
}

impl Context {
    /// Creates a context (`vmaf_init`).
    pub fn new(cfg: Config) -> Result<Self> {
        crate::log::set_level(cfg.log_level);
        if cfg.n_threads as usize > crate::limits::MAX_THREADS {
            return Err(Error::inval(format!(
                "n_threads {} exceeds the limit of {}",
                cfg.n_threads,
                crate::limits::MAX_THREADS
            )));
        }
        let workers: Arc<Mutex<Vec<std::thread::ThreadId>>> = Arc::default();
        let pool = match cfg.n_threads {
            0 => None,
            n => Some(Workers::Own(start_workers(n as usize, &workers)?)),
        };
        let cpu = crate::simd::CpuLevel::for_cpumask(cfg.cpumask);
        let in_flight = Arc::new(InFlight::default());
        let collector = Arc::new(FeatureCollector::new());
        let times: Arc<FrameTimes> = Arc::default();
        let jobs = Arc::new(Jobs::new(&collector, &times, &in_flight, cpu));
        crate::log_debug!(
            "CPU code: {cpu} (best on this CPU: {}, cpumask {:#x})",
            crate::simd::CpuLevel::detect(),
            cfg.cpumask
        );
        Ok(Context {
            cfg,
            cpu,
            extractors: Vec::new(),
            specs: Vec::new(),
            collector,
            prev_ref: None,
            prev_prev_ref: None,
            prev_dist: None,
            params: None,
            pic_cnt: 0,
            flushed: false,
            jobs,
            pool,
            in_flight,
            gpu: None,
            workers,
            feed_wait: std::time::Duration::ZERO,
            times,
            stored_names: Mutex::default(),
        })
    }

    /// Whether this context's frames run on the same threads as `other`'s (shared pipeline
    /// threads), for tests.
    #[cfg(test)]
    pub(crate) fn shares_workers_with(&self, other: &Context) -> bool {
        match (&self.pool, &other.pool) {
            (Some(a), Some(b)) => std::ptr::eq(a.pool(), b.pool()),
            _ => false,
        }
    }

    /// Worker threads scoring frames: `n_threads`, or the pipeline threads a GPU context
    /// starts when `n_threads` is 0; 0 for a synchronous context.
    pub fn worker_count(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(0, |p| p.pool().current_num_threads())
    }

    /// Where the extracting threads' time went so far, summed per extractor (what bounds the
    /// frame rate: host copies and launches, CPU extraction, or waiting for the device).
    pub fn frame_times(&self) -> Vec<ExtractorTimes> {
        self.times.snapshot()
    }

    /// How long `read_pictures` has waited for frames in flight to finish.
    pub fn feed_wait(&self) -> std::time::Duration {
        self.feed_wait
    }

    /// The instruction-set level of this context's CPU code.
    pub fn cpu_level(&self) -> crate::simd::CpuLevel {
        self.cpu
    }

    /// The configuration this context was created with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The feature collector (all scores so far).
    pub fn collector(&self) -> &FeatureCollector {
        &self.collector
    }

    /// Number of picture pairs submitted.
    pub fn picture_count(&self) -> usize {
        self.pic_cnt
    }

    /// Whether the end-of-stream flush has happened.
    pub fn is_flushed(&self) -> bool {
        self.flushed
    }

    /// The imported GPU states, if any.
    pub fn gpu_set(&self) -> Option<&crate::gpu::GpuSet> {
        self.gpu.as_ref()
    }

    /// Hands a GPU state to this context (`vmaf_hip_import_state`): extractors use their GPU
    /// version where one exists. Importing states of several devices spreads the frames over
    /// them (runs of [`crate::gpu::SPREAD_RUN`] frames on each state in turn). Ignored when `gpumask` is non-zero.
    pub fn import_gpu_state(&mut self, state: Arc<crate::gpu::GpuState>) -> Result<()> {
        if self.cfg.gpumask != 0 {
            crate::log_info!("gpumask set: GPU state not used");
            return Ok(());
        }
        self.check_can_register()?;
        let mut states = self
            .gpu
            .as_ref()
            .map(|s| s.states().to_vec())
            .unwrap_or_default();
        // Importing a state twice changes nothing; another state adds a device.
        if !states.iter().any(|s| Arc::ptr_eq(s, &state)) {
            states.push(state);
        }
        self.gpu = crate::gpu::GpuSet::new(states);
        if self.pool.is_none() && self.gpu.is_some() {
            // A synchronous GPU context would wait for every frame's kernels before taking the
            // next one: pipeline frames on threads shared with the other such contexts instead.
            // The first imported state picks the pool (a context spreading frames over several
            // devices shares the first one's).
            if let Some(first) = self.gpu_states().first().cloned() {
                match SharedPipeline::get(&first) {
                    Ok(shared) => self.pool = Some(Workers::Shared(shared)),
                    // Still correct without them, only slower.
                    Err(e) => crate::log_warn!("GPU frames not pipelined: {e}"),
                }
            }
        }
        if let (Some(Workers::Shared(shared)), Some(gpu)) = (&self.pool, &self.gpu) {
            for state in gpu.states() {
                shared.serve(state);
            }
        }
        // Extractors registered before the import move to the GPU too.
        let mut rebuilt = Vec::with_capacity(self.specs.len());
        for (name, opts) in &self.specs {
            rebuilt.push(Arc::from(feature::create_on(
                name,
                opts,
                self.gpu.as_ref(),
            )?));
        }
        self.extractors = rebuilt;
        Ok(())
    }

    /// The planes ([`crate::picture::LUMA`] and the chroma bits) the registered extractors
    /// read, on the host or on a GPU.
    pub fn planes_read(&self) -> u8 {
        self.extractors.iter().fold(0, |m, e| m | e.planes_read())
    }

    /// Whether an extractor of this context reads chroma: a semi-planar frame in GPU memory
    /// then has its chroma unpacked (see [`Self::planes_read`]).
    pub fn reads_chroma(&self) -> bool {
        self.planes_read() & !crate::picture::LUMA != 0
    }

    /// The imported GPU states, if any.
    pub fn gpu_states(&self) -> &[Arc<crate::gpu::GpuState>] {
        self.gpu.as_ref().map_or(&[], |s| s.states())
    }

    /// Creates extractor `name` and adds it unless an equivalent one is registered already.
    fn register(&mut self, name: &str, opts: &Dict) -> Result<()> {
        let ext = feature::create_on(name, opts, self.gpu.as_ref())?;
        let key = ext.dedup_key();
        if self.extractors.iter().any(|e| e.dedup_key() == key) {
            return Ok(());
        }
        self.extractors.push(Arc::from(ext));
        self.specs.push((name.to_string(), opts.clone()));
        Ok(())
    }

    fn check_can_register(&self) -> Result<()> {
        if self.pic_cnt > 0 || self.flushed {
            return Err(Error::inval(
                "features must be registered before the first picture",
            ));
        }
        Ok(())
    }

    /// Registers the extractors `model` needs.
    pub fn use_features_from_model(&mut self, model: &Model) -> Result<()> {
        self.check_can_register()?;
        let mut new = Vec::new();
        for f in &model.features {
            let name = feature::extractor_for_feature(&f.name)
                .ok_or_else(|| Error::inval(format!("no feature extractor provides {}", f.name)))?;
            // Validate every feature's options before registering any.
            feature::create(name, &f.opts)?;
            new.push((name, &f.opts));
        }
        for (name, opts) in new {
            self.register(name, opts)?;
        }
        Ok(())
    }

    /// Registers the extractors every model of `mc` needs.
    pub fn use_features_from_model_collection(&mut self, mc: &ModelCollection) -> Result<()> {
        for m in &mc.models {
            self.use_features_from_model(m)?;
        }
        Ok(())
    }

    /// Registers extractor `name` with `opts` (`vmaf_use_feature`).
    pub fn use_feature(&mut self, name: &str, opts: &Dict) -> Result<()> {
        self.check_can_register()?;
        self.register(name, opts)
    }

    /// Stores an externally computed score.
    pub fn import_feature_score(&self, name: &str, value: f64, index: usize) -> Result<()> {
        self.collector.append(name, value, index)
    }

    fn validate(&mut self, r: &Picture, d: &Picture) -> Result<()> {
        let p = PicParams {
            w: r.w[0],
            h: r.h[0],
            pix_fmt: r.pix_fmt,
            bpc: r.bpc,
        };
        if d.w[0] != r.w[0] || d.h[0] != r.h[0] || d.pix_fmt != r.pix_fmt || d.bpc != r.bpc {
            return Err(Error::inval(format!(
                "reference {}x{} {:?} {}-bit and distorted {}x{} {:?} {}-bit pictures differ",
                r.w[0], r.h[0], r.pix_fmt, r.bpc, d.w[0], d.h[0], d.pix_fmt, d.bpc
            )));
        }
        match self.params {
            None => self.params = Some(p),
            Some(first) if first != p => {
                return Err(Error::inval(format!(
                    "picture {}x{} {:?} {}-bit differs from the first one ({}x{} {:?} {}-bit)",
                    p.w, p.h, p.pix_fmt, p.bpc, first.w, first.h, first.pix_fmt, first.bpc
                )))
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// What the next frames keep of this frame's reference: nothing when no extractor looks
    /// back, else the picture itself. A pooled picture is kept as it is too (no copy on the
    /// feeding thread): pools lend up to two pictures beyond their size for exactly these
    /// (see `ffi::pool`), so a pool of two still serves a caller with no worker threads.
    fn keep_as_prev_ref(&self, reference: Picture) -> Option<Picture> {
        self.keeps(ExtractorFlags::PREV_REF).then_some(reference)
    }

    /// Whether an extractor asks for the previous pictures `flag` names.
    fn keeps(&self, flag: ExtractorFlags) -> bool {
        self.extractors.iter().any(|e| e.flags().contains(flag))
    }

    /// Submits one reference/distorted pair (`vmaf_read_pictures`).
    pub fn read_pictures(
        &mut self,
        reference: Picture,
        distorted: Picture,
        index: usize,
    ) -> Result<()> {
        if self.flushed {
            return Err(Error::inval("context already flushed"));
        }
        if index >= crate::limits::MAX_FRAMES {
            return Err(Error::inval(format!(
                "frame index {index} is not below the limit of {}",
                crate::limits::MAX_FRAMES
            )));
        }
        self.validate(&reference, &distorted)?;
        // Device pictures: the caller's writes so far come before any read of ours.
        for p in [&reference, &distorted] {
            if let Some(d) = p.device_samples() {
                d.mark_written()?;
            }
        }
        self.pic_cnt += 1;
        let sub = self.cfg.n_subsample.max(1) as usize;
        let skip_plain = sub > 1 && !index.is_multiple_of(sub);
        let wanted = |e: &Arc<dyn Extractor>| {
            !skip_plain
                || e.flags()
                    .intersects(ExtractorFlags::TEMPORAL | ExtractorFlags::PREV_REF)
        };

        match &self.pool {
            None => {
                let exts: Vec<_> = self
                    .extractors
                    .iter()
                    .filter(|e| wanted(e))
                    .cloned()
                    .collect();
                let input = FrameInput {
                    index,
                    reference: &reference,
                    distorted: &distorted,
                    prev_ref: self.prev_ref.as_ref(),
                    prev_prev_ref: self.prev_prev_ref.as_ref(),
                    prev_dist: self.prev_dist.as_ref(),
                    cpu: self.cpu,
                };
                run_extractors(&exts, &input, &self.collector, &self.times, &mut || {})?;
            }
            Some(workers) => {
                let pool = workers.pool();
                // Temporal extractors run here, in order; the rest go to a worker.
                let (temporal, parallel): (Vec<_>, Vec<_>) = self
                    .extractors
                    .iter()
                    .filter(|e| wanted(e))
                    .cloned()
                    .partition(|e| e.flags().contains(ExtractorFlags::TEMPORAL));
                let input = FrameInput {
                    index,
                    reference: &reference,
                    distorted: &distorted,
                    prev_ref: self.prev_ref.as_ref(),
                    prev_prev_ref: self.prev_prev_ref.as_ref(),
                    prev_dist: self.prev_dist.as_ref(),
                    cpu: self.cpu,
                };
                run_extractors(&temporal, &input, &self.collector, &self.times, &mut || {})?;
                if !parallel.is_empty() {
                    // Bound the queue so pictures do not pile up in memory.
                    let bound = crate::settings::get().frames_in_flight.unwrap_or_else(|| {
                        in_flight_bound(
                            pool.current_num_threads(),
                            &parallel,
                            reference.owned_host_bytes() + distorted.owned_host_bytes(),
                        )
                    });
                    let t = std::time::Instant::now();
                    self.in_flight.wait_below(bound)?;
                    self.feed_wait += t.elapsed();
                    self.in_flight.lock().0 += 1;
                    self.jobs.push(Job {
                        index,
                        reference: reference.clone(),
                        distorted: distorted.clone(),
                        prev_ref: self.prev_ref.clone(),
                        prev_prev_ref: self.prev_prev_ref.clone(),
                        prev_dist: self.prev_dist.clone(),
                        extractors: parallel,
                    });
                    let jobs = self.jobs.clone();
                    pool.spawn(move || jobs.run_next(jobs.depth));
                }
            }
        }
        self.prev_prev_ref = self.prev_ref.take();
        self.prev_ref = self.keep_as_prev_ref(reference);
        self.prev_dist = self.keeps(ExtractorFlags::PREV_DIST).then_some(distorted);
        Ok(())
    }

    /// End of stream (`vmaf_read_pictures(NULL, NULL)`): waits for queued frames, then lets
    /// extractors finish their scores.
    pub fn flush(&mut self) -> Result<()> {
        if self.flushed {
            return Err(Error::inval("context already flushed"));
        }
        self.flushed = true;
        let t = std::time::Instant::now();
        self.in_flight.wait_below(0)?;
        crate::log_debug!(
            "{} frames fed; the feeding thread waited {:.1} ms for frames in flight and {:.1} ms \
             at the flush ({} worker threads)",
            self.pic_cnt,
            self.feed_wait.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3,
            self.worker_count()
        );
        crate::log_debug!(
            "per frame, µs queueing/on the CPU/finishing: {}",
            frame_times::summary(&self.times.snapshot())
        );
        self.prev_ref = None;
        self.prev_prev_ref = None;
        self.prev_dist = None;
        if self.pic_cnt == 0 {
            return Err(Error::inval("flush with no pictures read"));
        }
        for e in &self.extractors {
            e.flush(&self.collector)?;
        }
        Ok(())
    }

    fn feature_value(&self, f: &ModelFeature, index: usize) -> Result<f64> {
        let stored = self.stored_name(f)?;
        self.collector
            .get(&stored, index)
            .ok_or_else(|| Error::inval(format!("no score for feature {stored} at index {index}")))
    }

    /// [`stored_name_of`], remembered per feature name and options.
    fn stored_name(&self, f: &ModelFeature) -> Result<String> {
        let key = format!("{}{:?}", f.name, f.opts);
        let mut names = self.stored_names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = names.get(&key) {
            return Ok(n.clone());
        }
        let n = stored_name_of(f)?;
        names.insert(key, n.clone());
        Ok(n)
    }

    /// The model score of frame `index`, predicting and storing it if needed.
    pub fn score_at_index(&self, model: &Model, index: usize) -> Result<f64> {
        if let Some(v) = self.collector.get(&model.name, index) {
            return Ok(v);
        }
        let mut values = Vec::with_capacity(model.features.len());
        for f in &model.features {
            values.push(self.feature_value(f, index)?);
        }
        let v = model.predict(&values, ModelFlags::empty())?;
        self.collector.append(&model.name, v, index)?;
        Ok(v)
    }

    /// Bootstrap score of frame `index` for a collection; stores each member's score and the
    /// `_bagging`, `_stddev`, `_ci_p95_lo`, `_ci_p95_hi` values.
    pub fn score_at_index_model_collection(
        &self,
        mc: &ModelCollection,
        index: usize,
    ) -> Result<BootstrapScore> {
        let names = [
            format!("{}_bagging", mc.name),
            format!("{}_stddev", mc.name),
            format!("{}_ci_p95_lo", mc.name),
            format!("{}_ci_p95_hi", mc.name),
        ];
        let cached: Vec<_> = names.iter().map(|n| self.collector.get(n, index)).collect();
        if let [Some(b), Some(s), Some(lo), Some(hi)] = cached[..] {
            return Ok(BootstrapScore {
                bagging_score: b,
                stddev: s,
                ci_p95_lo: lo,
                ci_p95_hi: hi,
            });
        }
        let mut values = Vec::with_capacity(mc.models.len());
        for m in &mc.models {
            let mut v = Vec::with_capacity(m.features.len());
            for f in &m.features {
                v.push(self.feature_value(f, index)?);
            }
            values.push(v);
        }
        let (members, score) = mc.predict(&values)?;
        for (m, v) in mc.models.iter().zip(members) {
            if self.collector.get(&m.name, index).is_none() {
                self.collector.append(&m.name, v, index)?;
            }
        }
        let vals = [
            score.bagging_score,
            score.stddev,
            score.ci_p95_lo,
            score.ci_p95_hi,
        ];
        for (n, v) in names.iter().zip(vals) {
            if self.collector.get(n, index).is_none() {
                self.collector.append(n, v, index)?;
            }
        }
        Ok(score)
    }

    /// Score of feature `name` (stored name) at `index`.
    pub fn feature_score_at_index(&self, name: &str, index: usize) -> Result<f64> {
        self.collector
            .get(name, index)
            .ok_or_else(|| Error::inval(format!("no score for feature {name} at index {index}")))
    }

    fn visited(&self, lo: usize, hi: usize) -> impl Iterator<Item = usize> {
        let sub = self.cfg.n_subsample.max(1) as usize;
        (lo..=hi).filter(move |i| sub <= 1 || i.is_multiple_of(sub))
    }

    /// Pools a model's scores over `lo..=hi`, predicting missing frames first.
    pub fn score_pooled(
        &self,
        model: &Model,
        method: PoolingMethod,
        lo: usize,
        hi: usize,
    ) -> Result<f64> {
        if lo > hi {
            return Err(Error::inval("pooling range is empty"));
        }
        for i in self.visited(lo, hi) {
            self.score_at_index(model, i)?;
        }
        self.feature_score_pooled(&model.name, method, lo, hi)
    }

    /// Pools a collection's bootstrap scores over `lo..=hi`.
    pub fn score_pooled_model_collection(
        &self,
        mc: &ModelCollection,
        method: PoolingMethod,
        lo: usize,
        hi: usize,
    ) -> Result<BootstrapScore> {
        if lo > hi {
            return Err(Error::inval("pooling range is empty"));
        }
        for i in self.visited(lo, hi) {
            self.score_at_index_model_collection(mc, i)?;
        }
        let p = |suffix: &str| {
            self.feature_score_pooled(&format!("{}_{suffix}", mc.name), method, lo, hi)
        };
        Ok(BootstrapScore {
            bagging_score: p("bagging")?,
            stddev: p("stddev")?,
            ci_p95_lo: p("ci_p95_lo")?,
            ci_p95_hi: p("ci_p95_hi")?,
        })
    }

    /// Pools stored feature `name` over `lo..=hi`.
    pub fn feature_score_pooled(
        &self,
        name: &str,
        method: PoolingMethod,
        lo: usize,
        hi: usize,
    ) -> Result<f64> {
        let v = self
            .collector
            .vector(name)
            .ok_or_else(|| Error::inval(format!("no such feature: {name}")))?;
        pooling::pool(&v, method, lo, hi, self.cfg.n_subsample)
    }

    /// Writes every score in `fmt` to `path` (`vmaf_write_output`).
    /// Like the CLI's `-o`, the file appears only complete: it is written beside `path` and
    /// renamed over it on success (an existing file is untouched on failure).
    pub fn write_output(&self, path: &Path, fmt: OutputFormat) -> Result<()> {
        crate::output::write_atomic(path, |w| self.write_output_to(w, fmt))
    }

    /// Writes every score in `fmt` to `w`.
    pub fn write_output_to(&self, w: &mut dyn std::io::Write, fmt: OutputFormat) -> Result<()> {
        let (width, height) = self.params.map(|p| (p.w, p.h)).unwrap_or((0, 0));
        let secs = self.collector.elapsed_secs();
        let fps = self.pic_cnt as f64 / secs;
        let data = crate::output::OutputData {
            version: crate::VMAF_VERSION,
            fps,
            width,
            height,
            pic_cnt: self.pic_cnt,
            n_subsample: self.cfg.n_subsample,
            vectors: self.collector.snapshot(),
            aggregate: self.extractors.iter().flat_map(|e| e.aggregate()).collect(),
        };
        crate::output::write(fmt, w, &data)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Queued frames hold references to the collector; let them finish before teardown.
        let _ = self.in_flight.wait_below(0);
        if let Some(gpu) = &self.gpu {
            let ids = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            for state in gpu.states() {
                state.forget_threads(&ids);
            }
        }
    }
}

/// The stored name of model feature `f` with its options (e.g. `integer_adm2_egl_1`), which
/// only its extractor knows: built once to ask, never per frame.
fn stored_name_of(f: &ModelFeature) -> Result<String> {
    let ext = feature::extractor_for_feature(&f.name)
        .ok_or_else(|| Error::inval(format!("no feature extractor provides {}", f.name)))?;
    Ok(feature::create(ext, &f.opts)?.feature_name(&f.name))
}

/// Frames whose own host buffers hold this many bytes at most are queued at once when every
/// extractor runs on a GPU: the GPU needs only a few frames in flight, and a buffer the library
/// recycles comes back to the feeding thread while still in cache (at 2160p, 8 frames in flight
/// made a caller's copy into a recycled picture 35% slower than into one released just before).
const GPU_HOST_BYTES_IN_FLIGHT: usize = 64 << 20;
/// Frames one worker thread keeps queued on the device at once (see [`Jobs`]): one; two made
/// VMAF v1 slower on an H200 (docs/benchmarks.md).
const WORKER_FRAMES: usize = 1;
/// Frames in flight a GPU context keeps however large its pictures.
const GPU_MIN_IN_FLIGHT: usize = 3;

/// How many frames may be queued on `threads` workers: two per worker, or fewer when every
/// extractor runs on a GPU and a frame's pictures hold `owned_bytes` of library-owned host
/// memory.
fn in_flight_bound(threads: usize, parallel: &[Arc<dyn Extractor>], owned_bytes: usize) -> usize {
    let bound = 2 * threads;
    if owned_bytes == 0 || !parallel.iter().all(|e| e.on_gpu()) {
        return bound;
    }
    bound.min((GPU_HOST_BYTES_IN_FLIGHT / owned_bytes).max(GPU_MIN_IN_FLIGHT))
}

#[cfg(test)]
mod tests {
    use super::{
        frame_times, in_flight_bound, pipeline_threads_from, Arc, Config, Context, Extractor,
        LogLevel,
    };
    use crate::error::Result;
    use crate::feature::{FrameInput, Scores};

    /// An extractor that says whether it runs on a GPU and does nothing.
    struct Placed(bool);

    impl Extractor for Placed {
        fn name(&self) -> &'static str {
            "placed"
        }

        fn on_gpu(&self) -> bool {
            self.0
        }

        fn extract(&self, _: &FrameInput<'_>, _: &mut Scores) -> Result<()> {
            Ok(())
        }
    }

    /// A picture whose release panics (a caller's release hook, an owner's drop) fails the
    /// flush with an error instead of leaving it waiting for that frame for ever.
    #[test]
    fn a_panic_releasing_a_frame_fails_the_flush() {
        struct Calm(Vec<u8>);
        struct Panics(Calm);
        impl crate::picture::ExternalPlanes for Calm {
            fn plane_u8(&self, _: usize) -> &[u8] {
                &self.0
            }
            fn plane_u16(&self, _: usize) -> &[u16] {
                &[]
            }
        }
        impl crate::picture::ExternalPlanes for Panics {
            fn plane_u8(&self, i: usize) -> &[u8] {
                self.0.plane_u8(i)
            }
            fn plane_u16(&self, i: usize) -> &[u16] {
                self.0.plane_u16(i)
            }
        }
        impl Drop for Panics {
            fn drop(&mut self) {
                panic!("a release hook panicked");
            }
        }
        let (w, h) = (64, 48);
        let pic = |planes: Box<dyn crate::picture::ExternalPlanes>| {
            let p = crate::picture::PictureData::external(
                crate::picture::PixelFormat::Yuv420p,
                8,
                w,
                h,
                [w, w / 2, w / 2],
                planes,
            );
            Arc::new(p.unwrap())
        };
        let mut ctx = Context::new(Config {
            n_threads: 2,
            ..Config::default()
        })
        .unwrap();
        ctx.use_feature("float_psnr", &crate::feature::Dict::new())
            .unwrap();
        let r = pic(Box::new(Calm(vec![128u8; w * h])));
        let d = pic(Box::new(Panics(Calm(vec![120u8; w * h]))));
        ctx.read_pictures(r, d, 0).unwrap();
        let err = ctx.flush().unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
    }

    #[test]
    fn gpu_frames_in_flight_are_bounded_by_their_own_host_bytes() {
        const MIB: usize = 1 << 20;
        let gpu: Vec<Arc<dyn Extractor>> = vec![Arc::new(Placed(true)), Arc::new(Placed(true))];
        let mixed: Vec<Arc<dyn Extractor>> = vec![Arc::new(Placed(true)), Arc::new(Placed(false))];
        // 1080p 8-bit 4:2:0 pairs (6.2 MB): ten frames, so four pipeline threads keep their 8.
        let p1080 = 2 * 1920 * 1080 * 3 / 2;
        assert_eq!(in_flight_bound(4, &gpu, p1080), 8);
        assert_eq!(in_flight_bound(16, &gpu, p1080), 10);
        // 2160p 8-bit pairs (24.9 MB), 10-bit (49.8 MB): the floor of three.
        assert_eq!(in_flight_bound(4, &gpu, 4 * p1080), 3);
        assert_eq!(in_flight_bound(16, &gpu, 8 * p1080), 3);
        assert_eq!(
            in_flight_bound(1, &gpu, 64 * MIB),
            2,
            "never above two per worker"
        );
        // Pictures in caller or device memory, CPU work, or no work: two per worker.
        assert_eq!(in_flight_bound(16, &gpu, 0), 32);
        assert_eq!(in_flight_bound(16, &mixed, 4 * p1080), 32);
    }

    /// Every extractor that ran has a row with one frame per frame scored, on the threads'
    /// clocks: CPU extractors count CPU time, none queue or finish (nothing ran on a device),
    /// and the rows are the same at 0 and 2 worker threads.
    #[test]
    fn frame_times_count_every_frame_of_every_extractor() {
        let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
        for threads in [0, 2] {
            let mut ctx = Context::new(Config {
                n_threads: threads,
                log_level: LogLevel::Error,
                ..Config::default()
            })
            .unwrap();
            crate::testutil::use_features(&mut ctx, &[("psnr", ""), ("float_ssim", "")]).unwrap();
            for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
                ctx.read_pictures(r.clone(), d.clone(), i).unwrap();
            }
            ctx.flush().unwrap();
            let times = ctx.frame_times();
            let mut names: Vec<_> = times.iter().map(|t| t.name).collect();
            names.sort_unstable();
            assert_eq!(names, ["float_ssim", "psnr"], "{threads} threads");
            for t in &times {
                assert_eq!(t.frames, refs.len() as u64, "{}", t.name);
                assert!(t.cpu > std::time::Duration::ZERO, "{}", t.name);
                assert_eq!(t.queue + t.finish, std::time::Duration::ZERO, "{}", t.name);
            }
            let line = frame_times::summary(&times);
            assert!(
                line.contains("psnr ") && line.contains("float_ssim "),
                "{line}"
            );
        }
    }

    #[test]
    fn pipeline_threads_follow_the_setting_or_the_cores() {
        const GIB: usize = 1 << 30;
        let big = 80 * GIB;
        assert_eq!(pipeline_threads_from(None, 1, big), 2);
        assert_eq!(pipeline_threads_from(None, 3, big), 3);
        assert_eq!(pipeline_threads_from(None, 16, big), 16);
        assert_eq!(pipeline_threads_from(None, 128, big), 16);
        // Small GPUs: one thread per 512 MB, still at least 2.
        assert_eq!(pipeline_threads_from(None, 16, 4 * GIB), 8);
        assert_eq!(pipeline_threads_from(None, 16, GIB / 2), 2);
        assert_eq!(pipeline_threads_from(None, 16, 0), 2);
        // The setting wins.
        assert_eq!(pipeline_threads_from(Some(16), 2, GIB), 16);
        assert_eq!(pipeline_threads_from(Some(1), 64, big), 1);
    }
}
