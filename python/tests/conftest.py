"""Shared helpers: the parity clips (decompressed into the repository's target/testdata, as
the Rust tests do), the `vmaf` command's JSON for them, y4m frames as NumPy planes, and the
GPU gate (skip with reason "no device", or fail under VMAF_TEST_REQUIRE_GPU=1)."""

from __future__ import annotations

import csv
import json
import lzma
import re
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(os.environ.get("VMAF_HIP_REPO", Path(__file__).resolve().parents[2]))
TESTDATA = REPO / "target" / "testdata"

# Clip name -> raw parameters (None for y4m).
CLIPS = {
    "life_320x240_420p8": None,
    "mandel_352x288_422p8": dict(width=352, height=288, pixel_format="422", bitdepth=8),
    "natural_1920x1080_420p8": None,
    "natural_320x180_420p12": None,
    "natural_576x324_420p8": None,
    "natural_640x360_420p10": None,
    "testsrc_321x241_420p8": None,
    "testsrc_480x270_444p8": None,
}


def clip(name: str, side: str) -> Path:
    """The decompressed `side` ("ref"/"dist") file of parity clip `name`."""
    ext = "yuv" if CLIPS[name] else "y4m"
    out = TESTDATA / f"{side}_{name}.{ext}"
    if not out.exists():
        TESTDATA.mkdir(parents=True, exist_ok=True)
        src = REPO / "tests" / "data" / "clips" / f"{out.name}.xz"
        fd, tmp = tempfile.mkstemp(dir=TESTDATA, suffix=".part")
        # Python's lzma, not the xz tool: the GPU machine may lack it.
        with os.fdopen(fd, "wb") as f, lzma.open(src) as z:
            shutil.copyfileobj(z, f, 1 << 20)
        os.replace(tmp, out)
    return out


def vmaf_bin() -> Path:
    """The `vmaf` command of this repository (VMAF_BIN, else target/release/vmaf, built if
    missing)."""
    env = os.environ.get("VMAF_BIN")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    exe = target / "release" / "vmaf"
    if not exe.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--bin", "vmaf"], cwd=REPO, check=True
        )
    return exe


def have_vmaf_bin() -> bool:
    """Whether the `vmaf` command is there or can be built (not on a machine without Rust)."""
    env = os.environ.get("VMAF_BIN")
    if env:
        return Path(env).exists()
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return (target / "release" / "vmaf").exists() or shutil.which("cargo") is not None


def raw_args(raw) -> list:
    if not raw:
        return []
    return ["-w", str(raw["width"]), "-h", str(raw["height"]), "-p", raw["pixel_format"],
            "-b", str(raw["bitdepth"])]


def cli_json(name: str, *args: str, tmp_path: Path) -> dict:
    """What `vmaf --json` writes for parity clip `name` with `args`."""
    out = tmp_path / f"{name}.cli.json"
    cmd = [str(vmaf_bin()), "-r", str(clip(name, "ref")), "-d", str(clip(name, "dist")),
           "-q", "--json", "-o", str(out), *raw_args(CLIPS[name]), *args]
    subprocess.run(cmd, check=True)
    with open(out) as f:
        return json.load(f)


def same_scores(got: dict, want: dict) -> None:
    """Every per-frame and pooled value equal (fps, a timing, aside)."""
    got, want = dict(got), dict(want)
    got.pop("fps", None)
    want.pop("fps", None)
    assert got.keys() == want.keys()
    assert got["version"] == want["version"]
    assert len(got["frames"]) == len(want["frames"])
    for g, w in zip(got["frames"], want["frames"]):
        assert g == w, f"frame {w['frameNum']}"
    assert got["pooled_metrics"] == want["pooled_metrics"]
    assert got["aggregate_metrics"] == want["aggregate_metrics"]


def read_y4m(path: Path):
    """Frames of a y4m file as lists of NumPy planes, in the file's layout (chroma rounded
    up), with the bit depth."""
    np = pytest.importorskip("numpy")
    data = path.read_bytes()
    head, _, rest = data.partition(b"\n")
    fields = head.split()
    assert fields[0] == b"YUV4MPEG2"
    w = h = None
    cs = "420"
    for f in fields[1:]:
        if f[:1] == b"W":
            w = int(f[1:])
        elif f[:1] == b"H":
            h = int(f[1:])
        elif f[:1] == b"C":
            cs = f[1:].decode()
    m = re.match(r"(\d{3})(?:p(\d+))?", cs)
    sub, depth = m.group(1), int(m.group(2) or 8)
    cw = {"420": (w + 1) // 2, "422": (w + 1) // 2, "444": w}[sub]
    ch = {"420": (h + 1) // 2, "422": h, "444": h}[sub]
    dtype = np.uint8 if depth == 8 else np.dtype("<u2")
    bps = 1 if depth == 8 else 2
    shapes = [(h, w), (ch, cw), (ch, cw)]
    frames = []
    pos = 0
    while pos < len(rest):
        nl = rest.index(b"\n", pos)
        assert rest[pos:pos + 5] == b"FRAME"
        pos = nl + 1
        planes = []
        for shp in shapes:
            n = shp[0] * shp[1] * bps
            a = np.frombuffer(rest, dtype=dtype, count=shp[0] * shp[1], offset=pos)
            planes.append(a.reshape(shp).astype(np.uint8 if depth == 8 else np.uint16))
            pos += n
        frames.append(planes)
    return frames, depth


def gpu_or_skip() -> None:
    """Skips (reason "no device") without a usable GPU; fails instead under
    VMAF_TEST_REQUIRE_GPU=1."""
    import vmaf_hip

    why = vmaf_hip.gpu_unavailable_reason()
    if why is None:
        return
    if os.environ.get("VMAF_TEST_REQUIRE_GPU") == "1":
        pytest.fail(f"no device (VMAF_TEST_REQUIRE_GPU=1): {why}")
    pytest.skip("no device")


@pytest.fixture(scope="session")
def cli_cache(tmp_path_factory):
    """`vmaf --json` output per (clip, args), computed once."""
    cache = {}
    tmp = tmp_path_factory.mktemp("cli")

    def get(name: str, *args: str) -> dict:
        key = (name, args)
        if key not in cache:
            cache[key] = cli_json(name, *args, tmp_path=tmp)
        return cache[key]

    return get


def write_pairs(path, names):
    """A catalog CSV of the parity clips `names` (their id is their name)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ref", "dist", "width", "height", "pixel_format", "bitdepth", "id"])
        for n in names:
            raw = CLIPS[n] or {}
            w.writerow([clip(n, "ref"), clip(n, "dist"), raw.get("width", ""),
                        raw.get("height", ""), raw.get("pixel_format", ""),
                        raw.get("bitdepth", ""), n])


def semiplanar(planes, shift=0):
    """The luma and interleaved chroma (Cb, Cr pairs) of planar 4:2:0 NumPy planes, as
    hardware decoders store NV12/P010 frames, the samples shifted into the high bits."""
    np = pytest.importorskip("numpy")
    y, u, v = planes
    h, w = y.shape
    cw, ch = w // 2, h // 2
    uv = np.empty((ch, 2 * cw), dtype=y.dtype)
    uv[:, 0::2] = u[:ch, :cw]
    uv[:, 1::2] = v[:ch, :cw]
    return [y << shift, uv << shift]
