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
    log2_table: &DeviceBuffer<u16>,
    egl: f64,
    acc: &DeviceBuffer<u64>,
    down: Option<(DevicePlane<'_, u16>, DevicePlane<'_, u16>)>,
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
    let (down_r, down_d, down_stride) = match down {
        None => (0u64, 0u64, 0i32),
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
            (
                dr.checked_ptr()?.addr(),
                dd.checked_ptr()?.addr(),
                dr.stride as i32,
            )
        }
    };
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
        block: (VIF_BLOCK.0, VIF_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match `vmaf_vif_stats_{u8,u16}(const T *ref, const T *dis, int w, int
    // h, int stride, int scale, int bpc, const u16 *log2_table, double egl, u64 *acc, u16
    // *down_ref, u16 *down_dis, int down_stride)` in kernels/vif.hip. The kernel reads
    // rows/columns reflected into 0..h / 0..w of planes checked above, table entries below
    // 2^16 (checked length), writes acc[0..4] from `out`, inside `acc` (len >= 16, scale <=
    // 3), and, when the down pointers are not NULL (scale 0 only), outputs below (w/2, h/2)
    // of the checked decimation planes.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[
                &r,
                &d,
                &w,
                &h,
                &stride,
                &sc,
                &bpc,
                &table,
                &egl,
                &out,
                &down_r,
                &down_d,
                &down_stride,
            ],
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

/// Entries of ADM's reciprocal table the kernels may index (`0..=32768`).
pub const ADM_LUT_LEN: usize = 32769;

/// ADM wavelet kernel block (kernels/adm.hip reads the geometry from blockDim).
const ADM_DWT_BLOCK: (u32, u32) = (32, 8);
/// ADM masking kernel block (`ADM_CM_BLOCK`; a multiple of every warp size).
const ADM_CM_BLOCK: u32 = 256;

/// What the ADM kernels of one scale need besides their buffers.
#[derive(Debug, Clone, Copy)]
pub struct AdmScale {
    /// 0..=3.
    pub scale: usize,
    /// Half-open decoupling/CSF window `[left, right, top, bottom]` of the band; the maps are
    /// written only there (an empty window writes none).
    pub csf: [usize; 4],
    /// Half-open score window, same layout.
    pub score: [usize; 4],
    pub den_row: u32,
    pub den_cube: u32,
    pub cm_cube: [u32; 3],
    pub cm_row: u32,
    /// Integer CSF weights of bands h, v, d (the 16-bit ones at scale 0).
    pub irf: [u32; 3],
    pub egl: f64,
    /// Whether the AIM maps and sums are computed.
    pub aim: bool,
}

/// Device buffers shared by the ADM kernels. Band planes are `plane` elements apart.
#[derive(Debug, Clone, Copy)]
pub struct AdmBuffers<'a> {
    /// Reference h, v, d then distorted h, v, d bands: 6 planes.
    pub bands: &'a DeviceBuffer<i32>,
    /// Threshold maps (flt and centre sums of the DLM pass, then of the AIM pass): 4 planes.
    pub maps: &'a DeviceBuffer<i32>,
    pub plane: usize,
    /// The reciprocal table (at least [`ADM_LUT_LEN`] entries).
    pub lut: &'a DeviceBuffer<i32>,
}

/// Checks what both ADM wavelet kernels access for a `w`x`h` input and returns the band size
/// as kernel ints.
fn adm_check_dwt(
    w: usize,
    h: usize,
    approx_ref: &DeviceBuffer<i32>,
    approx_dis: &DeviceBuffer<i32>,
    b: &AdmBuffers<'_>,
    p: &AdmScale,
) -> Result<(i32, i32)> {
    let (w, h) = dims_u32(w, h)?;
    if w < 3 || h < 3 || p.scale > 3 {
        return Err(Error::inval("bad ADM wavelet parameters"));
    }
    let (bw, bh) = (w.div_ceil(2) as usize, h.div_ceil(2) as usize);
    adm_check_buffers(bw, bh, b, p)?;
    if approx_ref.len() < bw * bh || approx_dis.len() < bw * bh {
        return Err(Error::inval("ADM approximation buffer too small"));
    }
    let (cl, cr, ct, cb) = (p.csf[0], p.csf[1], p.csf[2], p.csf[3]);
    if cl > cr || cr > bw || ct > cb || cb > bh {
        return Err(Error::inval("ADM CSF window outside the band"));
    }
    Ok((bw as i32, bh as i32))
}

