# hostile: memory grown in small steps until MemoryError, uncaught
# expect: memory_exceeded error

chunks = []
while True:
    chunks.append(bytearray(1 << 20))
