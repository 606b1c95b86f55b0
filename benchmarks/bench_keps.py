"""Benchmark of generalisation-based k-anonymity and (k, ε)-anonymity (issue 3).

Prints one table: wall time, CPU time and peak traced memory (tracemalloc, a second run)
for

- OLA 5-anonymity on all nine ARX-hierarchy attributes of Adult (target < 1 s; ARX's
  published benchmark: 68 ms OLA, 28 ms Flash, Java);
- Mondrian 5-anonymity on Adult (target < 1 s);
- full ``k-eps`` with its measures on Adult + synthetic height (target < 2 s);
- 1,000,000 synthetic records with 4 k-quasis, Mondrian and OLA (target < 60 s each);

and the same k-anonymisation with ``anjana`` (PyPI), run in its own interpreter (its pins,
numpy 2.0 / pandas 2.3, conflict with dpstudio's): runtime ratio and information loss side by
side, both scored with paper 003's precision loss (level/(height−1) per cell, suppressed
records count 1).

Usage: ``python benchmarks/bench_keps.py [--anjana-python PATH] [--skip-1m] [--out FILE]``.
The anjana interpreter defaults to ``$ANJANA_PYTHON``, then ``/tmp/anjana-venv/bin/python``,
then this interpreter if it can import anjana.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
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

from dpstudio import engine  # noqa: E402
from dpstudio.engine.algorithms.mondrian import mondrian  # noqa: E402
from dpstudio.engine.algorithms.ola import ola  # noqa: E402
from dpstudio.engine.hierarchies.hierarchy import load_hierarchy  # noqa: E402
from dpstudio.engine.hierarchies.build import auto_hierarchy, interval_hierarchy, masking_hierarchy  # noqa: E402
from scripts.synth_height import add_height  # noqa: E402

ADULT = ROOT.parent / "shared" / "data" / "adult"
ALL9 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
        "occupation", "salary-class"]
KQ4 = ["age", "sex", "race", "marital-status"]


def measure(fn, memory=True):
    """(result, wall s, cpu s, peak MiB) — time from a plain run, memory from a traced run."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = float("nan")
    if memory:
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
    return out, wall, cpu, peak


def synthetic_million(n=1_000_000, seed=0):
    rng = np.random.default_rng(seed)
    zips = np.array([f"{z:05d}" for z in rng.integers(10000, 99999, 2000)])
    return pd.DataFrame({
        "age": rng.integers(17, 91, n),
        "zip": zips[rng.integers(0, 2000, n)],
        "sex": rng.choice(["Male", "Female"], n),
        "race": rng.choice(["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"], n,
                           p=[0.8, 0.1, 0.05, 0.02, 0.03]),
    })


ANJANA_RUNNER = r'''
import json, sys, time
import numpy as np, pandas as pd
import anjana
from anjana.anonymity import k_anonymity_inner
from importlib.metadata import version
spec = json.load(open(sys.argv[1]))
data = pd.read_csv(spec["data"], sep=";")
hier = {}
for c, rows in spec["hierarchies"].items():
    cols = list(zip(*rows))
    lev0 = np.array(cols[0], dtype=object)
    if pd.api.types.is_integer_dtype(data[c]):
        lev0 = lev0.astype(np.int64)
    hier[c] = {0: lev0, **{i: np.array(cols[i], dtype=object) for i in range(1, len(cols))}}
t0 = time.perf_counter()
out, supp, levels = k_anonymity_inner(data, [], spec["quasi"], spec["k"], spec["supp_level"], hier)
wall = time.perf_counter() - t0
print(json.dumps({"version": version("anjana"), "wall": wall, "suppressed": int(supp),
                  "levels": {k: int(v) for k, v in levels.items()}, "rows_out": int(len(out))}))
'''


def anjana_python(arg):
    for cand in (arg, os.environ.get("ANJANA_PYTHON"), "/tmp/anjana-venv/bin/python"):
        if cand and Path(cand).exists():
            return cand
    try:
        import anjana  # noqa: F401
        return sys.executable
    except ImportError:
        return None


