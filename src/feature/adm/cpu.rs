//! The integer part of ADM: wavelet transform, decoupling, CSF weighting, the denominator and
//! contrast-masking sums. Everything here is exact integer arithmetic (plus the per-pixel angle
//! test in floating point) and ends in [`ScaleAccum`] values; the float finish is
//! [`super::finish`]. A GPU backend reproduces these stages and hands the same accumulators to
//! the same finish.
//!
//! Band order everywhere is h (high-pass vertical), v (high-pass horizontal), d (diagonal).

use super::tables::{div_lookup, COS_1DEG_SQ, DWT_HI, DWT_LO, DWT_LO_SUM};
use super::AdmParams;
use crate::simd::CpuLevel;

// SIMD row kernels (kernels.rs): each one does a prefix of its row (all of it for most) at
// `cpu`'s level, bit-exact with the scalar loops below, and returns the prefix's length (0
// without a SIMD level); those loops finish the row.
use super::kernels as arch;
use super::kernels::Sample;

/// Number of wavelet scales.
pub const NUM_SCALES: usize = 4;

/// Smallest frame side ADM accepts: below it the coarsest scale has fewer than 3 output rows
/// or columns and upstream's border tables index outside the picture.
pub const MIN_SIDE: usize = 33;

/// What the integer stages produce for one scale. All values are sums of per-row sums, each
/// row sum rounded and shifted right before it is added (shifts from [`ScaleShifts`]), so the
/// rows may be reduced in any order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleAccum {
    /// Denominator: cubed magnitudes of the reference coefficients, bands h, v, d.
    pub den: [u64; 3],
    /// DLM numerator: cubed masked CSF-weighted restored coefficients, bands h, v, d.
    pub num: [i64; 3],
    /// AIM numerator: the same over the additive-impairment coefficients (zero when skipped).
    pub aim: [i64; 3],
}

/// Band size `(w, h)` of `scale` for a `w` x `h` frame: each DWT level halves, rounding up.
pub fn band_size(w: usize, h: usize, scale: usize) -> (usize, usize) {
    let (mut bw, mut bh) = (w, h);
    for _ in 0..=scale {
        bw = bw.div_ceil(2);
        bh = bh.div_ceil(2);
    }
    (bw, bh)
}

/// Half-open range of a side of length `n` over which scores are summed: about 10% of the
/// band is dropped on each side (`(int)(n * 0.1 - 0.5)`).
pub fn score_window(n: usize) -> (usize, usize) {
    let b = (n as f64 * 0.1 - 0.5) as i64;
    let b = b.max(0) as usize;
    (b, n.saturating_sub(b))
}

/// Half-open range over which decoupling and CSF run: one filter tap wider than the score
/// window on each side, clamped to the band.
pub(crate) fn csf_window(n: usize) -> (usize, usize) {
    let b = (n as f64 * 0.1 - 0.5 - 1.0) as i64;
    let end = (n as i64 - b + 2).min(n as i64);
    (b.max(0) as usize, end.max(0) as usize)
}

/// `2^(s-1)`, the rounding constant of a right shift by `s` (0 for no shift).
fn half(s: u32) -> i64 {
    if s == 0 {
        0
    } else {
        1i64 << (s - 1)
    }
}

/// `ceil(log2(n))` as upstream computes it (double `log2`, then `ceil`).
fn ceil_log2(n: f64) -> f64 {
    n.log2().ceil()
}

/// Right shifts applied inside one scale; they depend only on the band size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleShifts {
    /// Denominator per-row shift.
    pub den_row: u32,
    /// Denominator per-pixel cube shift (scales 1-3; 0 at scale 0).
    pub den_cube: u32,
    /// Numerator per-pixel cube shift, bands h, v, d.
    pub cm_cube: [u32; 3],
    /// Numerator per-row shift.
    pub cm_row: u32,
}

/// The shifts of `scale` for band size `bw` x `bh`.
pub fn scale_shifts(scale: usize, bw: usize, bh: usize) -> ScaleShifts {
    let (l, r) = score_window(bw);
    let (t, b) = score_window(bh);
    let (ww, wh) = ((r - l) as f64, (b - t) as f64);
    if scale == 0 {
        let den_row = (ceil_log2(ww * wh) - 20.0).max(0.0) as u32;
        let lw = (bw as f64).log2();
        // Negative for bands narrower than 16 (excluded by MIN_SIDE); upstream casts to u32.
        let cube = |k: f64| (lw - k).ceil() as i64 as u32;
        ScaleShifts {
            den_row,
            den_cube: 0,
            cm_cube: [cube(4.0), cube(4.0), cube(3.0)],
            cm_row: ceil_log2(bh as f64) as u32,
        }
    } else {
        let c = ceil_log2(bw as f64) as u32;
        ScaleShifts {
            den_row: ceil_log2(wh) as u32,
            den_cube: ceil_log2(ww) as u32,
            cm_cube: [c; 3],
            cm_row: ceil_log2(bh as f64) as u32,
        }
    }
}

