//! Pooling of per-frame scores (min, max, mean, harmonic mean), as libvmaf does it.

#![forbid(unsafe_code)]

use crate::collector::FeatureVector;
use crate::error::{Error, Result};

/// libvmaf's `enum VmafPoolingMethod`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMethod {
    Unknown = 0,
    Min = 1,
    Max = 2,
    Mean = 3,
    HarmonicMean = 4,
}

impl PoolingMethod {
    /// From the C value.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => PoolingMethod::Min,
            2 => PoolingMethod::Max,
            3 => PoolingMethod::Mean,
            4 => PoolingMethod::HarmonicMean,
            _ => return None,
        })
    }
}

/// Pools `v` over frames `lo..=hi`, visiting only indices divisible by `n_subsample` (when > 1).
/// Every visited index must have a score. Accumulation is sequential in index order, in double.
pub fn pool(
    v: &FeatureVector,
    method: PoolingMethod,
    lo: usize,
    hi: usize,
    n_subsample: u32,
) -> Result<f64> {
    if lo > hi {
        return Err(Error::inval("pooling range is empty"));
    }
    let (mut sum, mut i_sum, mut min, mut max, mut cnt) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in lo..=hi {
        if n_subsample > 1 && i % n_subsample as usize != 0 {
            continue;
        }
        let s = v
            .get(i)
            .ok_or_else(|| Error::inval(format!("feature {} has no score at index {i}", v.name)))?;
        sum += s;
        i_sum += 1.0 / (s + 1.0);
        if i == lo {
            min = s;
            max = s;
        } else {
            // libvmaf replaces only on a strict comparison, so a tie (0.0 vs -0.0) keeps the
            // earlier value and a NaN score never replaces (nor is replaced by) a number.
            if s < min {
                min = s;
            }
            if s > max {
                max = s;
            }
        }
        cnt += 1.0;
    }
    Ok(match method {
        PoolingMethod::Min => min,
        PoolingMethod::Max => max,
        PoolingMethod::Mean => sum / cnt,
        PoolingMethod::HarmonicMean => cnt / i_sum - 1.0,
        PoolingMethod::Unknown => return Err(Error::inval("unknown pooling method")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_like_libvmaf() {
        let v = FeatureVector {
            name: "x".into(),
            scores: vec![Some(1.0), Some(3.0), Some(2.0), None],
        };
        assert_eq!(pool(&v, PoolingMethod::Mean, 0, 2, 1).unwrap(), 2.0);
        assert_eq!(pool(&v, PoolingMethod::Min, 0, 2, 1).unwrap(), 1.0);
        assert_eq!(pool(&v, PoolingMethod::Max, 0, 2, 1).unwrap(), 3.0);
        let hm = 3.0 / (1.0 / 2.0 + 1.0 / 4.0 + 1.0 / 3.0) - 1.0;
        assert_eq!(pool(&v, PoolingMethod::HarmonicMean, 0, 2, 1).unwrap(), hm);
        assert_eq!(pool(&v, PoolingMethod::Mean, 0, 2, 2).unwrap(), 1.5);
        assert!(pool(&v, PoolingMethod::Mean, 0, 3, 1).is_err());
    }
}
