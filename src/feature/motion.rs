//! motion feature extractor (CPU reference; GPU dispatch when a HIP state is imported).

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &[];

/// The motion extractor.
pub struct Motion {}

impl Motion {
    /// Creates the extractor from its options.
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Motion {})
    }
}

impl Extractor for Motion {
    fn name(&self) -> &'static str {
        "motion"
    }

    fn dedup_key(&self) -> String {
        "motion".to_string()
    }

    fn feature_name(&self, full_name: &str) -> String {
        full_name.to_string()
    }

    fn extract(&self, _input: &FrameInput<'_>, _out: &mut Scores) -> Result<()> {
        Err(Error::NotSupported("motion not implemented yet".into()))
    }
}
