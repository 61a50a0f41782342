//! Launchers for kernels/motion.hip.

use super::{dims_u32, launch, sig, DevicePlane, Sample, Signature};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, DevicePtr, GpuState, LaunchConfig, Stream};

/// `vmaf_motion_rows_{u8,u16}(prev, cur, w, h, stride, shift, row_sums)`.
type RowsArgs<T> = (
    DevicePtr<T>,
    DevicePtr<T>,
    i32,
    i32,
    i32,
    i32,
    DevicePtr<u64>,
);
/// `vmaf_motion_reduce(row_sums, h, out)`.
type ReduceArgs = (DevicePtr<u64>, i32, DevicePtr<u64>);

/// The kernels of kernels/motion.hip with the argument tuples their launchers pass.
pub(super) fn signatures() -> Vec<Signature> {
    vec![
        sig::<RowsArgs<u8>>(u8::MOTION_ROWS_KERNEL),
        sig::<RowsArgs<u16>>(u16::MOTION_ROWS_KERNEL),
        sig::<ReduceArgs>(REDUCE_KERNEL),
    ]
}

const REDUCE_KERNEL: &str = "vmaf_motion_reduce";

/// Motion tile (kernels/motion.hip `MOTION_TW` x `MOTION_TH`, blocks of 32 x 8 threads) and
/// the reduction kernel's block (`MOTION_BLOCK`).
const MOTION_TILE: (u32, u32) = (32, 32);
const MOTION_BLOCK: u32 = 256;

/// Queues the per-row sums of the motion SAD of the blurred difference `prev - cur` into
/// `row_sums[0..h]` (which must be zeroed); [`motion_reduce`] totals them.
pub fn motion_rows<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    prev: DevicePlane<'_, T>,
    cur: DevicePlane<'_, T>,
    bpc: u32,
    row_sums: &DeviceBuffer<u64>,
) -> Result<()> {
    if (prev.w, prev.h, prev.stride) != (cur.w, cur.h, cur.stride) {
        return Err(Error::inval("motion planes differ in geometry"));
    }
    if prev.w < 3 || prev.h < 3 || row_sums.len() < prev.h {
        return Err(Error::inval("bad motion kernel parameters"));
    }
    let p = prev.checked_ptr()?;
    let c = cur.checked_ptr()?;
    let (w, h) = dims_u32(prev.w, prev.h)?;
    let (w, h) = (w as i32, h as i32);
    let stride = prev.stride as i32;
    let shift: i32 = if bpc == 8 { 8 } else { bpc as i32 };
    let rows = row_sums.ptr();
    let k_rows = state.kernel("motion", T::MOTION_ROWS_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(MOTION_TILE.0),
            (h as u32).div_ceil(MOTION_TILE.1),
            1,
        ),
        block: (MOTION_TILE.0, 8, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_motion_rows_{u8,u16}(const T *prev, const T *cur, int w, int h, int stride, int
    // shift, u64 *row_sums)`; reads are at mirrored coordinates inside the checked planes, writes
    // at row_sums[row] for row < h <= row_sums.len().
    unsafe { launch::<RowsArgs<T>>(&k_rows, stream, cfg, &(p, c, w, h, stride, shift, rows)) }
}

/// Queues the total of `row_sums[0..h]` into `out[0]`.
pub fn motion_reduce(
    state: &GpuState,
    stream: &Stream,
    row_sums: &DeviceBuffer<u64>,
    h: usize,
    out: &DeviceBuffer<u64>,
) -> Result<()> {
    if h == 0 || row_sums.len() < h || out.is_empty() {
        return Err(Error::inval("bad motion reduction parameters"));
    }
    let h = i32::try_from(h).map_err(|_| Error::inval("motion: too many rows"))?;
    let (rows, o) = (row_sums.ptr(), out.ptr());
    let k_reduce = state.kernel("motion", REDUCE_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (1, 1, 1),
        block: (MOTION_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_motion_reduce(const u64 *row_sums, int h, u64 *out)`, which reads
    // row_sums[0..h] and writes out[0]; both checked above.
    unsafe { launch::<ReduceArgs>(&k_reduce, stream, cfg, &(rows, h, o)) }
}
