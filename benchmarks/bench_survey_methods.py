"""Speed and memory of the survey methods (issue 23 §1): recode, top-bottom-coding and PRAM on
1,000,000 records x 8 keys, and the chain recode → top-bottom-coding → local-suppression → pram.

    python benchmarks/bench_survey_methods.py [--n 1000000] [--chain] [--sdcmicro] [--out FILE]
    python benchmarks/bench_survey_methods.py --case METHOD --n N   (one case in this process, JSON)

Targets (issue 23): each method ≤ 10 s and ≤ 2 GB at 1,000,000 records.  Each case runs in a
child process of its own: its peak RSS (``ru_maxrss``, data included; ``rss_before`` = after
building the data) is that run's alone.  Wall time by ``time.perf_counter`` around
``engine.protect`` (validation, the method, the keyed record permutation and the result; no
file I/O).  The load average is printed next to the timings (2 cores shared by several
engineers: times are upper bounds).

The synthetic file: the 8 survey-like keys of bench_suda2.py (cardinalities 2, 90, 5, 8, 10, 6,
4, 20; Zipf-like frequencies), ``age`` 0–99 and a log-normal ``income``.  The cases:

* recode: ``age`` into 6 intervals of given breaks, ``income`` into 5 quantile intervals,
  ``k1`` (90 categories) into 5 equal-width intervals, 3 merges on ``k7``;
* top-bottom-coding: ``income`` top-coded at p99 and bottom-coded at p1, ``age`` top-coded at 85;
* pram: invariant PRAM of all 8 keys (pd 0.8, α 0.5);
* chain (``--chain``): the four steps, keys k0..k3 and age as quasi-identifiers.

``--sdcmicro`` also times sdcMicro's ``globalRecode`` / ``topBotCoding`` / ``pram`` on the same
data with ``Rscript`` (needs R and sdcMicro 5.8.1, ``R_LIBS`` pointing at its library).
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

from dpstudio import engine  # noqa: E402

CARDS = [2, 90, 5, 8, 10, 6, 4, 20]
KEYS = [f"k{j}" for j in range(len(CARDS))]
SEED = 0x5EED_2026_1127

CASES = {
    "recode": {
        "breaks": {"age": "0,15,30,45,60,75,100", "income": "quantile:5", "k1": "equal-width:5"},
        "merge": {"k7": "0+1:A,2+3+4:B,5+6+7+8+9:C"},
    },
    "top-bottom-coding": {"top": {"income": "p99", "age": "85"}, "bottom": {"income": "p1"}},
    "pram": {"variables": ",".join(KEYS), "pd": 0.8, "alpha": 0.5},
}

R_CODE = r"""
suppressMessages(library(sdcMicro))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1])
keys <- grep("^k", names(d), value = TRUE)
t <- function(e) { t0 <- proc.time()[["elapsed"]]; force(e); proc.time()[["elapsed"]] - t0 }
r1 <- t({ x <- globalRecode(d$age, breaks = c(0, 15, 30, 45, 60, 75, 100))
          y <- globalRecode(d$income, breaks = 5, method = "equalAmount")
          z <- globalRecode(d$k1, breaks = 5) })
r2 <- t({ x <- topBotCoding(d$income, value = quantile(d$income, 0.99), replacement = quantile(d$income, 0.99), kind = "top")
          x <- topBotCoding(x, value = quantile(d$income, 0.01), replacement = quantile(d$income, 0.01), kind = "bottom")
          y <- topBotCoding(d$age, value = 85, replacement = 85, kind = "top") })
p <- d[keys]; for (k in keys) p[[k]] <- factor(p[[k]])
r3 <- t({ set.seed(1); r <- pram(p, variables = keys, pd = 0.8, alpha = 0.5) })
cat(sprintf('{"recode": %.3f, "top-bottom-coding": %.3f, "pram": %.3f, "version": "%s"}\n', r1, r2, r3,
            as.character(packageVersion("sdcMicro"))))
