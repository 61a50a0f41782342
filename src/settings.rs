//! Every environment variable the library and the `vmaf` tool read at run time, parsed once,
//! the first time [`get`] is called, into one [`Settings`] (docs/configuration.md lists them).
//!
//! A value that does not parse is reported with one warning in the log and the knob keeps its
//! default; an empty value counts as unset. Nothing here panics. Changing a variable after the
//! first call has no effect: no code path depends on seeing a later change, and tests give
//! [`Settings::parse`] their own values instead of changing the process environment, which
//! would race with the test threads that read it.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::gpu::{Fault, Vendor};
use crate::log::LogLevel;
use crate::simd::CpuTarget;

/// The parsed environment. Each field names its variable and its default (the value when the
/// variable is unset, empty or invalid).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `VMAF_HIP_LOG_LEVEL` (0-4 or none/error/warning/info/debug): replaces the level every
    /// program sets. Default: none, the program's level stands.
    pub log_level: Option<LogLevel>,
    /// `VMAF_HIP_CPU_TARGET` (scalar/avx2/avx512/neon): lowers the detected SIMD level.
    /// Default: none, the detected level.
    pub cpu_target: Option<CpuTarget>,
    /// `VMAF_HIP_PIPELINE_THREADS` (1-64): pipeline threads of GPU contexts with
    /// `n_threads = 0`. Default: none, chosen from the cores and the device's memory.
    pub pipeline_threads: Option<usize>,
    /// `VMAF_HIP_FRAMES_IN_FLIGHT` (1-256): frames a context with worker threads queues at
    /// once. Default: none, two per worker thread, fewer when every extractor runs on a GPU
    /// and the pictures are large (see `context::in_flight_bound`).
    pub frames_in_flight: Option<usize>,
    /// `VMAF_HIP_WORKER_FRAMES` (1-8): frames one worker thread keeps queued on a GPU at
    /// once, taking the next frame while the device computes the last. Default: none, one.
    pub worker_frames: Option<usize>,
    /// `VMAF_HIP_DEVICE_CONNECTIONS` (0-32): the hardware work queues the library asks the
    /// CUDA driver for (`CUDA_DEVICE_MAX_CONNECTIONS`, set for the process before the library
    /// initialises the driver, unless already set); 0 asks for nothing. Default: 0.
    pub device_connections: usize,
    /// `VMAF_HIP_READ_THREADS` (1-16): the `vmaf` tool's readers per input. Default: none, a
    /// quarter of the cores, 1 to 4.
    pub read_threads: Option<usize>,
    /// `VMAF_HIP_VENDOR` (amd/hip/rocm or nvidia/cuda): the only vendor searched. Default:
    /// none, AMD then NVIDIA.
    pub vendor: Option<Vendor>,
    /// `VMAF_HIP_AMDHIP_LIBNAME`: HIP runtime library tried first. Default: none.
    pub amdhip_library: Option<String>,
    /// `VMAF_HIP_HIPRTC_LIBNAME`: hiprtc library tried first. Default: none.
    pub hiprtc_library: Option<String>,
    /// `VMAF_HIP_CUDA_LIBNAME`: CUDA driver library tried first. Default: none.
    pub cuda_library: Option<String>,
    /// `VMAF_HIP_NVRTC_LIBNAME`: nvrtc library tried first. Default: none.
    pub nvrtc_library: Option<String>,
    /// `ROCM_PATH` then `HIP_PATH`: roots whose `lib`/`lib64` hold the ROCm libraries.
    /// Default: none (`/opt/rocm/lib` is searched anyway).
    pub rocm_roots: Vec<PathBuf>,
    /// `CUDA_PATH` then `CUDA_HOME`: roots whose `lib`/`lib64` hold nvrtc. Default: none
    /// (`/usr/local/cuda/lib64` is searched anyway).
    pub cuda_roots: Vec<PathBuf>,
    /// `VMAF_HIP_HIPRTC` (`0` acts as if hiprtc were not installed). Default: true.
    pub hiprtc: bool,
    /// `VMAF_HIP_NVRTC` (`0` acts as if nvrtc were not installed). Default: true.
    pub nvrtc: bool,
    /// `VMAF_HIP_FORCE_RTC=1`: compile every module at run time. Default: false.
    pub force_rtc: bool,
    /// `VMAF_HIP_NO_RTC=1`: never compile at run time. Default: false.
    pub no_rtc: bool,
    /// `VMAF_HIP_AOT_DIR`: kernel objects that replace the built-in ones. Default: none.
    pub aot_dir: Option<PathBuf>,
    /// The compile cache: `VMAF_HIP_CACHE_DIR`, else `$XDG_CACHE_HOME/vmaf-hip`, else
    /// `$HOME/.cache/vmaf-hip`; none with `VMAF_HIP_CACHE=0` or none of those set.
    pub cache_dir: Option<PathBuf>,
    /// `VMAF_HIP_GRAPHS` (0/1): graph replay off or on. Default: none, on with the CUDA
    /// driver, off on HIP.
    pub graphs: Option<bool>,
    /// `VMAF_HIP_WAIT` (sleep/spin): whether host waits on the GPU sleep. Default: false.
    pub wait_sleep: bool,
    /// `VMAF_HIP_CONTEXT_LINGER_MS`: how long a released primary context stays retained, at
    /// most an hour. Default: 2000 ms.
    pub context_linger: Duration,
    /// `VMAF_HIP_INJECT_FAULT` (oom/launch/lost, optionally `@N`): the fault new GPU states
    /// report, after N calls. Default: none. Read only in builds with the `fault-injection`
    /// feature (the tests' builds), so a release library has no such switch.
    pub inject_fault: Option<(Fault, u64)>,
}

