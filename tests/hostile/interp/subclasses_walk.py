# hostile: walking object.__subclasses__() for anything that reaches the host
# expect: ok
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

found = []
for cls in object.__subclasses__():
    name = getattr(cls, '__name__', '')
    if name in ('Popen', 'BuiltinImporter', '_wrap_close', 'Quitter', 'FileLoader'):
        found.append(name)
print('found', found)
for cls in object.__subclasses__():
    if cls.__name__ == 'BuiltinImporter':
        osm = cls.load_module('posix') if hasattr(cls, 'load_module') else __import__('posix')
        deny('posix.system', lambda: osm.system('id'))
        deny('posix.open canary', lambda: osm.open('{CANARY}', 0))
print('DONE')
