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
    /// VIF statistics of one scale.
    const VIF_STATS_KERNEL: &'static str;
    /// VIF low-pass and decimation.
    const VIF_DOWN_KERNEL: &'static str;
    /// Motion per-row SAD of the blurred difference.
    const MOTION_ROWS_KERNEL: &'static str;
}

impl Sample for u8 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u8";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u8";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u8";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u8";
}

impl Sample for u16 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u16";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u16";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u16";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u16";
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

fn dims_u32(w: usize, h: usize) -> Result<(u32, u32)> {
    let w = u32::try_from(w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(h).map_err(|_| Error::inval("plane too tall"))?;
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(Error::inval("plane too large"));
    }
    Ok((w, h))
}

/// VIF statistics tile size (kernels/vif.hip `VIF_TILE_W` x `VIF_TILE_H`).
const VIF_TILE: (u32, u32) = (32, 8);

/// Queues the VIF statistics of one scale: `acc[4*scale..4*scale+4] += (num_log, den_log,
/// num_non_log, den_non_log)` (two's complement). Both planes share the stride.
#[allow(clippy::too_many_arguments)]
pub fn vif_stats<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    scale: usize,
    bpc: u32,
    log2_table: &DeviceBuffer<u16>,
    egl: f64,
    acc: &DeviceBuffer<u64>,
) -> Result<()> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
    {
        return Err(Error::inval("VIF planes differ in geometry"));
    }
    if scale > 3 || !(8..=16).contains(&bpc) || log2_table.len() < 1 << 16 || acc.len() < 16 {
        return Err(Error::inval("bad VIF kernel parameters"));
    }
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    let (w, h) = dims_u32(reference.w, reference.h)?;
    let stride = reference.stride as i32;
    let (w, h, sc, bpc) = (w as i32, h as i32, scale as i32, bpc as i32);
    let table = log2_table.ptr();
    let out = acc.ptr().offset(4 * scale);
    let kernel = state.kernel("vif", T::VIF_STATS_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (
            (w as u32).div_ceil(VIF_TILE.0),
            (h as u32).div_ceil(VIF_TILE.1),
            1,
        ),
        block: (VIF_TILE.0, VIF_TILE.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match `vmaf_vif_stats_{u8,u16}(const T *ref, const T *dis, int w, int
    // h, int stride, int scale, int bpc, const u16 *log2_table, double egl, u64 *acc)` in
    // kernels/vif.hip. The kernel reads rows/columns reflected into 0..h / 0..w of planes
    // checked above, table entries below 2^16 (checked length) and writes acc[0..4] from
    // `out`, inside `acc` (len >= 16, scale <= 3).
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[&r, &d, &w, &h, &stride, &sc, &bpc, &table, &egl, &out],
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
    // SAFETY: arguments match `vmaf_vif_down_{u8,u16}(const T *ref, const T *dis, int w, int h,
    // int stride, int scale, int bpc, u16 *out_ref, u16 *out_dis, int out_stride)`; inputs are
    // read at reflected coordinates inside the checked w x h planes and outputs written only
    // below (w/2, h/2), inside the checked output planes.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[&r, &d, &w, &h, &stride, &sc, &bpc, &or, &od, &out_stride],
        )
    }
}

/// Motion row block width (kernels/motion.hip `MOTION_BLOCK`).
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
        grid: ((w as u32).div_ceil(MOTION_BLOCK), h as u32, 1),
        block: (MOTION_BLOCK, 1, 1),
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
