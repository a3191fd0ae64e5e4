# hostile: an environment over the caps (300 variables): refused before any guest runs
# expect: refused
# input: env_vars=300

print('should not run')
