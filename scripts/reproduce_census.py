#!/usr/bin/env python3
"""Reproduce the thesis's Census tables with dpstudio's public API.

Targets (J. Soria-Comas, PhD thesis, ``/work/shared/papers/004_65177858bc9aa63c.txt``):

* Table 3.10 — correlation loss of MDAV-ID, MDAV-SWAP and IR-SWAP, k = 5…300, 100 runs;
  the first 6 Census attributes are non-confidential quasi-identifiers, the last 7 confidential.
* Table 6.5 — Δ mean and Δ variance of FEDTAX, POTHVAL, INTVAL, FICA (domains [0, 1.5·max]),
  ε ∈ {0.01, 0.1, 1, 10}, k ∈ {1, 2, 5, 15, 30}, 10 runs; insensitive microaggregation +
  Laplace, multi-reference variant, ``calibration="as-published"``, ``budget="per-attribute"``
  (docs/methods.md §4 says this reproduces the thesis), and the same with the rigorous calibration.
* Tables 6.1 / 6.2 — raw SSE and record linkage (RL) of MDAV, plain Laplace (k = 1) and
  insensitive microaggregation + Laplace, and the SSEf / RLf / Score factors.

Writes ``results/census_tables.md``.  Run: ``python scripts/reproduce_census.py`` (a few
minutes on 2 cores; ``--runs-310 N`` / ``--runs-65 N`` to change the number of runs).

Everything is computed through ``from dpstudio import engine`` (``protect``, ``prepare`` /
``run_prepared``, ``sweep``, ``evaluate``).  The thesis's MDAV distance conventions are engine
options: ``distance="raw"`` (unstandardised, what chapter 3 / Table 3.7 used) and
``distance="domain"`` (attributes divided by their domain width, what chapter 6 / Tables 6.1
and 6.5 used); the engine default ``distance="standardized"`` is shown alongside, labelled.
One thing is computed LOCALLY in this script, clearly labelled, only to explain gaps to the
thesis: the thesis's way of averaging the correlation differences (the whole 13 × 7 block of
the correlation matrix, diagonal and symmetric duplicates included).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpstudio import engine

SWEEP = engine.sweep

ROOT = Path(__file__).resolve().parent.parent
CENSUS = ROOT / "resources" / "census.csv"
OUT = ROOT / "results" / "census_tables.md"
SEED = 20240607

# ----------------------------------------------------------------------------- paper values

# Thesis Table 3.10: k -> {method: (mean, sd)}
T310 = {
    5: {"MDAV-ID": (.055, .064), "MDAV-SWAP": (.037, .045), "IR-SWAP": (.0021, .0041)},
    7: {"MDAV-ID": (.062, .071), "MDAV-SWAP": (.048, .056), "IR-SWAP": (.0022, .0039)},
    9: {"MDAV-ID": (.069, .078), "MDAV-SWAP": (.055, .064), "IR-SWAP": (.0028, .0049)},
    11: {"MDAV-ID": (.078, .085), "MDAV-SWAP": (.061, .070), "IR-SWAP": (.0038, .0068)},
    25: {"MDAV-ID": (.11, .11), "MDAV-SWAP": (.091, .093), "IR-SWAP": (.0061, .012)},
    50: {"MDAV-ID": (.14, .13), "MDAV-SWAP": (.13, .12), "IR-SWAP": (.010, .020)},
    100: {"MDAV-ID": (.17, .15), "MDAV-SWAP": (.19, .17), "IR-SWAP": (.020, .030)},
    200: {"MDAV-ID": (.29, .27), "MDAV-SWAP": (.31, .28), "IR-SWAP": (.044, .047)},
    300: {"MDAV-ID": (.38, .39), "MDAV-SWAP": (.37, .34), "IR-SWAP": (.087, .071)},
}
# Thesis Table 3.7 (MDAV-ID, k = 12, one run): row A3 (EMCONTRB) against A7..A13.
T37_A3 = [.79, -.17, .084, .89, .9, .89, .89]

# Thesis Table 6.5: statistic -> k -> [ε=0.01, 0.1, 1, 10, Insensit. MDAV, MDAV]
_T65_TEXT = """
dm FEDTAX
1 1.0947 1.0356 0.6925 0.0500 0.0 0.0
2 1.1065 1.0088 0.4421 0.0134 0.0 0.0
5 1.1030 0.8743 0.1461 0.0024 0.0 0.0
15 1.0063 0.5171 0.0202 0.0003 0.0 0.0
30 0.9677 0.2841 0.0030 0.0001 0.0 0.0
dm POTHVAL
1 14.5160 13.7959 9.0362 1.2125 0.0 0.0
2 14.4279 12.9546 6.2642 0.5245 0.0 0.0
5 14.0466 11.4310 2.6323 0.1670 0.0 0.0
15 13.4838 7.2579 0.7462 0.0302 0.0 0.0
30 12.5205 4.4492 0.2970 0.0034 0.0 0.0
dm INTVAL
1 25.4754 24.6380 15.9486 2.2799 0.0 0.0
2 24.8984 23.0202 10.9231 1.0192 0.0 0.0
5 24.5284 19.3688 4.7766 0.3356 0.0 0.0
15 23.6351 12.6533 1.4402 0.0656 0.0 0.0
30 21.9726 7.7496 0.6244 0.0152 0.0 0.0
dm FICA
1 1.0126 0.9648 0.6151 0.0270 0.0 0.0
2 1.0275 0.9225 0.4194 0.0090 0.0 0.0
5 0.9927 0.8061 0.1304 0.0010 0.0 0.0
15 0.9140 0.4945 0.0117 0.0004 0.0 0.0
30 0.8812 0.2678 0.0026 0.0002 0.0 0.0
dv FEDTAX
1 9.5299 9.2111 6.4855 0.5122 0.0 0.0
2 9.4974 8.8891 4.3752 0.1067 0.0447 0.0053
5 9.3824 7.8526 1.5560 0.0584 0.0804 0.0156
15 9.0318 5.2659 0.1527 0.0972 0.1015 0.0398
30 8.5521 2.9454 0.0461 0.1241 0.1254 0.0639
dv POTHVAL
1 69.3473 67.3757 45.9873 2.1168 0.0 0.0
2 69.1904 64.9683 29.3618 0.4549 0.0697 0.0247
5 68.5536 57.7628 8.0984 0.0597 0.1268 0.0991
15 66.2145 35.8830 0.7419 0.2365 0.2429 0.1967
30 62.0932 18.9228 0.0958 0.3370 0.3416 0.3214
dv INTVAL
1 96.3225 93.3506 64.2854 3.0044 0.0 0.0
2 96.0339 90.2298 40.5087 0.5915 0.0950 0.0349
5 95.2261 79.1174 11.0832 0.0411 0.1358 0.1327
15 91.7395 49.0829 1.1650 0.2330 0.2362 0.2614
30 86.7387 24.3520 0.1243 0.4433 0.4476 0.4729
dv FICA
1 16.3302 15.7698 11.3811 0.9712 0.0 0.0
2 16.2702 15.2505 7.8828 0.2338 0.0593 0.0067
5 16.1054 13.6669 3.0073 0.0625 0.1117 0.0224
15 15.4965 9.3544 0.3439 0.1580 0.1634 0.0670
30 14.7710 5.4324 0.0423 0.1780 0.1797 0.1060
"""


def _parse_t65() -> dict:
    out: dict = {}
    cur = None
    for line in _T65_TEXT.strip().splitlines():
        parts = line.split()
        if parts[0] in ("dm", "dv"):
            cur = (parts[0], parts[1])
            out[cur] = {}
        else:
            out[cur][int(parts[0])] = [float(x) for x in parts[1:]]
    return out


T65 = _parse_t65()

EPS = [0.01, 0.1, 1.0, 10.0]
K65 = [2, 5, 15, 30]
DP_ATTRS = ["FEDTAX", "POTHVAL", "INTVAL", "FICA"]

# Thesis Table 6.1: k -> (SSE0, RL0, {ε: (SSEf, RLf, Score)})  (baseline: standard MDAV)
T61 = {
    2: (3.07e9, 45.3, {0.01: (0.014, 386.92, 5.37), 0.1: (0.015, 457.27, 6.74),
                       1.0: (0.025, 279.44, 6.92), 10.0: (0.17, 16.1, 2.73)}),
    5: (1.20e10, 18.4, {0.01: (0.027, 227.41, 6.26), 0.1: (0.032, 186.06, 5.93),
                        1.0: (0.092, 35.87, 3.29), 10.0: (0.588, 4.59, 2.7)}),
    15: (2.41e10, 6.48, {0.01: (0.04, 80.0, 3.24), 0.1: (0.06, 42.08, 2.53),
                         1.0: (0.343, 8.8, 3.02), 10.0: (0.862, 1.82, 1.57)}),
    30: (4.00e10, 3.33, {0.01: (0.054, 37.0, 2.01), 0.1: (0.112, 30.83, 3.46),
                         1.0: (0.667, 3.14, 2.1), 10.0: (0.955, 1.27, 1.21)}),
}
# Thesis Table 6.2: ε -> (SSE0, RL0, {k: (SSEf, RLf, Score)})  (baseline: plain Laplace, k = 1)
T62 = {
    0.01: (1.62e13, 0.036, {5: (1.01, 0.44, 0.45), 15: (1.05, 0.44, 0.47), 30: (1.10, 0.40, 0.44)}),
    0.1: (1.54e13, 0.108, {5: (1.14, 1.09, 1.24), 15: (1.52, 0.70, 1.07), 30: (2.20, 1.00, 2.20)}),
    1.0: (8.86e12, 0.218, {5: (2.49, 0.42, 1.06), 15: (6.57, 0.30, 1.95), 30: (9.92, 0.21, 2.04)}),
    10.0: (3.69e11, 2.09, {5: (3.26, 0.52, 1.70), 15: (3.37, 0.59, 1.98), 30: (2.90, 0.79, 2.30)}),
}

GAP = 0.25  # a "gap" is |ours/paper - 1| > 25 %


# ----------------------------------------------------------------------------- helpers

def ratio(ours: float, paper: float) -> float:
    if paper == 0:
        return float("nan") if ours != 0 else 1.0
    return ours / paper


def is_gap(ours: float, paper: float) -> bool:
    r = ratio(ours, paper)
    if paper == 0:
        return abs(ours) > 1e-9
    return not (1 - GAP <= r <= 1 + GAP)


def g(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e5 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def cell(ours: float, paper: float) -> str:
    r = ratio(ours, paper)
    mark = " **!**" if is_gap(ours, paper) else ""
    rs = "–" if not np.isfinite(r) else f"{r:.2f}"
    return f"{g(ours)} / {g(paper)} ({rs}){mark}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ------------------------------------------------------ LOCAL cross-checks (not the engine)

def local_block91(original: np.ndarray, protected: np.ndarray, n_conf: int = 7) -> tuple[float, float]:
    """LOCAL (thesis-style) correlation loss: mean/sd of |Δcorr| over the whole block
    'all 13 attributes × the 7 confidential ones' of the correlation matrix, i.e. Table 3.6's
    layout read as a full 13 × 7 matrix (diagonal zeros and both copies of each
    confidential–confidential pair included).  The engine's measure (docs/measures.md) uses the 63
    distinct off-diagonal pairs instead."""
    d = np.abs(np.corrcoef(protected, rowvar=False) - np.corrcoef(original, rowvar=False))
    v = d[:, -n_conf:].ravel()
    return float(v.mean()), float(v.std())


# ----------------------------------------------------------------------------- Table 3.10

def table_310(df: pd.DataFrame, runs: int, log) -> tuple[str, dict]:
    cols = list(df.columns)
    qi, conf = cols[:6], cols[6:]
    X = df.to_numpy(float)
    ks = sorted(T310)
    res: dict = {}   # (setup, method, k) -> dict(engine=(m, s), block=(m, s))

    def ev(out: pd.DataFrame) -> tuple[tuple[float, float], tuple[float, float]]:
        e = engine.evaluate(df, out, cols, measures=["corr"], confidential=conf)
        return (e["corr_loss_mean"], e["corr_loss_std"]), local_block91(X, out[cols].to_numpy(float))

    def avg(pairs) -> dict:
        a = np.asarray(pairs, dtype=float)       # (runs, 2, 2)
        return dict(zip(("engine", "block"), map(tuple, a.mean(axis=0))))

    roles_brief = {**{c: "k-quasi" for c in qi}, **{c: "confidential" for c in conf}}
    roles_ir = {**{c: "other" for c in qi}, **{c: "confidential" for c in conf}}
    roles_all = {c: "k-quasi" for c in cols}
    # informed intruders: for each confidential A_i, the other 12 attributes identify the record
    lookups = {}
    for a_i in conf:
        others = [c for c in cols if c != a_i]
        lookup = pd.Series(np.arange(len(df)), index=pd.MultiIndex.from_frame(df[others].astype("int64")))
        if not lookup.index.is_unique:
            raise SystemExit(f"records not distinct without {a_i}: cannot read back the swap")
        lookups[a_i] = (others, lookup)
    t0 = time.perf_counter()
    for k in ks:
        # --- MDAV-ID (deterministic: one run is the mean of 100)
        res[("brief", "MDAV-ID", k)] = dict(zip(("engine", "block"), ev(
            engine.protect(df, "mdav", roles=roles_brief, k=k, seed=SEED, order="input").data)))
        for setup, dist in (("informed", "standardized"), ("raw", "raw")):
            out = engine.protect(df, "mdav", roles=roles_all, k=k, seed=SEED, distance=dist, order="input").data
            res[(setup, "MDAV-ID", k)] = dict(zip(("engine", "block"), ev(out)))
        # --- MDAV-SWAP, roles as in the brief: swap the 6 quasi-identifiers jointly
        prep = engine.prepare(df, "mdav-swap", roles_brief, k=k, order="input")
        cache: dict = {}
        vals = []
        for r in range(runs):
            out = engine.run_prepared(prep, rng=np.random.default_rng([SEED, k, r]), cache=cache).data
            vals.append(ev(out))
        res[("brief", "MDAV-SWAP", k)] = avg(vals)
        # --- MDAV-SWAP for informed intruders (thesis §3.3.2): for each confidential A_i,
        # MDAV clusters on the other 12 attributes of the ORIGINAL data and A_i permuted inside
        # them.  engine 'mdav-swap' with the 12 as k-quasis permutes those 12 jointly; the
        # released association equals A_i permuted by the inverse, which we read back by
        # matching the (distinct) 12-attribute records.  Engine default distance and, as the
        # thesis, raw distances (distance="raw").
        for setup, dist in (("informed", "standardized"), ("raw", "raw")):
            preps = []
            for a_i in conf:
                others, lookup = lookups[a_i]
                p = engine.prepare(df, "mdav-swap", {**{c: "k-quasi" for c in others}, a_i: "confidential"},
                                   k=k, distance=dist, order="input")
                preps.append((a_i, others, p, {}, lookup))
            vals = []
            for r in range(runs):
                out = df.copy()
                for j, (a_i, others, p, cch, lookup) in enumerate(preps):
                    o = engine.run_prepared(p, rng=np.random.default_rng([SEED, k, r, j]), cache=cch).data
                    src = lookup.loc[pd.MultiIndex.from_frame(o[others].astype("int64"))].to_numpy()
                    new = np.empty(len(df))
                    new[src] = df[a_i].to_numpy(float)        # record src[j] now carries A_i of record j
                    out[a_i] = new
                vals.append(ev(out))
            res[(setup, "MDAV-SWAP", k)] = avg(vals)
        # --- IR-SWAP (the same in every setup: one partition per confidential attribute)
        prep = engine.prepare(df, "ir-swap", roles_ir, k=k, order="input")
        cache = {}
        vals = []
        for r in range(runs):
            out = engine.run_prepared(prep, rng=np.random.default_rng([SEED, k, r, 99]), cache=cache).data
            vals.append(ev(out))
        res[("brief", "IR-SWAP", k)] = res[("informed", "IR-SWAP", k)] = res[("raw", "IR-SWAP", k)] = avg(vals)
        # --- IR-SWAP variant: univariate MDAV groups (engine 'mdav-swap' with the one
        # confidential attribute as its only k-quasi).  Same group sizes as individual ranking,
        # but MDAV builds groups alternately from both ends, so the k..2k-1 group falls inside
        # the range instead of holding the largest values.
        preps = [(a_i, engine.prepare(df, "mdav-swap", {**{c: "other" for c in cols if c != a_i},
                                                          a_i: "k-quasi"}, k=k, order="input"), {})
                 for a_i in conf]
        vals = []
        for r in range(runs):
            out = df.copy()
            for j, (a_i, p, cch) in enumerate(preps):
                out[a_i] = engine.run_prepared(p, rng=np.random.default_rng([SEED, k, r, 77, j]),
                                               cache=cch).data[a_i]
            vals.append(ev(out))
        res[("ir-mdav", "IR-SWAP", k)] = avg(vals)
        log(f"  Table 3.10 k={k} done ({time.perf_counter() - t0:.1f} s)")
    # Table 3.7 check (MDAV-ID, k = 12, all 13 attributes), both distances
    a3 = {}
    for dist in ("raw", "standardized"):
        out12 = engine.protect(df, "mdav", roles=roles_all, k=12, seed=SEED, distance=dist, order="input").data
        a3[dist] = np.corrcoef(out12[cols].to_numpy(float), rowvar=False)[2, 6:]
    return _render_310(res, runs, a3["raw"], a3["standardized"]), res


def _render_310(res: dict, runs: int, a3_raw, a3_eng) -> str:
    ks = sorted(T310)
    meths = ["MDAV-ID", "MDAV-SWAP", "IR-SWAP"]
    parts = [f"## Thesis Table 3.10 — correlation loss on Census (mean / sd of |Δcorr|)\n",
             f"Runs: {runs} per (method, k) for the swaps (the thesis: 100); MDAV-ID is "
             "deterministic, so one run equals the mean of any number of runs. "
             "Cells read `ours / thesis (ratio)`; **!** marks a gap > 25 %.\n"]

    def tab(setup: str, measure: str, title: str, methods=meths) -> str:
        rows = []
        for k in ks:
            row = [str(k)]
            for m in methods:
                key = (setup, m, k)
                if key not in res or measure not in res[key]:
                    row += ["–", "–"]
                    continue
                mo, so = res[key][measure]
                mp, sp = T310[k][m]
                row += [cell(mo, mp), cell(so, sp)]
            rows.append(row)
        head = ["k"] + [f"{m} {w}" for m in methods for w in ("mean", "sd")]
        return f"### {title}\n\n" + md_table(head, rows) + "\n"

    parts.append(tab("informed", "engine",
                     "A. Engine methods, informed-intruder setup (thesis §3.3.2), engine measure "
                     "(docs/measures.md: 63 distinct pairs involving a confidential attribute)\n\n"
                     "MDAV-ID = `mdav` with all 13 attributes as k-quasi-identifiers; MDAV-SWAP = "
                     "for each confidential attribute, `mdav-swap` clusters on the other 12 and that "
                     "attribute permuted inside them; IR-SWAP = `ir-swap` on the 7 confidential "
                     "attributes."))
    parts.append(tab("informed", "block",
                     "B. Same engine outputs, thesis-style averaging (LOCAL measure: the full "
                     "13 × 7 block incl. diagonal and duplicate pairs)"))
    parts.append(tab("brief", "engine",
                     "C. Engine methods, roles exactly as in the brief (6 k-quasi + 7 "
                     "confidential; `mdav`/`mdav-swap` only touch the 6 quasi-identifiers), "
                     "engine measure"))
    parts.append(tab("raw", "block",
                     "D. Thesis set-up: engine `mdav` / `mdav-swap` with `distance=\"raw\"` "
                     "(unstandardised, as the thesis's chapter 3), informed setup, thesis-style "
                     "averaging (LOCAL measure as in B)", methods=["MDAV-ID", "MDAV-SWAP"]))
    parts.append(tab("raw", "engine",
                     "D′. Same engine outputs as D (`distance=\"raw\"`), engine measure "
                     "(63 distinct pairs)", methods=["MDAV-ID", "MDAV-SWAP"]))

    ir_rows = []
    for k in ks:
        mp, sp = T310[k]["IR-SWAP"]
        row = [str(k)]
        for setup in ("informed", "ir-mdav"):
            for measure in ("engine", "block"):
                mo, so = res[(setup, "IR-SWAP", k)][measure]
                row += [cell(mo, mp), cell(so, sp)]
        ir_rows.append(row)
    parts.append("### E. IR-SWAP: where the one larger group goes\n\n"
                 "`ir-swap` (engine, docs/methods.md: consecutive groups of k in ascending order, the "
                 "last group — the LARGEST values — takes the remainder, k..2k−1 records) against "
                 "`mdav-swap` run on each confidential attribute alone (univariate MDAV: groups of k "
                 "taken alternately from both ends of the range, so the k..2k−1 group lies inside the "
                 "range). Both through the public API, same number of runs.\n\n"
                 + md_table(["k", "ir-swap mean (engine measure)", "ir-swap sd (engine measure)",
                             "ir-swap mean (thesis-style)", "ir-swap sd (thesis-style)",
                             "univariate mdav-swap mean (engine measure)",
                             "univariate mdav-swap sd (engine measure)",
                             "univariate mdav-swap mean (thesis-style)",
                             "univariate mdav-swap sd (thesis-style)"], ir_rows) + "\n")
    parts.append("Table 3.7 check (MDAV-ID, k = 12, row A3 = EMCONTRB vs A7..A13):\n\n"
                 + md_table(["source"] + [f"A{i}" for i in range(7, 14)],
                            [["thesis Table 3.7"] + [g(v, 2) for v in T37_A3],
                             ["engine `mdav`, `distance=\"raw\"`"] + [g(v, 2) for v in a3_raw],
                             ["engine `mdav`, default `distance=\"standardized\"`"]
                             + [g(v, 2) for v in a3_eng]]) + "\n")
    parts.append(_explain_310(res, runs))
    return "\n".join(parts)


def _ratio_range(res: dict, setup: str, method: str, measure: str) -> str:
    r = [res[(setup, method, k)][measure][0] / T310[k][method][0] for k in sorted(T310)]
    return f"{min(r):.2f}–{max(r):.2f}"


def _gaps_in(res: dict, setup: str, method: str, measure: str) -> list[str]:
    """'k = …: mean ×r' / 'sd ×r' for every cell of (setup, method, measure) off by > 25 %."""
    out = []
    for k in sorted(T310):
        (mo, so), (mp, sp) = res[(setup, method, k)][measure], T310[k][method]
        for name, o, pp in (("mean", mo, mp), ("sd", so, sp)):
            if is_gap(o, pp):
                out.append(f"k = {k} {name} ×{o / pp:.2f}")
    return out


def _explain_310(res: dict, runs: int) -> str:
    ks = sorted(T310)
    ir_r = {k: res[("informed", "IR-SWAP", k)]["engine"][0] / T310[k]["IR-SWAP"][0] for k in ks}
    large = [k for k in ks if k >= 25]
    d_gaps = {m: _gaps_in(res, "raw", m, "block") for m in ("MDAV-ID", "MDAV-SWAP")}
    d_txt = "; ".join(f"{m}: {', '.join(v)}" for m, v in d_gaps.items() if v)
    e_gaps = {ms: _gaps_in(res, "ir-mdav", "IR-SWAP", ms) for ms in ("engine", "block")}

    def rr(setup, method, measure, which=0, kk=ks):
        r = [res[(setup, method, k)][measure][which] / T310[k][method][which] for k in kk]
        return f"{min(r):.2f}–{max(r):.2f}"

    return "\n".join([
        "### Table 3.10: every gap > 25 % explained\n",
        "- **MDAV-ID and MDAV-SWAP, sections A–C (ratios of means "
        f"{_ratio_range(res, 'informed', 'MDAV-ID', 'engine')} and "
        f"{_ratio_range(res, 'informed', 'MDAV-SWAP', 'engine')} in A)**: three differences of set-up, "
        "none of them a defect. (1) Distance: the engine's default `distance=\"standardized\"` divides "
        "each attribute by its standard deviation (docs/methods.md §2); the thesis ran MDAV on raw "
        "values, where the large-valued attributes (AFNLWGT, AGI, PTOTVAL, …) decide the clusters. "
        "Evidence: the engine with `distance=\"raw\"` reproduces the thesis's single-run Table 3.7 to "
        "two decimals (row A3 above), the default does not. (2) Averaging: the thesis's figures are "
        "the mean/sd over the whole 13 × 7 block of Table 3.6's layout (diagonal zeros and both "
        "copies of the 21 confidential–confidential pairs included); docs/measures.md averages the 63 "
        "distinct pairs. (3) Roles: the thesis's experiment is the informed-intruder scenario "
        "(§3.3.2: every confidential attribute is also a quasi-identifier for the intruders who "
        "know it; Tables 3.7–3.8 show confidential–confidential correlations changing), so MDAV-ID "
        "aggregates all 13 attributes and MDAV-SWAP permutes each confidential attribute within "
        "clusters built on the other 12 (section A); with the brief's literal roles (6 k-quasi, "
        "section C) the confidential attributes are untouched and the loss is 3–7× smaller. With "
        "all three set as in the thesis (section D: engine `distance=\"raw\"`, thesis-style "
        f"averaging) the means are within ×{rr('raw', 'MDAV-ID', 'block')} (MDAV-ID) and "
        f"×{rr('raw', 'MDAV-SWAP', 'block')} (MDAV-SWAP) of the thesis, the sds within "
        f"×{rr('raw', 'MDAV-ID', 'block', 1)} and ×{rr('raw', 'MDAV-SWAP', 'block', 1)}"
        + (f"; remaining cells over 25 %: {d_txt} (MDAV-SWAP is random: the thesis's 100-run "
           "means carry their own sampling noise, and its swap random stream is unknown)."
           if d_txt else ", i.e. no gap > 25 % remains.")
        + " Section D′ shows the distance alone with the engine measure: means "
        f"×{rr('raw', 'MDAV-ID', 'engine')} (MDAV-ID) and ×{rr('raw', 'MDAV-SWAP', 'engine')} "
        "(MDAV-SWAP); the excess over D is the averaging convention (2)"
        + (f", which takes {', '.join(f'{m} {x}' for m in ('MDAV-ID', 'MDAV-SWAP') for x in _gaps_in(res, 'raw', m, 'engine'))} just over 25 %."
           if any(_gaps_in(res, "raw", m, "engine") for m in ("MDAV-ID", "MDAV-SWAP")) else "."),
        "- **IR-SWAP, sections A–C** (same in every section: `ir-swap` permutes each confidential "
        "attribute inside individual-ranking groups): k ≤ 11 ratios of means "
        + ", ".join(f"{ir_r[k]:.2f}" for k in ks if k < 25) + "; k ≥ 25 ×"
        + "–×".join(f"{r:.2f}" for r in (min(ir_r[k] for k in large), max(ir_r[k] for k in large)))
        + f" with {runs} runs (the standard error of our mean is a few percent, so not our "
        "sampling noise). Largely explained by where the one larger group goes (section E): "
        "docs/methods.md's individual ranking cuts the ascending order into groups of k and gives the "
        "remainder (k..2k−1 records; 1080 = 21·50 + 30, so the last group at k = 50 holds 80 "
        "records, at k = 300 it holds 480) to the group of the LARGEST values; these skewed "
        "attributes' largest values carry most of the covariance, so permuting them among many "
        "records costs much correlation. The thesis does not say where its individual ranking puts "
        "the larger group; its experiments build groups with MDAV (§3.3.1), and MDAV on one "
        "attribute — a plausible reading of 'individual ranking microaggregation' (§3.3.3) — takes "
        "groups of k alternately from both ends, leaving the larger group inside the range. "
        "Running that (engine `mdav-swap` on each confidential attribute alone) gives "
        f"means within ×{rr('ir-mdav', 'IR-SWAP', 'engine')} (engine measure) / "
        f"×{rr('ir-mdav', 'IR-SWAP', 'block')} (thesis-style) and sds within "
        f"×{rr('ir-mdav', 'IR-SWAP', 'engine', 1)} / ×{rr('ir-mdav', 'IR-SWAP', 'block', 1)} of the "
        "thesis at every k"
        + ((", with these cells still over 25 %: "
            + "; ".join(f"{'engine measure' if ms == 'engine' else 'thesis-style'}: {', '.join(v)}"
                        for ms, v in e_gaps.items() if v)
            + ". These residuals are not explained (tie order among equal values, the thesis's "
              "random stream and its own 100-run sampling noise remain candidates; the thesis's "
              "k = 7 mean .0022 barely above its k = 5 .0021 suggests noise in its figures).")
           if any(e_gaps.values()) else ", i.e. no gap > 25 % remains.")
        + " The engine's `ir-swap` is correct per docs/methods.md (its larger top group is a spec "
          "choice, not a defect, and still gives groups of ≥ k); the thesis's grouping is "
          "reproducible through the API as shown in E.",
    ]) + "\n"


# ----------------------------------------------------------------------------- Tables 6.x

def _runs_avg(point, key: str) -> dict:
    """Average a per-attribute measure (dict) over the runs of a sweep point."""
    vals = [r[key] for r in point.runs]
    return {a: float(np.mean([v[a] for v in vals])) for a in vals[0]}


def tables_6(df: pd.DataFrame, runs: int, log, hi_runs: int = 100) -> tuple[str, dict]:
    d4 = df[DP_ATTRS].copy()
    domains = {c: (0.0, 1.5 * float(d4[c].max())) for c in DP_ATTRS}
    roles = {c: "eps-quasi" for c in DP_ATTRS}
    meas = ("sse", "rl", "delta")
    R: dict = {}
    t0 = time.perf_counter()

    # plain Laplace, k = 1, whole ε per attribute
    for pt in SWEEP(d4, "laplace", roles, domains, ks=[], epsilons=EPS, repeats=runs, seed=SEED,
                           measures=meas, budget="per-attribute"):
        R[("laplace", 1, pt.epsilon)] = pt
    log(f"  laplace done ({time.perf_counter() - t0:.1f} s)")
    for calib in ("as-published", "rigorous"):
        for pt in SWEEP(d4, "insensitive-dp", roles, domains, ks=K65, epsilons=EPS,
                               repeats=runs, seed=SEED, measures=meas, budget="per-attribute",
                               variant="multi", calibration=calib):
            R[(calib, pt.k, pt.epsilon)] = pt
        log(f"  insensitive-dp {calib} done ({time.perf_counter() - t0:.1f} s)")
    if hi_runs:
        for pt in SWEEP(d4, "insensitive-dp", roles, domains, ks=K65, epsilons=EPS,
                        repeats=hi_runs, seed=SEED + 1, measures=("delta",), budget="per-attribute",
                        variant="multi", calibration="as-published", baselines=False):
            R[("hi", pt.k, pt.epsilon)] = pt
        log(f"  insensitive-dp as-published x{hi_runs} runs done ({time.perf_counter() - t0:.1f} s)")
    # noise-free single-order clustering: the sweep's ε = None baseline points (sweep needs
    # one ε for a method that takes ε; its noisy points are not used)
    for pt in SWEEP(d4, "insensitive-dp", roles, domains, ks=K65, epsilons=[1.0], repeats=1,
                    seed=SEED, measures=meas, variant="single"):
        if pt.epsilon is None:
            R[("single", pt.k, None)] = pt
    # standard MDAV (noise-free): the thesis's chapter-6 convention (distance="domain": each
    # attribute divided by its domain width), the engine default (standardised) and raw.
    for k in K65:
        for name, dist in (("mdav-domain", "domain"), ("mdav", "standardized"), ("mdav-raw", "raw")):
            out = engine.protect(d4, "mdav", roles={c: "k-quasi" for c in DP_ATTRS}, domains=domains,
                                 k=k, seed=SEED, distance=dist, order="input").data
            R[(name, k)] = engine.evaluate(d4, out, DP_ATTRS, measures=meas)
    log(f"  mdav done ({time.perf_counter() - t0:.1f} s)")
    return _render_6(R, runs, d4, domains), R


def _render_6(R: dict, runs: int, d4: pd.DataFrame, domains: dict) -> str:
    parts = ["## Thesis Table 6.5 — Δ mean and Δ variance, Census (FEDTAX, POTHVAL, INTVAL, FICA)\n",
             f"Domains [0, 1.5·max]: " + ", ".join(f"{c} [0, {domains[c][1]:g}]" for c in DP_ATTRS)
             + f". {runs} runs per point (the thesis: 10). k = 1: `laplace`, "
             "`budget=\"per-attribute\"` (scale Δ/ε on each attribute). k ≥ 2: `insensitive-dp`, "
             "`variant=\"multi\"`, `calibration=\"as-published\"`, `budget=\"per-attribute\"` — "
             "this calibration is NOT ε-DP (paper 002 §3); it is used only to reproduce the thesis. "
             "'Insensit. MDAV' = the same clustering without noise; 'MDAV' = engine `mdav` on the 4 "
             "attributes with `distance=\"domain\"` (each attribute divided by its domain width, "
             "the thesis's chapter-6 convention; the engine-default standardised MDAV is in the "
             "variants table below). Cells: `ours / thesis (ratio)`, **!** = gap > 25 %.\n"]
    stat_names = {"dm": ("Δ mean", "delta_mean"), "dv": ("Δ variance", "delta_var")}
    head = ["statistic", "k", "ε = 0.01", "ε = 0.1", "ε = 1", "ε = 10", "Insensit. MDAV", "MDAV"]
    rows = []
    gaps = []
    for (st, attr), by_k in T65.items():
        label, key = stat_names[st]
        for k, paper in by_k.items():
            row = [f"{label} {attr}", str(k)]
            for j, eps in enumerate(EPS):
                pt = R[("laplace", 1, eps)] if k == 1 else R[("as-published", k, eps)]
                ours = _runs_avg(pt, key)[attr]
                row.append(cell(ours, paper[j]))
                if is_gap(ours, paper[j]):
                    gaps.append((label, attr, k, f"ε={eps:g}", ours, paper[j]))
            if k == 1:
                row += [cell(0.0, paper[4]), cell(0.0, paper[5])]
            else:
                ins = _runs_avg(R[("as-published", k, None)], key)[attr]
                md = R[("mdav-domain", k)][key][attr]
                row += [cell(ins, paper[4]), cell(md, paper[5])]
                if is_gap(ins, paper[4]):
                    gaps.append((label, attr, k, "Insensit. MDAV", ins, paper[4]))
                if is_gap(md, paper[5]):
                    gaps.append((label, attr, k, "MDAV", md, paper[5]))
            rows.append(row)
    parts.append(md_table(head, rows) + "\n")
    parts.append("### Variants for the noise-free columns (Δ variance; ours / thesis)\n")
    vrows = []
    for attr in DP_ATTRS:
        for k in K65:
            p = T65[("dv", attr)][k]
            single = _runs_avg(R[("single", k, None)], "delta_var")[attr]
            multi = _runs_avg(R[("as-published", k, None)], "delta_var")[attr]
            raw = R[("mdav-raw", k)]["delta_var"][attr]
            dom = R[("mdav-domain", k)]["delta_var"][attr]
            md = R[("mdav", k)]["delta_var"][attr]
            vrows.append([attr, str(k), cell(multi, p[4]), cell(single, p[4]), cell(dom, p[5]),
                          cell(md, p[5]), cell(raw, p[5])])
    parts.append(md_table(["attribute", "k", "insensitive: multi-reference (engine)",
                           "insensitive: single order (engine)",
                           "MDAV `distance=\"domain\"` (thesis ch. 6)",
                           "MDAV `distance=\"standardized\"` (engine default)",
                           "MDAV `distance=\"raw\"`"], vrows) + "\n")
    parts.append(_explain_variants(R))
    # rigorous calibration
    parts.append("### Same grid with the rigorous calibration (ε-DP per attribute; the thesis has "
                 "no such column)\n\nΔ mean / Δ variance, ours, rigorous; in brackets the ratio to the "
                 "as-published figure. Rigorous noise is n_c = ⌊1080/k⌋ times larger, so it only beats "
                 "plain Laplace (k = 1 row above) when k² > n = 1080, i.e. never on this grid.\n")
    rrows = []
    for attr in DP_ATTRS:
        for k in K65:
            row = [attr, str(k)]
            for eps in EPS:
                rig = R[("rigorous", k, eps)]
                pub = R[("as-published", k, eps)]
                dm_r, dv_r = _runs_avg(rig, "delta_mean")[attr], _runs_avg(rig, "delta_var")[attr]
                dm_p, dv_p = _runs_avg(pub, "delta_mean")[attr], _runs_avg(pub, "delta_var")[attr]
                row.append(f"{g(dm_r)} / {g(dv_r)} (×{dm_r / dm_p:.3g} / ×{dv_r / dv_p:.3g})")
            rrows.append(row)
    parts.append(md_table(["attribute", "k"] + [f"ε = {e:g}" for e in EPS], rrows) + "\n")
    # Tables 6.1 / 6.2
    parts.append(_render_61_62(R))
    parts.append(_explain_65(R, gaps, d4, domains))
    return "\n".join(parts)


def _explain_variants(R: dict) -> str:
    """Prose for the variants table: the MDAV columns differ only in the distance option."""
    def rng_(name: str) -> str:
        r = [R[(name, k)]["delta_var"][a] / T65[("dv", a)][k][5] for a in DP_ATTRS for k in K65]
        lo, hi = f"{min(r):.2f}", f"{max(r):.2f}"
        return f"×{lo} in every cell" if lo == hi else f"×{lo}–×{hi}"

    rs = [_runs_avg(R[("single", k, None)], "delta_var")[a] / T65[("dv", a)][k][4]
          for a in DP_ATTRS for k in K65]
    return ("The three MDAV columns differ only in `distance`. `domain` (the thesis's chapter-6 "
            f"convention) gives {rng_('mdav-domain')} of the thesis's MDAV column; the engine default "
            f"`standardized` gives {rng_('mdav')} and `raw` {rng_('mdav-raw')}: on these skewed "
            "attributes the scaling decides which records are grouped (raw: the widest-valued "
            "attribute, POTHVAL, dominates; standardised: each attribute counts by its standard "
            "deviation rather than its domain width), so those two are not expected to match — "
            "they are shown, labelled, because the standardised one is what the app uses by "
            "default. The single-order insensitive column (docs/methods.md §4's other variant, "
            f"{'×%.2f–×%.2f' % (min(rs), max(rs))} of the thesis) is shown to confirm the thesis "
            "used the multi-reference one.\n")


def _expected_as_published(d4: pd.DataFrame, domains: dict, attr: str, k: int, eps: float,
                           var_agg: float) -> tuple[float, float]:
    """Analytic expectation (ignoring clamping) of Δ mean and signed Δ variance for the
    as-published calibration: one Laplace draw of scale b = Δ/(k·ε) per cluster."""
    x = d4[attr].to_numpy(float)
    n = x.size
    nc = n // k
    sizes = np.full(nc, k)
    sizes[-1] = n - k * (nc - 1)
    b = (domains[attr][1] - domains[attr][0]) / (k * eps)
    sd_mean = b * np.sqrt(2.0) * np.sqrt((sizes ** 2).sum()) / n
    e_dm = np.sqrt(2 / np.pi) * sd_mean / abs(x.mean())
    var = x.var(ddof=1)
    e_dv = (var_agg + 2 * b * b * (1 - 1 / nc) - var) / var
    return float(e_dm), float(e_dv)


def _explain_65(R: dict, gaps: list, d4: pd.DataFrame, domains: dict) -> str:
    """One line per gap > 25 % in Table 6.5, with the evidence."""
    hi_n = next((pt.repeats for key, pt in R.items() if isinstance(key, tuple) and key[0] == "hi"), 0)
    lines = [f"### Table 6.5: every gap > 25 % explained\n",
             "Evidence per gap: our mean over many more runs (" + (f"{hi_n}" if hi_n else "n/a")
             + " runs, another seed) and, for the noisy columns, the analytic expectation of the "
             "published calibration ignoring clamping (Δ mean: E|mean of the cluster noises|/|mean|; "
             "Δ variance: (var of the microaggregated data + 2b²(1 − 1/n_c) − var)/var, signed, with "
             "b = Δ/(k·ε)). A signed expectation near 0 means aggregation (which removes variance) "
             "and noise (which adds it) cancel, so the statistic is tiny and very sensitive there.\n"]
    for label, attr, k, col, ours, paper in gaps:
        key = "delta_mean" if label == "Δ mean" else "delta_var"
        head = f"- {label} {attr}, k = {k}, {col}: ours {g(ours)} vs thesis {g(paper)} (×{ratio(ours, paper):.2f}). "
        if col.startswith("ε="):
            eps = float(col[2:])
            var = d4[attr].var(ddof=1)
            dv_ins = 0.0 if k == 1 else _runs_avg(R[("as-published", k, None)], "delta_var")[attr]
            e_dm, e_dv = _expected_as_published(d4, domains, attr, k, eps, var * (1 - dv_ins))
            hi = _runs_avg(R[("hi", k, eps)], key)[attr] if ("hi", k, eps) in R else float("nan")
            exp_txt = (f"analytic expectation {g(e_dm)}" if key == "delta_mean"
                       else f"analytic signed expectation {e_dv:+.3g}")
            if np.isfinite(hi) and not is_gap(hi, paper):
                why = (f"With {hi_n} runs ours is {g(hi)} (×{hi / paper:.2f}): sampling noise of the "
                       f"10-run average, not a systematic difference ({exp_txt}).")
            elif abs((hi if np.isfinite(hi) else ours) - abs(e_dm if key == "delta_mean" else e_dv)) <= 0.25 * abs(e_dm if key == "delta_mean" else e_dv):
                e = abs(e_dm if key == "delta_mean" else e_dv)
                why = (f"With {hi_n} runs ours is {g(hi)}, in line with the {exp_txt} of the "
                       f"published calibration; the thesis figure is {e / paper:.1f}× "
                       f"{'below' if e > paper else 'above'} it. The noise its own calibration adds "
                       "(one Laplace draw of scale Δ/(kε) per cluster) does not produce the thesis "
                       "value on average; how the thesis got it is not stated (averaging the signed "
                       "differences over its 10 runs before taking |·| would shrink it by about √10).")
            else:
                why = (f"With {hi_n} runs ours is {g(hi)}; {exp_txt} (no clamping). Aggregation removes "
                       "variance and noise adds it, so this statistic is the difference of two terms "
                       "of similar size; clamping at the domain bounds (these attributes are skewed, "
                       "most values near the lower bound 0) removes part of the noise variance, and "
                       "small differences in the clustering (Insensit. MDAV column) or in clamping "
                       "shift the difference by large factors. Not a calibration error: the k = 1 "
                       "and small-k rows, where the noise dominates, match within a few percent.")
        elif col == "Insensit. MDAV":
            single = _runs_avg(R[("single", k, None)], key)[attr]
            why = ("Deterministic clustering, no sampling noise: the multi-reference corner sequence "
                   "(Hamming order from the lower corner) and its tie-breaks are not fully specified "
                   "in the thesis, and a different but equally valid sequence changes which records "
                   f"are grouped. Still far closer than the single-order variant ({g(single)}).")
        else:
            why = ("NOT explained: engine `mdav` with `distance=\"domain\"` is deterministic and "
                   "reproduces the other cells of this column and Table 6.1's SSE0.")
        lines.append(head + why)
    if not gaps:
        lines.append("- none")
    return "\n".join(lines) + "\n"


def _m(pt, name: str) -> float:
    return pt.values[name][0]


def _rl_noise(rl_pct: float, runs: int, n: int = 1080) -> float:
    """Binomial standard error (percentage points) of an RL average over ``runs`` runs."""
    p = max(rl_pct, 100.0 / n) / 100.0
    return 100.0 * np.sqrt(p * (1 - p) / (n * runs))


def _render_61_62(R: dict) -> str:
    parts = ["## Thesis Tables 6.1 / 6.2 — raw SSE, record linkage and Scores, Census\n",
             "SSE is raw (docs/measures.md). RL: engine default (Euclidean on standardised attributes). "
             "Our insensitive-dp points: multi-reference, as-published, whole ε per attribute (as "
             "Table 6.5). Cells: `ours / thesis (ratio)`.\n",
             "### Table 6.1 — against standard MDAV\n",
             "Baseline (SSE0, RL0, and the Scores): engine `mdav` with `distance=\"domain\"` (attributes "
             "divided by their domain width, the thesis's chapter-6 convention). The engine-default "
             "`distance=\"standardized\"` MDAV is shown in its own rows, with the Score it would give "
             "as baseline in brackets.\n"]
    rows = []
    for k, (sse0_p, rl0_p, by_eps) in T61.items():
        md = R[("mdav-domain", k)]
        st = R[("mdav", k)]
        rows.append([f"k = {k}", "MDAV SSE0 (`distance=\"domain\"`)", cell(md["sse_raw"], sse0_p)])
        rows.append([f"k = {k}", "MDAV RL0 (%) (`distance=\"domain\"`)", cell(md["rl"], rl0_p)])
        rows.append([f"k = {k}", "MDAV SSE0 (engine default `distance=\"standardized\"`)",
                     cell(st["sse_raw"], sse0_p)])
        rows.append([f"k = {k}", "MDAV RL0 (%) (engine default `distance=\"standardized\"`)",
                     cell(st["rl"], rl0_p)])
        for eps, (sf_p, rf_p, sc_p) in by_eps.items():
            pt = R[("as-published", k, eps)]
            sc = engine_score(md["sse_raw"], md["rl"], _m(pt, "sse_raw"), _m(pt, "rl"))
            sc_st = engine_score(st["sse_raw"], st["rl"], _m(pt, "sse_raw"), _m(pt, "rl"))
            rows.append([f"k = {k}", f"ε = {eps:g}: SSE_kε", cell(_m(pt, "sse_raw"), sse0_p / sf_p ** 2)])
            rows.append([f"k = {k}", f"ε = {eps:g}: RL_kε (%)", cell(_m(pt, "rl"), rl0_p / rf_p)])
            mark = " **!**" if is_gap(sc["score"], sc_p) else ""
            rows.append([f"k = {k}", f"ε = {eps:g}: SSEf / RLf / Score",
                         f"{g(sc['sse_factor'])} / {g(sc['rl_factor'])} / {g(sc['score'])} "
                         f"(thesis {g(sf_p)} / {g(rf_p)} / {g(sc_p)}; Score ×{sc['score'] / sc_p:.2f}){mark} "
                         f"[standardised baseline: {g(sc_st['sse_factor'])} / {g(sc_st['rl_factor'])} / "
                         f"{g(sc_st['score'])}]"])
            if mark:
                R.setdefault("_scoregaps", []).append(("6.1", k, eps, sc, (sf_p, rf_p, sc_p)))
    parts.append(md_table(["row", "quantity", "ours / thesis (ratio)"], rows) + "\n")
    parts.append("(thesis SSE_kε and RL_kε are implied: SSE0/SSEf², RL0/RLf.)\n")
    parts.append("### Table 6.2 — against plain Laplace (k = 1)\n")
    rows = []
    for eps, (sse0_p, rl0_p, by_k) in T62.items():
        lp = R[("laplace", 1, eps)]
        rows.append([f"ε = {eps:g}", "Laplace SSE0", cell(_m(lp, "sse_raw"), sse0_p)])
        rows.append([f"ε = {eps:g}", "Laplace RL0 (%)", cell(_m(lp, "rl"), rl0_p)])
        for k, (sf_p, rf_p, sc_p) in by_k.items():
            pt = R[("as-published", k, eps)]
            sc = engine_score(_m(lp, "sse_raw"), _m(lp, "rl"), _m(pt, "sse_raw"), _m(pt, "rl"))
            rows.append([f"ε = {eps:g}", f"k = {k}: SSEf / RLf / Score",
                         f"{g(sc['sse_factor'])} / {g(sc['rl_factor'])} / {g(sc['score'])} "
                         f"(thesis {g(sf_p)} / {g(rf_p)} / {g(sc_p)}); SSEf ratio "
                         f"{sc['sse_factor'] / sf_p:.2f}, Score ×{sc['score'] / sc_p:.2f}"
                         + (" **!**" if is_gap(sc["score"], sc_p) else "")])
            if is_gap(sc["score"], sc_p):
                R.setdefault("_scoregaps", []).append(("6.2", k, eps, sc, (sf_p, rf_p, sc_p)))
    parts.append(md_table(["row", "quantity", "ours / thesis"], rows) + "\n")
    parts.append(_explain_61_62(R))
    return "\n".join(parts)


def _explain_61_62(R: dict) -> str:
    runs = R[("laplace", 1, 0.01)].repeats
    out = ["### Tables 6.1 / 6.2: every gap > 25 % explained\n"]
    for k, (sse0_p, rl0_p, by_eps) in T61.items():
        md, dom = R[("mdav", k)], R[("mdav-domain", k)]
        for name, o, pp in (("SSE0", dom["sse_raw"], sse0_p), ("RL0", dom["rl"], rl0_p)):
            if is_gap(o, pp):
                out.append(f"- MDAV {name} (`distance=\"domain\"`), k = {k}: ours {g(o)} vs {g(pp)}. "
                           "NOT explained: this deterministic clustering reproduces the thesis's other "
                           "MDAV figures.")
        st_gaps = [f"{name} {g(o)} vs {g(pp)} (×{o / pp:.2f})"
                   for name, o, pp in (("SSE0", md["sse_raw"], sse0_p), ("RL0", md["rl"], rl0_p))
                   if is_gap(o, pp)]
        if st_gaps:
            out.append(f"- MDAV with the engine default `distance=\"standardized\"`, k = {k}: "
                       + "; ".join(st_gaps) + ". A different convention, not a gap of the "
                       "reproduction: the thesis's chapter-6 MDAV scaled attributes by domain width; "
                       f"`distance=\"domain\"` gives SSE0 {g(dom['sse_raw'])} "
                       f"(×{dom['sse_raw'] / sse0_p:.3f}) and RL0 {g(dom['rl'])} % "
                       f"(×{dom['rl'] / rl0_p:.2f}), the thesis's figures.")
        for eps, (sf_p, rf_p, _) in by_eps.items():
            pt = R[("as-published", k, eps)]
            rl, rl_p = _m(pt, "rl"), rl0_p / rf_p
            if is_gap(rl, rl_p):
                se = np.hypot(_rl_noise(rl, runs), _rl_noise(rl_p, 10))
                z = abs(rl - rl_p) / se
                verdict = ("within sampling noise" if z < 2.5 else "beyond sampling noise")
                out.append(f"- RL, k = {k}, ε = {eps:g}: ours {g(rl)} % vs implied thesis {g(rl_p)} % "
                           f"(×{rl / rl_p:.2f}). RL here is a count of a few correct links (chance level "
                           f"100/1080 = 0.093 %); binomial standard error of the difference ±{g(se)} "
                           f"points, |diff| = {z:.1f} se: {verdict}"
                           + ("." if z < 2.5 else "; the thesis used raw Euclidean distances for RL ('the "
                              "same distance functions as for SSE') where the engine standardises, "
                              "which changes which records are nearest.")
                           + " SSEf, RLf and Score inherit these differences.")
    for eps, (sse0_p, rl0_p, _) in T62.items():
        lp = R[("laplace", 1, eps)]
        rl = _m(lp, "rl")
        if is_gap(rl, rl0_p):
            se = np.hypot(_rl_noise(rl, runs), _rl_noise(rl0_p, 10))
            z = abs(rl - rl0_p) / se
            out.append(f"- Laplace RL0, ε = {eps:g}: ours {g(rl)} % vs {g(rl0_p)} %. Chance-level linkage "
                       f"(100/1080 = 0.093 %) counted over {runs} runs: binomial standard error ±{g(se)} "
                       f"points, |diff| = {z:.1f} se"
                       + (": sampling noise." if z < 2.5 else
                          ": beyond sampling noise; RL distance (engine: standardised; thesis: raw "
                          "Euclidean) and the ties created by clamping to the domain bounds decide "
                          "the nearest records at this noise level.")
                       + " The Scores in this row inherit it (RLf = RL0/RL).")
    for table, k, eps, sc, (sf_p, rf_p, sc_p) in R.get("_scoregaps", []):
        rs, rr = sc["sse_factor"] / sf_p, sc["rl_factor"] / rf_p
        sse_part = f"SSEf ×{rs:.2f}" + (" (matches)" if not is_gap(sc["sse_factor"], sf_p) else "")
        out.append(f"- Score, Table {table}, k = {k}, ε = {eps:g}: ours {g(sc['score'])} vs {g(sc_p)} "
                   f"(×{sc['score'] / sc_p:.2f}) = SSEf part × RLf part. {sse_part}; RLf ×{rr:.2f}: "
                   "RL0 and RL are averages of small counts of correct links (at ε ≤ 1 a few per "
                   "run, near the chance level 0.093 %; see the RL lines above), so RLf = RL0/RL "
                   "and the Score carry their sampling noise.")
    if len(out) == 1:
        out.append("- none")
    return "\n".join(out) + "\n"


def engine_score(sse0, rl0, sse, rl) -> dict:
    from dpstudio.engine import measures as metrics  # the engine's Score (docs/measures.md)

    return metrics.score(sse0, rl0, sse, rl)


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs-310", type=int, default=100, help="runs per point, Table 3.10 (thesis: 100)")
    ap.add_argument("--runs-65", type=int, default=10, help="runs per point, Tables 6.x (thesis: 10)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    df = pd.read_csv(CENSUS)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    log("Table 3.10 …")
    md310, _ = table_310(df, args.runs_310, log)
    log("Tables 6.x …")
    md6, _ = tables_6(df, args.runs_65, log)
    elapsed = time.perf_counter() - t0
    head = (f"# Census reproductions (thesis Tables 3.10, 6.5, 6.1, 6.2)\n\n"
            f"Generated by `scripts/reproduce_census.py` with dpstudio's public API "
            f"(seed {SEED}; {elapsed:.0f} s). Data: `resources/census.csv` (1,080 × 13).\n")
    text = head + "\n" + md310 + "\n" + md6 + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    log(f"wrote {args.out} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
