# hostile: socket objects wrapped around existing descriptors (stdio, preopens), accept and recv on them
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
for fd in range(3, 9):
    def f(fd=fd):
        s = socket.socket(fileno=fd)
        return s.accept()
    deny(f'accept fd {fd}', f)
    def g(fd=fd):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fd)
        return s.recv(10)
    deny(f'recv fd {fd}', g)
print('stdout works')
print('DONE')
