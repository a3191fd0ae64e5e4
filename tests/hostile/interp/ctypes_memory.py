# hostile: ctypes: loading libc, raw memory reads and writes
# expect: ok trap
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

attempt('import ctypes', lambda: __import__('ctypes'))
try:
    import ctypes
    attempt('CDLL None', lambda: ctypes.CDLL(None).system(b'id'))
    attempt('string_at 0', lambda: ctypes.string_at(0, 16))
    attempt('memmove to 8', lambda: ctypes.memmove(8, b'xxxx', 4))
except ImportError:
    pass
deny('_ctypes', lambda: __import__('_ctypes'))
print('DONE')
