//! Parity suite through the `vmaf` binary: upstream's command lines on the parity clips must
//! reproduce upstream's logs exactly (see `tests/data/README.md`), plus thread invariance and
//! clean failures on bad input.

mod common;

use common::*;

/// Metrics of the expected logs that come from extractors this crate does not provide.
const NOT_PROVIDED: &[&str] = &[];

/// Runs `vmaf` on parity clip `clip` with `extra` flags and `-o <dir>/out.<ext>`; returns the
/// output file's text.
fn run_clip(test: &str, clip: &str, extra: &[&str], ext: &str) -> String {
    let dir = work_dir(test);
    let out = arg(&dir, &format!("out.{ext}"));
    let mut args = clip_args(clip);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["-q".into(), "-o".into(), out.clone()]);
    vmaf_ok(&args);
    std::fs::read_to_string(&out).expect("read output")
}

/// Scores `clip` with upstream's flags for `<clip>.json` and compares every provided metric.
fn check_parity_clip(clip: &str) {
    let got = run_clip(
        &format!("parity_{clip}"),
        clip,
        &[
            "--threads",
            "2",
            "--json",
            "--feature",
            "psnr",
            "--feature",
            "float_ssim",
            "--feature",
            "float_ms_ssim",
            "--feature",
            "cambi",
        ],
        "json",
    );
    let expected = parse_json(&expected_text(&format!("{clip}.json")), "expected");
    assert_json_matches(&expected, &parse_json(&got, "output"), NOT_PROVIDED, clip);
}

macro_rules! parity_tests {
    ($($test:ident => $clip:literal,)*) => {$(
        #[test]
        fn $test() {
            check_parity_clip($clip);
        }
    )*};
}

parity_tests! {
    parity_natural_576x324_420p8 => "natural_576x324_420p8",
    parity_natural_640x360_420p10 => "natural_640x360_420p10",
    parity_mandel_352x288_422p8_raw => "mandel_352x288_422p8",
    parity_testsrc_480x270_444p8 => "testsrc_480x270_444p8",
    parity_natural_1920x1080_420p8 => "natural_1920x1080_420p8",
    parity_testsrc_321x241_420p8 => "testsrc_321x241_420p8",
    parity_natural_320x180_420p12 => "natural_320x180_420p12",
    parity_life_320x240_420p8 => "life_320x240_420p8",
}

const G8: &str = "natural_576x324_420p8";

