//! Throughput benchmark: scores parity clips with the default model through the library API
//! (frames already in host memory) and prints frames per second for the CPU path with 1 and 2
//! threads (and all cores), and for the GPU path when a device is present (synchronous, and the
//! best of 1x, 2x and 4x as many worker threads as cores), each with its ratio to the
//! single-thread CPU baseline measured in the same run.
//!
//! `--device-memory` adds, per input, frames the caller already holds in GPU memory (how the
//! Python package scores DLPack tensors): each picture's planes uploaded once, then every
//! frame wraps them afresh (`gpu::frames::wrap_device_picture`) and the library reads them in
//! place; beside it, its floor: wrapping and dropping the pictures alone. Same score asserted.
//!
//! `cargo bench --bench fps [-- --frames N --cpu-frames N --no-gpu --no-cpu --pinned
//!  --device-memory --only NAME --v1016 MODEL.json[,MODEL.json...]]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use vmaf_hip::context::{Config, Context};
use vmaf_hip::gpu::GpuState;
use vmaf_hip::log::LogLevel;
use vmaf_hip::model::{Model, ModelConfig};
use vmaf_hip::picture::{Picture, PictureData, PixelFormat};
use vmaf_hip::pooling::PoolingMethod;

struct Args {
    frames: usize,
    cpu_frames: usize,
    gpu: bool,
    big: bool,
    /// Skip the CPU columns (quick GPU iterations; the score check then uses the GPU alone).
    cpu: bool,
    /// Only cases whose name contains this.
    only: Option<String>,
    /// Distinct picture pairs per case: each frame gets its own pictures, as from a decoder,
    /// so nothing is served from the GPU's plane cache by picture identity.
    pool: usize,
    /// Also time GPU runs from page-locked pictures (as from `vmaf_hip_preallocate_pictures`).
    pinned: bool,
    /// Also time GPU runs from pictures over caller-owned device memory.
    device_memory: bool,
    /// VMAF v1.0.16 model files for extra 1080p/2160p rows (8- and 10-bit), one row each.
    v1016: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args {
        frames: 240,
        cpu_frames: 16,
        gpu: true,
        big: true,
        cpu: true,
        only: None,
        pool: 256,
        v1016: Vec::new(),
        pinned: false,
        device_memory: false,
    };
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < v.len() {
        match v[i].as_str() {
            "--frames" => {
                a.frames = v[i + 1].parse().expect("--frames N");
                i += 1;
            }
            "--cpu-frames" => {
                a.cpu_frames = v[i + 1].parse().expect("--cpu-frames N");
                i += 1;
            }
            "--no-gpu" => a.gpu = false,
            "--no-2160p" => a.big = false,
            "--no-cpu" => a.cpu = false,
            "--pinned" => a.pinned = true,
            "--device-memory" => a.device_memory = true,
            "--v1016" => {
                a.v1016 = v[i + 1].split(',').map(String::from).collect();
                i += 1;
            }
            "--pool" => {
                a.pool = v[i + 1].parse().expect("--pool N");
                i += 1;
            }
            "--only" => {
                a.only = Some(v[i + 1].clone());
                i += 1;
            }
            _ => {} // cargo passes --bench
        }
        i += 1;
    }
    a
}

fn load(clip: &str) -> (Vec<Picture>, Vec<Picture>) {
    let open = |p: &str| {
        let path = common::clip_path(p);
        let mut r = vmaf_hip::io::open(&path, None).expect("open clip");
        let mut out = Vec::new();
        while let Some(pic) = r.read_frame().expect("read frame") {
            out.push(pic);
        }
        out
    };
    (
        open(&format!("ref_{clip}.y4m")),
        open(&format!("dist_{clip}.y4m")),
    )
}

/// `pic` at `bpc` bits (samples shifted up) and `scale` times larger (samples repeated).
fn convert(pic: &Picture, bpc: u32, scale: usize) -> Picture {
    let (w, h) = (pic.w[0] * scale, pic.h[0] * scale);
    let mut out = PictureData::new(PixelFormat::Yuv420p, bpc, w, h).expect("picture");
    let shift = bpc - pic.bpc;
    for p in 0..3 {
        let (pw, ph, s) = (out.w[p], out.h[p], out.stride[p]);
        for y in 0..ph {
            for x in 0..pw {
                let v = pic.sample(p, x / scale, y / scale) << shift;
                if bpc == 8 {
                    out.plane_u8_mut(p)[y * s + x] = v as u8;
                } else {
                    out.plane_u16_mut(p)[y * s + x] = v;
                }
            }
        }
    }
    Arc::new(out)
}

