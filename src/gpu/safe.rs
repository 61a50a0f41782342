//! The former home of the RAII runtime types, now split by concern: [`super::device`],
//! [`super::stream`], [`super::memory`] and [`super::module`]. Kept as a re-export path.

pub use super::device::{enumerate, Device, DeviceInfo, Fault};
pub use super::memory::{DeviceBuffer, DeviceCopy, DevicePtr, HostRegistration, PinnedHostBuffer};
pub use super::module::{Kernel, KernelArg, LaunchConfig, Module};
pub use super::stream::{Event, Stream};
