//! vmaf-hip: a drop-in replacement for Netflix's libvmaf, bit-exact with its scalar C path, with
//! feature extraction on AMD and NVIDIA GPUs through HIP.
//!
//! Data path: [`picture`] → [`feature`] extractors → [`collector`] → [`model`] → [`pooling`] /
//! [`output`]. [`context`] drives it; [`ffi`] exposes the libvmaf C API; [`gpu`] is the
//! vendor-neutral GPU runtime; [`io`] holds the video readers, and [`driver`] scores two video
//! files through a context for the `vmaf` command and the Python bindings; [`settings`] reads
//! the environment variables.
//!
//! `unsafe` lives only in [`ffi`], [`gpu`] and the per-feature SIMD files (`feature/<name>/x86.rs`,
//! `aarch64.rs`, dispatched by [`simd`]): every other module forbids it, and each unsafe
//! block there carries a `// SAFETY:` comment (enforced by clippy).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod collector;
pub mod context;
pub mod driver;
pub mod error;
pub mod feature;
pub mod ffi;
pub mod gpu;
pub mod io;
pub mod limits;
pub mod log;
pub mod model;
pub mod output;
pub mod picture;
pub mod pooling;
pub mod settings;
pub mod simd;
#[cfg(test)]
pub mod testutil;

pub use error::{Error, Result};

/// Version string written into XML/JSON outputs and returned by `vmaf_version()`.
pub const VMAF_VERSION: &str = "3.2.0";
