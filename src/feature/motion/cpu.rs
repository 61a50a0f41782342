//! CPU reference of integer motion: the SAD of the 5-tap blurred difference of two luma
//! planes, and the C helpers the host finishing uses (`MIN`, the blend).

use crate::error::{Error, Result};
use crate::feature::c_min;
use crate::picture::{PictureData, PlaneRef};

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
fn blurred_diff_sad<T: Copy + Into<i64>>(
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

/// Integer motion SAD between the luma planes of two consecutive reference pictures (`prev`
/// is the earlier one). Both must share size and bit depth; luma must be at least 3x3.
pub fn motion_sad(prev: &PictureData, cur: &PictureData) -> Result<u64> {
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
        (PlaneRef::U8(p), PlaneRef::U8(c)) => blurred_diff_sad(p, ps, c, cs, w, h, 8),
        (PlaneRef::U16(p), PlaneRef::U16(c)) => blurred_diff_sad(p, ps, c, cs, w, h, cur.bpc),
        _ => return Err(Error::inval("motion: mixed sample storage")),
    })
}

/// `x·f + (1−f)·min(offset, x)`: blends a motion score above `offset` towards it.
pub(super) fn blend(x: f64, factor: f64, offset: f64) -> f64 {
    x * factor + (1.0 - factor) * c_min(offset, x)
}
