//! Launchers for kernels/cambi.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span, MAX_ROW_BLOCKS};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_cambi_preprocess_{u8,u16}(src, in_w, in_h, in_stride, taps, bpc, dither, out, out_w,
/// out_h, out_stride)`.
type PreprocessArgs<'a, T> = (
    Span<'a, T>,
    i32,
    i32,
    i32,
    Span<'a, u32>,
    i32,
    i32,
    Span<'a, u16>,
    i32,
    i32,
    i32,
);
/// `vmaf_cambi_mask(img, w, h, stride, threshold, mask, mask_stride)`.
type MaskArgs<'a> = (Span<'a, u16>, i32, i32, i32, u32, Span<'a, u16>, i32);
/// `vmaf_cambi_decimate(in, in_stride, out, w, h, out_stride)`.
type DecimateArgs<'a> = (Span<'a, u16>, i32, Span<'a, u16>, i32, i32, i32);
/// `vmaf_cambi_mode(in, out, w, h, stride)`.
type ModeArgs<'a> = (Span<'a, u16>, Span<'a, u16>, i32, i32, i32);
/// `vmaf_cambi_cvalues(img, mask, w, h, stride, pad, band_base, band_size, nd, vlt, params,
/// lut, cv)`.
type CValuesArgs<'a> = (
    Span<'a, u16>,
    Span<'a, u16>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    Span<'a, i32>,
    Span<'a, f32>,
    Span<'a, f32>,
);
/// `vmaf_cambi_stats(cv, n, out)`.
type StatsArgs<'a> = (Span<'a, f32>, i32, Span<'a, u64>);

const PREPROCESS_U8_KERNEL: &str = "vmaf_cambi_preprocess_u8";
const PREPROCESS_U16_KERNEL: &str = "vmaf_cambi_preprocess_u16";
const MASK_KERNEL: &str = "vmaf_cambi_mask";
const DECIMATE_KERNEL: &str = "vmaf_cambi_decimate";
const MODE_KERNEL: &str = "vmaf_cambi_mode";
const CVALUES_KERNEL: &str = "vmaf_cambi_cvalues";
const STATS_KERNEL: &str = "vmaf_cambi_stats";

/// The kernels of kernels/cambi.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<PreprocessArgs<u8>>(PREPROCESS_U8_KERNEL),
        sig::<PreprocessArgs<u16>>(PREPROCESS_U16_KERNEL),
        sig::<MaskArgs>(MASK_KERNEL),
        sig::<DecimateArgs>(DECIMATE_KERNEL),
        sig::<ModeArgs>(MODE_KERNEL),
        sig::<CValuesArgs>(CVALUES_KERNEL),
        sig::<StatsArgs>(STATS_KERNEL),
    ]
}

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

/// Cambi's preprocessing: `out` = `src` (a `bpc`-bit luma plane) as 10-bit samples at `out`'s
/// size, sampled at `taps` (`out.w` source columns, then `out.h` source rows; the kernel clamps
/// them into `src`), then 2x2-averaged when `dither`.
pub fn cambi_preprocess<'a, T: Sample>(
    state: &GpuState,
    src: DevicePlane<'a, T>,
    taps: &'a DeviceBuffer<u32>,
    bpc: u32,
    dither: bool,
    out: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    if !(8..=16).contains(&bpc) || taps.len() < out.w + out.h {
        return Err(Error::inval("bad cambi preprocessing parameters"));
    }
    let s = src.span()?;
    let o = out.span()?;
    let (in_w, in_h) = dims_u32(src.w, src.h)?;
    let (out_w, out_h) = dims_u32(out.w, out.h)?;
    let cfg = cambi_pixel_cfg(out_w, out_h);
    let (in_w, in_h, in_stride) = (in_w as i32, in_h as i32, src.stride as i32);
    let (out_w, out_h, out_stride) = (out_w as i32, out_h as i32, out.stride as i32);
    let (bpc, dither) = (bpc as i32, i32::from(dither));
    let t = Span::of(taps, 0, out.w + out.h)?;
    // Taps are read below out_w + out_h and clamped into the source plane; writes stay inside
    // the output plane.
    Launch::new::<PreprocessArgs<T>>(
        state,
        "cambi",
        T::pick(PREPROCESS_U8_KERNEL, PREPROCESS_U16_KERNEL),
        cfg,
        (
            s, in_w, in_h, in_stride, t, bpc, dither, o, out_w, out_h, out_stride,
        ),
    )
}

/// Cambi's flat-area mask of `img` into `mask` (same size): 1 where more than `threshold`
/// pixels of the 7x7 square have both derivatives zero.
pub fn cambi_mask<'a>(
    state: &GpuState,
    img: DevicePlane<'a, u16>,
    threshold: u32,
    mask: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    if (img.w, img.h) != (mask.w, mask.h) {
        return Err(Error::inval("cambi mask planes differ in size"));
    }
    let i = img.span()?;
    let m = mask.span()?;
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
    // Reads are at rows < h and columns < w of the image (neighbours only when inside), writes
    // inside the mask.
    Launch::new::<MaskArgs>(
        state,
        "cambi",
        MASK_KERNEL,
        cfg,
        (i, w, h, stride, threshold, m, mstride),
    )
}

