# hostile: a TCP connection to a loopback listener the host opened
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
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(('127.0.0.1', {PORT}))
    s.sendall(b'escaped')
deny('tcp', tcp)
deny('create_connection', lambda: socket.create_connection(('127.0.0.1', {PORT}), timeout=1))
deny('tcp6', lambda: socket.create_connection(('::1', {PORT}), timeout=1))
print('DONE')
