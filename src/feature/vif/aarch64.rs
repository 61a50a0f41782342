//! NEON kernels of integer VIF's row pipeline (`pipeline.rs` describes the planes and proves
//! the arithmetic exact; `x86.rs` does the same on wider vectors).
//!
//! NEON's widening multiply-accumulates take a scalar coefficient, so taps need no pairing:
//! 8-bit statistics fold symmetric taps as on x86 and accumulate `i16 x i16 -> i32`; 16-bit
//! input accumulates unsigned means in u32 and squares in u64 (`(c·x)·x`, exact), which needs
//! neither biasing nor coefficient splitting. The horizontal pass reads the biased planes
//! with signed accumulates over the tap plan. The per-pixel step works on 4 lanes; its table
//! lookups are scalar (NEON has no gather) and its sums widen into 64-bit lanes as they go.

#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::cpu::{accums, Round, VifAccums, EPS, SIGMA_NSQ};
use super::pipeline::{log2_compact, tap_plan, Fast, Kernels, PLANES};
use crate::error::Result;
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Proof that the CPU runs NEON: only made after `CpuLevel::has_neon()`.
#[derive(Clone, Copy)]
pub(super) struct Neon(());

impl Neon {
    /// The token, when `cpu` runs NEON.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_neon().then_some(Neon(()))
    }

    #[target_feature(enable = "neon")]
    #[inline]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }

    /// Runs `f` with NEON enabled (inline `f` into it).
    #[inline(always)]
    fn run<R>(self, f: impl FnOnce() -> R) -> R {
        // SAFETY: a `Neon` exists only on a CPU that runs NEON.
        unsafe { self.vectorize(f) }
    }
}

/// `compute_accums` on the NEON kernels, or None when `cpu` has no NEON.
pub(super) fn compute(
    cpu: CpuLevel,
    ref_pic: &PictureData,
    dis_pic: &PictureData,
    egl: f64,
    skip_scale0: bool,
) -> Option<Result<[VifAccums; 4]>> {
    let k = Neon::new(cpu)?;
    Some(accums(Fast(k), ref_pic, dis_pic, egl, skip_scale0))
}

/// Pixels per chunk.
const N: usize = 8;

/// `(v + add) >> shift` per u32 lane.
#[inline(always)]
unsafe fn round32(v: uint32x4_t, add: uint32x4_t, shift: int32x4_t) -> uint32x4_t {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe { vshlq_u32(vaddq_u32(v, add), shift) }
}

/// The low 16 bits of 8 u32 lanes, biased.
#[inline(always)]
unsafe fn pack_low(t: [uint32x4_t; 2]) -> int16x8_t {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let v = vcombine_u16(vmovn_u32(t[0]), vmovn_u32(t[1]));
        vreinterpretq_s16_u16(veorq_u16(v, vdupq_n_u16(0x8000)))
    }
}

/// The high 16 bits of 8 u32 lanes, biased.
#[inline(always)]
unsafe fn pack_high(t: [uint32x4_t; 2]) -> int16x8_t {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let v = vcombine_u16(vshrn_n_u32::<16>(t[0]), vshrn_n_u32::<16>(t[1]));
        vreinterpretq_s16_u16(veorq_u16(v, vdupq_n_u16(0x8000)))
    }
}

/// 8 signed bytes at `p`, widened.
///
/// # Safety
/// NEON runs; `p` is valid for reading 8 bytes.
#[inline(always)]
unsafe fn load_u(p: *const i8) -> int16x8_t {
    // SAFETY: the caller's contract.
    unsafe { vmovl_s8(vld1_s8(p)) }
}

/// `acc += c·v` over 8 i16 lanes into two i32x4 halves.
#[inline(always)]
unsafe fn mac_s16(acc: &mut [int32x4_t; 2], v: int16x8_t, c: i16) {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        acc[0] = vmlal_n_s16(acc[0], vget_low_s16(v), c);
        acc[1] = vmlal_high_n_s16(acc[1], v, c);
    }
}

