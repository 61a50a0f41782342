//! The command line: libvmaf's `vmaf` flags (plus `--backend` and `--hip-device`), parsed by
//! clap and turned into the driver's options, the models and the output format.

use std::path::PathBuf;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};

use vmaf_hip::driver;
use vmaf_hip::feature::Dict;
use vmaf_hip::gpu::DeviceChoice;
use vmaf_hip::io::VideoInfo;
use vmaf_hip::model::ModelSpec;
use vmaf_hip::output::OutputFormat;
use vmaf_hip::picture::PixelFormat;

use crate::{ctc, describe};

/// One `--feature` argument.
#[derive(Debug, Clone)]
pub(crate) struct FeatureArg {
    pub(crate) name: String,
    pub(crate) opts: Dict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    Cpu,
    Hip,
}

#[derive(Debug, Parser)]
#[command(
    name = "vmaf",
    about = "Compute VMAF and other quality metrics of a distorted video against its reference.",
    disable_help_flag = true,
    disable_version_flag = true
)]
pub(crate) struct Cli {
    /// Reference video (.y4m, or raw .yuv with -w/-h/-p/-b)
    #[arg(short = 'r', long = "reference", value_name = "PATH")]
    pub(crate) reference: Option<PathBuf>,
    /// Distorted video (.y4m, or raw .yuv with -w/-h/-p/-b)
    #[arg(short = 'd', long = "distorted", value_name = "PATH")]
    pub(crate) distorted: Option<PathBuf>,
    /// Raw input width
    #[arg(short = 'w', long = "width", value_parser = parse_u32)]
    pub(crate) width: Option<u32>,
    /// Raw input height
    #[arg(short = 'h', long = "height", value_parser = parse_u32)]
    pub(crate) height: Option<u32>,
    /// Raw input pixel format: 420, 422, 444 or 400
    #[arg(short = 'p', long = "pixel_format", alias = "pixel-format", value_parser = parse_pix_fmt)]
    pub(crate) pixel_format: Option<PixelFormat>,
    /// Raw input bit depth: 8, 10, 12 or 16
    #[arg(short = 'b', long = "bitdepth", value_parser = parse_bitdepth)]
    pub(crate) bitdepth: Option<u32>,
    /// Model, colon-separated: path=FILE | version=NAME, name=NAME, disable_clip,
    /// enable_transform, <extractor>.<option>=VALUE (repeatable)
    #[arg(short = 'm', long = "model", value_name = "PARAMS", value_parser = parse_model)]
    pub(crate) model: Vec<ModelSpec>,
    /// Extra feature extractor: NAME[=key=value:key=value...] (repeatable)
    #[arg(long = "feature", value_name = "NAME[=OPTS]", value_parser = parse_feature)]
    pub(crate) feature: Vec<FeatureArg>,
    /// AOM common test conditions preset (v1.0 ... v7.0): models vmaf_v0.6.1 (`vmaf`) and
    /// vmaf_v0.6.1neg (`vmaf_neg`), features psnr, ciede, float_ssim, float_ms_ssim, psnr_hvs,
    /// from v3.0 cambi; from v6.0 the inputs may differ in bit depth; v7.0 scores float_ssim
    /// at full scale. Added where it stands among -m/--feature (repeatable)
    #[arg(long = "aom_ctc", alias = "aom-ctc", value_name = "VERSION", value_parser = ctc::parse_aom_ctc)]
    pub(crate) aom_ctc: Vec<ctc::Preset>,
    /// Netflix common test conditions preset (v1.0): models vmaf_4k_v0.6.1 (`vmaf`) and
    /// vmaf_4k_v0.6.1neg (`vmaf_neg`), features psnr (with chroma), float_ssim, cambi
    #[arg(long = "nflx_ctc", alias = "nflx-ctc", value_name = "VERSION", value_parser = ctc::parse_nflx_ctc)]
    pub(crate) nflx_ctc: Vec<ctc::Preset>,
    /// Set by an --aom_ctc preset of v6.0 or later: reference and distorted may differ in bit
    /// depth; the lower one is shifted up to the higher.
    #[arg(skip)]
    pub(crate) common_bitdepth: bool,
    /// Output file
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,
    /// Write the output file as XML (default)
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    pub(crate) xml: bool,
    /// Write the output file as JSON
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    pub(crate) json: bool,
    /// Write the output file as CSV
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    pub(crate) csv: bool,
    /// Write the output file as subtitles
    #[arg(long, overrides_with_all = ["xml", "json", "csv", "sub"])]
    pub(crate) sub: bool,
    /// Worker threads (0 = extract on the reading thread; with --backend hip, as many as the
    /// cores the input readers leave, 2 to 16)
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_threads)]
    pub(crate) threads: u32,
    /// Score only every N-th frame
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_u32)]
    pub(crate) subsample: u32,
    /// CPU instruction sets to disable: 8 = AVX2, 16 = AVX-512, 1 = NEON, 255 = scalar only
    #[arg(long, value_name = "MASK", default_value = "0", value_parser = parse_u64)]
    pub(crate) cpumask: u64,
    /// GPU operations to disable
    #[arg(long, value_name = "MASK", default_value = "0", value_parser = parse_u64)]
    pub(crate) gpumask: u64,
    /// Stop after N frames (0 = all)
    #[arg(long = "frame_cnt", alias = "frame-cnt", value_name = "N", default_value = "0", value_parser = parse_u32)]
    pub(crate) frame_cnt: u32,
    /// Skip the first N reference frames
    #[arg(long = "frame_skip_ref", alias = "frame-skip-ref", value_name = "N", default_value = "0", value_parser = parse_u32)]
    pub(crate) frame_skip_ref: u32,
    /// Skip the first N distorted frames
    #[arg(long = "frame_skip_dist", alias = "frame-skip-dist", value_name = "N", default_value = "0", value_parser = parse_u32)]
    pub(crate) frame_skip_dist: u32,
    /// No models: extract the --feature features only
    #[arg(short = 'n', long = "no_prediction", alias = "no-prediction")]
    pub(crate) no_prediction: bool,
    /// No progress bar
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
    /// Print the libvmaf version and exit
    #[arg(short = 'v', long)]
    pub(crate) version: bool,
    /// Where features are extracted
    #[arg(long, value_enum, default_value = "cpu")]
    pub(crate) backend: Backend,
    /// GPU for --backend hip: an index, or `all`
    #[arg(long = "hip-device", value_name = "N|all", value_parser = parse_hip_device)]
    pub(crate) hip_device: Option<DeviceChoice>,
    /// Print help
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
}

