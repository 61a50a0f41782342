//! CPU reference of psnr: exact integer SSE per plane and the capped `10·log10(peak² / mse)`.

use crate::feature::{c_max, c_min};
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

/// Sum of squared differences of plane `plane` over the reference's plane size, with the SIMD
/// kernels of `cpu`. The caller guarantees both pictures share format, size and bit depth.
pub fn sse_plane(
    reference: &PictureData,
    distorted: &PictureData,
    plane: usize,
    cpu: CpuLevel,
) -> u64 {
    let (w, h) = (reference.w[plane], reference.h[plane]);
    let (rs, ds) = (reference.stride[plane], distorted.stride[plane]);
    match (reference.plane(plane), distorted.plane(plane)) {
        (PlaneRef::U8(r), PlaneRef::U8(d)) => {
            #[cfg(target_arch = "x86_64")]
            if let Some(s) = super::x86::sse_u8(cpu, r, rs, d, ds, w, h) {
                return s;
            }
            #[cfg(target_arch = "aarch64")]
            if let Some(s) = super::aarch64::sse_u8(cpu, r, rs, d, ds, w, h) {
                return s;
            }
            sse_u8(r, rs, d, ds, w, h)
        }
        (PlaneRef::U16(r), PlaneRef::U16(d)) => {
            #[cfg(target_arch = "x86_64")]
            if let Some(s) = super::x86::sse_u16(cpu, r, rs, d, ds, w, h) {
                return s;
            }
            #[cfg(target_arch = "aarch64")]
            if let Some(s) = super::aarch64::sse_u16(cpu, r, rs, d, ds, w, h) {
                return s;
            }
            sse_u16(r, rs, d, ds, w, h)
        }
        // Mixed storage cannot pass the extractor's validation.
        _ => 0,
    }
}

/// The SSE of a `w`x`h` 8-bit plane pair (strides in samples): each row summed in a wrapping
/// `u32` before joining the `u64` total, as upstream does.
pub(super) fn sse_u8(r: &[u8], rs: usize, d: &[u8], ds: usize, w: usize, h: usize) -> u64 {
    (0..h)
        .map(|y| u64::from(sse_row_u8(&r[y * rs..][..w], &d[y * ds..][..w])))
        .sum()
}

/// The SSE of a `w`x`h` plane pair of deeper samples: straight into the `u64`.
pub(super) fn sse_u16(r: &[u16], rs: usize, d: &[u16], ds: usize, w: usize, h: usize) -> u64 {
    (0..h)
        .map(|y| sse_row_u16(&r[y * rs..][..w], &d[y * ds..][..w]))
        .sum()
}

/// One 8-bit row's wrapping `u32` sum of squared differences (also the SIMD kernels' tails).
#[inline]
pub(super) fn sse_row_u8(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).fold(0u32, |acc, (&a, &b)| {
        let e = i32::from(a) - i32::from(b);
        acc.wrapping_add((e * e) as u32)
    })
}

/// One row's sum of squared differences of deeper samples (also the SIMD kernels' tails).
#[inline]
pub(super) fn sse_row_u16(a: &[u16], b: &[u16]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(&a, &b)| {
            // |e| <= 65535, so e² fits in u32.
            let e = u32::from(a.abs_diff(b));
            u64::from(e * e)
        })
        .sum()
}

/// One plane's score from its SSE over a `w`x`h` plane: `(psnr, mse)`, the PSNR capped at
/// `psnr_max` and with the MSE floored at 1e-16 inside the logarithm.
pub fn psnr_from_sse(sse: u64, w: usize, h: usize, peak: u32, psnr_max: f64) -> (f64, f64) {
    // libvmaf divides by the unsigned 32-bit pixel count and squares the peak in 32 bits.
    let n = (w as u32).wrapping_mul(h as u32);
    let mse = sse as f64 / f64::from(n);
    let peak_sq = f64::from(peak.wrapping_mul(peak));
    let psnr = c_min(10.0 * (peak_sq / c_max(mse, 1e-16)).log10(), psnr_max);
    (psnr, mse)
}
