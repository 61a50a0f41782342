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
//!
//! Scores go to the GPU when one is present (else the CPU on all cores); every path must give
//! the same pooled VMAF, bit for bit (asserted).
//!
//! `cargo bench --bench feed [-- --frames N --threads 0,4,16 --only NAME]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::ffi::c_uint;
use std::time::Instant;

use vmaf_hip::ffi::hip::{
    vmaf_hip_fetch_preallocated_picture, vmaf_hip_import_state, vmaf_hip_preallocate_pictures,
    vmaf_hip_state_free, vmaf_hip_state_init, HipStateHandle, VmafHipConfiguration,
    VmafHipPictureConfiguration, VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED,
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
    }
}

/// Copies `planes` into `pic` row by row (its stride may be wider).
fn fill(pic: &VmafPicture, planes: &[Vec<u8>]) {
    let bps = if pic.bpc == 8 { 1 } else { 2 };
    for (p, src) in planes.iter().enumerate() {
        let row = pic.w[p] as usize * bps;
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
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Alloc => "alloc",
            Path::Pool => "pool",
            Path::Pinned => "pinned",
        }
    }
}

/// A context (with the GPU state imported, if any), its model and pool set up for `path`.
struct Session {
    ctx: *mut VmafContext,
    model: *mut VmafModel,
}

fn session(input: &Input, path: Path, threads: u32, gpu: *mut HipStateHandle) -> Session {
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
    let pool = 2 * (threads + 1) + 4;
    // SAFETY: valid out-pointers; the handles are used only while live.
    unsafe {
        assert_eq!(vmaf_init(&mut ctx, cfg), 0);
        if !gpu.is_null() {
            assert_eq!(vmaf_hip_import_state(ctx, gpu), 0);
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
            Path::Alloc => {}
            Path::Pool => {
                let pc = VmafPictureConfiguration {
                    pic_params: params,
                    pic_cnt: pool,
                };
                assert_eq!(vmaf_preallocate_pictures(ctx, pc), 0);
            }
            Path::Pinned => {
                let pc = VmafHipPictureConfiguration {
                    pic_params: params,
                    pic_prealloc_method: VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED,
                    pic_cnt: pool,
                };
                assert_eq!(vmaf_hip_preallocate_pictures(ctx, pc), 0);
            }
        }
    }
    Session { ctx, model }
}

/// One picture for `path`, filled from `planes`.
fn picture(s: &Session, input: &Input, path: Path, planes: &[Vec<u8>]) -> VmafPicture {
    // SAFETY: all-zero is the empty VmafPicture; the calls get valid pointers.
    let mut pic: VmafPicture = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe {
        match path {
            Path::Alloc => vmaf_picture_alloc(&mut pic, 1, input.bpc, input.w, input.h),
            Path::Pool => vmaf_fetch_preallocated_picture(s.ctx, &mut pic),
            Path::Pinned => vmaf_hip_fetch_preallocated_picture(s.ctx, &mut pic),
        }
    };
    assert_eq!(rc, 0);
    fill(&pic, planes);
    pic
}

/// Frames per second of the feeding thread alone: get, fill and release the pictures.
fn floor(input: &Input, path: Path, frames: usize, gpu: *mut HipStateHandle) -> f64 {
    let s = session(input, path, 0, gpu);
    let t = Instant::now();
    for i in 0..frames {
        let f = &input.frames[i % input.frames.len()];
        let mut r = picture(&s, input, path, &f[0]);
        let mut d = picture(&s, input, path, &f[1]);
        // SAFETY: pictures from the library, released once.
        unsafe {
            vmaf_picture_unref(&mut r);
            vmaf_picture_unref(&mut d);
        }
    }
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    close(s);
    fps
}

/// Frames per second scoring through `path`, and the pooled VMAF.
fn scored(
    input: &Input,
    path: Path,
    frames: usize,
    threads: u32,
    gpu: *mut HipStateHandle,
) -> (f64, f64) {
    let s = session(input, path, threads, gpu);
    let t = Instant::now();
    for i in 0..frames {
        let f = &input.frames[i % input.frames.len()];
        let mut r = picture(&s, input, path, &f[0]);
        let mut d = picture(&s, input, path, &f[1]);
        // SAFETY: live context, pictures from the library (taken over by the call).
        assert_eq!(
            unsafe { vmaf_read_pictures(s.ctx, &mut r, &mut d, i as c_uint) },
            0
        );
    }
    // SAFETY: NULL pictures flush.
    let rc = unsafe { vmaf_read_pictures(s.ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(rc, 0);
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    let mut score = 0.0;
    // SAFETY: live handles, valid out-pointer.
    let rc = unsafe { vmaf_score_pooled(s.ctx, s.model, 3, &mut score, 0, frames as c_uint - 1) };
    assert_eq!(rc, 0);
    close(s);
    (fps, score)
}

fn close(s: Session) {
    // SAFETY: live handles, released once.
    unsafe {
        assert_eq!(vmaf_close(s.ctx), 0);
        vmaf_model_destroy(s.model);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let frames: usize = opt("--frames").map_or(1200, |v| v.parse().expect("--frames N"));
    let threads: Vec<u32> = opt("--threads").map_or(vec![0, 4, 16], |v| {
        v.split(',')
            .map(|t| t.parse().expect("--threads A,B"))
            .collect()
    });
    let only = opt("--only");

    let mut gpu: *mut HipStateHandle = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    let rc = unsafe {
        vmaf_hip_state_init(
            &mut gpu,
            VmafHipConfiguration {
                device_index: -1,
                flags: 0,
            },
        )
    };
    let on = if rc == 0 { "GPU" } else { "CPU" };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "vmaf-hip feed benchmark: C API, vmaf_v0.6.1, scoring on the {on}, {cores} CPU cores, \
         one feeding thread, {frames} frames a run"
    );
    println!(
        "{:<18} {:<7} {:>10} {:>12}   scored / floor (threads: fps)",
        "input", "path", "floor fps", "scored fps"
    );
    for (scale, bpc) in [(1, 8), (1, 10), (2, 8), (2, 10)] {
        let input = load_input(scale, bpc);
        if only
            .as_ref()
            .is_some_and(|o| !input.name.contains(o.as_str()))
        {
            continue;
        }
        let n = if scale == 2 { frames / 3 } else { frames };
        let mut reference = None;
        for path in [Path::Alloc, Path::Pool, Path::Pinned] {
            if path == Path::Pinned && gpu.is_null() {
                continue;
            }
            let fl = floor(&input, path, n, gpu);
            let mut best = (0.0, 0);
            let mut cells = Vec::new();
            for &t in &threads {
                let (fps, score) = scored(&input, path, n, t, gpu);
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
                cells.push(format!("{t}t: {fps:.0}"));
                if fps > best.0 {
                    best = (fps, t);
                }
            }
            println!(
                "{:<18} {:<7} {:>10.1} {:>12.1}   {:>5.1}% ({})",
                input.name,
                path.name(),
                fl,
                best.0,
                100.0 * best.0 / fl,
                cells.join(", ")
            );
        }
        println!(
            "{:<18} pooled vmaf {:.6} (identical on every path and thread count)",
            input.name,
            reference.unwrap_or(f64::NAN)
        );
    }
    // SAFETY: the state is NULL or live, freed once.
    unsafe { vmaf_hip_state_free(&mut gpu) };
}
