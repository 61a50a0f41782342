//! End-to-end checks through the external build tools: `meson test` (the ffi-tests built and run
//! by meson against the meson-built library), `meson install` (upstream's install layout, a C
//! program built with `pkg-config libvmaf` against the installed prefix, shared and static) and
//! the FFmpeg patch (`ffmpeg-patches/test.sh`: builds FFmpeg 7.1.5 with the patch against our
//! installed library and checks its scores). Each is skipped, with a message, when its tools are
//! missing; the FFmpeg build (minutes) runs only under CI or with `VMAF_TEST_FFMPEG=1`.
//!
//! meson and test.sh build the crate through cargo in this test binary's own target directory
//! (`CARGO_TARGET_DIR`), with the release profile `cargo test --release` uses: they find the
//! library and the CLI already built. `cargo test` holds the build-directory lock only while it
//! compiles, so the nested cargo does not wait on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The cargo target directory this test was built in.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .to_path_buf()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn meson_builds_and_tests() {
    if !have("meson") || !have("ninja") {
        println!("skipped: meson/ninja not installed");
        return;
    }
    let build = target_dir().join("meson-test");
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
            .arg("--print-errorlogs")
            .env("CARGO_TARGET_DIR", target_dir()),
        "meson test",
    );
}

/// `meson setup` + `meson install` into `<tmp>/<name>-prefix`; returns the prefix.
fn meson_install(name: &str, options: &[&str]) -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (build, prefix) = (
        tmp.join(format!("{name}-build")),
        tmp.join(format!("{name}-prefix")),
    );
    for d in [&build, &prefix] {
        let _ = std::fs::remove_dir_all(d);
    }
    run(
        Command::new("meson")
            .arg("setup")
            .arg(format!("--prefix={}", prefix.display()))
            .args(["--libdir=lib", "--buildtype=release"])
            .args(options)
            .arg(&build)
            .arg(root()),
        "meson setup",
    );
    run(
        Command::new("meson")
            .args(["install", "-C"])
            .arg(&build)
            .env("CARGO_TARGET_DIR", target_dir()),
        "meson install",
    );
    prefix
}

/// The NEEDED entries and the SONAME of an ELF file, from `readelf -d`.
fn dynamic_names(file: &Path) -> (Vec<String>, Option<String>) {
    let out = run(Command::new("readelf").arg("-d").arg(file), "readelf -d");
    let (mut needed, mut soname) = (Vec::new(), None);
    for line in stdout(&out).lines() {
        let name = line
            .split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .map(|(n, _)| n.to_string());
        if line.contains("(NEEDED)") {
            needed.extend(name);
        } else if line.contains("(SONAME)") {
            soname = name;
        }
    }
    (needed, soname)
}

fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out = run(
        Command::new("pkg-config")
            .args(args)
            .arg("libvmaf")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        "pkg-config",
    );
    stdout(&out)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Runs the installed-prefix build of ffi-tests/test_api.c on the `life` parity clip and checks
/// its scores against upstream's: the printed pooled VMAF and every frame's vmaf and psnr_y.
fn check_scores(exe: &Path, prefix: &Path, clips: &Path, label: &str) {
    let json = clips.join(format!("{label}.json"));
    let out = run(
        Command::new(exe)
            .arg(clips.join("ref_life_320x240_420p8.y4m"))
            .arg(clips.join("dist_life_320x240_420p8.y4m"))
            .arg(&json)
            .arg("0")
            // the prefix alone: the installed library, not target/'s
            .env("LD_LIBRARY_PATH", prefix.join("lib")),
        label,
    );
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).expect("read json")).expect("parse json")
    };
    let want = read(&root().join("tests/data/expected/life_320x240_420p8.json"));
    let got = read(&json);
    let mean = want["pooled_metrics"]["vmaf"]["mean"].as_f64().unwrap();
    assert!((99.0..100.0).contains(&mean), "expected pooled vmaf {mean}");
    assert_eq!(
        stdout(&out).trim(),
        format!("VMAF score: {mean:.6} (12 frames)"),
        "{label}: pooled score"
    );
    assert_eq!(
        got["pooled_metrics"]["vmaf"],
        want["pooled_metrics"]["vmaf"]
    );
    let (gf, wf) = (
        got["frames"].as_array().unwrap(),
        want["frames"].as_array().unwrap(),
    );
    assert_eq!(gf.len(), 12);
    assert_eq!(gf.len(), wf.len());
    for (g, w) in gf.iter().zip(wf) {
        for m in ["vmaf", "psnr_y", "integer_adm2", "integer_vif_scale0"] {
            assert_eq!(
                g["metrics"][m], w["metrics"][m],
                "{label}: frame {} {m}",
                w["frameNum"]
            );
        }
    }
}

