//! The AMD host path against a fake HIP runtime (`tests/fakehip/fake_amdhip64.c`, compiled here
//! with the system C compiler): device listing, state creation, module loading (the gfx90a code
//! object of the embedded bundle), kernel launches with the argument counts the kernel sources
//! declare, copies, streams and events, and how runtime failures reach the C API as errnos.
//!
//! The run-time-compile path runs against a fake hiprtc (`tests/fakehip/fake_hiprtc.c`): which
//! programs are compiled with which header and options, the on-disk cache, compile failures,
//! and that compiles from concurrent contexts take turns. With `VMAF_TEST_EXPECT_AMD_ARCHS`
//! (say, `gfx1100 gfx1201` in CI, whose build uses build-aux/forky-hipcc), the AOT objects of
//! those archs must be embedded and serve the fake device without any compile.
//!
//! Each scenario is its own process (`tests/fakehip/driver.c` through the C API, or the `vmaf`
//! CLI): the runtime is loaded once per process and configured by environment variables. The
//! fake runs no kernels, so scores are meaningless; the tests check the calls the fakes logged.
//! Skipped when there is no C compiler.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use vmaf_hip::gpu::code;

/// What the fake reports once everything is released: nothing left, nothing misused.
const CLEAN: &str = "fake: dev_allocs=0 streams=0 events=0 modules=0 host=0 graphs=0 bad=0";
/// The arch the fake reports (its default).
const FAKE_ARCH: &str = "gfx90a:sramecc+:xnack-";
/// An arch no build embeds code for (RDNA 1 is in no default list): served by hiprtc or nothing.
const JIT_ARCH: &str = "gfx1010:xnack-";
const ENOMEM: i32 = -12;
const EIO: i32 = -5;
const ENODEV: i32 = -19;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/` (or `$CARGO_TARGET_DIR`): two levels above this test binary's `deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root().join("target"))
}

fn work_dir() -> PathBuf {
    let d = target_dir().join("hip-fake");
    std::fs::create_dir_all(d.join("logs")).expect("create target/hip-fake");
    d
}

fn show(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// Compiles `src` with `args` into `work_dir()/name` (under a temporary name first, so a
/// program of an earlier run that is still running keeps its file).
fn compile(src: &str, name: &str, args: &[&str]) -> PathBuf {
    let out_path = work_dir().join(name);
    let tmp = work_dir().join(format!("{name}.{}.tmp", std::process::id()));
    let out = Command::new(cc())
        .args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg(root().join(src))
        .arg("-o")
        .arg(&tmp)
        .args(args)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {src} failed\n{}",
        show(&out)
    );
    std::fs::rename(&tmp, &out_path).expect("move the build into place");
    out_path
}

/// Directory holding a private copy of a current `libvmaf_hip.so`.
fn lib_dir() -> PathBuf {
    common::private_cdylib(&work_dir().join("lib"))
}

/// The fake runtime, the driver and the directory of the library the driver links, built once
/// per test process; None (after printing why) when there is no C compiler.
struct Kit {
    fake: PathBuf,
    fake_rtc: PathBuf,
    driver: PathBuf,
    lib: PathBuf,
}

fn kit() -> Option<&'static Kit> {
    static KIT: OnceLock<Option<Kit>> = OnceLock::new();
    let k = KIT.get_or_init(|| {
        let have_cc = Command::new(cc())
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !have_cc {
            return None;
        }
        let fake = compile(
            "tests/fakehip/fake_amdhip64.c",
            "libfake_amdhip64.so",
            &["-shared", "-fPIC", "-lpthread"],
        );
        let fake_rtc = compile(
            "tests/fakehip/fake_hiprtc.c",
            "libfake_hiprtc.so",
            &["-shared", "-fPIC", "-lpthread"],
        );
        let lib = lib_dir();
        let inc = root().join("include/libvmaf");
        let driver = compile(
            "tests/fakehip/driver.c",
            "driver",
            &[
                &format!("-I{}", inc.display()),
                &format!("-L{}", lib.display()),
                &format!("-Wl,-rpath,{}", lib.display()),
                "-lvmaf_hip",
                "-ldl",
                "-lpthread",
                "-lm",
            ],
        );
        Some(Kit {
            fake,
            fake_rtc,
            driver,
            lib,
        })
    });
    if k.is_none() {
        println!("skipped: no C compiler ({} --version failed)", cc());
    }
    k.as_ref()
}

/// One finished scenario: the process output, its `key=value` lines and the fake's call log.
struct Run {
    out: Output,
    vals: BTreeMap<String, String>,
    log: String,
}

impl Run {
    fn int(&self, key: &str) -> i32 {
        self.vals
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no integer {key}=\n{}", show(&self.out)))
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    /// Log lines of call `name`.
    fn calls<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.log
            .lines()
            .filter(move |l| l.split(' ').next() == Some(name))
    }

