//! The level a context uses: detection lowered by `VMAF_HIP_CPU_TARGET` (through
//! [`crate::settings`]) and by a cpumask.

use super::CpuLevel;

impl CpuLevel {
    /// The level a context uses: detection, lowered by `VMAF_HIP_CPU_TARGET` and by the set
    /// bits of `cpumask` (upstream's meaning; masking AVX2 also drops AVX-512, whose kernels
    /// build on AVX2; 255 or any mask with the lowest set bit of the architecture = scalar).
    pub fn for_cpumask(cpumask: u64) -> CpuLevel {
        let mut level = Self::detect();
        if let Some(t) = crate::settings::get().cpu_target {
            level = level.min_with(t);
        }
        level.masked(cpumask)
    }
}

impl Default for CpuLevel {
    /// The detected level, lowered by `VMAF_HIP_CPU_TARGET`.
    fn default() -> Self {
        Self::for_cpumask(0)
    }
}
