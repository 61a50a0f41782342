#!/usr/bin/env python3
"""Compare a VMAF JSON log (libvmaf's layout) with an expected one.

Same rules as shared/tools/vmaf-json-diff: every per-frame, pooled and
aggregate metric of EXPECTED must be in CANDIDATE with the same value
(exactly, or within --tol); both must list the same frame numbers;
'version' and 'fps' are not compared. --skip drops metrics the candidate run
did not ask for (e.g. float_ssim when the expected log was made with more
features). Exit status 0 when everything matches, 1 otherwise.

usage: vmaf_json_cmp.py EXPECTED CANDIDATE [--tol T] [--only a,b] [--skip a,b] [--quiet]
"""
import argparse
import json
import math
import sys


def names(text):
    return {n for n in text.split(",") if n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("expected")
    ap.add_argument("candidate")
    ap.add_argument("--tol", type=float, default=0.0)
    ap.add_argument("--only", default="", help="compare only these metrics")
    ap.add_argument("--skip", default="", help="do not compare these metrics")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    with open(a.expected) as f:
        exp = json.load(f)
    with open(a.candidate) as f:
        got = json.load(f)
    only, skip = names(a.only), names(a.skip)

    def wanted(metric):
        return (not only or metric in only) and metric not in skip

    failures = []
    checked = 0

    def compare(where, want, have):
        nonlocal checked
        checked += 1
        if have is None:
            failures.append(f"{where}: missing (expected {want})")
        elif want is None:
            failures.append(f"{where}: expected {want}, got {have}")
        elif not (abs(want - have) <= a.tol
                  or (math.isnan(want) and math.isnan(have))):
            failures.append(f"{where}: expected {want}, got {have} "
                            f"(diff {have - want:+.3g})")

    exp_frames = {f["frameNum"]: f["metrics"] for f in exp.get("frames", [])}
    got_frames = {f["frameNum"]: f["metrics"] for f in got.get("frames", [])}
    if set(exp_frames) != set(got_frames):
        failures.append(f"frames: expected {len(exp_frames)} frame numbers, "
                        f"got {len(got_frames)}")
    for num, metrics in sorted(exp_frames.items()):
        for metric, value in metrics.items():
            if wanted(metric):
                compare(f"frame {num} {metric}", value,
                        got_frames.get(num, {}).get(metric))

    got_pooled = got.get("pooled_metrics", {})
    for metric, methods in exp.get("pooled_metrics", {}).items():
        if not wanted(metric):
            continue
        for method, value in methods.items():
            compare(f"pooled {metric}.{method}", value,
                    got_pooled.get(metric, {}).get(method))

    got_aggr = got.get("aggregate_metrics", {})
    for metric, value in exp.get("aggregate_metrics", {}).items():
        if wanted(metric):
            compare(f"aggregate {metric}", value, got_aggr.get(metric))

    passed = checked - len(failures)
    if checked == 0:
        failures.append("nothing compared (empty expected log or filters)")
    if not a.quiet:
        for line in failures[:40]:
            print(line)
        if len(failures) > 40:
            print(f"... and {len(failures) - 40} more")
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
