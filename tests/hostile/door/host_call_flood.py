# hostile: a million door calls in a loop
# expect: ok fuel_exhausted timeout
# limits: timeout_ms=2000

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

import _host
n = 0
for i in range(1000000):
    try:
        _host.call(b'\0vivarium-result\0x')
    except BaseException:
        pass
    n += 1
print('calls', n)
