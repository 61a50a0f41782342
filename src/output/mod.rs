//! Output writers: XML, JSON, CSV and SUB, byte-identical to libvmaf's (except `fps`).

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

use crate::collector::FeatureVector;
use crate::error::Result;

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
pub fn write(
    _fmt: OutputFormat,
    _w: &mut dyn std::io::Write,
    _data: &OutputData<'_>,
) -> Result<()> {
    Err(crate::error::Error::NotSupported(
        "writers not implemented yet".into(),
    ))
}
