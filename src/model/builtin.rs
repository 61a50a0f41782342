//! Built-in models: upstream's JSON model files, embedded at compile time (libvmaf embeds them
//! with `xxd -i`). Looked up by exact version string.

use std::sync::OnceLock;

/// Where a built-in model's JSON text comes from.
enum Source {
    /// A file of `models/`, embedded as is.
    File(&'static str),
    /// The model of another built-in version with the "neg" variant's per-feature options
    /// (`feature_opts_dicts`, which cap the enhancement gains) of `vmaf_v0.6.1neg` added; the
    /// text is built on first use. Upstream ships `vmaf_4k_v0.6.1neg` as a file that differs
    /// from `vmaf_4k_v0.6.1` in exactly that list, the same list `vmaf_v0.6.1neg` adds to
    /// `vmaf_v0.6.1`.
    Neg(&'static str, &'static OnceLock<String>),
}

static K4_NEG: OnceLock<String> = OnceLock::new();

/// Embeds `models/<file>` as a built-in model's text.
macro_rules! model_file {
    ($file:literal) => {
        Source::File(include_str!(concat!("../../models/", $file)))
    };
}

/// Version and source of every built-in model, in upstream's table order (the float models
/// first, as upstream lists them when built with its float extractors).
const BUILTIN: &[(&str, Source)] = &[
    ("vmaf_float_v0.6.1", model_file!("vmaf_float_v0.6.1.json")),
    (
        "vmaf_float_b_v0.6.3",
        model_file!("vmaf_float_b_v0.6.3.json"),
    ),
    (
        "vmaf_float_v0.6.1neg",
        model_file!("vmaf_float_v0.6.1neg.json"),
    ),
    (
        "vmaf_float_4k_v0.6.1",
        model_file!("vmaf_float_4k_v0.6.1.json"),
    ),
    (
        "vmaf_v0.6.1",
        Source::File(include_str!("../../models/vmaf_v0.6.1.json")),
    ),
    (
        "vmaf_b_v0.6.3",
        Source::File(include_str!("../../models/vmaf_b_v0.6.3.json")),
    ),
    (
        "vmaf_v0.6.1neg",
        Source::File(include_str!("../../models/vmaf_v0.6.1neg.json")),
    ),
    (
        "vmaf_4k_v0.6.1",
        Source::File(include_str!("../../models/vmaf_4k_v0.6.1.json")),
    ),
    ("vmaf_4k_v0.6.1neg", Source::Neg("vmaf_4k_v0.6.1", &K4_NEG)),
    (
        "vmaf_v1.0.16_3d0h",
        model_file!("vmaf_v1.0.16/vmaf_v1.0.16_3d0h.json"),
    ),
    (
        "vmaf_v1.0.16_3d0h_2160",
        model_file!("vmaf_v1.0.16/vmaf_v1.0.16_3d0h_2160.json"),
    ),
    (
        "vmaf_v1.0.16_5d0h",
        model_file!("vmaf_v1.0.16/vmaf_v1.0.16_5d0h.json"),
    ),
    (
        "vmaf_v1.0.16_1d5h_2160",
        model_file!("vmaf_v1.0.16/vmaf_v1.0.16_1d5h_2160.json"),
    ),
    (
        "vmaf_v1.0.16_hfr_3d0h",
        model_file!("vmaf_v1.0.16_hfr/vmaf_v1.0.16_hfr_3d0h.json"),
    ),
    (
        "vmaf_v1.0.16_hfr_3d0h_2160",
        model_file!("vmaf_v1.0.16_hfr/vmaf_v1.0.16_hfr_3d0h_2160.json"),
    ),
    (
        "vmaf_v1.0.16_hfr_5d0h",
        model_file!("vmaf_v1.0.16_hfr/vmaf_v1.0.16_hfr_5d0h.json"),
    ),
    (
        "vmaf_v1.0.16_hfr_1d5h_2160",
        model_file!("vmaf_v1.0.16_hfr/vmaf_v1.0.16_hfr_1d5h_2160.json"),
    ),
];

/// The JSON text of built-in model `version`.
pub(crate) fn json(version: &str) -> Option<&'static str> {
    let (_, src) = BUILTIN.iter().find(|(v, _)| *v == version)?;
    match src {
        Source::File(text) => Some(text),
        Source::Neg(base, cell) => Some(cell.get_or_init(|| neg_variant(base)).as_str()),
    }
}

/// `base`'s JSON with the `feature_opts_dicts` of `vmaf_v0.6.1neg` set in its `model_dict`.
fn neg_variant(base: &str) -> String {
    let parse = |v: &str| -> serde_json::Value {
        let text = json(v).expect("built-in base model");
        serde_json::from_str(text).expect("built-in model is valid JSON")
    };
    let opts = parse("vmaf_v0.6.1neg")["model_dict"]["feature_opts_dicts"].clone();
    let mut model = parse(base);
    model["model_dict"]["feature_opts_dicts"] = opts;
    model.to_string()
}

/// Versions of the built-in models (single models and collections alike).
pub fn versions() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(v, _)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k4_neg_is_k4_with_the_neg_options() {
        let j = |v| serde_json::from_str::<serde_json::Value>(json(v).unwrap()).unwrap();
        let (k4, k4neg, neg) = (
            j("vmaf_4k_v0.6.1"),
            j("vmaf_4k_v0.6.1neg"),
            j("vmaf_v0.6.1neg"),
        );
        let opts = &k4neg["model_dict"]["feature_opts_dicts"];
        assert_eq!(opts, &neg["model_dict"]["feature_opts_dicts"]);
        assert_eq!(opts.as_array().unwrap().len(), 6);
        assert_eq!(opts[0]["adm_enhn_gain_limit"], 1.0);
        assert_eq!(opts[2]["vif_enhn_gain_limit"], 1.0);
        let mut stripped = k4neg.clone();
        stripped["model_dict"]
            .as_object_mut()
            .unwrap()
            .remove("feature_opts_dicts");
        assert_eq!(stripped, k4);
    }
}