/// Default model in each format: byte-identical to upstream's file except `fps`.
fn check_default_format(flag: &str, ext: &str) {
    let got = run_clip(&format!("default_{ext}"), G8, &[flag], ext);
    let want = expected_text(&format!("{G8}.default.{ext}"));
    let (got, want) = (mask_fps(&got), mask_fps(&want));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{ext} differs from upstream at line {}:\n  got:  {}\n  want: {}",
            line + 1,
            got.lines().nth(line).unwrap_or("<end>"),
            want.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn default_model_xml() {
    check_default_format("--xml", "xml");
}

#[test]
fn default_model_json() {
    check_default_format("--json", "json");
}

#[test]
fn default_model_csv() {
    check_default_format("--csv", "csv");
}

#[test]
fn default_model_sub() {
    check_default_format("--sub", "sub");
}

/// Runs `extra` on `clip` as JSON and compares with expected log `expected`.
fn check_special(test: &str, clip: &str, extra: &[&str], expected: &str) {
    let mut flags = vec!["--json"];
    flags.extend_from_slice(extra);
    let got = run_clip(test, clip, &flags, "json");
    let want = parse_json(&expected_text(expected), "expected");
    assert_json_matches(&want, &parse_json(&got, "output"), &[], test);
}

#[test]
fn subsample3() {
    check_special(
        "subsample3",
        G8,
        &["--subsample", "3"],
        "natural_576x324_420p8.subsample3.json",
    );
}

#[test]
fn neg_model() {
    check_special(
        "neg",
        G8,
        &["-m", "version=vmaf_v0.6.1neg"],
        "natural_576x324_420p8.neg.json",
    );
}

#[test]
fn bootstrap_collection() {
    check_special(
        "b_v0.6.3",
        G8,
        &["-m", "version=vmaf_b_v0.6.3"],
        "natural_576x324_420p8.b_v0.6.3.json",
    );
}

#[test]
fn two_models() {
    check_special(
        "two_models",
        G8,
        &[
            "-m",
            "version=vmaf_v0.6.1",
            "-m",
            "version=vmaf_v0.6.1neg:name=neg",
        ],
        "natural_576x324_420p8.two_models.json",
    );
}

#[test]
fn no_prediction() {
    check_special(
        "no_prediction",
        G8,
        &["-n", "--feature", "psnr"],
        "natural_576x324_420p8.no_prediction.json",
    );
}

#[test]
fn model_4k_on_1080p() {
    check_special(
        "4k",
        "natural_1920x1080_420p8",
        &["-m", "version=vmaf_4k_v0.6.1"],
        "natural_1920x1080_420p8.4k.json",
    );
}

#[test]
fn thread_count_does_not_change_results() {
    let runs: Vec<String> = ["0", "1", "2"]
        .iter()
        .map(|t| {
            let text = run_clip(
                &format!("threads_{t}"),
                G8,
                &["--threads", t, "--json", "--feature", "psnr"],
                "json",
            );
            mask_fps(&text)
        })
        .collect();
    assert!(runs[0].contains("\"vmaf\""));
    // Any number of workers gives the same file.
    assert_eq!(runs[1], runs[2], "--threads 1 vs 2");
    // Without workers the values are the same, but as upstream, psnr (a temporal extractor that
    // runs ahead of the workers when threaded) is listed in registration order instead of first.
    let sync = parse_json(&runs[0], "--threads 0");
    let threaded = parse_json(&runs[1], "--threads 1");
    assert_json_matches(&sync, &threaded, &[], "--threads 0 vs 1");
    assert_json_matches(&threaded, &sync, &[], "--threads 1 vs 0");
}

#[test]
fn summary_on_stdout_without_output_file() {
    let out = vmaf_ok(&clip_args(G8));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let want = parse_json(&expected_text(&format!("{G8}.default.json")), "expected");
    let mean = want["pooled_metrics"]["vmaf"]["mean"].as_f64().unwrap();
    assert_eq!(stdout, format!("vmaf_v0.6.1: {mean:.6}\n"));
}

#[test]
fn collection_summary_has_confidence_interval() {
    let mut args = clip_args(G8);
    args.extend(["--frame_cnt", "3", "-m", "version=vmaf_b_v0.6.3"].map(String::from));
    let out = vmaf_ok(&args);
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("vmaf_b_v0.6.3: "), "{stdout}");
    assert!(
        lines[1].starts_with("vmaf_b_v0.6.3: ") && lines[1].contains(", ci.p95: ["),
        "{stdout}"
    );
    assert!(lines[1].contains("], stddev: "), "{stdout}");
}

#[test]
fn frame_count_and_skip() {
    // Skipping the same number of frames on both sides and limiting the count scores frames
    // 2..5 of the full run, renumbered from 0 (motion restarts, so compare vif only).
    let full = parse_json(
        &run_clip("skip_full", G8, &["--json", "--frame_cnt", "6"], "json"),
        "full",
    );
    let part = parse_json(
        &run_clip(
            "skip_part",
            G8,
            &[
                "--json",
                "--frame_skip_ref",
                "2",
                "--frame_skip_dist",
                "2",
                "--frame_cnt",
                "4",
            ],
            "json",
        ),
        "part",
    );
    assert_eq!(full["frames"].as_array().unwrap().len(), 6);
    assert_eq!(part["frames"].as_array().unwrap().len(), 4);
    for i in 0..4 {
        for m in ["integer_vif_scale0", "integer_adm2"] {
            assert_eq!(
                part["frames"][i]["metrics"][m],
                full["frames"][i + 2]["metrics"][m],
                "frame {i} {m}"
            );
        }
    }
}

