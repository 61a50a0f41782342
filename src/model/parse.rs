//! JSON model files: `{"param_dict": …, "model_dict": {…}}`. Only `model_dict` matters; within
//! it every recognised key is type-checked as libvmaf's reader does and unknown keys are skipped.

use serde_json::{Map, Value};

use super::svm::Svm;
use super::{ModelFeature, ModelFlags};
use crate::error::{Error, Result};
use crate::feature::Dict;

/// libvmaf's limits on features per model and knots per transform.
const MAX_FEATURES: usize = 64;
const MAX_KNOTS: usize = 10;

/// `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelKind {
    /// Key absent.
    Unknown,
    SvmNuSvr,
    BootstrapSvmNuSvr,
    ResidueBootstrapSvmNuSvr,
}

/// `norm_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Norm {
    /// Key absent: prediction fails, as upstream's does.
    Unknown,
    None,
    LinearRescale,
}

/// `score_transform`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transform {
    pub enabled: bool,
    pub p0: Option<f64>,
    pub p1: Option<f64>,
    pub p2: Option<f64>,
    /// Piecewise-linear knots `(x, y)`; `Some` once a `knots` array was given.
    pub knots: Option<Vec<(f64, f64)>>,
    pub out_lte_in: bool,
    pub out_gte_in: bool,
}

/// Everything prediction needs besides the feature list.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub kind: ModelKind,
    pub norm: Norm,
    /// Output (de)normalisation: `slopes[0]`, `intercepts[0]`.
    pub slope: f64,
    pub intercept: f64,
    /// Per-feature `(slope, intercept)`, parallel to the feature list (0 when absent).
    pub feature_norm: Vec<(f64, f64)>,
    /// `[min, max]` when clipping is on.
    pub clip: Option<(f64, f64)>,
    pub transform: Transform,
    /// v1.0.16 chroma-from-luma correction parameter.
    pub chroma_correction: Option<f64>,
    pub svm: Svm,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::inval(format!("model: {msg}"))
}

fn number(v: &Value, what: &str) -> Result<f64> {
    v.as_f64()
        .ok_or_else(|| bad(format!("{what} must be a number")))
}

fn array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| bad(format!("{what} must be an array")))
}

fn string<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| bad(format!("{what} must be a string")))
}

/// `slopes` / `intercepts`: the output's value, then one per feature.
fn coefficients(v: &Value, what: &str) -> Result<(f64, Vec<f64>)> {
    let a = array(v, what)?;
    let first = number(a.first().unwrap_or(&Value::Null), what)?;
    if a.len() - 1 > MAX_FEATURES {
        return Err(bad(format!("too many {what}")));
    }
    let rest = a[1..]
        .iter()
        .map(|x| number(x, what))
        .collect::<Result<_>>()?;
    Ok((first, rest))
}

/// An optional polynomial coefficient: `null` disables it.
fn poly(v: &Value, what: &str) -> Result<Option<f64>> {
    if v.is_null() {
        Ok(None)
    } else {
        number(v, what).map(Some)
    }
}

fn score_transform(v: &Value, flags: ModelFlags) -> Result<Transform> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad("score_transform must be an object"))?;
    let mut t = Transform::default();
    for (key, val) in obj {
        match key.as_str() {
            "enabled" => {
                t.enabled = val
                    .as_bool()
                    .ok_or_else(|| bad("score_transform.enabled must be a bool"))?
            }
            "p0" => t.p0 = poly(val, "p0")?,
            "p1" => t.p1 = poly(val, "p1")?,
            "p2" => t.p2 = poly(val, "p2")?,
            "knots" if val.is_null() => t.knots = None,
            "knots" => {
                let list = array(val, "knots")?;
                if list.len() > MAX_KNOTS {
                    return Err(bad("too many knots"));
                }
                let mut knots = Vec::with_capacity(list.len());
                for k in list {
                    let xy = array(k, "knot")?;
                    if xy.len() > 2 {
                        return Err(bad("a knot has more than two coordinates"));
                    }
                    // Missing coordinates stay 0, like upstream's zeroed knot table.
                    let x = xy.first().map(|x| number(x, "knot")).transpose()?;
                    let y = xy.get(1).map(|y| number(y, "knot")).transpose()?;
                    knots.push((x.unwrap_or(0.0), y.unwrap_or(0.0)));
                }
                t.knots = Some(knots);
            }
            "out_lte_in" => t.out_lte_in |= string(val, "out_lte_in")? == "true",
            "out_gte_in" => t.out_gte_in |= string(val, "out_gte_in")? == "true",
            _ => {}
        }
    }
    if flags.contains(ModelFlags::ENABLE_TRANSFORM) {
        t.enabled = true;
    }
    Ok(t)
}

