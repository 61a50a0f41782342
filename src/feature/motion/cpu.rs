//! CPU reference of integer motion: the SAD of the 5-tap blurred difference of two luma
//! planes, and the C helpers the host finishing uses (`MIN`, the blend).

use crate::error::{Error, Result};
use crate::feature::c_min;
use crate::picture::{PictureData, PlaneRef};
use crate::simd::CpuLevel;

/// Q16 blur taps (the same kernel as VIF scale 2).
pub const FILTER: [i64; 5] = [3571, 16004, 26386, 16004, 3571];

/// Reflect-101 index into `0..n` for `idx` at most 2 outside it (`n >= 3`).
#[inline]
fn mirror(idx: isize, n: isize) -> usize {
    let r = if idx < 0 {
        -idx
    } else if idx >= n {
        2 * n - idx - 2
    } else {
        idx
    };
    r as usize
}

/// SAD of the blurred difference `prev - cur` over a `w`x`h` plane (strides in samples).
/// The vertical pass rounds by `1 << (shift - 1)` and shifts by `shift` (8 for 8-bit input, `bpc`
/// otherwise); the horizontal pass is Q16. Each row's absolute values are summed in a wrapping
/// `u32`, rows in a `u64`.
#[allow(clippy::too_many_arguments)]
pub(super) fn blurred_diff_sad<T: Copy + Into<i64>>(
    prev: &[T],
    prev_stride: usize,
    cur: &[T],
    cur_stride: usize,
    w: usize,
    h: usize,
    shift: u32,
) -> u64 {
    let y_round = 1i64 << (shift - 1);
    // Row of vertical results with two mirrored samples on each side.
    let mut ext = vec![0i32; w + 4];
    let mut sad = 0u64;
    for i in 0..h {
        let rows: [usize; 5] =
            std::array::from_fn(|k| mirror(i as isize - 2 + k as isize, h as isize));
        let p: [&[T]; 5] = std::array::from_fn(|k| &prev[rows[k] * prev_stride..][..w]);
        let c: [&[T]; 5] = std::array::from_fn(|k| &cur[rows[k] * cur_stride..][..w]);
        let mut any_nonzero = false;
        for (j, e) in ext[2..w + 2].iter_mut().enumerate() {
            let mut acc = 0i64;
            for k in 0..5 {
                acc += FILTER[k] * (p[k][j].into() - c[k][j].into());
            }
            let y = ((acc + y_round) >> shift) as i32;
            any_nonzero |= y != 0;
            *e = y;
        }
        // An all-zero row contributes nothing.
        if !any_nonzero {
            continue;
        }
        ext[1] = ext[3];
        ext[0] = ext[4];
        ext[w + 2] = ext[w];
        ext[w + 3] = ext[w - 1];
        let mut row_sad = 0u32;
        for win in ext.windows(5) {
            let acc: i64 = win
                .iter()
                .zip(FILTER.iter())
                .map(|(&y, &c)| c * y as i64)
                .sum();
            let v = ((acc + (1 << 15)) >> 16) as i32;
            row_sad = row_sad.wrapping_add(v.unsigned_abs());
        }
        sad += u64::from(row_sad);
    }
    sad
}

/// One vertical output: the reference's rounded Q16 sum of the five differences `d` (rows
/// `i-2..=i+2`). SIMD kernels use it for their tails.
#[inline]
pub(super) fn vertical_one(d: [i32; 5], shift: u32) -> i32 {
    let acc: i64 = (0..5).map(|k| FILTER[k] * i64::from(d[k])).sum();
    ((acc + (1i64 << (shift - 1))) >> shift) as i32
}

/// One horizontal output over the window `win[..5]` of vertical results, as the reference
/// rounds it. SIMD kernels use it for their tails.
#[inline]
pub(super) fn horizontal_one(win: &[i32]) -> i32 {
    let acc: i64 = (0..5).map(|k| FILTER[k] * i64::from(win[k])).sum();
    ((acc + (1 << 15)) >> 16) as i32
}

