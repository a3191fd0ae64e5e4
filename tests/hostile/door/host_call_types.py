# hostile: the door with wrong argument types and counts
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

import _host
for arg in [None, 1, 'str', bytearray(b'x'), memoryview(b'x'), [1], 2**64]:
    attempt(repr(arg)[:20], lambda: _host.call(arg))
attempt('no args', lambda: _host.call())
attempt('two args', lambda: _host.call(b'a', b'b'))
print('DONE')
