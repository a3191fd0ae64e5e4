# hostile: a displayhook and excepthook that raise and recurse
# expect: error stack_overflow fuel_exhausted
# limits: timeout_ms=10000

# Each round of the recursion keeps its frames: the stack overflows when memory runs out, or
# the fuel runs out first (memory_bytes is headroom beyond the template's image).

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
def bad(*a):
    bad(*a)
sys.displayhook = bad
sys.excepthook = bad
sys.unraisablehook = bad
print('DONE', flush=True)
raise ValueError('x')
