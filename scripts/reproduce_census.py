#!/usr/bin/env python3
"""Reproduce the thesis's Census tables with dpstudio's public API.

Targets (J. Soria-Comas, PhD thesis, ``/work/shared/papers/004_65177858bc9aa63c.txt``):

* Table 3.10 — correlation loss of MDAV-ID, MDAV-SWAP and IR-SWAP, k = 5…300, 100 runs;
  the first 6 Census attributes are non-confidential quasi-identifiers, the last 7 confidential.
* Table 6.5 — Δ mean and Δ variance of FEDTAX, POTHVAL, INTVAL, FICA (domains [0, 1.5·max]),
  ε ∈ {0.01, 0.1, 1, 10}, k ∈ {1, 2, 5, 15, 30}, 10 runs; insensitive microaggregation +
  Laplace, multi-reference variant, ``calibration="as-published"``, ``budget="per-attribute"``
  (methods.md §4 says this reproduces the thesis), and the same with the rigorous calibration.
* Tables 6.1 / 6.2 — raw SSE and record linkage (RL) of MDAV, plain Laplace (k = 1) and
  insensitive microaggregation + Laplace, and the SSEf / RLf / Score factors.

Writes ``results/census_tables.md``.  Run: ``python scripts/reproduce_census.py`` (a few
minutes on 2 cores; ``--runs-310 N`` / ``--runs-65 N`` to change the number of runs).

Everything is computed through ``from dpstudio import engine`` (``protect``, ``prepare`` /
``run_prepared``, ``sweep``, ``evaluate``).  Two things are computed LOCALLY in this script,
clearly labelled, only to explain gaps to the thesis: (1) the thesis's way of averaging the
correlation differences (the whole 13 × 7 block of the correlation matrix, diagonal and
symmetric duplicates included), and (2) MDAV on raw (unstandardised) attribute values, which
is what the thesis's Table 3.7 turns out to have used.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpstudio import engine

# engine.sweep is captured once: importing the submodule dpstudio.engine.sweep (which the first
# call does) rebinds the package attribute ``engine.sweep`` to that module (reported to the lead).
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
    confidential–confidential pair included).  The engine's measure (metrics.md) uses the 63
    distinct off-diagonal pairs instead."""
    d = np.abs(np.corrcoef(protected, rowvar=False) - np.corrcoef(original, rowvar=False))
    v = d[:, -n_conf:].ravel()
    return float(v.mean()), float(v.std())


def local_raw_mdav(X: np.ndarray, k: int) -> np.ndarray:
    """LOCAL MDAV on raw (unstandardised) values, thesis Algorithm 2.1; only used to show
    that the thesis's Census figures were computed without standardisation.  Loops over
    clusters (n/k iterations), fine for 1,080 records."""
    Z = np.asarray(X, dtype=float)
    n = len(Z)
    rem = np.arange(n)
    lab = np.empty(n, dtype=np.int64)
    c = 0

    def take(center: np.ndarray) -> None:
        nonlocal rem, c
        d = ((Z[rem] - center) ** 2).sum(1)
        idx = np.argsort(d, kind="stable")[:k]
        lab[rem[idx]] = c
        c += 1
        rem = np.delete(rem, idx)

    while len(rem) >= 3 * k:
        xb = Z[rem].mean(0)
        r = rem[np.argmax(((Z[rem] - xb) ** 2).sum(1))]
        s = rem[np.argmax(((Z[rem] - Z[r]) ** 2).sum(1))]
        zr, zs = Z[r].copy(), Z[s].copy()
        take(zr)
        take(zs)
    if len(rem) >= 2 * k:
        xb = Z[rem].mean(0)
        take(Z[rem[np.argmax(((Z[rem] - xb) ** 2).sum(1))]].copy())
    lab[rem] = c
    return lab


def local_centroids(X: np.ndarray, lab: np.ndarray) -> np.ndarray:
    nc = lab.max() + 1
    s = np.zeros((nc, X.shape[1]))
    np.add.at(s, lab, X)
    return (s / np.bincount(lab, minlength=nc)[:, None])[lab]


