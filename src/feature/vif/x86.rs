//! AVX2 and AVX-512 kernels of integer VIF's row pipeline (`pipeline.rs` describes the planes
//! and proves the arithmetic exact).
//!
//! The kernels are written once, generic over [`Ops`]: the vector operations of one
//! instruction set, implemented by the tokens [`Avx2`] and [`Avx512`], which exist only on a
//! CPU that runs them. Every kernel runs inside the token's `run`, a `#[target_feature]`
//! function into which the kernel and its operations are inlined. `Avx512<true>` adds
//! AVX512-VNNI, whose `vpdpwssd` fuses each multiply-add with its accumulation.
//!
//! Filter taps are `vpmaddwd`, two taps per 32-bit lane. Vertically, the 16-bit rows of two
//! taps are interleaved by `vpunpck[lh]wd` and multiplied by the pair of coefficients: the two
//! halves' 32-bit sums hold pixels 0-3 and 4-7 of every 8, and `vpackusdw` puts the 16-bit
//! plane samples back in order. Horizontally, a pair of neighbouring taps
//! `(t[j+o], t[j+o+1])` is one unaligned load at `j + o` for the even pixels and `j + o + 1`
//! for the odd ones, so a chunk's sums come as an even and an odd vector; pixels keep that
//! order through the per-pixel step, whose sums do not depend on it.
//!
//! The per-pixel step runs on 32-bit lanes (64-bit products of the means from `vpmuludq` on
//! the even and the odd lanes) and on `f64` lanes for the gain; its log2 lookups are gathers
//! from [`log2_compact`]. AVX-512 has `vplzcnt` and truncating `f64 -> i64`; AVX2 finds
//! `floor(log2 t)` from the exponent of `(t >> 8) as f32` (exact) and reads the reference's
//! 64-bit log2 from the exponent and leading mantissa bits of the exact `f64` value.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::cpu::{accums, Round, VifAccums, EPS, SIGMA_NSQ};
use super::pipeline::{
    log2_compact, pair_plan, tap_plan, Fast, Kernels, MAX_PAIRS, PLANES, SEGMENT,
};
use crate::error::Result;
use crate::picture::PictureData;
use crate::simd::CpuLevel;

/// Proof that the CPU runs AVX2: only made after `CpuLevel::has_avx2()`.
#[derive(Clone, Copy)]
pub(super) struct Avx2(());

/// Proof that the CPU runs AVX-512 (F, BW, DQ, CD, VL) and AVX2, and with `VNNI` also
/// AVX512-VNNI: only made after `CpuLevel::has_avx512()` (and the VNNI detection).
#[derive(Clone, Copy)]
pub(super) struct Avx512<const VNNI: bool>(());

impl Avx2 {
    /// The token, when `cpu` runs AVX2.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx2().then_some(Avx2(()))
    }

    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    #[inline]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

impl Avx512<false> {
    /// The token, when `cpu` runs AVX-512.
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        cpu.has_avx512().then_some(Avx512(()))
    }

    #[target_feature(
        enable = "avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx2,bmi1,bmi2,lzcnt,popcnt"
    )]
    #[inline]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

impl Avx512<true> {
    /// The token, when `cpu` runs AVX-512 and the CPU has AVX512-VNNI (a part of every
    /// AVX-512 CPU since Ice Lake and Zen 4; the level does not lower it separately).
    pub(super) fn new(cpu: CpuLevel) -> Option<Self> {
        (cpu.has_avx512() && is_x86_feature_detected!("avx512vnni")).then_some(Avx512(()))
    }

    #[target_feature(
        enable = "avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vnni,avx2,bmi1,bmi2,lzcnt,popcnt"
    )]
    #[inline]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// `compute_accums` on the best kernels `cpu` allows (AVX-512 with VNNI where the CPU has
/// it, unless `vnni` is false), or None without AVX2.
pub(super) fn compute(
    cpu: CpuLevel,
    vnni: bool,
    ref_pic: &PictureData,
    dis_pic: &PictureData,
    egl: f64,
    skip_scale0: bool,
) -> Option<Result<[VifAccums; 4]>> {
    if let Some(k) = Avx512::<true>::new(cpu).filter(|_| vnni) {
        return Some(accums(Fast(k), ref_pic, dis_pic, egl, skip_scale0));
    }
    if let Some(k) = Avx512::<false>::new(cpu) {
        return Some(accums(Fast(k), ref_pic, dis_pic, egl, skip_scale0));
    }
    let k = Avx2::new(cpu)?;
    Some(accums(Fast(k), ref_pic, dis_pic, egl, skip_scale0))
}

/// Calls a value intrinsic of the token's instruction sets.
macro_rules! isa {
    ($e:expr) => {{
        // SAFETY: a token (`self`) exists only on a CPU that runs its instruction sets.
        unsafe { $e }
    }};
}

/// Vector operations of one instruction set (methods of its token). `V` holds `N` 16-bit or
/// `N / 2` 32-bit lanes; 128-bit-lane boundaries never matter to the kernels.
trait Ops: Copy {
    type V: Copy;
    /// Per-pixel sums of the horizontal pass.
    type Acc;
    /// 16-bit lanes of `V`.
    const N: usize;
    /// Whether the vertical kernels split their sums over several passes (16 registers).
    const SPLIT: bool;

    /// Runs `f` with the token's instruction sets enabled (inline `f` into it).
    fn run<R>(self, f: impl FnOnce() -> R) -> R;

