//! NEON row kernels of integer motion (see [`super::cpu::sad_rows`] for the driver and the
//! proof that its 32-bit lanes are exact).

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::cpu::{horizontal_one, sad_rows, vertical_one, RowKernels, Sample};
use crate::simd::CpuLevel;

/// [`super::cpu::blurred_diff_sad`] with NEON kernels; `None` when `cpu` has no NEON or the
/// input leaves the kernels' exact range.
#[allow(clippy::too_many_arguments)]
pub(super) fn blurred_diff_sad<T: Sample>(
    cpu: CpuLevel,
    prev: &[T],
    prev_stride: usize,
    cur: &[T],
    cur_stride: usize,
    w: usize,
    h: usize,
    shift: u32,
) -> Option<u64> {
    if cpu.has_neon() {
        sad_rows(Neon(()), prev, prev_stride, cur, cur_stride, w, h, shift)
    } else {
        None
    }
}

/// Proof that the CPU runs NEON: only made after `CpuLevel::has_neon()`.
#[derive(Clone, Copy)]
pub(super) struct Neon(());

impl Neon {
    /// The token, when `cpu` runs NEON.
    #[cfg(test)]
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_neon().then_some(Neon(()))
    }
}

impl RowKernels for Neon {
    fn diff_u8(self, p: &[u8], c: &[u8], d: &mut [i32]) {
        // SAFETY: a `Neon` exists only when the CPU runs NEON.
        unsafe { diff_u8_neon(p, c, d) }
    }
    fn diff_u16(self, p: &[u16], c: &[u16], d: &mut [i32]) {
        // SAFETY: a `Neon` exists only when the CPU runs NEON.
        unsafe { diff_u16_neon(p, c, d) }
    }
    fn vertical(self, rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
        // SAFETY: a `Neon` exists only when the CPU runs NEON.
        unsafe { vertical_neon(rows, shift, out) }
    }
    fn horizontal(self, ext: &[i32]) -> u32 {
        // SAFETY: a `Neon` exists only when the CPU runs NEON.
        unsafe { horizontal_neon(ext) }
    }
}

