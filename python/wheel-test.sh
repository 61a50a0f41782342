#!/usr/bin/env bash
# The wheel a Python user installs, built and checked as a packager would:
#   1. maturin --zig builds the abi3 wheel for manylinux2014 (glibc 2.17: Ubuntu 20.04, RHEL 8,
#      Debian 11 and newer), with the library's embedded GPU code; zig comes from PyPI
#      (ziglang), in a build venv of its own;
#   2. auditwheel must find it consistent with manylinux_2_17 (no newer glibc symbols, no
#      libraries outside the policy);
#   3. a fresh venv with no Rust toolchain on PATH installs it and scores a clip pair, which
#      must equal the CLI's JSON (target/release/vmaf, built here if missing).
# The wheel lands in $CARGO_TARGET_DIR/wheel/dist. Its build uses a target dir of its own
# (zig links differently, so sharing one would rebuild the library for the other builds).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PYTHON="${PYTHON:-python3}"
WORK="$CARGO_TARGET_DIR/wheel"
BUILD_VENV="$WORK/build-venv"
mkdir -p "$WORK"

[ -x "$BUILD_VENV/bin/python" ] || "$PYTHON" -m venv "$BUILD_VENV"
"$BUILD_VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2" ziglang auditwheel
rm -rf "$WORK/dist"
# maturin runs `python3 -m ziglang`: the build venv first on PATH.
PATH="$BUILD_VENV/bin:$PATH" CARGO_TARGET_DIR="$WORK/target" maturin build --release --quiet \
  --zig --compatibility manylinux2014 -m python/Cargo.toml -i "$BUILD_VENV/bin/python" \
  -o "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/vmaf_hip-*-abi3-*manylinux*2_17*x86_64*.whl)
echo "wheel: $WHEEL ($(stat -c %s "$WHEEL") bytes)"

"$BUILD_VENV/bin/auditwheel" show "$WHEEL" | tee "$WORK/auditwheel.txt"
# (auditwheel wraps its lines)
tr '\n' ' ' <"$WORK/auditwheel.txt" | tr -s ' ' |
  grep -q 'consistent with the following platform tag: "manylinux_2_17_x86_64"' ||
  { echo "auditwheel: not manylinux_2_17" >&2; exit 1; }

# The CLI's answer, then the wheel's in a clean environment: no cargo, no rustc.
[ -x "$CARGO_TARGET_DIR/release/vmaf" ] || cargo build --release -p vmaf-cli
CLIPS="$WORK/clips"
mkdir -p "$CLIPS"
for side in ref dist; do
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "tests/data/clips/${side}_natural_576x324_420p8.y4m.xz" "$CLIPS/$side.y4m"
done
"$CARGO_TARGET_DIR/release/vmaf" -r "$CLIPS/ref.y4m" -d "$CLIPS/dist.y4m" \
  -m version=vmaf_v1.0.16_3d0h --feature psnr --json -o "$CLIPS/cli.json" -q
rm -rf "$WORK/venv"
CLEAN=(env -i "HOME=$HOME" "PATH=/usr/local/bin:/usr/bin:/bin" "TMPDIR=${TMPDIR:-/tmp}")
"${CLEAN[@]}" "$PYTHON" -m venv "$WORK/venv"
if "${CLEAN[@]}" sh -c 'command -v cargo || command -v rustc'; then
  echo "a Rust toolchain is on the clean PATH" >&2
  exit 1
fi
"${CLEAN[@]}" "$WORK/venv/bin/pip" install -q --disable-pip-version-check "$WHEEL"
"${CLEAN[@]}" "$WORK/venv/bin/python" - "$CLIPS" <<'PY'
import json, sys, vmaf_hip
clips = sys.argv[1]
got = vmaf_hip.score_files(f"{clips}/ref.y4m", f"{clips}/dist.y4m",
                           model="vmaf_v1.0.16_3d0h", features=["psnr"])
want = json.load(open(f"{clips}/cli.json"))
for key in ("frames", "pooled_metrics"):
    assert got[key] == want[key], f"{key} differs from the CLI's"
print("wheel scores", len(got["frames"]), "frames like the CLI:",
      got["pooled_metrics"]["vmaf"]["mean"])
PY
