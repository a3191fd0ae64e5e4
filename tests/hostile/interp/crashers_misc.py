# hostile: known interpreter crashers: mutating containers during comparison, deep exception chains
# expect: ok stack_overflow error fuel_exhausted timeout
# limits: fuel=20000000000 timeout_ms=10000

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
class Evil:
    def __eq__(self, other):
        lst.clear()
        return False
lst = [Evil() for _ in range(100)]
attempt('list.index mutate', lambda: lst.index(None))
d = {Evil(): 1 for _ in range(10)}
attempt('dict compare mutate', lambda: d == {Evil(): 1})
e = None
for i in range(100000):
    try:
        raise ValueError(i) from e
    except ValueError as x:
        e = x
attempt('format deep chain', lambda: len(''.join(__import__('traceback').format_exception(e))))
g = (x for x in range(1))
for _ in range(100000):
    g = (x for x in g)
attempt('deep generator', lambda: list(g))
