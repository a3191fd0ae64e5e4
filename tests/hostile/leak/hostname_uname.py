# hostile: the host's name, users and uname
# expect: ok
# stdout-has: DONE
# output-lacks: {HOSTNAME}

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

import os, socket, platform, getpass
attempt('gethostname', socket.gethostname)
attempt('uname', os.uname)
attempt('platform', platform.platform)
attempt('node', platform.node)
attempt('getlogin', lambda: os.getlogin())
attempt('getuser', getpass.getuser)
attempt('getuid', lambda: os.getuid())
attempt('pwd', lambda: __import__('pwd').getpwall())
print('DONE')
