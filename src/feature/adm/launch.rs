//! Launchers for kernels/adm.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_adm_dwt0_{u8,u16}(ref, dis, w, h, stride, bpc, ...)` and, with `T = i32`,
/// `vmaf_adm_dwt123(ref, dis, w, h, stride, scale, ...)`; both continue `approx_ref,
/// approx_dis, bands, maps, plane, lut, cl, cr, ct, cb, flags, irf_h, irf_v, irf_d, egl`.
type DwtArgs<'a, T> = (
    Span<'a, T>,
    Span<'a, T>,
    i32,
    i32,
    i32,
    i32,
    Span<'a, i32>,
    Span<'a, i32>,
    Span<'a, i32>,
    Span<'a, i32>,
    i32,
    Span<'a, i32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    u32,
    u32,
    u32,
    f64,
);
/// `vmaf_adm_cm(bands, maps, plane, bw, bh, scale, left, right, top, den_row, den_cube,
/// cube_h, cube_v, cube_d, cm_row, irf_h, irf_v, irf_d, do_aim, out)`.
type CmArgs<'a> = (
    Span<'a, i32>,
    Span<'a, i32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    u32,
    u32,
    u32,
    i32,
    Span<'a, u64>,
);

const DWT0_U8_KERNEL: &str = "vmaf_adm_dwt0_u8";
const DWT0_U16_KERNEL: &str = "vmaf_adm_dwt0_u16";
const DWT123_KERNEL: &str = "vmaf_adm_dwt123";
const CM_KERNEL: &str = "vmaf_adm_cm";

/// The kernels of kernels/adm.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<DwtArgs<u8>>(DWT0_U8_KERNEL),
        sig::<DwtArgs<u16>>(DWT0_U16_KERNEL),
        sig::<DwtArgs<i32>>(DWT123_KERNEL),
        sig::<CmArgs>(CM_KERNEL),
    ]
}

/// Entries of ADM's reciprocal table the kernels may index (`0..=32768`).
pub const ADM_LUT_LEN: usize = 32769;

/// ADM wavelet kernel block (kernels/adm.hip: the scale-0 staging assumes 32 x 8).
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

/// Device buffers shared by the ADM kernels. At each scale their planes lie the scale's band
/// size (`bw * bh`) apart, so buffers sized for scale 0 serve every scale.
#[derive(Debug, Clone, Copy)]
pub struct AdmBuffers<'a> {
    /// Inside the CSF window: reference h, v, d bands, then their decoupled parts. Scale 0
    /// packs each band's restored and additive int16 parts in one plane (6 planes); later
    /// scales keep them in planes of their own (9 planes of a quarter or less of scale 0's).
    pub bands: &'a DeviceBuffer<i32>,
    /// Threshold maps (flt and centre sums of the DLM pass, then of the AIM pass): 4 planes.
    pub maps: &'a DeviceBuffer<i32>,
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
) -> Result<(i32, i32, i32)> {
    let (w, h) = dims_u32(w, h)?;
    if w < 3 || h < 3 || p.scale > 3 {
        return Err(Error::inval("bad ADM wavelet parameters"));
    }
    let (bw, bh) = (w.div_ceil(2) as usize, h.div_ceil(2) as usize);
    let plane = adm_check_buffers(bw, bh, b, p)?;
    if approx_ref.len() < bw * bh || approx_dis.len() < bw * bh {
        return Err(Error::inval("ADM approximation buffer too small"));
    }
    let (cl, cr, ct, cb) = (p.csf[0], p.csf[1], p.csf[2], p.csf[3]);
    if cl > cr || cr > bw || ct > cb || cb > bh {
        return Err(Error::inval("ADM CSF window outside the band"));
    }
    Ok((bw as i32, bh as i32, plane))
}

/// Elements `AdmBuffers::bands` needs for a `w`x`h` picture at every scale: scale 0's band
/// planes or scale 1's (more planes, a quarter the size), whichever is more.
pub fn adm_bands_len(w: usize, h: usize) -> usize {
    let (bw0, bh0) = (w.div_ceil(2), h.div_ceil(2));
    let (bw1, bh1) = (bw0.div_ceil(2), bh0.div_ceil(2));
    (band_planes(0) * bw0 * bh0).max(band_planes(1) * bw1 * bh1)
}