/// Checks the shared buffers and the score window of a `bw`x`bh` band.
fn adm_check_buffers(bw: usize, bh: usize, b: &AdmBuffers<'_>, p: &AdmScale) -> Result<()> {
    let fits = |n: usize, planes: usize| {
        b.plane
            .checked_mul(planes)
            .is_some_and(|need| need <= n && i32::try_from(b.plane).is_ok())
    };
    if b.plane < bw * bh || !fits(b.bands.len(), 6) || !fits(b.maps.len(), 4) {
        return Err(Error::inval("ADM band buffers too small"));
    }
    if b.lut.len() < ADM_LUT_LEN {
        return Err(Error::inval("ADM reciprocal table too short"));
    }
    let (l, r, t, bo) = (p.score[0], p.score[1], p.score[2], p.score[3]);
    if l > r || r > bw || t > bo || bo > bh {
        return Err(Error::inval("ADM score window outside the band"));
    }
    let shifts = [p.den_row, p.den_cube, p.cm_row]
        .into_iter()
        .chain(p.cm_cube);
    if shifts.into_iter().any(|s| s >= 63) {
        return Err(Error::inval("ADM shift out of range"));
    }
    Ok(())
}

fn adm_flags(p: &AdmScale) -> i32 {
    let maps = p.csf[0] < p.csf[1] && p.csf[2] < p.csf[3];
    i32::from(maps) | (i32::from(maps && p.aim) << 1)
}

fn adm_dwt_cfg(bw: i32, bh: i32) -> LaunchConfig {
    LaunchConfig {
        grid: (
            (bw as u32).div_ceil(ADM_DWT_BLOCK.0),
            (bh as u32).div_ceil(ADM_DWT_BLOCK.1),
            1,
        ),
        block: (ADM_DWT_BLOCK.0, ADM_DWT_BLOCK.1, 1),
        shared_mem_bytes: 0,
    }
}

/// Queues ADM's scale-0 wavelet level of both pictures (`bpc`-bit samples): writes the
/// approximation bands (dense, `ceil(w/2)` wide) and the h, v, d bands, and the masking maps
/// inside `p.csf`.
#[allow(clippy::too_many_arguments)]
pub fn adm_dwt0<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    bpc: u32,
    approx_ref: &DeviceBuffer<i32>,
    approx_dis: &DeviceBuffer<i32>,
    b: &AdmBuffers<'_>,
    p: &AdmScale,
) -> Result<()> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
    {
        return Err(Error::inval("ADM planes differ in geometry"));
    }
    if p.scale != 0 || !(8..=16).contains(&bpc) {
        return Err(Error::inval("bad ADM scale-0 parameters"));
    }
    let (bw, bh) = adm_check_dwt(reference.w, reference.h, approx_ref, approx_dis, b, p)?;
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    let (w, h) = (reference.w as i32, reference.h as i32);
    let stride = reference.stride as i32;
    let bpc = bpc as i32;
    let (ar, ad, bands, maps, lut) = (
        approx_ref.ptr(),
        approx_dis.ptr(),
        b.bands.ptr(),
        b.maps.ptr(),
        b.lut.ptr(),
    );
    let plane = b.plane as i32;
    let [cl, cr, ct, cb] = p.csf.map(|v| v as i32);
    let flags = adm_flags(p);
    let [ih, iv, id] = p.irf;
    let kernel = state.kernel("adm", T::ADM_DWT0_KERNEL)?;
    // SAFETY: arguments match `vmaf_adm_dwt0_{u8,u16}(const T *ref, const T *dis, int w, int h,
    // int stride, int bpc, i32 *approx_ref, i32 *approx_dis, i32 *bands, i32 *maps, int plane,
    // const i32 *lut, int cl, int cr, int ct, int cb, int flags, u32 irf_h, u32 irf_v,
    // u32 irf_d, double egl)` in kernels/adm.hip. Inputs are read at rows/columns mapped into
    // 0..h / 0..w (w, h >= 3) of the checked planes; writes go to pixel i * bw + j < bw * bh
    // of the approximation buffers (len >= bw * bh), of 6 band planes and, inside the CSF
    // window (checked inside the band), of 4 map planes, each `plane >= bw * bh` long; the
    // table is read below ADM_LUT_LEN.
    unsafe {
        kernel.launch(
            stream,
            adm_dwt_cfg(bw, bh),
            &[
                &r, &d, &w, &h, &stride, &bpc, &ar, &ad, &bands, &maps, &plane, &lut, &cl, &cr,
                &ct, &cb, &flags, &ih, &iv, &id, &p.egl,
            ],
        )
    }
}

