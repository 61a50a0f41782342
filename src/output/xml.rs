//! libvmaf's XML layout.

use std::fmt::Write;

use super::escape::{xml_attr_name, xml_attr_value};
use super::num::{fixed, value};
use super::{frames, pooled, OutputData, POOL_METHODS};
use crate::feature::alias::alias;

pub(super) fn render(d: &OutputData<'_>) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(s, "<VMAF version=\"{}\">", xml_attr_value(d.version));
    let _ = writeln!(
        s,
        "  <params qualityWidth=\"{}\" qualityHeight=\"{}\" />",
        d.width, d.height
    );
    let _ = writeln!(s, "  <fyi fps=\"{}\" />", fixed(d.fps, 2));

    s.push_str("  <frames>\n");
    for f in frames(d) {
        let _ = write!(s, "    <frame frameNum=\"{}\" ", f.index);
        for (name, v) in f.scores {
            let _ = write!(s, "{}=\"{}\" ", xml_attr_name(name), value(v));
        }
        s.push_str("/>\n");
    }
    s.push_str("  </frames>\n");

    s.push_str("  <pooled_metrics>\n");
    for v in &d.vectors {
        let _ = write!(
            s,
            "    <metric name=\"{}\" ",
            xml_attr_value(alias(&v.name))
        );
        for ((_, method), score) in POOL_METHODS.iter().zip(pooled(d, v)) {
            if let Some(score) = score {
                let _ = write!(s, "{method}=\"{}\" ", value(score));
            }
        }
        s.push_str("/>\n");
    }
    s.push_str("  </pooled_metrics>\n");

    // Aggregate names are printed as stored, without aliasing.
    s.push_str("  <aggregate_metrics ");
    for (name, v) in &d.aggregate {
        let _ = write!(s, "{}=\"{}\" ", xml_attr_name(name), value(*v));
    }
    s.push_str("/>\n");
    s.push_str("</VMAF>\n");
    s
}