"""


def synthetic(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {}
    for j, c in enumerate(CARDS):
        p = 1.0 / np.arange(1, c + 1) ** 0.8
        cols[KEYS[j]] = rng.choice(c, size=n, p=p / p.sum()).astype(np.int64)
    cols["age"] = rng.integers(0, 100, n).astype(np.int64)
    cols["income"] = np.round(rng.lognormal(10, 1, n), 2)
    return pd.DataFrame(cols)


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:  # pragma: no cover - not Linux
        return "?"


def run_case(method: str, n: int) -> dict:
    df = synthetic(n)
    rss0 = _maxrss_mib()
    t0 = time.perf_counter()
    if method == "chain":
        from dpstudio.engine.chain import protect_chain

        steps = [
            {"method": "recode", "params": {"breaks": {"age": "0,15,30,45,60,75,100"}}},
            {"method": "top-bottom-coding", "params": {"top": {"income": "p99"}}},
            {"method": "local-suppression", "params": {"k": 3}},
            {"method": "pram", "params": {"variables": "k2,k3"}},
        ]
        roles = {c: "k-quasi" for c in ("k0", "k1", "k2", "k3", "age")}
        res = protect_chain(df, steps, roles, seed=SEED, types={c: "categorical" for c in ("k0", "k1", "k2", "k3")})
    else:
        res = engine.protect(df, method, {}, seed=SEED, **CASES[method])
    t = time.perf_counter() - t0
    return {
        "method": method,
        "n": n,
        "seconds": t,
        "maxrss_mib": _maxrss_mib(),
        "rss_before_mib": rss0,
        "load": loadavg(),
        "records": len(res.data),
    }


def child(method: str, n: int) -> dict:
    cmd = [sys.executable, __file__, "--case", method, "--n", str(n)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def sdcmicro(n: int, tmp: str) -> dict | None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        return None
    data, code = os.path.join(tmp, "d.csv"), os.path.join(tmp, "run.R")
    synthetic(n).to_csv(data, index=False)
    Path(code).write_text(R_CODE)
    res = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M", rscript, code, data], capture_output=True, text=True)
    if res.returncode != 0:
        errs = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("MAXRSS_KB")]
        return {"error": " / ".join(errs[-3:]) or f"exit code {res.returncode}"}
    info = json.loads(res.stdout.strip().splitlines()[-1])
    rss = [ln for ln in res.stderr.splitlines() if ln.startswith("MAXRSS_KB")]
    info["maxrss_mib"] = int(rss[-1].split()[1]) / 1024 if rss else float("nan")
    return info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--case")
    ap.add_argument("--chain", action="store_true")
    ap.add_argument("--sdcmicro", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case, a.n)))
        return
    lines = [
        f"# bench_survey_methods  python {platform.python_version()}  numpy {np.__version__}  "
        f"pandas {pd.__version__}  {platform.machine()}  {time.strftime('%Y-%m-%d %H:%M')}"
    ]

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"{a.n:,} records x 8 keys (cardinalities {CARDS}, Zipf-like) + age + income; targets 10 s, 2048 MiB")
    for method in [*CASES, *(["chain"] if a.chain else [])]:
        r = child(method, a.n)
        if "error" in r:
            say(f"dpstudio {method}: FAILED {r['error']}")
            continue
        say(
            f"dpstudio {method}: {r['seconds']:.2f} s (load {r['load']}), peak RSS {r['maxrss_mib']:.0f} MiB "
            f"(data alone {r['rss_before_mib']:.0f} MiB)"
        )
    if a.sdcmicro:
        tmp = tempfile.mkdtemp(prefix="bench_survey_methods_")
        try:
            s = sdcmicro(a.n, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if s is None:
            say("sdcMicro: Rscript not found")
        elif "error" in s:
            say(f"sdcMicro failed: {s['error']}")
        else:
            say(
                f"sdcMicro {s['version']} on the same data (the calls alone): recode {s['recode']:.2f} s, "
                f"top-bottom-coding {s['top-bottom-coding']:.2f} s, pram {s['pram']:.2f} s; Rscript peak RSS "
                f"{s['maxrss_mib']:.0f} MiB (R, data and sdcMicro)"
            )
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
