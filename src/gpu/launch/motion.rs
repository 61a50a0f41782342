//! Launchers for kernels/motion.hip.

use super::{dims_u32, DevicePlane, Sample};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig, Stream};

/// Motion tile (kernels/motion.hip `MOTION_TW` x `MOTION_TH`, blocks of 32 x 8 threads) and
/// the reduction kernel's block (`MOTION_BLOCK`).
const MOTION_TILE: (u32, u32) = (32, 32);
const MOTION_BLOCK: u32 = 256;

/// Queues the motion SAD of the blurred difference `prev - cur`: per-row sums go to
/// `row_sums[0..h]` (which must be zeroed), then `out[0]` receives the total.
pub fn motion_sad<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    prev: DevicePlane<'_, T>,
    cur: DevicePlane<'_, T>,
    bpc: u32,
    row_sums: &DeviceBuffer<u64>,
    out: &DeviceBuffer<u64>,
) -> Result<()> {
    if (prev.w, prev.h, prev.stride) != (cur.w, cur.h, cur.stride) {
        return Err(Error::inval("motion planes differ in geometry"));
    }
    if prev.w < 3 || prev.h < 3 || row_sums.len() < prev.h || out.is_empty() {
        return Err(Error::inval("bad motion kernel parameters"));
    }
    let p = prev.checked_ptr()?;
    let c = cur.checked_ptr()?;
    let (w, h) = dims_u32(prev.w, prev.h)?;
    let (w, h) = (w as i32, h as i32);
    let stride = prev.stride as i32;
    let shift: i32 = if bpc == 8 { 8 } else { bpc as i32 };
    let rows = row_sums.ptr();
    let o = out.ptr();
    let k_rows = state.kernel("motion", T::MOTION_ROWS_KERNEL)?;
    let k_reduce = state.kernel("motion", "vmaf_motion_reduce")?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(MOTION_TILE.0),
            (h as u32).div_ceil(MOTION_TILE.1),
            1,
        ),
        block: (MOTION_TILE.0, 8, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match `vmaf_motion_rows_{u8,u16}(const T *prev, const T *cur, int w,
    // int h, int stride, int shift, u64 *row_sums)`; reads are at mirrored coordinates inside
    // the checked planes, writes at row_sums[row] for row < h <= row_sums.len().
    unsafe { k_rows.launch(stream, cfg, &[&p, &c, &w, &h, &stride, &shift, &rows])? };
    let cfg = LaunchConfig {
        grid: (1, 1, 1),
        block: (MOTION_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `vmaf_motion_reduce(const u64 *row_sums, int h, u64 *out)` reads row_sums[0..h]
    // and writes out[0]; both checked above.
    unsafe { k_reduce.launch(stream, cfg, &[&rows, &h, &o]) }
}
