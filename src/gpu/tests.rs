//! Device tests. On machines without a GPU each prints "skipped: no device" and passes (fails
//! under `VMAF_TEST_REQUIRE_GPU=1`); with
//! one, they check real values.

use super::launch::{psnr_sse, DevicePlane};
use super::*;

/// Host -> device -> host through pinned memory returns the exact bytes, including across two
/// device buffers (device-side ordering on one stream).
#[test]
fn pinned_round_trip_sentinel() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let stream = state.stream();
    let n = (1 << 20) + 13;
    let pattern = |i: usize| (i as u32).wrapping_mul(0x9e37_79b9) ^ 0xdead_beef;
    let mut host = PinnedHostBuffer::<u32>::new(dev, n).unwrap();
    for (i, v) in host.as_mut_slice().unwrap().iter_mut().enumerate() {
        *v = pattern(i);
    }
    let mut a = DeviceBuffer::<u32>::new(dev, n).unwrap();
    a.upload_async(stream, &mut host, n).unwrap();
    let mut back = PinnedHostBuffer::<u32>::new(dev, n).unwrap();
    a.download_async(stream, &mut back, n).unwrap();
    let got = back.as_slice().unwrap();
    let bad = (0..n).find(|&i| got[i] != pattern(i));
    assert_eq!(bad, None, "first mismatch");

    // Zeroing, then a partial upload from ordinary memory.
    a.zero(stream).unwrap();
    a.upload_blocking(stream, &[7, 8, 9]).unwrap();
    a.download_async(stream, &mut back, n).unwrap();
    let got = back.as_slice().unwrap();
    assert_eq!(&got[..4], &[7, 8, 9, 0]);
    assert!(got[3..].iter().all(|&v| v == 0));

    // Out-of-range copies are refused, not performed.
    let mut small = PinnedHostBuffer::<u32>::new(dev, 4).unwrap();
    assert!(a.download_async(stream, &mut small, 5).is_err());
}

/// Work issued from a thread that never saw the state's creation (pool workers) binds itself.
#[test]
fn other_threads_bind_the_device() {
    let Some(state) = test_state() else { return };
    let handles: Vec<_> = (0..4u32)
        .map(|t| {
            let state = state.clone();
            std::thread::spawn(move || {
                let dev = state.device();
                let stream = Stream::new(dev).unwrap();
                let mut host = PinnedHostBuffer::<u32>::new(dev, 1000).unwrap();
                host.as_mut_slice().unwrap().fill(t * 1000 + 1);
                let mut d = DeviceBuffer::<u32>::new(dev, 1000).unwrap();
                d.upload_async(&stream, &mut host, 1000).unwrap();
                let mut back = PinnedHostBuffer::<u32>::new(dev, 1000).unwrap();
                d.download_async(&stream, &mut back, 1000).unwrap();
                assert!(back.as_slice().unwrap().iter().all(|&v| v == t * 1000 + 1));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn lcg(seed: &mut u64) -> u32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u32
}

fn cpu_sse<T: Copy + Into<i64>>(r: &[T], d: &[T], w: usize, h: usize, rs: usize, ds: usize) -> u64 {
    let mut s = 0u64;
    for y in 0..h {
        for x in 0..w {
            let e = r[y * rs + x].into() - d[y * ds + x].into();
            s += (e * e) as u64;
        }
    }
    s
}

/// The PSNR kernel on odd sizes, different strides and an offset plane, 8 and 16 bits,
/// including the 16-bit extreme (every difference 65535).
#[test]
fn psnr_kernel_matches_cpu() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let stream = state.stream();
    let mut seed = 42u64;
    let sums = DeviceBuffer::<u64>::new(dev, 4).unwrap();
    let mut host_sums = PinnedHostBuffer::<u64>::new(dev, 4).unwrap();
    for &(w, h) in &[(1usize, 1usize), (33, 7), (1921, 1081), (4000, 3)] {
        let (rs, ds, off) = (w + 5, w + 64, 17);
        // 8-bit, random.
        let r8: Vec<u8> = (0..off + rs * h).map(|_| lcg(&mut seed) as u8).collect();
        let d8: Vec<u8> = (0..ds * h).map(|_| lcg(&mut seed) as u8).collect();
        // 16-bit: plane 2 uses the extreme 0 vs 65535.
        let r16: Vec<u16> = (0..rs * h).map(|_| lcg(&mut seed) as u16 & 0x3ff).collect();
        let d16: Vec<u16> = (0..ds * h).map(|_| lcg(&mut seed) as u16 & 0x3ff).collect();
        let zeros = vec![0u16; rs * h];
        let maxed = vec![u16::MAX; ds * h];

        let mut rd8 = DeviceBuffer::<u8>::new(dev, r8.len()).unwrap();
        let mut dd8 = DeviceBuffer::<u8>::new(dev, d8.len()).unwrap();
        rd8.upload_blocking(stream, &r8).unwrap();
        dd8.upload_blocking(stream, &d8).unwrap();
        let mut rd16 = DeviceBuffer::<u16>::new(dev, rs * h).unwrap();
        let mut dd16 = DeviceBuffer::<u16>::new(dev, ds * h).unwrap();
        let mut zd = DeviceBuffer::<u16>::new(dev, rs * h).unwrap();
        let mut md = DeviceBuffer::<u16>::new(dev, ds * h).unwrap();
        rd16.upload_blocking(stream, &r16).unwrap();
        dd16.upload_blocking(stream, &d16).unwrap();
        zd.upload_blocking(stream, &zeros).unwrap();
        md.upload_blocking(stream, &maxed).unwrap();

        sums.zero(stream).unwrap();
        let p8 = |buf, offset, stride| DevicePlane::<u8> {
            buf,
            offset,
            w,
            h,
            stride,
        };
        let p16 = |buf, offset, stride| DevicePlane::<u16> {
            buf,
            offset,
            w,
            h,
            stride,
        };
        psnr_sse(&state, stream, p8(&rd8, off, rs), p8(&dd8, 0, ds), &sums, 0).unwrap();
        psnr_sse(
            &state,
            stream,
            p16(&rd16, 0, rs),
            p16(&dd16, 0, ds),
            &sums,
            1,
        )
        .unwrap();
        psnr_sse(&state, stream, p16(&zd, 0, rs), p16(&md, 0, ds), &sums, 2).unwrap();
        sums.download_async(stream, &mut host_sums, 4).unwrap();
        let got = host_sums.as_slice().unwrap();
        assert_eq!(
            got[0],
            cpu_sse(&r8[off..], &d8, w, h, rs, ds),
            "8-bit {w}x{h}"
        );
        assert_eq!(got[1], cpu_sse(&r16, &d16, w, h, rs, ds), "16-bit {w}x{h}");
        assert_eq!(got[2], (w * h) as u64 * 65535 * 65535, "extreme {w}x{h}");
        assert_eq!(got[3], 0);

        // A plane whose last row ends one sample past its buffer is refused before launch
        // (the last row needs only `w` of its `rs` samples).
        let too_far = DevicePlane {
            buf: &rd8,
            offset: off + (rs - w) + 1,
            w,
            h,
            stride: rs,
        };
        assert!(psnr_sse(&state, stream, too_far, p8(&dd8, 0, ds), &sums, 0).is_err());
        assert!(psnr_sse(&state, stream, p8(&rd8, 0, rs), p8(&dd8, 0, ds), &sums, 4).is_err());
    }
}

/// ADM's launchers refuse, before any launch, buffers too small for a scale's band planes (6
/// at scale 0, 9 at scales 1-3, `bw * bh` apart) and a score window reaching outside the CSF
/// window (where the masking kernel would read decoupled parts nobody wrote); in-range calls
/// run.
#[test]
fn adm_launchers_refuse_short_buffers_and_windows_outside_the_csf() {
    use super::launch::{adm_cm, adm_dwt123, AdmBuffers, AdmScale, ADM_LUT_LEN};
    let Some(state) = test_state() else { return };
    let (dev, stream) = (state.device(), state.stream());
    let (w, h) = (64, 36);
    let (bw, bh) = (w / 2, h / 2);
    let plane = bw * bh;
    let buf = |n: usize| {
        let b = DeviceBuffer::<i32>::new(dev, n).unwrap();
        b.zero(stream).unwrap();
        b
    };
    let (bands, short9, short6) = (buf(9 * plane), buf(9 * plane - 1), buf(6 * plane - 1));
    let (maps, lut) = (buf(4 * plane), buf(ADM_LUT_LEN));
    let (prev_r, prev_d, out_r, out_d) = (buf(w * h), buf(w * h), buf(plane), buf(plane));
    let out = DeviceBuffer::<u64>::new(dev, 9).unwrap();
    let scale = |s: usize, score: [usize; 4]| AdmScale {
        scale: s,
        csf: [2, bw - 2, 2, bh - 2],
        score,
        den_row: 0,
        den_cube: 0,
        cm_cube: [1, 1, 1],
        cm_row: 1,
        irf: [1, 1, 1],
        egl: 1.0,
        aim: true,
    };
    let inside = [3, bw - 3, 3, bh - 3];
    let b = |bands| AdmBuffers {
        bands,
        maps: &maps,
        lut: &lut,
    };
    let invalid = |r: crate::error::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::Invalid(_))), "{what}: {r:?}");
    };
    let plane_of = |buf| DevicePlane {
        buf,
        offset: 0,
        w,
        h,
        stride: w,
    };
    let dwt = |bands, s| {
        adm_dwt123(
            &state,
            stream,
            plane_of(&prev_r),
            plane_of(&prev_d),
            &out_r,
            &out_d,
            &b(bands),
            &scale(s, inside),
        )
    };
    dwt(&bands, 1).unwrap();
    invalid(dwt(&short9, 1), "scale 1 with 9 planes less one element");
    let cm = |bands, s, score| adm_cm(&state, stream, &b(bands), bw, bh, &scale(s, score), &out, 0);
    cm(&bands, 1, inside).unwrap();
    cm(&short9, 0, inside).unwrap();
    invalid(
        cm(&short9, 1, inside),
        "masking at scale 1 with 9 planes less one element",
    );
    invalid(
        cm(&short6, 0, inside),
        "masking at scale 0 with 6 planes less one element",
    );
    for (score, what) in [
        ([1, bw - 3, 3, bh - 3], "left"),
        ([3, bw - 1, 3, bh - 3], "right"),
        ([3, bw - 3, 1, bh - 3], "top"),
        ([3, bw - 3, 3, bh - 1], "bottom"),
    ] {
        invalid(
            cm(&bands, 1, score),
            &format!("score window past the CSF window's {what} edge"),
        );
    }
    stream.synchronize().unwrap();
}

