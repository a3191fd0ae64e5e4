# hostile: door calls from __del__, from a trace function and during the displayhook
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

import _host, sys, gc
class D:
    def __del__(self):
        _host.call(b'\0vivarium-result\0from del')
for _ in range(100):
    D()
gc.collect()
sys.settrace(lambda *a: (_host.call(b'\0vivarium-result\0from trace'), None)[1])
def f():
    return 1
f()
sys.settrace(None)
print('DONE')
