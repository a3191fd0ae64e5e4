# hostile: a busy loop with plenty of fuel: the wall-clock deadline must stop it
# expect: timeout
# limits: fuel=600000000000 timeout_ms=1500
# max-wall-ms: 6000

x = 0
while True:
    x += 1
