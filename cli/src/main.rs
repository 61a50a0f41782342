//! `vmaf`: command-line scorer compatible with libvmaf's `vmaf` tool (same flags, same flow, same
//! output files), plus a score summary on stdout, a progress bar and a `--backend` switch.
//!
//! `args.rs` parses the command line into the library's [`driver`] options, `ctc.rs` expands
//! the common-test-condition presets; this file sets up the context, runs the driver and
//! prints: messages, the progress bar, the summary, the exit status.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use vmaf_hip::context::{Config, Context};
use vmaf_hip::driver::{self, Pooled};
use vmaf_hip::gpu::DeviceChoice;
use vmaf_hip::log::LogLevel;
use vmaf_hip::model::{LoadError, LoadedModel, ModelSpec};
use vmaf_hip::Error;

mod args;
mod ctc;

use args::{Backend, Cli};

/// Prints a line on stderr. A failing stderr has nowhere to be reported; unlike `eprintln!`,
/// this does not panic over it.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The process's stdout as a plain file (a duplicate of descriptor 1), or why there is none.
/// Writes through it report every error: Rust's `std::io::stdout()` silently drops writes to
/// a closed descriptor. Whatever descriptor 1 is (`/dev/null` opened read-write by a
/// supervisor, or by the Rust runtime in place of a closed one) is used as it is, as libvmaf's
/// tool does.
fn stdout_file() -> std::io::Result<File> {
    std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
}

/// Writes `text` to stdout, failing on a closed stdout, a full device or a broken pipe.
fn write_stdout(stdout: &std::io::Result<File>, text: &str, what: &str) -> Result<(), CliError> {
    let res = match stdout {
        Ok(f) => {
            let mut w: &File = f;
            w.write_all(text.as_bytes()).and_then(|()| w.flush())
        }
        Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
    };
    res.map_err(|e| CliError(format!("cannot write {what} to stdout: {e}")))
}

/// A failure reported as one line on stderr.
struct CliError(String);

impl From<String> for CliError {
    fn from(s: String) -> Self {
        CliError(s)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError(describe(&e))
    }
}

impl From<driver::Error> for CliError {
    fn from(e: driver::Error) -> Self {
        CliError(match &e {
            driver::Error::Library(e) => describe(e),
            driver::Error::In { context, source } => format!("{context}: {}", describe(source)),
        })
    }
}

/// A library error without its category prefix where the message says enough.
fn describe(e: &Error) -> String {
    match e {
        Error::Invalid(m) => m.clone(),
        Error::Io { context, source } => format!("{context}: {source}"),
        other => other.to_string(),
    }
}

fn with_context(what: impl std::fmt::Display) -> impl FnOnce(Error) -> CliError {
    move |e| CliError(format!("{what}: {}", describe(&e)))
}

/// C's `%f`.
fn fmt_f(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else {
        format!("{v:.6}")
    }
}

fn load_model(spec: &ModelSpec) -> Result<LoadedModel, CliError> {
    spec.load().map_err(|e| {
        let label = spec.label();
        CliError(match &e {
            LoadError::Load(e) => format!("problem loading model {label}: {}", describe(e)),
            LoadError::Overload { extractor, error } => format!(
                "problem overloading {extractor} options of model {label}: {}",
                describe(error)
            ),
        })
    })
}

/// The progress bar on a terminal's stderr (hidden elsewhere, or with -q), and the driver's
/// warnings printed around it.
struct Bar {
    show: bool,
    pb: ProgressBar,
}

impl driver::Progress for Bar {
    fn start(&mut self, frames: Option<u64>) {
        self.pb = progress_bar(self.show, frames);
    }

    fn advance(&mut self) {
        self.pb.inc(1);
    }

    fn warning(&mut self, message: &str) {
        self.pb.suspend(|| say!("warning: {message}"));
    }

    fn finish(&mut self, frames: usize) {
        // The bar is redrawn in place without a line end: replace it with a final line, so
        // nothing printed afterwards (scores, the shell prompt) lands on it.
        if self.show {
            let secs = self.pb.elapsed().as_secs_f64();
            self.pb.finish_and_clear();
            say!("{frames} frames, {:.2} fps", frames as f64 / secs.max(1e-9));
        }
    }
}

fn progress_bar(show: bool, len: Option<u64>) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let (pb, template) = match len {
        Some(n) => (
            ProgressBar::new(n),
            "{spinner} [{elapsed_precise}] [{wide_bar}] {pos}/{len} frames, {fps}, ETA {eta}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} [{elapsed_precise}] {pos} frames, {fps}",
        ),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        let style = style.progress_chars("=> ").with_key(
            "fps",
            |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.2} fps", s.per_sec());
            },
        );
        pb.set_style(style);
    }
    pb
}

/// The summary's line for a pooled score.
fn summary_line(p: &Pooled) -> String {
    match p {
        Pooled::Model { label, score } => format!("{label}: {}", fmt_f(*score)),
        Pooled::Collection { label, score: s } => format!(
            "{label}: {}, ci.p95: [{}, {}], stddev: {}",
            fmt_f(s.bagging_score),
            fmt_f(s.ci_p95_lo),
            fmt_f(s.ci_p95_hi),
            fmt_f(s.stddev)
        ),
    }
}

