"""Mean absolute error of the query desk's mechanisms on Census and Adult (issue 26).

For each query kind at ε ∈ {0.1, 1}: knowledge refinement with a uniform prior and with a sharp
prior (normal, centred on the truth, sd = 2 % of the range: the best case a researcher can
bring), and the noise mechanisms (discrete Laplace, the discrete Gaussian at δ = 10⁻⁶, the
exponential mechanism).  Refinement's error is EXACT (the refined distribution is computed);
the noise mechanisms' by simulation of the mechanism (``--draws``, default 1,000), with the
coverage of the printed 95 % interval.

    python scripts/query_desk_accuracy.py --out results/query_desk_accuracy.md
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpstudio.engine.query import NumericRange, Prior, exact_distribution, parse_query  # noqa: E402
from dpstudio.engine.query import mechanisms as M  # noqa: E402
from dpstudio.engine.query.parser import evaluate_filter, parse_filter  # noqa: E402

CENSUS = [  # (query, declared range, declared domains)
    ("count where FICA > 3000", NumericRange(0, 1080, 1)),
    ("proportion where FICA > 3000", NumericRange(0, 1, 0.001)),
    ("sum(FICA)", NumericRange(0, 12_960_000, 1000)),
    ("mean(FICA)", NumericRange(0, 12000, 1)),
    ("median(FICA)", NumericRange(0, 12000, 10)),
    ("quantile(FICA, 0.9)", NumericRange(0, 12000, 10)),
    ("variance(FICA)", NumericRange(0, 36_000_000, 10000)),
    ("ratio(FEDTAX, FICA)", NumericRange(0, 10, 0.01)),
]
CENSUS_DOM = {"FICA": (0, 12000), "FEDTAX": (0, 32000)}
ADULT = [
    ("count where age > 50", NumericRange(0, 30162, 1)),
    ("proportion where age > 50", NumericRange(0, 1, 0.001)),
    ("sum(age)", NumericRange(0, 3_000_000, 100)),
    ("mean(age)", NumericRange(17, 90, 0.1)),
    ("median(age)", NumericRange(17, 90, 1)),
    ("quantile(age, 0.9)", NumericRange(17, 90, 1)),
    ("variance(age)", NumericRange(0, 1400, 1)),
]
ADULT_DOM = {"age": (17, 90)}


def refinement_mae(df, q, sup, eps, prior) -> float:
    probs = exact_distribution(df, q, prior, eps)
    tv = float(np.clip(_truth(df, q), sup.lo, sup.hi))
    x = sup.values()
    return float(sum(float(p) * abs(v - tv) for p, v in zip(probs, x)))


def _truth(df, q):
    from dpstudio.engine.query.refinement import true_answer

    return true_answer(df, q)


def noise_mae(df, q, sup, eps, mech, bounds, draws, rng):
    if mech == "exponential":
        st = M.rank_stat(q, sup, Fraction(repr(eps)))
        mask = evaluate_filter(df, parse_filter(q.where))
        scores, tv = st.scores(df, mask)
        w = np.array([float(x) for x in __import__("dpstudio.engine.algorithms.noise", fromlist=["x"]).em_weights(scores, eps, st.sens)])
        p = w / w.sum()
        return float(np.sum(p * np.abs(sup.values() - tv))), None
    stat = M.noisy_stat(q, sup, mech, Fraction(repr(eps)), n_total=len(df), bounds=bounds, delta=1e-6)
    mask = evaluate_filter(df, parse_filter(q.where))
    units, tv = stat.truth(df, mask)
    tv = float(np.clip(float(tv), sup.lo, sup.hi))
    errs, hits = [], 0
    for _ in range(draws):
        r, (lo, hi) = M.draw_stat(stat, units, rng)
        errs.append(abs(float(r) - tv))
        hits += lo - 1e-9 <= tv <= hi + 1e-9
    return float(np.mean(errs)), hits / draws


def table(name, df, queries, bounds, draws, rng) -> list[str]:
    out = [
        f"### {name} (n = {len(df):,})",
        "",
        "| query | ε | refinement, uniform prior | refinement, sharp prior | Laplace | Gaussian (δ = 1e-6) | exponential | 95 % coverage (Laplace / Gaussian) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for text, sup in queries:
        q = parse_query(text)
        tv = float(np.clip(_truth(df, q), sup.lo, sup.hi))
        sharp = Prior.normal(tv, 0.02 * (sup.hi - sup.lo), sup)
        for eps in (0.1, 1.0):
            t0 = time.perf_counter()
            ru = refinement_mae(df, q, sup, eps, Prior.uniform(sup)) if sup.size <= 200_001 else None
            rs = refinement_mae(df, q, sup, eps, sharp)
            cells, cov = {}, {}
            for mech in ("laplace", "gaussian", "exponential"):
                if mech in M.applicable(q.agg):
                    cells[mech], cov[mech] = noise_mae(df, q, sup, eps, mech, bounds, draws, rng)
            fmt = lambda v: "–" if v is None else f"{v:,.4g}"  # noqa: E731
            c = " / ".join(f"{cov[m]:.3f}" for m in ("laplace", "gaussian") if cov.get(m) is not None) or "rank bound"
            out.append(
                f"| `{text}` | {eps:g} | {fmt(ru)} | {fmt(rs)} | {fmt(cells.get('laplace'))} | "
                f"{fmt(cells.get('gaussian'))} | {fmt(cells.get('exponential'))} | {c} |"
            )
            print(f"{name} {text} ε={eps}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "results" / "query_desk_accuracy.md"))
    a = ap.parse_args(argv)
    rng = np.random.default_rng(20260)
    census = pd.read_csv(ROOT / "resources" / "census.csv")
    adult = pd.read_csv(ROOT / "resources" / "adult" / "adult.csv", sep=";")
    lines = [
        "# Query desk: mean absolute error by mechanism (issue 26)",
        "",
        "Made by `python scripts/query_desk_accuracy.py` (refinement exact; noise by simulation, "
        f"{a.draws:,} draws per cell; seed pinned).  Bounded DP for the noise mechanisms (one record's "
        "values change); refinement is ε-DP for any two data sets.  Declared domains: Census FICA "
        "0–12,000, FEDTAX 0–32,000; Adult age 17–90.  Sharp prior: normal centred on the TRUE answer "
        "with sd 2 % of the declared range (a best case no researcher has).  Exponential: quantiles "
        "(its error is exact: the output distribution is computed).  Coverage: share of draws whose "
        "printed 95 % interval holds the true (clamped) answer; several-part statistics (mean, "
        "variance, ratio) use a union bound and are conservative.",
        "",
    ]
    lines += table("Census", census, CENSUS, CENSUS_DOM, a.draws, rng)
    lines += [""]
    lines += table("Adult", adult, ADULT, ADULT_DOM, a.draws, rng)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
