# hostile: probing the frozen snapshot state: str hash, id(), random seeds
# expect: ok
# stdout-has: urandom True

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

import random, os
print('hash', hash('abc'))
print('random', random.random() != random.random())
print('urandom', os.urandom(8).hex() != os.urandom(8).hex())
print('id', id(object()) > 0)
