//! float_vif against upstream's float-build logs (`tests/data/expected_float`).

use super::*;
use crate::testutil::{expected_float as expected, extract_clip, PARITY_CLIPS};

fn with(opts: &[(&str, &str)]) -> FloatVif {
    let mut d = Dict::new();
    for (k, v) in opts {
        d.set(k, v);
    }
    FloatVif::new(&d).unwrap()
}

/// Every score `x` stores on `clip` prints (`%.6f`, under its alias) as upstream's metric in
/// `log`, frame by frame; returns how many values were compared.
fn check(clip: &str, x: &FloatVif, log: &str) -> usize {
    let want = expected(log);
    let frames = want["frames"].as_array().unwrap();
    let got = extract_clip(clip, x);
    assert_eq!(got.len(), frames.len(), "{log}");
    let mut n = 0;
    for (i, (scores, fr)) in got.iter().zip(frames).enumerate() {
        for (name, g) in scores {
            let printed = crate::feature::alias::alias(name);
            let w = fr["metrics"][printed]
                .as_f64()
                .unwrap_or_else(|| panic!("{log}: upstream has no {printed}"));
            assert_eq!(
                format!("{g:.6}"),
                format!("{w:.6}"),
                "{log} frame {i} {printed}"
            );
            n += 1;
        }
    }
    n
}

#[test]
fn parity_clips_match_upstream() {
    let x = with(&[]);
    for clip in PARITY_CLIPS {
        let n = check(clip, &x, &format!("{clip}.float_features.json"));
        assert_eq!(n % 4, 0);
        assert!(n > 0);
    }
}

#[test]
fn gain_limit_matches_upstream() {
    let x = with(&[("vif_enhn_gain_limit", "1.0")]);
    assert_eq!(x.dedup_key(), "float_vif_egl_1");
    check(
        "natural_576x324_420p8",
        &x,
        "natural_576x324_420p8.float_options.json",
    );
}

#[test]
fn debug_outputs_match_upstream() {
    let x = with(&[("debug", "true")]);
    assert_eq!(x.dedup_key(), "float_vif");
    let n = check(
        "natural_576x324_420p8",
        &x,
        "natural_576x324_420p8.float_options_debug.json",
    );
    assert_eq!(n % PROVIDED_FEATURES.len(), 0);
}

#[test]
fn kernelscale_min_val_sigma_and_skip_match_upstream() {
    let log = "natural_576x324_420p8.float_options_vif.json";
    for opts in [
        &[
            ("vif_kernelscale", "0.5"),
            ("vif_sigma_nsq", "1.0"),
            ("vif_scale1_min_val", "0.8"),
        ][..],
        &[
            ("vif_skip_scale0", "true"),
            ("vif_scale2_min_val", "0.9"),
            ("vif_scale3_min_val", "0.95"),
        ],
        &[("vif_kernelscale", "1.5")],
    ] {
        check("natural_576x324_420p8", &with(opts), log);
    }
    let x = with(&[("vif_skip_scale0", "true"), ("debug", "true")]);
    let out = &extract_clip("testsrc_321x241_420p8", &x)[0];
    let get = |n: &str| out.iter().find(|(k, _)| k == n).unwrap().1;
    assert_eq!(get("vif_scale0_ssclz"), 0.0);
    assert_eq!(get("vif_num_scale0_ssclz"), 0.0);
    assert_eq!(get("vif_den_scale0_ssclz"), -1.0);
    let sum: f64 = (1..4)
        .map(|i| get(&format!("vif_num_scale{i}_ssclz")))
        .sum();
    assert_eq!(get("vif_num_ssclz"), sum);
}

#[test]
fn prescale_methods_match_upstream() {
    let log = "natural_576x324_420p8.float_options_vif_prescale.json";
    for opts in [
        &[("vif_prescale", "0.5"), ("vif_prescale_method", "bilinear")][..],
        &[("vif_prescale", "1.5"), ("vif_prescale_method", "bicubic")],
        &[
            ("vif_prescale", "0.75"),
            ("vif_prescale_method", "lanczos4"),
        ],
        &[("vif_prescale", "2.0")],
    ] {
        check("natural_576x324_420p8", &with(opts), log);
    }
}

#[test]
fn stored_names_follow_options() {
    let x = with(&[("vif_prescale_method", "bicubic"), ("vif_prescale", "1.5")]);
    assert_eq!(
        x.feature_name("VMAF_feature_vif_scale2_score"),
        "vif_scale2_ps_1.5_pm_bicubic"
    );
    assert_eq!(x.feature_name("vif_num"), "vif_num_ps_1.5_pm_bicubic");
    // The default method, even when given, changes no name.
    let x = with(&[("vif_prescale_method", "nearest")]);
    assert_eq!(x.dedup_key(), "float_vif");
    let x = with(&[("vif_sigma_nsq", "1"), ("vif_enhn_gain_limit", "50")]);
    assert_eq!(x.feature_name("vif"), "vif_egl_50_snsq_1");
}

#[test]
fn bad_options_and_pictures_are_errors() {
    for (k, v) in [
        ("vif_kernelscale", "1.3"),
        ("vif_kernelscale", "5"),
        ("vif_prescale_method", "cubic"),
        ("vif_prescale", "0.05"),
        ("vif_enhn_gain_limit", "0.5"),
        ("vif_sigma_nsq", "6"),
        ("vif_skip_scale0", "1"),
    ] {
        let mut d = Dict::new();
        d.set(k, v);
        assert!(FloatVif::new(&d).is_err(), "{k}={v}");
    }
    use crate::picture::{PictureData, PixelFormat};
    use std::sync::Arc;
    let small = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 20, 12).unwrap());
    let big = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 64, 64).unwrap());
    let deep = Arc::new(PictureData::new(PixelFormat::Yuv420p, 10, 64, 64).unwrap());
    let x = with(&[]);
    for (a, b) in [(&small, &small), (&big, &small), (&big, &deep)] {
        let input = FrameInput::pair(0, a, b);
        assert!(x.extract(&input, &mut Scores::new()).is_err());
    }
    let input = FrameInput::pair(0, &big, &big);
    assert!(x.extract(&input, &mut Scores::new()).is_ok());
    // Lanczos needs 6 samples each way to upsample from.
    let tiny = Arc::new(PictureData::new(PixelFormat::Yuv444p, 8, 5, 5).unwrap());
    let x = with(&[("vif_prescale", "4"), ("vif_prescale_method", "lanczos4")]);
    let input = FrameInput::pair(0, &tiny, &tiny);
    assert!(x.extract(&input, &mut Scores::new()).is_err());
}
