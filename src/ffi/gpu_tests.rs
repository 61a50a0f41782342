//! GPU tests of pictures in device memory scored whole: the C API's device-pool pictures fed
//! from the legacy stream, and planes in a caller's device memory wrapped as pictures (the
//! library's DLPack path). On machines without a GPU each prints "skipped: no device" and
//! passes (fails under `VMAF_TEST_REQUIRE_GPU=1`).

use std::sync::Arc;

use crate::gpu::{frames, test_state, DeviceBuffer, Stream};

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
    // kernels reading the pictures in place) and CIEDE (a CPU extractor reading every plane's
    // host copy).
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
            (crate::testutil::collected_scores(&ctx), kept)
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

/// Semi-planar frames in device memory (NV12 for the 8-bit clip, P010 and P016 for the 10-bit
/// one, luma and chroma rows padded) score like the planar frames they were stored from, on the
/// CPU: with the model alone (luma only: the chroma is not unpacked, so `data[1]` is never
/// read), with extractors that read chroma on the GPU (psnr) and on the host (ciede), and (at 8
/// and 10 bits) with every other extractor, with and without workers; each wrapped frame's
/// memory is let go once.
#[test]
fn semiplanar_device_frames_score_like_planar_ones() {
    use crate::context::{Config, Context};
    use crate::model::{Model, ModelConfig};
    use crate::picture::semiplanar::{tests::pack, SemiPlanar};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let Some(state) = test_state() else { return };
    let dev = state.device().clone();
    let model = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    struct Owner(#[allow(dead_code)] [DeviceBuffer<u8>; 2], Arc<AtomicUsize>);
    impl Drop for Owner {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let released = Arc::new(AtomicUsize::new(0));
    let upload = |words: &[u16], fmt: SemiPlanar| {
        let bytes: Vec<u8> = if fmt == SemiPlanar::Nv12 {
            words.iter().map(|&v| v as u8).collect()
        } else {
            words.iter().flat_map(|v| v.to_ne_bytes()).collect()
        };
        let mut b = DeviceBuffer::<u8>::new(&dev, bytes.len()).unwrap();
        b.upload_blocking(state.stream(), &bytes).unwrap();
        b
    };
    for (clip, formats) in [
        ("natural_576x324_420p8", &[SemiPlanar::Nv12][..]),
        (
            "natural_640x360_420p10",
            &[SemiPlanar::P010, SemiPlanar::P016][..],
        ),
    ] {
        let (refs, dists) = crate::testutil::load_parity_clip(clip);
        let (refs, dists) = (&refs[..3], &dists[..3]);
        for &fmt in formats {
            // P016 holds the 10-bit clip's samples as 16-bit ones: the planar pictures it is
            // compared with are the same samples at bpc 16.
            let planar = |p: &crate::picture::Picture| {
                if fmt.bpc() == p.bpc {
                    return p.clone();
                }
                let mut q =
                    crate::picture::PictureData::new(p.pix_fmt, fmt.bpc(), p.w[0], p.h[0]).unwrap();
                for i in 0..3 {
                    let (s, t) = (p.stride[i], q.stride[i]);
                    for y in 0..p.h[i] {
                        for x in 0..p.w[i] {
                            q.plane_u16_mut(i)[y * t + x] = p.plane_u16(i)[y * s + x];
                        }
                    }
                }
                Arc::new(q)
            };
            // Without chroma readers the chroma address is NULL: it must not be read.
            let wrap = |p: &crate::picture::Picture, chroma: bool| {
                let (y, yp, c, cp) = pack(fmt, p, 24);
                let bufs = [upload(&y, fmt), upload(&c, fmt)];
                let ya = bufs[0].ptr().addr();
                let ca = if chroma { bufs[1].ptr().addr() } else { 0 };
                let owner = Box::new(Owner(bufs, released.clone()));
                // SAFETY: both addresses (the chroma's only read when `chroma`) hold their
                // planes' rows at their pitches in memory `owner` keeps; nothing writes it.
                let pic = unsafe {
                    frames::wrap_device_semiplanar(
                        &state,
                        fmt,
                        (p.w[0], p.h[0]),
                        (ya, yp),
                        (ca, cp),
                        chroma,
                        crate::picture::semiplanar::gpu::unpacker(
                            state.clone(),
                            fmt,
                            (p.w[0], p.h[0]),
                        ),
                        owner,
                    )
                };
                Arc::new(pic.unwrap())
            };
            let every: &[&str] = &[
                "cambi",
                "float_ssim",
                "float_ms_ssim",
                "speed_chroma",
                "speed_temporal",
                "psnr_hvs",
                "float_motion",
                "float_vif",
                "float_adm",
                "float_psnr",
                "float_ansnr",
                "float_moment",
            ];
            // psnr_hvs and the SSIMs take no 16-bit samples (as upstream's). "psnr_luma" is
            // psnr with enable_chroma=false: it reads no chroma, so none is unpacked.
            let sets: &[&[&str]] = if fmt == SemiPlanar::P016 {
                &[&[], &["psnr_luma"], &["psnr", "ciede"]]
            } else {
                &[&[], &["psnr_luma"], &["psnr", "ciede"], every]
            };
            for &features in sets {
                let score = |device: bool, threads: u32| {
                    let mut ctx = Context::new(Config {
                        n_threads: threads,
                        ..Config::default()
                    })
                    .unwrap();
                    if device {
                        ctx.import_gpu_state(state.clone()).unwrap();
                    }
                    ctx.use_features_from_model(&model).unwrap();
                    for &f in features {
                        let mut opts = crate::feature::Dict::new();
                        let name = if f == "psnr_luma" {
                            opts.set("enable_chroma", "false");
                            "psnr"
                        } else {
                            f
                        };
                        ctx.use_feature(name, &opts).unwrap();
                    }
                    let chroma = ctx.reads_chroma();
                    let wants = features.iter().any(|&f| f != "psnr_luma");
                    assert_eq!(chroma, wants, "{features:?}");
                    for (i, (r, d)) in refs.iter().zip(dists).enumerate() {
                        let (r, d) = if device {
                            (wrap(&planar(r), chroma), wrap(&planar(d), chroma))
                        } else {
                            (planar(r), planar(d))
                        };
                        ctx.read_pictures(r, d, i).unwrap();
                    }
                    ctx.flush().unwrap();
                    crate::testutil::collected_scores(&ctx)
                };
                let cpu = score(false, 0);
                for threads in [0, 3] {
                    let before = released.load(Ordering::SeqCst);
                    let gpu = score(true, threads);
                    assert_eq!(cpu, gpu, "{clip} {fmt:?} {features:?} {threads} threads");
                    assert_eq!(
                        released.load(Ordering::SeqCst) - before,
                        2 * refs.len(),
                        "{clip} {fmt:?}: owners let go"
                    );
                }
            }
        }
    }
}