/// Queues one ADM wavelet level of scales 1-3 on the previous approximation bands `prev_ref`
/// / `prev_dis` (which must not be the output buffers); outputs as [`adm_dwt0`].
#[allow(clippy::too_many_arguments)]
pub fn adm_dwt123(
    state: &GpuState,
    stream: &Stream,
    prev_ref: DevicePlane<'_, i32>,
    prev_dis: DevicePlane<'_, i32>,
    approx_ref: &DeviceBuffer<i32>,
    approx_dis: &DeviceBuffer<i32>,
    b: &AdmBuffers<'_>,
    p: &AdmScale,
) -> Result<()> {
    if (prev_ref.w, prev_ref.h, prev_ref.stride) != (prev_dis.w, prev_dis.h, prev_dis.stride) {
        return Err(Error::inval("ADM planes differ in geometry"));
    }
    if !(1..=3).contains(&p.scale) {
        return Err(Error::inval("bad ADM scale"));
    }
    let outs = [approx_ref.ptr().addr(), approx_dis.ptr().addr()];
    if outs[0] == outs[1]
        || outs.contains(&prev_ref.buf.ptr().addr())
        || outs.contains(&prev_dis.buf.ptr().addr())
    {
        return Err(Error::inval("ADM wavelet input and output buffers overlap"));
    }
    let (bw, bh) = adm_check_dwt(prev_ref.w, prev_ref.h, approx_ref, approx_dis, b, p)?;
    let r = prev_ref.checked_ptr()?;
    let d = prev_dis.checked_ptr()?;
    let (w, h) = (prev_ref.w as i32, prev_ref.h as i32);
    let stride = prev_ref.stride as i32;
    let scale = p.scale as i32;
    let (ar, ad, bands, maps, lut) = (
        approx_ref.ptr(),
        approx_dis.ptr(),
        b.bands.ptr(),
        b.maps.ptr(),
        b.lut.ptr(),
    );
    let plane = b.plane as i32;
    let [cl, cr, ct, cb] = p.csf.map(|v| v as i32);
    let flags = adm_flags(p);
    let [ih, iv, id] = p.irf;
    let kernel = state.kernel("adm", "vmaf_adm_dwt123")?;
    // SAFETY: arguments match `vmaf_adm_dwt123(const i32 *ref, const i32 *dis, int w, int h,
    // int stride, int scale, i32 *approx_ref, i32 *approx_dis, i32 *bands, i32 *maps,
    // int plane, const i32 *lut, int cl, int cr, int ct, int cb, int flags, u32 irf_h,
    // u32 irf_v, u32 irf_d, double egl)`; accesses as in `adm_dwt0` (inputs mapped into the
    // checked w x h planes, outputs below bw * bh or inside the checked CSF window), and the
    // inputs are distinct from the outputs.
    unsafe {
        kernel.launch(
            stream,
            adm_dwt_cfg(bw, bh),
            &[
                &r, &d, &w, &h, &stride, &scale, &ar, &ad, &bands, &maps, &plane, &lut, &cl, &cr,
                &ct, &cb, &flags, &ih, &iv, &id, &p.egl,
            ],
        )
    }
}

/// Queues ADM's denominator and contrast-masking sums of one `bw`x`bh` scale over
/// `p.score`: adds den h, v, d, then the DLM and AIM numerators h, v, d (int64 as two's
/// complement) to `out[out_index..out_index + 9]`, each row rounded and shifted first.
#[allow(clippy::too_many_arguments)]
pub fn adm_cm(
    state: &GpuState,
    stream: &Stream,
    b: &AdmBuffers<'_>,
    bw: usize,
    bh: usize,
    p: &AdmScale,
    out: &DeviceBuffer<u64>,
    out_index: usize,
) -> Result<()> {
    let (w, h) = dims_u32(bw, bh)?;
    if w < 2 || h < 2 || p.scale > 3 {
        return Err(Error::inval("bad ADM masking parameters"));
    }
    adm_check_buffers(bw, bh, b, p)?;
    if out_index.checked_add(9).is_none_or(|end| end > out.len()) {
        return Err(Error::inval("ADM output index out of range"));
    }
    let [left, right, top, bottom] = p.score.map(|v| v as i32);
    if left == right || top == bottom {
        return Ok(());
    }
    let (bands, maps, lut) = (b.bands.ptr(), b.maps.ptr(), b.lut.ptr());
    let o = out.ptr().offset(out_index);
    let (plane, bw, bh, scale) = (b.plane as i32, w as i32, h as i32, p.scale as i32);
    let (den_row, den_cube, cm_row) = (p.den_row as i32, p.den_cube as i32, p.cm_row as i32);
    let [ch, cv, cd] = p.cm_cube.map(|v| v as i32);
    let [ih, iv, id] = p.irf;
    let aim = i32::from(p.aim);
    let kernel = state.kernel("adm", "vmaf_adm_cm")?;
    let cfg = LaunchConfig {
        grid: ((bottom - top) as u32, 1, 1),
        block: (ADM_CM_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match `vmaf_adm_cm(const i32 *bands, const i32 *maps, int plane,
    // int bw, int bh, int scale, int left, int right, int top, int den_row, int den_cube,
    // int cube_h, int cube_v, int cube_d, int cm_row, u32 irf_h, u32 irf_v, u32 irf_d,
    // double egl, const i32 *lut, int do_aim, u64 *out)`. Rows top..bottom and columns
    // left..right lie in the band (checked), threshold neighbours are mapped into
    // 0..bh / 0..bw (bw, bh >= 2), every plane index is below bw * bh <= plane with 6 band
    // and 4 map planes present, the table is read below ADM_LUT_LEN, and out[out_index..+9]
    // is inside `out`.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[
                &bands, &maps, &plane, &bw, &bh, &scale, &left, &right, &top, &den_row, &den_cube,
                &ch, &cv, &cd, &cm_row, &ih, &iv, &id, &p.egl, &lut, &aim, &o,
            ],
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Float SSIM and MS-SSIM (kernels/float_ssim.hip).

/// Sample types the float SSIM conversion kernel reads.
pub trait SsimSample: Sample {
    /// Luma to float of a picture pair.
    const SSIM_TO_FLOAT_KERNEL: &'static str;
}

impl SsimSample for u8 {
    const SSIM_TO_FLOAT_KERNEL: &'static str = "vmaf_ssim_to_float_u8";
}

impl SsimSample for u16 {
    const SSIM_TO_FLOAT_KERNEL: &'static str = "vmaf_ssim_to_float_u16";
}

/// A dense `w`x`h` float image: the first `w * h` elements of `buf`, rows `w` apart.
#[derive(Debug, Clone, Copy)]
pub struct DeviceImage<'a> {
    pub buf: &'a DeviceBuffer<f32>,
    pub w: usize,
    pub h: usize,
}

impl DeviceImage<'_> {
    /// The image's size as kernel ints, after checking that it is non-empty and inside `buf`.
    fn checked_dims(&self) -> Result<(i32, i32)> {
        let n = self.w.checked_mul(self.h);
        if self.w == 0 || self.h == 0 || n.is_none_or(|n| n > self.buf.len()) {
            return Err(Error::inval(format!(
                "float image {}x{} does not fit its GPU buffer",
                self.w, self.h
            )));
        }
        let (w, h) = dims_u32(self.w, self.h)?;
        Ok((w as i32, h as i32))
    }
}

