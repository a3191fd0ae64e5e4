# hostile: spoofing a session's result channel with oversize and non-UTF-8 results
# expect: ok
# limits: memory_bytes=268435456
# stdout-has: DONE
# via: cli http session

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
attempt('spoof', lambda: _host.call(b'\0vivarium-result\0' + b'\xff\xfe' * 1000))
attempt('oversize', lambda: _host.call(b'\0vivarium-result\0' + b'z' * (2 << 20)))
'final value'
print('DONE')
