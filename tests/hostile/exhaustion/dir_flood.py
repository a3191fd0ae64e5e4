# hostile: creating directories and symlinks until the quota refuses
# expect: ok
# limits: fuel=20000000000 timeout_ms=10000
# stdout-has: stopped

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
n = 0
try:
    while True:
        os.mkdir(f'd{n}')
        os.symlink('/etc', f'd{n}/l')
        n += 1
except OSError as e:
    print('stopped', n, e.errno)
