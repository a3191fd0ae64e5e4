# hostile: os.urandom and random with enormous sizes
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

import os, random
deny('urandom', lambda: len(os.urandom(1 << 40)))
deny('randbytes', lambda: len(random.randbytes(1 << 40)))
attempt('urandom 8M', lambda: len(os.urandom(8 << 20)))
print('DONE')
