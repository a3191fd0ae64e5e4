# hostile: absolute host paths: /etc, the canary, /root, the host's home
# expect: ok
# stdout-has: DONE
# output-lacks: root:x:

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
for p in ['/etc/passwd', '/etc/shadow', '/etc/hostname', '{CANARY}', '{CANARY_DIR}', '/root/.ssh/id_rsa', '/home', '/var/log/syslog', '/bin/sh']:
    deny('read ' + p, lambda p=p: open(p, 'rb').read(64))
    deny('list ' + p, lambda p=p: os.listdir(p))
    deny('stat ' + p, lambda p=p: os.stat(p).st_size if os.path.exists(p) else 1/0)
print('DONE')
