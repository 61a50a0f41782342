#!/usr/bin/env bash
# Tests of the Python package (python/): a virtual environment under the Cargo target dir with
# NumPy, pytest, Ray and maturin from PyPI; the package built from python/ the way
# `pip install ./python` builds it (into the shared target dir, so the library's dependencies
# are built once); then pytest. GPU tests skip without a device (VMAF_TEST_REQUIRE_GPU=1 makes
# them fail instead). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PYTHON="${PYTHON:-python3}"
VENV="$CARGO_TARGET_DIR/py-venv"

if [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" 2>/dev/null; then
  PY="$VENV/bin/python"
  USER_FLAG=()
else
  # No venv module (Debian without python3-venv): the user's site-packages instead.
  rm -rf "$VENV"
  PY="$PYTHON"
  USER_FLAG=(--user)
fi
"$PY" -m pip install -q --disable-pip-version-check "${USER_FLAG[@]}" \
  "numpy>=1.22" pytest "maturin>=1.9,<2" ray

# The `vmaf` command whose JSON the tests compare with (`cargo test --release` built it already).
cargo build --release --bin vmaf

# The wheel `pip install ./python` would build (maturin's PEP 517 backend runs this same
# build), installed. PATH stays as it is: the library's build script reruns when it changes.
MATURIN="$("$PY" -c 'import shutil, sys, sysconfig, os; print(shutil.which("maturin", path=os.pathsep.join([sysconfig.get_path("scripts"), sysconfig.get_path("scripts", "posix_user")])))')"
WHEELS="$CARGO_TARGET_DIR/wheels"
rm -rf "$WHEELS"
"$MATURIN" build --release --quiet -m python/Cargo.toml -i "$PY" -o "$WHEELS"
"$PY" -m pip install -q --disable-pip-version-check "${USER_FLAG[@]}" --force-reinstall \
  --no-deps "$WHEELS"/vmaf_hip-*.whl

# From outside python/, so `import vmaf_hip` finds the installed package, not the sources.
cd "$CARGO_TARGET_DIR"
VMAF_HIP_REPO="$ROOT" "$PY" -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests" "$@"
