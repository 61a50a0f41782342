//! float_motion arithmetic: the blur of a reference plane and the mean absolute difference of
//! two blurred planes (optionally plus the same at half size), in upstream's precision.
//!
//! The blur is upstream's separable convolution with a single mirror at the edges; its column
//! and row passes give the same value per sample as `vif_tools`' filter, so SpEED's
//! [`filter1d`] (vectorised, bit-identical at every [`CpuLevel`]) computes it.

use crate::error::{Error, Result};
use crate::feature::speed::scale::{
    filter1d, min_resample_side, plane_to_float_sized, resample, Plane, ScaleMethod,
};
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Upstream's 5-tap Gaussian (its double literals rounded to float).
const FILTER_5: [f32; 5] = [
    0.054488685f64 as f32,
    0.244201342f64 as f32,
    0.402619947f64 as f32,
    0.244201342f64 as f32,
    0.054488685f64 as f32,
];
/// The 3-tap Gaussian of `motion_filter_size=3`.
const FILTER_3: [f32; 3] = [
    0.166378498f64 as f32,
    0.667243004f64 as f32,
    0.166378498f64 as f32,
];
/// `motion_filter_size=1`: a 5-tap identity, still run through the convolution (so samples
/// pass through `0·x` additions, which keep them unchanged).
const FILTER_5_NO_OP: [f32; 5] = [0.0, 0.0, 1.0, 0.0, 0.0];

/// Taps for option `motion_filter_size`: 1 and 3 pick their filters, any other size the 5-tap
/// Gaussian.
pub fn taps(filter_size: i32) -> &'static [f32] {
    match filter_size {
        1 => &FILTER_5_NO_OP,
        3 => &FILTER_3,
        _ => &FILTER_5,
    }
}

/// Row pitch, in floats, of upstream's float planes for a `w`-sample wide picture: `w * 4`
/// bytes rounded up to 32. Only the half-size SAD of a chroma plane depends on it (see
/// [`BlurredPlane::half_size_view`]).
pub fn aligned_stride(w: usize) -> usize {
    w.div_ceil(8) * 8
}

/// One blurred plane, laid out as upstream keeps it: rows `stride` apart (the luma pitch for
/// every plane), samples past `w` zero.
#[derive(Debug, Clone)]
pub struct BlurredPlane {
    pub data: Vec<f32>,
    pub w: usize,
    pub h: usize,
    pub stride: usize,
}

impl BlurredPlane {
    fn view(&self) -> Plane<'_> {
        Plane::new(&self.data, self.w, self.h, self.stride)
    }

    /// The plane as upstream's half-size SAD reads it: with the pitch a buffer of this width
    /// would have. For chroma of subsampled formats that is narrower than the luma pitch the
    /// plane is stored with, so rows are read from the wrong places (upstream's behaviour,
    /// including the zero padding it reads from freshly allocated buffers).
    fn half_size_view(&self) -> Plane<'_> {
        Plane::new(&self.data, self.w, self.h, aligned_stride(self.w))
    }
}

/// Converts plane `c` of `pic` to floats (minus 128) and blurs it with `taps`, into a plane
/// with row pitch `stride`.
pub fn blur_plane(
    pic: &PictureData,
    c: usize,
    stride: usize,
    taps: &[f32],
    cpu: CpuLevel,
) -> Result<BlurredPlane> {
    let (w, h) = (pic.w[c], pic.h[c]);
    // The single mirror needs more samples than the filter's radius on each side.
    let radius = taps.len() / 2;
    if w <= radius || h <= radius {
        return Err(Error::inval(format!(
            "float_motion: {w}x{h} plane {c} is too small for a {}-tap filter",
            taps.len()
        )));
    }
    let src = plane_to_float_sized(pic, c, w, h, stride, h, "float_motion")?;
    let mut data = crate::limits::try_filled(src.len(), 0.0f32, "float_motion: blurred plane")?;
    filter1d(cpu, taps, &src, &mut data, w, h, stride);
    Ok(BlurredPlane { data, w, h, stride })
}

