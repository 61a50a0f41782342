//! float_vif (libvmaf's `float_vif` extractor): visual information fidelity of the luma plane
//! at four scales, in floating point.
//!
//! The luma planes (minus 128, on the 8-bit scale) are optionally resampled by `vif_prescale`
//! (`vif_prescale_method`: nearest, bilinear, bicubic or lanczos4), then compared at four
//! dyadic scales ([`cpu::compute_vif`]). Per scale the score is the numerator over the
//! denominator sum; scales 1-3 are raised to their `vif_scaleN_min_val`. `vif_kernelscale`
//! widens the Gaussian windows, `vif_sigma_nsq` is the neural noise variance,
//! `vif_enhn_gain_limit` caps the gain, and `vif_skip_scale0` skips scale 0 (stored as 0).
//! With `debug` the overall score, the summed numerator and denominator and each scale's sums
//! are stored too.
//!
//! Layout: `cpu.rs` holds the computation; this file the extractor and its options. There is
//! no GPU version.

mod cpu;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::error::{Error, Result};
use crate::feature::speed::scale::{
    min_resample_side, plane_to_float_sized, resample, Plane, ScaleMethod,
};
use crate::feature::speed::valid_kernelscale;
use crate::feature::{c_max, Dict, Extractor, FrameInput, OptSpec, Opts, Scores, LUMA};
use crate::picture::PictureData;
use cpu::{compute_vif, VifParams, SCALES};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[
    "VMAF_feature_vif_scale0_score",
    "VMAF_feature_vif_scale1_score",
    "VMAF_feature_vif_scale2_score",
    "VMAF_feature_vif_scale3_score",
    "vif",
    "vif_num",
    "vif_den",
    "vif_num_scale0",
    "vif_den_scale0",
    "vif_num_scale1",
    "vif_den_scale1",
    "vif_num_scale2",
    "vif_den_scale2",
    "vif_num_scale3",
    "vif_den_scale3",
];

/// Option table, as upstream declares it, less the string option `vif_prescale_method`.
static OPTIONS: [OptSpec; 9] = [
    OptSpec::boolean("debug", None, false, false),
    OptSpec::double("vif_enhn_gain_limit", Some("egl"), 100.0, 1.0, 100.0, true),
    OptSpec::double("vif_kernelscale", Some("ks"), 1.0, 0.1, 4.0, true),
    OptSpec::double("vif_prescale", Some("ps"), 1.0, 0.1, 4.0, true),
    OptSpec::double("vif_scale1_min_val", Some("s1miv"), 0.0, 0.0, 1.0, true),
    OptSpec::double("vif_scale2_min_val", Some("s2miv"), 0.0, 0.0, 1.0, true),
    OptSpec::double("vif_scale3_min_val", Some("s3miv"), 0.0, 0.0, 1.0, true),
    OptSpec::double("vif_sigma_nsq", Some("snsq"), 2.0, 0.0, 5.0, true),
    OptSpec::boolean("vif_skip_scale0", Some("ssclz"), false, true),
];

/// The string option (a feature parameter printed as `_pm_<method>`), and its default.
const OPT_PRESCALE_METHOD: &str = "vif_prescale_method";
const PRESCALE_METHOD_KEY: &str = "pm";
const DEFAULT_PRESCALE_METHOD: &str = "nearest";

/// The float_vif extractor.
pub struct FloatVif {
    opts: Opts,
    /// `vif_prescale_method` as given (it appears in the stored names when not the default).
    method_name: String,
    method: ScaleMethod,
    prescale: f64,
    params: VifParams,
    min_val: [f64; SCALES],
    debug: bool,
    /// Stored names, in [`PROVIDED_FEATURES`] order.
    names: Vec<String>,
}