/// Band planes of a scale in `AdmBuffers::bands`.
fn band_planes(scale: usize) -> usize {
    if scale == 0 {
        6
    } else {
        9
    }
}

/// Checks the shared buffers and the score window of a `bw`x`bh` band; returns the distance
/// between planes (the band size) as a kernel int.
fn adm_check_buffers(bw: usize, bh: usize, b: &AdmBuffers<'_>, p: &AdmScale) -> Result<i32> {
    let plane = bw.checked_mul(bh).filter(|&n| i32::try_from(n).is_ok());
    let fits = |n: usize, planes: usize| {
        plane
            .and_then(|pl| pl.checked_mul(planes))
            .is_some_and(|need| need <= n)
    };
    if !fits(b.bands.len(), band_planes(p.scale)) || !fits(b.maps.len(), 4) {
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
    Ok((bw * bh) as i32)
}

/// The spans of the shared buffers a kernel of `p.scale` touches for a band of `plane`
/// elements: the scale's band planes, the 4 map planes and the reciprocal table (lengths
/// checked by [`adm_check_buffers`]).
fn adm_spans<'a>(
    b: &AdmBuffers<'a>,
    plane: i32,
    p: &AdmScale,
) -> Result<(Span<'a, i32>, Span<'a, i32>, Span<'a, i32>)> {
    let plane = plane as usize;
    Ok((
        Span::of(b.bands, 0, band_planes(p.scale) * plane)?,
        Span::of(b.maps, 0, 4 * plane)?,
        Span::of(b.lut, 0, ADM_LUT_LEN)?,
    ))
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

/// ADM's scale-0 wavelet level of both pictures (`bpc`-bit samples): writes the approximation
/// bands (dense, `ceil(w/2)` wide) and the h, v, d bands, and the masking maps inside `p.csf`.
#[allow(clippy::too_many_arguments)]
pub fn adm_dwt0<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    bpc: u32,
    approx_ref: &'a DeviceBuffer<i32>,
    approx_dis: &'a DeviceBuffer<i32>,
    b: &AdmBuffers<'a>,
    p: &AdmScale,
) -> Result<Launch<'a>> {
    if (reference.w, reference.h, reference.stride) != (distorted.w, distorted.h, distorted.stride)
    {
        return Err(Error::inval("ADM planes differ in geometry"));
    }
    if p.scale != 0 || !(8..=16).contains(&bpc) {
        return Err(Error::inval("bad ADM scale-0 parameters"));
    }
    let (bw, bh, plane) = adm_check_dwt(reference.w, reference.h, approx_ref, approx_dis, b, p)?;
    let r = reference.span()?;
    let d = distorted.span()?;
    let (w, h) = (reference.w as i32, reference.h as i32);
    let stride = reference.stride as i32;
    let bpc = bpc as i32;
    let n = (bw * bh) as usize;
    let (ar, ad) = (Span::of(approx_ref, 0, n)?, Span::of(approx_dis, 0, n)?);
    let (bands, maps, lut) = adm_spans(b, plane, p)?;
    let [cl, cr, ct, cb] = p.csf.map(|v| v as i32);
    let flags = adm_flags(p);
    let [ih, iv, id] = p.irf;
    // Inputs are read at rows/columns mapped into 0..h / 0..w (w, h >= 3); writes go to pixel
    // i * bw + j < bw * bh of the approximation bands and, inside the CSF window (checked
    // inside the band), of the band and map planes `plane = bw * bh` apart; the table is read
    // below ADM_LUT_LEN.
    Launch::new::<DwtArgs<T>>(
        state,
        "adm",
        T::pick(DWT0_U8_KERNEL, DWT0_U16_KERNEL),
        adm_dwt_cfg(bw, bh),
        (
            r, d, w, h, stride, bpc, ar, ad, bands, maps, plane, lut, cl, cr, ct, cb, flags, ih,
            iv, id, p.egl,
        ),
    )
}

