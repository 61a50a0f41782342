//! `vmaf_hip._native`: the library's scoring for Python. `score_files` drives the library as
//! the `vmaf` command does and returns the JSON its writer prints (the Python side parses it),
//! so the numbers are the command's by construction; `Context` scores frames handed over as
//! DLPack capsules (NumPy arrays on the host, GPU tensors in place).
//!
//! The GIL is released whenever the library runs: its worker threads may drop a caller's
//! tensor, whose deleter can need the GIL.

#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{
    PyInterruptedError, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

use vmaf_hip::context::{Config, Context};
use vmaf_hip::driver;
use vmaf_hip::feature::Dict;
use vmaf_hip::gpu::{DeviceChoice as Device, GpuState};
use vmaf_hip::io::VideoInfo;
use vmaf_hip::log::LogLevel;
use vmaf_hip::model::{LoadError, LoadedModel as Loaded, ModelSpec};
use vmaf_hip::output::OutputFormat;
use vmaf_hip::picture::semiplanar::{self, HostSemiPlanar, SemiPlanar};
use vmaf_hip::picture::{Picture, PictureData, PixelFormat};
use vmaf_hip::Error;

#[allow(unsafe_code)]
mod ffi;

create_exception!(
    _native,
    NoDeviceError,
    PyRuntimeError,
    "No usable GPU (runtime or device) for backend=\"hip\"."
);

/// A library error as the Python exception its kind calls for, with the library's message.
fn py_err(e: Error) -> PyErr {
    match e {
        Error::Invalid(m) => PyValueError::new_err(m),
        Error::NoMem(m) => PyMemoryError::new_err(m),
        Error::NoDevice(m) => NoDeviceError::new_err(m),
        Error::Io { context, source } => match source.raw_os_error() {
            Some(code) => PyOSError::new_err((code, format!("{context}: {source}"))),
            None => PyOSError::new_err(format!("{context}: {source}")),
        },
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// `e` with `what` in front of its message, same kind.
fn context(what: impl std::fmt::Display) -> impl FnOnce(Error) -> Error {
    move |e| e.prefixed(what)
}

fn inval(msg: impl Into<String>) -> Error {
    Error::inval(msg)
}

/// What Python gets for a panic in the library (a bug): a `RuntimeError` it can catch, as C
/// callers get an errno, instead of PyO3's `PanicException` (a `BaseException`).
const PANICKED: &str = "internal error: the library panicked (a bug; please report it)";

/// Runs `f` without the GIL, a panic becoming a `RuntimeError`.
fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> PyResult<T> {
    match py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))) {
        Ok(r) => r.map_err(py_err),
        Err(_) => Err(PyRuntimeError::new_err(PANICKED)),
    }
}

/// Loads `spec` (the library's `-m` loading), its errors naming the model.
fn load_model(spec: &ModelSpec) -> Result<Loaded, Error> {
    let label = spec.label();
    spec.load().map_err(|e| match e {
        LoadError::Load(e) => context(format!("model {label}"))(e),
        LoadError::Overload { extractor, error } => {
            context(format!("overloading {extractor} options of model {label}"))(error)
        }
    })
}

/// Where features are extracted.
#[derive(Debug, Clone)]
enum Backend {
    Cpu,
    /// GPU states: one device (`Some(index)`, else the first usable one), or every one.
    Hip {
        device: Device,
    },
}

fn parse_backend(backend: &str, device: Option<&Bound<'_, PyAny>>) -> PyResult<Backend> {
    let device = match device {
        None => Device::First,
        Some(d) if d.is_none() => Device::First,
        Some(d) => {
            if let Ok(s) = d.extract::<String>() {
                match s.as_str() {
                    "all" => Device::All,
                    _ => Device::Index(s.parse().map_err(|_| {
                        PyValueError::new_err(format!(
                            "device {s:?}: should be an index, \"all\" or None"
                        ))
                    })?),
                }
            } else {
                let i: i64 = d.extract().map_err(|_| {
                    PyValueError::new_err("device should be an index, \"all\" or None")
                })?;
                Device::Index(usize::try_from(i).map_err(|_| {
                    PyValueError::new_err(format!("device {i}: should not be negative"))
                })?)
            }
        }
    };
    match backend {
        "cpu" => match device {
            Device::First => Ok(Backend::Cpu),
            _ => Err(PyValueError::new_err(
                "device is for backend=\"hip\" (the CPU backend takes none)",
            )),
        },
        "hip" | "gpu" => Ok(Backend::Hip { device }),
        other => Err(PyValueError::new_err(format!(
            "backend {other:?}: should be \"cpu\" or \"hip\""
        ))),
    }
}

/// The GPU states of `device`: one, or one per compute-capable device for `All`.
fn gpu_states(device: Device) -> Result<Vec<Arc<GpuState>>, Error> {
    vmaf_hip::gpu::open_states(device).map_err(context("hip backend not available"))
}

