"""Scale proof of the Dask backend (issue 12): a synthetic N × 5 Parquet data set (generated
here, not committed), ir-dp and laplace with the Dask backend on a LocalCluster, and the
in-memory engine on the same data when it fits.

    python benchmarks/bench_dask.py --rows 10_000_000 --workers 2 --memory-limit 3GB

Reports wall time, peak RSS per worker (sampled every 0.5 s), spilled bytes and the workers
restarted by their nanny for exceeding 95 % of their memory budget (any restart: the run did not
stay within its limits).  ``--methods ir-dp`` runs ir-dp only.  A data set already generated in
``--dir`` is reused.

Scaled proof (ratio of data to memory of 100M with 3GB):

    python benchmarks/bench_dask.py --rows 20000000 --workers 2 --memory-limit 600MB --methods ir-dp"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import threading
import traceback
import time

import numpy as np
import pandas as pd

DOMAINS = {"a": (0, 100), "b": (0, 1_000_000), "c": (0, 1000), "d": (0, 10), "e": (0, 500)}


def generate(path: str, rows: int, part_rows: int = 1_000_000) -> None:
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, start in enumerate(range(0, rows, part_rows)):
        m = min(part_rows, rows - start)
        pd.DataFrame({
            "a": rng.integers(0, 101, m),
            "b": np.round(rng.uniform(0, 1_000_000, m), 0),
            "c": rng.integers(0, 1001, m),
            "d": np.round(rng.uniform(0, 10, m), 1),
            "e": rng.integers(0, 501, m),
        }).to_parquet(os.path.join(path, f"part.{i:04d}.parquet"), index=False)


def _rss(dask_worker=None):
    import psutil
    return psutil.Process().memory_info().rss


def _spilled(dask_worker=None):
    data = getattr(dask_worker, "data", None)
    tot = getattr(data, "spilled_total", None)
    if tot is None:
        return 0
    return int(getattr(tot, "disk", 0) or 0)


class _Restarts(logging.Handler):
    """Counts the nannies' "exceeded 95% memory budget" restarts (the nannies of a LocalCluster
    run in this process)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if "exceeded 95% memory budget" in record.getMessage():
            self.count += 1


def run_dask(src, out, method, params, workers, memory_limit):
    """(wall s, peak RSS of a worker, spilled bytes, restarts, error or None)."""
    from distributed import Client, LocalCluster

    from dpstudio.engine.backends import dask_backend as DB

    roles = {c: "eps-quasi" for c in DOMAINS}
    with LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit=memory_limit,
                      processes=True, dashboard_address=None) as cl, Client(cl) as client:
        peak: dict = {}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    for w, r in client.run(_rss).items():
                        peak[w] = max(peak.get(w, 0), r)
                except Exception:
                    pass
                stop.wait(0.5)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        restarts = _Restarts()
        logging.getLogger("distributed.nanny.memory").addHandler(restarts)
        t = time.perf_counter()
        error = None
        try:
            rel = DB.protect_dask(src, method, roles, DOMAINS, seed=1, **params)
            DB.write_release(rel, out)
            del rel
        except Exception as e:  # the benchmark reports a failed run instead of stopping
            error = f"{type(e).__name__}: {str(e)[:120]}"
            traceback.print_exc()
        wall = time.perf_counter() - t
        stop.set()
        th.join()
        logging.getLogger("distributed.nanny.memory").removeHandler(restarts)
        try:
            spilled = sum(client.run(_spilled).values())
        except Exception:
            spilled = -1
    return wall, max(peak.values()) if peak else 0, spilled, restarts.count, error


def run_memory(src, method, params):
    from dpstudio import engine

    df = pd.read_parquet(src)
    t = time.perf_counter()
    engine.protect(df, method, {c: "eps-quasi" for c in DOMAINS}, DOMAINS, seed=1, **params)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--memory", action="store_true", help="also run the in-memory engine")
    ap.add_argument("--methods", default="laplace,ir-dp",
                    help="comma-separated methods to run (laplace, ir-dp), e.g. --methods ir-dp")
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="dpstudio-bench-")
    src = os.path.join(base, f"synthetic-{a.rows}")
    if not os.path.exists(src):
        t = time.perf_counter()
        generate(src, a.rows)
        print(f"generated {a.rows:,} × 5 in {time.perf_counter() - t:.1f} s: {src}", flush=True)
    print(f"{'method':10} {'engine':24} {'wall':>9} {'peak RSS/worker':>16} {'spilled':>10} {'restarts':>9}")
    runs = {"laplace": {"epsilon": 1.0}, "ir-dp": {"k": 5, "epsilon": 1.0}}
    chosen = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in runs]
    if unknown:
        ap.error(f"--methods: unknown method(s) {', '.join(unknown)}; choose among {', '.join(runs)}")
    for method in chosen:
        params = runs[method]
        out = os.path.join(base, f"out-{method}")
        shutil.rmtree(out, ignore_errors=True)
        wall, peak, spilled, restarts, error = run_dask(src, out, method, params, a.workers,
                                                       a.memory_limit)
        print(f"{method:10} {f'dask {a.workers}×{a.memory_limit}':24} {wall:8.1f}s "
              f"{peak / 2**20:13.0f} MB {spilled / 2**20:7.0f} MB {restarts:9d}"
              + (f"  FAILED: {error}" if error else ""), flush=True)
        if a.memory:
            print(f"{method:10} {'memory':24} {run_memory(src, method, params):8.1f}s", flush=True)


if __name__ == "__main__":
    main()
