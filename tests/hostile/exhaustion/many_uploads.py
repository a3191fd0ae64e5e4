# hostile: a thousand small uploads, then listing them
# expect: ok
# limits: disk_bytes=16777216 timeout_ms=10000
# input: upload_files=1000 upload_bytes=16
# stdout-has: files 1000

import os
print('files', len(os.listdir('up')))
