# hostile: host paths in sys, module __file__s and realpath
# expect: ok
# stdout-has: DONE
# output-lacks: {SCRATCH}
# output-lacks: {HOST_HOME}
# output-lacks: {HOST_CWD}
# output-lacks: {VIVARIUM_HOME}

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

import os, sys, json
print(sys.executable, sys.prefix, sys.exec_prefix, sys.path, sys.orig_argv, sys.argv)
print(json.__file__, os.getcwd(), os.path.realpath('/'), os.path.realpath('..'))
attempt('sysconfig', lambda: __import__('sysconfig').get_paths())
attempt('site', lambda: __import__('site').getsitepackages())
print('DONE')
