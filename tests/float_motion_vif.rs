//! `float_motion` and `float_vif` through the `vmaf` binary against upstream v3.2.0's
//! float-build logs (`tests/data/expected_float/`, provenance and command lines in its README),
//! value for value, per frame and pooled.
//!
//! The `float_options` and `float_options_debug` runs also had `float_adm` instances; those
//! are left out here (and so are their metrics): extractors do not affect one another.

mod common;

use common::*;

const G8: &str = "natural_576x324_420p8";

/// The metrics the two extractors print with default options (the default model also writes
/// `integer_motion2` and the like, which are not theirs).
const DEFAULT_METRICS: [&str; 7] = [
    "motion",
    "motion2",
    "motion3",
    "vif_scale0",
    "vif_scale1",
    "vif_scale2",
    "vif_scale3",
];

/// Metrics of float_motion (`motion`, `motion2`, `motion3` with any option suffix) and
/// float_vif (`vif`, `vif_*`), not those of the integer extractors or the model.
fn is_float_motion_or_vif(name: &str) -> bool {
    let motion = ["motion", "motion2", "motion3"]
        .iter()
        .any(|m| name == *m || name.starts_with(&format!("{m}_")));
    motion || name == "vif" || name.starts_with("vif_")
}

#[test]
fn every_clip_matches_upstream() {
    for clip in PARITY_CLIPS {
        let got = run_json(
            &format!("float_motion_vif_{clip}"),
            clip,
            &["--feature", "float_motion", "--feature", "float_vif"],
        );
        check_float_metrics(&format!("{clip}.float_features.json"), &got, &|k| {
            DEFAULT_METRICS.contains(&k)
        });
    }
}

/// `float_options.json`: the gain limit and forced-zero motion, beside the default model.
#[test]
fn gain_limit_and_force_zero() {
    let got = run_json(
        "float_motion_vif_options",
        G8,
        &[
            "--feature",
            "float_vif=vif_enhn_gain_limit=1.0",
            "--feature",
            "float_motion=motion_force_zero=true",
        ],
    );
    check_float_metrics(&format!("{G8}.float_options.json"), &got, &|k| {
        (k.starts_with("vif_") && k.ends_with("_egl_1")) || k.ends_with("_force_0")
    });
}

/// `float_options_debug.json`: float_vif's debug outputs, float_motion without its `motion`.
#[test]
fn debug_outputs() {
    let got = run_json(
        "float_motion_vif_debug",
        G8,
        &[
            "-n",
            "--feature",
            "float_vif=debug=true",
            "--feature",
            "float_motion=debug=false",
        ],
    );
    assert!(got["frames"][0]["metrics"].get("motion").is_none());
    check_float_metrics(
        &format!("{G8}.float_options_debug.json"),
        &got,
        &is_float_motion_or_vif,
    );
}

/// `float_options_vif.json`: three float_vif instances with kernel scales, noise variance,
/// minimum values and scale 0 skipped.
#[test]
fn vif_options() {
    let got = run_json(
        "float_vif_options",
        G8,
        &[
            "-n",
            "--feature",
            "float_vif=vif_kernelscale=0.5:vif_sigma_nsq=1.0:vif_scale1_min_val=0.8",
            "--feature",
            "float_vif=vif_skip_scale0=true:vif_scale2_min_val=0.9:vif_scale3_min_val=0.95",
            "--feature",
            "float_vif=vif_kernelscale=1.5",
        ],
    );
    check_float_metrics(&format!("{G8}.float_options_vif.json"), &got, &|_| true);
}

/// `float_options_vif_prescale.json`: prescaling with each method.
#[test]
fn vif_prescale() {
    let got = run_json(
        "float_vif_prescale",
        G8,
        &[
            "-n",
            "--feature",
            "float_vif=vif_prescale=0.5:vif_prescale_method=bilinear",
            "--feature",
            "float_vif=vif_prescale=1.5:vif_prescale_method=bicubic",
            "--feature",
            "float_vif=vif_prescale=0.75:vif_prescale_method=lanczos4",
            "--feature",
            "float_vif=vif_prescale=2.0",
        ],
    );
    check_float_metrics(
        &format!("{G8}.float_options_vif_prescale.json"),
        &got,
        &|_| true,
    );
}

/// `<clip>.float_options_motion.json`: five float_motion instances (filter sizes, scale 1,
/// chroma with fps weight and cap, blending) on a 4:2:0, a 4:2:2 and a 4:4:4 clip.
#[test]
fn motion_options() {
    for clip in [G8, "mandel_352x288_422p8", "testsrc_480x270_444p8"] {
        let got = run_json(
            &format!("float_motion_options_{clip}"),
            clip,
            &[
                "-n",
                "--feature",
                "float_motion=motion_filter_size=3",
                "--feature",
                "float_motion=motion_filter_size=1",
                "--feature",
                "float_motion=motion_add_scale1=true",
                "--feature",
                "float_motion=motion_add_uv=true:motion_fps_weight=2.0:motion_max_val=20",
                "--feature",
                "float_motion=motion_blend_factor=0.5:motion_blend_offset=10",
            ],
        );
        check_float_metrics(&format!("{clip}.float_options_motion.json"), &got, &|_| {
            true
        });
    }
}
