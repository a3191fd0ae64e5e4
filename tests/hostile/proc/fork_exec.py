# hostile: fork, exec, spawn and posix_spawn
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
for name in ['fork', 'forkpty', 'vfork']:
    deny(name, lambda name=name: getattr(os, name)())
deny('execv', lambda: os.execv('/bin/sh', ['sh', '-c', 'id']))
deny('execve', lambda: os.execve('/bin/sh', ['sh'], {}))
deny('posix_spawn', lambda: os.posix_spawn('/bin/sh', ['sh'], {}))
deny('spawnv', lambda: os.spawnv(os.P_WAIT, '/bin/sh', ['sh']))
print('DONE')
