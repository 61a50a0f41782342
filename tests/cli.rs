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
    assert_same_log(&got, &expected_text(&format!("{G8}.default.{ext}")), ext);
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

/// Inputs whose frames lie at fixed offsets are read by several threads, each reading every
/// n-th frame by position: the output is the same as with one reader, for y4m and raw input,
/// with frames skipped and a frame count that is not a multiple of the threads.
#[test]
fn positional_readers_give_the_same_output() {
    for (clip, extra) in [
        (
            G8,
            vec![
                "--frame_cnt",
                "7",
                "--frame_skip_ref",
                "2",
                "--frame_skip_dist",
                "2",
            ],
        ),
        (G8, vec![]),
        ("mandel_352x288_422p8", vec![]),
    ] {
        let run = |threads: &str| {
            let dir = work_dir(&format!(
                "positional_{}_{threads}_{}",
                clip.len(),
                extra.len()
            ));
            let out = arg(&dir, "out.json");
            let mut args = clip_args(clip);
            args.extend(extra.iter().map(|s| s.to_string()));
            args.extend(["--json", "-q", "-o", &out].map(String::from));
            let o = std::process::Command::new(common::vmaf_bin())
                .args(&args)
                .env("VMAF_HIP_READ_THREADS", threads)
                .output()
                .expect("run vmaf");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            mask_fps(&std::fs::read_to_string(&out).expect("output"))
        };
        let one = run("1");
        assert!(one.contains("\"vmaf\""), "{clip}");
        assert_eq!(run("3"), one, "{clip} {extra:?}: 3 readers");
        assert_eq!(run("16"), one, "{clip} {extra:?}: 16 readers");
    }
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
        .arg(common::vmaf_bin())
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
    // A device or a huge file is refused after at most 64 MiB, not read to its end.
    let dir = work_dir("huge_model");
    let sparse = arg(&dir, "sparse.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    for path in ["/dev/zero", sparse.as_str()] {
        let mut args = clip_args(G8);
        args.extend(["-m".to_string(), format!("path={path}")]);
        assert_one_line_error(&args, "larger than 64 MiB");
    }
}

/// Non-finite option values are refused with one line, in a model's overrides and in
/// `--feature` alike (libvmaf takes a NaN and scores with it).
#[test]
fn non_finite_options_are_refused() {
    for (flag, value) in [
        ("-m", "version=vmaf_v0.6.1:vif.vif_enhn_gain_limit=nan"),
        ("-m", "version=vmaf_v0.6.1:adm.adm_enhn_gain_limit=-nan"),
        ("-m", "version=vmaf_v0.6.1:motion.motion_fps_weight=inf"),
        ("--feature", "psnr=min_sse=nan"),
        ("--feature", "float_ssim=scale=nan"),
    ] {
        let mut args = clip_args(G8);
        args.extend(["-q", "--frame_cnt", "1", flag, value].map(String::from));
        let out = vmaf(&args);
        let line = one_error_line(&out);
        assert_eq!(out.status.code(), Some(1), "{value}: {line}");
        assert!(
            line.contains("nan") || line.contains("inf"),
            "{value}: {line}"
        );
    }
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("vmaf-hip ") && stdout.contains("CPU code "),
        "{stdout}"
    );
    let out = vmaf_ok(&["-v", "--cpumask", "255"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("CPU code scalar "));
}

