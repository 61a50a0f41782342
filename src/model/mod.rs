//! VMAF models: JSON parsing, the libsvm nu-SVR predictor, normalisation, transform, clipping and
//! bootstrap model collections. Built-in models are the JSON files under `models/`.

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

use bitflags::bitflags;

use crate::error::{Error, Result};
use crate::feature::Dict;
use crate::limits::MAX_MODEL_FILE_BYTES;

mod builtin;
mod parse;
mod spec;
mod svm;
#[cfg(test)]
mod tests;

pub use builtin::versions as builtin_versions;
use parse::{ModelKind, Norm, Params};
pub use spec::{LoadError, LoadedModel, ModelSpec};

bitflags! {
    /// libvmaf's `enum VmafModelFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct ModelFlags: u64 {
        const DISABLE_CLIP = 1;
        const ENABLE_TRANSFORM = 2;
        const DISABLE_TRANSFORM = 4;
    }
}

/// How to load a model (libvmaf's `VmafModelConfig`).
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    /// Name under which scores are stored; `None` means `"vmaf"`.
    pub name: Option<String>,
    pub flags: ModelFlags,
}

/// One feature a model reads: its full name and the extractor options that go with it.
#[derive(Debug, Clone)]
pub struct ModelFeature {
    /// Full provided feature name, e.g. `VMAF_integer_feature_adm2_score`.
    pub name: String,
    /// Extractor options from `feature_opts_dicts` plus overloads.
    pub opts: Dict,
}

/// A loaded model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Feature name under which predictions are stored.
    pub name: String,
    /// Features in libsvm node order.
    pub features: Vec<ModelFeature>,
    params: Arc<Params>,
}

/// `cfg.name`, or libvmaf's default `"vmaf"`.
fn model_name(cfg: &ModelConfig) -> String {
    cfg.name.clone().unwrap_or_else(|| "vmaf".to_string())
}

