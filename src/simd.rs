//! CPU instruction-set levels: which SIMD code a context's CPU extractors run.
//!
//! Every SIMD kernel (in `feature/<name>/x86.rs` or `aarch64.rs`, beside the scalar reference in
//! `cpu.rs`) is bit-exact with the scalar code, so the level changes speed, never a score. The
//! level is detected once per process, then only lowered: by `VmafConfiguration.cpumask` (set
//! bits disable instruction sets, with upstream's bit values) and by the environment variable
//! `VMAF_HIP_CPU_TARGET` (`scalar`, `avx2`, `avx512`, `neon`), which tests use to pin a level.
//!
//! A [`CpuLevel`] can only be obtained from detection, so holding `CpuLevel::Avx2` proves the
//! CPU runs AVX2: that is the argument every SIMD dispatch's `unsafe` call rests on.

#![forbid(unsafe_code)]

use std::sync::OnceLock;

// The level a context uses reads the settings, which name their target with this file's
// `CpuTarget`: it lives in a file of its own, so the two do not import each other.
mod setting;

/// The instruction sets a kernel may use. Ordered within one architecture: a higher level
/// implies every lower one of the same architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuLevel(Level);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Level {
    Scalar,
    /// aarch64 Advanced SIMD.
    Neon,
    /// x86-64 AVX2 (with BMI2, FMA unused: no contraction anywhere).
    Avx2,
    /// x86-64 AVX-512 F, BW, DQ, CD and VL (with AVX2).
    Avx512,
}

/// upstream's `VMAF_X86_CPU_FLAG_AVX2` (bit 3) and `..._AVX512` (bit 4), and
/// `VMAF_ARM_CPU_FLAG_NEON` (bit 0) in `VmafConfiguration.cpumask`.
const MASK_AVX2: u64 = 1 << 3;
const MASK_AVX512: u64 = 1 << 4;
const MASK_NEON: u64 = 1 << 0;

/// A level asked for by name (`VMAF_HIP_CPU_TARGET`, read by [`crate::settings`]): unlike a
/// [`CpuLevel`] it proves nothing about the CPU, so it can only lower a detected level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTarget(Level);

impl CpuTarget {
    /// `scalar` (or `rust`, `c`, `none`), `neon`, `avx2` or `avx512`, in any case.
    pub fn parse(s: &str) -> Option<CpuTarget> {
        Some(CpuTarget(match s.trim().to_ascii_lowercase().as_str() {
            "scalar" | "rust" | "c" | "none" => Level::Scalar,
            "neon" => Level::Neon,
            "avx2" => Level::Avx2,
            "avx512" | "avx-512" => Level::Avx512,
            _ => return None,
        }))
    }
}

impl CpuLevel {
    /// The scalar reference: always available.
    pub const SCALAR: CpuLevel = CpuLevel(Level::Scalar);

    /// The best level this CPU runs.
    pub fn detect() -> CpuLevel {
        static BEST: OnceLock<CpuLevel> = OnceLock::new();
        *BEST.get_or_init(|| CpuLevel(detect_best()))
    }

    /// Every level this CPU runs, lowest (scalar) first.
    pub fn available() -> Vec<CpuLevel> {
        let best = Self::detect();
        [Level::Scalar, Level::Neon, Level::Avx2, Level::Avx512]
            .into_iter()
            .map(CpuLevel)
            .filter(|l| l.same_arch_at_most(best))
            .collect()
    }

    fn masked(self, cpumask: u64) -> CpuLevel {
        let mut l = self.0;
        if l == Level::Avx512 && cpumask & MASK_AVX512 != 0 {
            l = Level::Avx2;
        }
        if matches!(l, Level::Avx2 | Level::Avx512) && cpumask & MASK_AVX2 != 0 {
            l = Level::Scalar;
        }
        if l == Level::Neon && cpumask & MASK_NEON != 0 {
            l = Level::Scalar;
        }
        CpuLevel(l)
    }

    /// The lower of `self` and a requested target (scalar when they belong to different
    /// architectures: a target never adds an instruction set).
    fn min_with(self, target: CpuTarget) -> CpuLevel {
        let target = CpuLevel(target.0);
        if target.same_arch_at_most(self) {
            target
        } else {
            CpuLevel::SCALAR
        }
    }

    /// Whether `self` is scalar or of `other`'s architecture and not above it.
    fn same_arch_at_most(self, other: CpuLevel) -> bool {
        match (self.0, other.0) {
            (Level::Scalar, _) => true,
            (Level::Neon, o) => o == Level::Neon,
            (Level::Avx2, o) => o == Level::Avx2 || o == Level::Avx512,
            (Level::Avx512, o) => o == Level::Avx512,
        }
    }

    /// `"scalar"`, `"neon"`, `"avx2"` or `"avx512"`.
    pub fn name(self) -> &'static str {
        match self.0 {
            Level::Scalar => "scalar",
            Level::Neon => "neon",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }

    /// Whether AVX2 kernels may run (AVX2 or AVX-512 level).
    #[inline]
    pub fn has_avx2(self) -> bool {
        matches!(self.0, Level::Avx2 | Level::Avx512)
    }

    /// Whether AVX-512 kernels may run.
    #[inline]
    pub fn has_avx512(self) -> bool {
        self.0 == Level::Avx512
    }

    /// Whether NEON kernels may run.
    #[inline]
    pub fn has_neon(self) -> bool {
        self.0 == Level::Neon
    }
}

impl std::fmt::Display for CpuLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_best() -> Level {
    let avx512 = is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx512cd")
        && is_x86_feature_detected!("avx512vl");
    let avx2 = is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("bmi1")
        && is_x86_feature_detected!("bmi2")
        && is_x86_feature_detected!("popcnt")
        && is_x86_feature_detected!("lzcnt");
    match (avx2, avx512) {
        (true, true) => Level::Avx512,
        (true, false) => Level::Avx2,
        _ => Level::Scalar,
    }
}

#[cfg(target_arch = "aarch64")]
fn detect_best() -> Level {
    if std::arch::is_aarch64_feature_detected!("neon") {
        Level::Neon
    } else {
        Level::Scalar
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect_best() -> Level {
    Level::Scalar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_only_lower_the_level() {
        let best = CpuLevel::detect();
        assert_eq!(best.masked(255), CpuLevel::SCALAR);
        assert_eq!(best.masked(0), best);
        for l in CpuLevel::available() {
            assert!(l <= best);
            assert!(l.masked(MASK_AVX512) <= l);
            assert!(!l.masked(MASK_AVX2).has_avx2());
            assert!(!l.masked(MASK_AVX512).has_avx512());
            assert!(!l.masked(MASK_NEON).has_neon());
        }
        assert_eq!(CpuLevel::available()[0], CpuLevel::SCALAR);
    }

    #[test]
    fn targets_never_raise_the_level() {
        let best = CpuLevel::detect();
        for name in ["scalar", "avx2", "avx512", "neon"] {
            let t = CpuTarget::parse(name).unwrap();
            let l = best.min_with(t);
            assert!(CpuLevel::available().contains(&l), "{name} -> {l}");
            assert!(l <= best || l == CpuLevel::SCALAR);
        }
        assert_eq!(CpuTarget::parse("sse9"), None);
        assert_eq!(CpuTarget::parse(" AVX2 "), Some(CpuTarget(Level::Avx2)));
    }
}
