//! Built-in models: upstream's JSON model files, embedded at compile time (libvmaf embeds them
//! with `xxd -i`). Looked up by exact version string.

/// `(version, JSON text)` of every built-in model, in upstream's table order.
const BUILTIN: &[(&str, &str)] = &[
    ("vmaf_v0.6.1", include_str!("../../models/vmaf_v0.6.1.json")),
    (
        "vmaf_b_v0.6.3",
        include_str!("../../models/vmaf_b_v0.6.3.json"),
    ),
    (
        "vmaf_v0.6.1neg",
        include_str!("../../models/vmaf_v0.6.1neg.json"),
    ),
    (
        "vmaf_4k_v0.6.1",
        include_str!("../../models/vmaf_4k_v0.6.1.json"),
    ),
];

/// The JSON text of built-in model `version`.
pub(crate) fn json(version: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(v, _)| *v == version).map(|(_, j)| *j)
}

/// Versions of the built-in models (single models and collections alike).
pub fn versions() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(v, _)| *v)
}
