//! cambi: Netflix's contrast-aware multi-scale banding index (no-reference, luma only).
//!
//! Per frame, the distorted luma is brought to the encoding resolution at 10 bits (nearest
//! neighbour decimation, anti-dithering below 10-bit encodes), a mask of flat areas is taken
//! from 7x7 counts of zero-derivative pixels, and then over five dyadic scales: a 3x3 mode
//! filter, a per-pixel "c-value" from windowed histograms of nearby luma levels, and top-k
//! spatial pooling. The scale scores are weighted 16:8:4:2:1 and normalised by the window area.
//!
//! Everything up to the c-values is integer; the c-values are `f32` products with upstream's
//! reciprocal table, and pooling sums them in `f64` in the order left by upstream's
//! quickselect, which is therefore reproduced exactly.
//!
//! Layout: `cpu.rs` is the CPU reference (tables, thresholds, [`Setup`], every per-frame stage
//! and the pooling), with each stage dispatching to its SIMD form at the context's CPU level:
//! `lanes.rs` holds the vector forms (and the c-value pass reorganised around merged histogram
//! updates), `x86.rs` and `aarch64.rs` compile them per instruction set and add the explicit
//! kernels, all bit-exact with the reference. `gpu.rs` runs the same stages on the device
//! (kernels/cambi.hip); this file holds the extractor, its options, the setup from options and
//! first picture, and the dispatch.

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::feature::alias::alias;
#[cfg(target_arch = "aarch64")]
mod aarch64;
mod cpu;
pub mod gpu;
#[cfg(test)]
mod hipcpu_tests;
mod lanes;
pub(crate) mod launch;
#[cfg(target_arch = "x86_64")]
mod x86;
use crate::feature::options::{fmt_g, normalize_value};
use crate::feature::{c_min, Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::job::Queued;
use crate::gpu::GpuSet;
use crate::picture::{Picture, PictureData};

#[cfg(test)]
use cpu::cpu_c_value_maps;
use cpu::{
    adjust_window, decimation_taps, mask_index, reciprocal_lut, scale_sizes, spatial_pooling,
    tvi_for_diff, vlt_luma, weighted_score, Eotf, Setup, Work, CONTRAST_WEIGHTS, MIN_WIDTH_HEIGHT,
    NUM_SCALES, RECIPROCAL_LUT_SIZE,
};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["Cambi_feature_cambi_score"];

/// Extra scores written in full-reference mode (never renamed by options).
const SOURCE_NAME: &str = "cambi_source";
const FULL_REF_NAME: &str = "cambi_full_reference";

const DEFAULT_TOPK: f64 = 0.6;
const DEFAULT_EOTF: &str = "bt1886";

static OPTIONS: [OptSpec; 13] = [
    OptSpec::double("cambi_max_val", Some("cmxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::int("enc_width", Some("encw"), 0, 180.0, 7680.0, true),
    OptSpec::int("enc_height", Some("ench"), 0, 150.0, 7680.0, true),
    OptSpec::int("enc_bitdepth", Some("encbd"), 0, 6.0, 16.0, true),
    OptSpec::int("src_width", Some("srcw"), 0, 320.0, 7680.0, true),
    OptSpec::int("src_height", Some("srch"), 0, 200.0, 4320.0, true),
    OptSpec::int("window_size", Some("ws"), 65, 15.0, 127.0, true),
    OptSpec::double("topk", None, DEFAULT_TOPK, 0.0001, 1.0, true),
    OptSpec::double("cambi_topk", Some("ctpk"), DEFAULT_TOPK, 0.0001, 1.0, true),
    OptSpec::double("tvi_threshold", Some("tvit"), 0.019, 0.0001, 1.0, true),
    OptSpec::double(
        "cambi_vis_lum_threshold",
        Some("vlt"),
        0.0,
        0.0,
        300.0,
        true,
    ),
    OptSpec::int("max_log_contrast", Some("mlc"), 2, 0.0, 5.0, true),
    OptSpec::int("cambi_high_res_speedup", Some("hrs"), 0, 0.0, 2160.0, true),
];

/// String options that are feature parameters: (name, alias for stored names).
const STRING_OPTIONS: [(&str, Option<&str>); 2] = [("eotf", None), ("cambi_eotf", Some("ceot"))];

/// The cambi extractor.
pub struct Cambi {
    opts: Opts,
    /// Non-default feature parameters as (option name, key, value text), sorted by name.
    name_params: Vec<(&'static str, &'static str, String)>,
    score_name: String,
    full_ref: bool,
    max_val: f64,
    eotf: String,
    cambi_eotf: String,
    setup: OnceLock<std::result::Result<Setup, String>>,
    gpu: Option<GpuSet>,
    /// Idle CPU work buffers (one per frame in flight at most), so frames do not allocate and
    /// page-fault several picture-sized buffers each.
    works: std::sync::Mutex<Vec<Work>>,
}

impl Cambi {
    /// Creates the extractor from its options. Heatmap dumping is not supported.
    pub fn new(dict: &Dict) -> Result<Self> {
        let opts = Opts::parse(&OPTIONS, dict)?;
        let full_ref = match dict.get("full_ref") {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => return Err(Error::inval(format!("bad value {v:?} for option full_ref"))),
        };
        if dict.get("heatmaps_path").is_some() {
            return Err(Error::NotSupported(
                "cambi: heatmaps_path (heatmap dumping) is not supported".into(),
            ));
        }
        let eotf = dict.get("eotf").unwrap_or(DEFAULT_EOTF).to_string();
        let cambi_eotf = dict.get("cambi_eotf").unwrap_or(DEFAULT_EOTF).to_string();

        let mut name_params = Vec::new();
        for spec in OPTIONS.iter().filter(|s| s.feature_param) {
            let key = spec.alias.unwrap_or(spec.name);
            let text = match spec.default {
                crate::feature::OptValue::Int(d) => {
                    let v = opts.int(spec.name);
                    (v != d).then(|| normalize_value(&v.to_string()))
                }
                crate::feature::OptValue::Double(d) => {
                    let v = opts.double(spec.name);
                    (v != d).then(|| normalize_value(&fmt_g(v)))
                }
                crate::feature::OptValue::Bool(_) => None,
            };
            if let Some(t) = text {
                name_params.push((spec.name, key, t));
            }
        }
        for (name, (value, (_, key))) in [
            ("eotf", (&eotf, STRING_OPTIONS[0])),
            ("cambi_eotf", (&cambi_eotf, STRING_OPTIONS[1])),
        ] {
            if value != DEFAULT_EOTF {
                name_params.push((name, key.unwrap_or(name), value.clone()));
            }
        }
        name_params.sort_by(|a, b| a.0.cmp(b.0));

        let mut c = Cambi {
            max_val: opts.double("cambi_max_val"),
            opts,
            name_params,
            score_name: String::new(),
            full_ref,
            eotf,
            cambi_eotf,
            setup: OnceLock::new(),
            gpu: None,
            works: std::sync::Mutex::default(),
        };
        c.score_name = c.stored_name(PROVIDED_FEATURES[0]);
        Ok(c)
    }

    /// Runs the per-pixel stages on `gpu` when given (pooling stays on the host).
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }

    /// Option-dependent stored name, as libvmaf builds it (string options included).
    fn stored_name(&self, full_name: &str) -> String {
        if self.name_params.is_empty() {
            return full_name.to_string();
        }
        let mut out = alias(full_name).to_string();
        for (_, key, val) in &self.name_params {
            out.push_str(&format!("_{key}_{val}"));
        }
        out
    }

    /// Upstream's `init`, run on the first picture's luma geometry and bit depth.
    fn build_setup(&self, w: usize, h: usize, bpc: u32) -> Result<Setup> {
        let o = &self.opts;
        let (w32, h32) = (w as u32, h as u32);
        let mut enc_bitdepth = o.int("enc_bitdepth") as u32;
        if enc_bitdepth == 0 {
            enc_bitdepth = bpc;
        }
        let (mut enc_w, mut enc_h) = (o.int("enc_width") as u32, o.int("enc_height") as u32);
        if enc_w == 0 || enc_h == 0 {
            (enc_w, enc_h) = (w32, h32);
        }
        let (mut src_w, mut src_h) = (o.int("src_width") as u32, o.int("src_height") as u32);
        if src_w == 0 || src_h == 0 {
            (src_w, src_h) = (w32, h32);
        }
        // A downscaled encode is measured at its own size, never upscaled back.
        if enc_h > h32 || enc_w > w32 {
            (enc_w, enc_h) = (w32, h32);
        }
        if enc_w < MIN_WIDTH_HEIGHT && enc_h < MIN_WIDTH_HEIGHT {
            return Err(Error::inval("cambi: encoding resolution too small"));
        }
        if src_w < MIN_WIDTH_HEIGHT && src_h < MIN_WIDTH_HEIGHT {
            return Err(Error::inval("cambi: source resolution too small"));
        }
        if (src_w > enc_w && src_h < enc_h) || (src_w < enc_w && src_h > enc_h) {
            return Err(Error::inval(
                "cambi: source and encoding aspect ratios are inconsistent",
            ));
        }

        let enc_pix = u64::from(enc_w) * u64::from(enc_h);
        let speedup = match o.int("cambi_high_res_speedup") {
            1080 => enc_pix >= 1920 * 1080,
            1440 => enc_pix >= 2560 * 1440,
            2160 => enc_pix >= 3840 * 2160,
            _ => false,
        };

        let alloc_w = if self.full_ref {
            src_w.max(enc_w)
        } else {
            enc_w
        } as usize;
        let alloc_h = if self.full_ref {
            src_h.max(enc_h)
        } else {
            enc_h
        } as usize;

        let num_diffs = 1usize << o.int("max_log_contrast");
        let diff_weights = CONTRAST_WEIGHTS[..num_diffs].to_vec();

        // A non-default cambi_eotf wins over eotf.
        let eotf_name = if self.cambi_eotf != DEFAULT_EOTF {
            &self.cambi_eotf
        } else {
            &self.eotf
        };
        let eotf = Eotf::from_name(eotf_name)
            .ok_or_else(|| Error::inval(format!("cambi: unknown EOTF {eotf_name:?}")))?;

        let tvi_threshold = o.double("tvi_threshold");
        let tvi = (0..num_diffs)
            .map(|d| {
                let t = tvi_for_diff(d as i32 + 1, tvi_threshold, eotf)?;
                Ok((t as u16).wrapping_add(num_diffs as u16))
            })
            .collect::<Result<Vec<u16>>>()?;
        let vlt_luma = vlt_luma(o.double("cambi_vis_lum_threshold"), eotf)?;

        let window_opt = o.int("window_size") as u32;
        let window = adjust_window(window_opt, enc_w, enc_h, speedup);
        let src_window = adjust_window(window_opt, src_w, src_h, speedup);
        let max_window = window.max(src_window);
        if max_window * max_window >= RECIPROCAL_LUT_SIZE {
            return Err(Error::inval(format!(
                "cambi: window_size {max_window} too large for reciprocal LUT"
            )));
        }

        let lo = i32::from(vlt_luma) - 3 * num_diffs as i32 + 1;
        let band_base = if lo > 0 { lo as u16 } else { 0 };
        let band_size = tvi[num_diffs - 1].wrapping_add(1).wrapping_sub(band_base);

        // Upstream reads topk only when it was changed, else cambi_topk.
        let topk = if o.double("topk") != DEFAULT_TOPK {
            o.double("topk")
        } else {
            o.double("cambi_topk")
        };

        Ok(Setup {
            enc_w: enc_w as usize,
            enc_h: enc_h as usize,
            src_w: src_w as usize,
            src_h: src_h as usize,
            enc_bitdepth,
            window,
            src_window,
            speedup,
            topk,
            diff_weights,
            tvi,
            vlt_luma,
            band_base,
            band_size,
            alloc_w,
            alloc_h,
        })
    }

    fn setup_for(&self, pic: &PictureData) -> Result<&Setup> {
        self.setup
            .get_or_init(|| {
                self.build_setup(pic.w[0], pic.h[0], pic.bpc)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| Error::inval(e.clone()))
    }
}

impl Extractor for Cambi {
    fn planes_read(&self) -> u8 {
        crate::feature::LUMA
    }

    fn host_planes(&self) -> u8 {
        // The GPU path reads device pictures in place and checks the input range there.
        if self.gpu.is_some() {
            0
        } else {
            crate::feature::LUMA
        }
    }

    fn name(&self) -> &'static str {
        "cambi"
    }

    fn feature_name(&self, full_name: &str) -> String {
        self.stored_name(full_name)
    }

    fn queue<'a>(&'a self, input: &FrameInput<'a>) -> Result<Option<Queued<'a, Scores>>> {
        let Some(g) = &self.gpu else { return Ok(None) };
        let setup = self.setup_for(input.distorted)?;
        let state = g.for_frame(input.index);
        let dist = gpu::queue_score(state, setup, input.distorted, false)?;
        let src = if self.full_ref {
            Some(gpu::queue_score(state, setup, input.reference, true)?)
        } else {
            None
        };
        Ok(Some(Box::new(move || {
            let mut out = Scores::new();
            let dist = dist();
            let src = src.map(|q| q());
            self.push_scores(dist?, src.transpose()?, &mut out);
            Ok(out)
        })))
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        if let Some(q) = self.queue(input)? {
            out.extend(q()?);
            return Ok(());
        }
        let setup = self.setup_for(input.distorted)?;
        let mut work = self.works.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut score = |pic: &Picture, is_src: bool| {
            let mut w = match work.take() {
                Some(w) => w,
                None => Work::new(setup)?,
            };
            let r = w.score(setup, pic, is_src, input.cpu);
            work = Some(w);
            r
        };
        let dist_score = score(input.distorted, false);
        let src_score = match (&dist_score, self.full_ref) {
            (Ok(_), true) => Some(score(input.reference, true)),
            _ => None,
        };
        if let Some(w) = work {
            self.works.lock().unwrap_or_else(|e| e.into_inner()).push(w);
        }
        self.push_scores(dist_score?, src_score.transpose()?, out);
        Ok(())
    }
}

impl Cambi {
    /// The stored scores from the distorted picture's score and, in full-reference mode, the
    /// source's.
    fn push_scores(&self, dist_score: f64, src_score: Option<f64>, out: &mut Scores) {
        out.push((self.score_name.clone(), c_min(dist_score, self.max_val)));
        if let Some(src_score) = src_score {
            out.push((SOURCE_NAME.to_string(), c_min(src_score, self.max_val)));
            // C's MAX(0, x) with an integer zero.
            let diff = dist_score - src_score;
            let combined = if 0.0 > diff { 0.0 } else { diff };
            out.push((FULL_REF_NAME.to_string(), c_min(combined, self.max_val)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip, PARITY_CLIPS};

    fn scores(clip: &str, cambi: &Cambi) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, cambi)
    }

    fn check_clip(clip: &str, log: &str, cambi: &Cambi, printed: &str) {
        let log = expected_json(log);
        let got = scores(clip, cambi);
        let n = log["frames"].as_array().unwrap().len();
        assert_eq!(got.len(), n, "{clip}: frame count");
        for (i, s) in got.iter().enumerate() {
            assert_eq!(s.len(), 1);
            assert_eq!(alias(&s[0].0), printed);
            let want = expected_metric(&log, i, printed).unwrap();
            assert_eq!(
                format!("{:.6}", s[0].1),
                format!("{want:.6}"),
                "{clip} frame {i}"
            );
        }
    }

    #[test]
    fn parity_clips_match_upstream() {
        let cambi = Cambi::new(&Dict::new()).unwrap();
        for clip in PARITY_CLIPS {
            // Each clip needs its own instance: upstream fixes the geometry on the first frame.
            let cambi_clip = Cambi::new(&Dict::new()).unwrap();
            check_clip(clip, &format!("{clip}.json"), &cambi_clip, "cambi");
        }
        assert_eq!(cambi.score_name, "Cambi_feature_cambi_score");
    }

    /// The parity clips at every CPU level: scores equal the scalar level's exactly (and so
    /// upstream's), with the default options and with the v1.0.16 model's.
    #[test]
    fn parity_clips_match_at_every_level() {
        use crate::simd::CpuLevel;
        use crate::testutil::extract_clip_at;
        let mut hrs = Dict::new();
        hrs.set("cambi_high_res_speedup", "1080");
        hrs.set("cambi_vis_lum_threshold", "0.06");
        for clip in PARITY_CLIPS {
            let log = expected_json(&format!("{clip}.json"));
            let scalar =
                extract_clip_at(clip, &Cambi::new(&Dict::new()).unwrap(), CpuLevel::SCALAR);
            let scalar_hrs = extract_clip_at(clip, &Cambi::new(&hrs).unwrap(), CpuLevel::SCALAR);
            for cpu in CpuLevel::available() {
                let got = extract_clip_at(clip, &Cambi::new(&Dict::new()).unwrap(), cpu);
                assert_eq!(got, scalar, "{clip} at {cpu}");
                for (i, s) in got.iter().enumerate() {
                    let want = expected_metric(&log, i, "cambi").unwrap();
                    assert_eq!(
                        format!("{:.6}", s[0].1),
                        format!("{want:.6}"),
                        "{clip} frame {i} at {cpu}"
                    );
                }
                let got = extract_clip_at(clip, &Cambi::new(&hrs).unwrap(), cpu);
                assert_eq!(got, scalar_hrs, "{clip} (v1.0.16 options) at {cpu}");
            }
        }
    }

    /// Every option case at every CPU level equals the scalar level exactly (first frame).
    #[test]
    fn options_equal_scalar_at_every_level() {
        use crate::simd::CpuLevel;
        for (clip, opts, _, _) in OPTION_CASES {
            let mut d = Dict::new();
            for kv in opts.split(':') {
                let (k, v) = kv.split_once('=').unwrap();
                d.set(k, v);
            }
            let (refs, dists) = load_parity_clip(clip);
            let run = |cpu| {
                let cambi = Cambi::new(&d).unwrap();
                let mut input = FrameInput::pair(0, &refs[0], &dists[0]);
                input.cpu = cpu;
                let mut out = Scores::new();
                cambi.extract(&input, &mut out).unwrap();
                out
            };
            let want = run(CpuLevel::SCALAR);
            for cpu in CpuLevel::available() {
                assert_eq!(run(cpu), want, "{clip} {opts} at {cpu}");
            }
        }
    }

    #[test]
    fn v1_0_16_model_options_match_upstream() {
        // feature_opts_dicts of vmaf_v1.0.16_3d0h: high-res speedup, clipping, a luminance floor.
        let mut d = Dict::new();
        d.set("cambi_high_res_speedup", "1080");
        d.set("cambi_vis_lum_threshold", "0.06");
        d.set("cambi_max_val", "17.0");
        let cambi = Cambi::new(&d).unwrap();
        assert_eq!(cambi.score_name, "cambi_hrs_1080_cmxv_17_vlt_0.06");
        check_clip(
            "natural_1920x1080_420p8",
            "natural_1920x1080_420p8.vmaf_v1.0.16_3d0h.json",
            &cambi,
            "cambi_hrs_1080_cmxv_17_vlt_0.06",
        );
    }

    /// (clip, options, stored names, per-frame printed values) from upstream's `vmaf` tool
    /// (v3.2.0, scalar path) on the first three frames.
    type OptionCase = (
        &'static str,
        &'static str,
        &'static [&'static str],
        [&'static [f64]; 3],
    );

    const OPTION_CASES: &[OptionCase] = &[
        (
            "natural_1920x1080_420p8",
            "enc_width=960:enc_height=540",
            &["cambi_ench_540_encw_960"],
            [&[1.081384], &[1.071860], &[1.055673]],
        ),
        (
            "natural_1920x1080_420p8",
            "enc_width=1280:enc_height=720",
            &["cambi_ench_720_encw_1280"],
            [&[1.466876], &[1.452434], &[1.462174]],
        ),
        (
            "natural_1920x1080_420p8",
            "cambi_high_res_speedup=1080:eotf=pq:cambi_vis_lum_threshold=1",
            &["cambi_hrs_1080_vlt_1_eotf_pq"],
            [&[1.275845], &[1.382825], &[1.571585]],
        ),
        (
            "natural_640x360_420p10",
            "full_ref=true",
            &["Cambi_feature_cambi_score", SOURCE_NAME, FULL_REF_NAME],
            [
                &[0.168236, 0.020145, 0.148091],
                &[0.181832, 0.020641, 0.161191],
                &[0.165555, 0.019206, 0.146349],
            ],
        ),
        (
            "natural_640x360_420p10",
            "enc_bitdepth=8",
            &["cambi_encbd_8"],
            [&[0.143994], &[0.147767], &[0.144815]],
        ),
        (
            "natural_640x360_420p10",
            "window_size=127:max_log_contrast=5:cambi_vis_lum_threshold=10",
            &["cambi_vlt_10_mlc_5_ws_127"],
            [&[0.052280], &[0.079092], &[0.070241]],
        ),
        (
            "natural_576x324_420p8",
            "eotf=pq:max_log_contrast=3:topk=0.3",
            &["cambi_eotf_pq_mlc_3_topk_0.3"],
            [&[3.370018], &[3.100546], &[3.055687]],
        ),
        (
            "natural_576x324_420p8",
            "cambi_eotf=pq:tvi_threshold=0.05:cambi_topk=0.9",
            &["cambi_ceot_pq_ctpk_0.9_tvit_0.05"],
            [&[0.300411], &[0.271427], &[0.289587]],
        ),
        (
            "natural_576x324_420p8",
            "enc_width=400:enc_height=300",
            &["cambi_ench_300_encw_400"],
            [&[0.262099], &[0.264735], &[0.300109]],
        ),
        (
            "natural_576x324_420p8",
            "window_size=15:max_log_contrast=1",
            &["cambi_mlc_1_ws_15"],
            [&[0.019472], &[0.012029], &[0.011213]],
        ),
        (
            "testsrc_480x270_444p8",
            "full_ref=true:src_width=400:src_height=240:enc_width=460:enc_height=260",
            &[
                "cambi_ench_260_encw_460_srch_240_srcw_400",
                SOURCE_NAME,
                FULL_REF_NAME,
            ],
            [
                &[0.090476, 0.045584, 0.044893],
                &[0.094349, 0.035188, 0.059161],
                &[0.048699, 0.043955, 0.004745],
            ],
        ),
    ];

    #[test]
    fn options_match_upstream() {
        for (clip, opts, names, frames) in OPTION_CASES {
            let mut d = Dict::new();
            for kv in opts.split(':') {
                let (k, v) = kv.split_once('=').unwrap();
                d.set(k, v);
            }
            let cambi = Cambi::new(&d).unwrap();
            let (refs, dists) = load_parity_clip(clip);
            for (i, want) in frames.iter().enumerate() {
                let input = FrameInput::pair(i, &refs[i], &dists[i]);
                let mut out = Scores::new();
                cambi.extract(&input, &mut out).unwrap();
                let got_names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(&got_names[..], *names, "{clip} {opts}");
                for ((_, v), w) in out.iter().zip(want.iter()) {
                    assert_eq!(
                        format!("{v:.6}"),
                        format!("{w:.6}"),
                        "{clip} {opts} frame {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn default_thresholds() {
        let c = Cambi::new(&Dict::new()).unwrap();
        let s = c.build_setup(1920, 1080, 8).unwrap();
        assert_eq!(s.window, 33);
        assert_eq!(s.vlt_luma, 0);
        assert_eq!(s.band_base, 0);
        assert_eq!(s.diff_weights, vec![1, 2, 3, 4]);
        assert!(!s.speedup);
        assert_eq!(mask_index(1920, 1080), 21);
        assert_eq!(mask_index(320, 180), 13);
        assert_eq!(mask_index(100, 100), 7);
    }

    #[test]
    fn names_and_option_errors() {
        let mut d = Dict::new();
        d.set("eotf", "pq");
        d.set("window_size", "63");
        let c = Cambi::new(&d).unwrap();
        assert_eq!(c.score_name, "cambi_eotf_pq_ws_63");
        assert_eq!(c.dedup_key(), "cambi_eotf_pq_ws_63");

        let mut d = Dict::new();
        d.set("full_ref", "true");
        d.set("topk", "0.5");
        let c = Cambi::new(&d).unwrap();
        assert_eq!(c.score_name, "cambi_topk_0.5");
        assert!(c.full_ref);

        let mut d = Dict::new();
        d.set("enc_width", "100");
        assert!(Cambi::new(&d).is_err());

        let mut d = Dict::new();
        d.set("heatmaps_path", "/tmp/x");
        assert!(Cambi::new(&d).is_err());

        // An unknown EOTF fails when the geometry is fixed, as upstream's init does.
        let mut d = Dict::new();
        d.set("cambi_eotf", "hlg");
        let c = Cambi::new(&d).unwrap();
        assert!(c.build_setup(640, 360, 8).is_err());
        // Both sides below 216 are rejected.
        let c = Cambi::new(&Dict::new()).unwrap();
        assert!(c.build_setup(200, 200, 8).is_err());
    }
}
