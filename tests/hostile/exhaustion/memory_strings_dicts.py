# hostile: memory growth through str/dict/set objects, with MemoryError swallowed
# expect: ok memory_exceeded error fuel_exhausted timeout
# limits: fuel=30000000000 timeout_ms=10000

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

d = {}
i = 0
try:
    while True:
        d[i] = str(i) * 100
        i += 1
except MemoryError:
    pass
print('entries', i > 0)
d = None
