# hostile: O_TRUNC and write modes on the read-only stdlib zip (the wasmtime preopen bypass class)
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
deny('open w', lambda: open(Z, 'w'))
deny('open r+', lambda: open(Z, 'r+b').write(b'x'))
deny('open a', lambda: open(Z, 'a').write('x'))
deny('O_RDONLY|O_TRUNC', lambda: os.close(os.open(Z, os.O_RDONLY | os.O_TRUNC)))
deny('O_WRONLY|O_TRUNC', lambda: os.close(os.open(Z, os.O_WRONLY | os.O_TRUNC)))
deny('O_CREAT|O_EXCL', lambda: os.close(os.open(Z, os.O_CREAT | os.O_EXCL | os.O_WRONLY)))
deny('os.truncate', lambda: os.truncate(Z, 0))
def ftrunc():
    fd = os.open(Z, os.O_RDONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
deny('ftruncate ro fd', ftrunc)
def pwrite():
    fd = os.open(Z, os.O_RDONLY)
    try:
        os.pwrite(fd, b'x', 0)
    finally:
        os.close(fd)
deny('pwrite ro fd', pwrite)
deny('mpl truncate', lambda: open('/usr/local/lib/python315.zip/matplotlib/mpl-data/matplotlibrc', 'w'))
print('DONE')
