//! ADM constants: the db2 wavelet taps, the reciprocal table used for the decoupling ratio,
//! and the contrast-sensitivity factors of every CSF mode.

use std::f64::consts::PI;
use std::sync::OnceLock;

/// db2 low-pass analysis taps (Q15; they sum to 46342 ~ 2^15 * sqrt(2)).
pub const DWT_LO: [i32; 4] = [15826, 27411, 7345, -4240];
/// db2 high-pass analysis taps (they sum to 0).
pub const DWT_HI: [i32; 4] = [-4240, -7345, 27411, -15826];
/// Sum of the low-pass taps; scale 0 subtracts it times the rounding constant to centre samples.
pub const DWT_LO_SUM: i32 = 46342;

/// `cos(1 deg)^2` rounded to `f32`, the threshold of the decoupling angle test.
pub const COS_1DEG_SQ: f32 = f32::from_bits(0x3f7f_ec0a);

/// Reciprocal table: entry `i` is `2^30 / i` for `i` in 1..=32768 (entry 0 is never read: a
/// zero denominator is special-cased). Upstream's table also stores the negated values for
/// negative denominators; `-(2^30 / i) * t == -((2^30 / i) * t)`, so the sign is applied by
/// the caller instead, halving the table.
pub fn div_lookup() -> &'static [i32; 32769] {
    static TABLE: OnceLock<Box<[i32; 32769]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0i32; 32769]);
        for i in 1..=32768i32 {
            t[i as usize] = (1i32 << 30) / i;
        }
        t
    })
}

/// Contrast-sensitivity function used to weight the subbands (`adm_csf_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsfMode {
    Watson97,
    Barten,
    BartenWatsonBlend,
    BartenWatsonBlendMae,
}

impl CsfMode {
    /// The mode numbered `v` by the option.
    pub fn from_int(v: i32) -> Option<Self> {
        Some(match v {
            0 => CsfMode::Watson97,
            1 => CsfMode::Barten,
            2 => CsfMode::BartenWatsonBlend,
            3 => CsfMode::BartenWatsonBlendMae,
            _ => return None,
        })
    }
}

// Watson et al. 1997, luma noise-floor model for the 7-9 biorthogonal basis.
const WATSON_A: f32 = 0.495;
const WATSON_K: f32 = 0.466;
const WATSON_F0: f32 = 0.401;
const WATSON_G: [f32; 4] = [1.501, 1.0, 0.534, 1.0];
const WATSON_AMPLITUDE: [[f32; 4]; 6] = [
    [0.62171, 0.67234, 0.72709, 0.67234],
    [0.34537, 0.41317, 0.49428, 0.41317],
    [0.18004, 0.22727, 0.28688, 0.22727],
    [0.091401, 0.11792, 0.15214, 0.11792],
    [0.045943, 0.059758, 0.077727, 0.059758],
    [0.023013, 0.030018, 0.039156, 0.030018],
];

/// libm `pow`, hidden from the optimiser so a constant base or exponent is not rewritten
/// (`pow(10, x)` -> `exp10`, `pow(x, 0.5)` -> `sqrt`) where gcc keeps the call.
pub fn pow(x: f64, y: f64) -> f64 {
    std::hint::black_box(x).powf(std::hint::black_box(y))
}

/// Display resolution in pixels per degree of visual angle, as a float.
fn pixels_per_degree(nvd: f64, rdh: i32) -> f32 {
    (nvd * rdh as f64 * PI / 180.0) as f32
}

/// Watson's quantisation step for level `lambda` and orientation `theta` (1 = h/v, 2 = d).
/// The float/double mix follows upstream so the result is the same `f32`.
fn watson_quant_step(lambda: usize, theta: usize, nvd: f64, rdh: i32) -> f32 {
    let r = pixels_per_degree(nvd, rdh);
    let ratio =
        pow(2.0, (lambda + 1) as f64) * WATSON_F0 as f64 * WATSON_G[theta] as f64 / r as f64;
    let temp = ratio.log10() as f32;
    let expo = WATSON_K * temp * temp;
    (2.0 * WATSON_A as f64 * pow(10.0, expo as f64) / WATSON_AMPLITUDE[lambda][theta] as f64) as f32
}

// Barten CSF (simplified HDR-VDP-2 form).
const BARTEN_LUM_ANCHORS: [f32; 6] = [0.002, 0.02, 0.2, 2.0, 20.0, 150.0];
const BARTEN_PARAMS: [[f32; 5]; 6] = [
    [0.0160737, 0.991265, 3.74038, 0.50722, 4.46044],
    [0.383873, 0.800889, 3.54104, 0.682505, 4.94958],
    [0.929301, 0.476505, 4.37453, 0.750315, 5.28678],
    [1.29776, 0.405782, 4.40602, 0.935314, 5.61425],
    [1.49222, 0.334278, 3.79542, 1.07327, 6.4635],
    [1.46213, 0.394533, 2.7755, 1.16577, 7.45665],
];
const BARTEN_SA: [f32; 4] = [30.162, 4.0627, 1.6596, 0.2712];
// Upstream's literals verbatim (more digits than f32 holds; they round the same way).
#[allow(clippy::excessive_precision)]
const BARTEN_MTF_A: [f32; 4] = [
    0.424838596301290,
    0.572435103936480,
    0.000167576239164937,
    0.00255872352306433,
];
const BARTEN_MTF_B: [f32; 4] = [0.028, 0.37, 37.0, 360.0];
/// Luminance (cd/m2) at which the Barten CSF is evaluated.
const BARTEN_LUM: f64 = 100.0;

