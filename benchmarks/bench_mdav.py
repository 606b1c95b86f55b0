#!/usr/bin/env python3
"""MDAV speed and memory benchmark (issue 13 targets).

Cases (each in its own subprocess so that the RSS high-water mark is the case's own):

* Census 1,080 × 13 (``resources/census.csv``) at k = 3, 5, 10 — median of repeated calls;
* a Tarragona-shaped synthetic table 834 × 13 (lognormal, correlated, seeded) at k = 3, 5, 10;
* 100,000 × 5 and 1,000,000 × 5 synthetic (rounded gamma, with ties) at k = 5 — one call.

"first call" is the first call in a fresh process with mdav's default (tiered) choice: small
tables run in numpy there, large ones import numba and load the cached kernel (~0.5 s; the
very first run on a machine also compiles it).  The medians are those of later calls with
the kernel loaded, as in a long-running process.  ``--backend numpy`` forces the pure-numpy path (as when numba is not
importable).

Usage::

    python benchmarks/bench_mdav.py                    # all cases
    python benchmarks/bench_mdav.py --skip-1m          # without the 1,000,000-record case
    python benchmarks/bench_mdav.py --backend numpy --only census,tarragona
    python benchmarks/bench_mdav.py --out results/bench_mdav.txt
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
CENSUS = ROOT / "resources" / "census.csv"

TARGETS = {"census": 0.010, "tarragona": 0.010, "100k": 5.0, "1M": 300.0}


def _data(name: str):
    import numpy as np

    if name == "census":
        import pandas as pd

        return pd.read_csv(CENSUS).to_numpy(dtype=float)
    if name == "tarragona":
        # Tarragona's shape (834 firms × 13 financial variables): skewed, correlated magnitudes
        rng = np.random.default_rng(834)
        L = rng.normal(size=(13, 13)) / 3.0
        G = rng.normal(size=(834, 13)) @ (np.eye(13) + L)
        return np.round(np.exp(1.2 * G / G.std(axis=0) + 8.0))
    n = {"100k": 100_000, "1M": 1_000_000}[name]
    rng = np.random.default_rng(1)
    return np.round(rng.gamma(shape=2.0, scale=1000.0, size=(n, 5)))


def _child(name: str, k: int, repeats: int) -> dict:
    import numpy as np

    from dpstudio.engine.algorithms import microaggregation as MA

    X = _data(name)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    lab = MA.mdav(X, k)
    first = time.perf_counter() - t0
    # the medians are those of a long-running process (app, sweep): the kernel is loaded
    # (mdav loads it by itself once 0.5 s have been spent in numpy MDAV)
    backend = MA._mdav_backend_name()   # loads the kernel unless DPSTUDIO_MDAV_NUMPY=1
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        MA.mdav(X, k)
        times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sizes = np.bincount(lab)
    return {"n": int(X.shape[0]), "m": int(X.shape[1]), "k": k, "first_s": first,
            "median_s": float(np.median(times)) if times else first,
            "rss_peak_mb": rss / 1024, "rss_delta_mb": (rss - rss0) / 1024,
            "clusters": int(sizes.size), "backend": backend}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated: census,tarragona,100k,1M")
    ap.add_argument("--skip-1m", action="store_true")
    ap.add_argument("--backend", choices=["auto", "numpy"], default="auto")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", nargs=3, metavar=("NAME", "K", "REPEATS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child(a.child[0], int(a.child[1]), int(a.child[2]))))
        return
    cases = [("census", k, 30) for k in (3, 5, 10)] + [("tarragona", k, 30) for k in (3, 5, 10)]
    cases += [("100k", 5, 2), ("1M", 5, 0)]
    only = {s.strip() for s in a.only.split(",") if s.strip()}
    if only:
        cases = [c for c in cases if c[0] in only]
    if a.skip_1m:
        cases = [c for c in cases if c[0] != "1M"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if a.backend == "numpy":
        env["DPSTUDIO_MDAV_NUMPY"] = "1"
    lines = [f"# MDAV benchmark  {time.strftime('%Y-%m-%d %H:%M')}  {platform.processor() or platform.machine()}"
             f"  {os.cpu_count()} CPUs  python {platform.python_version()}  backend={a.backend}",
             f"{'case':<22}{'backend':>8}{'first call':>12}{'median':>12}{'target':>10}{'RSS peak':>11}{'RSS Δ':>9}"]
    print("\n".join(lines), flush=True)
    for name, k, reps in cases:
        out = subprocess.run([sys.executable, __file__, "--child", name, str(k), str(reps)],
                             capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode:
            line = f"{name} k={k}: FAILED {out.stderr.strip().splitlines()[-1:]}"
        else:
            r = json.loads(out.stdout.strip().splitlines()[-1])
            tgt = TARGETS[name]
            ok = "ok" if r["median_s"] <= tgt else "MISS"
            label = f"{name} {r['n']}×{r['m']} k={k}"
            line = (f"{label:<22}{r['backend']:>8}{r['first_s'] * 1e3:>10.1f}ms"
                    f"{r['median_s'] * 1e3:>10.1f}ms{'≤' + f'{tgt:g}s ' + ok:>10}{r['rss_peak_mb']:>9.0f}MB"
                    f"{r['rss_delta_mb']:>7.0f}MB")
        lines.append(line)
        print(line, flush=True)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
