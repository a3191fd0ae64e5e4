# hostile: uploads totalling more than the disk quota: refused up front
# expect: refused
# limits: disk_bytes=4194304
# input: upload_files=4 upload_bytes=2097152

print('should not run')
