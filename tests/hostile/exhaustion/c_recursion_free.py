# hostile: freeing a list nested a million deep (recursive dealloc)
# expect: ok stack_overflow
# limits: fuel=20000000000 timeout_ms=10000
# stdout-has: built

x = []
for _ in range(1000000):
    x = [x]
print('built', flush=True)
del x
