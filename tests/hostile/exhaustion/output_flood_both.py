# hostile: interleaved floods on both streams with flushes and huge single writes
# expect: ok

import sys
for i in range(2000):
    print('o' * 4000, flush=True)
    print('e' * 4000, file=sys.stderr, flush=True)
sys.stdout.write('X' * (16 << 20))
print('DONE')
