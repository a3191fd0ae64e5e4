# hostile: pickle payloads: REDUCE to os.system, and malformed opcode streams
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

import pickle, os
class E:
    def __reduce__(self):
        return (eval, ("__import__('os').system('echo ESCAPED')",))
payload = pickle.dumps(E())
deny('reduce system', lambda: pickle.loads(payload) == 0 or 1/0)
import random
random.seed(5)
crashed = 0
for i in range(2000):
    b = bytearray(payload)
    for _ in range(3):
        b[random.randrange(len(b))] = random.randrange(256)
    try:
        pickle.loads(bytes(b))
    except BaseException:
        crashed += 1
print('mutants', crashed)
for blob in [b'\x80\x05\x95\xff\xff\xff\xff\xff\xff\xff\x7f', b'(' * 100000 + b'.', b']' * 100000, b'\x80\x04cposix\nsystem\n(S"id"\ntR.']:
    attempt('blob', lambda: pickle.loads(blob))
print('DONE')