/// One timed run: frames per second, the pooled score, and where the threads' time went.
struct Run {
    fps: f64,
    score: f64,
    /// The feeding thread's wait for frames in flight and each extractor's time per frame
    /// (`Context::frame_times`), in microseconds.
    times: String,
}

impl Run {
    fn pair(&self) -> (f64, f64) {
        (self.fps, self.score)
    }
}

/// Scores `frames` pairs (cycling through the clip) with the default model.
fn run(
    refs: &[Picture],
    dists: &[Picture],
    frames: usize,
    threads: u32,
    gpu: Option<&Arc<GpuState>>,
) -> Run {
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).expect("model");
    run_model(&model, refs, dists, frames, threads, gpu)
}

fn run_model(
    model: &Model,
    refs: &[Picture],
    dists: &[Picture],
    frames: usize,
    threads: u32,
    gpu: Option<&Arc<GpuState>>,
) -> Run {
    let mut ctx = Context::new(Config {
        log_level: LogLevel::Error,
        n_threads: threads,
        ..Config::default()
    })
    .expect("context");
    if let Some(g) = gpu {
        ctx.import_gpu_state(g.clone()).expect("import");
    }
    ctx.use_features_from_model(model).expect("features");
    let t = Instant::now();
    for i in 0..frames {
        let k = i % refs.len();
        ctx.read_pictures(refs[k].clone(), dists[k].clone(), i)
            .expect("read");
    }
    ctx.flush().expect("flush");
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    let score = ctx
        .score_pooled(model, PoolingMethod::Mean, 0, frames - 1)
        .expect("pool");
    let times = format!(
        "{} worker threads; feeding thread waited {:.0} µs/frame; per frame, µs queueing/on \
         the CPU/finishing: {}",
        ctx.worker_count(),
        ctx.feed_wait().as_secs_f64() * 1e6 / frames as f64,
        vmaf_hip::context::frame_times_summary(&ctx.frame_times())
    );
    Run { fps, score, times }
}

/// The fastest of `runs`.
fn best_of(runs: &[Run]) -> &Run {
    runs.iter()
        .max_by(|a, b| a.fps.total_cmp(&b.fps))
        .expect("at least one run")
}

/// `pool` distinct copies cycling through `pics`.
fn distinct(pics: &[Picture], pool: usize) -> Vec<Picture> {
    (0..pool.max(pics.len()))
        .map(|i| Arc::new(pics[i % pics.len()].duplicate()))
        .collect()
}

