//! SIMD row kernels of the integer ADM stages, written once over [`Ops`]: the vector operations
//! of one instruction set, implemented by tokens that exist only on a CPU that runs it (`x86.rs`:
//! AVX2 and AVX-512; `aarch64.rs`: NEON). Each kernel runs inside its token's `Ops::run`, a
//! `#[target_feature]` function into which the kernel and its operations are inlined.
//!
//! Each kernel reproduces a scalar loop of `cpu.rs` exactly on a prefix of its row and returns
//! that prefix's length (0 when `cpu` has no level it can use); the scalar code finishes the
//! row. Element-wise kernels cover the whole row when it holds at least one vector (see
//! [`starts`]); the reductions stop at the last whole vector.
//!
//! Where the scalar code widens to 64 bits, so do these ([`Ops::D`]); where it truncates
//! (`as i16`, `as i32` of a wider value), these keep the low bits. The float parts of
//! decoupling run lane-wise in the scalar order (no fused multiply-add, no reassociation).
//! Operations whose best form differs between instruction sets (the DWT's tap sums, the
//! angle test's products, table lookups) are operations of [`Ops`]; the kernels around them
//! are shared.

#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(unused_variables, dead_code)
)]

use super::tables::{div_lookup, DWT_HI, DWT_LO, DWT_LO_SUM};
use crate::simd::CpuLevel;

/// Vector operations of one instruction set (methods of its token). Slices given to loads and
/// stores must hold the vector (they are checked). Masks are all-ones 32-bit lanes.
pub(super) trait Ops: Copy {
    /// One register: `L` i32 lanes, or `2 L` i16 lanes, or `L` f32 values as their bits.
    type V: Copy;
    /// `L` i16 lanes.
    type H: Copy;
    /// `L` i64 lanes, in an order of the instruction set's own that the operations between
    /// `V` and `D` keep.
    type D: Copy;
    /// i32 lanes of [`Ops::V`].
    const L: usize;

    /// [`Ops::L`].
    #[inline(always)]
    fn lanes(self) -> usize {
        Self::L
    }

    /// Runs `f` with the token's instruction sets enabled. `f` must be an `#[inline(always)]`
    /// closure: it is compiled without the instruction sets, and unless it is inlined into
    /// the `#[target_feature]` function that calls it, every operation in it is a call.
    fn run<R>(self, f: impl FnOnce() -> R) -> R;

    fn ld32(self, s: &[i32]) -> Self::V;
    fn st32(self, d: &mut [i32], v: Self::V);
    /// `2 L` values.
    fn ld16(self, s: &[i16]) -> Self::V;
    /// `2 L` values.
    fn st16(self, d: &mut [i16], v: Self::V);
    fn ld16h(self, s: &[i16]) -> Self::H;
    fn st16h(self, d: &mut [i16], v: Self::H);
    /// `2 L` bytes widened to i16 lanes.
    fn ld_u8(self, s: &[u8]) -> Self::V;
    /// `2 L` samples.
    fn ld_u16(self, s: &[u16]) -> Self::V;
    /// Prefetches column `x` of `rows` (where the instruction set has it).
    #[inline(always)]
    fn prefetch<T>(self, rows: &[&[T]; 2], x: usize) {
        let _ = (rows, x);
    }