/// What a context is made of (all plain data, so it crosses to a thread without the GIL).
#[derive(Debug, Clone)]
struct Setup {
    models: Vec<ModelSpec>,
    features: Vec<(String, Dict)>,
    backend: Backend,
    threads: u32,
    subsample: u32,
    cpumask: u64,
    gpumask: u64,
}

impl Setup {
    fn new(
        models: Vec<String>,
        features: Vec<(String, Vec<(String, String)>)>,
        backend: Backend,
        threads: u32,
        subsample: u32,
        cpumask: u64,
        gpumask: u64,
    ) -> Result<Setup, Error> {
        let models = models
            .iter()
            .map(|m| ModelSpec::parse_loose(m))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, m) in models.iter().enumerate() {
            if models[..i].iter().any(|o| o.name == m.name) {
                return Err(inval(format!(
                    "two models are named {:?}; name each one (\"version=...:name=NAME\")",
                    m.name
                )));
            }
        }
        let features = features
            .into_iter()
            .map(|(name, opts)| {
                if name.is_empty() {
                    return Err(inval("empty feature name"));
                }
                let mut d = Dict::new();
                for (k, v) in opts {
                    if k.is_empty() {
                        return Err(inval(format!("empty option name for feature {name}")));
                    }
                    d.set(&k, &v);
                }
                Ok((name, d))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if threads as usize > vmaf_hip::limits::MAX_THREADS {
            return Err(inval(format!(
                "at most {} worker threads are supported",
                vmaf_hip::limits::MAX_THREADS
            )));
        }
        Ok(Setup {
            models,
            features,
            backend,
            threads,
            subsample,
            cpumask,
            gpumask,
        })
    }

    /// A context with the GPU states, models and features, as the CLI sets one up; `files`:
    /// fed by the driver's readers, whose cores a GPU context leaves them as the CLI's does.
    fn context(&self, files: bool) -> Result<(Context, Vec<Loaded>), Error> {
        let states = match self.backend {
            Backend::Cpu => Vec::new(),
            Backend::Hip { device } => gpu_states(device)?,
        };
        let n_threads = if files {
            driver::fed_context_threads(self.threads, self.gpumask, &states)
        } else {
            self.threads
        };
        let mut ctx = Context::new(Config {
            log_level: LogLevel::Warning,
            n_threads,
            n_subsample: self.subsample,
            cpumask: self.cpumask,
            gpumask: self.gpumask,
        })?;
        for s in states {
            ctx.import_gpu_state(s)?;
        }
        let mut loaded = Vec::with_capacity(self.models.len());
        for spec in &self.models {
            let l = load_model(spec)?;
            match &l.collection {
                Some(c) => ctx.use_features_from_model_collection(c),
                None => ctx.use_features_from_model(&l.model),
            }
            .map_err(context(format!(
                "the feature extractors of model {}",
                spec.label()
            )))?;
            loaded.push(l);
        }
        for (name, opts) in &self.features {
            ctx.use_feature(name, opts)
                .map_err(context(format!("feature {name}")))?;
        }
        Ok((ctx, loaded))
    }
}

/// Flushes `ctx`, predicts every model's per-frame scores (pooling them, as the CLI does for
/// its summary, is what stores them) and renders the scores as the JSON writer does.
fn finish_json(ctx: &mut Context, models: &[Loaded], frames: usize) -> Result<String, Error> {
    if frames == 0 {
        return Err(inval("no frames were scored"));
    }
    if !ctx.is_flushed() {
        ctx.flush().map_err(context("flushing the context"))?;
    }
    driver::pool(ctx, models, frames)?;
    let mut out = Vec::new();
    ctx.write_output_to(&mut out, OutputFormat::Json)?;
    String::from_utf8(out).map_err(|_| inval("the JSON writer produced bad UTF-8"))
}

/// A flag that stops the `score_files` calls given it at their next frame (the catalog sets it
/// on Ctrl-C, so pairs being scored on other threads end within a frame).
#[pyclass(module = "vmaf_hip._native", name = "CancelFlag", frozen)]
struct CancelFlag(Arc<AtomicBool>);

#[pymethods]
impl CancelFlag {
    #[new]
    fn new() -> Self {
        CancelFlag(Arc::new(AtomicBool::new(false)))
    }

    /// Stops every call given this flag.
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Scores the files of `opts` with a context of `setup` as the `vmaf` command does (the
/// library's driver: read ahead, skipped, counted, flushed) and returns the JSON it writes.
fn score_files_impl(setup: &Setup, opts: driver::Options) -> Result<String, Error> {
    let inputs = driver::Inputs::open(opts)?;
    let (mut ctx, models) = setup.context(true)?;
    let frames = inputs.score(&mut ctx, &mut ())?;
    finish_json(&mut ctx, &models, frames)
}

/// Scores `ref` against `dist` (y4m, or raw .yuv with width/height/pixel_format/bitdepth) and
/// returns what `vmaf --json` writes for them.
#[pyfunction]
#[pyo3(signature = (reference, distorted, models, features, backend, device, threads,
    subsample, width, height, pixel_format, bitdepth, frame_cnt, frame_skip_ref,
    frame_skip_dist, cpumask, gpumask, cancel=None))]
