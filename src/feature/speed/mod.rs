//! SpEED-QA (libvmaf's `speed_chroma` and `speed_temporal` extractors): entropy differences of
//! locally normalised, 16x downscaled planes, estimated per 5x5 block with a Gaussian scale
//! mixture model.
//!
//! Per plane pair: optional prescaling (nearest/bilinear/bicubic/lanczos4), a Gaussian
//! anti-aliasing filter, decimation by 16, local mean removal with a 3-tap Gaussian, then for
//! each picture the 25x25 covariance matrix of 5x5 neighbourhoods, its eigenvalues, and per block
//! the GSM variance (from `K x = y`) and entropy. The score is the mean absolute difference of
//! variance-weighted entropies over the blocks where either entropy exceeds the noise floor.
//!
//! Everything runs in `f32` except where upstream's C promotes to `double` (calls to `log2`,
//! `exp`, `sqrt`, and `double` literals); each such spot converts exactly where C does, so the
//! scores are bit-identical with upstream's scalar path.
//!
//! `speed_chroma` scores the U and V planes (and their mean); `speed_temporal` scores the
//! difference of consecutive luma planes.
//!
//! Layout: this file holds the options, the shared parameters and frame geometry; `chroma.rs`
//! and `temporal.rs` the two extractors; `scale.rs` the plane preparation (prescaling,
//! anti-aliasing, decimation); `gsm.rs` the per-block statistics and the score; `linalg.rs` the
//! 25x25 eigenvalue and QR routines; `gpu.rs` the device side (kernels/speed.hip through the
//! launchers of `launch.rs`), which computes the normalised planes and covariance matrices the
//! host then finishes with `gsm.rs`, so GPU and CPU scores are identical.

mod chroma;
mod gpu;
mod gsm;
#[cfg(test)]
mod hipcpu_tests;
pub(crate) mod launch;
mod linalg;
pub(crate) mod scale;
mod temporal;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::error::{Error, Result};
use crate::feature::alias::alias;
use crate::feature::options::fmt_g;
use crate::feature::{Dict, OptSpec, OptValue, Opts};
use crate::picture::PictureData;

pub use chroma::SpeedChroma;
use scale::ScaleMethod;
pub use temporal::SpeedTemporal;

/// Features of `speed_chroma`.
pub const CHROMA_FEATURES: &[&str] = &[
    "Speed_chroma_feature_speed_chroma_u_score",
    "Speed_chroma_feature_speed_chroma_v_score",
    "Speed_chroma_feature_speed_chroma_uv_score",
];

/// Features of `speed_temporal`.
pub const TEMPORAL_FEATURES: &[&str] = &["Speed_temporal_feature_speed_temporal_score"];

/// Side of the square neighbourhood the GSM model works on.
const BLOCK: usize = 5;
/// Entries of one neighbourhood vector (and side of the covariance matrix).
const NB: usize = BLOCK * BLOCK;
/// Decimation steps: frames are analysed at 1/16 of the (prescaled) size.
const NUM_SCALES: u32 = 4;
/// Threshold for eigenvalue deflation, regularity and pivots.
const EIG_EPS: f64 = 1e-6;
/// Cap on QR sweeps of the tridiagonal eigenvalue solver.
const EIG_MAX_ITERS: usize = 500;

/// Kernel scales upstream accepts (as `f32`, like its table).
const VALID_KERNELSCALES: [f32; 21] = [
    1.0,
    1.0 / 2.0,
    3.0 / 2.0,
    2.0,
    2.0 / 3.0,
    24.0 / 10.0,
    360.0 / 97.0,
    4.0 / 3.0,
    3.5 / 3.0,
    3.75 / 3.0,
    4.25 / 3.0,
    5.0 / 3.0,
    3.0,
    1.0 / 2.25,
    1.4746,
    1.54,
    1.6,
    1.06667,
    0.711111,
    0.740740,
    1.111111,
];

