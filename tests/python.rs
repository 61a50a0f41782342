//! The Python package (`python/`): `python/run-tests.sh` makes a virtual environment under the
//! target directory with NumPy, pytest, Ray and maturin from PyPI, builds the package the way
//! `pip install ./python` does into this test binary's target directory, and runs its pytest
//! suite (bindings against the `vmaf` CLI, NumPy and DLPack frames, the catalog on a local Ray
//! instance and on the local engine; GPU tests skip without a device unless
//! `VMAF_TEST_REQUIRE_GPU=1`). It needs the network and minutes, so it runs only under CI or
//! with `VMAF_TEST_PYTHON=1`, and never with `VMAF_TEST_PYTHON=0` (.ci/run runs it as a stage
//! of its own, `cargo test --release --test python`); `cargo test` holds the build-directory
//! lock only while it compiles, so the nested cargo builds do not wait on it. `python_wheel`
//! builds and checks the wheel to ship (python/wheel-test.sh) under the same switch.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `python/<script>` with this test binary's target directory, when the Python tests are
/// wanted (CI, or `VMAF_TEST_PYTHON=1`).
fn run_python_script(script: &str) {
    let wanted = match std::env::var("VMAF_TEST_PYTHON").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => std::env::var_os("CI").is_some(),
    };
    if !wanted {
        println!("skipped: set VMAF_TEST_PYTHON=1 to build and test the Python package (CI does)");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .to_path_buf();
    let status = Command::new("bash")
        .arg(root.join("python").join(script))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap_or_else(|e| panic!("run python/{script}: {e}"));
    assert!(status.success(), "python/{script} failed ({status})");
}

#[test]
fn python_package() {
    run_python_script("run-tests.sh");
}

/// The wheel to ship (python/wheel-test.sh): manylinux2014 abi3 built with zig, auditwheel's
/// verdict, and a fresh venv without Rust scoring a clip pair exactly as the CLI.
#[test]
fn python_wheel() {
    run_python_script("wheel-test.sh");
}
