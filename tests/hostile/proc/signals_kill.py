# hostile: signals and kill towards the host process and its group
# expect: ok trap
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

import os, signal
print('DONE', flush=True)
for pid in (0, 1, -1, os.getpid()):
    deny(f'kill {pid}', lambda pid=pid: os.kill(pid, 9) if hasattr(os, 'kill') else 1/0)
deny('killpg', lambda: os.killpg(0, 9))
attempt('signal handler', lambda: signal.signal(signal.SIGINT, lambda *a: None))
deny('raise_signal', lambda: signal.raise_signal(signal.SIGTERM))
deny('alarm', lambda: signal.alarm(1))
deny('setitimer', lambda: signal.setitimer(signal.ITIMER_REAL, 0.1))
deny('pthread_kill', lambda: signal.pthread_kill(0, 9))
print('DONE')
