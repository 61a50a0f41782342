//! End-to-end checks through the external build tools: `meson test` (the ffi-tests built and run
//! by meson against the meson-built library) and the FFmpeg patch (`ffmpeg-patches/test.sh`:
//! builds FFmpeg 7.1.5 with the patch against our installed library and checks its scores).
//! Each is skipped, with a message, when its tools are missing; the FFmpeg build (minutes) runs
//! only under CI or with `VMAF_TEST_FFMPEG=1`.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn meson_builds_and_tests() {
    if !have("meson") || !have("ninja") {
        println!("skipped: meson/ninja not installed");
        return;
    }
    let build = root().join("target/meson-test");
    if !build.join("build.ninja").exists() {
        run(
            Command::new("meson")
                .args(["setup", "--buildtype=release"])
                .arg(&build)
                .arg(root()),
            "meson setup",
        );
    }
    run(
        Command::new("meson")
            .arg("test")
            .arg("-C")
            .arg(&build)
            .arg("--print-errorlogs"),
        "meson test",
    );
}

#[test]
fn ffmpeg_patch_end_to_end() {
    let wanted = std::env::var_os("CI").is_some()
        || std::env::var("VMAF_TEST_FFMPEG").is_ok_and(|v| v == "1");
    if !wanted {
        println!("skipped: set VMAF_TEST_FFMPEG=1 to build FFmpeg with the patch (CI does)");
        return;
    }
    run(
        &mut Command::new(root().join("ffmpeg-patches/test.sh")),
        "ffmpeg-patches/test.sh",
    );
}
