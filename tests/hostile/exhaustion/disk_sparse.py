# hostile: sparse files and truncation far past the quota
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
deny('truncate', lambda: os.truncate(open('t', 'w').name, 1 << 40))
def ftrunc():
    fd = os.open('t2', os.O_CREAT | os.O_WRONLY)
    os.ftruncate(fd, 1 << 40)
deny('ftruncate', ftrunc)
def pwrite():
    fd = os.open('t3', os.O_CREAT | os.O_WRONLY)
    os.pwrite(fd, b'x', 1 << 40)
deny('pwrite far', pwrite)
print('DONE')
