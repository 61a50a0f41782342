//! C API checks: the committed headers match what cbindgen generates from `src/ffi`, the shared
//! library exports exactly the libvmaf API, and the C programs in `ffi-tests/` (compiled with the
//! system C compiler against the cdylib) pass: ABI layout, misuse (also under valgrind), the
//! picture pool, an FFmpeg-style consumer whose JSON log must match upstream's, and the example
//! of `docs/c-api.md`.
//!
//! Regenerate the headers after changing `src/ffi`: `VMAF_BLESS_HEADERS=1 cargo test --test ffi headers`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Scratch directory for this harness (`target/ffi-tests`).
fn work_dir() -> PathBuf {
    let d = target_dir().join("ffi-tests");
    std::fs::create_dir_all(&d).expect("create target/ffi-tests");
    d
}

/// `target/` (or `$CARGO_TARGET_DIR`): two levels above this test binary's `deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root().join("target"))
}

/// Directory holding a private copy of a current `libvmaf_hip.so` (see
/// [`common::private_cdylib`]), made once per test process.
fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::private_cdylib(&work_dir().join("lib")))
        .clone()
}

fn show(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Compiles C file `src` against the library into `target/ffi-tests/<name>`, once per test
/// process: tests sharing a program (the `c_api_*` parity runs) must not rewrite it while
/// another one runs it (the spawn then fails with EACCES or ETXTBSY).
fn compile_c(src: &Path, name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = built.iter().find(|(n, _)| n == name) {
        return exe.clone();
    }
    let exe = compile_c_uncached(src, name);
    built.push((name.to_string(), exe.clone()));
    exe
}

fn compile_c_uncached(src: &Path, name: &str) -> PathBuf {
    let lib = lib_dir();
    let exe = work_dir().join(name);
    // Linked under a temporary name and renamed into place, so a program still running from
    // an earlier test process keeps its own file.
    let tmp = work_dir().join(format!("{name}.{}.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .args([
            "-std=c11",
            "-D_GNU_SOURCE",
            "-O1",
            "-g",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("include/libvmaf"))
        .arg(src)
        .arg("-o")
        .arg(&tmp)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lvmaf_hip", "-lpthread", "-lm", "-ldl"])
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {} failed\n{}",
        src.display(),
        show(&out)
    );
    std::fs::rename(&tmp, &exe).expect("move the test program into place");
    exe
}

/// Runs `cmd` against our library copy, asserting success; returns its output.
fn run_ok(mut cmd: Command, what: &str) -> Output {
    // cargo test puts target/<profile> (maybe holding another profile's build) on the loader
    // path, which would win over the test programs' rpath.
    cmd.env("LD_LIBRARY_PATH", lib_dir());
    // A program just written by compile_c can be briefly "busy" (ETXTBSY) when another test
    // thread forked while its file was open for writing; retry the spawn then.
    let mut tries = 0;
    let out = loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap_or_else(|e| panic!("run {what}: {e}")),
        }
    };
    assert!(out.status.success(), "{what} failed\n{}", show(&out));
    print!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

fn run_c_test(name: &str, args: &[&Path]) -> Output {
    let exe = compile_c(&root().join("ffi-tests").join(format!("{name}.c")), name);
    let mut cmd = Command::new(&exe);
    cmd.args(args);
    run_ok(cmd, name)
}

// ---------------------------------------------------------------- headers

const HEADERS: &[&str] = &["picture", "feature", "model", "libvmaf"];

