# hostile: special and hostile file names: NUL, newlines, invalid UTF-8, '.', '..', reserved names
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
for name in ['with\nnewline', 'tab\tname', ' lead', 'trail ', 'CON', 'aux.txt', 'a:b', 'back\\slash', '\u202eevil', 'é'*100, '...', '-rf']:
    attempt(repr(name), lambda: open(name, 'w').write('x'))
for name in ['nul\0byte', '.', '..', '', '/']:
    attempt(repr(name), lambda: open(name, 'w').write('x'))
attempt('bytes invalid utf8', lambda: os.close(os.open(b'\xff\xfe', os.O_CREAT | os.O_WRONLY)))
attempt('surrogateescape', lambda: open('\udcff', 'w').write('x'))
print(sorted(os.listdir('.')))
print('DONE')