fn run(cli: Cli, stdout: &std::io::Result<File>) -> Result<(), CliError> {
    let t0 = Instant::now();
    let ms = move || t0.elapsed().as_secs_f64() * 1e3;
    // The context sets it again; this lets the GPU set-up log at debug level too.
    vmaf_hip::log::set_level(LogLevel::Info);
    // Scores with no stdout to go to would be lost: say so before doing the work.
    if let (None, false, Err(e)) = (&cli.output, cli.no_prediction, stdout) {
        return Err(CliError(format!(
            "cannot write the scores to stdout ({e}); redirect it or use -o FILE"
        )));
    }
    let opts = cli.driver_options()?;
    let models = cli.models()?;
    let gpu = match cli.backend {
        Backend::Cpu => Vec::new(),
        Backend::Hip => vmaf_hip::gpu::open_states(cli.hip_device.unwrap_or(DeviceChoice::First))
            .map_err(with_context("hip backend not available"))?,
    };
    vmaf_hip::log_debug!("{:.0} ms: GPU states open", ms());

    let inputs = driver::Inputs::open(opts)?;
    for w in inputs.warnings() {
        say!("warning: {w}");
    }

    let mut ctx = Context::new(Config {
        log_level: LogLevel::Info,
        // On a GPU the default leaves the readers their cores.
        n_threads: driver::fed_context_threads(cli.threads, cli.gpumask, &gpu),
        n_subsample: cli.subsample,
        cpumask: cli.cpumask,
        gpumask: cli.gpumask,
    })?;
    for state in gpu {
        ctx.import_gpu_state(state)?;
    }
    let mut loaded = Vec::with_capacity(models.len());
    for arg in &models {
        let l = load_model(arg)?;
        l.register(&mut ctx).map_err(with_context(format!(
            "problem loading the feature extractors of model {}",
            l.label
        )))?;
        loaded.push(l);
    }
    for f in &cli.feature {
        ctx.use_feature(&f.name, &f.opts)
            .map_err(with_context(format!("problem loading feature {}", f.name)))?;
    }

    let mut bar = Bar {
        show: !cli.quiet && std::io::stderr().is_terminal(),
        pb: ProgressBar::hidden(),
    };
    let frames = inputs.score(&mut ctx, &mut bar)?;

    let summary: Vec<String> = if cli.no_prediction {
        Vec::new()
    } else {
        let pooled = driver::pool(&ctx, &loaded, frames)?;
        pooled.iter().map(summary_line).collect()
    };
    if let Some(out) = &cli.output {
        ctx.write_output(out, cli.output_format())?;
        if bar.show {
            for line in &summary {
                say!("{line}");
            }
        }
    } else if !summary.is_empty() {
        let text: String = summary.iter().map(|l| format!("{l}\n")).collect();
        write_stdout(stdout, &text, "the scores")?;
    }
    vmaf_hip::log_debug!("{:.0} ms: scores written", ms());
    drop(ctx);
    vmaf_hip::log_debug!("{:.0} ms: context closed", ms());
    Ok(())
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        say!("error: internal error: {}", msg.replace('\n', " "));
    }));
    // Taken once, before any file is opened.
    let stdout = stdout_file();
    let cli = match Cli::from_env() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let text = e.render().to_string();
                return match write_stdout(&stdout, &text, "the help") {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(CliError(msg)) => {
                        say!("error: {msg}");
                        ExitCode::FAILURE
                    }
                };
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            // clap lists the accepted values on a later line: keep them on the one we print.
            let values = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("[possible values: "))
                .and_then(|v| v.strip_suffix(']'))
                .map(|v| format!(" (expected one of: {v})"))
                .unwrap_or_default();
            say!("{first}{values} (see --help)");
            return ExitCode::FAILURE;
        }
    };
    if cli.version {
        // Upstream prints the version on stderr; stdout (empty upstream) says what runs here.
        let cpu = vmaf_hip::simd::CpuLevel::for_cpumask(cli.cpumask);
        let best = vmaf_hip::simd::CpuLevel::detect();
        let printed = writeln!(std::io::stderr(), "{}", vmaf_hip::VMAF_VERSION).and_then(|_| {
            writeln!(
                std::io::stdout(),
                "vmaf-hip {}: CPU code {cpu} (best on this CPU: {best})",
                env!("CARGO_PKG_VERSION")
            )
        });
        return match printed {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let gpu = cli.backend == Backend::Hip;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli, &stdout))) {
        // Everything is written; the GPU driver's exit handlers would add about 0.1 s.
        Ok(Ok(())) if gpu => vmaf_hip::gpu::exit_now(0),
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(CliError(msg))) => {
            say!("error: {msg}");
            ExitCode::FAILURE
        }
        // The panic hook has printed the message.
        Err(_) => ExitCode::FAILURE,
    }
}
