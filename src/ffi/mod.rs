//! The libvmaf C API (`include/libvmaf/*.h`). Only translation between C and Rust lives here.
//!
//! One Rust file per installed header: [`picture`] → `picture.h`, [`feature`] → `feature.h`,
//! [`model`] → `model.h`, [`libvmaf`] → `libvmaf.h`; cbindgen generates each header from its file
//! (`cbindgen/*.toml`, checked by `tests/ffi.rs`).
//!
//! Conventions:
//! * Every exported body runs inside `ffi_boundary!`: a panic is caught and becomes an error
//!   return (`-EINVAL`, NULL or nothing), never an unwind into C.
//! * Failures return a negative errno and log one `libvmaf ERROR <function>: <reason>` line.
//! * Handles are boxed Rust values: `VmafContext*` is `Box<crate::context::Context>`,
//!   `VmafModel*` `Box<Model>`, `VmafModelCollection*` `Box<ModelCollection>`,
//!   `VmafFeatureDictionary*` `Box<Dict>`, `VmafRef*` `Box<VmafRef>` (one shared picture).
//! * C enums arrive as plain `unsigned` values (`Raw*` aliases) so out-of-range values can be
//!   rejected instead of being undefined behaviour.

use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;

use crate::error::{Error, Result};

pub mod cuda;
pub mod feature;
#[cfg(test)]
mod gpu_tests;
pub mod hip;
pub mod libvmaf;
pub mod model;
pub mod picture;
mod pool;

/// Runs the body of an exported function: catches panics and converts the body's value to the
/// C return value (see [`FfiReturn`]); `$name` names the function in log lines.
macro_rules! ffi_boundary {
    ($name:literal, $body:block) => {{
        let r = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body));
        $crate::ffi::FfiReturn::finish(r, $name)
    }};
}
pub(crate) use ffi_boundary;

/// What an exported body returns and how it becomes the C return value.
pub(crate) trait FfiReturn: Sized {
    type C;
    fn into_c(self, name: &str) -> Self::C;
    fn panicked() -> Self::C;

    fn finish(r: std::thread::Result<Self>, name: &str) -> Self::C {
        match r {
            Ok(v) => v.into_c(name),
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                crate::log_error!("{name}: internal error: {msg}");
                Self::panicked()
            }
        }
    }
}

/// Logs the failure of `name` and gives its negative errno. A missing GPU is an expected
/// outcome of probing (`vmaf_hip_state_init` on a machine without one): info, not error.
fn report(name: &str, e: &Error) -> c_int {
    if matches!(e, Error::NoDevice(_)) {
        crate::log_info!("{name}: {e}");
    } else {
        crate::log_error!("{name}: {e}");
    }
    e.errno()
}

/// `int` functions: 0 or a negative errno.
impl FfiReturn for Result<()> {
    type C = c_int;
    fn into_c(self, name: &str) -> c_int {
        self.map_or_else(|e| report(name, &e), |()| 0)
    }
    fn panicked() -> c_int {
        -libc::EINVAL
    }
}

/// `int` functions with a non-negative result (a count): the value or a negative errno.
impl FfiReturn for Result<c_int> {
    type C = c_int;
    fn into_c(self, name: &str) -> c_int {
        self.unwrap_or_else(|e| report(name, &e))
    }
    fn panicked() -> c_int {
        -libc::EINVAL
    }
}

/// `void` functions.
impl FfiReturn for () {
    type C = ();
    fn into_c(self, _: &str) {}
    fn panicked() {}
}

/// Functions returning a static string.
impl FfiReturn for *const c_char {
    type C = *const c_char;
    fn into_c(self, _: &str) -> *const c_char {
        self
    }
    fn panicked() -> *const c_char {
        std::ptr::null()
    }
}

/// Fails with `-EINVAL` naming `what` when `p` is NULL.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(Error::inval(format!("{what} is NULL")))
    } else {
        Ok(())
    }
}

/// Borrows a C string as UTF-8.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the returned borrow.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    non_null(p, what)?;
    // SAFETY: non-NULL, and the caller guarantees NUL termination and lifetime.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Error::inval(format!("{what} is not valid UTF-8")))
}

/// A C string as a filesystem path (any bytes allowed).
///
/// # Safety
/// As for [`c_str`].
pub(crate) unsafe fn c_path(p: *const c_char, what: &str) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    non_null(p, what)?;
    // SAFETY: non-NULL, and the caller guarantees NUL termination and lifetime.
    let s = unsafe { CStr::from_ptr(p) };
    Ok(std::ffi::OsStr::from_bytes(s.to_bytes()).into())
}