/// The row kernels of a SIMD level (implemented in `x86.rs` / `aarch64.rs` on a token type
/// that exists only once the level was checked). Each must equal the reference exactly on
/// the inputs [`sad_rows`] gives it.
pub(super) trait RowKernels: Copy {
    /// `d[j] = p[j] - c[j]` over `d.len()` samples.
    fn diff_u8(self, p: &[u8], c: &[u8], d: &mut [i32]);
    /// `d[j] = p[j] - c[j]` over `d.len()` samples.
    fn diff_u16(self, p: &[u16], c: &[u16], d: &mut [i32]);
    /// `out[j] = vertical_one([rows[0][j], .., rows[4][j]], shift)` over `out.len()` samples;
    /// returns the bitwise OR of every `|out[j]|`.
    fn vertical(self, rows: [&[i32]; 5], shift: u32, out: &mut [i32]) -> u32;
    /// The wrapping sum of `|horizontal_one(&ext[j..])|` for `j` in `0..ext.len() - 4`.
    fn horizontal(self, ext: &[i32]) -> u32;
}

/// Sample types of the SIMD driver.
pub(super) trait Sample: Copy + Into<i64> {
    fn diff<K: RowKernels>(k: K, p: &[Self], c: &[Self], d: &mut [i32]);
}

impl Sample for u8 {
    #[inline]
    fn diff<K: RowKernels>(k: K, p: &[u8], c: &[u8], d: &mut [i32]) {
        k.diff_u8(p, c, d);
    }
}

impl Sample for u16 {
    #[inline]
    fn diff<K: RowKernels>(k: K, p: &[u16], c: &[u16], d: &mut [i32]) {
        k.diff_u16(p, c, d);
    }
}

/// [`blurred_diff_sad`] with the row work done by the kernels `k`, or `None` when a vertical
/// result leaves the range the kernels are exact on (see below): the caller then runs the
/// reference.
///
/// Exactness of 32-bit lanes. With `|d| <= D` the reference's sum `S = Σ F[k]·d[k]` reaches
/// `65536·D`, which needs 33 bits for 16-bit input (and the horizontal sum, over vertical
/// results up to 65535 in magnitude at every depth, always does). The taps are symmetric and
/// all but the outer one even, so `S = A + 2T` with `A = 3571·(d0 + d4)` and
/// `T = 8002·(d1 + d3) + 13193·d2`. With `A = 2a + b` (`a = A >> 1`, `b` in {0, 1}):
/// `(S + 2^(s-1)) >> s = (2X + b) >> s = X >> (s-1)` for `X = a + T + 2^(s-2)`, because `2X`
/// leaves the `s` low bits room for `b`. `|X| <= 32768·D + 2^(s-2) < 2^31` for `D <= 65535`
/// and `s <= 16`, and every partial term is smaller. The vertical pass has `|d| <= 65535` for
/// any 8- or 16-bit sample; it gives `|y| <= 65536 - 65536 >> bpc` when samples are below
/// `2^bpc`, so the horizontal pass (`D = 65535`, `s = 16`) is exact; a larger `|y|` (a sample
/// above its bit depth) makes this return `None`.
#[allow(clippy::too_many_arguments)]
pub(super) fn sad_rows<K: RowKernels, T: Sample>(
    k: K,
    prev: &[T],
    prev_stride: usize,
    cur: &[T],
    cur_stride: usize,
    w: usize,
    h: usize,
    shift: u32,
) -> Option<u64> {
    // Differences of the five source rows around the current one, row r in slot r % 5.
    let mut ring = vec![0i32; 5 * w];
    let mut ext = vec![0i32; w + 4];
    let mut next = 0;
    let mut sad = 0u64;
    for i in 0..h {
        while next < h && next <= i + 2 {
            let d = &mut ring[(next % 5) * w..][..w];
            T::diff(
                k,
                &prev[next * prev_stride..][..w],
                &cur[next * cur_stride..][..w],
                d,
            );
            next += 1;
        }
        let rows: [&[i32]; 5] = std::array::from_fn(|t| {
            let r = mirror(i as isize - 2 + t as isize, h as isize);
            &ring[(r % 5) * w..][..w]
        });
        let mag = k.vertical(rows, shift, &mut ext[2..w + 2]);
        // An all-zero row contributes nothing.
        if mag == 0 {
            continue;
        }
        if mag > 0xffff {
            return None;
        }
        ext[1] = ext[3];
        ext[0] = ext[4];
        ext[w + 2] = ext[w];
        ext[w + 3] = ext[w - 1];
        sad += u64::from(k.horizontal(&ext));
    }
    Some(sad)
}

