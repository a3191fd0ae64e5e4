# hostile: select and selectors over fake sockets and stdio
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

import select, selectors
attempt('select stdio', lambda: select.select([0], [1, 2], [], 0))
attempt('select many fds', lambda: select.select(list(range(64)), [], [], 0))
deny('selector socket', lambda: selectors.DefaultSelector().register(__import__('socket').socket(), selectors.EVENT_READ))
print('DONE')