    fn zero(self) -> Self::V;
    fn splat32(self, x: i32) -> Self::V;
    fn splat16(self, x: i16) -> Self::V;
    fn add32(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub32(self, a: Self::V, b: Self::V) -> Self::V;
    /// Low 32 bits of the product.
    fn mullo32(self, a: Self::V, b: Self::V) -> Self::V;
    fn and(self, a: Self::V, b: Self::V) -> Self::V;
    fn or(self, a: Self::V, b: Self::V) -> Self::V;
    fn xor(self, a: Self::V, b: Self::V) -> Self::V;
    /// `!a & b`.
    fn andnot(self, a: Self::V, b: Self::V) -> Self::V;
    /// Wrapping: `i32::MIN` stays, which is 2^31 read as u32.
    fn abs32(self, a: Self::V) -> Self::V;
    fn min32(self, a: Self::V, b: Self::V) -> Self::V;
    fn max32(self, a: Self::V, b: Self::V) -> Self::V;
    fn cmpgt32(self, a: Self::V, b: Self::V) -> Self::V;
    fn cmpeq32(self, a: Self::V, b: Self::V) -> Self::V;
    /// `m ? a : b` per lane.
    fn select(self, m: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// Whether any lane of `m` is set.
    fn any(self, m: Self::V) -> bool;
    /// Shifts by `n` (all lanes; 32 or more: sign or zero fill).
    fn sra32(self, a: Self::V, n: u32) -> Self::V;
    fn sll32(self, a: Self::V, n: u32) -> Self::V;
    /// Shifts by each lane of `n` (unsigned; 32 or more, or -1, gives 0).
    fn sllv32(self, a: Self::V, n: Self::V) -> Self::V;
    fn srlv32(self, a: Self::V, n: Self::V) -> Self::V;

    /// Wrapping |x| of i16 lanes (`-32768` stays, which is 32768 read as u16).
    fn abs16(self, a: Self::V) -> Self::V;
    /// Sign-extends.
    fn widen(self, a: Self::H) -> Self::V;
    /// Values that fit in i16.
    fn narrow(self, a: Self::V) -> Self::H;
    fn sub16h(self, a: Self::H, b: Self::H) -> Self::H;
    /// i16 lanes sign-extended, in column order.
    fn widen16(self, a: Self::V) -> [Self::V; 2];
    /// u16 lanes zero-extended, in column order.
    fn widen_u16(self, a: Self::V) -> [Self::V; 2];
    /// The low 16 bits of the lanes of `[first, second]`, in column order.
    fn narrow16(self, a: [Self::V; 2]) -> Self::V;
    /// [`Ops::narrow16`] of values that fit in i16.
    #[inline(always)]
    fn pack16(self, a: [Self::V; 2]) -> Self::V {
        self.narrow16(a)
    }

    /// `Σ t_k·x_k` (wrapping i32) of the `2 L` i16 lanes of four rows, as two halves in the
    /// order [`Ops::narrow_dot`] takes.
    fn dot16(self, x: [Self::V; 4], t: [i16; 4]) -> [Self::V; 2];
    /// The low 16 bits of [`Ops::dot16`]'s halves in column order (`fits`: they fit in i16).
    fn narrow_dot(self, a: [Self::V; 2], fits: bool) -> Self::V;
    /// The samples that outputs `0..2 L` of a horizontal DWT pass read (output `m` reads
    /// `x[2m..2m+4]`; `x` holds `4 L + 2` samples), for [`Ops::hdot16`].
    fn hload16(self, x: &[i16]) -> [Self::V; 4];
    /// `Σ t_k·x[2m+k]` (wrapping i32) of outputs `m` in `0..2 L`, in column order.
    fn hdot16(self, x: [Self::V; 4], t: [i16; 4]) -> [Self::V; 2];
    /// Four rows of i32 samples prepared for [`Ops::dot64`].
    fn pairs64(self, x: [Self::V; 4]) -> [Self::V; 4];
    /// The samples that outputs `0..L` of a horizontal DWT pass read (`x` holds `2 L + 2`),
    /// prepared for [`Ops::hdot64`].
    fn hpairs64(self, x: &[i32]) -> [Self::V; 4];
    /// `((Σ t_k·x_k + r) >> s) as i32` with the sum in i64, where [`split_ok`] holds.
    fn dot64(self, p: [Self::V; 4], t: [i32; 4], r: i64, s: u32) -> Self::V;
    /// [`Ops::dot64`] of [`Ops::hpairs64`], in column order.
    #[inline(always)]
    fn hdot64(self, p: [Self::V; 4], t: [i32; 4], r: i64, s: u32) -> Self::V {
        self.dot64(p, t, r, s)
    }

    /// `lut[idx]` per lane (indices at most 32768).
    fn lut(self, lut: &[i32; 32769], idx: Self::V) -> Self::V;
    /// `o·t`, `o·o` and `t·t` of (h, v) pairs of i16 coefficients, summed in wrapping i32.
    fn dots16(self, o: [Self::H; 2], t: [Self::H; 2]) -> [Self::V; 3];
    /// `o·t`, `o·o` and `t·t` of (h, v) pairs of i32 coefficients, summed in wrapping i64 and
    /// rounded to f32 as `as` does (bits).
    fn dots32(self, o: [Self::V; 2], t: [Self::V; 2]) -> [Self::V; 3];
    /// i32 lanes to f32 (bits).
    fn cvt_f32(self, a: Self::V) -> Self::V;
    /// The angle test of `cpu.rs`'s `within_one_degree` on f32 values (bits): `dp >= 0 &&
    /// dp * dp >= cos^2 * om * tm` in f64, each value `f32 as f64 / 4096`. A mask.
    fn angle(self, dp: Self::V, om: Self::V, tm: Self::V) -> Self::V;
    /// `cpu.rs`'s `enhance(rst, pos, t, egl)` truncated to i32 (`pos` a mask).
    fn enhance_f64(self, rst: Self::V, t: Self::V, pos: Self::V, egl: f64) -> Self::V;
    /// The shift of `cpu.rs`'s `reduce15` of u32 lanes (0 below 2^15).
    fn shift15(self, a: Self::V) -> Self::V;

    /// Exact products of signed lanes.
    fn mulw_i32(self, a: Self::V, b: Self::V) -> Self::D;
    /// Exact products of unsigned lanes.
    fn mulw_u32(self, a: Self::V, b: Self::V) -> Self::D;
    /// `(a as i64) << 32`.
    fn shl32_64(self, a: Self::V) -> Self::D;
    /// Zero-extends.
    fn widen_u32(self, a: Self::V) -> Self::D;
    fn splat64(self, x: i64) -> Self::D;
    /// Wrapping.
    fn add64(self, a: Self::D, b: Self::D) -> Self::D;
    /// Logical shift by `n < 64`.
    fn srl64(self, a: Self::D, n: u32) -> Self::D;
    /// Shifts by each lane of `n < 64`.
    fn sllv64(self, a: Self::D, n: Self::D) -> Self::D;
    fn srlv64(self, a: Self::D, n: Self::D) -> Self::D;
    /// Of values below 2^63.
    fn min_u64(self, a: Self::D, b: Self::D) -> Self::D;
    /// The low 32 bits of each lane.
    fn narrow64(self, a: Self::D) -> Self::V;
    /// The high 32 bits of each lane.
    fn high64(self, a: Self::D) -> Self::V;
    /// `(a as i32) as i64 * b`: the low 32 bits of `a`'s lanes times `b`'s, signed, exact.
    fn mul_lo32(self, a: Self::D, b: Self::V) -> Self::D;
    /// The low 64 bits of `a · b` (`b` unsigned).
    fn mul64_u32(self, a: Self::D, b: Self::V) -> Self::D;
    /// Wrapping sum of the lanes.
    fn sum64(self, a: Self::D) -> u64;
}

/// `body` with `$s` bound to the best token `cpu` allows, inside its `run`; `none` without one.
/// The body is a closure generic only by expansion (once per token), so it names no token
/// type: `s.lanes()` is its width. It takes its captures by value: through references, which
/// the kernels' stores might alias, every use would load them again.
macro_rules! dispatch {
    ($cpu:expr, |$s:ident| $body:expr, $none:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if let Some($s) = $crate::feature::adm::x86::Avx512::new($cpu) {
                return $s.run(
                    #[inline(always)]
                    move || $body,
                );
            }
            if let Some($s) = $crate::feature::adm::x86::Avx2::new($cpu) {
                return $s.run(
                    #[inline(always)]
                    move || $body,
                );
            }
        }
        #[cfg(target_arch = "aarch64")]
        if let Some($s) = $crate::feature::adm::aarch64::Neon::new($cpu) {
            return $s.run(
                #[inline(always)]
                move || $body,
            );
        }
        $none
    }};
}