/// Integer motion SAD between the luma planes of two consecutive reference pictures (`prev`
/// is the earlier one), with the SIMD kernels of `cpu`. Both must share size and bit depth;
/// luma must be at least 3x3.
pub fn motion_sad(prev: &PictureData, cur: &PictureData, cpu: CpuLevel) -> Result<u64> {
    let (w, h) = (cur.w[0], cur.h[0]);
    if prev.w[0] != w || prev.h[0] != h || prev.bpc != cur.bpc {
        return Err(Error::inval(
            "motion: previous reference differs in size or bit depth",
        ));
    }
    if w < 3 || h < 3 {
        return Err(Error::inval("motion: luma must be at least 3x3"));
    }
    let (ps, cs) = (prev.stride[0], cur.stride[0]);
    Ok(match (prev.plane(0), cur.plane(0)) {
        (PlaneRef::U8(p), PlaneRef::U8(c)) => dispatch(cpu, p, ps, c, cs, w, h, 8),
        (PlaneRef::U16(p), PlaneRef::U16(c)) => dispatch(cpu, p, ps, c, cs, w, h, cur.bpc),
        _ => return Err(Error::inval("motion: mixed sample storage")),
    })
}

/// [`blurred_diff_sad`] at `cpu`'s best kernels.
#[allow(clippy::too_many_arguments, unused_variables)]
fn dispatch<T: Sample>(
    cpu: CpuLevel,
    prev: &[T],
    prev_stride: usize,
    cur: &[T],
    cur_stride: usize,
    w: usize,
    h: usize,
    shift: u32,
) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(sad) =
        super::x86::blurred_diff_sad(cpu, prev, prev_stride, cur, cur_stride, w, h, shift)
    {
        return sad;
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(sad) =
        super::aarch64::blurred_diff_sad(cpu, prev, prev_stride, cur, cur_stride, w, h, shift)
    {
        return sad;
    }
    blurred_diff_sad(prev, prev_stride, cur, cur_stride, w, h, shift)
}

/// `x·f + (1−f)·min(offset, x)`: blends a motion score above `offset` towards it.
pub(crate) fn blend(x: f64, factor: f64, offset: f64) -> f64 {
    x * factor + (1.0 - factor) * c_min(offset, x)
}

