# Prefixes each input line with the seconds since start: cmd 2>&1 | python3 ts.py
import sys, time
t0 = time.time()
for l in sys.stdin:
    sys.stdout.write('%8.3f %s' % (time.time() - t0, l))
