# hostile: trace and profile functions that raise or loop in the host's own turns
# expect: ok error

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

import sys
def tracer(frame, event, arg):
    raise KeyboardInterrupt
print('DONE', flush=True)
sys.setprofile(lambda *a: None)
sys.settrace(tracer)
def f():
    return 1
f()
