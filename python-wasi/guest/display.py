"""Vivarium's rich outputs, as a notebook gives them: `display(obj)` and `plt.show()`.

Loaded into the sandbox by the host's prelude as the module `vivarium_display` (and
`display` is made a builtin). Each output becomes one file under OUTPUT_DIR named
`NNNN.<ext>` (png, svg, html, txt); after the run the host reads them in order, with size
caps, and returns them as the result's `outputs`. The host trusts nothing here beyond those
caps: a program may write, remove or fake these files, and only harms its own result.

matplotlib is never imported here: `plt.show()` reaches us because the prelude sets
MPLBACKEND to `module://vivarium_mpl_backend`, a backend module served on demand from
BACKEND_SOURCE below, only when the program imports matplotlib itself. A template that
imports pyplot selects the same backend when it is built (`register_backend`).
"""

import os
import sys

OUTPUT_DIR = "/tmp/.vivarium/outputs"
# Set by `install`: this sandbox asked for rich outputs.
_enabled = False
MAX_OUTPUTS = 64
_count = 0


def _write(ext, data):
    global _count
    if _count >= MAX_OUTPUTS:
        return
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    _count += 1
    with open(f"{OUTPUT_DIR}/{_count:04d}.{ext}", "wb") as f:
        f.write(data)


def _figure_png(fig):
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


# Figures `display()` showed in this turn: not shown again when the turn ends.
_displayed = set()


def _display_one(obj):
    figure_mod = sys.modules.get("matplotlib.figure")
    if figure_mod is not None and isinstance(obj, figure_mod.Figure):
        _write("png", _figure_png(obj))
        _displayed.add(id(obj))
        return
    for method, ext in (("_repr_png_", "png"), ("_repr_svg_", "svg"), ("_repr_html_", "html")):
        fn = getattr(type(obj), method, None)
        if fn is None:
            continue
        try:
            data = fn(obj)
        except Exception:
            continue
        if isinstance(data, tuple):  # (data, metadata)
            data = data[0]
        if data is not None:
            _write(ext, data)
            return
    _write("txt", obj if isinstance(obj, str) else repr(obj))


def display(*objs, **_ignored):
    """Shows each object as a notebook would: a figure or anything with `_repr_png_` as a
    PNG, `_repr_svg_` as SVG, `_repr_html_` (a DataFrame) as HTML, else its text."""
    for obj in objs:
        _display_one(obj)


def show_figures(close=True):
    """Every open matplotlib figure as a PNG output; then closes them (as `plt.show()`)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        _write("png", _figure_png(plt.figure(num)))
    if close:
        plt.close("all")


# The host door message that says "pyplot made a figure" (src/guest/mod.rs: FIGURE_TAG); the
# host then runs `turn_end` after the turn, as Jupyter shows a cell's figures at its end.
FIGURE_TAG = b"\0vivarium-figure\0"


def _figure_made():
    try:
        import _host

        _host.call(FIGURE_TAG)
    except Exception:
        pass


def _release_fonts():
    """Closes the font files matplotlib keeps open (its FT2Font cache holds each file it
    drew text with). A session is captured between turns (snapshot, hibernation, its
    rollback checkpoint), and an open file cannot be carried: until this, a session that had
    plotted could not be rolled back when a limit or an interrupt stopped a later turn. The
    next figure opens its fonts again (a few milliseconds)."""
    fm = sys.modules.get("matplotlib.font_manager")
    if fm is not None:
        try:
            fm._get_font.cache_clear()
        except Exception:
            pass


def turn_end():
    """After a turn that made a figure: the figures still open come back as PNG outputs
    and are closed, as a notebook shows them at the end of a cell (rich outputs only). A
    figure `display()` already showed is not shown twice. The font files are closed either
    way (`_release_fonts`)."""
    if not _enabled:
        _release_fonts()
        return
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            if id(fig) not in _displayed:
                _write("png", _figure_png(fig))
        plt.close("all")
    _displayed.clear()
    _release_fonts()


BACKEND_SOURCE = '''
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backend_bases import FigureManagerBase as FigureManager


class FigureCanvas(FigureCanvasAgg):
    """Agg's canvas; pyplot making a figure with it tells the host (see `turn_end`)."""

    @classmethod
    def new_manager(cls, figure, num):
        import vivarium_display
        vivarium_display._figure_made()
        return super().new_manager(figure, num)


def show(*args, **kwargs):
    import vivarium_display
    if vivarium_display._enabled:
        vivarium_display.show_figures()
    else:
        # No rich outputs asked for: what Agg, the backend this stands in for, does.
        from matplotlib import _api
        _api.warn_external("FigureCanvasAgg is non-interactive, and thus cannot be shown")
'''


class _BackendFinder:
    """Serves `vivarium_mpl_backend` from BACKEND_SOURCE when matplotlib asks for it."""

    name = "vivarium_mpl_backend"

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(BACKEND_SOURCE, "<vivarium_mpl_backend>", "exec"), module.__dict__)


class _PlotlyHook:
    """Gives plotly a renderer of Vivarium's when (if ever) the program imports plotly, a
    package a request can add: `fig.show()` then returns the figure as a `text/html` output,
    as in a notebook. plotly's own renderers need IPython and nbformat, or a web browser;
    none is in the guest. The HTML loads plotly.js from its CDN (a figure is a few KiB), or
    carries it inline when the environment says `VIVARIUM_PLOTLY_JS=inline` (4.8 MB each:
    viewable offline). Until plotly is imported this costs one string comparison an import."""

    target = "plotly.io._renderers"

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.target:
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register_plotly(module)

        spec.loader.exec_module = exec_and_register
        return spec


def _register_plotly(renderers_module):
    try:
        from plotly.io._base_renderers import ExternalRenderer
    except Exception:
        return

    class VivariumRenderer(ExternalRenderer):
        def render(self, fig_dict):
            from plotly.io import to_html

            inline = os.environ.get("VIVARIUM_PLOTLY_JS") == "inline"
            html = to_html(fig_dict, include_plotlyjs=True if inline else "cdn",
                           full_html=False, validate=False)
            _write("html", html)

    renderers_module.renderers["vivarium"] = VivariumRenderer()
    renderers_module.renderers.default = "vivarium"


def register_backend():
    """Makes `module://vivarium_mpl_backend` importable. A template that imports pyplot
    (`scientific`) calls this and selects the backend when it is built, so no sandbox pays
    for the switch; `plt.show()` then returns figures only where `install` ran."""
    if not any(isinstance(f, _BackendFinder) for f in sys.meta_path):
        sys.meta_path.append(_BackendFinder())


def install():
    """Turns rich outputs on for this sandbox (the set-up turn calls it when asked)."""
    global _enabled
    import builtins

    register_backend()
    if not any(isinstance(f, _PlotlyHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _PlotlyHook())
    _enabled = True
    builtins.display = display
    os.environ["MPLBACKEND"] = "module://vivarium_mpl_backend"
    # A session turn's final value (a DataFrame, ...) also comes back as HTML when it has
    # one; the REPL echo and the `result` text are the hook we wrap.
    echo = sys.displayhook

    def displayhook(value):
        if value is not None and getattr(type(value), "_repr_html_", None) is not None:
            try:
                html = value._repr_html_()
                if html:
                    _write("html", html)
            except Exception:
                pass
        echo(value)

    sys.displayhook = displayhook
