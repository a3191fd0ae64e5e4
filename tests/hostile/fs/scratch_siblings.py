# hostile: the host's scratch root and other sandboxes' directories
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

import os
deny('list scratch', lambda: os.listdir('{SCRATCH}'))
deny('list scratch rel', lambda: os.listdir('../../../../../..{SCRATCH}'))
deny('list parent', lambda: [n for n in os.listdir('/..') if n not in ('usr', 'tmp')] or 1/0)
deny('glob siblings', lambda: __import__('glob').glob('../sbx-*') or 1/0)
deny('lock file', lambda: open('{SCRATCH}/.lock').read())
deny('lock file rel', lambda: open('../.lock').read())
print('DONE')
