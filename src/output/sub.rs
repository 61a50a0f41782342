//! libvmaf's SUB (MicroDVD subtitle) layout: one line per frame, shown from frame `i` to `i+1`.

use std::fmt::Write;

use super::num::value;
use super::{frames, OutputData};

pub(super) fn render(d: &OutputData<'_>) -> String {
    let mut s = String::new();
    for f in frames(d) {
        // Writing into a String cannot fail.
        let _ = write!(s, "{{{}}}{{{}}}frame: {}|", f.index, f.index + 1, f.index);
        for (name, v) in f.scores {
            let _ = write!(s, "{name}: {}|", value(v));
        }
        s.push('\n');
    }
    s
}
