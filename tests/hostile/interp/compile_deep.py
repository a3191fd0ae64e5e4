# hostile: compiling deeply nested source: parser and compiler C recursion
# expect: ok stack_overflow
# limits: fuel=20000000000 timeout_ms=10000

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

for src in ['(' * 200000 + ')' * 200000, '-' * 500000 + '1', '[' * 100000 + ']' * 100000, 'x' + '.y' * 300000, 'not ' * 300000 + 'x']:
    attempt('compile', lambda: compile(src, 's', 'eval') and None)
import json
attempt('json deep', lambda: json.loads('[' * 1000000 + ']' * 1000000))
import ast
attempt('literal_eval deep', lambda: ast.literal_eval('[' * 100000 + ']' * 100000))