/// Vertical statistics of 8-bit input (rows of `x - 128`; 17 symmetric taps below 2^15),
/// folded as on x86:
/// columns `0..n` (a multiple of 8) into the planes at `out + q·stride + off`.
///
/// # Safety
/// NEON runs; rows are valid for reading `n` bytes, the planes for writing there.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline(always)]
unsafe fn stats_vertical_u8(
    rp: &[*const i8; 17],
    dp: &[*const i8; 17],
    filt: &[u16],
    mu: Round,
    n: usize,
    out: *mut i16,
    stride: usize,
    off: usize,
) {
    const F: usize = 17;
    let half = F / 2;
    let c_half: u32 = filt[..half].iter().map(|&c| u32::from(c)).sum();
    let kq = c_half.wrapping_mul(32768).wrapping_sub(1 << 30);
    let kr = c_half.wrapping_mul(256).wrapping_sub(1 << 30);
    // SAFETY: value intrinsics and the loads the caller's contract covers.
    unsafe {
        let (k8000, k256) = (vdupq_n_s16(i16::MIN), vdupq_n_s16(256));
        let (kq, kr, k23) = (vdupq_n_u32(kq), vdupq_n_u32(kr), vdupq_n_u32(1 << 23));
        let mu_add = vdupq_n_u32(mu.add as u32);
        let mu_sh = vdupq_n_s32(-(mu.shift as i32));
        let mut j = 0;
        while j < n {
            let z = vdupq_n_s32(0);
            // [S1, S2, Q1, Q2, R] (`pipeline.rs`).
            let mut a = [[z; 2]; 5];
            for k in 0..=half {
                let c = filt[k] as i16;
                let (xa, ya) = (load_u(rp[k].add(j)), load_u(dp[k].add(j)));
                let f = if k < half {
                    let (xb, yb) = (load_u(rp[F - 1 - k].add(j)), load_u(dp[F - 1 - k].add(j)));
                    let sq = |a, b, c, d| vaddq_s16(vmulq_s16(a, b), vmulq_s16(c, d));
                    [
                        vaddq_s16(xa, xb),
                        vaddq_s16(ya, yb),
                        veorq_s16(sq(xa, xa, xb, xb), k8000),
                        veorq_s16(sq(ya, ya, yb, yb), k8000),
                        vsubq_s16(sq(xa, ya, xb, yb), k256),
                    ]
                } else {
                    [
                        xa,
                        ya,
                        vmulq_s16(xa, xa),
                        vmulq_s16(ya, ya),
                        vmulq_s16(xa, ya),
                    ]
                };
                for q in 0..5 {
                    mac_s16(&mut a[q], f[q], c);
                }
            }
            let mut t = [[vdupq_n_u32(0); 2]; 5];
            for h in 0..2 {
                let u = |v: int32x4_t| vreinterpretq_u32_s32(v);
                let m1 = vaddq_u32(u(a[0][h]), k23);
                let m2 = vaddq_u32(u(a[1][h]), k23);
                t[0][h] = round32(m1, mu_add, mu_sh);
                t[1][h] = round32(m2, mu_add, mu_sh);
                t[2][h] = vaddq_u32(vaddq_u32(u(a[2][h]), vshlq_n_u32::<8>(m1)), kq);
                t[3][h] = vaddq_u32(vaddq_u32(u(a[3][h]), vshlq_n_u32::<8>(m2)), kq);
                let m12 = vshlq_n_u32::<7>(vaddq_u32(m1, m2));
                t[4][h] = vaddq_u32(vaddq_u32(u(a[4][h]), m12), kr);
            }
            let pl = [
                pack_low(t[0]),
                pack_low(t[1]),
                pack_low(t[2]),
                pack_high(t[2]),
                pack_low(t[3]),
                pack_high(t[3]),
                pack_low(t[4]),
                pack_high(t[4]),
            ];
            for (q, v) in pl.into_iter().enumerate() {
                vst1q_s16(out.add(q * stride + off + j), v);
            }
            j += N;
        }
    }
}

/// `acc += (c·a)·b` over 8 u32 products into four u64x2 quarters (`ca` = `c·a`).
#[inline(always)]
unsafe fn mac_u64(acc: &mut [uint64x2_t; 4], ca: [uint32x4_t; 2], b: [uint32x4_t; 2]) {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        for h in 0..2 {
            acc[2 * h] = vmlal_u32(acc[2 * h], vget_low_u32(ca[h]), vget_low_u32(b[h]));
            acc[2 * h + 1] = vmlal_high_u32(acc[2 * h + 1], ca[h], b[h]);
        }
    }
}

