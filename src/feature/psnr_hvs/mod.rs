//! psnr_hvs feature extractor (Xiph's PSNR-HVS-M as shipped in libvmaf).
//!
//! Each plane is covered by 8x8 blocks on a 7-sample grid (neighbouring blocks overlap by one
//! row/column). Every block goes through Daala's integer 8x8 DCT; coefficient errors below a
//! contrast-masking threshold are dropped and the rest are weighted by a CSF table. The mean
//! weighted squared error, normalised by the squared peak, becomes a dB score per plane, and
//! the planes are combined 0.8/0.1/0.1 before the final conversion.
//!
//! All arithmetic mirrors upstream's C types: block statistics and the error sum are `f32`,
//! the DCT is 32-bit integer, and only the square root and the final dB conversion use `f64`.

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, FrameInput, OptSpec, Opts, Scores};
use crate::gpu::GpuSet;
use crate::picture::{PictureData, PixelFormat, PlaneRef};

mod gpu;
#[cfg(test)]
mod hipcpu_tests;
pub(crate) mod launch;

/// Full feature names this extractor provides (stored under the same names).
pub const PROVIDED_FEATURES: &[&str] = &["psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs"];

static OPTIONS: [OptSpec; 0] = [];

/// Block spacing: 8x8 blocks start every 7 samples.
const STEP: usize = 7;

/// Scale that turns a CSF entry into its masking weight once squared (PSNR-HVS-M's table is
/// reproduced by this empirical factor).
const MASK_SCALE: f64 = 0.3885746225901003;

type Table = [[f32; 8]; 8];

// The CSF tables keep the published decimal values; like C, the compiler rounds each to f32.

/// Luma contrast sensitivity (normalised inverse quantisation matrix at transparency).
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
static CSF_Y: Table = [
    [1.6193873005, 2.2901594831, 2.08509755623, 1.48366094411, 1.00227514334, 0.678296995242, 0.466224900598, 0.3265091542],
    [2.2901594831, 1.94321815382, 2.04793073064, 1.68731108984, 1.2305666963, 0.868920337363, 0.61280991668, 0.436405793551],
    [2.08509755623, 2.04793073064, 1.34329019223, 1.09205635862, 0.875748795257, 0.670882927016, 0.501731932449, 0.372504254596],
    [1.48366094411, 1.68731108984, 1.09205635862, 0.772819797575, 0.605636379554, 0.48309405692, 0.380429446972, 0.295774038565],
    [1.00227514334, 1.2305666963, 0.875748795257, 0.605636379554, 0.448996256676, 0.352889268808, 0.283006984131, 0.226951348204],
    [0.678296995242, 0.868920337363, 0.670882927016, 0.48309405692, 0.352889268808, 0.27032073436, 0.215017739696, 0.17408067321],
    [0.466224900598, 0.61280991668, 0.501731932449, 0.380429446972, 0.283006984131, 0.215017739696, 0.168869545842, 0.136153931001],
    [0.3265091542, 0.436405793551, 0.372504254596, 0.295774038565, 0.226951348204, 0.17408067321, 0.136153931001, 0.109083846276],
];

/// Cb contrast sensitivity (the 4:2:0 table, used for every chroma layout as upstream does).
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
static CSF_CB: Table = [
    [1.91113096927, 2.46074210438, 1.18284184739, 1.14982565193, 1.05017074788, 0.898018824055, 0.74725392039, 0.615105596242],
    [2.46074210438, 1.58529308355, 1.21363250036, 1.38190029285, 1.33100189972, 1.17428548929, 0.996404342439, 0.830890433625],
    [1.18284184739, 1.21363250036, 0.978712413627, 1.02624506078, 1.03145147362, 0.960060382087, 0.849823426169, 0.731221236837],
    [1.14982565193, 1.38190029285, 1.02624506078, 0.861317501629, 0.801821139099, 0.751437590932, 0.685398513368, 0.608694761374],
    [1.05017074788, 1.33100189972, 1.03145147362, 0.801821139099, 0.676555426187, 0.605503172737, 0.55002013668, 0.495804539034],
    [0.898018824055, 1.17428548929, 0.960060382087, 0.751437590932, 0.605503172737, 0.514674450957, 0.454353482512, 0.407050308965],
    [0.74725392039, 0.996404342439, 0.849823426169, 0.685398513368, 0.55002013668, 0.454353482512, 0.389234902883, 0.342353999733],
    [0.615105596242, 0.830890433625, 0.731221236837, 0.608694761374, 0.495804539034, 0.407050308965, 0.342353999733, 0.295530605237],
];