/// Taps of the Gaussian window (kernels/float_ssim.hip `SSIM_GAUSS_LEN`).
const SSIM_GAUSS_LEN: usize = 11;
/// Threads of `vmaf_ssim_rows` (`SSIM_ROW_BLOCK`).
const SSIM_ROW_BLOCK: u32 = 256;
/// Block of the per-pixel SSIM kernels.
const SSIM_BLOCK: (u32, u32) = (32, 8);

/// One thread per pixel of a `w`x`h` output with [`SSIM_BLOCK`].
fn ssim_grid(w: i32, h: i32) -> Result<LaunchConfig> {
    let gy = (h as u32).div_ceil(SSIM_BLOCK.1);
    if gy > 65535 {
        return Err(Error::inval("image too tall for the GPU grid"));
    }
    Ok(LaunchConfig {
        grid: ((w as u32).div_ceil(SSIM_BLOCK.0), gy, 1),
        block: (SSIM_BLOCK.0, SSIM_BLOCK.1, 1),
        shared_mem_bytes: 0,
    })
}

/// Queues the conversion of both luma planes to floats divided by `scaler` (a power of two),
/// written densely to `out_ref` / `out_dis`.
pub fn ssim_to_float<T: SsimSample>(
    state: &GpuState,
    stream: &Stream,
    reference: DevicePlane<'_, T>,
    distorted: DevicePlane<'_, T>,
    scaler: f32,
    out_ref: DeviceImage<'_>,
    out_dis: DeviceImage<'_>,
) -> Result<()> {
    let geometry = (reference.w, reference.h, reference.stride);
    if geometry != (distorted.w, distorted.h, distorted.stride)
        || (out_ref.w, out_ref.h) != (reference.w, reference.h)
        || (out_dis.w, out_dis.h) != (reference.w, reference.h)
    {
        return Err(Error::inval("SSIM conversion planes differ in geometry"));
    }
    let r = reference.checked_ptr()?;
    let d = distorted.checked_ptr()?;
    let (w, h) = out_ref.checked_dims()?;
    out_dis.checked_dims()?;
    let stride = reference.stride as i32;
    let (or, od) = (out_ref.buf.ptr(), out_dis.buf.ptr());
    let kernel = state.kernel("float_ssim", T::SSIM_TO_FLOAT_KERNEL)?;
    // SAFETY: arguments match `vmaf_ssim_to_float_{u8,u16}(const T *ref, const T *dis, int w,
    // int h, int stride, float scaler, float *out_ref, float *out_dis)`; the kernel reads
    // (x, y) < (w, h) of the checked planes and writes y * w + x < w * h of the outputs, whose
    // buffers hold w * h elements (checked).
    unsafe {
        kernel.launch(
            stream,
            ssim_grid(w, h)?,
            &[&r, &d, &w, &h, &stride, &scaler, &or, &od],
        )
    }
}