#[allow(clippy::too_many_arguments)]
fn score_files_json(
    py: Python<'_>,
    reference: String,
    distorted: String,
    models: Vec<String>,
    features: Vec<(String, Vec<(String, String)>)>,
    backend: &str,
    device: Option<Bound<'_, PyAny>>,
    threads: u32,
    subsample: u32,
    width: Option<u32>,
    height: Option<u32>,
    pixel_format: Option<String>,
    bitdepth: Option<u32>,
    frame_cnt: u32,
    frame_skip_ref: u32,
    frame_skip_dist: u32,
    cpumask: u64,
    gpumask: u64,
    cancel: Option<Bound<'_, CancelFlag>>,
) -> PyResult<String> {
    let cancel = cancel.map(|c| Arc::clone(&c.get().0));
    let backend = parse_backend(backend, device.as_ref())?;
    let pix_fmt = pixel_format
        .map(|p| vmaf_hip::io::raw_pixel_format(&p))
        .transpose()
        .map_err(py_err)?;
    let raw = VideoInfo::raw(
        width,
        height,
        pix_fmt,
        bitdepth,
        "width, height, pixel_format and bitdepth",
    )
    .map_err(py_err)?;
    let setup = Setup::new(
        models, features, backend, threads, subsample, cpumask, gpumask,
    )
    .map_err(py_err)?;
    let opts = driver::Options {
        raw,
        frame_cnt,
        frame_skip_ref,
        frame_skip_dist,
        cancel: cancel.clone(),
        ..driver::Options::new(reference, distorted)
    };
    let res = detached(py, || score_files_impl(&setup, opts));
    match (res, &cancel) {
        (Err(_), Some(c)) if c.load(Ordering::Relaxed) => {
            Err(PyInterruptedError::new_err("scoring cancelled"))
        }
        (res, _) => res,
    }
}

/// The scoring state of a [`PyContext`].
struct Inner {
    ctx: Context,
    models: Vec<Loaded>,
    frames: usize,
    /// Format, depth and size of the first frame, which every later one must match.
    first: Option<(PixelFormat, u32, usize, usize)>,
    /// The first library error of a read, flush or scoring: the library reports a failed
    /// frame's error once, so after it the context's scores would silently lack that frame's
    /// features; every later call repeats it instead.
    failed: Option<String>,
}

/// A scoring session fed frame by frame (`Context` on the Python side wraps it).
#[pyclass(name = "_Context", module = "vmaf_hip._native")]
struct PyContext {
    inner: Mutex<Option<Inner>>,
    backend: String,
}

/// How one submitted frame's planes are laid out.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    pix_fmt: PixelFormat,
    bpc: u32,
    w: usize,
    h: usize,
}