/// GPU failures (out of memory, failed launch, lost device; injected through
/// `VMAF_HIP_INJECT_FAULT`) end the run with a non-zero status and one error line, never a
/// crash. Skipped without a GPU. The switch exists only in builds with the `fault-injection`
/// feature (build-aux/gpu-tests makes them); without a GPU, tests/hip_fake.rs injects the same
/// faults through the fake runtime.
#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs the fault-injection feature (build-aux/gpu-tests builds with it)"
)]
fn gpu_faults_fail_cleanly() {
    let mut args = clip_args(G8);
    args.extend(["-q", "--backend", "hip", "--frame_cnt", "3"].map(String::from));
    let probe = vmaf(&args);
    if !probe.status.success() {
        common::skip_no_device(&String::from_utf8_lossy(&probe.stderr));
        return;
    }
    // Without a delay the fault strikes at once; `@N` lets N calls pass, so it strikes in the
    // middle of the stream (the clip has 48 frames; a frame takes 3 graph launches once its
    // work is recorded, about 20 launches without graphs, and some 20 runtime calls of any kind).
    let mut long = clip_args(G8);
    long.extend(["-q", "--backend", "hip", "--threads", "2"].map(String::from));
    for (fault, needle, args) in [
        ("oom", "out-of-memory", &args),
        ("launch", "launch failure", &args),
        ("lost", "device loss", &args),
        ("launch@100", "launch failure", &long),
        ("lost@300", "device loss", &long),
    ] {
        let out = std::process::Command::new(common::vmaf_bin())
            .args(args)
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

/// `VMAF_HIP_DEVICE_CONNECTIONS` asks the CUDA driver for that many work queues before it
/// is initialised (the debug log says so), and the scores stay the CPU's. Skipped without a
/// GPU; nothing to ask of an AMD runtime.
#[test]
fn cuda_work_queues_are_asked_for_on_request() {
    // Three frames on `backend`, the JSON log on stdout.
    let args_on = |backend: &str| {
        let mut a = clip_args(G8);
        a.extend(
            [
                "-q",
                "--backend",
                backend,
                "--frame_cnt",
                "3",
                "--json",
                "-o",
                "/dev/stdout",
            ]
            .map(String::from),
        );
        a
    };
    let args = args_on("hip");
    let run = |env: &[(&str, &str)]| {
        std::process::Command::new(common::vmaf_bin())
            .args(&args)
            .env("VMAF_HIP_LOG_LEVEL", "debug")
            .env_remove("CUDA_DEVICE_MAX_CONNECTIONS")
            .env_remove("VMAF_HIP_DEVICE_CONNECTIONS")
            .envs(env.iter().copied())
            .output()
            .expect("run vmaf")
    };
    // Skipped only when the plain run fails: a failure with the request is a failure.
    let plain = run(&[]);
    let plain_err = String::from_utf8_lossy(&plain.stderr);
    if !plain.status.success() {
        common::skip_no_device(&plain_err);
        return;
    }
    if !plain_err.contains("CUDA driver") {
        println!("skipped: not the CUDA driver");
        return;
    }
    assert!(
        !plain_err.contains("CUDA_DEVICE_MAX_CONNECTIONS"),
        "{plain_err}"
    );
    let asked = run(&[("VMAF_HIP_DEVICE_CONNECTIONS", "16")]);
    let stderr = String::from_utf8_lossy(&asked.stderr);
    assert!(asked.status.success(), "{stderr}");
    assert!(
        stderr.contains("CUDA_DEVICE_MAX_CONNECTIONS=16 for the process"),
        "{stderr}"
    );
    let want = vmaf_ok(&args_on("cpu"));
    let scores = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("JSON log")["pooled_metrics"]
            .clone()
    };
    assert_eq!(scores(&asked), scores(&want));
    assert_eq!(scores(&plain), scores(&want));
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
        let res = std::process::Command::new(common::vmaf_bin())
            .args(&args)
            .output()
            .expect("run vmaf");
        res.status
            .success()
            .then(|| mask_fps(&std::fs::read_to_string(&out).expect("read output")))
    };
    let Some(gpu) = run(&["--backend", "hip", "--hip-device", "all"], "gpu.json") else {
        common::skip_no_device("vmaf --backend hip failed");
        return;
    };
    let cpu = run(&["--backend", "cpu"], "cpu.json").expect("cpu run");
    assert_eq!(gpu, cpu);
}

// --- robustness: output files, stdout, names, hostile inputs ---------------------------------

/// Runs `vmaf args` through `sh -c "<setup>; exec vmaf ..."`, e.g. to set limits.
fn vmaf_sh(setup: &str, args: &[String]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" \"$@\""))
        .arg(common::vmaf_bin())
        .args(args)
        .output()
        .expect("run sh")
}

/// File names in `dir`, sorted.
fn dir_entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Asserts `out` failed with exit status 1 and one stderr line containing every needle.
fn assert_failed_with(out: &std::process::Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{stderr}");
    for n in needles {
        assert!(
            lines[0].contains(n),
            "{:?} does not mention {n:?}",
            lines[0]
        );
    }
    assert!(!stderr.contains("panicked") && !stderr.contains("internal error"));
}

