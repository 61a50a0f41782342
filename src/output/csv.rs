//! libvmaf's CSV layout: a trailing comma after every field, no pooled section, and rows that
//! list only the features written at that frame (so a missing score shifts later columns left).

use std::fmt::Write;

use super::escape::csv_field;
use super::num::value;
use super::{frames, OutputData};
use crate::feature::alias::alias;

pub(super) fn render(d: &OutputData<'_>) -> String {
    let mut s = String::from("Frame,");
    for v in &d.vectors {
        s.push_str(&csv_field(alias(&v.name)));
        s.push(',');
    }
    s.push('\n');
    for f in frames(d) {
        // Writing into a String cannot fail.
        let _ = write!(s, "{},", f.index);
        for (_, v) in f.scores {
            s.push_str(&value(v));
            s.push(',');
        }
        s.push('\n');
    }
    s
}
