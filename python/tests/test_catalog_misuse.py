"""The catalog as scripts and people misuse it: Ctrl-C, two runs on one folder, the umask,
Ray missing, hand-made CSVs and impossible thread counts."""

import csv
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import CLIPS, clip, same_scores, write_pairs

import vmaf_hip
from vmaf_hip import catalog

LONG = "natural_576x324_420p8"  # 48 frames: long enough to interrupt mid-pair


def many_pairs(path, n, name=LONG):
    """A CSV of `n` pairs of one clip, ids p00..."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ref", "dist", "id"])
        for i in range(n):
            w.writerow([clip(name, "ref"), clip(name, "dist"), f"p{i:02d}"])


def start(pairs, out, *extra, umask=None):
    """`python -m vmaf_hip.catalog` on the local CPU engine, one pair at a time."""
    cmd = [sys.executable, "-m", "vmaf_hip.catalog", str(pairs), "--out", str(out),
           "--engine", "local", "--backend", "cpu", "--threads", "1", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def wait_for(pred, what, limit=120.0):
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < limit, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_cancel_flag_stops_score_files():
    flag = vmaf_hip.CancelFlag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set()
    with pytest.raises(InterruptedError):
        vmaf_hip.score_files(clip(LONG, "ref"), clip(LONG, "dist"), cancel=flag)
    # Set from another thread while the call runs: it stops early.
    flag = vmaf_hip.CancelFlag()
    threading.Timer(0.2, flag.set).start()
    t0 = time.monotonic()
    with pytest.raises(InterruptedError):
        vmaf_hip.score_files(clip(LONG, "ref"), clip(LONG, "dist"), threads=1, cancel=flag,
                             features=["psnr", "float_ssim", "float_ms_ssim", "cambi"])
    assert time.monotonic() - t0 < 10


def test_ctrl_c_stops_within_seconds_and_resumes(tmp_path, cli_cache):
    pairs = tmp_path / "pairs.csv"
    many_pairs(pairs, 40)
    out = tmp_path / "out"
    proc = start(pairs, out)
    wait_for(lambda: len(list(out.glob("p*.json"))) >= 2, "two results")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    stopped_in = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert stopped_in < 10, f"took {stopped_in:.1f} s to stop"
    assert "Traceback" not in err and "interrupted:" in err, err
    with open(out / "summary.csv") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == [f"p{i:02d}" for i in range(40)]
    done = {p.stem for p in out.glob("p*.json")}
    assert 2 <= len(done) < 40
    for pid, r in rows.items():
        if pid in done:
            assert r["error"] == "" and r["vmaf_mean"] != "", r
        else:
            assert r["error"] == "interrupted" and r["vmaf_mean"] == "", r
    assert not list(out.glob(".*.tmp"))
    # The same command finishes the rest, and every result is the CLI's.
    proc = start(pairs, out)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f"{len(done)} done already, {40 - len(done)} to score" in err
    want = cli_cache(LONG)
    with open(out / "p39.json") as f:
        got = json.load(f)
    got.pop("catalog")
    same_scores(got, want)


def test_a_busy_output_folder_is_refused(tmp_path):
    pairs = tmp_path / "pairs.csv"
    many_pairs(pairs, 12)
    out = tmp_path / "out"
    first = start(pairs, out)
    wait_for(lambda: (out / ".catalog.lock").exists()
             and (out / ".catalog.lock").read_text().startswith("pid"), "the first run's lock")
    second = start(pairs, out)
    _, err2 = second.communicate(timeout=60)
    assert second.returncode == 2, err2
    assert "in use by another catalog run" in err2 and f"pid {first.pid}" in err2, err2
    _, err1 = first.communicate(timeout=600)
    assert first.returncode == 0, err1
    with open(out / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and all(r["error"] == "" for r in rows)
    # Once the first run is over, the folder is free again (nothing left to score).
    third = start(pairs, out)
    _, err3 = third.communicate(timeout=60)
    assert third.returncode == 0 and "12 done already, 0 to score" in err3, err3


def test_the_lock_is_held_in_process_too(tmp_path):
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, [LONG])
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / ".catalog.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(RuntimeError, match="in use by another catalog run"):
            catalog.run_catalog(pairs, out, engine="local", backend="cpu", log=lambda m: None)
        assert not (out / "summary.csv").exists()
    finally:
        os.close(fd)


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_files_follow_the_umask(tmp_path, mask):
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, ["testsrc_321x241_420p8"])
    out = tmp_path / "out"
    proc = start(pairs, out, umask=mask)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    for name in ("testsrc_321x241_420p8.json", "summary.csv"):
        assert os.stat(out / name).st_mode & 0o777 == 0o666 & ~mask, name


def test_without_ray_the_local_engine_is_used(tmp_path, monkeypatch):
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, ["testsrc_321x241_420p8"])
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    said = []
    res = catalog.run_catalog(pairs, tmp_path / "out", backend="cpu", log=said.append)
    assert res["scored"] == ["testsrc_321x241_420p8"] and not res["failed"]
    assert "Ray is not installed" in said[0] and "--engine local" in said[0]
    for kw in ({"engine": "ray"}, {"address": "auto"}):
        with pytest.raises(RuntimeError, match="pip install"):
            catalog.run_catalog(pairs, tmp_path / "out2", backend="cpu", log=said.append, **kw)
    # The command says it in one line, without a traceback.
    code = ("import sys; sys.modules['ray'] = None; from vmaf_hip import catalog; "
            f"sys.exit(catalog.main([{str(pairs)!r}, '--out', {str(tmp_path / 'o3')!r}, "
            "'--engine', 'ray']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("error: the Ray engine needs Ray"), p.stderr


def test_hand_made_csvs(tmp_path, cli_cache):
    name = "testsrc_321x241_420p8"
    # A byte order mark and spaces after the commas, as spreadsheets and people write them.
    pairs = tmp_path / "bom.csv"
    pairs.write_text(f"ref, dist , id\n{clip(name, 'ref')}, {clip(name, 'dist')}, one\n",
                     encoding="utf-8-sig")
    assert pairs.read_bytes().startswith(b"\xef\xbb\xbf")
    res = catalog.run_catalog(pairs, tmp_path / "out", backend="cpu", engine="local",
                              log=lambda m: None)
    assert res["scored"] == ["one"]
    with open(tmp_path / "out" / "one.json") as f:
        got = json.load(f)
    got.pop("catalog")
    same_scores(got, cli_cache(name))
    # An empty cell names its line and column.
    for row, col in ((f"{clip(name, 'ref')},", "dist"), (f",{clip(name, 'dist')}", "ref")):
        bad = tmp_path / f"empty_{col}.csv"
        bad.write_text(f"ref,dist\n{clip(name, 'ref')},{clip(name, 'dist')}\n{row}\n")
        with pytest.raises(ValueError, match=f":3: the {col} cell is empty"):
            catalog.read_pairs(bad)


def test_impossible_counts_are_refused_up_front(tmp_path):
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, ["testsrc_321x241_420p8"])
    out = tmp_path / "out"
    for kw, needle in (({"threads": -1}, "threads -1"),
                       ({"threads": vmaf_hip.MAX_THREADS + 1}, "threads"),
                       ({"threads": 5000}, "threads 5000"),
                       ({"per_gpu": 0}, "per_gpu 0"),
                       ({"workers": 0}, "workers 0"),
                       ({"num_cpus": 0}, "num_cpus 0")):
        with pytest.raises(ValueError, match=needle):
            catalog.run_catalog(pairs, out, backend="cpu", engine="local", log=lambda m: None,
                                **kw)
        assert not out.exists(), kw
    p = subprocess.run([sys.executable, "-m", "vmaf_hip.catalog", str(pairs), "--out",
                        str(out), "--engine", "local", "--threads", "5000"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: threads 5000"), p.stderr
    assert CLIPS  # the parity clips are the inputs above
