//! Float moments (libvmaf's `float_moment` extractor): the mean and the mean square of each
//! luma plane, on the 8-bit float scale.
//!
//! Upstream declares a single provided feature, `float_moment`, yet stores four scores
//! (`float_moment_{ref,dis}{1st,2nd}`); the declaration is kept, so a model naming one of the
//! four stored names does not find this extractor, as with upstream.
//!
//! Bit-exactness: samples (first moment) and their float squares (second moment) are summed
//! in double in raster order.

use crate::error::Result;
use crate::feature::ssim::tools::{check_pair, luma_to_float, FloatImage};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores, LUMA};

/// Full feature names this extractor declares.
pub const PROVIDED_FEATURES: &[&str] = &["float_moment"];

/// Upstream declares no options; keys given anyway are ignored.
static OPTIONS: [OptSpec; 0] = [];

/// Mean of `f(sample)` over the image, accumulated in double.
fn mean_of(img: &FloatImage, f: impl Fn(f32) -> f32) -> f64 {
    let sum = img
        .data
        .iter()
        .fold(0.0f64, |acc, &v| acc + f64::from(f(v)));
    sum / (img.w * img.h) as f64
}

/// First moment (mean sample value).
pub(crate) fn first_moment(img: &FloatImage) -> f64 {
    mean_of(img, |v| v)
}

/// Second moment (mean of the float squares).
pub(crate) fn second_moment(img: &FloatImage) -> f64 {
    mean_of(img, |v| v * v)
}

/// The float_moment extractor.
#[derive(Debug)]
pub struct FloatMoment;

impl FloatMoment {
    /// Creates the extractor (it has no options).
    pub fn new(opts: &Dict) -> Result<Self> {
        Opts::parse(&OPTIONS, opts)?;
        Ok(FloatMoment)
    }
}

impl Extractor for FloatMoment {
    fn name(&self) -> &'static str {
        "float_moment"
    }

    fn planes_read(&self) -> u8 {
        LUMA
    }

    fn host_planes(&self) -> u8 {
        LUMA
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair("float_moment", r, d)?;
        let (rf, df) = (luma_to_float(r)?, luma_to_float(d)?);
        out.extend([
            ("float_moment_ref1st".to_string(), first_moment(&rf)),
            ("float_moment_dis1st".to_string(), first_moment(&df)),
            ("float_moment_ref2nd".to_string(), second_moment(&rf)),
            ("float_moment_dis2nd".to_string(), second_moment(&df)),
        ]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::float_psnr::tests::run;

    #[test]
    fn matches_upstream_bit_for_bit() {
        let x = FloatMoment::new(&Dict::new()).unwrap();
        // Upstream's ref1st, dis1st, ref2nd, dis2nd for the shared test pattern.
        for (bpc, w, h, want) in [
            (
                8,
                37,
                23,
                [
                    0x405fe573d11259a5_u64,
                    0x405fe01ce103e923,
                    0x40d54021776d32d7,
                    0x40d53a6f00e7081f,
                ],
            ),
            (
                10,
                29,
                17,
                [
                    0x405fbb325e81d144,
                    0x405fbbf175dfce26,
                    0x40d521bc3c3c3c3c,
                    0x40d523b9e81d1440,
                ],
            ),
            (
                12,
                16,
                9,
                [
                    0x405f55c71c71c71c,
                    0x405f4f8e38e38e39,
                    0x40d4c146aaaaaaab,
                    0x40d4b70eaaaaaaab,
                ],
            ),
            (
                16,
                5,
                3,
                [
                    0x4060400000000000,
                    0x40603bbbbbbbbbbc,
                    0x40d60b8000000000,
                    0x40d629ddddddddde,
                ],
            ),
        ] {
            let out = run(&x, bpc, w, h, false).unwrap();
            let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                [
                    "float_moment_ref1st",
                    "float_moment_dis1st",
                    "float_moment_ref2nd",
                    "float_moment_dis2nd"
                ]
            );
            let got: Vec<u64> = out.iter().map(|(_, v)| v.to_bits()).collect();
            assert_eq!(got, want, "{bpc}-bit {w}x{h}: {out:?}");
        }
    }

    #[test]
    fn rejects_unsupported_depth() {
        let x = FloatMoment::new(&Dict::new()).unwrap();
        assert!(run(&x, 9, 4, 4, false).is_err());
    }
}
