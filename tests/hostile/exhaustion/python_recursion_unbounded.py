# hostile: unbounded Python recursion after raising the recursion limit
# expect: stack_overflow error
# limits: fuel=20000000000 timeout_ms=10000
# stdout-has: start

import sys
sys.setrecursionlimit(10**8)
def f(n):
    return f(n + 1) + 1
print('start', flush=True)
f(0)
