# hostile: directories nested thousands deep, then walked and left for the host to remove
# expect: ok
# limits: disk_bytes=4194304 fuel=20000000000 timeout_ms=10000
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
depth = 0
try:
    for depth in range(1, 3000):
        os.mkdir('d')
        os.chdir('d')
except OSError as e:
    print('stopped at', depth, type(e).__name__, e.errno)
os.chdir('/')
n = sum(1 for _ in os.walk('d'))
print('walked', n)
print('DONE')
