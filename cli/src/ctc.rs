//! `--aom_ctc VERSION` and `--nflx_ctc VERSION`: presets of models and features for the AOM
//! (AV1/AV2) and Netflix common test conditions, as libvmaf v3.2.0's `vmaf` tool defines them.
//!
//! A preset appends its models and features where it stands on the command line, between the
//! `-m` and `--feature` arguments around it; `--aom_ctc v7.0` then replaces the first
//! `float_ssim` feature given so far (its own, or an earlier `--feature float_ssim`) with a
//! single-scale one. Two models with one name (a preset's `vmaf` next to a plain `-m`) are
//! rejected like any other clash.

use clap::ArgMatches;

use vmaf_hip::model::{ModelFlags, ModelSpec};

use crate::args::{parse_feature, Cli, FeatureArg};

/// Versions `--aom_ctc` accepts.
pub(crate) const AOM_VERSIONS: [&str; 7] = ["v1.0", "v2.0", "v3.0", "v4.0", "v5.0", "v6.0", "v7.0"];

/// Versions `--nflx_ctc` accepts.
pub(crate) const NFLX_VERSIONS: [&str; 1] = ["v1.0"];

/// A preset named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preset {
    /// `--aom_ctc v<N>.0`, N = 1..=7.
    Aom(u8),
    /// `--nflx_ctc v1.0`.
    NflxV1,
}

/// `--aom_ctc` value parser.
pub(crate) fn parse_aom_ctc(s: &str) -> Result<Preset, String> {
    if s == "proposed" {
        return Err("`--aom_ctc proposed` is deprecated; name a version: v1.0 ... v7.0".into());
    }
    match AOM_VERSIONS.iter().position(|v| *v == s) {
        Some(i) => Ok(Preset::Aom(i as u8 + 1)),
        None => Err(format!(
            "bad aom_ctc version \"{s}\" (known: {})",
            AOM_VERSIONS.join(", ")
        )),
    }
}

/// `--nflx_ctc` value parser.
pub(crate) fn parse_nflx_ctc(s: &str) -> Result<Preset, String> {
    match s {
        "v1.0" => Ok(Preset::NflxV1),
        _ => Err(format!(
            "bad nflx_ctc version \"{s}\" (known: {})",
            NFLX_VERSIONS.join(", ")
        )),
    }
}

/// What a preset adds.
struct Definition {
    /// `(built-in model version, model name)`.
    models: &'static [(&'static str, &'static str)],
    /// `--feature` arguments, appended in order.
    features: &'static [&'static str],
    /// `--feature` arguments that replace the first feature of the same extractor name (or are
    /// appended when there is none).
    replace: &'static [&'static str],
    /// Reference and distorted may differ in bit depth (scored at the larger one).
    common_bitdepth: bool,
}

const AOM_MODELS: &[(&str, &str)] = &[("vmaf_v0.6.1", "vmaf"), ("vmaf_v0.6.1neg", "vmaf_neg")];

const AOM_V1_FEATURES: &[&str] = &[
    "psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5",
    "ciede",
    "float_ssim=enable_db=true:clip_db=true",
    "float_ms_ssim=enable_db=true:clip_db=true",
    "psnr_hvs",
];

/// v3.0 adds cambi (default options).
const AOM_V3_FEATURES: &[&str] = &[
    "psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5",
    "ciede",
    "float_ssim=enable_db=true:clip_db=true",
    "float_ms_ssim=enable_db=true:clip_db=true",
    "psnr_hvs",
    "cambi",
];

