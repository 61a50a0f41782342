//! Launchers for kernels/float_ssim.hip: float SSIM and MS-SSIM.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_ssim_to_float_{u8,u16}(ref, dis, w, h, stride, scaler, out_ref, out_dis)`.
type ToFloatArgs<'a, T> = (
    Span<'a, T>,
    Span<'a, T>,
    i32,
    i32,
    i32,
    f32,
    Span<'a, f32>,
    Span<'a, f32>,
);
/// `vmaf_ssim_decimate(src_ref, src_dis, w, h, taps, size, factor, dst_ref, dst_dis, dw, dh)`.
type DecimateArgs<'a> = (
    Span<'a, f32>,
    Span<'a, f32>,
    i32,
    i32,
    Span<'a, f32>,
    i32,
    i32,
    Span<'a, f32>,
    Span<'a, f32>,
    i32,
    i32,
);
/// `vmaf_ssim_hconv(ref, dis, w, h, gauss, out, plane)`.
type HconvArgs<'a> = (
    Span<'a, f32>,
    Span<'a, f32>,
    i32,
    i32,
    Span<'a, f32>,
    Span<'a, f32>,
    i64,
);
/// `vmaf_ssim_rows(hbuf, dw, h, plane, gauss, c1, c2, c3, row_sums)`.
type RowsArgs<'a> = (
    Span<'a, f32>,
    i32,
    i32,
    i64,
    Span<'a, f32>,
    f32,
    f32,
    f32,
    Span<'a, f64>,
);

const TO_FLOAT_U8_KERNEL: &str = "vmaf_ssim_to_float_u8";
const TO_FLOAT_U16_KERNEL: &str = "vmaf_ssim_to_float_u16";
const DECIMATE_KERNEL: &str = "vmaf_ssim_decimate";
const HCONV_KERNEL: &str = "vmaf_ssim_hconv";
const ROWS_KERNEL: &str = "vmaf_ssim_rows";

/// The kernels of kernels/float_ssim.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<ToFloatArgs<u8>>(TO_FLOAT_U8_KERNEL),
        sig::<ToFloatArgs<u16>>(TO_FLOAT_U16_KERNEL),
        sig::<DecimateArgs>(DECIMATE_KERNEL),
        sig::<HconvArgs>(HCONV_KERNEL),
        sig::<RowsArgs>(ROWS_KERNEL),
    ]
}

/// A dense `w`x`h` float image: the first `w * h` elements of `buf`, rows `w` apart.
#[derive(Debug, Clone, Copy)]
pub struct DeviceImage<'a> {
    pub buf: &'a DeviceBuffer<f32>,
    pub w: usize,
    pub h: usize,
}

impl<'a> DeviceImage<'a> {
    /// The image as a span and its size as kernel ints, after checking that it is non-empty
    /// and inside `buf`.
    fn checked(&self) -> Result<(Span<'a, f32>, i32, i32)> {
        let n = self.w.checked_mul(self.h);
        if self.w == 0 || self.h == 0 || n.is_none_or(|n| n > self.buf.len()) {
            return Err(Error::inval(format!(
                "float image {}x{} does not fit its GPU buffer",
                self.w, self.h
            )));
        }
        let (w, h) = dims_u32(self.w, self.h)?;
        Ok((Span::of(self.buf, 0, self.w * self.h)?, w as i32, h as i32))
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

/// The conversion of both luma planes to floats divided by `scaler` (a power of two), written
/// densely to `out_ref` / `out_dis`.
pub fn ssim_to_float<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    scaler: f32,
    out_ref: DeviceImage<'a>,
    out_dis: DeviceImage<'a>,
) -> Result<Launch<'a>> {
    let geometry = (reference.w, reference.h, reference.stride);
    if geometry != (distorted.w, distorted.h, distorted.stride)
        || (out_ref.w, out_ref.h) != (reference.w, reference.h)
        || (out_dis.w, out_dis.h) != (reference.w, reference.h)
    {
        return Err(Error::inval("SSIM conversion planes differ in geometry"));
    }
    let r = reference.span()?;
    let d = distorted.span()?;
    let (or, w, h) = out_ref.checked()?;
    let (od, ..) = out_dis.checked()?;
    let stride = reference.stride as i32;
    // Reads (x, y) < (w, h) of both planes, writes y * w + x < w * h of the outputs.
    Launch::new::<ToFloatArgs<T>>(
        state,
        "float_ssim",
        T::pick(TO_FLOAT_U8_KERNEL, TO_FLOAT_U16_KERNEL),
        ssim_grid(w, h)?,
        (r, d, w, h, stride, scaler, or, od),
    )
}

