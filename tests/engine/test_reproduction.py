"""Regression tests pinning reproductions of published figures (see results/census_tables.md,
results/adult_irdp.md and scripts/reproduce_*.py).

A change that breaks a noise calibration, a budget split, the clamping, the insensitive
clustering or a measure moves these figures away from the papers' and fails here.  Each test
averages enough runs that the tolerance is several standard errors wide, so the tests do not
depend on one particular random stream.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from tests.conftest import shared_path

SWEEP = engine.sweep

ATTRS = ["FEDTAX", "POTHVAL", "INTVAL", "FICA"]

# thesis Table 6.5, k = 1 row (plain Laplace): attribute -> ε -> (Δ mean, Δ variance)
T65_K1 = {
    "FEDTAX": {0.01: (1.0947, 9.5299), 0.1: (1.0356, 9.2111), 1.0: (0.6925, 6.4855), 10.0: (0.0500, 0.5122)},
    "POTHVAL": {
        0.01: (14.5160, 69.3473),
        0.1: (13.7959, 67.3757),
        1.0: (9.0362, 45.9873),
        10.0: (1.2125, 2.1168),
    },
    "INTVAL": {
        0.01: (25.4754, 96.3225),
        0.1: (24.6380, 93.3506),
        1.0: (15.9486, 64.2854),
        10.0: (2.2799, 3.0044),
    },
    "FICA": {0.01: (1.0126, 16.3302), 0.1: (0.9648, 15.7698), 1.0: (0.6151, 11.3811), 10.0: (0.0270, 0.9712)},
}
# thesis Table 6.2: plain Laplace SSE0 (raw) per ε
T62_SSE0 = {0.01: 1.62e13, 0.1: 1.54e13, 1.0: 8.86e12, 10.0: 3.69e11}
# thesis Table 6.5, Δ variance at ε = 1 for k = 2 and 5 (noise-dominated cells)
T65_EPS1_DV = {
    "FEDTAX": {2: 4.3752, 5: 1.5560},
    "POTHVAL": {2: 29.3618, 5: 8.0984},
    "INTVAL": {2: 40.5087, 5: 11.0832},
    "FICA": {2: 7.8828, 5: 3.0073},
}
# thesis Table 6.5, "Insensit. MDAV" column, Δ variance (noise-free multi-reference clustering)
T65_INS_DV = {
    "FEDTAX": {2: 0.0447, 5: 0.0804, 15: 0.1015, 30: 0.1254},
    "POTHVAL": {2: 0.0697, 5: 0.1268, 15: 0.2429, 30: 0.3416},
}


@pytest.fixture(scope="module")
def census4(census) -> tuple[pd.DataFrame, dict, dict]:
    d4 = census[ATTRS].copy()
    domains = {c: (0.0, 1.5 * float(d4[c].max())) for c in ATTRS}
    roles = {c: "eps-quasi" for c in ATTRS}
    return d4, roles, domains


def _avg(point, key: str) -> dict:
    vals = [r[key] for r in point.runs]
    return {a: float(np.mean([v[a] for v in vals])) for a in vals[0]}


def test_table_6_5_k1_row_plain_laplace_per_attribute(census4):
    """Thesis Table 6.5, k = 1: Laplace of scale Δ/ε on each attribute, clamped to [0, 1.5·max]
    (docs/methods.md §4, 'per-attribute' budget).  Also Table 6.2's SSE0."""
    d4, roles, domains = census4
    pts = {
        pt.epsilon: pt
        for pt in SWEEP(
            d4,
            "laplace",
            roles,
            domains,
            ks=[],
            epsilons=[0.01, 0.1, 1.0, 10.0],
            repeats=40,
            seed=11,
            measures=("sse", "delta"),
            budget="per-attribute",
        )
    }
    for eps, pt in pts.items():
        dm, dv = _avg(pt, "delta_mean"), _avg(pt, "delta_var")
        for a in ATTRS:
            pm, pv = T65_K1[a][eps]
            assert dv[a] == pytest.approx(pv, rel=0.10), (a, eps, "Δ variance", dv[a], pv)
            if eps <= 1.0:  # at ε = 10 Δ mean is a small noise-dominated figure (10-run spread ±30 %)
                assert dm[a] == pytest.approx(pm, rel=0.12), (a, eps, "Δ mean", dm[a], pm)
        assert pt.values["sse_raw"][0] == pytest.approx(T62_SSE0[eps], rel=0.06)


