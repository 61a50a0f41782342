//! Output writers: XML, JSON, CSV and SUB, byte-identical to libvmaf's (except `fps`).
//!
//! Shared rules: frames are visited in index order, skipping `i % n_subsample != 0`; a frame is
//! printed only when some feature has a score at it, and then lists the features that do, in
//! creation order. Feature names go through `feature::alias::alias`, then [`escape`] so
//! that any name gives a parseable file (normal names are unchanged). Numbers follow
//! [`num::value`].

#![forbid(unsafe_code)]

mod csv;
pub mod escape;
mod file;
mod json;
pub mod num;
mod sub;
mod xml;

/// libvmaf's `enum VmafOutputFormat`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    None = 0,
    Xml = 1,
    Json = 2,
    Csv = 3,
    Sub = 4,
}

pub use file::write_atomic;

use crate::collector::FeatureVector;
use crate::error::{Error, Result};
use crate::feature::alias::alias;
use crate::pooling::{pool, PoolingMethod};

/// Everything a writer prints.
#[derive(Debug, Clone)]
pub struct OutputData<'a> {
    /// `vmaf_version()` string.
    pub version: &'a str,
    /// Frames per second of the run (printed `%.2f`; JSON `null` when not finite).
    pub fps: f64,
    /// First picture's luma size.
    pub width: usize,
    pub height: usize,
    /// Number of picture pairs read; pooled range is `0..pic_cnt-1`.
    pub pic_cnt: usize,
    /// Frames `i % n_subsample != 0` are skipped (when > 1).
    pub n_subsample: u32,
    /// All features in creation order.
    pub vectors: Vec<FeatureVector>,
    /// Aggregate metrics (name, value).
    pub aggregate: Vec<(String, f64)>,
}

/// Writes `data` in `fmt`.
pub fn write(fmt: OutputFormat, w: &mut dyn std::io::Write, data: &OutputData<'_>) -> Result<()> {
    let text = match fmt {
        OutputFormat::Xml => xml::render(data),
        OutputFormat::Json => json::render(data),
        OutputFormat::Csv => csv::render(data),
        OutputFormat::Sub => sub::render(data),
        OutputFormat::None => return Err(Error::inval("no output format selected")),
    };
    w.write_all(text.as_bytes())
        .and_then(|()| w.flush())
        .map_err(|e| Error::io("writing output", e))
}

/// One printed frame: its index and the (printed name, score) of every feature written there.
struct Frame<'a> {
    index: usize,
    scores: Vec<(&'a str, f64)>,
}

/// The frames a writer prints, in order.
///
/// libvmaf walks up to the largest vector capacity; indices past every vector's end hold no
/// scores and would be skipped anyway, so the longest vector bounds the walk here. (Upstream's
/// `i > capacity` guard also reads one slot past a vector's end; that stray read is not copied.)
fn frames<'a>(data: &'a OutputData<'_>) -> impl Iterator<Item = Frame<'a>> + 'a {
    let end = data
        .vectors
        .iter()
        .map(|v| v.scores.len())
        .max()
        .unwrap_or(0);
    let step = data.n_subsample.max(1) as usize;
    (0..end)
        .filter(move |i| i % step == 0)
        .filter_map(move |index| {
            let scores: Vec<_> = data
                .vectors
                .iter()
                .filter_map(|v| v.get(index).map(|s| (alias(&v.name), s)))
                .collect();
            (!scores.is_empty()).then_some(Frame { index, scores })
        })
}

/// Pooling methods in the order (and with the names) the writers print them.
const POOL_METHODS: [(PoolingMethod, &str); 4] = [
    (PoolingMethod::Min, "min"),
    (PoolingMethod::Max, "max"),
    (PoolingMethod::Mean, "mean"),
    (PoolingMethod::HarmonicMean, "harmonic_mean"),
];

/// `v` pooled over frames `0..=pic_cnt-1` by each of [`POOL_METHODS`]; `None` where pooling
/// fails (a visited frame has no score), which the writers show by leaving the method out.
fn pooled(data: &OutputData<'_>, v: &FeatureVector) -> [Option<f64>; 4] {
    POOL_METHODS.map(|(method, _)| {
        // With no pictures libvmaf's unsigned `pic_cnt - 1` wraps, and the range runs past
        // every vector's end, so pooling fails.
        let hi = data.pic_cnt.checked_sub(1)?;
        pool(v, method, 0, hi, data.n_subsample).ok()
    })
}

#[cfg(test)]
mod tests;
