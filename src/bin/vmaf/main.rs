//! `vmaf`: command-line scorer compatible with libvmaf's `vmaf` tool (same flags, same flow, same
//! output files), plus a score summary on stdout, a progress bar and a `--backend` switch.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use vmaf_hip::context::{Config, Context};
use vmaf_hip::feature::Dict;
use vmaf_hip::gpu::DeviceChoice;
use vmaf_hip::io::{self, VideoInfo};
use vmaf_hip::log::LogLevel;
use vmaf_hip::model::{LoadError, LoadedModel, ModelSpec};
use vmaf_hip::output::OutputFormat;
use vmaf_hip::picture::pool::PicturePool;
use vmaf_hip::picture::{Picture, PictureData, PixelFormat};
use vmaf_hip::pooling::PoolingMethod;
use vmaf_hip::Error;

#[path = "vmaf/ctc.rs"]
mod ctc;

/// One `--feature` argument.
#[derive(Debug, Clone)]
struct FeatureArg {
    name: String,
    opts: Dict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Cpu,
    Hip,
}

#[derive(Debug, Parser)]
#[command(
    name = "vmaf",
    about = "Compute VMAF and other quality metrics of a distorted video against its reference.",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Cli {
    /// Reference video (.y4m, or raw .yuv with -w/-h/-p/-b)
    #[arg(short = 'r', long = "reference", value_name = "PATH")]
    reference: Option<PathBuf>,
    /// Distorted video (.y4m, or raw .yuv with -w/-h/-p/-b)
    #[arg(short = 'd', long = "distorted", value_name = "PATH")]
    distorted: Option<PathBuf>,
    /// Raw input width
    #[arg(short = 'w', long = "width", value_parser = parse_u32)]
    width: Option<u32>,
    /// Raw input height
    #[arg(short = 'h', long = "height", value_parser = parse_u32)]
    height: Option<u32>,
    /// Raw input pixel format: 420, 422, 444 or 400
    #[arg(short = 'p', long = "pixel_format", alias = "pixel-format", value_parser = parse_pix_fmt)]
    pixel_format: Option<PixelFormat>,
    /// Raw input bit depth: 8, 10, 12 or 16
    #[arg(short = 'b', long = "bitdepth", value_parser = parse_bitdepth)]
    bitdepth: Option<u32>,
    /// Model, colon-separated: path=FILE | version=NAME, name=NAME, disable_clip,
    /// enable_transform, <extractor>.<option>=VALUE (repeatable)
    #[arg(short = 'm', long = "model", value_name = "PARAMS", value_parser = parse_model)]
    model: Vec<ModelSpec>,
    /// Extra feature extractor: NAME[=key=value:key=value...] (repeatable)
    #[arg(long = "feature", value_name = "NAME[=OPTS]", value_parser = parse_feature)]
    feature: Vec<FeatureArg>,
    /// AOM common test conditions preset (v1.0 ... v7.0): models vmaf_v0.6.1 (`vmaf`) and
    /// vmaf_v0.6.1neg (`vmaf_neg`), features psnr, ciede, float_ssim, float_ms_ssim, psnr_hvs,
    /// from v3.0 cambi; from v6.0 the inputs may differ in bit depth; v7.0 scores float_ssim
    /// at full scale. Added where it stands among -m/--feature (repeatable)
    #[arg(long = "aom_ctc", alias = "aom-ctc", value_name = "VERSION", value_parser = ctc::parse_aom_ctc)]
    aom_ctc: Vec<ctc::Preset>,
    /// Netflix common test conditions preset (v1.0): models vmaf_4k_v0.6.1 (`vmaf`) and
    /// vmaf_4k_v0.6.1neg (`vmaf_neg`), features psnr (with chroma), float_ssim, cambi
    #[arg(long = "nflx_ctc", alias = "nflx-ctc", value_name = "VERSION", value_parser = ctc::parse_nflx_ctc)]
    nflx_ctc: Vec<ctc::Preset>,
    /// Set by an --aom_ctc preset of v6.0 or later: reference and distorted may differ in bit
    /// depth; the lower one is shifted up to the higher.
    #[arg(skip)]
    common_bitdepth: bool,
    /// Output file
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: Option<PathBuf>,
    /// Write the output file as XML (default)
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    xml: bool,
    /// Write the output file as JSON
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    json: bool,
    /// Write the output file as CSV
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    csv: bool,
    /// Write the output file as subtitles
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    sub: bool,
    /// Worker threads (0 = extract on the reading thread)
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_threads)]
    threads: u32,
    /// Score only every N-th frame
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_u32)]
    subsample: u32,
    /// CPU instruction sets to disable: 8 = AVX2, 16 = AVX-512, 1 = NEON, 255 = scalar only
    #[arg(long, value_name = "MASK", default_value = "0", value_parser = parse_u64)]
    cpumask: u64,
    /// GPU operations to disable
    #[arg(long, value_name = "MASK", default_value = "0", value_parser = parse_u64)]
    gpumask: u64,
    /// Stop after N frames (0 = all)
    #[arg(long = "frame_cnt", alias = "frame-cnt", value_name = "N", default_value = "0", value_parser = parse_u32)]
    frame_cnt: u32,
    /// Skip the first N reference frames
    #[arg(long = "frame_skip_ref", alias = "frame-skip-ref", value_name = "N", default_value = "0", value_parser = parse_u32)]
    frame_skip_ref: u32,
    /// Skip the first N distorted frames
    #[arg(long = "frame_skip_dist", alias = "frame-skip-dist", value_name = "N", default_value = "0", value_parser = parse_u32)]
    frame_skip_dist: u32,
    /// No models: extract the --feature features only
    #[arg(short = 'n', long = "no_prediction", alias = "no-prediction")]
    no_prediction: bool,
    /// No progress bar
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Print the libvmaf version and exit
    #[arg(short = 'v', long)]
    version: bool,
    /// Where features are extracted
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// GPU for --backend hip: an index, or `all`
    #[arg(long = "hip-device", value_name = "N|all", value_parser = parse_hip_device)]
    hip_device: Option<DeviceChoice>,
    /// Print help
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
}

