//! `float_adm` through the `vmaf` binary against upstream v3.2.0's float build
//! (`tests/data/expected_float/`, provenance and command lines in its README), value for value.

mod common;

use common::*;

const G8: &str = "natural_576x324_420p8";

/// float_adm's scores in a log (any option suffix; the integer ones start with `integer_`).
fn is_adm(k: &str) -> bool {
    k.starts_with("adm") || k.starts_with("aim")
}

/// Every clip (8/10/12-bit, 4:2:0/4:2:2/4:4:4, odd sizes): the seven default scores per frame
/// and pooled.
#[test]
fn parity_clips() {
    for clip in PARITY_CLIPS {
        let got = run_json(
            &format!("float_adm_{clip}"),
            clip,
            &["-n", "--feature", "float_adm"],
        );
        check_float_metrics(&format!("{clip}.float_features.json"), &got, &|k| {
            matches!(
                k,
                "adm2" | "aim" | "adm3" | "adm_scale0" | "adm_scale1" | "adm_scale2" | "adm_scale3"
            )
        });
    }
}

/// `float_options_adm.json`: six instances with CSF modes, viewing conditions, noise weight,
/// p-norm, min value, DLM weight, harmonic mean, bypassed masking, skipped scales and
/// per-scale CSF factors, with upstream's exact flags.
#[test]
fn options_adm() {
    let got = run_json(
        "float_adm_options",
        G8,
        &[
            "-n",
            "--feature",
            "float_adm=adm_csf_mode=1:adm_norm_view_dist=1.5:adm_ref_display_height=2160",
            "--feature",
            "float_adm=adm_csf_mode=2",
            "--feature",
            "float_adm=adm_noise_weight=0.02:adm_min_val=0.5:adm_dlm_weight=0.7:\
             adm_p_norm=2.0:adm_csf_scale=1.5:adm_csf_diag_scale=0.8",
            "--feature",
            "float_adm=adm_adm3_apply_hm=true:adm_bypass_cm=1",
            "--feature",
            "float_adm=adm_skip_scale0=true:adm_skip_aim_scale=1",
            "--feature",
            "float_adm=adm_f1s0=0.5:adm_f2s3=2.0",
        ],
    );
    check_float_metrics(&format!("{G8}.float_options_adm.json"), &got, &|_| true);
}

/// The float_adm part of `float_options_debug.json` (`debug=true`: the total and per-scale
/// numerators and denominators too).
#[test]
fn options_debug() {
    let got = run_json(
        "float_adm_debug",
        G8,
        &["-n", "--feature", "float_adm=debug=true"],
    );
    check_float_metrics(&format!("{G8}.float_options_debug.json"), &got, &is_adm);
}

/// The float_adm part of `float_options.json` (`adm_enhn_gain_limit=1.0`).
#[test]
fn options_gain_limit() {
    let got = run_json(
        "float_adm_egl",
        G8,
        &["-n", "--feature", "float_adm=adm_enhn_gain_limit=1.0"],
    );
    check_float_metrics(&format!("{G8}.float_options.json"), &got, &|k| {
        is_adm(k) && k.ends_with("_egl_1")
    });
}
