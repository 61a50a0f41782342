//! CPU throughput, ours against upstream libvmaf, through the same C ABI harness.
//!
//! Each library is `dlopen`ed (ours: `target/release/libvmaf_hip.so`, or the fresher copy
//! `cargo bench` leaves in `target/release/deps/`, or `--lib PATH`; upstream: the `libvmaf.so`
//! that `VMAF_UPSTREAM_LIB` names, v3.2.0, same ABI) and scores the same synthetic frames, held
//! in memory, with the default model (vmaf_v0.6.1): per frame a `vmaf_picture_alloc` and a copy
//! from the in-memory frame (what FFmpeg's `libvmaf` filter does), then `vmaf_read_pictures`.
//! The flush and `vmaf_score_pooled` are inside the timing; context and model set-up are not.
//!
//! Rows: every input (1080p/2160p, 8/10-bit) at every thread count ("1" = `n_threads` 0, the
//! synchronous caller-thread path; "N" = `n_threads` N workers; "all" = the cores here) and
//! every CPU level (`cpumask` 255 = scalar, 16 = AVX2 at most, 0 = best; masks that give ours
//! the same level as an earlier one are skipped), for both libraries: fps (wall clock) and CPU
//! milliseconds per frame (the process's CPU time: the steadier figure on a shared machine).
//! The ratio columns compare ours with upstream at the same thread count, fps (ours / upstream)
//! and CPU per frame (upstream / ours), first at the same cpumask, then at upstream's best.
//! The summary adds ours best / ours scalar and the thread scaling of ours at its best level.
//!
//! Checks (the run fails otherwise): ours gives the same pooled VMAF, bit for bit, at every
//! level and thread count; ours and upstream's C path (cpumask 255) agree to 1e-6. Where
//! upstream's SIMD rows differ from ours at all, both values are printed.
//!
//! With `VMAF_UPSTREAM` set to an upstream `vmaf` CLI binary (or `--cli` for ours alone), the
//! CLIs (ours: `target/release/vmaf`) also score the same frames written once to raw `.yuv`
//! files under `target/bench-cpu/` (removed afterwards), timed end to end beside the read-only
//! floor (`cat` of both files, from the page cache).
//!
//! `cargo bench --bench cpu [-- --frames N (16) --sizes 1080p,2160p --bpc 8,10 --threads 1,all
//!  --levels scalar,avx2,best --reps N (best of) --distinct N (pairs cycled, 8) --lib PATH --cli
//!  --model VERSION (a built-in model of both libraries, vmaf_v0.6.1) --quick (8 frames, 1080p
//!  8-bit, 1 thread)]`

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use libloading::Library;
use vmaf_hip::simd::CpuLevel;

/// The built-in model both libraries load (`--model`).
static MODEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn model_version() -> &'static str {
    MODEL.get().map_or("vmaf_v0.6.1", String::as_str)
}

// ---------------------------------------------------------------------------------------------
// The C ABI (include/libvmaf/*.h; identical in upstream v3.2.0), declared here rather than taken
// from the crate so the harness treats both libraries alike.

#[repr(C)]
#[derive(Clone, Copy)]
struct VmafConfiguration {
    log_level: c_int,
    n_threads: c_uint,
    n_subsample: c_uint,
    cpumask: u64,
    gpumask: u64,
}

#[repr(C)]
struct VmafPicture {
    pix_fmt: c_int,
    bpc: c_uint,
    w: [c_uint; 3],
    h: [c_uint; 3],
    stride: [isize; 3],
    data: [*mut c_void; 3],
    reference: *mut c_void,
    private: *mut c_void,
}

#[repr(C)]
struct VmafModelConfig {
    name: *const c_char,
    flags: u64,
}

// The layouts must match the crate's own C types (which the header is generated from).
const _: () = {
    use std::mem::size_of;
    assert!(
        size_of::<VmafConfiguration>() == size_of::<vmaf_hip::ffi::libvmaf::VmafConfiguration>()
    );
    assert!(size_of::<VmafPicture>() == size_of::<vmaf_hip::ffi::picture::VmafPicture>());
    assert!(size_of::<VmafModelConfig>() == size_of::<vmaf_hip::ffi::model::VmafModelConfig>());
};

const PIX_FMT_YUV420P: c_int = 1;
const POOL_MEAN: c_int = 3;
const LOG_NONE: c_int = 0;

type InitFn = unsafe extern "C" fn(*mut *mut c_void, VmafConfiguration) -> c_int;
type ModelLoadFn =
    unsafe extern "C" fn(*mut *mut c_void, *mut VmafModelConfig, *const c_char) -> c_int;
type UseFeaturesFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type PictureAllocFn =
    unsafe extern "C" fn(*mut VmafPicture, c_int, c_uint, c_uint, c_uint) -> c_int;
