//! Launchers for kernels/cambi.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
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
/// `vmaf_cambi_range_{u8,u16}(src, w, h, stride, max, flag)`.
type RangeArgs<'a, T> = (Span<'a, T>, i32, i32, i32, u32, Span<'a, u64>);
/// `vmaf_cambi_mask(img, w, h, stride, threshold, step, mask, mw, mh, mask_stride)`.
type MaskArgs<'a> = (
    Span<'a, u16>,
    i32,
    i32,
    i32,
    u32,
    i32,
    Span<'a, u16>,
    i32,
    i32,
    i32,
);
/// `vmaf_cambi_scale(prev, prev_stride, step, mask, mask_stride, mstep, band_base, band_size,
/// mode, wv, w, h)`.
type ScaleArgs<'a> = (
    Span<'a, u16>,
    i32,
    i32,
    Span<'a, u16>,
    i32,
    i32,
    i32,
    i32,
    Span<'a, u16>,
    Span<'a, u16>,
    i32,
    i32,
);
/// `vmaf_cambi_cvalues{,_slide}(wv, w, h, pad, band_base, band_size, nd, vlt, params, lut,
/// rows, cv, stats)`.
type CValuesArgs<'a> = (
    Span<'a, u16>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    Span<'a, i32>,
    Span<'a, f32>,
    i32,
    Span<'a, f32>,
    Span<'a, u64>,
);

const PREPROCESS_U8_KERNEL: &str = "vmaf_cambi_preprocess_u8";
const PREPROCESS_U16_KERNEL: &str = "vmaf_cambi_preprocess_u16";
const RANGE_U8_KERNEL: &str = "vmaf_cambi_range_u8";
const RANGE_U16_KERNEL: &str = "vmaf_cambi_range_u16";
const MASK_KERNEL: &str = "vmaf_cambi_mask";
const SCALE_KERNEL: &str = "vmaf_cambi_scale";
const CVALUES_KERNEL: &str = "vmaf_cambi_cvalues";
const CVALUES_SLIDE_KERNEL: &str = "vmaf_cambi_cvalues_slide";
const CVALUES_SLIDE_BIG_KERNEL: &str = "vmaf_cambi_cvalues_slide_big";
const CVALUES_WIDE_KERNEL: &str = "vmaf_cambi_cvalues_wide";

/// The kernels of kernels/cambi.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<PreprocessArgs<u8>>(PREPROCESS_U8_KERNEL),
        sig::<PreprocessArgs<u16>>(PREPROCESS_U16_KERNEL),
        sig::<RangeArgs<u8>>(RANGE_U8_KERNEL),
        sig::<RangeArgs<u16>>(RANGE_U16_KERNEL),
        sig::<MaskArgs>(MASK_KERNEL),
        sig::<ScaleArgs>(SCALE_KERNEL),
        sig::<CValuesArgs>(CVALUES_KERNEL),
        sig::<CValuesArgs>(CVALUES_SLIDE_KERNEL),
        sig::<CValuesArgs>(CVALUES_SLIDE_BIG_KERNEL),
        sig::<CValuesArgs>(CVALUES_WIDE_KERNEL),
    ]
}

/// Largest window half-width the c-value kernel takes (`CAMBI_MAX_PAD`).
pub const CAMBI_MAX_PAD: usize = 32;
/// Largest number of contrast steps (`CAMBI_MAX_DIFFS`).
pub const CAMBI_MAX_DIFFS: usize = 32;
/// Output tile of the direct c-value kernel (`CAMBI_TILE`).
const CAMBI_TILE: u32 = 16;
/// Output columns per block of the sliding c-value kernels (`CAMBI_SLIDE_W`) and of the wide
/// one (`CAMBI_WIDE_W`), the contrast steps they take (`CAMBI_SLIDE_ND`), their zero rows on
/// each side of the band (`CAMBI_SLIDE_GUARD`), the shared bytes of each (`CAMBI_SLIDE_BYTES`,
/// `CAMBI_SLIDE_BIG_BYTES`; the wide one's are dynamic, at most `CAMBI_WIDE_BYTES`), and the
/// output rows each block slides over (fewer where the staged window values would not fit
/// otherwise).
pub const CAMBI_SLIDE_W: usize = 32;
const CAMBI_WIDE_W: usize = 128;
const CAMBI_SLIDE_ND: usize = 4;
const CAMBI_SLIDE_GUARD: usize = CAMBI_SLIDE_ND;
const CAMBI_SLIDE_BYTES: usize = 32768;
const CAMBI_SLIDE_BIG_BYTES: usize = 45056;
const CAMBI_WIDE_BYTES: usize = 110_592;
const CAMBI_SLIDE_ROWS: [usize; 3] = [16, 8, 4];
/// Blocks a sliding launch wants: a block's rows run one after another, so on small scales
/// (the coarse ones hold a few dozen blocks) fewer rows per block shorten the launch.
const CAMBI_SLIDE_TARGET_BLOCKS: usize = 256;
/// Shared memory of a block's statistics (`CambiStats`) beside the tables, and what a CUDA
/// device reserves per block: the wide kernel is taken only where two blocks fit the
/// device's per-block limit together.
const CAMBI_STATS_SHARED: usize = 2 * 256 * 4 + 4;
const CAMBI_BLOCK_RESERVED: usize = 1024;
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