    fn zero(self) -> Self::V;
    fn splat16(self, x: i16) -> Self::V;
    fn splat32(self, x: i32) -> Self::V;
    /// # Safety
    /// `p` is valid for reading `N` values.
    unsafe fn load(self, p: *const i16) -> Self::V;
    /// `N` bytes widened to 16-bit lanes.
    /// # Safety
    /// `p` is valid for reading `N` bytes.
    unsafe fn load_u8(self, p: *const u8) -> Self::V;
    /// `N` signed bytes widened to 16-bit lanes.
    /// # Safety
    /// `p` is valid for reading `N` bytes.
    unsafe fn load_i8(self, p: *const i8) -> Self::V;
    /// # Safety
    /// `p` is valid for writing `N` values.
    unsafe fn store(self, p: *mut i16, v: Self::V);
    /// Stores the low 16 bits of each 32-bit lane (lanes hold values below 2^16).
    /// # Safety
    /// `p` is valid for writing `N / 2` values.
    unsafe fn store_u32_as_u16(self, p: *mut u16, v: Self::V);
    fn add16(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub16(self, a: Self::V, b: Self::V) -> Self::V;
    fn mullo16(self, a: Self::V, b: Self::V) -> Self::V;
    /// High half of the unsigned 16x16 product.
    fn mulhi_u16(self, a: Self::V, b: Self::V) -> Self::V;
    fn xor(self, a: Self::V, b: Self::V) -> Self::V;
    fn add32(self, a: Self::V, b: Self::V) -> Self::V;
    /// `vpmaddwd`: signed 16x16 products of neighbouring lanes, summed in 32 bits.
    fn madd(self, a: Self::V, b: Self::V) -> Self::V;
    /// `acc + madd(a, b)` (wrapping; one `vpdpwssd` with VNNI).
    #[inline(always)]
    fn dot(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        self.add32(acc, self.madd(a, b))
    }
    fn srl32(self, a: Self::V, n: u32) -> Self::V;
    fn sll32(self, a: Self::V, n: u32) -> Self::V;
    fn and(self, a: Self::V, b: Self::V) -> Self::V;
    /// 16-bit lanes of `a` and `b` interleaved, from the low (`unpacklo16`) or high half of
    /// each 128-bit lane: the 32-bit results of `madd` on them hold pixels 0-3 (`lo`) and 4-7
    /// (`hi`) of every 8.
    fn unpacklo16(self, a: Self::V, b: Self::V) -> Self::V;
    fn unpackhi16(self, a: Self::V, b: Self::V) -> Self::V;
    /// `vpackusdw`: the inverse of the unpacks' order, for 32-bit lanes below 2^16.
    fn packus32(self, lo: Self::V, hi: Self::V) -> Self::V;

    fn acc_new(self) -> Self::Acc;
    /// The reference's `pixel()` on the first `lanes` 32-bit lanes of the five moments
    /// `[mu1, mu2, xx, yy, xy]` (`xx` .. `xy` already rounded to Q16).
    fn pixel(self, acc: &mut Self::Acc, m: [Self::V; 5], lanes: usize, egl: f64, tab: &[u16]);
    fn acc_finish(self, acc: Self::Acc) -> VifAccums;
}

/// `a | b << 16`: the coefficients of a pair of taps for `madd` (the first tap in the low
/// half of each 32-bit lane, as `unpacklo16` / `unpackhi16` and the horizontal loads put it).
#[inline(always)]
fn pair<S: Ops>(s: S, a: i16, b: i16) -> S::V {
    s.splat32((u32::from(a as u16) | u32::from(b as u16) << 16) as i32)
}

/// Sums of `F` tap rows paired by `unpack`: `[lo, hi]` (see [`Ops::unpacklo16`]).
type Halves<V> = [V; 2];

/// `acc += Σ c·(a, b)` over one pair of tap rows (`c` a [`pair`]).
#[inline(always)]
fn dot_pair<S: Ops>(s: S, acc: &mut Halves<S::V>, a: S::V, b: S::V, c: S::V) {
    acc[0] = s.dot(acc[0], s.unpacklo16(a, b), c);
    acc[1] = s.dot(acc[1], s.unpackhi16(a, b), c);
}

/// The low 16 bits of the 32-bit lanes of `[lo, hi]`, in pixel order and biased.
#[inline(always)]
fn pack_low<S: Ops>(s: S, t: Halves<S::V>) -> S::V {
    let m = s.splat32(0xffff);
    s.xor(
        s.packus32(s.and(t[0], m), s.and(t[1], m)),
        s.splat16(i16::MIN),
    )
}

/// The high 16 bits of the 32-bit lanes of `[lo, hi]`, in pixel order and biased.
#[inline(always)]
fn pack_high<S: Ops>(s: S, t: Halves<S::V>) -> S::V {
    s.xor(
        s.packus32(s.srl32(t[0], 16), s.srl32(t[1], 16)),
        s.splat16(i16::MIN),
    )
}

/// `a·b + c·d` in 16-bit lanes (wrapping).
#[inline(always)]
fn mul2<S: Ops>(s: S, a: S::V, b: S::V, c: S::V, d: S::V) -> S::V {
    s.add16(s.mullo16(a, b), s.mullo16(c, d))
}

/// `(v + add) >> shift` of both halves.
#[inline(always)]
fn round_halves<S: Ops>(s: S, v: Halves<S::V>, add: S::V, shift: u32) -> Halves<S::V> {
    [
        s.srl32(s.add32(v[0], add), shift),
        s.srl32(s.add32(v[1], add), shift),
    ]
}

// ---- 8-bit statistics rows ----

/// Folded row `k` of 8-bit input at column `j` (`pipeline.rs`), whose rows hold
/// `u = x - 128` (as [`super::pipeline::Kernels::vertical_u8`] takes them):
/// `[u_a + u_b, v_a + v_b, u_a² + u_b² - 2^15, v_a² + v_b² - 2^15, u_a·v_a + u_b·v_b - 256]`
/// for the taps `k` and `F-1-k`, the centre tap alone unbiased, zero past it. `X` makes terms
/// 0 and 2, `Y` 1 and 3, `XY` 4 (the others stay zero).
///
/// # Safety
/// Every row pointer is valid for reading `j + N` bytes.
#[inline(always)]
unsafe fn u8_fold<S: Ops, const F: usize, const X: bool, const Y: bool, const XY: bool>(
    s: S,
    rp: &[*const i8; F],
    dp: &[*const i8; F],
    k: usize,
    j: usize,
) -> [S::V; 5] {
    let half = F / 2;
    let z = s.zero();
    if k > half {
        return [z; 5];
    }
    let (nx, ny) = (X || XY, Y || XY);
    // The chunk of row `p` (zero when unused).
    let load = |p: *const i8, used: bool| {
        if used {
            // SAFETY: the caller's rows hold the chunk.
            unsafe { s.load_i8(p.add(j)) }
        } else {
            z
        }
    };
    let (xa, ya) = (load(rp[k], nx), load(dp[k], ny));
    if k == half {
        return [
            xa,
            ya,
            s.mullo16(xa, xa),
            s.mullo16(ya, ya),
            s.mullo16(xa, ya),
        ];
    }
    let (xb, yb) = (load(rp[F - 1 - k], nx), load(dp[F - 1 - k], ny));
    [
        s.add16(xa, xb),
        s.add16(ya, yb),
        s.xor(mul2(s, xa, xa, xb, xb), s.splat16(i16::MIN)),
        s.xor(mul2(s, ya, ya, yb, yb), s.splat16(i16::MIN)),
        s.sub16(mul2(s, xa, ya, xb, yb), s.splat16(256)),
    ]
}

/// Sums over the folded rows of one chunk at column `j`: `[S1, S2, Q1, Q2, R]`
/// (`pipeline.rs`), made as [`u8_fold`] says.
///
/// # Safety
/// As [`u8_fold`].
#[inline(always)]
unsafe fn u8_terms<S: Ops, const F: usize, const X: bool, const Y: bool, const XY: bool>(
    s: S,
    rp: &[*const i8; F],
    dp: &[*const i8; F],
    cp: &[S::V; F],
    j: usize,
) -> [Halves<S::V>; 5] {
    let want = [X, Y, X, Y, XY];
    let mut a = [[s.zero(); 2]; 5];
    for (p, &c) in cp.iter().enumerate().take((F / 2 + 2) / 2) {
        // SAFETY: the caller's contract.
        let (fa, fb) = unsafe {
            (
                u8_fold::<S, F, X, Y, XY>(s, rp, dp, 2 * p, j),
                u8_fold::<S, F, X, Y, XY>(s, rp, dp, 2 * p + 1, j),
            )
        };
        for q in 0..5 {
            if want[q] {
                dot_pair(s, &mut a[q], fa[q], fb[q], c);
            }
        }
    }
    a
}

/// Vertical statistics of 8-bit input, columns `0..n` (a multiple of `N`), into the planes at
/// `out + q·stride + off`.
///
/// # Safety
/// Rows are valid for reading `n` bytes, the planes for writing there; `filt` has `F`
/// symmetric taps below 2^15.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn stats_vertical_u8<S: Ops, const F: usize>(
    s: S,
    rp: &[*const i8; F],
    dp: &[*const i8; F],
    filt: &[u16],
    mu: Round,
    n: usize,
    out: *mut i16,
    stride: usize,
    off: usize,
) {
    let half = F / 2;
    // Folded rows 2p and 2p+1 (the centre's partner past it is zero).
    let c = |k: usize| if k <= half { filt[k] as i16 } else { 0 };
    let cp: [S::V; F] = std::array::from_fn(|p| pair(s, c(2 * p), c(2 * p + 1)));
    let c_half: u32 = filt[..half].iter().map(|&c| u32::from(c)).sum();
    let kq = s.splat32(c_half.wrapping_mul(32768).wrapping_sub(1 << 30) as i32);
    let kr = s.splat32(c_half.wrapping_mul(256).wrapping_sub(1 << 30) as i32);
    let k23 = s.splat32(1 << 23);
    let mu_add = s.splat32(mu.add as i32);
    let mut j = 0;
    while j < n {
        // SAFETY: the chunk `j..j + N` lies within the rows (the caller's contract).
        let a = unsafe {
            if S::SPLIT {
                let p = u8_terms::<S, F, true, false, false>(s, rp, dp, &cp, j);
                let q = u8_terms::<S, F, false, true, true>(s, rp, dp, &cp, j);
                [p[0], q[1], p[2], q[3], q[4]]
            } else {
                u8_terms::<S, F, true, true, true>(s, rp, dp, &cp, j)
            }
        };
        let mut t = [[s.zero(); 2]; 5];
        for h in 0..2 {
            let m1 = s.add32(a[0][h], k23);
            let m2 = s.add32(a[1][h], k23);
            t[0][h] = s.srl32(s.add32(m1, mu_add), mu.shift);
            t[1][h] = s.srl32(s.add32(m2, mu_add), mu.shift);
            t[2][h] = s.add32(s.add32(a[2][h], s.sll32(m1, 8)), kq);
            t[3][h] = s.add32(s.add32(a[3][h], s.sll32(m2, 8)), kq);
            t[4][h] = s.add32(s.add32(a[4][h], s.sll32(s.add32(m1, m2), 7)), kr);
        }
        let pl = [
            pack_low(s, t[0]),
            pack_low(s, t[1]),
            pack_low(s, t[2]),
            pack_high(s, t[2]),
            pack_low(s, t[3]),
            pack_high(s, t[3]),
            pack_low(s, t[4]),
            pack_high(s, t[4]),
        ];
        for (q, v) in pl.into_iter().enumerate() {
            // SAFETY: plane `q` holds columns `off..off + n`.
            unsafe { s.store(out.add(q * stride + off + j), v) };
        }
        j += S::N;
    }
}

