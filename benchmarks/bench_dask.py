"""Scale proof of the Dask backend (issues 12, 25): a synthetic N × m Parquet data set
(generated here, not committed), ir-dp and laplace with the Dask backend on a LocalCluster,
and the in-memory engine on the same data when it fits.

    python benchmarks/bench_dask.py --rows 100_000_000 --workers 2 --memory-limit 1GB --methods ir-dp

Reports wall time, peak RSS per worker (sampled every 0.5 s; with its peak *unmanaged* memory,
RSS minus the stored results Dask holds in memory), spilled bytes, the workers
restarted by their nanny for exceeding 95 % of their memory budget (any restart: the run did not
stay within its limits), and the memory model's prediction (docs/scale.md) next to the peak; then the CPU time (user,
sys) and minor page faults of this process and its workers (counted once the cluster is closed).
``--cols 2`` uses the first two columns; ``--parts N`` writes N Parquet parts; ``--check``
compares the Dask release with the in-memory one value for value (needs the data in memory);
``--methods ir-dp`` runs ir-dp only.  A data set already generated in ``--dir`` is reused;
``--clean`` deletes it afterwards.

The issue-25 runs:

    python benchmarks/bench_dask.py --rows 20000000 --cols 2 --parts 40 --workers 2 --memory-limit 500MB --methods ir-dp --check
    python benchmarks/bench_dask.py --rows 100000000 --workers 2 --memory-limit 1GB --methods ir-dp
    python benchmarks/bench_dask.py --rows 100000000 --workers 4 --memory-limit 500MB --methods ir-dp"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import tempfile
import threading
import time
import traceback

import numpy as np
import pandas as pd

ALL_DOMAINS = {"a": (0, 100), "b": (0, 1_000_000), "c": (0, 1000), "d": (0, 10), "e": (0, 500)}


def _columns(rng, m: int, cols: int) -> dict:
    full = {
        "a": lambda: rng.integers(0, 101, m),
        "b": lambda: np.round(rng.uniform(0, 1_000_000, m), 0),
        "c": lambda: rng.integers(0, 1001, m),
        "d": lambda: np.round(rng.uniform(0, 10, m), 1),
        "e": lambda: rng.integers(0, 501, m),
    }
    return {c: full[c]() for c in "abcde"[:cols]}


def generate(path: str, rows: int, parts: int, cols: int = 5) -> None:
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(0)
    part_rows = -(-rows // parts)
    for i, start in enumerate(range(0, rows, part_rows)):
        m = min(part_rows, rows - start)
        pd.DataFrame(_columns(rng, m, cols)).to_parquet(os.path.join(path, f"part.{i:04d}.parquet"), index=False)


def _rss(dask_worker=None):
    """(RSS, unmanaged = RSS minus the stored results Dask holds in memory) of this worker."""
    import psutil
    rss = psutil.Process().memory_info().rss
    fast = getattr(getattr(dask_worker, "data", None), "fast", None)
    return rss, rss - int(getattr(fast, "total_weight", 0) or 0)


def _spilled(dask_worker=None):
    """Bytes this worker wrote to disk (spilled) so far."""
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


def run_dask(src, out, method, params, workers, memory_limit, domains, scratch=None):
    """(wall s, peak RSS of a worker, spilled bytes, restarts, error or None, release info)."""
    from dask.utils import parse_bytes
    from distributed import Client

    from dpstudio.engine.backends import dask_backend as DB

    roles = {c: "eps-quasi" for c in domains}
    limit = parse_bytes(memory_limit) if isinstance(memory_limit, str) else memory_limit
    # the cluster the command line starts (its workers' environment: DB.WORKER_ENVIRON)
    with DB.local_cluster(n_workers=workers, threads_per_worker=1, memory_limit=limit,
                          processes=True, dashboard_address=None) as cl, Client(cl) as client:
        peak: dict = {}
        unmanaged: dict = {}
        spilled: dict = {}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    for w, (r, u) in client.run(_rss).items():
                        peak[w] = max(peak.get(w, 0), r)
                        unmanaged[w] = max(unmanaged.get(w, 0), u)
                    for w, b in client.run(_spilled).items():  # a restarted worker starts at 0
                        spilled[w] = max(spilled.get(w, 0), b)
                except Exception:
                    pass
                stop.wait(0.5)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        restarts = _Restarts()
        logging.getLogger("distributed.nanny.memory").addHandler(restarts)
        t = time.perf_counter()
        error = None
        info = {}
        try:
            rel = DB.protect_dask(src, method, roles, domains, seed=1, client=client, scratch=scratch, **params)
            DB.write_release(rel, out)
            info = dict(rel.info)
            del rel
        except Exception as e:  # the benchmark reports a failed run instead of stopping
            error = f"{type(e).__name__}: {str(e)[:160]}"
            traceback.print_exc()
        wall = time.perf_counter() - t
        stop.set()
        th.join()
        logging.getLogger("distributed.nanny.memory").removeHandler(restarts)
        try:
            for w, b in client.run(_spilled).items():
                spilled[w] = max(spilled.get(w, 0), b)
        except Exception:
            pass
        budget = DB.worker_budget(client)
    info["peaks"] = dict(peak)
    info["unmanaged"] = dict(unmanaged)
    info["spilled"] = dict(spilled)
    return wall, max(peak.values()) if peak else 0, sum(spilled.values()), restarts.count, error, info, budget


def run_memory(src, method, params, domains):
    from dpstudio import engine

    df = pd.read_parquet(src)
    t = time.perf_counter()
    res = engine.protect(df, method, {c: "eps-quasi" for c in domains}, domains, seed=1, **params)
    return time.perf_counter() - t, res.data


def check(out, mem: pd.DataFrame) -> str:
    got = pd.read_parquet(os.path.join(out, "release"))
    try:
        pd.testing.assert_frame_equal(got.reset_index(drop=True), mem.reset_index(drop=True), check_dtype=False)
    except AssertionError as e:
        return "DIFFERENT: " + str(e).splitlines()[0]
    return f"identical to the in-memory release ({len(got):,} records)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--cols", type=int, default=5, choices=range(1, 6))
    ap.add_argument("--parts", type=int, default=None, help="Parquet parts (default: one per 1M rows)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--memory", action="store_true", help="also run the in-memory engine")
    ap.add_argument("--check", action="store_true", help="compare with the in-memory release")
    ap.add_argument("--clean", action="store_true", help="delete the generated data afterwards")
    ap.add_argument("--sorts", choices=("auto", "p2p"), default="auto",
                    help="the ranked methods' sorts: through scratch files when the workers share this "
                         "machine (auto, the default) or Dask's p2p shuffles (p2p, the earlier path)")
    ap.add_argument("--methods", default="laplace,ir-dp",
                    help="comma-separated methods to run (laplace, ir-dp), e.g. --methods ir-dp")
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="dpstudio-bench-")
    parts = a.parts or max(1, -(-a.rows // 1_000_000))
    src = os.path.join(base, f"synthetic-{a.rows}x{a.cols}-{parts}")
    domains = {c: ALL_DOMAINS[c] for c in "abcde"[: a.cols]}
    if not os.path.exists(src):
        t = time.perf_counter()
        generate(src, a.rows, parts, a.cols)
        print(f"generated {a.rows:,} × {a.cols} in {parts} parts in {time.perf_counter() - t:.1f} s: {src}",
              flush=True)
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} at start", flush=True)
    print(f"{'method':10} {'engine':24} {'wall':>9} {'peak RSS/worker':>16} {'model':>9} {'spilled':>10} "
          f"{'restarts':>9}  ranges")
    runs = {"laplace": {"epsilon": 1.0}, "ir-dp": {"k": 5, "epsilon": 1.0}}
    chosen = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in runs]
    if unknown:
        ap.error(f"--methods: unknown method(s) {', '.join(unknown)}; choose among {', '.join(runs)}")
    from dpstudio.engine.backends import dask_backend as DB

    try:
        for method in chosen:
            params = runs[method]
            out = os.path.join(base, f"out-{method}")
            shutil.rmtree(out, ignore_errors=True)
            wall, peak, spilled, restarts, error, info, budget = run_dask(
                src, out, method, params, a.workers, a.memory_limit, domains,
                scratch=False if a.sorts == "p2p" else None)
            model = DB.peak_model(budget)
            print(f"{method:10} {f'dask {a.workers}×{a.memory_limit}':24} {wall:8.1f}s "
                  f"{peak / 2**20:13.0f} MB {model / 2**20:6.0f} MB {spilled / 2**20:7.0f} MB {restarts:9d}  "
                  f"{info.get('ranges', '-')}" + (f" ({info['sorts']})" if "sorts" in info else "")
                  + (f"  FAILED: {error}" if error else ""), flush=True)
            # every worker's own peak and spill (a worker restarted by its nanny comes back
            # under a new address: it is listed twice)
            for w in sorted(info.get("peaks", {})):
                print(f"{'':10}   worker {w}: peak RSS {info['peaks'][w] / 2**20:.0f} MB, "
                      f"unmanaged {info.get('unmanaged', {}).get(w, 0) / 2**20:.0f} MB, "
                      f"spilled {info.get('spilled', {}).get(w, 0) / 2**20:.0f} MB", flush=True)
            ru = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
            print(f"{'':10}   CPU so far (this process and its finished workers): "
                  f"user {sum(r.ru_utime for r in ru):.0f} s, sys {sum(r.ru_stime for r in ru):.0f} s, "
                  f"minor page faults {sum(r.ru_minflt for r in ru):,}", flush=True)
            if a.memory or a.check:
                t, mem = run_memory(src, method, params, domains)
                print(f"{method:10} {'memory':24} {t:8.1f}s", flush=True)
                if a.check and not error:
                    print(f"{method:10} check: {check(out, mem)}", flush=True)
                del mem
            shutil.rmtree(out, ignore_errors=True)
            for extra in (out + ".private.json",):
                if os.path.exists(extra):
                    os.remove(extra)
    finally:
        print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} at the end", flush=True)
        if a.clean:
            shutil.rmtree(src, ignore_errors=True)


if __name__ == "__main__":
    main()