/// Cr contrast sensitivity (4:2:0 table).
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
static CSF_CR: Table = [
    [2.03871978502, 2.62502345193, 1.26180942886, 1.11019789803, 1.01397751469, 0.867069376285, 0.721500455585, 0.593906509971],
    [2.62502345193, 1.69112867013, 1.17180569821, 1.3342742857, 1.28513006198, 1.13381474809, 0.962064122248, 0.802254508198],
    [1.26180942886, 1.17180569821, 0.944981930573, 0.990876405848, 0.995903384143, 0.926972725286, 0.820534991409, 0.706020324706],
    [1.11019789803, 1.3342742857, 0.990876405848, 0.831632933426, 0.77418706195, 0.725539939514, 0.661776842059, 0.587716619023],
    [1.01397751469, 1.28513006198, 0.995903384143, 0.77418706195, 0.653238524286, 0.584635025748, 0.531064164893, 0.478717061273],
    [0.867069376285, 1.13381474809, 0.926972725286, 0.725539939514, 0.584635025748, 0.496936637883, 0.438694579826, 0.393021669543],
    [0.721500455585, 0.962064122248, 0.820534991409, 0.661776842059, 0.531064164893, 0.438694579826, 0.375820256136, 0.330555063063],
    [0.593906509971, 0.802254508198, 0.706020324706, 0.587716619023, 0.478717061273, 0.393021669543, 0.330555063063, 0.285345396658],
];

/// Halves `a` rounding towards zero (Daala's unbiased right shift by one).
#[inline]
fn half(a: i32) -> i32 {
    (((a as u32) >> 31).wrapping_add(a as u32) as i32) >> 1
}

/// `(a·c + 2^(s−1)) >> s` in wrapping 32-bit arithmetic, one lifting step's rounded product.
#[inline]
fn lift(a: i32, c: i32, s: u32) -> i32 {
    a.wrapping_mul(c).wrapping_add(1 << (s - 1)) >> s
}

/// Daala's 8-point integer forward DCT (lifting form) of `x`.
fn fdct8(x: [i32; 8]) -> [i32; 8] {
    // Inputs enter in the butterfly's permuted order.
    let (mut t0, mut t4, mut t2, mut t6) = (x[0], x[1], x[2], x[3]);
    let (mut t7, mut t3, mut t5, mut t1) = (x[4], x[5], x[6], x[7]);

    t1 = t0 - t1;
    let t1h = half(t1);
    t0 -= t1h;
    t4 += t5;
    let t4h = half(t4);
    t5 -= t4h;
    t3 = t2 - t3;
    t2 -= half(t3);
    t6 += t7;
    let t6h = half(t6);
    t7 = t6h - t7;

    // Even half: 4-point DCT-II, itself a 2-point DCT-II plus a 2-point DST-IV.
    t0 += t6h;
    t6 = t0 - t6;
    t2 = t4h - t2;
    t4 = t2 - t4;
    t0 -= lift(t4, 13573, 15);
    t4 += lift(t0, 11585, 14);
    t0 -= lift(t4, 13573, 15);
    t6 -= lift(t2, 21895, 15);
    t2 += lift(t6, 15137, 14);
    t6 -= lift(t2, 21895, 15);

    // Odd half: 4-point DST-IV.
    t3 += lift(t5, 19195, 15);
    t5 += lift(t3, 11585, 14);
    t3 -= lift(t5, 7489, 13);
    t7 = half(t5) - t7;
    t5 -= t7;
    t3 = t1h - t3;
    t1 -= t3;
    t7 += lift(t1, 3227, 15);
    t1 -= lift(t7, 6393, 15);
    t7 += lift(t1, 3227, 15);
    t5 += lift(t3, 2485, 13);
    t3 -= lift(t5, 18205, 15);
    t5 += lift(t3, 2485, 13);

    [t0, t1, t2, t3, t4, t5, t6, t7]
}