/// The pixel format of planes of these shapes (`None` when they match no format). Chroma may be
/// the picture's size (`w >> 1`) or the file's (`(w + 1) >> 1`, as decoders give for odd sizes).
fn infer_format(shapes: &[(usize, usize)]) -> Option<PixelFormat> {
    let (w, h) = shapes[0];
    let half = |n: usize, c: usize| c == n >> 1 || c == (n + 1) >> 1;
    match shapes {
        [_] => Some(PixelFormat::Yuv400p),
        [_, u, v] if u == v => {
            let (cw, ch) = *u;
            if (cw, ch) == (w, h) {
                Some(PixelFormat::Yuv444p)
            } else if half(w, cw) && half(h, ch) {
                Some(PixelFormat::Yuv420p)
            } else if half(w, cw) && ch == h {
                Some(PixelFormat::Yuv422p)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The geometry of one picture's planes, checked against `pixel_format`/`bitdepth` if given.
fn geometry(
    planes: &[ffi::Tensor],
    which: &str,
    pixel_format: Option<PixelFormat>,
    bitdepth: Option<u32>,
) -> PyResult<Geometry> {
    let bad = |m: String| PyValueError::new_err(format!("{which}: {m}"));
    if planes.len() != 1 && planes.len() != 3 {
        return Err(bad(format!(
            "{} planes given: give 1 (luma only) or 3 (Y, U, V)",
            planes.len()
        )));
    }
    let mut shapes = Vec::with_capacity(3);
    let mut bytes = None;
    for (i, t) in planes.iter().enumerate() {
        let shape = t.shape();
        if shape.len() != 2 || shape.iter().any(|&n| n <= 0) {
            return Err(bad(format!(
                "plane {i} has shape {shape:?}: each plane should be a non-empty 2-D array (rows, columns)"
            )));
        }
        let b = t.uint_bytes().ok_or_else(|| {
            bad(format!(
                "plane {i} is {}: planes should be uint8 (8-bit) or uint16 (9..16-bit)",
                t.dtype_name()
            ))
        })?;
        if bytes.is_some_and(|x| x != b) {
            return Err(bad("planes differ in sample type".into()));
        }
        bytes = Some(b);
        shapes.push((shape[1] as usize, shape[0] as usize));
    }
    let bpc = match (bytes, bitdepth) {
        (Some(1), None | Some(8)) => 8,
        (Some(1), Some(b)) => {
            return Err(bad(format!(
                "uint8 planes hold 8-bit samples, not bitdepth={b}"
            )))
        }
        (_, Some(b)) if (9..=16).contains(&b) => b,
        (_, Some(b)) => {
            return Err(bad(format!(
                "bitdepth={b} for uint16 planes: should be 9 to 16"
            )))
        }
        (_, None) => {
            return Err(bad(
                "uint16 planes: say how many bits they hold (bitdepth=10, 12, ...)".into(),
            ))
        }
    };
    let inferred = infer_format(&shapes);
    let pix_fmt = match (pixel_format, inferred) {
        (Some(p), Some(q)) if p == q => p,
        (Some(p), _) => {
            return Err(bad(format!(
                "plane shapes {shapes:?} (width, height) do not fit pixel_format {p:?}"
            )))
        }
        (None, Some(q)) => q,
        (None, None) => {
            return Err(bad(format!(
                "plane shapes {shapes:?} (width, height) fit no pixel format (4:2:0, 4:2:2, 4:4:4, 4:0:0)"
            )))
        }
    };
    let (w, h) = shapes[0];
    Ok(Geometry { pix_fmt, bpc, w, h })
}

/// A host picture with copies of `planes` (any strides).
fn host_picture(planes: &[ffi::Tensor], g: Geometry, which: &str) -> PyResult<PictureData> {
    let mut pic = PictureData::for_writing(g.pix_fmt, g.bpc, g.w, g.h).map_err(py_err)?;
    let mut max = 0;
    for (i, t) in planes.iter().enumerate() {
        let (pw, ph, pitch) = (pic.w[i], pic.h[i], pic.stride[i]);
        max = max.max(if g.bpc == 8 {
            t.copy_2d(ph, pw, pic.plane_u8_mut(i), pitch)?
        } else {
            t.copy_2d(ph, pw, pic.plane_u16_mut(i), pitch)?
        });
    }
    if max >= 1 << g.bpc {
        return Err(PyValueError::new_err(format!(
            "{which}: sample value {max} does not fit bitdepth={}",
            g.bpc
        )));
    }
    Ok(pic)
}

/// Refuses `which`'s plane `i` unless it is memory of `state`'s GPU (by its DLPack device).
fn on_state_device(t: &ffi::Tensor, i: usize, state: &Arc<GpuState>, which: &str) -> PyResult<()> {
    let info = state.device().info();
    let want = match info.vendor {
        vmaf_hip::gpu::Vendor::Nvidia => ffi::DL_CUDA,
        vmaf_hip::gpu::Vendor::Amd => ffi::DL_ROCM,
    };
    let (ty, id) = t.device();
    if ty != want || id != info.vendor_ordinal {
        return Err(PyValueError::new_err(format!(
            "{which}: plane {i} is on DLPack device ({ty}, {id}), the context's GPU is ({want}, {}) ({})",
            info.vendor_ordinal, info.name
        )));
    }
    Ok(())
}

/// A picture over device `planes` in place; each must be a 2-D tensor of its plane's size with
/// unit column stride (rows at any pitch: cropped views, a decoder's padded surfaces) on
/// `state`'s device.
fn device_picture(
    planes: Vec<ffi::Tensor>,
    g: Geometry,
    state: &Arc<GpuState>,
    which: &str,
) -> PyResult<PictureData> {
    let dims = vmaf_hip::picture::plane_dims(g.pix_fmt, g.w, g.h);
    let mut pitched = Vec::with_capacity(planes.len());
    for (i, t) in planes.iter().enumerate() {
        on_state_device(t, i, state, which)?;
        let (shape, strides) = (t.shape(), t.strides());
        let (pw, ph) = dims[i];
        // Rows may lie any distance apart (at least a row); samples within a row must be
        // adjacent. A single row or column needs no particular stride.
        let unit_columns = strides[1] == 1 || shape[1] == 1;
        let pitch = if shape[0] == 1 { shape[1] } else { strides[0] };
        if (shape[1] as usize, shape[0] as usize) != (pw, ph) || !unit_columns || pitch < shape[1] {
            return Err(PyValueError::new_err(format!(
                "{which}: plane {i} on the GPU must be a {ph}x{pw} tensor (rows x columns) with \
                 adjacent samples in each row; got shape {shape:?}, strides {strides:?} (use \
                 .contiguous(), or crop chroma to {pw} columns)"
            )));
        }
        pitched.push((t.address(), pitch as usize));
    }
    ffi::wrap_planes(
        state.device(),
        (g.pix_fmt, g.bpc, g.w, g.h),
        &pitched,
        planes,
    )
    .map_err(py_err)
}

fn take_all(caps: &[Bound<'_, PyAny>]) -> PyResult<Vec<ffi::Tensor>> {
    caps.iter().map(ffi::Tensor::take).collect()
}

fn on_host(planes: &[ffi::Tensor]) -> bool {
    planes.iter().all(|t| {
        matches!(
            t.device().0,
            ffi::DL_CPU | ffi::DL_CUDA_HOST | ffi::DL_ROCM_HOST
        )
    })
}

/// Refuses a reference and a distorted picture of different layouts.
fn same_geometry(gr: Geometry, gd: Geometry) -> PyResult<()> {
    if (gr.pix_fmt, gr.bpc, gr.w, gr.h) != (gd.pix_fmt, gd.bpc, gd.w, gd.h) {
        return Err(PyValueError::new_err(format!(
            "reference ({}x{} {:?} {}-bit) and distorted ({}x{} {:?} {}-bit) differ",
            gr.w, gr.h, gr.pix_fmt, gr.bpc, gd.w, gd.h, gd.pix_fmt, gd.bpc
        )));
    }
    Ok(())
}

/// The semi-planar layout a `pixel_format` names (as FFmpeg does, with or without `le`).
fn semiplanar_format(name: &str) -> Option<SemiPlanar> {
    match name.trim().to_ascii_lowercase().as_str() {
        "nv12" => Some(SemiPlanar::Nv12),
        "p010" | "p010le" => Some(SemiPlanar::P010),
        "p012" | "p012le" => Some(SemiPlanar::P012),
        "p016" | "p016le" => Some(SemiPlanar::P016),
        _ => None,
    }
}

/// The geometry of a semi-planar frame: a `(h, w)` luma plane and its interleaved chroma,
/// `(h / 2, 2 * (w / 2))` or as decoders store it for odd sizes (`(h + 1) / 2` rows,
/// `(w + 1) / 2` pairs), 2-D or `(rows, pairs, 2)`; uint8 for nv12, uint16 for the others.
fn semiplanar_geometry(
    planes: &[ffi::Tensor],
    which: &str,
    fmt: SemiPlanar,
    bitdepth: Option<u32>,
) -> PyResult<Geometry> {
    let bad = |m: String| PyValueError::new_err(format!("{which}: {m}"));
    let name = format!("{fmt:?}").to_ascii_lowercase();
    if planes.len() != 2 {
        return Err(bad(format!(
            "{} planes given: {name} takes 2 (luma, interleaved chroma)",
            planes.len()
        )));
    }
    if bitdepth.is_some_and(|b| b != fmt.bpc()) {
        return Err(bad(format!(
            "{name} holds {}-bit samples, not bitdepth={}",
            fmt.bpc(),
            bitdepth.unwrap_or_default()
        )));
    }
    let want = fmt.bytes_per_sample();
    for (i, t) in planes.iter().enumerate() {
        if t.uint_bytes() != Some(want) {
            return Err(bad(format!(
                "plane {i} is {}: {name} planes are uint{}",
                t.dtype_name(),
                8 * want
            )));
        }
    }
    let luma = planes[0].shape();
    let [h, w] = luma[..] else {
        return Err(bad(format!(
            "plane 0 has shape {luma:?}: the luma should be a 2-D array (rows, columns)"
        )));
    };
    if h <= 0 || w <= 0 {
        return Err(bad(format!("plane 0 has shape {luma:?}: empty")));
    }
    let fits = |n: i64, full: i64| n == full >> 1 || n == (full + 1) >> 1;
    match planes[1].rows() {
        Some((rows, cols, _, _)) if fits(rows, h) && cols % 2 == 0 && fits(cols / 2, w) => {}
        _ => {
            return Err(bad(format!(
                "plane 1 has shape {shape:?}: the interleaved chroma of a {w}x{h} {name} frame \
                 is ({rows}, {cols}) or ({rows}, {pairs}, 2)",
                shape = planes[1].shape(),
                rows = h >> 1,
                cols = 2 * (w >> 1),
                pairs = w >> 1
            )))
        }
    }
    Ok(Geometry {
        pix_fmt: PixelFormat::Yuv420p,
        bpc: fmt.bpc(),
        w: w as usize,
        h: h as usize,
    })
}

/// The planar picture of a semi-planar frame in host memory (any strides).
fn semiplanar_host_picture(
    planes: &[ffi::Tensor],
    fmt: SemiPlanar,
    g: Geometry,
) -> Result<PictureData, Error> {
    if fmt.bytes_per_sample() == 1 {
        unpack_copied::<u8>(planes, fmt, g, |luma, chroma| HostSemiPlanar::U8 {
            luma,
            chroma,
        })
    } else {
        unpack_copied::<u16>(planes, fmt, g, |luma, chroma| HostSemiPlanar::U16 {
            luma,
            chroma,
        })
    }
}

/// Packed rows of samples and their pitch.
type Rows<'a, T> = (&'a [T], usize);

/// [`semiplanar_host_picture`] for samples of type `T`, which `frame` names.
fn unpack_copied<T: Copy + Default + Into<u32>>(
    planes: &[ffi::Tensor],
    fmt: SemiPlanar,
    g: Geometry,
    frame: for<'a> fn(Rows<'a, T>, Rows<'a, T>) -> HostSemiPlanar<'a>,
) -> Result<PictureData, Error> {
    let (cw, ch) = SemiPlanar::chroma_dims(g.w, g.h);
    let y = copied::<T>(&planes[0], g.h, g.w)?;
    let c = copied::<T>(&planes[1], ch, 2 * cw)?;
    semiplanar::unpack_host(fmt, g.w, g.h, frame((&y, g.w), (&c, 2 * cw)))
}

/// The first `h` rows of `w` samples of a host tensor, packed.
fn copied<T: Copy + Default + Into<u32>>(
    t: &ffi::Tensor,
    h: usize,
    w: usize,
) -> Result<Vec<T>, Error> {
    let n = h.checked_mul(w).ok_or_else(|| inval("plane too large"))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::NoMem(format!("no memory for a plane of {n} samples")))?;
    v.resize(n, T::default());
    if n > 0 {
        t.copy_2d(h, w, &mut v, w)
            .map_err(|e| inval(format!("plane does not fit: {e}")))?;
    }
    Ok(v)
}

/// The luma and chroma of a semi-planar frame in GPU memory, each `(address, pitch in
/// samples)`: on `state`'s device, samples adjacent within rows.
fn semiplanar_device_planes(
    planes: &[ffi::Tensor],
    fmt: SemiPlanar,
    state: &Arc<GpuState>,
    which: &str,
) -> PyResult<[(u64, usize); 2]> {
    let mut out = [(0u64, 0usize); 2];
    for (i, t) in planes.iter().enumerate() {
        on_state_device(t, i, state, which)?;
        let Some((rows, cols, rs, cs)) = t.rows() else {
            return Err(PyValueError::new_err(format!(
                "{which}: plane {i}: not 2-D"
            )));
        };
        let pitch = if rows == 1 { cols } else { rs };
        if (cs != 1 && cols > 1) || pitch < cols {
            return Err(PyValueError::new_err(format!(
                "{which}: {fmt:?} plane {i} on the GPU must have adjacent samples in each row and \
                 rows at least a row apart; got shape {:?}, strides {:?}",
                t.shape(),
                t.strides()
            )));
        }
        out[i] = (t.address(), pitch as usize);
    }
    Ok(out)
}

impl Inner {
    /// `res`, remembered when it is a library error (see `failed`).
    fn record<R>(&mut self, res: Result<R, Error>) -> Result<R, Error> {
        res.inspect_err(|e| self.failed = Some(e.to_string()))
    }
}

impl PyContext {
    /// The context's one GPU state and whether its extractors read chroma, for `which`'s
    /// tensors in GPU memory.
    fn gpu_target(&self, py: Python<'_>, which: &str) -> PyResult<(Arc<GpuState>, bool)> {
        // Without the GIL: another thread may hold the lock while the library waits for
        // workers whose tensors' deleters need the GIL.
        let found = py.detach(|| {
            let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.as_ref().map(|inner| {
                let chroma = inner.ctx.reads_chroma();
                (inner.ctx.gpu_states().to_vec(), chroma)
            })
        });
        match found {
            None => Err(PyValueError::new_err("the context is closed")),
            Some((states, chroma)) => match states.as_slice() {
                [one] => Ok((one.clone(), chroma)),
                [] => Err(PyValueError::new_err(format!(
                    "{which}: GPU tensors need a context with backend=\"hip\" (this one is \
                     {:?}); pass host arrays",
                    self.backend
                ))),
                _ => Err(PyValueError::new_err(format!(
                    "{which}: GPU tensors need a context on one device (device=N), not \
                     device=\"all\""
                ))),
            },
        }
    }

    /// Both pictures of a frame: `geometry` checks each side's planes, `host` copies host
    /// planes into a picture, `device` wraps GPU planes (given the state and whether chroma is
    /// read).
    fn pair(
        &self,
        py: Python<'_>,
        (rt, dt): (Vec<ffi::Tensor>, Vec<ffi::Tensor>),
        geometry: impl Fn(&[ffi::Tensor], &str) -> PyResult<Geometry>,
        host: impl Fn(&[ffi::Tensor], Geometry, &str) -> PyResult<PictureData>,
        device: impl Fn(Vec<ffi::Tensor>, Geometry, &Arc<GpuState>, bool, &str) -> PyResult<PictureData>,
    ) -> PyResult<(Picture, Picture, Geometry)> {
        let gr = geometry(&rt, "reference")?;
        let gd = geometry(&dt, "distorted")?;
        same_geometry(gr, gd)?;
        let picture = |planes: Vec<ffi::Tensor>, which: &str| -> PyResult<Picture> {
            if on_host(&planes) {
                let p = host(&planes, gr, which)?;
                // The copy is made: the producer gets its memory back now (with the GIL).
                drop(planes);
                return Ok(Arc::new(p));
            }
            let (state, chroma) = self.gpu_target(py, which)?;
            Ok(Arc::new(device(planes, gr, &state, chroma, which)?))
        };
        let r = picture(rt, "reference")?;
        match picture(dt, "distorted") {
            Ok(d) => Ok((r, d, gr)),
            Err(e) => {
                // A device picture's drop waits for the GPU: not with the GIL held.
                py.detach(move || drop(r));
                Err(e)
            }
        }
    }

    /// Both pictures of a frame of planar planes (1 or 3 each).
    fn planar_pair(
        &self,
        py: Python<'_>,
        planes: (Vec<ffi::Tensor>, Vec<ffi::Tensor>),
        pf: Option<PixelFormat>,
        bitdepth: Option<u32>,
    ) -> PyResult<(Picture, Picture, Geometry)> {
        self.pair(
            py,
            planes,
            |t, which| geometry(t, which, pf, bitdepth),
            host_picture,
            |t, g, state, _, which| device_picture(t, g, state, which),
        )
    }

    /// Both pictures of a frame of semi-planar planes (luma, interleaved chroma), made planar.
    fn semiplanar_pair(
        &self,
        py: Python<'_>,
        fmt: SemiPlanar,
        planes: (Vec<ffi::Tensor>, Vec<ffi::Tensor>),
        bitdepth: Option<u32>,
    ) -> PyResult<(Picture, Picture, Geometry)> {
        self.pair(
            py,
            planes,
            |t, which| semiplanar_geometry(t, which, fmt, bitdepth),
            |t, g, _| semiplanar_host_picture(t, fmt, g).map_err(py_err),
            |t, g, state, chroma, which| {
                let pitched = semiplanar_device_planes(&t, fmt, state, which)?;
                ffi::wrap_semiplanar(state, fmt, (g.w, g.h), pitched, chroma, t).map_err(py_err)
            },
        )
    }

    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<R, Error> + Send,
    ) -> PyResult<R> {
        let out = py.detach(|| {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let Some(inner) = g.as_mut() else {
                return Some(Err(inval("the context is closed")));
            };
            if let Some(m) = &inner.failed {
                return Some(Err(Error::Invalid(format!(
                    "the context failed earlier ({m}); its scores would be incomplete: close it \
                     and score with a new one"
                ))));
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(inner))) {
                Ok(r) => Some(r),
                Err(_) => {
                    // Its state is unknown after a panic: later calls refuse it.
                    inner.failed = Some(PANICKED.into());
                    None
                }
            }
        });
        match out {
            Some(r) => r.map_err(py_err),
            None => Err(PyRuntimeError::new_err(PANICKED)),
        }
    }

    /// Runs `f` on the state (None once closed) under the lock, taken without the GIL: the
    /// thread holding it may be waiting for library workers whose tensors' deleters need the
    /// GIL, so waiting for it with the GIL held can deadlock.
    fn peek<R: Send>(&self, py: Python<'_>, f: impl FnOnce(Option<&Inner>) -> R + Send) -> R {
        py.detach(|| {
            let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            f(g.as_ref())
        })
    }
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (models, features, backend, device, threads, subsample, cpumask, gpumask))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        models: Vec<String>,
        features: Vec<(String, Vec<(String, String)>)>,
        backend: &str,
        device: Option<Bound<'_, PyAny>>,
        threads: u32,
        subsample: u32,
        cpumask: u64,
        gpumask: u64,
    ) -> PyResult<Self> {
        let b = parse_backend(backend, device.as_ref())?;
        let setup = Setup::new(models, features, b, threads, subsample, cpumask, gpumask)
            .map_err(py_err)?;
        let (ctx, models) = detached(py, || setup.context(false))?;
        Ok(PyContext {
            inner: Mutex::new(Some(Inner {
                ctx,
                models,
                frames: 0,
                first: None,
                failed: None,
            })),
            backend: backend.to_string(),
        })
    }

    /// Submits one frame: `ref_caps` and `dist_caps` are DLPack capsules of the planes (1 or
    /// 3 each, or luma and interleaved chroma for the semi-planar formats nv12, p010, p012,
    /// p016), consumed here. Host planes are copied; GPU planes are scored in place.
    #[pyo3(signature = (ref_caps, dist_caps, pixel_format=None, bitdepth=None))]
    fn read(
        &self,
        py: Python<'_>,
        ref_caps: Vec<Bound<'_, PyAny>>,
        dist_caps: Vec<Bound<'_, PyAny>>,
        pixel_format: Option<String>,
        bitdepth: Option<u32>,
    ) -> PyResult<()> {
        let semi = pixel_format.as_deref().and_then(semiplanar_format);
        let pf = match (&pixel_format, semi) {
            (Some(p), None) => Some(vmaf_hip::io::raw_pixel_format(p).map_err(py_err)?),
            _ => None,
        };
        let rt = take_all(&ref_caps)?;
        let dt = take_all(&dist_caps)?;
        let (r, d, gr) = match semi {
            Some(fmt) => self.semiplanar_pair(py, fmt, (rt, dt), bitdepth)?,
            None => self.planar_pair(py, (rt, dt), pf, bitdepth)?,
        };
        let geom = (gr.pix_fmt, gr.bpc, gr.w, gr.h);
        let mut refusal = None;
        let res = self.with(py, |inner| {
            // Mistakes that leave the scores whole are refused here, before the library (whose
            // errors mark the context failed).
            if inner.ctx.is_flushed() {
                refusal = Some("the context is flushed: no more frames".to_string());
                return Ok(());
            }
            match inner.first {
                Some(f) if f != geom => {
                    refusal = Some(format!(
                        "frame {}: {}x{} {:?} {}-bit, the first frame was {}x{} {:?} {}-bit",
                        inner.frames, geom.2, geom.3, geom.0, geom.1, f.2, f.3, f.0, f.1
                    ));
                    return Ok(());
                }
                _ => inner.first = Some(geom),
            }
            let n = inner.frames;
            let res = inner.ctx.read_pictures(r, d, n);
            inner.record(res.map_err(context(format!("frame {n}"))))?;
            inner.frames += 1;
            Ok(())
        });
        match refusal {
            Some(m) => Err(PyValueError::new_err(m)),
            None => res,
        }
    }

    /// Scores the frames still in flight; no frames can be read afterwards.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |inner| {
            if inner.frames == 0 {
                return Err(inval("no frames were read"));
            }
            if inner.ctx.is_flushed() {
                return Ok(());
            }
            let res = inner.ctx.flush().map_err(context("flushing the context"));
            inner.record(res)
        })
    }

    /// The scores as `vmaf --json` writes them (flushes first).
    fn json(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |inner| {
            if inner.frames == 0 {
                return Err(inval("no frames were scored"));
            }
            let res = finish_json(&mut inner.ctx, &inner.models, inner.frames);
            inner.record(res)
        })
    }

    /// Frames read so far.
    #[getter]
    fn frames(&self, py: Python<'_>) -> usize {
        self.peek(py, |i| i.map_or(0, |i| i.frames))
    }

    #[getter]
    fn flushed(&self, py: Python<'_>) -> bool {
        self.peek(py, |i| i.is_some_and(|i| i.ctx.is_flushed()))
    }

    /// The GPUs the context scores on, described.
    #[getter]
    fn devices(&self, py: Python<'_>) -> Vec<String> {
        self.peek(py, |i| {
            let Some(i) = i else { return Vec::new() };
            i.ctx
                .gpu_states()
                .iter()
                .map(|s| {
                    let d = s.device().info();
                    format!("{}: {} [{}]", d.ordinal, d.name, d.vendor.name())
                })
                .collect()
        })
    }

    /// Lets the context go (its workers, GPU buffers and any frames still held).
    fn close(&self, py: Python<'_>) {
        // Without the GIL, the lock too (see `peek`).
        py.detach(|| {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(inner);
        });
    }
}