/// `strtoul(s, 0)`-style unsigned: decimal, `0x` hex or leading-`0` octal.
fn parse_uint(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    u64::from_str_radix(digits, radix).map_err(|_| "should be an unsigned integer".to_string())
}

fn parse_u32(s: &str) -> Result<u32, String> {
    u32::try_from(parse_uint(s)?).map_err(|_| "too large".to_string())
}

fn parse_threads(s: &str) -> Result<u32, String> {
    let n = parse_u64(s)?;
    let max = vmaf_hip::limits::MAX_THREADS;
    match u32::try_from(n) {
        Ok(t) if t as usize <= max => Ok(t),
        _ => Err(format!("at most {max} worker threads are supported")),
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    parse_uint(s)
}

fn parse_bitdepth(s: &str) -> Result<u32, String> {
    match parse_u32(s) {
        Ok(b @ (8 | 10 | 12 | 16)) => Ok(b),
        _ => Err("should be 8, 10, 12 or 16".into()),
    }
}

fn parse_pix_fmt(s: &str) -> Result<PixelFormat, String> {
    Ok(match s {
        "420" => PixelFormat::Yuv420p,
        "422" => PixelFormat::Yuv422p,
        "444" => PixelFormat::Yuv444p,
        "400" => PixelFormat::Yuv400p,
        _ => return Err("should be 420, 422, 444 or 400".into()),
    })
}

fn parse_hip_device(s: &str) -> Result<DeviceChoice, String> {
    if s == "all" {
        return Ok(DeviceChoice::All);
    }
    s.parse::<u32>()
        .map(|i| DeviceChoice::Index(i as usize))
        .map_err(|_| "should be a device index or `all`".into())
}

fn parse_model(s: &str) -> Result<ModelSpec, String> {
    ModelSpec::parse(s).map_err(|e| describe(&e))
}

fn parse_feature(s: &str) -> Result<FeatureArg, String> {
    let (name, rest) = s.split_once('=').unwrap_or((s, ""));
    if name.is_empty() {
        return Err("missing feature name".into());
    }
    let mut opts = Dict::new();
    for kv in rest.split(':').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| format!("bad option {kv:?} for feature {name} (expected key=value)"))?;
        opts.set(k, v);
    }
    Ok(FeatureArg {
        name: name.into(),
        opts,
    })
}

/// Prints a line on stderr. A failing stderr has nowhere to be reported; unlike `eprintln!`,
/// this does not panic over it.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The process's stdout as a plain file (a duplicate of descriptor 1), or why there is none.
/// Writes through it report every error: Rust's `std::io::stdout()` silently drops writes to
/// a closed descriptor. Whatever descriptor 1 is (`/dev/null` opened read-write by a
/// supervisor, or by the Rust runtime in place of a closed one) is used as it is, as libvmaf's
/// tool does.
fn stdout_file() -> std::io::Result<File> {
    std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
}

/// Writes `text` to stdout, failing on a closed stdout, a full device or a broken pipe.
fn write_stdout(stdout: &std::io::Result<File>, text: &str, what: &str) -> Result<(), CliError> {
    let res = match stdout {
        Ok(f) => {
            let mut w: &File = f;
            w.write_all(text.as_bytes()).and_then(|()| w.flush())
        }
        Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
    };
    res.map_err(|e| CliError(format!("cannot write {what} to stdout: {e}")))
}

/// A failure reported as one line on stderr.
struct CliError(String);

impl From<String> for CliError {
    fn from(s: String) -> Self {
        CliError(s)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError(describe(&e))
    }
}

