//! The feature collector: every score of every frame, by feature name, in first-append order.

#![forbid(unsafe_code)]

use std::sync::Mutex;
use std::time::Instant;

use crate::error::{Error, Result};

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
        if index >= crate::limits::MAX_FRAMES {
            return Err(Error::inval(format!(
                "frame index {index} of feature {name} is not below the limit of {}",
                crate::limits::MAX_FRAMES
            )));
        }
        let mut g = self.lock();
        let pos = g.vectors.iter().position(|v| v.name == name);
        let mut fresh = FeatureVector::default();
        let v = match pos {
            Some(p) => &mut g.vectors[p],
            None => &mut fresh,
        };
        if v.scores.len() <= index {
            // Amortized growth, but fallible: an index far ahead of the stored ones can ask for
            // up to 1 GiB (see `MAX_FRAMES`).
            v.scores
                .try_reserve(index + 1 - v.scores.len())
                .map_err(|_| {
                    Error::NoMem(format!(
                        "cannot grow the scores of feature {name} to index {index}"
                    ))
                })?;
            v.scores.resize(index + 1, None);
        }
        if v.scores[index].is_some() {
            return Err(Error::inval(format!(
                "feature {name} already has a score at index {index}"
            )));
        }
        v.scores[index] = Some(value);
        if pos.is_none() {
            fresh.name = name.to_string();
            g.vectors.push(fresh);
        }
        let now = Instant::now();
        g.first_append.get_or_insert(now);
        g.last_append = Some(now);
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
        let s = c.snapshot();
        assert_eq!(s[0].name, "b");
        assert_eq!(s[1].name, "a");
        assert_eq!(c.get("b", 2), Some(1.0));
        assert_eq!(c.get("b", 1), None);
    }

    #[test]
    fn index_limit_is_einval_and_leaves_no_trace() {
        let c = FeatureCollector::new();
        let max = crate::limits::MAX_FRAMES;
        let e = c.append("x", 1.0, max).unwrap_err();
        assert_eq!(e.errno(), -libc::EINVAL);
        let e = c.append("x", 1.0, u32::MAX as usize).unwrap_err();
        assert_eq!(e.errno(), -libc::EINVAL);
        // The failed appends created no feature and set no timestamps.
        assert!(c.snapshot().is_empty());
        assert_eq!(c.elapsed_secs(), 0.0);
        c.append("x", 2.5, 3).unwrap();
        assert_eq!(
            c.vector("x").unwrap().scores,
            vec![None, None, None, Some(2.5)]
        );
    }
}
