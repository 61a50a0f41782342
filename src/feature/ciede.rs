//! CIEDE2000 colour difference (libvmaf's `ciede` extractor, stored as `ciede2000`).
//!
//! Each pixel pair is taken from Y'CbCr (BT.709, limited range) to linear RGB, XYZ (D65) and
//! CIELAB; the CIEDE2000 difference (kL = 0.65, kC = 1, kH = 4) is averaged over the frame and
//! reported as `45 - 20·log10(mean)`.
//!
//! Upstream mixes `float` and `double`: the Lab channels and every named intermediate of the
//! difference are `float`, while library calls and `double` literals widen. Each step below
//! rounds to `f32` exactly where the C does, so the per-frame scores are bit-identical.
//!
//! Chroma is brought to full resolution by sample repetition with upstream's indexing: 4:2:0
//! repeats each chroma sample over a 2x2 block, but 4:2:2 repeats chroma *rows* and walks the
//! chroma row at full-width pace (reading past its end into the next row). That quirk is kept
//! so 4:2:2 scores match too.

use std::f64::consts::PI;

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, Scores};
use crate::picture::{PictureData, PixelFormat, PlaneRef};

/// Features of `ciede`.
pub const PROVIDED_FEATURES: &[&str] = &["ciede2000"];

/// Weighting factors of the lightness, chroma and hue terms (upstream's `float`s).
const K_L: f32 = 0.65;
const K_C: f32 = 1.0;
const K_H: f32 = 4.0;

/// `25^7`, as the `double` and the `float` upstream's two formulas use.
const POW25_7_F64: f64 = 6_103_515_625.0;
const POW25_7_F32: f32 = 6_103_515_625.0;

/// A CIELAB colour in upstream's single precision.
#[derive(Debug, Clone, Copy)]
struct Lab {
    l: f32,
    a: f32,
    b: f32,
}

/// The `ciede` extractor. It has no options.
#[derive(Debug, Default)]
pub struct Ciede;

impl Ciede {
    /// Creates the extractor; upstream declares no options, so `opts` is not consulted.
    pub fn new(_opts: &Dict) -> Result<Self> {
        Ok(Ciede)
    }
}

impl Extractor for Ciede {
    fn name(&self) -> &'static str {
        "ciede"
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair(r, d)?;
        let (w, h) = (r.w[0], r.h[0]);
        let mut sum = 0.0f64;
        let mut ref_row = vec![[0.0f32; 3]; w];
        let mut dist_row = vec![[0.0f32; 3]; w];
        for i in 0..h {
            read_row(r, i, &mut ref_row)?;
            read_row(d, i, &mut dist_row)?;
            for (rs, ds) in ref_row.iter().zip(&dist_row) {
                let c1 = lab_color(rs, r.bpc);
                let c2 = lab_color(ds, d.bpc);
                sum += ciede2000(c1, c2) as f64;
            }
        }
        let score = 45.0 - 20.0 * (sum / (w * h) as f64).log10();
        out.push(("ciede2000".to_string(), score));
        Ok(())
    }
}

fn check_pair(r: &PictureData, d: &PictureData) -> Result<()> {
    if r.pix_fmt != d.pix_fmt || r.bpc != d.bpc || r.w != d.w || r.h != d.h {
        return Err(Error::inval(
            "ciede: reference and distorted pictures differ in layout",
        ));
    }
    if !matches!(
        r.pix_fmt,
        PixelFormat::Yuv420p | PixelFormat::Yuv422p | PixelFormat::Yuv444p
    ) {
        return Err(Error::inval("ciede: needs a picture with chroma"));
    }
    if !matches!(r.bpc, 8 | 10 | 12 | 16) {
        return Err(Error::inval(format!(
            "ciede: unsupported bit depth {}",
            r.bpc
        )));
    }
    Ok(())
}

