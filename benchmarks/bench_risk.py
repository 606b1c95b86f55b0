"""Speed and memory of assess_risk and local_suppression (issue 10).

    python benchmarks/bench_risk.py [--n 1000000] [--skip-big-ls] [--out results/bench_risk.txt]
    python benchmarks/bench_risk.py --case {ar_big,ls_big,ar_supp} [--trace]   (one case, JSON)

Targets: assess_risk on free1 <= 0.1 s; on 1,000,000 records x 8 categorical keys with weights
and households <= 3 s and <= 1 GB peak; local_suppression on free1 (k = 3) <= 2 s; on
1,000,000 x 8 keys <= 120 s.  Wall time by ``time.perf_counter`` (untraced run, best of
``--repeat``); peak memory by ``tracemalloc`` in a second run (numpy allocations included).
The three 10^6-record cases run each in a child process of their own (``--case``), so the peak
RSS reported (``ru_maxrss`` of that child, data included; ``rss_before`` = after building the
data, before the call) is that run's alone; ``tracemalloc`` peaks (the call only) come from a
second, traced child.  The load average (``/proc/loadavg``) is printed next to the timings.
The synthetic file: survey-like skewed keys (cardinalities 2, 90, 5, 8, 10, 6, 4, 20; Zipf-like
frequencies), weights 50..500, households of 1..8 persons.  The machine is shared: times are
upper bounds.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
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


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:  # pragma: no cover - not Linux
        return "?"


def run_case(case: str, n: int, trace: bool, tmp: str) -> dict:
    """One 10^6-record case in this (child) process: time, peak RSS, tracemalloc peak."""
    bkeys = [f"k{j}" for j in range(8)]
    supp = Path(tmp) / f"supp_{n}.pkl"
    if case == "ar_supp":
        big = pd.read_pickle(supp)
    else:
        big = synthetic(n)
    rss0 = _maxrss_mib()
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    if case == "ls_big":
        out, rep = local_suppression(big, bkeys, 3)
        extra = {k: rep[k] for k in ("suppressed_total", "records_with_suppression", "passes")}
    else:
        r = assess_risk(big, bkeys, weight="w", household="hh")
        extra = {"sample_uniques": r.sample_uniques, "records_fk_lt_3": r.records_fk_lt_3}
    t = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else None
    if trace:
        tracemalloc.stop()
    if case == "ls_big" and not trace:
        out.to_pickle(supp)
    return {"case": case, "seconds": t, "maxrss_mib": _maxrss_mib(), "rss_before_mib": rss0,
            "tracemalloc_peak_mib": peak, "load": loadavg(), **extra}


def child(case: str, n: int, trace: bool, tmp: str) -> dict:
    cmd = [sys.executable, __file__, "--case", case, "--n", str(n), "--tmp", tmp]
    if trace:
        cmd.append("--trace")
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--skip-big-ls", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--case", choices=["ar_big", "ls_big", "ar_supp"])
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--tmp")
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case, a.n, a.trace, a.tmp or tempfile.gettempdir())))
        return
    lines = [f"# bench_risk  python {platform.python_version()}  numpy {np.__version__}  "
             f"pandas {pd.__version__}  {platform.machine()}"]

    def say(s):
        print(s, flush=True)
        lines.append(s)

    lines[0] += f"  {time.strftime('%Y-%m-%d %H:%M')}"
    free1 = pd.read_csv(FREE1 / "free1.csv")
    keys = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]
    _, t, peak = measure(lambda: assess_risk(free1, keys, weight="WEIGHT", sensitive=["EDUC1"]), repeat=5)
    say(f"assess_risk free1 (4000 x 6 keys, weight, l-div): {t:.4f} s, peak {peak:.1f} MiB (target 0.1 s)")
    (out, rep), t, peak = measure(lambda: local_suppression(free1, keys, 3), repeat=3)
    say(f"local_suppression free1 k=3: {t:.3f} s, peak {peak:.1f} MiB, {rep['suppressed_total']} values "
        f"suppressed (sdcMicro 862) {json.dumps(rep['suppressed_per_key'])} (target 2 s)")

    tmp = tempfile.mkdtemp(prefix="bench_risk_")
    say(f"(load average {loadavg()} before the 10^6-record cases; 2 cores shared)")
    r = child("ar_big", a.n, False, tmp)
    rt = child("ar_big", a.n, True, tmp)
    say(f"assess_risk {a.n:,} x 8 keys, weight, household: {r['seconds']:.2f} s (load {r['load']}), "
        f"peak RSS {r['maxrss_mib']:.0f} MiB (data alone {r['rss_before_mib']:.0f}), tracemalloc "
        f"{rt['tracemalloc_peak_mib']:.0f} MiB (targets 3 s, 1024 MiB); {r['sample_uniques']:,} "
        f"sample uniques, {r['records_fk_lt_3']:,} records f_k < 3")
    if not a.skip_big_ls:
        r = child("ls_big", a.n, False, tmp)
        rt = child("ls_big", a.n, True, tmp)
        say(f"local_suppression {a.n:,} x 8 keys k=3: {r['seconds']:.1f} s (load {r['load']}), "
            f"peak RSS {r['maxrss_mib']:.0f} MiB (data alone {r['rss_before_mib']:.0f}), "
            f"tracemalloc {rt['tracemalloc_peak_mib']:.0f} MiB; {r['suppressed_total']:,} values in "
            f"{r['records_with_suppression']:,} records, {r['passes']} passes (targets 120 s, 1024 MiB)")
        r = child("ar_supp", a.n, False, tmp)
        rt = child("ar_supp", a.n, True, tmp)
        say(f"assess_risk on that release (missing keys): {r['seconds']:.2f} s (load {r['load']}), "
            f"peak RSS {r['maxrss_mib']:.0f} MiB (data alone {r['rss_before_mib']:.0f}), tracemalloc "
            f"{rt['tracemalloc_peak_mib']:.0f} MiB (targets 3 s, 1024 MiB)")
    shutil.rmtree(tmp, ignore_errors=True)
    say(f"max RSS of the parent process (free1 cases): {_maxrss_mib():.0f} MiB")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
