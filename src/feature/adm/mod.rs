//! Integer ADM ("adm"): detail-loss (adm2), additive-impairment (aim) and their blend (adm3),
//! bit-exact with libvmaf's scalar `integer_adm.c`.
//!
//! The work splits in two, so that a GPU backend can share the second half:
//! * [`cpu::accumulate`]: all per-pixel work, integer only (plus the decoupling angle
//!   test), ending in per-scale, per-band accumulators ([`ScaleAccum`]);
//! * [`finish`]: the host-side float finish (`pow`, `powf`, divisions, the combination into
//!   scores), in upstream's evaluation order and types.
//!
//! Deliberate deviation: when the denominator is 0 upstream leaves the AIM score
//! uninitialised; here it is 0.

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub mod cpu;
pub mod gpu;
#[cfg(test)]
pub(crate) mod hipcpu_tests;
mod kernels;
pub(crate) mod launch;
pub mod tables;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::PlaneRef;

pub use cpu::{band_size, scale_shifts, score_window, ScaleAccum, NUM_SCALES};
use tables::CsfMode;

/// Full feature names this extractor provides (the last eleven only with `debug`).
pub const PROVIDED_FEATURES: &[&str] = &[
    "VMAF_integer_feature_adm2_score",
    "VMAF_integer_feature_aim_score",
    "VMAF_integer_feature_adm3_score",
    "integer_adm_scale0",
    "integer_adm_scale1",
    "integer_adm_scale2",
    "integer_adm_scale3",
    "integer_adm",
    "integer_adm_num",
    "integer_adm_den",
    "integer_adm_num_scale0",
    "integer_adm_den_scale0",
    "integer_adm_num_scale1",
    "integer_adm_den_scale1",
    "integer_adm_num_scale2",
    "integer_adm_den_scale2",
    "integer_adm_num_scale3",
    "integer_adm_den_scale3",
];

/// Option table, in upstream's order, with its names, aliases, defaults and ranges.
static OPTIONS: [OptSpec; 12] = [
    OptSpec::boolean("debug", None, false, false),
    OptSpec::double("adm_csf_scale", Some("scf"), 1.0, 0.0, 50.0, true),
    OptSpec::double("adm_csf_diag_scale", Some("scfd"), 1.0, 0.0, 50.0, true),
    OptSpec::double("adm_dlm_weight", Some("dlmw"), 0.5, 0.0, 1.0, true),
    OptSpec::double("adm_enhn_gain_limit", Some("egl"), 100.0, 1.0, 100.0, true),
    OptSpec::double("adm_norm_view_dist", Some("nvd"), 3.0, 0.75, 24.0, true),
    OptSpec::int(
        "adm_ref_display_height",
        Some("rdh"),
        1080,
        1.0,
        4320.0,
        true,
    ),
    OptSpec::int("adm_csf_mode", Some("csf"), 0, 0.0, 3.0, true),
    OptSpec::double("adm_noise_weight", Some("nw"), 0.03125, 0.0, 1500.0, true),
    OptSpec::boolean("adm_skip_aim", None, false, false),
    OptSpec::boolean("adm_skip_scale0", Some("ssz"), false, true),
    OptSpec::double("adm_min_val", Some("min"), 0.0, 0.0, 1.0, true),
];

/// Everything the integer stages and the finish need, derived once from the options.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmParams {
    /// Enhancement gain limit (>= 1).
    pub egl: f64,
    /// Noise weight added (cube-rooted) to every band of numerator and denominator.
    pub noise_weight: f64,
    /// adm3 = adm2 * dlm_weight + (1 - aim) * (1 - dlm_weight) ...
    pub dlm_weight: f64,
    /// ... clipped from below at min_val.
    pub min_val: f64,
    pub skip_aim: bool,
    /// Scale 0 contributes numerator 0 and denominator 1e-10.
    pub skip_scale0: bool,
    /// `pow((double)rfactor, 3)` per scale and band (h, v, d), applied to the denominator.
    pub rf_cube: [[f64; 3]; NUM_SCALES],
    /// Scale-0 integer CSF weights (Q21, Q21, Q23).
    pub irf0: [u16; 3],
    /// Integer CSF weights of scales 1-3 (Q32).
    pub irf123: [[u32; 3]; 3],
}

