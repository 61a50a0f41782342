//! Typed, bounds-checked launchers for the kernels in kernels/*.hip. The raw launch is unsafe
//! (the device trusts its arguments); each function here checks every access the kernel will
//! make against the buffers it is given, so callers outside src/gpu stay in safe Rust.

use super::safe::{DeviceBuffer, DeviceCopy, DevicePtr, LaunchConfig, Stream};
use super::GpuState;
use crate::error::{Error, Result};

/// Sample types the kernels read (8-bit and 9..16-bit pictures).
pub trait Sample: DeviceCopy {
    /// Entry point of the PSNR kernel for this sample size.
    const PSNR_SSE_KERNEL: &'static str;
}

impl Sample for u8 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u8";
}

impl Sample for u16 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u16";
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

/// Queues `out[out_index] += sum over the plane of (ref - dis)^2`.
pub fn psnr_sse<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    out: &DeviceBuffer<u64>,
    out_index: usize,
) -> Result<()> {
    if (reference.w, reference.h) != (distorted.w, distorted.h) {
        return Err(Error::inval(
            "reference and distorted planes differ in size",
        ));
    }
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    if out_index >= out.len() {
        return Err(Error::inval("PSNR output index out of range"));
    }
    let o = out.ptr().offset(out_index);
    let kernel = state.kernel("psnr", T::PSNR_SSE_KERNEL)?;
    let w = u32::try_from(reference.w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(reference.h).map_err(|_| Error::inval("plane too tall"))?;
    let (rs, ds) = (reference.stride as u32, distorted.stride as u32);
    let cfg = LaunchConfig {
        grid: (w.div_ceil(ROW_BLOCK), h.min(MAX_ROW_BLOCKS), 1),
        block: (ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument list matches `vmaf_psnr_sse_{u8,u16}(const T *, const T *, u32 w,
    // u32 h, u32 ref_stride, u32 dis_stride, u64 *out)` in kernels/psnr.hip; both planes were
    // checked to hold every row the kernel reads (rows < h, columns < w) and `o` is inside `out`.
    // The buffers outlive the launch: freeing device memory waits for the device.
    unsafe { kernel.launch(stream, cfg, &[&r, &d, &w, &h, &rs, &ds, &o]) }
}