#[test]
fn meson_installs_upstream_layout() {
    for tool in ["meson", "ninja", "pkg-config", "cc", "readelf", "xz"] {
        if !have(tool) {
            println!("skipped: {tool} not installed");
            return;
        }
    }
    let prefix = meson_install("meson-install", &[]);
    let lib = prefix.join("lib");

    // What ships has no fault switch: meson never builds the `fault-injection` feature.
    for file in ["libvmaf.so.3.2.0", "libvmaf.a"] {
        let bytes = std::fs::read(lib.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let needle = b"VMAF_HIP_INJECT_FAULT";
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{file} holds the fault switch (a fault-injection build in the target directory?)"
        );
    }

    // The library under upstream's names, one real file with SONAME libvmaf.so.3.
    let real = lib.join("libvmaf.so.3.2.0");
    assert!(
        real.is_file() && !real.is_symlink(),
        "{} is not a file",
        real.display()
    );
    for (link, to) in [
        ("libvmaf.so.3", "libvmaf.so.3.2.0"),
        ("libvmaf.so", "libvmaf.so.3"),
        ("libvmaf_hip.so.3", "libvmaf.so.3.2.0"),
        ("libvmaf_hip.so", "libvmaf_hip.so.3"),
        ("libvmaf_hip.a", "libvmaf.a"),
    ] {
        let target = std::fs::read_link(lib.join(link)).unwrap_or_else(|e| panic!("{link}: {e}"));
        assert_eq!(target, Path::new(to), "{link}");
    }
    let (needed, soname) = dynamic_names(&real);
    assert_eq!(
        soname.as_deref(),
        Some("libvmaf.so.3"),
        "SONAME (NEEDED {needed:?})"
    );
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "{needed:?}"
    );
    // The licences beside the documentation: ours, and the built-in models' own.
    let doc = prefix.join("share/doc/vmaf-hip");
    for (file, text) in [
        ("LICENSE", "the vmaf-hip contributors"),
        ("LICENSE.models", "Netflix, Inc."),
    ] {
        let got = std::fs::read_to_string(doc.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            got.contains("BSD-2-Clause-Patent") && got.contains(text),
            "{file}"
        );
    }
    let static_lib = lib.join("libvmaf.a");
    assert!(
        static_lib.is_file() && static_lib.metadata().unwrap().len() > 1 << 20,
        "{} missing or small",
        static_lib.display()
    );
    let pc = std::fs::read_to_string(lib.join("pkgconfig/libvmaf.pc")).expect("libvmaf.pc");
    assert!(pc.contains("Libs: -L${libdir} -lvmaf\n"), "{pc}");
    assert!(pc.contains("\nLibs.private: "), "{pc}");
    assert!(pc.contains("Version: 3.2.0"), "{pc}");
    let pc_hip =
        std::fs::read_to_string(lib.join("pkgconfig/libvmaf_hip.pc")).expect("libvmaf_hip.pc");
    assert!(pc_hip.contains("-lvmaf_hip"), "{pc_hip}");
    for h in [
        "libvmaf.h",
        "model.h",
        "picture.h",
        "feature.h",
        "version.h",
        "libvmaf_hip.h",
        "libvmaf_cuda.h",
    ] {
        assert!(
            prefix.join("include/libvmaf").join(h).is_file(),
            "include/libvmaf/{h}"
        );
    }
    let version = run(
        Command::new(prefix.join("bin/vmaf")).arg("--version"),
        "bin/vmaf --version",
    );
    // like upstream's, the version goes to stderr; stdout says which CPU code runs
    assert_eq!(String::from_utf8_lossy(&version.stderr).trim(), "3.2.0");
    assert!(
        stdout(&version).starts_with("vmaf-hip "),
        "{}",
        stdout(&version)
    );

    // A libvmaf consumer built with `pkg-config libvmaf` against the prefix.
    let clips = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("meson-install-clips");
    std::fs::create_dir_all(&clips).unwrap();
    for side in ["ref", "dist"] {
        let name = format!("{side}_life_320x240_420p8.y4m");
        let out = run(
            Command::new("xz")
                .arg("-dc")
                .arg(root().join("tests/data/clips").join(format!("{name}.xz"))),
            "xz -dc",
        );
        std::fs::write(clips.join(name), out.stdout).unwrap();
    }
    let src = root().join("ffi-tests/test_api.c");
    let cc = |exe: &Path, flags: &[String]| {
        run(
            Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
                .args(["-std=c11", "-D_GNU_SOURCE", "-O1"])
                .arg(&src)
                .arg("-o")
                .arg(exe)
                .args(flags),
            "cc",
        );
    };
    let shared = clips.join("test_api_shared");
    cc(&shared, &pkg_config(&prefix, &["--cflags", "--libs"]));
    let (needed, _) = dynamic_names(&shared);
    assert!(
        needed.contains(&"libvmaf.so.3".to_string()),
        "NEEDED {needed:?}"
    );
    check_scores(&shared, &prefix, &clips, "shared");

    // The same program linked with libvmaf.a and the Libs.private system libraries.
    let mut flags = pkg_config(&prefix, &["--static", "--cflags", "--libs"]);
    let l = flags
        .iter()
        .position(|f| f == "-lvmaf")
        .expect("-lvmaf in pkg-config --libs");
    flags[l] = "-l:libvmaf.a".to_string();
    let statik = clips.join("test_api_static");
    cc(&statik, &flags);
    let (needed, _) = dynamic_names(&statik);
    assert!(
        !needed.iter().any(|n| n.contains("vmaf")),
        "static build still needs {needed:?}"
    );
    check_scores(&statik, &prefix, &clips, "static");

    // -Dlibvmaf_compat=false: only the explicit names beside the SONAME link.
    let prefix = meson_install("meson-install-nocompat", &["-Dlibvmaf_compat=false"]);
    let lib = prefix.join("lib");
    assert!(lib.join("libvmaf_hip.so.3.2.0").is_file());
    assert!(lib.join("libvmaf_hip.a").is_file());
    assert_eq!(
        std::fs::read_link(lib.join("libvmaf.so.3")).unwrap(),
        Path::new("libvmaf_hip.so.3.2.0")
    );
    for absent in ["libvmaf.so", "libvmaf.a", "libvmaf.so.3.2.0"] {
        assert!(!lib.join(absent).exists(), "{absent} installed");
    }
    assert!(!prefix.join("bin/vmaf").exists(), "bin/vmaf installed");
    let pc = std::fs::read_to_string(lib.join("pkgconfig/libvmaf.pc")).unwrap();
    assert!(pc.contains("Libs: -L${libdir} -lvmaf_hip\n"), "{pc}");
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
        Command::new(root().join("ffmpeg-patches/test.sh")).env("CARGO_TARGET_DIR", target_dir()),
        "ffmpeg-patches/test.sh",
    );
}