fn lerp_f32(lp: f32, lv: f32, rp: f32, rv: f32, sp: f32) -> f32 {
    lv + ((rv - lv) / (rp - lp)) * (sp - lp)
}

fn barten_rod_cone_sens(lum: f32) -> f32 {
    let inner = pow((BARTEN_SA[1] / lum) as f64, BARTEN_SA[2] as f64) + 1.0;
    (BARTEN_SA[0] as f64 * pow(inner, -BARTEN_SA[3] as f64)) as f32
}

fn barten_mtf(sf: f32) -> f32 {
    let mut mtf = 0f32;
    for i in 0..4 {
        let e = ((-BARTEN_MTF_B[i] * sf) as f64).exp();
        mtf = (mtf as f64 + BARTEN_MTF_A[i] as f64 * e) as f32;
    }
    mtf
}

fn barten_csf(lambda: usize, nvd: f64, rdh: i32, lum: f64, csf_scale: f64) -> f32 {
    let r = pixels_per_degree(nvd, rdh);
    let sf = (r as f64 / pow(2.0, (lambda + 1) as f64)) as f32;
    let lo = BARTEN_LUM_ANCHORS[0] as f64;
    let hi = BARTEN_LUM_ANCHORS[5] as f64;
    let clamped = if lum > hi {
        hi
    } else if lum < lo {
        lo
    } else {
        lum
    };
    let (mut li, mut ri) = (0, 0);
    for i in 0..5 {
        if clamped >= BARTEN_LUM_ANCHORS[i] as f64 && clamped <= BARTEN_LUM_ANCHORS[i + 1] as f64 {
            li = i;
            ri = i + 1;
            break;
        }
    }
    let lp = (BARTEN_LUM_ANCHORS[li] as f64).log10() as f32;
    let rp = (BARTEN_LUM_ANCHORS[ri] as f64).log10() as f32;
    let sp = clamped.log10() as f32;
    let p = |k: usize| lerp_f32(lp, BARTEN_PARAMS[li][k], rp, BARTEN_PARAMS[ri][k], sp);
    let (p0, p1, p2, p3) = (p(1), p(2), p(3), p(4));
    let a = (1.0 + pow((p0 * sf) as f64, p1 as f64)) as f32;
    // gcc folds `pow(x, 2)` to `x * x`.
    let q = (sf / 7.0) as f64;
    let b = (1.0 / pow(1.0 - (-(q * q)).exp(), p2 as f64)) as f32;
    let csf = (p3 as f64 / pow((a * b) as f64, 0.5)) as f32;
    let prod = csf * barten_mtf(sf) * barten_rod_cone_sens(lum as f32);
    (prod as f64 * csf_scale) as f32
}

// Blended Barten/Watson factors per viewing condition: [theta (0 = h/v, 1 = d)][scale].
type Blend = [[f32; 4]; 2];
const BLEND_1080_3H: Blend = [
    [0.01183, 0.025026, 0.04295, 0.058621],
    [0.004302, 0.011778, 0.023918, 0.035901],
];
const BLEND_1080_5H: Blend = [
    [0.004212, 0.014809, 0.029642, 0.047464],
    [0.000984, 0.005852, 0.0146, 0.027574],
];
const BLEND_2160_3H: Blend = [
    [0.00226, 0.01183, 0.025026, 0.04295],
    [0.000479, 0.004302, 0.011778, 0.023918],
];
const BLEND_2160_5H: Blend = [
    [0.000092, 0.004212, 0.014809, 0.029642],
    [0.000050, 0.000984, 0.005852, 0.0146],
];
const BLEND_720_3H: Blend = [
    [0.018715, 0.035637, 0.052798, 0.061509],
    [0.007999, 0.018396, 0.031851, 0.037718],
];
const BLEND_720_5H: Blend = [
    [0.010144, 0.022561, 0.040309, 0.05672],
    [0.003463, 0.010282, 0.021839, 0.034641],
];
const BLEND_480_3H: Blend = [
    [0.027961, 0.045875, 0.060275, 0.056234],
    [0.013572, 0.026277, 0.036959, 0.034511],
];
const BLEND_480_5H: Blend = [
    [0.016781, 0.032822, 0.05032, 0.061594],
    [0.00691, 0.016545, 0.029917, 0.037777],
];
const BLEND_1080_3H_MAE: Blend = [
    [0.011249, 0.022606, 0.035930, 0.045673],
    [0.004097, 0.010921, 0.021430, 0.031313],
];
const BLEND_1080_5H_MAE: Blend = [
    [0.004052, 0.013939, 0.026298, 0.038833],
    [0.000927, 0.005544, 0.013415, 0.024515],
];
const BLEND_2160_3H_MAE: Blend = [
    [0.002166, 0.011249, 0.022606, 0.035930],
    [0.000447, 0.004097, 0.010921, 0.021430],
];
const BLEND_2160_5H_MAE: Blend = [
    [0.000077, 0.004052, 0.013939, 0.026298],
    [0.000045, 0.000927, 0.005544, 0.013415],
];
const BLEND_720_3H_MAE: Blend = [
    [0.017329, 0.030870, 0.042134, 0.047410],
    [0.007509, 0.016707, 0.028072, 0.032722],
];
const BLEND_720_5H_MAE: Blend = [
    [0.009689, 0.020577, 0.034162, 0.044523],
    [0.003302, 0.009579, 0.019661, 0.030318],
];
const BLEND_480_3H_MAE: Blend = [
    [0.024969, 0.037825, 0.046676, 0.043974],
    [0.012511, 0.023424, 0.032139, 0.030166],
];
const BLEND_480_5H_MAE: Blend = [
    [0.015665, 0.028766, 0.040612, 0.047483],
    [0.006514, 0.015107, 0.026476, 0.032776],
];