fn main() {
    let args = parse_args();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!(
        "vmaf-hip fps benchmark (model vmaf_v0.6.1, frames in host memory, {cores} CPU cores)"
    );
    let (r1080, d1080) = load("natural_1920x1080_420p8");
    let (r576, d576) = load("natural_576x324_420p8");

    let mut cases: Vec<(&str, Vec<Picture>, Vec<Picture>)> = vec![
        ("576x324 8-bit", r576.clone(), d576.clone()),
        ("1920x1080 8-bit", r1080.clone(), d1080.clone()),
        (
            "1920x1080 10-bit",
            r1080.iter().map(|p| convert(p, 10, 1)).collect(),
            d1080.iter().map(|p| convert(p, 10, 1)).collect(),
        ),
    ];
    if args.big {
        cases.push((
            "3840x2160 8-bit",
            r1080.iter().map(|p| convert(p, 8, 2)).collect(),
            d1080.iter().map(|p| convert(p, 8, 2)).collect(),
        ));
        cases.push((
            "3840x2160 10-bit",
            r1080.iter().map(|p| convert(p, 10, 2)).collect(),
            d1080.iter().map(|p| convert(p, 10, 2)).collect(),
        ));
    }

    let gpu = if args.gpu {
        match GpuState::new(None) {
            Ok(g) => {
                println!("GPU: {}", vmaf_hip::gpu::describe_devices().join("; "));
                Some(g)
            }
            Err(e) => {
                println!("GPU: skipped: no device ({e})");
                None
            }
        }
    } else {
        None
    };

    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "input", "cpu 1t", "cpu 2t", "cpu all", "gpu 0t", "gpu Nt", "best/cpu1t"
    );
    let mut cpu_row;
    for (name, refs, dists) in &cases {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !name.contains(o.as_str()))
        {
            continue;
        }
        let n = args.cpu_frames.max(refs.len());
        let (refs, dists) = (&distinct(refs, args.pool), &distinct(dists, args.pool));
        let (c1, s1) = if args.cpu {
            let (c1, s1) = run(refs, dists, n, 1, None).pair();
            let (c2, s2) = run(refs, dists, n, 2, None).pair();
            let (ca, sa) = if cores > 2 {
                run(refs, dists, n, cores, None).pair()
            } else {
                (c2, s2)
            };
            assert!(s1 == s2 && s1 == sa, "thread counts disagree on {name}");
            cpu_row = (c1, c2, ca);
            (c1, s1)
        } else {
            // No CPU reference: the synchronous GPU run is the score the threaded ones must equal.
            let g = gpu.as_ref().expect("--no-cpu needs a GPU");
            cpu_row = (f64::NAN, f64::NAN, f64::NAN);
            (f64::NAN, run(refs, dists, n, 0, Some(g)).score)
        };
        let (c2, ca) = (cpu_row.1, cpu_row.2);
        let gpu_cell = match &gpu {
            Some(g) => {
                // Warm-up: kernel loading and buffer allocation.
                run(refs, dists, refs.len(), cores, Some(g));
                let g0 = run(refs, dists, args.frames, 0, Some(g)).fps;
                // Workers mostly wait on the device, so more workers than cores can help.
                let runs: Vec<Run> = [cores, 2 * cores, 4 * cores]
                    .iter()
                    .map(|&t| run(refs, dists, args.frames, t, Some(g)))
                    .collect();
                let best = best_of(&runs);
                let ga = best.fps;
                println!("  gpu Nt: {}", best.times);
                let frames_score = runs[0].score;
                if args.pinned {
                    let (pr, pd) = (pin_all(g, refs), pin_all(g, dists));
                    let runs: Vec<Run> = [cores, 2 * cores]
                        .iter()
                        .map(|&t| run(&pr, &pd, args.frames, t, Some(g)))
                        .collect();
                    let best = best_of(&runs);
                    let (gp, ps) = best.pair();
                    assert!(
                        ps == frames_score,
                        "page-locked pictures change the score on {name}: {ps} vs {frames_score}"
                    );
                    println!("  page-locked pictures: gpu Nt {gp:.1} fps (same pooled score)");
                    println!("    {}", best.times);
                }
                if args.device_memory {
                    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).expect("model");
                    device_memory_row(
                        name,
                        refs,
                        dists,
                        args.frames,
                        cores,
                        g,
                        &model,
                        frames_score,
                    );
                }
                let gs = run(refs, dists, n, cores, Some(g)).score;
                assert!(
                    gs == s1,
                    "GPU score differs from CPU on {name}: {gs} vs {s1}"
                );
                Some((g0, ga))
            }
            None => None,
        };
        match gpu_cell {
            Some((g0, ga)) => println!(
                "{name:<18} {c1:>9.1} {c2:>9.1} {ca:>9.1} {g0:>9.1} {ga:>9.1} {:>9.1}x",
                g0.max(ga) / c1
            ),
            None => println!(
                "{name:<18} {c1:>9.1} {c2:>9.1} {ca:>9.1} {:>9} {:>9} {:>10}",
                "-", "-", "-"
            ),
        }
        println!("  pooled vmaf {s1:.6} (identical for every thread count and backend)");
        if let Some(g) = &gpu {
            if !name.starts_with("576") {
                for path in &args.v1016 {
                    v1016_row(path, name, refs, dists, &args, cores, g);
                }
            }
        }
    }
}

