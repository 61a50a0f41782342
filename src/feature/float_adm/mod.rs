//! Float ADM ("float_adm"): detail-loss (adm2), additive-impairment (aim) and their blend
//! (adm3) on float luma, bit-exact with libvmaf's scalar `float_adm.c`.
//!
//! [`cpu::compute`] does the per-pixel work and pools it per scale; this module derives the
//! CSF weights from the options and turns the pooled sums into scores.
//!
//! Deliberate deviations: when the denominator is 0 upstream leaves the AIM score
//! uninitialised, here it is 0 (as for the integer extractor); frames with a side below 17
//! are refused, where upstream's masking filter reads past the coarsest band.

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
    if stride < w {
        return Err(short());
    }
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
    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::{Picture, PixelFormat};
    use crate::testutil::{expected_float, load_parity_clip, noise_picture};
    use std::sync::Arc;

    fn with(opts: &[(&str, &str)]) -> Result<FloatAdm> {
        let mut d = Dict::new();
        for (k, v) in opts {
            d.set(k, v);
        }
        FloatAdm::new(&d)
    }

    fn run(x: &FloatAdm, r: &Picture, d: &Picture) -> Result<Scores> {
        let mut out = Scores::new();
        x.extract(&FrameInput::pair(0, r, d), &mut out)?;
        Ok(out)
    }

    /// Values as upstream prints them (6 decimals).
    fn printed(v: f64) -> f64 {
        format!("{v:.6}").parse().unwrap()
    }

    /// Every frame of `clip` against upstream's `float_features` log, all seven scores.
    fn check_clip(clip: &str) {
        let x = with(&[]).unwrap();
        let log = expected_float(&format!("{clip}.float_features.json"));
        let (refs, dists) = load_parity_clip(clip);
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
            let out = run(&x, r, d).unwrap();
            assert_eq!(out.len(), 7);
            for (name, v) in out {
                let key = crate::feature::alias::alias(&name);
                let want = log["frames"][i]["metrics"][key].as_f64().unwrap();
                assert_eq!(printed(v), want, "{clip} frame {i} {key}");
            }
        }
    }

    #[test]
    fn parity_12_bit() {
        check_clip("natural_320x180_420p12");
    }

    #[test]
    fn parity_444_and_odd_chroma() {
        check_clip("testsrc_480x270_444p8");
        check_clip("testsrc_321x241_420p8");
    }

    /// Noise pictures of the smallest accepted size and an odd 10-bit one, against values
    /// upstream printed for the same luma (written out as raw 4:4:4 files, padding dropped).
    #[test]
    fn smallest_and_odd_sizes_match_upstream() {
        let pair = |w, h, bpc| {
            (
                noise_picture(PixelFormat::Yuv444p, bpc, w, h, 1),
                noise_picture(PixelFormat::Yuv444p, bpc, w, h, 2),
            )
        };
        let (r, d) = pair(17, 17, 8);
        let out = run(&with(&[("debug", "true")]).unwrap(), &r, &d).unwrap();
        let want = [
            ("adm2", 0.294236),
            ("aim", 0.408968),
            ("adm3", 0.442634),
            ("adm_scale0", 0.427065),
            ("adm_scale1", 0.346771),
            ("adm_scale2", 0.19236),
            ("adm_scale3", 0.270404),
            ("adm", 0.294236),
            ("adm_num", 28.971146),
            ("adm_den", 98.462219),
            ("adm_num_scale0", 8.288151),
            ("adm_den_scale0", 19.407255),
            ("adm_num_scale1", 7.164541),
            ("adm_den_scale1", 20.660715),
            ("adm_num_scale2", 5.598946),
            ("adm_den_scale2", 29.106529),
            ("adm_num_scale3", 7.919508),
            ("adm_den_scale3", 29.28772),
        ];
        assert_eq!(out.len(), want.len());
        // Upstream printed these on an AMD host; another CPU's reciprocal estimates move the
        // last digits (see `cpu::reciprocal_fingerprint`), as they move upstream's own.
        let same_cpu = cpu::reciprocal_fingerprint() == 0x7e3f_eb9b_27d2_f531;
        let close = |got: f64, want: f64| {
            if same_cpu {
                got == want
            } else {
                (got - want).abs() <= 1e-5 * want.abs().max(1.0)
            }
        };
        for ((name, v), (key, w)) in out.iter().zip(want) {
            assert_eq!(crate::feature::alias::alias(name), key);
            assert!(close(printed(*v), w), "{key}: {} against {w}", printed(*v));
        }

        let (r, d) = pair(19, 31, 10);
        let x = with(&[
            ("adm_p_norm", "2.5"),
            ("adm_csf_mode", "2"),
            ("adm_enhn_gain_limit", "1.2"),
        ])
        .unwrap();
        let out = run(&x, &r, &d).unwrap();
        let want = [
            ("adm2", 0.116044),
            ("aim", 0.804636),
            ("adm3", 0.155704),
            ("adm_scale0", 0.663694),
            ("adm_scale1", 0.263467),
            ("adm_scale2", 0.13658),
            ("adm_scale3", 0.004775),
        ];
        for ((name, v), (key, w)) in out.iter().zip(want) {
            assert_eq!(*name, format!("{key}_csf_2_egl_1.2_apn_2.5"));
            assert!(close(printed(*v), w), "{key}: {} against {w}", printed(*v));
        }
    }

    #[test]
    fn names_follow_upstream() {
        let x = with(&[]).unwrap();
        assert_eq!(x.dedup_key(), "float_adm");
        assert_eq!(
            x.feature_name("VMAF_feature_adm2_score"),
            "VMAF_feature_adm2_score"
        );
        // Sorted by option name, not by alias; the display height's alias is `rdf`.
        let x = with(&[
            ("adm_noise_weight", "0.02"),
            ("adm_min_val", "0.5"),
            ("adm_dlm_weight", "0.7"),
            ("adm_p_norm", "2.0"),
            ("adm_csf_scale", "1.5"),
            ("adm_csf_diag_scale", "0.8"),
        ])
        .unwrap();
        assert_eq!(
            x.feature_name("VMAF_feature_adm2_score"),
            "adm2_scfd_0.8_scf_1.5_dlmw_0.7_min_0.5_nw_0.02_apn_2"
        );
        let x = with(&[
            ("adm_skip_scale0", "true"),
            ("adm_skip_aim_scale", "1"),
            ("adm_ref_display_height", "2160"),
            ("adm_adm3_apply_hm", "true"),
            ("adm_bypass_cm", "1"),
        ])
        .unwrap();
        assert_eq!(
            x.feature_name("VMAF_feature_adm_scale3_score"),
            "adm_scale3_aah_bcm_1_rdf_2160_sasc_1_ssz"
        );
        assert_eq!(x.dedup_key(), "float_adm_aah_bcm_1_rdf_2160_sasc_1_ssz");
        assert_eq!(
            crate::feature::extractor_for_feature("VMAF_feature_adm3_score"),
            Some("float_adm")
        );
    }

    #[test]
    fn bad_options_are_refused() {
        for (k, v) in [
            ("adm_csf_mode", "10"),
            ("adm_skip_aim_scale", "4"),
            ("adm_skip_aim_scale", "-1"),
            ("adm_p_norm", "0.5"),
            ("adm_f1s0", "-2"),
            ("adm_enhn_gain_limit", "0.5"),
            ("adm_bypass_cm", "2"),
            ("adm_ref_display_height", "0"),
            ("debug", "1"),
        ] {
            assert!(with(&[(k, v)]).is_err(), "{k}={v}");
        }
        // Modes 3-9 are accepted and weigh like Watson's model (mode 0).
        let w0 = with(&[]).unwrap().params.rfactor;
        assert_eq!(with(&[("adm_csf_mode", "7")]).unwrap().params.rfactor, w0);
        let p = with(&[("adm_f1s0", "0.5"), ("adm_f2s3", "0")])
            .unwrap()
            .params;
        assert_eq!(p.rfactor[0], [0.5, 0.5, w0[0][2]]);
        assert_eq!(p.rfactor[3], [w0[3][0], w0[3][1], 0.0]);
        assert_eq!(p.rfactor[1..3], w0[1..3]);
    }

    #[test]
    fn debug_names_and_skipped_scale() {
        let x = with(&[("debug", "true"), ("adm_skip_scale0", "true")]).unwrap();
        let (refs, dists) = load_parity_clip("natural_320x180_420p12");
        let out = run(&x, &refs[0], &dists[0]).unwrap();
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        let mut want: Vec<String> = PROVIDED_FEATURES[..7]
            .iter()
            .map(|f| x.feature_name(f))
            .collect();
        // `adm` is not a provided feature: it keeps its plain name.
        want.push("adm".into());
        want.extend(
            PROVIDED_FEATURES[7..]
                .iter()
                .filter(|f| **f != "adm_scale0")
                .map(|f| x.feature_name(f)),
        );
        assert_eq!(names, want);
        assert_eq!(names[8], "adm_num_ssz");
        let v = |n: &str| out.iter().find(|(k, _)| k == n).unwrap().1;
        assert_eq!(v("adm_num_scale0_ssz"), 0.0);
        assert_eq!(v("adm_den_scale0_ssz"), f64::from(1e-10f32));
        assert_eq!(v("adm_scale0_ssz"), 0.0);
        assert_eq!(v("adm"), v("adm2_ssz"));
        let sum: f64 = (0..4).map(|i| v(&format!("adm_num_scale{i}_ssz"))).sum();
        assert_eq!(v("adm_num_ssz"), sum);
    }

    #[test]
    fn flat_pictures_without_noise_floor_score_one() {
        // Zero detail and no noise floor: the denominator is 0, adm2 is 1 and aim 0 (so adm3 1).
        let flat = |v| {
            let mut p = PictureData::new(PixelFormat::Yuv420p, 8, 40, 24).unwrap();
            p.plane_u8_mut(0).fill(v);
            Arc::new(p)
        };
        let x = with(&[("adm_noise_weight", "0")]).unwrap();
        let out = run(&x, &flat(90), &flat(90)).unwrap();
        assert_eq!(out[0].1, 1.0);
        assert_eq!(out[1].1, 0.0);
        assert_eq!(out[2].1, 1.0);
        // With the default noise floor almost only the floor remains (the high-pass taps do
        // not sum to exactly 0 in float).
        let out = run(&with(&[]).unwrap(), &flat(10), &flat(200)).unwrap();
        assert!((out[0].1 - 1.0).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn rejects_small_mismatched_and_unfetched_pictures() {
        let x = with(&[]).unwrap();
        let pic = |w, h, bpc| Arc::new(PictureData::new(PixelFormat::Yuv420p, bpc, w, h).unwrap());
        for (r, d) in [
            (pic(16, 40, 8), pic(16, 40, 8)),
            (pic(40, 16, 8), pic(40, 16, 8)),
            (pic(40, 40, 8), pic(40, 40, 10)),
            (pic(40, 40, 8), pic(42, 40, 8)),
            (pic(40, 40, 9), pic(40, 40, 9)),
        ] {
            assert!(run(&x, &r, &d).is_err());
        }
        let out = run(&x, &pic(17, 17, 16), &pic(17, 17, 16)).unwrap();
        assert_eq!(out.len(), 7);
    }
}
