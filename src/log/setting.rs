//! The level a program sets, and the environment's override of it (through
//! [`crate::settings`]).

use std::sync::atomic::Ordering;

use super::{LogLevel, LEVEL};

/// Sets the process-wide level (as `vmaf_init` does), unless the environment variable
/// `VMAF_HIP_LOG_LEVEL` (0-4 or none/error/warning/info/debug) says otherwise: a way to see
/// debug lines from a program that fixes the level, such as FFmpeg's filter.
pub fn set_level(level: LogLevel) {
    // Stored first, so that warnings about the environment, logged when this call is the first
    // to read it, obey the program's level (as they did when each variable was read at its use).
    LEVEL.store(level as u32, Ordering::Relaxed);
    if let Some(over) = crate::settings::get().log_level {
        LEVEL.store(over as u32, Ordering::Relaxed);
    }
}
