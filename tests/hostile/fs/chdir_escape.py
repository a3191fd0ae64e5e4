# hostile: chdir upwards and through every preopen, then relative opens
# expect: ok
# stdout-has: DONE
# output-lacks: root:x:

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
for target in ['..', '../..', '/..', '/usr/local/lib/..', '/usr/local/lib/python315.zip/matplotlib/mpl-data/../../..']:
    attempt('chdir ' + target, lambda: os.chdir(target))
    attempt('cwd', os.getcwd)
    deny('passwd', lambda: open('etc/passwd').read())
    os.chdir('/')
print('DONE')