/// The same input scored with a VMAF v1.0.16 model: all cores on the CPU against the best GPU
/// worker count (its cambi, speed_chroma, adm3 and motion3 features, and speed_temporal for
/// the hfr models), and with `--device-memory` from frames the caller holds in GPU memory.
fn v1016_row(
    path: &str,
    name: &str,
    refs: &[Picture],
    dists: &[Picture],
    args: &Args,
    cores: u32,
    g: &Arc<GpuState>,
) {
    let model = Model::load_from_path(std::path::Path::new(path), &ModelConfig::default())
        .expect("v1.0.16 model");
    let n = args.cpu_frames.max(8);
    let (ca, sa) = run_model(&model, refs, dists, n, cores, None).pair();
    run_model(&model, refs, dists, cores as usize, cores, Some(g));
    // Cycling through the distinct pictures as the v0.6.1 rows do: a few hundred frames at
    // thousands a second time too short a stretch to be steady.
    let frames = args.frames;
    let runs: Vec<Run> = [cores, 2 * cores]
        .iter()
        .map(|&t| run_model(&model, refs, dists, frames, t, Some(g)))
        .collect();
    let best = best_of(&runs);
    let ga = best.fps;
    // The pooled score of these `frames` frames, which the other GPU paths must equal.
    let frames_score = runs[0].score;
    let gs = run_model(&model, refs, dists, n, cores, Some(g)).score;
    assert!(
        gs == sa,
        "GPU v1.0.16 score differs from CPU on {name}: {gs} vs {sa}"
    );
    let label = format!("{} v1.0.16", &name[..name.find(' ').unwrap_or(name.len())]);
    println!(
        "{label:<18} {:>9} {:>9} {ca:>9.1} {:>9} {ga:>9.1} {:>9.1}x (vs cpu all)",
        "-",
        "-",
        "-",
        ga / ca
    );
    println!("  pooled vmaf {sa:.6} (model {path})");
    println!("  gpu Nt: {}", best.times);
    if args.pinned {
        let (pr, pd) = (pin_all(g, refs), pin_all(g, dists));
        let runs: Vec<Run> = [cores, 2 * cores]
            .iter()
            .map(|&t| run_model(&model, &pr, &pd, frames, t, Some(g)))
            .collect();
        let best = best_of(&runs);
        let gp = best.fps;
        let ps = run_model(&model, &pr, &pd, n, cores, Some(g)).score;
        assert!(
            ps == sa,
            "page-locked pictures change the v1.0.16 score on {name}"
        );
        println!("  page-locked pictures: gpu Nt {gp:.1} fps (same pooled score)");
        println!("    {}", best.times);
    }
    if args.device_memory {
        device_memory_row(name, refs, dists, frames, cores, g, &model, frames_score);
    }
    if refs[0].bpc == 8 {
        // What moving a frame's planes to the device costs alone: the luma planes v0.6.1 reads,
        // and those plus the chroma planes speed_chroma reads; from page-locked memory also
        // split as the library splits them, to show what each copy costs.
        let t = cores as usize;
        let (pr, pd) = (pin_all(g, refs), pin_all(g, dists));
        let cell = |planes: &[usize], how| copy_floor(g, (&pr, &pd), 4 * frames, t, planes, how);
        let (luma, all) = (
            cell(&[0], Transfer::Staged),
            cell(&[0, 1, 2], Transfer::Staged),
        );
        let (luma_dma, all_dma) = (
            cell(&[0], Transfer::Frame),
            cell(&[0, 1, 2], Transfer::Frame),
        );
        let (per_uv, per_plane) = (
            cell(&[0, 1, 2], Transfer::LumaThenChroma),
            cell(&[0, 1, 2], Transfer::Plane),
        );
        println!(
            "  copy floor, {t} threads: host memory (staging copy + upload) luma {luma:.1}, \
             luma+chroma {all:.1} fps; page-locked (upload alone) luma {luma_dma:.1}, \
             luma+chroma {all_dma:.1} fps in one copy per frame, {per_uv:.1} in four \
             (each picture's luma, then its U and V), {per_plane:.1} in six (one per plane)"
        );
    }
}