/// Checkasm-style checks of one level's row kernels against the scalar formulas, shared by
/// the tests of `x86.rs` and `aarch64.rs`.
#[cfg(test)]
pub(super) fn check_row_kernels<K: RowKernels>(k: K, level: &str) {
    use crate::testutil::checkasm::{plane, sizes, Rng, CONTENTS};
    let mut rng = Rng::new(0x6d6f74);
    for (w, h) in sizes(&mut rng, 20) {
        let rows = h.clamp(5, 12);
        for content in CONTENTS {
            for bpc in [8u32, 9, 10, 12, 16] {
                let what = format!("{level} {w}x{h} {content:?} {bpc}-bit");
                let p = plane(&mut rng, w, rows, w, bpc, content);
                let c = plane(&mut rng, w, rows, w, bpc, content);
                let mut d = vec![0i32; w * rows];
                let mut want = vec![0i32; w];
                for r in 0..rows {
                    let (pr, cr) = (&p[r * w..][..w], &c[r * w..][..w]);
                    for (j, o) in want.iter_mut().enumerate() {
                        *o = i32::from(pr[j]) - i32::from(cr[j]);
                    }
                    let got = &mut d[r * w..][..w];
                    if bpc == 8 {
                        let narrow = |v: &[u16]| v.iter().map(|&x| x as u8).collect::<Vec<_>>();
                        k.diff_u8(&narrow(pr), &narrow(cr), got);
                    } else {
                        k.diff_u16(pr, cr, got);
                    }
                    assert_eq!(got, &want[..], "diff {what} row {r}");
                }
                let shift = bpc;
                let mut ext = vec![0i32; w + 4];
                for r in 0..rows - 4 {
                    let src: [&[i32]; 5] = std::array::from_fn(|t| &d[(r + t) * w..][..w]);
                    let mut mag = 0u32;
                    for (j, o) in want.iter_mut().enumerate() {
                        *o = vertical_one(src.map(|s| s[j]), shift);
                        mag |= o.unsigned_abs();
                    }
                    let got_mag = k.vertical(src, shift, &mut ext[2..w + 2]);
                    assert_eq!(&ext[2..w + 2], &want[..], "vertical {what} row {r}");
                    assert_eq!(got_mag, mag, "vertical magnitude {what} row {r}");
                    // Edge samples: random values of the full range the driver allows.
                    for e in [0, 1, w + 2, w + 3] {
                        ext[e] = rng.range(0, 131070) as i32 - 65535;
                    }
                    let mut sad = 0u32;
                    for j in 0..w {
                        sad = sad.wrapping_add(horizontal_one(&ext[j..]).unsigned_abs());
                    }
                    assert_eq!(k.horizontal(&ext), sad, "horizontal {what} row {r}");
                }
            }
        }
    }
    // The horizontal extremes: runs of ±65535 (sums of 33 bits) and alternating signs.
    for w in [1usize, 7, 8, 9, 16, 17, 33, 64, 100] {
        for pattern in 0..4 {
            let ext: Vec<i32> = (0..w + 4)
                .map(|j| match pattern {
                    0 => 65535,
                    1 => -65535,
                    2 => [65535, -65535][j % 2],
                    _ => [65535, 65535, 65535, -65535, -65535][j % 5],
                })
                .collect();
            let mut sad = 0u32;
            for j in 0..w {
                sad = sad.wrapping_add(horizontal_one(&ext[j..]).unsigned_abs());
            }
            assert_eq!(
                k.horizontal(&ext),
                sad,
                "horizontal {level} w {w} pattern {pattern}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::checkasm::{plane, sizes, Rng, CONTENTS};

    fn narrow(v: &[u16]) -> Vec<u8> {
        v.iter().map(|&x| x as u8).collect()
    }

    /// The SIMD kernels of `cpu` alone (no fallback to the reference).
    #[allow(clippy::too_many_arguments, unused_variables)]
    fn simd_only<T: Sample>(
        cpu: CpuLevel,
        p: &[T],
        ps: usize,
        c: &[T],
        cs: usize,
        w: usize,
        h: usize,
        shift: u32,
    ) -> Option<u64> {
        #[cfg(target_arch = "x86_64")]
        return super::super::x86::blurred_diff_sad(cpu, p, ps, c, cs, w, h, shift);
        #[cfg(target_arch = "aarch64")]
        return super::super::aarch64::blurred_diff_sad(cpu, p, ps, c, cs, w, h, shift);
        #[allow(unreachable_code)]
        None
    }

    /// The whole SAD at `cpu` against the reference on one pair of planes; with `in_range`
    /// (samples below `2^bpc`) the kernels must take it themselves.
    #[allow(clippy::too_many_arguments)]
    fn check_sad(
        cpu: CpuLevel,
        p: &[u16],
        ps: usize,
        c: &[u16],
        cs: usize,
        w: usize,
        h: usize,
        bpc: u32,
        in_range: bool,
        what: &str,
    ) {
        let (want, got, simd) = if bpc == 8 {
            let (p, c) = (narrow(p), narrow(c));
            (
                blurred_diff_sad(&p, ps, &c, cs, w, h, 8),
                dispatch(cpu, &p[..], ps, &c[..], cs, w, h, 8),
                simd_only(cpu, &p[..], ps, &c[..], cs, w, h, 8),
            )
        } else {
            (
                blurred_diff_sad(p, ps, c, cs, w, h, bpc),
                dispatch(cpu, p, ps, c, cs, w, h, bpc),
                simd_only(cpu, p, ps, c, cs, w, h, bpc),
            )
        };
        assert_eq!(got, want, "motion sad {} {what}", cpu.name());
        if in_range {
            assert_eq!(simd, Some(want), "motion sad kernels {} {what}", cpu.name());
        }
    }

    #[test]
    fn checkasm_motion_sad() {
        let mut rng = Rng::new(0x5ad);
        for cpu in CpuLevel::available().into_iter().skip(1) {
            for (w, h) in sizes(&mut rng, 24) {
                let (w, h) = (w.max(3), h.max(3));
                for content in CONTENTS {
                    for bpc in [8u32, 9, 10, 12, 16] {
                        let (ps, cs) = (w + rng.below(40), w + rng.below(3) * 16);
                        let p = plane(&mut rng, w, h, ps, bpc, content);
                        let c = plane(&mut rng, w, h, cs, bpc, content);
                        let what = format!("{w}x{h} {content:?} {bpc}-bit");
                        check_sad(cpu, &p, ps, &c, cs, w, h, bpc, true, &what);
                    }
                }
            }
        }
    }

    /// The largest magnitudes: full-scale steps, stripes and checkerboards at every depth,
    /// and samples above their bit depth (the kernels refuse those; the reference runs).
    #[test]
    fn checkasm_motion_sad_extremes() {
        let mut rng = Rng::new(0xe7);
        for cpu in CpuLevel::available().into_iter().skip(1) {
            for (w, h) in [(3, 3), (17, 9), (64, 33), (333, 41)] {
                for bpc in [8u32, 9, 10, 12, 15, 16] {
                    let max = ((1u32 << bpc) - 1) as u16;
                    let patterns: [&dyn Fn(usize, usize) -> u16; 5] = [
                        &|_, _| max,
                        &|x, _| if x % 2 == 0 { max } else { 0 },
                        &|_, y| if y % 2 == 0 { max } else { 0 },
                        &|x, y| if (x + y) % 2 == 0 { max } else { 0 },
                        &|x, y| if (x / 5 + y / 5) % 2 == 0 { max } else { 0 },
                    ];
                    for (n, f) in patterns.iter().enumerate() {
                        let p: Vec<u16> = (0..w * h).map(|i| f(i % w, i / w)).collect();
                        let inv: Vec<u16> = p.iter().map(|&v| max - v).collect();
                        let zero = vec![0u16; w * h];
                        let what = format!("{w}x{h} pattern {n} {bpc}-bit");
                        check_sad(cpu, &p, w, &zero, w, w, h, bpc, true, &what);
                        check_sad(cpu, &zero, w, &p, w, w, h, bpc, true, &what);
                        check_sad(cpu, &p, w, &inv, w, w, h, bpc, true, &what);
                    }
                }
                for bpc in [9u32, 10, 12] {
                    let p: Vec<u16> = (0..w * h).map(|_| rng.next_u32() as u16).collect();
                    let c = vec![0u16; w * h];
                    check_sad(
                        cpu,
                        &p,
                        w,
                        &c,
                        w,
                        w,
                        h,
                        bpc,
                        false,
                        &format!("{w}x{h} over-range {bpc}-bit"),
                    );
                }
            }
        }
    }
}
