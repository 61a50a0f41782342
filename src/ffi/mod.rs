//! The libvmaf C API. Only translation between C and Rust lives here.
pub mod hip;
