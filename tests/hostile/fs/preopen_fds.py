# hostile: the preopened directory descriptors used directly: read, write, seek, dup onto stdio
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
for fd in (3, 4, 5):
    attempt(f'fstat {fd}', lambda: os.fstat(fd).st_mode)
    attempt(f'read {fd}', lambda: os.read(fd, 10))
    attempt(f'write {fd}', lambda: os.write(fd, b'x'))
    attempt(f'lseek {fd}', lambda: os.lseek(fd, 0, 2))
    attempt(f'dup2 {fd}->1', lambda: os.dup2(fd, 1))
for fd in (6, 7, 100, 2**31 - 1, -1):
    attempt(f'close {fd}', lambda: os.close(fd))
print('still prints')
print('DONE')