// For the reason given at `Ops::run`, the kernels' own closures are `#[inline(always)]` too,
// and none is handed to a function that is not.

/// The length an element-wise kernel of `w`-element vectors covers: all of `n`, or nothing
/// when it holds no whole vector.
fn whole(n: usize, w: usize) -> usize {
    if n < w {
        0
    } else {
        n
    }
}

/// Starts of the vectors of `w` elements covering `0..n` (`n` from [`whole`]): the last one is
/// moved back to end at n, recomputing a few outputs of the one before it. For element-wise
/// kernels, whose outputs depend only on their own inputs, this finishes the row without
/// scalar code.
fn starts(n: usize, w: usize) -> impl Iterator<Item = usize> {
    (0..n).step_by(w).map(move |j| j.min(n - w))
}

/// `(x * w + add) >> n`.
#[inline(always)]
fn mul_round<S: Ops>(s: S, x: S::V, w: S::V, add: S::V, n: u32) -> S::V {
    s.sra32(s.add32(s.mullo32(x, w), add), n)
}

/// `x as i16 as i32`.
#[inline(always)]
fn sext16<S: Ops>(s: S, x: S::V) -> S::V {
    s.sra32(s.sll32(x, 16), 16)
}

/// `(a + k) >> n` of both halves.
#[inline(always)]
fn round2<S: Ops>(s: S, a: [S::V; 2], k: S::V, n: u32) -> [S::V; 2] {
    [s.sra32(s.add32(a[0], k), n), s.sra32(s.add32(a[1], k), n)]
}

/// Column `x` of four rows.
#[inline(always)]
fn ld4<S: Ops>(s: S, r: [&[i32]; 4], x: usize) -> [S::V; 4] {
    [
        s.ld32(&r[0][x..]),
        s.ld32(&r[1][x..]),
        s.ld32(&r[2][x..]),
        s.ld32(&r[3][x..]),
    ]
}

/// Column `x` of three bands of i16.
#[inline(always)]
fn ld3h<S: Ops>(s: S, b: [&[i16]; 3], x: usize) -> [S::H; 3] {
    [
        s.ld16h(&b[0][x..]),
        s.ld16h(&b[1][x..]),
        s.ld16h(&b[2][x..]),
    ]
}

/// Column `x` of three bands.
#[inline(always)]
fn ld3<S: Ops>(s: S, b: [&[i32]; 3], x: usize) -> [S::V; 3] {
    [s.ld32(&b[0][x..]), s.ld32(&b[1][x..]), s.ld32(&b[2][x..])]
}

/// `L` i16 values widened.
#[inline(always)]
fn ld16w<S: Ops>(s: S, p: &[i16]) -> S::V {
    s.widen(s.ld16h(p))
}

/// Whether [`Ops::dot64`] applies to rounding `r` and shift `s`: s of 15 or 16 and
/// 0 <= r <= 2^16 (what x86's split form needs; the only values the DWT uses).
pub(super) fn split_ok(r: i64, s: u32) -> bool {
    (s == 15 || s == 16) && (0..=65536).contains(&r)
}

const fn taps16(t: [i32; 4]) -> [i16; 4] {
    [t[0] as i16, t[1] as i16, t[2] as i16, t[3] as i16]
}

const LO16: [i16; 4] = taps16(DWT_LO);
const HI16: [i16; 4] = taps16(DWT_HI);

// ---------------------------------------------------------------------------------------------
// DWT, scale 0.

/// A luma sample type, with the SIMD vertical DWT pass of scale 0 for it.
pub(super) trait Sample: Copy + Into<i32> {
    /// Whether the sums fit in i16 (8-bit samples: |sum| <= 27411 * 255 / 2^8 < 2^15 for any
    /// bpc >= 8).
    const FITS: bool;
    /// Whether samples enter as `s ^ 0x8000 = s - 32768`.
    const BIASED: bool;

    /// `2 L` samples as i16 lanes.
    fn load<S: Ops>(s: S, r: &[Self]) -> S::V;

    /// Column `x` of four rows.
    #[inline(always)]
    fn load4<S: Ops>(s: S, r: [&[Self]; 4], x: usize) -> [S::V; 4] {
        [
            Self::load(s, &r[0][x..]),
            Self::load(s, &r[1][x..]),
            Self::load(s, &r[2][x..]),
            Self::load(s, &r[3][x..]),
        ]
    }

