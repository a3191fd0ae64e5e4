//! The Python the host runs in hidden turns, and the helper modules every template carries.

use crate::limits::TurnLimits;

/// The guest-side helpers every template carries, as `(module name, source)`: loaded at
/// build time, so a sandbox pays nothing to have them (see `python-wasi/guest/`).
pub const GUEST_HELPERS: [(&str, &str); 10] = [
    (
        "vivarium_display",
        include_str!("../../python-wasi/guest/display.py"),
    ),
    (
        "vivarium_check",
        include_str!("../../python-wasi/guest/check.py"),
    ),
    (
        "_vivarium",
        include_str!("../../python-wasi/guest/setup.py"),
    ),
    (
        "vivarium_tools",
        include_str!("../../python-wasi/guest/tools.py"),
    ),
    (
        "vivarium_net",
        include_str!("../../python-wasi/guest/net.py"),
    ),
    (
        "vivarium_shell",
        include_str!("../../python-wasi/guest/shell.py"),
    ),
    (
        "vivarium_shell_text",
        include_str!("../../python-wasi/guest/shell_text.py"),
    ),
    (
        "vivarium_shell_lang",
        include_str!("../../python-wasi/guest/shell_lang.py"),
    ),
    (
        "vivarium_shell_files",
        include_str!("../../python-wasi/guest/shell_files.py"),
    ),
    (
        "vivarium_ipy",
        include_str!("../../python-wasi/guest/ipy.py"),
    ),
];

/// The template's last step before its snapshot: `http.client`, `urllib.request` and
/// `urllib3` (so `requests`) through the door (`python-wasi/guest/net.py`), those imported
/// already patched, the others as they are imported. Without a grant the door refuses each
/// request, which the guest raises as "network access is off for this run".
pub const NETWORK_INSTALL: &str = "__import__('vivarium_net').install()\n";

/// The part of the scientific template's init turn past the helpers: the stack assistants'
/// code reaches for, imported and warmed. Imports happen inside a function so the user's
/// `__main__` starts empty (everything sits in `sys.modules`); the warm-ups run once what the
/// first real call would otherwise pay for (pandas' `describe` and CSV parser, a PNG, the
/// first scikit-learn fit, scipy.stats' distributions); the font cache is cleared so no font
/// file stays open in the snapshot (a descriptor would not exist at run time).
///
/// The set (`docs/guides/templates.md`): numpy, pandas, matplotlib with pyplot, scipy's stats,
/// optimize, linalg, interpolate, integrate, signal and sparse, scikit-learn's linear models,
/// model selection, preprocessing, metrics, trees, ensembles, clustering and decomposition,
/// statsmodels' `api` and seaborn. Left out: what is rarely written in one-off code and
/// costs much (sympy, networkx and the rest of the built-in packages stay importable).
pub const SCIENTIFIC_IMPORTS: &str = "\
def __vivarium_template():
    import io
    import numpy, pandas, matplotlib
    # Vivarium's backend (Agg's canvas; `plt.show()` returns figures where rich outputs
    # were asked for), chosen now so no sandbox pays to switch to it.
    import vivarium_display
    vivarium_display.register_backend()
    matplotlib.use('module://vivarium_mpl_backend')
    import matplotlib.pyplot as plt
    import scipy, scipy.stats, scipy.optimize, scipy.linalg, scipy.interpolate
    import scipy.integrate, scipy.signal, scipy.sparse
    import sklearn, sklearn.linear_model, sklearn.model_selection, sklearn.preprocessing
    import sklearn.metrics, sklearn.tree, sklearn.ensemble, sklearn.cluster
    import sklearn.decomposition, sklearn.pipeline
    import statsmodels.api
    import seaborn
    df = pandas.read_csv(io.StringIO('k,v\\na,1\\nb,2\\na,3\\n'))
    str(df.groupby('k').sum())
    str(df.describe())
    df._repr_html_()
    x = numpy.arange(20.0).reshape(-1, 1)
    y = 2 * x.ravel() + 1
    xt, xs, yt, ys = sklearn.model_selection.train_test_split(x, y, random_state=0)
    m = sklearn.linear_model.LinearRegression().fit(xt, yt)
    sklearn.metrics.r2_score(ys, m.predict(xs))
    scipy.stats.norm.cdf(1.0)
    scipy.stats.linregress(x.ravel(), y)
    fig, ax = plt.subplots()
    ax.plot(numpy.arange(10), numpy.arange(10))
    fig.savefig(io.BytesIO(), format='png')
    plt.close('all')
    del fig, ax, df, m
    import matplotlib.font_manager as fm
    fm._get_font.cache_clear()
__vivarium_template()
del __vivarium_template
";

