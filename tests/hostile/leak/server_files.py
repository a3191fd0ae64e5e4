# hostile: server-side files: the audit log, the runtime folder, the scratch lock
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
for p in ['{AUDIT}', '{VIVARIUM_HOME}', '{VIVARIUM_HOME}/compiled', '{SCRATCH}/.lock', '/proc/self/fd/0']:
    deny('read ' + p, lambda p=p: open(p, 'rb').read(64))
    deny('list ' + p, lambda p=p: os.listdir(p))
print('DONE')
