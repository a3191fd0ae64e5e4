# hostile: hand-made code objects with out-of-range operands (classic CPython crashers)
# expect: ok error trap stack_overflow

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

import types
def f():
    return 1
c = f.__code__
for raw in [bytes([100, 255, 83, 0]) * 2, bytes([124, 200, 83, 0]), bytes([1, 0]) * 50, b'\xff\xff' * 8]:
    try:
        g = types.FunctionType(c.replace(co_code=raw), {})
        print('call', g())
    except BaseException as e:
        print(type(e).__name__)
