//! A model named the way the `vmaf` command's `-m` takes one (`version=NAME:name=neg:disable_clip:
//! adm.adm_enhn_gain_limit=1.2`, ...), and loading it: a single model, else a bootstrap
//! collection, with the `<extractor>.<option>` overloads applied. Shared by the command and the
//! Python bindings so both read the same grammar and load the same way.

use std::path::Path;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::feature::Dict;

use super::{Model, ModelCollection, ModelConfig, ModelFlags};

/// One model to load: a built-in version or a file, its score name, flags and overloads.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub path: Option<String>,
    pub version: Option<String>,
    /// The name its scores are stored under.
    pub name: String,
    pub flags: ModelFlags,
    /// `<extractor>.<option>=<value>` overloads, one dictionary each, in argument order.
    pub overloads: Vec<(String, Dict)>,
}

/// Why [`ModelSpec::load`] failed, kept apart so each caller can word it its own way.
#[derive(Debug)]
pub enum LoadError {
    /// Neither a model nor a bootstrap collection loaded; the single model's error.
    Load(Error),
    /// An `<extractor>.<option>` overload was refused.
    Overload { extractor: String, error: Error },
}

impl LoadError {
    /// The library error underneath.
    pub fn error(&self) -> &Error {
        match self {
            LoadError::Load(e) | LoadError::Overload { error: e, .. } => e,
        }
    }
}

/// A loaded model, and the bootstrap collection it heads if it is one.
#[derive(Debug)]
pub struct LoadedModel {
    /// What summaries call it: see [`ModelSpec::label`].
    pub label: String,
    pub model: Model,
    pub collection: Option<ModelCollection>,
}

impl LoadedModel {
    /// Asks `ctx` for the features the model (or every model of its collection) reads.
    pub fn register(&self, ctx: &mut Context) -> Result<()> {
        match &self.collection {
            Some(c) => ctx.use_features_from_model_collection(c),
            None => ctx.use_features_from_model(&self.model),
        }
    }
}

impl ModelSpec {
    fn empty() -> Self {
        ModelSpec {
            path: None,
            version: None,
            name: "vmaf".into(),
            flags: ModelFlags::empty(),
            overloads: Vec::new(),
        }
    }

    /// The command's model when none is given: `version=vmaf_v0.6.1`.
    pub fn default_model() -> Self {
        ModelSpec {
            version: Some("vmaf_v0.6.1".into()),
            ..Self::empty()
        }
    }

    /// What the score summary calls this model: its version, else its path.
    pub fn label(&self) -> &str {
        self.version
            .as_deref()
            .or(self.path.as_deref())
            .unwrap_or(&self.name)
    }

    /// The `-m` grammar: `key=value` pairs split by `:` (`path`, `version`, `name`,
    /// `disable_clip`, `enable_transform`, `<extractor>.<option>`); the two flags may stand
    /// alone. Errors are [`Error::Invalid`] with the message the command prints.
    pub fn parse(s: &str) -> Result<Self> {
        let mut m = Self::empty();
        for kv in s.split(':').filter(|kv| !kv.is_empty()) {
            let (key, val) = match kv.split_once('=') {
                Some(kv) => kv,
                None if kv == "disable_clip" || kv == "enable_transform" => (kv, "true"),
                None => return Err(Error::inval(format!("bad model option {kv:?}"))),
            };
            match key {
                "path" => m.path = Some(val.into()),
                "version" => m.version = Some(val.into()),
                // An empty name would be an empty JSON key and XML attribute name.
                "name" if val.is_empty() => return Err(Error::inval("empty model name (name=)")),
                "name" => m.name = val.into(),
                "disable_clip" if val == "true" => m.flags |= ModelFlags::DISABLE_CLIP,
                "enable_transform" if val == "true" => m.flags |= ModelFlags::ENABLE_TRANSFORM,
                "disable_clip" | "enable_transform" => {}
                _ => {
                    let (ext, opt) = key
                        .split_once('.')
                        .filter(|(e, o)| !e.is_empty() && !o.is_empty())
                        .ok_or_else(|| {
                            Error::inval(format!(
                                "bad model option {kv:?} (expected <extractor>.<option>=<value>)"
                            ))
                        })?;
                    let mut d = Dict::new();
                    d.set(opt, val);
                    m.overloads.push((ext.into(), d));
                }
            }
        }
        if m.path.is_none() && m.version.is_none() {
            return Err(Error::inval("a model needs path=FILE or version=NAME"));
        }
        Ok(m)
    }

