# hostile: select.poll / selectors with long timeouts past the deadline
# expect: timeout
# limits: timeout_ms=1000 fuel=600000000000
# stdout-has: polling
# max-wall-ms: 5000

import select, selectors
print('polling', flush=True)
if hasattr(select, 'poll'):
    p = select.poll(); p.register(0); p.poll(3_600_000)
sel = selectors.DefaultSelector()
sel.select(3600)
import time
time.sleep(3600)
