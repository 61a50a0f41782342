//! The paths users take to feed frames, through the C API as a C program (or FFmpeg's filter)
//! does it, each beside its floor measured in the same run: the feeding thread alone, doing
//! the same allocation/fetch and copy without scoring.
//!
//! * `alloc`: a fresh `vmaf_picture_alloc` per picture and a copy from frames in memory (what
//!   FFmpeg's `libvmaf` filter does); floor: allocate, copy, unref.
//! * `pool`: upstream's tool pattern, `vmaf_preallocate_pictures` + `vmaf_fetch_preallocated_picture`;
//!   floor: fetch, copy, unref.
//! * `pinned`: the HIP extension's page-locked pool (`vmaf_hip_preallocate_pictures` with
//!   HOST_PINNED), GPU only; floor as for `pool`.
//! * `premade`: the frames in memory handed over in place (`vmaf_hip_picture_wrap`), the
//!   pre-made figure through the C API; its "floor" is wrapping and releasing alone.
//! * `device`: frames already in GPU memory (as a hardware decoder leaves them), copied device
//!   to device into pictures of a DEVICE pool (`vmaf_hip_preallocate_pictures`) and waited for
//!   (`VMAF_BENCH_COPY=legacy`: on the legacy default stream, not waited for, as FFmpeg's
//!   `libvmaf_cuda` filter does); GPU only; floor: fetch, copy, unref.
//! * `devwrap`: the same frames in GPU memory with pitched rows (as a decoder's surfaces),
//!   handed over in place with `vmaf_hip_picture_wrap_device`: no copy at all; GPU only;
//!   floor: wrapping and releasing alone.
//!
//! * `cli`: the `vmaf` tool end to end on y4m files in the page cache (`--vmaf PATH`); floor:
//!   reading both files to memory, on two threads as the tool does.
//! * `ffmpeg`: FFmpeg's `libvmaf` filter with our patch on the same files (`--ffmpeg PATH`, the
//!   binary from `ffmpeg-patches/test.sh`); floor: FFmpeg decoding both inputs, no filter.
//!
//! For the C API paths the best thread count's feeding-thread time per frame is split into
//! getting pictures (`get`), filling them (`fill`) and `vmaf_read_pictures` (`read`, which
//! includes waiting while too many frames are in flight), so a missed floor shows its cause.
//!
//! Scores go to the GPU when one is present (else the CPU on all cores); every path must give
//! the same pooled VMAF, bit for bit for the C API paths and to the printed digits for the
//! tools (asserted).
//!
//! `--scale G1,G2 [--feeders F1,F2]` replaces the rows above by multi-GPU ones: `g·f` feeding
//! threads at once, each with its own context on one of `g` GPUs (`f` = 0: one feeder whose
//! context spreads frames over all `g`), for the C API paths; aggregate frames per second beside
//! the same threads' floor, and each GPU count's best against the first count's.
//!
//! `cargo bench --bench feed [-- --frames N --threads 0,4,16 --only NAME --paths alloc,pool,..
//!  --vmaf PATH --ffmpeg PATH --file-frames N --dir DIR --keep --devices N|all
//!  --scale G1,G2 --feeders F1,F2 --reps R]`
//!
//! `--reps R`: each path's floor and each thread count's scoring run R times (the tools too,
//! and each multi-GPU row, its floor and scoring alternated);
//! the median is printed, with the range in brackets.

#[path = "../tests/common/mod.rs"]
mod common;

use std::ffi::c_uint;
use std::time::Instant;

use vmaf_hip::ffi::hip::{
    vmaf_hip_fetch_preallocated_picture, vmaf_hip_import_state, vmaf_hip_picture_wrap,
    vmaf_hip_picture_wrap_device, vmaf_hip_preallocate_pictures, vmaf_hip_state_free,
    vmaf_hip_state_init, HipStateHandle, VmafHipConfiguration, VmafHipPictureConfiguration,
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE,
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED,
};
use vmaf_hip::ffi::libvmaf::{
    vmaf_close, vmaf_fetch_preallocated_picture, vmaf_init, vmaf_preallocate_pictures,
    vmaf_read_pictures, vmaf_score_pooled, vmaf_use_features_from_model, VmafConfiguration,
    VmafContext, VmafPictureConfiguration, VmafPictureParams,
};
use vmaf_hip::ffi::model::{vmaf_model_destroy, vmaf_model_load, VmafModel, VmafModelConfig};
use vmaf_hip::ffi::picture::{vmaf_picture_alloc, vmaf_picture_unref, VmafPicture};
use vmaf_hip::picture::Picture;

/// One input: a few distinct frames (planes packed, rows `w` samples apart) cycled over.
struct Input {
    name: String,
    w: u32,
    h: u32,
    bpc: u32,
    /// Per frame: reference planes and distorted planes, each plane's bytes.
    frames: Vec<[Vec<Vec<u8>>; 2]>,
    /// The same frames in GPU memory (planes back to back), for the `device` path: one copy
    /// per GPU state of the run, in the same order.
    resident: Vec<Resident>,
}

/// Frames in device memory, copied out on a stream of the "decoder's" own and waited for (the
/// faster way on an H200: 5,900 against 4,760 fps at 1080p). `VMAF_BENCH_COPY=legacy`: as
/// FFmpeg's `libvmaf_cuda` filter does, on the legacy default stream, not waited for
/// (`cuMemcpy2D` returns before a device-to-device copy is done; the library orders its reads
/// after it).
struct Resident {
    state: std::sync::Arc<vmaf_hip::gpu::GpuState>,
    frames: Vec<[vmaf_hip::gpu::DeviceBuffer<u8>; 2]>,
    /// The same frames with rows padded to 512 bytes, as `cuMemAllocPitch` lays them out.
    pitched: Vec<[Pitched; 2]>,
}