/// Source index of DWT tap `idx` (= 2i-1 .. 2i+2) on a side of length `n`: reflect around 0
/// at the start (-1 -> 1) but repeat the edge sample at the end (n -> n-1, n+1 -> n-2).
fn tap_index(idx: isize, n: usize) -> usize {
    if idx < 0 {
        (-idx) as usize
    } else if idx as usize >= n {
        2 * n - idx as usize - 1
    } else {
        idx as usize
    }
}

/// Pads `row[1..=n]` for the horizontal pass with the same border rule as [`tap_index`], so
/// output column `j` reads `row[2j..2j+4]`.
fn pad_row<T: Copy>(row: &mut [T], n: usize) {
    row[0] = row[2];
    row[n + 1] = row[n];
    row[n + 2] = row[n - 1];
}

/// Scale-0 coefficient bands of one picture (int16 like upstream) and its approximation band
/// widened to i32 for the next scale.
#[allow(clippy::too_many_arguments)]
fn dwt_scale0<T: Sample>(
    cpu: CpuLevel,
    src: &[T],
    stride: usize,
    w: usize,
    h: usize,
    bpc: u32,
    approx: &mut [i32],
    bands: [&mut [i16]; 3],
    tmp: &mut Vec<i16>,
) {
    let [band_h, band_v, band_d] = bands;
    let (bw, bh) = (w.div_ceil(2), h.div_ceil(2));
    let round = 1i32 << (bpc - 1);
    let centre = DWT_LO_SUM.wrapping_mul(round);
    let pad = w + 3;
    tmp.resize(2 * pad + 4 * (bw + 1), 0);
    let (lo, rest) = tmp.split_at_mut(pad);
    let (hi, rest) = rest.split_at_mut(pad);
    let (lo_even, rest) = rest.split_at_mut(bw + 1);
    let (lo_odd, rest) = rest.split_at_mut(bw + 1);
    let (hi_even, hi_odd) = rest.split_at_mut(bw + 1);
    for i in 0..bh {
        let row = |k: isize| {
            let y = tap_index(2 * i as isize - 1 + k, h);
            &src[y * stride..y * stride + w]
        };
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        // The rows the next output row adds, for the SIMD code to prefetch.
        let ahead = if i + 1 < bh {
            [row(4), row(5)]
        } else {
            [r2, r3]
        };
        // Vertical pass (int32, wrapping like upstream for 16-bit input).
        let n = T::dwt0_vert(
            cpu,
            [r0, r1, r2, r3],
            ahead,
            bpc,
            &mut lo[1..=w],
            &mut hi[1..=w],
        );
        let taps = r0[n..].iter().zip(&r1[n..]).zip(&r2[n..]).zip(&r3[n..]);
        let outs = lo[1 + n..=w].iter_mut().zip(hi[1 + n..=w].iter_mut());
        for ((((&a, &b), &c), &d), (l, hh)) in taps.zip(outs) {
            let s = [a.into(), b.into(), c.into(), d.into()];
            let mut vl = 0i32;
            let mut vh = 0i32;
            for k in 0..4 {
                vl = vl.wrapping_add(DWT_LO[k].wrapping_mul(s[k]));
                vh = vh.wrapping_add(DWT_HI[k].wrapping_mul(s[k]));
            }
            *l = (vl.wrapping_sub(centre).wrapping_add(round) >> bpc) as i16;
            *hh = (vh.wrapping_add(round) >> bpc) as i16;
        }
        pad_row(lo, w);
        pad_row(hi, w);
        let o = i * bw;
        let (approx, band_v) = (&mut approx[o..o + bw], &mut band_v[o..o + bw]);
        let (band_h, band_d) = (&mut band_h[o..o + bw], &mut band_d[o..o + bw]);
        let n = arch::dwt0_horiz(cpu, lo, hi, approx, band_v, band_h, band_d);
        // Split even/odd samples so output column j reads e[j], o[j], e[j+1], o[j+1].
        for m in n..=bw {
            lo_even[m] = lo[2 * m];
            lo_odd[m] = lo[2 * m + 1];
            hi_even[m] = hi[2 * m];
            hi_odd[m] = hi[2 * m + 1];
        }
        let dot = |f: &[i32; 4], x: [i16; 4]| {
            let mut acc = 0i32;
            for k in 0..4 {
                acc = acc.wrapping_add(f[k].wrapping_mul(x[k] as i32));
            }
            (acc.wrapping_add(32768) >> 16) as i16
        };
        horiz_outputs(
            n,
            [&lo_even[..=bw], &lo_odd[..=bw]],
            [&hi_even[..=bw], &hi_odd[..=bw]],
            (approx, band_v, band_h, band_d),
            dot,
            |x| x as i32,
        );
    }
}

