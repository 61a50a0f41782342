//! The feature collector: every score of every frame, by feature name, in first-append order.

use std::sync::Mutex;
use std::time::Instant;

use crate::error::{Error, Result};

/// Frame indices accepted: scores are stored densely by index, so a huge index from the C API
/// (`vmaf_read_pictures`, `vmaf_import_feature_score`) would otherwise allocate and fill up to
/// 64 GiB per feature. 2^24 frames is over three days at 60 fps.
pub const MAX_INDEX: usize = (1 << 24) - 1;

/// All scores of one feature, indexed by frame.
#[derive(Debug, Clone, Default)]
pub struct FeatureVector {
    /// Stored feature name (before aliasing).
    pub name: String,
    /// `scores[i]` is the value at frame `i`, if written.
    pub scores: Vec<Option<f64>>,
}

impl FeatureVector {
    /// The value at `index`, if written.
    pub fn get(&self, index: usize) -> Option<f64> {
        self.scores.get(index).copied().flatten()
    }
}

#[derive(Debug, Default)]
struct Inner {
    vectors: Vec<FeatureVector>,
    first_append: Option<Instant>,
    last_append: Option<Instant>,
}

/// Thread-safe store of feature scores.
#[derive(Debug, Default)]
pub struct FeatureCollector {
    inner: Mutex<Inner>,
}

impl FeatureCollector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `value` for `name` at `index`. Writing the same (name, index) twice is an error, as
    /// in libvmaf.
    pub fn append(&self, name: &str, value: f64, index: usize) -> Result<()> {
        if index > MAX_INDEX {
            return Err(Error::inval(format!(
                "frame index {index} exceeds the maximum {MAX_INDEX}"
            )));
        }
        let mut g = self.lock();
        let now = Instant::now();
        g.first_append.get_or_insert(now);
        g.last_append = Some(now);
        let pos = match g.vectors.iter().position(|v| v.name == name) {
            Some(p) => p,
            None => {
                g.vectors.push(FeatureVector {
                    name: name.to_string(),
                    scores: Vec::new(),
                });
                g.vectors.len() - 1
            }
        };
        let v = &mut g.vectors[pos];
        if v.scores.len() <= index {
            v.scores.resize(index + 1, None);
        }
        if v.scores[index].is_some() {
            return Err(Error::inval(format!(
                "feature {name} already has a score at index {index}"
            )));
        }
        v.scores[index] = Some(value);
        Ok(())
    }

    /// The score of `name` at `index`.
    pub fn get(&self, name: &str, index: usize) -> Option<f64> {
        let g = self.lock();
        g.vectors
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.get(index))
    }

    /// All scores of `name`, if the feature exists.
    pub fn vector(&self, name: &str) -> Option<FeatureVector> {
        let g = self.lock();
        g.vectors.iter().find(|v| v.name == name).cloned()
    }

    /// A copy of every feature vector, in creation order.
    pub fn snapshot(&self) -> Vec<FeatureVector> {
        self.lock().vectors.clone()
    }

    /// Seconds between the first and the last append (for the writers' `fps`).
    pub fn elapsed_secs(&self) -> f64 {
        let g = self.lock();
        match (g.first_append, g.last_append) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_append_order_and_rejects_rewrites() {
        let c = FeatureCollector::new();
        c.append("b", 1.0, 2).unwrap();
        c.append("a", 2.0, 0).unwrap();
        assert!(c.append("b", 3.0, 2).is_err());
        assert!(c.append("b", 3.0, MAX_INDEX + 1).is_err());
        assert!(c.append("b", 3.0, u32::MAX as usize).is_err());
        let s = c.snapshot();
        assert_eq!(s[0].name, "b");
        assert_eq!(s[1].name, "a");
        assert_eq!(c.get("b", 2), Some(1.0));
        assert_eq!(c.get("b", 1), None);
    }
}
