//! Launchers for kernels/speed.hip: each checks every access its kernel makes for the given
//! geometry (see the comment before each `Launch::new`).

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

use super::scale::ScaleMethod;
use super::NB;

/// `vmaf_speed_decimate_{u8,u16}(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, sw, sh, dw, dh,
/// scaler, taps, ntaps, out)`.
type DecimateArgs<'a, T> = (
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
    Span<'a, f32>,
    i32,
    Span<'a, f32>,
);
/// `vmaf_speed_to_float_{u8,u16}(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, scaler, out)`.
type ToFloatArgs<'a, T> = (
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    i32,
    i32,
    f32,
    Span<'a, f32>,
);
/// `vmaf_speed_decimate_f32(src, sw, sh, dw, dh, taps, ntaps, out)`.
type DecimateF32Args<'a> = (
    Span<'a, f32>,
    i32,
    i32,
    i32,
    i32,
    Span<'a, f32>,
    i32,
    Span<'a, f32>,
);
/// `vmaf_speed_resample(src, w, h, sw, sh, method, taps, xi, xw, yi, yw, dst)`.
type ResampleArgs<'a> = (
    Span<'a, f32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    Span<'a, i32>,
    Span<'a, f32>,
    Span<'a, i32>,
    Span<'a, f32>,
    Span<'a, f32>,
);
/// `vmaf_speed_moments(dec, dw, dh, mtaps, nm, subw, subh, norm, cov)`.
type MomentsArgs<'a> = (
    Span<'a, f32>,
    i32,
    i32,
    Span<'a, f32>,
    i32,
    i32,
    i32,
    Span<'a, f32>,
    Span<'a, f32>,
);

const FILE: &str = "speed";
const DECIMATE_U8: &str = "vmaf_speed_decimate_u8";
const DECIMATE_U16: &str = "vmaf_speed_decimate_u16";
const DECIMATE_F32: &str = "vmaf_speed_decimate_f32";
const TO_FLOAT_U8: &str = "vmaf_speed_to_float_u8";
const TO_FLOAT_U16: &str = "vmaf_speed_to_float_u16";
const RESAMPLE: &str = "vmaf_speed_resample";
const MOMENTS: &str = "vmaf_speed_moments";

/// Threads of `vmaf_speed_moments` (`SPEED_MOMENTS_THREADS`).
pub(crate) const MOMENTS_THREADS: u32 = 384;
/// Block of the per-sample kernels.
const BLOCK: (u32, u32) = (16, 16);

/// The kernels of kernels/speed.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<DecimateArgs<u8>>(DECIMATE_U8),
        sig::<DecimateArgs<u16>>(DECIMATE_U16),
        sig::<ToFloatArgs<u8>>(TO_FLOAT_U8),
        sig::<ToFloatArgs<u16>>(TO_FLOAT_U16),
        sig::<DecimateF32Args>(DECIMATE_F32),
        sig::<ResampleArgs>(RESAMPLE),
        sig::<MomentsArgs>(MOMENTS),
    ]
}

/// One thread per sample of a `w`x`h` output, for both pictures of a pair (grid z).
fn grid(w: usize, h: usize) -> Result<LaunchConfig> {
    let (w, h) = dims_u32(w, h)?;
    let gy = h.div_ceil(BLOCK.1);
    if gy > 65535 {
        return Err(Error::inval("SpEED plane too tall for the GPU grid"));
    }
    Ok(LaunchConfig {
        grid: (w.div_ceil(BLOCK.0), gy, 2),
        block: (BLOCK.0, BLOCK.1, 1),
        shared_mem_bytes: 0,
    })
}

/// The input planes of a pair of pictures, all `w`x`h`: picture `z` reads `a[z]`, minus
/// `b[z]` where given (frame differences).
pub(crate) struct PairPlanes<'a, T: Sample> {
    pub a: [DevicePlane<'a, T>; 2],
    pub b: [Option<DevicePlane<'a, T>>; 2],
}

/// Spans and strides of a pair, in kernel argument order, after checking that every plane is
/// `w`x`h` and inside its buffer.
type PairArgs<'a, T> = [(Span<'a, T>, i32); 4];

