# Symbolise prof.c output: python3 sym.py FILE [topN]
import sys, subprocess, bisect, collections, re, os
fn = sys.argv[1]; top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
comm = {}; samples = []; maps = []
for line in open(fn):
    if line[0] == 'T':
        _, t, *c = line.split(); comm[int(t)] = ' '.join(c)
    elif line[0] == 'S':
        p = line.split(); samples.append((int(p[1]), [int(x, 16) for x in p[2:]]))
    elif line[0] == 'M':
        p = line[2:].split()
        if len(p) >= 6 and 'x' in p[1]:
            a, b = (int(x, 16) for x in p[0].split('-')); maps.append((a, b, int(p[2], 16), p[5]))
maps.sort(); starts = [m[0] for m in maps]
def locate(a):
    i = bisect.bisect_right(starts, a) - 1
    if i >= 0 and maps[i][0] <= a < maps[i][1]: return maps[i][3], a - maps[i][0] + maps[i][2]
    return None, a
# collect addresses per module
want = collections.defaultdict(set)
for _, st in samples:
    for d, a in enumerate(st[2:]):
        m, off = locate(a if d == 0 else a - 1)
        if m: want[m].add(off)
def segs(m):
    out = []
    try:
        for l in subprocess.run(['readelf', '-lW', m], capture_output=True, text=True).stdout.split('\n'):
            q = l.split()
            if q and q[0] == 'LOAD': out.append((int(q[1], 16), int(q[2], 16), int(q[4], 16)))
    except Exception: pass
    return out
def vaddr(sg, o):
    for fo, va, sz in sg:
        if fo <= o < fo + sz: return o - fo + va
    return o
names = {}
for m, offs0 in want.items():
    sg = segs(m)
    offs0 = sorted(offs0); offs = [vaddr(sg, o) for o in offs0]
    res = None
    if os.path.exists(m):
        try:
            out = subprocess.run(['addr2line', '-f', '-C', '-e', m] + ['%x' % o for o in offs], capture_output=True, text=True, timeout=300).stdout.split('\n')
            res = [out[2 * i] for i in range(len(offs))]
        except Exception: res = None
    dyn = None
    for o0, o, r in zip(offs0, offs, res or [None] * len(offs)):
        if r and r != '??': names[(m, o0)] = r; continue
        if dyn is None:
            dyn = []
            try:
                for l in subprocess.run(['nm', '-D', '--defined-only', m], capture_output=True, text=True).stdout.split('\n'):
                    q = l.split()
                    if len(q) == 3: dyn.append((int(q[0], 16), q[2]))
            except Exception: pass
            dyn.sort(); dk = [x[0] for x in dyn]
        j = bisect.bisect_right(dk, o) - 1 if dyn else -1
        names[(m, o0)] = '%s~%s' % (os.path.basename(m), dyn[j][1] if j >= 0 else hex(o))
def name(a, leaf):
    m, off = locate(a if leaf else a - 1)
    if not m: return '[%x]' % a
    n = names.get((m, off), '?')
    return n if len(n) < 90 else n[:87] + '...'
bythread = collections.defaultdict(list)
for t, st in samples:
    c = re.sub(r'[0-9]+$', '#', comm.get(t, '?'))
    bythread[c].append(st)
total = len(samples)
print('samples', total)
for c, sts in sorted(bythread.items(), key=lambda x: -len(x[1])):
    print('\n== thread group %-20s %6d samples (%.1f%%), %d threads' % (c, len(sts), 100 * len(sts) / total, len({t for t, _ in samples if re.sub(r'[0-9]+$', '#', comm.get(t, '?')) == c})))
    selfc = collections.Counter(); incl = collections.Counter()
    for st in sts:
        fr = st[2:]
        if not fr: continue
        selfc[name(fr[0], True)] += 1
        seen = set()
        for d, a in enumerate(fr):
            n = name(a, d == 0)
            if n not in seen: seen.add(n); incl[n] += 1
    print('  self:')
    for n, k in selfc.most_common(top // 2): print('   %5.1f%% %s' % (100 * k / len(sts), n))
    print('  inclusive:')
    for n, k in incl.most_common(top): print('   %5.1f%% %s' % (100 * k / len(sts), n))
