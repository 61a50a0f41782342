//! Launchers for kernels/psnr.hip.

use super::{launch, sig, DevicePlane, Sample, Signature, MAX_ROW_BLOCKS, ROW_BLOCK};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, DevicePtr, GpuState, LaunchConfig, Stream};

/// `vmaf_psnr_sse_{u8,u16}(ref, dis, w, h, ref_stride, dis_stride, out)`.
type SseArgs<T> = (
    DevicePtr<T>,
    DevicePtr<T>,
    u32,
    u32,
    u32,
    u32,
    DevicePtr<u64>,
);

/// The kernels of kernels/psnr.hip with the argument tuples their launchers pass.
pub(super) fn signatures() -> Vec<Signature> {
    vec![
        sig::<SseArgs<u8>>(u8::PSNR_SSE_KERNEL),
        sig::<SseArgs<u16>>(u16::PSNR_SSE_KERNEL),
    ]
}

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
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_psnr_sse_{u8,u16}(const T *, const T *, u32 w, u32 h, u32 ref_stride, u32
    // dis_stride, u64 *out)` in kernels/psnr.hip; both planes were checked to hold every row the
    // kernel reads (rows < h, columns < w) and `o` is inside `out`. The buffers outlive the launch:
    // freeing device memory waits for the device.
    unsafe { launch::<SseArgs<T>>(&kernel, stream, cfg, &(r, d, w, h, rs, ds, o)) }
}