def test_equal_budget_would_not_reproduce_k1_row(census4):
    """The 'per-attribute' reading is what reproduces the thesis; the ε-DP 'equal' split
    (scale mΔ/ε) gives clearly different figures at ε = 10 — so the test above can fail."""
    d4, roles, domains = census4
    pt = next(
        iter(
            SWEEP(
                d4,
                "laplace",
                roles,
                domains,
                ks=[],
                epsilons=[10.0],
                repeats=20,
                seed=12,
                measures=("delta",),
                budget="equal",
            )
        )
    )
    dv = _avg(pt, "delta_var")
    assert dv["FEDTAX"] > 2.0 * T65_K1["FEDTAX"][10.0][1]


def _insensitive_sweep(census4, ks, **kw):
    """The Δ-variance sweep of insensitive-dp on the four Census attributes at ε = 1."""
    d4, roles, domains = census4
    return SWEEP(d4, "insensitive-dp", roles, domains, ks=ks, epsilons=[1.0], measures=("delta",), **kw)


def test_table_6_5_as_published_multi_reference_eps1(census4):
    """k = 2 and 5, ε = 1 (noise-dominated): insensitive-dp, multi-reference, as-published,
    per-attribute reproduces the thesis's Δ variance within 20 %; the rigorous calibration
    (n_c times more noise) does not."""
    got = {}
    for calib in ("as-published", "rigorous"):
        for pt in _insensitive_sweep(
            census4,
            [2, 5],
            repeats=30,
            seed=13,
            budget="per-attribute",
            variant="multi",
            calibration=calib,
            baselines=False,
        ):
            got[(calib, pt.k)] = _avg(pt, "delta_var")
    for a, by_k in T65_EPS1_DV.items():
        for k, paper in by_k.items():
            assert got[("as-published", k)][a] == pytest.approx(paper, rel=0.20), (a, k)
            assert got[("rigorous", k)][a] > 1.5 * paper, (a, k)


def test_table_6_5_insensitive_mdav_column(census4):
    """The noise-free multi-reference clustering matches the thesis's 'Insensit. MDAV' column
    (Δ variance) for FEDTAX and POTHVAL within 20 %; the single-order variant loses far more
    variance on POTHVAL (docs/methods.md §4)."""
    # the sweep's noise-free baseline points (ε = None); it needs one ε to sweep
    multi = {
        pt.k: _avg(pt, "delta_var")
        for pt in _insensitive_sweep(census4, [2, 5, 15, 30], repeats=1, seed=1, variant="multi")
        if pt.epsilon is None
    }
    single = {
        pt.k: _avg(pt, "delta_var")
        for pt in _insensitive_sweep(census4, [2, 5], repeats=1, seed=1, variant="single")
        if pt.epsilon is None
    }
    assert set(multi) == {2, 5, 15, 30} and set(single) == {2, 5}
    for a, by_k in T65_INS_DV.items():
        for k, paper in by_k.items():
            assert multi[k][a] == pytest.approx(paper, rel=0.20), (a, k, multi[k][a], paper)
    assert single[2]["POTHVAL"] > 3 * T65_INS_DV["POTHVAL"][2]


# thesis Table 6.5, "MDAV" column, Δ variance, and Table 6.1's MDAV SSE0 (raw), per k
T65_MDAV_DV = {
    "FEDTAX": {2: 0.0053, 5: 0.0156, 15: 0.0398, 30: 0.0639},
    "POTHVAL": {2: 0.0247, 5: 0.0991, 15: 0.1967, 30: 0.3214},
    "INTVAL": {2: 0.0349, 5: 0.1327, 15: 0.2614, 30: 0.4729},
    "FICA": {2: 0.0067, 5: 0.0224, 15: 0.0670, 30: 0.1060},
}
T61_SSE0 = {2: 3.07e9, 5: 1.20e10, 15: 2.41e10, 30: 4.00e10}