/// How [`copy_floor`] moves a frame's planes.
#[derive(Clone, Copy)]
enum Transfer {
    /// Copied into page-locked staging memory, then uploaded in one copy.
    Staged,
    /// Uploaded in one copy from page-locked memory of the planes' size (the copy alone).
    Frame,
    /// Straight from the page-locked pictures: each picture's luma, then its other planes in
    /// one copy (as the library moves the planes of the VMAF v1 models).
    LumaThenChroma,
    /// Straight from the page-locked pictures, one copy per plane.
    Plane,
}

/// Frames per second of only moving planes `planes` of each frame's two page-locked pictures
/// (`pics`) to the device, on `threads` threads with a stream each, one frame at a time as a
/// worker does, the way `how` says.
fn copy_floor(
    g: &Arc<GpuState>,
    pics: (&[Picture], &[Picture]),
    frames: usize,
    threads: usize,
    planes: &[usize],
    how: Transfer,
) -> f64 {
    use vmaf_hip::gpu::{DeviceBuffer, PinnedHostBuffer, Stream};
    let (refs, dists) = pics;
    assert!(
        !matches!(how, Transfer::LumaThenChroma) || planes == [0, 1, 2],
        "luma then chroma moves every plane"
    );
    let dev = g.device();
    let total: usize = planes.iter().map(|&p| 2 * refs[0].plane_u8(p).len()).sum();
    // Buffers and streams are made before the clock starts (the workers keep theirs too).
    let start = std::sync::Barrier::new(threads + 1);
    let start = &start;
    let t = std::thread::scope(|sc| {
        for first in 0..threads {
            sc.spawn(move || {
                let stream = Stream::new(dev).expect("stream");
                let mut host = PinnedHostBuffer::<u8>::new(dev, total).expect("pinned");
                let mut buf = DeviceBuffer::<u8>::new(dev, total).expect("device");
                buf.upload_async(&stream, &mut host, total).expect("upload");
                stream.synchronize().expect("wait");
                start.wait();
                for i in (first..frames).step_by(threads) {
                    let k = i % refs.len();
                    match how {
                        Transfer::Staged | Transfer::Frame => {
                            if matches!(how, Transfer::Staged) {
                                let h = host.as_mut_slice().expect("staging");
                                let mut at = 0;
                                for pic in [&refs[k], &dists[k]] {
                                    for &p in planes {
                                        let src = pic.plane_u8(p);
                                        h[at..at + src.len()].copy_from_slice(src);
                                        at += src.len();
                                    }
                                }
                            }
                            buf.upload_async(&stream, &mut host, total).expect("upload");
                        }
                        Transfer::LumaThenChroma | Transfer::Plane => {
                            let mut at = 0;
                            for pic in [&refs[k], &dists[k]] {
                                // No allocation in the timed loop: at most three spans.
                                let mut spans = [&[][..]; 3];
                                let n = match how {
                                    Transfer::Plane => {
                                        for (s, &p) in spans.iter_mut().zip(planes) {
                                            *s = pic.plane_u8(p);
                                        }
                                        planes.len()
                                    }
                                    _ => {
                                        spans[..2]
                                            .copy_from_slice(&[pic.plane_u8(0), uv_span(pic)]);
                                        2
                                    }
                                };
                                for &src in &spans[..n] {
                                    buf.upload_registered_at_async(
                                        &stream,
                                        registration(pic),
                                        src,
                                        at,
                                    )
                                    .expect("upload");
                                    at += src.len();
                                }
                            }
                        }
                    }
                    stream.synchronize().expect("wait");
                }
            });
        }
        start.wait();
        Instant::now()
    });
    frames as f64 / t.elapsed().as_secs_f64()
}

/// The page-locking of a picture from [`pin_all`].
fn registration(pic: &Picture) -> &vmaf_hip::gpu::HostRegistration {
    pic.pinned()
        .and_then(|r| r.as_any().downcast_ref())
        .expect("page-locked picture")
}

/// An 8-bit picture's U and V planes, adjacent in its buffer, as one slice.
fn uv_span(pic: &Picture) -> &[u8] {
    match pic.planes_span(1, 2) {
        Some(vmaf_hip::picture::PlaneRef::U8(s)) => s,
        _ => panic!("no adjacent 8-bit chroma planes"),
    }
}