/// `((v + add) >> shift) as u32` of four u64x2 quarters, as two u32x4 halves.
#[inline(always)]
unsafe fn round64(v: [uint64x2_t; 4], add: uint64x2_t, shift: int64x2_t) -> [uint32x4_t; 2] {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let r = |q: uint64x2_t| vmovn_u64(vshlq_u64(vaddq_u64(q, add), shift));
        [
            vcombine_u32(r(v[0]), r(v[1])),
            vcombine_u32(r(v[2]), r(v[3])),
        ]
    }
}

/// Vertical statistics of 16-bit input, straight from the reference's sums: means in u32,
/// squares in u64 (`(c·x)·x` with `c·x < 2^32`).
///
/// # Safety
/// NEON runs; `f <= 17` rows are valid for reading `n` values, the planes for writing there.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn stats_vertical_u16(
    rp: &[*const u16],
    dp: &[*const u16],
    filt: &[u16],
    mu: Round,
    sq: Round,
    n: usize,
    out: *mut i16,
    stride: usize,
    off: usize,
) {
    // SAFETY: value intrinsics and the loads the caller's contract covers.
    unsafe {
        let mu_add = vdupq_n_u32(mu.add as u32);
        let mu_sh = vdupq_n_s32(-(mu.shift as i32));
        let sq_add = vdupq_n_u64(sq.add);
        let sq_sh = vdupq_n_s64(-i64::from(sq.shift));
        let mut j = 0;
        while j < n {
            let z32 = vdupq_n_u32(0);
            let z64 = vdupq_n_u64(0);
            let (mut m1, mut m2) = ([z32; 2], [z32; 2]);
            let (mut xx, mut yy, mut xy) = ([z64; 4], [z64; 4], [z64; 4]);
            for (k, &c) in filt.iter().enumerate() {
                let (x, y) = (vld1q_u16(rp[k].add(j)), vld1q_u16(dp[k].add(j)));
                let xw = [vmovl_u16(vget_low_u16(x)), vmovl_high_u16(x)];
                let yw = [vmovl_u16(vget_low_u16(y)), vmovl_high_u16(y)];
                let cx = [vmull_n_u16(vget_low_u16(x), c), vmull_high_n_u16(x, c)];
                let cy = [vmull_n_u16(vget_low_u16(y), c), vmull_high_n_u16(y, c)];
                for h in 0..2 {
                    m1[h] = vaddq_u32(m1[h], cx[h]);
                    m2[h] = vaddq_u32(m2[h], cy[h]);
                }
                mac_u64(&mut xx, cx, xw);
                mac_u64(&mut yy, cy, yw);
                mac_u64(&mut xy, cx, yw);
            }
            let tm1 = [round32(m1[0], mu_add, mu_sh), round32(m1[1], mu_add, mu_sh)];
            let tm2 = [round32(m2[0], mu_add, mu_sh), round32(m2[1], mu_add, mu_sh)];
            let txx = round64(xx, sq_add, sq_sh);
            let tyy = round64(yy, sq_add, sq_sh);
            let txy = round64(xy, sq_add, sq_sh);
            let pl = [
                pack_low(tm1),
                pack_low(tm2),
                pack_low(txx),
                pack_high(txx),
                pack_low(tyy),
                pack_high(tyy),
                pack_low(txy),
                pack_high(txy),
            ];
            for (q, v) in pl.into_iter().enumerate() {
                vst1q_s16(out.add(q * stride + off + j), v);
            }
            j += N;
        }
    }
}

/// Per-lane partial sums of the per-pixel step.
struct Acc {
    /// Σ den_log and Σ num_log terms (i64 pairs).
    dl: int64x2_t,
    nl: int64x2_t,
    /// Σ clamped σ2² over low-variance pixels (u64 pairs).
    nnl: uint64x2_t,
    /// Minus the count of low-variance pixels per lane.
    dnl: int32x4_t,
}

/// Table lookups of four lanes: `tab[idx] + 2048·k`.
#[inline(always)]
unsafe fn lookup(tab: &[u16], idx: uint32x4_t, k: int32x4_t) -> int32x4_t {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let mut v = [0i32; 4];
        let mut ix = [0u32; 4];
        vst1q_u32(ix.as_mut_ptr(), vandq_u32(idx, vdupq_n_u32(0x7fff)));
        for (v, &i) in v.iter_mut().zip(&ix) {
            *v = i32::from(tab[i as usize]);
        }
        vaddq_s32(vld1q_s32(v.as_ptr()), vshlq_n_s32::<11>(k))
    }
}

