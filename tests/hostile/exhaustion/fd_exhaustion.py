# hostile: opening files without closing until EMFILE (64 allowed, 7 held by stdio and preopens: 57 opens, then errno 33)
# expect: ok
# stdout-has: stopped 57 33

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

fs = []
try:
    while True:
        fs.append(open('/usr/local/lib/python315.zip', 'rb'))
except OSError as e:
    print('stopped', len(fs), e.errno)
for f in fs[:10]:
    f.close()
print('reopen', open('/usr/local/lib/python315.zip', 'rb').read(2))
