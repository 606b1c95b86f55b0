"""Speed of the issue-10 survey measures and of local suppression as a method.

    python benchmarks/bench_survey.py [--out results/bench_survey.txt]

Targets (issue 10): classification utility on Census/Wine-sized files (<= 5,000 records)
<= 5 s per point; a local-suppression sweep on free1 (k = 2..10, the measures the policy adds:
suppressed cells, expected re-identifications, frequency-table distances, k-anonymity).
Points:

* classification utility (two random forests of 100 trees, train 66 % / test 34 %) on
  Census (1,080 records, class FICA binarised at the median, 12 numeric features, the
  release = mdav k = 5 on 4 attributes) and on the first 5,000 records of Adult (class
  salary-class, 8 categorical features, the release = local-suppression k = 5 on 4 keys);
* local suppression through ``engine.protect`` on free1, k = 3 (the issue's <= 2 s);
* ``engine.sweep`` of local-suppression over k = 2..10 on free1, one repeat per k.

Wall time by ``time.perf_counter``, best of ``--repeat``.  The machine is shared: times are
upper bounds.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpstudio import engine  # noqa: E402
from dpstudio.engine.measures.classification import classification_utility  # noqa: E402

KEYS = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]


def best(fn, repeat):
    t, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return out, t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    lines = [f"# bench_survey  python {platform.python_version()}  {platform.machine()}  "
             f"{time.strftime('%Y-%m-%d %H:%M')}"]

    census = pd.read_csv(ROOT / "resources" / "census.csv")
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    rel = engine.protect(census, "mdav", {c: "k-quasi" for c in cols}, k=5).data
    feats = [c for c in census.columns if c != "FICA"]
    r, t = best(lambda: classification_utility(census, rel, "FICA", feats, seed=0), a.repeat)
    lines.append(f"classification census n={len(census)} (FICA>=median; mdav k=5): {t:.2f} s  "
                 f"F1 macro release {r['f1_macro_protected']:.3f} / original "
                 f"{r['f1_macro_original']:.3f}")

    adult = pd.read_csv(ROOT / "resources" / "adult" / "adult.csv", sep=";").head(5000)
    akeys = ["sex", "age", "race", "marital-status"]
    rel = engine.protect(adult, "local-suppression", {c: "k-quasi" for c in akeys}, k=5).data
    feats = [c for c in adult.columns if c != "salary-class"]
    r, t = best(lambda: classification_utility(adult, rel, "salary-class", feats, seed=0),
                a.repeat)
    lines.append(f"classification adult n={len(adult)} (salary-class; local-suppression k=5): "
                 f"{t:.2f} s  F1 macro release {r['f1_macro_protected']:.3f} / original "
                 f"{r['f1_macro_original']:.3f}")

    free1 = pd.read_csv(ROOT / "resources" / "free1" / "free1.csv")
    roles = {**{c: "k-quasi" for c in KEYS}, "WEIGHT": "weight", "REGION": "household"}
    res, t = best(lambda: engine.protect(free1, "local-suppression", roles, k=3), a.repeat)
    lines.append(f"local-suppression protect free1 k=3: {t:.3f} s  "
                 f"{res.info['suppressed_total']} suppressed (sdcMicro 862)")

    def sweep():
        return list(engine.sweep(free1, "local-suppression", roles, ks=range(2, 11),
                                 measures=engine.measures.default_measures("local-suppression")))
    pts, t = best(sweep, 1)
    lines.append(f"local-suppression sweep free1 k=2..10 (1 repeat, measures "
                 f"suppressed,reid,freq,kanon): {t:.2f} s total")
    lines.append("  k  suppressed_cells  expected_reid  tv_mean  hellinger_mean")
    for p in pts:
        lines.append(f"  {p.k:<2} {p.mean('suppressed_cells'):>16.0f}  "
                     f"{p.mean('expected_reidentifications'):>13.3f}  {p.mean('tv_mean'):.4f}  "
                     f"{p.mean('hellinger_mean'):.4f}")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