#[test]
fn full_disk_leaves_no_partial_output() {
    // `ulimit -f 1` makes any write past 512 or 1024 bytes fail with EFBIG (SIGXFSZ ignored).
    let dir = work_dir("full_disk");
    let limit = "trap '' XFSZ; ulimit -f 1";
    let mut want = Vec::new();
    for (flag, ext) in [("--csv", "csv"), ("--json", "json"), ("--xml", "xml")] {
        let existing = arg(&dir, &format!("old.{ext}"));
        std::fs::write(&existing, "previous contents\n").unwrap();
        let fresh = arg(&dir, &format!("new.{ext}"));
        for out in [&existing, &fresh] {
            let mut args = clip_args(G8);
            args.extend(["-q", "--frame_cnt", "4", flag, "-o", out].map(String::from));
            let res = vmaf_sh(limit, &args);
            assert_failed_with(&res, &[&format!("cannot write {out}"), "File too large"]);
        }
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "previous contents\n"
        );
        assert!(!std::path::Path::new(&fresh).exists(), "{fresh} was left");
        // No temporary file is left behind either.
        want.push(format!("old.{ext}"));
        assert_eq!(dir_entries(&dir), want);
    }
    assert_eq!(dir_entries(&dir), ["old.csv", "old.json", "old.xml"]);

    // Without the limit the same run replaces the file in one piece.
    let out = arg(&dir, "old.json");
    let mut args = clip_args(G8);
    args.extend(["-q", "--frame_cnt", "4", "--json", "-o", &out].map(String::from));
    vmaf_ok(&args);
    let v = parse_json(&std::fs::read_to_string(&out).unwrap(), "output");
    assert_eq!(v["frames"].as_array().unwrap().len(), 4);
    assert_eq!(dir_entries(&dir), ["old.csv", "old.json", "old.xml"]);

    // An output in a missing directory fails naming the path.
    let bad = arg(&dir, "no/such/dir/out.json");
    let mut args = clip_args(G8);
    args.extend(["-q", "--frame_cnt", "1", "-o", &bad].map(String::from));
    assert_failed_with(&vmaf(&args), &[&format!("cannot create {bad}")]);
}

