# hostile: time.sleep far past the deadline (needs the sliced poll_oneoff)
# expect: timeout
# limits: timeout_ms=1000 fuel=600000000000
# stdout-has: sleeping
# max-wall-ms: 5000

import time
print('sleeping', flush=True)
time.sleep(3600)