/// 2-D DCT of a row-major 8x8 block: columns first, then the columns of that result, so that
/// `out[v][u]` holds vertical frequency `v` and horizontal frequency `u`.
fn fdct8x8(block: &[i32; 64]) -> [i32; 64] {
    let mut tmp = [0i32; 64];
    for c in 0..8 {
        let col = fdct8(std::array::from_fn(|r| block[r * 8 + c]));
        tmp[c * 8..c * 8 + 8].copy_from_slice(&col);
    }
    let mut out = [0i32; 64];
    for c in 0..8 {
        let col = fdct8(std::array::from_fn(|r| tmp[r * 8 + c]));
        out[c * 8..c * 8 + 8].copy_from_slice(&col);
    }
    out
}

/// Which 4x4 quadrant of the block sample (`i`, `j`) lies in.
#[inline]
fn quadrant(i: usize, j: usize) -> usize {
    (i >> 2) + ((j >> 2) << 1)
}

/// Block statistics used for masking: the ratio of the summed quadrant variances to the
/// whole block's variance (left as the raw variance when that is not positive).
fn variance_ratio(b: &[i32; 64]) -> f32 {
    let mut gmean = 0f32;
    let mut means = [0f32; 4];
    for i in 0..8 {
        for j in 0..8 {
            let v = b[i * 8 + j] as f32;
            gmean += v;
            means[quadrant(i, j)] += v;
        }
    }
    gmean /= 64.0;
    for m in &mut means {
        *m /= 16.0;
    }
    let mut gvar = 0f32;
    let mut vars = [0f32; 4];
    for i in 0..8 {
        for j in 0..8 {
            let v = b[i * 8 + j] as f32;
            let q = quadrant(i, j);
            gvar += (v - gmean) * (v - gmean);
            vars[q] += (v - means[q]) * (v - means[q]);
        }
    }
    // Unbiased variance rescale, with the constant folded in f32 as C does.
    gvar *= 1.0f32 / 63.0 * 64.0;
    for v in &mut vars {
        *v *= 1.0f32 / 15.0 * 16.0;
    }
    if gvar > 0.0 {
        gvar = (vars[0] + vars[1] + vars[2] + vars[3]) / gvar;
    }
    gvar
}

/// Masking strength of a transformed block: CSF-masked AC energy scaled by the variance ratio.
fn mask_level(dct: &[i32; 64], mask: &Table, ratio: f32) -> f32 {
    let mut energy = 0f32;
    for i in 0..8 {
        for j in usize::from(i == 0)..8 {
            let c = dct[i * 8 + j];
            energy += c.wrapping_mul(c) as f32 * mask[i][j];
        }
    }
    ((f64::from(energy * ratio)).sqrt() / 32.0) as f32
}

/// The masking weights of a CSF table: each entry scaled by [`MASK_SCALE`] and squared.
fn mask_table(csf: &Table) -> Table {
    let mut mask: Table = [[0.0; 8]; 8];
    for (mrow, crow) in mask.iter_mut().zip(csf) {
        for (m, &c) in mrow.iter_mut().zip(crow) {
            let s = f64::from(c) * MASK_SCALE;
            *m = (s * s) as f32;
        }
    }
    mask
}

/// The weighted squared errors of one pair of 8x8 blocks (`s`, `d`, row-major), in the order
/// upstream adds them.
fn block_terms(s: &[i32; 64], d: &[i32; 64], csf: &Table, mask: &Table) -> [f32; 64] {
    let (s_ratio, d_ratio) = (variance_ratio(s), variance_ratio(d));
    let (ds, dd) = (fdct8x8(s), fdct8x8(d));
    let s_mask = mask_level(&ds, mask, s_ratio);
    let d_mask = mask_level(&dd, mask, d_ratio);
    let m = if d_mask > s_mask { d_mask } else { s_mask };
    std::array::from_fn(|k| {
        let (i, j) = (k / 8, k % 8);
        let mut err = ds[k].wrapping_sub(dd[k]).wrapping_abs() as f32;
        if k != 0 {
            let thr = m / mask[i][j];
            err = if err < thr { 0.0 } else { err - thr };
        }
        (err * csf[i][j]) * (err * csf[i][j])
    })
}