/// Page-locked copies of `v` (as from `vmaf_hip_preallocate_pictures` HOST_PINNED).
fn pin_all(g: &Arc<GpuState>, v: &[Picture]) -> Vec<Picture> {
    v.iter()
        .map(|p| {
            Arc::new(vmaf_hip::gpu::pin_picture(g.device(), p.duplicate()).expect("page-lock"))
        })
        .collect()
}

/// One picture's planes, each dense in device memory of its own.
struct DevicePlanes(Vec<vmaf_hip::gpu::DeviceBuffer<u8>>);

fn upload(g: &Arc<GpuState>, p: &Picture) -> Arc<DevicePlanes> {
    let planes = vmaf_hip::gpu::frames::upload_dense_planes(p, g.stream()).expect("upload");
    Arc::new(DevicePlanes(planes))
}

/// A picture over `planes` (shape of `like`), which it keeps alive until the library lets go.
fn wrap(g: &Arc<GpuState>, like: &Picture, planes: &Arc<DevicePlanes>) -> Picture {
    let addrs: Vec<u64> = planes.0.iter().map(|b| b.ptr().addr()).collect();
    // SAFETY: each address holds its plane densely (as `upload` wrote it) in device memory of
    // `g`'s device, kept allocated by the owner (a clone of `planes`) and never written again.
    let pic = unsafe {
        vmaf_hip::gpu::frames::wrap_device_picture(
            g.device(),
            like.pix_fmt,
            like.bpc,
            like.w[0],
            like.h[0],
            &addrs,
            Box::new(planes.clone()),
        )
    };
    Arc::new(pic.expect("wrap device memory"))
}

/// Frames in caller-owned GPU memory wrapped per frame, at 0 and `cores` threads, beside the
/// wrapping alone; the pooled score must equal `want`.
#[allow(clippy::too_many_arguments)]
fn device_memory_row(
    name: &str,
    refs: &[Picture],
    dists: &[Picture],
    frames: usize,
    cores: u32,
    g: &Arc<GpuState>,
    model: &Model,
    want: f64,
) {
    let n = refs.len();
    let up_r: Vec<_> = refs.iter().map(|p| upload(g, p)).collect();
    let up_d: Vec<_> = dists.iter().map(|p| upload(g, p)).collect();
    let t = Instant::now();
    for i in 0..frames {
        let k = i % n;
        drop((wrap(g, &refs[k], &up_r[k]), wrap(g, &dists[k], &up_d[k])));
    }
    let floor = frames as f64 / t.elapsed().as_secs_f64();
    let mut cells = Vec::new();
    let mut times = String::new();
    for threads in [0, cores] {
        let mut ctx = Context::new(Config {
            log_level: LogLevel::Error,
            n_threads: threads,
            ..Config::default()
        })
        .expect("context");
        ctx.import_gpu_state(g.clone()).expect("import");
        ctx.use_features_from_model(model).expect("features");
        let t = Instant::now();
        for i in 0..frames {
            let k = i % n;
            ctx.read_pictures(wrap(g, &refs[k], &up_r[k]), wrap(g, &dists[k], &up_d[k]), i)
                .expect("read");
        }
        ctx.flush().expect("flush");
        let fps = frames as f64 / t.elapsed().as_secs_f64();
        let score = ctx
            .score_pooled(model, PoolingMethod::Mean, 0, frames - 1)
            .expect("pool");
        assert!(
            score == want,
            "caller device memory changes the score on {name}: {score} vs {want}"
        );
        cells.push(fps);
        times = format!(
            "{} worker threads; feeding thread waited {:.0} µs/frame; per frame, µs \
             queueing/on the CPU/finishing: {}",
            ctx.worker_count(),
            ctx.feed_wait().as_secs_f64() * 1e6 / frames as f64,
            vmaf_hip::context::frame_times_summary(&ctx.frame_times())
        );
    }
    println!(
        "  caller device memory: gpu 0t {:.1}, {cores}t {:.1} fps; wrapping alone {floor:.1} fps \
         (same pooled score)",
        cells[0], cells[1]
    );
    println!("    {times}");
}
