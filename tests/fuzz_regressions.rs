//! Replays the fuzzing seed corpora and every minimised crasher (`fuzz/corpus/<target>/`,
//! `fuzz/regressions/<target>/`) through the fuzz targets' bodies on stable Rust, so a fixed
//! bug stays fixed without cargo-fuzz. See `fuzz/README.md`.

#[path = "../fuzz/harness/mod.rs"]
mod harness;

use std::path::Path;

fn replay_dir(target: &str, dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut files: Vec<_> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).expect("readable input");
        let r = std::panic::catch_unwind(|| harness::replay(target, &data));
        assert!(r.is_ok(), "{target}: {} panicked", f.display());
    }
    files.len()
}

fn replay(target: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let corpus = replay_dir(target, &root.join("corpus").join(target));
    let regressions = replay_dir(target, &root.join("regressions").join(target));
    assert!(corpus > 0, "{target}: empty seed corpus");
    eprintln!("{target}: replayed {corpus} corpus and {regressions} regression inputs");
}

#[test]
fn y4m() {
    replay("y4m");
}

#[test]
fn yuv() {
    replay("yuv");
}

#[test]
fn model_json() {
    replay("model_json");
}

#[test]
fn c_api() {
    replay("c_api");
}

/// `VMAF_FUZZ_REPLAY="<target> <file>..." cargo test --release --test fuzz_regressions one`
/// replays single inputs (e.g. a fresh crasher) without cargo-fuzz.
#[test]
fn one() {
    let Ok(spec) = std::env::var("VMAF_FUZZ_REPLAY") else {
        return;
    };
    let mut args = spec.split_whitespace();
    let target = args.next().expect("target name");
    for f in args {
        harness::replay(target, &std::fs::read(f).expect("readable input"));
    }
}
