# hostile: writing one file until the disk quota says ENOSPC
# expect: ok
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

import errno
n = 0
try:
    with open('big.bin', 'wb') as f:
        while True:
            f.write(b'\0' * (1 << 20))
            f.flush()
            n += 1
except OSError as e:
    print('stopped', n, e.errno == errno.ENOSPC)