def run_anjana(py, data_path, hierarchies, quasi, k, supp_pct, timeout):
    spec = {"data": str(data_path), "quasi": quasi, "k": k, "supp_level": supp_pct,
            "hierarchies": {c: hierarchies[c].table.tolist() for c in quasi}}
    with tempfile.TemporaryDirectory() as td:
        sp = Path(td) / "spec.json"
        rp = Path(td) / "run.py"
        sp.write_text(json.dumps(spec))
        rp.write_text(ANJANA_RUNNER)
        try:
            cp = subprocess.run([py, str(rp), str(sp)], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"did not finish within {timeout} s"}
    if cp.returncode != 0:
        return {"error": (cp.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(cp.stdout.strip().splitlines()[-1])


def precision(levels: dict, heights: dict, suppressed: int, n: int) -> float:
    base = float(np.mean([levels[c] / (heights[c] - 1) for c in levels]))
    s = suppressed / n
    return (1 - s) * base + s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--anjana-python", default=None)
    ap.add_argument("--skip-1m", action="store_true")
    ap.add_argument("--anjana-timeout", type=float, default=600)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_keps.txt"))
    args = ap.parse_args()
    buf = io.StringIO()

    def say(s=""):
        print(s)
        buf.write(s + "\n")

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    say(f"dpstudio k-eps benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    say(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
        f"{os.cpu_count()} CPUs, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    say("(the machine is shared: wall time includes waiting for a core; CPU time is this process's)")
    say()
    data = pd.read_csv(ADULT / "adult.csv", sep=";")
    hs = {c: load_hierarchy(str(ADULT / "hierarchies" / f"adult_hierarchy_{c}.csv"), c) for c in ALL9}
    rows = []

    def row(name, target, fn, memory=True):
        out, wall, cpu, peak = measure(fn, memory)
        ok = "yes" if wall < target else ("cpu" if cpu < target else "NO")
        rows.append((name, wall, cpu, peak, target, ok))
        print(f"  {name}: {wall:.3f} s", file=sys.stderr)
        return out

    r9 = row("OLA k=5, Adult, 9 ARX-hierarchy attributes, supp 5 %", 1.0,
             lambda: ola(data, ALL9, 5, hierarchies=hs, suppression=0.05))
    r9z = row("OLA k=5, Adult, 9 attributes, supp 0 %", 1.0,
              lambda: ola(data, ALL9, 5, hierarchies=hs, suppression=0.0))
    m9 = row("Mondrian k=5, Adult, 9 attributes (age numeric)", 1.0,
             lambda: mondrian(data, ALL9, 5, hierarchies={c: hs[c] for c in ALL9 if c != "age"}))
    hdata = add_height(data, seed=1)
    roles = {**{c: "k-quasi" for c in KQ4}, "height": "eps-quasi"}

    def full_keps(kq, alg):
        def go():
            r = engine.protect(hdata, "k-eps", {**{c: "k-quasi" for c in kq}, "height": "eps-quasi"},
                               hierarchies={c: hs[c] for c in kq}, precision={"height": 0.1}, k=5,
                               epsilon=1.0, algorithm=alg,
                               confidence=0.99, seed=1)
            return engine.evaluate(r.aligned_original(), r.data, measures=("kanon",), result=r)
        return go

    row("k-eps + measures, Adult + height, 4 k-quasis, OLA", 2.0, full_keps(KQ4, "ola"))
    row("k-eps + measures, Adult + height, 4 k-quasis, Mondrian", 2.0, full_keps(KQ4, "mondrian"))
    row("k-eps + measures, Adult + height, 9 k-quasis, OLA", 2.0, full_keps(ALL9, "ola"))
    if not args.skip_1m:
        big = synthetic_million()
        bh = {"age": interval_hierarchy(big["age"], width=5), "zip": masking_hierarchy(big["zip"]),
              "sex": auto_hierarchy(big["sex"]), "race": auto_hierarchy(big["race"])}
        row("Mondrian k=5, 1,000,000 synthetic records, 4 k-quasis", 60.0,
            lambda: mondrian(big, list(big.columns), 5, hierarchies={"zip": bh["zip"]}))
        row("OLA k=5, 1,000,000 synthetic records, 4 k-quasis, supp 5 %", 60.0,
            lambda: ola(big, list(big.columns), 5, hierarchies=bh, suppression=0.05))
    say(f"{'task':<64} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'target':>7} {'met':>4}")
    for name, wall, cpu, peak, target, ok in rows:
        say(f"{name:<64} {wall:8.3f} {cpu:8.3f} {peak:9.1f} {target:7.0f} {ok:>4}")
    say("('met' = wall time below target; 'cpu' = only the CPU time is)")
    say()
    say(f"OLA, 9 attributes, supp 5 %: node {r9.node} (levels {r9.levels}), loss {r9.loss:.4f}, "
        f"suppressed {r9.n_suppressed} ({100 * r9.suppression_share:.2f} %), {r9.n_classes} classes, "
        f"{r9.info['nodes_evaluated']} of {r9.info['lattice_size']} lattice nodes evaluated")
    say(f"OLA, 9 attributes, supp 0 %: node {r9z.node}, loss {r9z.loss:.4f}, "
        f"{r9z.info['nodes_evaluated']} nodes evaluated")
    say(f"Mondrian, 9 attributes: loss {m9.loss:.4f}, {m9.n_classes} classes, smallest {m9.min_class_size}")
    say()

    # ---- anjana ---------------------------------------------------------------------
    py = anjana_python(args.anjana_python)
    say("Comparison with anjana (same data, same ARX hierarchies, same k and suppression limit)")
    if py is None:
        say("  anjana not available: install it in its own environment "
            "(python -m venv /tmp/anjana-venv && /tmp/anjana-venv/bin/pip install anjana).")
    else:
        heights = {c: hs[c].height for c in ALL9}
        say(f"  interpreter: {py}")
        say(f"  {'set-up':<34} {'anjana s':>9} {'ours s':>8} {'ratio':>7} {'anjana loss':>12} "
            f"{'ours loss':>10} {'anjana supp':>12} {'ours supp':>10}")
        for label, quasi, k in (("Adult, 4 QIs (paper 003), k=5", KQ4, 5),
                                ("Adult, 4 QIs (paper 003), k=50", KQ4, 50),
                                ("Adult, 9 QIs, k=5", ALL9, 5)):
            res = run_anjana(py, ADULT / "adult.csv", hs, quasi, k, 5.0, args.anjana_timeout)
            ours, wall, cpu, _ = measure(lambda: ola(data, quasi, k, hierarchies=hs, suppression=0.05),
                                         memory=False)
            if "error" in res:
                say(f"  {label:<34} anjana failed: {res['error']} (ours {wall:.3f} s, loss {ours.loss:.4f})")
                continue
            n = len(data)
            a_loss = precision(res["levels"], {c: heights[c] for c in quasi}, res["suppressed"], n)
            say(f"  {label:<34} {res['wall']:9.3f} {wall:8.3f} {res['wall'] / wall:7.1f} {a_loss:12.4f} "
                f"{ours.loss:10.4f} {res['suppressed']:12d} {ours.n_suppressed:10d}")
            say(f"    anjana {res['version']} levels {res['levels']}; ours {ours.levels}")
        say("  ratio = anjana wall time / ours. anjana generalises greedily (the attribute with most "
            "distinct values, one level at a time) and evaluates with per-record Python; ours searches "
            "the whole lattice for the least-loss node. Loss: precision (paper 003 §III-A), suppressed "
            "records count as fully generalised; lower is better.")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(buf.getvalue(), encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
