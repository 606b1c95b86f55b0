"""Record linkage's compiled classifier (issue 13): the sweep's bulk Pr_j are bit-identical to
``risk._rl_numeric`` (today's exact search) on tie-heavy and random data — integer values,
duplicated originals, constant columns, exact copies, repeated centroids, weak and strong
noise — and the classifier does settle most records itself (it is not a pass-through)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpstudio.engine.measures import risk as RK
from dpstudio.engine.measures.repeated import _rl_numeric_bulk

pytestmark = pytest.mark.skipif(
    RK._rl_kernel() is None, reason="numba unavailable: the classifier is not used"
)


@pytest.fixture(autouse=True, scope="module")
def _kernel_always():
    saved = RK._KERNEL_LOAD_S
    RK._KERNEL_LOAD_S = 0.0  # no tiering: the classifier from the first call
    yield
    RK._KERNEL_LOAD_S = saved


def _reference(xs, YS):
    return np.stack([RK._rl_numeric(xs, np.ascontiguousarray(y), lambda: RK._kdtree(xs)) for y in YS])


def _releases(rng, xs, kind: str, scale: float) -> np.ndarray:
    n, m = xs.shape
    if kind == "copy":
        return xs.copy()
    if kind == "centroids":  # microaggregation-like: groups of 3 share their mean
        order = np.argsort(xs[:, 0], kind="stable")
        y = np.empty_like(xs)
        for lo in range(0, n, 3):
            idx = order[lo : lo + 3]
            y[idx] = xs[idx].mean(axis=0)
        return y
    if kind == "int-noise":  # integer offsets: distances tie exactly between originals
        return xs + rng.integers(-1, 2, size=xs.shape) * scale
    if kind == "swap":  # a few records released as another original (exact ties/duplicates)
        y = xs.copy()
        i = rng.integers(0, n, size=max(1, n // 4))
        y[i] = xs[rng.integers(0, n, size=i.size)]
        return y
    if kind == "midpoints":  # halfway between two originals: exact two-way ties
        j = rng.integers(0, n, size=n)
        return (xs + xs[j]) / 2.0
    return xs + rng.normal(scale=scale, size=xs.shape)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 90),
    m=st.integers(1, 6),
    levels=st.sampled_from([2, 3, 5, 50, 0]),
    const=st.booleans(),
    kinds=st.lists(
        st.sampled_from(["copy", "centroids", "int-noise", "swap", "midpoints", "noise"]),
        min_size=1,
        max_size=4,
    ),
    scale=st.sampled_from([1e-13, 1e-6, 0.01, 0.3, 1.0, 30.0, 1e6]),
    short_lists=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_bulk_equals_exact_search_on_tie_heavy_data(n, m, levels, const, kinds, scale, short_lists, seed):
    rng = np.random.default_rng(seed)
    # integer-valued originals (few levels: many duplicates and exact ties) or continuous ones
    xs = rng.integers(0, levels, size=(n, m)).astype(float) if levels else rng.normal(size=(n, m))
    if const:
        xs[:, 0] = 7.0
    YS = np.ascontiguousarray(np.stack([_releases(rng, xs, k, scale) for k in kinds]))
    saved = RK._NEIGHBOURS, RK._FULL_LISTS_MAX_N
    try:
        if short_lists:  # neighbour lists shorter than n: the classifier's full-scan branch
            RK._NEIGHBOURS, RK._FULL_LISTS_MAX_N = 2, 0
        got = _rl_numeric_bulk(xs, YS, lambda: RK._kdtree(xs), {})
    finally:
        RK._NEIGHBOURS, RK._FULL_LISTS_MAX_N = saved
    assert np.array_equal(got, _reference(xs, YS))


def test_census_like_noise_is_settled_by_the_classifier(monkeypatch):
    """Continuous data with weak and strong noise: the same Pr_j as the exact search, and the
    exact search is asked about almost no record (the classifier decides them)."""
    rng = np.random.default_rng(3)
    n, m = 600, 8
    xs = rng.normal(size=(n, m)) @ rng.normal(size=(m, m))
    YS = np.stack([xs + rng.normal(scale=s, size=xs.shape) for s in (0.01, 0.1, 1.0, 100.0)])
    asked = []
    real = RK._pr_by_candidates
    monkeypatch.setattr(RK, "_pr_by_candidates", lambda xs_, yq, d: asked.append(len(yq)) or real(xs_, yq, d))
    cache: dict = {}
    got = _rl_numeric_bulk(xs, YS, None, cache)
    assert sum(asked) <= 0.01 * YS.shape[0] * n
    assert cache["rl.nbr.xs"] is xs  # neighbour lists kept for the next cell
    monkeypatch.setattr(RK, "_pr_by_candidates", real)
    ref = _reference(xs, YS)
    assert np.array_equal(got, ref)
    assert 0 < ref[3].sum() < ref[0].sum()  # both linked and unlinked records occur


def test_missing_values_are_not_linked_and_without_numba_the_numpy_path_runs(monkeypatch):
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(50, 3))
    ys = xs + rng.normal(scale=0.01, size=xs.shape)
    ys[[3, 9], 1] = np.nan
    ys[5, 0] = np.inf
    pr = RK._pr_classified(xs, ys, np.arange(50))
    assert pr is not None and pr[3] == pr[9] == pr[5] == 0.0
    assert np.array_equal(pr, RK._rl_numeric(xs, ys, lambda: RK._kdtree(xs)))
    monkeypatch.setattr(RK, "_KERNEL", [None])  # as if numba were missing
    assert RK._pr_classified(xs, ys, np.arange(50)) is None
    YS = np.stack([xs + 0.02, xs - 0.3])
    assert np.array_equal(_rl_numeric_bulk(xs, YS, None), _reference(xs, YS))


def test_a_short_sweep_does_not_load_numba(monkeypatch):
    """Tiered: before numba is loaded, the numpy search runs until it has cost the load time."""
    rng = np.random.default_rng(6)
    xs = rng.normal(size=(40, 3))
    ys = xs + rng.normal(scale=0.1, size=xs.shape)
    monkeypatch.setattr(RK, "_KERNEL_LOAD_S", 0.5)
    monkeypatch.setattr(RK, "_KERNEL", [])
    monkeypatch.setattr(RK, "_NUMPY_SECONDS", [0.0])
    assert RK._pr_classified(xs, ys, np.arange(40)) is None and RK._KERNEL == []
    RK._NUMPY_SECONDS[0] = 0.6
    assert np.array_equal(RK._pr_classified(xs, ys, np.arange(40)), RK._rl_numeric(xs, ys, None))


def test_sweep_with_the_classifier_equals_the_numpy_sweep(census, monkeypatch):
    """Every point of a sweep (noise-free baselines included) is the same with the classifier
    as with the numpy search, which test_sweep_sharing pins to separate protect + evaluate."""
    from dpstudio import engine

    cols = list(census.columns)[:8]
    df = census[cols]
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}

    def run():
        pts = engine.sweep(
            df,
            "ir-dp",
            {c: "eps-quasi" for c in cols},
            domains,
            ks=[2, 5, 30],
            epsilons=[0.1, 3.0, 10.0],
            repeats=3,
            seed=9,
            measures=("sse", "rl"),
        )
        return [(p.k, p.epsilon, [r["rl"] for r in p.runs]) for p in pts]

    calls = []
    real = RK._pr_classified
    monkeypatch.setattr(RK, "_pr_classified", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    with_kernel = run()
    assert len(calls) == 2 + 9  # baselines after the first (a full evaluate) and the 9 noisy cells
    monkeypatch.setattr(RK, "_KERNEL", [None])
    assert run() == with_kernel
    assert any(0 < r < 100 for _, _, rs in with_kernel for r in rs)
