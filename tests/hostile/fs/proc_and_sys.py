# hostile: /proc and /sys pseudo files of the host process
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

for p in ['/proc/self/environ', '/proc/self/maps', '/proc/self/mem', '/proc/self/cmdline', '/proc/1/cmdline',
          '/proc/self/fd', '/proc/self/root/etc/passwd', '/proc/self/cwd', '/sys/kernel/hostname', '/proc/sys/kernel/hostname']:
    deny(p, lambda p=p: open(p, 'rb').read(64))
import os
deny('listdir /proc', lambda: os.listdir('/proc'))
print('DONE')
