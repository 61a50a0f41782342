//! Launchers for kernels/motion.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_motion_rows_{u8,u16}(prev, cur, w, h, stride, shift, row_sums)`.
type RowsArgs<'a, T> = (Span<'a, T>, Span<'a, T>, i32, i32, i32, i32, Span<'a, u64>);
/// `vmaf_motion_reduce(row_sums, h, out)`.
type ReduceArgs<'a> = (Span<'a, u64>, i32, Span<'a, u64>);

const ROWS_U8: &str = "vmaf_motion_rows_u8";
const ROWS_U16: &str = "vmaf_motion_rows_u16";
const REDUCE: &str = "vmaf_motion_reduce";

/// The kernels of kernels/motion.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<RowsArgs<u8>>(ROWS_U8),
        sig::<RowsArgs<u16>>(ROWS_U16),
        sig::<ReduceArgs>(REDUCE),
    ]
}

/// Motion tile (kernels/motion.hip `MOTION_TW` x `MOTION_TH`, blocks of 32 x 8 threads) and
/// the reduction kernel's block (`MOTION_BLOCK`).
const MOTION_TILE: (u32, u32) = (32, 32);
const MOTION_BLOCK: u32 = 256;

/// The per-row sums of the motion SAD of the blurred difference `prev - cur` into
/// `row_sums[0..h]` (which must be zeroed); [`motion_reduce`] totals them.
pub fn motion_rows<'a, T: Sample>(
    state: &GpuState,
    prev: DevicePlane<'a, T>,
    cur: DevicePlane<'a, T>,
    bpc: u32,
    row_sums: &'a DeviceBuffer<u64>,
) -> Result<Launch<'a>> {
    if (prev.w, prev.h, prev.stride) != (cur.w, cur.h, cur.stride) {
        return Err(Error::inval("motion planes differ in geometry"));
    }
    if prev.w < 3 || prev.h < 3 || row_sums.len() < prev.h {
        return Err(Error::inval("bad motion kernel parameters"));
    }
    let p = prev.span()?;
    let c = cur.span()?;
    let (w, h) = dims_u32(prev.w, prev.h)?;
    let (w, h) = (w as i32, h as i32);
    let stride = prev.stride as i32;
    let shift: i32 = if bpc == 8 { 8 } else { bpc as i32 };
    let rows = Span::of(row_sums, 0, prev.h)?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(MOTION_TILE.0),
            (h as u32).div_ceil(MOTION_TILE.1),
            1,
        ),
        block: (MOTION_TILE.0, 8, 1),
        shared_mem_bytes: 0,
    };
    // Reads at mirrored coordinates inside both planes; writes row_sums[row] for row < h.
    Launch::new::<RowsArgs<T>>(
        state,
        "motion",
        T::pick(ROWS_U8, ROWS_U16),
        cfg,
        (p, c, w, h, stride, shift, rows),
    )
}

/// The total of `row_sums[0..h]` into `out[0]`.
pub fn motion_reduce<'a>(
    state: &GpuState,
    row_sums: &'a DeviceBuffer<u64>,
    h: usize,
    out: &'a DeviceBuffer<u64>,
) -> Result<Launch<'a>> {
    if h == 0 || row_sums.len() < h || out.is_empty() {
        return Err(Error::inval("bad motion reduction parameters"));
    }
    let rows = Span::of(row_sums, 0, h)?;
    let h = i32::try_from(h).map_err(|_| Error::inval("motion: too many rows"))?;
    let o = Span::of(out, 0, 1)?;
    let cfg = LaunchConfig {
        grid: (1, 1, 1),
        block: (MOTION_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // Reads row_sums[0..h], writes out[0].
    Launch::new::<ReduceArgs>(state, "motion", REDUCE, cfg, (rows, h, o))
}