type PictureUnrefFn = unsafe extern "C" fn(*mut VmafPicture) -> c_int;
type ReadPicturesFn =
    unsafe extern "C" fn(*mut c_void, *mut VmafPicture, *mut VmafPicture, c_uint) -> c_int;
type ScorePooledFn =
    unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, *mut f64, c_uint, c_uint) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type ModelDestroyFn = unsafe extern "C" fn(*mut c_void);
type VersionFn = unsafe extern "C" fn() -> *const c_char;

/// One loaded libvmaf: the entry points the harness calls.
struct Lib {
    name: &'static str,
    path: PathBuf,
    version: String,
    init: InitFn,
    model_load: ModelLoadFn,
    use_features: UseFeaturesFn,
    picture_alloc: PictureAllocFn,
    picture_unref: PictureUnrefFn,
    read_pictures: ReadPicturesFn,
    score_pooled: ScorePooledFn,
    close: CloseFn,
    model_destroy: ModelDestroyFn,
    /// Keeps the code the pointers above point into mapped.
    _lib: Library,
}

impl Lib {
    fn open(name: &'static str, path: &Path) -> Result<Lib, String> {
        // SAFETY: a libvmaf build (ours or upstream's); its initialisers only set up its own
        // state. libloading opens it RTLD_LOCAL, so the two libraries' `vmaf_*` symbols stay
        // apart (neither binds to the other's).
        let lib = unsafe { Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        /// `name` from `lib`, as the function type the C header declares for it.
        fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
            // SAFETY: every `T` requested below is the signature include/libvmaf/*.h gives the
            // symbol; the pointer is used only while `lib` (kept in `Lib`) is loaded.
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| format!("{name}: {e}"))
        }
        let version = match sym::<VersionFn>(&lib, "vmaf_version") {
            // SAFETY: returns a static NUL-terminated string.
            Ok(f) => unsafe { CStr::from_ptr(f()) }
                .to_string_lossy()
                .into_owned(),
            Err(_) => "?".into(),
        };
        Ok(Lib {
            name,
            path: path.to_path_buf(),
            version,
            init: sym(&lib, "vmaf_init")?,
            model_load: sym(&lib, "vmaf_model_load")?,
            use_features: sym(&lib, "vmaf_use_features_from_model")?,
            picture_alloc: sym(&lib, "vmaf_picture_alloc")?,
            picture_unref: sym(&lib, "vmaf_picture_unref")?,
            read_pictures: sym(&lib, "vmaf_read_pictures")?,
            score_pooled: sym(&lib, "vmaf_score_pooled")?,
            close: sym(&lib, "vmaf_close")?,
            model_destroy: sym(&lib, "vmaf_model_destroy")?,
            _lib: lib,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic content: a deterministic scene with smooth gradients, two octaves of cloud-like
// texture, fine stripes, film grain, a slow camera pan and a few sharp-edged objects moving
// faster; the distorted frame is the reference blurred and quantised. Coordinates are in 1080p
// units, so 2160p shows the same scene at twice the resolution.

/// One frame: the three planes of 4:2:0, packed (rows `w` samples apart), as bytes (8-bit) or
/// native-endian u16 (deeper).
struct Frame {
    planes: [Vec<u8>; 3],
}

struct Input {
    label: String,
    w: u32,
    h: u32,
    bpc: u32,
    /// Distinct (reference, distorted) pairs, cycled over the scored frames.
    pairs: Vec<(Frame, Frame)>,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [-1, 1) from integer coordinates.
fn hash2(x: i64, y: i64, seed: u64) -> f32 {
    let h = mix(seed ^ mix((x as u64) ^ mix(y as u64)));
    (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Value noise: lattice values every `cell` units, smoothly interpolated.
fn value_noise(u: f32, v: f32, cell: f32, seed: u64) -> f32 {
    let (fu, fv) = (u / cell, v / cell);
    let (iu, iv) = (fu.floor(), fv.floor());
    let (tu, tv) = (fu - iu, fv - iv);
    let (su, sv) = (tu * tu * (3.0 - 2.0 * tu), tv * tv * (3.0 - 2.0 * tv));
    let (x, y) = (iu as i64, iv as i64);
    let a = hash2(x, y, seed) + (hash2(x + 1, y, seed) - hash2(x, y, seed)) * su;
    let b = hash2(x, y + 1, seed) + (hash2(x + 1, y + 1, seed) - hash2(x, y + 1, seed)) * su;
    a + (b - a) * sv
}

/// Reference luma at 8-bit scale (unclamped) at scene point (u, v), frame `t`, plus `grain`.
fn scene_luma(u: f32, v: f32, t: f32, grain: f32) -> f32 {
    // Camera pan: 2 units per frame to the left.
    let pu = u + 2.0 * t;
    let mut y = 40.0 + 110.0 * (u / 1920.0) + 45.0 * (v / 1080.0);
    y += 28.0 * value_noise(pu, v, 96.0, 1) + 14.0 * value_noise(pu, v, 20.0, 2);
    y += 9.0 * (pu * 0.23 + v * 0.06).sin() * (0.6 + 0.4 * (v * 0.011).sin());
    // Objects with sharp edges, moving at their own speeds (wrapping around the frame).
    const OBJ: [(f32, f32, f32, f32, f32, f32, f32); 5] = [
        // x0, y0, vx, vy, half-width, half-height, brightness
        (300.0, 250.0, 7.0, 1.5, 160.0, 90.0, 55.0),
        (1200.0, 700.0, -5.0, -2.0, 120.0, 140.0, -45.0),
        (900.0, 300.0, 3.0, 4.0, 60.0, 60.0, 70.0),
        (1600.0, 200.0, -9.0, 0.5, 200.0, 40.0, -35.0),
        (500.0, 850.0, 11.0, -1.0, 90.0, 110.0, 40.0),
    ];
    for (k, &(x0, y0, vx, vy, hw, hh, b)) in OBJ.iter().enumerate() {
        let cx = (x0 + vx * t).rem_euclid(2200.0) - 140.0;
        let cy = (y0 + vy * t).rem_euclid(1240.0) - 80.0;
        if (u - cx).abs() < hw && (v - cy).abs() < hh {
            // Each object carries its own texture.
            y += b + 10.0 * value_noise(u - cx, v - cy, 12.0, 10 + k as u64);
        }
    }
    // A moving disk with a checker pattern.
    let (dx, dy) = (u - (700.0 + 6.0 * t).rem_euclid(1920.0), v - 540.0);
    if dx * dx + dy * dy < 150.0 * 150.0 {
        let on = ((dx + 200.0) as i32 / 24 + (dy + 200.0) as i32 / 24) % 2 == 0;
        y += if on { 50.0 } else { -30.0 };
    }
    y + grain
}

fn quantise(v: f32, step: f32, max: f32) -> u16 {
    ((v / step).round() * step).clamp(0.0, max) as u16
}

/// Separable [1 4 6 4 1] / 16 blur with clamped edges.
fn blur(src: &[u16], w: usize, h: usize) -> Vec<f32> {
    const K: [f32; 5] = [1.0, 4.0, 6.0, 4.0, 1.0];
    let mut tmp = vec![0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let mut s = 0.0;
            for (i, k) in K.iter().enumerate() {
                let xx = (x as isize + i as isize - 2).clamp(0, w as isize - 1) as usize;
                s += k * src[y * w + xx] as f32;
            }
            tmp[y * w + x] = s / 16.0;
        }
    }
    let mut out = vec![0f32; w * h];
    for y in 0..h {
        for (i, k) in K.iter().enumerate() {
            let yy = (y as isize + i as isize - 2).clamp(0, h as isize - 1) as usize;
            let (dst, row) = (&mut out[y * w..][..w], &tmp[yy * w..][..w]);
            for (d, s) in dst.iter_mut().zip(row) {
                *d += k * s / 16.0;
            }
        }
    }
    out
}

fn pack(samples: &[u16], bpc: u32) -> Vec<u8> {
    if bpc == 8 {
        samples.iter().map(|&v| v as u8).collect()
    } else {
        samples.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }
}

fn make_pair(w: usize, h: usize, bpc: u32, t: usize) -> (Frame, Frame) {
    let scale = 1920.0 / w as f32;
    let depth = (1u32 << (bpc - 8)) as f32;
    let max = ((1u32 << bpc) - 1) as f32;
    let tf = t as f32;
    let seed = 1000 + t as u64;
    let mut luma = vec![0u16; w * h];
    for y in 0..h {
        for x in 0..w {
            let grain = 4.0 * hash2(x as i64, y as i64, seed);
            let v = scene_luma(x as f32 * scale, y as f32 * scale, tf, grain);
            luma[y * w + x] = (v * depth).round().clamp(0.0, max) as u16;
        }
    }
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let mut cb = vec![0u16; cw * ch];
    let mut cr = vec![0u16; cw * ch];
    for y in 0..ch {
        for x in 0..cw {
            let (u, v) = (x as f32 * 2.0 * scale + 2.0 * tf, y as f32 * 2.0 * scale);
            let b = 128.0
                + 18.0 * value_noise(u, v, 150.0, 3)
                + 1.5 * hash2(x as i64, y as i64, seed ^ 7);
            let r = 128.0 + 14.0 * value_noise(u, v, 110.0, 4) - 20.0 * (v / 1080.0);
            cb[y * cw + x] = (b * depth).round().clamp(0.0, max) as u16;
            cr[y * cw + x] = (r * depth).round().clamp(0.0, max) as u16;
        }
    }
    // Distorted: blurred and quantised luma (steps of 6 at 8-bit scale), coarser chroma.
    let dl: Vec<u16> = blur(&luma, w, h)
        .iter()
        .map(|&v| quantise(v, 6.0 * depth, max))
        .collect();
    let dcb: Vec<u16> = cb
        .iter()
        .map(|&v| quantise(v as f32, 8.0 * depth, max))
        .collect();
    let dcr: Vec<u16> = cr
        .iter()
        .map(|&v| quantise(v as f32, 8.0 * depth, max))
        .collect();
    (
        Frame {
            planes: [pack(&luma, bpc), pack(&cb, bpc), pack(&cr, bpc)],
        },
        Frame {
            planes: [pack(&dl, bpc), pack(&dcb, bpc), pack(&dcr, bpc)],
        },
    )
}

fn make_input(size: &str, bpc: u32, distinct: usize) -> Input {
    let (w, h) = match size {
        "1080p" => (1920, 1080),
        "2160p" => (3840, 2160),
        other => panic!("--sizes: unknown size {other:?} (1080p, 2160p)"),
    };
    let pairs = std::thread::scope(|s| {
        let hs: Vec<_> = (0..distinct)
            .map(|t| s.spawn(move || make_pair(w, h, bpc, t)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    Input {
        label: format!("{size} {bpc}-bit"),
        w: w as u32,
        h: h as u32,
        bpc,
        pairs,
    }
}

// ---------------------------------------------------------------------------------------------
// Timing through the C ABI.

/// CPU time of this process (all threads), seconds.
fn process_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU time of the waited-for children, seconds.
fn children_cpu_s() -> f64 {
    // SAFETY: all-zero is a valid rusage; valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

struct Measured {
    wall_s: f64,
    cpu_s: f64,
    score: f64,
}

/// A fresh picture from `lib`, filled from `frame` row by row (the library's stride may be
/// wider than the packed rows).
fn picture_from(lib: &Lib, input: &Input, frame: &Frame) -> VmafPicture {
    // SAFETY: all-zero is the empty VmafPicture, which alloc fills in.
    let mut pic: VmafPicture = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    let rc = unsafe { (lib.picture_alloc)(&mut pic, PIX_FMT_YUV420P, input.bpc, input.w, input.h) };
    assert_eq!(rc, 0, "{}: vmaf_picture_alloc failed", lib.name);
    let bps = if input.bpc == 8 { 1 } else { 2 };
    for (p, src) in frame.planes.iter().enumerate() {
        let (rows, row_bytes) = (pic.h[p] as usize, pic.w[p] as usize * bps);
        let stride = pic.stride[p];
        assert!(stride >= row_bytes as isize && src.len() == rows * row_bytes);
        for (y, src_row) in src.chunks_exact(row_bytes).enumerate() {
            // SAFETY: the library allocated `h[p]` rows of `stride[p]` (>= row_bytes) bytes at
            // `data[p]`; `y < h[p]`; the source row is `row_bytes` long.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src_row.as_ptr(),
                    pic.data[p].cast::<u8>().offset(y as isize * stride),
                    row_bytes,
                );
            }
        }
    }
    pic
}

/// Scores `frames` frames of `input` (pairs cycled) with a fresh context.
fn measure(lib: &Lib, input: &Input, frames: usize, n_threads: u32, cpumask: u64) -> Measured {
    let cfg = VmafConfiguration {
        log_level: LOG_NONE,
        n_threads,
        n_subsample: 1,
        cpumask,
        // Ours: CPU extractors only, even where a GPU is present (upstream ignores it unless
        // a CUDA state is imported).
        gpumask: 1,
    };
    let name = CString::new("vmaf").unwrap();
    let version = CString::new(model_version()).unwrap();
    let mut mcfg = VmafModelConfig {
        name: name.as_ptr(),
        flags: 0,
    };
    let (mut ctx, mut model) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers and NUL-terminated strings that outlive the calls.
    unsafe {
        assert_eq!((lib.init)(&mut ctx, cfg), 0, "{}: vmaf_init", lib.name);
        assert_eq!(
            (lib.model_load)(&mut model, &mut mcfg, version.as_ptr()),
            0,
            "{}: vmaf_model_load",
            lib.name
        );
        assert_eq!(
            (lib.use_features)(ctx, model),
            0,
            "{}: use_features",
            lib.name
        );
    }

    let (t0, c0) = (Instant::now(), process_cpu_s());
    for i in 0..frames {
        let (r, d) = &input.pairs[i % input.pairs.len()];
        let mut rp = picture_from(lib, input, r);
        let mut dp = picture_from(lib, input, d);
        // SAFETY: live context; pictures from this library, handed over to it.
        let rc = unsafe { (lib.read_pictures)(ctx, &mut rp, &mut dp, i as c_uint) };
        if rc != 0 {
            // SAFETY: pictures from this library; unref of one already taken over (data and
            // reference cleared) is a no-op.
            unsafe {
                (lib.picture_unref)(&mut rp);
                (lib.picture_unref)(&mut dp);
            }
            panic!("{}: vmaf_read_pictures({i}) returned {rc}", lib.name);
        }
    }
    let mut score = f64::NAN;
    // SAFETY: NULL pictures flush; live handles and a valid out-pointer.
    unsafe {
        let rc = (lib.read_pictures)(ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0);
        assert_eq!(rc, 0, "{}: flush", lib.name);
        let rc = (lib.score_pooled)(ctx, model, POOL_MEAN, &mut score, 0, frames as c_uint - 1);
        assert_eq!(rc, 0, "{}: vmaf_score_pooled", lib.name);
    }
    let m = Measured {
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: process_cpu_s() - c0,
        score,
    };
    // SAFETY: live handles, released once.
    unsafe {
        assert_eq!((lib.close)(ctx), 0, "{}: vmaf_close", lib.name);
        (lib.model_destroy)(model);
    }
    m
}

/// Best (fastest) of `reps` measurements; every repetition must give the same score.
fn measure_best(lib: &Lib, input: &Input, a: &Args, n_threads: u32, cpumask: u64) -> Measured {
    let mut best: Option<Measured> = None;
    for _ in 0..a.reps.max(1) {
        let m = measure(lib, input, a.frames, n_threads, cpumask);
        if let Some(b) = &best {
            assert_eq!(
                b.score.to_bits(),
                m.score.to_bits(),
                "{}: score changed between repetitions",
                lib.name
            );
        }
        if best.as_ref().is_none_or(|b| m.wall_s < b.wall_s) {
            best = Some(m);
        }
    }
    best.unwrap()
}

// ---------------------------------------------------------------------------------------------
// Arguments.

struct Args {
    frames: usize,
    distinct: usize,
    sizes: Vec<String>,
    bpcs: Vec<u32>,
    /// (label, n_threads)
    threads: Vec<(String, u32)>,
    /// (label, cpumask)
    levels: Vec<(&'static str, u64)>,
    reps: usize,
    lib: PathBuf,
    cli: bool,
}

const LEVELS: [(&str, u64); 3] = [("scalar", 255), ("avx2", 16), ("best", 0)];

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `target/release/libvmaf_hip.so`, or the copy in `deps/` where that is newer: `cargo bench`
/// rebuilds the library there (as a dependency of the bench) without updating the top-level one.
fn default_lib(root: &Path) -> PathBuf {
    let top = root.join("target/release/libvmaf_hip.so");
    let deps = root.join("target/release/deps/libvmaf_hip.so");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (mtime(&top), mtime(&deps)) {
        (Some(t), Some(d)) if d > t => deps,
        (None, Some(_)) => deps,
        _ => top,
    }
}

fn parse_args() -> Args {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut a = Args {
        frames: 16,
        distinct: 8,
        sizes: list("1080p,2160p"),
        bpcs: vec![8, 10],
        threads: Vec::new(),
        levels: LEVELS.to_vec(),
        reps: 1,
        lib: default_lib(&root),
        cli: false,
    };
    let mut threads = list("1,all");
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    let val = |i: usize, flag: &str| -> String {
        v.get(i + 1)
            .cloned()
            .unwrap_or_else(|| panic!("{flag} needs a value"))
    };
    while i < v.len() {
        let flag = v[i].as_str();
        match flag {
            "--frames" => a.frames = val(i, flag).parse().expect("--frames N"),
            "--distinct" => a.distinct = val(i, flag).parse().expect("--distinct N"),
            "--sizes" => a.sizes = list(&val(i, flag)),
            "--bpc" => {
                a.bpcs = list(&val(i, flag))
                    .iter()
                    .map(|s| s.parse().expect("--bpc 8,10"))
                    .collect()
            }
            "--threads" => threads = list(&val(i, flag)),
            "--levels" => {
                let want = list(&val(i, flag));
                a.levels = LEVELS
                    .iter()
                    .copied()
                    .filter(|(n, _)| want.iter().any(|w| w == n))
                    .collect();
                assert!(!a.levels.is_empty(), "--levels: scalar, avx2, best");
            }
            "--reps" => a.reps = val(i, flag).parse().expect("--reps N"),
            "--lib" => a.lib = PathBuf::from(val(i, flag)),
            "--model" => {
                let _ = MODEL.set(val(i, flag));
            }
            "--cli" => {
                a.cli = true;
                i -= 1;
            }
            "--quick" => {
                a.frames = 8;
                a.sizes = list("1080p");
                a.bpcs = vec![8];
                threads = list("1");
                i -= 1;
            }
            _ => i -= 1, // cargo passes --bench
        }
        i += 2;
    }
    assert!(a.frames >= 2, "--frames: at least 2");
    a.distinct = a.distinct.clamp(1, a.frames);
    for t in threads {
        let n = match t.as_str() {
            "all" => cores,
            s => s.parse().expect("--threads: numbers or `all`"),
        };
        // One thread is the synchronous path (n_threads 0): what a caller gets by default.
        let entry = if n <= 1 {
            ("1".to_string(), 0)
        } else {
            (n.to_string(), n)
        };
        if !a.threads.contains(&entry) {
            a.threads.push(entry);
        }
    }
    a
}

// ---------------------------------------------------------------------------------------------
// The CLI comparison.

fn write_yuv(path: &Path, input: &Input, frames: usize, distorted: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create .yuv"));
    for i in 0..frames {
        let (r, d) = &input.pairs[i % input.pairs.len()];
        for p in &(if distorted { d } else { r }).planes {
            if input.bpc == 8 || cfg!(target_endian = "little") {
                f.write_all(p).expect("write .yuv");
            } else {
                // Raw .yuv is little-endian.
                let le: Vec<u8> = p
                    .chunks_exact(2)
                    .flat_map(|c| u16::from_ne_bytes([c[0], c[1]]).to_le_bytes())
                    .collect();
                f.write_all(&le).expect("write .yuv");
            }
        }
    }
    f.flush().expect("write .yuv");
}

/// Runs `cmd`, returning (wall s, CPU s of the child).
fn time_command(mut cmd: Command) -> (f64, f64) {
    let (t0, c0) = (Instant::now(), children_cpu_s());
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, children_cpu_s() - c0)
}

fn pooled_from_json(path: &Path) -> f64 {
    let text = std::fs::read_to_string(path).expect("read CLI output");
    let v: serde_json::Value = serde_json::from_str(&text).expect("CLI JSON");
    v["pooled_metrics"]["vmaf"]["mean"]
        .as_f64()
        .expect("pooled_metrics.vmaf.mean")
}

fn cli_rows(a: &Args, input: &Input, upstream: Option<&Path>, lib_score: f64) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-cpu");
    std::fs::create_dir_all(&dir).expect("create target/bench-cpu");
    let tag = format!("{}x{}_{}bit", input.w, input.h, input.bpc);
    let (rp, dp) = (
        dir.join(format!("ref_{tag}.yuv")),
        dir.join(format!("dist_{tag}.yuv")),
    );
    write_yuv(&rp, input, a.frames, false);
    write_yuv(&dp, input, a.frames, true);
    let mb = (std::fs::metadata(&rp).unwrap().len() * 2) as f64 / 1e6;

    // Floor: reading both files (from the page cache: the first pass warms it).
    let cat = || {
        let mut c = Command::new("cat");
        c.arg(&rp).arg(&dp);
        c
    };
    time_command(cat());
    let (floor, floor_cpu) = time_command(cat());
    let f = a.frames as f64;
    println!(
        "  CLI  {:<13} read floor (cat, {mb:.0} MB): {:>8.1} fps  CPU {:>7.2} ms/frame",
        input.label,
        f / floor,
        1e3 * floor_cpu / f
    );

    // The workspace's cli package builds it beside this bench's directory (target/release).
    let ours_bin = std::env::var_os("VMAF_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("bench path");
            exe.parent()
                .and_then(|deps| deps.parent())
                .expect("bench in a cargo target directory")
                .join("vmaf")
        });
    assert!(
        ours_bin.exists(),
        "no vmaf tool at {}: `cargo build --release -p vmaf-cli` (or set VMAF_BIN)",
        ours_bin.display()
    );
    let mut bins: Vec<(&str, PathBuf)> = vec![("ours", ours_bin)];
    if let Some(u) = upstream {
        bins.insert(0, ("upstream", u.to_path_buf()));
    }
    for (label, n) in &a.threads {
        let mut up_fps = None;
        for (who, bin) in &bins {
            let json = dir.join(format!("{who}_{tag}.json"));
            let mut cmd = Command::new(bin);
            cmd.arg("-r").arg(&rp).arg("-d").arg(&dp);
            cmd.args(["-w", &input.w.to_string(), "-h", &input.h.to_string()]);
            cmd.args(["-p", "420", "-b", &input.bpc.to_string()]);
            let model = format!("version={}", model_version());
            cmd.args(["--threads", &n.to_string(), "-m", &model, "-q", "--json"]);
            cmd.arg("-o").arg(&json);
            let (wall, cpu) = time_command(cmd);
            let score = pooled_from_json(&json);
            let _ = std::fs::remove_file(&json);
            let fps = f / wall;
            let ratio = match (*who, up_fps) {
                ("upstream", _) => {
                    up_fps = Some(fps);
                    String::new()
                }
                (_, Some(u)) => format!("{:.2}x", fps / u),
                _ => String::new(),
            };
            println!(
                "  CLI  {:<13} {:>3} thr  {:<8} {:>8.2} fps  CPU {:>7.1} ms/frame  VMAF {score:.6}  {ratio}",
                input.label,
                label,
                who,
                fps,
                1e3 * cpu / f
            );
            // The JSON holds 6 decimals; the pooled mean of the same frames agrees with the
            // library's to that rounding.
            if *who == "ours" {
                assert!(
                    (score - lib_score).abs() <= 1e-6,
                    "ours CLI {score} vs library {lib_score}"
                );
            } else if (score - lib_score).abs() > 1e-6 {
                println!(
                    "       note: upstream CLI differs from ours by {:.2e}",
                    score - lib_score
                );
            }
        }
    }
    let _ = std::fs::remove_file(&rp);
    let _ = std::fs::remove_file(&dp);
}

// ---------------------------------------------------------------------------------------------

struct Row {
    input: String,
    threads: String,
    lib: &'static str,
    mask: u64,
    fps: f64,
    cpu_ms: f64,
}

impl Row {
    fn print(&self, level: &str, score: f64, vs: &str) {
        println!(
            "{:<13} {:>4}  {:<9} {:<15} {:>8.2} {:>9.1} {:>11.6}  {vs}",
            self.input, self.threads, self.lib, level, self.fps, self.cpu_ms, score
        );
    }
}

/// `x` as a ratio "1.23x", or blank.
fn ratio(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.2}x")).unwrap_or_default()
}

fn main() {
    let a = parse_args();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ours = Lib::open("ours", &a.lib).unwrap_or_else(|e| {
        panic!("cannot load our library ({e}); build it (cargo build --release) or pass --lib PATH")
    });
    let upstream = std::env::var_os("VMAF_UPSTREAM_LIB")
        .filter(|v| !v.is_empty())
        .map(|p| {
            Lib::open("upstream", Path::new(&p))
                .unwrap_or_else(|e| panic!("VMAF_UPSTREAM_LIB: {e}"))
        });
    let upstream_cli = std::env::var_os("VMAF_UPSTREAM")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);

    println!(
        "CPU benchmark: model {}, {} frames per run ({} distinct pairs cycled, held in memory), \
         picture_alloc + copy per frame, {cores} cores here, best of {} run(s)",
        model_version(),
        a.frames,
        a.distinct,
        a.reps
    );
    println!(
        "ours:     {} ({}), best CPU level here: {}",
        ours.path.display(),
        ours.version,
        CpuLevel::detect()
    );
    match &upstream {
        Some(u) => println!("upstream: {} ({})", u.path.display(), u.version),
        None => println!(
            "upstream: not measured (set VMAF_UPSTREAM_LIB to an upstream libvmaf.so v3.2.0)"
        ),
    }
    println!(
        "levels: cpumask 255 = scalar, 16 = AVX2 at most, 0 = best; threads: 1 = n_threads 0 (synchronous), N = n_threads N"
    );
    println!();
    println!(
        "ratios of ours to upstream at the same thread count: fps, and CPU time per frame \
         (upstream's / ours), each against upstream at the same cpumask and at its best"
    );
    println!();
    println!(
        "{:<13} {:>4}  {:<9} {:<15} {:>8} {:>9} {:>11}  {:>8} {:>8} {:>9} {:>9}",
        "input",
        "thr",
        "library",
        "level (cpumask)",
        "fps",
        "CPU ms/f",
        "VMAF",
        "fps",
        "CPU",
        "fps best",
        "CPU best"
    );

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    // Distinct levels of ours (a mask that resolves to the same level as another is skipped).
    let mut masks: Vec<(&str, u64)> = Vec::new();
    for &(n, m) in &a.levels {
        if !masks
            .iter()
            .any(|&(_, o)| CpuLevel::for_cpumask(o) == CpuLevel::for_cpumask(m))
        {
            masks.push((n, m));
        }
    }
    let frames = a.frames as f64;

    for size in &a.sizes {
        for &bpc in &a.bpcs {
            let t = Instant::now();
            let input = make_input(size, bpc, a.distinct);
            println!(
                "({}: {} frame pairs generated in {:.1} s)",
                input.label,
                input.pairs.len(),
                t.elapsed().as_secs_f64()
            );
            let mut ours_score: Option<f64> = None;
            for (tl, n) in &a.threads {
                let row = |lib, mask, m: &Measured| Row {
                    input: input.label.clone(),
                    threads: tl.clone(),
                    lib,
                    mask,
                    fps: frames / m.wall_s,
                    cpu_ms: 1e3 * m.cpu_s / frames,
                };
                let mut up: Vec<(Row, f64)> = Vec::new();
                if let Some(u) = &upstream {
                    for &(_, m) in &masks {
                        let r = measure_best(u, &input, &a, *n, m);
                        let row = row("upstream", m, &r);
                        row.print(&format!("cpumask {m}"), r.score, "");
                        up.push((row, r.score));
                    }
                }
                for &(_, m) in &masks {
                    let r = measure_best(&ours, &input, &a, *n, m);
                    let row = row("ours", m, &r);
                    let vs = |mask: u64| {
                        let u = up.iter().find(|u| u.0.mask == mask).map(|u| &u.0);
                        format!(
                            "{:>8} {:>8}",
                            ratio(u.map(|u| row.fps / u.fps)),
                            ratio(u.map(|u| u.cpu_ms / row.cpu_ms))
                        )
                    };
                    let level = format!("{} ({m})", CpuLevel::for_cpumask(m));
                    row.print(&level, r.score, &format!("{} {}", vs(m), vs(0)));
                    match ours_score {
                        None => ours_score = Some(r.score),
                        Some(s) if s.to_bits() != r.score.to_bits() => failures.push(format!(
                            "{} {tl} thr cpumask {m}: ours {} differs from ours {s}",
                            input.label, r.score
                        )),
                        _ => {}
                    }
                    rows.push(row);
                }
                // Scores: ours against upstream's C path (asserted), and its SIMD (printed).
                let o = ours_score.unwrap();
                for (u, s) in up {
                    let d = o - s;
                    if u.mask == 255 && d.abs() > 1e-6 {
                        failures.push(format!(
                            "{} {tl} thr: ours {o} vs upstream C {s} ({d:+.2e})",
                            input.label
                        ));
                    } else if d != 0.0 {
                        println!(
                            "      note: upstream cpumask {}: {s:.9}, ours {o:.9} ({d:+.2e})",
                            u.mask
                        );
                    }
                    rows.push(u);
                }
            }
            if a.cli || upstream_cli.is_some() {
                cli_rows(&a, &input, upstream_cli.as_deref(), ours_score.unwrap());
            }
        }
    }

    println!();
    println!("Summary (same input and thread count; fps ratio, CPU-time ratio in brackets):");
    let find = |input: &str, thr: &str, lib: &str, mask: u64| {
        rows.iter()
            .find(|r| r.input == input && r.threads == thr && r.lib == lib && r.mask == mask)
    };
    let both = |a: Option<&Row>, b: Option<&Row>| {
        a.zip(b)
            .map(|(a, b)| format!("{:.2}x ({:.2}x)", a.fps / b.fps, b.cpu_ms / a.cpu_ms))
    };
    let best_mask = masks.iter().map(|m| m.1).min().unwrap();
    let best = CpuLevel::for_cpumask(best_mask);
    let mut inputs: Vec<&str> = Vec::new();
    for r in &rows {
        if !inputs.contains(&r.input.as_str()) {
            inputs.push(&r.input);
        }
    }
    for input in inputs {
        for (tl, _) in &a.threads {
            let ours_at = |m| find(input, tl, "ours", m);
            let up_at = |m| find(input, tl, "upstream", m);
            let mut parts = Vec::new();
            if let Some(x) = both(ours_at(best_mask), ours_at(255)) {
                parts.push(format!("ours {best} / ours scalar {x}"));
            }
            if let Some(x) = both(ours_at(best_mask), up_at(best_mask)) {
                parts.push(format!("ours / upstream, cpumask {best_mask}: {x}"));
            }
            if let Some(x) = both(ours_at(255), up_at(255)) {
                parts.push(format!("scalar, ours / upstream C: {x}"));
            }
            if !parts.is_empty() {
                println!("  {input:<13} {tl:>3} thr: {}", parts.join("; "));
            }
        }
        // Thread scaling of ours at its best level.
        let one = find(input, "1", "ours", best_mask);
        for (tl, n) in a.threads.iter().filter(|t| t.1 > 1) {
            if let (Some(f), Some(one)) = (find(input, tl, "ours", best_mask), one) {
                println!(
                    "  {input:<13} scaling, ours {best}: {n} threads / 1 thread = {:.2}x fps, \
                     {:.2}x CPU per frame ({cores} cores here)",
                    f.fps / one.fps,
                    f.cpu_ms / one.cpu_ms
                );
            }
        }
    }
    if failures.is_empty() {
        println!(
            "scores: ours identical at every level and thread count{}",
            if upstream.is_some() {
                "; ours and upstream's C path (cpumask 255) agree to 1e-6"
            } else {
                ""
            }
        );
    } else {
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        panic!("{} score check(s) failed", failures.len());
    }
}