/// A library error without its category prefix where the message says enough.
fn describe(e: &Error) -> String {
    match e {
        Error::Invalid(m) => m.clone(),
        Error::Io { context, source } => format!("{context}: {source}"),
        other => other.to_string(),
    }
}

/// A failure reading `input`: allocation failures name the input (other errors already do).
fn reading(input: &Path) -> impl FnOnce(Error) -> CliError + '_ {
    move |e| match e {
        Error::NoMem(_) => CliError(format!("{}: {e}", input.display())),
        e => CliError(describe(&e)),
    }
}

fn with_context(what: impl std::fmt::Display) -> impl FnOnce(Error) -> CliError {
    move |e| CliError(format!("{what}: {}", describe(&e)))
}

/// C's `%f`.
fn fmt_f(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else {
        format!("{v:.6}")
    }
}

fn load_model(spec: &ModelSpec) -> Result<LoadedModel, CliError> {
    spec.load().map_err(|e| {
        let label = spec.label();
        CliError(match &e {
            LoadError::Load(e) => format!("problem loading model {label}: {}", describe(e)),
            LoadError::Overload { extractor, error } => format!(
                "problem overloading {extractor} options of model {label}: {}",
                describe(error)
            ),
        })
    })
}

/// Frames of one input read ahead of the scorer on threads of their own: one reading in order
/// through a channel, or several taking the next unread frame by position (see
/// `io::FrameReaderAt`) and handing frames over in order.
enum ReadAhead {
    Channel(Receiver<vmaf_hip::Result<Option<Picture>>>),
    Shared(Arc<Ordered>),
}

type Receiver<T> = std::sync::mpsc::Receiver<T>;
type Frame = vmaf_hip::Result<Option<Picture>>;

/// Frames read ahead per reading thread: enough to hide a slow read, few enough to bound memory.
const READ_AHEAD: usize = 3;

/// Where the reader threads of one input leave frames for the scorer. Each reader takes the
/// next frame nobody has taken, so a slow read delays only its own frame. (With frames dealt
/// out in turn, the other readers stopped once their few frames were ahead: in a 4K run on an
/// H100 host, readers stood for up to 227 ms beside 340 ms of reading.)
struct Ordered {
    state: std::sync::Mutex<OrderedState>,
    changed: std::sync::Condvar,
    /// Frames that may be read ahead of the one the scorer takes next.
    window: usize,
    /// Frames to read at most (`--frame_cnt`).
    limit: usize,
}

struct OrderedState {
    /// The next frame a reader takes.
    next_read: usize,
    /// The next frame the scorer takes.
    next_take: usize,
    /// Frames read and not yet taken (with the end or an error, at its position).
    ready: std::collections::BTreeMap<usize, Frame>,
    /// The first position that holds an end or an error: nothing past it is read.
    end: usize,
    /// The scorer is gone: readers stop.
    closed: bool,
}