/// A model file's text, refused past [`MAX_MODEL_FILE_BYTES`] before more than that is read
/// (a device such as `/dev/zero`, a sparse or mistaken file).
fn read_bounded(path: &Path) -> Result<String> {
    use std::io::Read;
    let limit = MAX_MODEL_FILE_BYTES;
    let too_big = || {
        Error::inval(format!(
            "larger than {} MiB, more than any model file",
            limit >> 20
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| Error::inval(e.to_string()))?;
    let meta = file.metadata().map_err(|e| Error::inval(e.to_string()))?;
    if meta.is_dir() {
        return Err(Error::inval("is a directory"));
    }
    if meta.len() > limit as u64 {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    // Sized by the file (at most the limit): fallible, as every allocation a file sizes.
    bytes
        .try_reserve_exact(meta.len() as usize + 1)
        .map_err(|_| Error::NoMem(format!("cannot allocate {} bytes", meta.len())))?;
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::inval(e.to_string()))?;
    if bytes.len() > limit {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|_| Error::inval("not UTF-8 text"))
}

/// Reads a model file, turning failures into libvmaf's `-EINVAL` with its `.pkl` hint.
fn read_model_file<T>(path: &Path, what: &str, parse: impl FnOnce(&str) -> Result<T>) -> Result<T> {
    let res = read_bounded(path).and_then(|text| parse(&text));
    res.map_err(|e| {
        let shown = path.display();
        let p = path.to_string_lossy();
        let hint = match p.rfind('.') {
            Some(i) if &p[i..] == ".pkl" => {
                " (support for pkl model files has been removed, use json)"
            }
            _ => "",
        };
        Error::inval(format!(
            "could not read {what} from path \"{shown}\": {e}{hint}"
        ))
    })
}

/// The extractor providing `feature`, by the registry's provided features (libvmaf's lookup).
fn extractor_of(feature: &str) -> Option<&'static str> {
    crate::feature::extractor_for_feature(feature)
}

/// `y` through the optional piecewise-linear map, with libvmaf's handling of degenerate knot
/// lists (fewer than two knots: unchanged; a non-increasing segment stops the walk and keeps the
/// value reached so far).
fn piecewise_linear(x: f64, knots: &[(f64, f64)]) -> f64 {
    if knots.len() <= 1 {
        return x;
    }
    let last = knots.len() - 2;
    let mut y = 0.0;
    for (i, pair) in knots.windows(2).enumerate() {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        if !(x0 < x1 && y0 <= y1) {
            break;
        }
        let inside = x0 <= x && x <= x1;
        let below = i == 0 && x < x0;
        let above = i == last && x > x1;
        if !(inside || below || above) {
            continue;
        }
        y = if y0 == y1 {
            y0
        } else {
            // The line through both knots; the x0 == 0 case is written as upstream writes it.
            let (slope, offset) = if x0 == 0.0 {
                ((y1 - y0) / x1, y0)
            } else {
                let a = (y1 - y0) / (x1 - x0);
                (a, y0 - x0 * a)
            };
            slope * x + offset
        };
    }
    y
}

impl Model {
    fn from_json(root: &serde_json::Value, name: String, flags: ModelFlags) -> Result<Model> {
        let (features, params) = parse::model(root, flags)?;
        Ok(Model {
            name,
            features,
            params: Arc::new(params),
        })
    }

    fn from_text(text: &str, cfg: &ModelConfig) -> Result<Model> {
        Model::from_json(&parse::json(text)?, model_name(cfg), cfg.flags)
    }

    /// Loads built-in model `version`.
    pub fn load(version: &str, cfg: &ModelConfig) -> Result<Model> {
        let text = builtin::json(version).ok_or_else(|| {
            Error::inval(format!(
                "no such built-in model: \"{version}\" (built in: {})",
                builtin::versions().collect::<Vec<_>>().join(", ")
            ))
        })?;
        Model::from_text(text, cfg)
    }

    /// Parses model JSON text (the content of a model file).
    pub fn load_from_str(text: &str, cfg: &ModelConfig) -> Result<Model> {
        Model::from_text(text, cfg)
    }

    /// Loads a model JSON file.
    pub fn load_from_path(path: &Path, cfg: &ModelConfig) -> Result<Model> {
        read_model_file(path, "model", |text| Model::from_text(text, cfg))
    }

    /// Merges `opts` into the options of every feature provided by extractor `extractor_name`
    /// (values in `opts` replace existing ones).
    pub fn feature_overload(&mut self, extractor_name: &str, opts: &Dict) -> Result<()> {
        for f in &mut self.features {
            if extractor_of(&f.name) != Some(extractor_name) {
                continue;
            }
            for (k, v) in opts.iter() {
                f.opts.set(k, v);
            }
        }
        Ok(())
    }

    /// Normalised feature value `x` of feature `i`.
    fn normalize(&self, i: usize, x: f64) -> Result<f64> {
        let (slope, intercept) = self.params.feature_norm[i];
        match self.params.norm {
            Norm::None => Ok(x),
            Norm::LinearRescale => Ok(slope * x + intercept),
            Norm::Unknown => Err(Error::inval("model has no norm_type")),
        }
    }

    /// Inverse of [`Self::normalize`].
    fn denormalize(&self, i: usize, x: f64) -> f64 {
        let (slope, intercept) = self.params.feature_norm[i];
        match self.params.norm {
            Norm::LinearRescale => (x - intercept) / slope,
            _ => x,
        }
    }

    /// v1.0.16 chroma-from-luma correction of the normalised nodes: a zero `speed_chroma` value
    /// is replaced by `c - c * adm3` (both in feature units).
    fn correct_chroma(&self, nodes: &mut [f64], c: f64) -> Result<()> {
        if c == 0.0 {
            // Upstream returns success without producing a score here.
            return Err(Error::inval("model: chroma_correction_parameter is 0"));
        }
        let (mut guiding, mut guided) = (None, None);
        for (i, f) in self.features.iter().enumerate() {
            if f.name.contains("adm3") {
                if guiding.is_some() {
                    return Err(Error::inval("model: more than one adm3 feature"));
                }
                guiding = Some(self.denormalize(i, nodes[i]));
            }
            if f.name.contains("speed_chroma") {
                if guided.is_some() {
                    return Err(Error::inval("model: more than one speed_chroma feature"));
                }
                if self.denormalize(i, nodes[i]) != 0.0 {
                    return Ok(());
                }
                guided = Some(i);
            }
        }
        if let (Some(adm3), Some(i)) = (guiding, guided) {
            nodes[i] = self.normalize(i, (-c * adm3) + c)?;
        }
        Ok(())
    }

    /// Normalise, SVM and denormalise: the score before transform and clip.
    fn raw_predict(&self, values: &[f64]) -> Result<f64> {
        if values.len() != self.features.len() {
            return Err(Error::inval(format!(
                "model {} needs {} feature values, got {}",
                self.name,
                self.features.len(),
                values.len()
            )));
        }
        let mut nodes = values
            .iter()
            .enumerate()
            .map(|(i, &x)| self.normalize(i, x))
            .collect::<Result<Vec<_>>>()?;
        if let Some(c) = self.params.chroma_correction {
            self.correct_chroma(&mut nodes, c)?;
        }
        let y = self.params.svm.predict(&nodes);
        Ok(match self.params.norm {
            Norm::LinearRescale => (y - self.params.intercept) / self.params.slope,
            _ => y,
        })
    }

    /// The score transform (polynomial, knots, rectification), if enabled and not disabled by
    /// `flags`.
    fn transform(&self, y: f64, flags: ModelFlags) -> f64 {
        let t = &self.params.transform;
        if !t.enabled || flags.contains(ModelFlags::DISABLE_TRANSFORM) {
            return y;
        }
        let mut out = y;
        if t.p0.is_some() || t.p1.is_some() || t.p2.is_some() {
            out = 0.0;
            if let Some(p0) = t.p0 {
                out += p0;
            }
            if let Some(p1) = t.p1 {
                out += p1 * y;
            }
            if let Some(p2) = t.p2 {
                out += p2 * y * y;
            }
        }
        if let Some(knots) = &t.knots {
            out = piecewise_linear(out, knots);
        }
        if t.out_lte_in && out > y {
            out = y;
        }
        if t.out_gte_in && out < y {
            out = y;
        }
        out
    }

    /// Clamps to `score_clip` unless clipping is off.
    fn clip(&self, y: f64, flags: ModelFlags) -> f64 {
        match self.params.clip {
            Some((min, max)) if !flags.contains(ModelFlags::DISABLE_CLIP) => {
                let y = if y < min { min } else { y };
                if y > max {
                    max
                } else {
                    y
                }
            }
            _ => y,
        }
    }

    /// Predicts one frame's score from its feature values (in `self.features` order), applying
    /// normalisation, SVM, denormalisation, transform and clip as configured. `flags` may add
    /// DISABLE_TRANSFORM / DISABLE_CLIP (used by bootstrap); ENABLE_TRANSFORM only acts at load.
    pub fn predict(&self, values: &[f64], flags: ModelFlags) -> Result<f64> {
        let y = self.raw_predict(values)?;
        Ok(self.clip(self.transform(y, flags), flags))
    }
}

/// libvmaf's `VmafModelCollectionScore` contents for a bootstrap collection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BootstrapScore {
    pub bagging_score: f64,
    pub stddev: f64,
    pub ci_p95_lo: f64,
    pub ci_p95_hi: f64,
}

