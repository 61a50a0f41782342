//! Process-global logging in libvmaf's format: `libvmaf <LEVEL> <message>` on stderr.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};

/// libvmaf's `enum VmafLogLevel`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    None = 0,
    Error = 1,
    Warning = 2,
    Info = 3,
    Debug = 4,
}

impl LogLevel {
    /// From the C value; out-of-range values clamp to Debug.
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => LogLevel::None,
            1 => LogLevel::Error,
            2 => LogLevel::Warning,
            3 => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }

    fn label(self) -> &'static str {
        match self {
            LogLevel::None => "",
            LogLevel::Error => "ERROR",
            LogLevel::Warning => "WARNING",
            LogLevel::Info => "INFO",
            LogLevel::Debug => "DEBUG",
        }
    }
}

static LEVEL: AtomicU32 = AtomicU32::new(LogLevel::Info as u32);

/// Sets the process-wide level (as `vmaf_init` does).
pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u32, Ordering::Relaxed);
}

/// The current level.
pub fn level() -> LogLevel {
    LogLevel::from_raw(LEVEL.load(Ordering::Relaxed))
}

/// Writes one line if `lvl` is enabled.
pub fn log(lvl: LogLevel, msg: &str) {
    if lvl != LogLevel::None && lvl <= level() {
        eprintln!("libvmaf {} {}", lvl.label(), msg);
    }
}

/// `log(Error, ...)` with format arguments.
#[macro_export]
macro_rules! log_error {
    ($($t:tt)*) => { $crate::log::log($crate::log::LogLevel::Error, &format!($($t)*)) };
}

/// `log(Warning, ...)` with format arguments.
#[macro_export]
macro_rules! log_warn {
    ($($t:tt)*) => { $crate::log::log($crate::log::LogLevel::Warning, &format!($($t)*)) };
}

/// `log(Info, ...)` with format arguments.
#[macro_export]
macro_rules! log_info {
    ($($t:tt)*) => { $crate::log::log($crate::log::LogLevel::Info, &format!($($t)*)) };
}

/// `log(Debug, ...)` with format arguments.
#[macro_export]
macro_rules! log_debug {
    ($($t:tt)*) => { $crate::log::log($crate::log::LogLevel::Debug, &format!($($t)*)) };
}