fn definition(p: Preset) -> Definition {
    match p {
        Preset::Aom(v) => Definition {
            models: AOM_MODELS,
            features: if v >= 3 {
                AOM_V3_FEATURES
            } else {
                AOM_V1_FEATURES
            },
            replace: if v >= 7 {
                &["float_ssim=scale=1:enable_db=true:clip_db=true"]
            } else {
                &[]
            },
            common_bitdepth: v >= 6,
        },
        Preset::NflxV1 => Definition {
            models: &[
                ("vmaf_4k_v0.6.1", "vmaf"),
                ("vmaf_4k_v0.6.1neg", "vmaf_neg"),
            ],
            features: &[
                "psnr=enable_chroma=true:enable_apsnr=true",
                "float_ssim=enable_db=true:clip_db=true",
                "cambi",
            ],
            replace: &[],
            common_bitdepth: false,
        },
    }
}

fn feature(spec: &str) -> FeatureArg {
    parse_feature(spec).expect("preset feature specs are well-formed")
}

/// Applies preset `p` to the models and features collected so far; returns whether it allows
/// inputs of different bit depths.
fn apply(p: Preset, models: &mut Vec<ModelSpec>, features: &mut Vec<FeatureArg>) -> bool {
    let def = definition(p);
    models.extend(def.models.iter().map(|&(version, name)| ModelSpec {
        path: None,
        version: Some(version.into()),
        name: name.into(),
        flags: ModelFlags::empty(),
        overloads: Vec::new(),
    }));
    features.extend(def.features.iter().map(|s| feature(s)));
    for spec in def.replace {
        let f = feature(spec);
        match features.iter_mut().find(|g| g.name == f.name) {
            Some(slot) => *slot = f,
            None => features.push(f),
        }
    }
    def.common_bitdepth
}

