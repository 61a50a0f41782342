//! Launchers for kernels/float_ssim.hip: float SSIM and MS-SSIM.

use super::{dims_u32, launch, sig, DevicePlane, Sample, Signature};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, DevicePtr, GpuState, LaunchConfig, Stream};

/// `vmaf_ssim_to_float_{u8,u16}(ref, dis, w, h, stride, scaler, out_ref, out_dis)`.
type ToFloatArgs<T> = (
    DevicePtr<T>,
    DevicePtr<T>,
    i32,
    i32,
    i32,
    f32,
    DevicePtr<f32>,
    DevicePtr<f32>,
);
/// `vmaf_ssim_decimate(src_ref, src_dis, w, h, taps, size, factor, dst_ref, dst_dis, dw, dh)`.
type DecimateArgs = (
    DevicePtr<f32>,
    DevicePtr<f32>,
    i32,
    i32,
    DevicePtr<f32>,
    i32,
    i32,
    DevicePtr<f32>,
    DevicePtr<f32>,
    i32,
    i32,
);
/// `vmaf_ssim_hconv(ref, dis, w, h, gauss, out, plane)`.
type HconvArgs = (
    DevicePtr<f32>,
    DevicePtr<f32>,
    i32,
    i32,
    DevicePtr<f32>,
    DevicePtr<f32>,
    i64,
);
/// `vmaf_ssim_rows(hbuf, dw, h, plane, gauss, c1, c2, c3, row_sums)`.
type RowsArgs = (
    DevicePtr<f32>,
    i32,
    i32,
    i64,
    DevicePtr<f32>,
    f32,
    f32,
    f32,
    DevicePtr<f64>,
);

const DECIMATE_KERNEL: &str = "vmaf_ssim_decimate";
const HCONV_KERNEL: &str = "vmaf_ssim_hconv";
const ROWS_KERNEL: &str = "vmaf_ssim_rows";

/// The kernels of kernels/float_ssim.hip with the argument tuples their launchers pass.
pub(super) fn signatures() -> Vec<Signature> {
    vec![
        sig::<ToFloatArgs<u8>>(u8::SSIM_TO_FLOAT_KERNEL),
        sig::<ToFloatArgs<u16>>(u16::SSIM_TO_FLOAT_KERNEL),
        sig::<DecimateArgs>(DECIMATE_KERNEL),
        sig::<HconvArgs>(HCONV_KERNEL),
        sig::<RowsArgs>(ROWS_KERNEL),
    ]
}

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
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_ssim_to_float_{u8,u16}(const T *ref, const T *dis, int w, int h, int stride,
    // float scaler, float *out_ref, float *out_dis)`; the kernel reads (x, y) < (w, h) of the
    // checked planes and writes y * w + x < w * h of the outputs, whose buffers hold w * h elements
    // (checked).
    unsafe {
        launch::<ToFloatArgs<T>>(
            &kernel,
            stream,
            ssim_grid(w, h)?,
            &(r, d, w, h, stride, scaler, or, od),
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
    let kernel = state.kernel("float_ssim", DECIMATE_KERNEL)?;
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_ssim_decimate(const float *src_ref, const float *src_dis, int w, int h, const
    // float *taps, int size, int factor, float *dst_ref, float *dst_dis, int dw, int dh)`. Reads
    // are clamped into the checked w x h sources, taps are read below size * size <= taps.len(),
    // and writes go to y * dw + x < dw * dh of the checked outputs; no index overflows an int
    // (checked `reach`).
    unsafe {
        launch::<DecimateArgs>(
            &kernel,
            stream,
            ssim_grid(dw, dh)?,
            &(sr, sd, w, h, t, size, factor, dr, dd, dw, dh),
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
    let kernel = state.kernel("float_ssim", HCONV_KERNEL)?;
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_ssim_hconv(const float *ref, const float *dis, int w, int h, const float
    // *gauss, float *out, long long plane)`. Output (x, y) with x < w - 10, y < h reads columns
    // x..x + 11 <= w of row y of the checked images and gauss[0..11] (checked), and writes k *
    // plane + y * (w - 10) + x < 5 * plane <= out.len().
    unsafe {
        launch::<HconvArgs>(
            &kernel,
            stream,
            ssim_grid(w - (SSIM_GAUSS_LEN as i32 - 1), h)?,
            &(r, d, w, h, g, o, plane),
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
    let kernel = state.kernel("float_ssim", ROWS_KERNEL)?;
    let cfg = LaunchConfig {
        grid: (dh, 1, 1),
        block: (SSIM_ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument tuple (its type checked against kernels/*.hip by the signature test)
    // matches `vmaf_ssim_rows(const float *hbuf, int dw, int h, long long plane, const float
    // *gauss, float c1, float c2, float c3, double *row_sums)`. Row y < h - 10 reads k * plane + (y
    // + v) * dw + x with v < 11, x < dw, k < 5: below 5 * plane <= hbuf.len(); gauss[0..11]
    // (checked); writes row_sums[4 * y..4 * y + 4], inside `sums` from `offset` (checked).
    unsafe {
        launch::<RowsArgs>(
            &kernel,
            stream,
            cfg,
            &(hb, dw, h, plane, g, c1, c2, c3, out),
        )
    }
}