    fn launches(&self) -> Vec<Launch> {
        self.calls("hipModuleLaunchKernel")
            .map(|l| Launch::parse(l).unwrap_or_else(|| panic!("bad launch line {l}")))
            .collect()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// The fake hiprtc's summary (`programs=.. compiles=.. max_overlap=.. bad=..`) as numbers;
    /// None when the library never loaded it.
    fn rtc_summary(&self) -> Option<BTreeMap<String, i64>> {
        let line = self.stdout().lines().find_map(|l| {
            l.strip_prefix("fakertc: ")
                .filter(|r| *r != "not loaded")
                .map(str::to_string)
        })?;
        Some(
            line.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse().expect("number in fakertc summary")))
                .collect(),
        )
    }

    /// The fake hiprtc was loaded, and no program is left or was misused.
    fn assert_rtc_clean(&self) -> BTreeMap<String, i64> {
        let s = self
            .rtc_summary()
            .unwrap_or_else(|| panic!("fake hiprtc not loaded\n{}", show(&self.out)));
        assert_eq!(s["programs"], 0, "programs left\n{}", show(&self.out));
        assert_eq!(s["bad"], 0, "hiprtc misused\n{}", self.log);
        s
    }

    /// Every logged call returned success.
    fn assert_no_failed_calls(&self) {
        let failed: Vec<&str> = self
            .log
            .lines()
            .filter(|l| !l.ends_with("-> 0") && l.contains("->"))
            .collect();
        assert!(failed.is_empty(), "calls failed: {failed:?}");
    }

    fn assert_clean(&self) {
        assert!(
            self.stdout().contains(CLEAN),
            "objects left or misused after the state was freed\n{}\n--- fake log (BAD lines)\n{}",
            show(&self.out),
            self.log
                .lines()
                .filter(|l| l.starts_with("BAD"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Runs `program args` against the fake with `env` on top of the AMD-only defaults; fails the
/// test if it does not end within two minutes (a hang) or dies from a signal.
fn run_with(kit: &Kit, name: &str, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let log = work_dir()
        .join("logs")
        .join(format!("{name}.{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("VMAF_HIP_VENDOR", "amd")
        .env("VMAF_HIP_AMDHIP_LIBNAME", &kit.fake)
        // Only the built-in code objects unless a scenario says otherwise, and then the fake
        // hiprtc, never a real one; no cache.
        .env("VMAF_HIP_NO_RTC", "1")
        .env("VMAF_HIP_HIPRTC_LIBNAME", &kit.fake_rtc)
        .env("VMAF_HIP_CACHE", "0")
        .env("FAKEHIP_LOG", &log)
        .env("LD_LIBRARY_PATH", &kit.lib)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("FAKEHIP")
            || [
                "VMAF_HIP_INJECT_FAULT",
                "VMAF_HIP_FORCE_RTC",
                "VMAF_HIP_AOT_DIR",
                "VMAF_HIP_HIPRTC",
                "VMAF_HIP_CACHE_DIR",
                "VMAF_HIP_LOG_LEVEL",
                "VMAF_HIP_FRAMES_IN_FLIGHT",
                "VMAF_HIP_WORKER_FRAMES",
                "VMAF_HIP_PIPELINE_THREADS",
            ]
            .contains(&&*k)
        {
            cmd.env_remove(&k);
        }
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("run {name}: {e}"));
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().expect("stdout pipe");
    let mut se = child.stderr.take().expect("stderr pipe");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut so, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut se, &mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for scenario") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: no exit within 120 s (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    };
    assert!(
        out.status.code().is_some(),
        "{name} died from a signal\n{}",
        show(&out)
    );
    let vals = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    Run { out, vals, log }
}

/// Runs the C driver with `args`, asserting it ran its scenario (exit 0).
fn driver(kit: &Kit, name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let r = run_with(kit, name, &kit.driver, args, env);
    assert!(r.out.status.success(), "{name}\n{}", show(&r.out));
    r
}

/// One `hipModuleLaunchKernel` line of the fake's log.
#[derive(Debug)]
struct Launch {
    kernel: String,
    block_threads: u32,
    args: usize,
    status: i32,
}

impl Launch {
    /// `hipModuleLaunchKernel #7 NAME grid=x,y,z block=x,y,z shmem=N args=N stream=N -> ST`
    fn parse(line: &str) -> Option<Launch> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let field = |key: &str| f.iter().find_map(|w| w.strip_prefix(key));
        let block_threads = field("block=")?
            .split(',')
            .map(|v| v.parse::<u32>().ok())
            .try_fold(1u32, |acc, v| Some(acc * v?))?;
        Some(Launch {
            kernel: f.get(2)?.to_string(),
            block_threads,
            args: field("args=")?.parse().ok()?,
            status: f.last()?.parse().ok()?,
        })
    }
}

/// Every `VMAF_KERNEL` entry of kernels/*.hip: (parameter count, `VMAF_BOUNDS` thread limit).
fn kernel_signatures() -> BTreeMap<String, (usize, Option<u32>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root().join("kernels")).expect("kernels/") {
        let p = e.expect("dir entry").path();
        if p.extension().is_none_or(|x| x != "hip") {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("read kernel source");
        for (at, _) in text.match_indices("VMAF_KERNEL void") {
            let mut rest = text[at + "VMAF_KERNEL void".len()..].trim_start();
            let mut bound = None;
            if let Some(r) = rest.strip_prefix("VMAF_BOUNDS(") {
                let close = r.find(')').expect("VMAF_BOUNDS(...)");
                bound = r[..close]
                    .split(',')
                    .next()
                    .and_then(|v| v.trim().parse().ok());
                rest = r[close + 1..].trim_start();
            }
            let open = rest.find('(').expect("kernel parameter list");
            let name = rest[..open].trim().to_string();
            let mut depth = 0;
            let mut commas = 0;
            let mut empty = true;
            for c in rest[open..].chars() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => commas += 1,
                    c if depth == 1 && !c.is_whitespace() => empty = false,
                    _ => {}
                }
            }
            out.insert(name, (if empty { 0 } else { commas + 1 }, bound));
        }
    }
    out
}

/// 64-bit FNV-1a, as the fake logs each code object it loads.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The fake runtime's log line for loading code object `obj` on a device of `arch`.
fn module_line(arch: &str, obj: &[u8]) -> String {
    let base = arch.split(':').next().unwrap_or(arch);
    // EI_ABIVERSION 2, 3, 4: code object v4, v5, v6.
    let cov = obj.get(8).map_or(0, |&v| i32::from(v) + 2);
    format!(
        "hipModuleLoadData arch={base} size={} fnv={:016x} cov={cov} -> 0",
        obj.len(),
        fnv1a(obj)
    )
}

/// The embedded code object of `kernel` for a device of `arch`.
fn aot_object(kernel: &str, arch: &str) -> Option<&'static [u8]> {
    code::select_amd_object(code::embedded(kernel).ok()?.amd_bundle?, arch)
}

/// The fake's log line for loading the code object `kernel` should get on the fake's device.
fn expected_module_line(kernel: &str) -> Option<String> {
    expected_module_line_for(kernel, FAKE_ARCH)
}

fn expected_module_line_for(kernel: &str, arch: &str) -> Option<String> {
    Some(module_line(arch, aot_object(kernel, arch)?))
}

/// The kernel files a vif + adm + motion run loads.
const SCORE_MODULES: [&str; 3] = ["adm", "motion", "vif"];

/// The fake's kit when the library embeds AMD code objects for it; otherwise the test is
/// skipped (without hipcc at build time there is no code to load, and run-time compiling is off
/// here).
fn kit_with_objects() -> Option<&'static Kit> {
    let kit = kit()?;
    if !have_amd_objects() {
        println!("skipped: built without hipcc, no AMD code objects to load");
        return None;
    }
    Some(kit)
}

fn have_amd_objects() -> bool {
    SCORE_MODULES
        .iter()
        .all(|k| expected_module_line(k).is_some())
}

// ---------------------------------------------------------------- devices and states

#[test]
fn lists_the_fake_gfx90a_device() {
    let Some(kit) = kit() else { return };
    let r = driver(kit, "list", &["list"], &[]);
    assert_eq!(r.int("devices"), 1, "{}", show(&r.out));
    assert!(
        r.stdout().contains(&format!(
            "0: Fake AMD Instinct MI210 [amd] arch {FAKE_ARCH}"
        )),
        "{}",
        show(&r.out)
    );
    assert_eq!(r.calls("hipInit").count(), 1, "{}", r.log);
}

#[test]
fn state_init_opens_the_device_and_frees_everything() {
    let Some(kit) = kit() else { return };
    let r = driver(kit, "init", &["init"], &[]);
    assert_eq!(r.int("init"), 0, "{}", show(&r.out));
    assert_eq!(r.int("init0"), 0, "{}", show(&r.out));
    assert_eq!(r.int("init1"), ENODEV, "{}", show(&r.out));
    assert_eq!(r.int("null"), 0);
    // Each state has its own compute stream, destroyed with it.
    assert_eq!(r.calls("hipStreamCreateWithFlags").count(), 2, "{}", r.log);
    assert_eq!(r.calls("hipStreamDestroy").count(), 2, "{}", r.log);
    r.assert_clean();
}

#[test]
fn no_device_is_enodev() {
    let Some(kit) = kit() else { return };
    for (what, env) in [
        ("count", ("FAKEHIP_NO_DEVICE", "1")),
        // hipInit's own answer on a host without a GPU.
        ("init", ("FAKEHIP_INIT_STATUS", "100")),
    ] {
        let r = driver(kit, &format!("nodev-list-{what}"), &["list"], &[env]);
        assert_eq!(r.int("devices"), 0, "{what}: {}", show(&r.out));
        let r = driver(kit, &format!("nodev-init-{what}"), &["init"], &[env]);
        assert_eq!(r.int("init"), ENODEV, "{what}: {}", show(&r.out));
        assert_eq!(r.int("null"), 1, "{what}: {}", show(&r.out));
    }
}

// ---------------------------------------------------------------- a scoring run