// ---- 16-bit statistics rows ----

/// The eight biased plane inputs of one tap row of 16-bit input at column `j`: `x`, `y` and
/// the halves of `x·x`, `y·y`, `x·y` (plane order); `X` makes 0, 2, 3, `Y` 1, 4, 5 and `XY`
/// 6, 7 (the others stay zero, as does a missing row).
///
/// # Safety
/// `rp`, `dp` are valid for reading `j + N` values, or null.
#[inline(always)]
unsafe fn u16_row<S: Ops, const X: bool, const Y: bool, const XY: bool>(
    s: S,
    rp: *const i16,
    dp: *const i16,
    j: usize,
) -> [S::V; PLANES] {
    let z = s.zero();
    if rp.is_null() {
        return [z; PLANES];
    }
    let k8000 = s.splat16(i16::MIN);
    let (nx, ny) = (X || XY, Y || XY);
    // SAFETY: the caller's rows hold the chunk.
    let x = if nx { unsafe { s.load(rp.add(j)) } } else { z };
    // SAFETY: as above.
    let y = if ny { unsafe { s.load(dp.add(j)) } } else { z };
    [
        s.xor(x, k8000),
        s.xor(y, k8000),
        s.xor(s.mullo16(x, x), k8000),
        s.xor(s.mulhi_u16(x, x), k8000),
        s.xor(s.mullo16(y, y), k8000),
        s.xor(s.mulhi_u16(y, y), k8000),
        s.xor(s.mullo16(x, y), k8000),
        s.xor(s.mulhi_u16(x, y), k8000),
    ]
}

/// Vertical sums of 16-bit input for one chunk at column `j` over the tap plan's terms,
/// paired: `rows[t]` is term `t`'s rows (null past the last), `cp[p]` the coefficients of
/// terms `2p`, `2p+1`. Planes as [`u16_row`] makes them.
///
/// # Safety
/// Every non-null row pointer is valid for reading `j + N` values.
#[inline(always)]
unsafe fn u16_terms<S: Ops, const P: usize, const X: bool, const Y: bool, const XY: bool>(
    s: S,
    rows: &[(*const i16, *const i16)],
    cp: &[S::V; P],
    j: usize,
) -> [Halves<S::V>; PLANES] {
    let want = [X, Y, X, X, Y, Y, XY, XY];
    let mut a = [[s.zero(); 2]; PLANES];
    for (p, &c) in cp.iter().enumerate() {
        let (ra, da) = rows[2 * p];
        let (rb, db) = rows[2 * p + 1];
        // SAFETY: the caller's contract.
        let (fa, fb) = unsafe {
            (
                u16_row::<S, X, Y, XY>(s, ra, da, j),
                u16_row::<S, X, Y, XY>(s, rb, db, j),
            )
        };
        for q in 0..PLANES {
            if want[q] {
                dot_pair(s, &mut a[q], fa[q], fb[q], c);
            }
        }
    }
    a
}

/// The rows of each tap-plan term (null-padded to an even count) and the pair
/// coefficients, for `P` pairs.
#[inline(always)]
fn term_pairs<S: Ops, T: Copy, const P: usize>(
    s: S,
    filt: &[u16],
    r: &[*const T],
    d: &[*const T],
) -> ([(*const i16, *const i16); 2 * MAX_PAIRS], [S::V; P]) {
    let (plan, len) = tap_plan(filt);
    let mut rows = [(std::ptr::null(), std::ptr::null()); 2 * MAX_PAIRS];
    for (t, row) in rows.iter_mut().enumerate().take(len) {
        *row = (r[plan[t].0].cast(), d[plan[t].0].cast());
    }
    let c = |t: usize| if t < len { plan[t].1 } else { 0 };
    let cp = std::array::from_fn(|p| pair(s, c(2 * p), c(2 * p + 1)));
    (rows, cp)
}

/// Vertical statistics of 16-bit input (see [`stats_vertical_u8`]).
///
/// # Safety
/// Rows are valid for reading `n` values, the planes for writing there; `filt`'s tap plan
/// has at most `2P` terms; `sq.shift` is in 1..=16.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn stats_vertical_u16<S: Ops, const P: usize>(
    s: S,
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
    let (rows, cp) = term_pairs::<S, u16, P>(s, filt, rp, dp);
    let k31 = s.splat32(i32::MIN);
    let mu_add = s.splat32(mu.add as i32);
    let sq_add = s.splat32(sq.add as i32);
    let mut j = 0;
    while j < n {
        // SAFETY: the chunk `j..j + N` lies within the rows (the caller's contract).
        let a = unsafe {
            if S::SPLIT {
                let x = u16_terms::<S, P, true, false, false>(s, &rows, &cp, j);
                let y = u16_terms::<S, P, false, true, false>(s, &rows, &cp, j);
                let xy = u16_terms::<S, P, false, false, true>(s, &rows, &cp, j);
                [x[0], y[1], x[2], x[3], y[4], y[5], xy[6], xy[7]]
            } else {
                u16_terms::<S, P, true, true, true>(s, &rows, &cp, j)
            }
        };
        let mut t = [[s.zero(); 2]; 5];
        for h in 0..2 {
            for q in 0..2 {
                t[q][h] = s.srl32(s.add32(s.add32(a[q][h], k31), mu_add), mu.shift);
            }
            for q in 0..3 {
                let (lo, hi) = (s.add32(a[2 + 2 * q][h], k31), s.add32(a[3 + 2 * q][h], k31));
                t[2 + q][h] = s.add32(
                    s.sll32(hi, 16 - sq.shift),
                    s.srl32(s.add32(lo, sq_add), sq.shift),
                );
            }
        }
        let pl = [
            pack_low(s, t[0]),
            pack_low(s, t[1]),
            pack_low(s, t[2]),
            pack_high(s, t[2]),
            pack_low(s, t[3]),
            pack_high(s, t[3]),
            pack_low(s, t[4]),
            pack_high(s, t[4]),
        ];
        for (q, v) in pl.into_iter().enumerate() {
            // SAFETY: plane `q` holds columns `off..off + n`.
            unsafe { s.store(out.add(q * stride + off + j), v) };
        }
        j += S::N;
    }
}

// ---- horizontal pass and per-pixel step ----