/// Reads row `i` as full-resolution (Y, U, V) samples, with upstream's chroma indexing.
fn read_row(pic: &PictureData, i: usize, out: &mut [[f32; 3]]) -> Result<()> {
    let fetch = |plane: PlaneRef<'_>, idx: usize| -> Option<f32> {
        match plane {
            PlaneRef::U8(p) => p.get(idx).map(|&v| v as f32),
            PlaneRef::U16(p) => p.get(idx).map(|&v| v as f32),
        }
    };
    // Chroma sample index of output column `j`, given the chroma row start.
    let (crow, cdiv) = match pic.pix_fmt {
        PixelFormat::Yuv444p => (i, 1),
        PixelFormat::Yuv420p => (i / 2, 2),
        // Rows halve, columns do not: upstream's 4:2:2 indexing.
        _ => (i / 2, 1),
    };
    let (y, u, v) = (pic.plane(0), pic.plane(1), pic.plane(2));
    let u_len = match u {
        PlaneRef::U8(p) => p.len(),
        PlaneRef::U16(p) => p.len(),
    };
    let ybase = i * pic.stride[0];
    let cbase = crow * pic.stride[1];
    for (j, s) in out.iter_mut().enumerate() {
        let ci = cbase + j / cdiv;
        // A read past U's end lands in V, which follows it in memory, as in upstream's buffer.
        let uval = fetch(u, ci).or_else(|| fetch(v, ci - u_len));
        let (Some(ys), Some(us), Some(vs)) = (fetch(y, ybase + j), uval, fetch(v, ci)) else {
            return Err(Error::inval(
                "ciede: picture too small for upstream's chroma indexing",
            ));
        };
        *s = [ys, us, vs];
    }
    Ok(())
}

/// sRGB transfer (inverse companding) on a normalised component.
fn linearize(c: f64) -> f64 {
    if c > 10.0 / 255.0 {
        ((c + 0.055) * (1.0 / 1.055)).powf(2.4)
    } else {
        c * (1.0 / 12.92)
    }
}

/// CIELAB's companding of a white-normalised XYZ component, narrowed to `float`.
fn lab_f(t: f64) -> f32 {
    const KAPPA: f64 = 24389.0 / 27.0;
    const EPSILON: f64 = 216.0 / 24389.0;
    if t > EPSILON {
        t.powf(1.0 / 3.0) as f32
    } else {
        ((KAPPA * t + 16.0) * (1.0 / 116.0)) as f32
    }
}

/// Lab colour of one (Y, U, V) sample triple at `bpc` bits.
fn lab_color(s: &[f32; 3], bpc: u32) -> Lab {
    let scale = (1u32 << (bpc - 8)) as f64;
    let y = (s[0] as f64 - 16.0 * scale) * (1.0 / (219.0 * scale));
    let u = (s[1] as f64 - 128.0 * scale) * (1.0 / (224.0 * scale));
    let v = (s[2] as f64 - 128.0 * scale) * (1.0 / (224.0 * scale));

    let r = linearize(y + 1.28033 * v);
    let g = linearize(y - 0.21482 * u - 0.38059 * v);
    let b = linearize(y + 2.12798 * u);

    let x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894;
    let yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958;
    let z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677;

    let fx = lab_f(x * (1.0 / 0.95047)) as f64;
    let fy = lab_f(yy) as f64;
    let fz = lab_f(z * (1.0 / 1.08883)) as f64;
    Lab {
        l: (116.0 * fy - 16.0) as f32,
        a: (500.0 * (fx - fy)) as f32,
        b: (200.0 * (fy - fz)) as f32,
    }
}

/// Hue angle in [0, 2π) of (a', b), 0 for the achromatic point.
fn hue_angle(b: f32, a_prime: f32) -> f32 {
    if b == 0.0 && a_prime == 0.0 {
        return 0.0;
    }
    let h = (b as f64).atan2(a_prime as f64) as f32;
    if (h as f64) < 0.0 {
        (h as f64 + 2.0 * PI) as f32
    } else {
        h
    }
}

/// Signed hue difference h2 - h1 wrapped into [-π, π]; zero when either chroma is (upstream
/// tests the unprimed chromas here).
fn hue_delta(c1: f32, c2: f32, h1: f32, h2: f32) -> f32 {
    if c1 == 0.0 || c2 == 0.0 {
        return 0.0;
    }
    let diff = h2 - h1;
    if ((h1 - h2).abs() as f64) <= PI {
        diff
    } else if h2 <= h1 {
        (diff as f64 + 2.0 * PI) as f32
    } else {
        (diff as f64 - 2.0 * PI) as f32
    }
}

/// Mean hue angle, taking the short way round the circle.
fn hue_mean(h1: f32, h2: f32) -> f32 {
    let sum = h1 + h2;
    if ((h1 - h2) as f64).abs() > PI {
        ((sum as f64 + 2.0 * PI) / 2.0) as f32
    } else {
        (sum as f64 / 2.0) as f32
    }
}

/// The hue weighting function T.
fn hue_weight(hm: f32) -> f32 {
    let h = hm as f64;
    (1.0 - 0.17 * (h - PI / 6.0).cos()
        + 0.24 * (2.0 * h).cos()
        + 0.32 * (3.0 * h + PI / 30.0).cos()
        - 0.20 * (4.0 * h - 7.0 * PI / 20.0).cos()) as f32
}