/// The reference's `log2_32` of lanes `t >= 2^17` (garbage, but in bounds, elsewhere).
#[inline(always)]
unsafe fn log2_32(tab: &[u16], t: uint32x4_t) -> int32x4_t {
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let k = vsubq_s32(vdupq_n_s32(16), vreinterpretq_s32_u32(vclzq_u32(t)));
        // A negative shift count shifts right.
        let idx = vshlq_u32(t, vnegq_s32(k));
        lookup(tab, idx, k)
    }
}

/// The per-pixel step on the first `lanes` of 4 lanes of `[mu1, mu2, xx, yy, xy]`.
#[inline(always)]
unsafe fn pixel4(acc: &mut Acc, m: [uint32x4_t; 5], lanes: usize, egl: f64, tab: &[u16]) {
    let [mu1, mu2, xx, yy, xy] = m;
    // SAFETY: value intrinsics; the caller runs NEON.
    unsafe {
        let iota = vld1q_u32([0u32, 1, 2, 3].as_ptr());
        let valid = vcltq_u32(iota, vdupq_n_u32(lanes as u32));
        let r31 = vdupq_n_u64(1 << 31);
        let q = |a: uint32x4_t, b: uint32x4_t| {
            let lo = vaddq_u64(vmull_u32(vget_low_u32(a), vget_low_u32(b)), r31);
            let hi = vaddq_u64(vmull_high_u32(a, b), r31);
            vcombine_u32(vshrn_n_u64::<32>(lo), vshrn_n_u64::<32>(hi))
        };
        let zero = vdupq_n_s32(0);
        let s1 = vreinterpretq_s32_u32(vsubq_u32(xx, q(mu1, mu1)));
        let s2 = vmaxq_s32(vreinterpretq_s32_u32(vsubq_u32(yy, q(mu2, mu2))), zero);
        let s12 = vreinterpretq_s32_u32(vsubq_u32(xy, q(mu1, mu2)));
        let logm = vandq_u32(vcgeq_s32(s1, vdupq_n_s32(SIGMA_NSQ)), valid);
        let nonlog = vbicq_u32(valid, logm);
        acc.dnl = vaddq_s32(acc.dnl, vreinterpretq_s32_u32(nonlog));
        acc.nnl = vpadalq_u32(acc.nnl, vandq_u32(vreinterpretq_u32_s32(s2), nonlog));
        if vmaxvq_u32(logm) == 0 {
            return;
        }
        let t = vaddq_u32(vreinterpretq_u32_s32(s1), vdupq_n_u32(SIGMA_NSQ as u32));
        let den = vsubq_s32(log2_32(tab, t), vdupq_n_s32(2048 * 17));
        acc.dl = vpadalq_s32(acc.dl, vandq_s32(den, vreinterpretq_s32_u32(logm)));
        let numm = vandq_u32(logm, vandq_u32(vcgtq_s32(s12, zero), vcgtq_s32(s2, zero)));
        if vmaxvq_u32(numm) == 0 {
            return;
        }
        let (eps, eglv) = (vdupq_n_f64(EPS), vdupq_n_f64(egl));
        let f = |v: int32x2_t| vcvtq_f64_s64(vmovl_s32(v));
        let mut sv = [vdup_n_s32(0); 2];
        let mut tt = [vdupq_n_u64(0); 2];
        for h in 0..2 {
            let (a12, a1, a2) = if h == 0 {
                (vget_low_s32(s12), vget_low_s32(s1), vget_low_s32(s2))
            } else {
                (vget_high_s32(s12), vget_high_s32(s1), vget_high_s32(s2))
            };
            let (s12d, s1d, s2d) = (f(a12), f(a1), f(a2));
            let g = vdivq_f64(s12d, vaddq_f64(s1d, eps));
            // Truncating, saturating conversions, as Rust's `as i32` (FCVTZS then SQXTN).
            let v = vqmovn_s64(vcvtq_s64_f64(vsubq_f64(s2d, vmulq_f64(g, s12d))));
            sv[h] = vmax_s32(v, vdup_n_s32(0));
            let g = vbslq_f64(vcltq_f64(g, eglv), g, eglv);
            let nt = vcvtq_s64_f64(vmulq_f64(vmulq_f64(g, g), s1d));
            let numer1 = vadd_u32(vreinterpret_u32_s32(sv[h]), vdup_n_u32(SIGMA_NSQ as u32));
            tt[h] = vaddq_u64(vreinterpretq_u64_s64(nt), vmovl_u32(numer1));
        }
        // log2_64 of numer1_tmp (below 2^52: exact in f64, whose exponent and leading
        // mantissa bits are `k` and the table index).
        let bits = |t: uint64x2_t| vreinterpretq_u64_f64(vcvtq_f64_u64(t));
        let (b0, b1) = (bits(tt[0]), bits(tt[1]));
        let idx = vcombine_u32(
            vmovn_u64(vshrq_n_u64::<37>(b0)),
            vmovn_u64(vshrq_n_u64::<37>(b1)),
        );
        let e = vcombine_u32(
            vmovn_u64(vshrq_n_u64::<52>(b0)),
            vmovn_u64(vshrq_n_u64::<52>(b1)),
        );
        let k = vsubq_s32(vreinterpretq_s32_u32(e), vdupq_n_s32(1023 + 15));
        let ltmp = lookup(tab, idx, k);
        let numer1 = vaddq_u32(
            vreinterpretq_u32_s32(vcombine_s32(sv[0], sv[1])),
            vdupq_n_u32(SIGMA_NSQ as u32),
        );
        let num = vsubq_s32(ltmp, log2_32(tab, numer1));
        acc.nl = vpadalq_s32(acc.nl, vandq_s32(num, vreinterpretq_s32_u32(numm)));
    }
}

