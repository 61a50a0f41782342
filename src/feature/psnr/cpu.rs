//! CPU reference of psnr: exact integer SSE per plane and the capped `10·log10(peak² / mse)`.

use crate::feature::{c_max, c_min};
use crate::picture::{PictureData, PlaneRef};

/// Sum of squared differences of plane `plane` over the reference's plane size. The caller
/// guarantees both pictures share format, size and bit depth. 8-bit rows are summed in a
/// wrapping `u32` before joining the `u64` total, as upstream does; deeper samples go straight
/// into the `u64`.
pub fn sse_plane(reference: &PictureData, distorted: &PictureData, plane: usize) -> u64 {
    let (w, h) = (reference.w[plane], reference.h[plane]);
    let (rs, ds) = (reference.stride[plane], distorted.stride[plane]);
    match (reference.plane(plane), distorted.plane(plane)) {
        (PlaneRef::U8(r), PlaneRef::U8(d)) => (0..h)
            .map(|y| {
                let (rr, dr) = (&r[y * rs..y * rs + w], &d[y * ds..y * ds + w]);
                let row = rr.iter().zip(dr).fold(0u32, |acc, (&a, &b)| {
                    let e = i32::from(a) - i32::from(b);
                    acc.wrapping_add((e * e) as u32)
                });
                u64::from(row)
            })
            .sum(),
        (PlaneRef::U16(r), PlaneRef::U16(d)) => (0..h)
            .map(|y| {
                let (rr, dr) = (&r[y * rs..y * rs + w], &d[y * ds..y * ds + w]);
                rr.iter()
                    .zip(dr)
                    .map(|(&a, &b)| {
                        // |e| <= 65535, so e² fits in u32.
                        let e = u32::from(a.abs_diff(b));
                        u64::from(e * e)
                    })
                    .sum::<u64>()
            })
            .sum(),
        // Mixed storage cannot pass the extractor's validation.
        _ => 0,
    }
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
