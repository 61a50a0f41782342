//! The pipeline threads that GPU contexts with `n_threads = 0` share on one device: one pool
//! however many such contexts are open, kept while any is, gone with the last. A test binary
//! of its own, so no other test's context keeps the pool alive; threads are counted in
//! /proc/self/task. Without a device it prints "skipped: no device" and passes (fails with
//! `VMAF_TEST_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use vmaf_hip::context::{Config, Context};
use vmaf_hip::gpu::GpuState;
use vmaf_hip::log::LogLevel;
use vmaf_hip::picture::{Picture, PictureData, PixelFormat};
use vmaf_hip::Error;

fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("read /proc/self/task")
        .count()
}

/// Waits up to 5 s for the thread count to reach `want` (pool threads exit after their pool
/// is dropped, not during the drop); returns the last count seen.
fn settle_at(want: usize) -> usize {
    let t0 = Instant::now();
    loop {
        let n = threads_now();
        if n == want || t0.elapsed() > Duration::from_secs(5) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A 1080p-sized pair would do too; 256x144 keeps every extractor on the GPU (above its
/// minimum side) and the test short.
fn frame(seed: u32) -> Picture {
    let mut p = PictureData::new(PixelFormat::Yuv420p, 8, 256, 144).unwrap();
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    for v in p.plane_u8_mut(0) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *v = (x >> 24) as u8;
    }
    Arc::new(p)
}

fn open(state: &Arc<GpuState>) -> Context {
    let mut ctx = Context::new(Config {
        n_threads: 0,
        log_level: LogLevel::Error,
        ..Config::default()
    })
    .unwrap();
    ctx.import_gpu_state(state.clone()).unwrap();
    for f in ["vif", "adm", "motion"] {
        ctx.use_feature(f, &Default::default()).unwrap();
    }
    ctx
}

fn score(ctx: &mut Context, frames: usize) {
    for i in 0..frames {
        ctx.read_pictures(frame(i as u32), frame(i as u32 + 100), i)
            .unwrap();
    }
}

#[test]
fn shared_pipeline_threads_end_with_the_last_context() {
    if std::env::var_os("VMAF_HIP_PIPELINE_THREADS").is_some() {
        println!("skipped: VMAF_HIP_PIPELINE_THREADS is set");
        return;
    }
    let state = match GpuState::new(None) {
        Ok(s) => s,
        Err(Error::NoDevice(why)) => return common::skip_no_device(&why),
        Err(e) => panic!("GPU present but unusable: {e}"),
    };
    // A first context loads the kernels and lets the driver start whatever threads it keeps;
    // its pool's threads must all go when it closes.
    let mut warm = open(&state);
    score(&mut warm, 4);
    warm.flush().unwrap();
    let n = warm.worker_count();
    assert!(n >= 2, "pipeline threads: {n}");
    let with_pool = threads_now();
    drop(warm);
    let base = settle_at(with_pool - n);
    assert_eq!(
        base,
        with_pool - n,
        "the last context's pipeline threads end"
    );

    // Two contexts, one pool.
    let mut a = open(&state);
    let mut b = open(&state);
    score(&mut a, 3);
    score(&mut b, 3);
    assert_eq!(a.worker_count(), n);
    assert_eq!(threads_now(), base + n, "a second context adds no threads");

    // Closing one keeps them for the other, which still scores.
    a.flush().unwrap();
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        threads_now(),
        base + n,
        "the pool outlives all but the last"
    );
    b.flush().unwrap();
    assert!(b
        .feature_score_at_index("VMAF_integer_feature_vif_scale0_score", 2)
        .is_ok());

    drop(b);
    assert_eq!(settle_at(base), base, "the pool ends with the last context");

    // A context opened afterwards starts a fresh pool and scores on it.
    let mut c = open(&state);
    assert_eq!(threads_now(), base + n);
    score(&mut c, 2);
    c.flush().unwrap();
    drop(c);
    assert_eq!(settle_at(base), base);
}