    /// [`parse`](Self::parse), or without any `=` a bare built-in version name or a path (an
    /// existing file, or anything with a path separator or a `.json`/`.pkl` suffix).
    pub fn parse_loose(s: &str) -> Result<Self> {
        if s.contains('=') {
            return Self::parse(s);
        }
        if s.is_empty() {
            return Err(Error::inval("empty model name"));
        }
        let looks_like_path = s.contains(std::path::MAIN_SEPARATOR)
            || s.ends_with(".json")
            || s.ends_with(".pkl")
            || Path::new(s).is_file();
        let mut m = Self::empty();
        if looks_like_path {
            m.path = Some(s.into());
        } else {
            m.version = Some(s.into());
        }
        Ok(m)
    }

    /// Loads the model, or failing that a bootstrap collection (as upstream's command does),
    /// then applies the overloads in order. A failed load reports the single model's error.
    pub fn load(&self) -> std::result::Result<LoadedModel, LoadError> {
        let cfg = ModelConfig {
            name: Some(self.name.clone()),
            flags: self.flags,
        };
        let no_source = || LoadError::Load(Error::inval("a model needs a version or a path"));
        let single = match (&self.version, &self.path) {
            (Some(v), _) => Model::load(v, &cfg),
            (None, Some(p)) => Model::load_from_path(Path::new(p), &cfg),
            (None, None) => return Err(no_source()),
        };
        let (mut model, mut collection) = match single {
            Ok(m) => (m, None),
            Err(first) => {
                let coll = match (&self.version, &self.path) {
                    (Some(v), _) => ModelCollection::load(v, &cfg),
                    (_, Some(p)) => ModelCollection::load_from_path(Path::new(p), &cfg),
                    (None, None) => return Err(no_source()),
                };
                match coll {
                    Ok((m, c)) => (m, Some(c)),
                    Err(_) => return Err(LoadError::Load(first)),
                }
            }
        };
        for (ext, opts) in &self.overloads {
            match &mut collection {
                Some(c) => c.feature_overload(&mut model, ext, opts),
                None => model.feature_overload(ext, opts),
            }
            .map_err(|error| LoadError::Overload {
                extractor: ext.clone(),
                error,
            })?;
        }
        Ok(LoadedModel {
            label: self.label().to_string(),
            model,
            collection,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inval_text(r: Result<ModelSpec>) -> String {
        match r {
            Err(Error::Invalid(m)) => m,
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    #[test]
    fn grammar() {
        let m = ModelSpec::parse(
            "version=vmaf_v0.6.1neg:name=neg:disable_clip:adm.adm_enhn_gain_limit=1.2",
        )
        .unwrap();
        assert_eq!(m.version.as_deref(), Some("vmaf_v0.6.1neg"));
        assert_eq!(m.path, None);
        assert_eq!(m.name, "neg");
        assert_eq!(m.flags, ModelFlags::DISABLE_CLIP);
        assert_eq!(m.overloads.len(), 1);
        assert_eq!(m.overloads[0].0, "adm");
        assert_eq!(m.overloads[0].1.get("adm_enhn_gain_limit"), Some("1.2"));
        assert_eq!(m.label(), "vmaf_v0.6.1neg");

        let m =
            ModelSpec::parse("path=/x/y.json:enable_transform=true:disable_clip=false").unwrap();
        assert_eq!(m.path.as_deref(), Some("/x/y.json"));
        assert_eq!(m.flags, ModelFlags::ENABLE_TRANSFORM);
        assert_eq!(m.name, "vmaf");
        assert_eq!(m.label(), "/x/y.json");
        // Empty pairs are skipped; a name may hold anything but be empty.
        let m = ModelSpec::parse("::version=a::name=x\"<&:").unwrap();
        assert_eq!(m.name, "x\"<&");
        assert_eq!(ModelSpec::default_model().label(), "vmaf_v0.6.1");
    }

    #[test]
    fn errors_carry_the_command_texts() {
        let needs = "a model needs path=FILE or version=NAME";
        let cases = [
            ("version=a:bogus", "bad model option \"bogus\""),
            (
                "version=a:noext=1",
                "bad model option \"noext=1\" (expected <extractor>.<option>=<value>)",
            ),
            (
                "version=a:.x=1",
                "bad model option \".x=1\" (expected <extractor>.<option>=<value>)",
            ),
            ("version=a:name=", "empty model name (name=)"),
            ("name=x", needs),
            ("", needs),
            ("disable_clip", needs),
            // The strict grammar has no bare form.
            ("vmaf_v0.6.1", "bad model option \"vmaf_v0.6.1\""),
        ];
        for (arg, text) in cases {
            assert_eq!(inval_text(ModelSpec::parse(arg)), text, "{arg:?}");
        }
    }

    #[test]
    fn loose_form() {
        let m = ModelSpec::parse_loose("vmaf_v0.6.1neg").unwrap();
        assert_eq!(m.version.as_deref(), Some("vmaf_v0.6.1neg"));
        assert_eq!(m.name, "vmaf");
        for p in ["/a/b", "m.json", "m.pkl", "dir/model"] {
            let m = ModelSpec::parse_loose(p).unwrap();
            assert_eq!((m.path.as_deref(), m.version), (Some(p), None), "{p}");
        }
        assert_eq!(inval_text(ModelSpec::parse_loose("")), "empty model name");
        // With an `=` it is the strict grammar, errors included.
        assert_eq!(
            ModelSpec::parse_loose("version=a:name=b").unwrap(),
            ModelSpec::parse("version=a:name=b").unwrap()
        );
        assert!(ModelSpec::parse_loose("name=x").is_err());
    }

    #[test]
    fn load_single_collection_and_failures() {
        let l = ModelSpec::default_model().load().unwrap();
        assert_eq!(l.label, "vmaf_v0.6.1");
        assert!(l.collection.is_none());
        assert_eq!(l.model.name, "vmaf");

        let l = ModelSpec::parse("version=vmaf_b_v0.6.3:name=b")
            .unwrap()
            .load()
            .unwrap();
        assert!(l.collection.is_some());
        assert_eq!(l.model.name, "b");

        match ModelSpec::parse("version=no_such_model").unwrap().load() {
            Err(LoadError::Load(Error::Invalid(_))) => {}
            other => panic!("{other:?}"),
        }
        match ModelSpec::parse("path=/nonexistent/model.json")
            .unwrap()
            .load()
        {
            Err(LoadError::Load(e)) => assert!(e.to_string().contains("/nonexistent/model.json")),
            other => panic!("{other:?}"),
        }
        let spec = ModelSpec {
            version: None,
            ..ModelSpec::default_model()
        };
        assert!(matches!(
            spec.load(),
            Err(LoadError::Load(Error::Invalid(_)))
        ));
    }

    #[test]
    fn overloads_reach_single_and_bootstrap_models() {
        let adm_gain = |m: &Model| {
            m.features
                .iter()
                .filter(|f| f.name.contains("adm"))
                .map(|f| f.opts.get("adm_enhn_gain_limit").map(str::to_string))
                .collect::<Vec<_>>()
        };
        let l = ModelSpec::parse("version=vmaf_v0.6.1:adm.adm_enhn_gain_limit=1.2")
            .unwrap()
            .load()
            .unwrap();
        assert_eq!(adm_gain(&l.model), [Some("1.2".to_string())]);
        let l = ModelSpec::parse("version=vmaf_b_v0.6.3:adm.adm_enhn_gain_limit=1.2")
            .unwrap()
            .load()
            .unwrap();
        assert_eq!(adm_gain(&l.model), [Some("1.2".to_string())]);
        assert!(l.collection.is_some());
    }
}
