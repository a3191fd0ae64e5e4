# hostile: http.client, ftplib and smtplib towards the listener
# expect: ok
# limits: fuel=20000000000 timeout_ms=10000
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

import http.client
def h():
    c = http.client.HTTPConnection('127.0.0.1', {PORT}, timeout=1)
    c.request('GET', '/escaped')
    return c.getresponse().status
deny('http.client', h)
import ftplib, smtplib
deny('ftp', lambda: ftplib.FTP('127.0.0.1', timeout=1))
deny('smtp', lambda: smtplib.SMTP('127.0.0.1', {PORT}, timeout=1))
print('DONE')
