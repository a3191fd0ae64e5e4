# hostile: the resource module: raise limits, read host rlimits
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

deny('import resource', lambda: __import__('resource').setrlimit(0, (-1, -1)))
import os
attempt('getloadavg', lambda: os.getloadavg())
attempt('cpu_count', os.cpu_count)
attempt('sched', lambda: os.sched_getaffinity(0))
print('DONE')
