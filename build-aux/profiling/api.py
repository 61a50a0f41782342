# Driver API calls in trace.c output (TRACE_API=1): python3 api.py TRACE CBID_HEADER [KERNEL]
# CBID_HEADER is CUPTI's cupti_driver_cbid.h (names the call ids). Prints, over the middle of the
# run, each call's count, mean duration and count per frame (frames: launches of KERNEL in that
# window, by default vmaf_vif_stats_u8, once per 8-bit frame), and how much of the window any
# thread spent inside the driver (the union of all calls) against the sum of their durations.
import collections
import re
import sys

names = {}
for line in open(sys.argv[2]):
    m = re.search(r'CUPTI_DRIVER_TRACE_CBID_(\w+)\s*=\s*(\d+)', line)
    if m:
        names[int(m.group(2))] = m.group(1)
A = []
K = collections.Counter()
kt = []
for line in open(sys.argv[1]):
    p = line.split()
    if p[0] == 'A':
        A.append((int(p[1]), int(p[2]), int(p[3]), int(p[4])))
    elif p[0] == 'K':
        kt.append((int(p[1]), p[4]))
if not A:
    print('no API records (run with TRACE_API=1)')
    sys.exit()
A.sort()
t0, t1 = A[0][0], max(e for _, e, _, _ in A)
a = t0 + (t1 - t0) // 5
b = t1 - (t1 - t0) // 10
W = b - a
win = [r for r in A if r[0] >= a and r[1] <= b]
for s, n in kt:
    if a <= s <= b:
        K[n] += 1
per_frame = sys.argv[3] if len(sys.argv) > 3 else 'vmaf_vif_stats_u8'
frames = K.get(per_frame, 0)
print('window %.1f ms, %d calls, %d threads, %d frames (launches of %s)' % (
    W / 1e6, len(win), len({r[2] for r in win}), frames, per_frame))
d = collections.defaultdict(lambda: [0, 0])
for s, e, _, c in win:
    d[c][0] += 1
    d[c][1] += e - s
print('%-40s %8s %9s %9s %9s' % ('call', 'count', 'mean us', 'per frame', 'us/frame'))
for c, (n, t) in sorted(d.items(), key=lambda x: -x[1][1]):
    f = frames or 1
    print('%-40s %8d %9.2f %9.2f %9.2f' % (names.get(c, str(c))[:40], n, t / n / 1e3, n / f, t / 1e3 / f))
tot = sum(e - s for s, e, _, _ in win)
iv = sorted((s, e) for s, e, _, _ in win)
u = 0
cs = ce = None
for s, e in iv:
    if ce is None or s > ce:
        if ce is not None:
            u += ce - cs
        cs, ce = s, e
    else:
        ce = max(ce, e)
if ce is not None:
    u += ce - cs
print('sum of call time %.1f%% of the window, union (some thread in the driver) %.1f%%' % (
    100 * tot / W, 100 * u / W))
if frames:
    print('per frame: %.1f us of calls, %.1f us with some thread in the driver, frame period %.1f us' % (
        tot / 1e3 / frames, u / 1e3 / frames, W / 1e3 / frames))