#[inline]
#[target_feature(enable = "neon")]
fn load4(s: &[i32]) -> int32x4_t {
    let s = &s[..4];
    // SAFETY: `s` holds the 4 lanes read.
    unsafe { vld1q_s32(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn store4(d: &mut [i32], v: int32x4_t) {
    let d = &mut d[..4];
    // SAFETY: `d` holds the 4 lanes written.
    unsafe { vst1q_s32(d.as_mut_ptr(), v) }
}

#[inline]
#[target_feature(enable = "neon")]
fn load8_u8(s: &[u8]) -> uint8x8_t {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 bytes read.
    unsafe { vld1_u8(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "neon")]
fn load4_u16(s: &[u16]) -> uint16x4_t {
    let s = &s[..4];
    // SAFETY: `s` holds the 4 samples read.
    unsafe { vld1_u16(s.as_ptr()) }
}

/// The 5-tap filter in 32-bit lanes: `(Σ F[k]·v[k] + 2^(s-1)) >> s`, computed as
/// `(a + T + 2^(s-2)) >> (s-1)` (see `sad_rows`); `round` holds `2^(s-2)`, `neg_sh` holds
/// `-(s-1)` (a negative left shift of signed lanes is an arithmetic right shift).
#[inline]
#[target_feature(enable = "neon")]
fn taps5(v: [int32x4_t; 5], round: int32x4_t, neg_sh: int32x4_t) -> int32x4_t {
    let a = vshrq_n_s32::<1>(vmulq_n_s32(vaddq_s32(v[0], v[4]), 3571));
    // Integer multiply-accumulate: exact, like a multiply then an add.
    let t = vmlaq_n_s32(vmulq_n_s32(vaddq_s32(v[1], v[3]), 8002), v[2], 13193);
    vshlq_s32(vaddq_s32(vaddq_s32(a, t), round), neg_sh)
}

#[target_feature(enable = "neon")]
fn diff_u8_neon(p: &[u8], c: &[u8], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 8 <= w {
        // The wrapping 16-bit difference is the exact one as i16.
        let e = vreinterpretq_s16_u16(vsubl_u8(load8_u8(&p[j..]), load8_u8(&c[j..])));
        store4(&mut d[j..], vmovl_s16(vget_low_s16(e)));
        store4(&mut d[j + 4..], vmovl_high_s16(e));
        j += 8;
    }
    for j in j..w {
        d[j] = i32::from(p[j]) - i32::from(c[j]);
    }
}

#[target_feature(enable = "neon")]
fn diff_u16_neon(p: &[u16], c: &[u16], d: &mut [i32]) {
    let w = d.len();
    let (p, c) = (&p[..w], &c[..w]);
    let mut j = 0;
    while j + 4 <= w {
        // The wrapping 32-bit difference is the exact one as i32.
        let e = vsubl_u16(load4_u16(&p[j..]), load4_u16(&c[j..]));
        store4(&mut d[j..], vreinterpretq_s32_u32(e));
        j += 4;
    }
    for j in j..w {
        d[j] = i32::from(p[j]) - i32::from(c[j]);
    }
}

#[target_feature(enable = "neon")]
fn vertical_neon(rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32 {
    let w = out.len();
    let rows = rows.map(|r| &r[..w]);
    let round = vdupq_n_s32(1 << (shift - 2));
    let neg_sh = vdupq_n_s32(1 - shift as i32);
    let mut mag = vdupq_n_u32(0);
    let mut j = 0;
    while j + 4 <= w {
        let y = taps5(rows.map(|r| load4(&r[j..])), round, neg_sh);
        mag = vorrq_u32(mag, vreinterpretq_u32_s32(vabsq_s32(y)));
        store4(&mut out[j..], y);
        j += 4;
    }
    let mut mag = vgetq_lane_u32::<0>(mag)
        | vgetq_lane_u32::<1>(mag)
        | vgetq_lane_u32::<2>(mag)
        | vgetq_lane_u32::<3>(mag);
    for j in j..w {
        let y = vertical_one(rows.map(|r| r[j]), shift);
        mag |= y.unsigned_abs();
        out[j] = y;
    }
    mag
}

#[target_feature(enable = "neon")]
fn horizontal_neon(ext: &[i32]) -> u32 {
    let w = ext.len() - 4;
    let round = vdupq_n_s32(1 << 14);
    let neg_sh = vdupq_n_s32(-15);
    let mut acc = vdupq_n_u32(0);
    let mut j = 0;
    while j + 4 <= w {
        let e = &ext[j..j + 8];
        let v = taps5(std::array::from_fn(|k| load4(&e[k..])), round, neg_sh);
        acc = vaddq_u32(acc, vreinterpretq_u32_s32(vabsq_s32(v)));
        j += 4;
    }
    // Lane sums wrap like the reference's row sum: addition mod 2^32 in any order.
    let mut sad = vaddvq_u32(acc);
    for j in j..w {
        sad = sad.wrapping_add(horizontal_one(&ext[j..]).unsigned_abs());
    }
    sad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::motion::cpu::{blurred_diff_sad, check_row_kernels};

    #[test]
    fn checkasm_row_kernels() {
        assert!(CpuLevel::detect().has_neon(), "aarch64 without NEON");
        for cpu in CpuLevel::available() {
            if let Some(k) = Neon::new(cpu) {
                check_row_kernels(k, "neon");
            }
        }
    }

    /// The kernels themselves (no fallback) give the reference's SAD on in-range samples at
    /// their largest magnitudes, and refuse samples above the bit depth.
    #[test]
    fn kernels_take_every_in_range_input() {
        let (w, h) = (37, 11);
        let k = Neon::new(CpuLevel::detect()).expect("NEON");
        for bpc in [9u32, 10, 12, 16] {
            let max = ((1u32 << bpc) - 1) as u16;
            let p: Vec<u16> = (0..w * h)
                .map(|i| if i % 7 < 4 { max } else { 0 })
                .collect();
            let c: Vec<u16> = p.iter().map(|&v| max - v).collect();
            let want = blurred_diff_sad(&p, w, &c, w, w, h, bpc);
            assert_eq!(
                sad_rows(k, &p, w, &c, w, w, h, bpc),
                Some(want),
                "{bpc}-bit"
            );
            if bpc < 16 {
                let over: Vec<u16> = p.iter().map(|&v| v | 0x8000).collect();
                assert_eq!(
                    sad_rows(k, &over, w, &c, w, w, h, bpc),
                    None,
                    "{bpc}-bit over"
                );
            }
        }
        let p: Vec<u8> = (0..w * h)
            .map(|i| if i % 3 == 0 { 255 } else { 0 })
            .collect();
        let c: Vec<u8> = p.iter().map(|&v| 255 - v).collect();
        let want = blurred_diff_sad(&p, w, &c, w, w, h, 8);
        assert_eq!(sad_rows(k, &p, w, &c, w, w, h, 8), Some(want));
    }
}
