"""Bad arguments to score_files raise ValueError, unreadable files OSError; never a crash."""

import pytest

import vmaf_hip
from conftest import clip


def test_bad_arguments(tmp_path):
    r, d = clip("testsrc_321x241_420p8", "ref"), clip("testsrc_321x241_420p8", "dist")
    bad = [
        dict(model="no_such_model"),
        dict(model=["vmaf_v0.6.1", "vmaf_v0.6.1neg"]),  # two models named "vmaf"
        dict(model="version=vmaf_v0.6.1:bogus"),
        dict(model=3),
        dict(features=["no_such_feature"]),
        dict(features=["psnr=enable_chroma"]),
        dict(features=[("psnr", {"enable_chroma": object()})]),
        dict(backend="cuda"),
        dict(device=1),
        dict(threads=-1),
        dict(threads=10**6),
        dict(subsample="2"),
        dict(width=352),  # raw input needs all four
        dict(width=352, height=288, pixel_format="411", bitdepth=8),
        dict(width=352, height=288, pixel_format="420", bitdepth=9),
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            vmaf_hip.score_files(r, d, **kw)
    with pytest.raises(ValueError, match="incompatible"):
        vmaf_hip.score_files(r, clip("natural_320x180_420p12", "dist"))
    with pytest.raises(ValueError):
        vmaf_hip.score_files(r, d, frame_skip_ref=1000)


def test_file_errors(tmp_path):
    r = clip("testsrc_321x241_420p8", "ref")
    with pytest.raises(FileNotFoundError):
        vmaf_hip.score_files(tmp_path / "missing.y4m", r)
    with pytest.raises(OSError):
        vmaf_hip.score_files(tmp_path, r)
    junk = tmp_path / "junk.y4m"
    junk.write_bytes(b"not a y4m file\n")
    with pytest.raises(ValueError):
        vmaf_hip.score_files(junk, r)
    truncated = tmp_path / "short.y4m"
    truncated.write_bytes(r.read_bytes()[:100000])
    with pytest.raises((ValueError, OSError)):
        vmaf_hip.score_files(truncated, r)


def test_no_device_error_is_runtime_error():
    assert issubclass(vmaf_hip.NoDeviceError, RuntimeError)
    if vmaf_hip.gpu_unavailable_reason() is not None:
        with pytest.raises(vmaf_hip.NoDeviceError):
            vmaf_hip.score_files(clip("testsrc_321x241_420p8", "ref"),
                                 clip("testsrc_321x241_420p8", "dist"), backend="hip")


def test_a_panic_in_the_library_is_a_runtime_error():
    # A bug that panics must reach Python as an exception `except Exception` catches, not as
    # PyO3's PanicException (a BaseException).
    from vmaf_hip import _native

    with pytest.raises(RuntimeError, match="internal error"):
        _native._test_panic()