/// Horizontal sums and per-pixel step of pixels `j0..j1` (chunks of 8 from `j0`).
///
/// # Safety
/// NEON runs; every plane is valid for reading 8 values at each `j + k` (`j` a chunk start,
/// `k` a tap).
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline(always)]
unsafe fn horizontal(
    planes: *const i16,
    stride: usize,
    taps: &[(usize, i16)],
    j0: usize,
    j1: usize,
    egl: f64,
    tab: &[u16],
) -> VifAccums {
    // SAFETY: value intrinsics and the loads the caller's contract covers.
    unsafe {
        let mut acc = Acc {
            dl: vdupq_n_s64(0),
            nl: vdupq_n_s64(0),
            nnl: vdupq_n_u64(0),
            dnl: vdupq_n_s32(0),
        };
        let k31 = vdupq_n_u32(1 << 31);
        let k31r = vdupq_n_u32((1 << 31) + (1 << 15));
        let mut j = j0;
        while j < j1 {
            let z = vdupq_n_s32(0);
            let mut a = [[z; 2]; PLANES];
            for &(k, c) in taps {
                for (q, a) in a.iter_mut().enumerate() {
                    mac_s16(a, vld1q_s16(planes.add(q * stride + j + k)), c);
                }
            }
            let lanes = (j1 - j).min(N);
            for h in 0..2 {
                let u = |v: int32x4_t| vreinterpretq_u32_s32(v);
                let sq = |lo: int32x4_t, hi: int32x4_t| {
                    vaddq_u32(
                        vaddq_u32(u(hi), k31),
                        vshrq_n_u32::<16>(vaddq_u32(u(lo), k31r)),
                    )
                };
                let m = [
                    vaddq_u32(u(a[0][h]), k31),
                    vaddq_u32(u(a[1][h]), k31),
                    sq(a[2][h], a[3][h]),
                    sq(a[4][h], a[5][h]),
                    sq(a[6][h], a[7][h]),
                ];
                pixel4(&mut acc, m, lanes.saturating_sub(4 * h), egl, tab);
            }
            j += N;
        }
        let mut dnl = [0i32; 4];
        vst1q_s32(dnl.as_mut_ptr(), acc.dnl);
        VifAccums {
            num_log: vaddvq_s64(acc.nl),
            den_log: vaddvq_s64(acc.dl),
            num_non_log: vaddvq_u64(acc.nnl) as i64,
            den_non_log: -dnl.iter().map(|&v| i64::from(v)).sum::<i64>(),
        }
    }
}