/// Queues the decimation of both images by `factor` with the `size`x`size` kernel `taps`
/// (row-major), centred at multiples of `factor`, mirrored at the borders; outputs go to
/// `dst_ref` / `dst_dis` (their size is the caller's choice).
#[allow(clippy::too_many_arguments)]
pub fn ssim_decimate(
    state: &GpuState,
    stream: &Stream,
    src_ref: DeviceImage<'_>,
    src_dis: DeviceImage<'_>,
    taps: &DeviceBuffer<f32>,
    size: usize,
    factor: usize,
    dst_ref: DeviceImage<'_>,
    dst_dis: DeviceImage<'_>,
) -> Result<()> {
    if (src_ref.w, src_ref.h) != (src_dis.w, src_dis.h)
        || (dst_ref.w, dst_ref.h) != (dst_dis.w, dst_dis.h)
    {
        return Err(Error::inval("SSIM decimation images differ in size"));
    }
    let (w, h) = src_ref.checked_dims()?;
    src_dis.checked_dims()?;
    let (dw, dh) = dst_ref.checked_dims()?;
    dst_dis.checked_dims()?;
    // Centres and tap offsets must stay in int range (the kernel then clamps every read).
    let reach = |n: i32| {
        (n as usize)
            .checked_mul(factor)
            .and_then(|v| v.checked_add(size))
            .is_some_and(|v| i32::try_from(v).is_ok())
    };
    if size == 0 || factor == 0 || taps.len() < size * size || !reach(dw) || !reach(dh) {
        return Err(Error::inval("bad SSIM decimation parameters"));
    }
    let (size, factor) = (size as i32, factor as i32);
    let (sr, sd, t) = (src_ref.buf.ptr(), src_dis.buf.ptr(), taps.ptr());
    let (dr, dd) = (dst_ref.buf.ptr(), dst_dis.buf.ptr());
    let kernel = state.kernel("float_ssim", "vmaf_ssim_decimate")?;
    // SAFETY: arguments match `vmaf_ssim_decimate(const float *src_ref, const float *src_dis,
    // int w, int h, const float *taps, int size, int factor, float *dst_ref, float *dst_dis,
    // int dw, int dh)`. Reads are clamped into the checked w x h sources, taps are read below
    // size * size <= taps.len(), and writes go to y * dw + x < dw * dh of the checked outputs;
    // no index overflows an int (checked `reach`).
    unsafe {
        kernel.launch(
            stream,
            ssim_grid(dw, dh)?,
            &[&sr, &sd, &w, &h, &t, &size, &factor, &dr, &dd, &dw, &dh],
        )
    }
}

/// Elements of one of the five planes [`ssim_hconv`] writes for a `w`x`h` pair.
pub fn ssim_hconv_plane(w: usize, h: usize) -> usize {
    w.saturating_sub(SSIM_GAUSS_LEN - 1) * h
}

/// Queues the horizontal Gaussian pass of a pair (at least 11 wide): five planes (ref, dis,
/// ref², dis², ref·dis) of `(w - 10) x h` floats, [`ssim_hconv_plane`] apart, into `out`.
pub fn ssim_hconv(
    state: &GpuState,
    stream: &Stream,
    reference: DeviceImage<'_>,
    distorted: DeviceImage<'_>,
    gauss: &DeviceBuffer<f32>,
    out: &DeviceBuffer<f32>,
) -> Result<()> {
    if (reference.w, reference.h) != (distorted.w, distorted.h) {
        return Err(Error::inval("SSIM images differ in size"));
    }
    let (w, h) = reference.checked_dims()?;
    distorted.checked_dims()?;
    let plane = ssim_hconv_plane(reference.w, reference.h);
    if reference.w < SSIM_GAUSS_LEN
        || gauss.len() < SSIM_GAUSS_LEN
        || plane.checked_mul(5).is_none_or(|n| n > out.len())
    {
        return Err(Error::inval("bad SSIM convolution parameters"));
    }
    let plane = plane as i64;
    let (r, d, g, o) = (
        reference.buf.ptr(),
        distorted.buf.ptr(),
        gauss.ptr(),
        out.ptr(),
    );
    let kernel = state.kernel("float_ssim", "vmaf_ssim_hconv")?;
    // SAFETY: arguments match `vmaf_ssim_hconv(const float *ref, const float *dis, int w,
    // int h, const float *gauss, float *out, long long plane)`. Output (x, y) with
    // x < w - 10, y < h reads columns x..x + 11 <= w of row y of the checked images and
    // gauss[0..11] (checked), and writes k * plane + y * (w - 10) + x < 5 * plane <= out.len().
    unsafe {
        kernel.launch(
            stream,
            ssim_grid(w - (SSIM_GAUSS_LEN as i32 - 1), h)?,
            &[&r, &d, &w, &h, &g, &o, &plane],
        )
    }
}