/// Sets `flag[index]` to 1 when a sample of `src` exceeds `max` (the input range check of
/// 9..15-bit pictures); leaves it otherwise.
pub fn cambi_range<'a, T: Sample>(
    state: &GpuState,
    src: DevicePlane<'a, T>,
    max: u32,
    flag: &'a DeviceBuffer<u64>,
    index: usize,
) -> Result<Launch<'a>> {
    let s = src.span()?;
    let (w, h) = dims_u32(src.w, src.h)?;
    let f = Span::of(flag, index, 1)?;
    // Reads stay inside the plane's w x h samples; the one write is flag[index].
    Launch::new::<RangeArgs<T>>(
        state,
        "cambi",
        T::pick(RANGE_U8_KERNEL, RANGE_U16_KERNEL),
        cambi_pixel_cfg(w, h),
        (s, w as i32, h as i32, src.stride as i32, max, f),
    )
}

/// Cambi's flat-area mask of `img`, sampled at every `step`-th row and column (1 or 2), into
/// `mask` (`ceil(w / step)` x `ceil(h / step)`): 1 where more than `threshold` pixels of the
/// 7x7 square have both derivatives zero.
pub fn cambi_mask<'a>(
    state: &GpuState,
    img: DevicePlane<'a, u16>,
    threshold: u32,
    step: usize,
    mask: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    if !(1..=2).contains(&step) || (img.w.div_ceil(step), img.h.div_ceil(step)) != (mask.w, mask.h)
    {
        return Err(Error::inval("cambi mask planes differ in size"));
    }
    let i = img.span()?;
    let m = mask.span()?;
    let (w, h) = dims_u32(img.w, img.h)?;
    let (mw, mh) = dims_u32(mask.w, mask.h)?;
    let cfg = LaunchConfig {
        grid: (
            mw.div_ceil(CAMBI_MASK_BLOCK.0),
            mh.div_ceil(CAMBI_MASK_BLOCK.1),
            1,
        ),
        block: (CAMBI_MASK_BLOCK.0, CAMBI_MASK_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    let (w, h, stride, mstride) = (w as i32, h as i32, img.stride as i32, mask.stride as i32);
    let (mw, mh, step) = (mw as i32, mh as i32, step as i32);
    // Reads are at rows < h and columns < w of the image (neighbours only when inside), writes
    // at rows < mh and columns < mw of the mask.
    Launch::new::<MaskArgs>(
        state,
        "cambi",
        MASK_KERNEL,
        cfg,
        (i, w, h, stride, threshold, step, m, mw, mh, mstride),
    )
}

/// One scale's picture: `prev` read at every `step`-th row and column (1, or 2 to decimate),
/// mode filtered into `mode`, and its window values (band value where `mask`, read at every
/// `mstep`-th row and column, keeps the pixel and the band holds it) into `wv`; `mode` and
/// `wv` are dense `w` x `h` planes of other buffers.
#[allow(clippy::too_many_arguments)]
pub fn cambi_scale<'a>(
    state: &GpuState,
    prev: DevicePlane<'a, u16>,
    step: usize,
    mask: DevicePlane<'a, u16>,
    mstep: usize,
    band_base: u16,
    band_size: u16,
    mode: DevicePlane<'a, u16>,
    wv: DevicePlane<'a, u16>,
) -> Result<Launch<'a>> {
    let (w, h) = (mode.w, mode.h);
    let sampled =
        |len: usize, n: usize, step: usize| (n - 1).checked_mul(step).is_some_and(|v| v < len);
    if !(1..=2).contains(&step)
        || mstep == 0
        || (wv.w, wv.h) != (w, h)
        || mode.stride != w
        || wv.stride != w
        || !sampled(prev.w, w, step)
        || !sampled(prev.h, h, step)
        || !sampled(mask.w, w, mstep)
        || !sampled(mask.h, h, mstep)
    {
        return Err(Error::inval("cambi scale planes do not match"));
    }
    let p = prev.span()?;
    let m = mask.span()?;
    let o = mode.span()?;
    let v = wv.span()?;
    if [mode.buf.ptr().addr(), wv.buf.ptr().addr()].contains(&prev.buf.ptr().addr())
        || mode.buf.ptr().addr() == wv.buf.ptr().addr()
    {
        return Err(Error::inval("cambi scale planes overlap"));
    }
    let (wu, hu) = dims_u32(w, h)?;
    let cfg = cambi_pixel_cfg(wu, hu);
    // Reads prev at (i * step, j * step) for i < h, j < w (and their in-picture neighbours),
    // the mask at (i * mstep, j * mstep), all checked inside their planes above; writes
    // w * h values of two other buffers.
    Launch::new::<ScaleArgs>(
        state,
        "cambi",
        SCALE_KERNEL,
        cfg,
        (
            p,
            prev.stride as i32,
            step as i32,
            m,
            mask.stride as i32,
            mstep as i32,
            i32::from(band_base),
            i32::from(band_size),
            o,
            v,
            wu as i32,
            hu as i32,
        ),
    )
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

