# hostile: marshal.loads of mutated code objects, then executing them
# expect: ok error trap stack_overflow fuel_exhausted timeout
# limits: timeout_ms=10000

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

import marshal, random
random.seed(7)
good = marshal.dumps(compile('x = [i * 2 for i in range(10)]\nprint(x)', 'm', 'exec'))
ran = 0
for i in range(300):
    b = bytearray(good)
    for _ in range(2):
        b[random.randrange(len(b))] = random.randrange(256)
    try:
        code = marshal.loads(bytes(b))
        exec(code, {})
        ran += 1
    except BaseException:
        pass
print('ran', ran)