impl<'a, T: Sample> PairPlanes<'a, T> {
    fn checked(&self) -> Result<(PairArgs<'a, T>, usize, usize)> {
        let (w, h) = (self.a[0].w, self.a[0].h);
        let plane = |p: Option<&DevicePlane<'a, T>>| -> Result<(Span<'a, T>, i32)> {
            match p {
                None => Ok((Span::null(), 0)),
                Some(p) if (p.w, p.h) == (w, h) => Ok((p.span()?, p.stride as i32)),
                Some(_) => Err(Error::inval("SpEED planes differ in size")),
            }
        };
        let args = [
            plane(Some(&self.a[0]))?,
            plane(self.b[0].as_ref())?,
            plane(Some(&self.a[1]))?,
            plane(self.b[1].as_ref())?,
        ];
        Ok((args, w, h))
    }
}

/// Elements `0..2 * n` of `buf` (a pair of planes of `n` samples), as a span.
fn pair_span<T: crate::gpu::DeviceCopy>(buf: &DeviceBuffer<T>, n: usize) -> Result<Span<'_, T>> {
    let len = n
        .checked_mul(2)
        .ok_or_else(|| Error::inval("SpEED plane too large"))?;
    Span::of(buf, 0, len)
}

/// The first `n` taps of `taps`, which must be odd in number and reach less than `side` each
/// way (the kernels mirror once at each edge).
fn taps_span(taps: &DeviceBuffer<f32>, n: usize, side: usize) -> Result<Span<'_, f32>> {
    if n == 0 || n.is_multiple_of(2) || n / 2 >= side {
        return Err(Error::inval(format!(
            "SpEED filter of {n} taps on a side of {side}"
        )));
    }
    Span::of(taps, 0, n)
}

fn int(v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::inval("SpEED size out of range"))
}

/// The anti-aliasing filter (`ntaps` of `taps`) of each picture of `input` read as an
/// `sw`x`sh` plane (zero outside its `w`x`h`), sampled at every 16th row and column: `dw`x`dh`
/// floats per picture into `out`, the second picture `dw * dh` after the first.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decimate<'a, T: Sample>(
    state: &GpuState,
    input: &PairPlanes<'a, T>,
    (sw, sh): (usize, usize),
    scaler: f32,
    taps: &'a DeviceBuffer<f32>,
    ntaps: usize,
    out: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    let (planes, w, h) = input.checked()?;
    let (dw, dh) = (sw / 16, sh / 16);
    let t = taps_span(taps, ntaps, sw.min(sh))?;
    let o = pair_span(out, dw * dh)?;
    // Reads samples (x, y) < (w, h) of each plane (others are zero), at mirrored coordinates
    // inside the sw x sh plane (taps reach less than either side); writes z * dw * dh +
    // i * dw + j < 2 * dw * dh of `out`.
    let [(a0, sa0), (b0, sb0), (a1, sa1), (b1, sb1)] = planes;
    Launch::new::<DecimateArgs<T>>(
        state,
        FILE,
        T::pick(DECIMATE_U8, DECIMATE_U16),
        grid(dw, dh)?,
        (
            a0,
            sa0,
            b0,
            sb0,
            a1,
            sa1,
            b1,
            sb1,
            int(w)?,
            int(h)?,
            int(sw)?,
            int(sh)?,
            int(dw)?,
            int(dh)?,
            scaler,
            t,
            int(ntaps)?,
            o,
        ),
    )
}

/// Each picture of `input` as a dense `w`x`h` float plane into `out` (the prescaling path).
pub(crate) fn to_float<'a, T: Sample>(
    state: &GpuState,
    input: &PairPlanes<'a, T>,
    scaler: f32,
    out: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    let (planes, w, h) = input.checked()?;
    let o = pair_span(out, w * h)?;
    // Reads (x, y) < (w, h) of each plane; writes z * w * h + y * w + x < 2 * w * h.
    let [(a0, sa0), (b0, sb0), (a1, sa1), (b1, sb1)] = planes;
    Launch::new::<ToFloatArgs<T>>(
        state,
        FILE,
        T::pick(TO_FLOAT_U8, TO_FLOAT_U16),
        grid(w, h)?,
        (
            a0,
            sa0,
            b0,
            sb0,
            a1,
            sa1,
            b1,
            sb1,
            int(w)?,
            int(h)?,
            scaler,
            o,
        ),
    )
}

/// The resampling tables of one axis on the device: `taps` indices and weights per output.
pub(crate) struct DeviceAxis<'a> {
    pub idx: &'a DeviceBuffer<i32>,
    pub wt: &'a DeviceBuffer<f32>,
}

