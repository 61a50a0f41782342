//! float_motion against upstream's float-build logs (`tests/data/expected_float`).

use super::*;
use crate::testutil::{expected_float as expected, load_parity_clip, PARITY_CLIPS};

/// Runs every frame of `clip`, in order, through each extractor; returns the flushed scores.
fn run(clip: &str, exts: &[&FloatMotion]) -> FeatureCollector {
    let (refs, dists) = load_parity_clip(clip);
    let c = FeatureCollector::new();
    for i in 0..refs.len() {
        let input = FrameInput::pair(i, &refs[i], &dists[i]);
        for x in exts {
            let mut out = Scores::new();
            x.extract(&input, &mut out).unwrap();
            for (name, v) in out {
                c.append(&name, v, i).unwrap();
            }
        }
    }
    for x in exts {
        x.flush(&c).unwrap();
    }
    c
}

fn with(opts: &[(&str, &str)]) -> FloatMotion {
    let mut d = Dict::new();
    for (k, v) in opts {
        d.set(k, v);
    }
    FloatMotion::new(&d).unwrap()
}

/// Every stored feature in `names` prints (`%.6f`, under its alias) as upstream's metric in
/// `log` on every frame.
fn check(c: &FeatureCollector, log: &str, names: &[String]) {
    let want = expected(log);
    let frames = want["frames"].as_array().unwrap();
    assert!(!frames.is_empty());
    for (i, fr) in frames.iter().enumerate() {
        for name in names {
            let printed = crate::feature::alias::alias(name);
            let w = fr["metrics"][printed]
                .as_f64()
                .unwrap_or_else(|| panic!("{log}: upstream has no {printed}"));
            let g = c
                .get(name, i)
                .unwrap_or_else(|| panic!("{log} frame {i}: no {name}"));
            assert_eq!(
                format!("{g:.6}"),
                format!("{w:.6}"),
                "{log} frame {i} {name}"
            );
        }
    }
}

fn names(x: &FloatMotion) -> Vec<String> {
    PROVIDED_FEATURES
        .iter()
        .map(|f| x.feature_name(f))
        .collect()
}

#[test]
fn parity_clips_match_upstream() {
    for clip in PARITY_CLIPS {
        let x = with(&[]);
        let c = run(clip, &[&x]);
        check(&c, &format!("{clip}.float_features.json"), &names(&x));
    }
}

/// The five option sets of upstream's `float_options_motion` runs, on its three clips.
#[test]
fn options_match_upstream() {
    let sets: [&[(&str, &str)]; 5] = [
        &[("motion_filter_size", "3")],
        &[("motion_filter_size", "1")],
        &[("motion_add_scale1", "true")],
        &[
            ("motion_add_uv", "true"),
            ("motion_fps_weight", "2.0"),
            ("motion_max_val", "20"),
        ],
        &[
            ("motion_blend_factor", "0.5"),
            ("motion_blend_offset", "10"),
        ],
    ];
    for clip in [
        "natural_576x324_420p8",
        "mandel_352x288_422p8",
        "testsrc_480x270_444p8",
    ] {
        let xs: Vec<FloatMotion> = sets.iter().map(|s| with(s)).collect();
        let refs: Vec<&FloatMotion> = xs.iter().collect();
        let c = run(clip, &refs);
        let all: Vec<String> = xs.iter().flat_map(names).collect();
        assert!(all.contains(&"motion2_mau_mfw_2_mmxv_20".to_string()));
        assert!(all.contains(&"motion3_mbf_0.5_mbo_10".to_string()));
        check(&c, &format!("{clip}.float_options_motion.json"), &all);
    }
}

/// `motion_force_zero` writes zeros for every frame while extracting and nothing at flush.
#[test]
fn force_zero_matches_upstream() {
    let x = with(&[("motion_force_zero", "true")]);
    assert_eq!(x.dedup_key(), "float_motion_force_0");
    assert_eq!(x.host_planes(), 0);
    let c = run("natural_576x324_420p8", &[&x]);
    let n = names(&x);
    assert_eq!(n, ["motion_force_0", "motion2_force_0", "motion3_force_0"]);
    check(&c, "natural_576x324_420p8.float_options.json", &n);
}

