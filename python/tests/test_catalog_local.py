"""The catalog's local engine (no Ray): pairs scored by threads of this process, several at
once, on the CPU and, when there is one, on every GPU; every score equals the `vmaf`
command's, and a second run redoes only what is missing."""

import csv
import json
import os

from conftest import CLIPS, gpu_or_skip, same_scores, write_pairs

from vmaf_hip import catalog


def check(out, names, cli_cache, backend):
    with open(out / "summary.csv") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == names
    for n in names:
        with open(out / f"{n}.json") as f:
            got = json.load(f)
        assert got.pop("catalog")["backend"] == backend
        want = cli_cache(n)
        same_scores(got, want)
        assert float(rows[n]["vmaf_mean"]) == want["pooled_metrics"]["vmaf"]["mean"]
        assert rows[n]["error"] == ""


def test_local_engine_on_the_cpu(tmp_path, cli_cache):
    names = sorted(CLIPS)
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, names)
    out = tmp_path / "out"
    res = catalog.run_catalog(pairs, out, backend="cpu", engine="local", workers=2,
                              log=lambda m: None)
    assert sorted(res["scored"]) == names and not res["failed"]
    check(out, names, cli_cache, "cpu")
    mtimes = {n: os.stat(out / f"{n}.json").st_mtime_ns for n in names}
    (out / f"{names[3]}.json").unlink()
    res = catalog.run_catalog(pairs, out, backend="cpu", engine="local", log=lambda m: None)
    assert res["scored"] == [names[3]] and sorted(res["skipped"]) == names[:3] + names[4:]
    for n in names[:3] + names[4:]:
        assert os.stat(out / f"{n}.json").st_mtime_ns == mtimes[n], n
    check(out, names, cli_cache, "cpu")


def test_local_engine_on_every_gpu(tmp_path, cli_cache):
    gpu_or_skip()
    names = sorted(CLIPS)
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, names)
    out = tmp_path / "out"
    res = catalog.run_catalog(pairs, out, backend="auto", engine="local", per_gpu=2,
                              log=lambda m: None)
    assert sorted(res["scored"]) == names and not res["failed"]
    check(out, names, cli_cache, "hip")


def test_local_engine_refuses_bad_arguments(tmp_path):
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, sorted(CLIPS)[:1])
    for kw in ({"engine": "spark"}, {"backend": "cuda"}):
        try:
            catalog.run_catalog(pairs, tmp_path / "o", log=lambda m: None, **kw)
        except ValueError as e:
            assert list(kw.values())[0] in str(e)
        else:
            raise AssertionError(f"{kw} accepted")