/// Horizontal DWT outputs `n..` of one row from its even/odd-split low and high rows (output
/// `j` reads samples `j` and `j + 1` of each): approximation, v, h and d bands, in that order.
/// `to_approx` widens scale 0's 16-bit approximation to the band type used downstream.
#[inline(always)]
fn horiz_outputs<T: Copy, B>(
    n: usize,
    lo: [&[T]; 2],
    hi: [&[T]; 2],
    out: (&mut [i32], &mut [B], &mut [B], &mut [B]),
    dot: impl Fn(&[i32; 4], [T; 4]) -> B,
    to_approx: impl Fn(B) -> i32,
) {
    let (approx, band_v, band_h, band_d) = out;
    let bw = approx.len();
    for j in n..bw {
        let l = [lo[0][j], lo[1][j], lo[0][j + 1], lo[1][j + 1]];
        let hh = [hi[0][j], hi[1][j], hi[0][j + 1], hi[1][j + 1]];
        approx[j] = to_approx(dot(&DWT_LO, l));
        band_v[j] = dot(&DWT_HI, l);
        band_h[j] = dot(&DWT_LO, hh);
        band_d[j] = dot(&DWT_HI, hh);
    }
}

/// One DWT level of scales 1-3 on the previous approximation band (`w` x `h`, int32), int64
/// accumulation without mean removal.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn dwt_scale123(
    cpu: CpuLevel,
    src: &[i32],
    w: usize,
    h: usize,
    scale: usize,
    approx: &mut [i32],
    bands: [&mut [i32]; 3],
    tmp: &mut Vec<i32>,
) {
    let [band_h, band_v, band_d] = bands;
    let (rv, sv, rh, sh): (i64, u32, i64, u32) = match scale {
        1 => (0, 0, 16384, 15),
        2 => (32768, 16, 32768, 16),
        _ => (32768, 16, 16384, 15),
    };
    let (bw, bh) = (w.div_ceil(2), h.div_ceil(2));
    let pad = w + 3;
    tmp.resize(2 * pad + 4 * (bw + 1), 0);
    let (lo, rest) = tmp.split_at_mut(pad);
    let (hi, rest) = rest.split_at_mut(pad);
    let (lo_even, rest) = rest.split_at_mut(bw + 1);
    let (lo_odd, rest) = rest.split_at_mut(bw + 1);
    let (hi_even, hi_odd) = rest.split_at_mut(bw + 1);
    for i in 0..bh {
        let row = |k: isize| {
            let y = tap_index(2 * i as isize - 1 + k, h);
            &src[y * w..y * w + w]
        };
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        let n = arch::dwt123_vert(
            cpu,
            [r0, r1, r2, r3],
            if i + 1 < bh {
                [row(4), row(5)]
            } else {
                [r2, r3]
            },
            rv,
            sv,
            &mut lo[1..=w],
            &mut hi[1..=w],
        );
        let taps = r0[n..].iter().zip(&r1[n..]).zip(&r2[n..]).zip(&r3[n..]);
        let outs = lo[1 + n..=w].iter_mut().zip(hi[1 + n..=w].iter_mut());
        for ((((&a, &b), &c), &d), (l, hh)) in taps.zip(outs) {
            let s = [a as i64, b as i64, c as i64, d as i64];
            let mut vl = 0i64;
            let mut vh = 0i64;
            for k in 0..4 {
                vl += DWT_LO[k] as i64 * s[k];
                vh += DWT_HI[k] as i64 * s[k];
            }
            *l = ((vl + rv) >> sv) as i32;
            *hh = ((vh + rv) >> sv) as i32;
        }
        pad_row(lo, w);
        pad_row(hi, w);
        let o = i * bw;
        let (approx, band_v) = (&mut approx[o..o + bw], &mut band_v[o..o + bw]);
        let (band_h, band_d) = (&mut band_h[o..o + bw], &mut band_d[o..o + bw]);
        let n = arch::dwt123_horiz(cpu, lo, hi, rh, sh, approx, band_v, band_h, band_d);
        for m in n..=bw {
            lo_even[m] = lo[2 * m];
            lo_odd[m] = lo[2 * m + 1];
            hi_even[m] = hi[2 * m];
            hi_odd[m] = hi[2 * m + 1];
        }
        let dot = |f: &[i32; 4], x: [i32; 4]| {
            let mut acc = 0i64;
            for k in 0..4 {
                acc += f[k] as i64 * x[k] as i64;
            }
            ((acc + rh) >> sh) as i32
        };
        horiz_outputs(
            n,
            [&lo_even[..=bw], &lo_odd[..=bw]],
            [&hi_even[..=bw], &hi_odd[..=bw]],
            (approx, band_v, band_h, band_d),
            dot,
            |x| x,
        );
    }
}

/// Whether the distorted (h, v) orientation is within one degree of the reference one. The
/// int64 dot products go through `f32` (as upstream does) before the double comparison.
#[inline(always)]
fn within_one_degree(ot_dp: i64, o_mag_sq: i64, t_mag_sq: i64) -> bool {
    let dp = (ot_dp as f32) as f64 / 4096.0;
    let om = (o_mag_sq as f32) as f64 / 4096.0;
    let tm = (t_mag_sq as f32) as f64 / 4096.0;
    dp >= 0.0 && dp * dp >= COS_1DEG_SQ as f64 * om * tm
}

