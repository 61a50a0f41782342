"""The Ray catalog on a local Ray instance (2 CPUs) over the parity clips: every score equals
the `vmaf` command's, and a second run redoes only the pairs whose JSON is gone or broken."""

import csv
import json
import os

import pytest

from conftest import CLIPS, clip, same_scores, write_pairs

ray = pytest.importorskip("ray", reason="ray not installed")
from vmaf_hip import catalog  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_catalog_scores_and_resumes(tmp_path, local_ray, cli_cache):
    names = sorted(CLIPS)
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, names)
    out = tmp_path / "out"
    res = catalog.run_catalog(pairs, out, backend="cpu", log=lambda m: None)
    assert sorted(res["scored"]) == names and not res["skipped"] and not res["failed"]
    with open(out / "summary.csv") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == names
    for n in names:
        with open(out / f"{n}.json") as f:
            got = json.load(f)
        meta = got.pop("catalog")
        assert meta["backend"] == "cpu"
        want = cli_cache(n)
        same_scores(got, want)
        pooled = want["pooled_metrics"]["vmaf"]
        r = rows[n]
        assert float(r["vmaf_mean"]) == pooled["mean"]
        assert float(r["vmaf_harmonic_mean"]) == pooled["harmonic_mean"]
        assert float(r["vmaf_min"]) == pooled["min"]
        assert int(r["frames"]) == len(want["frames"]) and r["backend"] == "cpu"
        assert r["error"] == ""

    # A crash lost one result and left another half written: only those two are redone.
    mtimes = {n: os.stat(out / f"{n}.json").st_mtime_ns for n in names}
    (out / f"{names[0]}.json").unlink()
    broken = out / f"{names[1]}.json"
    broken.write_text(broken.read_text()[:500])
    (out / f".{names[2]}.json.x.tmp").write_text("{")
    res = catalog.run_catalog(pairs, out, backend="cpu", log=lambda m: None)
    assert sorted(res["scored"]) == sorted(names[:2])
    assert sorted(res["skipped"]) == names[2:]
    for n in names[2:]:
        assert os.stat(out / f"{n}.json").st_mtime_ns == mtimes[n], n
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))
    for n in names[:2]:
        with open(out / f"{n}.json") as f:
            got = json.load(f)
        got.pop("catalog")
        same_scores(got, cli_cache(n))
    with open(out / "summary.csv") as f:
        assert sorted(r["id"] for r in csv.DictReader(f)) == names

    # Other settings (another model) make every pair stale.
    res = catalog.run_catalog(pairs, out, model=["vmaf_v0.6.1neg"], backend="cpu",
                              log=lambda m: None)
    assert sorted(res["scored"]) == names


def test_catalog_reports_failures(tmp_path, local_ray):
    pairs = tmp_path / "pairs.csv"
    n = "testsrc_321x241_420p8"
    with open(pairs, "w") as f:
        f.write(f"ref,dist,id\n{clip(n, 'ref')},{clip(n, 'dist')},good\n"
                f"{clip(n, 'ref')},{tmp_path / 'missing.y4m'},bad\n")
    res = catalog.run_catalog(pairs, tmp_path / "out", backend="cpu", log=lambda m: None)
    assert res["scored"] == ["good"] and list(res["failed"]) == ["bad"]
    assert "missing.y4m" in res["failed"]["bad"]
    assert not (tmp_path / "out" / "bad.json").exists()


def test_bad_csv(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("reference,distorted\na,b\n")
    assert catalog.main([str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "ref and dist" in capsys.readouterr().err
    dup = tmp_path / "dup.csv"
    dup.write_text("ref,dist,id\na,b,x\nc,d,x\n")
    with pytest.raises(ValueError, match="lines 2 and 3"):
        catalog.read_pairs(dup)
    raw = tmp_path / "raw.csv"
    raw.write_text("ref,dist,width\na,b,352\n")
    with pytest.raises(ValueError, match="raw input"):
        catalog.read_pairs(raw)
    ids = catalog.read_pairs(_write(tmp_path / "ids.csv", "ref,dist\nx/a.y4m,x/b.y4m\ny/a.y4m,y/b.y4m\n"))
    assert len({p["id"] for p in ids}) == 2 and all(p["id"].startswith("b-") for p in ids)


def _write(path, text):
    path.write_text(text)
    return path
