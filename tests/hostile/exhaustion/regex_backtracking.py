# hostile: catastrophic regex backtracking in C code
# expect: fuel_exhausted timeout
# limits: timeout_ms=2000
# max-wall-ms: 7000

import re
re.match(r'(a+)+$', 'a' * 40 + 'b')
