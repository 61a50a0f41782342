//! Whole-context GPU tests: contexts scoring a model's features (several extractors at once) on
//! GPU states, with worker threads, several states, injected faults. On machines without a GPU
//! each prints "skipped: no device" and passes (fails under `VMAF_TEST_REQUIRE_GPU=1`).

use std::sync::Arc;

use crate::gpu::{test_state, GpuState};

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
