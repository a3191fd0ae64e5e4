# hostile: asyncio connections and servers
# expect: ok
# limits: fuel=20000000000 timeout_ms=10000
# stdout-has: DONE

def deny(name, f):
    """An attack that must fail: success prints ESCAPED (the runner forbids that word)."""
    try:
        out = f()
    except BaseException as e:
        print(f"{name}: refused ({type(e).__name__})")
        return e
    print(f"ESCAPED {name}: {out!r}"[:300])

def attempt(name, f):
    """An attempt whose outcome is not itself a breach; the host-side checks judge it."""
    try:
        out = f()
    except BaseException as e:
        print(f"{name}: {type(e).__name__}")
        return e
    print(f"{name}: ok {out!r}"[:300])
    return out

import asyncio
deny('open_connection', lambda: asyncio.run(asyncio.open_connection('127.0.0.1', {PORT})))
async def serve():
    srv = await asyncio.start_server(lambda r, w: None, '127.0.0.1', 0)
    return srv.sockets[0].getsockname()
deny('start_server', lambda: asyncio.run(serve()))
print('DONE')
