//! Float PSNR (libvmaf's `float_psnr` extractor): luma PSNR of samples converted to float on
//! the 8-bit scale (deeper samples divided by 2^(bpc-8)), with a peak and a cap that depend on
//! the bit depth.
//!
//! Bit-exactness: each squared difference is a float product, summed in double in raster
//! order, as upstream's scalar loop does (it is built without fast-math, so the sum is never
//! reassociated).

use crate::error::{Error, Result};
use crate::feature::ssim::tools::{check_pair, luma_to_float, FloatImage};
use crate::feature::{c_max, c_min, Dict, Extractor, FrameInput, OptSpec, Opts, Scores, LUMA};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["float_psnr"];

/// Upstream declares no options; keys given anyway are ignored.
static OPTIONS: [OptSpec; 0] = [];

/// Smallest mean squared error the logarithm sees (so equal pictures reach the cap).
const MSE_FLOOR: f64 = 1e-10;

/// Peak value and PSNR cap at `bpc` for the float PSNR-style scores (`float_psnr`,
/// `float_anpsnr`): the peak is the largest sample on the 8-bit float scale, the cap
/// `6·bpc + 12` dB.
pub(crate) fn peak_and_cap(name: &str, bpc: u32) -> Result<(f64, f64)> {
    match bpc {
        8 => Ok((255.0, 60.0)),
        10 => Ok((255.75, 72.0)),
        12 => Ok((255.9375, 84.0)),
        16 => Ok((255.996_093_75, 108.0)),
        b => Err(Error::inval(format!("{name}: unsupported bit depth {b}"))),
    }
}

/// Mean of the squared sample differences of two same-sized float images.
pub(crate) fn mean_squared_error(r: &FloatImage, d: &FloatImage) -> f64 {
    let sum = r.data.iter().zip(&d.data).fold(0.0f64, |acc, (&a, &b)| {
        let diff = a - b;
        acc + f64::from(diff * diff)
    });
    sum / (r.w * r.h) as f64
}

/// `10·log10(peak² / mse)`, the mse floored at [`MSE_FLOOR`] and the result capped at `cap`.
pub(crate) fn psnr(mse: f64, peak: f64, cap: f64) -> f64 {
    c_min(10.0 * (peak * peak / c_max(mse, MSE_FLOOR)).log10(), cap)
}

/// The float_psnr extractor.
#[derive(Debug)]
pub struct FloatPsnr;

impl FloatPsnr {
    /// Creates the extractor (it has no options).
    pub fn new(opts: &Dict) -> Result<Self> {
        Opts::parse(&OPTIONS, opts)?;
        Ok(FloatPsnr)
    }
}

impl Extractor for FloatPsnr {
    fn name(&self) -> &'static str {
        "float_psnr"
    }

    fn planes_read(&self) -> u8 {
        LUMA
    }

    fn host_planes(&self) -> u8 {
        LUMA
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair("float_psnr", r, d)?;
        let (peak, cap) = peak_and_cap("float_psnr", r.bpc)?;
        let mse = mean_squared_error(&luma_to_float(r)?, &luma_to_float(d)?);
        out.push(("float_psnr".to_string(), psnr(mse, peak, cap)));
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::picture::{Picture, PictureData, PixelFormat};
    use std::sync::Arc;

    /// A deterministic reference sample at (`i`, `j`) for `bpc`, and its distorted version
    /// (a small position-dependent offset, clamped). The upstream values the tests compare
    /// with were computed by linking upstream's float code to a harness filling pictures with
    /// the same pattern.
    fn pattern(bpc: u32, i: usize, j: usize, distorted: bool) -> u16 {
        let unit = 1i64 << (bpc - 8);
        let max = (1i64 << bpc) - 1;
        let (i, j) = (i as i64, j as i64);
        let v = (i * 37 + j * 101 + (i * j * 7) % 53) * unit % (max + 1);
        if !distorted {
            return v as u16;
        }
        (v + ((i * j + 3 * j + i) % 9) * unit - 4 * unit).clamp(0, max) as u16
    }

    /// A 4:4:4 picture of [`pattern`] samples.
    fn pattern_picture(bpc: u32, w: usize, h: usize, distorted: bool) -> Picture {
        let mut pic = PictureData::new(PixelFormat::Yuv444p, bpc, w, h).unwrap();
        let stride = pic.stride[0];
        for i in 0..h {
            for j in 0..w {
                let v = pattern(bpc, i, j, distorted);
                if bpc == 8 {
                    pic.plane_u8_mut(0)[i * stride + j] = v as u8;
                } else {
                    pic.plane_u16_mut(0)[i * stride + j] = v;
                }
            }
        }
        Arc::new(pic)
    }

    /// Reference and distorted pattern pictures (`same`: the distorted one is the reference).
    pub(crate) fn pattern_pair(bpc: u32, w: usize, h: usize, same: bool) -> (Picture, Picture) {
        (
            pattern_picture(bpc, w, h, false),
            pattern_picture(bpc, w, h, !same),
        )
    }

    /// The scores `x` stores for the pattern pair.
    pub(crate) fn run(
        x: &dyn Extractor,
        bpc: u32,
        w: usize,
        h: usize,
        same: bool,
    ) -> Result<Scores> {
        let (r, d) = pattern_pair(bpc, w, h, same);
        let mut out = Scores::new();
        x.extract(&FrameInput::pair(0, &r, &d), &mut out)?;
        Ok(out)
    }

    #[test]
    fn matches_upstream_bit_for_bit() {
        let x = FloatPsnr::new(&Dict::new()).unwrap();
        for (bpc, w, h, same, want) in [
            (8, 37, 23, false, 0x4044044c817d9e2a_u64),
            (10, 29, 17, false, 0x40440fd595090981),
            (12, 16, 9, false, 0x404406aca9cf0cfc),
            (16, 5, 3, false, 0x404418ded97188a0),
            (8, 3, 3, false, 0x4044920fae7f3266),
            // Equal pictures reach the cap, 72 dB at 10 bits.
            (10, 12, 7, true, 72.0f64.to_bits()),
        ] {
            let out = run(&x, bpc, w, h, same).unwrap();
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].0, "float_psnr");
            assert_eq!(
                out[0].1.to_bits(),
                want,
                "{bpc}-bit {w}x{h}: {} vs {}",
                out[0].1,
                f64::from_bits(want)
            );
        }
    }

    #[test]
    fn caps_per_depth() {
        let x = FloatPsnr::new(&Dict::new()).unwrap();
        for (bpc, cap) in [(8, 60.0), (10, 72.0), (12, 84.0), (16, 108.0)] {
            assert_eq!(run(&x, bpc, 8, 8, true).unwrap()[0].1, cap);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let x = FloatPsnr::new(&Dict::new()).unwrap();
        // Depths upstream has no peak for.
        assert!(run(&x, 9, 8, 8, false).is_err());
        // Mismatched sizes.
        let a = pattern_picture(8, 8, 8, false);
        let b = pattern_picture(8, 9, 8, false);
        assert!(x
            .extract(&FrameInput::pair(0, &a, &b), &mut Scores::new())
            .is_err());
        // Unknown option keys are ignored, as upstream ignores them.
        let mut o = Dict::new();
        o.set("foo", "1");
        assert!(FloatPsnr::new(&o).is_ok());
    }
}
