# hostile: close stdin so a file takes descriptor 0, then write past the quota through it (the quota counts fds from 3; closing stdio is refused)
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

import os
deny('closing stdin', lambda: os.close(0))
fd = os.open('big.bin', os.O_CREAT | os.O_WRONLY)
print('file descriptor', fd)
def flood():
    for _ in range(16):
        os.write(fd, b'x' * (1 << 20))
    return os.path.getsize('big.bin')
deny('16 MiB through a reused fd under a 4 MiB quota', flood)
def far():
    os.lseek(fd, 1 << 40, 0)
    return os.write(fd, b'y')
deny('1 TiB sparse through a reused fd', far)
print('DONE')
