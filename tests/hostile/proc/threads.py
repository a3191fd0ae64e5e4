# hostile: threads: threading, _thread, concurrent.futures
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

import threading
deny('Thread', lambda: threading.Thread(target=lambda: None).start())
import _thread
deny('_thread', lambda: _thread.start_new_thread(print, ('x',)))
import concurrent.futures
deny('executor', lambda: concurrent.futures.ThreadPoolExecutor(2).submit(abs, 1).result())
print('DONE')