/// [`Settings::device_connections`]'s default: the driver's own count (8). More queues let
/// more worker streams overlap a frame's copies with other frames' kernels (VMAF v1 from
/// page-locked pictures ran 1.3x faster with 32 on an H200), but made each context take 0.4 s
/// longer to create and the GPU CLI suite's 16 concurrent tool runs fail (docs/gpu.md): an
/// opt-in for long runs of one process.
const DEVICE_CONNECTIONS: usize = 0;

/// [`Settings::context_linger`]'s default, in milliseconds.
const LINGER_DEFAULT_MS: u64 = 2000;
/// Past an hour a context is as good as never released.
const LINGER_MAX_MS: u64 = 3_600_000;

/// The settings of this process, read from its environment on the first call. Values that do
/// not parse are logged as warnings then (at `VMAF_HIP_LOG_LEVEL` if set, else at the level of
/// the moment).
pub fn get() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let (s, warnings) = Settings::parse(|name| std::env::var_os(name));
        // The override decides even when `log::set_level` has not stored it yet.
        let max = s.log_level.unwrap_or_else(crate::log::level);
        for w in &warnings {
            crate::log::log_below(max, LogLevel::Warning, w);
        }
        s
    })
}

impl Default for Settings {
    /// Every knob at its default, as with an empty environment.
    fn default() -> Self {
        Self::parse(|_| None).0
    }
}