/// Vertical pass of decimation on 8-bit rows (9 symmetric taps): folded unsigned sums.
///
/// # Safety
/// NEON runs; rows are valid for reading `n` bytes and `out` for writing `n` values.
#[inline(always)]
unsafe fn down_vertical_u8(
    rp: &[*const u8; 9],
    filt: &[u16],
    round: Round,
    n: usize,
    out: *mut i16,
) {
    // SAFETY: value intrinsics and the accesses the caller's contract covers.
    unsafe {
        let add = vdupq_n_u32(round.add as u32);
        let sh = vdupq_n_s32(-(round.shift as i32));
        let mut j = 0;
        while j < n {
            let mut a = [vdupq_n_u32(0); 2];
            for k in 0..=4 {
                let f = if k < 4 {
                    vaddl_u8(vld1_u8(rp[k].add(j)), vld1_u8(rp[8 - k].add(j)))
                } else {
                    vmovl_u8(vld1_u8(rp[k].add(j)))
                };
                a[0] = vmlal_n_u16(a[0], vget_low_u16(f), filt[k]);
                a[1] = vmlal_high_n_u16(a[1], f, filt[k]);
            }
            let t = [round32(a[0], add, sh), round32(a[1], add, sh)];
            vst1q_s16(out.add(j), pack_low(t));
            j += N;
        }
    }
}

/// Vertical pass of decimation on 16-bit rows.
///
/// # Safety
/// NEON runs; `filt.len()` rows are valid for reading `n` values and `out` for writing `n`.
#[inline(always)]
unsafe fn down_vertical_u16(
    rp: &[*const u16],
    filt: &[u16],
    round: Round,
    n: usize,
    out: *mut i16,
) {
    // SAFETY: value intrinsics and the accesses the caller's contract covers.
    unsafe {
        let add = vdupq_n_u32(round.add as u32);
        let sh = vdupq_n_s32(-(round.shift as i32));
        let mut j = 0;
        while j < n {
            let mut a = [vdupq_n_u32(0); 2];
            for (k, &c) in filt.iter().enumerate() {
                let x = vld1q_u16(rp[k].add(j));
                a[0] = vmlal_n_u16(a[0], vget_low_u16(x), c);
                a[1] = vmlal_high_n_u16(a[1], x, c);
            }
            let t = [round32(a[0], add, sh), round32(a[1], add, sh)];
            vst1q_s16(out.add(j), pack_low(t));
            j += N;
        }
    }
}

/// Horizontal pass of decimation: outputs `0..n` (a multiple of 8), reading the even
/// samples of 16 at `2·oj + k` per tap with a de-interleaving load.
///
/// # Safety
/// NEON runs; `tmp` is valid for reading 16 values at `2·oj + k` for every chunk start `oj`
/// and tap `k`, `out` for writing `n`.
#[inline(always)]
unsafe fn down_horizontal(tmp: *const i16, taps: &[(usize, i16)], n: usize, out: *mut u16) {
    // SAFETY: value intrinsics and the accesses the caller's contract covers.
    unsafe {
        let kr = vdupq_n_u32((1 << 31) + (1 << 15));
        let mut oj = 0;
        while oj < n {
            let mut a = [vdupq_n_s32(0); 2];
            for &(k, c) in taps {
                mac_s16(&mut a, vld2q_s16(tmp.add(2 * oj + k)).0, c);
            }
            let r = |v: int32x4_t| vshrn_n_u32::<16>(vaddq_u32(vreinterpretq_u32_s32(v), kr));
            vst1q_u16(out.add(oj), vcombine_u16(r(a[0]), r(a[1])));
            oj += N;
        }
    }
}

