//! The vendor-neutral GPU runtime (HIP on AMD, the CUDA driver on NVIDIA), loaded at run time.

/// One device and its compute stream, shared by the contexts it is imported into.
#[derive(Debug)]
pub struct GpuState {}
