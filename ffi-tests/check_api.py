#!/usr/bin/env python3
"""meson test driver: runs test_api on a clip pair, then compares its JSON log with upstream's
the way tests/ffi.rs does (every metric except the CLI-only extra features, same printed value).

usage: check_api.py TEST_API REF DIST EXPECTED.json OUT.json N_THREADS [W H FMT BPC]"""
import json
import subprocess
import sys

NOT_COMPUTED = {"float_ssim", "float_ms_ssim", "cambi"}


def keys(d):
    return {k for k in d if k not in NOT_COMPUTED}


def main():
    exe, ref, dist, expected, out, threads, *raw = sys.argv[1:]
    subprocess.run([exe, ref, dist, out, threads, *raw], check=True)
    with open(out) as f:
        got = json.load(f)
    with open(expected) as f:
        want = json.load(f)
    errors = []

    def same(place, g, e):
        if keys(g) != keys(e):
            errors.append(f"{place}: keys {sorted(keys(g))}, expected {sorted(keys(e))}")
        for k in keys(e):
            if not isinstance(e[k], dict) and g.get(k) != e[k]:
                errors.append(f"{place} {k}: {g.get(k)} != expected {e[k]}")

    if len(got["frames"]) != len(want["frames"]):
        errors.append(f"{len(got['frames'])} frames, expected {len(want['frames'])}")
    for fg, fe in zip(got["frames"], want["frames"]):
        same(f"frame {fe['frameNum']}", fg["metrics"], fe["metrics"])
    same("pooled", got["pooled_metrics"], want["pooled_metrics"])
    for k in keys(want["pooled_metrics"]):
        same(f"pooled {k}", got["pooled_metrics"].get(k, {}), want["pooled_metrics"][k])
    if errors:
        print(f"{len(errors)} mismatches:", *errors[:40], sep="\n", file=sys.stderr)
        return 1
    print("log matches upstream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