def test_table_6_5_mdav_column_domain_distance(census4):
    """Thesis Table 6.5 'MDAV' column and Table 6.1's SSE0: MDAV on FEDTAX, POTHVAL, INTVAL, FICA
    with distances scaled by the domain widths ([0, 1.5·max]; distance="domain", the thesis's
    chapter-6 convention).  Deterministic, so the tolerance is tight: any change to MDAV's
    farthest/nearest selection, its last clusters or the domain scaling moves some cell.  The
    engine default (standardised) clusters differently and misses by far more."""
    d4, _, domains = census4
    roles = {c: "k-quasi" for c in ATTRS}
    worst_std = 0.0
    for k, sse0 in T61_SSE0.items():
        res = engine.protect(d4, "mdav", roles, domains, k=k, distance="domain")
        e = engine.evaluate(res.aligned_original(), res.data, ATTRS, measures=("sse", "delta"))
        assert e["sse_raw"] == pytest.approx(sse0, rel=0.01), (k, e["sse_raw"], sse0)
        for a in ATTRS:
            assert e["delta_var"][a] == pytest.approx(T65_MDAV_DV[a][k], rel=0.03), (
                a,
                k,
                e["delta_var"][a],
                T65_MDAV_DV[a][k],
            )
            assert abs(e["delta_mean"][a]) < 1e-9  # centroids keep the mean exactly
        std = engine.protect(d4, "mdav", roles, domains, k=k)
        dv = engine.evaluate(std.aligned_original(), std.data, ATTRS, measures=("delta",))["delta_var"]
        worst_std = max(worst_std, max(abs(dv[a] / T65_MDAV_DV[a][k] - 1) for a in ATTRS))
    assert worst_std > 0.5  # so the check above can tell the conventions apart


def test_table_3_10_ir_swap_and_mdav_id_k5(census):
    """Thesis Table 3.10, k = 5.  IR-SWAP matches the thesis (.0021 / .0041) within 25 %.
    MDAV-ID (all 13 attributes as k-quasi, informed-intruder setup) is pinned at the engine's
    own figure: it is about half the thesis's .055 because the engine standardises distances
    and averages the 63 distinct pairs (results/census_tables.md explains and reproduces the
    thesis's figure with raw distances)."""
    cols = list(census.columns)
    conf = cols[6:]
    roles_ir = {**{c: "other" for c in cols[:6]}, **{c: "confidential" for c in conf}}
    prep = engine.prepare(census, "ir-swap", roles_ir, k=5)
    cache: dict = {}
    vals = []
    for r in range(40):
        res = engine.run_prepared(prep, rng=np.random.default_rng([5, r]), cache=cache)
        e = engine.evaluate(res.aligned_original(), res.data, cols, measures=["corr"], confidential=conf)
        vals.append((e["corr_loss_mean"], e["corr_loss_std"]))
    mean, sd = np.mean(vals, axis=0)
    assert mean == pytest.approx(0.0021, rel=0.25)
    assert sd == pytest.approx(0.0041, rel=0.25)
    res = engine.protect(census, "mdav", roles={c: "k-quasi" for c in cols}, k=5, seed=1)
    e = engine.evaluate(res.aligned_original(), res.data, cols, measures=["corr"], confidential=conf)
    assert e["corr_loss_mean"] == pytest.approx(0.0243, rel=0.05)
    assert e["corr_loss_mean"] < 0.055  # the thesis's raw-distance figure is larger


def test_adult_ir_dp_eps01_k100_beats_laplace_eps1():
    """Paper 002, Adult: ir-dp at ε = 0.1, k = 100 has no more SSE than plain Laplace at ε = 1
    (the paper: 'almost equals'; ours is about 5× lower, see results/adult_irdp.md)."""
    # AGE from the ARX extract, HOURS-PER-WEEK from its row-aligned companion (both the complete
    # cases of UCI adult.data; resources/adult/README.md).
    age = pd.read_csv(shared_path("adult", "adult.csv"), sep=";")["age"]
    hours = pd.read_csv(shared_path("adult", "adult_hours-per-week.csv"))["hours-per-week"]
    df = pd.DataFrame({"AGE": age, "HOURS": hours}).astype(float)
    assert len(df) == 30162
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in df.columns}
    roles = {c: "eps-quasi" for c in df.columns}
    sse = []
    for method, params in (("ir-dp", {"k": 100, "epsilon": 0.1}), ("laplace", {"epsilon": 1.0})):
        res = [engine.protect(df, method, roles=roles, domains=domains, seed=s, **params) for s in range(3)]
        runs = [
            engine.evaluate(r.aligned_original(), r.data, list(df.columns), measures=["sse"])["sse_raw"]
            for r in res
        ]
        sse.append(np.mean(runs))
    assert sse[0] < sse[1]
    assert sse[0] > 0.05 * sse[1]  # but not absurdly small: noise of scale Δ/5 is still added
