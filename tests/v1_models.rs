//! VMAF v1.0.16 models through the `vmaf` binary: cambi, speed_chroma, adm3 (csf_mode 2) and
//! motion3 with the models' feature options must reproduce upstream's logs exactly.
//!
//! The model files are the repository's copies of upstream's (`models/`, also built in under
//! their version names; `tests/float.rs` scores every built-in by name).

mod common;

use std::path::PathBuf;

use common::*;

const CLIP: &str = "natural_1920x1080_420p8";

/// Path of model `file` under the repository's `models/`.
fn shared_model(file: &str) -> Option<PathBuf> {
    Some(repo_root().join("models").join(file))
}

/// Scores the clip with model `model` (loaded by path, named `vmaf` as upstream's built-in
/// version is) and compares every metric of upstream's log.
fn check_model(model: &str) {
    let Some(path) = shared_model(&format!("vmaf_v1.0.16/{model}.json")) else {
        return;
    };
    let dir = work_dir(&format!("v1_{model}"));
    let out = arg(&dir, "out.json");
    let mut args = clip_args(CLIP);
    args.extend([
        "--json".into(),
        "-m".into(),
        format!("path={}:name=vmaf", path.display()),
        "-q".into(),
        "-o".into(),
        out.clone(),
    ]);
    vmaf_ok(&args);
    let got = std::fs::read_to_string(&out).expect("read output");
    let expected = parse_json(&expected_text(&format!("{CLIP}.{model}.json")), "expected");
    assert_json_matches(&expected, &parse_json(&got, "output"), &[], model);
}

#[test]
fn vmaf_v1_0_16_3d0h() {
    check_model("vmaf_v1.0.16_3d0h");
}

#[test]
fn vmaf_v1_0_16_5d0h() {
    check_model("vmaf_v1.0.16_5d0h");
}
