# hostile: multiprocessing pools and processes
# expect: ok
# limits: fuel=20000000000 timeout_ms=10000
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

import multiprocessing
deny('Pool', lambda: multiprocessing.Pool(2).map(abs, [1, 2]))
deny('Process', lambda: multiprocessing.Process(target=print).start())
deny('cpu_count', lambda: multiprocessing.cpu_count() and 1/0)
print('DONE')