/// Upstream's running sum of one plane's terms (block by block in raster order) and the
/// number of terms. `at(x, y)` reads the reference and distorted sample at (`x`, `y`).
fn plane_sum(
    w: usize,
    h: usize,
    csf: &Table,
    at: impl Fn(usize, usize) -> (i32, i32),
) -> (f32, i32) {
    let mask = mask_table(csf);
    let mut ret = 0f32;
    let mut pixels: i32 = 0;
    let (mut s, mut d) = ([0i32; 64], [0i32; 64]);
    let mut y = 0;
    while y + 7 < h {
        let mut x = 0;
        while x + 7 < w {
            for i in 0..8 {
                for j in 0..8 {
                    (s[i * 8 + j], d[i * 8 + j]) = at(x + j, y + i);
                }
            }
            for t in block_terms(&s, &d, csf, &mask) {
                ret += t;
                pixels += 1;
            }
            x += STEP;
        }
        y += STEP;
    }
    (ret, pixels)
}

/// Normalised masked error of one plane (upstream's `calc_psnrhvs`), as the f64 of its f32,
/// from its sum and term count. A plane smaller than one block leaves 0/0 = NaN, as upstream.
fn normalise(sum: f32, pixels: i32, bpc: u32) -> f64 {
    let mut ret = sum / pixels as f32;
    let peak = (1i32 << bpc) - 1;
    ret /= (peak * peak) as f32;
    f64::from(ret)
}

/// Upstream's dB conversion (unit weight): `10·(−log10 x)`.
fn to_db(x: f64) -> f64 {
    10.0 * -x.log10()
}

/// The CSF table of each plane.
const TABLES: [&Table; 3] = [&CSF_Y, &CSF_CB, &CSF_CR];

/// Per plane: upstream's running sum of the weighted squared errors and their count (NaN for
/// mixed sample storage, which `check_pair` refuses).
fn plane_sums(r: &PictureData, d: &PictureData) -> [(f32, i32); 3] {
    std::array::from_fn(|p| {
        let (w, h) = (r.w[p], r.h[p]);
        let (rs, ds) = (r.stride[p], d.stride[p]);
        match (r.plane(p), d.plane(p)) {
            (PlaneRef::U8(a), PlaneRef::U8(b)) => plane_sum(w, h, TABLES[p], |x, y| {
                (i32::from(a[y * rs + x]), i32::from(b[y * ds + x]))
            }),
            (PlaneRef::U16(a), PlaneRef::U16(b)) => plane_sum(w, h, TABLES[p], |x, y| {
                (i32::from(a[y * rs + x]), i32::from(b[y * ds + x]))
            }),
            _ => (f32::NAN, 1),
        }
    })
}

/// The masking weights then the CSF of each plane (`launch::TABLE_LEN` floats a plane), as
/// the GPU kernels take them.
fn device_tables() -> Vec<f32> {
    TABLES
        .iter()
        .flat_map(|csf| {
            let mask = mask_table(csf);
            let both: Vec<f32> = mask.iter().chain(csf.iter()).flatten().copied().collect();
            both
        })
        .collect()
}

fn check_pair(r: &PictureData, d: &PictureData) -> Result<()> {
    if r.bpc > 12 || r.bpc < 8 {
        return Err(Error::inval(format!(
            "psnr_hvs: invalid bitdepth ({}), bpc must be less than or equal to 12",
            r.bpc
        )));
    }
    if r.pix_fmt == PixelFormat::Yuv400p {
        return Err(Error::inval("psnr_hvs: 4:0:0 pictures have no chroma"));
    }
    if r.bpc != d.bpc || r.pix_fmt != d.pix_fmt || r.w != d.w || r.h != d.h {
        return Err(Error::inval(
            "psnr_hvs: reference and distorted pictures differ in format or size",
        ));
    }
    Ok(())
}