    /// Scale-0 vertical pass into `lo`/`hi` (the row's columns, unpadded); `ahead` are the rows
    /// of the next output row (prefetched).
    fn dwt0_vert(
        cpu: CpuLevel,
        rows: [&[Self]; 4],
        ahead: [&[Self]; 2],
        bpc: u32,
        lo: &mut [i16],
        hi: &mut [i16],
    ) -> usize {
        let round = 1i32 << (bpc - 1);
        // Biased samples: add back 32768 * (tap sum), exact modulo 2^32 like the scalar
        // wrapping sum (high-pass taps sum to 0).
        let bias = if Self::BIASED {
            32768i32.wrapping_mul(DWT_LO_SUM)
        } else {
            0
        };
        let kl = round.wrapping_sub(DWT_LO_SUM.wrapping_mul(round));
        let kl = kl.wrapping_add(bias);
        dispatch!(
            cpu,
            |s| {
                let w = 2 * s.lanes();
                let n = whole(lo.len(), w);
                let (kl, kh) = (s.splat32(kl), s.splat32(round));
                for x in starts(n, w) {
                    s.prefetch(&ahead, x);
                    let v = Self::load4(s, rows, x);
                    let l = s.narrow_dot(round2(s, s.dot16(v, LO16), kl, bpc), Self::FITS);
                    let h = s.narrow_dot(round2(s, s.dot16(v, HI16), kh, bpc), Self::FITS);
                    s.st16(&mut lo[x..], l);
                    s.st16(&mut hi[x..], h);
                }
                n
            },
            0
        )
    }
}

impl Sample for u8 {
    const FITS: bool = true;
    const BIASED: bool = false;
    #[inline(always)]
    fn load<S: Ops>(s: S, r: &[u8]) -> S::V {
        s.ld_u8(r)
    }
}

impl Sample for u16 {
    const FITS: bool = false;
    const BIASED: bool = true;
    #[inline(always)]
    fn load<S: Ops>(s: S, r: &[u16]) -> S::V {
        s.xor(s.ld_u16(r), s.splat16(i16::MIN))
    }
}

/// Scale-0 horizontal pass: output `j` reads `lo[2j..2j+4]` (padded rows, at least
/// `2 * approx.len() + 2` long) and writes the approximation and the v, h, d bands.
pub fn dwt0_horiz(
    cpu: CpuLevel,
    lo: &[i16],
    hi: &[i16],
    approx: &mut [i32],
    v: &mut [i16],
    h: &mut [i16],
    d: &mut [i16],
) -> usize {
    dispatch!(
        cpu,
        |s| {
            let w = 2 * s.lanes();
            let n = whole(approx.len(), w);
            let k = s.splat32(32768);
            for j in starts(n, w) {
                let (l, hh) = (s.hload16(&lo[2 * j..]), s.hload16(&hi[2 * j..]));
                let a = round2(s, s.hdot16(l, LO16), k, 16);
                s.st32(&mut approx[j..], a[0]);
                s.st32(&mut approx[j + s.lanes()..], a[1]);
                s.st16(&mut v[j..], s.pack16(round2(s, s.hdot16(l, HI16), k, 16)));
                s.st16(&mut h[j..], s.pack16(round2(s, s.hdot16(hh, LO16), k, 16)));
                s.st16(&mut d[j..], s.pack16(round2(s, s.hdot16(hh, HI16), k, 16)));
            }
            n
        },
        0
    )
}

// ---------------------------------------------------------------------------------------------
// DWT, scales 1-3.

/// `Σ t_k·x_k` in wrapping i32.
#[inline(always)]
fn dot32<S: Ops>(s: S, x: [S::V; 4], t: [i32; 4]) -> S::V {
    let a = s.add32(
        s.mullo32(x[0], s.splat32(t[0])),
        s.mullo32(x[1], s.splat32(t[1])),
    );
    let b = s.add32(
        s.mullo32(x[2], s.splat32(t[2])),
        s.mullo32(x[3], s.splat32(t[3])),
    );
    s.add32(a, b)
}

/// Scales 1-3 vertical pass: `((sum + rv) >> sv) as i32` per column (without a shift, the
/// wrapping i32 sum of wrapping products is the same low 32 bits).
pub fn dwt123_vert(
    cpu: CpuLevel,
    rows: [&[i32]; 4],
    ahead: [&[i32]; 2],
    rv: i64,
    sv: u32,
    lo: &mut [i32],
    hi: &mut [i32],
) -> usize {
    let unshifted = sv == 0 && rv == 0;
    if !unshifted && !split_ok(rv, sv) {
        return 0;
    }
    dispatch!(
        cpu,
        |s| {
            let n = whole(lo.len(), s.lanes());
            for x in starts(n, s.lanes()) {
                s.prefetch(&ahead, x);
                let v = ld4(s, rows, x);
                let (l, h) = if unshifted {
                    (dot32(s, v, DWT_LO), dot32(s, v, DWT_HI))
                } else {
                    let p = s.pairs64(v);
                    (s.dot64(p, DWT_LO, rv, sv), s.dot64(p, DWT_HI, rv, sv))
                };
                s.st32(&mut lo[x..], l);
                s.st32(&mut hi[x..], h);
            }
            n
        },
        0
    )
}

/// Scales 1-3 horizontal pass (same layout as [`dwt0_horiz`]).
#[allow(clippy::too_many_arguments)]
pub fn dwt123_horiz(
    cpu: CpuLevel,
    lo: &[i32],
    hi: &[i32],
    rh: i64,
    sh: u32,
    approx: &mut [i32],
    v: &mut [i32],
    h: &mut [i32],
    d: &mut [i32],
) -> usize {
    if !split_ok(rh, sh) {
        return 0;
    }
    dispatch!(
        cpu,
        |s| {
            let n = whole(approx.len(), s.lanes());
            for j in starts(n, s.lanes()) {
                let (l, hh) = (s.hpairs64(&lo[2 * j..]), s.hpairs64(&hi[2 * j..]));
                s.st32(&mut approx[j..], s.hdot64(l, DWT_LO, rh, sh));
                s.st32(&mut v[j..], s.hdot64(l, DWT_HI, rh, sh));
                s.st32(&mut h[j..], s.hdot64(hh, DWT_LO, rh, sh));
                s.st32(&mut d[j..], s.hdot64(hh, DWT_HI, rh, sh));
            }
            n
        },
        0
    )
}

