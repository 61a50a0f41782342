//! Typed, bounds-checked launchers for the kernels in kernels/*.hip, one module per source file.
//! The raw launch is unsafe (the device trusts its arguments); each launcher checks every access
//! the kernel will make against the buffers it is given, so callers outside src/gpu stay in
//! safe Rust.

mod adm;
mod cambi;
mod float_ssim;
mod motion;
mod psnr;
mod vif;

pub use adm::{adm_cm, adm_dwt0, adm_dwt123, AdmBuffers, AdmScale, ADM_LUT_LEN};
pub use cambi::{
    cambi_cvalues, cambi_decimate, cambi_mask, cambi_mode, cambi_preprocess, cambi_stats,
    CambiCValues, CAMBI_MAX_DIFFS, CAMBI_MAX_PAD, CAMBI_STATS_LEN,
};
pub use float_ssim::{
    ssim_decimate, ssim_hconv, ssim_hconv_plane, ssim_rows, ssim_to_float, DeviceImage, SsimSample,
};
pub use motion::motion_sad;
pub use psnr::psnr_sse;
pub use vif::{vif_down, vif_stats};

use super::memory::{DeviceBuffer, DeviceCopy, DevicePtr};
use crate::error::{Error, Result};

/// Sample types the kernels read (8-bit and 9..16-bit pictures).
pub trait Sample: DeviceCopy {
    /// Entry point of the PSNR kernel for this sample size.
    const PSNR_SSE_KERNEL: &'static str;
    /// VIF statistics of one scale.
    const VIF_STATS_KERNEL: &'static str;
    /// VIF low-pass and decimation.
    const VIF_DOWN_KERNEL: &'static str;
    /// Motion per-row SAD of the blurred difference.
    const MOTION_ROWS_KERNEL: &'static str;
    /// ADM scale-0 wavelet level (plus decoupling/CSF maps).
    const ADM_DWT0_KERNEL: &'static str;
}

impl Sample for u8 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u8";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u8";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u8";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u8";
    const ADM_DWT0_KERNEL: &'static str = "vmaf_adm_dwt0_u8";
}

impl Sample for u16 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u16";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u16";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u16";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u16";
    const ADM_DWT0_KERNEL: &'static str = "vmaf_adm_dwt0_u16";
}

/// A `w`x`h` plane stored at element `offset` of a device buffer with rows `stride` elements
/// apart.
#[derive(Debug, Clone, Copy)]
pub struct DevicePlane<'a, T: DeviceCopy> {
    pub buf: &'a DeviceBuffer<T>,
    pub offset: usize,
    pub w: usize,
    pub h: usize,
    pub stride: usize,
}

impl<T: DeviceCopy> DevicePlane<'_, T> {
    /// The plane's first element, after checking that every row lies inside the buffer and
    /// the geometry fits the kernels' 32-bit parameters.
    fn checked_ptr(&self) -> Result<DevicePtr<T>> {
        let too_big = || Error::inval("plane geometry exceeds its GPU buffer");
        if self.w == 0 || self.h == 0 || self.stride < self.w {
            return Err(Error::inval(format!(
                "bad plane geometry {}x{} stride {}",
                self.w, self.h, self.stride
            )));
        }
        let end = (self.h - 1)
            .checked_mul(self.stride)
            .and_then(|v| v.checked_add(self.w))
            .and_then(|v| v.checked_add(self.offset))
            .ok_or_else(too_big)?;
        if end > self.buf.len() || u32::try_from(self.stride).is_err() {
            return Err(too_big());
        }
        Ok(self.buf.ptr().offset(self.offset))
    }
}

impl<T> DevicePtr<T> {
    /// The address `n` elements further (callers check the bounds).
    pub(crate) fn offset(self, n: usize) -> DevicePtr<T> {
        let bytes = (n as u64).wrapping_mul(std::mem::size_of::<T>() as u64);
        DevicePtr::from_addr(self.addr().wrapping_add(bytes))
    }
}

/// Threads per block for the row kernels: a multiple of every warp size (32 or 64).
const ROW_BLOCK: u32 = 256;
/// Row-block count cap: enough blocks to fill a large GPU, few enough atomics per plane.
const MAX_ROW_BLOCKS: u32 = 512;

fn dims_u32(w: usize, h: usize) -> Result<(u32, u32)> {
    let w = u32::try_from(w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(h).map_err(|_| Error::inval("plane too tall"))?;
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(Error::inval("plane too large"));
    }
    Ok((w, h))
}