#[test]
fn stdout_write_errors_fail() {
    let mut args = clip_args(G8);
    args.extend(["-q", "--frame_cnt", "2"].map(String::from));
    let run = |stdout: std::process::Stdio| {
        std::process::Command::new(common::vmaf_bin())
            .args(&args)
            .stdout(stdout)
            .output()
            .expect("run vmaf")
    };
    // A full device.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = run(full.into());
    assert_failed_with(
        &out,
        &["cannot write the scores to stdout", "No space left"],
    );
    // A pipe whose reader has gone.
    let mut child = std::process::Command::new(common::vmaf_bin())
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_failed_with(&out, &["cannot write the scores to stdout", "Broken pipe"]);
    // /dev/null is a fine place to discard scores.
    let out = run(std::process::Stdio::null());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // /dev/null opened read-write (Python's subprocess.DEVNULL, process supervisors) is a
    // stdout like any other, for the scores, the help and a real error alike.
    let out = vmaf_sh("exec 1<>/dev/null", &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = vmaf_sh("exec 1<>/dev/null", &["--help".to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = work_dir("devnull_read_write");
    let short = arg(&dir, "short.y4m");
    let whole = std::fs::read(&args[1]).unwrap();
    let header = whole.iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&short, &whole[..header + 6 + 576 * 324 * 3 / 2 + 1000]).unwrap();
    let mut bad = args.clone();
    bad[1] = short;
    let out = vmaf_sh("exec 1<>/dev/null", &bad);
    let line = one_error_line(&out);
    assert_eq!(out.status.code(), Some(1), "{line}");
    assert!(
        line.contains("truncated") && !line.contains("stdout"),
        "{line}"
    );
    // A closed stdout is what the Rust runtime makes of it, /dev/null, as upstream's printf
    // to a closed descriptor loses the scores without failing.
    let out = vmaf_sh("exec >&-", &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // With -o nothing goes to stdout, so a closed stdout is no problem.
    let dir = work_dir("stdout_closed_with_output");
    let file = arg(&dir, "out.json");
    let mut with_o = args.clone();
    with_o.extend(["--json", "-o", &file].map(String::from));
    let out = vmaf_sh("exec >&-", &with_o);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_json(&std::fs::read_to_string(&file).unwrap(), "output");
    // The help is checked too.
    let out = std::process::Command::new(common::vmaf_bin())
        .arg("--help")
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    assert_failed_with(&out, &["cannot write the help to stdout"]);
}

/// `-o` names where the output goes, not a file to replace: a descriptor link writes into
/// what stdout is (a pipe, a file, even an unlinked one), a symlink to a file not made yet is
/// written through, and neither the link nor `/dev/stdout` becomes a file of its own.
#[test]
fn output_goes_where_the_path_points() {
    use std::io::{Read, Seek};
    use std::os::unix::fs::FileTypeExt;
    let mut args = clip_args(G8);
    args.extend(["-q", "--frame_cnt", "3", "--json"].map(String::from));
    let frames_of = |text: &str, what: &str| {
        let v = parse_json(text, what);
        v["frames"].as_array().map(|a| a.len())
    };
    for target in ["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"] {
        let mut a = args.clone();
        a.extend(["-o".to_string(), target.to_string()]);
        // A pipe.
        let out = vmaf_ok(&a);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(frames_of(&text, target), Some(3), "{target}");
        // A file, unlinked as Python's tempfile.TemporaryFile is.
        let dir = work_dir("output_to_stdout_file");
        let path = dir.join("stdout.json");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let out = std::process::Command::new(common::vmaf_bin())
            .args(&a)
            .stdout(file.try_clone().unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut text = String::new();
        file.seek(std::io::SeekFrom::Start(0)).unwrap();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(frames_of(&text, target), Some(3), "{target}");
        assert!(dir_entries(&dir).is_empty(), "{:?}", dir_entries(&dir));
        assert!(std::fs::symlink_metadata("/dev/stdout")
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // A FIFO: the reader gets the whole log.
    let dir = work_dir("output_links");
    let fifo = dir.join("fifo.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let mut a = args.clone();
    a.extend(["-o".to_string(), fifo.display().to_string()]);
    vmaf_ok(&a);
    assert_eq!(frames_of(&reader.join().unwrap(), "fifo"), Some(3));
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A symlink to a file that does not exist yet: created through the link, which stays.
    std::os::unix::fs::symlink("made.json", dir.join("link.json")).unwrap();
    let mut a = args.clone();
    a.extend(["-o".to_string(), arg(&dir, "link.json")]);
    vmaf_ok(&a);
    assert!(std::fs::symlink_metadata(dir.join("link.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(dir.join("made.json")).unwrap();
    assert_eq!(frames_of(&text, "made.json"), Some(3));
    assert_eq!(dir_entries(&dir), ["fifo.json", "link.json", "made.json"]);
}

/// A minimal XML well-formedness check for the writer's output: nested elements, attribute
/// names made of name characters, each at most once per element, values in double quotes
/// without `<` and with `&` only in the five predefined entities or character references.
fn check_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = text;
    let is_name = |n: &str| {
        let mut c = n.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    };
    let check_value = |v: &str| -> Result<(), String> {
        if v.contains('<') {
            return Err(format!("'<' in value {v:?}"));
        }
        for (i, _) in v.match_indices('&') {
            let ent = &v[i..v[i..].find(';').map_or(v.len(), |e| i + e + 1)];
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&ent)
                || (ent.starts_with("&#") && ent[2..ent.len() - 1].parse::<u32>().is_ok());
            if !ok {
                return Err(format!("bad entity {ent:?}"));
            }
        }
        Ok(())
    };
    while let Some(start) = rest.find('<') {
        if !rest[..start].trim().is_empty() {
            return Err(format!("text outside tags: {:?}", &rest[..start]));
        }
        let end = rest[start..].find('>').ok_or("unterminated tag")? + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop() != Some(name) {
                return Err(format!("mismatched </{name}>"));
            }
            continue;
        }
        let (body, empty) = match tag.strip_suffix('/') {
            Some(b) => (b, true),
            None => (tag, false),
        };
        let mut body = body.trim_end();
        let name_end = body.find(' ').unwrap_or(body.len());
        let name = &body[..name_end];
        if !is_name(name) {
            return Err(format!("bad element name {name:?}"));
        }
        body = &body[name_end..];
        let mut seen = std::collections::HashSet::new();
        while !body.trim().is_empty() {
            body = body.trim_start();
            let eq = body
                .find("=\"")
                .ok_or(format!("bad attribute in {tag:?}"))?;
            let attr = &body[..eq];
            if !is_name(attr) || !seen.insert(attr) {
                return Err(format!("bad or repeated attribute {attr:?}"));
            }
            let close = body[eq + 2..].find('"').ok_or("unterminated value")? + eq + 2;
            check_value(&body[eq + 2..close])?;
            body = &body[close + 1..];
        }
        if !empty {
            stack.push(name);
        }
    }
    if !rest.trim().is_empty() || !stack.is_empty() {
        return Err(format!("unclosed {stack:?} or trailing {rest:?}"));
    }
    Ok(())
}

#[test]
fn odd_model_names_give_parseable_output() {
    let dir = work_dir("odd_names");
    let odd = "a\"b<c&d>'\\e\tf";
    let run = |flag: &str, file: &str, name: &str| {
        let out = arg(&dir, file);
        let mut args = clip_args(G8);
        let model = format!("version=vmaf_v0.6.1:name={name}");
        args.extend(["-q", "--frame_cnt", "3", flag, "-o", &out, "-m", &model].map(String::from));
        vmaf_ok(&args);
        std::fs::read_to_string(out).unwrap()
    };
    let plain = parse_json(&run("--json", "plain.json", "vmaf"), "plain");
    let want = &plain["pooled_metrics"]["vmaf"]["mean"];
    assert!(want.is_f64());

    let json = parse_json(&run("--json", "odd.json", odd), "odd-name output");
    assert_eq!(&json["pooled_metrics"][odd]["mean"], want);
    assert_eq!(
        json["frames"][2]["metrics"][odd],
        plain["frames"][2]["metrics"]["vmaf"]
    );

    let xml = run("--xml", "odd.xml", odd);
    check_xml(&xml).unwrap_or_else(|e| panic!("not well-formed: {e}\n{xml}"));
    // Attribute names are encoded, the metric name attribute keeps the name.
    let mean = format!("{:.6}", want.as_f64().unwrap());
    assert!(
        xml.contains("<metric name=\"a&quot;b&lt;c&amp;d&gt;&apos;\\e&#9;f\" min=\""),
        "{xml}"
    );
    assert!(xml.contains(&format!("mean=\"{mean}\"")), "{xml}");
    assert!(
        xml.contains("a_x0022_b_x003C_c_x0026_d_x003E__x0027__x005C_e_x0009_f=\""),
        "{xml}"
    );
    // The well-formedness check does catch upstream's verbatim output.
    assert!(check_xml(&xml.replace("a_x0022_b", "a\"b")).is_err());

    let csv = run("--csv", "odd.csv", odd);
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",\"a\"\"b<c&d>'\\e\tf\","), "{header}");

    // An empty name is refused where it is given.
    let mut args = clip_args(G8);
    args.extend(["-m", "version=vmaf_v0.6.1:name="].map(String::from));
    assert_failed_with(&vmaf(&args), &["empty model name"]);
}

#[test]
fn hostile_y4m_headers_fail_cleanly() {
    let dir = work_dir("hostile_y4m");
    let write = |file: &str, data: &[u8]| {
        let p = arg(&dir, file);
        std::fs::write(&p, data).unwrap();
        p
    };
    // A non-ASCII byte in a header token.
    let p = write(
        "accent.y4m",
        b"YUV4MPEG2 W2 H2 F25:1 \xc3\xa9\nFRAME\n\0\0\0\0\0\0",
    );
    assert_failed_with(
        &vmaf(&["-n", "-r", &p, "-d", &p]),
        &[&p, "bad y4m header token \"\\xc3\\xa9\""],
    );
    let p = write("width.y4m", b"YUV4MPEG2 W2\xff H2\nFRAME\n\0\0\0\0\0\0");
    assert_failed_with(
        &vmaf(&["-n", "-r", &p, "-d", &p]),
        &["bad y4m header token \"W2\\xff\""],
    );

    // A 1x268435456 header on a 1 MB file: reported as truncated right away, without the
    // gigabytes such a frame would take (the address space is limited to 4 GiB).
    let mut data = b"YUV4MPEG2 W1 H268435456 F25:1 C420\nFRAME\n".to_vec();
    data.resize(1 << 20, 0);
    let p = write("tall.y4m", &data);
    let started = std::time::Instant::now();
    let out = vmaf_sh(
        "ulimit -v 4194304",
        &["-n", "-r", &p, "-d", &p].map(String::from),
    );
    assert_failed_with(
        &out,
        &[&format!(
            "{p}: truncated: the header says 1x268435456 (536870918 bytes a frame) but the file \
             holds 1048541 bytes"
        )],
    );
    assert!(started.elapsed().as_secs() < 10);

    // Sides over 65536 are refused even where the file is long enough (a sparse file).
    let p = arg(&dir, "wide.y4m");
    let header = b"YUV4MPEG2 W65537 H1 C444\n";
    std::fs::write(&p, header).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(header.len() as u64 + 6 + 3 * 65537).unwrap();
    assert_failed_with(
        &vmaf(&["-n", "-r", &p, "-d", &p]),
        &["bad picture size 65537x1 (each side must be 1 to 65536"],
    );

    // A frame the size limits allow but memory does not: a clear out-of-memory error. 16384²
    // 4:4:4 16-bit frames take 1.5 GiB; the address space is limited to 1 GiB.
    let p = arg(&dir, "huge.y4m");
    let header = b"YUV4MPEG2 W16384 H16384 C444p16\nFRAME\n";
    std::fs::write(&p, header).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(header.len() as u64 + 3 * 2 * (1 << 28)).unwrap();
    let out = vmaf_sh(
        "ulimit -v 1048576",
        &["-n", "-r", &p, "-d", &p].map(String::from),
    );
    assert_failed_with(
        &out,
        &[&format!(
            "{p}: out of memory: 16384x16384 Yuv444p 16-bit picture: cannot allocate 1610612736 bytes"
        )],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn raw_size_larger_than_file_fails_before_allocating() {
    let dir = work_dir("raw_tall");
    let p = arg(&dir, "small.yuv");
    std::fs::write(&p, vec![0u8; 4096]).unwrap();
    let out = vmaf_sh(
        "ulimit -v 4194304",
        &[
            "-n",
            "-r",
            &p,
            "-d",
            &p,
            "-w",
            "1",
            "-h",
            "268435456",
            "-p",
            "420",
            "-b",
            "8",
        ]
        .map(String::from),
    );
    assert_failed_with(
        &out,
        &[&format!(
            "{p}: truncated: -w/-h/-p/-b say 1x268435456 (536870912 bytes a frame) but the file \
             holds 4096 bytes"
        )],
    );
}

/// On a terminal the progress bar ends with a line of its own, so the scores (and the shell
/// prompt) start on a fresh line. `script` gives the run a pseudo-terminal.
#[test]
fn progress_bar_ends_its_line() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: `script` (util-linux) not installed");
        return;
    }
    let cmd = format!(
        "{} -r {} -d {}",
        common::vmaf_bin().display(),
        clip_path("ref_testsrc_321x241_420p8.y4m").display(),
        clip_path("dist_testsrc_321x241_420p8.y4m").display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("run script");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // The pty turns "\n" into "\r\n"; the score must follow a line end, never the bar.
    let at = text.find("vmaf_v0.6.1: 94.284861").expect("score printed");
    assert!(
        text[..at].ends_with('\n'),
        "score lands on the bar: {text:?}"
    );
    // The final line (after the bar is cleared with an erase-line sequence) gives the count.
    let last_line = text[..at]
        .trim_end()
        .rsplit(['\n', '\r'])
        .next()
        .unwrap_or("");
    let last_line = last_line.trim_start_matches("\u{1b}[2K");
    assert!(
        last_line.starts_with("12 frames, ") && last_line.ends_with(" fps"),
        "{last_line:?}"
    );
}

/// An unknown `--backend` value names the accepted ones.
#[test]
fn bad_backend_lists_values() {
    let mut args = clip_args("testsrc_321x241_420p8");
    args.extend(["--backend", "cuda"].map(String::from));
    assert_one_line_error(
        &args,
        "'cuda' for '--backend <BACKEND>' (expected one of: cpu, hip)",
    );
}

/// A y4m file given with -w/-h/-p/-b is read as y4m (with a warning) when they agree, and
/// refused with both descriptions when they do not.
#[test]
fn y4m_with_raw_flags() {
    let r = clip_path("ref_testsrc_321x241_420p8.y4m")
        .display()
        .to_string();
    let d = clip_path("dist_testsrc_321x241_420p8.y4m")
        .display()
        .to_string();
    let plain = vmaf_ok(&["-r", &r, "-d", &d]);
    let flags = [
        "-r", &r, "-d", &d, "-w", "320", "-h", "240", "-p", "420", "-b", "8",
    ];
    let with = vmaf_ok(&flags);
    assert_eq!(with.stdout, plain.stdout);
    let stderr = String::from_utf8_lossy(&with.stderr);
    assert!(
        stderr.contains("is a y4m file: read with its own header"),
        "{stderr}"
    );
    let mut wrong = flags.map(String::from).to_vec();
    wrong[5] = "321".into();
    assert_one_line_error(
        &wrong,
        "a y4m file of 320x240 Yuv420p 8-bit, but -w/-h/-p/-b say 321x240",
    );
}

/// A raw file that is not a whole number of frames: a warning names the ignored bytes and the
/// whole frames are scored (as upstream does), equal to scoring the file cut to them.
#[test]
fn raw_file_with_a_partial_frame_warns() {
    let dir = work_dir("raw_tail");
    let src = std::fs::read(clip_path("ref_mandel_352x288_422p8.yuv")).unwrap();
    let frame = 352 * 288 * 2;
    let whole = arg(&dir, "whole.yuv");
    let tail = arg(&dir, "tail.yuv");
    std::fs::write(&whole, &src[..3 * frame]).unwrap();
    std::fs::write(&tail, &src[..3 * frame + 1000]).unwrap();
    let raw = ["-w", "352", "-h", "288", "-p", "422", "-b", "8", "-q"];
    let run = |f: &str| {
        let mut a = vec!["-r", f, "-d", f];
        a.extend(raw);
        vmaf_ok(&a)
    };
    let (w, t) = (run(&whole), run(&tail));
    assert_eq!(t.stdout, w.stdout);
    assert!(String::from_utf8_lossy(&w.stderr).trim().is_empty());
    let stderr = String::from_utf8_lossy(&t.stderr);
    assert!(
        stderr.contains("tail.yuv: the file is not a whole number of frames")
            && stderr.contains("202752 bytes a frame); its last 1000 bytes are ignored"),
        "{stderr}"
    );
}

// --- common test condition presets (--aom_ctc, --nflx_ctc) --------------------------------

/// Runs `clip` with upstream's flags for a preset log (`--threads 2 --json` plus `flags`) and
/// asserts every value of `expected` and the whole file but `fps` (so the order of models and
/// features too) are upstream's.
fn check_ctc(test: &str, clip: &str, flags: &[&str], expected: &str) {
    let mut all = vec!["--threads", "2", "--json"];
    all.extend_from_slice(flags);
    let got = run_clip(test, clip, &all, "json");
    let want_text = expected_text(expected);
    let want = parse_json(&want_text, "expected");
    assert_json_matches(&want, &parse_json(&got, "output"), &[], test);
    assert_eq!(mask_fps(&got), mask_fps(&want_text), "{test}: layout");
}

macro_rules! ctc_tests {
    ($($test:ident => $clip:literal, [$($flag:literal),*], $expected:literal;)*) => {$(
        #[test]
        fn $test() {
            check_ctc(stringify!($test), $clip, &[$($flag),*], $expected);
        }
    )*};
}

ctc_tests! {
    ctc_aom_v7_natural_576x324_420p8 => "natural_576x324_420p8", ["--aom_ctc", "v7.0"],
        "natural_576x324_420p8.aom_ctc_v7.0.json";
    ctc_nflx_v1_natural_576x324_420p8 => "natural_576x324_420p8", ["--nflx_ctc", "v1.0"],
        "natural_576x324_420p8.nflx_ctc_v1.0.json";
    ctc_aom_v7_natural_640x360_420p10 => "natural_640x360_420p10", ["--aom_ctc", "v7.0"],
        "natural_640x360_420p10.aom_ctc_v7.0.json";
    ctc_aom_v1_natural_640x360_420p10 => "natural_640x360_420p10", ["--aom_ctc", "v1.0"],
        "natural_640x360_420p10.aom_ctc_v1.0.json";
    ctc_nflx_v1_natural_640x360_420p10 => "natural_640x360_420p10", ["--nflx_ctc", "v1.0"],
        "natural_640x360_420p10.nflx_ctc_v1.0.json";
    ctc_aom_v7_testsrc_321x241_420p8 => "testsrc_321x241_420p8", ["--aom_ctc", "v7.0"],
        "testsrc_321x241_420p8.aom_ctc_v7.0.json";
    ctc_aom_v6_testsrc_321x241_420p8 => "testsrc_321x241_420p8", ["--aom_ctc", "v6.0"],
        "testsrc_321x241_420p8.aom_ctc_v6.0.json";
    ctc_aom_v1_testsrc_321x241_420p8 => "testsrc_321x241_420p8", ["--aom_ctc", "v1.0"],
        "testsrc_321x241_420p8.aom_ctc_v1.0.json";
    ctc_nflx_v1_testsrc_321x241_420p8 => "testsrc_321x241_420p8", ["--nflx_ctc", "v1.0"],
        "testsrc_321x241_420p8.nflx_ctc_v1.0.json";
    // At 1080p float_ssim would score at scale 4 by default: v7.0 forces full scale.
    ctc_aom_v7_natural_1920x1080_420p8 => "natural_1920x1080_420p8",
        ["--aom_ctc", "v7.0", "--frame_cnt", "3"],
        "natural_1920x1080_420p8.aom_ctc_v7.0.frame_cnt3.json";
    // The preset's models and features go where it stands among -m and --feature.
    ctc_nflx_v1_command_line_order => "testsrc_321x241_420p8",
        ["--feature", "psnr_hvs", "-m", "version=vmaf_b_v0.6.3:name=b", "--nflx_ctc", "v1.0",
         "--feature", "float_ms_ssim"],
        "testsrc_321x241_420p8.nflx_ctc_v1.0.order.json";
    // v7.0 replaces the first float_ssim given so far, here the --feature one.
    ctc_aom_v7_replaces_first_float_ssim => "testsrc_321x241_420p8",
        ["--feature", "float_ssim=enable_lcs=true", "--aom_ctc", "v7.0"],
        "testsrc_321x241_420p8.aom_ctc_v7.0.float_ssim_first.json";
}

#[test]
fn ctc_v6_and_v7_differ_only_in_float_ssim_at_1080p() {
    let v7 = parse_json(
        &expected_text("natural_1920x1080_420p8.aom_ctc_v7.0.frame_cnt3.json"),
        "expected",
    );
    // The preset's float_ssim at the default (automatic) scale, 4 at 1080p.
    let got = run_clip(
        "ctc_v6_1080p",
        "natural_1920x1080_420p8",
        &["--json", "--aom_ctc", "v6.0", "--frame_cnt", "3"],
        "json",
    );
    let got = parse_json(&got, "output");
    let diff = json_diff(&v7, &got, &["float_ssim"]).expect("all but float_ssim equal");
    assert!(diff > 100, "{diff}");
    assert_eq!(v7["pooled_metrics"]["float_ssim"]["mean"], 8.898413);
    assert_eq!(got["pooled_metrics"]["float_ssim"]["mean"], 14.334815);
}

#[test]
fn ctc_bad_versions_and_clashes() {
    let mut args = clip_args("testsrc_321x241_420p8");
    args.extend(["--aom_ctc".into(), "v8.0".into()]);
    assert_one_line_error(&args, "bad aom_ctc version \"v8.0\"");
    args.truncate(4);
    args.extend(["--aom_ctc".into(), "proposed".into()]);
    assert_one_line_error(&args, "`--aom_ctc proposed` is deprecated");
    args.truncate(4);
    args.extend(["--nflx_ctc".into(), "v7.0".into()]);
    assert_one_line_error(&args, "bad nflx_ctc version \"v7.0\"");
    // Upstream: each model must be uniquely named, presets' models included.
    args.truncate(4);
    args.extend(["--aom_ctc", "v1.0", "-m", "version=vmaf_v0.6.1"].map(String::from));
    assert_one_line_error(&args, "two models are named \"vmaf\"");
    args.truncate(4);
    args.extend(["--aom_ctc", "v1.0", "--nflx_ctc", "v1.0"].map(String::from));
    assert_one_line_error(&args, "two models are named \"vmaf\"");
}

#[test]
fn ctc_flags_in_help() {
    let out = vmaf_ok(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--aom_ctc <VERSION>",
        "--nflx_ctc <VERSION>",
        "v1.0 ... v7.0",
    ] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
}

/// `clip`'s y4m (8-bit) as a 10-bit y4m: samples shifted left by 2, little-endian.
fn y4m_to_10bit(src: &std::path::Path, dst: &std::path::Path) {
    let data = std::fs::read(src).unwrap();
    let nl = data.iter().position(|&b| b == b'\n').unwrap();
    let header = std::str::from_utf8(&data[..nl]).unwrap();
    let dim = |tag: char| -> usize {
        header
            .split(' ')
            .find_map(|t| t.strip_prefix(tag))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (w, h) = (dim('W'), dim('H'));
    let frame = w * h + 2 * w.div_ceil(2) * h.div_ceil(2);
    let header10: Vec<&str> = header
        .split(' ')
        .map(|t| if t.starts_with('C') { "C420p10" } else { t })
        .filter(|t| !t.starts_with("XYSCSS"))
        .collect();
    let mut out = header10.join(" ").into_bytes();
    out.push(b'\n');
    let mut rest = &data[nl + 1..];
    while !rest.is_empty() {
        assert!(rest.starts_with(b"FRAME\n"));
        out.extend_from_slice(b"FRAME\n");
        for &s in &rest[6..6 + frame] {
            out.extend_from_slice(&(u16::from(s) << 2).to_le_bytes());
        }
        rest = &rest[6 + frame..];
    }
    std::fs::write(dst, out).unwrap();
}

/// From v6.0 the AOM preset takes inputs of different bit depths and scores the lower one
/// shifted up to the higher: 8-bit reference against a 10-bit distorted scores exactly like
/// both at 10 bits. Before v6.0 (and without a preset) the depths must match.
#[test]
fn ctc_aom_v6_mixed_bit_depths() {
    let clip = "testsrc_321x241_420p8";
    let dir = work_dir("ctc_mixed_depth");
    let (r8, d8) = (
        clip_path(&format!("ref_{clip}.y4m")),
        clip_path(&format!("dist_{clip}.y4m")),
    );
    let (r10, d10) = (dir.join("ref10.y4m"), dir.join("dist10.y4m"));
    y4m_to_10bit(&r8, &r10);
    y4m_to_10bit(&d8, &d10);
    let run = |r: &std::path::Path, d: &std::path::Path, preset: &str, out: &str| {
        let out = arg(&dir, out);
        let args = [
            "-r".into(),
            r.display().to_string(),
            "-d".into(),
            d.display().to_string(),
            "--aom_ctc".into(),
            preset.into(),
            "--frame_cnt".into(),
            "4".into(),
            "--json".into(),
            "-q".into(),
            "-o".into(),
            out.clone(),
        ];
        (vmaf(&args), out)
    };
    let (o, both10) = run(&r10, &d10, "v6.0", "both10.json");
    assert!(o.status.success());
    let both10 = parse_json(&std::fs::read_to_string(both10).unwrap(), "both10");
    for (r, d, name) in [(&r8, &d10, "ref8.json"), (&r10, &d8, "dist8.json")] {
        let (o, mixed) = run(r, d, "v7.0", name);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mixed = parse_json(&std::fs::read_to_string(mixed).unwrap(), name);
        // v7.0's float_ssim is at scale 1, v6.0's automatic scale is 1 at this size too.
        let n = json_diff(&both10, &mixed, &[]).expect("mixed depths score as 10-bit");
        assert!(n > 150, "{n}");
    }
    let mut args = vec![
        "-r".to_string(),
        r8.display().to_string(),
        "-d".into(),
        d10.display().to_string(),
    ];
    assert_one_line_error(&args, "bit depths differ (8 vs 10)");
    args.extend(["--aom_ctc".into(), "v5.0".into()]);
    assert_one_line_error(&args, "bit depths differ (8 vs 10)");
}
