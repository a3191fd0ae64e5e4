# hostile: mmap of files and memoryview tricks on the stdlib zip
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

import mmap, os
attempt('mmap zip', lambda: mmap.mmap(os.open('/usr/local/lib/python315.zip', os.O_RDONLY), 0, prot=mmap.PROT_READ | mmap.PROT_WRITE))
f = open('m.bin', 'wb+'); f.write(b'\0' * 4096); f.flush()
attempt('mmap write', lambda: mmap.mmap(f.fileno(), 0))
b = bytearray(10)
m = memoryview(b)
attempt('resize exported', lambda: b.extend(b'x' * 100))
attempt('cast', lambda: m.cast('Q'))
print('DONE')
