# hostile: device nodes and making new ones
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
for p in ['/dev/zero', '/dev/mem', '/dev/kmem', '/dev/tty', '/dev/random', '/dev/null', '/dev/shm', '/dev/vda']:
    deny(p, lambda p=p: open(p, 'rb').read(1))
deny('mknod', lambda: os.mknod('node', 0o600 | 0o020000, os.makedev(1, 1)) if hasattr(os, 'mknod') else 1/0)
deny('mkfifo', lambda: os.mkfifo('fifo') if hasattr(os, 'mkfifo') else 1/0)
print('DONE')