/// A bootstrap model collection (`vmaf_b_v0.6.3`).
#[derive(Debug, Clone)]
pub struct ModelCollection {
    /// Collection name (scores stored as `<name>_bagging` etc.).
    pub name: String,
    /// Member models, named `<name>_0001`…
    pub models: Vec<Model>,
}

/// Linear interpolation between the order statistics around `perc` percent of sorted `s`.
fn percentile(s: &[f64], perc: f64) -> f64 {
    let p = perc * (s.len() - 1) as f64 / 100.0;
    let (l, r) = (p.floor(), p.ceil());
    let (li, ri) = (l as usize, r as usize);
    if li == ri {
        s[li]
    } else {
        s[li] * (r - p) + s[ri] * (p - l)
    }
}

impl ModelCollection {
    /// Parses a collection JSON object: model `"0"` becomes the returned ordinary model named
    /// `cfg.name`; `"1"`, `"2"`, … (consecutive keys) form the collection.
    fn from_text(text: &str, cfg: &ModelConfig) -> Result<(Model, ModelCollection)> {
        let root = parse::json(text)?;
        let obj = root
            .as_object()
            .ok_or_else(|| Error::inval("model collection: top level must be an object"))?;
        let name = model_name(cfg);
        let first = obj
            .get("0")
            .ok_or_else(|| Error::inval("model collection: no model \"0\""))?;
        let model = Model::from_json(first, name.clone(), cfg.flags)?;
        let mut models: Vec<Model> = Vec::new();
        while let Some(m) = obj.get(&(models.len() + 1).to_string()) {
            let member = format!("{name}_{:04}", models.len() + 1);
            let m = Model::from_json(m, member, cfg.flags)?;
            if models
                .first()
                .is_some_and(|f| f.params.kind != m.params.kind)
            {
                return Err(Error::inval(
                    "model collection: members differ in model_type",
                ));
            }
            models.push(m);
        }
        if models.is_empty() {
            return Err(Error::inval("model collection: no member models"));
        }
        Ok((model, ModelCollection { name, models }))
    }