impl Drop for PyContext {
    fn drop(&mut self) {
        let inner = self
            .inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if inner.is_some() {
            // Without the GIL: dropping may wait for workers whose tensors' deleters take it.
            // Where the interpreter is gone, the closure (and the context) simply drops.
            let _ = Python::try_attach(move |py| py.detach(move || drop(inner)));
        }
    }
}

/// The GPUs the library sees, one line each (empty without a usable runtime).
#[pyfunction]
fn devices(py: Python<'_>) -> Vec<String> {
    py.detach(vmaf_hip::gpu::describe_devices)
}

/// Why no GPU is usable, or None when one is.
#[pyfunction]
fn gpu_unavailable_reason(py: Python<'_>) -> Option<String> {
    py.detach(|| match GpuState::new(None) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    })
}

/// Tests only: a panic inside the library boundary, which must reach Python as a catchable
/// `RuntimeError`.
#[pyfunction]
fn _test_panic(py: Python<'_>) -> PyResult<()> {
    detached(py, || -> Result<(), Error> { panic!("a test panic") })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("libvmaf_version", vmaf_hip::VMAF_VERSION)?;
    m.add("NoDeviceError", m.py().get_type::<NoDeviceError>())?;
    m.add_function(wrap_pyfunction!(score_files_json, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_unavailable_reason, m)?)?;
    m.add_class::<PyContext>()?;
    m.add_class::<CancelFlag>()?;
    m.add("MAX_THREADS", vmaf_hip::limits::MAX_THREADS)?;
    m.add_class::<ffi::DeviceArray>()?;
    m.add_function(wrap_pyfunction!(ffi::_test_arrays_freed, m)?)?;
    m.add_function(wrap_pyfunction!(_test_panic, m)?)?;
    Ok(())
}