impl Ordered {
    fn new(window: usize, limit: usize) -> Ordered {
        Ordered {
            state: std::sync::Mutex::new(OrderedState {
                next_read: 0,
                next_take: 0,
                ready: Default::default(),
                end: usize::MAX,
                closed: false,
            }),
            changed: std::sync::Condvar::new(),
            window,
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OrderedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reader's next frame position, once it is inside the window; `None` when done.
    fn claim(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if st.closed || st.next_read >= st.end.min(self.limit) {
                return None;
            }
            if st.next_read < st.next_take + self.window {
                st.next_read += 1;
                return Some(st.next_read - 1);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A reader's frame `k`; an end or an error stops the reading past it.
    fn put(&self, k: usize, frame: Frame) {
        let mut st = self.lock();
        if !matches!(frame, Ok(Some(_))) {
            st.end = st.end.min(k + 1);
        }
        if !st.closed {
            st.ready.insert(k, frame);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// The scorer's next frame, in order; `None` after the last one.
    fn take(&self) -> Frame {
        let mut st = self.lock();
        loop {
            let k = st.next_take;
            // Past the limit, or past an end or error already handed over.
            if k >= self.limit.min(st.end) {
                return Ok(None);
            }
            if let Some(frame) = st.ready.remove(&k) {
                st.next_take += 1;
                drop(st);
                self.changed.notify_all();
                return frame;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        // Pictures go back to their pool now, not when the last reader ends.
        let ready = std::mem::take(&mut st.ready);
        drop(st);
        self.changed.notify_all();
        drop(ready);
    }
}

/// A frame a reader has taken and not yet handed over: should the reader unwind, the scorer
/// gets an error at its place instead of waiting for it forever.
struct Claimed<'a> {
    shared: &'a Ordered,
    k: usize,
    put: bool,
}

impl Claimed<'_> {
    fn put(mut self, frame: Frame) {
        self.put = true;
        self.shared.put(self.k, frame);
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        if !self.put {
            let e = vmaf_hip::Error::inval(format!("frame {}: its reader stopped", self.k));
            self.shared.put(self.k, Err(e));
        }
    }
}

/// Reads with `read` (which takes a picture from its argument) on a new thread until an end,
/// an error, `count` frames, or until the receiver is gone; pictures come from `pool` if any.
fn spawn_reader(
    mut read: impl FnMut(
            &mut dyn FnMut() -> vmaf_hip::Result<PictureData>,
        ) -> vmaf_hip::Result<Option<PictureData>>
        + Send
        + 'static,
    info: VideoInfo,
    count: Option<usize>,
    pool: Option<Arc<PicturePool>>,
) -> std::io::Result<Receiver<Frame>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
    // `Builder::spawn` reports a thread that cannot start instead of panicking.
    std::thread::Builder::new()
        .name("vmaf-reader".into())
        .spawn(move || {
            let mut n = 0usize;
            let mut times = ReaderTimes::default();
            while count.is_none_or(|c| n < c) {
                let t = Instant::now();
                let mut get = || times.fetch(&pool, info);
                let frame = read(&mut get).map(|f| f.map(Arc::new));
                times.reading += t.elapsed().as_secs_f64();
                let more = matches!(frame, Ok(Some(_)));
                let t = Instant::now();
                if tx.send(frame).is_err() || !more {
                    break;
                }
                times.handing += t.elapsed().as_secs_f64();
                n += 1;
            }
            times.log(n);
        })?;
    Ok(rx)
}

/// Where a reader's time goes, logged at debug level: reading, waiting for a free picture,
/// waiting for the scorer.
#[derive(Default)]
struct ReaderTimes {
    reading: f64,
    fetching: f64,
    handing: f64,
}

impl ReaderTimes {
    /// A picture to read into: from the pool, else a new one.
    fn fetch(
        &mut self,
        pool: &Option<Arc<PicturePool>>,
        info: VideoInfo,
    ) -> vmaf_hip::Result<PictureData> {
        let t = Instant::now();
        let pic = match pool {
            Some(p) => p.fetch(),
            None => PictureData::for_writing(info.pix_fmt, info.bpc, info.width, info.height),
        };
        self.fetching += t.elapsed().as_secs_f64();
        pic
    }

    fn log(&self, n: usize) {
        vmaf_hip::log_debug!(
            "reader: {n} frames; {:.0} ms reading (of which {:.0} ms getting pictures), \
             {:.0} ms waiting for the scorer",
            self.reading * 1e3,
            self.fetching * 1e3,
            self.handing * 1e3
        );
    }
}

impl ReadAhead {
    /// Reads `reader` in order, at most `limit` frames.
    fn start(
        mut reader: Box<dyn io::VideoReader>,
        limit: Option<usize>,
        pool: Option<Arc<PicturePool>>,
    ) -> std::io::Result<ReadAhead> {
        let info = reader.info();
        let rx = spawn_reader(move |get| reader.read_frame_with(get), info, limit, pool)?;
        Ok(ReadAhead::Channel(rx))
    }

    /// Reads `frames` on `threads` threads, each taking the next unread frame.
    fn start_at(
        frames: Arc<io::FrameReaderAt>,
        info: VideoInfo,
        threads: usize,
        limit: Option<usize>,
        pool: Option<Arc<PicturePool>>,
    ) -> std::io::Result<ReadAhead> {
        let limit = limit.unwrap_or(usize::MAX);
        let shared = Arc::new(Ordered::new((READ_AHEAD + 1) * threads, limit));
        let ahead = ReadAhead::Shared(shared.clone());
        for _ in 0..threads {
            let (frames, shared, pool) = (frames.clone(), shared.clone(), pool.clone());
            // On failure `ahead` drops: the readers started so far stop.
            std::thread::Builder::new()
                .name("vmaf-reader".into())
                .spawn(move || {
                    let mut scratch = Vec::new();
                    let mut times = ReaderTimes::default();
                    let mut n = 0usize;
                    loop {
                        let t = Instant::now();
                        let Some(k) = shared.claim() else { break };
                        let claimed = Claimed {
                            shared: &shared,
                            k,
                            put: false,
                        };
                        times.handing += t.elapsed().as_secs_f64();
                        let t = Instant::now();
                        let mut get = || times.fetch(&pool, info);
                        let frame = frames.read(k as u64, &mut get, &mut scratch);
                        times.reading += t.elapsed().as_secs_f64();
                        n += usize::from(matches!(frame, Ok(Some(_))));
                        claimed.put(frame.map(|f| f.map(Arc::new)));
                    }
                    times.log(n);
                })?;
        }
        Ok(ahead)
    }

    /// The next frame; `None` after the last one.
    fn next(&self) -> Frame {
        match self {
            // A closed channel means its reader stopped after an end, an error or the limit.
            ReadAhead::Channel(rx) => rx.recv().unwrap_or(Ok(None)),
            ReadAhead::Shared(o) => o.take(),
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        if let ReadAhead::Shared(o) = self {
            o.close();
        }
    }
}

/// Threads reading one input by position: a quarter of the cores, 1 to 4, or
/// `VMAF_HIP_READ_THREADS` (1 to 16).
fn readers_per_input() -> usize {
    let set = std::env::var("VMAF_HIP_READ_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (1..=16).contains(n));
    set.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 4)
            .clamp(1, 4)
    })
}

/// Page-locked pictures for the frames of an input scored on a GPU, so its uploads read the
/// luma planes in place (when their rows are back to back); `None` otherwise, or when memory
/// cannot be page-locked (then frames go to ordinary pictures, only the upload is slower).
fn pinned_pool(
    device: Option<&Arc<vmaf_hip::gpu::Device>>,
    info: VideoInfo,
    workers: usize,
) -> Option<Arc<PicturePool>> {
    let dev = device?.clone();
    if !info.width.is_multiple_of(32) {
        return None;
    }
    // Pictures read ahead (the shared window of READ_AHEAD + 1 per reader), in flight on the
    // workers, and one being scored.
    let cnt = (READ_AHEAD + 1) * readers_per_input() + 1 + 2 * workers;
    let new = move || PictureData::for_writing(info.pix_fmt, info.bpc, info.width, info.height);
    let make = move || {
        // Memory that cannot be page-locked still serves, only its uploads are slower.
        vmaf_hip::gpu::pin_picture(&dev, new()?).or_else(|e| {
            vmaf_hip::log_debug!("an input picture could not be page-locked: {e}");
            new()
        })
    };
    // Made by the readers as they need them: they start reading at once and lock pages side
    // by side, instead of the main thread locking every picture before the first read.
    PicturePool::lazy(cnt, make)
        .map_err(|e| vmaf_hip::log_debug!("page-locked input pictures unavailable: {e}"))
        .ok()
}

fn progress_bar(show: bool, len: Option<u64>) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let (pb, template) = match len {
        Some(n) => (
            ProgressBar::new(n),
            "{spinner} [{elapsed_precise}] [{wide_bar}] {pos}/{len} frames, {fps}, ETA {eta}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} [{elapsed_precise}] {pos} frames, {fps}",
        ),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        let style = style.progress_chars("=> ").with_key(
            "fps",
            |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.2} fps", s.per_sec());
            },
        );
        pb.set_style(style);
    }
    pb
}

fn run(cli: Cli, stdout: &std::io::Result<File>) -> Result<(), CliError> {
    let t0 = Instant::now();
    let ms = move || t0.elapsed().as_secs_f64() * 1e3;
    // The context sets it again; this lets the GPU set-up log at debug level too.
    vmaf_hip::log::set_level(LogLevel::Info);
    // Scores with no stdout to go to would be lost: say so before doing the work.
    if let (None, false, Err(e)) = (&cli.output, cli.no_prediction, stdout) {
        return Err(CliError(format!(
            "cannot write the scores to stdout ({e}); redirect it or use -o FILE"
        )));
    }
    let ref_path = cli
        .reference
        .clone()
        .ok_or_else(|| "the reference (-r/--reference) is required".to_string())?;
    let dist_path = cli
        .distorted
        .clone()
        .ok_or_else(|| "the distorted video (-d/--distorted) is required".to_string())?;
    let raw = match (cli.width, cli.height, cli.pixel_format, cli.bitdepth) {
        (None, None, None, None) => None,
        (Some(w), Some(h), Some(pix_fmt), Some(bpc)) => Some(VideoInfo {
            width: w as usize,
            height: h as usize,
            pix_fmt,
            bpc,
        }),
        _ => {
            return Err(CliError(
                "raw .yuv input needs all of -w/--width, -h/--height, -p/--pixel_format and \
                 -b/--bitdepth"
                    .into(),
            ))
        }
    };
    let mut models = cli.model.clone();
    if models.is_empty() && !cli.no_prediction {
        models.push(ModelSpec::default_model());
    }
    for (i, m) in models.iter().enumerate() {
        if models[..i].iter().any(|o| o.name == m.name) {
            return Err(CliError(format!(
                "two models are named {:?}; name each one with -m ...:name=NAME",
                m.name
            )));
        }
    }
    let gpu = match cli.backend {
        Backend::Cpu => Vec::new(),
        Backend::Hip => vmaf_hip::gpu::open_states(cli.hip_device.unwrap_or(DeviceChoice::First))
            .map_err(with_context("hip backend not available"))?,
    };
    vmaf_hip::log_debug!("{:.0} ms: GPU states open", ms());

    let mut vref = io::open(&ref_path, raw).map_err(reading(&ref_path))?;
    let mut vdist = io::open(&dist_path, raw).map_err(reading(&dist_path))?;
    io::check_compatible(
        &ref_path,
        &vref.info(),
        &dist_path,
        &vdist.info(),
        cli.common_bitdepth,
    )?;
    for w in vref.warnings().iter().chain(&vdist.warnings()) {
        say!("warning: {w}");
    }

    let mut ctx = Context::new(Config {
        log_level: LogLevel::Info,
        n_threads: cli.threads,
        n_subsample: cli.subsample,
        cpumask: cli.cpumask,
        gpumask: cli.gpumask,
    })?;
    let pin_device = gpu.first().map(|s| s.device().clone());
    for state in gpu {
        ctx.import_gpu_state(state)?;
    }

    let mut loaded = Vec::with_capacity(models.len());
    for arg in &models {
        let l = load_model(arg)?;
        l.register(&mut ctx).map_err(with_context(format!(
            "problem loading the feature extractors of model {}",
            l.label
        )))?;
        loaded.push(l);
    }
    for f in &cli.feature {
        ctx.use_feature(&f.name, &f.opts)
            .map_err(with_context(format!("problem loading feature {}", f.name)))?;
    }

    for _ in 0..cli.frame_skip_ref {
        if vref.read_frame().map_err(reading(&ref_path))?.is_none() {
            break;
        }
    }
    for _ in 0..cli.frame_skip_dist {
        if vdist.read_frame().map_err(reading(&dist_path))?.is_none() {
            break;
        }
    }

    let show_progress = !cli.quiet && std::io::stderr().is_terminal();
    let mut len = match (vref.frames_left_hint(), vdist.frames_left_hint()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => None,
    };
    if cli.frame_cnt > 0 {
        len = Some(len.map_or(cli.frame_cnt as u64, |l| l.min(cli.frame_cnt as u64)));
    }
    let pb = progress_bar(show_progress, len);

    // Reference and distorted are read ahead on their own threads, so reading overlaps
    // scoring and the two files are read at once.
    let limit = (cli.frame_cnt > 0).then_some(cli.frame_cnt as usize);
    // Inputs with frames at fixed offsets are read by several threads each.
    let positional = vref.layout().zip(vdist.layout());
    let start = |r: Box<dyn io::VideoReader>, layout: Option<io::FrameLayout>, path: &Path| {
        let pool = pinned_pool(pin_device.as_ref(), r.info(), ctx.worker_count());
        let at = match layout {
            Some(l) => io::FrameReaderAt::open(path, l).map_err(reading(path))?,
            None => None,
        };
        let started = match at {
            Some(at) => {
                let info = r.info();
                ReadAhead::start_at(Arc::new(at), info, readers_per_input(), limit, pool)
            }
            None => ReadAhead::start(r, limit, pool),
        };
        started.map_err(|e| {
            CliError(format!(
                "out of memory: cannot start a reader thread for {}: {e}",
                path.display()
            ))
        })
    };
    let (ref_layout, dist_layout) = positional.unzip();
    let ref_frames = start(vref, ref_layout, &ref_path)?;
    let dist_frames = start(vdist, dist_layout, &dist_path)?;
    vmaf_hip::log_debug!("{:.0} ms: readers started", ms());
    let mut n = 0usize;
    let mut waited = 0.0;
    while cli.frame_cnt == 0 || n < cli.frame_cnt as usize {
        let t = Instant::now();
        let r = ref_frames.next().map_err(reading(&ref_path))?;
        let d = dist_frames.next().map_err(reading(&dist_path))?;
        waited += t.elapsed().as_secs_f64();
        let (r, d) = match (r, d) {
            (Some(r), Some(d)) => (r, d),
            (None, None) => break,
            (r, _) => {
                let (short, long) = if r.is_none() {
                    (&ref_path, &dist_path)
                } else {
                    (&dist_path, &ref_path)
                };
                pb.suspend(|| {
                    say!(
                        "warning: {} ended before {}; scoring the first {n} frames",
                        short.display(),
                        long.display()
                    )
                });
                break;
            }
        };
        let (r, d) = if r.bpc != d.bpc {
            ctc::common_depth(r, d).map_err(with_context(format!("frame {n}")))?
        } else {
            (r, d)
        };
        ctx.read_pictures(r, d, n)
            .map_err(with_context(format!("frame {n}")))?;
        n += 1;
        pb.inc(1);
    }
    vmaf_hip::log_debug!("scorer: waited {:.0} ms for the readers", waited * 1e3);
    // Frames read past the end go back to their pool now, not after the flush.
    drop((ref_frames, dist_frames));
    // The bar is redrawn in place without a line end: replace it with a final line, so
    // nothing printed afterwards (scores, the shell prompt) lands on it.
    if show_progress {
        let secs = pb.elapsed().as_secs_f64();
        pb.finish_and_clear();
        say!("{n} frames, {:.2} fps", n as f64 / secs.max(1e-9));
    }
    if n == 0 {
        return Err(CliError(format!(
            "no frames to score in {}",
            if cli.frame_skip_ref > 0 || cli.frame_skip_dist > 0 {
                "the inputs after skipping".to_string()
            } else {
                ref_path.display().to_string()
            }
        )));
    }
    vmaf_hip::log_debug!("{:.0} ms: {n} frames read", ms());
    ctx.flush()
        .map_err(with_context("problem flushing the context"))?;
    vmaf_hip::log_debug!("{:.0} ms: flushed", ms());

    let mut summary = Vec::new();
    if !cli.no_prediction {
        for l in &loaded {
            let score = ctx
                .score_pooled(&l.model, PoolingMethod::Mean, 0, n - 1)
                .map_err(with_context(format!("problem pooling model {}", l.label)))?;
            summary.push(format!("{}: {}", l.label, fmt_f(score)));
        }
        for l in &loaded {
            let Some(c) = &l.collection else { continue };
            let s = ctx
                .score_pooled_model_collection(c, PoolingMethod::Mean, 0, n - 1)
                .map_err(with_context(format!(
                    "problem pooling model collection {}",
                    l.label
                )))?;
            summary.push(format!(
                "{}: {}, ci.p95: [{}, {}], stddev: {}",
                l.label,
                fmt_f(s.bagging_score),
                fmt_f(s.ci_p95_lo),
                fmt_f(s.ci_p95_hi),
                fmt_f(s.stddev)
            ));
        }
    }

    if let Some(out) = &cli.output {
        let fmt = if cli.json {
            OutputFormat::Json
        } else if cli.csv {
            OutputFormat::Csv
        } else if cli.sub {
            OutputFormat::Sub
        } else {
            OutputFormat::Xml
        };
        vmaf_hip::output::write_atomic(out, |w| ctx.write_output_to(w, fmt))?;
        if show_progress {
            for line in &summary {
                say!("{line}");
            }
        }
    } else if !summary.is_empty() {
        let text: String = summary.iter().map(|l| format!("{l}\n")).collect();
        write_stdout(stdout, &text, "the scores")?;
    }
    vmaf_hip::log_debug!("{:.0} ms: scores written", ms());
    drop(ctx);
    vmaf_hip::log_debug!("{:.0} ms: context closed", ms());
    Ok(())
}

/// The help's closing lines: every built-in model and feature extractor by name.
fn lists() -> String {
    let models: Vec<&str> = vmaf_hip::model::builtin_versions().collect();
    format!(
        "Built-in models (-m version=NAME): {}\nFeature extractors (--feature NAME): {}",
        models.join(", "),
        vmaf_hip::feature::extractor_names()
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        say!("error: internal error: {}", msg.replace('\n', " "));
    }));
    // Taken once, before any file is opened.
    let stdout = stdout_file();
    let parsed = Cli::command()
        .after_help(lists())
        .try_get_matches()
        .and_then(|m| {
            let mut cli = Cli::from_arg_matches(&m)?;
            ctc::expand(&mut cli, &m);
            Ok(cli)
        });
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let text = e.render().to_string();
                return match write_stdout(&stdout, &text, "the help") {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(CliError(msg)) => {
                        say!("error: {msg}");
                        ExitCode::FAILURE
                    }
                };
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            // clap lists the accepted values on a later line: keep them on the one we print.
            let values = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("[possible values: "))
                .and_then(|v| v.strip_suffix(']'))
                .map(|v| format!(" (expected one of: {v})"))
                .unwrap_or_default();
            say!("{first}{values} (see --help)");
            return ExitCode::FAILURE;
        }
    };
    if cli.version {
        // Upstream prints the version on stderr; stdout (empty upstream) says what runs here.
        let cpu = vmaf_hip::simd::CpuLevel::for_cpumask(cli.cpumask);
        let best = vmaf_hip::simd::CpuLevel::detect();
        let printed = writeln!(std::io::stderr(), "{}", vmaf_hip::VMAF_VERSION).and_then(|_| {
            writeln!(
                std::io::stdout(),
                "vmaf-hip {}: CPU code {cpu} (best on this CPU: {best})",
                env!("CARGO_PKG_VERSION")
            )
        });
        return match printed {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let gpu = cli.backend == Backend::Hip;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli, &stdout))) {
        // Everything is written; the GPU driver's exit handlers would add about 0.1 s.
        Ok(Ok(())) if gpu => vmaf_hip::gpu::exit_now(0),
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(CliError(msg))) => {
            say!("error: {msg}");
            ExitCode::FAILURE
        }
        // The panic hook has printed the message.
        Err(_) => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(k: usize) -> Frame {
        let mut pic = PictureData::new(PixelFormat::Yuv400p, 8, 2, 2)?;
        pic.plane_u8_mut(0)[0] = k as u8;
        Ok(Some(Arc::new(pic)))
    }

    fn number(f: Frame) -> Option<u8> {
        f.unwrap().map(|p| p.plane_u8(0)[0])
    }

    /// Readers finishing out of order still hand frames over in order; none reads past the
    /// window, an end stops the reading past it, and the scorer sees that end once.
    #[test]
    fn shared_readers_hand_frames_over_in_order() {
        let o = Arc::new(Ordered::new(4, usize::MAX));
        let ks: Vec<usize> = (0..4).map(|_| o.claim().unwrap()).collect();
        assert_eq!(ks, [0, 1, 2, 3]);
        let waiting = {
            let o = o.clone();
            std::thread::spawn(move || o.claim())
        };
        for k in [3, 1, 2] {
            o.put(k, frame(k));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Frame 0 is not read yet: the window holds the fifth claim back.
        assert!(!waiting.is_finished());
        o.put(0, frame(0));
        for k in 0..4 {
            assert_eq!(number(o.take()), Some(k as u8));
        }
        assert_eq!(waiting.join().unwrap(), Some(4));
        o.put(4, Ok(None));
        assert_eq!(o.claim(), None);
        assert_eq!(number(o.take()), None);
        // A limit ends the claims and the takes.
        let o = Ordered::new(8, 1);
        assert_eq!(o.claim(), Some(0));
        assert_eq!(o.claim(), None);
        o.put(0, frame(0));
        assert_eq!(number(o.take()), Some(0));
        assert_eq!(number(o.take()), None);
    }

    /// An error is handed over at its frame; a reader that unwinds with a claimed frame leaves
    /// an error there rather than a scorer waiting forever; closing wakes waiting readers.
    #[test]
    fn shared_readers_report_errors_in_place() {
        let o = Arc::new(Ordered::new(4, usize::MAX));
        for k in 0..3 {
            assert_eq!(o.claim(), Some(k));
        }
        o.put(1, Err(vmaf_hip::Error::inval("bad frame")));
        o.put(0, frame(0));
        o.put(2, frame(2));
        // Nothing past the error is read.
        assert_eq!(o.claim(), None);
        assert_eq!(number(o.take()), Some(0));
        assert!(o.take().unwrap_err().to_string().contains("bad frame"));

        let o = Arc::new(Ordered::new(4, usize::MAX));
        let reader = {
            let o = o.clone();
            std::thread::spawn(move || {
                let k = o.claim().unwrap();
                let _claimed = Claimed {
                    shared: &o,
                    k,
                    put: false,
                };
                panic!("reader fails");
            })
        };
        assert!(reader.join().is_err());
        let e = o.take().unwrap_err().to_string();
        assert!(e.contains("frame 0: its reader stopped"), "{e}");

        let o = Arc::new(Ordered::new(1, usize::MAX));
        assert_eq!(o.claim(), Some(0));
        let waiting = {
            let o = o.clone();
            std::thread::spawn(move || o.claim())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        o.close();
        assert_eq!(waiting.join().unwrap(), None);
    }

    #[test]
    fn model_errors_are_the_library_messages() {
        // The grammar is tested with `ModelSpec`; clap prints these texts as they are.
        assert_eq!(
            parse_model("version=a:name=").unwrap_err(),
            "empty model name (name=)"
        );
        assert_eq!(
            parse_model("name=x").unwrap_err(),
            "a model needs path=FILE or version=NAME"
        );
    }

    #[test]
    fn parses_features_and_numbers() {
        let f = parse_feature("psnr=enable_chroma=false:min_sse=0.5").unwrap();
        assert_eq!(f.name, "psnr");
        assert_eq!(f.opts.get("enable_chroma"), Some("false"));
        assert_eq!(f.opts.get("min_sse"), Some("0.5"));
        assert!(parse_feature("psnr=enable_chroma").is_err());
        assert_eq!(parse_feature("vif").unwrap().opts.len(), 0);
        assert_eq!(parse_u64("0xff"), Ok(255));
        assert_eq!(parse_u64("010"), Ok(8));
        assert_eq!(parse_u64("0"), Ok(0));
        assert!(parse_u32("12a").is_err());
        assert!(parse_u32("-1").is_err());
        assert!(parse_bitdepth("9").is_err());
        assert_eq!(parse_pix_fmt("400"), Ok(PixelFormat::Yuv400p));
        assert_eq!(parse_hip_device("all"), Ok(DeviceChoice::All));
        assert_eq!(parse_hip_device("1"), Ok(DeviceChoice::Index(1)));
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let c = Cli::try_parse_from(["vmaf", "-r", "a", "-d", "b", "--json", "--xml", "-h", "4"])
            .unwrap();
        assert!(c.xml && !c.json);
        assert_eq!(c.height, Some(4));
    }
}
