//! NEON row kernels (to come).
