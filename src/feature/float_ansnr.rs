//! Float anti-noise SNR (libvmaf's `float_ansnr` extractor). Luma on the 8-bit float scale,
//! shifted by -128, is smoothed: the reference with a 3x3 binomial kernel, the distorted
//! picture with a wider 5x5 kernel. The signal is the energy of the smoothed reference, the
//! noise that of the difference of the two. Two scores are stored: `float_ansnr`
//! (signal-to-noise in dB) and `float_anpsnr` (peak signal-to-noise, capped per bit depth).
//!
//! Bit-exactness notes (upstream runs this in single precision, without fast-math or FMA):
//! * each filter output sums its kernel row by row: a float sum of the row's float products,
//!   left to right, then the row sums added in order;
//! * the borders mirror like upstream's: index -k reads k, index n-1+k reads n-k (so the top
//!   and left edges skip the edge sample while the bottom and right repeat it);
//! * the energies are float: each row is summed on its own, then the row sums are added;
//! * `float_ansnr` takes the log of the float quotient signal/noise.

use crate::error::{Error, Result};
use crate::feature::float_psnr::peak_and_cap;
use crate::feature::ssim::tools::{check_pair, luma_to_float, FloatImage};
use crate::feature::{c_max, c_min, Dict, Extractor, FrameInput, OptSpec, Opts, Scores, LUMA};
use crate::limits::try_filled;

/// Full feature names this extractor declares (it also stores `float_anpsnr`).
pub const PROVIDED_FEATURES: &[&str] = &["float_ansnr"];

/// Upstream declares no options; keys given anyway are ignored.
static OPTIONS: [OptSpec; 0] = [];

/// Smallest noise energy the PSNR-style logarithm sees.
const NOISE_FLOOR: f64 = 1e-10;

/// Samples are centred on zero before filtering.
const OFFSET: f32 = -128.0;

/// Kernel `weights / divisor`, each tap rounded once from double to float.
const fn kernel<const N: usize>(weights: [[f64; N]; N], divisor: f64) -> [[f32; N]; N] {
    let mut out = [[0.0f32; N]; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < N {
            out[i][j] = (weights[i][j] / divisor) as f32;
            j += 1;
        }
        i += 1;
    }
    out
}

/// 3x3 binomial kernel for the reference.
const REF_KERNEL: [[f32; 3]; 3] = kernel([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]], 16.0);

/// 5x5 kernel for the distorted picture (weights sum to 571).
const DIS_KERNEL: [[f32; 5]; 5] = kernel(
    [
        [2.0, 7.0, 12.0, 7.0, 2.0],
        [7.0, 31.0, 52.0, 31.0, 7.0],
        [12.0, 52.0, 127.0, 52.0, 12.0],
        [7.0, 31.0, 52.0, 31.0, 7.0],
        [2.0, 7.0, 12.0, 7.0, 2.0],
    ],
    571.0,
);

/// Smallest side the 5x5 mirror stays inside the picture for.
const MIN_SIDE: usize = 3;

/// Upstream's mirror of index `i` (at most `n - 1` outside `0..n`, `n >= MIN_SIDE`) into
/// `0..n`.
fn mirror(i: isize, n: usize) -> usize {
    let n = n as isize;
    let m = if i < 0 {
        -i
    } else if i >= n {
        2 * n - i - 1
    } else {
        i
    };
    m as usize
}

/// `img` filtered with the `N`x`N` `kernel`, borders mirrored (see [`mirror`]).
fn filter<const N: usize>(kernel: &[[f32; N]; N], img: &FloatImage) -> Result<Vec<f32>> {
    let (w, h, r) = (img.w, img.h, N / 2);
    // A mirrored border of r samples on every side, so every tap reads in place.
    let pw = w + 2 * r;
    let mut padded = try_filled(pw * (h + 2 * r), 0.0f32, "float_ansnr: padded plane")?;
    for (y, prow) in padded.chunks_exact_mut(pw).enumerate() {
        let src = &img.data[mirror(y as isize - r as isize, h) * w..][..w];
        for (x, p) in prow.iter_mut().enumerate() {
            *p = src[mirror(x as isize - r as isize, w)];
        }
    }
    let mut out = try_filled(w * h, 0.0f32, "float_ansnr: filtered plane")?;
    for (i, orow) in out.chunks_exact_mut(w).enumerate() {
        let window = &padded[i * pw..(i + N) * pw];
        for (j, o) in orow.iter_mut().enumerate() {
            *o = kernel
                .iter()
                .zip(window.chunks_exact(pw))
                .fold(0.0f32, |acc, (taps, prow)| {
                    let row = taps
                        .iter()
                        .zip(&prow[j..j + N])
                        .fold(0.0f32, |s, (&t, &p)| s + t * p);
                    acc + row
                });
        }
    }
    Ok(out)
}

/// Float energies of `r` (signal) and of `r - d` (noise), `w` samples a row.
fn signal_and_noise(r: &[f32], d: &[f32], w: usize) -> (f32, f32) {
    r.chunks_exact(w)
        .zip(d.chunks_exact(w))
        .fold((0.0f32, 0.0f32), |(sig, noise), (rr, dr)| {
            let (row_sig, row_noise) =
                rr.iter()
                    .zip(dr)
                    .fold((0.0f32, 0.0f32), |(s, n), (&a, &b)| {
                        let diff = a - b;
                        (s + a * a, n + diff * diff)
                    });
            (sig + row_sig, noise + row_noise)
        })
}