fn generate_header(name: &str) -> String {
    let cfg = cbindgen::Config::from_file(root().join(format!("cbindgen/{name}.toml")))
        .unwrap_or_else(|e| panic!("cbindgen/{name}.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_config(cfg)
        .with_src(root().join(format!("src/ffi/{name}.rs")))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen on src/ffi/{name}.rs: {e}"));
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("UTF-8 header")
}

#[test]
fn headers_match_cbindgen() {
    let bless = std::env::var_os("VMAF_BLESS_HEADERS").is_some();
    let mut stale = Vec::new();
    for h in HEADERS {
        let want = generate_header(h);
        let path = root().join(format!("include/libvmaf/{h}.h"));
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            if bless {
                std::fs::write(&path, &want).expect("write header");
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "headers out of date with src/ffi: {stale:?}; regenerate with \
         VMAF_BLESS_HEADERS=1 cargo test --test ffi headers"
    );
}

#[test]
fn headers_version_matches_crate() {
    let text = std::fs::read_to_string(root().join("include/libvmaf/version.h")).unwrap();
    let define = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} missing"))
            .trim()
            .to_string()
    };
    let v = format!(
        "{}.{}.{}",
        define("VMAF_API_VERSION_MAJOR"),
        define("VMAF_API_VERSION_MINOR"),
        define("VMAF_API_VERSION_PATCH")
    );
    assert_eq!(v, vmaf_hip::VMAF_VERSION);
}

#[test]
fn headers_compile_as_cpp() {
    let src = work_dir().join("headers.cpp");
    std::fs::write(
        &src,
        "#include <libvmaf/libvmaf.h>\n#include <libvmaf/version.h>\n#include <libvmaf/libvmaf_hip.h>\n#include <libvmaf/libvmaf_cuda.h>\n\
         int main() { VmafPicture p = VmafPicture(); VmafContext *v = nullptr;\n\
         VmafConfiguration c = VmafConfiguration(); c.log_level = VMAF_LOG_LEVEL_NONE;\n\
         return vmaf_picture_unref(&p) == 0 || vmaf_init(&v, c) != 0 || v == nullptr; }\n",
    )
    .unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(cxx)
        .args([
            "-std=c++11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("include/libvmaf"))
        .arg(&src)
        .output()
        .expect("run the C++ compiler");
    assert!(out.status.success(), "{}", show(&out));
}

// ---------------------------------------------------------------- exported symbols

const API: &[&str] = &[
    "vmaf_init",
    "vmaf_use_features_from_model",
    "vmaf_use_features_from_model_collection",
    "vmaf_use_feature",
    "vmaf_import_feature_score",
    "vmaf_read_pictures",
    "vmaf_score_at_index",
    "vmaf_score_at_index_model_collection",
    "vmaf_feature_score_at_index",
    "vmaf_score_pooled",
    "vmaf_score_pooled_model_collection",
    "vmaf_feature_score_pooled",
    "vmaf_preallocate_pictures",
    "vmaf_fetch_preallocated_picture",
    "vmaf_close",
    "vmaf_write_output",
    "vmaf_version",
    "vmaf_model_load",
    "vmaf_model_load_from_path",
    "vmaf_model_feature_overload",
    "vmaf_model_destroy",
    "vmaf_model_collection_load",
    "vmaf_model_collection_load_from_path",
    "vmaf_model_collection_feature_overload",
    "vmaf_model_collection_destroy",
    "vmaf_picture_alloc",
    "vmaf_picture_unref",
    "vmaf_feature_dictionary_set",
    "vmaf_feature_dictionary_free",
    "vmaf_cuda_state_init",
    "vmaf_cuda_import_state",
    "vmaf_cuda_preallocate_pictures",
    "vmaf_cuda_fetch_preallocated_picture",
];

#[test]
fn exports_only_the_api() {
    let lib = lib_dir().join("libvmaf_hip.so");
    let mut cmd = Command::new("nm");
    cmd.args(["-D", "--defined-only"]).arg(&lib);
    let out = run_ok(cmd, "nm -D --defined-only");
    let mut functions = BTreeSet::new();
    let mut other = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [_, "T", name] => {
                functions.insert(name.to_string());
            }
            [_, kind, name] => other.push(format!("{kind} {name}")),
            _ => other.push(line.to_string()),
        }
    }
    let missing: Vec<_> = API.iter().filter(|f| !functions.contains(**f)).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    let extra: Vec<_> = functions
        .iter()
        .filter(|f| !API.contains(&f.as_str()) && !f.starts_with("vmaf_hip_"))
        .collect();
    assert!(extra.is_empty(), "exported beyond the API: {extra:?}");
    assert!(other.is_empty(), "non-function symbols exported: {other:?}");
}

// ---------------------------------------------------------------- C programs

#[test]
fn c_abi() {
    run_c_test("test_abi", &[]);
}

#[test]
fn c_errors() {
    let out = run_c_test("test_errors", &[]);
    // vmaf_write_output(ctx, "/dev/stdout", JSON) wrote the log into the pipe.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"pooled_metrics\"") && stdout.contains("\"frames\""),
        "{stdout}"
    );
}