/// How many launches of `kernel` a run logged (checked against the signatures).
fn launches_of(r: &Run, sigs: &BTreeMap<String, (usize, Option<u32>)>, kernel: &str) -> usize {
    check_launches(r, sigs)
        .iter()
        .filter(|l| l.kernel == kernel)
        .count()
}

/// The launches of run `r` ([`check_each_launch`]), among them every kernel of a vif + adm +
/// motion run.
fn check_launches(r: &Run, sigs: &BTreeMap<String, (usize, Option<u32>)>) -> Vec<Launch> {
    let launches = check_each_launch(r, sigs);
    let names: BTreeSet<&str> = launches.iter().map(|l| l.kernel.as_str()).collect();
    for k in EXPECTED_KERNELS {
        assert!(names.contains(k), "{k} never launched: {names:?}");
    }
    launches
}

/// The run's launches, each checked: a declared kernel, its argument count, within its launch
/// bounds, not failed.
fn check_each_launch(r: &Run, sigs: &BTreeMap<String, (usize, Option<u32>)>) -> Vec<Launch> {
    let launches = r.launches();
    for l in &launches {
        let (params, bound) = sigs
            .get(&l.kernel)
            .unwrap_or_else(|| panic!("launched {} is no VMAF_KERNEL", l.kernel));
        assert_eq!(l.status, 0, "{l:?}");
        assert_eq!(
            l.args, *params,
            "{}: host passes {} arguments, the kernel declares {params}",
            l.kernel, l.args
        );
        // More threads than the launch bounds is a launch failure on AMD; without bounds
        // hipcc assumes 1024 (ROCm 6; 256 before), so stay within 256 there.
        let limit = bound.unwrap_or(256);
        assert!(l.block_threads <= limit, "{l:?} exceeds {limit} threads");
    }
    launches
}

/// Kernels a vif + adm + motion run on 8-bit input must launch.
const EXPECTED_KERNELS: &[&str] = &[
    "vmaf_vif_stats_u8",
    "vmaf_vif_stats_u16",
    "vmaf_vif_down_u16",
    "vmaf_adm_dwt0_u8",
    "vmaf_adm_dwt123",
    "vmaf_adm_cm",
    "vmaf_motion_rows_u8",
    "vmaf_motion_reduce",
];

fn score(kit: &Kit, name: &str, threads: u32, env: &[(&str, &str)]) -> Run {
    driver(kit, name, &["score", &threads.to_string(), "3"], env)
}

#[test]
fn scoring_run_loads_gfx90a_objects_and_launches_every_kernel() {
    let Some(kit) = kit() else { return };
    if !have_amd_objects() {
        // Without hipcc at build time there is no code for the fake (run-time compiling is off).
        let r = score(kit, "score-no-objects", 2, &[]);
        assert_eq!(r.int("first_error"), ENODEV, "{}", show(&r.out));
        println!("skipped: built without hipcc, no AMD code objects to load");
        return;
    }
    let sigs = kernel_signatures();
    // 0 threads: vmaf_hip_import_state starts the context's own workers.
    for threads in [0, 2] {
        let r = score(kit, &format!("score-{threads}"), threads, &[]);
        let ctx = || format!("threads {threads}\n{}", show(&r.out));
        for key in [
            "init", "import", "use", "read0", "read1", "read2", "flush", "close",
        ] {
            assert_eq!(r.int(key), 0, "{key}: {}", ctx());
        }
        r.assert_clean();

        // One module per kernel file, each the gfx90a object of its embedded bundle.
        let loads: BTreeSet<&str> = r.calls("hipModuleLoadData").collect();
        let want: BTreeSet<String> = ["vif", "adm", "motion"]
            .iter()
            .map(|k| expected_module_line(k).expect("code object"))
            .collect();
        assert_eq!(
            loads,
            want.iter().map(String::as_str).collect(),
            "module loads: {}",
            ctx()
        );
        assert_eq!(r.calls("hipModuleLoadData").count(), 3, "{}", r.log);
        assert_eq!(r.calls("hipModuleUnload").count(), 3, "{}", r.log);

        let launches = check_launches(&r, &sigs);
        // Per frame: one vif and one adm pass; motion from the second frame on.
        let count = |k: &str| launches.iter().filter(|l| l.kernel == k).count();
        assert_eq!(count("vmaf_vif_stats_u8"), 3);
        assert_eq!(count("vmaf_adm_dwt0_u8"), 3);
        assert!(count("vmaf_motion_rows_u8") >= 2);

        // Pictures go up, partial sums come down, work is ordered with events.
        assert!(r.calls("hipMemcpyHtoDAsync").count() >= 3, "{}", r.log);
        assert!(r.calls("hipMemcpyDtoHAsync").count() >= 3, "{}", r.log);
        assert!(r.calls("hipEventRecord").count() >= 1, "{}", r.log);
        assert!(r.calls("hipMalloc").count() >= 1, "{}", r.log);
        r.assert_no_failed_calls();
    }
}

/// Semi-planar P010 frames in device memory (`vmaf_hip_picture_wrap_device_semiplanar`) on the
/// AMD host path: every picture's luma is shifted and (PSNR reads chroma) its chroma split by
/// kernels/semiplanar.hip, queued once on the null stream behind the caller's writes with the
/// kernels' argument counts; every wrapped frame is released and every object freed, with 0
/// and 2 threads.
#[test]
fn semiplanar_device_frames_are_unpacked_on_the_null_stream() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let sigs = kernel_signatures();
    let frames = 3;
    for threads in [0, 2] {
        let r = driver(
            kit,
            &format!("semiplanar-{threads}"),
            &["semiplanar", &threads.to_string(), &frames.to_string()],
            &[],
        );
        let ctx = || format!("threads {threads}\n{}", show(&r.out));
        for key in ["init", "import", "use", "flush", "first_error", "close"] {
            assert_eq!(r.int(key), 0, "{key}: {}", ctx());
        }
        assert_eq!(r.int("released"), 2 * frames, "{}", ctx());
        r.assert_clean();
        let launches = check_each_launch(&r, &sigs);
        let count = |k: &str| launches.iter().filter(|l| l.kernel == k).count();
        assert_eq!(
            count("vmaf_semiplanar_luma_u16"),
            2 * frames as usize,
            "{}",
            r.log
        );
        assert_eq!(
            count("vmaf_semiplanar_chroma_u16"),
            2 * frames as usize,
            "{}",
            r.log
        );
        for l in r.calls("hipModuleLaunchKernel") {
            if l.contains("vmaf_semiplanar_") {
                assert!(l.contains(" stream=0 "), "not on the null stream: {l}");
            }
        }
        r.assert_no_failed_calls();
    }
    // The planes a picture is unpacked into serve the next pictures: freeing device memory
    // waits for the whole device. Without reuse each of the 64 pictures of 32 frames would
    // allocate its shifted luma (256x144 16-bit words) and free it and its two chroma planes;
    // with it, only the pictures alive at once do (frames in flight, two per worker, and the
    // pair being wrapped), however many frames pass. How many are alive at once varies from
    // run to run with the threads' timing, so the bounds leave room for that.
    let run = |n: u32| {
        let r = driver(
            kit,
            &format!("semiplanar-reuse-{n}"),
            &["semiplanar", "2", &n.to_string()],
            &[],
        );
        assert_eq!(r.int("first_error"), 0, "{}", show(&r.out));
        r.assert_clean();
        let luma = r
            .calls("hipMalloc")
            .filter(|l| l.contains(" bytes=73728 "))
            .count();
        (luma, r.calls("hipDeviceSynchronize").count())
    };
    let ((luma_few, few), (luma_many, many)) = (run(16), run(32));
    assert!(
        luma_many <= 16,
        "{luma_many} shifted luma planes allocated for 64 pictures (16 frames: {luma_few}): the \
         unpacked planes are not reused"
    );
    assert!(
        many < few + 32,
        "{few} device waits for 16 frames, {many} for 32: the unpacked planes are not reused"
    );
}