#[test]
fn y4m_422_8bit_matches_raw() {
    // Upstream's tool crashes on 8-bit 4:2:2 y4m; here it must score like the raw input.
    let clip = "mandel_352x288_422p8";
    let dir = work_dir("y4m_422");
    let mut y4m_args = Vec::new();
    for side in ["ref", "dist"] {
        let raw = std::fs::read(clip_path(&format!("{side}_{clip}.yuv"))).unwrap();
        let mut y4m = b"YUV4MPEG2 W352 H288 F25:1 Ip A1:1 C422 XYSCSS=422\n".to_vec();
        for frame in raw.chunks(352 * 288 * 2) {
            y4m.extend_from_slice(b"FRAME\n");
            y4m.extend_from_slice(frame);
        }
        let path = arg(&dir, &format!("{side}.y4m"));
        std::fs::write(&path, y4m).unwrap();
        y4m_args.extend([format!("-{}", &side[..1]), path]);
    }
    // PSNR reads every plane, so it checks the chroma layout too.
    let flags = ["-n", "--json", "--feature", "psnr", "-q", "-o"];
    let run = |inputs: Vec<String>, out: &str| {
        let out = arg(&dir, out);
        let mut args = inputs;
        args.extend(flags.iter().map(|s| s.to_string()));
        args.push(out.clone());
        vmaf_ok(&args);
        mask_fps(&std::fs::read_to_string(out).unwrap())
    };
    let from_y4m = run(y4m_args, "y4m.json");
    let from_raw = run(clip_args(clip), "raw.json");
    assert!(from_y4m.contains("\"psnr_cb\""));
    assert_eq!(from_y4m, from_raw);
}

// --- command-line handling ---------------------------------------------------------------

