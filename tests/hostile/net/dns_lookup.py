# hostile: DNS and name resolution
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
deny('getaddrinfo localhost', lambda: socket.getaddrinfo('localhost', {PORT}))
deny('getaddrinfo example', lambda: socket.getaddrinfo('example.com', 80))
deny('gethostbyname', lambda: socket.gethostbyname('localhost'))
deny('gethostbyaddr', lambda: socket.gethostbyaddr('127.0.0.1'))
print('DONE')