impl Cli {
    /// The process's arguments, with the `--aom_ctc`/`--nflx_ctc` presets expanded; `--help`
    /// ends with the built-in models and extractors.
    pub(crate) fn from_env() -> Result<Cli, clap::Error> {
        let m = Cli::command().after_help(lists()).try_get_matches()?;
        let mut cli = Cli::from_arg_matches(&m)?;
        ctc::expand(&mut cli, &m);
        Ok(cli)
    }

    /// The inputs and how to read them. Both inputs are required; raw input needs all four
    /// of -w/-h/-p/-b.
    pub(crate) fn driver_options(&self) -> Result<driver::Options, String> {
        let reference = self
            .reference
            .clone()
            .ok_or("the reference (-r/--reference) is required")?;
        let distorted = self
            .distorted
            .clone()
            .ok_or("the distorted video (-d/--distorted) is required")?;
        let raw = VideoInfo::raw(
            self.width,
            self.height,
            self.pixel_format,
            self.bitdepth,
            "-w/--width, -h/--height, -p/--pixel_format and -b/--bitdepth",
        )
        .map_err(|e| match e {
            vmaf_hip::Error::Invalid(m) => m,
            e => e.to_string(),
        })?;
        Ok(driver::Options {
            raw,
            common_bitdepth: self.common_bitdepth,
            frame_skip_ref: self.frame_skip_ref,
            frame_skip_dist: self.frame_skip_dist,
            frame_cnt: self.frame_cnt,
            ..driver::Options::new(reference, distorted)
        })
    }

