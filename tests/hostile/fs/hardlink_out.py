# hostile: hard links to host files (the canary, the stdlib zip) from the writable root
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
deny('link canary', lambda: os.link('{CANARY}', 'hl_canary'))
deny('link canary rel', lambda: os.link('../../../../../..{CANARY}', 'hl_canary2'))
deny('link passwd', lambda: os.link('/etc/passwd', 'hl_passwd'))
attempt('link zip into root', lambda: os.link('/usr/local/lib/python315.zip', 'hl_zip'))
deny('write via zip link', lambda: open('hl_zip', 'r+b').write(b'PK-pwned'))
deny('link from root into stdlib', lambda: (open('x', 'w').close(), os.link('x', '/usr/local/lib/x'))[1])
print('DONE')
