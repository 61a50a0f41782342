//! VMAF v1.0.16 models through the `vmaf` binary: cambi, speed_chroma, adm3 (csf_mode 2) and
//! motion3 with the models' feature options must reproduce upstream's logs exactly.
//!
//! The model files are upstream test data kept outside the repository (`../shared/models`);
//! without them the tests print a note and pass.

mod common;

use std::path::PathBuf;

use common::*;

const CLIP: &str = "natural_1920x1080_420p8";

/// Path of model `file` under `../shared/models`, or `None` when that folder is absent.
fn shared_model(file: &str) -> Option<PathBuf> {
    let dir = repo_root().join("../shared/models");
    if !dir.is_dir() {
        println!("skipped: ../shared/models not found");
        return None;
    }
    Some(dir.join(file))
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
