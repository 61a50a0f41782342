//! Launchers for kernels/vif.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_vif_stats_{u8,u16}(ref, dis, w, h, stride, scale, bpc, log2_steps, egl, acc,
/// down_ref, down_dis, down_stride)`.
type StatsArgs<'a, T> = (
    Span<'a, T>,
    Span<'a, T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    Span<'a, u64>,
    f64,
    Span<'a, u64>,
    Span<'a, u16>,
    Span<'a, u16>,
    i32,
);
/// `vmaf_vif_down_{u8,u16}(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride)`.
type DownArgs<'a, T> = (
    Span<'a, T>,
    Span<'a, T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    Span<'a, u16>,
    Span<'a, u16>,
    i32,
);

const STATS_U8: &str = "vmaf_vif_stats_u8";
const STATS_U16: &str = "vmaf_vif_stats_u16";
const DOWN_U8: &str = "vmaf_vif_down_u8";
const DOWN_U16: &str = "vmaf_vif_down_u16";

/// The kernels of kernels/vif.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<StatsArgs<u8>>(STATS_U8),
        sig::<StatsArgs<u16>>(STATS_U16),
        sig::<DownArgs<u8>>(DOWN_U8),
        sig::<DownArgs<u16>>(DOWN_U16),
    ]
}

/// Words of the packed log2 table the statistics kernels take (kernels/vif.hip
/// `VIF_LOG2_WORDS`; built by `feature::vif::gpu::log2_steps`).
pub const VIF_LOG2_WORDS: usize = 1024;

/// VIF statistics tile (kernels/vif.hip `VIF_TW` x `VIF_TH`) and block (`VIF_TW` x
/// `VIF_BLOCK_H`: four output rows per thread).
const VIF_TILE: (u32, u32) = (32, 32);
const VIF_BLOCK: (u32, u32) = (32, 8);

/// The VIF statistics of one scale: `acc[4*scale..4*scale+4] += (num_log, den_log,
/// num_non_log, den_non_log)` (two's complement). Both planes share the stride. At scale 0,
/// `down` (reference, distorted) also receives the decimated scale-1 pictures, as
/// [`vif_down`] would write them.
#[allow(clippy::too_many_arguments)]
pub fn vif_stats<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    scale: usize,
    bpc: u32,
    log2_steps: &'a DeviceBuffer<u64>,
    egl: f64,
    acc: &'a DeviceBuffer<u64>,
    down: Option<(DevicePlane<'a, u16>, DevicePlane<'a, u16>)>,
) -> Result<Launch<'a>> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
    {
        return Err(Error::inval("VIF planes differ in geometry"));
    }
    if scale > 3 || !(8..=16).contains(&bpc) || log2_steps.len() < VIF_LOG2_WORDS || acc.len() < 16
    {
        return Err(Error::inval("bad VIF kernel parameters"));
    }
    let r = reference.span()?;
    let d = distorted.span()?;
    let (down_r, down_d, down_stride) = match down {
        None => (Span::null(), Span::null(), 0i32),
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
            (dr.span()?, dd.span()?, dr.stride as i32)
        }
    };
    let (w, h) = dims_u32(reference.w, reference.h)?;
    let stride = reference.stride as i32;
    let (w, h, sc, bpc) = (w as i32, h as i32, scale as i32, bpc as i32);
    // The kernel reads words of the table below 1024 (indices 2^15..2^16 over 32, less 1024)
    // and adds to the scale's four sums.
    let table = Span::of(log2_steps, 0, VIF_LOG2_WORDS)?;
    let out = Span::of(acc, 4 * scale, 4)?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(VIF_TILE.0),
            (h as u32).div_ceil(VIF_TILE.1),
            1,
        ),
        block: (VIF_BLOCK.0, VIF_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    // Reads rows/columns reflected into 0..h / 0..w of both planes; with the down spans set
    // (scale 0 only), writes outputs below (w/2, h/2) of the decimation planes.
    Launch::new::<StatsArgs<T>>(
        state,
        "vif",
        T::pick(STATS_U8, STATS_U16),
        cfg,
        (
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

/// The VIF low-pass + decimation leaving `scale` (0..=2): writes the `(w/2)x(h/2)` 16-bit
/// planes `out_ref`/`out_dis` (rows `out_stride` apart).
#[allow(clippy::too_many_arguments)]
pub fn vif_down<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    scale: usize,
    bpc: u32,
    out_ref: DevicePlane<'a, u16>,
    out_dis: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
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
    let r = reference.span()?;
    let d = distorted.span()?;
    let or = out_ref.span()?;
    let od = out_dis.span()?;
    let (w, h) = dims_u32(reference.w, reference.h)?;
    let (w, h) = (w as i32, h as i32);
    let stride = reference.stride as i32;
    let out_stride = out_ref.stride as i32;
    let (sc, bpc) = (scale as i32, bpc as i32);
    let cfg = LaunchConfig {
        grid: (
            ((w / 2) as u32).div_ceil(32),
            ((h / 2) as u32).div_ceil(8),
            1,
        ),
        block: (32, 8, 1),
        shared_mem_bytes: 0,
    };
    // Inputs are read at reflected coordinates inside the w x h planes and outputs written only
    // below (w/2, h/2).
    Launch::new::<DownArgs<T>>(
        state,
        "vif",
        T::pick(DOWN_U8, DOWN_U16),
        cfg,
        (r, d, w, h, stride, sc, bpc, or, od, out_stride),
    )
}
