# hostile: symlinks planted inside the sandbox pointing out of it, then read through
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
targets = {'l_abs': '/etc/passwd', 'l_canary': '{CANARY}', 'l_dots': '../../../../../../{CANARY}'.replace('//', '/'),
           'l_parent': '..', 'l_root_parent': '/..', 'l_scratch': '{SCRATCH}'}
for name, target in targets.items():
    attempt('symlink ' + name, lambda: os.symlink(target, name))
    deny('read ' + name, lambda name=name: open(name).read())
    deny('list ' + name, lambda name=name: [n for n in os.listdir(name + '/') if n not in ('usr', 'tmp')] or 1/0)
deny('readlink_follow_chain', lambda: open('l_parent/l_parent/etc/passwd').read())
print('DONE')
