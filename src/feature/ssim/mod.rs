//! SSIM and MS-SSIM on float samples (`float_ssim`, `float_ms_ssim`): the shared float steps
//! in [`tools`] (their AVX2 and NEON kernels in `x86.rs` / `aarch64.rs`), each extractor in its
//! own file, the GPU dispatch of both in [`gpu`] (kernels/float_ssim.hip).

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub mod float_ms_ssim;
pub mod float_ssim;
pub mod gpu;
#[cfg(test)]
mod hipcpu_tests;
pub(crate) mod launch;
pub mod tools;
#[cfg(target_arch = "x86_64")]
mod x86;