impl FloatVif {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, dict)?;
        let method_name = dict
            .get(OPT_PRESCALE_METHOD)
            .unwrap_or(DEFAULT_PRESCALE_METHOD)
            .to_string();
        let method = ScaleMethod::parse("float_vif", &method_name)?;
        let kernelscale = o.double("vif_kernelscale");
        if !valid_kernelscale(kernelscale as f32) {
            return Err(Error::inval(format!(
                "float_vif: invalid vif_kernelscale {kernelscale}"
            )));
        }
        let params = VifParams {
            enhn_gain_limit: o.double("vif_enhn_gain_limit"),
            kernelscale: kernelscale as f32,
            skip_scale0: o.bool("vif_skip_scale0"),
            sigma_nsq: o.double("vif_sigma_nsq"),
        };
        let mut x = FloatVif {
            method,
            prescale: o.double("vif_prescale"),
            params,
            min_val: [
                0.0,
                o.double("vif_scale1_min_val"),
                o.double("vif_scale2_min_val"),
                o.double("vif_scale3_min_val"),
            ],
            debug: o.bool("debug"),
            opts: o,
            method_name,
            names: Vec::new(),
        };
        x.names = PROVIDED_FEATURES
            .iter()
            .map(|f| x.feature_name(f))
            .collect();
        Ok(x)
    }

    /// The luma plane of `pic` as prepared for VIF: floats minus 128, resampled to the
    /// prescaled size. Returns the plane and its size (pitch = width).
    fn prepare(&self, pic: &PictureData) -> Result<(Vec<f32>, usize, usize)> {
        let (w, h) = (pic.w[0], pic.h[0]);
        // Upstream rounds in double and truncates to int.
        let sw = (w as f64 * self.prescale + 0.5) as usize;
        let sh = (h as f64 * self.prescale + 0.5) as usize;
        if sw == 0 || sh == 0 {
            return Err(Error::inval(format!(
                "float_vif: {w}x{h} picture prescaled by {} is empty",
                self.prescale
            )));
        }
        let plane = plane_to_float_sized(pic, 0, w, h, w, h, "float_vif")?;
        if (sw, sh) == (w, h) {
            return Ok((plane, w, h));
        }
        let min = min_resample_side(self.method);
        if w < min || h < min {
            return Err(Error::inval(format!(
                "float_vif: {w}x{h} picture is too small to resample with {}",
                self.method_name
            )));
        }
        let mut out = crate::limits::try_filled(sw * sh, 0.0f32, "float_vif: prescaled plane")?;
        resample(
            self.method,
            &Plane::new(&plane, w, h, w),
            &mut out,
            sw,
            sh,
            sw,
        );
        Ok((out, sw, sh))
    }
}

impl Extractor for FloatVif {
    fn name(&self) -> &'static str {
        "float_vif"
    }

    fn feature_name(&self, full_name: &str) -> String {
        if self.method_name == DEFAULT_PRESCALE_METHOD {
            self.opts.feature_name(full_name)
        } else {
            self.opts.feature_name_with(
                full_name,
                &[(OPT_PRESCALE_METHOD, PRESCALE_METHOD_KEY, &self.method_name)],
            )
        }
    }

    fn planes_read(&self) -> u8 {
        LUMA
    }

    fn host_planes(&self) -> u8 {
        LUMA
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        if r.bpc != d.bpc || r.w[0] != d.w[0] || r.h[0] != d.h[0] {
            return Err(Error::inval(
                "float_vif: reference and distorted pictures differ in depth or size",
            ));
        }
        let (rp, w, h) = self.prepare(r)?;
        let (dp, _, _) = self.prepare(d)?;
        let sums = compute_vif(&rp, &dp, w, h, &self.params, input.cpu)?;
        let num = sums.num.map(f64::from);
        let den = sums.den.map(f64::from);

        let skip0 = self.params.skip_scale0;
        let mut scale = [0.0f64; SCALES];
        for (i, s) in scale.iter_mut().enumerate() {
            *s = match i {
                0 if skip0 => 0.0,
                0 => num[0] / den[0],
                _ => c_max(num[i] / den[i], self.min_val[i]),
            };
        }
        let mut values: Vec<f64> = scale.to_vec();
        if self.debug {
            let first = usize::from(skip0);
            let (mut total_num, mut total_den) = (0.0f64, 0.0f64);
            for i in first..SCALES {
                total_num += num[i];
                total_den += den[i];
            }
            let score = if total_den == 0.0 {
                1.0
            } else {
                total_num / total_den
            };
            values.extend([score, total_num, total_den]);
            for i in 0..SCALES {
                // A skipped scale 0 is reported as 0 over -1.
                let (n, dn) = if i == 0 && skip0 {
                    (0.0, -1.0)
                } else {
                    (num[i], den[i])
                };
                values.extend([n, dn]);
            }
        }
        out.extend(self.names.iter().cloned().zip(values));
        Ok(())
    }
}

#[cfg(test)]
mod tests;
