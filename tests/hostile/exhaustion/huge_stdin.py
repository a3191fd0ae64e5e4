# hostile: an 8 MiB stdin read all at once and line by line
# expect: ok
# input: stdin_bytes=8388608
# stdout-has: read 8388608

import sys
data = sys.stdin.buffer.read()
print('read', len(data))