/// Queues the vertical Gaussian pass and SSIM terms over the `(w - 10) x (h - 10)` valid
/// window positions of a `w`x`h` pair whose [`ssim_hconv`] output is `hbuf`:
/// `sums[offset + 4 * row ..][..4]` receives the row's sums of the ssim, l, c and s terms.
/// `consts` are C1, C2, C3.
#[allow(clippy::too_many_arguments)]
pub fn ssim_rows(
    state: &GpuState,
    stream: &Stream,
    hbuf: &DeviceBuffer<f32>,
    w: usize,
    h: usize,
    gauss: &DeviceBuffer<f32>,
    consts: [f32; 3],
    sums: &DeviceBuffer<f64>,
    offset: usize,
) -> Result<()> {
    if w < SSIM_GAUSS_LEN || h < SSIM_GAUSS_LEN || gauss.len() < SSIM_GAUSS_LEN {
        return Err(Error::inval("bad SSIM row parameters"));
    }
    let (dw, dh) = (w + 1 - SSIM_GAUSS_LEN, h + 1 - SSIM_GAUSS_LEN);
    let plane = ssim_hconv_plane(w, h);
    dims_u32(w, h)?;
    if plane.checked_mul(5).is_none_or(|n| n > hbuf.len())
        || offset
            .checked_add(4 * dh)
            .is_none_or(|end| end > sums.len())
    {
        return Err(Error::inval("SSIM row buffers too small"));
    }
    let (dw, h, dh) = (dw as i32, h as i32, dh as u32);
    let plane = plane as i64;
    let [c1, c2, c3] = consts;
    let (hb, g) = (hbuf.ptr(), gauss.ptr());
    let out = sums.ptr().offset(offset);
    let kernel = state.kernel("float_ssim", "vmaf_ssim_rows")?;
    let cfg = LaunchConfig {
        grid: (dh, 1, 1),
        block: (SSIM_ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: arguments match `vmaf_ssim_rows(const float *hbuf, int dw, int h,
    // long long plane, const float *gauss, float c1, float c2, float c3, double *row_sums)`.
    // Row y < h - 10 reads k * plane + (y + v) * dw + x with v < 11, x < dw, k < 5: below
    // 5 * plane <= hbuf.len(); gauss[0..11] (checked); writes row_sums[4 * y..4 * y + 4],
    // inside `sums` from `offset` (checked).
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[&hb, &dw, &h, &plane, &g, &c1, &c2, &c3, &out],
        )
    }
}

// ---------------------------------------------------------------------------------------------
// cambi (kernels/cambi.hip)
// ---------------------------------------------------------------------------------------------

/// Largest window half-width the c-value kernel takes (`CAMBI_MAX_PAD`).
pub const CAMBI_MAX_PAD: usize = 32;
/// Largest number of contrast steps (`CAMBI_MAX_DIFFS`).
pub const CAMBI_MAX_DIFFS: usize = 32;
/// Output tile of the c-value kernel (`CAMBI_TILE`).
const CAMBI_TILE: u32 = 16;
/// Block of the mask kernel (`CAMBI_MASK_BW` x `CAMBI_MASK_BH`).
const CAMBI_MASK_BLOCK: (u32, u32) = (32, 8);
/// Block of the element-wise cambi kernels.
const CAMBI_PIXEL_BLOCK: (u32, u32) = (32, 8);

fn cambi_pixel_cfg(w: u32, h: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (
            w.div_ceil(CAMBI_PIXEL_BLOCK.0),
            h.div_ceil(CAMBI_PIXEL_BLOCK.1),
            1,
        ),
        block: (CAMBI_PIXEL_BLOCK.0, CAMBI_PIXEL_BLOCK.1, 1),
        shared_mem_bytes: 0,
    }
}

/// Queues cambi's preprocessing: `out` = `src` (a `bpc`-bit luma plane) as 10-bit samples at
/// `out`'s size, sampled at `taps` (`out.w` source columns, then `out.h` source rows; the
/// kernel clamps them into `src`), then 2x2-averaged when `dither`.
pub fn cambi_preprocess<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    src: DevicePlane<'_, T>,
    taps: &DeviceBuffer<u32>,
    bpc: u32,
    dither: bool,
    out: DevicePlane<'_, u16>,
) -> Result<()> {
    if !(8..=16).contains(&bpc) || taps.len() < out.w + out.h {
        return Err(Error::inval("bad cambi preprocessing parameters"));
    }
    let s = src.checked_ptr()?;
    let o = out.checked_ptr()?;
    let (in_w, in_h) = dims_u32(src.w, src.h)?;
    let (out_w, out_h) = dims_u32(out.w, out.h)?;
    let cfg = cambi_pixel_cfg(out_w, out_h);
    let (in_w, in_h, in_stride) = (in_w as i32, in_h as i32, src.stride as i32);
    let (out_w, out_h, out_stride) = (out_w as i32, out_h as i32, out.stride as i32);
    let (bpc, dither) = (bpc as i32, i32::from(dither));
    let t = taps.ptr();
    let name = if std::mem::size_of::<T>() == 1 {
        "vmaf_cambi_preprocess_u8"
    } else {
        "vmaf_cambi_preprocess_u16"
    };
    let kernel = state.kernel("cambi", name)?;
    // SAFETY: arguments match `vmaf_cambi_preprocess_{u8,u16}(const T *src, int in_w, int in_h,
    // int in_stride, const u32 *taps, int bpc, int dither, u16 *out, int out_w, int out_h,
    // int out_stride)` in kernels/cambi.hip. Taps are read below out_w + out_h (checked
    // length) and clamped into the checked source plane; writes stay inside the checked
    // output plane.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[
                &s,
                &in_w,
                &in_h,
                &in_stride,
                &t,
                &bpc,
                &dither,
                &o,
                &out_w,
                &out_h,
                &out_stride,
            ],
        )
    }
}