/// Horizontal sums and per-pixel step of pixels `j0..j1`, in chunks of `N` from `j0`.
///
/// # Safety
/// Every plane is valid for reading `N` values at each `j + p + o` (`j` a chunk start,
/// `p` 0 or 1, `o` a pair offset); `filt`'s pair plan has `NP` terms.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn horizontal<S: Ops, const NP: usize>(
    s: S,
    planes: *const i16,
    stride: usize,
    filt: &[u16],
    j0: usize,
    j1: usize,
    egl: f64,
    tab: &[u16],
) -> VifAccums {
    let (pp, _) = pair_plan(filt);
    let plan: [(usize, S::V); NP] = std::array::from_fn(|m| (pp[m].0, pair(s, pp[m].1, pp[m].2)));
    let k31 = s.splat32(i32::MIN);
    let k31r = s.splat32(i32::MIN.wrapping_add(1 << 15));
    let mut acc = s.acc_new();
    let mut j = j0;
    while j < j1 {
        for par in 0..2 {
            let base = j + par;
            let mut a = [s.zero(); PLANES];
            for &(o, c) in &plan {
                for (q, a) in a.iter_mut().enumerate() {
                    // SAFETY: the caller's planes hold `N` values at `base + o`.
                    let v = unsafe { s.load(planes.add(q * stride + base + o)) };
                    *a = s.dot(*a, v, c);
                }
            }
            // (Σ c·t_sq + 2^15) >> 16 from the halves' sums (`pipeline.rs`).
            let m = [
                s.add32(a[0], k31),
                s.add32(a[1], k31),
                s.add32(s.add32(a[3], k31), s.srl32(s.add32(a[2], k31r), 16)),
                s.add32(s.add32(a[5], k31), s.srl32(s.add32(a[4], k31r), 16)),
                s.add32(s.add32(a[7], k31), s.srl32(s.add32(a[6], k31r), 16)),
            ];
            let lanes = if base < j1 {
                ((j1 - base).div_ceil(2)).min(S::N / 2)
            } else {
                0
            };
            s.pixel(&mut acc, m, lanes, egl, tab);
        }
        j += S::N;
    }
    s.acc_finish(acc)
}

// ---- decimation ----

/// Folded row `k` of 8-bit samples at column `j`: `x_k + x_{F-1-k}` (below 2^9), the centre
/// alone, zero past it.
///
/// # Safety
/// The rows are valid for reading `j + N` bytes.
#[inline(always)]
unsafe fn fold_x<S: Ops, const F: usize>(s: S, rp: &[*const u8; F], k: usize, j: usize) -> S::V {
    let half = F / 2;
    // SAFETY: the caller's contract.
    unsafe {
        if k < half {
            s.add16(s.load_u8(rp[k].add(j)), s.load_u8(rp[F - 1 - k].add(j)))
        } else if k == half {
            s.load_u8(rp[k].add(j))
        } else {
            s.zero()
        }
    }
}

/// Vertical pass of decimation on 8-bit rows with symmetric taps folded: rounded means,
/// biased, at `out[0..n]`.
///
/// # Safety
/// Rows are valid for reading `n` bytes and `out` for writing `n` values; `filt` has `F`
/// symmetric taps below 2^15.
#[inline(always)]
unsafe fn down_vertical_u8<S: Ops, const F: usize>(
    s: S,
    rp: &[*const u8; F],
    filt: &[u16],
    round: Round,
    n: usize,
    out: *mut i16,
) {
    let half = F / 2;
    let c = |k: usize| if k <= half { filt[k] as i16 } else { 0 };
    let cp: [S::V; F] = std::array::from_fn(|p| pair(s, c(2 * p), c(2 * p + 1)));
    let add = s.splat32(round.add as i32);
    let mut j = 0;
    while j < n {
        let mut a = [s.zero(); 2];
        for (p, &c) in cp.iter().enumerate().take((half + 2) / 2) {
            // SAFETY: the chunk `j..j + N` lies within the rows.
            let (fa, fb) = unsafe { (fold_x(s, rp, 2 * p, j), fold_x(s, rp, 2 * p + 1, j)) };
            dot_pair(s, &mut a, fa, fb, c);
        }
        let t = round_halves(s, a, add, round.shift);
        // SAFETY: `out` holds `j..j + N`.
        unsafe { s.store(out.add(j), pack_low(s, t)) };
        j += S::N;
    }
}

/// `x - 2^15` of the chunk at `j` of row `r` (zero for a null row).
///
/// # Safety
/// `r` is null or valid for reading `j + N` values.
#[inline(always)]
unsafe fn load_biased<S: Ops>(s: S, r: *const i16, j: usize, k8000: S::V) -> S::V {
    if r.is_null() {
        s.zero()
    } else {
        // SAFETY: the caller's contract.
        s.xor(unsafe { s.load(r.add(j)) }, k8000)
    }
}

/// Vertical pass of decimation on 16-bit rows.
///
/// # Safety
/// Rows are valid for reading `n` values and `out` for writing `n`; `filt`'s tap plan has at
/// most `2P` terms.
#[inline(always)]
unsafe fn down_vertical_u16<S: Ops, const P: usize>(
    s: S,
    rp: &[*const u16],
    filt: &[u16],
    round: Round,
    n: usize,
    out: *mut i16,
) {
    let (rows, cp) = term_pairs::<S, u16, P>(s, filt, rp, rp);
    let k8000 = s.splat16(i16::MIN);
    let add = s.splat32(i32::MIN.wrapping_add(round.add as i32));
    let mut j = 0;
    while j < n {
        let mut a = [s.zero(); 2];
        for (p, &c) in cp.iter().enumerate() {
            // SAFETY: the chunk `j..j + N` lies within the rows.
            let (fa, fb) = unsafe {
                (
                    load_biased(s, rows[2 * p].0, j, k8000),
                    load_biased(s, rows[2 * p + 1].0, j, k8000),
                )
            };
            dot_pair(s, &mut a, fa, fb, c);
        }
        let t = round_halves(s, a, add, round.shift);
        // SAFETY: `out` holds `j..j + N`.
        unsafe { s.store(out.add(j), pack_low(s, t)) };
        j += S::N;
    }
}

/// Horizontal pass of decimation: outputs `0..n` (a multiple of `N / 2`).
///
/// # Safety
/// `tmp` is valid for reading `N` values at `2·oj + o` for every chunk start `oj` and pair
/// offset `o`, `out` for writing `n`; `filt`'s pair plan has `NP` terms.
#[inline(always)]
unsafe fn down_horizontal<S: Ops, const NP: usize>(
    s: S,
    tmp: *const i16,
    filt: &[u16],
    n: usize,
    out: *mut u16,
) {
    let (pp, _) = pair_plan(filt);
    let plan: [(usize, S::V); NP] = std::array::from_fn(|m| (pp[m].0, pair(s, pp[m].1, pp[m].2)));
    let kr = s.splat32(i32::MIN.wrapping_add(1 << 15));
    let mut oj = 0;
    while oj < n {
        let mut a = s.zero();
        for &(o, c) in &plan {
            // SAFETY: `tmp` holds `N` values at `2·oj + o`.
            a = s.dot(a, unsafe { s.load(tmp.add(2 * oj + o)) }, c);
        }
        // SAFETY: `out` holds `oj..oj + N / 2`.
        unsafe { s.store_u32_as_u16(out.add(oj), s.srl32(s.add32(a, kr), 16)) };
        oj += S::N / 2;
    }
}

// ---- the kernels' entry points: checks, then one `run` ----

/// Checks the vertical kernels' inputs: `f` rows of at least `n` samples each, planes of
/// `stride` holding `off + n`; returns `n`, the largest multiple of `chunk` not above `w`.
#[allow(clippy::too_many_arguments)]
fn vertical_span<T>(
    r: &[&[T]],
    d: &[&[T]],
    f: usize,
    w: usize,
    chunk: usize,
    planes: usize,
    stride: usize,
    off: usize,
) -> usize {
    let n = w / chunk * chunk;
    assert!(r.len() == f && d.len() == f);
    assert!(r.iter().chain(d).all(|row| row.len() >= n));
    assert!(stride >= off + n && planes >= PLANES * stride);
    n
}

