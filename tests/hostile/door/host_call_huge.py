# hostile: the host door with requests of 1 MiB to 64 MiB
# expect: ok
# limits: memory_bytes=268435456
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
for n in (1 << 20, (1 << 20) + 17, 16 << 20, 64 << 20):
    attempt(f'plain {n}', lambda: _host.call(b'x' * n))
    attempt(f'tagged {n}', lambda: _host.call(b'\0vivarium-result\0' + b'y' * n))
print('DONE')
