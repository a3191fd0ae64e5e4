# hostile: looking for markers an earlier run left (each run must start fresh)
# expect: ok
# stdout-has: DONE
# output-lacks: cross-run-marker-9b1d

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

import os, json
for p in ['/marker.txt', '/tmp/marker.txt', '/tmp/home/marker.txt']:
    deny(p, lambda p=p: open(p).read())
deny('module attr', lambda: json.MARKER)
print(sorted(os.listdir('/')), sorted(os.listdir('/tmp')))
print('DONE')