impl<S: Ops> Kernels for S {
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
        let n = vertical_span(r, d, f, w, S::N, planes.len(), stride, off);
        let rp: [*const i8; 17] = std::array::from_fn(|k| r[k].as_ptr());
        let dp: [*const i8; 17] = std::array::from_fn(|k| d[k].as_ptr());
        let out = planes.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: every row holds `n` bytes, every plane `off + n`
                // samples; the kernel is symmetric with taps below 2^15.
                unsafe { stats_vertical_u8::<S, 17>(self, &rp, &dp, filt, mu, n, out, stride, off) }
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
        if !(1..=16).contains(&sq.shift) {
            return 0;
        }
        let n = vertical_span(r, d, f, w, S::N, planes.len(), stride, off);
        let mut rp = [std::ptr::null(); 17];
        let mut dp = [std::ptr::null(); 17];
        if f > 17 {
            return 0;
        }
        for k in 0..f {
            (rp[k], dp[k]) = (r[k].as_ptr(), d[k].as_ptr());
        }
        let out = planes.as_mut_ptr();
        macro_rules! go {
            ($t:literal) => {
                self.run(
                    #[inline(always)]
                    || {
                        // SAFETY: checked above: every row holds `n` samples (u16 read as
                        // i16), every plane `off + n`; the tap plan has at most 2·`$t`
                        // terms, naming taps below `f`; the square shift is in 1..=16.
                        unsafe {
                            stats_vertical_u16::<S, $t>(
                                self, &rp, &dp, filt, mu, sq, n, out, stride, off,
                            )
                        }
                    },
                )
            };
        }
        match tap_plan(filt).1.div_ceil(2) {
            9 => go!(9),
            5 => go!(5),
            3 => go!(3),
            2 => go!(2),
            _ => return 0,
        }
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
        assert!(j0.is_multiple_of(S::N) && j0 < j1 && j1 - j0 <= SEGMENT);
        let (pp, np) = pair_plan(filt);
        let max_o = pp[..np].iter().map(|p| p.0).max().unwrap_or(0);
        let last = j1 - 1 - (j1 - 1 - j0) % S::N;
        assert!(last + 1 + max_o + S::N <= stride && planes.len() >= PLANES * stride);
        let tab = log2_compact();
        let p = planes.as_ptr();
        macro_rules! go {
            ($np:literal) => {
                self.run(
                    #[inline(always)]
                    || {
                        // SAFETY: checked above: the last chunk's loads end inside each
                        // plane; the pair plan has `$np` terms.
                        unsafe { horizontal::<S, $np>(self, p, stride, filt, j0, j1, egl, tab) }
                    },
                )
            };
        }
        match np {
            9 => go!(9),
            5 => go!(5),
            3 => go!(3),
            2 => go!(2),
            _ => unreachable!("vif: no kernel of {np} pairs"),
        }
    }

    fn down_vertical_u8(
        self,
        rows: &[&[u8]],
        filt: &[u16],
        round: Round,
        w: usize,
        out: &mut [i16],
    ) -> usize {
        let f = filt.len();
        if f != 9 || filt.iter().any(|&c| c >= 0x8000) || !filt.iter().eq(filt.iter().rev()) {
            return 0;
        }
        let n = w / S::N * S::N;
        assert!(rows.len() == f && rows.iter().all(|r| r.len() >= n) && out.len() >= n);
        let rp: [*const u8; 9] = std::array::from_fn(|k| rows[k].as_ptr());
        let o = out.as_mut_ptr();
        self.run(
            #[inline(always)]
            || {
                // SAFETY: checked above: rows hold `n` bytes, `out` `n` values; the kernel is
                // symmetric with taps below 2^15.
                unsafe { down_vertical_u8::<S, 9>(self, &rp, filt, round, n, o) }
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
        let n = w / S::N * S::N;
        assert!(rows.len() == f && rows.iter().all(|r| r.len() >= n) && out.len() >= n);
        let mut rp = [std::ptr::null(); 17];
        if f > 17 {
            return 0;
        }
        for (p, row) in rp.iter_mut().zip(rows) {
            *p = row.as_ptr();
        }
        let o = out.as_mut_ptr();
        macro_rules! go {
            ($t:literal) => {
                self.run(
                    #[inline(always)]
                    || {
                        // SAFETY: checked above: rows hold `n` samples (u16 read as i16),
                        // `out` `n` values; the tap plan has at most 2·`$t` terms, naming
                        // taps below `f`.
                        unsafe { down_vertical_u16::<S, $t>(self, &rp, filt, round, n, o) }
                    },
                )
            };
        }
        match tap_plan(filt).1.div_ceil(2) {
            9 => go!(9),
            5 => go!(5),
            3 => go!(3),
            2 => go!(2),
            _ => return 0,
        }
        n
    }

    fn down_horizontal(self, tmp: &[i16], filt: &[u16], out: &mut [u16]) -> usize {
        let step = S::N / 2;
        let (pp, np) = pair_plan(filt);
        let max_o = pp[..np].iter().map(|p| p.0).max().unwrap_or(0);
        // Chunks whose loads end inside `tmp`.
        let fit = (tmp.len().saturating_sub(max_o + S::N) / 2 + 1).min(out.len());
        let n = if tmp.len() >= max_o + S::N {
            fit / step * step
        } else {
            0
        };
        if n == 0 {
            return 0;
        }
        let (t, o) = (tmp.as_ptr(), out.as_mut_ptr());
        macro_rules! go {
            ($np:literal) => {
                self.run(
                    #[inline(always)]
                    || {
                        // SAFETY: `n` is chosen so that the last chunk's loads end inside
                        // `tmp` and its stores inside `out`; the pair plan has `$np` terms.
                        unsafe { down_horizontal::<S, $np>(self, t, filt, n, o) }
                    },
                )
            };
        }
        match np {
            9 => go!(9),
            5 => go!(5),
            3 => go!(3),
            2 => go!(2),
            _ => return 0,
        }
        n
    }
}

// ---- AVX2 ----

/// Per-lane partial sums of the per-pixel step (AVX2).
struct Acc2 {
    /// Σ den_log terms (i32, below 2^31 per lane within a segment).
    dl: __m256i,
    /// Σ num_log terms.
    nl: __m256i,
    /// Σ of the low and high 16 bits of clamped σ2² over low-variance pixels (u32).
    nnl_lo: __m256i,
    nnl_hi: __m256i,
    /// Minus the count of low-variance pixels.
    dnl: __m256i,
}

impl Ops for Avx2 {
    type V = __m256i;
    type Acc = Acc2;
    const N: usize = 16;
    const SPLIT: bool = true;

    #[inline(always)]
    fn run<R>(self, f: impl FnOnce() -> R) -> R {
        // SAFETY: an `Avx2` exists only on a CPU that runs AVX2.
        unsafe { self.vectorize(f) }
    }

    #[inline(always)]
    fn zero(self) -> __m256i {
        isa!(_mm256_setzero_si256())
    }
    #[inline(always)]
    fn splat16(self, x: i16) -> __m256i {
        isa!(_mm256_set1_epi16(x))
    }
    #[inline(always)]
    fn splat32(self, x: i32) -> __m256i {
        isa!(_mm256_set1_epi32(x))
    }
    #[inline(always)]
    unsafe fn load(self, p: *const i16) -> __m256i {
        // SAFETY: AVX2 runs (the token); the caller's pointer is valid for 32 bytes.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_u8(self, p: *const u8) -> __m256i {
        // SAFETY: AVX2 runs (the token); the caller's pointer is valid for 16 bytes.
        unsafe { _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_i8(self, p: *const i8) -> __m256i {
        // SAFETY: AVX2 runs (the token); the caller's pointer is valid for 16 bytes.
        unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut i16, v: __m256i) {
        // SAFETY: AVX2 runs (the token); the caller's pointer is valid for 32 bytes.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }
    #[inline(always)]
    unsafe fn store_u32_as_u16(self, p: *mut u16, v: __m256i) {
        // SAFETY: AVX2 runs (the token); the caller's pointer is valid for 16 bytes. Lanes
        // are below 2^16, so the saturating pack is exact.
        unsafe {
            let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(v, v));
            _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(packed))
        }
    }
    #[inline(always)]
    fn add16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_add_epi16(a, b))
    }
    #[inline(always)]
    fn sub16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_sub_epi16(a, b))
    }
    #[inline(always)]
    fn mullo16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_mullo_epi16(a, b))
    }
    #[inline(always)]
    fn mulhi_u16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_mulhi_epu16(a, b))
    }
    #[inline(always)]
    fn xor(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_xor_si256(a, b))
    }
    #[inline(always)]
    fn add32(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_add_epi32(a, b))
    }
    #[inline(always)]
    fn madd(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_madd_epi16(a, b))
    }
    #[inline(always)]
    fn srl32(self, a: __m256i, n: u32) -> __m256i {
        isa!(_mm256_srl_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn sll32(self, a: __m256i, n: u32) -> __m256i {
        isa!(_mm256_sll_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn and(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_and_si256(a, b))
    }

    #[inline(always)]
    fn unpacklo16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_unpacklo_epi16(a, b))
    }
    #[inline(always)]
    fn unpackhi16(self, a: __m256i, b: __m256i) -> __m256i {
        isa!(_mm256_unpackhi_epi16(a, b))
    }
    #[inline(always)]
    fn packus32(self, lo: __m256i, hi: __m256i) -> __m256i {
        isa!(_mm256_packus_epi32(lo, hi))
    }

    #[inline(always)]
    fn acc_new(self) -> Acc2 {
        let z = self.zero();
        Acc2 {
            dl: z,
            nl: z,
            nnl_lo: z,
            nnl_hi: z,
            dnl: z,
        }
    }

    #[inline(always)]
    fn pixel(self, acc: &mut Acc2, m: [__m256i; 5], lanes: usize, egl: f64, tab: &[u16]) {
        assert!(tab.len() > 0x8000);
        // SAFETY: AVX2 runs (the token); `tab` holds the 32769 entries the gathers may read.
        unsafe { pixel_avx2(acc, m, lanes, egl, tab.as_ptr()) }
    }

    #[inline(always)]
    fn acc_finish(self, acc: Acc2) -> VifAccums {
        let lanes = |v: __m256i| -> [i32; 8] {
            let mut l = [0i32; 8];
            // SAFETY: AVX2 runs (the token); `l` holds 32 bytes.
            unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), v) };
            l
        };
        let sum = |v| lanes(v).iter().map(|&x| i64::from(x)).sum::<i64>();
        let sum_u = |v| lanes(v).iter().map(|&x| i64::from(x as u32)).sum::<i64>();
        VifAccums {
            num_log: sum(acc.nl),
            den_log: sum(acc.dl),
            num_non_log: sum_u(acc.nnl_lo) + (sum_u(acc.nnl_hi) << 16),
            den_non_log: -sum(acc.dnl),
        }
    }
}

