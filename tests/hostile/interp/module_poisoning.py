# hostile: poisoning sys.modules, io and gc so the host's hidden flush turn breaks
# expect: ok

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

import sys, gc, io, builtins
open('kept.txt', 'w').write('kept')
f = open('unflushed.txt', 'w')
f.write('data')
class Bomb:
    def __getattr__(self, name):
        while True:
            pass
sys.modules['gc'] = Bomb()
sys.modules['io'] = Bomb()
gc.get_objects = lambda: iter(lambda: 1, 2)
io.IOBase = Bomb
builtins.isinstance = lambda *a: (_ for _ in ()).throw(SystemExit(3))
builtins.__import__ = lambda *a, **k: Bomb()
print('DONE')