/// Enhancement-gain clamp of a restored coefficient whose gain `k` is positive: grow it by
/// `egl` but not beyond the distorted coefficient `t` (double arithmetic, truncated back).
#[inline(always)]
fn enhance(rst: i64, o_pos: bool, t: i64, egl: f64) -> f64 {
    let g = rst as f64 * egl;
    let t = t as f64;
    if o_pos {
        if g < t {
            g
        } else {
            t
        }
    } else if g > t {
        g
    } else {
        t
    }
}

/// Decoupling driver over the CSF window: per row, the angle test on the (h, v) pairs, then
/// `split(o, t, angle)` -> (restored, additive) for every band.
#[allow(clippy::type_complexity)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn decouple<T: Copy + Into<i64>>(
    o: [&[T]; 3],
    t: [&[T]; 3],
    bw: usize,
    bh: usize,
    r: [&mut [T]; 3],
    a: [&mut [T]; 3],
    simd: impl Fn([&[T]; 3], [&[T]; 3], [&mut [T]; 3], [&mut [T]; 3]) -> usize,
    split: impl Fn(T, T, bool) -> (T, T),
) {
    let (left, right) = csf_window(bw);
    let (top, bottom) = csf_window(bh);
    let mut angle = vec![false; right - left];
    let [r0, r1, r2] = r;
    let [a0, a1, a2] = a;
    for i in top..bottom {
        let rg = i * bw + left..i * bw + right;
        let orow = o.map(|p| &p[rg.clone()]);
        let trow = t.map(|p| &p[rg.clone()]);
        let mut rrow = [
            &mut r0[rg.clone()],
            &mut r1[rg.clone()],
            &mut r2[rg.clone()],
        ];
        let mut arow = [
            &mut a0[rg.clone()],
            &mut a1[rg.clone()],
            &mut a2[rg.clone()],
        ];
        let n = simd(
            orow,
            trow,
            rrow.each_mut().map(|x| &mut **x),
            arow.each_mut().map(|x| &mut **x),
        );
        let hv = orow[0][n..]
            .iter()
            .zip(&orow[1][n..])
            .zip(&trow[0][n..])
            .zip(&trow[1][n..]);
        for (f, (((&oh, &ov), &th), &tv)) in angle[n..].iter_mut().zip(hv) {
            let (oh, ov, th, tv) = (oh.into(), ov.into(), th.into(), tv.into());
            *f = within_one_degree(oh * th + ov * tv, oh * oh + ov * ov, th * th + tv * tv);
        }
        for b in 0..3 {
            let ins = orow[b][n..].iter().zip(&trow[b][n..]).zip(&angle[n..]);
            let outs = rrow[b][n..].iter_mut().zip(arow[b][n..].iter_mut());
            for (((&ob, &tb), &f), (rv, av)) in ins.zip(outs) {
                (*rv, *av) = split(ob, tb, f);
            }
        }
    }
}

/// Scale-0 decoupling into restored (`r`) and additive (`a`) bands.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn decouple_scale0(
    cpu: CpuLevel,
    o: [&[i16]; 3],
    t: [&[i16]; 3],
    bw: usize,
    bh: usize,
    egl: f64,
    r: [&mut [i16]; 3],
    a: [&mut [i16]; 3],
) {
    let lut = div_lookup();
    decouple(
        o,
        t,
        bw,
        bh,
        r,
        a,
        |o, t, r, a| arch::decouple0(cpu, o, t, egl, r, a),
        |o: i16, t: i16, angle| {
            let (ob, tb) = (o as i32, t as i32);
            let k = if ob == 0 {
                32768
            } else {
                let q = lut[ob.unsigned_abs() as usize] as i64 * tb as i64;
                let q = if ob < 0 { -q } else { q };
                ((q + 16384) >> 15) as i32
            }
            .clamp(0, 32768);
            let mut rst = ((k * ob + 16384) >> 15) as i16;
            if angle && k > 0 && ob != 0 {
                rst = enhance(rst as i64, ob > 0, tb as i64, egl) as i16;
            }
            (rst, (tb - rst as i32) as i16)
        },
    );
}

/// `|o|` reduced to at most 15 significant bits for the reciprocal table, with the shift used.
#[inline(always)]
fn reduce15(abs_o: u32) -> (usize, u32) {
    if abs_o < 32768 {
        (abs_o as usize, 0)
    } else {
        let k = 17 - abs_o.leading_zeros();
        (((abs_o + (1 << (k - 1))) >> k) as usize, k)
    }
}

/// Decoupling of scales 1-3 (int32 bands, int64 gains).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn decouple_scale123(
    cpu: CpuLevel,
    o: [&[i32]; 3],
    t: [&[i32]; 3],
    bw: usize,
    bh: usize,
    egl: f64,
    r: [&mut [i32]; 3],
    a: [&mut [i32]; 3],
) {
    let lut = div_lookup();
    decouple(
        o,
        t,
        bw,
        bh,
        r,
        a,
        |o, t, r, a| arch::decouple123(cpu, o, t, egl, r, a),
        |ob: i32, tb: i32, angle| {
            let k = if ob == 0 {
                32768
            } else {
                let (m, sh) = reduce15(ob.unsigned_abs());
                let q = lut[m] as i64 * tb as i64;
                let q = if ob < 0 { -q } else { q };
                (q + (1i64 << (14 + sh))) >> (15 + sh)
            }
            .clamp(0, 32768);
            let mut rst = ((k * ob as i64 + 16384) >> 15) as i32;
            if angle && k > 0 && ob != 0 {
                rst = enhance(rst as i64, ob > 0, tb as i64, egl) as i32;
            }
            (rst, tb.wrapping_sub(rst))
        },
    );
}