// ---------------------------------------------------------------------------------------------
// Decoupling.

/// The restored coefficients `rst` of gains `kq` (before their sign test): `k` is 0 where o and
/// t differ in sign or t is 0 (the scalar quotient is <= 0 there) and 32768 where o is 0;
/// `rst` is enhanced where `angle && k > 0 && o != 0`, towards the distorted `t`: `o > 0` ?
/// `min(rst * egl, t)` : `max(rst * egl, t)` in f64, truncated (with `egl == 1` the product
/// is `rst` itself and the integer min/max is the same). `rst(k)` is the stage's
/// `((k * o + 2^14) >> 15) as i32`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn restore<S: Ops>(
    s: S,
    kq: S::V,
    o: S::V,
    t: S::V,
    angle: S::V,
    egl: f64,
    rst: impl FnOnce(S::V) -> S::V,
) -> S::V {
    let z = s.zero();
    let differ = s.sra32(s.xor(o, t), 31);
    let k = s.andnot(s.or(differ, s.cmpeq32(t, z)), kq);
    let k = s.select(s.cmpeq32(o, z), s.splat32(32768), k);
    let rst = rst(k);
    let cond = s.andnot(s.cmpeq32(o, z), s.and(angle, s.cmpgt32(k, z)));
    if !s.any(cond) {
        return rst;
    }
    let pos = s.cmpgt32(o, z);
    let en = if egl == 1.0 {
        s.select(pos, s.min32(rst, t), s.max32(rst, t))
    } else {
        s.enhance_f64(rst, t, pos, egl)
    };
    s.select(cond, en, rst)
}

/// Scale-0 decoupling of a row (the CSF window's part of it).
pub fn decouple0(
    cpu: CpuLevel,
    o: [&[i16]; 3],
    t: [&[i16]; 3],
    egl: f64,
    r: [&mut [i16]; 3],
    a: [&mut [i16]; 3],
) -> usize {
    let lut = div_lookup();
    dispatch!(
        cpu,
        |s| {
            let n = whole(o[0].len(), s.lanes());
            let (k32768, k16384) = (s.splat32(32768), s.splat32(16384));
            let (min, abs) = (s.splat32(i32::MIN), s.splat32(i32::MAX));
            for j in starts(n, s.lanes()) {
                let (ov, tv) = (ld3h(s, o, j), ld3h(s, t, j));
                let [dp, om, tm] = s.dots16([ov[0], ov[1]], [tv[0], tv[1]]);
                // The dot product wraps only at 2^31 (-32768 * -32768 twice), which reads as
                // i32::MIN: flip that one's sign. Squared magnitudes are >= 0: |f32| undoes
                // their wrap.
                let dp = s.xor(s.cvt_f32(dp), s.and(s.cmpeq32(dp, min), min));
                let (om, tm) = (s.and(s.cvt_f32(om), abs), s.and(s.cvt_f32(tm), abs));
                let angle = s.angle(dp, om, tm);
                for b in 0..3 {
                    let (ob, tb) = (s.widen(ov[b]), s.widen(tv[b]));
                    let (ao, at) = (s.abs32(ob), s.abs32(tb));
                    // With |t| <= |o| the product lut[|o|] * |t| is at most 2^30; with
                    // |t| > |o| it is at least 2^30, whose gain clamps to 32768.
                    let q = s.mullo32(s.lut(lut, ao), at);
                    let kq = s.sra32(s.add32(q, k16384), 15);
                    let kq = s.select(s.cmpgt32(at, ao), k32768, s.min32(kq, k32768));
                    let rst = restore(
                        s,
                        kq,
                        ob,
                        tb,
                        angle,
                        egl,
                        #[inline(always)]
                        move |k| mul_round(s, k, ob, k16384, 15),
                    );
                    // rst fits in i16; `(t - rst) as i16` is the wrapping i16 difference.
                    let r16 = s.narrow(rst);
                    s.st16h(&mut r[b][j..], r16);
                    s.st16h(&mut a[b][j..], s.sub16h(tv[b], r16));
                }
            }
            n
        },
        0
    )
}

/// Scales 1-3 decoupling of a row.
pub fn decouple123(
    cpu: CpuLevel,
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) -> usize {
    let lut = div_lookup();
    dispatch!(
        cpu,
        |s| {
            let n = whole(o[0].len(), s.lanes());
            let one = s.splat32(1);
            for j in starts(n, s.lanes()) {
                let (ov, tv) = (ld3(s, o, j), ld3(s, t, j));
                let [dp, om, tm] = s.dots32([ov[0], ov[1]], [tv[0], tv[1]]);
                let angle = s.angle(dp, om, tm);
                for b in 0..3 {
                    let (ob, tb) = (ov[b], tv[b]);
                    let (ao, at) = (s.abs32(ob), s.abs32(tb));
                    // reduce15: |o| >= 2^15 is rounded to 15 significant bits, shift
                    // sh = bits - 15; 1 << (sh - 1) is 0 for sh = 0.
                    let sh = s.shift15(ao);
                    let rnd = s.sllv32(one, s.sub32(sh, one));
                    let l = s.lut(lut, s.srlv32(s.add32(ao, rnd), sh));
                    // k = min((l * |t| + 2^(14+sh)) >> (15+sh), 32768) in u64 lanes.
                    let sh = s.add64(s.widen_u32(sh), s.splat64(14));
                    let q = s.add64(s.mulw_u32(l, at), s.sllv64(s.splat64(1), sh));
                    let q = s.srlv64(q, s.add64(sh, s.splat64(1)));
                    let kq = s.narrow64(s.min_u64(q, s.splat64(32768)));
                    let rst = restore(
                        s,
                        kq,
                        ob,
                        tb,
                        angle,
                        egl,
                        #[inline(always)]
                        move |k| {
                            let p = s.add64(s.mulw_i32(k, ob), s.splat64(16384));
                            s.narrow64(s.srl64(p, 15))
                        },
                    );
                    s.st32(&mut r[b][j..], rst);
                    s.st32(&mut a[b][j..], s.sub32(tb, rst));
                }
            }
            n
        },
        0
    )
}