    /// The models to score: those given, else (unless -n) the default one. Names must differ.
    pub(crate) fn models(&self) -> Result<Vec<ModelSpec>, String> {
        let mut models = self.model.clone();
        if models.is_empty() && !self.no_prediction {
            models.push(ModelSpec::default_model());
        }
        for (i, m) in models.iter().enumerate() {
            if models[..i].iter().any(|o| o.name == m.name) {
                return Err(format!(
                    "two models are named {:?}; name each one with -m ...:name=NAME",
                    m.name
                ));
            }
        }
        Ok(models)
    }

    /// The output file's format: XML unless another is asked for.
    pub(crate) fn output_format(&self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else if self.csv {
            OutputFormat::Csv
        } else if self.sub {
            OutputFormat::Sub
        } else {
            OutputFormat::Xml
        }
    }
}

/// The help's closing lines: every built-in model and feature extractor by name.
fn lists() -> String {
    let models: Vec<&str> = vmaf_hip::model::builtin_versions().collect();
    format!(
        "Built-in models (-m version=NAME): {}\nFeature extractors (--feature NAME): {}",
        models.join(", "),
        vmaf_hip::feature::extractor_names()
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `strtoul(s, 0)`-style unsigned: decimal, `0x` hex or leading-`0` octal.
fn parse_uint(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    u64::from_str_radix(digits, radix).map_err(|_| "should be an unsigned integer".to_string())
}

fn parse_u32(s: &str) -> Result<u32, String> {
    u32::try_from(parse_uint(s)?).map_err(|_| "too large".to_string())
}

fn parse_threads(s: &str) -> Result<u32, String> {
    let n = parse_u64(s)?;
    let max = vmaf_hip::limits::MAX_THREADS;
    match u32::try_from(n) {
        Ok(t) if t as usize <= max => Ok(t),
        _ => Err(format!("at most {max} worker threads are supported")),
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    parse_uint(s)
}

fn parse_bitdepth(s: &str) -> Result<u32, String> {
    let b = parse_u32(s).map_err(|_| "should be 8, 10, 12 or 16".to_string())?;
    vmaf_hip::io::raw_bitdepth(b).map_err(|_| "should be 8, 10, 12 or 16".into())
}

fn parse_pix_fmt(s: &str) -> Result<PixelFormat, String> {
    vmaf_hip::io::raw_pixel_format(s).map_err(|_| "should be 420, 422, 444 or 400".into())
}

fn parse_hip_device(s: &str) -> Result<DeviceChoice, String> {
    if s == "all" {
        return Ok(DeviceChoice::All);
    }
    s.parse::<u32>()
        .map(|i| DeviceChoice::Index(i as usize))
        .map_err(|_| "should be a device index or `all`".into())
}

fn parse_model(s: &str) -> Result<ModelSpec, String> {
    ModelSpec::parse(s).map_err(|e| describe(&e))
}

pub(crate) fn parse_feature(s: &str) -> Result<FeatureArg, String> {
    let (name, rest) = s.split_once('=').unwrap_or((s, ""));
    if name.is_empty() {
        return Err("missing feature name".into());
    }
    let mut opts = Dict::new();
    for kv in rest.split(':').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| format!("bad option {kv:?} for feature {name} (expected key=value)"))?;
        opts.set(k, v);
    }
    Ok(FeatureArg {
        name: name.into(),
        opts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_errors_are_the_library_messages() {
        // The grammar is tested with `ModelSpec`; clap prints these texts as they are.
        assert_eq!(
            parse_model("version=a:name=").unwrap_err(),
            "empty model name (name=)"
        );
        assert_eq!(
            parse_model("name=x").unwrap_err(),
            "a model needs path=FILE or version=NAME"
        );
    }

    #[test]
    fn parses_features_and_numbers() {
        let f = parse_feature("psnr=enable_chroma=false:min_sse=0.5").unwrap();
        assert_eq!(f.name, "psnr");
        assert_eq!(f.opts.get("enable_chroma"), Some("false"));
        assert_eq!(f.opts.get("min_sse"), Some("0.5"));
        assert!(parse_feature("psnr=enable_chroma").is_err());
        assert_eq!(parse_feature("vif").unwrap().opts.len(), 0);
        assert_eq!(parse_u64("0xff"), Ok(255));
        assert_eq!(parse_u64("010"), Ok(8));
        assert_eq!(parse_u64("0"), Ok(0));
        assert!(parse_u32("12a").is_err());
        assert!(parse_u32("-1").is_err());
        assert!(parse_bitdepth("9").is_err());
        assert_eq!(parse_pix_fmt("400"), Ok(PixelFormat::Yuv400p));
        assert_eq!(parse_hip_device("all"), Ok(DeviceChoice::All));
        assert_eq!(parse_hip_device("1"), Ok(DeviceChoice::Index(1)));
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
        let c = Cli::try_parse_from(["vmaf", "-r", "a", "-d", "b", "--json", "--xml", "-h", "4"])
            .unwrap();
        assert!(c.xml && !c.json);
        assert_eq!(c.height, Some(4));
        assert_eq!(c.output_format(), OutputFormat::Xml);
    }

    /// The flags land in the driver's options; inputs and raw flags are checked.
    #[test]
    fn driver_options_from_flags() {
        let c = Cli::try_parse_from([
            "vmaf",
            "-r",
            "a.yuv",
            "-d",
            "b.yuv",
            "-w",
            "64",
            "-h",
            "32",
            "-p",
            "422",
            "-b",
            "10",
            "--frame_skip_ref",
            "2",
            "--frame-skip-dist",
            "3",
            "--frame_cnt",
            "0x10",
            "--backend",
            "hip",
        ])
        .unwrap();
        let o = c.driver_options().unwrap();
        assert_eq!(
            (o.reference.to_str(), o.distorted.to_str()),
            (Some("a.yuv"), Some("b.yuv"))
        );
        assert_eq!(
            o.raw,
            Some(VideoInfo {
                width: 64,
                height: 32,
                pix_fmt: PixelFormat::Yuv422p,
                bpc: 10
            })
        );
        assert_eq!(
            (o.frame_skip_ref, o.frame_skip_dist, o.frame_cnt),
            (2, 3, 16)
        );
        assert!(!o.common_bitdepth);
        assert_eq!(o.read_ahead, driver::READ_AHEAD);

        let c = Cli::try_parse_from(["vmaf", "-r", "a", "-d", "b", "-w", "64"]).unwrap();
        assert!(c
            .driver_options()
            .unwrap_err()
            .starts_with("raw .yuv input needs all"));
        let c = Cli::try_parse_from(["vmaf", "-d", "b"]).unwrap();
        assert!(c.driver_options().unwrap_err().contains("-r/--reference"));
        let c = Cli::try_parse_from(["vmaf", "-r", "a", "-d", "b"]).unwrap();
        let o = c.driver_options().unwrap();
        assert!(o.raw.is_none());
    }

    #[test]
    fn default_model_and_name_clashes() {
        let c = Cli::try_parse_from(["vmaf"]).unwrap();
        let m = c.models().unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].version.as_deref(), Some("vmaf_v0.6.1"));
        let c = Cli::try_parse_from(["vmaf", "-n"]).unwrap();
        assert!(c.models().unwrap().is_empty());
        let c =
            Cli::try_parse_from(["vmaf", "-m", "version=vmaf_v0.6.1", "-m", "version=x"]).unwrap();
        assert_eq!(
            c.models().unwrap_err(),
            "two models are named \"vmaf\"; name each one with -m ...:name=NAME"
        );
    }
}
