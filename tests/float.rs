//! Upstream's float extractors, float models, VMAF v1.0.16 built-ins and `null` through the
//! `vmaf` binary: upstream v3.2.0's `-Denable_float=true` build's logs
//! (`tests/data/expected_float/`, provenance in its README) reproduced value for value.

mod common;

use common::*;

const G8: &str = "natural_576x324_420p8";

/// The VMAF v1.0.16 models are built in under upstream's names.
#[test]
fn v1_0_16_builtins() {
    for model in [
        "vmaf_v1.0.16_3d0h",
        "vmaf_v1.0.16_3d0h_2160",
        "vmaf_v1.0.16_5d0h",
        "vmaf_v1.0.16_1d5h_2160",
        "vmaf_v1.0.16_hfr_3d0h",
        "vmaf_v1.0.16_hfr_3d0h_2160",
        "vmaf_v1.0.16_hfr_5d0h",
        "vmaf_v1.0.16_hfr_1d5h_2160",
    ] {
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