impl AdmParams {
    /// Derives the parameters. Fails for a blended CSF mode without a table for this viewing
    /// condition (upstream would silently use -EINVAL as the weight).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        csf_mode: CsfMode,
        nvd: f64,
        rdh: i32,
        csf_scale: f64,
        csf_diag_scale: f64,
        egl: f64,
        noise_weight: f64,
        dlm_weight: f64,
        min_val: f64,
        skip_aim: bool,
        skip_scale0: bool,
    ) -> Result<Self> {
        let mut rf = [[0f32; 3]; NUM_SCALES];
        for (s, r) in rf.iter_mut().enumerate() {
            let [hv, d] = tables::csf_factors(csf_mode, s, nvd, rdh, csf_scale, csf_diag_scale)
                .ok_or_else(|| {
                    Error::inval(format!(
                        "adm: adm_csf_mode {csf_mode:?} has no CSF table for \
                         adm_norm_view_dist={nvd} adm_ref_display_height={rdh}"
                    ))
                })?;
            *r = [hv, hv, d];
        }
        let rf_cube = rf.map(|s| s.map(|f| tables::pow(f as f64, 3.0)));
        // At the default viewing condition upstream hard-codes these (the formula would give
        // 36451/49414). Elsewhere it converts like gcc: double -> int32 -> low bits.
        let irf0 = if (nvd * rdh as f64 - 3240.0).abs() < 1.0e-8 && csf_mode == CsfMode::Watson97 {
            [36453, 36453, 49417]
        } else {
            let q = |f: f32, bits: i32| ((f as f64 * 2f64.powi(bits)) as i32) as u16;
            [q(rf[0][0], 21), q(rf[0][1], 21), q(rf[0][2], 23)]
        };
        let irf123 =
            std::array::from_fn(|s| rf[s + 1].map(|f| ((f as f64 * 4294967296.0) as i64) as u32));
        Ok(AdmParams {
            egl,
            noise_weight,
            dlm_weight,
            min_val,
            skip_aim,
            skip_scale0,
            rf_cube,
            irf0,
            irf123,
        })
    }
}

/// One frame's ADM scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdmScores {
    pub adm2: f64,
    pub aim: f64,
    pub adm3: f64,
    /// Per-scale ratio `num_scale / den_scale`.
    pub scale: [f64; NUM_SCALES],
    /// Summed numerator and denominator after the small-value cut (debug outputs).
    pub num: f64,
    pub den: f64,
    pub num_scale: [f64; NUM_SCALES],
    pub den_scale: [f64; NUM_SCALES],
}

fn sum3(v: [f32; 3]) -> f32 {
    v[0] + v[1] + v[2]
}

