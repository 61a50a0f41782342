//! adm feature extractor (CPU reference; GPU dispatch when a HIP state is imported).

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[];

/// The adm extractor.
pub struct Adm {}

impl Adm {
    /// Creates the extractor from its options.
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Adm {})
    }
}

impl Extractor for Adm {
    fn name(&self) -> &'static str {
        "adm"
    }

    fn dedup_key(&self) -> String {
        "adm".to_string()
    }

    fn feature_name(&self, full_name: &str) -> String {
        full_name.to_string()
    }

    fn extract(&self, _input: &FrameInput<'_>, _out: &mut Scores) -> Result<()> {
        Err(Error::NotSupported("adm not implemented yet".into()))
    }
}
