//! The `null` extractor: computes and stores nothing. Upstream ships it to measure the cost of
//! the pipeline itself (reading, scheduling) without any feature work.

#![forbid(unsafe_code)]

use crate::error::Result;
use crate::feature::{Dict, Extractor, FrameInput, Scores};

/// Full feature names this extractor provides: none.
pub const PROVIDED_FEATURES: &[&str] = &[];

/// The null extractor (no options: any given are ignored, as upstream's empty option table
/// ignores them).
pub struct Null;

impl Null {
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Null)
    }
}

impl Extractor for Null {
    fn name(&self) -> &'static str {
        "null"
    }

    fn planes_read(&self) -> u8 {
        0
    }

    fn host_planes(&self) -> u8 {
        0
    }

    fn extract(&self, _input: &FrameInput<'_>, _out: &mut Scores) -> Result<()> {
        Ok(())
    }
}
