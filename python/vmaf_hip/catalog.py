"""Score a catalog of reference/distorted pairs on a Ray cluster (or a local Ray instance),
or on the GPUs of this machine without Ray (``--engine local``).

    python -m vmaf_hip.catalog pairs.csv --out DIR [--model M ...] [--feature F ...]
        [--backend auto|cpu|hip] [--threads N] [--address ADDR] [--num-cpus N]
        [--engine ray|local] [--per-gpu N] [--workers N]

``pairs.csv`` has a header with the columns ``ref`` and ``dist`` and optionally ``width``,
``height``, ``pixel_format``, ``bitdepth`` (raw .yuv inputs) and ``id``. Relative paths are
taken from the CSV's folder; every Ray node must see the files under the same paths (shared
storage). Each pair is one Ray task (``num_gpus=1`` with the GPU backend, which ``auto``
picks when the cluster has GPUs); it writes ``DIR/<id>.json`` (what ``vmaf --json`` writes,
plus a ``"catalog"`` entry saying how it was made) through a temporary file renamed into
place, so a JSON that exists is complete. The job then writes ``DIR/summary.csv``. A second
run over the same CSV and DIR scores only the pairs whose JSON is missing, incomplete or made
with other settings: after a crash, run the same command again.

``--engine local`` scores the pairs in this process instead, several at once: ``--per-gpu``
pairs per GPU (default 2: one feeding thread cannot keep a GPU busy) with the GPU backend,
``--workers`` pairs (default 1) on the CPU. Same files, same resuming. The default engine,
``auto``, is Ray when it is installed (``pip install 'vmaf-hip[ray]'``) or ``--address`` is
given, else the local engine.

One run at a time uses an output folder (a second one is refused while the first holds its
lock). Ctrl-C stops a run within a frame of each pair being scored: finished pairs keep their
JSON, ``summary.csv`` lists the rest as interrupted, and the same command resumes. Files are
created with the permissions the umask gives.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

SUMMARY_FIELDS = [
    "id", "ref", "dist", "vmaf_mean", "vmaf_harmonic_mean", "vmaf_min", "frames", "seconds",
    "backend", "error",
]
RAW_FIELDS = ("width", "height", "pixel_format", "bitdepth")


def _pair_id(ref: str, dist: str) -> str:
    stem = Path(dist).name.split(".")[0] or "pair"
    digest = hashlib.sha1(f"{ref}\0{dist}".encode()).hexdigest()[:10]
    return f"{stem}-{digest}"


def _safe_id(s: str) -> bool:
    return bool(s) and s not in (".", "..") and "/" not in s and "\\" not in s and "\0" not in s


def read_pairs(csv_path: os.PathLike) -> List[Dict[str, Any]]:
    """The pairs of a catalog CSV, paths made absolute, ids filled in and checked unique."""
    csv_path = Path(csv_path)
    base = csv_path.resolve().parent
    pairs = []
    # utf-8-sig: spreadsheets save CSV with a byte order mark.
    with open(csv_path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        # "ref, dist" as typed by hand: names compare without the spaces around them.
        reader.fieldnames = [(c or "").strip() for c in (reader.fieldnames or [])]
        cols = set(reader.fieldnames)
        if not {"ref", "dist"} <= cols:
            raise ValueError(f"{csv_path}: needs the columns ref and dist (has {sorted(cols)})")
        for line, row in enumerate(reader, start=2):
            row = {k: (v or "").strip() for k, v in row.items() if k}
            if not row.get("ref") and not row.get("dist"):
                continue
            for k in ("ref", "dist"):
                if not row.get(k):
                    raise ValueError(f"{csv_path}:{line}: the {k} cell is empty")
            ref, dist = (str((base / row[k]).resolve()) for k in ("ref", "dist"))
            raw = {k: row[k] for k in RAW_FIELDS if row.get(k)}
            if raw and len(raw) != len(RAW_FIELDS):
                raise ValueError(f"{csv_path}:{line}: raw input needs all of {', '.join(RAW_FIELDS)}")
            for k in ("width", "height", "bitdepth"):
                if k in raw:
                    try:
                        raw[k] = int(raw[k])
                    except ValueError:
                        raise ValueError(f"{csv_path}:{line}: {k} {raw[k]!r} is not a number") from None
            pid = row.get("id") or _pair_id(ref, dist)
            if not _safe_id(pid):
                raise ValueError(f"{csv_path}:{line}: id {pid!r} cannot name a file")
            pairs.append({"id": pid, "ref": ref, "dist": dist, "raw": raw, "line": line})
    seen: Dict[str, int] = {}
    for p in pairs:
        if p["id"] in seen:
            raise ValueError(f"{csv_path}: id {p['id']!r} on lines {seen[p['id']]} and {p['line']}")
        seen[p["id"]] = p["line"]
    return pairs


def _settings(pair: Dict[str, Any], model: Sequence[str], features: Sequence[str]) -> dict:
    """What a pair's result depends on: a JSON made with other settings is scored again."""
    return {"ref": pair["ref"], "dist": pair["dist"], "raw": pair["raw"],
            "model": list(model), "features": list(features)}


