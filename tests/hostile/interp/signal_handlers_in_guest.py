# hostile: faulthandler and signal handlers installed inside the guest
# expect: ok error trap

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

import faulthandler, signal, sys
attempt('faulthandler enable', lambda: faulthandler.enable())
attempt('dump_traceback_later', lambda: faulthandler.dump_traceback_later(0.01, repeat=True))
attempt('register', lambda: faulthandler.register(signal.SIGUSR1))
attempt('dump', lambda: faulthandler.dump_traceback())
attempt('_sigsegv', lambda: faulthandler._sigsegv())
