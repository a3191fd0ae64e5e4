# hostile: one huge allocation far past the memory cap, caught
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

for n in (1 << 30, 4 << 30, 1 << 40, (1 << 62)):
    deny(f'bytearray {n}', lambda: len(bytearray(n)))
deny('list', lambda: len([0] * (1 << 31)))
print('after', len(bytearray(1 << 20)))
print('DONE')