/// The rotation term R_T.
fn rotation(c_bar_prime: f32, hm: f32) -> f32 {
    let deg = (hm as f64 * (180.0 / PI)) as f32;
    let t = ((deg as f64 - 275.0) * (1.0 / 25.0)) as f32;
    let c7 = c_bar_prime.powf(7.0);
    let rc = (c7 / (c7 + POW25_7_F32)) as f64;
    let angle_deg = (60.0 * (-(t * t) as f64).exp()) as f32;
    let angle = (angle_deg as f64 * (PI / 180.0)) as f32;
    (-2.0 * rc.sqrt() * (angle as f64).sin()) as f32
}

/// CIEDE2000 difference between two colours.
fn ciede2000(c1: Lab, c2: Lab) -> f32 {
    let sq = |x: f32| (x as f64) * (x as f64);
    let delta_l = c2.l - c1.l;
    let l_bar = (c1.l + c2.l) / 2.0;
    let ch1 = (sq(c1.a) + sq(c1.b)).sqrt() as f32;
    let ch2 = (sq(c2.a) + sq(c2.b)).sqrt() as f32;
    let c_bar = (ch1 + ch2) / 2.0;
    let cb7 = (c_bar as f64).powf(7.0);
    let g = 1.0 - (cb7 / (cb7 + POW25_7_F64)).sqrt();
    let a1p = (c1.a as f64 + (c1.a / 2.0) as f64 * g) as f32;
    let a2p = (c2.a as f64 + (c2.a / 2.0) as f64 * g) as f32;
    let c1p = (sq(a1p) + sq(c1.b)).sqrt() as f32;
    let c2p = (sq(a2p) + sq(c2.b)).sqrt() as f32;
    let c_bar_p = (c1p + c2p) / 2.0;
    let delta_c = c2p - c1p;
    let l50 = sq(l_bar - 50.0);
    let s_l = (1.0 + (0.015 * l50) / (20.0 + l50).sqrt()) as f32;
    let s_c = (1.0 + 0.045 * c_bar_p as f64) as f32;
    let h1 = hue_angle(c1.b, a1p);
    let h2 = hue_angle(c2.b, a2p);
    let delta_h = hue_delta(ch1, ch2, h1, h2);
    let delta_big_h = (2.0 * ((c1p * c2p) as f64).sqrt() * (delta_h as f64 / 2.0).sin()) as f32;
    let hm = hue_mean(h1, h2);
    let t = hue_weight(hm);
    let s_h = (1.0 + 0.015 * c_bar_p as f64 * t as f64) as f32;
    let r_t = rotation(c_bar_p, hm);
    let lightness = delta_l / (K_L * s_l);
    let chroma = delta_c / (K_C * s_c);
    let hue = delta_big_h / (K_H * s_h);
    (sq(lightness) + sq(chroma) + sq(hue) + (r_t * chroma * hue) as f64).sqrt() as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expected_json, expected_metric, extract_clip};

    fn assert_clip(clip: &str) {
        let log = expected_json(&format!("{clip}.ciede.json"));
        let frames = log["frames"].as_array().expect("frames").len();
        let scores = extract_clip(clip, &Ciede::new(&Dict::new()).unwrap());
        assert_eq!(scores.len(), frames, "{clip}");
        for (i, out) in scores.iter().enumerate() {
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].0, "ciede2000");
            let want = expected_metric(&log, i, "ciede2000").expect("ciede2000");
            assert_eq!(
                format!("{:.6}", out[0].1),
                format!("{want:.6}"),
                "{clip} frame {i}"
            );
        }
    }

    #[test]
    fn matches_upstream_420p8() {
        assert_clip("testsrc_321x241_420p8");
    }

    #[test]
    fn matches_upstream_natural_420p8() {
        assert_clip("natural_576x324_420p8");
    }

    #[test]
    fn matches_upstream_420p10() {
        assert_clip("natural_640x360_420p10");
    }

    #[test]
    fn matches_upstream_420p12() {
        assert_clip("natural_320x180_420p12");
    }

    #[test]
    fn matches_upstream_444p8() {
        assert_clip("testsrc_480x270_444p8");
    }

    #[test]
    fn matches_upstream_422p8() {
        assert_clip("mandel_352x288_422p8");
    }

    #[test]
    fn registered_and_rejects_gray() {
        assert_eq!(
            crate::feature::extractor_for_feature("ciede2000"),
            Some("ciede")
        );
        let e = crate::feature::create("ciede", &Dict::new()).unwrap();
        assert_eq!(e.name(), "ciede");
        let gray = std::sync::Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 16, 16).unwrap());
        let input = FrameInput::pair(0, &gray, &gray);
        assert!(e.extract(&input, &mut Vec::new()).is_err());
    }
}