/// The last init turn (`template::init_turns`): the init turns' interactive sources are
/// dropped (`_vivarium.forget_build_sources`); no descriptor beyond the preopens may be
/// open (it would not exist at run time); then every object the template holds is made
/// immortal (PEP 683), so `Py_INCREF`/`Py_DECREF` on them write nothing and a run dirties only
/// the pages it really changes; then the allocator's free space is filled; then `gc.freeze()`
/// keeps the collector from walking (and dirtying) the objects.
///
/// The walk starts from every object the collector tracks and follows `gc.get_referents`
/// into the untracked ones (strings, numbers, atomic tuples), and into code objects'
/// constants, which the collector does not see. The guest cannot write a
/// refcount itself: it sends the addresses through the door ([`super::IMMORTAL_TAG`]) and
/// the build's host writes the immortal refcount (`template::immortal`). An object is marked
/// when it is first seen, so the mark is the walk's only "seen" set: the guest holds no set of
/// a million addresses that would stay in the template's memory.
///
/// The guest has no pymalloc (`WITH_PYMALLOC` is 0): objects come from wasi-libc's dlmalloc,
/// whose free chunks lie scattered through the template's heap (the imports' temporaries,
/// the walk's own lists). A run's first allocations would reuse them, a page here and a page
/// there. So the last step allocates small `bytes` fillers until the allocator hands out
/// memory from its top (found as the address of a 4 MiB block of zeros allocated and freed
/// first: the linear memory grows by that much once, in pages the image leaves out),
/// and keeps them (`_host._fillers`, never touched again; at most 200,000, the `scientific`
/// template 6,167 holding 1.2 MB, the `python` one 1,480): a run's objects then come from
/// fresh, contiguous memory above the image. A session turn writes half the pages it did
/// (149 → 71), a hello world 577 → 430 (benches/RESULTS.md, "Zero-fault sandboxes"); the
/// fillers are where the free space was, so only their list adds to the image.
pub const SNAPSHOT_READY: &str = "\
def __vivarium_ready():
    import array, gc, os, sys, _host, _vivarium
    _vivarium.forget_build_sources()
    gc.collect()
    for fd in range(7, 256):
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise RuntimeError(f'descriptor {fd} is still open at snapshot time')
    gc.collect()
    tag = b'\\0vivarium-immortal\\0'
    immortal = sys._is_immortal
    code = type(__vivarium_ready.__code__)
    def inside(o):
        # Code objects do not show the collector what they hold; their constants are
        # what LOAD_CONST increfs. Their lazily built attributes (co_code, co_varnames)
        # are left unbuilt.
        if type(o) is code:
            return (o.co_consts, o.co_names, o.co_linetable, o.co_exceptiontable)
        return gc.get_referents(o)
    def mark(objs):
        new = [o for o in objs if not immortal(o)]
        if new:
            _host.call(tag + array.array('I', map(id, new)).tobytes())
        return new
    todo = mark(gc.get_objects())
    while todo:
        todo.extend(mark(inside(todo.pop())))
    del todo, mark, inside
    # Fill the free chunks below the top. The list is made and kept first, at its full
    # length, so that neither its growth nor keeping it frees anything.
    fillers = [None] * 200000
    _host._fillers = fillers
    # Larger than any free chunk, so it comes from the top; zeros, which the image omits.
    top = bytes(4 << 20)
    at = id(top)
    del top
    n = 0
    for size in (496, 48, 8, 2):
        while n < len(fillers):
            b = b'\\x01' * size
            if id(b) >= at:
                break
            fillers[n] = b
            n += 1
    del b
    gc.freeze()
__vivarium_ready()
del __vivarium_ready
";

/// The host's compile sandbox runs this over a new package environment (mounted writable for
/// it alone): every module to `.pyc`, unchecked-hash (the environment never changes, so an
/// import need not even stat the source). It reads the modules and runs none of them.
pub const COMPILE_PACKAGES: &str = "\
import compileall, py_compile
compileall.compile_dir('/usr/local/lib/vivarium-packages', quiet=2, workers=1,
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
";

/// Run after a single execution's code, on the same interpreter: flushes every file object the
/// code left open, so its data reaches the host. (`turn` does not finalise the interpreter
/// the way `run` does, and a buffer that dies with the instance never reaches the disk.)
pub const FLUSH_OPEN_FILES: &str = "\
def __vivarium_flush():
    import gc, _io
    # `_io._IOBase`, the C base of every io class (and of Python subclasses of io.IOBase):
    # a plain type check, where the `io.IOBase` ABC's subclass hook costs ~10 ms in a
    # template whose packages define many classes.
    for o in gc.get_objects():
        try:
            if isinstance(o, _io._IOBase) and not o.closed:
                o.flush()
        except BaseException:
            pass
try:
    __vivarium_flush()
except BaseException:
    pass
";
/// The flush gets its own small budget; code that sabotaged it only loses its own files.
pub const FLUSH_LIMITS: TurnLimits = TurnLimits {
    timeout_ms: 2_000,
    fuel: 2_000_000_000,
    output_bytes: 0,
};

/// Run after a turn in which pyplot made a figure (the door's figure message): the figures
/// still open come back as outputs, as a notebook shows them at the end of a cell. The turn
/// counter is put back so the next user turn keeps its number in tracebacks.
pub const SHOW_OPEN_FIGURES: &str = "\
try:
    import vivarium_display as __vivarium_d
    __vivarium_d.turn_end()
    del __vivarium_d
except BaseException:
    pass
import _reactor as __vivarium_r
__vivarium_r._turns -= 1
del __vivarium_r
";

/// A hidden turn that installs a kept interpreter's hooks in a sandbox whose set-up did not
/// (`GuestSetup::session`), taking itself off the guest's count of turns.
pub const SESSION_HOOKS: &str = "\
__import__('_vivarium')._session_hooks()
import _reactor as __vivarium_r
__vivarium_r._turns -= 1
del __vivarium_r
";

/// Makes a session's stdout and stderr flush at each newline (a hidden turn, when someone
/// first watches its output live).
pub const LINE_BUFFERED: &str = "\
import sys as __vivarium_s
for __vivarium_f in (__vivarium_s.stdout, __vivarium_s.stderr):
    try:
        __vivarium_f.reconfigure(line_buffering=True)
    except Exception:
        pass
del __vivarium_s, __vivarium_f
";