// ---------------------------------------------------------------------------------------------
// CSF.

/// `((x * w + 2^27) >> 28) as i32` of i32 lanes `x`, `w` an unsigned 32-bit weight.
#[inline(always)]
fn q28<S: Ops>(s: S, x: S::V, w: u32) -> S::V {
    let p = s.mulw_i32(x, s.splat32(w as i32));
    // The signed product read a weight with its top bit set as w - 2^32: add x * 2^32 back.
    let p = if (w as i32) < 0 {
        s.add64(p, s.shl32_64(x))
    } else {
        p
    };
    s.narrow64(s.srl64(s.add64(p, s.splat64(1 << 27)), 28))
}

/// `((c * |x| - 2^31) >> 32) as i32`.
#[inline(always)]
fn mul_hi_wrapped<S: Ops>(s: S, x: S::V, c: u32) -> S::V {
    let p = s.mulw_u32(s.abs32(x), s.splat32(c as i32));
    s.high64(s.add64(p, s.splat64(i32::MIN as i64)))
}

/// Scale-0 CSF of a row: `dst = ((w * s + round) >> shift) as i16` and
/// `flt = ((4369 * |dst| + 2048) >> 12) as i16`.
pub fn csf0(
    cpu: CpuLevel,
    src: &[i16],
    w: i32,
    round: i32,
    shift: u32,
    dst: &mut [i16],
    flt: &mut [i16],
) -> usize {
    if shift >= 32 {
        return 0;
    }
    dispatch!(
        cpu,
        |s| {
            let n = whole(src.len(), 2 * s.lanes());
            let (w, round) = (s.splat32(w), s.splat32(round));
            let (k4369, k2048) = (s.splat32(4369), s.splat32(2048));
            for j in starts(n, 2 * s.lanes()) {
                let [x0, x1] = s.widen16(s.ld16(&src[j..]));
                let v0 = sext16(s, mul_round(s, x0, w, round, shift));
                let v1 = sext16(s, mul_round(s, x1, w, round, shift));
                s.st16(&mut dst[j..], s.pack16([v0, v1]));
                let f0 = mul_round(s, s.abs32(v0), k4369, k2048, 12);
                let f1 = mul_round(s, s.abs32(v1), k4369, k2048, 12);
                s.st16(&mut flt[j..], s.narrow16([f0, f1]));
            }
            n
        },
        0
    )
}

/// Scales 1-3 CSF of a row (Q32 weight `w`).
pub fn csf123(cpu: CpuLevel, src: &[i32], w: u32, dst: &mut [i32], flt: &mut [i32]) -> usize {
    dispatch!(
        cpu,
        |s| {
            let n = whole(src.len(), s.lanes());
            for j in starts(n, s.lanes()) {
                let v = q28(s, s.ld32(&src[j..]), w);
                s.st32(&mut dst[j..], v);
                s.st32(&mut flt[j..], mul_hi_wrapped(s, v, 143165577));
            }
            n
        },
        0
    )
}

// ---------------------------------------------------------------------------------------------
// Denominator.

/// Scale-0 denominator of a row: `sum |c|^3` (u64).
pub fn den0(cpu: CpuLevel, row: &[i16]) -> (u64, usize) {
    dispatch!(
        cpu,
        |s| {
            let w = 2 * s.lanes();
            let n = row.len() / w * w;
            let mut acc = s.splat64(0);
            for j in (0..n).step_by(w) {
                // |-32768| = 0x8000 read as unsigned.
                for a in s.widen_u16(s.abs16(s.ld16(&row[j..]))) {
                    acc = s.add64(acc, s.mulw_u32(s.mullo32(a, a), a));
                }
            }
            (s.sum64(acc), n)
        },
        (0, 0)
    )
}

/// Scales 1-3 denominator of a row: `sum ((((m*m + 2^ssq) >> ssq) * m + add) >> cube)`.
pub fn den123(cpu: CpuLevel, row: &[i32], ssq: u32, add: u64, cube: u32) -> (u64, usize) {
    if ssq >= 64 || cube >= 64 {
        return (0, 0);
    }
    dispatch!(
        cpu,
        |s| {
            let n = row.len() / s.lanes() * s.lanes();
            let (rsq, add) = (s.splat64((1u64 << ssq) as i64), s.splat64(add as i64));
            let mut acc = s.splat64(0);
            for j in (0..n).step_by(s.lanes()) {
                let m = s.abs32(s.ld32(&row[j..]));
                // m <= 2^31: m*m exact; the rounded square has up to 33 bits.
                let t = s.srl64(s.add64(s.mulw_u32(m, m), rsq), ssq);
                let p = s.add64(s.mul64_u32(t, m), add);
                acc = s.add64(acc, s.srl64(p, cube));
            }
            (s.sum64(acc), n)
        },
        (0, 0)
    )
}

// ---------------------------------------------------------------------------------------------
// Contrast masking.

