# hostile: a symlinked directory swapped in between check and use (TOCTOU-style loop)
# expect: ok
# limits: timeout_ms=10000
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
os.mkdir('real')
for i in range(200):
    attempt_quiet = None
    try:
        os.rmdir('swap') if os.path.isdir('swap') and not os.path.islink('swap') else os.remove('swap')
    except OSError:
        pass
    try:
        if i % 2:
            os.symlink('/..', 'swap')
        else:
            os.symlink('real', 'swap')
        with open('swap/../../etc/passwd') as f:
            print('ESCAPED', f.read(20))
    except OSError:
        pass
deny('final', lambda: open('swap/etc/passwd').read())
print('DONE')