#[test]
fn c_errors_valgrind() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!("skipped: valgrind missing");
        return;
    }
    let exe = compile_c(&root().join("ffi-tests/test_errors.c"), "test_errors_vg");
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--quiet",
    ])
    .arg(&exe);
    let out = run_ok(cmd, "valgrind test_errors");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Invalid read") && !stderr.contains("Invalid write"),
        "{stderr}"
    );
}

/// Sizes past the documented limits give -EINVAL and allocations that do not fit -ENOMEM, with
/// the process and the context still working. Run under a 4 GiB address-space limit so the
/// out-of-memory cases are deterministic (and therefore not under valgrind, which needs more).
#[test]
fn c_limits_under_ulimit() {
    let exe = compile_c(&root().join("ffi-tests/test_limits.c"), "test_limits");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\"")
        .arg(&exe);
    let out = run_ok(cmd, "test_limits under ulimit -v 4194304");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("psnr_y 42.110204") && stdout.contains("psnr_cb 60.000000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("test_limits: all checks passed"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Each refusal logs one line naming the function and what failed.
    for needle in [
        "libvmaf ERROR vmaf_picture_alloc: out of memory: 65535x65535",
        "libvmaf ERROR vmaf_picture_alloc: invalid argument: picture size 1x4294967295 exceeds",
        "libvmaf ERROR vmaf_import_feature_score: invalid argument: frame index 4294967295",
        "libvmaf ERROR vmaf_import_feature_score: out of memory: cannot grow the scores",
        "libvmaf ERROR vmaf_read_pictures: invalid argument: frame index 4000000000",
        "libvmaf ERROR vmaf_preallocate_pictures: invalid argument: a pool of 100000 pictures",
        "libvmaf ERROR vmaf_preallocate_pictures: out of memory: picture ",
        "libvmaf ERROR vmaf_init: invalid argument: n_threads 100000 exceeds the limit of 1024",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    }
}

#[test]
fn c_pool() {
    run_c_test("test_pool", &[]);
}

/// Pools of 1..8 pictures over 100 frames with 0, 1 and 4 threads, on the GPU when there is
/// one: scores equal per-frame allocation on the CPU and no pool runs dry.
#[test]
fn c_pool_stream() {
    let out = run_c_test("test_pool_stream", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(": ok"), "{stdout}");
}

/// Wrapped caller frames (8- and 10-bit, padded strides) score as copied ones, on the CPU
/// and the GPU, each released once; bad arguments are refused without releasing.
#[test]
fn c_wrap() {
    let out = run_c_test("test_wrap", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("wrap 10-bit, 2 threads, CPU: ok"),
        "{stdout}"
    );
    assert!(!stdout.contains("DIFFERS"), "{stdout}");
}

/// Device pictures: libvmaf_cuda.h and the DEVICE pool, filled on the GPU as FFmpeg's
/// libvmaf_cuda filter fills them, score as host pictures; argument checks without a GPU.
#[test]
fn c_device() {
    let out = run_c_test("test_device", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("test_device: "), "{stdout}");
    assert!(!stdout.contains("DIFFERS"), "{stdout}");
}

#[test]
fn c_hip_smoke() {
    let src = root().join("ffi-tests/test_hip_smoke.c");
    if !src.exists() {
        println!("skipped: ffi-tests/test_hip_smoke.c absent");
        return;
    }
    run_c_test("test_hip_smoke", &[]);
}

// ---------------------------------------------------------------- parity through the C API

/// Metrics of upstream's log the C API run does not compute (extra `--feature`s of the CLI run).
const NOT_COMPUTED: &[&str] = &["float_ssim", "float_ms_ssim", "cambi"];

type Json = serde_json::Value;

