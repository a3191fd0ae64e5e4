# hostile: a near-maximal environment (255 variables, 60 KiB)
# expect: ok
# input: env_vars=255 env_value_bytes=230
# stdout-has: vars 255

import os
print('vars', sum(1 for k in os.environ if k.startswith('V')))
