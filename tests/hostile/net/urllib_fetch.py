# hostile: urllib to the loopback listener and to the outside
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

import urllib.request
deny('loopback', lambda: urllib.request.urlopen('http://127.0.0.1:{PORT}/', timeout=1).read())
deny('outside', lambda: urllib.request.urlopen('http://example.com/', timeout=1).read())
deny('file url', lambda: urllib.request.urlopen('file://{CANARY}').read())
print('DONE')