impl Kernels for Neon {
    fn vertical_u8(
        self,
        r: &[&[i8]],
        d: &[&[i8]],
        filt: &[u16],
        mu: Round,
        w: usize,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize {
        let f = filt.len();
        if f != 17 || filt.iter().any(|&c| c >= 0x8000) || !filt.iter().eq(filt.iter().rev()) {
            return 0;
        }
        let n = w / N * N;
        assert!(r.len() == f && d.len() == f);
        assert!(r.iter().chain(d).all(|row| row.len() >= n));
        assert!(stride >= off + n && planes.len() >= PLANES * stride);
        let rp: [*const i8; 17] = std::array::from_fn(|k| r[k].as_ptr());
        let dp: [*const i8; 17] = std::array::from_fn(|k| d[k].as_ptr());
        let out = planes.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: every row holds `n` bytes, every plane `off + n`
                // samples; the kernel is symmetric with taps below 2^15; NEON runs.
                unsafe { stats_vertical_u8(&rp, &dp, filt, mu, n, out, stride, off) }
            },
        );
        n
    }

    fn vertical_u16(
        self,
        r: &[&[u16]],
        d: &[&[u16]],
        filt: &[u16],
        mu: Round,
        sq: Round,
        w: usize,
        planes: &mut [i16],
        stride: usize,
        off: usize,
    ) -> usize {
        let f = filt.len();
        if f > 17 || sq.shift > 16 {
            return 0;
        }
        let n = w / N * N;
        assert!(r.len() == f && d.len() == f);
        assert!(r.iter().chain(d).all(|row| row.len() >= n));
        assert!(stride >= off + n && planes.len() >= PLANES * stride);
        let mut rp = [std::ptr::null(); 17];
        let mut dp = [std::ptr::null(); 17];
        for k in 0..f {
            (rp[k], dp[k]) = (r[k].as_ptr(), d[k].as_ptr());
        }
        let out = planes.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: the `f` rows hold `n` samples each, every plane
                // `off + n`; NEON runs.
                unsafe { stats_vertical_u16(&rp, &dp, filt, mu, sq, n, out, stride, off) }
            },
        );
        n
    }

    fn horizontal(
        self,
        planes: &[i16],
        stride: usize,
        filt: &[u16],
        j0: usize,
        j1: usize,
        egl: f64,
    ) -> VifAccums {
        assert!(j0.is_multiple_of(N) && j0 < j1);
        let (tp, nt) = tap_plan(filt);
        let taps = &tp[..nt];
        let last = j1 - 1 - (j1 - 1 - j0) % N;
        assert!(last + filt.len() - 1 + N <= stride && planes.len() >= PLANES * stride);
        let tab = log2_compact();
        let p = planes.as_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: the last chunk's loads end inside each plane; NEON
                // runs.
                unsafe { horizontal(p, stride, taps, j0, j1, egl, tab) }
            },
        )
    }

    fn down_vertical_u8(
        self,
        rows: &[&[u8]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize {
        if filt.len() != 9 || !filt.iter().eq(filt.iter().rev()) {
            return 0;
        }
        let n = w / N * N;
        assert!(rows.len() == 9 && rows.iter().all(|r| r.len() >= n) && out.len() >= n);
        let rp: [*const u8; 9] = std::array::from_fn(|k| rows[k].as_ptr());
        let o = out.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: rows hold `n` bytes, `out` `n` values; NEON runs.
                unsafe { down_vertical_u8(&rp, filt, round, n, o) }
            },
        );
        n
    }

    fn down_vertical_u16(
        self,
        rows: &[&[u16]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize {
        let f = filt.len();
        let n = w / N * N;
        assert!(rows.len() == f && rows.iter().all(|r| r.len() >= n) && out.len() >= n);
        let rp: Vec<*const u16> = rows.iter().map(|r| r.as_ptr()).collect();
        let o = out.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: the `f` rows hold `n` samples, `out` `n` values;
                // NEON runs.
                unsafe { down_vertical_u16(&rp, filt, round, n, o) }
            },
        );
        n
    }

    fn down_horizontal(self, tmp: &[i16], filt: &[u16], out: &mut [u16]) -> usize {
        let (tp, nt) = tap_plan(filt);
        let taps = &tp[..nt];
        // Chunks whose 16-value loads at `2·oj + k` end inside `tmp`.
        let reach = filt.len() - 1 + 2 * N;
        if tmp.len() < reach {
            return 0;
        }
        let n = ((tmp.len() - reach) / 2 + 1).min(out.len()) / N * N;
        let (t, o) = (tmp.as_ptr(), out.as_mut_ptr());
        self.run(
            #[inline(always)]
            || {
                // SAFETY: `n` is chosen so that the last chunk's loads end inside `tmp` and
                // its stores inside `out`; NEON runs.
                unsafe { down_horizontal(t, taps, n, o) }
            },
        );
        n
    }
}