/// Device selection errors are NoDevice (never a crash) for an index past the end.
#[test]
fn out_of_range_index_is_no_device() {
    match GpuState::new(Some(1 << 20)) {
        Err(Error::NoDevice(_)) => {}
        other => panic!("expected NoDevice, got {other:?}"),
    }
}

/// Listing never fails; each line names vendor and arch.
#[test]
fn describe_lists_each_device() {
    let (devs, notes) = enumerate();
    let lines = describe_devices();
    assert_eq!(lines.len(), devs.len());
    if devs.is_empty() {
        crate::testutil::skip_no_device(&notes.join("; "));
        return;
    }
    for (l, d) in lines.iter().zip(&devs) {
        assert!(l.contains(d.vendor.name()) && l.contains(&d.arch), "{l}");
    }
}

/// The run-time compile path and its cache: a first load compiles and stores an entry, a second
/// loads the entry, and a damaged entry is compiled again and replaced.
#[test]
fn rtc_cache_round_trip() {
    let Some(state) = test_state() else { return };
    if state.info().vendor == Vendor::Nvidia && sys::nvrtc_disabled() {
        println!("skipped: nvrtc disabled by VMAF_HIP_NVRTC=0");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vmaf-hip-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let kernel = code::embedded("psnr").unwrap();
    let dev = state.device();
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };

    let m = code::compile_cached(dev, kernel, Some(dir.clone())).unwrap();
    m.kernel("vmaf_psnr_sse_u8").unwrap();
    let files = entries();
    assert_eq!(files.len(), 1, "{files:?}");
    let good = std::fs::read(&files[0]).unwrap();
    assert!(code::decode_entry(&good).is_some());

    // Served from the cache: the file is untouched.
    code::compile_cached(dev, kernel, Some(dir.clone())).unwrap();
    assert_eq!(std::fs::read(&files[0]).unwrap(), good);

    // Damage it: the next load recompiles and rewrites a valid entry.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    std::fs::write(&files[0], &bad).unwrap();
    let m = code::compile_cached(dev, kernel, Some(dir.clone())).unwrap();
    m.kernel("vmaf_psnr_sse_u16").unwrap();
    let rewritten = std::fs::read(&files[0]).unwrap();
    assert_ne!(rewritten, bad);
    assert!(code::decode_entry(&rewritten).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every kernel source loads from some source and resolves every entry point its launchers use.
/// With `VMAF_HIP_NVRTC=0` on NVIDIA, a module without a fitting nvcc fatbin must come from the
/// embedded PTX: the proof that a host with only the driver gets every kernel.
#[test]
fn every_module_loads_with_its_entries() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let driver_only = state.info().vendor == Vendor::Nvidia && sys::nvrtc().is_err();
    for (file, sigs) in launch::MODULES {
        let k = code::embedded(file).unwrap();
        let (m, source) = code::load_module_with_source(dev, k)
            .unwrap_or_else(|e| panic!("{file}: {e} ({})", code::BUILD_SUMMARY));
        println!("{file}: {source:?}");
        if driver_only {
            assert!(
                matches!(source, code::CodeSource::Ptx | code::CodeSource::Builtin),
                "{file} from {source:?} without nvrtc"
            );
            if k.nvidia_fatbin.is_none() {
                assert_eq!(source, code::CodeSource::Ptx, "{file}");
            }
        }
        for (name, _) in sigs() {
            m.kernel(name)
                .unwrap_or_else(|e| panic!("{file}: entry {name}: {e}"));
        }
    }
}

/// A context with `threads` workers on a fresh GPU state (whose buffers are allocated on first
/// use, so after any fault set now) and `model`'s features; the state's device, to inject into.
fn fresh_gpu_context(
    threads: u32,
    model: &crate::model::Model,
) -> (crate::context::Context, Arc<crate::gpu::Device>) {
    use crate::context::{Config, Context};
    let state = GpuState::new(None).unwrap();
    let device = state.device().clone();
    let mut ctx = Context::new(Config {
        n_threads: threads,
        ..Config::default()
    })
    .unwrap();
    ctx.import_gpu_state(state).unwrap();
    ctx.use_features_from_model(model).unwrap();
    (ctx, device)
}

/// GPU contexts made with `n_threads = 0` on one device alive at once (through one state or
/// several) share one pool of pipeline threads, one per core up to 16; explicit `n_threads` gets a pool of its own, as asked. (The other
/// GPU tests' `n_threads = 0` contexts, run in parallel, score on the shared pool too.)
#[test]
fn pipelined_contexts_share_their_threads() {
    use crate::context::{Config, Context};
    let Some(state) = test_state() else { return };
    if crate::settings::get().pipeline_threads.is_some() {
        println!("skipped: VMAF_HIP_PIPELINE_THREADS is set");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let open = |threads: u32, state: &Arc<GpuState>| {
        let mut ctx = Context::new(Config {
            n_threads: threads,
            ..Config::default()
        })
        .unwrap();
        ctx.import_gpu_state(state.clone()).unwrap();
        ctx
    };
    let first = open(0, &state);
    let second = open(0, &state);
    let explicit = open(3, &state);
    // Another state of the same device shares them too.
    let other = open(0, &GpuState::new(Some(state.info().ordinal)).unwrap());
    assert!(first.shares_workers_with(&second));
    assert!(first.shares_workers_with(&other));
    assert!(!first.shares_workers_with(&explicit));
    assert_eq!(first.worker_count(), second.worker_count());
    assert!((2..=cores.clamp(2, 16)).contains(&first.worker_count()));
    assert_eq!(explicit.worker_count(), 3);
}

/// Injected runtime failures (out of memory, failed launch, lost device) reach the caller of
/// `read_pictures`/`flush` as errors, synchronously and from worker threads, and the process
/// goes on; a state created afterwards works again. Faults are per device object, so other
/// tests running at the same time are not affected.
#[test]
fn injected_faults_become_errors() {
    use crate::context::{Config, Context};
    use crate::gpu::Fault;
    use crate::model::{Model, ModelConfig};

    if test_state().is_none() {
        return;
    }
    let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    let cases = [
        (Fault::OutOfMemory, -libc::ENOMEM),
        (Fault::LaunchFailure, -libc::EIO),
        (Fault::DeviceLost, -libc::ENODEV),
    ];
    for (fault, errno) in cases {
        for threads in [0, 2] {
            let (mut ctx, device) = fresh_gpu_context(threads, &model);
            device.inject_fault(fault);
            let mut err = None;
            for i in 0..3 {
                if let Err(e) = ctx.read_pictures(refs[i].clone(), dists[i].clone(), i) {
                    err = Some(e);
                    break;
                }
            }
            let err = err.or_else(|| ctx.flush().err());
            device.inject_fault(Fault::None);
            let err = err.unwrap_or_else(|| panic!("{fault:?} with {threads} threads: no error"));
            assert_eq!(
                err.errno(),
                errno,
                "{fault:?} with {threads} threads: {err}"
            );
        }
    }
    // The device is fine again for new work.
    let state = GpuState::new(None).unwrap();
    let mut ctx = Context::new(Config::default()).unwrap();
    ctx.import_gpu_state(state).unwrap();
    ctx.use_features_from_model(&model).unwrap();
    ctx.read_pictures(refs[0].clone(), dists[0].clone(), 0)
        .unwrap();
    ctx.flush().unwrap();
}

/// Frames spread over several imported states (here two states on the same device, as with
/// two GPUs) give exactly the CPU's scores.
#[test]
fn frames_spread_over_states_match_cpu() {
    use crate::context::{Config, Context};
    use crate::model::{Model, ModelConfig};
    use crate::pooling::PoolingMethod;

    if test_state().is_none() {
        return;
    }
    let (refs, dists) = crate::testutil::load_parity_clip("natural_640x360_420p10");
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    let score = |states: Vec<Arc<GpuState>>, threads: u32| {
        let mut ctx = Context::new(Config {
            n_threads: threads,
            ..Config::default()
        })
        .unwrap();
        for s in states {
            ctx.import_gpu_state(s).unwrap();
        }
        ctx.use_features_from_model(&model).unwrap();
        ctx.use_feature("psnr", &crate::feature::Dict::new())
            .unwrap();
        // Enough frames (the clip's, cycled) for runs on both states and a run boundary
        // between them (motion's previous frame scored on the other state).
        let n = 2 * crate::gpu::SPREAD_RUN + refs.len();
        for i in 0..n {
            let j = i % refs.len();
            ctx.read_pictures(refs[j].clone(), dists[j].clone(), i)
                .unwrap();
        }
        ctx.flush().unwrap();
        let vmaf = ctx
            .score_pooled(&model, PoolingMethod::Mean, 0, n - 1)
            .unwrap();
        let mut all = Vec::new();
        for v in ctx.collector().snapshot() {
            all.push((v.name.clone(), v.scores.clone()));
        }
        (vmaf, all)
    };
    let cpu = score(Vec::new(), 0);
    let two = vec![GpuState::new(None).unwrap(), GpuState::new(None).unwrap()];
    let mut gpu = score(two.clone(), 0);
    gpu.1.sort_by(|a, b| a.0.cmp(&b.0));
    let mut cpu_sorted = cpu.clone();
    cpu_sorted.1.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(gpu, cpu_sorted);
    let mut threaded = score(two, 4);
    threaded.1.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(threaded, cpu_sorted);
}

/// Copies from one page-locked picture on two streams of one device (two workers, or two
/// states) each leave their own completion marker, so dropping the picture waits for both;
/// another copy on the same stream reuses its marker.
#[test]
fn page_locked_copies_are_marked_per_stream() {
    let Some(state) = test_state() else { return };
    let (refs, _) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    let pic = pin_picture(state.device(), refs[0].duplicate()).unwrap();
    let reg = pic
        .pinned()
        .and_then(|p| p.as_any().downcast_ref::<crate::gpu::HostRegistration>())
        .unwrap();
    let luma = match pic.plane(0) {
        crate::picture::PlaneRef::U8(p) => p,
        crate::picture::PlaneRef::U16(_) => unreachable!("8-bit clip"),
    };
    let streams = [
        Stream::new(state.device()).unwrap(),
        Stream::new(state.device()).unwrap(),
    ];
    let mut buf = DeviceBuffer::<u8>::new(state.device(), luma.len()).unwrap();
    for (s, expected) in [(&streams[0], 1), (&streams[1], 2), (&streams[0], 2)] {
        buf.upload_registered_async(s, reg, luma).unwrap();
        assert_eq!(reg.copy_streams(), expected);
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    let mut back = vec![0u8; luma.len()];
    buf.download_blocking(&streams[0], &mut back).unwrap();
    assert_eq!(back, luma);
}

/// Page-locked pictures: the registered range is checked, uploads read the picture in place,
/// and VIF/ADM/motion computed from them equal the CPU's.
#[test]
fn page_locked_pictures_score_like_the_cpu() {
    use crate::feature::motion::{self, gpu as motion_gpu};
    use crate::feature::vif::{self, gpu as vif_gpu};
    let Some(state) = test_state() else { return };
    let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    let pin =
        |p: &crate::picture::Picture| Arc::new(pin_picture(state.device(), p.duplicate()).unwrap());
    let pinned_refs: Vec<_> = refs.iter().take(3).map(pin).collect();
    let pinned_dists: Vec<_> = dists.iter().take(3).map(pin).collect();
    let reg = pinned_refs[0]
        .pinned()
        .and_then(|p| p.as_any().downcast_ref::<crate::gpu::HostRegistration>())
        .unwrap();
    let luma = match pinned_refs[0].plane(0) {
        crate::picture::PlaneRef::U8(p) => p,
        crate::picture::PlaneRef::U16(_) => unreachable!("8-bit clip"),
    };
    assert!(reg.covers(luma));
    assert!(!reg.covers(&[0u8; 4][..]));
    let mut buf = DeviceBuffer::<u8>::new(state.device(), 16).unwrap();
    assert!(
        buf.upload_registered_async(state.stream(), reg, &[1u8; 16])
            .is_err(),
        "memory outside the registration must be refused"
    );
    for i in 0..3 {
        let (r, d) = (&pinned_refs[i], &pinned_dists[i]);
        let cpu = vif::compute_accums(
            &refs[i],
            &dists[i],
            100.0,
            false,
            crate::simd::CpuLevel::default(),
        )
        .unwrap();
        let gpu = vif_gpu::compute_accums(&state, r, d, 100.0, false).unwrap();
        assert_eq!(gpu, cpu, "vif frame {i}");
        if i > 0 {
            let cpu =
                motion::motion_sad(&refs[i - 1], &refs[i], crate::simd::CpuLevel::SCALAR).unwrap();
            let gpu = motion_gpu::motion_sad(&state, &pinned_refs[i - 1], r).unwrap();
            assert_eq!(gpu, cpu, "motion frame {i}");
        }
    }
}

/// A threaded context's worker streams are released when it closes, and its scratch buffers go
/// back to the state's pool for the next context: a state shared by many contexts does not grow
/// with every pool of threads it has served.
#[test]
fn closing_a_context_releases_its_workers_gpu_buffers() {
    use crate::context::{Config, Context};
    let Some(state) = test_state() else { return };
    let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    let mut held = Vec::new();
    for round in 0..7 {
        let mut ctx = Context::new(Config {
            n_threads: 4,
            log_level: crate::log::LogLevel::Error,
            ..Config::default()
        })
        .unwrap();
        ctx.import_gpu_state(state.clone()).unwrap();
        for f in ["vif", "adm", "motion"] {
            ctx.use_feature(f, &Default::default()).unwrap();
        }
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(8) {
            ctx.read_pictures(r.clone(), d.clone(), i).unwrap();
        }
        ctx.flush().unwrap();
        let (_, lanes) = state.thread_entries();
        assert!(lanes > 0, "round {round}: workers used the GPU");
        drop(ctx);
        let (idle, lanes) = state.thread_entries();
        assert_eq!(lanes, 0, "round {round}: worker streams released");
        assert!(idle > 0, "round {round}: scratch pooled for reuse");
        let (in_use, peak) = state.device().memory_use();
        assert!(
            in_use > 0 && peak >= in_use,
            "round {round}: memory is accounted"
        );
        // The first round also loads the kernels (from PTX, a JIT of several seconds when
        // nvrtc is missing), so its frames overlap less and it holds less: not a baseline.
        if round > 0 {
            held.push(in_use);
        }
    }
    // Scratch for at most 4 frames in flight per extractor and the plane cache (the planes
    // of the frames in flight and a few idle ones), reused by every later context. How soon
    // the cache reaches its size depends on how many frames happened to overlap (on the fake
    // runtime: 9.6 to 15.5 MB in the first round, 15.5 in every round from the third); a
    // context's buffers left behind would add a round's worth with each.
    println!("device memory held after each round but the first: {held:?}");
    assert!(
        held[5] < 2 * held[0],
        "device memory grows with each context: {held:?}"
    );
}

/// Faults that strike in the middle of a stream of pooled pictures (the N-th launch, device
/// allocation or runtime call fails) reach the caller as the fault's errno from
/// `read_pictures` or the flush, with 0 and 3 worker threads; nothing hangs, and every pooled
/// picture is given back once the context is gone.
#[test]
fn mid_stream_faults_return_errors_and_every_picture() {
    use crate::gpu::Fault;
    use crate::model::{Model, ModelConfig};
    use std::sync::atomic::{AtomicUsize, Ordering};

    if test_state().is_none() {
        return;
    }
    let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    // (fault, frame at which it is set, calls it lets pass, errno). Out-of-memory is set after
    // two frames: later frames still allocate (new plane-cache entries), the first frame's own
    // allocation count depends on the thread count.
    let cases = [
        (Fault::LaunchFailure, 0, 150, -libc::EIO),
        (Fault::OutOfMemory, 2, 0, -libc::ENOMEM),
        (Fault::DeviceLost, 0, 400, -libc::ENODEV),
    ];
    for (fault, set_at, after, errno) in cases {
        for threads in [0, 3] {
            let (mut ctx, device) = fresh_gpu_context(threads, &model);
            let returned = Arc::new(AtomicUsize::new(0));
            let pooled = |p: &crate::picture::Picture| {
                let mut d = p.duplicate();
                let r = returned.clone();
                d.set_release(move |_| {
                    r.fetch_add(1, Ordering::SeqCst);
                });
                Arc::new(d)
            };
            let mut err = None;
            let mut sent = 0;
            for i in 0..refs.len() {
                if i == set_at {
                    device.inject_fault_after(fault, after);
                }
                sent += 2;
                if let Err(e) = ctx.read_pictures(pooled(&refs[i]), pooled(&dists[i]), i) {
                    err = Some((i, e));
                    break;
                }
            }
            let err = err.or_else(|| ctx.flush().err().map(|e| (refs.len(), e)));
            drop(ctx);
            device.inject_fault(Fault::None);
            let (at, err) = err
                .unwrap_or_else(|| panic!("{fault:?} after {after}, {threads} threads: no error"));
            assert!(at > 0, "{fault:?} struck at frame 0: not mid-stream");
            assert_eq!(err.errno(), errno, "{fault:?}, {threads} threads: {err}");
            assert_eq!(
                returned.load(Ordering::SeqCst),
                sent,
                "{fault:?}, {threads} threads: pooled pictures not given back"
            );
        }
    }
}

/// A device-to-device copy queued on the legacy default stream (how `cuMemcpy2D` hands a
/// decoder's frame to a device picture) lands as queued: read back directly, and through a
/// device picture's host copy after `mark_written` (which orders our reads after it).
#[test]
fn legacy_stream_copies_reach_device_pictures() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let (w, h) = (1920usize, 1080usize);
    let n = w * h;
    let pattern = |i: usize, k: u32| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(k) as u8;
    let legacy = Stream::legacy(dev);
    for k in 0..4u32 {
        let src_bytes: Vec<u8> = (0..n).map(|i| pattern(i, k)).collect();
        let mut src = DeviceBuffer::<u8>::new(dev, n).unwrap();
        src.upload_blocking(state.stream(), &src_bytes).unwrap();
        let dst = DeviceBuffer::<u8>::new(dev, n).unwrap();
        // SAFETY: `dst` holds `n` bytes and nothing else uses it.
        unsafe { src.copy_to_address_async(&legacy, 0, dst.ptr().addr(), n) }.unwrap();
        legacy.synchronize().unwrap();
        let mut back = vec![0u8; n];
        dst.download_blocking(state.stream(), &mut back).unwrap();
        assert!(back == src_bytes, "direct copy, round {k}");

        let pic =
            frames::device_picture(dev, crate::picture::PixelFormat::Yuv420p, 8, w, h).unwrap();
        let d = pic.device_samples().unwrap();
        // SAFETY: the picture's luma plane holds `n` bytes and is ours.
        unsafe { src.copy_to_address_async(&legacy, 0, d.address(0) as u64, n) }.unwrap();
        d.mark_written().unwrap();
        pic.fetch_host(1).unwrap();
        assert!(
            pic.plane_u8(0) == &src_bytes[..],
            "device picture, round {k}"
        );
    }
}

/// The feed bench's device path, checked step by step: 1080p frames resident in device memory
/// are copied into DEVICE-pool pictures on the legacy default stream (and waited for), then
/// scored through the C API with 4 and 0 threads, one GPU state for all runs, the bench's pool
/// sizes and floor run; what the library sees of each picture must be what was copied, and the
/// pooled score must equal host pictures of the same frames. (`VMAF_TEST_CLIP=1`: the 1080p
/// parity clip instead of noise; `VMAF_TEST_FRAMES`, `VMAF_TEST_NO_PEEK`.)
#[test]
fn device_pool_fed_from_the_legacy_stream() {
    use crate::ffi::hip::*;
    use crate::ffi::libvmaf::*;
    use crate::ffi::model::*;
    use crate::ffi::picture::*;
    let Some(state) = test_state() else { return };
    let (w, h) = (1920usize, 1080usize);
    let fmt = crate::picture::PixelFormat::Yuv420p;
    let frames: Vec<[crate::picture::Picture; 2]> = if std::env::var_os("VMAF_TEST_CLIP").is_some()
    {
        let r = crate::testutil::load_y4m(&crate::testutil::clip_path(
            "ref_natural_1920x1080_420p8.y4m",
        ));
        let d = crate::testutil::load_y4m(&crate::testutil::clip_path(
            "dist_natural_1920x1080_420p8.y4m",
        ));
        r.into_iter().zip(d).map(|(r, d)| [r, d]).collect()
    } else {
        (0..6)
            .map(|i| {
                let r = crate::testutil::noise_picture(fmt, 8, w, h, 2 * i);
                // The distorted frame: the reference with some samples changed.
                let mut d = r.duplicate();
                for (k, v) in d.plane_u8_mut(0).iter_mut().enumerate() {
                    if k % 7 == 0 {
                        *v = v.wrapping_add(9);
                    }
                }
                [r, Arc::new(d)]
            })
            .collect()
    };
    let dev = state.device();
    let resident: Vec<[DeviceBuffer<u8>; 2]> = frames
        .iter()
        .map(|f| {
            f.each_ref().map(|p| {
                let bytes: Vec<u8> = (0..3).flat_map(|i| p.plane_u8(i).to_vec()).collect();
                let mut b = DeviceBuffer::<u8>::new(dev, bytes.len()).unwrap();
                b.upload_blocking(state.stream(), &bytes).unwrap();
                b
            })
        })
        .collect();
    let legacy = Stream::legacy(dev);
    let n: usize = std::env::var("VMAF_TEST_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    // One GPU state for every run, as the feed bench has.
    let shared = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
    {
        let mut hip = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; freed at the end.
        let rc = unsafe {
            vmaf_hip_state_init(
                &mut hip,
                VmafHipConfiguration {
                    device_index: -1,
                    flags: 0,
                },
            )
        };
        assert_eq!(rc, 0);
        shared.store(hip, std::sync::atomic::Ordering::Relaxed);
    }
    // `score` false: fetch, copy and release only, as the bench's floor does.
    let run = |device: bool, n_threads: u32, score: bool| -> f64 {
        let mut hip = std::ptr::null_mut();
        let shared_hip = shared.load(std::sync::atomic::Ordering::Relaxed);
        let mut ctx = std::ptr::null_mut();
        let mut model = std::ptr::null_mut();
        let cfg = VmafConfiguration {
            log_level: 1,
            n_threads,
            n_subsample: 1,
            cpumask: 0,
            gpumask: 0,
        };
        let params = VmafPictureParams {
            w: w as u32,
            h: h as u32,
            bpc: 8,
            pix_fmt: 1,
        };
        // SAFETY: valid out-pointers; handles used while live, pictures released once.
        unsafe {
            if shared_hip.is_null() {
                assert_eq!(
                    vmaf_hip_state_init(
                        &mut hip,
                        VmafHipConfiguration {
                            device_index: -1,
                            flags: 0
                        }
                    ),
                    0
                );
            } else {
                hip = shared_hip;
            }
            assert_eq!(vmaf_init(&mut ctx, cfg), 0);
            assert_eq!(vmaf_hip_import_state(ctx, hip), 0);
            let mut mcfg = VmafModelConfig {
                name: std::ptr::null(),
                flags: 0,
            };
            assert_eq!(
                vmaf_model_load(&mut model, &mut mcfg, c"vmaf_v0.6.1".as_ptr()),
                0
            );
            assert_eq!(vmaf_use_features_from_model(ctx, model), 0);
            if device {
                let pc = VmafHipPictureConfiguration {
                    pic_params: params,
                    pic_prealloc_method: VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE,
                    // The bench's pool size.
                    pic_cnt: 2 * (n_threads + 1) + 4,
                };
                assert_eq!(vmaf_hip_preallocate_pictures(ctx, pc), 0);
            }
            for i in 0..n {
                let f = i % frames.len();
                let mut pics: [VmafPicture; 2] = std::mem::zeroed();
                for (k, pic) in pics.iter_mut().enumerate() {
                    let src = &frames[f][k];
                    if device {
                        assert_eq!(vmaf_hip_fetch_preallocated_picture(ctx, pic), 0);
                        let mut off = 0;
                        for p in 0..3 {
                            let len = src.plane_u8(p).len();
                            assert_eq!(pic.h[p] as usize * pic.stride[p] as usize, len);
                            resident[f][k]
                                .copy_to_address_async(&legacy, off, pic.data[p] as u64, len)
                                .unwrap();
                            off += len;
                        }
                        legacy.synchronize().unwrap();
                        if !score || std::env::var_os("VMAF_TEST_NO_PEEK").is_some() {
                            continue;
                        }
                        // What the library will read.
                        let data = &(*pic.r#ref).pic;
                        data.fetch_host(0b111).unwrap();
                        for p in 0..3 {
                            assert!(
                                data.plane_u8(p) == src.plane_u8(p),
                                "frame {i} picture {k} plane {p}: not what was copied"
                            );
                        }
                    } else {
                        assert_eq!(vmaf_picture_alloc(pic, 1, 8, w as u32, h as u32), 0);
                        for p in 0..3 {
                            let (pw, ph) = (pic.w[p] as usize, pic.h[p] as usize);
                            for y in 0..ph {
                                std::ptr::copy_nonoverlapping(
                                    src.plane_u8(p)[y * pw..].as_ptr(),
                                    pic.data[p].cast::<u8>().add(y * pic.stride[p] as usize),
                                    pw,
                                );
                            }
                        }
                    }
                }
                let [mut r, mut d] = pics;
                if !score {
                    vmaf_picture_unref(&mut r);
                    vmaf_picture_unref(&mut d);
                    continue;
                }
                assert_eq!(vmaf_read_pictures(ctx, &mut r, &mut d, i as u32), 0);
            }
            if !score {
                assert_eq!(vmaf_close(ctx), 0);
                vmaf_model_destroy(model);
                if shared_hip.is_null() {
                    vmaf_hip_state_free(&mut hip);
                }
                return 0.0;
            }
            assert_eq!(
                vmaf_read_pictures(ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0),
                0
            );
            let mut score = 0.0;
            assert_eq!(
                vmaf_score_pooled(ctx, model, 3, &mut score, 0, n as u32 - 1),
                0
            );
            assert_eq!(vmaf_close(ctx), 0);
            vmaf_model_destroy(model);
            if shared_hip.is_null() {
                vmaf_hip_state_free(&mut hip);
            }
            score
        }
    };
    // The bench's floor: fetch, copy, release, before scoring.
    run(true, 0, false);
    for threads in [4, 0, 4, 0] {
        let host = run(false, threads, true);
        let device = run(true, threads, true);
        println!("{threads} threads: pooled {device:.17} (host pictures {host:.17})");
        assert_eq!(
            device.to_bits(),
            host.to_bits(),
            "{threads} threads: pooled {device} vs {host}"
        );
    }
    let mut hip = shared.load(std::sync::atomic::Ordering::Relaxed);
    // SAFETY: the shared state (or NULL), freed once.
    unsafe { vmaf_hip_state_free(&mut hip) };
}

/// Pictures over a caller's device memory (`wrap_device_picture`, how the Python package
/// scores DLPack tensors; `wrap_device_planes` with pitched rows) score like the same frames
/// on the host, 8 and 10 bits, with and without workers, dense, pitched, and with reference
/// and distorted pitches that differ; the owner is let go only after the library's last use of the picture:
/// at once when every reader waited for its work, after a device-wide wait when a failed job
/// did not.
#[test]
fn wrapped_device_memory_scores_like_the_cpu() {
    use crate::context::{Config, Context};
    use crate::model::{Model, ModelConfig};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let Some(state) = test_state() else { return };
    let dev = state.device().clone();
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    struct Owner(#[allow(dead_code)] Vec<DeviceBuffer<u8>>, Arc<AtomicUsize>);
    impl Drop for Owner {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let released = Arc::new(AtomicUsize::new(0));
    // Each plane of `p` in device memory of its own, rows `pad` samples longer than the
    // plane (dense at 0), wrapped.
    let wrap_pitched = |p: &crate::picture::Picture, pad: usize| {
        let (bufs, pitches) = frames::upload_pitched_planes(p, state.stream(), pad).unwrap();
        let planes: Vec<(u64, usize)> = bufs.iter().map(|b| b.ptr().addr()).zip(pitches).collect();
        let owner = Box::new(Owner(bufs, released.clone()));
        // SAFETY: each address holds its plane's rows at its pitch in memory `owner` keeps.
        let pic = unsafe {
            frames::wrap_device_planes(&dev, p.pix_fmt, p.bpc, p.w[0], p.h[0], &planes, owner)
        };
        Arc::new(pic.unwrap())
    };
    let wrap = |p: &crate::picture::Picture| wrap_pitched(p, 0);
    // Row padding of reference and distorted pictures per frame, and the features on top of
    // the model's: dense and pitched alike with extractors that take nothing from the host,
    // whose luma must then be read in place at the pitch (no host copy of it is made);
    // padding that differs on odd frames (the padded one through the host), with CAMBI (GPU
    // kernels, whose host stages also read host copies) and CIEDE (a CPU extractor reading
    // every plane's host copy).
    type Pads = fn(usize) -> (usize, usize);
    let on_gpu: &[&str] = &["psnr", "float_ssim", "float_ms_ssim"];
    let with_host: &[&str] = &["psnr", "float_ssim", "cambi", "ciede"];
    let layouts: [(&str, Pads, &[&str]); 3] = [
        ("dense", |_| (0, 0), on_gpu),
        ("pitched", |_| (40, 40), on_gpu),
        (
            "mixed",
            |i| (40, if i % 2 == 1 { 0 } else { 40 }),
            with_host,
        ),
    ];
    for clip in ["natural_576x324_420p8", "natural_640x360_420p10"] {
        let (refs, dists) = crate::testutil::load_parity_clip(clip);
        let (refs, dists) = (&refs[..4], &dists[..4]);
        // Scores by feature name, and the wrapped pictures (kept for inspection).
        let score = |layout: Option<Pads>, features: &[&str], threads: u32| {
            let mut ctx = Context::new(Config {
                n_threads: threads,
                ..Config::default()
            })
            .unwrap();
            if layout.is_some() {
                ctx.import_gpu_state(state.clone()).unwrap();
            }
            ctx.use_features_from_model(&model).unwrap();
            for f in features {
                ctx.use_feature(f, &crate::feature::Dict::new()).unwrap();
            }
            let mut kept = Vec::new();
            for (i, (r, d)) in refs.iter().zip(dists).enumerate() {
                let (r, d) = match layout {
                    Some(pads) => {
                        let (pr, pd) = pads(i);
                        (wrap_pitched(r, pr), wrap_pitched(d, pd))
                    }
                    None => (r.clone(), d.clone()),
                };
                kept.push(r.clone());
                kept.push(d.clone());
                ctx.read_pictures(r, d, i).unwrap();
            }
            ctx.flush().unwrap();
            // Every feature's scores by name (columns come in the order extractors finish).
            let mut all: Vec<_> = ctx
                .collector()
                .snapshot()
                .into_iter()
                .map(|v| (v.name.clone(), v.scores.clone()))
                .collect();
            all.sort_by(|a, b| a.0.cmp(&b.0));
            (all, kept)
        };
        for (name, pads, features) in layouts {
            let (cpu, _) = score(None, features, 0);
            for threads in [0, 3] {
                let before = released.load(Ordering::SeqCst);
                let (gpu, kept) = score(Some(pads), features, threads);
                assert_eq!(cpu.len(), gpu.len(), "{clip}: features");
                for (c, g) in cpu.iter().zip(&gpu) {
                    assert_eq!(c, g, "{clip}, {name}, {threads} threads");
                }
                if features == on_gpu {
                    let copied = kept
                        .iter()
                        .filter(|p| p.device_samples().is_some_and(|d| d.host(0).is_some()))
                        .count();
                    assert_eq!(copied, 0, "{clip}, {name}: luma read in place");
                }
                drop(kept);
                assert_eq!(
                    released.load(Ordering::SeqCst) - before,
                    2 * refs.len(),
                    "{clip}: every owner let go once the context closed and the pictures went"
                );
            }
        }
    }
    // Every reader waited for its work (its read-back), so no release waited for the device.
    assert_eq!(dev.release_waits(), 0, "releases after waited reads");
    // A job that fails after its uploads leaves work unwaited: the frames' release then waits
    // for the device before their owners go (and every owner still goes).
    let (refs, dists) = crate::testutil::load_parity_clip("natural_576x324_420p8");
    for (threads, after) in [(0, 0), (2, 5)] {
        let (before, waits) = (released.load(Ordering::SeqCst), dev.release_waits());
        let mut ctx = Context::new(Config {
            n_threads: threads,
            log_level: crate::log::LogLevel::Error,
            ..Config::default()
        })
        .unwrap();
        ctx.import_gpu_state(state.clone()).unwrap();
        ctx.use_features_from_model(&model).unwrap();
        dev.inject_fault_after(crate::gpu::Fault::LaunchFailure, after);
        let (mut wrapped, mut failed) = (0, false);
        for i in 0..6 {
            wrapped += 2;
            if ctx
                .read_pictures(wrap(&refs[i]), wrap(&dists[i]), i)
                .is_err()
            {
                failed = true;
                break;
            }
        }
        failed |= ctx.flush().is_err();
        dev.inject_fault(crate::gpu::Fault::None);
        drop(ctx);
        assert!(
            failed,
            "{threads} threads: the injected failure was reported"
        );
        assert!(
            dev.release_waits() > waits,
            "{threads} threads: a release waited"
        );
        assert_eq!(
            released.load(Ordering::SeqCst) - before,
            wrapped,
            "{threads} threads: every owner let go"
        );
    }
    // Planes outside GPU memory, or running past their allocation, are refused before any
    // kernel could fault on them; their owner goes at once. A last row without its padding
    // (a cropped view's storage) is not past the end.
    let y400 = crate::picture::PixelFormat::Yuv400p;
    let host = vec![7u8; 64 * 64];
    let short = DeviceBuffer::<u8>::new(&dev, 63 * 80 + 63).unwrap();
    let cropped = DeviceBuffer::<u8>::new(&dev, 63 * 80 + 64).unwrap();
    let rows: Vec<u8> = (0..63 * 80 + 64).map(|i| (i % 80) as u8).collect();
    let mut cropped = cropped;
    cropped.upload_blocking(state.stream(), &rows).unwrap();
    for (what, addr, ok) in [
        ("host memory", host.as_ptr().addr() as u64, false),
        ("past the end", short.ptr().addr(), false),
        ("cropped view", cropped.ptr().addr(), true),
    ] {
        let before = released.load(Ordering::SeqCst);
        let owner = Box::new(Owner(Vec::new(), released.clone()));
        // SAFETY: refused before use where the memory does not hold the plane; the cropped
        // view's 64 rows of 80-sample pitch (the last one 64 samples) live in `cropped`.
        let r = unsafe { frames::wrap_device_planes(&dev, y400, 8, 64, 64, &[(addr, 80)], owner) };
        assert_eq!(r.is_ok(), ok, "{what}");
        match r {
            Ok(pic) => {
                pic.fetch_host(crate::picture::LUMA).unwrap();
                let crate::picture::PlaneRef::U8(p) = pic.plane(0) else {
                    panic!("8-bit plane")
                };
                assert_eq!(p.len(), 64 * 80, "{what}: host copy of whole rows");
                assert!((0..64).all(|y| (0..64).all(|x| p[y * 80 + x] == x as u8)));
                drop(pic);
            }
            Err(e) => assert_eq!(e.errno(), -libc::EINVAL, "{what}: {e}"),
        }
        assert_eq!(released.load(Ordering::SeqCst), before + 1, "{what}");
    }
    // Misaligned 16-bit planes are refused, and their owner let go at once.
    let b = DeviceBuffer::<u8>::new(&dev, 64 * 64 * 2 + 1).unwrap();
    let addr = b.ptr().addr() + 1;
    let before = released.load(Ordering::SeqCst);
    let owner = Box::new(Owner(vec![b], released.clone()));
    // SAFETY: the buffer holds the plane and is kept by `owner`.
    let r = unsafe {
        frames::wrap_device_picture(
            &dev,
            crate::picture::PixelFormat::Yuv400p,
            10,
            64,
            64,
            &[addr],
            owner,
        )
    };
    assert!(r.is_err());
    assert_eq!(released.load(Ordering::SeqCst), before + 1);
}

/// `open_states`: one state for a single choice, one per compute-capable device for `All`
/// (opened on their own threads), and without a device the single-device error for every
/// choice.
#[test]
fn open_states_per_choice() {
    let (devices, _) = enumerate();
    let capable: Vec<usize> = (0..devices.len())
        .filter(|&i| devices[i].compute_capable)
        .collect();
    if test_state().is_none() {
        for choice in [
            DeviceChoice::First,
            DeviceChoice::Index(0),
            DeviceChoice::All,
        ] {
            assert!(
                matches!(open_states(choice), Err(Error::NoDevice(_))),
                "{choice:?}"
            );
        }
        return;
    }
    assert_eq!(open_states(DeviceChoice::First).unwrap().len(), 1);
    let one = open_states(DeviceChoice::Index(capable[0])).unwrap();
    assert_eq!(one[0].device().info().ordinal, capable[0]);
    let all = open_states(DeviceChoice::All).unwrap();
    let got: Vec<usize> = all.iter().map(|s| s.device().info().ordinal).collect();
    assert_eq!(got, capable);
    assert!(matches!(
        open_states(DeviceChoice::Index(devices.len())),
        Err(Error::NoDevice(_))
    ));
}

/// Recorded work launched again reads the buffers' current contents (a graph fixes addresses,
/// not data), and its head takes each run's arguments (another input buffer and length each
/// run); each key is recorded on its second run and kept when another key comes between; with
/// graphs (on NVIDIA by default) the work is recorded from the second run of a key, the head
/// with it where the runtime can update a recorded kernel.
#[test]
fn replayed_work_reads_current_contents() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let stream = Stream::new(dev).unwrap();
    let mut rows: Vec<DeviceBuffer<u64>> = (0..3)
        .map(|_| DeviceBuffer::<u64>::new(dev, 4).unwrap())
        .collect();
    let outs: Vec<DeviceBuffer<u64>> = (0..2)
        .map(|_| DeviceBuffer::<u64>::new(dev, 1).unwrap())
        .collect();
    let mut host = PinnedHostBuffer::<u64>::new(dev, 1).unwrap();
    let mut replay = graph::Replay::<usize>::default();
    let graphs = graph::enabled(dev);
    // (key, recordings expected after the run): key 1 reduces into another buffer.
    let runs = [
        (0, 0),
        (0, 1),
        (0, 1),
        (1, 1),
        (1, 2),
        (0, 2),
        (1, 2),
        (0, 2),
    ];
    for (i, (key, recorded)) in runs.into_iter().enumerate() {
        let v = i as u64;
        let (input, h) = (i % 3, 1 + i % 4);
        // New contents every run, written outside the recorded work.
        let mut up = PinnedHostBuffer::<u64>::new(dev, 4).unwrap();
        up.as_mut_slice()
            .unwrap()
            .copy_from_slice(&[v, 10 * v, 100 * v, 1000 * v]);
        rows[input].upload_async(&stream, &mut up, 4).unwrap();
        let (src, out) = (&rows[input], &outs[key]);
        host.prepare_download().unwrap();
        let dst = &host;
        replay
            .run(
                &key,
                &stream,
                |s| launch::motion_reduce(&state, s, src, h, out),
                |s| out.queue_download(s, dst, 1),
            )
            .unwrap();
        host.mark_in_use(&stream).unwrap();
        let expected: u64 = [v, 10 * v, 100 * v, 1000 * v][..h].iter().sum();
        assert_eq!(host.as_slice().unwrap(), &[expected], "run {i}");
        assert_eq!(
            replay.recordings(),
            if graphs.is_some() { recorded } else { 0 },
            "run {i}"
        );
    }
    if let Some(g) = graphs {
        assert_eq!(replay.heads_recorded(), g.head.is_some());
    }
}

/// A state, a stream, 4 zeroed row sums and a 1-element output for heads made of
/// `motion_reduce` (a one-kernel launch with buffer arguments).
#[allow(clippy::type_complexity)]
fn head_fixture() -> Option<(Arc<GpuState>, Stream, DeviceBuffer<u64>, DeviceBuffer<u64>)> {
    let state = test_state()?;
    let dev = state.device();
    let stream = Stream::new(dev).unwrap();
    let rows = DeviceBuffer::<u64>::new(dev, 4).unwrap();
    rows.zero(&stream).unwrap();
    let out = DeviceBuffer::<u64>::new(dev, 1).unwrap();
    Some((state, stream, rows, out))
}

/// A head must be exactly one kernel launch: none, or two, is an error on every path.
#[test]
fn heads_launch_exactly_one_kernel() {
    let Some((state, stream, rows, out)) = head_fixture() else {
        return;
    };
    let mut replay = graph::Replay::<()>::default();
    let one = |s: &Stream| launch::motion_reduce(&state, s, &rows, 4, &out);
    let two = |s: &Stream| one(s).and_then(|()| one(s));
    for _ in 0..3 {
        let none = replay.run(&(), &stream, |_| Ok(()), |s| out.zero(s));
        assert!(matches!(none, Err(Error::Invalid(_))), "{none:?}");
    }
    let mut replay = graph::Replay::<()>::default();
    for _ in 0..3 {
        let r = replay.run(&(), &stream, two, |s| out.zero(s));
        assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
    }
    let mut replay = graph::Replay::<()>::default();
    for _ in 0..4 {
        replay.run(&(), &stream, one, |s| out.zero(s)).unwrap();
    }
    // Once recorded (the head updated per frame where the runtime can), the same checks hold,
    // and the recording stays usable.
    for bad in [
        &(|_: &Stream| Ok(())) as &dyn Fn(&Stream) -> Result<()>,
        &two,
    ] {
        let r = replay.run(&(), &stream, bad, |s| out.zero(s));
        assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
    }
    replay.run(&(), &stream, one, |s| out.zero(s)).unwrap();
    stream.synchronize().unwrap();
}

/// Work that fails while being recorded runs again call by call, the stream stays usable, and
/// the next run records it.
#[test]
fn failed_capture_falls_back_to_direct_calls() {
    let Some((state, stream, rows, buf)) = head_fixture() else {
        return;
    };
    let mut replay = graph::Replay::<()>::default();
    let graphs = graph::enabled(state.device()).is_some();
    let calls = std::cell::Cell::new(0);
    let work = |s: &Stream| {
        calls.set(calls.get() + 1);
        if calls.get() == 2 {
            // With graphs, the second run is the first one recorded.
            return Err(crate::error::Error::inval("refused"));
        }
        buf.zero(s)
    };
    let head = |s: &Stream| launch::motion_reduce(&state, s, &rows, 1, &buf);
    for run in 1..=3 {
        let r = replay.run(&(), &stream, head, work);
        if graphs || run != 2 {
            r.unwrap();
        } else {
            assert!(r.is_err(), "direct calls return the work's error");
        }
    }
    stream.synchronize().unwrap();
    if graphs {
        // Run 2: recording failed, then direct (calls 2, 3); run 3 recorded (call 4).
        assert_eq!(calls.get(), 4);
        assert_eq!(replay.recordings(), 1);
        assert!(!replay.direct());
    } else {
        assert_eq!(calls.get(), 3);
        assert_eq!(replay.recordings(), 0);
    }
}

/// Two states on one GPU are two `Device`s over the same primary context: one's releases (a
/// device-wide synchronize, and the frees, which synchronise implicitly) must wait while the
/// other records a graph. Per-device locks let the two meet, and the CUDA driver crashed in
/// `cuCtxSynchronize` under the fault-injection test. Each release is held off for as long as
/// the capture lock is: 200 ms here, against microseconds on an idle device.
#[test]
fn releases_of_one_state_wait_for_captures_of_another() {
    let Some(a) = test_state() else { return };
    let b = GpuState::new(None).unwrap();
    let dev = b.device().clone();
    type Release = Box<dyn FnOnce() + Send>;
    let wait_dev = dev.clone();
    let device_buf = DeviceBuffer::<u8>::new(&dev, 4096).unwrap();
    let pinned_buf = PinnedHostBuffer::<u8>::new(&dev, 4096).unwrap();
    let releases: [(&str, Release); 3] = [
        (
            "device-wide wait",
            Box::new(move || wait_dev.synchronize_for_release()),
        ),
        ("device free", Box::new(move || drop(device_buf))),
        ("pinned host free", Box::new(move || drop(pinned_buf))),
    ];
    for (what, release) in releases {
        let (tx, rx) = std::sync::mpsc::channel();
        let capture = a.device().capture_guard();
        let waiter = std::thread::spawn(move || {
            release();
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "another state's {what} ran during a capture"
        );
        drop(capture);
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the {what} finishes once the capture ends"));
        waiter.join().unwrap();
    }
}

/// A release on the thread that holds the capture lock (nothing of ours frees mid-capture, but
/// a bug must not become a hang) goes ahead with a warning instead of waiting for itself.
#[test]
fn a_release_on_a_capturing_thread_does_not_wait_for_itself() {
    let Some(a) = test_state() else { return };
    let dev = a.device().clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let buf = DeviceBuffer::<u8>::new(&dev, 4096).unwrap();
        let _capture = dev.capture_guard();
        drop(buf);
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the release went ahead");
}

/// Released primary contexts linger (`VMAF_HIP_CONTEXT_LINGER_MS`): each deferred release runs
/// once, on the background thread, no sooner than its delay and in the order of the deadlines;
/// a zero delay runs at once on the caller's thread. No device needed.
#[test]
fn deferred_releases_run_once_their_delay_has_passed() {
    use std::time::{Duration, Instant};
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    for (k, ms) in [(0u32, 150u64), (1, 40)] {
        let tx = tx.clone();
        device::linger::defer(
            Duration::from_millis(ms),
            Box::new(move || {
                let _ = tx.send((k, t0.elapsed(), std::thread::current().id()));
            }),
        );
    }
    let here = std::thread::current().id();
    let (now_tx, now_rx) = std::sync::mpsc::channel();
    device::linger::defer(
        Duration::ZERO,
        Box::new(move || now_tx.send(std::thread::current().id()).unwrap()),
    );
    assert_eq!(
        now_rx.try_recv().unwrap(),
        here,
        "a zero delay runs at once, here"
    );
    let wait = Duration::from_secs(30);
    let (first, at_first, on) = rx.recv_timeout(wait).unwrap();
    assert_eq!(first, 1);
    assert!(at_first >= Duration::from_millis(40), "{at_first:?}");
    assert_ne!(on, here);
    let (second, at_second, _) = rx.recv_timeout(wait).unwrap();
    assert_eq!(second, 0);
    assert!(at_second >= Duration::from_millis(150), "{at_second:?}");
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "each runs once"
    );
    // A delay past what `Instant` holds is taken, not a panic (it never comes due here).
    device::linger::defer(Duration::MAX, Box::new(|| {}));
}

/// A stream leaves out waits for event records already behind its later work (recorded on the
/// stream itself, or waited for there already), but waits again for a new record, for an
/// event never recorded, on the legacy stream, and always while its thread records a graph.
#[test]
fn waits_already_behind_a_stream_are_left_out() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let (s, t) = (Stream::new(dev).unwrap(), Stream::new(dev).unwrap());
    let e = Event::new(dev).unwrap();
    e.record(&t).unwrap();
    s.wait_event(&e).unwrap();
    assert_eq!(s.skipped_waits(), 0);
    s.wait_event(&e).unwrap();
    assert_eq!(s.skipped_waits(), 1, "the same record twice");
    t.wait_event(&e).unwrap();
    assert_eq!(t.skipped_waits(), 1, "a record on the stream itself");
    e.record(&t).unwrap();
    s.wait_event(&e).unwrap();
    assert_eq!(s.skipped_waits(), 1, "a new record is waited for");
    {
        let _capturing = dev.capture_guard();
        s.wait_event(&e).unwrap();
    }
    assert_eq!(s.skipped_waits(), 1, "nothing is left out while capturing");
    let never = Event::new(dev).unwrap();
    s.wait_event(&never).unwrap();
    s.wait_event(&never).unwrap();
    assert_eq!(s.skipped_waits(), 1, "an event never recorded");
    let g = Event::new(dev).unwrap();
    g.record_legacy().unwrap();
    let legacy = Stream::legacy(dev);
    legacy.wait_event(&g).unwrap();
    assert_eq!(
        legacy.skipped_waits(),
        0,
        "the legacy stream is no stream of ours"
    );
    s.synchronize().unwrap();
    t.synchronize().unwrap();
}

/// Pictures of an upstream-style pool (HOST, `vmaf_preallocate_pictures`) are page-locked at
/// their first upload, keep the lock while they wait in the pool, are read in place from then
/// on, and give the CPU's VIF; the pool unlocks them when it closes.
#[test]
fn pooled_pictures_are_locked_at_their_first_upload() {
    use crate::feature::vif::{self, gpu as vif_gpu};
    use crate::picture::pool::PicturePool;
    let Some(state) = test_state() else { return };
    let (refs, dists) = crate::testutil::load_parity_clip("natural_1920x1080_420p8");
    let (r0, d0) = (refs[0].clone(), dists[0].clone());
    let ref_pool = PicturePool::new(1, move || Ok(r0.duplicate())).unwrap();
    let dist_pool = PicturePool::new(1, move || Ok(d0.duplicate())).unwrap();
    let cpu = vif::compute_accums(
        &refs[0],
        &dists[0],
        100.0,
        false,
        crate::simd::CpuLevel::default(),
    )
    .unwrap();
    for round in 0..3 {
        let r = Arc::new(ref_pool.fetch().unwrap());
        let d = Arc::new(dist_pool.fetch().unwrap());
        assert_eq!(
            r.pinned().is_some(),
            round > 0,
            "round {round}: locked from the first upload on"
        );
        let gpu = vif_gpu::compute_accums(&state, &r, &d, 100.0, false).unwrap();
        assert_eq!(gpu, cpu, "round {round}");
        let reg = r
            .pinned()
            .and_then(|p| p.as_any().downcast_ref::<crate::gpu::HostRegistration>());
        assert!(
            reg.is_some(),
            "round {round}: a registration of this device"
        );
    }
    assert_eq!(ref_pool.close(), 0);
    assert_eq!(dist_pool.close(), 0);
}
