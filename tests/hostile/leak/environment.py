# hostile: the host's environment variables
# expect: ok
# stdout-has: DONE
# output-lacks: {HOST_ENV_SECRET}
# output-lacks: {HOST_PATH}

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

import os
print(sorted(os.environ))
print(dict(os.environ))
attempt('getenv PATH', lambda: os.getenv('PATH'))
attempt('confstr', lambda: os.confstr('CS_PATH'))
print('DONE')
