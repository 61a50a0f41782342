# Analyse trace.c output: python3 an.py FILE
import sys, collections
K = []; C = []; S = []
for l in open(sys.argv[1]):
    p = l.split()
    if p[0] == 'K': K.append((int(p[1]), int(p[2]), int(p[3]), p[4]))
    elif p[0] == 'C': C.append((int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5])))
    elif p[0] == 'S': S.append((int(p[1]), int(p[2]), int(p[3]), int(p[4])))
K.sort()
if not K: print('no kernels'); sys.exit()
t0, t1 = K[0][0], max(e for _, e, _, _ in K)
a = t0 + (t1 - t0) // 5; b = t1 - (t1 - t0) // 10  # middle of the run
def clip(iv): return [(max(s, a), min(e, b)) for s, e in iv if min(e, b) > max(s, a)]
def union(iv):
    iv = sorted(iv); tot = 0; cs = ce = None; gaps = []
    for s, e in iv:
        if ce is None or s > ce:
            if ce is not None: tot += ce - cs; gaps.append(s - ce)
            cs, ce = s, e
        else: ce = max(ce, e)
    if ce is not None: tot += ce - cs
    return tot, gaps
W = b - a
kiv = clip([(s, e) for s, e, _, _ in K]); civ = clip([(s, e) for s, e, _, _, _ in C]); siv = clip([(s, e) for s, e, _, _ in S])
kb, kg = union(kiv); ab, ag = union(kiv + civ + siv)
print('window %.1f ms; kernels %d (%d in window)' % (W / 1e6, len(K), len(kiv)))
print('kernel busy %.1f%%, any GPU work busy %.1f%%' % (100 * kb / W, 100 * ab / W))
print('kernel time / busy time (mean concurrency) %.2f' % (sum(e - s for s, e in kiv) / kb))
ag.sort()
if ag: print('idle gaps (any work): n %d, total %.2f ms, p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us' % (len(ag), sum(ag) / 1e6, ag[len(ag) // 2] / 1e3, ag[int(len(ag) * .9)] / 1e3, ag[int(len(ag) * .99)] / 1e3, ag[-1] / 1e3))
# concurrency histogram: time with n kernels running
ev = []
for s, e in kiv: ev += [(s, 1), (e, -1)]
ev.sort(); cur = 0; last = a; hist = collections.Counter()
for t, d in ev:
    hist[cur] += t - last; last = t; cur += d
hist[cur] += b - last
print('time with n kernels running: ' + ', '.join('%d: %.1f%%' % (n, 100 * v / W) for n, v in sorted(hist.items()) if v > W * 0.002))
d = collections.defaultdict(lambda: [0, 0])
for s, e, _, n in K:
    d[n][0] += 1; d[n][1] += e - s
frames = max(v[0] for v in d.values())
print('per kernel: count, mean us, us per frame (frames ~ %d)' % frames)
for n, (c, t) in sorted(d.items(), key=lambda x: -x[1][1]):
    print('  %-48s %7d %8.2f %8.2f' % (n[:48], c, t / c / 1e3, t / 1e3 / frames))
print('sum of kernel time per frame %.1f us' % (sum(t for _, t in d.values()) / 1e3 / frames))
cc = collections.defaultdict(lambda: [0, 0, 0])
for s, e, _, k, by in C: cc[k][0] += 1; cc[k][1] += e - s; cc[k][2] += by
for k, (c, t, by) in cc.items(): print('memcpy kind %d: %d copies, mean %.2f us, %.1f MB each' % (k, c, t / c / 1e3, by / c / 1e6))
if S: print('memsets: %d, mean %.2f us' % (len(S), sum(e - s for s, e, _, _ in S) / len(S) / 1e3))
streams = collections.Counter(st for _, _, st, _ in K)
print('streams with kernels:', len(streams))