/// Scale-0 CSF: weighted coefficients (`dst`) and their masking contributions (`flt` ~ |dst|/30).
fn csf_scale0(
    cpu: CpuLevel,
    src: [&[i16]; 3],
    irf: [u16; 3],
    bw: usize,
    bh: usize,
    dst: [&mut [i16]; 3],
    flt: [&mut [i16]; 3],
) {
    // The diagonal weight is Q23 instead of Q21, hence the extra 2 bits of shift; its rounding
    // constant is 65535 upstream, not 65536.
    const SHIFT: [u32; 3] = [15, 15, 17];
    const ROUND: [i32; 3] = [16384, 16384, 65535];
    let (left, right) = csf_window(bw);
    let (top, bottom) = csf_window(bh);
    for (b, (d, f)) in dst.into_iter().zip(flt).enumerate() {
        let s = src[b];
        let w = irf[b] as i32;
        for i in top..bottom {
            let row = i * bw;
            let rg = row + left..row + right;
            let n = arch::csf0(
                cpu,
                &s[rg.clone()],
                w,
                ROUND[b],
                SHIFT[b],
                &mut d[rg.clone()],
                &mut f[rg],
            );
            for j in left + n..right {
                let v =
                    ((w.wrapping_mul(s[row + j] as i32)).wrapping_add(ROUND[b]) >> SHIFT[b]) as i16;
                d[row + j] = v;
                f[row + j] = ((4369 * (v as i32).abs() + 2048) >> 12) as i16;
            }
        }
    }
}

/// Upstream's rounding constant for the Q32 "divide by 30/15" steps is `1u << 31` stored in an
/// int32, i.e. it subtracts 2^31 instead of adding it. Kept for bit-exactness.
const WRAPPED_HALF: i64 = i32::MIN as i64;

/// CSF of scales 1-3 (Q32 weights).
fn csf_scale123(
    cpu: CpuLevel,
    src: [&[i32]; 3],
    irf: [u32; 3],
    bw: usize,
    bh: usize,
    dst: [&mut [i32]; 3],
    flt: [&mut [i32]; 3],
) {
    let (left, right) = csf_window(bw);
    let (top, bottom) = csf_window(bh);
    for (b, (d, f)) in dst.into_iter().zip(flt).enumerate() {
        let s = src[b];
        let w = irf[b] as i64;
        for i in top..bottom {
            let row = i * bw;
            let rg = row + left..row + right;
            let n = arch::csf123(cpu, &s[rg.clone()], irf[b], &mut d[rg.clone()], &mut f[rg]);
            for j in left + n..right {
                let v = ((w.wrapping_mul(s[row + j] as i64) + (1 << 27)) >> 28) as i32;
                d[row + j] = v;
                f[row + j] = ((143165577 * (v as i64).abs() + WRAPPED_HALF) >> 32) as i32;
            }
        }
    }
}

/// Scale-0 denominator: per row, the sum of `|c|^3` of the reference bands, rounded and shifted.
#[inline(never)]
fn den_scale0(cpu: CpuLevel, o: [&[i16]; 3], bw: usize, bh: usize, shift: u32) -> [u64; 3] {
    let (left, right) = score_window(bw);
    let (top, bottom) = score_window(bh);
    let add = half(shift) as u64;
    let mut acc = [0u64; 3];
    for (b, band) in o.iter().enumerate() {
        for i in top..bottom {
            let row = &band[i * bw + left..i * bw + right];
            let (simd, n) = arch::den0(cpu, row);
            let inner: u64 = simd
                + row[n..]
                    .iter()
                    .map(|&c| {
                        let m = (c as i32).unsigned_abs() as u64;
                        m * m * m
                    })
                    .sum::<u64>();
            acc[b] += (inner + add) >> shift;
        }
    }
    acc
}

/// Denominator of scales 1-3: the square is rounded with the full divisor `1 << ssq` (upstream).
#[inline(never)]
fn den_scale123(
    cpu: CpuLevel,
    o: [&[i32]; 3],
    scale: usize,
    bw: usize,
    bh: usize,
    sh: &ScaleShifts,
) -> [u64; 3] {
    let ssq = [31u32, 30, 31][scale - 1];
    let (left, right) = score_window(bw);
    let (top, bottom) = score_window(bh);
    let add_cube = half(sh.den_cube) as u64;
    let add_row = half(sh.den_row) as u64;
    let mut acc = [0u64; 3];
    for (b, band) in o.iter().enumerate() {
        for i in top..bottom {
            let row = &band[i * bw + left..i * bw + right];
            let (simd, n) = arch::den123(cpu, row, ssq, add_cube, sh.den_cube);
            let inner: u64 = simd
                + row[n..]
                    .iter()
                    .map(|&c| {
                        let m = c.unsigned_abs() as u64;
                        ((((m * m + (1u64 << ssq)) >> ssq) * m) + add_cube) >> sh.den_cube
                    })
                    .sum::<u64>();
            acc[b] += (inner + add_row) >> sh.den_row;
        }
    }
    acc
}

