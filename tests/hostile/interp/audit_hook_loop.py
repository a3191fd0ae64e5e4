# hostile: an audit hook that never returns
# expect: fuel_exhausted timeout ok
# limits: timeout_ms=1500 fuel=2000000000
# max-wall-ms: 6000

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
print('DONE', flush=True)
def hook(event, args):
    while True:
        pass
sys.addaudithook(hook)
len('x')
open('x', 'w')