def local_swap(rng: np.random.Generator, col: np.ndarray, lab: np.ndarray) -> np.ndarray:
    n = lab.size
    base = np.argsort(lab, kind="stable")
    shuffled = np.lexsort((rng.random(n), lab))
    src = np.empty(n, dtype=np.int64)
    src[base] = shuffled
    return col[src]


# ----------------------------------------------------------------------------- Table 3.10

def table_310(df: pd.DataFrame, runs: int, log) -> tuple[str, dict]:
    cols = list(df.columns)
    qi, conf = cols[:6], cols[6:]
    X = df.to_numpy(float)
    ks = sorted(T310)
    rng_local = np.random.default_rng(SEED)
    res: dict = {}   # (setup, method, k) -> dict(engine=(m, s), block=(m, s))

    def ev(out: pd.DataFrame) -> tuple[tuple[float, float], tuple[float, float]]:
        e = engine.evaluate(df, out, cols, measures=["corr"], confidential=conf)
        return (e["corr_loss_mean"], e["corr_loss_std"]), local_block91(X, out[cols].to_numpy(float))

    def avg(pairs):
        a = np.asarray(pairs, dtype=float)       # (runs, 2, 2)
        return a.mean(axis=0)

    roles_brief = {**{c: "k-quasi" for c in qi}, **{c: "confidential" for c in conf}}
    roles_ir = {**{c: "other" for c in qi}, **{c: "confidential" for c in conf}}
    roles_all = {c: "k-quasi" for c in cols}
    t0 = time.perf_counter()
    for k in ks:
        # --- MDAV-ID (deterministic: one run is the mean of 100)
        for setup, roles in (("brief", roles_brief), ("informed", roles_all)):
            out = engine.protect(df, "mdav", roles=roles, k=k, seed=SEED).data
            a = ev(out)
            res[(setup, "MDAV-ID", k)] = {"engine": a[0], "block": a[1]}
        # --- MDAV-SWAP, roles as in the brief: swap the 6 quasi-identifiers jointly
        prep = engine.prepare(df, "mdav-swap", roles_brief, k=k)
        cache: dict = {}
        vals = []
        for r in range(runs):
            out = engine.run_prepared(prep, rng=np.random.default_rng([SEED, k, r]), cache=cache).data
            vals.append(ev(out))
        res[("brief", "MDAV-SWAP", k)] = dict(zip(("engine", "block"), map(tuple, avg(vals))))
        # --- MDAV-SWAP for informed intruders (thesis §3.3.2): for each confidential A_i,
        # MDAV clusters on the other 12 attributes of the ORIGINAL data and A_i permuted inside
        # them.  engine 'mdav-swap' with the 12 as k-quasis permutes those 12 jointly; the
        # released association equals A_i permuted by the inverse, which we read back by
        # matching the (distinct) 12-attribute records.
        preps = []
        for a_i in conf:
            others = [c for c in cols if c != a_i]
            p = engine.prepare(df, "mdav-swap", {**{c: "k-quasi" for c in others}, a_i: "confidential"}, k=k)
            key = df[others].astype("int64")
            lookup = pd.Series(np.arange(len(df)), index=pd.MultiIndex.from_frame(key))
            if not lookup.index.is_unique:
                raise SystemExit(f"records not distinct without {a_i}: cannot read back the swap")
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
        res[("informed", "MDAV-SWAP", k)] = dict(zip(("engine", "block"), map(tuple, avg(vals))))
        # --- IR-SWAP (the same in both setups: one partition per confidential attribute)
        prep = engine.prepare(df, "ir-swap", roles_ir, k=k)
        cache = {}
        vals = []
        for r in range(runs):
            out = engine.run_prepared(prep, rng=np.random.default_rng([SEED, k, r, 99]), cache=cache).data
            vals.append(ev(out))
        res[("brief", "IR-SWAP", k)] = res[("informed", "IR-SWAP", k)] = dict(
            zip(("engine", "block"), map(tuple, avg(vals))))
        # --- LOCAL cross-check: raw-distance MDAV (thesis), informed setup, block measure
        lab = local_raw_mdav(X, k)
        res[("local-raw", "MDAV-ID", k)] = {"block": local_block91(X, local_centroids(X, lab))}
        labs = [local_raw_mdav(np.delete(X, 6 + j, axis=1), k) for j in range(7)]
        vals = []
        for r in range(runs):
            Y = X.copy()
            for j in range(7):
                Y[:, 6 + j] = local_swap(rng_local, X[:, 6 + j], labs[j])
            vals.append(local_block91(X, Y))
        res[("local-raw", "MDAV-SWAP", k)] = {"block": tuple(np.mean(vals, axis=0))}
        log(f"  Table 3.10 k={k} done ({time.perf_counter() - t0:.1f} s)")
    # Table 3.7 check (local raw MDAV, k = 12, all 13 attributes)
    Y = local_centroids(X, local_raw_mdav(X, 12))
    a3_raw = np.corrcoef(Y, rowvar=False)[2, 6:]
    out12 = engine.protect(df, "mdav", roles=roles_all, k=12, seed=SEED).data
    a3_eng = np.corrcoef(out12[cols].to_numpy(float), rowvar=False)[2, 6:]
    return _render_310(res, runs, a3_raw, a3_eng), res


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
                     "(metrics.md: 63 distinct pairs involving a confidential attribute)\n\n"
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
    parts.append(tab("local-raw", "block",
                     "D. LOCAL cross-check (not the engine): MDAV on RAW, unstandardised values "
                     "(informed setup), thesis-style averaging", methods=["MDAV-ID", "MDAV-SWAP"]))
    parts.append("Table 3.7 check (MDAV-ID, k = 12, row A3 = EMCONTRB vs A7..A13):\n\n"
                 + md_table(["source"] + [f"A{i}" for i in range(7, 14)],
                            [["thesis Table 3.7"] + [g(v, 2) for v in T37_A3],
                             ["LOCAL raw-distance MDAV"] + [g(v, 2) for v in a3_raw],
                             ["engine `mdav` (standardised)"] + [g(v, 2) for v in a3_eng]]) + "\n")
    parts.append(_explain_310(res, runs))
    return "\n".join(parts)