/// `((a·b + 2^31) >> 32)` per u32 lane, given also `a`, `b` shifted right by 32 per u64 lane.
#[inline(always)]
unsafe fn q_avx2(ae: __m256i, be: __m256i, ao: __m256i, bo: __m256i) -> __m256i {
    // SAFETY: value intrinsics; the caller runs AVX2.
    unsafe {
        let r31 = _mm256_set1_epi64x(1 << 31);
        let e = _mm256_srli_epi64::<32>(_mm256_add_epi64(_mm256_mul_epu32(ae, be), r31));
        let o = _mm256_add_epi64(_mm256_mul_epu32(ao, bo), r31);
        _mm256_blend_epi32::<0b1010_1010>(e, o)
    }
}

/// The reference's `log2_32` of lanes `t` in `2^17..2^32` (masked lanes; others garbage):
/// `k = floor(log2 t) - 15` from the exponent of `(t >> 8) as f32` (exact below 2^24).
///
/// # Safety
/// AVX2 runs; `tab` holds 32769 entries.
#[inline(always)]
unsafe fn log2_avx2(t: __m256i, mask: __m256i, tab: *const u16) -> __m256i {
    // SAFETY: the caller runs AVX2; gather indices are below 2^15, so the 32-bit reads end
    // inside `tab`; masked-off lanes read nothing.
    unsafe {
        let f = _mm256_cvtepi32_ps(_mm256_srli_epi32::<8>(t));
        let k = _mm256_sub_epi32(
            _mm256_srli_epi32::<23>(_mm256_castps_si256(f)),
            _mm256_set1_epi32(127 - 8 + 15),
        );
        let idx = _mm256_and_si256(_mm256_srlv_epi32(t, k), _mm256_set1_epi32(0x7fff));
        let g = _mm256_mask_i32gather_epi32::<2>(_mm256_setzero_si256(), tab.cast(), idx, mask);
        _mm256_add_epi32(
            _mm256_and_si256(g, _mm256_set1_epi32(0xffff)),
            _mm256_slli_epi32::<11>(k),
        )
    }
}

/// Gain arithmetic of four lanes: the clamped `sv_sq` and, for the reference's
/// `numer1_tmp`, `idx | e << 16` per lane (`idx` its top 16 bits less the leading one, `e`
/// the biased exponent of its exact `f64` value).
///
/// # Safety
/// AVX2 runs.
#[inline(always)]
unsafe fn gain_avx2(
    s12: __m128i,
    s1: __m128i,
    s2: __m128i,
    eps: __m256d,
    egl: __m256d,
) -> (__m128i, __m128i) {
    // SAFETY: value intrinsics; the caller runs AVX2.
    unsafe {
        let (s12d, s1d, s2d) = (
            _mm256_cvtepi32_pd(s12),
            _mm256_cvtepi32_pd(s1),
            _mm256_cvtepi32_pd(s2),
        );
        let g = _mm256_div_pd(s12d, _mm256_add_pd(s1d, eps));
        let sv = _mm256_cvttpd_epi32(_mm256_sub_pd(s2d, _mm256_mul_pd(g, s12d)));
        let sv = _mm_max_epi32(sv, _mm_setzero_si128());
        // `if g < egl { g } else { egl }`, as minpd's operand order gives.
        let g = _mm256_min_pd(g, egl);
        let nt = _mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(_mm256_mul_pd(
            _mm256_mul_pd(g, g),
            s1d,
        ));
        // numer1_tmp, exact: integers below 2^52.
        let t = _mm256_add_pd(
            nt,
            _mm256_add_pd(_mm256_cvtepi32_pd(sv), _mm256_set1_pd(131072.0)),
        );
        let bits = _mm256_castpd_si256(t);
        let pk = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi64::<37>(bits), _mm256_set1_epi64x(0x7fff)),
            _mm256_slli_epi64::<16>(_mm256_srli_epi64::<52>(bits)),
        );
        let pk = _mm256_permutevar8x32_epi32(pk, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
        (sv, _mm256_castsi256_si128(pk))
    }
}