def _metric(model: Sequence[str]) -> Optional[str]:
    """The pooled metric the summary reports: the first model's name."""
    if not model:
        return None
    for part in model[0].split(":"):
        if part.startswith("name="):
            return part[len("name="):]
    return "vmaf"


def load_done(path: Path, settings: dict) -> Optional[dict]:
    """The result in ``path`` when it is complete and made with ``settings``; else None."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    meta = data.get("catalog") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or meta.get("settings") != settings:
        return None
    if not data.get("frames") or "pooled_metrics" not in data:
        return None
    return data


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_atomic(path: Path, text: str, newline: Optional[str] = None) -> None:
    """Writes ``text`` to ``path`` so that the file appears only complete, with the mode a
    plain ``open`` would give it (``mkstemp`` makes 0600 files)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", newline=newline) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def score_pair(pair: dict, out_dir: str, model: Sequence[str], features: Sequence[str],
               backend: str, threads: int, device: Optional[int] = None,
               cancel: Any = None) -> dict:
    """Scores one pair and writes its JSON (the body of a Ray task or a local worker)."""
    import vmaf_hip

    t0 = time.monotonic()
    result = vmaf_hip.score_files(pair["ref"], pair["dist"], model=list(model) or None,
                                  features=list(features), backend=backend, threads=threads,
                                  device=device, cancel=cancel, **pair["raw"])
    result["catalog"] = {
        "id": pair["id"],
        "backend": backend,
        "seconds": round(time.monotonic() - t0, 3),
        "vmaf_hip": vmaf_hip.__version__,
        "settings": _settings(pair, model, features),
    }
    write_atomic(Path(out_dir) / f"{pair['id']}.json", json.dumps(result, indent=1) + "\n")
    return result


def summary_row(pair: dict, result: Optional[dict], metric: Optional[str],
                error: str = "") -> dict:
    row = {k: "" for k in SUMMARY_FIELDS}
    row.update(id=pair["id"], ref=pair["ref"], dist=pair["dist"], error=error)
    if result is not None:
        meta = result["catalog"]
        pooled = result["pooled_metrics"].get(metric, {}) if metric else {}
        row.update(vmaf_mean=pooled.get("mean", ""),
                   vmaf_harmonic_mean=pooled.get("harmonic_mean", ""),
                   vmaf_min=pooled.get("min", ""), frames=len(result["frames"]),
                   seconds=meta["seconds"], backend=meta["backend"])
    return row