/// Upstream's `vif_validate_kernelscale`: whether `k` is within 1e-3 of a supported scale.
pub(crate) fn valid_kernelscale(k: f32) -> bool {
    VALID_KERNELSCALES
        .iter()
        .any(|&v| f64::from((k - v).abs()) < 1e-3)
}

/// Option name of the prescaling method (a string option, kept out of the typed tables).
const OPT_PRESCALE_METHOD: &str = "speed_prescale_method";
const DEFAULT_PRESCALE_METHOD: &str = "nearest";

/// `speed_chroma` options, as upstream declares them (all change the stored names).
static CHROMA_OPTIONS: [OptSpec; 6] = [
    OptSpec::double("speed_kernelscale", Some("ks"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_prescale", Some("ps"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_sigma_nn", Some("snn"), 0.29, 0.1, 2.0, true),
    OptSpec::double("speed_nn_floor", Some("nnf"), 0.0, 0.0, 1.0, true),
    OptSpec::double("speed_max_val", Some("mxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::int("speed_weight_var_mode", Some("wvm"), 0, 0.0, 6.0, true),
];

/// `speed_temporal` options.
static TEMPORAL_OPTIONS: [OptSpec; 6] = [
    OptSpec::double("speed_kernelscale", Some("ks"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_prescale", Some("ps"), 1.0, 0.1, 4.0, true),
    OptSpec::double("speed_sigma_nn", Some("snn"), 0.29, 0.1, 2.0, true),
    OptSpec::double("speed_nn_floor", Some("nnf"), 0.0, 0.0, 1.0, true),
    OptSpec::double("speed_max_val", Some("mxv"), 1000.0, 0.0, 1000.0, true),
    OptSpec::boolean("speed_use_ref_diff", Some("urd"), false, true),
];

/// Options shared by both extractors, in the precision upstream's computation uses them.
#[derive(Debug, Clone, Copy)]
struct Params {
    kernelscale: f32,
    prescale: f64,
    method: ScaleMethod,
    sigma_nn: f32,
    nn_floor: f32,
    weight_var_mode: i32,
}

/// Parsed options plus the stored-name builder (numeric options and the string method).
#[derive(Debug, Clone)]
struct SpeedOpts {
    specs: &'static [OptSpec],
    opts: Opts,
    method: String,
    params: Params,
}

impl SpeedOpts {
    fn parse(specs: &'static [OptSpec], dict: &Dict, weight_var_mode: bool) -> Result<Self> {
        let opts = Opts::parse(specs, dict)?;
        let method = dict
            .get(OPT_PRESCALE_METHOD)
            .unwrap_or(DEFAULT_PRESCALE_METHOD)
            .to_string();
        let kernelscale = opts.double("speed_kernelscale") as f32;
        if !valid_kernelscale(kernelscale) {
            return Err(Error::inval(format!(
                "speed: invalid speed_kernelscale {kernelscale}"
            )));
        }
        let params = Params {
            kernelscale,
            prescale: opts.double("speed_prescale"),
            method: ScaleMethod::parse("speed", &method)?,
            sigma_nn: opts.double("speed_sigma_nn") as f32,
            nn_floor: opts.double("speed_nn_floor") as f32,
            weight_var_mode: if weight_var_mode {
                opts.int("speed_weight_var_mode")
            } else {
                0
            },
        };
        Ok(SpeedOpts {
            specs,
            opts,
            method,
            params,
        })
    }

    /// Upstream's option-dependent name: the alias, then `_key_value` (`_key` for bools) for
    /// every non-default option, sorted by option name; the full name when all are default.
    fn feature_name(&self, full_name: &str) -> String {
        let mut params: Vec<(&str, String)> = Vec::new();
        for spec in self.specs {
            let key = spec.alias.unwrap_or(spec.name);
            let part = match spec.default {
                OptValue::Bool(d) if self.opts.bool(spec.name) != d => format!("_{key}"),
                OptValue::Int(d) if self.opts.int(spec.name) != d => {
                    format!("_{key}_{}", self.opts.int(spec.name))
                }
                OptValue::Double(d) if self.opts.double(spec.name) != d => {
                    format!("_{key}_{}", fmt_g(self.opts.double(spec.name)))
                }
                _ => continue,
            };
            params.push((spec.name, part));
        }
        if self.method != DEFAULT_PRESCALE_METHOD {
            params.push((OPT_PRESCALE_METHOD, format!("_psm_{}", self.method)));
        }
        if params.is_empty() {
            return full_name.to_string();
        }
        params.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = alias(full_name).to_string();
        for (_, part) in params {
            out.push_str(&part);
        }
        out
    }
}

/// Frame geometry of one SpEED computation.
#[derive(Debug, Clone, Copy)]
struct Dims {
    /// Input plane size.
    w: usize,
    h: usize,
    /// Size after prescaling.
    sw: usize,
    sh: usize,
    /// Size after decimation by 16 (the analysed plane; its rows are `dw` apart).
    dw: usize,
    dh: usize,
    /// Blocks across, down, and in all.
    bw: usize,
    bh: usize,
    blocks: usize,
    /// Size of the shifted windows whose covariances form the covariance matrix.
    subw: usize,
    subh: usize,
}

impl Dims {
    fn new(w: usize, h: usize, prescale: f64) -> Result<Self> {
        // Upstream: (int)(size * prescale + 0.5), in double.
        let sw = (w as f64 * prescale + 0.5) as usize;
        let sh = (h as f64 * prescale + 0.5) as usize;
        let (dw, dh) = (sw >> NUM_SCALES, sh >> NUM_SCALES);
        let (tw, th) = (dw / BLOCK * BLOCK, dh / BLOCK * BLOCK);
        if tw == 0 || th == 0 {
            return Err(Error::inval(format!(
                "speed: {w}x{h} plane is too small (needs at least {} samples each way after prescaling)",
                BLOCK << NUM_SCALES
            )));
        }
        Ok(Dims {
            w,
            h,
            sw,
            sh,
            dw,
            dh,
            bw: tw / BLOCK,
            bh: th / BLOCK,
            blocks: (tw / BLOCK) * (th / BLOCK),
            subw: tw - BLOCK + 1,
            subh: th - BLOCK + 1,
        })
    }
}
fn check_pair(name: &str, r: &PictureData, d: &PictureData) -> Result<()> {
    if r.pix_fmt != d.pix_fmt || r.bpc != d.bpc || r.w != d.w || r.h != d.h {
        return Err(Error::inval(format!(
            "{name}: reference and distorted pictures differ in format or size"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::{create, Extractor, ExtractorFlags, FrameInput, Scores};
    use crate::picture::{Picture, PixelFormat};
    use crate::simd::CpuLevel;
    use crate::testutil::{expected_json, expected_metric, load_parity_clip};

    fn model_opts(prescale: bool) -> Dict {
        let mut o = Dict::new();
        if !prescale {
            o.set("speed_kernelscale", "1.0");
        }
        o.set("speed_nn_floor", "0.1");
        o.set("speed_sigma_nn", "0.19");
        o.set("speed_weight_var_mode", "5");
        if prescale {
            o.set("speed_prescale", "0.6");
            o.set("speed_prescale_method", "bilinear");
        }
        o.set("speed_max_val", "45.0");
        o
    }

    fn run(x: &dyn Extractor, clip: &str) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, x)
    }

    /// Upstream's printed scores, at every CPU level (each level's scores also equal the
    /// scalar ones bit for bit).
    fn check_model(model: &str, prescale: bool) {
        let x = SpeedChroma::new(&model_opts(prescale)).unwrap();
        let log = expected_json(&format!("natural_1920x1080_420p8.{model}.json"));
        let clip = "natural_1920x1080_420p8";
        let scalar = crate::testutil::extract_clip_at(clip, &x, CpuLevel::SCALAR);
        for cpu in CpuLevel::available() {
            let scores = crate::testutil::extract_clip_at(clip, &x, cpu);
            assert_eq!(scores, scalar, "{model} at {cpu}");
            assert_eq!(scores.len(), 8);
            for (i, out) in scores.iter().enumerate() {
                assert_eq!(out.len(), 3);
                for (name, v) in out {
                    let want = expected_metric(&log, i, name)
                        .unwrap_or_else(|| panic!("{model} frame {i}: no {name}"));
                    assert_eq!(
                        format!("{v:.6}"),
                        format!("{want:.6}"),
                        "{model} frame {i} {name} at {cpu}"
                    );
                }
            }
        }
    }

    #[test]
    fn v1_3d0h_options_match_upstream() {
        check_model("vmaf_v1.0.16_3d0h", false);
    }

    #[test]
    fn v1_5d0h_bilinear_prescale_matches_upstream() {
        check_model("vmaf_v1.0.16_5d0h", true);
    }

    /// (clip, extractor, options, printed name -> first three frames) from upstream's `vmaf`
    /// tool (v3.2.0 built without assembly, i.e. the scalar C path; JSON writer patched to
    /// print `%.17g`), so the comparison below is exact to the bit.
    type UpstreamCase = (
        &'static str,
        &'static str,
        &'static str,
        &'static [(&'static str, [f64; 3])],
    );

    const UPSTREAM_CASES: &[UpstreamCase] = &[
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_kernelscale=1.0:speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_max_val=45.0",
            &[
                ("speed_chroma_u_mxv_45_nnf_0.1_snn_0.19_wvm_5", [5.480644702911377, 4.453373432159424, 5.066553115844727]),
                ("speed_chroma_v_mxv_45_nnf_0.1_snn_0.19_wvm_5", [3.6291399002075195, 2.990539073944092, 2.876007318496704]),
                ("speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5", [4.554892539978027, 3.721956253051758, 3.971280097961426]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_prescale=0.6:speed_prescale_method=bilinear:speed_max_val=45.0",
            &[
                ("speed_chroma_u_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.747060537338257, 2.869520425796509, 1.860650897026062]),
                ("speed_chroma_v_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.2761921882629395, 1.373055100440979, 1.4050829410552979]),
                ("speed_chroma_uv_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5", [2.5116262435913086, 2.1212878227233887, 1.6328668594360352]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [10.662699699401855, 7.840482234954834, 12.040542602539062]),
                ("speed_chroma_v", [11.66856861114502, 15.197166442871094, 12.103507995605469]),
                ("speed_chroma_uv", [11.165634155273438, 11.518824577331543, 12.072025299072266]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [6.140331268310547, 4.078641891479492, 5.029851913452148]),
                ("speed_chroma_v", [7.189605236053467, 7.309563636779785, 5.887149810791016]),
                ("speed_chroma_uv", [6.664968490600586, 5.694102764129639, 5.458500862121582]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_chroma",
            "speed_weight_var_mode=3",
            &[
                ("speed_chroma_u_wvm_3", [3.274195671081543, 1.949026107788086, 2.0572824478149414]),
                ("speed_chroma_v_wvm_3", [2.9165682792663574, 2.744145393371582, 1.990917682647705]),
                ("speed_chroma_uv_wvm_3", [3.09538197517395, 2.346585750579834, 2.0241000652313232]),
            ],
        ),
        (
            "mandel_352x288_422p8",
            "speed_chroma",
            "speed_weight_var_mode=4",
            &[
                ("speed_chroma_u_wvm_4", [2.796290636062622, 3.2384519577026367, 2.6985929012298584]),
                ("speed_chroma_v_wvm_4", [2.518521308898926, 1.3121552467346191, 0.842121422290802]),
                ("speed_chroma_uv_wvm_4", [2.6574058532714844, 2.275303602218628, 1.7703571319580078]),
            ],
        ),
        (
            "testsrc_480x270_444p8",
            "speed_chroma",
            "speed_weight_var_mode=6:speed_kernelscale=2",
            &[
                ("speed_chroma_u_ks_2_wvm_6", [0.9893830418586731, 1.2315424680709839, 1.0857939720153809]),
                ("speed_chroma_v_ks_2_wvm_6", [1.539316177368164, 1.744372844696045, 1.2282463312149048]),
                ("speed_chroma_uv_ks_2_wvm_6", [1.2643495798110962, 1.4879577159881592, 1.157020092010498]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.5:speed_prescale_method=bicubic:speed_weight_var_mode=1",
            &[
                ("speed_chroma_u_ps_0.5_psm_bicubic_wvm_1", [1.4530463218688965, 1.1306085586547852, 1.4243192672729492]),
                ("speed_chroma_v_ps_0.5_psm_bicubic_wvm_1", [0.6718130111694336, 0.7096696496009827, 0.8219540119171143]),
                ("speed_chroma_uv_ps_0.5_psm_bicubic_wvm_1", [1.062429666519165, 0.9201390743255615, 1.1231366395950317]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.7:speed_prescale_method=lanczos4:speed_weight_var_mode=2",
            &[
                ("speed_chroma_u_ps_0.7_psm_lanczos4_wvm_2", [2.083195686340332, 1.985361099243164, 2.020236015319824]),
                ("speed_chroma_v_ps_0.7_psm_lanczos4_wvm_2", [1.4989222288131714, 1.130126714706421, 1.038780689239502]),
                ("speed_chroma_uv_ps_0.7_psm_lanczos4_wvm_2", [1.7910590171813965, 1.5577439069747925, 1.529508352279663]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.5:speed_prescale_method=bilinear",
            &[
                ("speed_chroma_u_ps_1.5_psm_bilinear", [11.827473640441895, 20.338085174560547, 19.257246017456055]),
                ("speed_chroma_v_ps_1.5_psm_bilinear", [14.92762279510498, 17.41127586364746, 21.58837890625]),
                ("speed_chroma_uv_ps_1.5_psm_bilinear", [13.377548217773438, 18.874679565429688, 20.422813415527344]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.25:speed_prescale_method=lanczos4",
            &[
                ("speed_chroma_u_ps_1.25_psm_lanczos4", [15.998275756835938, 19.435813903808594, 9.982866287231445]),
                ("speed_chroma_v_ps_1.25_psm_lanczos4", [17.935800552368164, 13.708138465881348, 24.730131149291992]),
                ("speed_chroma_uv_ps_1.25_psm_lanczos4", [16.967037200927734, 16.571975708007812, 17.35649871826172]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_prescale=1.3:speed_prescale_method=bicubic",
            &[
                ("speed_chroma_u_ps_1.3_psm_bicubic", [15.171297073364258, 18.88933563232422, 19.260204315185547]),
                ("speed_chroma_v_ps_1.3_psm_bicubic", [19.411293029785156, 14.573933601379395, 17.828964233398438]),
                ("speed_chroma_uv_ps_1.3_psm_bicubic", [17.29129409790039, 16.73163414001465, 18.544584274291992]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_chroma",
            "speed_prescale=0.8",
            &[
                ("speed_chroma_u_ps_0.8", [7.147597312927246, 9.071478843688965, 7.851896286010742]),
                ("speed_chroma_v_ps_0.8", [5.332176208496094, 4.924671649932861, 5.002601623535156]),
                ("speed_chroma_uv_ps_0.8", [6.23988676071167, 6.998075485229492, 6.427248954772949]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_kernelscale=0.5:speed_sigma_nn=1.5:speed_nn_floor=0.5",
            &[
                ("speed_chroma_u_ks_0.5_nnf_0.5_snn_1.5", [20.417970657348633, 18.56672477722168, 20.7810001373291]),
                ("speed_chroma_v_ks_0.5_nnf_0.5_snn_1.5", [16.774795532226562, 28.46953773498535, 17.768404006958008]),
                ("speed_chroma_uv_ks_0.5_nnf_0.5_snn_1.5", [18.59638214111328, 23.518131256103516, 19.274702072143555]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_chroma",
            "speed_max_val=11.2",
            &[
                ("speed_chroma_u_mxv_11.2", [10.662699699401855, 7.840482234954834, 11.2]),
                ("speed_chroma_v_mxv_11.2", [11.2, 11.2, 11.2]),
                ("speed_chroma_uv_mxv_11.2", [11.165634155273438, 11.2, 11.2]),
            ],
        ),
        (
            "life_320x240_420p8",
            "speed_chroma",
            "",
            &[
                ("speed_chroma_u", [0.0, 0.0, 0.0]),
                ("speed_chroma_v", [0.0, 0.0, 0.0]),
                ("speed_chroma_uv", [0.0, 0.0, 0.0]),
            ],
        ),
        (
            "natural_576x324_420p8",
            "speed_temporal",
            "",
            &[
                ("speed_temporal", [0.0, 6.7393388748168945, 8.764799118041992]),
            ],
        ),
        (
            "natural_640x360_420p10",
            "speed_temporal",
            "speed_use_ref_diff=true",
            &[
                ("speed_temporal_urd", [0.0, 2.3083043098449707, 2.606563091278076]),
            ],
        ),
        (
            "natural_1920x1080_420p8",
            "speed_temporal",
            "speed_prescale=0.5:speed_prescale_method=bicubic:speed_kernelscale=1.5",
            &[
                ("speed_temporal_ks_1.5_ps_0.5_psm_bicubic", [0.0, 4.715276718139648, 3.8717546463012695]),
            ],
        ),
        (
            "life_320x240_420p8",
            "speed_temporal",
            "speed_use_ref_diff=true",
            &[
                ("speed_temporal_urd", [0.0, 0.0, 0.0]),
            ],
        ),
        (
            "natural_320x180_420p12",
            "speed_temporal",
            "speed_weight_var_mode=2",
            &[
                ("speed_temporal", [0.0, 2.1633830070495605, 1.7499322891235352]),
            ],
        ),
    ];

    #[test]
    fn options_formats_and_depths_match_upstream_bit_for_bit() {
        type Clip = (Vec<Picture>, Vec<Picture>);
        let mut last: Option<(&str, Clip)> = None;
        for &(clip, fex, opts, want) in UPSTREAM_CASES {
            if last.as_ref().map(|l| l.0) != Some(clip) {
                last = Some((clip, load_parity_clip(clip)));
            }
            let (refs, dists) = &last.as_ref().unwrap().1;
            let mut d = Dict::new();
            for kv in opts.split(':').filter(|s| !s.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap();
                d.set(k, v);
            }
            let x = create(fex, &d).unwrap();
            let what = format!("{clip} {fex}={opts}");
            for (i, (r, dp)) in refs.iter().zip(dists).take(3).enumerate() {
                let input = FrameInput {
                    prev_ref: i.checked_sub(1).map(|p| &refs[p]),
                    prev_dist: i.checked_sub(1).map(|p| &dists[p]),
                    ..FrameInput::pair(i, r, dp)
                };
                let mut out = Scores::new();
                x.extract(&input, &mut out).unwrap();
                assert_eq!(out.len(), want.len(), "{what}");
                for ((name, v), (wname, wv)) in out.iter().zip(want) {
                    assert_eq!(alias(name), *wname, "{what}");
                    assert_eq!(*v, wv[i], "{what} frame {i} {wname}");
                }
            }
        }
    }

    #[test]
    fn stored_names_follow_options() {
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        assert_eq!(
            x.feature_name(CHROMA_FEATURES[2]),
            "Speed_chroma_feature_speed_chroma_uv_score"
        );
        let x = SpeedChroma::new(&model_opts(true)).unwrap();
        assert_eq!(
            x.feature_name(CHROMA_FEATURES[0]),
            "speed_chroma_u_mxv_45_nnf_0.1_ps_0.6_psm_bilinear_snn_0.19_wvm_5"
        );
        let mut o = Dict::new();
        o.set("speed_use_ref_diff", "true");
        o.set("speed_kernelscale", "2");
        let t = SpeedTemporal::new(&o).unwrap();
        assert_eq!(
            t.feature_name(TEMPORAL_FEATURES[0]),
            "speed_temporal_ks_2_urd"
        );
    }

    #[test]
    fn rejects_bad_options_and_inputs() {
        for (k, v) in [
            ("speed_kernelscale", "1.3"),
            ("speed_prescale_method", "area"),
            ("speed_weight_var_mode", "7"),
            ("speed_sigma_nn", "0.05"),
        ] {
            let mut o = Dict::new();
            o.set(k, v);
            assert!(SpeedChroma::new(&o).is_err(), "{k}={v}");
        }
        use std::sync::Arc;
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        let small = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 150, 150).unwrap());
        let gray = Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 320, 320).unwrap());
        for p in [&small, &gray] {
            let input = FrameInput::pair(0, p, p);
            assert!(x.extract(&input, &mut Scores::new()).is_err());
        }
    }

    /// A copy of `src` with chroma plane `c` (if any) filled with `fill`.
    fn with_flat_plane(src: &PictureData, c: Option<usize>, fill: u8) -> Picture {
        let mut p = PictureData::new(src.pix_fmt, src.bpc, src.w[0], src.h[0]).unwrap();
        for i in 0..3 {
            p.plane_u8_mut(i).copy_from_slice(src.plane_u8(i));
        }
        if let Some(c) = c {
            p.plane_u8_mut(c).fill(fill);
        }
        std::sync::Arc::new(p)
    }

    #[test]
    fn singular_channels_follow_upstream() {
        // Upstream (scalar v3.2.0) on the first frame of natural_576x324_420p8: a flat U plane
        // in the reference only makes U score 0 and uv take V's score; with U flat in both and V
        // flat in the distorted picture, every score is 0.
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let x = SpeedChroma::new(&Dict::new()).unwrap();
        let score = |r: &Picture, d: &Picture| {
            let input = FrameInput::pair(0, r, d);
            let mut out = Scores::new();
            x.extract(&input, &mut out).unwrap();
            out.iter().map(|s| s.1).collect::<Vec<_>>()
        };
        let flat_u = with_flat_plane(&refs[0], Some(1), 128);
        assert_eq!(
            score(&flat_u, &dists[0]),
            [0.0, 11.66856861114502, 11.66856861114502]
        );
        let mut d = with_flat_plane(&dists[0], Some(1), 90);
        d = with_flat_plane(&d, Some(2), 100);
        assert_eq!(score(&flat_u, &d), [0.0; 3]);
    }

    /// speed_temporal through a context, synchronous and on worker threads (where frames run
    /// out of order, reading the previous pictures the context keeps), gives upstream's
    /// scores; a subsampled run still scores every frame it keeps against its predecessor.
    #[test]
    fn temporal_through_a_context_in_any_order() {
        use crate::context::{Config, Context};
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let name = "Speed_temporal_feature_speed_temporal_score";
        for (threads, subsample) in [(0, 1), (3, 1), (2, 2)] {
            let mut ctx = Context::new(Config {
                n_threads: threads,
                n_subsample: subsample,
                ..Config::default()
            })
            .unwrap();
            ctx.use_feature("speed_temporal", &Dict::new()).unwrap();
            for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
                ctx.read_pictures(r.clone(), d.clone(), i).unwrap();
            }
            ctx.flush().unwrap();
            let at = |i| ctx.feature_score_at_index(name, i).unwrap();
            assert_eq!(at(0), 0.0, "threads {threads}");
            assert_eq!(at(1), 6.7393388748168945, "threads {threads}");
            assert_eq!(at(2), 8.764799118041992, "threads {threads}");
        }
    }

    #[test]
    fn temporal_identical_frames_score_zero() {
        let t = SpeedTemporal::new(&Dict::new()).unwrap();
        assert_eq!(
            t.flags(),
            ExtractorFlags::PREV_REF | ExtractorFlags::PREV_DIST
        );
        let scores = run(&t, "life_320x240_420p8");
        assert_eq!(
            scores[0],
            vec![("Speed_temporal_feature_speed_temporal_score".into(), 0.0)]
        );
        // ref == dist: the two difference planes are equal, so every block difference is 0.
        for s in &scores[1..] {
            assert_eq!(s[0].1, 0.0);
        }
    }
}
