"""Speed and memory of assess_risk and local_suppression (issue 10).

    python benchmarks/bench_risk.py [--n 1000000] [--skip-big-ls] [--out results/bench_risk.txt]

Targets: assess_risk on free1 <= 0.1 s; on 1,000,000 records x 8 categorical keys with weights
and households <= 3 s and <= 1 GB peak; local_suppression on free1 (k = 3) <= 2 s; on
1,000,000 x 8 keys <= 120 s.  Wall time by ``time.perf_counter`` (untraced run, best of
``--repeat``); peak memory by ``tracemalloc`` in a second run (numpy allocations included).
The synthetic file: survey-like skewed keys (cardinalities 2, 90, 5, 8, 10, 6, 4, 20; Zipf-like
frequencies), weights 50..500, households of 1..8 persons.  The machine is shared: times are
upper bounds.
"""

from __future__ import annotations

import argparse
import json
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

from dpstudio.engine.algorithms.local_suppression import local_suppression  # noqa: E402
from dpstudio.engine.measures.survey_risk import assess_risk  # noqa: E402

FREE1 = ROOT / "resources" / "free1"


def measure(fn, repeat=1, trace=True):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    peak = float("nan")
    if trace:
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out, best, peak


def synthetic(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cards = [2, 90, 5, 8, 10, 6, 4, 20]
    cols = {}
    for j, c in enumerate(cards):
        p = 1.0 / np.arange(1, c + 1) ** 0.8
        cols[f"k{j}"] = rng.choice(c, size=n, p=p / p.sum()).astype(np.int16)
    df = pd.DataFrame(cols)
    df["w"] = rng.uniform(50, 500, n).round(1)
    sizes = rng.integers(1, 9, n // 2)
    hh = np.repeat(np.arange(len(sizes)), sizes)[:n]
    if len(hh) < n:
        hh = np.r_[hh, np.arange(len(sizes), len(sizes) + n - len(hh))]
    df["hh"] = hh
    return df


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--skip-big-ls", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = [f"# bench_risk  python {platform.python_version()}  numpy {np.__version__}  "
             f"pandas {pd.__version__}  {platform.machine()}"]

    def say(s):
        print(s, flush=True)
        lines.append(s)

    free1 = pd.read_csv(FREE1 / "free1.csv")
    keys = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]
    _, t, peak = measure(lambda: assess_risk(free1, keys, weight="WEIGHT", sensitive=["EDUC1"]), repeat=5)
    say(f"assess_risk free1 (4000 x 6 keys, weight, l-div): {t:.4f} s, peak {peak:.1f} MiB (target 0.1 s)")
    (out, rep), t, peak = measure(lambda: local_suppression(free1, keys, 3), repeat=3)
    say(f"local_suppression free1 k=3: {t:.3f} s, peak {peak:.1f} MiB, {rep['suppressed_total']} values "
        f"suppressed (sdcMicro 862) {json.dumps(rep['suppressed_per_key'])} (target 2 s)")

    big = synthetic(a.n)
    bkeys = [f"k{j}" for j in range(8)]
    r, t, peak = measure(lambda: assess_risk(big, bkeys, weight="w", household="hh"))
    say(f"assess_risk {a.n:,} x 8 keys, weight, household: {t:.2f} s, peak {peak:.0f} MiB "
        f"(targets 3 s, 1024 MiB); {r.sample_uniques:,} sample uniques, "
        f"{r.records_fk_lt_3:,} records f_k < 3")
    if not a.skip_big_ls:
        (out, rep), t, _ = measure(lambda: local_suppression(big, bkeys, 3), trace=False)
        say(f"local_suppression {a.n:,} x 8 keys k=3: {t:.1f} s, {rep['suppressed_total']:,} values "
            f"in {rep['records_with_suppression']:,} records, {rep['passes']} passes (target 120 s)")
        _, t2, peak2 = measure(lambda: assess_risk(out, bkeys, weight="w", household="hh"), trace=True)
        say(f"assess_risk on that release (missing keys): {t2:.2f} s, peak {peak2:.0f} MiB")
    say(f"max RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
