# hostile: unix sockets to host daemons, raw and packet sockets, socketpair
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

import socket
for path in ['/var/run/docker.sock', '/run/systemd/private', '/tmp/.X11-unix/X0']:
    deny(path, lambda path=path: socket.socket(socket.AF_UNIX).connect(path))
deny('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1))
deny('packet', lambda: socket.socket(17, 3, 0))
deny('socketpair', lambda: socket.socketpair())
print('DONE')