/// Host finish: turns the accumulators of a `w` x `h` frame into scores.
pub fn finish(w: usize, h: usize, acc: &[ScaleAccum; NUM_SCALES], p: &AdmParams) -> AdmScores {
    let third = 1.0f32 / 3.0;
    let (mut num, mut den, mut aim_num) = (0f64, 0f64, 0f64);
    let mut num_scale = [0f64; NUM_SCALES];
    let mut den_scale = [0f64; NUM_SCALES];
    for s in 0..NUM_SCALES {
        let (ns, ds, ans) = if s == 0 && p.skip_scale0 {
            (0f32, 1e-10f32, 0f32)
        } else {
            let (bw, bh) = band_size(w, h, s);
            let sh = scale_shifts(s, bw, bh);
            let (l, r) = score_window(bw);
            let (t, b) = score_window(bh);
            let area = ((b - t) * (r - l)) as i32 as f64;
            let noise = |nw: f64| ((area * nw) as f32).powf(third);
            let a = &acc[s];

            let den_div = if s == 0 {
                2f64.powf((18 - sh.den_row as i32) as f64)
            } else {
                let e = [32u32, 27, 23][s - 1];
                2f64.powf(e.wrapping_sub(sh.den_row).wrapping_sub(sh.den_cube) as f64)
            };
            let nw = noise(p.noise_weight);
            let csf: [f64; 3] =
                std::array::from_fn(|k| (a.den[k] as f64 / den_div) * p.rf_cube[s][k]);
            let ds = sum3(csf.map(|c| (c as f32).powf(third) + nw));

            // Scale 0 divides in double; scales 1-3 convert the int64 sum to float first.
            let normalise = |v: &[i64; 3]| -> [f32; 3] {
                if s == 0 {
                    let e = [52u32, 52, 57];
                    std::array::from_fn(|k| {
                        let x = e[k].wrapping_sub(sh.cm_cube[k]).wrapping_sub(sh.cm_row);
                        (v[k] as f64 / 2f64.powf(x as f64)) as f32
                    })
                } else {
                    let e = [45u32, 39, 36][s - 1];
                    let x = e.wrapping_sub(sh.cm_cube[0]).wrapping_sub(sh.cm_row);
                    let fs = 2f64.powf(x as f64) as f32;
                    v.map(|n| n as f32 / fs)
                }
            };
            let ns = sum3(normalise(&a.num).map(|f| f.powf(third) + nw));
            let ans = if p.skip_aim {
                0.0
            } else {
                let nw0 = noise(0.0);
                sum3(normalise(&a.aim).map(|f| f.powf(third) + nw0))
            };
            (ns, ds, ans)
        };
        num += ns as f64;
        den += ds as f64;
        aim_num += ans as f64;
        num_scale[s] = ns as f64;
        den_scale[s] = ds as f64;
    }
    let limit = 1e-10 * (w * h) as f64 / (1920.0 * 1080.0);
    if num < limit {
        num = 0.0;
    }
    if den < limit {
        den = 0.0;
    }
    let (adm2, aim) = if den == 0.0 {
        (1.0, 0.0)
    } else {
        (num / den, aim_num / den)
    };
    let blend = adm2 * p.dlm_weight + (1.0 - aim) * (1.0 - p.dlm_weight);
    AdmScores {
        adm2,
        aim,
        adm3: if blend > p.min_val { blend } else { p.min_val },
        scale: std::array::from_fn(|s| num_scale[s] / den_scale[s]),
        num,
        den,
        num_scale,
        den_scale,
    }
}

/// The adm extractor.
pub struct Adm {
    opts: Opts,
    params: AdmParams,
    debug: bool,
    view_ok: bool,
    /// Scratch buffers of finished calls, reused by later ones (any thread).
    pool: Mutex<Vec<cpu::Scratch>>,
    /// GPU used for the integer stages, when one was imported.
    gpu: Option<GpuSet>,
}

impl Adm {
    /// Creates the extractor from its options.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = Opts::parse(&OPTIONS, dict)?;
        let mode = tables::CsfMode::from_int(opts.int("adm_csf_mode"))
            .ok_or_else(|| Error::inval("adm: bad adm_csf_mode"))?;
        let nvd = opts.double("adm_norm_view_dist");
        let rdh = opts.int("adm_ref_display_height");
        let params = AdmParams::new(
            mode,
            nvd,
            rdh,
            opts.double("adm_csf_scale"),
            opts.double("adm_csf_diag_scale"),
            opts.double("adm_enhn_gain_limit"),
            opts.double("adm_noise_weight"),
            opts.double("adm_dlm_weight"),
            opts.double("adm_min_val"),
            opts.bool("adm_skip_aim"),
            opts.bool("adm_skip_scale0"),
        )?;
        Ok(Adm {
            debug: opts.bool("debug"),
            // The 16-bit pipeline cannot represent frequencies below 1080p at 3H.
            view_ok: nvd * rdh as f64 >= 3.0 * 1080.0,
            opts,
            params,
            pool: Mutex::new(Vec::new()),
            gpu: None,
        })
    }

    /// Runs the integer stages on `gpu` when one is given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }

    /// The derived parameters (the GPU tests run the CPU reference with them).
    #[cfg(test)]
    pub(crate) fn params(&self) -> &AdmParams {
        &self.params
    }

    /// Accumulators of one picture pair (validated by the caller).
    /// Checks a frame's pictures and returns their luma planes.
    fn check<'a>(&self, input: &FrameInput<'a>) -> Result<(cpu::Luma<'a>, cpu::Luma<'a>)> {
        let (r, d) = (input.reference, input.distorted);
        let (w, h) = (r.w[0], r.h[0]);
        if d.w[0] != w || d.h[0] != h || d.bpc != r.bpc {
            return Err(Error::inval(
                "adm: reference and distorted pictures differ in size or depth",
            ));
        }
        if w < cpu::MIN_SIDE || h < cpu::MIN_SIDE {
            return Err(Error::inval(format!(
                "adm: {w}x{h} is too small (both sides must be at least {})",
                cpu::MIN_SIDE
            )));
        }
        fn luma(p: PlaneRef<'_>) -> cpu::Luma<'_> {
            match p {
                PlaneRef::U8(x) => cpu::Luma::U8(x),
                PlaneRef::U16(x) => cpu::Luma::U16(x),
            }
        }
        let (lr, ld) = (luma(r.plane(0)), luma(d.plane(0)));
        if matches!(
            (lr, ld),
            (cpu::Luma::U8(_), cpu::Luma::U16(_)) | (cpu::Luma::U16(_), cpu::Luma::U8(_))
        ) {
            return Err(Error::inval("adm: mixed sample sizes"));
        }
        Ok((lr, ld))
    }

    fn accumulate(&self, input: &FrameInput<'_>) -> Result<[ScaleAccum; NUM_SCALES]> {
        let (lr, ld) = self.check(input)?;
        let (r, d) = (input.reference, input.distorted);
        let (w, h) = (r.w[0], r.h[0]);
        let mut scratch = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        let acc = cpu::accumulate(
            input.cpu,
            lr,
            ld,
            r.stride[0],
            d.stride[0],
            w,
            h,
            r.bpc,
            &self.params,
            &mut scratch,
        );
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(scratch);
        Ok(acc)
    }
}

