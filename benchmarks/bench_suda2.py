"""Speed and memory of SUDA2 (issue 23): 100,000 and 1,000,000 records x 8 keys.

    python benchmarks/bench_suda2.py [--n 100000,1000000] [--sdcmicro] [--out results/bench_suda2.txt]
    python benchmarks/bench_suda2.py --case N [--missing 0.02]   (one case in this process, JSON)

Targets (issue 23): 100,000 x 8 keys <= 30 s and <= 2 GB.  Each case runs in a child process
of its own, so the peak RSS reported (``ru_maxrss`` of that child, data included;
``rss_before`` = after building the data) is that run's alone.  Wall time by
``time.perf_counter``.  The load average (``/proc/loadavg``) is printed next to the timings
(2 cores shared by several engineers: times are upper bounds).

The synthetic file: survey-like skewed keys (cardinalities 2, 90, 5, 8, 10, 6, 4, 20; Zipf-like
frequencies, as bench_risk.py), optionally with a share of missing key values.

``--sdcmicro`` also times sdcMicro's ``suda2`` (``missing = NA``, ``DisFraction = 0.01``) on the
same data (written to a temporary CSV) with ``Rscript`` -- it needs R and sdcMicro 5.8.1
(``R_LIBS`` pointing at its library); its peak RSS is the Rscript process's (R, data and
sdcMicro included); the scores of both are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpstudio.engine.measures.suda2 import suda2  # noqa: E402

CARDS = [2, 90, 5, 8, 10, 6, 4, 20]
KEYS = [f"k{j}" for j in range(len(CARDS))]

R_CODE = r"""
suppressMessages(library(sdcMicro))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1])
keys <- grep("^k", names(d), value = TRUE)
t0 <- proc.time()[["elapsed"]]
obj <- suppressWarnings(createSdcObj(d, keyVars = keys))
t1 <- proc.time()[["elapsed"]]
obj <- suppressWarnings(suda2(obj, missing = NA, DisFraction = 0.01))
t2 <- proc.time()[["elapsed"]]
s <- get.sdcMicroObj(obj, "risk")$suda2
write.csv(data.frame(suda_score = s$score, suda_dis = s$disScore), a[2], row.names = FALSE)
cat(sprintf('{"suda2_seconds": %.3f, "create_seconds": %.3f, "version": "%s"}\n', t2 - t1, t1 - t0,
            as.character(packageVersion("sdcMicro"))))
"""


def synthetic(n: int, missing: float = 0.0, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {}
    for j, c in enumerate(CARDS):
        p = 1.0 / np.arange(1, c + 1) ** 0.8
        x = rng.choice(c, size=n, p=p / p.sum()).astype(np.float64)
        if missing:
            x[rng.random(n) < missing] = np.nan
        cols[KEYS[j]] = x
    return pd.DataFrame(cols)


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:  # pragma: no cover - not Linux
        return "?"


def run_case(n: int, missing: float) -> dict:
    df = synthetic(n, missing)
    rss0 = _maxrss_mib()
    t0 = time.perf_counter()
    r = suda2(df, KEYS, dis_fraction=0.01)
    t = time.perf_counter() - t0
    return {
        "n": n,
        "missing": missing,
        "seconds": t,
        "maxrss_mib": _maxrss_mib(),
        "rss_before_mib": rss0,
        "load": loadavg(),
        "records_with_msu": int((r.score > 0).sum()),
        "msus": int(len(r.msu_records)),
        "subsets_visited": r.subsets_visited,
    }


def child(n: int, missing: float) -> dict:
    cmd = [sys.executable, __file__, "--case", str(n), "--missing", str(missing)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def sdcmicro(n: int, missing: float, tmp: str) -> dict | None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        return None
    data, out, code = (os.path.join(tmp, f) for f in ("d.csv", "s.csv", "run.R"))
    df = synthetic(n, missing)
    df.to_csv(data, index=False, na_rep="NA")
    Path(code).write_text(R_CODE)
    t0 = time.perf_counter()
    res = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS_KB %M", rscript, code, data, out], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        errs = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("MAXRSS_KB")]
        return {"error": " / ".join(errs[-3:]) or f"exit code {res.returncode}"}
    info = json.loads(res.stdout.strip().splitlines()[-1])
    rss = [ln for ln in res.stderr.splitlines() if ln.startswith("MAXRSS_KB")]
    info["maxrss_mib"] = int(rss[-1].split()[1]) / 1024 if rss else float("nan")
    info["wall_seconds"] = wall
    ref = pd.read_csv(out)
    ours = suda2(df, KEYS, dis_fraction=0.01)
    info["scores_equal"] = bool(np.array_equal(ours.score, ref["suda_score"].to_numpy(float)))
    both0 = (ours.dis == 0) & (ref["suda_dis"].to_numpy() == 0)
    rel = np.where(both0, 0, np.abs(ours.dis - ref["suda_dis"]) / np.maximum(ref["suda_dis"], 1e-300))
    info["dis_max_rel_diff"] = float(rel.max())
    return info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--missing", type=float, default=None)
    ap.add_argument("--case", type=int)
    ap.add_argument("--sdcmicro", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case, a.missing or 0.0)))
        return
    lines = [
        f"# bench_suda2  python {platform.python_version()}  numpy {np.__version__}  "
        f"pandas {pd.__version__}  {platform.machine()}  {time.strftime('%Y-%m-%d %H:%M')}"
    ]

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say(f"keys: cardinalities {CARDS} (Zipf-like), DisFraction 0.01, all MSU sizes (no --suda-max-size)")
    sizes = [int(x) for x in a.n.split(",")]
    missings = [0.0, 0.02] if a.missing is None else [a.missing]
    tmp = tempfile.mkdtemp(prefix="bench_suda2_")
    try:
        for n in sizes:
            for miss in missings:
                r = child(n, miss)
                say(
                    f"dpstudio suda2 {n:,} x 8 keys, {100 * miss:g} % missing: {r['seconds']:.2f} s "
                    f"(load {r['load']}), peak RSS {r['maxrss_mib']:.0f} MiB (data alone "
                    f"{r['rss_before_mib']:.0f}); {r['records_with_msu']:,} records with an MSU, "
                    f"{r['msus']:,} MSUs, {r['subsets_visited']} subsets (targets at 100,000: 30 s, 2048 MiB)"
                )
                if a.sdcmicro:
                    s = sdcmicro(n, miss, tmp)
                    if s is None:
                        say("  sdcMicro: Rscript not found")
                    elif "error" in s:
                        say(f"  sdcMicro failed: {s['error']}")
                    else:
                        say(
                            f"  sdcMicro {s['version']} suda2 on the same data: {s['suda2_seconds']:.2f} s "
                            f"(createSdcObj {s['create_seconds']:.2f} s; Rscript wall {s['wall_seconds']:.1f} s, "
                            f"peak RSS {s['maxrss_mib']:.0f} MiB); scores equal: {s['scores_equal']}, "
                            f"DIS max relative difference {s['dis_max_rel_diff']:.2e}"
                        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
