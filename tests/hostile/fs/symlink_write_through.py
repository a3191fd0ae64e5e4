# hostile: writing, truncating and appending through symlinks that point at the canary
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
for i, target in enumerate(['{CANARY}', '../../../../../..{CANARY}', '/etc/passwd']):
    name = f'w{i}'
    attempt('symlink', lambda: os.symlink(target, name))
    attempt('write ' + name, lambda: open(name, 'w').write('pwned'))
    attempt('append ' + name, lambda: open(name, 'a').write('pwned'))
    attempt('os.open trunc ' + name, lambda: os.close(os.open(name, os.O_WRONLY | os.O_TRUNC)))
print('DONE')
