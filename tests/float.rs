//! Upstream's float extractors, float models, VMAF v1.0.16 built-ins and `null` through the
//! `vmaf` binary: upstream v3.2.0's `-Denable_float=true` build's logs
//! (`tests/data/expected_float/`, provenance in its README) reproduced value for value.

mod common;

use common::*;

const G8: &str = "natural_576x324_420p8";

/// The VMAF v1.0.16 models are built in under upstream's names.
#[test]
fn v1_0_16_builtins() {
    // The names themselves are checked against upstream's table in the model unit tests.
    let v1: Vec<&str> = vmaf_hip::model::builtin_versions()
        .filter(|v| v.starts_with("vmaf_v1.0.16"))
        .collect();
    assert_eq!(v1.len(), 8, "{v1:?}");
    for model in v1 {
        let got = run_json(
            &format!("builtin_{model}"),
            G8,
            &["-m", &format!("version={model}")],
        );
        check_float_metrics(&format!("{G8}.{model}.json"), &got, &|_| true);
    }
}

/// `null` computes nothing and is accepted.
#[test]
fn null_extractor() {
    let got = run_json("null", G8, &["--feature", "null"]);
    check_float_metrics(&format!("{G8}.null.json"), &got, &|_| true);
}

/// The six float extractors flags upstream's float-feature logs were made with.
const FLOAT_FEATURES: &[&str] = &[
    "--feature",
    "float_psnr",
    "--feature",
    "float_ansnr",
    "--feature",
    "float_moment",
    "--feature",
    "float_vif",
    "--feature",
    "float_adm",
    "--feature",
    "float_motion",
];

/// Every float extractor together with the default model, on every clip: every value of
/// upstream's log (the integer features and VMAF included).
#[test]
fn all_float_features_with_the_default_model() {
    for clip in PARITY_CLIPS {
        let got = run_json(&format!("float_all_{clip}"), clip, FLOAT_FEATURES);
        check_float_metrics(&format!("{clip}.float_features.json"), &got, &|_| true);
    }
}

/// `vmaf_float_v0.6.1` by name on every clip.
#[test]
fn float_model_on_every_clip() {
    for clip in PARITY_CLIPS {
        let got = run_json(
            &format!("float_model_{clip}"),
            clip,
            &["-m", "version=vmaf_float_v0.6.1"],
        );
        check_float_metrics(&format!("{clip}.vmaf_float_v0.6.1.json"), &got, &|_| true);
    }
}

/// The other float built-ins (a collection among them), and a float model loaded by path.
#[test]
fn other_float_models() {
    for model in [
        "vmaf_float_b_v0.6.3",
        "vmaf_float_v0.6.1neg",
        "vmaf_float_4k_v0.6.1",
    ] {
        let got = run_json(
            &format!("float_{model}"),
            G8,
            &["-m", &format!("version={model}")],
        );
        check_float_metrics(&format!("{G8}.{model}.json"), &got, &|_| true);
    }
    let path = repo_root().join("models/vmaf_float_v0.6.1.json");
    let got = run_json(
        "float_model_by_path",
        G8,
        &["-m", &format!("path={}:name=vmaf", path.display())],
    );
    check_float_metrics(&format!("{G8}.vmaf_float_v0.6.1.json"), &got, &|_| true);
}

/// The float extractors' logs in XML, CSV and SUB: byte for byte upstream's (but `fps`).
/// Without `float_motion`: upstream appends its frame-0 `motion3` while scoring frame 1, so
/// where that column lands depends on thread timing there (its values are compared above).
#[test]
fn float_features_in_every_format() {
    if !divides_as_reference_host() {
        // The layout is the CPU's no more than the values are; it is checked where the
        // float_adm values match the logs exactly.
        println!("skipped: float_adm's last digits differ from the reference host's here");
        return;
    }
    for (flag, ext) in [("--xml", "xml"), ("--csv", "csv"), ("--sub", "sub")] {
        let dir = work_dir(&format!("float_format_{ext}"));
        let out = arg(&dir, &format!("out.{ext}"));
        let mut args = clip_args(G8);
        args.extend(FLOAT_FEATURES[..10].iter().map(|s| s.to_string()));
        args.extend([flag, "-q", "--threads", "2", "-o", &out].map(String::from));
        vmaf_ok(&args);
        let got = std::fs::read_to_string(&out).unwrap();
        let p = repo_root().join(format!(
            "tests/data/expected_float/{G8}.float_nomotion.{ext}"
        ));
        assert_same_log(&got, &std::fs::read_to_string(&p).unwrap(), ext);
    }
}

/// The float model's scores do not depend on the CPU level (`--cpumask`) or the thread count.
#[test]
fn float_model_at_every_cpu_level() {
    let want = run_json(
        "float_levels_base",
        G8,
        &["-m", "version=vmaf_float_v0.6.1"],
    );
    for mask in ["255", "16", "8"] {
        let got = run_json(
            &format!("float_levels_{mask}"),
            G8,
            &["-m", "version=vmaf_float_v0.6.1", "--cpumask", mask],
        );
        assert_json_matches(&want, &got, &[], &format!("cpumask {mask}"));
    }
}

/// Upstream's float option logs whole: every extractor of each command line together.
#[test]
fn float_option_logs() {
    for (file, flags) in [
        (
            "float_options",
            &[
                "--feature",
                "float_vif=vif_enhn_gain_limit=1.0",
                "--feature",
                "float_adm=adm_enhn_gain_limit=1.0",
                "--feature",
                "float_motion=motion_force_zero=true",
            ][..],
        ),
        (
            "float_options_debug",
            &[
                "-n",
                "--feature",
                "float_vif=debug=true",
                "--feature",
                "float_adm=debug=true",
                "--feature",
                "float_motion=debug=false",
            ][..],
        ),
    ] {
        let got = run_json(file, G8, flags);
        check_float_metrics(&format!("{G8}.{file}.json"), &got, &|_| true);
    }
}