/// `feature_opts_dicts`: numbers are normalised (`strtof` + `%g`), bools become
/// `"true"`/`"false"`, strings are kept; duplicate keys must agree.
fn feature_opts(v: &Value) -> Result<Vec<Dict>> {
    let list = array(v, "feature_opts_dicts")?;
    if list.len() > MAX_FEATURES {
        return Err(bad("too many feature_opts_dicts"));
    }
    let mut out = Vec::with_capacity(list.len());
    for d in list {
        let obj = d
            .as_object()
            .ok_or_else(|| bad("feature_opts_dicts entries must be objects"))?;
        let mut dict = Dict::new();
        for (key, val) in obj {
            let text = match val {
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::String(s) => s.clone(),
                _ => return Err(bad(format!("option {key} has an unsupported type"))),
            };
            dict.set_no_overwrite(key, &text)?;
        }
        out.push(dict);
    }
    Ok(out)
}

/// Parses one model object (`{"model_dict": …}`); returns its features and parameters.
pub(crate) fn model(root: &Value, flags: ModelFlags) -> Result<(Vec<ModelFeature>, Params)> {
    let root = root
        .as_object()
        .ok_or_else(|| bad("top level must be an object"))?;
    let dict: &Map<String, Value> = root
        .get("model_dict")
        .ok_or_else(|| bad("no model_dict"))?
        .as_object()
        .ok_or_else(|| bad("model_dict must be an object"))?;

    let mut kind = ModelKind::Unknown;
    let mut norm = Norm::Unknown;
    let (mut slope, mut intercept) = (0.0, 0.0);
    let (mut slopes, mut intercepts) = (Vec::new(), Vec::new());
    let mut clip = None;
    let mut transform = Transform::default();
    let mut chroma_correction = None;
    let mut names: Vec<String> = Vec::new();
    let mut opts: Vec<Dict> = Vec::new();
    let mut svm = None;

    for (key, val) in dict {
        match key.as_str() {
            "model_type" => {
                kind = match string(val, "model_type")? {
                    "LIBSVMNUSVR" => ModelKind::SvmNuSvr,
                    "BOOTSTRAP_LIBSVMNUSVR" => ModelKind::BootstrapSvmNuSvr,
                    "RESIDUEBOOTSTRAP_LIBSVMNUSVR" => ModelKind::ResidueBootstrapSvmNuSvr,
                    t => return Err(bad(format!("unknown model_type {t}"))),
                }
            }
            "norm_type" => {
                norm = match string(val, "norm_type")? {
                    "linear_rescale" => Norm::LinearRescale,
                    "none" => Norm::None,
                    t => return Err(bad(format!("unknown norm_type {t}"))),
                }
            }
            "score_clip" => {
                let a = array(val, "score_clip")?;
                if !flags.contains(ModelFlags::DISABLE_CLIP) {
                    let min = number(a.first().unwrap_or(&Value::Null), "score_clip")?;
                    let max = number(a.get(1).unwrap_or(&Value::Null), "score_clip")?;
                    clip = Some((min, max));
                }
            }
            "score_transform" => transform = score_transform(val, flags)?,
            "chroma_correction_parameter" => {
                chroma_correction = Some(number(val, "chroma_correction_parameter")?)
            }
            "slopes" => (slope, slopes) = coefficients(val, "slopes")?,
            "intercepts" => (intercept, intercepts) = coefficients(val, "intercepts")?,
            "feature_names" => {
                let a = array(val, "feature_names")?;
                if a.len() > MAX_FEATURES {
                    return Err(bad("too many feature_names"));
                }
                names = a
                    .iter()
                    .map(|n| string(n, "feature_names").map(str::to_string))
                    .collect::<Result<_>>()?;
            }
            "feature_opts_dicts" => opts = feature_opts(val)?,
            "model" => svm = Some(Svm::parse(string(val, "model")?)?),
            _ => {}
        }
    }

    let svm = svm.ok_or_else(|| bad("no libsvm model"))?;
    let feature_norm = (0..names.len())
        .map(|i| {
            (
                slopes.get(i).copied().unwrap_or(0.0),
                intercepts.get(i).copied().unwrap_or(0.0),
            )
        })
        .collect();
    let mut opts = opts.into_iter();
    let features = names
        .into_iter()
        .map(|name| ModelFeature {
            name,
            opts: opts.next().unwrap_or_default(),
        })
        .collect();
    Ok((
        features,
        Params {
            kind,
            norm,
            slope,
            intercept,
            feature_norm,
            clip,
            transform,
            chroma_correction,
            svm,
        },
    ))
}

/// Parses the first JSON value of `text` (trailing text is ignored, as libvmaf's stream reader
/// does).
pub(crate) fn json(text: &str) -> Result<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()
        .ok_or_else(|| bad("empty JSON"))?
        .map_err(|e| bad(format!("invalid JSON: {e}")))
}
