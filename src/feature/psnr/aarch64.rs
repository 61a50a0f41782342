//! NEON sums of squared differences (exact: integer sums only change order).

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::cpu::{sse_row_u16, sse_row_u8};
use crate::simd::CpuLevel;

/// [`super::cpu::sse_u8`] with NEON; `None` when `cpu` has no NEON.
pub(super) fn sse_u8(
    cpu: CpuLevel,
    r: &[u8],
    rs: usize,
    d: &[u8],
    ds: usize,
    w: usize,
    h: usize,
) -> Option<u64> {
    if !cpu.has_neon() {
        return None;
    }
    Some(
        (0..h)
            // SAFETY: the CPU runs NEON: `cpu.has_neon()`.
            .map(|y| u64::from(unsafe { sse_row_u8_neon(&r[y * rs..][..w], &d[y * ds..][..w]) }))
            .sum(),
    )
}

/// [`super::cpu::sse_u16`] with NEON; `None` when `cpu` has no NEON.
pub(super) fn sse_u16(
    cpu: CpuLevel,
    r: &[u16],
    rs: usize,
    d: &[u16],
    ds: usize,
    w: usize,
    h: usize,
) -> Option<u64> {
    if !cpu.has_neon() {
        return None;
    }
    Some(
        (0..h)
            // SAFETY: the CPU runs NEON: `cpu.has_neon()`.
            .map(|y| unsafe { sse_row_u16_neon(&r[y * rs..][..w], &d[y * ds..][..w]) })
            .sum(),
    )
}

#[inline]
#[target_feature(enable = "neon")]
fn load16_u8(s: &[u8]) -> uint8x16_t {
    let s = &s[..16];
    // SAFETY: `s` holds the 16 bytes read.
    unsafe { vld1q_u8(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn load8_u16(s: &[u16]) -> uint16x8_t {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 samples read.
    unsafe { vld1q_u16(s.as_ptr()) }
}

/// 8-bit rows: `|a - b|` squared into 16 bits (at most 255²), pairs added into wrapping
/// 32-bit lanes: equal mod 2^32 to the reference's wrapping row sum.
#[target_feature(enable = "neon")]
fn sse_row_u8_neon(a: &[u8], b: &[u8]) -> u32 {
    let w = a.len().min(b.len());
    let mut acc = vdupq_n_u32(0);
    let mut j = 0;
    while j + 16 <= w {
        let e = vabdq_u8(load16_u8(&a[j..]), load16_u8(&b[j..]));
        acc = vpadalq_u16(acc, vmull_u8(vget_low_u8(e), vget_low_u8(e)));
        acc = vpadalq_u16(acc, vmull_high_u8(e, e));
        j += 16;
    }
    vaddvq_u32(acc).wrapping_add(sse_row_u8(&a[j..w], &b[j..w]))
}

/// Deeper rows: exact `|a - b|`, squared into 32 bits, pairs added into 64-bit lanes.
#[target_feature(enable = "neon")]
fn sse_row_u16_neon(a: &[u16], b: &[u16]) -> u64 {
    let w = a.len().min(b.len());
    let mut acc = vdupq_n_u64(0);
    let mut j = 0;
    while j + 8 <= w {
        let e = vabdq_u16(load8_u16(&a[j..]), load8_u16(&b[j..]));
        acc = vpadalq_u32(acc, vmull_u16(vget_low_u16(e), vget_low_u16(e)));
        acc = vpadalq_u32(acc, vmull_high_u16(e, e));
        j += 8;
    }
    vaddvq_u64(acc) + sse_row_u16(&a[j..w], &b[j..w])
}

#[cfg(test)]
mod tests {
    use super::super::cpu;
    use crate::simd::CpuLevel;
    use crate::testutil::checkasm::{plane, sizes, Rng, CONTENTS};

    #[test]
    fn checkasm_sse() {
        assert!(CpuLevel::detect().has_neon(), "aarch64 without NEON");
        let mut rng = Rng::new(0x9513);
        for level in CpuLevel::available().into_iter().skip(1) {
            for (w, h) in sizes(&mut rng, 8) {
                for content in CONTENTS {
                    for bpc in [8u32, 10, 12, 16] {
                        let what = format!("{} {w}x{h} {content:?} {bpc}-bit", level.name());
                        let (rs, ds) = (w + rng.below(70), w + rng.below(3) * 32);
                        let r = plane(&mut rng, w, h, rs, bpc, content);
                        let d = plane(&mut rng, w, h, ds, bpc, content);
                        if bpc == 8 {
                            let n =
                                |v: Vec<u16>| v.into_iter().map(|x| x as u8).collect::<Vec<_>>();
                            let (r, d) = (n(r), n(d));
                            let want = cpu::sse_u8(&r, rs, &d, ds, w, h);
                            let got = super::sse_u8(level, &r, rs, &d, ds, w, h);
                            assert_eq!(got, Some(want), "sse {what}");
                        } else {
                            let want = cpu::sse_u16(&r, rs, &d, ds, w, h);
                            let got = super::sse_u16(level, &r, rs, &d, ds, w, h);
                            assert_eq!(got, Some(want), "sse {what}");
                        }
                    }
                }
            }
        }
    }

    /// Rows long enough to wrap the 8-bit row sum, and 16-bit values of any size.
    #[test]
    fn checkasm_sse_extremes() {
        let mut rng = Rng::new(0xe5);
        for level in CpuLevel::available().into_iter().skip(1) {
            let w = 70_001;
            let r: Vec<u8> = (0..w).map(|i| if i % 3 == 0 { 255 } else { 0 }).collect();
            let d: Vec<u8> = r.iter().map(|&v| 255 - v).collect();
            let want = cpu::sse_u8(&r, w, &d, w, w, 1);
            assert_eq!(super::sse_u8(level, &r, w, &d, w, w, 1), Some(want));
            for w in [1usize, 7, 8, 9, 15, 16, 17, 100] {
                let r: Vec<u16> = (0..w).map(|_| rng.next_u32() as u16).collect();
                let d: Vec<u16> = (0..w).map(|i| if i % 2 == 0 { 0 } else { 65535 }).collect();
                let want = cpu::sse_u16(&r, w, &d, w, w, 1);
                assert_eq!(
                    super::sse_u16(level, &r, w, &d, w, w, 1),
                    Some(want),
                    "u16 {w}"
                );
            }
        }
    }
}
