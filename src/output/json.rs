//! libvmaf's JSON layout, quirks included: the frame separator is keyed on the frame index (a
//! run whose frame 0 is absent starts the array with a comma), and a non-finite per-frame score
//! prints `null` without its line break.

use std::fmt::Write;

use super::escape::json_str;
use super::num::{fixed, value};
use super::{frames, pooled, OutputData, POOL_METHODS};
use crate::feature::alias::alias;

/// A number, or `null` where JSON has no spelling for it.
fn number(x: f64) -> String {
    if x.is_finite() {
        value(x)
    } else {
        "null".to_string()
    }
}

pub(super) fn render(d: &OutputData<'_>) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    s.push_str("{\n");
    let _ = writeln!(s, "  \"version\": \"{}\",", json_str(d.version));
    let fps = if d.fps.is_finite() {
        fixed(d.fps, 2)
    } else {
        "null".to_string()
    };
    let _ = writeln!(s, "  \"fps\": {fps},");

    s.push_str("  \"frames\": [");
    for f in frames(d) {
        s.push_str(if f.index > 0 { ",\n" } else { "\n" });
        s.push_str("    {\n");
        let _ = writeln!(s, "      \"frameNum\": {},", f.index);
        s.push_str("      \"metrics\": {\n");
        let last = f.scores.len() - 1;
        for (k, (name, v)) in f.scores.iter().enumerate() {
            let name = json_str(name);
            let comma = if k < last { "," } else { "" };
            if v.is_finite() {
                let _ = writeln!(s, "        \"{name}\": {}{comma}", value(*v));
            } else {
                let _ = write!(s, "        \"{name}\": null{comma}");
            }
        }
        s.push_str("      }\n");
        s.push_str("    }");
    }
    s.push_str("\n  ],\n");

    s.push_str("  \"pooled_metrics\": {");
    for (k, v) in d.vectors.iter().enumerate() {
        s.push_str(if k > 0 { ",\n" } else { "\n" });
        let _ = write!(s, "    \"{}\": {{", json_str(alias(&v.name)));
        // The separator is keyed on the method's position, not on what was printed before.
        for (m, ((_, method), score)) in POOL_METHODS.iter().zip(pooled(d, v)).enumerate() {
            if let Some(score) = score {
                s.push_str(if m > 0 { ",\n" } else { "\n" });
                let _ = write!(s, "      \"{method}\": {}", number(score));
            }
        }
        s.push_str("\n    }");
    }
    s.push_str("\n  },\n");

    // Aggregate names are printed as stored, without aliasing.
    s.push_str("  \"aggregate_metrics\": {");
    let n = d.aggregate.len();
    for (k, (name, v)) in d.aggregate.iter().enumerate() {
        let _ = write!(s, "\n    \"{}\": {}", json_str(name), number(*v));
        if k + 1 < n {
            s.push(',');
        }
    }
    s.push_str("\n  }\n");
    s.push_str("}\n");
    s
}
