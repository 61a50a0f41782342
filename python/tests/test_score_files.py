"""score_files equals the `vmaf` command's JSON on the parity clips, value for value."""

import json

import pytest

import vmaf_hip
from conftest import CLIPS, REPO, clip, same_scores


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_default_model_equals_cli(name, cli_cache):
    got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), threads=2,
                               **(CLIPS[name] or {}))
    same_scores(got, cli_cache(name, "--threads", "2"))
    assert got["pooled_metrics"]["vmaf"]["mean"] > 0


@pytest.mark.parametrize("name", ["natural_320x180_420p12", "testsrc_321x241_420p8",
                                  "mandel_352x288_422p8"])
def test_features_equal_cli(name, cli_cache):
    feats = ["psnr", "float_ssim", "float_ms_ssim", "cambi"]
    got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), features=feats,
                               **(CLIPS[name] or {}))
    args = [a for f in feats for a in ("--feature", f)]
    same_scores(got, cli_cache(name, *args))


def test_equals_upstream_log():
    """The default model's scores equal upstream libvmaf's own JSON for the clip."""
    name = "natural_576x324_420p8"
    got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"))
    with open(REPO / "tests/data/expected/natural_576x324_420p8.default.json") as f:
        same_scores(got, json.load(f))


def test_options_equal_cli(cli_cache):
    name = "natural_576x324_420p8"
    r, d = clip(name, "ref"), clip(name, "dist")
    same_scores(vmaf_hip.score_files(r, d, subsample=3), cli_cache(name, "--subsample", "3"))
    same_scores(
        vmaf_hip.score_files(r, d, model=["vmaf_v0.6.1", "version=vmaf_v0.6.1neg:name=neg"]),
        cli_cache(name, "-m", "version=vmaf_v0.6.1", "-m", "version=vmaf_v0.6.1neg:name=neg"),
    )
    same_scores(
        vmaf_hip.score_files(r, d, model=None, features=[("psnr", {"enable_chroma": False})]),
        cli_cache(name, "-n", "--feature", "psnr=enable_chroma=false"),
    )
    same_scores(
        vmaf_hip.score_files(r, d, frame_cnt=5, frame_skip_ref=2, frame_skip_dist=1),
        cli_cache(name, "--frame_cnt", "5", "--frame_skip_ref", "2", "--frame_skip_dist", "1"),
    )
    same_scores(
        vmaf_hip.score_files(r, d, model="vmaf_b_v0.6.3"),
        cli_cache(name, "-m", "version=vmaf_b_v0.6.3"),
    )


def test_model_from_path(cli_cache):
    name = "testsrc_321x241_420p8"
    path = REPO / "models" / "vmaf_v0.6.1neg.json"
    if not path.exists():
        pytest.skip("no model file vmaf_v0.6.1neg.json under models/")
    got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), model=path)
    same_scores(got, cli_cache(name, "-m", f"path={path}"))


def test_version():
    assert vmaf_hip.libvmaf_version == "3.2.0"
    assert vmaf_hip.__version__.count(".") == 2


@pytest.mark.parametrize("model", ["vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_hfr_5d0h"])
def test_v1_models_by_name_equal_upstream_log(model):
    """Netflix's v1.0.16 models by their built-in names give upstream's own JSON."""
    name = "natural_576x324_420p8"
    got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), model=model, threads=2)
    with open(REPO / f"tests/data/expected_float/{name}.{model}.json") as f:
        same_scores(got, json.load(f))


def test_float_model_and_extractors_equal_upstream_log():
    """Upstream's float model and float extractors by name give upstream's own JSON."""
    name = "natural_576x324_420p8"
    r, d = clip(name, "ref"), clip(name, "dist")
    with open(REPO / f"tests/data/expected_float/{name}.vmaf_float_v0.6.1.json") as f:
        same_scores(vmaf_hip.score_files(r, d, model="vmaf_float_v0.6.1", threads=2),
                    json.load(f))
    feats = ["float_psnr", "float_ansnr", "float_moment", "float_vif", "float_adm",
             "float_motion"]
    with open(REPO / f"tests/data/expected_float/{name}.float_features.json") as f:
        same_scores(vmaf_hip.score_files(r, d, features=feats, threads=2), json.load(f))
