# hostile: seek far past the end, then a plain write: a sparse file over the quota, and real blocks at 1 byte each
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
fd = os.open('sparse.bin', os.O_CREAT | os.O_WRONLY)
os.lseek(fd, 1 << 40, 0)
deny('seek+write 1 TiB', lambda: os.write(fd, b'x'))
# Each one-byte write into a hole allocates a block: charged as one, so the quota stops it.
fd2 = os.open('blocks.bin', os.O_CREAT | os.O_WRONLY)
n = 0
try:
    for i in range(4096):
        os.lseek(fd2, i * 4096, 0)
        os.write(fd2, b'x')
        n += 1
except OSError as e:
    print('stopped', n, e.errno)
print('one-byte writes into distinct blocks', n)
print('DONE')