    /// Loads built-in collection `version` (e.g. `vmaf_b_v0.6.3`).
    pub fn load(version: &str, cfg: &ModelConfig) -> Result<(Model, ModelCollection)> {
        let text = builtin::json(version).ok_or_else(|| {
            Error::inval(format!(
                "no such built-in model collection: \"{version}\" (built in: {})",
                builtin::versions().collect::<Vec<_>>().join(", ")
            ))
        })?;
        ModelCollection::from_text(text, cfg)
    }

    /// Parses collection JSON text (the content of a collection file).
    pub fn load_from_str(text: &str, cfg: &ModelConfig) -> Result<(Model, ModelCollection)> {
        ModelCollection::from_text(text, cfg)
    }

    /// Loads a collection JSON file.
    pub fn load_from_path(path: &Path, cfg: &ModelConfig) -> Result<(Model, ModelCollection)> {
        read_model_file(path, "model collection", |text| {
            ModelCollection::from_text(text, cfg)
        })
    }

    /// Overloads extractor options in every member and in `model` (the collection's model
    /// `"0"`), like `vmaf_model_collection_feature_overload`.
    pub fn feature_overload(
        &mut self,
        model: &mut Model,
        extractor_name: &str,
        opts: &Dict,
    ) -> Result<()> {
        for m in &mut self.models {
            m.feature_overload(extractor_name, opts)?;
        }
        model.feature_overload(extractor_name, opts)
    }

    /// Predicts one frame with every member: returns each member's ordinary (clipped,
    /// transformed) score in member order and the bootstrap summary. `values[i]` are member
    /// `i`'s feature values in its feature order.
    pub fn predict(&self, values: &[Vec<f64>]) -> Result<(Vec<f64>, BootstrapScore)> {
        let first = self
            .models
            .first()
            .ok_or_else(|| Error::inval("empty model collection"))?;
        if !matches!(
            first.params.kind,
            ModelKind::BootstrapSvmNuSvr | ModelKind::ResidueBootstrapSvmNuSvr
        ) {
            return Err(Error::inval(
                "model collection is not a bootstrap collection",
            ));
        }
        if values.len() != self.models.len() {
            return Err(Error::inval(format!(
                "model collection {} has {} members, got values for {}",
                self.name,
                self.models.len(),
                values.len()
            )));
        }
        // Statistics use the raw (untransformed, unclipped) member scores.
        let mut raw = Vec::with_capacity(self.models.len());
        let mut members = Vec::with_capacity(self.models.len());
        for (m, v) in self.models.iter().zip(values) {
            let y = m.raw_predict(v)?;
            raw.push(y);
            members.push(m.clip(m.transform(y, ModelFlags::empty()), ModelFlags::empty()));
        }
        Ok((members, bootstrap(first, raw)))
    }
}

/// Bootstrap statistics of the raw member scores `raw`: mean, population standard deviation and
/// the 2.5/97.5 percentiles, then `first`'s transform and clip applied to the mean and
/// percentiles, and the standard deviation scaled by that map's slope around the mean.
fn bootstrap(first: &Model, mut raw: Vec<f64>) -> BootstrapScore {
    let n = raw.len() as f64;
    let mut sum = 0.0;
    for &s in &raw {
        sum += s;
    }
    let mean = sum / n;
    let mut ssd = 0.0;
    for &s in &raw {
        // powf(2.0), not a multiply: glibc's pow is what upstream calls.
        ssd += (s - mean).powf(2.0);
    }
    let stddev = (ssd / n).sqrt();
    raw.sort_by(f64::total_cmp);
    let lo = percentile(&raw, 2.5);
    let hi = percentile(&raw, 97.5);

    let post = |y: f64| first.clip(first.transform(y, ModelFlags::empty()), ModelFlags::empty());
    let delta = 0.01;
    let slope = (post(mean + delta) - post(mean - delta)) / (2.0 * delta);
    BootstrapScore {
        bagging_score: post(mean),
        stddev: stddev * slope,
        ci_p95_lo: post(lo),
        ci_p95_hi: post(hi),
    }
}
