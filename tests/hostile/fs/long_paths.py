# hostile: very long names and paths: 255+ byte components, 64 KiB paths, many components
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
for n in (255, 256, 1024, 4096, 65536):
    attempt(f'name {n}', lambda: open('a' * n, 'w').close())
attempt('path 100k', lambda: open('/'.join(['b'] * 50000), 'w'))
attempt('stat 1M', lambda: os.stat('c/' * 500000))
attempt('dots 200k', lambda: os.stat('./' * 100000 + 'x'))
attempt('dotdots 200k', lambda: os.stat('../' * 70000 + 'etc/passwd'))
print('DONE')
