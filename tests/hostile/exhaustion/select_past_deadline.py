# hostile: select.select with a long timeout past the deadline
# expect: timeout
# limits: timeout_ms=1000 fuel=600000000000
# stdout-has: selecting
# max-wall-ms: 5000

import select
print('selecting', flush=True)
select.select([], [], [], 3600)