/// Row `y` of each of three bands of width `bw`.
fn rows<T>(v: [&[T]; 3], y: usize, bw: usize) -> [&[T]; 3] {
    v.map(|p| &p[y * bw..y * bw + bw])
}

/// Contrast masking over the score window. The masking threshold of a pixel is, summed over
/// the three bands, its 8 neighbours in `flt` plus `centre(dst)` at the pixel itself
/// (neighbours outside the band: -1 -> 1 at the start, n -> n-1 at the end). `pix` turns the
/// source coefficient of band `b` and the threshold into the value to accumulate.
///
/// `simd_cols(fu, fm, fd, dm, col, cen)` and `simd_pix(b, src, thr)` are the SIMD row kernels
/// of the column sums and of the pixel sum (a prefix and its length, as everywhere).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[inline(always)]
fn contrast_mask<T: Copy + Into<i32>>(
    cpu: CpuLevel,
    src: [&[T]; 3],
    dst: [&[T]; 3],
    flt: [&[T]; 3],
    bw: usize,
    bh: usize,
    row_shift: u32,
    simd_cols: impl Fn([&[T]; 3], [&[T]; 3], [&[T]; 3], [&[T]; 3], &mut [i32], &mut [i32]) -> usize,
    simd_pix: impl Fn(usize, &[T], &[i32]) -> (i64, usize),
    centre: impl Fn(T) -> i32,
    pix: impl Fn(usize, T, i32) -> i64,
) -> [i64; 3] {
    let (left, right) = score_window(bw);
    let (top, bottom) = score_window(bh);
    let add = half(row_shift);
    let mut acc = [0i64; 3];
    // Per column, summed over bands: the 3 vertical flt neighbours (`col`) and the centre
    // term minus the middle flt value (`cen`); integer sums, so regrouping is exact.
    let mut col = vec![0i32; bw];
    let mut cen = vec![0i32; bw];
    let mut thr = vec![0i32; bw];
    for i in top..bottom {
        let up = if i == 0 { 1 } else { i - 1 };
        let dn = if i + 1 == bh { bh - 1 } else { i + 1 };
        let (fu, fm, fd) = (rows(flt, up, bw), rows(flt, i, bw), rows(flt, dn, bw));
        let (dm, sm) = (rows(dst, i, bw), rows(src, i, bw));
        let n = simd_cols(fu, fm, fd, dm, &mut col, &mut cen);
        col[n..].fill(0);
        cen[n..].fill(0);
        for b in 0..3 {
            let ins = fu[b][n..]
                .iter()
                .zip(&fm[b][n..])
                .zip(&fd[b][n..])
                .zip(&dm[b][n..]);
            let outs = col[n..].iter_mut().zip(cen[n..].iter_mut());
            for ((c, e), (((&u, &m), &d), &x)) in outs.zip(ins) {
                let m: i32 = m.into();
                *c = c
                    .wrapping_add(u.into())
                    .wrapping_add(m)
                    .wrapping_add(d.into());
                *e = e.wrapping_add(centre(x)).wrapping_sub(m);
            }
        }
        // Threshold = 3x3 box of `col` minus the centre flt plus the centre term; outside the
        // band column -1 reads column 1 and column bw reads column bw-1.
        let box3 = |j: usize, jl: usize, jr: usize| {
            col[jl]
                .wrapping_add(col[j])
                .wrapping_add(col[jr])
                .wrapping_add(cen[j])
        };
        let (j0, j1) = (left.max(1), right.min(bw - 1));
        if left == 0 {
            thr[0] = box3(0, 1, 1);
        }
        if right == bw {
            thr[bw - 1] = box3(bw - 1, bw - 2, bw - 1);
        }
        if j1 > j0 {
            let n = arch::cm_thr(cpu, &col[j0 - 1..j1 + 1], &cen[j0..j1], &mut thr[j0..j1]);
            let j0 = j0 + n;
            let ins = col[j0 - 1..j1 - 1]
                .iter()
                .zip(&col[j0..j1])
                .zip(&col[j0 + 1..j1 + 1])
                .zip(&cen[j0..j1]);
            for (t, (((&a, &b), &c), &e)) in thr[j0..j1].iter_mut().zip(ins) {
                *t = a.wrapping_add(b).wrapping_add(c).wrapping_add(e);
            }
        }
        for b in 0..3 {
            let (s, t) = (&sm[b][left..right], &thr[left..right]);
            let (mut inner, n) = simd_pix(b, s, t);
            for (&x, &t) in s[n..].iter().zip(&t[n..]) {
                inner += pix(b, x, t);
            }
            acc[b] += (inner + add) >> row_shift;
        }
    }
    acc
}

