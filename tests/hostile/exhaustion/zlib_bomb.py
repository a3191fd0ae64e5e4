# hostile: decompressing a zlib bomb far past the memory cap
# expect: ok memory_exceeded
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

import zlib
bomb = zlib.compress(b'\0' * (64 << 20), 9)
print('bomb', len(bomb), flush=True)
deny('decompress', lambda: len(zlib.decompress(bomb * 1) * 64))
print('DONE')