/// `VMAF_HIP_WAIT=sleep`: every event is created blocking-sync (hipEventBlockingSync, 1) beside
/// timing disabled (2), so host waits sleep; without it events only disable timing. Both runs
/// score and release everything.
#[test]
fn sleeping_waits_make_blocking_sync_events() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    for (name, env, flags) in [
        ("wait-default", &[][..], "flags=2"),
        ("wait-sleep", &[("VMAF_HIP_WAIT", "sleep")][..], "flags=3"),
    ] {
        let r = score(kit, name, 2, env);
        assert_eq!(r.int("first_error"), 0, "{name}: {}", show(&r.out));
        r.assert_clean();
        let creates: Vec<&str> = r.calls("hipEventCreateWithFlags").collect();
        assert!(!creates.is_empty(), "{name}: no events\n{}", r.log);
        for l in creates {
            assert_eq!(l.split(' ').nth(1), Some(flags), "{name}: {l}");
        }
    }
}

/// `VMAF_HIP_GRAPHS=1` on the HIP path: each scratch set runs its fixed work directly on its
/// first frame, records it on its second (no event, wait or synchronize inside a capture; the
/// fake rejects those), and launches the graph from then on; every graph and exec is destroyed
/// with the state. Without the variable HIP launches call by call.
#[test]
fn graphs_replay_fixed_work_on_request() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let frames = 8;
    let keys: Vec<String> = (0..frames).map(|i| format!("read{i}")).collect();
    let on = driver(
        kit,
        "graphs-on",
        &["score", "1", &frames.to_string()],
        &[("VMAF_HIP_GRAPHS", "1")],
    );
    let off = driver(kit, "graphs-off", &["score", "1", &frames.to_string()], &[]);
    for r in [&on, &off] {
        for key in keys
            .iter()
            .map(String::as_str)
            .chain(["init", "flush", "close"])
        {
            assert_eq!(r.int(key), 0, "{key}: {}", show(&r.out));
        }
        r.assert_clean();
        r.assert_no_failed_calls();
    }
    assert_eq!(off.calls("hipStreamBeginCapture").count(), 0, "{}", off.log);
    assert_eq!(off.calls("hipGraphLaunch").count(), 0, "{}", off.log);

    // VIF, ADM and motion each record once per scratch set; with one worker every frame
    // after a set's second is a graph launch per extractor.
    let captures = on.calls("hipStreamBeginCapture").count();
    assert!(
        (3..=9).contains(&captures),
        "captures {captures}\n{}",
        on.log
    );
    assert_eq!(on.calls("hipStreamEndCapture").count(), captures);
    assert_eq!(on.calls("hipGraphInstantiateWithFlags").count(), captures);
    assert_eq!(on.calls("hipGraphExecDestroy").count(), captures);
    assert_eq!(on.calls("hipGraphDestroy").count(), captures);
    let launches = on.calls("hipGraphLaunch").count();
    assert!(launches >= frames, "graph launches {launches}\n{}", on.log);
    // Each extractor's first kernel (it reads the frame's pictures) is launched directly on a
    // scratch set's first frame and recorded on its second; later frames only update the
    // recorded node's arguments. The rest is not launched call by call any more.
    let sigs = kernel_signatures();
    let count = |r: &Run, k: &str| launches_of(r, &sigs, k);
    let updates = |r: &Run, k: &str| {
        r.calls("hipGraphExecKernelNodeSetParams")
            .filter(|l| l.split(' ').nth(1) == Some(k))
            .count()
    };
    for head in [
        "vmaf_vif_stats_u8",
        "vmaf_adm_dwt0_u8",
        "vmaf_motion_rows_u8",
    ] {
        assert_eq!(
            count(&off, head),
            frames - usize::from(head.starts_with("vmaf_motion"))
        );
        assert_eq!(updates(&off, head), 0);
        let (launched, updated) = (count(&on, head), updates(&on, head));
        assert_eq!(launched + updated, count(&off, head), "{head}\n{}", on.log);
        assert!(updated > 0 && launched < frames, "{head}\n{}", on.log);
    }
    assert!(count(&on, "vmaf_vif_stats_u16") < count(&off, "vmaf_vif_stats_u16"));
    assert!(count(&on, "vmaf_adm_cm") < count(&off, "vmaf_adm_cm"));
}

/// The driver's `score` scenario with `threads` workers over `frames` frames and
/// `VMAF_HIP_GRAPHS=graphs`: every step returned 0, everything was released and no runtime
/// call failed.
fn score_cleanly(kit: &Kit, name: &str, threads: u32, frames: usize, graphs: &str) -> Run {
    score_cleanly_with(kit, name, threads, frames, &[("VMAF_HIP_GRAPHS", graphs)])
}

/// [`score_cleanly`] with the environment `env`.
fn score_cleanly_with(
    kit: &Kit,
    name: &str,
    threads: u32,
    frames: usize,
    env: &[(&str, &str)],
) -> Run {
    let r = driver(
        kit,
        name,
        &["score", &threads.to_string(), &frames.to_string()],
        env,
    );
    for key in (0..frames)
        .map(|i| format!("read{i}"))
        .chain(["init", "flush", "close"].map(String::from))
    {
        assert_eq!(r.int(&key), 0, "{name} {key}: {}", show(&r.out));
    }
    r.assert_clean();
    r.assert_no_failed_calls();
    r
}

/// Event records a stream gets with no work queued on it since its previous record: after an
/// upload, its copy marker (page-locked pictures) and the plane's ready event; after other
/// work, none. A frame's luma planes go back without a recorded release once the host has
/// waited for the job's read-back, and an upload's marker is created, not recorded, before
/// its copy: each extractor used to record two releases right after its read-back. Graphs on
/// and off, one and two workers, and the scores are the same.
#[test]
fn event_records_follow_work() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let frames = 8;
    for (threads, graphs) in [(1, "0"), (2, "0"), (1, "1"), (2, "1")] {
        let name = format!("records-{threads}-{graphs}");
        let r = score_cleanly(kit, &name, threads, frames, graphs);
        // Per stream: the last work call, and records since.
        let mut streams: BTreeMap<String, (String, usize)> = BTreeMap::new();
        let mut records = 0;
        for line in r.log.lines() {
            let call = line.split(' ').next().unwrap_or("");
            let Some(stream) = line
                .split(' ')
                .find_map(|w| w.strip_prefix("stream="))
                .map(String::from)
            else {
                continue;
            };
            let entry = streams.entry(stream).or_default();
            match call {
                "hipEventRecord" => {
                    records += 1;
                    entry.1 += 1;
                    let allowed = if entry.0 == "hipMemcpyHtoDAsync" {
                        2
                    } else {
                        1
                    };
                    assert!(
                        entry.1 <= allowed,
                        "{name}: {} records after {:?}: {line}\n{}",
                        entry.1,
                        entry.0,
                        r.log
                    );
                }
                "hipStreamWaitEvent" => {}
                _ => *entry = (call.to_string(), 0),
            }
        }
        assert!(records >= frames, "{name}: {records} records\n{}", r.log);
    }
}