impl Extractor for Adm {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

    fn host_planes(&self) -> u8 {
        crate::feature::LUMA
    }

    fn name(&self) -> &'static str {
        "adm"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.opts.feature_name(full_name)
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        if !self.view_ok {
            return Err(Error::inval(
                "adm: adm_norm_view_dist * adm_ref_display_height must be at least 3240",
            ));
        }
        // The GPU path has one entry, `queue`; extracting there is queueing and waiting.
        if let Some(queued) = self.queue(input)? {
            out.extend(queued()?);
            return Ok(());
        }
        let acc = self.accumulate(input)?;
        self.emit(input.reference.w[0], input.reference.h[0], &acc, out);
        Ok(())
    }

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let Some(g) = &self.gpu else { return Ok(None) };
        if !self.view_ok {
            // `extract` reports it.
            return Ok(None);
        }
        self.check(input)?;
        let q = gpu::queue_accumulate(
            g.for_frame(input.index),
            input.reference,
            input.distorted,
            &self.params,
        )?;
        let (w, h) = (input.reference.w[0], input.reference.h[0]);
        Ok(Some(Box::new(move || {
            let mut out = Scores::new();
            self.emit(w, h, &q()?, &mut out);
            Ok(out)
        })))
    }
}

impl Adm {
    /// The scores of one frame's accumulators.
    fn emit(&self, w: usize, h: usize, acc: &[ScaleAccum; NUM_SCALES], out: &mut Scores) {
        let s = finish(w, h, acc, &self.params);
        let mut push = |name: &str, v: f64| out.push((self.opts.feature_name(name), v));
        push("VMAF_integer_feature_adm2_score", s.adm2);
        push("VMAF_integer_feature_aim_score", s.aim);
        push("VMAF_integer_feature_adm3_score", s.adm3);
        for (i, v) in s.scale.iter().enumerate() {
            push(PROVIDED_FEATURES[3 + i], *v);
        }
        if self.debug {
            push("integer_adm", s.adm2);
            push("integer_adm_num", s.num);
            push("integer_adm_den", s.den);
            for i in 0..NUM_SCALES {
                push(PROVIDED_FEATURES[10 + 2 * i], s.num_scale[i]);
                push(PROVIDED_FEATURES[11 + 2 * i], s.den_scale[i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::alias::alias;
    use crate::simd::CpuLevel;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip};

    /// Runs adm with `opts` on every frame of `clip` and compares the 7 standard outputs,
    /// printed with 6 decimals, with upstream's log `json`.
    fn check(clip: &str, json: &str, opts: &[(&str, &str)]) {
        let mut dict = Dict::new();
        for (k, v) in opts {
            dict.set(k, v);
        }
        let adm = Adm::new(&dict).unwrap();
        let (refs, dists) = load_parity_clip(clip);
        let log = expected_json(json);
        let mut bad = Vec::new();
        let mut n = 0;
        // Every SIMD level must print what upstream printed.
        let levels = CpuLevel::available();
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
            for &level in &levels {
                let mut out = Scores::new();
                let mut input = FrameInput::pair(i, r, d);
                input.cpu = level;
                adm.extract(&input, &mut out).unwrap();
                assert_eq!(out.len(), 7);
                for (name, v) in &out {
                    let key = alias(name);
                    let want = expected_metric(&log, i, key)
                        .unwrap_or_else(|| panic!("{json}: no {key} at frame {i}"));
                    let (got, want) = (format!("{v:.6}"), format!("{want:.6}"));
                    if got != want {
                        bad.push(format!("{level} frame {i} {key}: got {got} want {want}"));
                    }
                    n += 1;
                }
            }
        }
        assert_eq!(n, refs.len() * 7 * levels.len());
        assert!(
            bad.is_empty(),
            "{clip}: {} mismatches:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }

    #[test]
    fn parity_natural_576x324_420p8() {
        check("natural_576x324_420p8", "natural_576x324_420p8.json", &[]);
    }

    #[test]
    fn parity_natural_576x324_420p8_egl1() {
        check(
            "natural_576x324_420p8",
            "natural_576x324_420p8.neg.json",
            &[("adm_enhn_gain_limit", "1.0")],
        );
    }

    #[test]
    fn parity_natural_640x360_420p10() {
        check("natural_640x360_420p10", "natural_640x360_420p10.json", &[]);
    }

    #[test]
    fn parity_natural_320x180_420p12() {
        check("natural_320x180_420p12", "natural_320x180_420p12.json", &[]);
    }

    #[test]
    fn parity_mandel_352x288_422p8() {
        check("mandel_352x288_422p8", "mandel_352x288_422p8.json", &[]);
    }

    #[test]
    fn parity_testsrc_480x270_444p8() {
        check("testsrc_480x270_444p8", "testsrc_480x270_444p8.json", &[]);
    }

    #[test]
    fn parity_testsrc_321x241_420p8() {
        check("testsrc_321x241_420p8", "testsrc_321x241_420p8.json", &[]);
    }

    #[test]
    fn parity_life_320x240_420p8_identical() {
        check("life_320x240_420p8", "life_320x240_420p8.json", &[]);
    }

    #[test]
    fn parity_natural_1920x1080_420p8() {
        check(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.json",
            &[],
        );
    }

    const V1016: [(&str, &str); 5] = [
        ("adm_csf_mode", "2"),
        ("adm_dlm_weight", "0.7"),
        ("adm_enhn_gain_limit", "1"),
        ("adm_min_val", "0.5"),
        ("adm_noise_weight", "0.02"),
    ];

    #[test]
    fn parity_vmaf_v1016_3h_blended_csf() {
        check(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.vmaf_v1.0.16_3d0h.json",
            &V1016,
        );
    }

    #[test]
    fn parity_vmaf_v1016_5h_blended_csf() {
        let mut o = V1016.to_vec();
        o.push(("adm_norm_view_dist", "5"));
        check(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.vmaf_v1.0.16_5d0h.json",
            &o,
        );
    }

    #[test]
    fn names_and_options() {
        let adm = Adm::new(&Dict::new()).unwrap();
        assert_eq!(adm.dedup_key(), "adm");
        assert_eq!(
            adm.feature_name("VMAF_integer_feature_adm2_score"),
            "VMAF_integer_feature_adm2_score"
        );
        let mut d = Dict::new();
        d.set("adm_enhn_gain_limit", "1.0");
        d.set("adm_skip_aim", "true");
        let adm = Adm::new(&d).unwrap();
        assert_eq!(adm.dedup_key(), "adm_egl_1");
        assert_eq!(
            adm.feature_name("integer_adm_scale0"),
            "integer_adm_scale0_egl_1"
        );
        let mut d = Dict::new();
        d.set("adm_skip_scale0", "true");
        d.set("adm_ref_display_height", "2160");
        let adm = Adm::new(&d).unwrap();
        assert_eq!(
            adm.feature_name("VMAF_integer_feature_adm2_score"),
            "integer_adm2_rdh_2160_ssz"
        );
        for (k, v) in [
            ("adm_enhn_gain_limit", "0.5"),
            ("adm_csf_mode", "4"),
            ("adm_norm_view_dist", "30"),
            ("adm_min_val", "2"),
        ] {
            let mut d = Dict::new();
            d.set(k, v);
            assert!(Adm::new(&d).is_err(), "{k}={v}");
        }
        // Blended CSF exists only for a few viewing conditions.
        let mut d = Dict::new();
        d.set("adm_csf_mode", "2");
        d.set("adm_ref_display_height", "1440");
        assert!(Adm::new(&d).is_err());
        for m in ["1", "3"] {
            let mut d = Dict::new();
            d.set("adm_csf_mode", m);
            assert!(Adm::new(&d).is_ok());
        }
    }

    #[test]
    fn default_integer_weights() {
        let p = Adm::new(&Dict::new()).unwrap().params;
        assert_eq!(p.irf0, [36453, 36453, 49417]);
        assert_eq!(
            p.irf123,
            [
                [137373792, 137373792, 61414028],
                [186284160, 186284160, 104783920],
                [196165808, 196165808, 134487184]
            ]
        );
        assert_eq!(p.rf_cube[0][0], 5.2512728537032556e-06);
        assert_eq!(p.rf_cube[0][2], 2.0440797737098173e-07);
    }

    #[test]
    fn rejects_small_or_mismatched_frames_and_low_resolution_viewing() {
        use crate::picture::{PictureData, PixelFormat};
        use std::sync::Arc;
        let pic = |w, h, bpc| Arc::new(PictureData::new(PixelFormat::Yuv420p, bpc, w, h).unwrap());
        let run = |adm: &Adm, r: &crate::picture::Picture, d: &crate::picture::Picture| {
            let input = FrameInput::pair(0, r, d);
            adm.extract(&input, &mut Scores::new())
        };
        let adm = Adm::new(&Dict::new()).unwrap();
        assert!(run(&adm, &pic(32, 64, 8), &pic(32, 64, 8)).is_err());
        assert!(run(&adm, &pic(64, 64, 8), &pic(64, 64, 10)).is_err());
        assert!(run(&adm, &pic(64, 64, 8), &pic(66, 64, 8)).is_err());
        let mut out = Scores::new();
        let (r, d) = (pic(33, 33, 8), pic(33, 33, 8));
        let input = FrameInput::pair(0, &r, &d);
        adm.extract(&input, &mut out).unwrap();
        // Flat pictures: only the noise floor remains, numerator == denominator.
        assert_eq!(out[0].1, 1.0);
        let mut d = Dict::new();
        d.set("adm_norm_view_dist", "1.0");
        let adm = Adm::new(&d).unwrap();
        assert!(run(&adm, &pic(64, 64, 8), &pic(64, 64, 8)).is_err());
    }

    #[test]
    fn debug_outputs_follow_upstream_order() {
        let mut d = Dict::new();
        d.set("debug", "true");
        d.set("adm_skip_scale0", "true");
        let adm = Adm::new(&d).unwrap();
        let (refs, dists) = load_parity_clip("natural_320x180_420p12");
        let input = FrameInput::pair(0, &refs[0], &dists[0]);
        let mut out = Scores::new();
        adm.extract(&input, &mut out).unwrap();
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<String> = PROVIDED_FEATURES
            .iter()
            .map(|f| adm.feature_name(f))
            .collect();
        assert_eq!(names, want);
        let v = |n: &str| {
            out.iter()
                .find(|(k, _)| k == &adm.feature_name(n))
                .unwrap()
                .1
        };
        assert_eq!(v("integer_adm_num_scale0"), 0.0);
        assert_eq!(v("integer_adm_den_scale0"), 1e-10f32 as f64);
        assert_eq!(v("integer_adm_scale0"), 0.0);
        assert_eq!(v("integer_adm"), v("VMAF_integer_feature_adm2_score"));
        let sum: f64 = (0..4)
            .map(|i| v(&format!("integer_adm_num_scale{i}")))
            .sum();
        assert_eq!(v("integer_adm_num"), sum);
    }
}