/// The psnr_hvs extractor (no options).
pub struct PsnrHvs {
    /// GPU that computes the plane sums, when one was imported.
    gpu: Option<GpuSet>,
}

impl PsnrHvs {
    /// Creates the extractor; upstream defines no options, so every key is ignored.
    pub fn new(opts: &Dict) -> Result<Self> {
        Opts::parse(&OPTIONS, opts)?;
        Ok(PsnrHvs { gpu: None })
    }

    /// Computes the plane sums on `gpu` when given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }
}

impl Extractor for PsnrHvs {
    fn name(&self) -> &'static str {
        "psnr_hvs"
    }

    fn host_planes(&self) -> u8 {
        // The GPU path reads device pictures in place (and fetches what it needs otherwise).
        if self.gpu.is_some() {
            0
        } else {
            crate::feature::ALL_PLANES
        }
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        check_pair(r, d)?;
        let e = match &self.gpu {
            Some(g) => {
                let sums = gpu::plane_sums(g.for_frame(input.index), r, d)?;
                std::array::from_fn(|p| normalise(sums[p].0, sums[p].1, r.bpc))
            }
            None => plane_sums(r, d).map(|(sum, n)| normalise(sum, n, r.bpc)),
        };
        for (name, &v) in PROVIDED_FEATURES.iter().zip(&e) {
            out.push((name.to_string(), to_db(v)));
        }
        let combined = e[0] * 0.8 + 0.1 * (e[1] + e[2]);
        out.push(("psnr_hvs".to_string(), to_db(combined)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{expected_json, extract_clip, PARITY_CLIPS};
    use std::sync::Arc;

    #[test]
    fn parity_clips_match_upstream() {
        let ext = PsnrHvs::new(&Dict::new()).unwrap();
        for clip in PARITY_CLIPS {
            let log = expected_json(&format!("{clip}.psnr_hvs.json"));
            let frames = log["frames"].as_array().unwrap();
            let scores = extract_clip(clip, &ext);
            assert_eq!(scores.len(), frames.len(), "{clip}");
            for (i, (fr, out)) in frames.iter().zip(&scores).enumerate() {
                let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(names, PROVIDED_FEATURES, "{clip}");
                for (name, v) in out {
                    let want = &fr["metrics"][name.as_str()];
                    match want.as_f64() {
                        Some(w) => assert_eq!(
                            format!("{v:.6}"),
                            format!("{w:.6}"),
                            "{clip} frame {i} {name}"
                        ),
                        // Upstream prints null for identical pictures (+inf dB).
                        None => {
                            assert!(want.is_null(), "{clip} frame {i} {name}");
                            assert_eq!(*v, f64::INFINITY, "{clip} frame {i} {name}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dct_matches_known_values() {
        // A flat block has only a DC term, scaled by 8 across the 2-D transform.
        let out = fdct8x8(&[100; 64]);
        assert_eq!(out[0], 800);
        assert!(out[1..].iter().all(|&c| c == 0));
        assert_eq!(half(-3), -1);
        assert_eq!(half(3), 1);
    }

    #[test]
    fn rejects_bad_input() {
        let ext = PsnrHvs::new(&Dict::new()).unwrap();
        assert_eq!(ext.dedup_key(), "psnr_hvs");
        let run = |a: &crate::picture::Picture, b: &crate::picture::Picture| {
            let input = FrameInput::pair(0, a, b);
            ext.extract(&input, &mut Scores::new())
        };
        let p16 = Arc::new(PictureData::new(PixelFormat::Yuv420p, 16, 16, 16).unwrap());
        assert!(matches!(run(&p16, &p16), Err(Error::Invalid(_))));
        let gray = Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 16, 16).unwrap());
        assert!(matches!(run(&gray, &gray), Err(Error::Invalid(_))));
        let a = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 16, 16).unwrap());
        let b = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 24, 16).unwrap());
        assert!(matches!(run(&a, &b), Err(Error::Invalid(_))));
    }
}