/// Mean absolute difference of two `w`x`h` planes, as upstream sums it: each row in float,
/// adding every difference in double (C's `fabs` promotes) and rounding back; rows added in
/// float; the total divided by the area in float.
fn mean_abs_diff(a: &Plane<'_>, b: &Plane<'_>) -> f32 {
    let (w, h) = (a.w, a.h);
    let mut accum = 0.0f32;
    for (ra, rb) in a.data.chunks(a.stride).zip(b.data.chunks(b.stride)).take(h) {
        let mut line = 0.0f32;
        for (&x, &y) in ra[..w].iter().zip(&rb[..w]) {
            line = (f64::from(line) + f64::from((x - y).abs())) as f32;
        }
        accum += line;
    }
    // C divides by the int product converted to float.
    accum / (w * h) as f32
}

/// A plane resampled (bilinear) to half size, rounded: `(int)(side * 0.5 + 0.5)`.
fn half_size(p: &Plane<'_>) -> Result<(Vec<f32>, usize, usize)> {
    let sw = (p.w as f64 * 0.5 + 0.5) as usize;
    let sh = (p.h as f64 * 0.5 + 0.5) as usize;
    let min = min_resample_side(ScaleMethod::Bilinear);
    if (sw != p.w || sh != p.h) && (p.w < min || p.h < min) {
        return Err(Error::inval("float_motion: plane too small to halve"));
    }
    let mut out = crate::limits::try_filled(sw * sh, 0.0f32, "float_motion: half-size plane")?;
    resample(ScaleMethod::Bilinear, p, &mut out, sw, sh, sw);
    Ok((out, sw, sh))
}

/// Motion between two blurred planes of the same size: their mean absolute difference, plus,
/// with `add_scale1`, that of their bilinear half-size versions (sum in float).
pub fn motion(a: &BlurredPlane, b: &BlurredPlane, add_scale1: bool) -> Result<f32> {
    if (a.w, a.h, a.stride) != (b.w, b.h, b.stride) {
        return Err(Error::inval("float_motion: picture size changed"));
    }
    let scale0 = mean_abs_diff(&a.view(), &b.view());
    if !add_scale1 {
        return Ok(scale0);
    }
    let (ha, sw, sh) = half_size(&a.half_size_view())?;
    let (hb, _, _) = half_size(&b.half_size_view())?;
    let scale1 = mean_abs_diff(&Plane::new(&ha, sw, sh, sw), &Plane::new(&hb, sw, sh, sw));
    Ok(scale0 + scale1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(w: usize, h: usize, f: impl Fn(usize, usize) -> f32) -> BlurredPlane {
        let stride = aligned_stride(w);
        let mut data = vec![0.0; stride * h];
        for y in 0..h {
            for x in 0..w {
                data[y * stride + x] = f(x, y);
            }
        }
        BlurredPlane { data, w, h, stride }
    }

    #[test]
    fn filters_and_strides() {
        assert_eq!(taps(5), &FILTER_5);
        assert_eq!(taps(0), &FILTER_5);
        assert_eq!(taps(9), &FILTER_5);
        assert_eq!(taps(3), &FILTER_3);
        assert_eq!(taps(1), &FILTER_5_NO_OP);
        assert_eq!(aligned_stride(1), 8);
        assert_eq!(aligned_stride(8), 8);
        assert_eq!(aligned_stride(321), 328);
    }

    #[test]
    fn mean_abs_diff_and_half_size() {
        let a = plane(10, 6, |x, y| (x * y) as f32);
        let b = plane(10, 6, |x, y| {
            (x * y) as f32 + if x % 2 == 0 { 1.5 } else { -0.5 }
        });
        // Half the samples differ by 1.5, half by 0.5.
        assert_eq!(motion(&a, &b, false).unwrap(), 1.0);
        assert_eq!(motion(&a, &a, true).unwrap(), 0.0);
        // A constant offset survives bilinear halving unchanged.
        let c = plane(10, 6, |x, y| (x * y) as f32 + 2.0);
        assert_eq!(motion(&a, &c, true).unwrap(), 4.0);
        let small = plane(9, 6, |_, _| 0.0);
        assert!(motion(&a, &small, false).is_err());
    }
}
