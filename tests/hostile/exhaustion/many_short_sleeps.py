# hostile: thousands of tiny sleeps (each a poll_oneoff) past the deadline
# expect: timeout fuel_exhausted
# limits: timeout_ms=1000 fuel=600000000000
# stdout-has: start
# max-wall-ms: 5000

import time
print('start', flush=True)
while True:
    time.sleep(0.0001)
