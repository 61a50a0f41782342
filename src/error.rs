//! One error type for the whole crate; the C boundary maps it to a negative errno.

#![forbid(unsafe_code)]

use thiserror::Error;

/// Every failure the library can report. `errno()` gives the negative value the C API returns.
#[derive(Debug, Error)]
pub enum Error {
    /// Bad argument, bad input data or a call made in the wrong state.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Allocation failure (host or device).
    #[error("out of memory: {0}")]
    NoMem(String),
    /// No usable GPU device / runtime.
    #[error("no device: {0}")]
    NoDevice(String),
    /// Feature not compiled in.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// I/O failure (files, readers, writers).
    #[error("i/o error: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The object is in use by another thread.
    #[error("busy: {0}")]
    Busy(String),
    /// Memory or a context of another device than the one asked for.
    #[error("wrong device: {0}")]
    CrossDevice(String),
    /// A GPU runtime (or run-time compiler) call failed with a status the other variants do not
    /// cover; `status` is the runtime's own code (hipError_t, CUresult, nvrtcResult...), kept for
    /// callers and logs.
    #[error("gpu error: {call}: {message} (status {status})")]
    Gpu {
        call: String,
        status: i32,
        message: String,
    },
}

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn inval(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    /// A failed GPU runtime call.
    pub fn gpu(call: impl Into<String>, status: i32, message: impl Into<String>) -> Self {
        Error::Gpu {
            call: call.into(),
            status,
            message: message.into(),
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// The same failure with `what` in front of its message: the kind, and so the errno and
    /// the exception a binding raises, stay.
    pub fn prefixed(self, what: impl std::fmt::Display) -> Self {
        match self {
            Error::Invalid(m) => Error::Invalid(format!("{what}: {m}")),
            Error::NoMem(m) => Error::NoMem(format!("{what}: {m}")),
            Error::NoDevice(m) => Error::NoDevice(format!("{what}: {m}")),
            Error::NotSupported(m) => Error::NotSupported(format!("{what}: {m}")),
            Error::Busy(m) => Error::Busy(format!("{what}: {m}")),
            Error::CrossDevice(m) => Error::CrossDevice(format!("{what}: {m}")),
            Error::Io { context, source } => Error::Io {
                context: format!("{what}: {context}"),
                source,
            },
            Error::Gpu {
                call,
                status,
                message,
            } => Error::Gpu {
                call: format!("{what}: {call}"),
                status,
                message,
            },
        }
    }

    /// The negative errno libvmaf would return for this failure.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Invalid(_) => -libc::EINVAL,
            Error::NoMem(_) => -libc::ENOMEM,
            Error::NoDevice(_) => -libc::ENODEV,
            Error::NotSupported(_) => -libc::ENOSYS,
            Error::Io { source, .. } => -source.raw_os_error().unwrap_or(libc::EIO),
            Error::Busy(_) => -libc::EBUSY,
            Error::CrossDevice(_) => -libc::EXDEV,
            Error::Gpu { .. } => -libc::EIO,
        }
    }
}

/// Crate-wide result alias.
pub type Result<T> = std::result::Result<T, Error>;