/// Queues cambi's flat-area mask of `img` into `mask` (same size): 1 where more than
/// `threshold` pixels of the 7x7 square have both derivatives zero.
pub fn cambi_mask(
    state: &GpuState,
    stream: &Stream,
    img: DevicePlane<'_, u16>,
    threshold: u32,
    mask: DevicePlane<'_, u16>,
) -> Result<()> {
    if (img.w, img.h) != (mask.w, mask.h) {
        return Err(Error::inval("cambi mask planes differ in size"));
    }
    let i = img.checked_ptr()?;
    let m = mask.checked_ptr()?;
    let (w, h) = dims_u32(img.w, img.h)?;
    let cfg = LaunchConfig {
        grid: (
            w.div_ceil(CAMBI_MASK_BLOCK.0),
            h.div_ceil(CAMBI_MASK_BLOCK.1),
            1,
        ),
        block: (CAMBI_MASK_BLOCK.0, CAMBI_MASK_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    let (w, h, stride, mstride) = (w as i32, h as i32, img.stride as i32, mask.stride as i32);
    let kernel = state.kernel("cambi", "vmaf_cambi_mask")?;
    // SAFETY: arguments match `vmaf_cambi_mask(const u16 *img, int w, int h, int stride,
    // u32 threshold, u16 *mask, int mask_stride)`; reads are at rows < h and columns < w of
    // the checked image plane (neighbours only when inside), writes inside the checked mask.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[&i, &w, &h, &stride, &threshold, &m, &mstride],
        )
    }
}

/// Queues `out` = the even rows and columns of `input`; `out` must be `ceil(w/2)` x
/// `ceil(h/2)` of `input` and a different buffer.
pub fn cambi_decimate(
    state: &GpuState,
    stream: &Stream,
    input: DevicePlane<'_, u16>,
    out: DevicePlane<'_, u16>,
) -> Result<()> {
    if out.w != input.w.div_ceil(2) || out.h != input.h.div_ceil(2) {
        return Err(Error::inval("cambi decimation sizes do not match"));
    }
    if input.buf.ptr().addr() == out.buf.ptr().addr() {
        return Err(Error::inval("cambi decimation in place"));
    }
    let i = input.checked_ptr()?;
    let o = out.checked_ptr()?;
    let (w, h) = dims_u32(out.w, out.h)?;
    let cfg = cambi_pixel_cfg(w, h);
    let (w, h, istride, ostride) = (w as i32, h as i32, input.stride as i32, out.stride as i32);
    let kernel = state.kernel("cambi", "vmaf_cambi_decimate")?;
    // SAFETY: arguments match `vmaf_cambi_decimate(const u16 *in, int in_stride, u16 *out,
    // int w, int h, int out_stride)`; reads at (2i, 2j) with i < ceil(in.h/2), j <
    // ceil(in.w/2) are inside the checked input, writes inside the checked output, and the
    // buffers differ.
    unsafe { kernel.launch(stream, cfg, &[&i, &istride, &o, &w, &h, &ostride]) }
}

/// Queues cambi's 3x3 mode filter of `input` into `out` (same geometry, different buffer).
pub fn cambi_mode(
    state: &GpuState,
    stream: &Stream,
    input: DevicePlane<'_, u16>,
    out: DevicePlane<'_, u16>,
) -> Result<()> {
    if (input.w, input.h, input.stride) != (out.w, out.h, out.stride) {
        return Err(Error::inval("cambi mode-filter planes differ in geometry"));
    }
    if input.buf.ptr().addr() == out.buf.ptr().addr() {
        return Err(Error::inval("cambi mode filter in place"));
    }
    let i = input.checked_ptr()?;
    let o = out.checked_ptr()?;
    let (w, h) = dims_u32(input.w, input.h)?;
    let cfg = cambi_pixel_cfg(w, h);
    let (w, h, stride) = (w as i32, h as i32, input.stride as i32);
    let kernel = state.kernel("cambi", "vmaf_cambi_mode")?;
    // SAFETY: arguments match `vmaf_cambi_mode(const u16 *in, u16 *out, int w, int h,
    // int stride)`; reads at rows/columns inside 0..h / 0..w of the checked input (neighbours
    // only for interior pixels), writes inside the checked output, a different buffer.
    unsafe { kernel.launch(stream, cfg, &[&i, &o, &w, &h, &stride]) }
}

/// What the c-value kernel needs besides its buffers.
#[derive(Debug, Clone, Copy)]
pub struct CambiCValues {
    /// Window half-width (<= [`CAMBI_MAX_PAD`]).
    pub pad: usize,
    pub band_base: u16,
    pub band_size: u16,
    /// Contrast steps (1..=[`CAMBI_MAX_DIFFS`]).
    pub num_diffs: usize,
    pub vlt: u16,
}

