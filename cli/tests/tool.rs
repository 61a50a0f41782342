//! The tool as a user starts it. Scoring is tested by the workspace root's tests/cli.rs (and
//! the parity suites), which run this package's binary; this test also makes `cargo test`
//! build that binary.

use std::process::Command;

/// `vmaf --version` names the tool and the library's version, as upstream's does.
#[test]
fn version_names_the_library() {
    let out = Command::new(env!("CARGO_BIN_EXE_vmaf"))
        .arg("--version")
        .output()
        .expect("run vmaf");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

/// A missing input is a usage error with a message, not a panic.
#[test]
fn missing_input_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_vmaf"))
        .args(["-r", "/nonexistent/ref.y4m", "-d", "/nonexistent/dist.y4m"])
        .output()
        .expect("run vmaf");
    assert!(!out.status.success());
    assert!(!out.stderr.is_empty());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}