/// Scale-0 contrast masking: `src` weighted by the integer CSF factors (not shifted), minus the
/// threshold in the same Q format, then cubed with per-band shifts.
#[allow(clippy::too_many_arguments)]
fn cm_scale0(
    cpu: CpuLevel,
    src: [&[i16]; 3],
    dst: [&[i16]; 3],
    flt: [&[i16]; 3],
    irf: [u16; 3],
    bw: usize,
    bh: usize,
    sh: &ScaleShifts,
) -> [i64; 3] {
    const SUB: [u32; 3] = [10, 10, 12];
    const SQ: [u32; 3] = [29, 29, 30];
    let add_cube = sh.cm_cube.map(half);
    let cube = sh.cm_cube;
    contrast_mask(
        cpu,
        src,
        dst,
        flt,
        bw,
        bh,
        sh.cm_row,
        |fu, fm, fd, dm, col, cen| arch::cm_cols0(cpu, fu, fm, fd, dm, col, cen),
        |b, s, thr| {
            let k = [irf[b] as i32, SUB[b] as i32, SQ[b] as i32];
            arch::cm_pix0(cpu, s, thr, k, add_cube[b], cube[b])
        },
        // ~|c|/15; the int16 cast wraps for |c| >= 15360 as upstream's does.
        |c: i16| ((8738 * (c as i32).abs() + 2048) >> 12) as i16 as i32,
        |b, s: i16, thr| {
            let x = (s as i32).wrapping_mul(irf[b] as i32);
            let x = x
                .wrapping_abs()
                .wrapping_sub(thr.wrapping_shl(SUB[b]))
                .max(0);
            let xsq = ((x as i64 * x as i64 + (1i64 << (SQ[b] - 1))) >> SQ[b]) as i32;
            (xsq as i64 * x as i64 + add_cube[b]) >> cube[b]
        },
    )
}

/// Contrast masking of scales 1-3.
#[allow(clippy::too_many_arguments)]
fn cm_scale123(
    cpu: CpuLevel,
    src: [&[i32]; 3],
    dst: [&[i32]; 3],
    flt: [&[i32]; 3],
    irf: [u32; 3],
    bw: usize,
    bh: usize,
    sh: &ScaleShifts,
) -> [i64; 3] {
    let cube = sh.cm_cube[0];
    let add_cube = half(cube);
    contrast_mask(
        cpu,
        src,
        dst,
        flt,
        bw,
        bh,
        sh.cm_row,
        |fu, fm, fd, dm, col, cen| arch::cm_cols123(cpu, fu, fm, fd, dm, col, cen),
        |b, s, thr| arch::cm_pix123(cpu, s, thr, irf[b], add_cube, cube),
        |c: i32| ((286331153 * (c as i64).abs() + WRAPPED_HALF) >> 32) as i32,
        |b, s: i32, thr| {
            let x = (((s as i64).wrapping_mul(irf[b] as i64) + (1 << 27)) >> 28) as i32;
            let x = x.wrapping_abs().wrapping_sub(thr).max(0);
            let xsq = ((x as i64 * x as i64 + (1 << 29)) >> 30) as i32;
            (xsq as i64 * x as i64 + add_cube) >> cube
        },
    )
}

/// Reusable per-frame buffers (kept between frames to avoid reallocating megabytes).
#[derive(Default)]
pub struct Scratch {
    ref0: [Vec<i16>; 3],
    dis0: [Vec<i16>; 3],
    r0: [Vec<i16>; 3],
    a0: [Vec<i16>; 3],
    dst0: [Vec<i16>; 3],
    flt0: [Vec<i16>; 3],
    ref1: [Vec<i32>; 3],
    dis1: [Vec<i32>; 3],
    r1: [Vec<i32>; 3],
    a1: [Vec<i32>; 3],
    dst1: [Vec<i32>; 3],
    flt1: [Vec<i32>; 3],
    ref_approx: [Vec<i32>; 2],
    dis_approx: [Vec<i32>; 2],
    tmp16: Vec<i16>,
    tmp32: Vec<i32>,
}

/// The first `n` elements of each buffer. Buffers only grow: scales 1-3 share theirs, and
/// shrinking them would re-zero megabytes at the next frame's scale 1.
fn sized<T: Copy + Default>(v: &mut [Vec<T>; 3], n: usize) -> [&mut [T]; 3] {
    let [a, b, c] = v;
    for x in [&mut *a, &mut *b, &mut *c] {
        if x.len() < n {
            x.resize(n, T::default());
        }
    }
    [&mut a[..n], &mut b[..n], &mut c[..n]]
}

fn view<T>(v: &[Vec<T>; 3], n: usize) -> [&[T]; 3] {
    [&v[0][..n], &v[1][..n], &v[2][..n]]
}

/// Luma samples of one picture as the integer stages read them.
#[derive(Clone, Copy)]
pub enum Luma<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
}

