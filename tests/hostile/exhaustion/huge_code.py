# hostile: a 4 MiB program (comment padding) and a 1 MiB string literal
# expect: ok
# input: code_pad_bytes=4194304

s = 'x' * (1 << 20)
print('DONE', len(s))
