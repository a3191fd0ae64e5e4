# hostile: leaving markers in every writable place, for the next run to find
# expect: ok
# stdout-has: DONE

def deny(name, f):
    """An attack that must fail: success prints ESCAPED (the runner forbids that word)."""
    try:
        out = f()
    except BaseException as e:
        print(f"{name}: refused ({type(e).__name__})")
        return e
    print(f"ESCAPED {name}: {out!r}"[:300])

def attempt(name, f):
    """An attempt whose outcome is not itself a breach; the host-side checks judge it."""
    try:
        out = f()
    except BaseException as e:
        print(f"{name}: {type(e).__name__}")
        return e
    print(f"{name}: ok {out!r}"[:300])
    return out

import os
for p in ['/marker.txt', '/tmp/marker.txt', '/tmp/home/marker.txt']:
    attempt(p, lambda p=p: open(p, 'w').write('cross-run-marker-9b1d'))
import sys
sys.modules['json'].MARKER = 'cross-run-marker-9b1d'
print('DONE')
