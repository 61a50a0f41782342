//! Process-global logging in libvmaf's format: `libvmaf <LEVEL> <message>` on stderr.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};

// Setting the level reads the settings, which log their warnings here: it lives in a file of
// its own, so the two do not import each other.
mod setting;
pub use setting::set_level;

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

/// `VMAF_HIP_LOG_LEVEL`'s values: 0-4 or a level's name, in any case.
pub(crate) fn parse_level(v: &str) -> Option<LogLevel> {
    Some(match v.trim().to_ascii_lowercase().as_str() {
        "0" | "none" => LogLevel::None,
        "1" | "error" => LogLevel::Error,
        "2" | "warning" => LogLevel::Warning,
        "3" | "info" => LogLevel::Info,
        "4" | "debug" => LogLevel::Debug,
        _ => return None,
    })
}

/// The current level.
pub fn level() -> LogLevel {
    LogLevel::from_raw(LEVEL.load(Ordering::Relaxed))
}

/// Writes one line if `lvl` is enabled.
pub fn log(lvl: LogLevel, msg: &str) {
    log_below(level(), lvl, msg);
}

/// Writes one line if `lvl` is enabled at level `max` (for messages written before the level
/// they belong to is stored).
pub(crate) fn log_below(max: LogLevel, lvl: LogLevel, msg: &str) {
    if lvl != LogLevel::None && lvl <= max {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_names_parse() {
        assert_eq!(parse_level("debug"), Some(LogLevel::Debug));
        assert_eq!(parse_level(" 2 "), Some(LogLevel::Warning));
        assert_eq!(parse_level("NONE"), Some(LogLevel::None));
        assert_eq!(parse_level("loud"), None);
    }
}
