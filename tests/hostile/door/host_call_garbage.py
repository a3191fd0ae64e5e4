# hostile: the host door with garbage, empty and tag-lookalike requests
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
for req in [b'', b'\0', b'\0vivarium-result', b'\0vivarium-result\0', b'{"v":1,"id":1,"op":"list"}', bytes(range(256)) * 4, b'\xff' * 100]:
    attempt(repr(req[:20]), lambda: _host.call(req))
attempt('available', _host.available)
print('DONE')
