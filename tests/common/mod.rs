//! Shared helpers for the integration tests: parity clips (`clips.rs`, which the unit tests
//! share), running the built `vmaf` binary, and comparing JSON logs the way `vmaf-json-diff`
//! does.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod clips;
pub use clips::*;

/// Command-line inputs of parity clip `name`: `-r ref -d dist` plus the raw-format flags of the
/// 4:2:2 clip.
pub fn clip_args(name: &str) -> Vec<String> {
    let (r, d, raw) = parity_files(name);
    let mut v = vec![
        "-r".into(),
        r.display().to_string(),
        "-d".into(),
        d.display().to_string(),
    ];
    if let Some(g) = raw {
        for (flag, value) in ["-w", "-h", "-p", "-b"].into_iter().zip(g.texts()) {
            v.extend([flag.to_string(), value]);
        }
    }
    v
}

/// A fresh scratch directory for test `name`.
pub fn work_dir(name: &str) -> PathBuf {
    let d = repo_root().join("target/testdata/cli").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create work dir");
    d
}

/// The `vmaf` tool (the workspace's cli package): `VMAF_BIN`, else `vmaf` in the profile
/// directory above this test program's (`target/release/vmaf` for `target/release/deps/…`),
/// which `cargo test` at the workspace root builds along with the tests.
pub fn vmaf_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("VMAF_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("test program path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("vmaf"))
        .expect("test program in a cargo target directory");
    assert!(
        bin.exists(),
        "no vmaf tool at {}: `cargo test` at the workspace root builds it, or run \
         `cargo build -p vmaf-cli` with the same profile (or set VMAF_BIN)",
        bin.display()
    );
    bin
}

/// Runs the `vmaf` binary. `VMAF_TEST_BACKEND=hip` runs every invocation on the GPU (the
/// device machine runs the whole suite that way).
pub fn vmaf<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut cmd = Command::new(vmaf_bin());
    cmd.args(args);
    let has_backend = args.iter().any(|a| a.as_ref() == "--backend");
    if let (Ok(backend), false) = (std::env::var("VMAF_TEST_BACKEND"), has_backend) {
        cmd.args(["--backend", &backend]);
    }
    cmd.output().expect("run vmaf")
}

/// Runs `vmaf` and asserts success.
pub fn vmaf_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let out = vmaf(args);
    assert!(
        out.status.success(),
        "vmaf failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Parses a JSON log.
fn frames(v: &Value) -> BTreeMap<i64, &serde_json::Map<String, Value>> {
    v["frames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| Some((f["frameNum"].as_i64()?, f["metrics"].as_object()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Compares one value: the same `f64` (NaN equal to NaN), or both null.
fn same_value(e: &Value, g: Option<&Value>) -> Result<(), String> {
    let Some(g) = g else {
        return Err(format!("missing (expected {e})"));
    };
    match (e.as_f64(), g.as_f64()) {
        (Some(a), Some(b)) if a == b || (a.is_nan() && b.is_nan()) => Ok(()),
        (None, None) if e.is_null() && g.is_null() => Ok(()),
        _ => Err(format!("expected {e}, got {g}")),
    }
}

/// Every per-frame, pooled and aggregate value of `expected` must appear in `got` with the same
/// value (exact). Metrics named in `skip` are ignored; `version` and `fps` are never compared.
/// Returns the number of values compared, or the list of mismatches.
pub fn json_diff(expected: &Value, got: &Value, skip: &[&str]) -> Result<usize, Vec<String>> {
    let mut bad = Vec::new();
    let mut n = 0;
    let (ef, gf) = (frames(expected), frames(got));
    if ef.keys().ne(gf.keys()) {
        bad.push(format!(
            "frames: expected numbers {:?}, got {:?}",
            ef.keys().collect::<Vec<_>>(),
            gf.keys().collect::<Vec<_>>()
        ));
    }
    for (i, m) in &ef {
        for (k, v) in m.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            n += 1;
            if let Err(e) = same_value(v, gf.get(i).and_then(|g| g.get(k))) {
                bad.push(format!("frame {i} {k}: {e}"));
            }
        }
    }
    if let Some(pm) = expected["pooled_metrics"].as_object() {
        for (k, methods) in pm.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            for (meth, v) in methods.as_object().into_iter().flatten() {
                n += 1;
                if let Err(e) = same_value(v, got["pooled_metrics"][k].get(meth)) {
                    bad.push(format!("pooled {k}.{meth}: {e}"));
                }
            }
        }
    }
    if let Some(am) = expected["aggregate_metrics"].as_object() {
        for (k, v) in am.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            n += 1;
            if let Err(e) = same_value(v, got["aggregate_metrics"].get(k)) {
                bad.push(format!("aggregate {k}: {e}"));
            }
        }
    }
    if bad.is_empty() {
        Ok(n)
    } else {
        Err(bad)
    }
}

