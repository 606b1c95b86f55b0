"""Query desk speed (issue 26): one answer on Census and on 1,000,000 records, per mechanism.

Targets: one answer ≤ 50 ms on Census, ≤ 1 s on 1,000,000 records (median of ``--repeats``
answers after one warm-up, an explicit mechanism; ``auto`` adds the assessment of every
mechanism).  Every answer has its own seed and its own ε (1, 1.001, …): the planning figures
the desk keeps per (prior, ε) are never reused, so every answer is timed as the first of its kind.
Wall time and CPU time (user + sys of this process: the figure to judge on a shared machine).
Writes ``results/bench_query.txt``.  ``--cold``: one answer per case in a fresh interpreter
each (imports warm, nothing of the desk computed before), Census only.

    python benchmarks/bench_query.py [--repeats 5] [--out results/bench_query.txt] [--cold]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpstudio.engine.query import NumericRange  # noqa: E402
from dpstudio.engine.query.desk import answer_query  # noqa: E402

CASES = [
    ("count where FICA > 3000", NumericRange(0, 1_000_000, 10), "laplace"),
    ("mean(FICA)", NumericRange(0, 12000, 1), "laplace"),
    ("mean(FICA)", NumericRange(0, 12000, 1), "gaussian"),
    ("sum(FICA) where FEDTAX > 1000", NumericRange(0, 1.2e10, 100000), "laplace"),
    ("variance(FICA)", NumericRange(0, 36e6, 1000), "laplace"),
    ("median(FICA)", NumericRange(0, 12000, 1), "exponential"),
    ("quantile(FICA, 0.9)", NumericRange(0, 12000, 1), "exponential"),
    ("mean(FICA)", NumericRange(0, 12000, 1), "refinement"),
    ("mean(FICA)", NumericRange(0, 12000, 1), "auto"),
]
DOM = {"FICA": (0, 12000), "FEDTAX": (0, 32000)}


def bench(df, repeats, warm=True):
    rows = []
    for text, sup, mech in CASES:
        kw = dict(support=sup, bounds=DOM, mechanism=mech, delta=1e-6)
        if warm:
            answer_query(df, text, 0.5, rng=0, **kw)  # warm-up (imports; another ε)
        times, cpu = [], []
        for i in range(repeats):
            # a new ε every answer (1, 1.001, …): the planning figures kept per (prior, ε) are
            # never reused, every answer is timed as the first of its kind
            t, c = time.perf_counter(), time.process_time()
            answer_query(df, text, 1.0 + i / 1000, rng=i + 1, **kw)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        rows.append((text, mech, statistics.median(times), statistics.median(cpu)))
    return rows


def cold() -> int:
    """One answer per case, each in a fresh interpreter (nothing of the desk computed before)."""
    import subprocess

    print("# cold: one answer per case in a fresh process (Census), ms wall / CPU")
    for k, (text, _sup, mech) in enumerate(CASES):
        code = (
            "import sys, time; sys.argv=['x']; sys.path.insert(0, %r);"
            "import pandas as pd; from benchmarks.bench_query import CASES, DOM;"
            "from dpstudio.engine.query.desk import answer_query;"
            "df = pd.read_csv(%r); t, s, m = CASES[%d];"
            "w, c = time.perf_counter(), time.process_time();"
            "answer_query(df, t, 1.0, support=s, bounds=DOM, mechanism=m, delta=1e-6, rng=1);"
            "print('%%.1f %%.1f' %% ((time.perf_counter()-w)*1000, (time.process_time()-c)*1000))"
        ) % (str(ROOT), str(ROOT / "resources" / "census.csv"), k)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        w, c = out.stdout.split()
        print(f"{text:34s} {mech:12s} {float(w):8.1f} ms wall {float(c):8.1f} ms CPU")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_query.txt"))
    ap.add_argument("--cold", action="store_true")
    a = ap.parse_args(argv)
    if a.cold:
        return cold()
    census = pd.read_csv(ROOT / "resources" / "census.csv")
    rng = np.random.default_rng(0)
    big = census.sample(1_000_000, replace=True, random_state=1).reset_index(drop=True)
    big["FICA"] = big["FICA"] + rng.integers(0, 2, len(big))
    lines = [
        "# bench_query: one answer (median of %d), seconds; load %s"
        % (a.repeats, open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else "?"),
        f"{'query':34s} {'mechanism':12s} {'Census wall':>12s} {'Census CPU':>12s} {'1M wall':>12s} {'1M CPU':>12s}",
    ]
    small = bench(census, a.repeats)
    large = bench(big, max(1, a.repeats // 2))
    for (t, m, s, sc), (_, _, b, bc) in zip(small, large):
        lines.append(
            f"{t:34s} {m:12s} {s * 1000:9.1f} ms {sc * 1000:9.1f} ms {b * 1000:9.1f} ms {bc * 1000:9.1f} ms"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    Path(a.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
