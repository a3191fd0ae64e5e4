# hostile: moving a file onto stdout/stdin (escaping the output cap's stream or the quota)
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
fd = os.open('f.txt', os.O_CREAT | os.O_WRONLY)
attempt('dup2 file->1', lambda: os.dup2(fd, 1))
attempt('dup2 file->2', lambda: os.dup2(fd, 2))
attempt('dup2 1->file', lambda: os.dup2(1, fd))
attempt('close 0', lambda: os.close(0))
attempt('write to 1', lambda: os.write(1, b'via fd 1\n'))
print('size of f.txt', os.path.getsize('f.txt'))
print('DONE')