/// Runs the integer stages of all scales on the luma planes `ref_` and `dis` (`w` x `h`,
/// `stride` samples per row, `bpc` bits) and returns each scale's accumulators. `cpu` picks
/// the SIMD kernels; every level gives the same result.
#[allow(clippy::too_many_arguments)]
pub fn accumulate(
    cpu: CpuLevel,
    ref_: Luma<'_>,
    dis: Luma<'_>,
    ref_stride: usize,
    dis_stride: usize,
    w: usize,
    h: usize,
    bpc: u32,
    p: &AdmParams,
    s: &mut Scratch,
) -> [ScaleAccum; NUM_SCALES] {
    let mut out = [ScaleAccum::default(); NUM_SCALES];

    // Scale 0.
    let (bw, bh) = band_size(w, h, 0);
    let n = bw * bh;
    for v in s.ref_approx.iter_mut().chain(s.dis_approx.iter_mut()) {
        v.resize(n, 0);
    }
    for (pic, stride, approx, bands) in [
        (ref_, ref_stride, &mut s.ref_approx[0], &mut s.ref0),
        (dis, dis_stride, &mut s.dis_approx[0], &mut s.dis0),
    ] {
        let bands = sized(bands, n);
        match pic {
            Luma::U8(px) => dwt_scale0(cpu, px, stride, w, h, bpc, approx, bands, &mut s.tmp16),
            Luma::U16(px) => dwt_scale0(cpu, px, stride, w, h, bpc, approx, bands, &mut s.tmp16),
        }
    }
    if !p.skip_scale0 {
        let sh = scale_shifts(0, bw, bh);
        let (o, t) = (view(&s.ref0, n), view(&s.dis0, n));
        decouple_scale0(
            cpu,
            o,
            t,
            bw,
            bh,
            p.egl,
            sized(&mut s.r0, n),
            sized(&mut s.a0, n),
        );
        out[0].den = den_scale0(cpu, o, bw, bh, sh.den_row);
        let (r, a) = (view(&s.r0, n), view(&s.a0, n));
        csf_scale0(
            cpu,
            a,
            p.irf0,
            bw,
            bh,
            sized(&mut s.dst0, n),
            sized(&mut s.flt0, n),
        );
        let (d, f) = (view(&s.dst0, n), view(&s.flt0, n));
        out[0].num = cm_scale0(cpu, r, d, f, p.irf0, bw, bh, &sh);
        if !p.skip_aim {
            // Roles swap: CSF of the restored bands masks the additive ones.
            csf_scale0(
                cpu,
                r,
                p.irf0,
                bw,
                bh,
                sized(&mut s.dst0, n),
                sized(&mut s.flt0, n),
            );
            let (d, f) = (view(&s.dst0, n), view(&s.flt0, n));
            out[0].aim = cm_scale0(cpu, a, d, f, p.irf0, bw, bh, &sh);
        }
    }

    // Scales 1-3, each on the previous approximation band.
    let (mut pw, mut ph) = (bw, bh);
    for (scale, acc) in out.iter_mut().enumerate().skip(1) {
        let (bw, bh) = band_size(w, h, scale);
        let n = bw * bh;
        // Approximation bands ping-pong: scale s reads slot (s+1)%2 and writes the other.
        let cur = (scale + 1) % 2;
        for (approx, bands) in [
            (&mut s.ref_approx, &mut s.ref1),
            (&mut s.dis_approx, &mut s.dis1),
        ] {
            let [a0, a1] = approx;
            let (src, dst) = if cur == 0 { (a0, a1) } else { (a1, a0) };
            dst.resize(n.max(dst.len()), 0);
            dwt_scale123(
                cpu,
                &src[..pw * ph],
                pw,
                ph,
                scale,
                &mut dst[..n],
                sized(bands, n),
                &mut s.tmp32,
            );
        }
        let irf = p.irf123[scale - 1];
        let sh = scale_shifts(scale, bw, bh);
        let (o, t) = (view(&s.ref1, n), view(&s.dis1, n));
        decouple_scale123(
            cpu,
            o,
            t,
            bw,
            bh,
            p.egl,
            sized(&mut s.r1, n),
            sized(&mut s.a1, n),
        );
        acc.den = den_scale123(cpu, o, scale, bw, bh, &sh);
        let (r, a) = (view(&s.r1, n), view(&s.a1, n));
        csf_scale123(
            cpu,
            a,
            irf,
            bw,
            bh,
            sized(&mut s.dst1, n),
            sized(&mut s.flt1, n),
        );
        let (d, f) = (view(&s.dst1, n), view(&s.flt1, n));
        acc.num = cm_scale123(cpu, r, d, f, irf, bw, bh, &sh);
        if !p.skip_aim {
            csf_scale123(
                cpu,
                r,
                irf,
                bw,
                bh,
                sized(&mut s.dst1, n),
                sized(&mut s.flt1, n),
            );
            let (d, f) = (view(&s.dst1, n), view(&s.flt1, n));
            acc.aim = cm_scale123(cpu, a, d, f, irf, bw, bh, &sh);
        }
        (pw, ph) = (bw, bh);
    }
    out
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;
