# hostile: relative '..' chains towards /etc/passwd and the canary
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
for depth in (1, 2, 8, 64):
    up = '../' * depth
    deny(f'passwd_{depth}', lambda: open(up + 'etc/passwd').read())
    deny(f'canary_{depth}', lambda: open(up + '{CANARY}'.lstrip('/')).read())
    deny(f'list_{depth}', lambda: [n for n in os.listdir(up) if n not in ('usr', 'tmp')] or 1/0)
deny('dot_dot_in_middle', lambda: open('tmp/../../etc/passwd').read())
deny('bytes_path', lambda: open(b'../../etc/passwd').read())
print('DONE')
