#!/usr/bin/env python3
"""Engine speed and memory benchmark (issue 2 targets).

Every case runs in its own Python subprocess, so that the peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that process) is the case's own.  The case
is run twice: once plainly for the wall time and the RSS high-water mark, once under
``tracemalloc`` for the peak of Python-visible allocations (numpy reports its buffers to
tracemalloc).  Input data are generated before the timer starts and are not counted in the
wall time; "RSS peak" is the whole process (interpreter + libraries + input + work),
"RSS Δ" the rise of the high-water mark during the case.

Usage::

    python benchmarks/bench_engine.py            # full run (≈ a few minutes on 2 cores)
    python benchmarks/bench_engine.py --quick    # small sizes, for a smoke test
    python benchmarks/bench_engine.py --only ir-dp-1M,mdav-100k
    python benchmarks/bench_engine.py --profile mdav-100k   # cProfile top functions of one case
    python benchmarks/bench_engine.py --out results/bench_engine.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))
CENSUS = ROOT / "resources" / "census.csv"


# ----------------------------------------------------------------------------- cases

def _synthetic(n: int, m: int, seed: int = 1):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    # skewed non-negative magnitudes with ties (integers), like income attributes
    X = np.round(rng.gamma(shape=2.0, scale=1000.0, size=(n, m)))
    cols = [f"A{i}" for i in range(m)]
    df = pd.DataFrame(X, columns=cols)
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    return df, cols, domains


def _census():
    import pandas as pd

    df = pd.read_csv(CENSUS)
    cols = list(df.columns)
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    return df, cols, domains


def _protect_case(method: str, n: int, m: int, params: dict, role: str = "eps-quasi"):
    def setup():
        df, cols, domains = _synthetic(n, m)
        return df, cols, domains

    def run(state):
        from dpstudio import engine

        df, cols, domains = state
        res = engine.protect(df, method, roles={c: role for c in cols}, domains=domains, seed=7,
                             **params)
        assert len(res.data) == n
        return res

    return setup, run


def _rl_case(n: int, m: int):
    def setup():
        from dpstudio import engine

        df, cols, domains = _synthetic(n, m)
        res = engine.protect(df, "ir-dp", roles={c: "eps-quasi" for c in cols}, domains=domains,
                             k=10, epsilon=10.0, seed=3)
        return res.aligned_original(), res.data, cols   # the release is shuffled: align rows

    def run(state):
        from dpstudio import engine

        df, prot, cols = state
        return engine.evaluate(df, prot, cols, measures=["rl"])["rl"]

    return setup, run


def _sweep_fn():
    global SWEEP
    if "SWEEP" not in globals():
        from dpstudio import engine

        SWEEP = engine.sweep
    return SWEEP


def _sweep_case(ks, repeats: int):
    def setup():
        df, cols, domains = _census()
        return df, cols, domains

    def run(state):
        df, cols, domains = state
        sweep = _sweep_fn()
        t0 = time.perf_counter()
        first = None
        npts = 0
        for pt in sweep(df, "ir-dp", {c: "eps-quasi" for c in cols}, domains, ks=ks,
                               epsilons=[0.01, 0.1, 1.0, 10.0], repeats=repeats, seed=7,
                               measures=("sse", "rl")):
            if first is None:
                first = time.perf_counter() - t0
            npts += 1
        return {"first_point_s": first, "points": npts}

    return setup, run


CENSUS_METHODS = {
    # method -> (roles builder, params)
    "mdav": ("k-quasi", {"k": 5}),
    "mdav-swap": ("kq+conf", {"k": 5}),
    "ir-swap": ("confidential", {"k": 5}),
    "laplace": ("eps-quasi", {"epsilon": 1.0}),
    "insensitive-dp single": ("eps-quasi", {"k": 5, "epsilon": 1.0, "variant": "single"}),
    "insensitive-dp multi": ("eps-quasi", {"k": 5, "epsilon": 1.0, "variant": "multi"}),
    "ir-dp": ("eps-quasi", {"k": 5, "epsilon": 1.0}),
    "idp-ls": ("eps-quasi", {"k": 5, "epsilon": 1.0}),
    "idp-cbls": ("eps-quasi", {"k": 5, "epsilon": 1.0}),
    "k-eps": ("kq+eps", {"k": 5, "epsilon": 1.0}),
    "t-close-dp": ("kq+conf1", {"epsilon": 1.0}),
}


def _census_method_case(label: str):
    role_kind, params = CENSUS_METHODS[label]
    method = label.split()[0]

    def setup():
        df, cols, domains = _census()
        if role_kind == "kq+conf":
            roles = {**{c: "k-quasi" for c in cols[:6]}, **{c: "confidential" for c in cols[6:]}}
        elif role_kind == "kq+eps":
            roles = {**{c: "k-quasi" for c in cols[:6]}, **{c: "eps-quasi" for c in cols[6:]}}
        elif role_kind == "kq+conf1":
            roles = {**{c: "k-quasi" for c in cols[:6]}, cols[10]: "confidential"}
        else:
            roles = {c: role_kind for c in cols}
        return df, roles, domains

    def run(state):
        from dpstudio import engine

        df, roles, domains = state
        doms = {c: d for c, d in domains.items() if roles.get(c) in ("eps-quasi",)} or None
        return engine.protect(df, method, roles=roles, domains=doms, seed=7, **params)

    return setup, run


def build_cases(quick: bool) -> dict:
    """name -> (setup, run, data label, target seconds, target note)."""
    big = 100_000 if quick else 1_000_000
    mid = 20_000 if quick else 100_000
    ks = range(2, 21) if quick else range(2, 101)
    cases = {}
    for method, params in (("ir-dp", {"k": 10, "epsilon": 1.0}),
                           ("idp-ls", {"k": 10, "epsilon": 1.0}),
                           ("idp-cbls", {"k": 10, "epsilon": 1.0}),
                           ("laplace", {"epsilon": 1.0}),
                           ("insensitive-dp", {"k": 10, "epsilon": 1.0, "variant": "single"})):
        label = method if method != "insensitive-dp" else "insensitive-dp single"
        s, r = _protect_case(method, big, 10, params)
        cases[f"{label.replace(' ', '-')}-{'100k' if quick else '1M'}"] = (
            s, r, f"{big:,} × 10 synthetic, k=10" if "k" in params else f"{big:,} × 10 synthetic",
            10.0, "< 10 s, < 2 GB")
    s, r = _protect_case("mdav", mid, 5, {"k": 5}, role="k-quasi")
    cases[f"mdav-{'20k' if quick else '100k'}"] = (s, r, f"{mid:,} × 5 synthetic, k=5", 5.0, "≤ 5 s (issue 13)")
    if not quick:
        s, r = _protect_case("mdav", big, 5, {"k": 5}, role="k-quasi")
        cases["mdav-1M"] = (s, r, f"{big:,} × 5 synthetic, k=5", 300.0, "≤ 5 min, < 1 GB (issue 13)")
    s, r = _protect_case("insensitive-dp", mid, 5, {"k": 5, "epsilon": 1.0, "variant": "multi"})
    cases[f"insensitive-dp-multi-{'20k' if quick else '100k'}"] = (
        s, r, f"{mid:,} × 5 synthetic, k=5", 30.0, "< 30 s")
    s, r = _rl_case(mid, 10)
    cases[f"rl-{'20k' if quick else '100k'}"] = (
        s, r, f"{mid:,} × 10 synthetic vs its ir-dp (k=10, ε=10)", 10.0, "< 10 s")
    s, r = _sweep_case(ks, 10)
    cases["sweep-census-ir-dp"] = (
        s, r, f"Census 1,080 × 13, k={ks.start}…{ks.stop - 1}, 4 ε, 10 reps, SSE+RL", 20.0,
        "< 20 s total, first point < 1 s")
    for label in CENSUS_METHODS:
        s, r = _census_method_case(label)
        cases[f"census {label}"] = (s, r, "Census 1,080 × 13, k=5, ε=1", None, "")
    return cases


# ----------------------------------------------------------------------------- child

def _maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def child(name: str, quick: bool, profile: bool) -> None:
    import warnings

    warnings.simplefilter("ignore")
    from dpstudio import engine

    engine.methods()  # import the method modules before timing (registry is lazy)
    setup, run, *_ = build_cases(quick)[name]
    state = setup()
    import gc

    gc.collect()
    out: dict = {"name": name}
    if profile:
        import cProfile
        import io
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        run(state)
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue())
        return
    rss0 = _maxrss_bytes()
    t0 = time.perf_counter()
    try:
        res = run(state)
    except Exception as exc:  # report, do not crash the whole benchmark
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
        print(json.dumps(out))
        return
    out["wall_s"] = time.perf_counter() - t0
    out["rss_peak"] = _maxrss_bytes()
    out["rss_delta"] = out["rss_peak"] - rss0
    if isinstance(res, dict):
        out.update({k: v for k, v in res.items() if isinstance(v, (int, float))})
    del res
    gc.collect()
    if out["wall_s"] > 60:  # a second, traced run of a long case costs too much: skip it
        out["py_peak"] = None
        out["runs"] = 1
        print(json.dumps(out))
        return
    # the machine is shared: time a second plain run and keep the faster (less disturbed) one
    t0 = time.perf_counter()
    r1 = run(state)
    out["wall_s"] = min(out["wall_s"], time.perf_counter() - t0)
    out["runs"] = 2
    del r1
    gc.collect()
    import tracemalloc

    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t1 = time.perf_counter()
    r2 = run(state)
    out["wall_traced_s"] = time.perf_counter() - t1
    out["py_peak"] = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del r2
    print(json.dumps(out))


# ----------------------------------------------------------------------------- parent

def _mb(b) -> str:
    return "n/a" if b is None else f"{b / 2**20:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="dpstudio engine benchmark")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--profile", default="", help="run one case under cProfile and print the top")
    ap.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.quick, profile=False)
        return 0
    if args.profile:
        child(args.profile, args.quick, profile=True)
        return 0
    cases = build_cases(args.quick)
    names = [n for n in cases if not args.only or n in args.only.split(",")]
    header = (f"dpstudio engine benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
              f"python {platform.python_version()}, {platform.machine()}, "
              f"{os.cpu_count()} CPUs visible, {'QUICK sizes' if args.quick else 'full sizes'}\n"
              "wall = one protect()/evaluate()/sweep() call, best of 2 (1 when > 60 s), input generated "
              "beforehand; "
              "RSS peak = process high-water mark (subprocess per case); RSS Δ = its rise during "
              "the call; py peak = tracemalloc peak of a second, traced call (skipped when the first "
              "call took > 60 s).\n")
    rows = []
    print(header, flush=True)
    fmt = "{:<32} {:<52} {:>9} {:>10} {:>9} {:>9}  {}"
    title = fmt.format("case", "data", "wall", "RSS peak", "RSS Δ", "py peak", "target / result")
    print(title)
    print("-" * len(title))
    lines = [header, title, "-" * len(title)]
    for name in names:
        _, _, label, target, note = cases[name]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name]
        if args.quick:
            cmd.append("--quick")
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT))
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            res = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:200]}
        if "error" in res:
            line = fmt.format(name, label[:52], "ERROR", "", "", "", res["error"])
        else:
            verdict = ""
            if target is not None:
                ok = res["wall_s"] < target and res["rss_peak"] < 2 * 2**30
                if "first_point_s" in res:
                    ok = ok and res["first_point_s"] < 1.0
                    verdict = f"first point {res['first_point_s']:.2f} s, {res.get('points')} points; "
                verdict += f"{note}: {'PASS' if ok else 'MISS'}"
            line = fmt.format(name, label[:52], f"{res['wall_s']:.2f} s", _mb(res["rss_peak"]),
                              _mb(res["rss_delta"]), _mb(res["py_peak"]), verdict)
        rows.append(res)
        print(line, flush=True)
        lines.append(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