/// A sliding c-value kernel and how it is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sliding {
    pub kernel: &'static str,
    /// Output columns (and threads) per block.
    pub width: usize,
    /// Output rows per block.
    pub rows: usize,
    /// Dynamic shared memory of the launch (0 for the kernels with static tables).
    pub dynamic_shared: usize,
}

impl Sliding {
    /// This kernel for a `w`x`h` scale: the most rows per block (up to its own) that still
    /// make [`CAMBI_SLIDE_TARGET_BLOCKS`] blocks, else the fewest it takes; the dynamic
    /// shared memory follows the rows.
    pub fn for_size(self, p: &CambiCValues, w: usize, h: usize) -> Sliding {
        let cols = w.div_ceil(self.width);
        let mut fewer = CAMBI_SLIDE_ROWS.into_iter().filter(|&r| r <= self.rows);
        let rows = fewer
            .clone()
            .find(|&r| cols * h.div_ceil(r) >= CAMBI_SLIDE_TARGET_BLOCKS)
            .or_else(|| fewer.next_back())
            .unwrap_or(self.rows);
        Sliding {
            rows,
            dynamic_shared: if self.dynamic_shared > 0 {
                p.slide_bytes(self.width, rows)
            } else {
                0
            },
            ..self
        }
    }
}

impl CambiCValues {
    /// Bytes of the column histograms and staged window values of a block `width` columns
    /// wide sliding over `rows` rows.
    fn slide_bytes(&self, width: usize, rows: usize) -> usize {
        let cols = width + 2 * self.pad;
        let pitch = (cols + 3).next_multiple_of(4);
        let hist = (usize::from(self.band_size) + 2 * CAMBI_SLIDE_GUARD) * pitch;
        hist + (rows + 2 * self.pad) * cols * 2
    }

    /// Every sliding kernel whose shared memory holds these tables, best first, on a device
    /// whose blocks may use up to `block_shared` bytes of shared memory; empty where the
    /// options need the direct kernel.
    #[cfg(test)]
    pub fn sliding_kernels(&self, block_shared: usize) -> Vec<Sliding> {
        self.wide_kernel(block_shared)
            .into_iter()
            .chain(self.narrow_kernel())
            .collect()
    }

    /// The wide kernel, where two of its blocks fit an SM of a device whose blocks may use
    /// `block_shared` bytes.
    fn wide_kernel(&self, block_shared: usize) -> Option<Sliding> {
        if self.num_diffs != CAMBI_SLIDE_ND {
            return None;
        }
        let room = CAMBI_WIDE_BYTES
            .min((block_shared / 2).saturating_sub(CAMBI_STATS_SHARED + CAMBI_BLOCK_RESERVED));
        CAMBI_SLIDE_ROWS
            .into_iter()
            .map(|rows| (rows, self.slide_bytes(CAMBI_WIDE_W, rows)))
            .find(|&(_, bytes)| bytes <= room)
            .map(|(rows, bytes)| Sliding {
                kernel: CVALUES_WIDE_KERNEL,
                width: CAMBI_WIDE_W,
                rows,
                dynamic_shared: bytes,
            })
    }