/// The blend table for a viewing condition; only a few conditions were fitted.
/// 2160 lines at 1.5H has the same pixels per degree as 1080 lines at 3H.
fn blend_table(mae: bool, nvd: f64, rdh: i32) -> Option<&'static Blend> {
    const CONDITIONS: [(i32, f64, &Blend, &Blend); 9] = [
        (1080, 3.0, &BLEND_1080_3H, &BLEND_1080_3H_MAE),
        (1080, 5.0, &BLEND_1080_5H, &BLEND_1080_5H_MAE),
        (2160, 1.5, &BLEND_1080_3H, &BLEND_1080_3H_MAE),
        (2160, 3.0, &BLEND_2160_3H, &BLEND_2160_3H_MAE),
        (2160, 5.0, &BLEND_2160_5H, &BLEND_2160_5H_MAE),
        (720, 3.0, &BLEND_720_3H, &BLEND_720_3H_MAE),
        (720, 5.0, &BLEND_720_5H, &BLEND_720_5H_MAE),
        (480, 3.0, &BLEND_480_3H, &BLEND_480_3H_MAE),
        (480, 5.0, &BLEND_480_5H, &BLEND_480_5H_MAE),
    ];
    CONDITIONS
        .iter()
        .find(|c| c.0 == rdh && c.1 == nvd)
        .map(|c| if mae { c.3 } else { c.2 })
}

/// The CSF weights `[h/v, d]` of `scale` (0 = finest) as `f32`, or `None` when a blended mode
/// has no table for this viewing condition (upstream then silently uses -EINVAL as a weight).
pub fn csf_factors(
    mode: CsfMode,
    scale: usize,
    nvd: f64,
    rdh: i32,
    csf_scale: f64,
    csf_diag_scale: f64,
) -> Option<[f32; 2]> {
    match mode {
        CsfMode::Watson97 => Some([
            1.0 / watson_quant_step(scale, 1, nvd, rdh),
            1.0 / watson_quant_step(scale, 2, nvd, rdh),
        ]),
        CsfMode::Barten => Some([
            barten_csf(scale, nvd, rdh, BARTEN_LUM, csf_scale),
            barten_csf(scale, nvd, rdh, BARTEN_LUM, csf_diag_scale),
        ]),
        CsfMode::BartenWatsonBlend | CsfMode::BartenWatsonBlendMae => {
            let t = blend_table(mode == CsfMode::BartenWatsonBlendMae, nvd, rdh)?;
            Some([t[0][scale], t[1][scale]])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angle_threshold_is_cos_one_degree_squared() {
        let c = (PI / 180.0).cos();
        assert_eq!((c * c) as f32, COS_1DEG_SQ);
        assert_eq!(COS_1DEG_SQ.to_bits(), 0x3f7f_ec0a);
    }

    #[test]
    fn reciprocal_table() {
        let t = div_lookup();
        assert_eq!(t[1], 1 << 30);
        assert_eq!(t[3], 357913941);
        assert_eq!(t[32768], 32768);
        assert_eq!(t[0], 0);
    }

    #[test]
    fn watson_factors_at_default_viewing_condition() {
        // Bit patterns upstream computes with glibc for nvd=3, rdh=1080.
        let want: [[u32; 2]; 4] = [
            [0x3c8e_63ba, 0x3bc1_06aa],
            [0x3d03_0286, 0x3c6a_46a3],
            [0x3d31_a788, 0x3cc7_dc06],
            [0x3d3b_140b, 0x3d00_41c9],
        ];
        for (s, w) in want.iter().enumerate() {
            let f = csf_factors(CsfMode::Watson97, s, 3.0, 1080, 1.0, 1.0).unwrap();
            assert_eq!([f[0].to_bits(), f[1].to_bits()], *w, "scale {s}");
        }
    }
}
