# hostile: a huge big-integer computation inside one C call
# expect: fuel_exhausted timeout memory_exceeded error
# limits: timeout_ms=2000
# max-wall-ms: 7000

x = 7 ** (10 ** 8)
print(x.bit_length())