/// Resamples each dense `w`x`h` float plane of `src` to `sw`x`sh` into `dst` with `method`
/// and the axis tables of `taps` entries per output (`scale::resample_axis`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn resample<'a>(
    state: &GpuState,
    src: &'a DeviceBuffer<f32>,
    (w, h): (usize, usize),
    (sw, sh): (usize, usize),
    method: ScaleMethod,
    taps: usize,
    (x, y): (DeviceAxis<'a>, DeviceAxis<'a>),
    dst: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    let want = match method {
        ScaleMethod::Nearest => 1,
        ScaleMethod::Bilinear => 2,
        ScaleMethod::Bicubic => 4,
        ScaleMethod::Lanczos4 => 9,
    };
    if taps != want || w == 0 || h == 0 {
        return Err(Error::inval(
            "SpEED resampling tables do not match the method",
        ));
    }
    let s = pair_span(src, w * h)?;
    let d = pair_span(dst, sw * sh)?;
    let xi = Span::of(x.idx, 0, sw * taps)?;
    let xw = Span::of(x.wt, 0, sw * taps)?;
    let yi = Span::of(y.idx, 0, sh * taps)?;
    let yw = Span::of(y.wt, 0, sh * taps)?;
    // The kernel clamps every table index into the w x h plane: reads z * w * h + row * w +
    // column < 2 * w * h of `src` and the first sw * taps
    // (sh * taps) table entries; writes z * sw * sh + y * sw + x < 2 * sw * sh of `dst`.
    // The method numbers of kernels/speed.hip (SPEED_NEAREST ...).
    let method = match method {
        ScaleMethod::Nearest => 0,
        ScaleMethod::Bilinear => 1,
        ScaleMethod::Bicubic => 2,
        ScaleMethod::Lanczos4 => 3,
    };
    Launch::new::<ResampleArgs>(
        state,
        FILE,
        RESAMPLE,
        grid(sw, sh)?,
        (
            s,
            int(w)?,
            int(h)?,
            int(sw)?,
            int(sh)?,
            method,
            int(taps)?,
            xi,
            xw,
            yi,
            yw,
            d,
        ),
    )
}

/// [`decimate`] of the dense `sw`x`sh` float planes in `src` (resampled or converted).
pub(crate) fn decimate_f32<'a>(
    state: &GpuState,
    src: &'a DeviceBuffer<f32>,
    (sw, sh): (usize, usize),
    taps: &'a DeviceBuffer<f32>,
    ntaps: usize,
    out: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    let (dw, dh) = (sw / 16, sh / 16);
    let s = pair_span(src, sw * sh)?;
    let t = taps_span(taps, ntaps, sw.min(sh))?;
    let o = pair_span(out, dw * dh)?;
    // Reads mirrored (x, y) inside sw x sh of each plane; writes below 2 * dw * dh.
    Launch::new::<DecimateF32Args>(
        state,
        FILE,
        DECIMATE_F32,
        grid(dw, dh)?,
        (s, int(sw)?, int(sh)?, int(dw)?, int(dh)?, t, int(ntaps)?, o),
    )
}

/// Local mean removal (`nm` taps of `mtaps`) of both `dw`x`dh` planes of `dec` into `norm`,
/// and the covariance matrix of each plane's 25 `subw`x`subh` windows into `cov` (`NB * NB`
/// floats per picture).
#[allow(clippy::too_many_arguments)]
pub(crate) fn moments<'a>(
    state: &GpuState,
    dec: &'a DeviceBuffer<f32>,
    (dw, dh): (usize, usize),
    mtaps: &'a DeviceBuffer<f32>,
    nm: usize,
    (subw, subh): (usize, usize),
    norm: &'a DeviceBuffer<f32>,
    cov: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    const BLOCK_SIDE: usize = 5;
    if subw == 0 || subh == 0 || subw + BLOCK_SIDE - 1 > dw || subh + BLOCK_SIDE - 1 > dh {
        return Err(Error::inval("SpEED windows outside the decimated plane"));
    }
    let d = pair_span(dec, dw * dh)?;
    let t = taps_span(mtaps, nm, dw.min(dh))?;
    let n = pair_span(norm, dw * dh)?;
    let c = pair_span(cov, NB * NB)?;
    // Reads mirrored samples inside each dw x dh plane and windows ending inside it (checked
    // above); writes below 2 * dw * dh of `norm` and 2 * 625 of `cov`.
    Launch::new::<MomentsArgs>(
        state,
        FILE,
        MOMENTS,
        LaunchConfig {
            grid: (2, 1, 1),
            block: (MOMENTS_THREADS, 1, 1),
            shared_mem_bytes: 0,
        },
        (
            d,
            int(dw)?,
            int(dh)?,
            t,
            int(nm)?,
            int(subw)?,
            int(subh)?,
            n,
            c,
        ),
    )
}
