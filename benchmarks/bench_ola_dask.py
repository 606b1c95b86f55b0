#!/usr/bin/env python3
"""k-eps / OLA through a frequency set on Dask vs in memory (issue 12): Adult × 10 and × 100.

ARX's set-up: the bundled ``resources/adult`` data with ARX's hierarchies, the 8 quasi-
identifiers ARX uses (all but ``occupation``), k = 5, at most 5 % suppression.  Per size:
the in-memory ``engine.protect(..., "k-eps")`` wall time, and on Dask (a Parquet copy in
``--parts`` parts; a LocalCluster of ``--workers`` workers, or the threaded scheduler with
``--workers 0``) the time of ``protect_dask`` + writing the release (Parquet parts); the
chosen node of each (they must be equal) and the machine's load average.

Usage::

    python benchmarks/bench_ola_dask.py [--copies 10 100] [--workers 2] [--out results/bench_ola_dask.txt]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402

ADULT = ROOT / "resources" / "adult"
QI8 = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex", "workclass"]


def load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--out")
    a = ap.parse_args()
    base = pd.read_csv(ADULT / "adult.csv", sep=";")
    hs = {c: str(ADULT / "hierarchies" / f"adult_hierarchy_{c}.csv") for c in QI8}
    roles = {c: "k-quasi" for c in QI8}
    params = {"k": 5, "suppression": 0.05}
    client = cluster = None
    if a.workers:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, memory_limit="3GB")
        client = Client(cluster)
    lines = [f"# bench_ola_dask: Adult x N, 8 QIs, k=5, 5% suppression; Dask workers={a.workers}, parts={a.parts}"]
    lines.append("copies  records    memory_s  dask_s  node_memory                node_dask                  load")
    try:
        for n in a.copies:
            df = pd.concat([base] * n, ignore_index=True)
            t0 = time.perf_counter()
            mem = engine.protect(df, "k-eps", roles, hierarchies=hs, seed=1, **params)
            tm = time.perf_counter() - t0
            node_m = tuple(mem.info["chosen_levels"][c] for c in QI8)
            with tempfile.TemporaryDirectory() as tmp:
                src = os.path.join(tmp, "in")
                import dask.dataframe as dd

                dd.from_pandas(df, npartitions=a.parts).to_parquet(src, write_index=False)
                t0 = time.perf_counter()
                rel = DB.protect_dask(src, "k-eps", roles, seed=1, hierarchies=hs, client=client, **params)
                DB.write_release(rel, os.path.join(tmp, "out"))
                td = time.perf_counter() - t0
            node_d = tuple(rel.info["chosen_levels"][c] for c in QI8)
            lines.append(f"{n:>6}  {len(df):>9,}  {tm:8.2f}  {td:6.2f}  {node_m!s:<25}  {node_d!s:<25}  {load()}")
            print(lines[-1], flush=True)
            assert node_m == node_d, "the Dask node differs from the in-memory node"
    finally:
        if client is not None:
            client.close()
            cluster.close()
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