def _ray_runs(todo: list, out: Path, model: list, features: list, backend: str, threads: int,
              address: Optional[str], num_cpus: Optional[int]):
    """Ray: the backend used, then ``(pair, result, error)`` as tasks finish."""
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address)
        else:
            ray.init(num_cpus=num_cpus)
    if backend == "auto":
        backend = "hip" if ray.cluster_resources().get("GPU", 0) >= 1 else "cpu"
    yield backend
    # One GPU per task on the GPU backend (Ray gives each its own device and, by default, a
    # fresh worker process); CPU tasks take as many cores as their threads use.
    resources = {"num_gpus": 1, "num_cpus": 1} if backend == "hip" else {"num_cpus": max(1, threads)}
    task = ray.remote(score_pair).options(**resources)
    pending = {task.remote(p, str(out), model, features, backend, threads): p for p in todo}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                p = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as e:  # a failed pair is reported; the others go on
                    yield p, None, getattr(e, "cause", None) or e
                else:
                    yield p, result, None
    except BaseException:
        # Ctrl-C (or the caller stopping early): the queued and running tasks are cancelled.
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def _local_runs(todo: list, out: Path, model: list, features: list, backend: str, threads: int,
                per_gpu: int, workers: Optional[int]):
    """This process: the backend used, then ``(pair, result, error)`` as pairs finish. With
    the GPU backend, ``per_gpu`` threads per device, each scoring one pair at a time on it
    (the library runs without the GIL, so they run in parallel)."""
    import queue
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    import vmaf_hip

    gpus = len(vmaf_hip.devices()) if backend in ("auto", "hip") else 0
    if backend == "auto":
        backend = "hip" if gpus else "cpu"
    if backend == "hip" and not gpus:
        raise vmaf_hip.NoDeviceError(vmaf_hip.gpu_unavailable_reason() or "no GPU")
    yield backend
    if backend == "hip":
        slots = [d for _ in range(max(1, per_gpu)) for d in range(gpus)]
    else:
        slots = [None] * max(1, workers or 1)
    free: "queue.Queue" = queue.Queue()
    for d in slots:
        free.put(d)

    cancel = vmaf_hip.CancelFlag()

    def run(p):
        device = free.get()
        try:
            return score_pair(p, str(out), model, features, backend, threads, device, cancel)
        finally:
            free.put(device)

    with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="vmaf-catalog") as pool:
        pending = {pool.submit(run, p): p for p in todo}
        try:
            while pending:
                # A timeout keeps the main thread where Ctrl-C reaches it promptly.
                done, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    p = pending.pop(fut)
                    err = fut.exception()
                    yield p, (None if err else fut.result()), err
        except BaseException:
            # Ctrl-C (or the caller stopping early): queued pairs never start, running ones
            # stop at their next frame, so leaving the pool below waits a frame, not a pair.
            cancel.set()
            for fut in pending:
                fut.cancel()
            raise


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a catalog run; ``summary`` is the ``summary.csv`` written on the way out,
    ``scored`` the pairs it finished."""

    def __init__(self, summary: str, scored: List[str], left: int):
        super().__init__(f"interrupted: {left} pairs not scored")
        self.summary, self.scored, self.left = summary, scored, left


def _check_count(name: str, value: Optional[int], low: int, high: Optional[int] = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} {value!r}: should be {span}")


def _pick_engine(engine: str, address: Optional[str], log) -> str:
    """``auto``: Ray when it is installed or a cluster is named, else local (with a note)."""
    if engine == "local":
        return engine
    try:
        import ray  # noqa: F401
    except ImportError:
        if engine == "ray" or address:
            raise RuntimeError("the Ray engine needs Ray: pip install 'vmaf-hip[ray]' "
                               "(or 'ray'), or score on this machine with --engine local") from None
        log("Ray is not installed (pip install 'vmaf-hip[ray]'): scoring on this machine "
            "(--engine local)")
        return "local"
    return "ray"


@contextlib.contextmanager
def _folder_lock(out: Path):
    """Holds ``out/.catalog.lock`` for one run; a second run on the same folder is refused
    (two runs would remove each other's temporary files and both write summary.csv)."""
    lock = out / ".catalog.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            raise RuntimeError(f"{out} is in use by another catalog run ({holder}); wait for it "
                               "or use another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        yield
    finally:
        os.close(fd)


def run_catalog(pairs_csv: os.PathLike, out_dir: os.PathLike, model: Sequence[str] = ("vmaf_v0.6.1",),
                features: Sequence[str] = (), backend: str = "auto", threads: int = 0,
                address: Optional[str] = None, num_cpus: Optional[int] = None,
                log=print, engine: str = "auto", per_gpu: int = 2,
                workers: Optional[int] = None) -> dict:
    """Scores every pair of ``pairs_csv`` not done yet in ``out_dir`` and writes
    ``summary.csv``: on Ray (started locally, or joined at ``address``, unless already
    initialised), or with ``engine="local"`` in this process (``per_gpu`` pairs at once per
    GPU, ``workers`` on the CPU); ``engine="auto"`` is Ray when it is installed. Returns
    ``{"scored": [ids], "skipped": [ids], "failed": {id: error}, "summary": path}``.

    Raises ValueError for bad arguments or a bad CSV, RuntimeError when another run holds
    ``out_dir`` or Ray is asked for and missing, and ``Interrupted`` (a KeyboardInterrupt)
    after Ctrl-C, once the summary is written."""
    import vmaf_hip

    if backend not in ("auto", "cpu", "hip"):
        raise ValueError(f"backend {backend!r}: should be auto, cpu or hip")
    if engine not in ("auto", "ray", "local"):
        raise ValueError(f"engine {engine!r}: should be auto, ray or local")
    _check_count("threads", threads, 0, vmaf_hip.MAX_THREADS)
    _check_count("per_gpu", per_gpu, 1, 256)
    _check_count("workers", workers, 1, 4096)
    _check_count("num_cpus", num_cpus, 1)
    model, features = list(model), list(features)
    pairs = read_pairs(pairs_csv)
    engine = _pick_engine(engine, address, log)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _folder_lock(out):
        return _run_locked(pairs, out, model, features, backend, threads, address, num_cpus,
                           log, engine, per_gpu, workers)


def _run_locked(pairs, out, model, features, backend, threads, address, num_cpus, log, engine,
                per_gpu, workers) -> dict:
    for pattern in (".*.json.*.tmp", ".summary.csv.*.tmp"):
        for stale in out.glob(pattern):
            # Left by a run that died mid-write (the lock says none runs): never complete.
            stale.unlink(missing_ok=True)
    metric = _metric(model)
    rows: Dict[str, dict] = {}
    todo = []
    for p in pairs:
        done = load_done(out / f"{p['id']}.json", _settings(p, model, features))
        if done is not None:
            rows[p["id"]] = summary_row(p, done, metric)
        else:
            todo.append(p)
    skipped = [p["id"] for p in pairs if p["id"] in rows]
    if engine == "ray":
        runs = _ray_runs(todo, out, model, features, backend, threads, address, num_cpus)
    else:
        runs = _local_runs(todo, out, model, features, backend, threads, per_gpu, workers)
    failed: Dict[str, str] = {}
    scored: List[str] = []
    interrupted = False
    try:
        backend = next(runs)
        log(f"{len(pairs)} pairs: {len(skipped)} done already, {len(todo)} to score on {backend}")
        for p, result, err in runs:
            if err is not None:  # a failed pair is reported; the others go on
                msg = f"{type(err).__name__}: {err}".splitlines()[0]
                failed[p["id"]] = msg
                rows[p["id"]] = summary_row(p, None, metric, msg)
                log(f"{p['id']}: failed: {msg}")
                continue
            scored.append(p["id"])
            rows[p["id"]] = summary_row(p, result, metric)
            row = rows[p["id"]]
            log(f"{p['id']}: {metric or 'scores'} {row['vmaf_mean']} ({row['frames']} frames, "
                f"{row['seconds']} s)")
    except KeyboardInterrupt:
        interrupted = True
        runs.close()
        # Pairs that finished while the others were stopping have their JSON: count them.
        for p in todo:
            if p["id"] in rows:
                continue
            done = load_done(out / f"{p['id']}.json", _settings(p, model, features))
            if done is not None:
                scored.append(p["id"])
                rows[p["id"]] = summary_row(p, done, metric)
            else:
                failed.pop(p["id"], None)
                rows[p["id"]] = summary_row(p, None, metric, "interrupted")
    summary = out / "summary.csv"
    buf = _SummaryText()
    w = csv.DictWriter(buf, fieldnames=SUMMARY_FIELDS)
    w.writeheader()
    for p in pairs:
        w.writerow(rows[p["id"]])
    write_atomic(summary, buf.text(), newline="")
    if interrupted:
        left = sum(1 for p in pairs if rows[p["id"]]["error"] == "interrupted")
        raise Interrupted(str(summary), scored, left)
    return {"scored": scored, "skipped": skipped, "failed": failed, "summary": str(summary)}


class _SummaryText:
    """A text sink for ``csv.writer`` (which ends rows with CRLF, as before)."""

    def __init__(self):
        self.parts: List[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m vmaf_hip.catalog",
        description="Score a CSV of reference/distorted pairs on Ray; one JSON per pair plus "
                    "summary.csv; a second run resumes where the first stopped.")
    ap.add_argument("pairs", help="CSV with columns ref,dist[,width,height,pixel_format,bitdepth,id]")
    ap.add_argument("--out", required=True, help="folder for <id>.json and summary.csv")
    ap.add_argument("--model", action="append", default=None,
                    help="model (built-in version, path, or the CLI's -m syntax; repeatable; "
                         "default vmaf_v0.6.1)")
    ap.add_argument("--feature", action="append", default=[],
                    help="extra feature, the CLI's --feature syntax (repeatable)")
    ap.add_argument("--backend", choices=["auto", "cpu", "hip"], default="auto",
                    help="auto: hip when the cluster has GPUs (default)")
    ap.add_argument("--threads", type=int, default=0, help="worker threads per pair (CPU tasks "
                    "reserve as many cores)")
    ap.add_argument("--address", default=None, help="Ray cluster to join (default: a local one)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance")
    ap.add_argument("--engine", choices=["auto", "ray", "local"], default="auto",
                    help="local: score in this process, no Ray (one machine); auto (default): "
                         "Ray when it is installed")
    ap.add_argument("--per-gpu", type=int, default=2,
                    help="local engine: pairs scored at once per GPU (default 2)")
    ap.add_argument("--workers", type=int, default=None,
                    help="local engine on the CPU: pairs scored at once (default 1)")
    args = ap.parse_args(argv)
    try:
        res = run_catalog(args.pairs, args.out, model=args.model or ["vmaf_v0.6.1"],
                          features=args.feature, backend=args.backend, threads=args.threads,
                          address=args.address, num_cpus=args.num_cpus,
                          log=lambda m: print(m, file=sys.stderr), engine=args.engine,
                          per_gpu=args.per_gpu, workers=args.workers)
    except Interrupted as e:
        print(f"interrupted: {len(e.scored)} pairs scored, {e.left} left; {e.summary} written; "
              "run the same command again to resume", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted before scoring started", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(res["summary"])
    if res["failed"]:
        print(f"{len(res['failed'])} pairs failed; run again to retry them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