/// Expands the presets of the command line into `cli.model` and `cli.feature`, keeping the
/// command-line order of `-m`, `--feature`, `--aom_ctc` and `--nflx_ctc` arguments, and sets
/// `cli.common_bitdepth`. Without presets nothing changes.
pub(crate) fn expand(cli: &mut Cli, matches: &ArgMatches) {
    if cli.aom_ctc.is_empty() && cli.nflx_ctc.is_empty() {
        return;
    }
    enum Item {
        Model(ModelSpec),
        Feature(FeatureArg),
        Preset(Preset),
    }
    let idx = |id: &str| -> Vec<usize> {
        matches
            .indices_of(id)
            .map(|i| i.collect())
            .unwrap_or_default()
    };
    let mut items: Vec<(usize, Item)> = Vec::new();
    items.extend(
        idx("model")
            .into_iter()
            .zip(cli.model.drain(..).map(Item::Model)),
    );
    items.extend(
        idx("feature")
            .into_iter()
            .zip(cli.feature.drain(..).map(Item::Feature)),
    );
    items.extend(
        idx("aom_ctc")
            .into_iter()
            .zip(cli.aom_ctc.iter().map(|&p| Item::Preset(p))),
    );
    items.extend(
        idx("nflx_ctc")
            .into_iter()
            .zip(cli.nflx_ctc.iter().map(|&p| Item::Preset(p))),
    );
    items.sort_by_key(|(i, _)| *i);
    for (_, item) in items {
        match item {
            Item::Model(m) => cli.model.push(m),
            Item::Feature(f) => cli.feature.push(f),
            Item::Preset(p) => {
                cli.common_bitdepth |= apply(p, &mut cli.model, &mut cli.feature);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    fn parse(args: &[&str]) -> Cli {
        let m = Cli::command()
            .try_get_matches_from(args)
            .expect("arguments parse");
        let mut cli = Cli::from_arg_matches(&m).unwrap();
        expand(&mut cli, &m);
        cli
    }

    fn names(cli: &Cli) -> (Vec<String>, Vec<String>) {
        let models = cli.model.iter().map(|m| m.name.clone()).collect();
        let features = cli.feature.iter().map(|f| f.name.clone()).collect();
        (models, features)
    }

    #[test]
    fn versions() {
        for (i, v) in AOM_VERSIONS.iter().enumerate() {
            assert_eq!(parse_aom_ctc(v), Ok(Preset::Aom(i as u8 + 1)));
        }
        assert_eq!(parse_nflx_ctc("v1.0"), Ok(Preset::NflxV1));
        for bad in ["v8.0", "6.0", "v6", "V6.0", ""] {
            let e = parse_aom_ctc(bad).unwrap_err();
            assert!(e.contains("bad aom_ctc version"), "{e}");
        }
        assert!(parse_aom_ctc("proposed")
            .unwrap_err()
            .contains("deprecated"));
        assert!(parse_nflx_ctc("v2.0")
            .unwrap_err()
            .contains("bad nflx_ctc version \"v2.0\""));
    }

    #[test]
    fn aom_presets() {
        let v1 = parse(&["vmaf", "--aom_ctc", "v1.0"]);
        let (m, f) = names(&v1);
        assert_eq!(m, ["vmaf", "vmaf_neg"]);
        assert_eq!(
            v1.model
                .iter()
                .map(|m| m.version.clone().unwrap())
                .collect::<Vec<_>>(),
            ["vmaf_v0.6.1", "vmaf_v0.6.1neg"]
        );
        assert_eq!(
            f,
            ["psnr", "ciede", "float_ssim", "float_ms_ssim", "psnr_hvs"]
        );
        assert_eq!(v1.feature[0].opts.get("min_sse"), Some("0.5"));
        assert_eq!(v1.feature[0].opts.get("reduced_hbd_peak"), Some("true"));
        assert!(!v1.common_bitdepth);
        for v in ["v3.0", "v4.0", "v5.0"] {
            let c = parse(&["vmaf", "--aom_ctc", v]);
            assert_eq!(names(&c).1.last().map(String::as_str), Some("cambi"));
            assert!(!c.common_bitdepth);
        }
        let v6 = parse(&["vmaf", "--aom_ctc", "v6.0"]);
        assert!(v6.common_bitdepth);
        assert_eq!(v6.feature[2].opts.get("scale"), None);
        let v7 = parse(&["vmaf", "--aom_ctc", "v7.0"]);
        assert_eq!(names(&v7), names(&v6));
        assert_eq!(v7.feature[2].opts.get("scale"), Some("1"));
        assert_eq!(v7.feature[2].opts.get("clip_db"), Some("true"));
        assert!(v7.common_bitdepth);
    }

    #[test]
    fn nflx_preset() {
        let c = parse(&["vmaf", "--nflx_ctc", "v1.0"]);
        assert_eq!(
            c.model
                .iter()
                .map(|m| m.version.clone().unwrap())
                .collect::<Vec<_>>(),
            ["vmaf_4k_v0.6.1", "vmaf_4k_v0.6.1neg"]
        );
        assert_eq!(names(&c).1, ["psnr", "float_ssim", "cambi"]);
        assert_eq!(c.feature[0].opts.get("enable_chroma"), Some("true"));
        assert!(!c.common_bitdepth);
    }

    #[test]
    fn command_line_order_is_kept() {
        let c = parse(&[
            "vmaf",
            "--feature",
            "vif",
            "-m",
            "version=vmaf_b_v0.6.3:name=b",
            "--nflx_ctc",
            "v1.0",
            "--feature",
            "motion",
        ]);
        assert_eq!(
            names(&c),
            (
                vec!["b".into(), "vmaf".into(), "vmaf_neg".into()],
                ["vif", "psnr", "float_ssim", "cambi", "motion"]
                    .map(String::from)
                    .to_vec()
            )
        );
        // v7.0 replaces the first float_ssim: an earlier --feature one, in place.
        let c = parse(&[
            "vmaf",
            "--feature",
            "float_ssim=enable_lcs=true",
            "--aom_ctc",
            "v7.0",
        ]);
        let (_, f) = names(&c);
        assert_eq!(f[0], "float_ssim");
        assert_eq!(c.feature[0].opts.get("scale"), Some("1"));
        assert_eq!(c.feature[0].opts.get("enable_lcs"), None);
        assert_eq!(f.iter().filter(|n| *n == "float_ssim").count(), 2);
        assert_eq!(c.feature[3].opts.get("scale"), None);
    }
}