/// The decimation of both images by `factor` with the `size`x`size` kernel `taps` (row-major),
/// centred at multiples of `factor`, mirrored at the borders; outputs go to `dst_ref` /
/// `dst_dis` (their size is the caller's choice).
#[allow(clippy::too_many_arguments)]
pub fn ssim_decimate<'a>(
    state: &GpuState,
    src_ref: DeviceImage<'a>,
    src_dis: DeviceImage<'a>,
    taps: &'a DeviceBuffer<f32>,
    size: usize,
    factor: usize,
    dst_ref: DeviceImage<'a>,
    dst_dis: DeviceImage<'a>,
) -> Result<Launch<'a>> {
    if (src_ref.w, src_ref.h) != (src_dis.w, src_dis.h)
        || (dst_ref.w, dst_ref.h) != (dst_dis.w, dst_dis.h)
    {
        return Err(Error::inval("SSIM decimation images differ in size"));
    }
    let (sr, w, h) = src_ref.checked()?;
    let (sd, ..) = src_dis.checked()?;
    let (dr, dw, dh) = dst_ref.checked()?;
    let (dd, ..) = dst_dis.checked()?;
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
    let t = Span::of(taps, 0, size * size)?;
    let (size, factor) = (size as i32, factor as i32);
    // Reads are clamped into the w x h sources, taps are read below size * size, and writes go
    // to y * dw + x < dw * dh of the outputs; no index overflows an int (`reach`).
    Launch::new::<DecimateArgs>(
        state,
        "float_ssim",
        DECIMATE_KERNEL,
        ssim_grid(dw, dh)?,
        (sr, sd, w, h, t, size, factor, dr, dd, dw, dh),
    )
}

/// Elements of one of the five planes [`ssim_hconv`] writes for a `w`x`h` pair.
pub fn ssim_hconv_plane(w: usize, h: usize) -> usize {
    w.saturating_sub(SSIM_GAUSS_LEN - 1) * h
}

/// The horizontal Gaussian pass of a pair (at least 11 wide): five planes (ref, dis, ref²,
/// dis², ref·dis) of `(w - 10) x h` floats, [`ssim_hconv_plane`] apart, into `out`.
pub fn ssim_hconv<'a>(
    state: &GpuState,
    reference: DeviceImage<'a>,
    distorted: DeviceImage<'a>,
    gauss: &'a DeviceBuffer<f32>,
    out: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    if (reference.w, reference.h) != (distorted.w, distorted.h) {
        return Err(Error::inval("SSIM images differ in size"));
    }
    let (r, w, h) = reference.checked()?;
    let (d, ..) = distorted.checked()?;
    let plane = ssim_hconv_plane(reference.w, reference.h);
    if reference.w < SSIM_GAUSS_LEN
        || gauss.len() < SSIM_GAUSS_LEN
        || plane.checked_mul(5).is_none_or(|n| n > out.len())
    {
        return Err(Error::inval("bad SSIM convolution parameters"));
    }
    let (g, o) = (
        Span::of(gauss, 0, SSIM_GAUSS_LEN)?,
        Span::of(out, 0, 5 * plane)?,
    );
    let plane = plane as i64;
    // Output (x, y) with x < w - 10, y < h reads columns x..x + 11 <= w of row y and
    // gauss[0..11], and writes k * plane + y * (w - 10) + x < 5 * plane.
    Launch::new::<HconvArgs>(
        state,
        "float_ssim",
        HCONV_KERNEL,
        ssim_grid(w - (SSIM_GAUSS_LEN as i32 - 1), h)?,
        (r, d, w, h, g, o, plane),
    )
}

/// The vertical Gaussian pass and SSIM terms over the `(w - 10) x (h - 10)` valid window
/// positions of a `w`x`h` pair whose [`ssim_hconv`] output is `hbuf`: `sums[offset + 4 * row
/// ..][..4]` receives the row's sums of the ssim, l, c and s terms. `consts` are C1, C2, C3.
#[allow(clippy::too_many_arguments)]
pub fn ssim_rows<'a>(
    state: &GpuState,
    hbuf: &'a DeviceBuffer<f32>,
    w: usize,
    h: usize,
    gauss: &'a DeviceBuffer<f32>,
    consts: [f32; 3],
    sums: &'a DeviceBuffer<f64>,
    offset: usize,
) -> Result<Launch<'a>> {
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
    let (hb, g) = (
        Span::of(hbuf, 0, 5 * plane)?,
        Span::of(gauss, 0, SSIM_GAUSS_LEN)?,
    );
    let out = Span::of(sums, offset, 4 * dh)?;
    let (dw, h, dh) = (dw as i32, h as i32, dh as u32);
    let plane = plane as i64;
    let [c1, c2, c3] = consts;
    let cfg = LaunchConfig {
        grid: (dh, 1, 1),
        block: (SSIM_ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // Row y < h - 10 reads k * plane + (y + v) * dw + x with v < 11, x < dw, k < 5, below
    // 5 * plane; gauss[0..11]; writes row_sums[4 * y..4 * y + 4] from `offset`.
    Launch::new::<RowsArgs>(
        state,
        "float_ssim",
        ROWS_KERNEL,
        cfg,
        (hb, dw, h, plane, g, c1, c2, c3, out),
    )
}