/// The (`float_ansnr`, `float_anpsnr`) scores of a reference/distorted luma pair already
/// centred by [`OFFSET`].
fn scores(r: &FloatImage, d: &FloatImage, peak: f64, cap: f64) -> Result<(f64, f64)> {
    let (w, h) = (r.w, r.h);
    if w < MIN_SIDE || h < MIN_SIDE {
        // Upstream's mirror would read outside the picture.
        return Err(Error::inval(format!(
            "float_ansnr: {w}x{h} is smaller than {MIN_SIDE}x{MIN_SIDE}"
        )));
    }
    let rs = filter(&REF_KERNEL, r)?;
    let ds = filter(&DIS_KERNEL, d)?;
    let (sig, noise) = signal_and_noise(&rs, &ds, w);
    let ansnr = if noise == 0.0 {
        cap
    } else {
        10.0 * f64::from(sig / noise).log10()
    };
    let anpsnr = c_min(
        10.0 * (peak * peak * w as f64 * h as f64 / c_max(f64::from(noise), NOISE_FLOOR)).log10(),
        cap,
    );
    Ok((ansnr, anpsnr))
}

/// Luma of `pic` on the 8-bit float scale, centred by [`OFFSET`].
fn centred_luma(pic: &crate::picture::PictureData) -> Result<FloatImage> {
    let mut img = luma_to_float(pic)?;
    img.data.iter_mut().for_each(|v| *v += OFFSET);
    Ok(img)
}

/// The float_ansnr extractor.
#[derive(Debug)]
pub struct FloatAnsnr;

impl FloatAnsnr {
    /// Creates the extractor (it has no options).
    pub fn new(opts: &Dict) -> Result<Self> {
        Opts::parse(&OPTIONS, opts)?;
        Ok(FloatAnsnr)
    }
}

impl Extractor for FloatAnsnr {
    fn name(&self) -> &'static str {
        "float_ansnr"
    }

    fn planes_read(&self) -> u8 {
        LUMA
    }

    fn host_planes(&self) -> u8 {
        LUMA
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair("float_ansnr", r, d)?;
        let (peak, cap) = peak_and_cap("float_ansnr", r.bpc)?;
        let (ansnr, anpsnr) = scores(&centred_luma(r)?, &centred_luma(d)?, peak, cap)?;
        out.push(("float_ansnr".to_string(), ansnr));
        out.push(("float_anpsnr".to_string(), anpsnr));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::float_psnr::tests::run;

    #[test]
    fn kernels_are_upstreams() {
        assert_eq!(REF_KERNEL[1][1], 0.25);
        assert_eq!(DIS_KERNEL[0][0], (2.0f64 / 571.0) as f32);
        assert_eq!(DIS_KERNEL[2][2], (127.0f64 / 571.0) as f32);
        assert_eq!(DIS_KERNEL[3][1], DIS_KERNEL[1][3]);
    }

    #[test]
    fn mirror_is_asymmetric() {
        assert_eq!(mirror(-2, 5), 2);
        assert_eq!(mirror(-1, 5), 1);
        assert_eq!(mirror(5, 5), 4);
        assert_eq!(mirror(6, 5), 3);
        assert_eq!(mirror(3, 5), 3);
    }

    #[test]
    fn matches_upstream_bit_for_bit() {
        let x = FloatAnsnr::new(&Dict::new()).unwrap();
        for (bpc, w, h, same, want) in [
            (
                8,
                37,
                23,
                false,
                [0x40274b625c753a51_u64, 0x4040dfac19e0317c],
            ),
            (10, 29, 17, false, [0x40275a9a0818d6b7, 0x404097c65b70f9c0]),
            (12, 16, 9, false, [0x4027329ef5adc68e, 0x4040487067b8c4e4]),
            (16, 5, 3, false, [0x402a2179a4890e1d, 0x403eb7cff67effef]),
            (8, 3, 3, false, [0x402436112e2f0866, 0x403abed3d4b620c8]),
            // Equal inputs still differ after their different smoothing.
            (10, 12, 7, true, [0x402881f52012a2aa, 0x40405549f9747594]),
        ] {
            let out = run(&x, bpc, w, h, same).unwrap();
            let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["float_ansnr", "float_anpsnr"]);
            let got: Vec<u64> = out.iter().map(|(_, v)| v.to_bits()).collect();
            assert_eq!(got, want, "{bpc}-bit {w}x{h}: {out:?}");
        }
    }

    #[test]
    fn zero_noise_gives_the_cap() {
        // Mid-grey (0 after centring) stays 0 through both kernels: no noise at all.
        let img = FloatImage {
            w: 4,
            h: 3,
            data: vec![0.0; 12],
        };
        let (ansnr, anpsnr) = scores(&img, &img, 255.0, 60.0).unwrap();
        assert_eq!((ansnr, anpsnr), (60.0, 60.0));
    }

    #[test]
    fn rejects_bad_input() {
        let x = FloatAnsnr::new(&Dict::new()).unwrap();
        assert!(run(&x, 8, 2, 8, false).is_err());
        assert!(run(&x, 8, 8, 2, false).is_err());
        assert!(run(&x, 9, 8, 8, false).is_err());
    }
}
