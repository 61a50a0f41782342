//! Launchers for kernels/vif.hip.

use super::{dims_u32, launch, sig, DevicePlane, Sample, Signature};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, DevicePtr, GpuState, LaunchConfig, Stream};

/// `vmaf_vif_stats_{u8,u16}(ref, dis, w, h, stride, scale, bpc, log2_steps, egl, acc,
/// down_ref, down_dis, down_stride)`.
type StatsArgs<T> = (
    DevicePtr<T>,
    DevicePtr<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    DevicePtr<u64>,
    f64,
    DevicePtr<u64>,
    DevicePtr<u16>,
    DevicePtr<u16>,
    i32,
);
/// `vmaf_vif_down_{u8,u16}(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride)`.
type DownArgs<T> = (
    DevicePtr<T>,
    DevicePtr<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    DevicePtr<u16>,
    DevicePtr<u16>,
    i32,
);

/// The kernels of kernels/vif.hip with the argument tuples their launchers pass.
pub(super) fn signatures() -> Vec<Signature> {
    vec![
        sig::<StatsArgs<u8>>(u8::VIF_STATS_KERNEL),
        sig::<StatsArgs<u16>>(u16::VIF_STATS_KERNEL),
        sig::<DownArgs<u8>>(u8::VIF_DOWN_KERNEL),
        sig::<DownArgs<u16>>(u16::VIF_DOWN_KERNEL),
    ]
}

/// Words of the packed log2 table the statistics kernels take (kernels/vif.hip
/// `VIF_LOG2_WORDS`; built by `feature::vif::gpu::log2_steps`).
pub const VIF_LOG2_WORDS: usize = 1024;

/// VIF statistics tile (kernels/vif.hip `VIF_TW` x `VIF_TH`) and block (`VIF_TW` x
/// `VIF_BLOCK_H`: four output rows per thread).
const VIF_TILE: (u32, u32) = (32, 32);
const VIF_BLOCK: (u32, u32) = (32, 8);

/// Queues the VIF statistics of one scale: `acc[4*scale..4*scale+4] += (num_log, den_log,
/// num_non_log, den_non_log)` (two's complement). Both planes share the stride. At scale 0,
/// `down` (reference, distorted) also receives the decimated scale-1 pictures, as
/// [`vif_down`] would write them.
#[allow(clippy::too_many_arguments)]
pub fn vif_stats<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    scale: usize,
    bpc: u32,
    log2_steps: &DeviceBuffer<u64>,
    egl: f64,
    acc: &DeviceBuffer<u64>,
    down: Option<(DevicePlane<'_, u16>, DevicePlane<'_, u16>)>,
) -> Result<()> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
    {
        return Err(Error::inval("VIF planes differ in geometry"));
    }
    if scale > 3 || !(8..=16).contains(&bpc) || log2_steps.len() < VIF_LOG2_WORDS || acc.len() < 16
    {
        return Err(Error::inval("bad VIF kernel parameters"));
    }
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    let (down_r, down_d, down_stride) = match down {
        None => (DevicePtr::from_addr(0), DevicePtr::from_addr(0), 0i32),
        Some((dr, dd)) => {
            if scale != 0
                || (dr.w, dr.h, dr.stride) != (dd.w, dd.h, dd.stride)
                || dr.w != reference.w / 2
                || dr.h != reference.h / 2
            {
                return Err(Error::inval(
                    "VIF fused decimation planes differ in geometry",
                ));
            }
            (dr.checked_ptr()?, dd.checked_ptr()?, dr.stride as i32)
        }
    };
    let (w, h) = dims_u32(reference.w, reference.h)?;
    let stride = reference.stride as i32;
    let (w, h, sc, bpc) = (w as i32, h as i32, scale as i32, bpc as i32);
    let table = log2_steps.ptr();
    let out = acc.ptr().offset(4 * scale);
    let kernel = state.kernel("vif", T::VIF_STATS_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(VIF_TILE.0),
            (h as u32).div_ceil(VIF_TILE.1),
            1,
        ),
        block: (VIF_BLOCK.0, VIF_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_vif_stats_{u8,u16}(const T *ref, const T *dis, int w, int h, int stride, int
    // scale, int bpc, const u64 *log2_steps, double egl, u64 *acc, u16 *down_ref, u16 *down_dis,
    // int down_stride)` in kernels/vif.hip. The kernel reads rows/columns reflected into 0..h /
    // 0..w of planes checked above, words of log2_steps below 1024 (checked length; indices
    // 2^15..2^16 over 32 less 1024), writes acc[0..4]
    // from `out`, inside `acc` (len >= 16, scale <= 3), and, when the down pointers are not NULL
    // (scale 0 only), outputs below (w/2, h/2) of the checked decimation planes.
    unsafe {
        launch::<StatsArgs<T>>(
            &kernel,
            stream,
            cfg,
            &(
                r,
                d,
                w,
                h,
                stride,
                sc,
                bpc,
                table,
                egl,
                out,
                down_r,
                down_d,
                down_stride,
            ),
        )
    }
}

/// Queues the VIF low-pass + decimation leaving `scale` (0..=2): writes the `(w/2)x(h/2)`
/// 16-bit planes `out_ref`/`out_dis` (rows `out_stride` apart).
#[allow(clippy::too_many_arguments)]
pub fn vif_down<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    scale: usize,
    bpc: u32,
    out_ref: DevicePlane<'_, u16>,
    out_dis: DevicePlane<'_, u16>,
) -> Result<()> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
        || (out_ref.w, out_ref.h, out_ref.stride) != (out_dis.w, out_dis.h, out_dis.stride)
        || out_ref.w != reference.w / 2
        || out_ref.h != reference.h / 2
    {
        return Err(Error::inval("VIF decimation planes differ in geometry"));
    }
    if scale > 2 || !(8..=16).contains(&bpc) {
        return Err(Error::inval("bad VIF decimation parameters"));
    }
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    let or = out_ref.checked_ptr()?;
    let od = out_dis.checked_ptr()?;
    let (w, h) = dims_u32(reference.w, reference.h)?;
    let (w, h) = (w as i32, h as i32);
    let stride = reference.stride as i32;
    let out_stride = out_ref.stride as i32;
    let (sc, bpc) = (scale as i32, bpc as i32);
    let kernel = state.kernel("vif", T::VIF_DOWN_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (
            ((w / 2) as u32).div_ceil(32),
            ((h / 2) as u32).div_ceil(8),
            1,
        ),
        block: (32, 8, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_vif_down_{u8,u16}(const T *ref, const T *dis, int w, int h, int stride, int
    // scale, int bpc, u16 *out_ref, u16 *out_dis, int out_stride)`; inputs are read at reflected
    // coordinates inside the checked w x h planes and outputs written only below (w/2, h/2), inside
    // the checked output planes.
    unsafe {
        launch::<DownArgs<T>>(
            &kernel,
            stream,
            cfg,
            &(r, d, w, h, stride, sc, bpc, or, od, out_stride),
        )
    }
}