/// Scale-0 column sums of a row: `col = sum_b fu + fm + fd`,
/// `cen = sum_b ((8738 * |dm| + 2048) >> 12) as i16 - fm`.
pub fn cm_cols0(
    cpu: CpuLevel,
    fu: [&[i16]; 3],
    fm: [&[i16]; 3],
    fd: [&[i16]; 3],
    dm: [&[i16]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    dispatch!(
        cpu,
        |s| {
            let n = whole(col.len(), s.lanes());
            let (k8738, k2048) = (s.splat32(8738), s.splat32(2048));
            for j in starts(n, s.lanes()) {
                let (mut c, mut e) = (s.zero(), s.zero());
                for b in 0..3 {
                    let m = ld16w(s, &fm[b][j..]);
                    let ud = s.add32(ld16w(s, &fu[b][j..]), ld16w(s, &fd[b][j..]));
                    c = s.add32(c, s.add32(ud, m));
                    let x = mul_round(s, s.abs32(ld16w(s, &dm[b][j..])), k8738, k2048, 12);
                    let x = sext16(s, x);
                    e = s.add32(e, s.sub32(x, m));
                }
                s.st32(&mut col[j..], c);
                s.st32(&mut cen[j..], e);
            }
            n
        },
        0
    )
}

/// Scales 1-3 column sums of a row (centre term `((286331153 * |dm| - 2^31) >> 32) as i32`).
pub fn cm_cols123(
    cpu: CpuLevel,
    fu: [&[i32]; 3],
    fm: [&[i32]; 3],
    fd: [&[i32]; 3],
    dm: [&[i32]; 3],
    col: &mut [i32],
    cen: &mut [i32],
) -> usize {
    dispatch!(
        cpu,
        |s| {
            let n = whole(col.len(), s.lanes());
            for j in starts(n, s.lanes()) {
                let (u, m, d, x) = (ld3(s, fu, j), ld3(s, fm, j), ld3(s, fd, j), ld3(s, dm, j));
                let (mut c, mut e) = (s.zero(), s.zero());
                for b in 0..3 {
                    c = s.add32(c, s.add32(s.add32(u[b], d[b]), m[b]));
                    let x = mul_hi_wrapped(s, x[b], 286331153);
                    e = s.add32(e, s.sub32(x, m[b]));
                }
                s.st32(&mut col[j..], c);
                s.st32(&mut cen[j..], e);
            }
            n
        },
        0
    )
}

/// Masking thresholds: `thr[k] = col[k] + col[k+1] + col[k+2] + cen[k]` (`col` starts one
/// column left of `thr`).
pub fn cm_thr(cpu: CpuLevel, col: &[i32], cen: &[i32], thr: &mut [i32]) -> usize {
    dispatch!(
        cpu,
        |s| {
            let n = whole(thr.len(), s.lanes());
            for j in starts(n, s.lanes()) {
                let a = s.add32(s.ld32(&col[j..]), s.ld32(&col[j + 1..]));
                let b = s.add32(s.ld32(&col[j + 2..]), s.ld32(&cen[j..]));
                s.st32(&mut thr[j..], s.add32(a, b));
            }
            n
        },
        0
    )
}

/// Sum of `(xsq * x + add) >> cube` over the rows' lanes `x >= 0` from `px(j)` (`L` of them at
/// `j`), with `xsq = ((x * x + rsq) >> sq) as i32`. The arithmetic shift is a logical one of
/// the biased `xsq * x + add + 2^62 >= 0` (|xsq * x| < 2^62), whose extra `2^(62 - cube)` per
/// pixel is removed from the sum.
#[inline(always)]
fn cube_sum<S: Ops>(
    s: S,
    n: usize,
    (rsq, sq): (i64, u32),
    (add, cube): (i64, u32),
    px: impl Fn(usize) -> S::V,
) -> (i64, usize) {
    let n = n / s.lanes() * s.lanes();
    let (rsq, bias) = (s.splat64(rsq), s.splat64(add + (1i64 << 62)));
    let mut acc = s.splat64(0);
    for j in (0..n).step_by(s.lanes()) {
        let x = px(j);
        // x in 0..2^31: unsigned and signed products agree.
        let xsq = s.srl64(s.add64(s.mulw_u32(x, x), rsq), sq);
        let p = s.add64(s.mul_lo32(xsq, x), bias);
        acc = s.add64(acc, s.srl64(p, cube));
    }
    let sum = s.sum64(acc);
    let sum = sum.wrapping_sub((n as u64).wrapping_mul(1u64 << (62 - cube)));
    (sum as i64, n)
}

/// Scale-0 masked sum of a row: `x = max(|s * irf| - (thr << sub), 0)`,
/// `xsq = ((x * x + 2^(sq-1)) >> sq) as i32`, sum of `(xsq * x + add) >> cube`.
/// `k` is `[irf, sub, sq]`.
pub fn cm_pix0(
    cpu: CpuLevel,
    src: &[i16],
    thr: &[i32],
    k: [i32; 3],
    add: i64,
    cube: u32,
) -> (i64, usize) {
    if cube >= 62 || !(1..63).contains(&k[2]) || !(0..32).contains(&k[1]) {
        return (0, 0);
    }
    let (sub, sq) = (k[1] as u32, k[2] as u32);
    dispatch!(
        cpu,
        |s| {
            let (irf, zero) = (s.splat32(k[0]), s.zero());
            cube_sum(
                s,
                src.len(),
                (1i64 << (sq - 1), sq),
                (add, cube),
                #[inline(always)]
                move |j| {
                    let x = s.abs32(s.mullo32(ld16w(s, &src[j..]), irf));
                    let t = s.sll32(s.ld32(&thr[j..]), sub);
                    s.max32(s.sub32(x, t), zero)
                },
            )
        },
        (0, 0)
    )
}

/// Scales 1-3 masked sum of a row: `x = ((s * irf + 2^27) >> 28) as i32`,
/// `x = max(|x| - thr, 0)`, `xsq = ((x * x + 2^29) >> 30) as i32`, sum of
/// `(xsq * x + add) >> cube`.
pub fn cm_pix123(
    cpu: CpuLevel,
    src: &[i32],
    thr: &[i32],
    irf: u32,
    add: i64,
    cube: u32,
) -> (i64, usize) {
    if cube >= 62 {
        return (0, 0);
    }
    dispatch!(
        cpu,
        |s| {
            let zero = s.zero();
            cube_sum(
                s,
                src.len(),
                (1i64 << 29, 30),
                (add, cube),
                #[inline(always)]
                move |j| {
                    let x = q28(s, s.ld32(&src[j..]), irf);
                    s.max32(s.sub32(s.abs32(x), s.ld32(&thr[j..])), zero)
                },
            )
        },
        (0, 0)
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::testutil::checkasm::Rng;

    /// [`Ops::dots32`] of every column at `cpu`'s level (f32 bits), or false without one.
    fn dots32_at(cpu: CpuLevel, o: [&[i32]; 2], t: [&[i32]; 2], out: [&mut [i32]; 3]) -> bool {
        let [dp, om, tm] = out;
        dispatch!(
            cpu,
            |s| {
                for j in (0..o[0].len()).step_by(s.lanes()) {
                    let ov = [s.ld32(&o[0][j..]), s.ld32(&o[1][j..])];
                    let tv = [s.ld32(&t[0][j..]), s.ld32(&t[1][j..])];
                    let [d, m, n] = s.dots32(ov, tv);
                    s.st32(&mut dp[j..], d);
                    s.st32(&mut om[j..], m);
                    s.st32(&mut tm[j..], n);
                }
                true
            },
            false
        )
    }

    /// The angle test's int64 dot products reach f32 as `as` rounds them, at every level:
    /// sums on the delicate cases of [`rounding_cases`] (as `(v >> 30) * 2^30 + (v & (2^30 - 1))
    /// * 1`), the extremes, and random coefficients of every magnitude, so that the x86
    /// levels' exact-f64, emulated and `vcvtqq2ps` paths all run.
    #[test]
    fn dots32_round_like_as() {
        let mut rng = Rng::new(10);
        let (mut oh, mut ov, mut th, mut tv) = (vec![], vec![], vec![], vec![]);
        for v in rounding_cases() {
            if (v >> 30) as i32 as i64 == v >> 30 {
                oh.push((v >> 30) as i32);
                th.push(1 << 30);
                ov.push((v & ((1 << 30) - 1)) as i32);
                tv.push(1);
            }
        }
        for k in 0..4000 {
            let mut r = || rng.next_u32() as i32 >> rng.below(32);
            let x = [r(), r(), r(), r()];
            let x = if k % 7 == 0 { x.map(|_| i32::MIN) } else { x };
            oh.push(x[0]);
            ov.push(x[1]);
            th.push(x[2]);
            tv.push(x[3]);
        }
        let n = oh.len().next_multiple_of(16);
        for v in [&mut oh, &mut ov, &mut th, &mut tv] {
            v.resize(n, 0);
        }
        let f = |a: i32, b: i32, c: i32, d: i32| {
            let s = (a as i64 * b as i64).wrapping_add(c as i64 * d as i64);
            (s as f32).to_bits() as i32
        };
        let want: Vec<[i32; 3]> = (0..n)
            .map(|j| {
                let (a, b, c, d) = (oh[j], ov[j], th[j], tv[j]);
                [f(a, c, b, d), f(a, a, b, b), f(c, c, d, d)]
            })
            .collect();
        for level in CpuLevel::available() {
            let mut got = [vec![0; n], vec![0; n], vec![0; n]];
            let [g0, g1, g2] = &mut got;
            if !dots32_at(level, [&oh, &ov], [&th, &tv], [g0, g1, g2]) {
                continue;
            }
            for (j, w) in want.iter().enumerate() {
                let g = [got[0][j], got[1][j], got[2][j]];
                let x = (oh[j], ov[j], th[j], tv[j]);
                assert_eq!(g, *w, "{level}: column {j} of {x:?}");
            }
        }
    }

    /// i64 values whose f32 rounding is delicate: exact ties of the f32 grid at every
    /// magnitude (where an f64 intermediate would double-round), one off either side, the
    /// extremes, and random values of every bit length.
    pub(in super::super) fn rounding_cases() -> Vec<i64> {
        let mut v = vec![
            0,
            1,
            -1,
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            1 << 53,
            (1 << 53) + 1,
        ];
        for bits in 24..63 {
            let ulp = 1i64 << (bits - 23);
            // Ties between an even and an odd multiple of the ulp, in both orders.
            for m in [4, 5] {
                let base = (1i64 << bits) + ulp * m;
                for d in [0, 1, -1, 2, -2, 1 << 10, (1 << 11) - 1, 1 << 11] {
                    let tie = base + ulp / 2;
                    for x in [tie + d, tie - d, base + d, -(tie + d), -(base - d)] {
                        v.push(x);
                    }
                }
            }
        }
        let mut rng = Rng::new(9);
        for _ in 0..4000 {
            let x = ((rng.next_u32() as u64) << 32 | rng.next_u32() as u64) as i64;
            v.push(x >> rng.below(64));
        }
        v
    }
}
