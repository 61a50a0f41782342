//! Float ADM ("float_adm"): detail-loss (adm2), additive-impairment (aim) and their blend
//! (adm3) on float luma, bit-exact with libvmaf's scalar `float_adm.c`.
//!
//! [`cpu::compute`] does the per-pixel work and pools it per scale; this module derives the
//! CSF weights from the options and turns the pooled sums into scores.
//!
//! Deliberate deviation: when the denominator is 0 upstream leaves the AIM score
//! uninitialised; here it is 0 (as for the integer extractor).

pub mod cpu;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::f64::consts::PI;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::feature::adm::tables::{self, CsfMode};
use crate::feature::ssim::tools::{check_pair, luma_scaler};
use crate::feature::{c_max, c_min, Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::picture::{PictureData, PlaneRef};

use cpu::{Params, Scratch, Sums, MIN_SIDE, NUM_SCALES};

/// Full feature names this extractor provides, in upstream's order (`adm_scale0` is listed
/// there but never written; the `adm_num*`/`adm_den*` names only with `debug`).
pub const PROVIDED_FEATURES: &[&str] = &[
    "VMAF_feature_adm2_score",
    "VMAF_feature_aim_score",
    "VMAF_feature_adm3_score",
    "VMAF_feature_adm_scale0_score",
    "VMAF_feature_adm_scale1_score",
    "VMAF_feature_adm_scale2_score",
    "VMAF_feature_adm_scale3_score",
    "adm_num",
    "adm_den",
    "adm_scale0",
    "adm_num_scale0",
    "adm_den_scale0",
    "adm_num_scale1",
    "adm_den_scale1",
    "adm_num_scale2",
    "adm_den_scale2",
    "adm_num_scale3",
    "adm_den_scale3",
];

/// Option table, in upstream's order, with its names, aliases, defaults and ranges. Feature
/// names list the non-default parameters sorted by option name, as upstream does.
static OPTIONS: [OptSpec; 23] = [
    OptSpec::boolean("debug", None, false, false),
    OptSpec::double("adm_enhn_gain_limit", Some("egl"), 100.0, 1.0, 100.0, true),
    OptSpec::double("adm_norm_view_dist", Some("nvd"), 3.0, 0.75, 24.0, true),
    OptSpec::double("adm_noise_weight", Some("nw"), 0.03125, 0.0, 1500.0, true),
    OptSpec::double("adm_csf_scale", Some("scf"), 1.0, 0.0, 50.0, true),
    OptSpec::double("adm_csf_diag_scale", Some("scfd"), 1.0, 0.0, 50.0, true),
    // Upstream's alias here is `rdf` (the integer extractor's is `rdh`).
    OptSpec::int(
        "adm_ref_display_height",
        Some("rdf"),
        1080,
        1.0,
        4320.0,
        true,
    ),
    OptSpec::int("adm_csf_mode", Some("csf"), 0, 0.0, 9.0, true),
    OptSpec::int("adm_bypass_cm", Some("bcm"), 0, 0.0, 1.0, true),
    OptSpec::boolean("adm_adm3_apply_hm", Some("aah"), false, true),
    OptSpec::double("adm_p_norm", Some("apn"), 3.0, 1.0, 20.0, true),
    OptSpec::double("adm_dlm_weight", Some("dlmw"), 0.5, 0.0, 1.0, true),
    OptSpec::double("adm_min_val", Some("min"), 0.0, 0.0, 1.0, true),
    OptSpec::double("adm_f1s0", Some("f1s0"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f1s1", Some("f1s1"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f1s2", Some("f1s2"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f1s3", Some("f1s3"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f2s0", Some("f2s0"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f2s1", Some("f2s1"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f2s2", Some("f2s2"), -1.0, -1.0, 10.0, true),
    OptSpec::double("adm_f2s3", Some("f2s3"), -1.0, -1.0, 10.0, true),
    // The default -1 (no scale skipped) lies outside the range a caller may set.
    OptSpec::int("adm_skip_aim_scale", Some("sasc"), -1, 0.0, 3.0, true),
    OptSpec::boolean("adm_skip_scale0", Some("ssz"), false, true),
];

/// The CSF of the DLM paper (Li et al. 2011), evaluated at the nominal frequency of wavelet
/// level `lambda`, for the h/v bands or (with the oblique effect) the diagonal one.
fn dlm_csf(lambda: usize, nvd: f64, rdh: i32, diagonal: bool) -> f32 {
    let ppd = (nvd * f64::from(rdh) * PI / 180.0) as f32;
    let mut sf = (f64::from(ppd) / tables::pow(2.0, (lambda + 1) as f64)) as f32;
    if diagonal {
        sf = (f64::from(sf) / 0.7) as f32;
    }
    let sf = f64::from(sf);
    ((0.31 + 0.69 * sf) * (-0.29 * sf).exp()) as f32
}

/// The CSF weights `[h/v, d]` of `scale`: mode 1 is Barten's CSF, mode 2 the DLM one, every
/// other mode Watson's noise-floor model; a non-negative `f1s<scale>`/`f2s<scale>` overrides.
fn csf_weights(o: &Opts, scale: usize) -> Result<[f32; 2]> {
    let nvd = o.double("adm_norm_view_dist");
    let rdh = o.int("adm_ref_display_height");
    let mut f = match o.int("adm_csf_mode") {
        2 => [
            dlm_csf(scale, nvd, rdh, false),
            dlm_csf(scale, nvd, rdh, true),
        ],
        m => {
            let mode = if m == 1 {
                CsfMode::Barten
            } else {
                CsfMode::Watson97
            };
            let (scf, scfd) = (o.double("adm_csf_scale"), o.double("adm_csf_diag_scale"));
            tables::csf_factors(mode, scale, nvd, rdh, scf, scfd)
                .ok_or_else(|| Error::inval("float_adm: no CSF weights"))?
        }
    };
    for (k, v) in f.iter_mut().enumerate() {
        let user = o.double(&format!("adm_f{}s{scale}", k + 1));
        if user >= 0.0 {
            *v = user as f32;
        }
    }
    Ok(f)
}

/// One frame's scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatAdmScores {
    pub adm2: f64,
    pub aim: f64,
    pub adm3: f64,
    /// Per-scale ratio `num_scale / den_scale`.
    pub scale: [f64; NUM_SCALES],
    pub sums: Sums,
}

/// The float_adm extractor.
pub struct FloatAdm {
    opts: Opts,
    params: Params,
    debug: bool,
    dlm_weight: f64,
    min_val: f64,
    apply_hm: bool,
    /// Scratch buffers of finished calls, reused by later ones (any thread).
    pool: Mutex<Vec<Scratch>>,
}

impl FloatAdm {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, dict)?;
        let mut rfactor = [[0f32; 3]; NUM_SCALES];
        for (s, r) in rfactor.iter_mut().enumerate() {
            let [hv, d] = csf_weights(&o, s)?;
            *r = [hv, hv, d];
        }
        let params = Params {
            egl: o.double("adm_enhn_gain_limit"),
            noise_weight: o.double("adm_noise_weight"),
            bypass_cm: o.int("adm_bypass_cm") != 0,
            p_norm: o.double("adm_p_norm"),
            skip_aim_scale: o.int("adm_skip_aim_scale"),
            skip_scale0: o.bool("adm_skip_scale0"),
            rfactor,
        };
        Ok(FloatAdm {
            debug: o.bool("debug"),
            dlm_weight: o.double("adm_dlm_weight"),
            min_val: o.double("adm_min_val"),
            apply_hm: o.bool("adm_adm3_apply_hm"),
            params,
            opts: o,
            pool: Mutex::new(Vec::new()),
        })
    }

    /// The scores of one frame's pooled sums.
    fn scores(&self, s: &Sums) -> FloatAdmScores {
        let (adm2, aim) = if s.den == 0.0 {
            (1.0, 0.0)
        } else {
            (s.num / s.den, c_min(s.aim_num / s.aim_den, 1.0))
        };
        let adm3 = if self.apply_hm {
            c_max(2.0 * adm2 * aim / (adm2 + aim), self.min_val)
        } else {
            let w = self.dlm_weight;
            c_max(adm2 * w + (1.0 - aim) * (1.0 - w), self.min_val)
        };
        FloatAdmScores {
            adm2,
            aim,
            adm3,
            scale: std::array::from_fn(|i| f64::from(s.num_scale[i]) / f64::from(s.den_scale[i])),
            sums: *s,
        }
    }

    /// Scores of one picture pair.
    pub fn compute(&self, r: &PictureData, d: &PictureData) -> Result<FloatAdmScores> {
        check_pair("float_adm", r, d)?;
        let (w, h) = (r.w[0], r.h[0]);
        if w < MIN_SIDE || h < MIN_SIDE {
            return Err(Error::inval(format!(
                "float_adm: {w}x{h} is too small (both sides must be at least {MIN_SIDE})"
            )));
        }
        let mut sc = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        sc.fit(w, h)?;
        for (pic, dst) in [r, d].into_iter().zip(sc.src.iter_mut()) {
            luma_centred(pic, dst)?;
        }
        let sums = cpu::compute(&mut sc, w, h, &self.params);
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(sc);
        Ok(self.scores(&sums))
    }
}

/// Writes `pic`'s luma into `dst` (stride = width) as upstream's float extractors see it:
/// scaled to 8 bits (a float division by 2^(bpc-8)), then offset by -128.
fn luma_centred(pic: &PictureData, dst: &mut [f32]) -> Result<()> {
    let (w, h, stride) = (pic.w[0], pic.h[0], pic.stride[0]);
    let short = || Error::inval("float_adm: picture plane shorter than its size");
    let need = (h - 1) * stride + w;
    match pic.plane(0) {
        PlaneRef::U8(p) => {
            let p = p.get(..need).ok_or_else(short)?;
            for (row, out) in p.chunks(stride).zip(dst.chunks_exact_mut(w)) {
                for (o, &v) in out.iter_mut().zip(&row[..w]) {
                    *o = f32::from(v) - 128.0;
                }
            }
        }
        PlaneRef::U16(p) => {
            let p = p.get(..need).ok_or_else(short)?;
            let scaler = luma_scaler(pic.bpc)?;
            for (row, out) in p.chunks(stride).zip(dst.chunks_exact_mut(w)) {
                for (o, &v) in out.iter_mut().zip(&row[..w]) {
                    *o = f32::from(v) / scaler - 128.0;
                }
            }
        }
    }
    Ok(())
}

impl Extractor for FloatAdm {
    fn host_planes(&self) -> u8 {
        crate::feature::LUMA
    }

    fn name(&self) -> &'static str {
        "float_adm"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let s = self.compute(input.reference, input.distorted)?;
        let mut push = |name: &str, v: f64| out.push((self.opts.feature_name(name), v));
        push("VMAF_feature_adm2_score", s.adm2);
        push("VMAF_feature_aim_score", s.aim);
        push("VMAF_feature_adm3_score", s.adm3);
        for (i, v) in s.scale.iter().enumerate() {
            push(PROVIDED_FEATURES[3 + i], *v);
        }
        if self.debug {
            // `adm` is not a provided feature, so upstream stores it under its plain name.
            out.push(("adm".to_string(), s.adm2));
            let mut push = |name: &str, v: f64| out.push((self.opts.feature_name(name), v));
            push("adm_num", s.sums.num);
            push("adm_den", s.sums.den);
            for i in 0..NUM_SCALES {
                push(
                    PROVIDED_FEATURES[10 + 2 * i],
                    f64::from(s.sums.num_scale[i]),
                );
                push(
                    PROVIDED_FEATURES[11 + 2 * i],
                    f64::from(s.sums.den_scale[i]),
                );
            }
        }
        Ok(())
    }
}