impl Settings {
    /// Settings from the variables `lookup` returns, and one warning per value ignored.
    pub fn parse(lookup: impl Fn(&str) -> Option<OsString>) -> (Settings, Vec<String>) {
        let mut env = Env {
            lookup,
            warnings: Vec::new(),
        };
        let cache = env.switch("VMAF_HIP_CACHE", true);
        let cache_dir = if cache {
            env.path("VMAF_HIP_CACHE_DIR")
                .or_else(|| env.path("XDG_CACHE_HOME").map(|p| p.join("vmaf-hip")))
                .or_else(|| env.path("HOME").map(|p| p.join(".cache").join("vmaf-hip")))
        } else {
            None
        };
        let linger_ms = env
            .parsed("VMAF_HIP_CONTEXT_LINGER_MS", "milliseconds", |v| {
                v.trim().parse::<u64>().ok()
            })
            .unwrap_or(LINGER_DEFAULT_MS);
        let s = Settings {
            log_level: env.parsed(
                "VMAF_HIP_LOG_LEVEL",
                "0-4 or none, error, warning, info, debug",
                crate::log::parse_level,
            ),
            cpu_target: env.parsed(
                "VMAF_HIP_CPU_TARGET",
                "one of scalar, avx2, avx512, neon",
                CpuTarget::parse,
            ),
            pipeline_threads: env.count("VMAF_HIP_PIPELINE_THREADS", 64),
            frames_in_flight: env.count("VMAF_HIP_FRAMES_IN_FLIGHT", 256),
            worker_frames: env.count("VMAF_HIP_WORKER_FRAMES", 8),
            device_connections: env
                .parsed("VMAF_HIP_DEVICE_CONNECTIONS", "0 to 32", |v| {
                    v.trim().parse().ok().filter(|n| *n <= 32)
                })
                .unwrap_or(DEVICE_CONNECTIONS),
            read_threads: env.count("VMAF_HIP_READ_THREADS", 16),
            vendor: env.parsed("VMAF_HIP_VENDOR", "amd or nvidia", parse_vendor),
            amdhip_library: env.text("VMAF_HIP_AMDHIP_LIBNAME"),
            hiprtc_library: env.text("VMAF_HIP_HIPRTC_LIBNAME"),
            cuda_library: env.text("VMAF_HIP_CUDA_LIBNAME"),
            nvrtc_library: env.text("VMAF_HIP_NVRTC_LIBNAME"),
            rocm_roots: ["ROCM_PATH", "HIP_PATH"]
                .iter()
                .filter_map(|v| env.path(v))
                .collect(),
            cuda_roots: ["CUDA_PATH", "CUDA_HOME"]
                .iter()
                .filter_map(|v| env.path(v))
                .collect(),
            hiprtc: env.switch("VMAF_HIP_HIPRTC", true),
            nvrtc: env.switch("VMAF_HIP_NVRTC", true),
            force_rtc: env.switch("VMAF_HIP_FORCE_RTC", false),
            no_rtc: env.switch("VMAF_HIP_NO_RTC", false),
            aot_dir: env.path("VMAF_HIP_AOT_DIR"),
            cache_dir,
            graphs: env.parsed("VMAF_HIP_GRAPHS", "0 or 1", parse_switch),
            wait_sleep: env
                .parsed("VMAF_HIP_WAIT", "sleep or spin", |v| match v {
                    "sleep" => Some(true),
                    "spin" => Some(false),
                    _ => None,
                })
                .unwrap_or(false),
            context_linger: Duration::from_millis(linger_ms.min(LINGER_MAX_MS)),
            inject_fault: fault_from(&mut env),
        };
        (s, env.warnings)
    }
}

/// `VMAF_HIP_INJECT_FAULT`, in builds made for fault tests.
#[cfg(feature = "fault-injection")]
fn fault_from<F: Fn(&str) -> Option<OsString>>(env: &mut Env<F>) -> Option<(Fault, u64)> {
    env.parsed(
        "VMAF_HIP_INJECT_FAULT",
        "oom, launch or lost, optionally with @N",
        parse_fault,
    )
}

/// Release builds read no fault switch.
#[cfg(not(feature = "fault-injection"))]
fn fault_from<F>(_: &mut Env<F>) -> Option<(Fault, u64)> {
    None
}

/// Reads variables through a lookup, collecting a warning for each value it ignores.
struct Env<F> {
    lookup: F,
    warnings: Vec<String>,
}

impl<F: Fn(&str) -> Option<OsString>> Env<F> {
    /// The raw value; empty counts as unset, as `VAR=` in a shell.
    fn raw(&self, name: &str) -> Option<OsString> {
        (self.lookup)(name).filter(|v| !v.is_empty())
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        self.raw(name).map(PathBuf::from)
    }

    /// The value as text; one that is not UTF-8 is ignored.
    fn text(&mut self, name: &str) -> Option<String> {
        match self.raw(name)?.into_string() {
            Ok(v) => Some(v),
            Err(v) => {
                self.warnings
                    .push(format!("{name}={v:?} ignored: not UTF-8 text"));
                None
            }
        }
    }

