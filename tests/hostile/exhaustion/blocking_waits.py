# hostile: waits that can never be woken in a single-threaded guest (Event.wait, a held lock)
# expect: trap timeout
# limits: timeout_ms=1500 fuel=600000000000
# stdout-has: waiting
# max-wall-ms: 6000

import threading
print('waiting', flush=True)
threading.Event().wait(3600)
lock = threading.Lock()
lock.acquire()
lock.acquire(timeout=3600)
