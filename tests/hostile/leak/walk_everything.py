# hostile: walking every directory the guest can see, reading every file it can
# expect: ok
# stdout-has: DONE
# output-lacks: {SECRET}

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

import os
count = 0
total = 0
for root in ['/']:
    for dirpath, dirs, files in os.walk(root, followlinks=True):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                with open(p, 'rb') as fh:
                    total += len(fh.read(1 << 16))
                count += 1
            except OSError:
                pass
print('files', count, 'bytes', total)
for d in ['/usr/local/lib', '/usr/local/lib/python315.zip/matplotlib/mpl-data']:
    attempt('list ' + d, lambda: len(os.listdir(d)))
print('DONE')