def _ratio_range(res: dict, setup: str, method: str, measure: str) -> str:
    r = [res[(setup, method, k)][measure][0] / T310[k][method][0] for k in sorted(T310)]
    return f"{min(r):.2f}–{max(r):.2f}"


def _explain_310(res: dict, runs: int) -> str:
    ir_small = [res[("informed", "IR-SWAP", k)]["engine"][0] / T310[k]["IR-SWAP"][0] for k in (5, 9, 11)]
    ir_large = [res[("informed", "IR-SWAP", k)]["engine"][0] / T310[k]["IR-SWAP"][0] for k in (25, 50, 100, 200, 300)]
    return "\n".join([
        "### Table 3.10: every gap > 25 % explained\n",
        "- **MDAV-ID and MDAV-SWAP, sections A–C (ratios of means "
        f"{_ratio_range(res, 'informed', 'MDAV-ID', 'engine')} and "
        f"{_ratio_range(res, 'informed', 'MDAV-SWAP', 'engine')} in A)**: three differences of set-up, "
        "none of them a defect. (1) Distance: the engine's MDAV standardises attributes by their "
        "standard deviation (methods.md §2); the thesis ran MDAV on raw values, where the "
        "large-valued attributes (AFNLWGT, AGI, PTOTVAL, …) decide the clusters. Evidence: LOCAL "
        "raw-distance MDAV reproduces the thesis's single-run Table 3.7 to two decimals (row A3 "
        "above), the engine's does not. (2) Averaging: the thesis's figures are the mean/sd over "
        "the whole 13 × 7 block of Table 3.6's layout (diagonal zeros and both copies of the 21 "
        "confidential–confidential pairs included); metrics.md averages the 63 distinct pairs. "
        "(3) Roles: the thesis's experiment is the informed-intruder scenario (§3.3.2: every "
        "confidential attribute is also a quasi-identifier for the intruders who know it; Tables "
        "3.7–3.8 show confidential–confidential correlations changing), so MDAV-ID aggregates all "
        "13 attributes and MDAV-SWAP permutes each confidential attribute within clusters built "
        "on the other 12 (section A); with the brief's literal roles (6 k-quasi, section C) the "
        "confidential attributes are untouched and the loss is 3–7× smaller. With all three set "
        "as in the thesis (section D) MDAV-ID is within "
        f"{_ratio_range(res, 'local-raw', 'MDAV-ID', 'block')} and MDAV-SWAP within "
        f"{_ratio_range(res, 'local-raw', 'MDAV-SWAP', 'block')} of the thesis at every k. "
        "Recommendation for the lead: offer an MDAV distance option (standardised / raw / "
        "domain-width) — chapter 6's MDAV used domain-width scaling (see Table 6.1 below) — so "
        "that users can reproduce either convention through the API.",
        "- **IR-SWAP** (same in every section; it permutes each confidential attribute inside "
        "individual-ranking groups, exactly as the thesis): k = 5, 9, 11 agree (ratios "
        + ", ".join(f"{r:.2f}" for r in ir_small) + "); k = 7 is ×"
        f"{res[('informed', 'IR-SWAP', 7)]['engine'][0] / T310[7]['IR-SWAP'][0]:.2f}, where the "
        "thesis's own k = 7 mean (.0022) hardly differs from its k = 5 (.0021) while every other "
        "step grows — most likely noise in the thesis's figure. For k ≥ 25 ours is higher by ×"
        + "–×".join(f"{r:.2f}" for r in (min(ir_large), max(ir_large)))
        + f" in both averaging conventions, with {runs} runs (with 100 runs the standard error of "
        "our mean is a few percent, so it is not our sampling noise). Not explained: the thesis does not say "
        "how its last group or ties are handled; the engine follows methods.md (consecutive "
        "groups of k, last group k..2k−1, uniform random permutation inside each group), and "
        "any partition with more, smaller groups would lose less correlation. Flagged as an "
        "open discrepancy, not as a defect.",
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
    for pt in SWEEP(d4, "insensitive-dp", roles, domains, ks=K65, epsilons=[], repeats=1,
                           seed=SEED, measures=meas, variant="single"):
        R[("single", pt.k, None)] = pt
    # standard MDAV (noise-free)
    for k in K65:
        out = engine.protect(d4, "mdav", roles={c: "k-quasi" for c in DP_ATTRS}, k=k, seed=SEED).data
        e = engine.evaluate(d4, out, DP_ATTRS, measures=meas)
        R[("mdav", k)] = e
        X4 = d4.to_numpy(float)
        width = np.array([domains[c][1] - domains[c][0] for c in DP_ATTRS])
        for name, Z in (("mdav-local-raw", X4), ("mdav-local-domain", X4 / width)):
            Y = pd.DataFrame(local_centroids(X4, local_raw_mdav(Z, k)), columns=DP_ATTRS)
            e_loc = engine.evaluate(d4, Y, DP_ATTRS, measures=meas)
            R[(name, k)] = e_loc
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
             "attributes (standardised distances). Cells: `ours / thesis (ratio)`, **!** = gap > 25 %.\n"]
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
                md = R[("mdav", k)][key][attr]
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
            loc = R[("mdav-local-raw", k)]["delta_var"][attr]
            dom = R[("mdav-local-domain", k)]["delta_var"][attr]
            md = R[("mdav", k)]["delta_var"][attr]
            vrows.append([attr, str(k), cell(multi, p[4]), cell(single, p[4]), cell(md, p[5]),
                          cell(loc, p[5]), cell(dom, p[5])])
    parts.append(md_table(["attribute", "k", "multi-reference (engine)", "single order (engine)",
                           "MDAV standardised (engine)", "MDAV raw distances (LOCAL)",
                           "MDAV on Δ-scaled attributes (LOCAL)"], vrows) + "\n")
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
            dom = R[("mdav-local-domain", k)][key][attr]
            why = ("The engine's `mdav` standardises attributes by their standard deviation "
                   "(methods.md §2). The thesis's chapter-6 MDAV scaled them by domain width "
                   f"instead: LOCAL MDAV on Δ-scaled attributes gives {g(dom)} "
                   f"(×{ratio(dom, paper):.2f}) and reproduces Table 6.1's MDAV SSE0 exactly.")
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
             "SSE is raw (metrics.md). RL: engine default (Euclidean on standardised attributes). "
             "Our insensitive-dp points: multi-reference, as-published, whole ε per attribute (as "
             "Table 6.5). Cells: `ours / thesis (ratio)`.\n",
             "### Table 6.1 — against standard MDAV\n"]
    rows = []
    for k, (sse0_p, rl0_p, by_eps) in T61.items():
        md = R[("mdav", k)]
        rows.append([f"k = {k}", "MDAV SSE0", cell(md["sse_raw"], sse0_p)])
        rows.append([f"k = {k}", "MDAV RL0 (%)", cell(md["rl"], rl0_p)])
        loc = R[("mdav-local-domain", k)]
        rows.append([f"k = {k}", "MDAV SSE0 (LOCAL: MDAV on attributes scaled by domain width Δ)",
                     cell(loc["sse_raw"], sse0_p)])
        rows.append([f"k = {k}", "MDAV RL0 (LOCAL: same Δ-scaled MDAV)", cell(loc["rl"], rl0_p)])
        for eps, (sf_p, rf_p, sc_p) in by_eps.items():
            pt = R[("as-published", k, eps)]
            sc = engine_score(md["sse_raw"], md["rl"], _m(pt, "sse_raw"), _m(pt, "rl"))
            rows.append([f"k = {k}", f"ε = {eps:g}: SSE_kε", cell(_m(pt, "sse_raw"), sse0_p / sf_p ** 2)])
            rows.append([f"k = {k}", f"ε = {eps:g}: RL_kε (%)", cell(_m(pt, "rl"), rl0_p / rf_p)])
            mark = " **!**" if is_gap(sc["score"], sc_p) else ""
            rows.append([f"k = {k}", f"ε = {eps:g}: SSEf / RLf / Score",
                         f"{g(sc['sse_factor'])} / {g(sc['rl_factor'])} / {g(sc['score'])} "
                         f"(thesis {g(sf_p)} / {g(rf_p)} / {g(sc_p)}; Score ×{sc['score'] / sc_p:.2f}){mark}"])
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
        md, dom = R[("mdav", k)], R[("mdav-local-domain", k)]
        if is_gap(md["sse_raw"], sse0_p):
            out.append(f"- MDAV SSE0, k = {k}: ours {g(md['sse_raw'])} vs {g(sse0_p)}. The engine's `mdav` "
                       "standardises by the standard deviation (methods.md §2); the thesis's MDAV "
                       f"scaled attributes by domain width: LOCAL Δ-scaled MDAV gives {g(dom['sse_raw'])} "
                       f"(×{dom['sse_raw'] / sse0_p:.3f}), i.e. exactly the thesis figure.")
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
        if table == "6.1":
            dom = R[("mdav-local-domain", k)]["sse_raw"] / R[("mdav", k)]["sse_raw"]
            sse_part = (f"SSEf ×{rs:.2f}: the baseline SSE0 is the engine's standardised MDAV; with "
                        f"the thesis's Δ-scaled MDAV it would be ×{rs * np.sqrt(dom):.2f}")
        else:
            sse_part = f"SSEf ×{rs:.2f} (matches)"
        out.append(f"- Score, Table {table}, k = {k}, ε = {eps:g}: ours {g(sc['score'])} vs {g(sc_p)} "
                   f"(×{sc['score'] / sc_p:.2f}) = SSEf part × RLf part. {sse_part}; RLf ×{rr:.2f}: "
                   "RL0 and RL are averages of small counts of correct links (at ε ≤ 1 a few per "
                   "run, near the chance level 0.093 %; see the RL lines above), so RLf = RL0/RL "
                   "and the Score carry their sampling noise (and, for Table 6.1, the MDAV RL0 of "
                   "the standardised clustering).")
    if len(out) == 1:
        out.append("- none")
    return "\n".join(out) + "\n"


def engine_score(sse0, rl0, sse, rl) -> dict:
    from dpstudio.engine import metrics  # the engine's Score (metrics.md)

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