/// A frame's extractors are waited for last queued first, so the host waits once per frame on
/// a worker's stream: the other read-backs are behind that record and need no runtime call
/// (three `hipEventSynchronize` a frame before). A worker that keeps two frames queued waits
/// once for both: the older frame's read-backs are behind the newer one's. One worker, graphs
/// on and off, scores as ever.
#[test]
fn one_host_wait_per_frame() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let frames = 8;
    for graphs in ["0", "1"] {
        for (depth, lo, hi) in [("1", frames, frames + 6), ("2", frames / 2, frames / 2 + 6)] {
            let name = format!("waits-{graphs}-{depth}");
            let env = [
                ("VMAF_HIP_GRAPHS", graphs),
                ("VMAF_HIP_WORKER_FRAMES", depth),
            ];
            let r = score_cleanly_with(kit, &name, 1, frames, &env);
            let waits = r.calls("hipEventSynchronize").count();
            // One per frame or pair, and a few for picture teardown (page-locked copies) and
            // set-up.
            assert!(
                (lo..hi).contains(&waits),
                "{name}: {waits} event waits for {frames} frames\n{}",
                r.log
            );
        }
    }
}

/// Workers that keep two or three frames queued (`VMAF_HIP_WORKER_FRAMES`, with frames in
/// flight to take them from) score every frame once: the same kernels as one frame per worker,
/// every call succeeding, every picture and object released, graphs on and off.
#[test]
fn nested_frames_score_every_frame_once() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let sigs = kernel_signatures();
    let frames = 12;
    for graphs in ["0", "1"] {
        let one = score_cleanly_with(
            kit,
            &format!("nested-{graphs}-1"),
            2,
            frames,
            &[("VMAF_HIP_GRAPHS", graphs), ("VMAF_HIP_WORKER_FRAMES", "1")],
        );
        for depth in ["2", "3"] {
            let name = format!("nested-{graphs}-{depth}");
            let env = [
                ("VMAF_HIP_GRAPHS", graphs),
                ("VMAF_HIP_WORKER_FRAMES", depth),
                ("VMAF_HIP_FRAMES_IN_FLIGHT", "8"),
            ];
            let r = score_cleanly_with(kit, &name, 2, frames, &env);
            assert_eq!(r.int("adm2_at_0"), 0, "{name}: {}", show(&r.out));
            if graphs == "0" {
                for k in [
                    "vmaf_vif_stats_u8",
                    "vmaf_adm_dwt0_u8",
                    "vmaf_motion_rows_u8",
                ] {
                    assert_eq!(
                        launches_of(&r, &sigs, k),
                        launches_of(&one, &sigs, k),
                        "{name}: {k}\n{}",
                        r.log
                    );
                }
            }
        }
    }
}

/// A runtime that records graphs but refuses to update a recorded head (older ROCm takes only
/// host stubs as kernel-node functions), or cannot list a graph's first node: every frame's head
/// still runs exactly once, launched directly, and the rest of the work is recorded again
/// without it and replayed.
#[test]
fn graphs_fall_back_when_heads_are_refused() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    // Enough frames for each scratch set (one per frame a worker keeps queued) to run direct,
    // record, meet the refusal, record without the head and replay.
    let frames = 16;
    let args = ["score", "1", &frames.to_string()].map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let off = driver(kit, "heads-off", &args, &[]);
    let sigs = kernel_signatures();
    let count = |r: &Run, k: &str| launches_of(r, &sigs, k);
    for (knob, refused) in [
        ("FAKEHIP_REFUSE_UPDATE", "hipGraphExecKernelNodeSetParams"),
        ("FAKEHIP_NO_ROOTS", "hipGraphGetRootNodes"),
    ] {
        let on = driver(
            kit,
            &format!("heads-{knob}"),
            &args,
            &[("VMAF_HIP_GRAPHS", "1"), (knob, "1")],
        );
        for key in (0..frames)
            .map(|i| format!("read{i}"))
            .chain(["init", "flush", "close"].map(String::from))
        {
            assert_eq!(on.int(&key), 0, "{knob} {key}: {}", show(&on.out));
        }
        on.assert_clean();
        let failed: Vec<&str> = on
            .log
            .lines()
            .filter(|l| !l.ends_with("-> 0") && l.contains("->"))
            .collect();
        assert!(
            !failed.is_empty(),
            "{knob}: nothing was refused\n{}",
            on.log
        );
        assert!(
            failed.iter().all(|l| l.starts_with(refused)),
            "{knob}: other calls failed: {failed:?}"
        );
        // Every frame's head ran once; a capture that failed after recording its head (no root
        // nodes) adds one captured, never run, launch line.
        let heads = [
            "vmaf_vif_stats_u8",
            "vmaf_adm_dwt0_u8",
            "vmaf_motion_rows_u8",
        ];
        for head in heads {
            assert!(
                count(&on, head) >= count(&off, head),
                "{knob} {head}\n{}",
                on.log
            );
        }
        let total = |r: &Run| heads.iter().map(|h| count(r, h)).sum::<usize>();
        let discarded = if knob == "FAKEHIP_NO_ROOTS" {
            failed.len()
        } else {
            0
        };
        assert_eq!(total(&on), total(&off) + discarded, "{knob}\n{}", on.log);
        assert_eq!(
            on.calls("hipGraphExecKernelNodeSetParams")
                .filter(|l| l.ends_with("-> 0"))
                .count(),
            0
        );
        assert!(on.calls("hipGraphLaunch").count() > 0, "{knob}\n{}", on.log);
        assert!(
            count(&on, "vmaf_adm_cm") < count(&off, "vmaf_adm_cm"),
            "{knob}: the rest is not replayed\n{}",
            on.log
        );
    }
}

// ---------------------------------------------------------------- error mapping

/// How many times a clean run calls `call`, to aim injected failures at its middle and end: the
/// fewest of three runs, as the count varies from run to run (how the frames spread over the
/// worker threads decides how many streams and scratch buffers are made).
fn clean_count(kit: &Kit, call: &str) -> usize {
    static CLEAN_RUNS: OnceLock<Vec<String>> = OnceLock::new();
    let logs = CLEAN_RUNS.get_or_init(|| {
        (0..3)
            .map(|i| score(kit, &format!("score-count-{i}"), 2, &[]).log)
            .collect()
    });
    logs.iter()
        .map(|log| {
            log.lines()
                .filter(|l| l.split(' ').next() == Some(call))
                .count()
        })
        .min()
        .unwrap_or(0)
}

/// A scoring run with `knob` set fails with `errno` (reported by a read or the flush), and
/// everything is still released. How many allocations or waits a run makes depends on how its
/// two workers interleave: a run that ends before the failure point (fewer calls of `counted`
/// than the clean runs made) is tried again, with the point moved to the last such call it
/// made, so the failure still lands on a real call.
fn assert_failure(kit: &Kit, name: &str, knob: &str, at: &str, errno: i32, counted: &[&str]) {
    let mut at = at.to_string();
    for attempt in 0..5 {
        let r = score(kit, name, 2, &[(knob, &at)]);
        assert_eq!(r.int("init"), 0, "{name}: {}", show(&r.out));
        if r.int("first_error") == 0 && attempt < 4 {
            let made: usize = counted.iter().map(|c| r.calls(c).count()).sum();
            if let (false, Ok(point)) = (counted.is_empty(), at.parse::<usize>()) {
                at = point.min(made).max(1).to_string();
            }
            continue;
        }
        assert_eq!(
            r.int("first_error"),
            errno,
            "{name} at {at}: {}",
            show(&r.out)
        );
        assert_eq!(r.int("close"), 0, "{name}: {}", show(&r.out));
        r.assert_clean();
        return;
    }
}