/// One ADM wavelet level of scales 1-3 on the previous approximation bands `prev_ref` /
/// `prev_dis` (which must not be the output buffers); outputs as [`adm_dwt0`].
#[allow(clippy::too_many_arguments)]
pub fn adm_dwt123<'a>(
    state: &GpuState,
    prev_ref: DevicePlane<'a, i32>,
    prev_dis: DevicePlane<'a, i32>,
    approx_ref: &'a DeviceBuffer<i32>,
    approx_dis: &'a DeviceBuffer<i32>,
    b: &AdmBuffers<'a>,
    p: &AdmScale,
) -> Result<Launch<'a>> {
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
    let (bw, bh, plane) = adm_check_dwt(prev_ref.w, prev_ref.h, approx_ref, approx_dis, b, p)?;
    let r = prev_ref.span()?;
    let d = prev_dis.span()?;
    let (w, h) = (prev_ref.w as i32, prev_ref.h as i32);
    let stride = prev_ref.stride as i32;
    let scale = p.scale as i32;
    let n = (bw * bh) as usize;
    let (ar, ad) = (Span::of(approx_ref, 0, n)?, Span::of(approx_dis, 0, n)?);
    let (bands, maps, lut) = adm_spans(b, plane, p)?;
    let [cl, cr, ct, cb] = p.csf.map(|v| v as i32);
    let flags = adm_flags(p);
    let [ih, iv, id] = p.irf;
    // Accesses as in `adm_dwt0`, and the inputs are distinct from the outputs.
    Launch::new::<DwtArgs<i32>>(
        state,
        "adm",
        DWT123_KERNEL,
        adm_dwt_cfg(bw, bh),
        (
            r, d, w, h, stride, scale, ar, ad, bands, maps, plane, lut, cl, cr, ct, cb, flags, ih,
            iv, id, p.egl,
        ),
    )
}