    /// `parse`'s reading of the value, or none with a warning that says what was `expected`.
    fn parsed<T>(
        &mut self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let v = self.text(name)?;
        let got = parse(&v);
        if got.is_none() {
            self.warnings
                .push(format!("{name}={v:?} ignored: expected {expected}"));
        }
        got
    }

    /// A whole number from 1 to `max`.
    fn count(&mut self, name: &str, max: usize) -> Option<usize> {
        let expected = format!("1 to {max}");
        self.parsed(name, &expected, |v| {
            v.trim().parse().ok().filter(|n| (1..=max).contains(n))
        })
    }

    /// `0` or `1`.
    fn switch(&mut self, name: &str, default: bool) -> bool {
        self.parsed(name, "0 or 1", parse_switch).unwrap_or(default)
    }
}

fn parse_switch(v: &str) -> Option<bool> {
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

fn parse_vendor(v: &str) -> Option<Vendor> {
    match v.to_ascii_lowercase().as_str() {
        "amd" | "hip" | "rocm" => Some(Vendor::Amd),
        "nvidia" | "cuda" => Some(Vendor::Nvidia),
        _ => None,
    }
}

/// `oom`, `launch` or `lost`, with `@N` for the calls it lets pass first.
#[cfg(feature = "fault-injection")]
fn parse_fault(v: &str) -> Option<(Fault, u64)> {
    let (name, after) = match v.split_once('@') {
        Some((n, a)) => (n, a.parse().ok()?),
        None => (v, 0),
    };
    let fault = match name {
        "oom" => Fault::OutOfMemory,
        "launch" => Fault::LaunchFailure,
        "lost" => Fault::DeviceLost,
        _ => return None,
    };
    Some((fault, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> (Settings, Vec<String>) {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Settings::parse(|name| map.get(name).cloned())
    }

    #[test]
    fn an_empty_environment_gives_the_defaults() {
        let (s, warnings) = parse(&[]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s, Settings::default());
        assert_eq!(s.log_level, None);
        assert_eq!(s.cpu_target, None);
        assert_eq!((s.pipeline_threads, s.read_threads), (None, None));
        assert_eq!((s.frames_in_flight, s.worker_frames), (None, None));
        assert_eq!(s.device_connections, 0);
        assert_eq!(s.vendor, None);
        assert_eq!(s.amdhip_library, None);
        assert!(s.rocm_roots.is_empty() && s.cuda_roots.is_empty());
        assert!(s.hiprtc && s.nvrtc && !s.force_rtc && !s.no_rtc);
        assert_eq!((s.aot_dir.as_ref(), s.cache_dir.as_ref()), (None, None));
        assert_eq!(s.graphs, None);
        assert!(!s.wait_sleep);
        assert_eq!(s.context_linger, Duration::from_millis(2000));
        assert_eq!(s.inject_fault, None);
    }

    #[test]
    fn valid_values_are_taken() {
        let (s, warnings) = parse(&[
            ("VMAF_HIP_LOG_LEVEL", "Debug"),
            ("VMAF_HIP_CPU_TARGET", " scalar "),
            ("VMAF_HIP_PIPELINE_THREADS", " 64 "),
            ("VMAF_HIP_READ_THREADS", "3"),
            ("VMAF_HIP_FRAMES_IN_FLIGHT", "256"),
            ("VMAF_HIP_WORKER_FRAMES", "1"),
            ("VMAF_HIP_DEVICE_CONNECTIONS", "32"),
            ("VMAF_HIP_VENDOR", "CUDA"),
            ("VMAF_HIP_AMDHIP_LIBNAME", "/x/libamdhip64.so"),
            ("VMAF_HIP_HIPRTC_LIBNAME", "h.so"),
            ("VMAF_HIP_CUDA_LIBNAME", "c.so"),
            ("VMAF_HIP_NVRTC_LIBNAME", "n.so"),
            ("HIP_PATH", "/hip"),
            ("ROCM_PATH", "/rocm"),
            ("CUDA_HOME", "/cuda-home"),
            ("VMAF_HIP_HIPRTC", "0"),
            ("VMAF_HIP_NVRTC", "0"),
            ("VMAF_HIP_FORCE_RTC", "1"),
            ("VMAF_HIP_NO_RTC", "1"),
            ("VMAF_HIP_AOT_DIR", "/aot"),
            ("VMAF_HIP_CACHE_DIR", "/cache"),
            ("HOME", "/home/u"),
            ("VMAF_HIP_GRAPHS", "0"),
            ("VMAF_HIP_WAIT", "sleep"),
            ("VMAF_HIP_CONTEXT_LINGER_MS", "0"),
            #[cfg(feature = "fault-injection")]
            ("VMAF_HIP_INJECT_FAULT", "lost@7"),
        ]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.log_level, Some(LogLevel::Debug));
        assert_eq!(s.cpu_target, CpuTarget::parse("scalar"));
        assert_eq!((s.pipeline_threads, s.read_threads), (Some(64), Some(3)));
        assert_eq!((s.frames_in_flight, s.worker_frames), (Some(256), Some(1)));
        assert_eq!(s.device_connections, 32);
        assert_eq!(s.vendor, Some(Vendor::Nvidia));
        assert_eq!(s.amdhip_library.as_deref(), Some("/x/libamdhip64.so"));
        assert_eq!(s.hiprtc_library.as_deref(), Some("h.so"));
        assert_eq!(s.cuda_library.as_deref(), Some("c.so"));
        assert_eq!(s.nvrtc_library.as_deref(), Some("n.so"));
        // ROCM_PATH is searched before HIP_PATH.
        assert_eq!(
            s.rocm_roots,
            [PathBuf::from("/rocm"), PathBuf::from("/hip")]
        );
        assert_eq!(s.cuda_roots, [PathBuf::from("/cuda-home")]);
        assert!(!s.hiprtc && !s.nvrtc && s.force_rtc && s.no_rtc);
        assert_eq!(s.aot_dir, Some(PathBuf::from("/aot")));
        assert_eq!(s.cache_dir, Some(PathBuf::from("/cache")));
        assert_eq!(s.graphs, Some(false));
        assert!(s.wait_sleep);
        assert_eq!(s.context_linger, Duration::ZERO);
        #[cfg(feature = "fault-injection")]
        assert_eq!(s.inject_fault, Some((Fault::DeviceLost, 7)));
    }

    #[test]
    fn invalid_values_keep_the_defaults_with_a_warning_each() {
        let bad = [
            ("VMAF_HIP_LOG_LEVEL", "loud"),
            ("VMAF_HIP_CPU_TARGET", "sse9"),
            ("VMAF_HIP_PIPELINE_THREADS", "65"),
            ("VMAF_HIP_READ_THREADS", "0"),
            ("VMAF_HIP_FRAMES_IN_FLIGHT", "257"),
            ("VMAF_HIP_DEVICE_CONNECTIONS", "33"),
            ("VMAF_HIP_VENDOR", "intel"),
            ("VMAF_HIP_HIPRTC", "no"),
            ("VMAF_HIP_NVRTC", "off"),
            ("VMAF_HIP_FORCE_RTC", "yes"),
            ("VMAF_HIP_NO_RTC", "true"),
            ("VMAF_HIP_CACHE", "false"),
            ("VMAF_HIP_GRAPHS", "on"),
            ("VMAF_HIP_WAIT", "nap"),
            ("VMAF_HIP_CONTEXT_LINGER_MS", "-1"),
            #[cfg(feature = "fault-injection")]
            ("VMAF_HIP_INJECT_FAULT", "oom@x"),
        ];
        let (s, warnings) = parse(&bad);
        assert_eq!(s, Settings::default());
        assert_eq!(warnings.len(), bad.len(), "{warnings:?}");
        for (name, value) in bad {
            let head = format!("{name}={value:?} ignored");
            assert!(warnings.iter().any(|w| w.starts_with(&head)), "{head}");
        }
        // Out of range in the other direction, or not a number at all.
        for v in ["-3", "many", "1.5"] {
            let (s, w) = parse(&[("VMAF_HIP_PIPELINE_THREADS", v)]);
            assert_eq!((s.pipeline_threads, w.len()), (None, 1), "{v}");
        }
        assert_eq!(
            parse(&[("VMAF_HIP_INJECT_FAULT", "melt")]).0.inject_fault,
            None
        );
    }

    /// Without the `fault-injection` feature the switch does not exist: a valid value is
    /// ignored without a warning (it is not a variable of ours).
    #[test]
    #[cfg(not(feature = "fault-injection"))]
    fn release_builds_have_no_fault_switch() {
        let (s, warnings) = parse(&[("VMAF_HIP_INJECT_FAULT", "lost")]);
        assert_eq!(s.inject_fault, None);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn empty_values_count_as_unset() {
        let names = [
            "VMAF_HIP_LOG_LEVEL",
            "VMAF_HIP_PIPELINE_THREADS",
            "VMAF_HIP_CACHE",
        ];
        let vars: Vec<(&str, &str)> = names.iter().map(|n| (*n, "")).collect();
        let (s, warnings) = parse(&vars);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s, Settings::default());
    }

    #[cfg(unix)]
    #[test]
    fn text_that_is_not_utf8_is_ignored() {
        use std::os::unix::ffi::OsStringExt;
        let bytes = || OsString::from_vec(vec![b'4', 0xff]);
        let (s, warnings) = Settings::parse(|name| {
            (name == "VMAF_HIP_READ_THREADS" || name == "VMAF_HIP_CUDA_LIBNAME").then(bytes)
        });
        assert_eq!(s, Settings::default());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        // Paths need not be text.
        let (s, warnings) = Settings::parse(|name| (name == "VMAF_HIP_AOT_DIR").then(bytes));
        assert!(warnings.is_empty() && s.aot_dir.is_some());
    }

    #[test]
    fn the_cache_falls_back_from_its_own_variable_to_xdg_then_home() {
        let dir = |vars: &[(&str, &str)]| parse(vars).0.cache_dir;
        let home = ("HOME", "/h");
        let xdg = ("XDG_CACHE_HOME", "/x");
        assert_eq!(dir(&[home]), Some(PathBuf::from("/h/.cache/vmaf-hip")));
        assert_eq!(dir(&[home, xdg]), Some(PathBuf::from("/x/vmaf-hip")));
        assert_eq!(
            dir(&[home, xdg, ("VMAF_HIP_CACHE_DIR", "/c")]),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(dir(&[home, ("VMAF_HIP_CACHE", "0")]), None);
        assert_eq!(dir(&[home, ("VMAF_HIP_CACHE", "1")]), dir(&[home]));
    }

    #[test]
    fn linger_is_capped_at_an_hour() {
        let (s, _) = parse(&[("VMAF_HIP_CONTEXT_LINGER_MS", "99999999999")]);
        assert_eq!(s.context_linger, Duration::from_secs(3600));
        let (s, _) = parse(&[("VMAF_HIP_CONTEXT_LINGER_MS", " 250 ")]);
        assert_eq!(s.context_linger, Duration::from_millis(250));
    }

    #[test]
    fn vendor_and_fault_spellings() {
        for (v, want) in [
            ("amd", Vendor::Amd),
            ("ROCm", Vendor::Amd),
            ("hip", Vendor::Amd),
        ] {
            assert_eq!(parse_vendor(v), Some(want), "{v}");
        }
        assert_eq!(parse_vendor("Nvidia"), Some(Vendor::Nvidia));
        #[cfg(feature = "fault-injection")]
        {
            assert_eq!(parse_fault("oom"), Some((Fault::OutOfMemory, 0)));
            assert_eq!(parse_fault("launch@3"), Some((Fault::LaunchFailure, 3)));
            assert_eq!(parse_fault("lost@"), None);
            assert_eq!(parse_fault("OOM"), None);
        }
    }

    #[test]
    fn the_process_settings_are_read_once() {
        assert!(std::ptr::eq(get(), get()));
    }
}