#[test]
fn out_of_memory_is_enomem() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let n = clean_count(kit, "hipMalloc");
    assert!(n >= 2, "a clean run allocates device memory");
    for at in [1, n / 2, n] {
        assert_failure(
            kit,
            &format!("oom-{at}"),
            "FAKEHIP_OOM_AT",
            &at.to_string(),
            ENOMEM,
            &["hipMalloc"],
        );
    }
}

#[test]
fn failed_launch_is_eio() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let n = clean_count(kit, "hipModuleLaunchKernel");
    for at in [1, n / 2, n] {
        let name = format!("launch-{at}");
        let calls = ["hipModuleLaunchKernel"];
        assert_failure(
            kit,
            &name,
            "FAKEHIP_LAUNCH_FAIL_AT",
            &at.to_string(),
            EIO,
            &calls,
        );
    }
}

#[test]
fn failed_synchronize_is_eio() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let n = clean_count(kit, "hipStreamSynchronize") + clean_count(kit, "hipEventSynchronize");
    for at in [1, n / 2] {
        let name = format!("sync-{at}");
        let calls = [
            "hipStreamSynchronize",
            "hipEventSynchronize",
            "hipDeviceSynchronize",
        ];
        assert_failure(
            kit,
            &name,
            "FAKEHIP_SYNC_FAIL_AT",
            &at.to_string(),
            EIO,
            &calls,
        );
    }
}

#[test]
fn refused_or_missing_code_object_is_enodev() {
    let Some(kit) = kit() else { return };
    // The runtime refuses the object (hipErrorInvalidImage), and nothing else may be tried.
    assert_failure(
        kit,
        "refused",
        "FAKEHIP_MODULE_LOAD_STATUS",
        "200",
        ENODEV,
        &[],
    );
    // An arch the bundle has no object for: nothing reaches the runtime.
    let r = score(kit, "no-aot-arch", 2, &[("FAKEHIP_ARCH", JIT_ARCH)]);
    assert_eq!(r.int("first_error"), ENODEV, "{}", show(&r.out));
    assert_eq!(r.calls("hipModuleLoadData").count(), 0, "{}", r.log);
    r.assert_clean();
}

// ---------------------------------------------------------------- the CLI

