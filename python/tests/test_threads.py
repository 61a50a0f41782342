"""A context used from several threads: a thread that waits for a context another thread is
scoring with must not hold the GIL meanwhile (the scoring thread's workers may need it to
release a producer's tensor: CuPy's and NumPy's DLPack deleters take it)."""

import os
import subprocess
import sys
import threading
import time

import numpy as np

import vmaf_hip
from conftest import gpu_or_skip


def random_frames(n, w, h, seed=0):
    rng = np.random.default_rng(seed)

    def planes():
        return [rng.integers(0, 256, (h, w), dtype=np.uint8),
                rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8),
                rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8)]

    return [(planes(), planes()) for _ in range(n)]


def test_waiting_for_a_busy_context_lets_other_threads_run():
    """While one thread scores (holding the context), another asks for `frames`: it waits,
    but without the GIL, so a third thread keeps running."""
    frames = random_frames(4, 1920, 1080)
    ctx = vmaf_hip.Context(threads=0)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.0005)

    def score():
        for r, d in frames:
            ctx.read(r, d)
        ctx.flush()

    ticker, scorer = threading.Thread(target=tick), threading.Thread(target=score)
    ticker.start()
    scorer.start()
    waits = []
    while scorer.is_alive():
        t0 = time.monotonic()
        ctx.frames  # noqa: B018 (waits while the scorer holds the context)
        waits.append((t0, time.monotonic()))
        time.sleep(0.001)
    stop.set()
    ticker.join()
    scorer.join()
    ctx.close()
    long = [(a, b) for a, b in waits if b - a > 0.03]
    assert long, "the scorer never held the context long enough to observe"
    # Ticks strictly inside each long wait: none when the waiting thread held the GIL.
    inside = [sum(1 for t in ticks if a + 0.005 < t < b - 0.005) for a, b in long]
    assert max(inside) >= 3, f"other threads stalled during waits of {long}"


DEADLOCK = r"""
import threading
import numpy as np
import vmaf_hip
from vmaf_hip import _native

rng = np.random.default_rng(0)
w, h = 576, 324
def planes():
    return [rng.integers(0, 256, s, dtype=np.uint8) for s in ((h, w), (h//2, w//2), (h//2, w//2))]
frames = [(planes(), planes()) for _ in range(48)]
dev = lambda ps: [_native._DeviceArray(p.__dlpack__()) for p in ps]
ctx = vmaf_hip.Context(features=["psnr"], backend="hip", threads=3)
def score():
    for r, d in frames:
        ctx.read(dev(r), dev(d))
    ctx.flush()
t = threading.Thread(target=score)
t.start()
while t.is_alive():
    ctx.frames, ctx.devices
assert len(ctx.to_dict()["frames"]) == 48
ctx.close()
print("done")
"""


def test_polling_a_context_scoring_device_tensors_does_not_deadlock():
    """The test producer's deleter takes the GIL (as CuPy's does) on the library's workers
    while another thread polls the context: in a subprocess, as a deadlock never returns."""
    gpu_or_skip()
    try:
        out = subprocess.run([sys.executable, "-c", DEADLOCK], capture_output=True, text=True,
                             timeout=180, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        raise AssertionError("deadlock: polling a context that scores device tensors") from None
    assert out.returncode == 0 and "done" in out.stdout, out.stderr