/// `out` = the even rows and columns of `input`; `out` must be `ceil(w/2)` x `ceil(h/2)` of
/// `input` and a different buffer.
pub fn cambi_decimate<'a>(
    state: &GpuState,
    input: DevicePlane<'a, u16>,
    out: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    if out.w != input.w.div_ceil(2) || out.h != input.h.div_ceil(2) {
        return Err(Error::inval("cambi decimation sizes do not match"));
    }
    if input.buf.ptr().addr() == out.buf.ptr().addr() {
        return Err(Error::inval("cambi decimation in place"));
    }
    let i = input.span()?;
    let o = out.span()?;
    let (w, h) = dims_u32(out.w, out.h)?;
    let cfg = cambi_pixel_cfg(w, h);
    let (w, h, istride, ostride) = (w as i32, h as i32, input.stride as i32, out.stride as i32);
    // Reads at (2i, 2j) with i < ceil(in.h/2), j < ceil(in.w/2), inside the input; writes
    // inside the output, another buffer.
    Launch::new::<DecimateArgs>(
        state,
        "cambi",
        DECIMATE_KERNEL,
        cfg,
        (i, istride, o, w, h, ostride),
    )
}

/// Cambi's 3x3 mode filter of `input` into `out` (same geometry, different buffer).
pub fn cambi_mode<'a>(
    state: &GpuState,
    input: DevicePlane<'a, u16>,
    out: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    if (input.w, input.h, input.stride) != (out.w, out.h, out.stride) {
        return Err(Error::inval("cambi mode-filter planes differ in geometry"));
    }
    if input.buf.ptr().addr() == out.buf.ptr().addr() {
        return Err(Error::inval("cambi mode filter in place"));
    }
    let i = input.span()?;
    let o = out.span()?;
    let (w, h) = dims_u32(input.w, input.h)?;
    let cfg = cambi_pixel_cfg(w, h);
    let (w, h, stride) = (w as i32, h as i32, input.stride as i32);
    // Reads at rows/columns inside 0..h / 0..w (neighbours only for interior pixels), writes
    // inside the output, another buffer.
    Launch::new::<ModeArgs>(state, "cambi", MODE_KERNEL, cfg, (i, o, w, h, stride))
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

/// The c-values of one scale: `cv[r * w + c]` for the `w`x`h` planes `img` and `mask` (same
/// geometry). `params` holds the adjusted thresholds then the contrast weights (`2 *
/// num_diffs` values); `lut` the reciprocal table, longer than the window area.
#[allow(clippy::too_many_arguments)]
pub fn cambi_cvalues<'a>(
    state: &GpuState,
    img: DevicePlane<'a, u16>,
    mask: DevicePlane<'a, u16>,
    p: &CambiCValues,
    params: &'a DeviceBuffer<i32>,
    lut: &'a DeviceBuffer<f32>,
    cv: &'a DeviceBuffer<f32>,
    cv_offset: usize,
) -> Result<Launch<'a>> {
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
    let i = img.span()?;
    let m = mask.span()?;
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
    let pp = Span::of(params, 0, 2 * p.num_diffs)?;
    let lp = Span::of(lut, 0, side * side + 1)?;
    let cp = Span::of(cv, cv_offset, n)?;
    // Planes are read only inside 0..h / 0..w; the shared tile holds 16 + 2 * pad <= 80
    // samples a side; count indices stay below 2 * nd + 1 <= 65; params are read below 2 * nd;
    // table indices are sums of two counts of one window, at most side^2; writes go to
    // cv[cv_offset .. cv_offset + w * h].
    Launch::new::<CValuesArgs>(
        state,
        "cambi",
        CVALUES_KERNEL,
        cfg,
        (i, m, w, h, stride, pad, base, size, nd, vlt, pp, lp, cp),
    )
}

/// Entries of one c-value map's statistics: the non-zero count, then 256 significand sums.
pub const CAMBI_STATS_LEN: usize = 257;
/// Block of the statistics kernel (`CAMBI_STATS_BLOCK`).
const CAMBI_STATS_BLOCK: u32 = 256;

/// The statistics of `cv[..n]` into `out[out_index..out_index + CAMBI_STATS_LEN]` (which must
/// be zeroed): the non-zero count, then per biased exponent the sum of the integer
/// significands.
pub fn cambi_stats<'a>(
    state: &GpuState,
    cv: &'a DeviceBuffer<f32>,
    n: usize,
    out: &'a DeviceBuffer<u64>,
    out_index: usize,
) -> Result<Launch<'a>> {
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
    let (c, o) = (
        Span::of(cv, 0, n)?,
        Span::of(out, out_index, CAMBI_STATS_LEN)?,
    );
    let cfg = LaunchConfig {
        grid: (
            (n as u32).div_ceil(CAMBI_STATS_BLOCK).min(MAX_ROW_BLOCKS),
            1,
            1,
        ),
        block: (CAMBI_STATS_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // Reads cv[0..n] and adds to out[out_index..][..257].
    Launch::new::<StatsArgs>(state, "cambi", STATS_KERNEL, cfg, (c, n32, o))
}
