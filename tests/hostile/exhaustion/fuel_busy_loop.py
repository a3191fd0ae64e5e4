# hostile: a busy loop with plenty of wall time: fuel must stop it
# expect: fuel_exhausted
# limits: fuel=2000000000 timeout_ms=20000
# max-wall-ms: 15000

while True:
    pass
