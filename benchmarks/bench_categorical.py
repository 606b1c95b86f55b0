"""Speed of categorical-dp (Adult) and t-close-dp (100,000 synthetic records).

    python benchmarks/bench_categorical.py [--out results/bench_categorical.txt]

Targets (issue 4): categorical-dp on Adult (30,162 records, 2 categorical attributes) < 10 s per
(k, ε) point; t-close-dp on 100,000 records < 30 s.  Every point is run from scratch (no
clustering cache), wall time by ``time.perf_counter`` (untraced run), peak memory by
``tracemalloc`` in a second run (numpy allocations included), plus the process's maximum RSS.
The machine is shared with other jobs: times are upper bounds.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpstudio.engine import api  # noqa: E402
from dpstudio.engine.measures.semantic import semantic_rl, semantic_sse  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
HIER = SHARED / "adult" / "hierarchies" / "adult_hierarchy_{}.csv"
ATTRS = ["occupation", "native-country"]


def measure(fn):
    """(result, wall seconds, peak MiB): timed without tracing, memory in a second traced run
    (tracemalloc slows allocation-heavy code down several times)."""
    t0 = time.perf_counter()
    out = fn()
    el = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, el, peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_categorical.txt"))
    args = ap.parse_args()
    lines = [f"bench_categorical — Python {platform.python_version()}, numpy {np.__version__}, "
             f"{platform.machine()}, {time.strftime('%Y-%m-%d')}", ""]

    df = pd.read_csv(SHARED / "adult" / "adult.csv", sep=";")
    hier = {a: str(HIER).format(a) for a in ATTRS}
    roles = {a: "eps-quasi" for a in ATTRS}
    lines.append(f"categorical-dp on Adult ({len(df)} records, {len(ATTRS)} categorical attributes); "
                 "target < 10 s per point")
    lines.append(f"{'k':>5} {'eps':>6} {'calibration':>13} {'protect s':>10} {'peak MiB':>9} "
                 f"{'SSE+RL s':>9}")
    worst = 0.0
    for k in (1, 2, 5, 30, 100):
        for eps in (0.1, 10.0):
            for cal in ("rigorous", "as-published"):
                res, el, peak = measure(lambda: api.protect(df, "categorical-dp", roles, seed=1,
                                                            hierarchies=hier, k=k, epsilon=eps,
                                                            calibration=cal))
                tax = {}
                from dpstudio.engine.measures.semantic import taxonomies_of
                tax = taxonomies_of(res)
                _, el_m, _ = measure(lambda: (semantic_sse(df, res.data, ATTRS, tax),
                                              semantic_rl(df, res.data, ATTRS, tax)))
                worst = max(worst, el + el_m)
                lines.append(f"{k:>5} {eps:>6g} {cal:>13} {el:>10.3f} {peak:>9.1f} {el_m:>9.3f}")
    lines.append(f"worst point (protect + SSE + RL): {worst:.2f} s — "
                 f"{'OK' if worst < 10 else 'OVER TARGET'}")
    lines.append("")

    n = 100_000
    rng = np.random.default_rng(0)
    syn = pd.DataFrame({f"q{i}": rng.normal(size=n) * (i + 1) for i in range(6)})
    syn["C"] = np.round(np.exp(rng.normal(8, 1.5, n)) + syn["q0"] * 50)
    r_roles = {f"q{i}": "k-quasi" for i in range(6)}
    r_roles["C"] = "confidential"
    lines.append(f"t-close-dp on {n} synthetic records (6 numeric k-quasis, 1 confidential); "
                 "target < 30 s")
    lines.append(f"{'eps':>5} {'k':>6} {'b':>3} {'groups':>7} {'t achieved':>11} {'time s':>8} {'peak MiB':>9}")
    worst = 0.0
    for eps in (0.5, 1.0, 2.0):
        for k in (20, 100, 1000):
            res, el, peak = measure(lambda: api.protect(syn, "t-close-dp", r_roles, seed=1,
                                                        epsilon=eps, k=k))
            i = res.info
            worst = max(worst, el)
            lines.append(f"{eps:>5g} {i['k']:>6} {i['buckets']:>3} {i['groups']:>7} "
                         f"{i['t_achieved']:>11.4g} {el:>8.2f} {peak:>9.1f}")
    lines.append(f"worst point: {worst:.2f} s — {'OK' if worst < 30 else 'OVER TARGET'}")
    lines.append("")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines.append(f"process max RSS: {rss:.0f} MiB")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
