//! `float_psnr`, `float_ansnr` and `float_moment` through the `vmaf` binary on every float
//! parity clip, against upstream's float-build logs (`tests/data/expected_float/`).

mod common;

use common::*;

#[test]
fn psnr_ansnr_moment_match_upstream() {
    for clip in PARITY_CLIPS {
        let got = run_json(
            &format!("float_simple_{clip}"),
            clip,
            &[
                "--feature",
                "float_psnr",
                "--feature",
                "float_ansnr",
                "--feature",
                "float_moment",
            ],
        );
        // The logs' `float_*` metrics are exactly these extractors' seven scores.
        let keep = |name: &str| name.starts_with("float_");
        check_float_metrics(&format!("{clip}.float_features.json"), &got, &keep);
    }
}