/// Queues the c-values of one scale: `cv[r * w + c]` for the `w`x`h` planes `img` and `mask`
/// (same geometry). `params` holds the adjusted thresholds then the contrast weights
/// (`2 * num_diffs` values); `lut` the reciprocal table, longer than the window area.
#[allow(clippy::too_many_arguments)]
pub fn cambi_cvalues(
    state: &GpuState,
    stream: &Stream,
    img: DevicePlane<'_, u16>,
    mask: DevicePlane<'_, u16>,
    p: &CambiCValues,
    params: &DeviceBuffer<i32>,
    lut: &DeviceBuffer<f32>,
    cv: &DeviceBuffer<f32>,
    cv_offset: usize,
) -> Result<()> {
    if (img.w, img.h, img.stride) != (mask.w, mask.h, mask.stride) {
        return Err(Error::inval("cambi c-value planes differ in geometry"));
    }
    let side = 2 * p.pad + 1;
    if p.pad > CAMBI_MAX_PAD
        || !(1..=CAMBI_MAX_DIFFS).contains(&p.num_diffs)
        || params.len() < 2 * p.num_diffs
        || lut.len() <= side * side
    {
        return Err(Error::inval("bad cambi c-value parameters"));
    }
    let n = img.w * img.h;
    if cv_offset.checked_add(n).is_none_or(|end| end > cv.len()) {
        return Err(Error::inval("cambi c-value buffer too small"));
    }
    let i = img.checked_ptr()?;
    let m = mask.checked_ptr()?;
    let (w, h) = dims_u32(img.w, img.h)?;
    let cfg = LaunchConfig {
        grid: (w.div_ceil(CAMBI_TILE), h.div_ceil(CAMBI_TILE), 1),
        block: (CAMBI_TILE, CAMBI_TILE, 1),
        shared_mem_bytes: 0,
    };
    let (w, h, stride) = (w as i32, h as i32, img.stride as i32);
    let (pad, base, size, nd, vlt) = (
        p.pad as i32,
        i32::from(p.band_base),
        i32::from(p.band_size),
        p.num_diffs as i32,
        i32::from(p.vlt),
    );
    let (pp, lp, cp) = (params.ptr(), lut.ptr(), cv.ptr().offset(cv_offset));
    let kernel = state.kernel("cambi", "vmaf_cambi_cvalues")?;
    // SAFETY: arguments match `vmaf_cambi_cvalues(const u16 *img, const u16 *mask, int w,
    // int h, int stride, int pad, int band_base, int band_size, int nd, int vlt,
    // const i32 *params, const float *lut, float *cv)`. Planes are read only inside 0..h /
    // 0..w (checked); the shared tile holds 16 + 2 * pad <= 80 samples a side; count indices
    // stay below 2 * nd + 1 <= 65; params are read below 2 * nd (checked length); table
    // indices are sums of two counts of one window, at most side^2 < lut.len(); writes go to
    // cv[cv_offset .. cv_offset + w * h], inside `cv`.
    unsafe {
        kernel.launch(
            stream,
            cfg,
            &[
                &i, &m, &w, &h, &stride, &pad, &base, &size, &nd, &vlt, &pp, &lp, &cp,
            ],
        )
    }
}

/// Entries of one c-value map's statistics: the non-zero count, then 256 significand sums.
pub const CAMBI_STATS_LEN: usize = 257;
/// Block of the statistics kernel (`CAMBI_STATS_BLOCK`).
const CAMBI_STATS_BLOCK: u32 = 256;

/// Queues the statistics of `cv[..n]` into `out[out_index..out_index + CAMBI_STATS_LEN]`
/// (which must be zeroed): the non-zero count, then per biased exponent the sum of the
/// integer significands.
pub fn cambi_stats(
    state: &GpuState,
    stream: &Stream,
    cv: &DeviceBuffer<f32>,
    n: usize,
    out: &DeviceBuffer<u64>,
    out_index: usize,
) -> Result<()> {
    let n32 = i32::try_from(n).map_err(|_| Error::inval("cambi map too large"))?;
    if n == 0 || n > cv.len() {
        return Err(Error::inval("bad cambi statistics length"));
    }
    if out_index
        .checked_add(CAMBI_STATS_LEN)
        .is_none_or(|end| end > out.len())
    {
        return Err(Error::inval("cambi statistics index out of range"));
    }
    let (c, o) = (cv.ptr(), out.ptr().offset(out_index));
    let cfg = LaunchConfig {
        grid: (
            (n as u32).div_ceil(CAMBI_STATS_BLOCK).min(MAX_ROW_BLOCKS),
            1,
            1,
        ),
        block: (CAMBI_STATS_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let kernel = state.kernel("cambi", "vmaf_cambi_stats")?;
    // SAFETY: arguments match `vmaf_cambi_stats(const float *cv, int n, u64 *out)`; it reads
    // cv[0..n] (n <= cv.len()) and adds to out[0..257] from `o`, inside `out` (checked).
    unsafe { kernel.launch(stream, cfg, &[&c, &n32, &o]) }
}