/// Every metric of `expected` (per frame and pooled) except [`NOT_COMPUTED`] must be in `got`
/// with the same printed value; `got` must have no other metric.
fn compare_logs(got: &Json, expected: &Json, what: &str) {
    fn keys(v: &Json) -> BTreeSet<String> {
        v.as_object()
            .map(|o| {
                o.keys()
                    .filter(|k| !NOT_COMPUTED.contains(&k.as_str()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
    let mut errors = Vec::new();
    let mut same = |place: String, g: &Json, e: &Json| {
        let (kg, ke) = (keys(g), keys(e));
        if kg != ke {
            errors.push(format!("{place}: keys {kg:?}, expected {ke:?}"));
        }
        for k in &ke {
            if !e[k].is_object() && g[k] != e[k] {
                errors.push(format!("{place} {k}: {} != expected {}", g[k], e[k]));
            }
        }
    };
    let frames_e = expected["frames"].as_array().expect("expected frames");
    let frames_g = got["frames"].as_array().expect("frames in our log");
    assert_eq!(frames_g.len(), frames_e.len(), "{what}: frame count");
    for (fe, fg) in frames_e.iter().zip(frames_g) {
        assert_eq!(fg["frameNum"], fe["frameNum"], "{what}: frame order");
        same(
            format!("frame {}", fe["frameNum"]),
            &fg["metrics"],
            &fe["metrics"],
        );
    }
    let (pg, pe) = (&got["pooled_metrics"], &expected["pooled_metrics"]);
    same("pooled".into(), pg, pe);
    for k in keys(pe) {
        same(format!("pooled {k}"), &pg[&k], &pe[&k]);
    }
    assert!(
        errors.is_empty(),
        "{what}: {} mismatches:\n{}",
        errors.len(),
        errors[..errors.len().min(40)].join("\n")
    );
}

/// Runs `test_api` on parity clip `name` and checks its JSON log against upstream's.
fn api_parity(name: &str, n_threads: u32) {
    let (r, d, raw) = common::parity_files(name);
    let exe = compile_c(&root().join("ffi-tests/test_api.c"), "test_api");
    let log = work_dir().join(format!("api_{name}_t{n_threads}.json"));
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(&exe);
    cmd.arg(&r).arg(&d).arg(&log).arg(n_threads.to_string());
    if let Some(g) = raw {
        cmd.args(g.texts());
    }
    run_ok(cmd, &format!("test_api {name}"));
    let got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&log).expect("read our log"))
            .expect("our log is JSON");
    let expected = common::expected_json(&format!("{name}.json"));
    compare_logs(&got, &expected, name);
}

#[test]
fn c_api_natural_576x324_420p8() {
    api_parity("natural_576x324_420p8", 0);
}

#[test]
fn c_api_natural_640x360_420p10_threads() {
    api_parity("natural_640x360_420p10", 2);
}

#[test]
fn c_api_natural_320x180_420p12() {
    api_parity("natural_320x180_420p12", 0);
}

#[test]
fn c_api_testsrc_480x270_444p8() {
    api_parity("testsrc_480x270_444p8", 1);
}

#[test]
fn c_api_mandel_352x288_422p8_raw() {
    api_parity("mandel_352x288_422p8", 0);
}

// ---------------------------------------------------------------- docs

/// The example program of `docs/c-api.md` compiles and scores a clip.
#[test]
fn docs_example_runs() {
    let md = std::fs::read_to_string(root().join("docs/c-api.md")).expect("docs/c-api.md");
    let start = md.find("```c\n").expect("a ```c block in docs/c-api.md") + 5;
    let len = md[start..].find("```").expect("closing fence");
    let src = work_dir().join("doc_example.c");
    std::fs::write(&src, &md[start..start + len]).unwrap();
    let exe = compile_c(&src, "doc_example");
    let (r, d, _) = common::parity_files("natural_576x324_420p8");
    // The example reads raw 8-bit 4:2:0: strip the y4m framing first.
    let strip = |y4m: &Path| -> PathBuf {
        let bytes = std::fs::read(y4m).unwrap();
        let mut out = Vec::new();
        let mut pos = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        let frame = 576 * 324 * 3 / 2;
        while pos < bytes.len() {
            pos += bytes[pos..].iter().position(|&b| b == b'\n').unwrap() + 1;
            out.extend_from_slice(&bytes[pos..pos + frame]);
            pos += frame;
        }
        let p = work_dir().join(y4m.with_extension("yuv").file_name().unwrap());
        std::fs::write(&p, out).unwrap();
        p
    };
    let mut cmd = Command::new(&exe);
    cmd.arg(strip(&r)).arg(strip(&d)).args(["576", "324"]);
    let out = run_ok(cmd, "docs example");
    let expected = common::expected_json("natural_576x324_420p8.json");
    let want = format!(
        "VMAF score: {:.6}",
        expected["pooled_metrics"]["vmaf"]["mean"].as_f64().unwrap()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&want), "expected {want:?} in {stdout:?}");
}