/// The per-pixel step on 8 lanes (see [`Ops::pixel`]).
///
/// # Safety
/// AVX2 runs; `tab` holds 32769 entries.
#[inline(always)]
unsafe fn pixel_avx2(acc: &mut Acc2, m: [__m256i; 5], lanes: usize, egl: f64, tab: *const u16) {
    let [mu1, mu2, xx, yy, xy] = m;
    // SAFETY: value intrinsics and the table lookups of `log2_avx2`; the caller runs AVX2 and
    // passes the table.
    unsafe {
        let zero = _mm256_setzero_si256();
        let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), iota);
        let (mu1o, mu2o) = (_mm256_srli_epi64::<32>(mu1), _mm256_srli_epi64::<32>(mu2));
        // Variances: u32 differences read as i32.
        let s1 = _mm256_sub_epi32(xx, q_avx2(mu1, mu1, mu1o, mu1o));
        let s2 = _mm256_max_epi32(_mm256_sub_epi32(yy, q_avx2(mu2, mu2, mu2o, mu2o)), zero);
        let s12 = _mm256_sub_epi32(xy, q_avx2(mu1, mu2, mu1o, mu2o));
        let logm = _mm256_and_si256(
            valid,
            _mm256_cmpgt_epi32(s1, _mm256_set1_epi32(SIGMA_NSQ - 1)),
        );
        let nonlog = _mm256_andnot_si256(logm, valid);
        acc.dnl = _mm256_add_epi32(acc.dnl, nonlog);
        let s2n = _mm256_and_si256(s2, nonlog);
        acc.nnl_lo = _mm256_add_epi32(acc.nnl_lo, _mm256_and_si256(s2n, _mm256_set1_epi32(0xffff)));
        acc.nnl_hi = _mm256_add_epi32(acc.nnl_hi, _mm256_srli_epi32::<16>(s2n));
        if _mm256_testz_si256(logm, logm) != 0 {
            return;
        }
        let den = log2_avx2(
            _mm256_add_epi32(s1, _mm256_set1_epi32(SIGMA_NSQ)),
            logm,
            tab,
        );
        let den = _mm256_sub_epi32(den, _mm256_set1_epi32(2048 * 17));
        acc.dl = _mm256_add_epi32(acc.dl, _mm256_and_si256(den, logm));
        let numm = _mm256_and_si256(
            logm,
            _mm256_and_si256(_mm256_cmpgt_epi32(s12, zero), _mm256_cmpgt_epi32(s2, zero)),
        );
        if _mm256_testz_si256(numm, numm) != 0 {
            return;
        }
        let (eps, egl) = (_mm256_set1_pd(EPS), _mm256_set1_pd(egl));
        let (sv0, pk0) = gain_avx2(
            _mm256_castsi256_si128(s12),
            _mm256_castsi256_si128(s1),
            _mm256_castsi256_si128(s2),
            eps,
            egl,
        );
        let (sv1, pk1) = gain_avx2(
            _mm256_extracti128_si256::<1>(s12),
            _mm256_extracti128_si256::<1>(s1),
            _mm256_extracti128_si256::<1>(s2),
            eps,
            egl,
        );
        let (sv, pk) = (_mm256_set_m128i(sv1, sv0), _mm256_set_m128i(pk1, pk0));
        let idx = _mm256_and_si256(pk, _mm256_set1_epi32(0x7fff));
        let k = _mm256_sub_epi32(_mm256_srli_epi32::<16>(pk), _mm256_set1_epi32(1023 + 15));
        let g = _mm256_mask_i32gather_epi32::<2>(zero, tab.cast(), idx, numm);
        let ltmp = _mm256_add_epi32(
            _mm256_and_si256(g, _mm256_set1_epi32(0xffff)),
            _mm256_slli_epi32::<11>(k),
        );
        let ln1 = log2_avx2(
            _mm256_add_epi32(sv, _mm256_set1_epi32(SIGMA_NSQ)),
            numm,
            tab,
        );
        acc.nl = _mm256_add_epi32(acc.nl, _mm256_and_si256(_mm256_sub_epi32(ltmp, ln1), numm));
    }
}

// ---- AVX-512 ----

/// Per-lane partial sums of the per-pixel step (AVX-512), as [`Acc2`]; the low-variance
/// count is kept as a scalar.
struct Acc5 {
    dl: __m512i,
    nl: __m512i,
    nnl_lo: __m512i,
    nnl_hi: __m512i,
    dnl: u64,
}

impl<const VNNI: bool> Ops for Avx512<VNNI> {
    type V = __m512i;
    type Acc = Acc5;
    const N: usize = 32;
    const SPLIT: bool = false;

    #[inline(always)]
    fn run<R>(self, f: impl FnOnce() -> R) -> R {
        if VNNI {
            // SAFETY: an `Avx512<true>` exists only on a CPU that runs AVX-512 (F, BW, DQ,
            // CD, VL), AVX512-VNNI and AVX2.
            unsafe { Avx512::<true>(()).vectorize(f) }
        } else {
            // SAFETY: an `Avx512` exists only on a CPU that runs AVX-512 (F, BW, DQ, CD, VL)
            // and AVX2.
            unsafe { Avx512::<false>(()).vectorize(f) }
        }
    }

    #[inline(always)]
    fn dot(self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        if VNNI {
            isa!(_mm512_dpwssd_epi32(acc, a, b))
        } else {
            self.add32(acc, self.madd(a, b))
        }
    }

    #[inline(always)]
    fn zero(self) -> __m512i {
        isa!(_mm512_setzero_si512())
    }
    #[inline(always)]
    fn splat16(self, x: i16) -> __m512i {
        isa!(_mm512_set1_epi16(x))
    }
    #[inline(always)]
    fn splat32(self, x: i32) -> __m512i {
        isa!(_mm512_set1_epi32(x))
    }
    #[inline(always)]
    unsafe fn load(self, p: *const i16) -> __m512i {
        // SAFETY: AVX-512 runs (the token); the caller's pointer is valid for 64 bytes.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_u8(self, p: *const u8) -> __m512i {
        // SAFETY: AVX-512 runs (the token); the caller's pointer is valid for 32 bytes.
        unsafe { _mm512_cvtepu8_epi16(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_i8(self, p: *const i8) -> __m512i {
        // SAFETY: AVX-512 runs (the token); the caller's pointer is valid for 32 bytes.
        unsafe { _mm512_cvtepi8_epi16(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut i16, v: __m512i) {
        // SAFETY: AVX-512 runs (the token); the caller's pointer is valid for 64 bytes.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }
    #[inline(always)]
    unsafe fn store_u32_as_u16(self, p: *mut u16, v: __m512i) {
        // SAFETY: AVX-512 runs (the token); the caller's pointer is valid for 32 bytes.
        unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtepi32_epi16(v)) }
    }
    #[inline(always)]
    fn add16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_add_epi16(a, b))
    }
    #[inline(always)]
    fn sub16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_sub_epi16(a, b))
    }
    #[inline(always)]
    fn mullo16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_mullo_epi16(a, b))
    }
    #[inline(always)]
    fn mulhi_u16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_mulhi_epu16(a, b))
    }
    #[inline(always)]
    fn xor(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_xor_si512(a, b))
    }
    #[inline(always)]
    fn add32(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_add_epi32(a, b))
    }
    #[inline(always)]
    fn madd(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_madd_epi16(a, b))
    }
    #[inline(always)]
    fn srl32(self, a: __m512i, n: u32) -> __m512i {
        isa!(_mm512_srl_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn sll32(self, a: __m512i, n: u32) -> __m512i {
        isa!(_mm512_sll_epi32(a, _mm_cvtsi32_si128(n as i32)))
    }
    #[inline(always)]
    fn and(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_and_si512(a, b))
    }

    #[inline(always)]
    fn unpacklo16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_unpacklo_epi16(a, b))
    }
    #[inline(always)]
    fn unpackhi16(self, a: __m512i, b: __m512i) -> __m512i {
        isa!(_mm512_unpackhi_epi16(a, b))
    }
    #[inline(always)]
    fn packus32(self, lo: __m512i, hi: __m512i) -> __m512i {
        isa!(_mm512_packus_epi32(lo, hi))
    }

    #[inline(always)]
    fn acc_new(self) -> Acc5 {
        let z = self.zero();
        Acc5 {
            dl: z,
            nl: z,
            nnl_lo: z,
            nnl_hi: z,
            dnl: 0,
        }
    }

    #[inline(always)]
    fn pixel(self, acc: &mut Acc5, m: [__m512i; 5], lanes: usize, egl: f64, tab: &[u16]) {
        assert!(tab.len() > 0x8000);
        // SAFETY: AVX-512 runs (the token); `tab` holds the 32769 entries the gathers may
        // read.
        unsafe { pixel_avx512(acc, m, lanes, egl, tab.as_ptr()) }
    }

    #[inline(always)]
    fn acc_finish(self, acc: Acc5) -> VifAccums {
        let lanes = |v: __m512i| -> [i32; 16] {
            let mut l = [0i32; 16];
            // SAFETY: AVX-512 runs (the token); `l` holds 64 bytes.
            unsafe { _mm512_storeu_si512(l.as_mut_ptr().cast(), v) };
            l
        };
        let sum = |v| lanes(v).iter().map(|&x| i64::from(x)).sum::<i64>();
        let sum_u = |v| lanes(v).iter().map(|&x| i64::from(x as u32)).sum::<i64>();
        VifAccums {
            num_log: sum(acc.nl),
            den_log: sum(acc.dl),
            num_non_log: sum_u(acc.nnl_lo) + (sum_u(acc.nnl_hi) << 16),
            den_non_log: acc.dnl as i64,
        }
    }
}