/// `debug=false` drops `motion` (and changes no name).
#[test]
fn debug_off_matches_upstream() {
    let x = with(&[("debug", "false")]);
    assert_eq!(x.dedup_key(), "float_motion");
    let c = run("natural_576x324_420p8", &[&x]);
    assert!(c.get(MOTION_FEATURE, 0).is_none() && c.get(MOTION_FEATURE, 5).is_none());
    check(
        &c,
        "natural_576x324_420p8.float_options_debug.json",
        &[MOTION2_FEATURE.to_string(), MOTION3_FEATURE.to_string()],
    );
}

/// The frame-to-score bookkeeping on a short clip: motion2 is the smaller neighbour, motion3
/// of frame 0 comes from frame 1, the last frame keeps its own score; one frame gives zeros.
#[test]
fn motion2_and_motion3_follow_the_scores() {
    let x = with(&[("motion_blend_factor", "0.5"), ("motion_blend_offset", "1")]);
    let c = run("testsrc_321x241_420p8", &[&x]);
    let sfx = "_mbf_0.5_mbo_1";
    let m = |i| c.get(&format!("motion{sfx}"), i).unwrap();
    let m2 = |i| c.get(&format!("motion2{sfx}"), i).unwrap();
    let m3 = |i| c.get(&format!("motion3{sfx}"), i).unwrap();
    let bl = |v: f64| v * 0.5 + 0.5 * v.min(1.0);
    let n = load_parity_clip("testsrc_321x241_420p8").0.len();
    assert_eq!((m(0), m2(0)), (0.0, 0.0));
    assert_eq!(m3(0), bl(m(1)));
    for i in 1..n - 1 {
        assert_eq!(m2(i), m(i).min(m(i + 1)));
        assert_eq!(m3(i), bl(m2(i)));
    }
    assert_eq!(m2(n - 1), m(n - 1));

    let (refs, dists) = load_parity_clip("life_320x240_420p8");
    let x = with(&[]);
    let c = FeatureCollector::new();
    let mut out = Scores::new();
    x.extract(&FrameInput::pair(0, &refs[0], &dists[0]), &mut out)
        .unwrap();
    for (name, v) in out {
        c.append(&name, v, 0).unwrap();
    }
    x.flush(&c).unwrap();
    for f in PROVIDED_FEATURES {
        assert_eq!(c.get(f, 0), Some(0.0), "{f}");
    }
}

#[test]
fn options_and_bad_input_are_errors() {
    for (k, v) in [
        ("motion_fps_weight", "5.5"),
        ("motion_filter_size", "10"),
        ("motion_blend_factor", "1.5"),
        ("motion_max_val", "-1"),
        ("motion_add_uv", "yes"),
    ] {
        let mut d = Dict::new();
        d.set(k, v);
        assert!(FloatMotion::new(&d).is_err(), "{k}={v}");
    }
    let (refs, dists) = load_parity_clip("testsrc_321x241_420p8");
    let x = with(&[]);
    // Frames must come in order from 0.
    let input = FrameInput::pair(1, &refs[1], &dists[1]);
    assert!(x.extract(&input, &mut Scores::new()).is_err());
    x.extract(
        &FrameInput::pair(0, &refs[0], &dists[0]),
        &mut Scores::new(),
    )
    .unwrap();
    // A picture of another size is refused, not compared.
    use crate::picture::{PictureData, PixelFormat};
    use std::sync::Arc;
    let other = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 64, 48).unwrap());
    let input = FrameInput::pair(1, &other, &other);
    assert!(x.extract(&input, &mut Scores::new()).is_err());
    // Too small for the filter, and chroma asked of a picture without any.
    let tiny = Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 2, 8).unwrap());
    let input = FrameInput::pair(0, &tiny, &tiny);
    assert!(with(&[]).extract(&input, &mut Scores::new()).is_err());
    let gray = Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 16, 16).unwrap());
    let input = FrameInput::pair(0, &gray, &gray);
    assert!(with(&[("motion_add_uv", "true")])
        .extract(&input, &mut Scores::new())
        .is_err());
    assert!(with(&[]).extract(&input, &mut Scores::new()).is_ok());
}
