//! The vendor-neutral GPU runtime (HIP on AMD, the CUDA driver on NVIDIA), loaded at run time.
