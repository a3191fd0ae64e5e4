# hostile: __del__ and atexit handlers that loop or exit when the interpreter is dropped
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

import atexit, os
class Loop:
    def __del__(self):
        while True:
            pass
keep = [Loop() for _ in range(10)]
atexit.register(lambda: os._exit(9))
atexit.register(lambda: [None for _ in iter(int, 1)])
print('DONE')