/// One picture's planes in one device allocation, rows `stride[p]` bytes apart.
struct Pitched {
    _buf: vmaf_hip::gpu::DeviceBuffer<u8>,
    data: [u64; 3],
    stride: [isize; 3],
}

/// Pictures of the `devwrap` path the library has let go (their release callback ran).
static WRAPS_RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn wrap_released(_: *mut std::ffi::c_void) {
    WRAPS_RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Where one feeding thread's device copies go: its own stream (waited for), or the legacy one.
struct Copies {
    stream: vmaf_hip::gpu::Stream,
    legacy: bool,
}

impl Copies {
    fn new(r: &Resident) -> Copies {
        let dev = r.state.device();
        match std::env::var("VMAF_BENCH_COPY").as_deref() {
            Ok("legacy") => Copies {
                stream: vmaf_hip::gpu::Stream::legacy(dev),
                legacy: true,
            },
            _ => Copies {
                stream: vmaf_hip::gpu::Stream::new(dev).expect("copy stream"),
                legacy: false,
            },
        }
    }
}

impl Resident {
    fn new(input: &Input, state: &std::sync::Arc<vmaf_hip::gpu::GpuState>) -> Resident {
        let state = state.clone();
        let frames = input
            .frames
            .iter()
            .map(|f| {
                f.each_ref().map(|planes| {
                    let bytes: Vec<u8> = planes.concat();
                    let mut b = vmaf_hip::gpu::DeviceBuffer::new(state.device(), bytes.len())
                        .expect("device memory");
                    b.upload_blocking(state.stream(), &bytes).expect("upload");
                    b
                })
            })
            .collect();
        let pitched = input
            .frames
            .iter()
            .map(|f| {
                f.each_ref().map(|planes| {
                    let bps = if input.bpc == 8 { 1 } else { 2 };
                    let mut bytes = Vec::new();
                    let mut at = [0usize; 3];
                    let mut stride = [0isize; 3];
                    for (p, plane) in planes.iter().enumerate() {
                        let pw = if p == 0 { input.w } else { input.w / 2 } as usize * bps;
                        let pitch = pw.next_multiple_of(512);
                        (at[p], stride[p]) = (bytes.len(), pitch as isize);
                        for row in plane.chunks(pw) {
                            bytes.extend_from_slice(row);
                            bytes.resize(bytes.len() + pitch - pw, 0);
                        }
                    }
                    let mut b = vmaf_hip::gpu::DeviceBuffer::new(state.device(), bytes.len())
                        .expect("device memory");
                    b.upload_blocking(state.stream(), &bytes).expect("upload");
                    let base = b.ptr().addr();
                    Pitched {
                        data: at.map(|a| base + a as u64),
                        stride,
                        _buf: b,
                    }
                })
            })
            .collect();
        Resident {
            state,
            frames,
            pitched,
        }
    }

    /// Copies frame `fi`'s picture `which` into the device picture `pic`.
    fn copy_into(&self, input: &Input, (fi, which): (usize, usize), pic: &VmafPicture, c: &Copies) {
        let src = &self.frames[fi][which];
        let stream = &c.stream;
        let mut off = 0;
        for (p, plane) in input.frames[fi][which].iter().enumerate() {
            assert_eq!(pic.h[p] as usize * pic.stride[p] as usize, plane.len());
            // SAFETY: `pic` is a device picture of the state's device whose plane `p` holds
            // `plane.len()` bytes (asserted: dense rows); it is ours until read.
            unsafe { src.copy_to_address_async(stream, off, pic.data[p] as u64, plane.len()) }
                .expect("device copy");
            off += plane.len();
        }
        if !c.legacy {
            stream.synchronize().expect("device copies");
        }
    }
}

fn planes_of(pic: &Picture, scale: usize, bpc: u32) -> Vec<Vec<u8>> {
    let shift = bpc - pic.bpc;
    (0..3)
        .map(|p| {
            let (pw, ph) = (pic.w[p] * scale, pic.h[p] * scale);
            let mut out = Vec::with_capacity(pw * ph * 2);
            for y in 0..ph {
                for x in 0..pw {
                    let v = pic.sample(p, x / scale, y / scale) << shift;
                    if bpc == 8 {
                        out.push(v as u8);
                    } else {
                        out.extend_from_slice(&v.to_ne_bytes());
                    }
                }
            }
            out
        })
        .collect()
}

fn load_input(scale: usize, bpc: u32) -> Input {
    let read = |f: &str| {
        let mut r = vmaf_hip::io::open(&common::clip_path(f), None).expect("open clip");
        let mut v = Vec::new();
        while let Some(p) = r.read_frame().expect("read") {
            v.push(p);
        }
        v
    };
    let refs = read("ref_natural_1920x1080_420p8.y4m");
    let dists = read("dist_natural_1920x1080_420p8.y4m");
    Input {
        name: format!("{}x{} {bpc}-bit", 1920 * scale, 1080 * scale),
        w: 1920 * scale as u32,
        h: 1080 * scale as u32,
        bpc,
        frames: refs
            .iter()
            .zip(&dists)
            .map(|(r, d)| [planes_of(r, scale, bpc), planes_of(d, scale, bpc)])
            .collect(),
        resident: Vec::new(),
    }
}

/// Copies `planes` into `pic` row by row (its stride may be wider).
fn fill(pic: &VmafPicture, planes: &[Vec<u8>]) {
    let bps = if pic.bpc == 8 { 1 } else { 2 };
    for (p, src) in planes.iter().enumerate() {
        let row = pic.w[p] as usize * bps;
        if pic.stride[p] == row as isize {
            // SAFETY: as below, with rows back to back on both sides.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    pic.data[p].cast::<u8>(),
                    row * pic.h[p] as usize,
                );
            }
            continue;
        }
        for y in 0..pic.h[p] as usize {
            // SAFETY: `pic` came from the library with `h[p]` rows of `stride[p]` bytes at
            // `data[p]`; `src` holds `h[p]` rows of `row` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr().add(y * row),
                    pic.data[p].cast::<u8>().offset(y as isize * pic.stride[p]),
                    row,
                );
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    Alloc,
    Pool,
    Pinned,
    /// Frames already in memory, handed over in place (`vmaf_hip_picture_wrap`): the
    /// pre-made figure through the C API, no feeding cost.
    Premade,
    /// Frames in device memory copied into a DEVICE pool.
    Device,
    /// Pitched frames in device memory handed over in place.
    DevWrap,
}