/// Asserts a failing run with exactly one non-empty line on stderr containing `needle`.
fn assert_one_line_error<S: AsRef<std::ffi::OsStr>>(args: &[S], needle: &str) {
    let out = vmaf(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{stderr}");
    assert!(
        lines[0].contains(needle),
        "{:?} does not mention {needle:?}",
        lines[0]
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn missing_file() {
    let dir = work_dir("missing_file");
    let missing = arg(&dir, "nope.y4m");
    let mut args = vec!["-r".to_string(), missing.clone()];
    args.extend([
        "-d".into(),
        clip_path(&format!("dist_{G8}.y4m")).display().to_string(),
    ]);
    assert_one_line_error(&args, &missing);
}

#[test]
fn truncated_y4m() {
    let dir = work_dir("truncated");
    let src = std::fs::read(clip_path(&format!("ref_{G8}.y4m"))).unwrap();
    // Header, two whole frames and part of the third.
    let frame = 6 + 576 * 324 * 3 / 2;
    let header = src.iter().position(|&b| b == b'\n').unwrap() + 1;
    let cut = arg(&dir, "cut.y4m");
    std::fs::write(&cut, &src[..header + 2 * frame + 1000]).unwrap();
    // No models: the failure must come from the reader alone.
    let args = ["-n", "-r", &cut, "-d", &cut];
    assert_one_line_error(&args, "cut.y4m: frame 2: truncated");
}

#[test]
fn mismatched_sizes() {
    let r = clip_path(&format!("ref_{G8}.y4m"));
    let d = clip_path("dist_natural_640x360_420p10.y4m");
    let args = [
        "-r".into(),
        r.display().to_string(),
        "-d".into(),
        d.display().to_string(),
    ];
    assert_one_line_error(&args, "dimensions differ (576x324 vs 640x360)");
}

#[test]
fn bad_flag_values() {
    let mut args = clip_args(G8);
    args.extend(["--threads", "abc"].map(String::from));
    assert_one_line_error(&args, "--threads");
    let mut args = clip_args(G8);
    args.extend(["-p", "411", "-w", "10", "-h", "10", "-b", "8"].map(String::from));
    assert_one_line_error(&args, "--pixel_format");
    let mut args = clip_args(G8);
    args.push("--no-such-flag".into());
    assert_one_line_error(&args, "--no-such-flag");
    let mut args = clip_args(G8);
    args.extend(["-w", "576"].map(String::from));
    assert_one_line_error(&args, "raw .yuv input needs");
    let mut args = clip_args(G8);
    args.extend(["-m", "version=vmaf_v0.6.1:bogus"].map(String::from));
    assert_one_line_error(&args, "bogus");
    let mut args = clip_args(G8);
    args.extend(["-m", "version=vmaf_v0.6.1", "-m", "version=vmaf_v0.6.1neg"].map(String::from));
    assert_one_line_error(&args, "two models are named");
    assert_one_line_error(&["-d", "x.y4m"], "reference");
}

/// Runs `vmaf args` under an address-space limit of `kib` KiB (`ulimit -v`).
fn vmaf_under_ulimit(kib: u32, args: &[String]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_vmaf"))
        .args(args)
        .output()
        .expect("run vmaf under ulimit")
}

fn one_error_line(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{stderr}");
    lines[0].to_string()
}

/// `--threads` past the 1024 limit is refused before anything starts, naming the flag, with
/// exit status 1; also under a 4 GiB address-space limit, where 100000 threads used to abort.
#[test]
fn too_many_threads() {
    for t in ["1025", "100000", "4294967296"] {
        let mut args = clip_args(G8);
        args.extend(["--threads", t].map(String::from));
        for out in [vmaf(&args), vmaf_under_ulimit(4 << 20, &args)] {
            assert_eq!(out.status.code(), Some(1), "--threads {t}");
            assert_eq!(
                one_error_line(&out),
                format!(
                    "error: invalid value '{t}' for '--threads <N>': at most 1024 worker \
                     threads are supported (see --help)"
                )
            );
        }
    }
}

/// Worker threads that cannot all be started (1024 stacks do not fit in 1 GiB of address
/// space) end the run with one line and exit status 1, not an abort.
#[test]
fn threads_that_cannot_start_fail_cleanly() {
    let mut args = clip_args(G8);
    args.extend(["--threads", "1024", "--frame_cnt", "2"].map(String::from));
    let out = vmaf_under_ulimit(1 << 20, &args);
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(
        line.starts_with("error: out of memory: cannot start 1024 worker threads: "),
        "{line}"
    );
}

#[test]
fn unknown_model() {
    let mut args = clip_args(G8);
    args.extend(["-m", "version=vmaf_v9.9.9"].map(String::from));
    assert_one_line_error(&args, "vmaf_v9.9.9");
    let mut args = clip_args(G8);
    args.extend(["-m", "path=/nonexistent/model.json"].map(String::from));
    assert_one_line_error(&args, "/nonexistent/model.json");
}

#[test]
fn unknown_feature() {
    let mut args = clip_args(G8);
    args.extend(["-n", "--feature", "no_such_feature"].map(String::from));
    assert_one_line_error(&args, "no_such_feature");
}

#[test]
fn hip_backend_without_gpu_support_fails_cleanly() {
    let mut args = clip_args(G8);
    args.extend(["--backend", "hip"].map(String::from));
    let out = vmaf(&args);
    // Once the GPU path is wired this run may succeed; until then it must fail in one line.
    if !out.status.success() {
        assert_one_line_error(&args, "hip");
    }
}

#[test]
fn help_and_version() {
    let out = vmaf_ok(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--reference",
        "--pixel_format",
        "--frame_skip_dist",
        "--backend",
    ] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
    let out = vmaf_ok(&["-v"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "3.2.0\n");
}

/// GPU failures (out of memory, failed launch, lost device; injected through
/// `VMAF_HIP_INJECT_FAULT`) end the run with a non-zero status and one error line, never a
/// crash. Skipped without a GPU.
#[test]
fn gpu_faults_fail_cleanly() {
    let mut args = clip_args(G8);
    args.extend(["-q", "--backend", "hip", "--frame_cnt", "3"].map(String::from));
    let probe = vmaf(&args);
    if !probe.status.success() {
        println!("skipped: no device");
        return;
    }
    for (fault, needle) in [
        ("oom", "out-of-memory"),
        ("launch", "launch failure"),
        ("lost", "device loss"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vmaf"))
            .args(&args)
            .env("VMAF_HIP_INJECT_FAULT", fault)
            .output()
            .expect("run vmaf");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code().is_some_and(|c| c != 0),
            "{fault}: {stderr}"
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{fault}: expected one line, got:\n{stderr}");
        assert!(lines[0].contains(needle), "{fault}: {}", lines[0]);
    }
}

/// `--hip-device all` spreads frames over every GPU and prints the CPU's scores. Skipped
/// without a GPU.
#[test]
fn all_gpus_match_cpu() {
    let dir = work_dir("all_gpus");
    let mut base = clip_args(G8);
    base.extend(["-q", "--json", "--threads", "2"].map(String::from));
    let run = |extra: &[&str], file: &str| {
        let out = arg(&dir, file);
        let mut args = base.clone();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["-o".to_string(), out.clone()]);
        let res = std::process::Command::new(env!("CARGO_BIN_EXE_vmaf"))
            .args(&args)
            .output()
            .expect("run vmaf");
        res.status
            .success()
            .then(|| mask_fps(&std::fs::read_to_string(&out).expect("read output")))
    };
    let Some(gpu) = run(&["--backend", "hip", "--hip-device", "all"], "gpu.json") else {
        println!("skipped: no device");
        return;
    };
    let cpu = run(&["--backend", "cpu"], "cpu.json").expect("cpu run");
    assert_eq!(gpu, cpu);
}
