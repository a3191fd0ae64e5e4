# hostile: descriptors held as directories, scandir iterators, dups and new files
# expect: ok
# stdout-has: stopped

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
held = []
try:
    while True:
        held.append(os.open('/', os.O_RDONLY))
        held.append(os.scandir('/'))
        held.append(open(f'n{len(held)}', 'w'))
        held.append(os.dup(0))
except OSError as e:
    print('stopped', len(held), e.errno)
