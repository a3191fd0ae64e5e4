# hostile: renaming, unlinking and replacing the stdlib zip and mpl-data
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
M = '/usr/local/lib/python315.zip/matplotlib/mpl-data'
deny('rename in place', lambda: os.rename(Z, '/usr/local/lib/y.zip'))
deny('rename out', lambda: os.rename(Z, '/stolen.zip'))
deny('replace', lambda: os.replace(Z, '/usr/local/lib/z.zip'))
deny('unlink', lambda: os.remove(Z))
deny('rmdir mpl', lambda: os.rmdir(M))
deny('rename mpl out', lambda: os.rename(M + '/matplotlibrc', '/rc'))
deny('unlink mpl file', lambda: os.remove(M + '/matplotlibrc'))
deny('mkdir in stdlib', lambda: os.mkdir('/usr/local/lib/evil'))
deny('new file in stdlib', lambda: open('/usr/local/lib/evil.py', 'w'))
deny('new file in mpl', lambda: open(M + '/evil.py', 'w'))
deny('symlink in stdlib', lambda: os.symlink('/etc', '/usr/local/lib/etc'))
print('DONE')
