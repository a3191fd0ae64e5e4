# hostile: rename and link between the writable root and the read-only mounts, both ways
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
open('mine.txt', 'w').write('x')
deny('root -> stdlib', lambda: os.rename('mine.txt', '/usr/local/lib/mine.txt'))
deny('root -> mpl', lambda: os.rename('mine.txt', '/usr/local/lib/python315.zip/matplotlib/mpl-data/mine.txt'))
deny('mpl -> root', lambda: os.rename('/usr/local/lib/python315.zip/matplotlib/mpl-data/matplotlibrc', 'rc'))
deny('stdlib -> root dir', lambda: os.rename('/usr/local/lib/python315.zip', '/tmp/z.zip'))
deny('root dir -> over stdlib dir', lambda: (os.mkdir('d'), os.rename('d', '/usr/local/lib'))[1])
deny('link root -> mpl', lambda: os.link('mine.txt', '/usr/local/lib/python315.zip/matplotlib/mpl-data/m'))
deny('rename trailing slash', lambda: os.rename('mine.txt/', '/usr/local/lib/x/'))
print('DONE')
