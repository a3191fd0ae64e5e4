# hostile: frame and gc walking up into the host's reactor frames, tampering with them
# expect: ok

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

import sys, gc
f = sys._getframe()
depth = 0
while f is not None:
    depth += 1
    f.f_globals.setdefault('__tampered__', True)
    f = f.f_back
print('frames', depth)
n = 0
for o in gc.get_objects():
    if isinstance(o, dict) and '__builtins__' in o:
        o['open'] = None
        n += 1
print('dicts tampered', n)
import builtins
builtins.open = lambda *a, **k: 1/0
builtins.print = None