#[test]
fn cli_hip_backend_runs_on_the_fake() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let dir = common::work_dir("hip_fake_cli");
    let out = dir.join("out.json");
    let mut args = common::clip_args("life_320x240_420p8");
    args.extend(["--frame_cnt", "3", "-q", "--json", "-o"].map(String::from));
    args.push(out.display().to_string());
    args.extend(["--backend", "hip"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run_with(kit, "cli", &common::vmaf_bin(), &args, &[]);
    assert!(r.out.status.success(), "{}", show(&r.out));
    let names: BTreeSet<String> = r.launches().into_iter().map(|l| l.kernel).collect();
    for k in EXPECTED_KERNELS {
        assert!(names.contains(*k), "{k} never launched: {names:?}");
    }
    let json = std::fs::read_to_string(&out).expect("CLI output");
    assert_eq!(
        common::parse_json(&json, "CLI output")["frames"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

/// The fake's launches of `vmaf --backend hip --no_prediction` on three frames of
/// life_320x240 with `features`, each checked against the sources ([`check_each_launch`]);
/// None without AMD code objects.
fn cli_feature_launches(name: &str, features: &[&str]) -> Option<(Run, Vec<Launch>)> {
    let kit = kit_with_objects()?;
    let sigs = kernel_signatures();
    let dir = common::work_dir(&format!("hip_fake_{name}"));
    let out = dir.join("out.json");
    let mut args = common::clip_args("life_320x240_420p8");
    args.extend(["--frame_cnt", "3", "-q", "--no_prediction"].map(String::from));
    for f in features {
        args.extend(["--feature".to_string(), f.to_string()]);
    }
    args.extend(["--json", "-o"].map(String::from));
    args.push(out.display().to_string());
    args.extend(["--backend", "hip"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run_with(kit, name, &common::vmaf_bin(), &args, &[]);
    assert!(r.out.status.success(), "{}", show(&r.out));
    let launches = check_each_launch(&r, &sigs);
    Some((r, launches))
}

/// How many of `launches` ran `kernel`.
fn count(launches: &[Launch], kernel: &str) -> usize {
    launches.iter().filter(|l| l.kernel == kernel).count()
}

/// SpEED on the fake through the CLI: speed_chroma with prescaling (conversion, resampling,
/// decimation of float planes) and speed_temporal (decimation of frame differences), each with
/// its moments kernel, launched with the argument counts and block sizes the sources declare.
#[test]
fn cli_hip_backend_runs_speed_on_the_fake() {
    let Some((r, l)) = cli_feature_launches(
        "cli-speed",
        &[
            "speed_chroma=speed_prescale=1.5:speed_prescale_method=bilinear",
            "speed_temporal",
        ],
    ) else {
        return;
    };
    // speed_chroma: U and V of each of the 3 frames; speed_temporal: frames 1 and 2.
    assert_eq!(count(&l, "vmaf_speed_to_float_u8"), 6);
    assert_eq!(count(&l, "vmaf_speed_resample"), 6);
    assert_eq!(count(&l, "vmaf_speed_decimate_f32"), 6);
    assert_eq!(count(&l, "vmaf_speed_decimate_u8"), 2);
    assert_eq!(count(&l, "vmaf_speed_moments"), 8);
    r.assert_no_failed_calls();
}

/// speed_chroma reads the CLI's page-locked pictures by DMA where they are, each picture's U
/// and V (adjacent in its buffer) in one copy: two copies per frame, none per plane.
#[test]
fn speed_chroma_copies_each_page_locked_picture_once() {
    let Some(kit) = kit_with_objects() else {
        return;
    };
    let dir = common::work_dir("hip_fake_speed_dma");
    let mut args = common::clip_args("natural_1920x1080_420p8");
    args.extend(["--frame_cnt", "2", "-q", "--no_prediction"].map(String::from));
    args.extend(
        [
            "--feature",
            "speed_chroma",
            "--backend",
            "hip",
            "--json",
            "-o",
        ]
        .map(String::from),
    );
    args.push(dir.join("out.json").display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run_with(kit, "speed-dma", &common::vmaf_bin(), &args, &[]);
    assert!(r.out.status.success(), "{}", show(&r.out));
    assert!(
        r.calls("hipHostRegister").count() > 0,
        "pictures not page-locked"
    );
    let uploads = |bytes: usize| {
        let want = format!("bytes={bytes}");
        r.calls("hipMemcpyHtoDAsync")
            .filter(|l| l.split(' ').any(|w| w == want))
            .count()
    };
    let plane = 960 * 540;
    assert_eq!(uploads(2 * plane), 4, "one copy of U and V per picture");
    assert_eq!(uploads(plane), 0, "no copy of a single chroma plane");
    r.assert_no_failed_calls();
}

/// cambi, psnr_hvs and psnr on the fake through the CLI: cambi's preprocessing, mask,
/// per-scale picture and sliding c-value kernels, psnr_hvs's terms per plane and in-order sums,
/// and psnr's per-plane sums (both staging the pictures the same way), launched with the
/// argument counts and block sizes the sources declare.
#[test]
fn cli_hip_backend_runs_cambi_and_psnr_hvs_on_the_fake() {
    let Some((r, l)) = cli_feature_launches("cli-cambi", &["cambi", "psnr_hvs", "psnr"]) else {
        return;
    };
    // cambi: one preprocessing and mask per frame, five scales each; psnr_hvs and psnr: three
    // planes.
    assert_eq!(count(&l, "vmaf_psnr_sse_u8"), 9);
    assert_eq!(count(&l, "vmaf_cambi_preprocess_u8"), 3);
    assert_eq!(count(&l, "vmaf_cambi_mask"), 3);
    assert_eq!(count(&l, "vmaf_cambi_scale"), 15);
    assert_eq!(count(&l, "vmaf_cambi_cvalues_slide"), 15);
    assert_eq!(count(&l, "vmaf_psnr_hvs_terms_u8"), 9);
    assert_eq!(count(&l, "vmaf_psnr_hvs_sum"), 3);
    r.assert_no_failed_calls();
}

// ---------------------------------------------------------------- run-time compiling (hiprtc)

/// An empty directory under target/hip-fake for scenario `name`.
fn fresh_dir(name: &str) -> PathBuf {
    let d = work_dir().join(format!("{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scenario directory");
    d
}

/// The values of `key=` in a log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key))
}

/// Environment that lets a scoring run compile with the fake hiprtc and cache in `cache`.
fn rtc_env<'a>(cache: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("VMAF_HIP_NO_RTC", "0"),
        ("VMAF_HIP_CACHE", "1"),
        ("VMAF_HIP_CACHE_DIR", cache),
    ];
    env.extend_from_slice(extra);
    env
}

/// Asserts the scoring keys of `r` (with key prefix `pre`) are all 0.
fn assert_scored(r: &Run, pre: &str) {
    for key in [
        "init", "import", "use", "read0", "read1", "read2", "flush", "close",
    ] {
        assert_eq!(
            r.int(&format!("{pre}{key}")),
            0,
            "{pre}{key}\n{}",
            show(&r.out)
        );
    }
}

/// (a) and (b): every module from hiprtc, one compile per kernel source with the device's arch
/// and the prelude as the named header `vmaf_prelude.h`, one cache entry per kernel; then a
/// second process with the same cache compiles nothing and loads the same objects from it.
/// Once forced on a device the AOT bundle covers (the fake hiprtc returns that bundle's real
/// object), once on an arch no build covers (it returns a minimal object of its own).
#[test]
fn hiprtc_compiles_each_kernel_once_and_the_cache_serves_the_next_process() {
    let Some(kit) = kit() else { return };
    let sigs = kernel_signatures();
    for (label, arch, force) in [("forced", FAKE_ARCH, "1"), ("jit", JIT_ARCH, "0")] {
        let base = arch.split(':').next().unwrap_or(arch);
        let cache = fresh_dir(&format!("rtc-cache-{label}"));
        let codes = fresh_dir(&format!("rtc-code-{label}"));
        // Real code objects for the fake hiprtc to hand back, where the build has them.
        let mut real = BTreeMap::new();
        for k in SCORE_MODULES {
            if let Some(obj) = aot_object(k, arch) {
                std::fs::write(codes.join(format!("{k}.hip.{base}.co")), obj).expect("write");
                real.insert(format!("{k}.hip"), obj);
            }
        }
        let (cache_s, codes_s) = (cache.display().to_string(), codes.display().to_string());
        let env = rtc_env(
            &cache_s,
            &[
                ("FAKEHIP_ARCH", arch),
                ("VMAF_HIP_FORCE_RTC", force),
                ("FAKEHIPRTC_CODE_DIR", &codes_s),
            ],
        );
        let r = score(kit, &format!("rtc-{label}"), 2, &env);
        let ctx = || format!("{label}\n{}\n--- fake log\n{}", show(&r.out), r.log);
        assert_scored(&r, "");
        r.assert_clean();
        let sum = r.assert_rtc_clean();
        assert_eq!(sum["compiles"], 3, "{}", ctx());

        let prelude = format!(
            "vmaf_prelude.h:{}:{:016x}",
            code::PRELUDE.len(),
            fnv1a(code::PRELUDE.as_bytes())
        );
        let mut created = BTreeSet::new();
        for l in r.calls("hiprtcCreateProgram") {
            let name = field(l, "name=").expect("name=");
            assert_eq!(field(l, "headers="), Some(&*prelude), "{l}\n{}", ctx());
            let stem = name.strip_suffix(".hip").expect(".hip program name");
            let src = code::embedded(stem).expect("embedded source").source;
            assert_eq!(
                field(l, "source_fnv="),
                Some(&*format!("{:016x}", fnv1a(src.as_bytes()))),
                "{l}"
            );
            assert!(l.ends_with("-> 0"), "{l}");
            assert!(
                created.insert(name.to_string()),
                "{name} created twice\n{}",
                ctx()
            );
        }
        let want: BTreeSet<String> = SCORE_MODULES.iter().map(|k| format!("{k}.hip")).collect();
        assert_eq!(created, want, "{}", ctx());
        let opts = format!("--offload-arch={base}|-O3");
        let compiled: Vec<&str> = r.calls("hiprtcCompileProgram").collect();
        assert_eq!(compiled.len(), 3, "{}", ctx());
        for l in &compiled {
            assert_eq!(field(l, "opts="), Some(&*opts), "{l}");
            let name = field(l, "name=").expect("name=");
            let from = if real.contains_key(name) {
                "file"
            } else {
                "synthesized"
            };
            assert_eq!(field(l, "code="), Some(from), "{l}");
            assert!(l.ends_with("-> 0"), "{l}");
        }
        assert_eq!(r.calls("hiprtcDestroyProgram").count(), 3, "{}", ctx());

        // One module per kernel, each the compiled code, each stored in the cache.
        let loads: BTreeSet<String> = r.calls("hipModuleLoadData").map(str::to_string).collect();
        assert_eq!(loads.len(), 3, "{}", ctx());
        for obj in real.values() {
            assert!(loads.contains(&module_line(arch, obj)), "{}", ctx());
        }
        let safe_arch: String = arch
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut entries: Vec<String> = std::fs::read_dir(&cache)
            .expect("cache dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries.len(), 3, "cache entries {entries:?}");
        let mut cached = BTreeSet::new();
        for (e, k) in entries.iter().zip(SCORE_MODULES) {
            assert!(
                e.starts_with(&format!("{k}-{safe_arch}-")) && e.ends_with(".bin"),
                "cache entry {e} for {k}"
            );
            let bytes = std::fs::read(cache.join(e)).expect("read cache entry");
            let obj = code::decode_entry(&bytes).expect("intact cache entry");
            cached.insert(module_line(arch, obj));
        }
        assert_eq!(cached, loads, "cached objects are the loaded ones");
        check_launches(&r, &sigs);

        // (b) Same cache, new process: no compile, the same objects.
        let r2 = score(kit, &format!("rtc-{label}-cached"), 2, &env);
        assert_scored(&r2, "");
        r2.assert_clean();
        let rtc_calls: Vec<&str> = r2
            .log
            .lines()
            .filter(|l| l.starts_with("hiprtc") && !l.starts_with("hiprtcVersion"))
            .collect();
        assert!(rtc_calls.is_empty(), "compiled again: {rtc_calls:?}");
        if let Some(s) = r2.rtc_summary() {
            assert_eq!(s["compiles"], 0);
        }
        let loads2: BTreeSet<String> = r2.calls("hipModuleLoadData").map(str::to_string).collect();
        assert_eq!(loads2, loads, "{label}: modules from the cache");
        check_launches(&r2, &sigs);
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir_all(&codes);
    }
}

/// (c) A kernel hiprtc rejects: the C API returns an errno, the compiler's log reaches our log,
/// nothing is cached and nothing leaks.
#[test]
fn hiprtc_compile_failure_reports_the_program_log() {
    let Some(kit) = kit() else { return };
    let cache = fresh_dir("rtc-fail-cache");
    let cache_s = cache.display().to_string();
    let env = rtc_env(
        &cache_s,
        &[
            ("FAKEHIP_ARCH", JIT_ARCH),
            ("FAKEHIPRTC_FAIL", "1"),
            ("VMAF_HIP_LOG_LEVEL", "error"),
        ],
    );
    let r = score(kit, "rtc-fail", 2, &env);
    assert_eq!(r.int("init"), 0, "{}", show(&r.out));
    assert_eq!(r.int("first_error"), EIO, "{}", show(&r.out));
    assert_eq!(r.int("close"), 0, "{}", show(&r.out));
    let err = r.stderr();
    assert!(
        err.contains("fake hiprtc refuses this program (FAKEHIPRTC_FAIL=1)")
            && err.contains("HIPRTC_ERROR_COMPILATION"),
        "program log not reported\n{}",
        show(&r.out)
    );
    assert!(
        r.calls("hiprtcCompileProgram").all(|l| l.ends_with("-> 6")),
        "{}",
        r.log
    );
    assert_eq!(r.calls("hipModuleLoadData").count(), 0, "{}", r.log);
    assert_eq!(
        std::fs::read_dir(&cache).expect("cache dir").count(),
        0,
        "a failed compile was cached"
    );
    r.assert_clean();
    r.assert_rtc_clean();
    let _ = std::fs::remove_dir_all(&cache);
}

/// (d) No hiprtc and no AOT object for the arch: a clean -ENODEV, no crash.
#[test]
fn no_hiprtc_and_no_aot_object_is_enodev() {
    let Some(kit) = kit() else { return };
    let cache = fresh_dir("rtc-none-cache");
    let cache_s = cache.display().to_string();
    // The named library does not exist, and VMAF_HIP_HIPRTC=0 stops the search there: on a host
    // with ROCm it would go on to the installed hiprtc (or the ROCm 5.x runtime that exports it).
    let missing = work_dir().join("no-such-dir/libhiprtc.so.6");
    let missing_s = missing.display().to_string();
    let env = rtc_env(
        &cache_s,
        &[
            ("FAKEHIP_ARCH", JIT_ARCH),
            ("VMAF_HIP_HIPRTC_LIBNAME", &missing_s),
            ("VMAF_HIP_HIPRTC", "0"),
            // "No device" is logged at info level (a host without a GPU is no error).
            ("VMAF_HIP_LOG_LEVEL", "info"),
        ],
    );
    let r = score(kit, "rtc-missing", 2, &env);
    assert_eq!(r.int("init"), 0, "{}", show(&r.out));
    assert_eq!(r.int("first_error"), ENODEV, "{}", show(&r.out));
    assert_eq!(r.int("close"), 0, "{}", show(&r.out));
    assert!(r.log.lines().all(|l| !l.starts_with("hiprtc")), "{}", r.log);
    assert_eq!(r.calls("hipModuleLoadData").count(), 0, "{}", r.log);
    let err = r.stderr();
    assert!(
        err.contains("no usable device code") && err.contains("hiprtc disabled"),
        "{}",
        show(&r.out)
    );
    r.assert_clean();
    let _ = std::fs::remove_dir_all(&cache);
}

/// (e) Two contexts on two states load their modules at once: every compile still runs alone
/// (hiprtc 5.x crashes otherwise), as the fake checks.
#[test]
fn hiprtc_compiles_from_concurrent_contexts_take_turns() {
    let Some(kit) = kit() else { return };
    let env = [
        ("VMAF_HIP_NO_RTC", "0"),
        ("FAKEHIP_ARCH", JIT_ARCH),
        ("FAKEHIPRTC_COMPILE_MS", "60"),
    ];
    let r = driver(kit, "rtc-concurrent", &["score2", "2", "3"], &env);
    assert_scored(&r, "a_");
    assert_scored(&r, "b_");
    r.assert_clean();
    let sum = r.assert_rtc_clean();
    // No cache: each state compiles its own three modules.
    assert_eq!(sum["compiles"], 6, "{}", r.log);
    assert_eq!(sum["max_overlap"], 1, "{}", r.log);
    check_launches(&r, &kernel_signatures());
}

// ---------------------------------------------------------------- AOT for RDNA 3 / RDNA 4

/// Archs `VMAF_TEST_EXPECT_AMD_ARCHS` (comma/space separated) says the build must embed.
fn expected_archs() -> Vec<String> {
    std::env::var("VMAF_TEST_EXPECT_AMD_ARCHS")
        .unwrap_or_default()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// RDNA 3 and RDNA 4 devices get the embedded object (build-aux/forky-hipcc builds them), with
/// no hiprtc call although hiprtc is allowed. Runs for the archs the bundle has; every arch of
/// `VMAF_TEST_EXPECT_AMD_ARCHS` must be there (so CI cannot skip this silently), as a code
/// object v4 or v5 (what ROCm 5.3 and later load).
#[test]
fn rdna3_and_rdna4_devices_load_aot_objects_without_hiprtc() {
    let expected = expected_archs();
    for arch in &expected {
        for k in code::KERNELS {
            let Some(bundle) = k.amd_bundle else {
                panic!(
                    "VMAF_TEST_EXPECT_AMD_ARCHS has {arch}, but {} has no AMD bundle ({})",
                    k.name,
                    code::BUILD_SUMMARY
                );
            };
            let obj = code::select_amd_object(bundle, arch).unwrap_or_else(|| {
                panic!(
                    "VMAF_TEST_EXPECT_AMD_ARCHS has {arch}, not in {}'s bundle ({})",
                    k.name,
                    code::BUILD_SUMMARY
                )
            });
            assert!(
                obj.starts_with(b"\x7fELF") && matches!(obj.get(8), Some(2 | 3)),
                "{}: the {arch} object is not a v4/v5 code object",
                k.name
            );
        }
    }
    let mut archs: Vec<String> = ["gfx1100", "gfx1201"].map(String::from).to_vec();
    archs.extend(expected);
    archs.sort();
    archs.dedup();
    archs.retain(|a| SCORE_MODULES.iter().all(|k| aot_object(k, a).is_some()));
    if archs.is_empty() {
        println!("skipped: the build embeds no RDNA 3/4 objects (see build-aux/forky-hipcc)");
        return;
    }
    let Some(kit) = kit() else { return };
    let sigs = kernel_signatures();
    for arch in &archs {
        let env = [("FAKEHIP_ARCH", arch.as_str()), ("VMAF_HIP_NO_RTC", "0")];
        let r = score(kit, &format!("aot-{arch}"), 2, &env);
        assert_scored(&r, "");
        r.assert_clean();
        assert!(
            r.log.lines().all(|l| !l.starts_with("hiprtc")),
            "{arch}: hiprtc was used\n{}",
            r.log
        );
        assert_eq!(r.rtc_summary(), None, "{arch}: hiprtc was loaded");
        let loads: BTreeSet<&str> = r.calls("hipModuleLoadData").collect();
        let want: BTreeSet<String> = SCORE_MODULES
            .iter()
            .map(|k| expected_module_line_for(k, arch).expect("object"))
            .collect();
        assert_eq!(
            loads,
            want.iter().map(String::as_str).collect(),
            "{arch}\n{}",
            r.log
        );
        check_launches(&r, &sigs);
    }
}
