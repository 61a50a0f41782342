//! psnr feature extractor (CPU reference; GPU dispatch when a HIP state is imported).

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[];

/// The psnr extractor.
pub struct Psnr {}

impl Psnr {
    /// Creates the extractor from its options.
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Psnr {})
    }
}

impl Extractor for Psnr {
    fn name(&self) -> &'static str {
        "psnr"
    }

    fn dedup_key(&self) -> String {
        "psnr".to_string()
    }

    fn feature_name(&self, full_name: &str) -> String {
        full_name.to_string()
    }

    fn extract(&self, _input: &FrameInput<'_>, _out: &mut Scores) -> Result<()> {
        Err(Error::NotSupported("psnr not implemented yet".into()))
    }
}
