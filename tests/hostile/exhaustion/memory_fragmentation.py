# hostile: fragmenting the heap, then asking for a larger block than any hole
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

blocks = []
try:
    while True:
        blocks.append(bytearray(256 << 10))
except MemoryError:
    print('filled', len(blocks))
del blocks[::2]
deny('big after frag', lambda: len(bytearray(64 << 20)))
small = [bytes(1000) for _ in range(1000)]
print('small ok', len(small))
print('DONE')