/// [`q_avx2`] on 16 lanes.
#[inline(always)]
unsafe fn q_avx512(ae: __m512i, be: __m512i, ao: __m512i, bo: __m512i) -> __m512i {
    // SAFETY: value intrinsics; the caller runs AVX-512.
    unsafe {
        let r31 = _mm512_set1_epi64(1 << 31);
        let e = _mm512_srli_epi64::<32>(_mm512_add_epi64(_mm512_mul_epu32(ae, be), r31));
        let o = _mm512_add_epi64(_mm512_mul_epu32(ao, bo), r31);
        _mm512_mask_blend_epi32(0xaaaa, e, o)
    }
}

/// The reference's `log2_32` of lanes `t >= 2^17` (masked lanes).
///
/// # Safety
/// AVX-512 runs; `tab` holds 32769 entries.
#[inline(always)]
unsafe fn log2_avx512(t: __m512i, mask: __mmask16, tab: *const u16) -> __m512i {
    // SAFETY: the caller runs AVX-512; gather indices are below 2^15, so the 32-bit reads end
    // inside `tab`; masked-off lanes read nothing.
    unsafe {
        let k = _mm512_sub_epi32(_mm512_set1_epi32(16), _mm512_lzcnt_epi32(t));
        let idx = _mm512_and_si512(_mm512_srlv_epi32(t, k), _mm512_set1_epi32(0x7fff));
        let g = _mm512_mask_i32gather_epi32::<2>(_mm512_setzero_si512(), mask, idx, tab.cast());
        _mm512_add_epi32(
            _mm512_and_si512(g, _mm512_set1_epi32(0xffff)),
            _mm512_slli_epi32::<11>(k),
        )
    }
}

/// Gain arithmetic of eight lanes: the clamped `sv_sq`, and the table index and `k` of the
/// reference's `log2_64(numer1_tmp)`.
///
/// # Safety
/// AVX-512 runs.
#[inline(always)]
unsafe fn gain_avx512(
    s12: __m256i,
    s1: __m256i,
    s2: __m256i,
    eps: __m512d,
    egl: __m512d,
) -> (__m256i, __m256i, __m256i) {
    // SAFETY: value intrinsics; the caller runs AVX-512.
    unsafe {
        let (s12d, s1d, s2d) = (
            _mm512_cvtepi32_pd(s12),
            _mm512_cvtepi32_pd(s1),
            _mm512_cvtepi32_pd(s2),
        );
        let g = _mm512_div_pd(s12d, _mm512_add_pd(s1d, eps));
        let sv = _mm512_cvttpd_epi32(_mm512_sub_pd(s2d, _mm512_mul_pd(g, s12d)));
        let sv = _mm256_max_epi32(sv, _mm256_setzero_si256());
        // `if g < egl { g } else { egl }`, as minpd's operand order gives.
        let g = _mm512_min_pd(g, egl);
        let nt = _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_mul_pd(g, g), s1d));
        let numer1 = _mm256_add_epi32(sv, _mm256_set1_epi32(SIGMA_NSQ));
        let t = _mm512_add_epi64(nt, _mm512_cvtepu32_epi64(numer1));
        let k = _mm512_sub_epi64(_mm512_set1_epi64(48), _mm512_lzcnt_epi64(t));
        let idx = _mm512_and_si512(_mm512_srlv_epi64(t, k), _mm512_set1_epi64(0x7fff));
        (sv, _mm512_cvtepi64_epi32(idx), _mm512_cvtepi64_epi32(k))
    }
}

/// The per-pixel step on 16 lanes (see [`Ops::pixel`]).
///
/// # Safety
/// AVX-512 runs; `tab` holds 32769 entries.
#[inline(always)]
unsafe fn pixel_avx512(acc: &mut Acc5, m: [__m512i; 5], lanes: usize, egl: f64, tab: *const u16) {
    let [mu1, mu2, xx, yy, xy] = m;
    let valid: __mmask16 = if lanes >= 16 {
        0xffff
    } else {
        ((1u32 << lanes) - 1) as u16
    };
    // SAFETY: value intrinsics and the table lookups of `log2_avx512`; the caller runs
    // AVX-512 and passes the table.
    unsafe {
        let zero = _mm512_setzero_si512();
        let (mu1o, mu2o) = (_mm512_srli_epi64::<32>(mu1), _mm512_srli_epi64::<32>(mu2));
        let s1 = _mm512_sub_epi32(xx, q_avx512(mu1, mu1, mu1o, mu1o));
        let s2 = _mm512_max_epi32(_mm512_sub_epi32(yy, q_avx512(mu2, mu2, mu2o, mu2o)), zero);
        let s12 = _mm512_sub_epi32(xy, q_avx512(mu1, mu2, mu1o, mu2o));
        let logm = _mm512_mask_cmpge_epi32_mask(valid, s1, _mm512_set1_epi32(SIGMA_NSQ));
        let nonlog = valid & !logm;
        acc.dnl += u64::from(nonlog.count_ones());
        acc.nnl_lo = _mm512_mask_add_epi32(
            acc.nnl_lo,
            nonlog,
            acc.nnl_lo,
            _mm512_and_si512(s2, _mm512_set1_epi32(0xffff)),
        );
        acc.nnl_hi =
            _mm512_mask_add_epi32(acc.nnl_hi, nonlog, acc.nnl_hi, _mm512_srli_epi32::<16>(s2));
        if logm == 0 {
            return;
        }
        let den = log2_avx512(
            _mm512_add_epi32(s1, _mm512_set1_epi32(SIGMA_NSQ)),
            logm,
            tab,
        );
        let den = _mm512_sub_epi32(den, _mm512_set1_epi32(2048 * 17));
        acc.dl = _mm512_mask_add_epi32(acc.dl, logm, acc.dl, den);
        let numm = logm & _mm512_cmpgt_epi32_mask(s12, zero) & _mm512_cmpgt_epi32_mask(s2, zero);
        if numm == 0 {
            return;
        }
        let (eps, egl) = (_mm512_set1_pd(EPS), _mm512_set1_pd(egl));

        let (sv0, ix0, k0) = gain_avx512(
            _mm512_castsi512_si256(s12),
            _mm512_castsi512_si256(s1),
            _mm512_castsi512_si256(s2),
            eps,
            egl,
        );
        let (sv1, ix1, k1) = gain_avx512(
            _mm512_extracti64x4_epi64::<1>(s12),
            _mm512_extracti64x4_epi64::<1>(s1),
            _mm512_extracti64x4_epi64::<1>(s2),
            eps,
            egl,
        );
        let sv = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(sv0), sv1);
        let idx = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(ix0), ix1);
        let k = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(k0), k1);
        let g = _mm512_mask_i32gather_epi32::<2>(zero, numm, idx, tab.cast());
        let ltmp = _mm512_add_epi32(
            _mm512_and_si512(g, _mm512_set1_epi32(0xffff)),
            _mm512_slli_epi32::<11>(k),
        );
        let ln1 = log2_avx512(
            _mm512_add_epi32(sv, _mm512_set1_epi32(SIGMA_NSQ)),
            numm,
            tab,
        );
        acc.nl = _mm512_mask_add_epi32(acc.nl, numm, acc.nl, _mm512_sub_epi32(ltmp, ln1));
    }
}
