# hostile: chmod, chown, utime, xattrs on the mounts and on symlinks to host files
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
Z = '/usr/local/lib/python315.zip'
attempt('chmod zip', lambda: os.chmod(Z, 0o777))
attempt('utime zip', lambda: os.utime(Z, (0, 0)))
attempt('chown zip', lambda: os.chown(Z, 0, 0))
attempt('symlink canary', lambda: os.symlink('{CANARY}', 'c'))
attempt('utime via link', lambda: os.utime('c', (0, 0)))
attempt('utime link nofollow', lambda: os.utime('c', (0, 0), follow_symlinks=False))
attempt('chmod via link', lambda: os.chmod('c', 0o777))
attempt('setxattr', lambda: os.setxattr(Z, 'user.x', b'1'))
print('DONE')
