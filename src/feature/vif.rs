//! vif feature extractor (CPU reference; GPU dispatch when a HIP state is imported).

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[];

/// The vif extractor.
pub struct Vif {}

impl Vif {
    /// Creates the extractor from its options.
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Vif {})
    }
}

impl Extractor for Vif {
    fn name(&self) -> &'static str {
        "vif"
    }

    fn dedup_key(&self) -> String {
        "vif".to_string()
    }

    fn feature_name(&self, full_name: &str) -> String {
        full_name.to_string()
    }

    fn extract(&self, _input: &FrameInput<'_>, _out: &mut Scores) -> Result<()> {
        Err(Error::NotSupported("vif not implemented yet".into()))
    }
}
