# hostile: repr of a list nested 300 000 deep (C-level recursion)
# expect: ok stack_overflow error
# limits: timeout_ms=10000
# stdout-has: built

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

x = []
for _ in range(300000):
    x = [x]
print('built', flush=True)
deny('repr', lambda: len(repr(x)))
