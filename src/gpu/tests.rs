//! Runtime tests: devices, memory, streams, code loading, graphs, device pictures. On machines
//! without a GPU each prints "skipped: no device" and passes (fails under
//! `VMAF_TEST_REQUIRE_GPU=1`); with one, they check real values.

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

/// Every kernel source loads from some source and resolves every entry point it declares.
/// With `VMAF_HIP_NVRTC=0` on NVIDIA, a module without a fitting nvcc fatbin must come from the
/// embedded PTX: the proof that a host with only the driver gets every kernel.
#[test]
fn every_module_loads_with_its_entries() {
    let Some(state) = test_state() else { return };
    let dev = state.device();
    let driver_only = state.info().vendor == Vendor::Nvidia && sys::nvrtc().is_err();
    assert!(!code::KERNELS.is_empty());
    for k in code::KERNELS {
        let file = k.name;
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
        let entries = launch::signature::parse_kernels(k.source).unwrap();
        assert!(!entries.is_empty(), "{file}: no entry points");
        for name in entries.keys() {
            m.kernel(name)
                .unwrap_or_else(|e| panic!("{file}: entry {name}: {e}"));
        }
    }
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

/// A page-locked picture's registration covers its own samples and nothing else: an upload
/// from memory outside it is refused.
#[test]
fn registered_ranges_are_checked() {
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
    assert!(reg.covers(luma));
    assert!(!reg.covers(&[0u8; 4][..]));
    let mut buf = DeviceBuffer::<u8>::new(state.device(), 16).unwrap();
    assert!(
        buf.upload_registered_async(state.stream(), reg, &[1u8; 16])
            .is_err(),
        "memory outside the registration must be refused"
    );
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
            .run(&key, &stream, &sum_rows(&state, src, h, out), |s| {
                out.queue_download(s, dst, 1)
            })
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

/// Work with no head (its input copied into a fixed buffer before each run) is recorded whole
/// on its second run and replayed from then on, reading the buffer's current contents.
#[test]
fn fixed_work_replays_whole_reading_current_contents() {
    let Some((state, stream, mut rows, out)) = head_fixture() else {
        return;
    };
    let dev = state.device();
    let mut host = PinnedHostBuffer::<u64>::new(dev, 1).unwrap();
    let mut replay = graph::Replay::<u8>::default();
    let graphs = graph::enabled(dev).is_some();
    for run in 0..5u64 {
        let mut up = PinnedHostBuffer::<u64>::new(dev, 4).unwrap();
        up.as_mut_slice()
            .unwrap()
            .copy_from_slice(&[run, 10 * run, 100 * run, 1000 * run]);
        rows.upload_async(&stream, &mut up, 4).unwrap();
        host.prepare_download().unwrap();
        let dst = &host;
        replay
            .run_fixed(&7, &stream, |s| {
                sum_rows(&state, &rows, 3, &out).queue(s)?;
                out.queue_download(s, dst, 1)
            })
            .unwrap();
        host.mark_in_use(&stream).unwrap();
        assert_eq!(host.as_slice().unwrap(), &[111 * run], "run {run}");
        let want = usize::from(graphs && run >= 1);
        assert_eq!(replay.recordings(), want, "run {run}");
    }
    assert!(!replay.heads_recorded());
}

/// A head for the replay tests: `out[0] = rows[0] + .. + rows[h - 1]`, one kernel with buffer
/// arguments (kernels/motion.hip's reduction, at its launcher's block size).
fn sum_rows<'a>(
    state: &GpuState,
    rows: &'a DeviceBuffer<u64>,
    h: usize,
    out: &'a DeviceBuffer<u64>,
) -> launch::Launch<'a> {
    use launch::Span;
    let cfg = LaunchConfig {
        grid: (1, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let args = (
        Span::of(rows, 0, h).unwrap(),
        h as i32,
        Span::of(out, 0, 1).unwrap(),
    );
    launch::Launch::new::<(Span<u64>, i32, Span<u64>)>(
        state,
        "motion",
        "vmaf_motion_reduce",
        cfg,
        args,
    )
    .unwrap()
}

/// A state, a stream, 4 zeroed row sums and a 1-element output for [`sum_rows`] heads.
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
    let head = sum_rows(&state, &rows, 1, &buf);
    for run in 1..=3 {
        let r = replay.run(&(), &stream, &head, work);
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

/// `pic` uploaded into device memory of `state` with `pad` samples after each row, as a device
/// picture that keeps its buffers.
fn device_copy(
    state: &GpuState,
    pic: &crate::picture::Picture,
    pad: usize,
) -> crate::picture::Picture {
    let (bufs, pitches) = frames::upload_pitched_planes(pic, state.stream(), pad).unwrap();
    let planes: Vec<(u64, usize)> = bufs
        .iter()
        .zip(&pitches)
        .map(|(b, &p)| (b.ptr().addr(), p))
        .collect();
    // SAFETY: each plane lies in its buffer at its pitch (as uploaded), kept by the owner.
    let data = unsafe {
        frames::wrap_device_planes(
            state.device(),
            pic.pix_fmt,
            pic.bpc,
            pic.w[0],
            pic.h[0],
            &planes,
            Box::new(bufs),
        )
    }
    .unwrap();
    std::sync::Arc::new(data)
}

/// Every score of `features` over the picture pairs, on `state` with `threads` workers.
fn feature_scores(
    state: &Arc<GpuState>,
    features: &[(&str, &str)],
    pairs: &[(crate::picture::Picture, crate::picture::Picture)],
    threads: u32,
) -> crate::error::Result<Vec<(String, Vec<Option<f64>>)>> {
    use crate::context::{Config, Context};
    let mut ctx = Context::new(Config {
        n_threads: threads,
        ..Config::default()
    })?;
    ctx.import_gpu_state(state.clone())?;
    crate::testutil::use_features(&mut ctx, features)?;
    for (i, (r, d)) in pairs.iter().enumerate() {
        ctx.read_pictures(r.clone(), d.clone(), i)?;
    }
    ctx.flush()?;
    Ok(crate::testutil::collected_scores(&ctx))
}

/// The extractors of the VMAF v1.0.16 models that read chroma or check the input range
/// (speed_chroma, speed_temporal, cambi), and psnr_hvs, take pictures in device memory, padded rows included,
/// in place and score them exactly as host pictures, synchronously and on workers; a 10-bit
/// device picture with a sample above 1023 is refused as the CPU refuses it.
#[test]
fn v1_extractors_read_device_pictures_in_place() {
    let Some(state) = test_state() else { return };
    let features = [
        ("cambi", ""),
        ("cambi", "full_ref=true"),
        (
            "speed_chroma",
            "speed_kernelscale=1.0:speed_weight_var_mode=5",
        ),
        ("speed_temporal", ""),
        ("psnr_hvs", ""),
    ];
    for clip in [
        "natural_576x324_420p8",
        "natural_640x360_420p10",
        "testsrc_480x270_444p8",
    ] {
        let (refs, dists) = crate::testutil::load_parity_clip(clip);
        let host: Vec<_> = refs.iter().cloned().zip(dists.iter().cloned()).collect();
        let on_device: Vec<_> = refs
            .iter()
            .zip(&dists)
            .map(|(r, d)| (device_copy(&state, r, 0), device_copy(&state, d, 24)))
            .collect();
        for threads in [0, 3] {
            let want = feature_scores(&state, &features, &host, threads).unwrap();
            for family in ["cambi", "speed_chroma", "speed_temporal", "psnr_hvs"] {
                assert!(
                    want.iter().any(|(n, _)| n.to_lowercase().contains(family)),
                    "{clip}: no {family} scores in {want:?}"
                );
            }
            let got = feature_scores(&state, &features, &on_device, threads).unwrap();
            assert_eq!(got, want, "{clip} at {threads} threads");
        }
    }
    let (refs, dists) = crate::testutil::load_parity_clip("natural_640x360_420p10");
    let mut bad = dists[0].duplicate();
    bad.plane_u16_mut(0)[5] = 1024;
    let bad = Arc::new(bad);
    let pair = [(
        device_copy(&state, &refs[0], 0),
        device_copy(&state, &bad, 0),
    )];
    let e = feature_scores(&state, &[("cambi", "")], &pair, 0).unwrap_err();
    assert_eq!(e.errno(), -libc::EINVAL, "{e}");
    assert!(e.to_string().contains("10-bit maximum 1023"), "{e}");
}

/// speed_chroma, speed_temporal and cambi score page-locked pictures (as from a HOST_PINNED
/// pool: each picture's U and V travel in one copy where they are adjacent) exactly as the CPU
/// does, at 8 and 10 bits, 4:2:0 and 4:4:4, odd sizes (padded chroma rows) included.
#[test]
fn v1_extractors_read_page_locked_pictures() {
    let Some(state) = test_state() else { return };
    let features = [
        (
            "speed_chroma",
            "speed_kernelscale=1.0:speed_weight_var_mode=5",
        ),
        (
            "speed_chroma",
            "speed_prescale=1.5:speed_prescale_method=bilinear",
        ),
        ("speed_temporal", ""),
        ("cambi", ""),
    ];
    let cpu_scores = |pairs: &[(crate::picture::Picture, crate::picture::Picture)]| {
        let mut ctx = crate::context::Context::new(crate::context::Config::default()).unwrap();
        crate::testutil::use_features(&mut ctx, &features).unwrap();
        for (i, (r, d)) in pairs.iter().enumerate() {
            ctx.read_pictures(r.clone(), d.clone(), i).unwrap();
        }
        ctx.flush().unwrap();
        crate::testutil::collected_scores(&ctx)
    };
    for clip in [
        "natural_576x324_420p8",
        "natural_640x360_420p10",
        "testsrc_480x270_444p8",
        "testsrc_321x241_420p8",
    ] {
        let (refs, dists) = crate::testutil::load_parity_clip(clip);
        let pin = |p: &crate::picture::Picture| {
            Arc::new(pin_picture(state.device(), p.duplicate()).unwrap())
        };
        let pinned: Vec<_> = refs
            .iter()
            .zip(&dists)
            .map(|(r, d)| (pin(r), pin(d)))
            .collect();
        let want = cpu_scores(&pinned);
        assert!(
            want.iter()
                .any(|(n, _)| n.to_lowercase().contains("speed_chroma")),
            "{clip}: no speed_chroma scores in {want:?}"
        );
        for threads in [0, 3] {
            let got = feature_scores(&state, &features, &pinned, threads).unwrap();
            assert_eq!(got, want, "{clip} at {threads} threads");
        }
    }
}

/// Opening a device through the CUDA driver leaves `CUDA_DEVICE_MAX_CONNECTIONS` alone unless
/// `VMAF_HIP_DEVICE_CONNECTIONS` asks for work queues (tests/cli.rs checks that request).
#[test]
fn the_cuda_driver_keeps_its_work_queues_by_default() {
    let Some(state) = test_state() else { return };
    if state.device().api().vendor() != Vendor::Nvidia {
        return;
    }
    let initial = std::fs::read("/proc/self/environ").unwrap_or_default();
    let chose = initial.split(|&b| b == 0).any(|kv| {
        kv.starts_with(b"CUDA_DEVICE_MAX_CONNECTIONS=")
            || kv.starts_with(b"VMAF_HIP_DEVICE_CONNECTIONS=")
    });
    if chose {
        println!("skipped: the environment chose the work queues");
        return;
    }
    assert_eq!(std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS"), None);
}