    /// The smaller one-wave kernel whose static tables hold these options.
    fn narrow_kernel(&self) -> Option<Sliding> {
        if self.num_diffs != CAMBI_SLIDE_ND {
            return None;
        }
        [
            (CVALUES_SLIDE_KERNEL, CAMBI_SLIDE_BYTES),
            (CVALUES_SLIDE_BIG_KERNEL, CAMBI_SLIDE_BIG_BYTES),
        ]
        .into_iter()
        .find_map(|(kernel, room)| {
            CAMBI_SLIDE_ROWS
                .into_iter()
                .find(|&rows| self.slide_bytes(CAMBI_SLIDE_W, rows) <= room)
                .map(|rows| Sliding {
                    kernel,
                    width: CAMBI_SLIDE_W,
                    rows,
                    dynamic_shared: 0,
                })
        })
    }

    /// The sliding kernel [`cambi_cvalues`] takes on such a device, if any.
    /// (No allocation: it runs for every scale of every frame.)
    pub fn sliding_kernel(&self, block_shared: usize) -> Option<Sliding> {
        self.wide_kernel(block_shared)
            .or_else(|| self.narrow_kernel())
    }
}

/// The c-values of one scale into `cv[..w * h]` (dense, `w` wide) from its window values
/// `wv` (a dense `w`x`h` plane), and their statistics added to `stats[stats_index..][..257]`
/// (zeroed beforehand): a sliding kernel where one takes the options, else the direct one.
/// `params` holds the adjusted thresholds then the contrast weights (`2 * num_diffs` values);
/// `lut` the reciprocal table, longer than the window area.
#[allow(clippy::too_many_arguments)]
pub fn cambi_cvalues<'a>(
    state: &GpuState,
    wv: DevicePlane<'a, u16>,
    p: &CambiCValues,
    params: &'a DeviceBuffer<i32>,
    lut: &'a DeviceBuffer<f32>,
    cv: &'a DeviceBuffer<f32>,
    stats: &'a DeviceBuffer<u64>,
    stats_index: usize,
) -> Result<Launch<'a>> {
    let side = 2 * p.pad + 1;
    if p.pad > CAMBI_MAX_PAD
        || !(1..=CAMBI_MAX_DIFFS).contains(&p.num_diffs)
        || params.len() < 2 * p.num_diffs
        || lut.len() <= side * side
        || wv.stride != wv.w
    {
        return Err(Error::inval("bad cambi c-value parameters"));
    }
    let n = wv.w * wv.h;
    let v = wv.span()?;
    let (w, h) = dims_u32(wv.w, wv.h)?;
    let (cfg, kernel, rows) = if let Some(k) = p.sliding_kernel(state.device().info().block_shared)
    {
        let k = k.for_size(p, wv.w, wv.h);
        let bw = k.width as u32;
        (
            LaunchConfig {
                grid: (w.div_ceil(bw), h.div_ceil(k.rows as u32), 1),
                block: (bw, 1, 1),
                shared_mem_bytes: k.dynamic_shared as u32,
            },
            k.kernel,
            k.rows,
        )
    } else {
        (
            LaunchConfig {
                grid: (w.div_ceil(CAMBI_TILE), h.div_ceil(CAMBI_TILE), 1),
                block: (CAMBI_TILE, CAMBI_TILE, 1),
                shared_mem_bytes: 0,
            },
            CVALUES_KERNEL,
            0,
        )
    };
    let (w, h) = (w as i32, h as i32);
    let (pad, base, size, nd, vlt) = (
        p.pad as i32,
        i32::from(p.band_base),
        i32::from(p.band_size),
        p.num_diffs as i32,
        i32::from(p.vlt),
    );
    let pp = Span::of(params, 0, 2 * p.num_diffs)?;
    let lp = Span::of(lut, 0, side * side + 1)?;
    let cp = Span::of(cv, 0, n)?;
    let sp = Span::of(stats, stats_index, CAMBI_STATS_LEN)?;
    // wv is read only inside 0..h / 0..w; only values below band_size get a histogram row
    // in the sliding kernels, whose tables fit their shared memory as checked; count
    // indices stay below 2 * nd + 1 <= 65; params are read below 2 * nd;
    // table indices are sums of two counts of one window, at most side^2; writes go to
    // cv[..w * h] and stats[stats_index..][..257].
    Launch::new::<CValuesArgs>(
        state,
        "cambi",
        kernel,
        cfg,
        (
            v,
            w,
            h,
            pad,
            base,
            size,
            nd,
            vlt,
            pp,
            lp,
            rows as i32,
            cp,
            sp,
        ),
    )
}

/// Entries of one c-value map's statistics: the non-zero count, then 256 significand sums.
pub const CAMBI_STATS_LEN: usize = 257;