/// Asserts [`json_diff`] finds no mismatch, printing the first ones otherwise.
pub fn assert_json_matches(expected: &Value, got: &Value, skip: &[&str], what: &str) {
    match json_diff(expected, got, skip) {
        Ok(n) => assert!(n > 0, "{what}: nothing compared"),
        Err(bad) => {
            let shown: Vec<_> = bad.iter().take(40).cloned().collect();
            panic!("{what}: {} mismatches:\n{}", bad.len(), shown.join("\n"));
        }
    }
}

/// Replaces the run-dependent `fps` value of an XML or JSON log with `*` (XML) or `0` (JSON,
/// which stays valid).
pub fn mask_fps(text: &str) -> String {
    text.lines()
        .map(|l| {
            if let Some(start) = l.find("<fyi fps=\"") {
                let head = &l[..start + 10];
                let tail = l[start + 10..]
                    .find('"')
                    .map_or("", |e| &l[start + 10 + e..]);
                format!("{head}*{tail}")
            } else if let Some(rest) = l.strip_prefix("  \"fps\": ") {
                let comma = if rest.ends_with(',') { "," } else { "" };
                format!("  \"fps\": 0{comma}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

/// Asserts two logs are the same text but for `fps` (see [`mask_fps`]), naming the first line
/// that differs.
pub fn assert_same_log(got: &str, want: &str, what: &str) {
    let (got, want) = (mask_fps(got), mask_fps(want));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{what} differs from upstream at line {}:\n  got:  {}\n  want: {}",
            line + 1,
            got.lines().nth(line).unwrap_or("<end>"),
            want.lines().nth(line).unwrap_or("<end>")
        );
    }
}

/// Path of a file in `dir` as a `String` argument.
pub fn arg(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// Newest modification time of any file under `dir`.
fn newest_mtime(dir: &Path) -> std::time::SystemTime {
    let mut best = std::time::SystemTime::UNIX_EPOCH;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest_mtime(&p)
        } else {
            e.metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
        };
        best = best.max(t);
    }
    best
}

/// A private copy of a current `libvmaf_hip.so` in `dir` (returned), for test programs to link
/// and load: `cargo test` builds the cdylib next to this binary (in `deps/`, same profile);
/// if it is missing or older than the sources (another profile's build may have replaced it),
/// it is built with this binary's profile. Where cargo cannot be run at all (a GPU machine
/// given built test binaries, whose copied sources may look newer), the library beside the
/// binary is used as it is, with a note. The copy keeps a concurrent cargo build from
/// replacing the library under running programs.
pub fn private_cdylib(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let newest_src = newest_mtime(&repo_root().join("src"));
    let fresh = |p: &Path| {
        p.metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= newest_src)
    };
    let mut lib = deps.join("libvmaf_hip.so");
    if !fresh(&lib) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // target/release/deps for `cargo test --release`, target/debug/deps otherwise.
        let release = deps.parent().and_then(Path::file_name) == Some("release".as_ref());
        let profile = if release { "release" } else { "test" };
        match Command::new(cargo)
            .args(["build", "--lib", "--profile", profile])
            .current_dir(repo_root())
            .status()
        {
            Ok(st) => {
                assert!(st.success(), "cargo build --lib failed");
                lib = deps.parent().expect("profile dir").join("libvmaf_hip.so");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && lib.exists() => {
                eprintln!(
                    "note: no cargo here ({e}); using {} as built",
                    lib.display()
                );
            }
            Err(e) => panic!("run cargo build: {e}"),
        }
    }
    assert!(lib.exists(), "{} not found", lib.display());
    std::fs::create_dir_all(dir).expect("create lib dir");
    let tmp = dir.join(format!("libvmaf_hip.so.{}.part", std::process::id()));
    std::fs::copy(&lib, &tmp).expect("copy cdylib");
    std::fs::rename(&tmp, dir.join("libvmaf_hip.so")).expect("install cdylib copy");
    dir.to_path_buf()
}

// Float extractors and models: upstream's `-Denable_float=true` logs in
// `tests/data/expected_float`.

/// Runs `vmaf --json` on `clip` with `extra` flags; returns the parsed log.
pub fn run_json(test: &str, clip: &str, extra: &[&str]) -> serde_json::Value {
    let dir = work_dir(test);
    let out = arg(&dir, "out.json");
    let mut args = clip_args(clip);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--json", "-q", "--threads", "2", "-o", &out].map(String::from));
    vmaf_ok(&args);
    parse_json(
        &std::fs::read_to_string(&out).expect("read output"),
        "output",
    )
}

/// Compares the metrics of expected log `name` that `keep` selects (per frame and pooled) with
/// `got`; the others are skipped.
pub fn check_float_metrics(name: &str, got: &serde_json::Value, keep: &dyn Fn(&str) -> bool) {
    let want = expected_float(name);
    let exact_here = divides_as_reference_host();
    let keys: Vec<String> = want["pooled_metrics"]
        .as_object()
        .expect("pooled metrics")
        .keys()
        .cloned()
        .collect();
    let skip: Vec<&str> = keys
        .iter()
        .filter(|k| !keep(k) || (!exact_here && reciprocal_dependent(k, got)))
        .map(String::as_str)
        .collect();
    // Unless every kept metric is compared approximately below.
    if exact_here || keys.iter().any(|k| !skip.contains(&k.as_str())) {
        assert_json_matches(&want, got, &skip, name);
    }
    if !exact_here {
        let near: Vec<&str> = keys
            .iter()
            .filter(|k| keep(k) && reciprocal_dependent(k, got))
            .map(String::as_str)
            .collect();
        assert_near(&want, got, &near, name);
    }
}

/// `float_adm` divides through the CPU's reciprocal estimate (RCPSS) plus one Newton step, as
/// upstream's x86 build does, and Intel's and AMD's estimates differ in their last bits: the
/// float logs come from an AMD EPYC host, whose reciprocals hash to this
/// (`vmaf_hip::feature::float_adm_reciprocal_fingerprint`).
pub const REFERENCE_RECIPROCALS: u64 = 0x7e3f_eb9b_27d2_f531;

/// Whether this CPU's float ADM divides bit for bit as the reference host's did; elsewhere
/// upstream's own scores differ from its logs too, in the last digits of `float_adm`'s values.
pub fn divides_as_reference_host() -> bool {
    let here = vmaf_hip::feature::float_adm_reciprocal_fingerprint();
    let same = here == REFERENCE_RECIPROCALS;
    if !same {
        static NOTE: std::sync::Once = std::sync::Once::new();
        NOTE.call_once(|| {
            println!(
                "note: this CPU's reciprocal estimates ({here:#x}) differ from the reference \
                 host's: float_adm-derived values are compared to 1e-5 (relative above 1; VMAF \
                 1e-3), the rest exactly"
            )
        });
    }
    same
}

/// Whether metric `name` of log `got` depends on `float_adm`'s division: its own scores, and a
/// model score where no integer ADM ran (so the model reads the float one).
fn reciprocal_dependent(name: &str, got: &Value) -> bool {
    if name.starts_with("adm") || name.starts_with("aim") {
        return true;
    }
    let integer_adm = got["frames"][0]["metrics"]
        .as_object()
        .is_some_and(|m| m.keys().any(|k| k.starts_with("integer_adm")));
    name.starts_with("vmaf") && !integer_adm
}

/// Every per-frame and pooled value of the `names` metrics within 1e-5 of `expected`'s,
/// relative to values above 1 (the debug sums run to hundreds); VMAF within 1e-3.
fn assert_near(expected: &Value, got: &Value, names: &[&str], what: &str) {
    let tol = |k: &str, e: f64| {
        if k.starts_with("vmaf") {
            1e-3
        } else {
            1e-5 * e.abs().max(1.0)
        }
    };
    let mut bad = Vec::new();
    let mut compared = 0;
    for (i, m) in frames(expected) {
        for k in names {
            let (Some(e), g) = (m.get(*k).and_then(Value::as_f64), got_frame(got, i, k)) else {
                continue;
            };
            compared += 1;
            match g {
                Some(g) if (g - e).abs() <= tol(k, e) => {}
                g => bad.push(format!("frame {i} {k}: expected {e}, got {g:?}")),
            }
        }
    }
    for k in names {
        for (meth, v) in expected["pooled_metrics"][*k]
            .as_object()
            .into_iter()
            .flatten()
        {
            let (e, g) = (v.as_f64(), got["pooled_metrics"][*k][meth].as_f64());
            if !matches!((e, g), (Some(e), Some(g)) if (g - e).abs() <= tol(k, e)) {
                bad.push(format!("pooled {k}.{meth}: expected {e:?}, got {g:?}"));
            }
        }
    }
    assert!(bad.is_empty(), "{what}: {}", bad.join("\n"));
    assert!(compared > 0 || names.is_empty(), "{what}: nothing compared");
}

fn got_frame(got: &Value, i: i64, k: &str) -> Option<f64> {
    frames(got)
        .get(&i)
        .and_then(|m| m.get(k))
        .and_then(Value::as_f64)
}