/// ADM's denominator and contrast-masking sums of one `bw`x`bh` scale over `p.score`: adds
/// den h, v, d, then the DLM and AIM numerators h, v, d (int64 as two's complement) to
/// `out[out_index..out_index + 9]`, each row rounded and shifted first. None for an empty score
/// window (nothing to launch).
#[allow(clippy::too_many_arguments)]
pub fn adm_cm<'a>(
    state: &GpuState,
    b: &AdmBuffers<'a>,
    bw: usize,
    bh: usize,
    p: &AdmScale,
    out: &'a DeviceBuffer<u64>,
    out_index: usize,
) -> Result<Option<Launch<'a>>> {
    let (w, h) = dims_u32(bw, bh)?;
    if w < 2 || h < 2 || p.scale > 3 {
        return Err(Error::inval("bad ADM masking parameters"));
    }
    let plane = adm_check_buffers(bw, bh, b, p)?;
    let (cl, cr, ct, cb) = (p.csf[0], p.csf[1], p.csf[2], p.csf[3]);
    let (l, r, t, bo) = (p.score[0], p.score[1], p.score[2], p.score[3]);
    if l < r && t < bo && (l < cl || r > cr || t < ct || bo > cb) {
        // The decoupled parts this kernel reads exist only inside the CSF window.
        return Err(Error::inval("ADM score window outside the CSF window"));
    }
    if out_index.checked_add(9).is_none_or(|end| end > out.len()) {
        return Err(Error::inval("ADM output index out of range"));
    }
    let [left, right, top, bottom] = p.score.map(|v| v as i32);
    if left == right || top == bottom {
        return Ok(None);
    }
    let (bands, maps, _) = adm_spans(b, plane, p)?;
    let o = Span::of(out, out_index, 9)?;
    let (bw, bh, scale) = (w as i32, h as i32, p.scale as i32);
    let (den_row, den_cube, cm_row) = (p.den_row as i32, p.den_cube as i32, p.cm_row as i32);
    let [ch, cv, cd] = p.cm_cube.map(|v| v as i32);
    let [ih, iv, id] = p.irf;
    let aim = i32::from(p.aim);
    let cfg = LaunchConfig {
        grid: ((bottom - top) as u32, 1, 1),
        block: (ADM_CM_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // Rows top..bottom and columns left..right lie in the band (checked), threshold
    // neighbours are mapped into 0..bh / 0..bw (bw, bh >= 2), and every index is below
    // bw * bh = plane in one of the band and map planes.
    Launch::new::<CmArgs>(
        state,
        "adm",
        CM_KERNEL,
        cfg,
        (
            bands, maps, plane, bw, bh, scale, left, right, top, den_row, den_cube, ch, cv, cd,
            cm_row, ih, iv, id, aim, o,
        ),
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ADM's launchers refuse, before any launch, buffers too small for a scale's band planes (6
    /// at scale 0, 9 at scales 1-3, `bw * bh` apart) and a score window reaching outside the CSF
    /// window (where the masking kernel would read decoupled parts nobody wrote); in-range calls
    /// run.
    #[test]
    fn adm_launchers_refuse_short_buffers_and_windows_outside_the_csf() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let (dev, stream) = (state.device(), state.stream());
        let (w, h) = (64, 36);
        let (bw, bh) = (w / 2, h / 2);
        let plane = bw * bh;
        let buf = |n: usize| {
            let b = DeviceBuffer::<i32>::new(dev, n).unwrap();
            b.zero(stream).unwrap();
            b
        };
        let (bands, short9, short6) = (buf(9 * plane), buf(9 * plane - 1), buf(6 * plane - 1));
        let (maps, lut) = (buf(4 * plane), buf(ADM_LUT_LEN));
        let (prev_r, prev_d, out_r, out_d) = (buf(w * h), buf(w * h), buf(plane), buf(plane));
        let out = DeviceBuffer::<u64>::new(dev, 9).unwrap();
        let scale = |s: usize, score: [usize; 4]| AdmScale {
            scale: s,
            csf: [2, bw - 2, 2, bh - 2],
            score,
            den_row: 0,
            den_cube: 0,
            cm_cube: [1, 1, 1],
            cm_row: 1,
            irf: [1, 1, 1],
            egl: 1.0,
            aim: true,
        };
        let inside = [3, bw - 3, 3, bh - 3];
        let b = |bands| AdmBuffers {
            bands,
            maps: &maps,
            lut: &lut,
        };
        let invalid = |r: crate::error::Result<()>, what: &str| {
            assert!(matches!(r, Err(Error::Invalid(_))), "{what}: {r:?}");
        };
        let plane_of = |buf| DevicePlane {
            buf,
            offset: 0,
            w,
            h,
            stride: w,
        };
        let dwt = |bands, s| {
            adm_dwt123(
                &state,
                plane_of(&prev_r),
                plane_of(&prev_d),
                &out_r,
                &out_d,
                &b(bands),
                &scale(s, inside),
            )
            .and_then(|l| l.queue(stream))
        };
        dwt(&bands, 1).unwrap();
        invalid(dwt(&short9, 1), "scale 1 with 9 planes less one element");
        let cm = |bands, s, score| {
            adm_cm(&state, &b(bands), bw, bh, &scale(s, score), &out, 0)
                .and_then(|l| l.map_or(Ok(()), |l| l.queue(stream)))
        };
        cm(&bands, 1, inside).unwrap();
        cm(&short9, 0, inside).unwrap();
        invalid(
            cm(&short9, 1, inside),
            "masking at scale 1 with 9 planes less one element",
        );
        invalid(
            cm(&short6, 0, inside),
            "masking at scale 0 with 6 planes less one element",
        );
        for (score, what) in [
            ([1, bw - 3, 3, bh - 3], "left"),
            ([3, bw - 1, 3, bh - 3], "right"),
            ([3, bw - 3, 1, bh - 3], "top"),
            ([3, bw - 3, 3, bh - 1], "bottom"),
        ] {
            invalid(
                cm(&bands, 1, score),
                &format!("score window past the CSF window's {what} edge"),
            );
        }
        stream.synchronize().unwrap();
    }
}
