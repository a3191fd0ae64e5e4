# hostile: flooding stderr far past the output cap, then raising
# expect: error

import sys, os
for _ in range(20000):
    sys.stderr.write('E' * 1023 + '\n')
os.write(2, b'F' * (1 << 22))
raise ValueError('after flood')
