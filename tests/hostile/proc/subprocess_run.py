# hostile: subprocess.run / Popen / check_output
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

import subprocess
deny('run', lambda: subprocess.run(['/bin/sh', '-c', 'echo pwned > {CANARY}']))
deny('Popen', lambda: subprocess.Popen(['id']))
deny('check_output', lambda: subprocess.check_output('id', shell=True))
print('DONE')