impl Path {
    /// Paths that need no GPU.
    fn host(self) -> bool {
        !matches!(self, Path::Pinned | Path::Device | Path::DevWrap)
    }

    fn name(self) -> &'static str {
        match self {
            Path::Alloc => "alloc",
            Path::Pool => "pool",
            Path::Pinned => "pinned",
            Path::Premade => "premade",
            Path::Device => "device",
            Path::DevWrap => "devwrap",
        }
    }
}

/// A context (with the GPU state imported, if any), its model and pool set up for `path`.
struct Session {
    ctx: *mut VmafContext,
    model: *mut VmafModel,
    /// `device`: the frames resident on the context's GPU and this feeder's copy stream.
    copies: Option<(usize, Copies)>,
}

/// A session scoring on `gpu` (all of them, frames spread); `dev` is the index (in the run's
/// state list) of the GPU whose resident frames the `device` path copies from.
fn session(
    input: &Input,
    path: Path,
    threads: u32,
    gpu: &[*mut HipStateHandle],
    dev: usize,
) -> Session {
    let mut ctx = std::ptr::null_mut();
    let mut model = std::ptr::null_mut();
    let cfg = VmafConfiguration {
        log_level: 1,
        n_threads: threads,
        n_subsample: 1,
        cpumask: 0,
        gpumask: 0,
    };
    let params = VmafPictureParams {
        w: input.w,
        h: input.h,
        bpc: input.bpc,
        pix_fmt: 1,
    };
    let pool = std::env::var("VMAF_BENCH_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2 * (threads + 1) + 4);
    // SAFETY: valid out-pointers; the handles are used only while live.
    unsafe {
        assert_eq!(vmaf_init(&mut ctx, cfg), 0);
        for &state in gpu {
            assert_eq!(vmaf_hip_import_state(ctx, state), 0);
        }
        let mut mcfg = VmafModelConfig {
            name: std::ptr::null(),
            flags: 0,
        };
        assert_eq!(
            vmaf_model_load(&mut model, &mut mcfg, c"vmaf_v0.6.1".as_ptr()),
            0
        );
        assert_eq!(vmaf_use_features_from_model(ctx, model), 0);
        match path {
            Path::Alloc | Path::Premade | Path::DevWrap => {}
            Path::Pool => {
                let pc = VmafPictureConfiguration {
                    pic_params: params,
                    pic_cnt: pool,
                };
                assert_eq!(vmaf_preallocate_pictures(ctx, pc), 0);
            }
            Path::Pinned | Path::Device => {
                let pc = VmafHipPictureConfiguration {
                    pic_params: params,
                    pic_prealloc_method: if path == Path::Device {
                        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE
                    } else {
                        VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED
                    },
                    pic_cnt: pool,
                };
                assert_eq!(vmaf_hip_preallocate_pictures(ctx, pc), 0);
            }
        }
    }
    let copies = match input.resident.get(dev) {
        Some(r) if matches!(path, Path::Device | Path::DevWrap) => Some((dev, Copies::new(r))),
        _ => None,
    };
    Session { ctx, model, copies }
}

/// Feeding-thread seconds spent getting, filling and reading pictures.
#[derive(Default, Clone, Copy)]
struct Split {
    get: f64,
    fill: f64,
    read: f64,
}

impl Split {
    fn per_frame_us(&self, frames: usize) -> String {
        let us = |t: f64| 1e6 * t / frames as f64;
        format!(
            "get {:.0} fill {:.0} read {:.0} us",
            us(self.get),
            us(self.fill),
            us(self.read)
        )
    }
}

/// One picture for `path`, filled from `planes`.
fn picture(
    s: &Session,
    input: &Input,
    path: Path,
    (fi, which): (usize, usize),
    split: &mut Split,
) -> VmafPicture {
    let planes = &input.frames[fi][which];
    let t = Instant::now();
    // SAFETY: all-zero is the empty VmafPicture; the calls get valid pointers.
    let mut pic: VmafPicture = unsafe { std::mem::zeroed() };
    if path == Path::Premade {
        let bps = if input.bpc == 8 { 1 } else { 2 };
        let data: [*mut std::ffi::c_void; 3] = std::array::from_fn(|p| {
            assert!(
                (planes[p].as_ptr() as usize).is_multiple_of(bps),
                "frame memory not aligned for {}-bit samples",
                input.bpc
            );
            planes[p].as_ptr().cast_mut().cast()
        });
        let stride: [isize; 3] = std::array::from_fn(|p| {
            let pw = if p == 0 { input.w } else { input.w / 2 };
            (pw as usize * bps) as isize
        });
        // SAFETY: the planes (4:2:0, rows back to back) live in `input` for the whole run
        // and are never written: no release callback is needed.
        let rc = unsafe {
            vmaf_hip_picture_wrap(
                &mut pic,
                1,
                input.bpc,
                input.w,
                input.h,
                data.as_ptr(),
                stride.as_ptr(),
                None,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        split.get += t.elapsed().as_secs_f64();
        return pic;
    }
    if path == Path::DevWrap {
        let (dev, _) = s.copies.as_ref().expect("devwrap needs resident frames");
        let f = &input.resident[*dev].pitched[fi][which];
        let data: [*mut std::ffi::c_void; 3] =
            f.data.map(|a| std::ptr::without_provenance_mut(a as usize));
        // SAFETY: device planes of the context's GPU (one state per device here), pitched as
        // `stride` says, alive for the whole run and never written: the callback only counts.
        let rc = unsafe {
            vmaf_hip_picture_wrap_device(
                s.ctx,
                &mut pic,
                1,
                input.bpc,
                input.w,
                input.h,
                data.as_ptr(),
                f.stride.as_ptr(),
                Some(wrap_released),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        split.get += t.elapsed().as_secs_f64();
        return pic;
    }
    // SAFETY: as above.
    let rc = unsafe {
        match path {
            Path::Alloc => vmaf_picture_alloc(&mut pic, 1, input.bpc, input.w, input.h),
            Path::Pool => vmaf_fetch_preallocated_picture(s.ctx, &mut pic),
            Path::Pinned | Path::Device => vmaf_hip_fetch_preallocated_picture(s.ctx, &mut pic),
            Path::Premade | Path::DevWrap => unreachable!(),
        }
    };
    assert_eq!(rc, 0);
    let t2 = Instant::now();
    match &s.copies {
        Some((dev, c)) => input.resident[*dev].copy_into(input, (fi, which), &pic, c),
        None => fill(&pic, planes),
    }
    split.get += (t2 - t).as_secs_f64();
    split.fill += t2.elapsed().as_secs_f64();
    pic
}

/// Frames per second of the feeding thread alone: get, fill and release the pictures.
fn floor(input: &Input, path: Path, frames: usize, gpu: &[*mut HipStateHandle]) -> (f64, Split) {
    let s = session(input, path, 0, gpu, 0);
    let t = Instant::now();
    let split = floor_frames(&s, input, path, frames);
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    close(s);
    (fps, split)
}

/// Gets, fills and releases `frames` frame pairs for `path` without scoring them.
fn floor_frames(s: &Session, input: &Input, path: Path, frames: usize) -> Split {
    let mut split = Split::default();
    for i in 0..frames {
        let fi = i % input.frames.len();
        let mut r = picture(s, input, path, (fi, 0), &mut split);
        let mut d = picture(s, input, path, (fi, 1), &mut split);
        // SAFETY: pictures from the library, released once.
        unsafe {
            vmaf_picture_unref(&mut r);
            vmaf_picture_unref(&mut d);
        }
    }
    if let Some((_, c)) = s.copies.as_ref().filter(|(_, c)| c.legacy) {
        // Queued copies are part of the floor.
        c.stream.synchronize().expect("device copies");
    }
    split
}

/// The median of `rates` and their range (` [min-max]`, empty for one rate).
fn median_and_range(rates: &mut [f64]) -> (f64, String) {
    rates.sort_by(f64::total_cmp);
    let range = match rates {
        [lo, .., hi] => format!(" [{lo:.0}-{hi:.0}]"),
        _ => String::new(),
    };
    (rates[rates.len() / 2], range)
}

/// The run of `measure` (frames per second first) with the median rate among `reps` runs, and
/// the range of the rates (` [min-max]`, empty for one run).
fn median_of<T>(reps: usize, mut measure: impl FnMut() -> (f64, T)) -> (f64, T, String) {
    let mut runs: Vec<(f64, T)> = (0..reps).map(|_| measure()).collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let range = if runs.len() > 1 {
        format!(" [{:.0}-{:.0}]", runs[0].0, runs[runs.len() - 1].0)
    } else {
        String::new()
    };
    let (fps, rest) = runs.swap_remove(runs.len() / 2);
    (fps, rest, range)
}

/// Frames per second scoring through `path`, the pooled VMAF and the feeding thread's split.
fn scored(
    input: &Input,
    path: Path,
    frames: usize,
    threads: u32,
    gpu: &[*mut HipStateHandle],
) -> (f64, f64, Split) {
    let s = session(input, path, threads, gpu, 0);
    let released = WRAPS_RELEASED.load(std::sync::atomic::Ordering::SeqCst);
    let t = Instant::now();
    let split = feed_frames(&s, input, path, frames);
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    let score = pooled(&s, frames);
    close(s);
    if path == Path::DevWrap {
        assert_eq!(
            WRAPS_RELEASED.load(std::sync::atomic::Ordering::SeqCst) - released,
            2 * frames,
            "every wrapped device picture released once"
        );
    }
    (fps, score, split)
}

/// Feeds `frames` frame pairs through `path` and flushes; returns the feeding thread's split.
fn feed_frames(s: &Session, input: &Input, path: Path, frames: usize) -> Split {
    let mut split = Split::default();
    for i in 0..frames {
        let fi = i % input.frames.len();
        let mut r = picture(s, input, path, (fi, 0), &mut split);
        let mut d = picture(s, input, path, (fi, 1), &mut split);
        let t0 = Instant::now();
        // SAFETY: live context, pictures from the library (taken over by the call).
        assert_eq!(
            unsafe { vmaf_read_pictures(s.ctx, &mut r, &mut d, i as c_uint) },
            0
        );
        split.read += t0.elapsed().as_secs_f64();
    }
    // SAFETY: NULL pictures flush.
    let rc = unsafe { vmaf_read_pictures(s.ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(rc, 0);
    split
}

/// The pooled VMAF (harmonic mean) of a flushed session's `frames` frames.
fn pooled(s: &Session, frames: usize) -> f64 {
    let mut score = 0.0;
    // SAFETY: live handles, valid out-pointer.
    let rc = unsafe { vmaf_score_pooled(s.ctx, s.model, 3, &mut score, 0, frames as c_uint - 1) };
    assert_eq!(rc, 0);
    score
}

/// `--scale`: GPU counts to run, and feeding threads per GPU to try for each.
struct Scale {
    gpus: Vec<usize>,
    feeders: Vec<usize>,
}

/// GPU state handles shared by feeding threads.
struct Handles<'a>(&'a [*mut HipStateHandle]);

// SAFETY: a state handle may be imported by several contexts on any threads (libvmaf_hip.h);
// it is only read here, and freed after every thread has ended.
unsafe impl Sync for Handles<'_> {}

/// Multi-GPU rows: `g·f` feeding threads at once, each with its own context scoring on one GPU
/// (thread `i` on GPU `i mod g`), for each GPU count `g` and feeders per GPU `f`. Prints the
/// aggregate frames per second beside the same threads' floor (no scoring), and the best of
/// each GPU count against one GPU's best. Every context's pooled score must equal a single
/// context's on GPU 0, bit for bit.
fn scale_rows(
    input: &Input,
    path: Path,
    n: usize,
    threads: u32,
    gpu: &[*mut HipStateHandle],
    scale: &Scale,
    reps: usize,
) {
    // Every feeder scores the same `n` frames: one context's score on GPU 0 is the reference.
    let reference = scored(input, path, n, threads, &gpu[..gpu.len().min(1)]).1;
    let handles = Handles(gpu);
    // All `k` threads set up, then start together; the clock stops when the last one's
    // frames are scored (or, for the floor, released). Returns fps and each context's score.
    // `spread`: one context holding all `g` states (frames spread over them), one feeder.
    let run = |g: usize, k: usize, spread: bool, scoring: bool| -> (f64, Vec<f64>) {
        let start = std::sync::Barrier::new(k + 1);
        std::thread::scope(|sc| {
            let feeders: Vec<_> = (0..k)
                .map(|i| {
                    let (handles, start) = (&handles, &start);
                    sc.spawn(move || {
                        let dev = if g == 0 { 0 } else { i % g };
                        let states = match (g, spread) {
                            (0, _) => &[][..],
                            (_, true) => &handles.0[..g],
                            _ => &handles.0[dev..dev + 1],
                        };
                        // A failed set-up still reaches the barrier (the others would hang).
                        let s = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            session(input, path, if scoring { threads } else { 0 }, states, dev)
                        }));
                        start.wait();
                        let s = s.unwrap_or_else(|e| std::panic::resume_unwind(e));
                        if scoring {
                            feed_frames(&s, input, path, n);
                        } else {
                            floor_frames(&s, input, path, n);
                        }
                        let end = Instant::now();
                        let score = if scoring { pooled(&s, n) } else { 0.0 };
                        close(s);
                        (end, score)
                    })
                })
                .collect();
            start.wait();
            let t = Instant::now();
            let ends: Vec<(Instant, f64)> = feeders
                .into_iter()
                .map(|h| h.join().expect("feeding thread"))
                .collect();
            let last = ends.iter().map(|e| e.0).max().expect("a feeder");
            let fps = (k * n) as f64 / (last - t).as_secs_f64();
            (fps, ends.iter().map(|e| e.1).collect())
        })
    };
    let mut one_gpu = None;
    for &g in &scale.gpus {
        if g > gpu.len() || (g == 0) != gpu.is_empty() {
            println!(
                "{:<18} {:<7} {g} GPUs: skipped, {} here",
                input.name,
                path.name(),
                gpu.len()
            );
            continue;
        }
        let mut best = 0.0f64;
        for &f in &scale.feeders {
            // f = 0: one feeder, one context spreading frames over the g GPUs. Not for device
            // pictures, which live on one GPU (the others would read them through the host).
            let spread = f == 0;
            if spread && (g < 2 || matches!(path, Path::Device | Path::DevWrap)) {
                continue;
            }
            let k = if spread { 1 } else { g.max(1) * f };
            // Floor and scoring alternate, so a slow spell of a shared host hits both alike.
            let (mut floors, mut rates) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                floors.push(run(g, k, spread, false).0);
                let (fps, scores) = run(g, k, spread, true);
                for sc in scores {
                    assert_eq!(
                        sc.to_bits(),
                        reference.to_bits(),
                        "{} {}: pooled score differs",
                        input.name,
                        path.name()
                    );
                }
                rates.push(fps);
            }
            let (fl, fl_range) = median_and_range(&mut floors);
            let (fps, range) = median_and_range(&mut rates);
            println!(
                "{:<18} {:<7} {g} GPU {:>8} {:>10.1} {:>12.1}   {:>5.1}% of {k} feeders' floor{}",
                input.name,
                path.name(),
                if spread {
                    "spread".to_string()
                } else {
                    format!("{f}/GPU")
                },
                fl,
                fps,
                100.0 * fps / fl,
                if reps > 1 {
                    format!(" (medians of {reps}: floor{fl_range}, scored{range})")
                } else {
                    String::new()
                }
            );
            best = best.max(fps);
        }
        let base = *one_gpu.get_or_insert(best);
        println!(
            "{:<18} {:<7} {g} GPU best {best:.1} fps = {:.2}x the first GPU count",
            input.name,
            path.name(),
            best / base
        );
    }
}

fn close(s: Session) {
    // SAFETY: live handles, released once.
    unsafe {
        assert_eq!(vmaf_close(s.ctx), 0);
        vmaf_model_destroy(s.model);
    }
}

/// Writes `frames` frames of `input` (cycled) as y4m files `ref`/`dist` under `dir`.
fn write_y4m(input: &Input, frames: usize, dir: &std::path::Path) -> [std::path::PathBuf; 2] {
    use std::io::Write;
    let tag = input.name.replace([' ', '-'], "_");
    let colour = if input.bpc == 8 {
        "420jpeg".to_string()
    } else {
        format!("420p{}", input.bpc)
    };
    [0, 1].map(|side| {
        let path = dir.join(format!("{}_{tag}.y4m", ["ref", "dist"][side]));
        let file = std::fs::File::create(&path).expect("create y4m");
        let mut w = std::io::BufWriter::with_capacity(1 << 22, file);
        writeln!(
            w,
            "YUV4MPEG2 W{} H{} F25:1 Ip A1:1 C{colour}",
            input.w, input.h
        )
        .expect("write y4m");
        for i in 0..frames {
            w.write_all(b"FRAME\n").expect("write y4m");
            for plane in &input.frames[i % input.frames.len()][side] {
                // Deeper samples are already native-endian u16, i.e. y4m's little endian here.
                w.write_all(plane).expect("write y4m");
            }
        }
        w.flush().expect("write y4m");
        path
    })
}

/// Frames per second of reading both files to memory on two threads (the CLI's floor).
fn read_floor(files: &[std::path::PathBuf; 2], frames: usize) -> f64 {
    use std::io::Read;
    let t = Instant::now();
    std::thread::scope(|sc| {
        for f in files {
            sc.spawn(move || {
                let mut file = std::fs::File::open(f).expect("open y4m");
                let mut buf = vec![0u8; 4 << 20];
                while file.read(&mut buf).expect("read y4m") > 0 {}
            });
        }
    });
    frames as f64 / t.elapsed().as_secs_f64()
}

/// Runs `cmd`, returning frames per second and its output; panics with its stderr on failure.
fn timed(cmd: &mut std::process::Command, frames: usize) -> (f64, String) {
    let t = Instant::now();
    let out = cmd.output().expect("run tool");
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    (fps, text)
}

/// The pooled VMAF the `vmaf` tool wrote to its JSON log.
fn cli_score(json: &std::path::Path) -> f64 {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(json).expect("read json")).expect("parse json");
    v["pooled_metrics"]["vmaf"]["mean"]
        .as_f64()
        .expect("pooled vmaf in the json")
}

/// Options of the tool paths.
struct Tools {
    vmaf: Option<String>,
    ffmpeg: Option<String>,
    dir: std::path::PathBuf,
    frames_1080: usize,
    /// GPUs used (0: the CPU).
    gpu: usize,
    /// Keep the y4m files (`--keep`).
    keep: bool,
    threads: Vec<u32>,
    /// Runs of each floor and each thread count (`--reps`): the median is kept.
    reps: usize,
}

/// Prints a tool's row: floor, best rate, their ratio, each thread count's rate.
fn tool_row(input: &Input, tool: &str, floor: f64, best: f64, cells: &[String], what: &str) {
    println!(
        "{:<18} {:<7} {:>10.1} {:>12.1}   {:>5.1}% ({}; floor: {what})",
        input.name,
        tool,
        floor,
        best,
        100.0 * best / floor,
        cells.join(", ")
    );
}

/// Frames in the tools' files: a third at 2160p.
fn tool_frames(tools: &Tools, scale: usize) -> usize {
    if scale == 2 {
        tools.frames_1080 / 3
    } else {
        tools.frames_1080
    }
}

/// The `cli` and `ffmpeg` rows of one input; returns each path's pooled score (6 decimals).
fn tool_rows(input: &Input, tools: &Tools, scale: usize) -> Vec<(&'static str, String)> {
    if tools.vmaf.is_none() && tools.ffmpeg.is_none() {
        return Vec::new();
    }
    let frames = tool_frames(tools, scale);
    std::fs::create_dir_all(&tools.dir).expect("create --dir");
    let files = write_y4m(input, frames, &tools.dir);
    // Twice: the first read brings the files into the page cache.
    read_floor(&files, frames);
    let mut scores = Vec::new();
    let reps = tools.reps;
    if let Some(vmaf) = &tools.vmaf {
        let (fl, (), fl_range) = median_of(reps, || (read_floor(&files, frames), ()));
        let json = tools.dir.join("feed.json");
        let mut cells = Vec::new();
        let mut best = 0.0f64;
        for &t in &tools.threads {
            let mut cmd = std::process::Command::new(vmaf);
            cmd.arg("--reference")
                .arg(&files[0])
                .arg("--distorted")
                .arg(&files[1])
                .args(["--threads", &t.to_string(), "--json", "--output"])
                .arg(&json)
                .arg("--quiet");
            match tools.gpu {
                0 => {}
                1 => {
                    cmd.args(["--backend", "hip"]);
                }
                _ => {
                    cmd.args(["--backend", "hip", "--hip-device", "all"]);
                }
            }
            let (fps, score, range) = median_of(reps, || {
                let (fps, _) = timed(&mut cmd, frames);
                (fps, cli_score(&json))
            });
            scores.push(("cli", format!("{score:.6}")));
            cells.push(format!("{t}t: {fps:.0}{range}"));
            best = best.max(fps);
        }
        let what = format!("reading both files{fl_range}");
        tool_row(input, "cli", fl, best, &cells, &what);
    }
    if let Some(ffmpeg) = &tools.ffmpeg {
        let base = |cmd: &mut std::process::Command| {
            cmd.args(["-nostdin", "-hide_banner", "-loglevel", "info", "-i"])
                .arg(&files[1])
                .arg("-i")
                .arg(&files[0]);
        };
        let mut decode = std::process::Command::new(ffmpeg);
        base(&mut decode);
        decode.args(["-map", "0:v", "-map", "1:v", "-f", "null", "-"]);
        let (fl, (), fl_range) = median_of(reps, || (timed(&mut decode, frames).0, ()));
        let mut cells = Vec::new();
        let mut best = 0.0f64;
        for &t in &tools.threads {
            let dev = if tools.gpu > 0 { ":hip_device=0" } else { "" };
            let mut cmd = std::process::Command::new(ffmpeg);
            base(&mut cmd);
            cmd.args([
                "-lavfi",
                &format!("[0:v][1:v]libvmaf=n_threads={t}{dev}"),
                "-f",
                "null",
                "-",
            ]);
            let (fps, score, range) = median_of(reps, || {
                let (fps, log) = timed(&mut cmd, frames);
                let score = log
                    .lines()
                    .find_map(|l| l.split("VMAF score: ").nth(1))
                    .expect("VMAF score in FFmpeg's log")
                    .trim()
                    .to_string();
                (fps, score)
            });
            scores.push(("ffmpeg", score));
            cells.push(format!("{t}t: {fps:.0}{range}"));
            best = best.max(fps);
        }
        tool_row(
            input,
            "ffmpeg",
            fl,
            best,
            &cells,
            &format!("decoding both, no filter{fl_range}"),
        );
    }
    if !tools.keep {
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
    }
    scores
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let frames: usize = opt("--frames").map_or(1200, |v| v.parse().expect("--frames N"));
    // Lent hosts differ from run to run by more than many effects: `--reps R` measures each
    // C API cell R times and prints the median and the range.
    let reps: usize = opt("--reps")
        .map_or(1, |v| v.parse().expect("--reps R"))
        .max(1);
    let threads: Vec<u32> = opt("--threads").map_or(vec![0, 4, 16], |v| {
        v.split(',')
            .map(|t| t.parse().expect("--threads A,B"))
            .collect()
    });
    let only = opt("--only");
    let list = |name: &str| -> Option<Vec<usize>> {
        opt(name).map(|v| {
            v.split(',')
                .map(|t| t.parse().unwrap_or_else(|_| panic!("{name} A,B")))
                .collect()
        })
    };
    // `--scale G1,G2 [--feeders F1,F2]`: the multi-GPU rows instead of the single-feeder ones.
    let multi = list("--scale").map(|gpus| Scale {
        gpus,
        feeders: list("--feeders").unwrap_or_else(|| vec![1, 2, 4]),
    });
    let paths: Vec<String> = opt("--paths")
        .map_or(
            "premade,device,devwrap,alloc,pool,pinned,cli,ffmpeg".into(),
            |v| v,
        )
        .split(',')
        .map(str::to_string)
        .collect();

    // `--devices N|all`: GPU states imported into every context (frames spread over them).
    let devices = opt("--devices").unwrap_or_else(|| "1".into());
    let want = if devices == "all" {
        usize::MAX
    } else {
        devices.parse().expect("--devices N|all")
    };
    // The "decoder's" own state on each GPU of the run, for the `device` path's resident frames.
    let mut decoders: Vec<std::sync::Arc<vmaf_hip::gpu::GpuState>> = Vec::new();
    let mut gpu: Vec<*mut HipStateHandle> = Vec::new();
    while gpu.len() < want {
        let mut state = std::ptr::null_mut();
        // The first usable device when only one is asked for, else devices 0, 1, ...
        let index = if want == 1 { -1 } else { gpu.len() as i32 };
        // SAFETY: valid out-pointer.
        let rc = unsafe {
            vmaf_hip_state_init(
                &mut state,
                VmafHipConfiguration {
                    device_index: index,
                    flags: 0,
                },
            )
        };
        if rc != 0 {
            break;
        }
        gpu.push(state);
    }
    let on = match gpu.len() {
        0 => "CPU".to_string(),
        1 => "GPU".to_string(),
        n => format!("{n} GPUs"),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tools = Tools {
        vmaf: opt("--vmaf").filter(|_| paths.iter().any(|p| p == "cli")),
        ffmpeg: opt("--ffmpeg").filter(|_| paths.iter().any(|p| p == "ffmpeg")),
        dir: opt("--dir").map_or_else(std::env::temp_dir, Into::into),
        frames_1080: opt("--file-frames").map_or(1200, |v| v.parse().expect("--file-frames N")),
        gpu: gpu.len(),
        keep: args.iter().any(|a| a == "--keep"),
        threads: threads.clone(),
        reps,
    };
    println!(
        "vmaf-hip feed benchmark: C API, vmaf_v0.6.1, scoring on the {on}, {cores} CPU cores, \
         one feeding thread, {frames} frames a run"
    );
    println!(
        "{:<18} {:<7} {:>10} {:>12}   scored / floor (threads: fps)",
        "input", "path", "floor fps", "scored fps"
    );
    for (scale, bpc) in [(1, 8), (1, 10), (2, 8), (2, 10)] {
        let mut input = load_input(scale, bpc);
        if only
            .as_ref()
            .is_some_and(|o| !input.name.contains(o.as_str()))
        {
            continue;
        }
        let n = if scale == 2 { frames / 3 } else { frames };
        if !gpu.is_empty() && paths.iter().any(|p| p == "device" || p == "devwrap") {
            if decoders.is_empty() {
                decoders = (0..gpu.len())
                    .map(|i| {
                        let index = if gpu.len() == 1 { None } else { Some(i) };
                        vmaf_hip::gpu::GpuState::new(index).expect("GPU for resident frames")
                    })
                    .collect();
            }
            input.resident = decoders.iter().map(|d| Resident::new(&input, d)).collect();
        }
        // Kernels are compiled or loaded at the first frames on a device: not timed.
        scored(&input, Path::Alloc, 16, 4, &gpu);
        if let Some(multi) = &multi {
            for d in 1..gpu.len() {
                scored(&input, Path::Alloc, 16, 4, &gpu[d..d + 1]);
            }
            for path in [
                Path::Premade,
                Path::Device,
                Path::DevWrap,
                Path::Pinned,
                Path::Pool,
                Path::Alloc,
            ] {
                if paths.iter().any(|p| p == path.name()) && (!gpu.is_empty() || path.host()) {
                    scale_rows(&input, path, n, threads[0], &gpu, multi, reps);
                }
            }
            continue;
        }
        let mut reference = None;
        for path in [
            Path::Premade,
            Path::Device,
            Path::DevWrap,
            Path::Alloc,
            Path::Pool,
            Path::Pinned,
        ] {
            let gpu_only = !path.host();
            if (gpu_only && gpu.is_empty()) || !paths.iter().any(|p| p == path.name()) {
                continue;
            }
            let (fl, fl_split, fl_range) = median_of(reps, || floor(&input, path, n, &gpu));
            let mut best = (0.0, 0, Split::default());
            let mut cells = Vec::new();
            for &t in &threads {
                let mut scores = Vec::new();
                let (fps, split, range) = median_of(reps, || {
                    let (fps, score, split) = scored(&input, path, n, t, &gpu);
                    scores.push(score);
                    (fps, split)
                });
                let score = scores[0];
                assert!(
                    scores.iter().all(|s| s.to_bits() == score.to_bits()),
                    "{} {}: pooled score differs between repetitions",
                    input.name,
                    path.name()
                );
                if std::env::var_os("VMAF_BENCH_SHOW").is_some() {
                    println!("{} {} {t}t: pooled {score:.17}", input.name, path.name());
                    continue;
                }
                match reference {
                    None => reference = Some(score),
                    Some(r) => assert_eq!(
                        f64::to_bits(score),
                        f64::to_bits(r),
                        "{} {}: pooled score differs",
                        input.name,
                        path.name()
                    ),
                }
                cells.push(format!("{t}t: {fps:.0}{range}"));
                if fps > best.0 {
                    best = (fps, t, split);
                }
            }
            if path == Path::Premade {
                // No feeding: the figure the other paths are measured against, not a floor.
                println!(
                    "{:<18} {:<7} {:>10} {:>12.1}   frames in memory, wrapped ({})",
                    input.name,
                    path.name(),
                    "-",
                    best.0,
                    cells.join(", ")
                );
                continue;
            }
            println!(
                "{:<18} {:<7} {:>10.1} {:>12.1}   {:>5.1}% ({}{})",
                input.name,
                path.name(),
                fl,
                best.0,
                100.0 * best.0 / fl,
                cells.join(", "),
                if reps > 1 {
                    format!("; floor{fl_range}; medians of {reps}")
                } else {
                    String::new()
                }
            );
            println!(
                "{:<18} {:<7} feeding thread per frame: floor {}; scored at {}t {}",
                "",
                "",
                fl_split.per_frame_us(n),
                best.1,
                best.2.per_frame_us(n)
            );
        }
        let tool_scores = tool_rows(&input, &tools, scale);
        let mut pooled = reference;
        if !tool_scores.is_empty() {
            // The tools score their own frame count: compare with a C API run of that length.
            let m = tool_frames(&tools, scale);
            let (_, api, _) = scored(&input, Path::Alloc, m, threads[threads.len() - 1], &gpu);
            for (tool, score) in tool_scores {
                assert_eq!(
                    score,
                    format!("{api:.6}"),
                    "{} {tool}: pooled score differs from the C API's",
                    input.name
                );
            }
            pooled = pooled.or(Some(api));
        }
        if let Some(v) = pooled {
            println!(
                "{:<18} pooled vmaf {v:.6} (identical on every path and thread count)",
                input.name
            );
        }
    }
    for mut state in gpu {
        // SAFETY: a live state, freed once.
        unsafe { vmaf_hip_state_free(&mut state) };
    }
}
