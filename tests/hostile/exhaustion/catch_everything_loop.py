# hostile: a loop that swallows every exception: the host stop is not catchable
# expect: timeout
# limits: timeout_ms=1500
# max-wall-ms: 6000

import time
while True:
    try:
        while True:
            time.sleep(10)
    except BaseException:
        pass
