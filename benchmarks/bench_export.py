#!/usr/bin/env python3
"""Export benchmark (issue 15, item 3): ``export_release`` of a 2,000,000-row release.

The release (laplace noise on one column of a CSV read with the real reader, so the
unprotected columns carry their kept texts) is built before the timer starts.  Each mode runs
in its own subprocess: once plainly for the wall time and the rise of the RSS high-water mark
during the export, once under ``tracemalloc`` for the peak of Python-visible allocations.

Usage::

    python benchmarks/bench_export.py                 # 2,000,000 rows
    python benchmarks/bench_export.py --rows 200000   # smaller
    PYTHONPATH=/other/checkout python benchmarks/bench_export.py --no-root   # another copy
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _case(rows: int, traced: bool) -> dict:
    import numpy as np

    from dpstudio import engine
    from dpstudio.engine import export, io

    d = tempfile.mkdtemp(prefix="bench_export.")
    src = os.path.join(d, "in.csv")
    rng = np.random.default_rng(0)
    with open(src, "w") as fh:
        fh.write("id,x,code,flag\n")
        ids = np.arange(rows)
        xs = rng.uniform(0, 100, rows).round(2)
        codes = rng.integers(0, 1000, rows)
        for a in range(0, rows, 200_000):
            b = min(a + 200_000, rows)
            fh.write("".join(f"{ids[i]},{xs[i]},{codes[i]:05d},{'TRUE' if codes[i] % 2 else 'FALSE'}\n"
                             for i in range(a, b)))
    df, meta = io.read_table(src)
    res = engine.protect(df, "laplace", {"x": "eps-quasi"}, domains={"x": (0, 100)}, epsilon=1.0)
    del df
    if traced:
        import tracemalloc

        tracemalloc.start()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    export.export_release(res, os.path.join(d, "out.csv"), input_meta=meta, release_note=True)
    wall = time.perf_counter() - t
    out = {"wall_s": round(wall, 2),
           "rss_rise_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024, 1),
           "bytes": os.path.getsize(os.path.join(d, "out.csv"))}
    if traced:
        out["traced_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--case", choices=["plain", "traced"])
    ap.add_argument("--no-root", action="store_true", help="import dpstudio from PYTHONPATH")
    a = ap.parse_args()
    if not a.no_root and str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if a.case:
        print(json.dumps(_case(a.rows, a.case == "traced")))
        return
    res = {}
    for case in ("plain", "traced"):
        cmd = [sys.executable, __file__, "--rows", str(a.rows), "--case", case] + (["--no-root"] if a.no_root else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        res[case] = json.loads(out)
    print(f"export_release, {a.rows:,} rows ({res['plain']['bytes'] / 1e6:.0f} MB CSV): "
          f"wall {res['plain']['wall_s']} s, RSS rise {res['plain']['rss_rise_mb']} MB, "
          f"traced peak {res['traced']['traced_peak_mb']} MB")


if __name__ == "__main__":
    main()
