"""Issue 27: what a sweep computes once and shares across its cells (the k-independent parts of
``Job.cache`` kept from one k to the next, the bulk path's grid sums per k reused for every ε,
the record-linkage classifier's full neighbour lists and its own distances) gives exactly the
cells of the per-cell path: every run of every point equals a separate ``protect`` +
``evaluate`` with that run's generator, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio import engine
from dpstudio.engine.measures import risk as RK
from dpstudio.engine.random import point_rng


def _per_cell(df, method, roles, domains, k, eps, seed, ki, ei, r, **params):
    res = engine.protect(
        df, method, roles, domains, k=k, epsilon=eps, shuffle=False, seed=point_rng(seed, ki, ei, r), **params
    )
    return engine.evaluate(
        res.aligned_original(), res.data, res.protected_attributes, measures=("sse", "rl"), result=res
    )


@pytest.mark.parametrize("kernel", [True, False], ids=["classifier", "numpy"])
@pytest.mark.parametrize("method", ["ir-dp", "idp-ls"])
def test_shared_sweep_equals_per_cell_runs(census, monkeypatch, method, kernel):
    """k in decreasing and increasing steps (the kept cache entries come from another k), two
    ε per k (the grid sums of a k reused), noise-free baselines, several repetitions."""
    if kernel:
        if RK._rl_kernel() is None:
            pytest.skip("numba unavailable")
        monkeypatch.setattr(RK, "_KERNEL_LOAD_S", 0.0)  # the classifier from the first cell
    else:
        monkeypatch.setattr(RK, "_KERNEL", [None])
    cols = list(census.columns)
    df = census[cols]
    roles = {c: "eps-quasi" for c in cols}
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    ks, epss, reps, seed = [9, 2, 30], [0.5, 10.0], 2, 5
    pts = list(
        engine.sweep(
            df, method, roles, domains, ks=ks, epsilons=epss, repeats=reps, seed=seed, measures=("sse", "rl")
        )
    )
    assert len(pts) == len(ks) * (len(epss) + 1)
    for pt in pts:
        ki = ks.index(pt.k)
        if pt.epsilon is None:  # the baseline: the noise-free run of this k
            prep = engine.prepare(df, method, roles, domains, k=pt.k, epsilon=epss[0], shuffle=False)
            res = engine.run_prepared(prep, rng=point_rng(seed, ki, 0, 0), epsilon=None, k=pt.k)
            ev = engine.evaluate(
                res.aligned_original(), res.data, res.protected_attributes, measures=("sse", "rl"), result=res
            )
            assert [pt.runs[0][key] for key in ("sse_raw", "sse_normalized", "rl")] == [
                ev[key] for key in ("sse_raw", "sse_normalized", "rl")
            ], (pt.k, "baseline")
            continue
        ei = epss.index(pt.epsilon) + 1  # index 0 is the baseline
        for r in range(reps):
            ev = _per_cell(df, method, roles, domains, pt.k, pt.epsilon, seed, ki, ei, r)
            for key in ("sse_raw", "sse_normalized", "rl"):
                assert pt.runs[r][key] == ev[key], (pt.k, pt.epsilon, r, key)
    # linked and unlinked records both occur (the classifier decides both ways)
    assert any(0 < r_["rl"] < 100 for p in pts for r_ in p.runs)


def test_data_only_entries_are_computed_once_per_sweep(census, monkeypatch):
    """The ranking of each column is sorted once for the whole sweep, not once per k; the
    grid sums of a k once for all its ε."""
    from dpstudio.engine.protection import _common
    from dpstudio.engine.protection import ir_dp as IR

    sorts, sums = [], []
    real_sort, real_sums = _common._ir_sorted_values, IR._ir_dp_sums
    monkeypatch.setattr(_common, "_ir_sorted_values", lambda s: sorts.append(s.name) or real_sort(s))
    monkeypatch.setattr(IR, "_ir_dp_sums", lambda *a: sums.append(1) or real_sums(*a))
    cols = list(census.columns)[:4]
    domains = {c: (0.0, 1.5 * float(census[c].max())) for c in cols}
    pts = list(
        engine.sweep(
            census[cols],
            "ir-dp",
            {c: "eps-quasi" for c in cols},
            domains,
            ks=[3, 8, 20],
            epsilons=[0.1, 1.0, 10.0],
            repeats=2,
            seed=2,
            measures=("sse", "rl"),
        )
    )
    assert len(pts) == 3 * 4
    assert sorted(sorts) == sorted(cols)  # once per column, whatever the number of k
    assert len(sums) == 3 * len(cols)  # per k and column, not per ε (baselines: no noise, no sums)


def test_classifier_without_own_distances_equals_exact_search():
    """The classifier sums each record's own distance itself: ties exactly at the own distance
    (a record halfway between its original and another), duplicates, copies and non-finite
    rows give the exact search's Pr_j."""
    if RK._rl_kernel() is None:
        pytest.skip("numba unavailable")
    rng = np.random.default_rng(8)
    xs = np.round(rng.normal(size=(300, 5)), 1)
    xs[10:20] = xs[5]
    mid = (xs + xs[rng.integers(0, 300, size=300)]) / 2.0
    ys = np.concatenate([xs, mid, xs + rng.normal(scale=0.3, size=xs.shape)])
    ys[[4, 333, 700], 2] = np.nan
    ys[[5, 801], 0] = np.inf
    jidx = np.tile(np.arange(300), 3)
    for full in (10_000, 0):  # full neighbour lists, and short lists with the full scan
        saved = RK._FULL_LISTS_MAX_N, RK._NEIGHBOURS
        RK._FULL_LISTS_MAX_N, RK._NEIGHBOURS = full, 16
        try:
            got = RK._pr_classified(xs, ys, jidx, {})
        finally:
            RK._FULL_LISTS_MAX_N, RK._NEIGHBOURS = saved
        ref = np.concatenate([RK._rl_numeric(xs, ys[i * 300 : (i + 1) * 300], None) for i in range(3)])
        assert got is not None and np.array_equal(got, ref), full
        assert got[4] == got[333] == got[5] == 0.0
        assert 0 < got[300:600].sum() < 300  # halfway records: ties decided by the exact search


@pytest.mark.parametrize(
    ("R", "n", "m"), [(1, 1, 1), (3, 2, 1), (11, 7, 2), (10, 1080, 13), (4, 3001, 1), (5, 40_000, 13)]
)
def test_bulk_sse_equals_evaluate_run_by_run(R, n, m):
    """The sweep's SSE of R releases at once has the bits of evaluate's SSE of each release
    (m = 1: the reduced axis is contiguous; 40,000 × 13: the runs go in chunks)."""
    import pandas as pd

    from dpstudio.engine.measures.repeated import _sse_bulk
    from dpstudio.engine.measures.utility import _sse_both

    rng = np.random.default_rng(R * 1000 + n + m)
    x = rng.normal(size=(n, m)) * 10.0 ** rng.integers(-3, 6, size=m)
    Y = x[None] + rng.standard_cauchy(size=(R, n, m)) * x.std(axis=0) + 0.1
    cols = [f"c{i}" for i in range(m)]
    orig = pd.DataFrame(x, columns=cols)
    cache: dict = {}
    ref = [_sse_both(orig, pd.DataFrame(Y[r], columns=cols), cols, None, [], cache) for r in range(R)]
    var = next(v["var"] for k, v in cache.items() if isinstance(v, dict) and "var" in v)
    assert _sse_bulk(np.ascontiguousarray(x), var, np.ascontiguousarray(Y)) == ref
