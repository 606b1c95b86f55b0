"""The bulk paths of a sweep (issue 13) give exactly what the per-run paths give: the streams'
keys, their words, the discrete Laplace draws, record linkage, and whole sweep points."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio import engine
from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.measures import risk as RK
from dpstudio.engine.random import point_rng

ROOTS = [K.root_key(np.random.default_rng(i)) for i in range(6)] + [
    (0, 0),
    (5, 2**40),
    (2**32 - 1, 7),
    (2**32, 2**32),
    (2**64 - 1, 2**64 - 1),
]


def _stream_with(key) -> K.KeyedStream:
    s = K.KeyedStream.__new__(K.KeyedStream)
    s.key = np.asarray(key, dtype=np.uint64)
    return s


@pytest.mark.parametrize("purpose", [K.PURPOSE_NOISE, K.PURPOSE_SHUFFLE])
def test_stream_keys_equal_seedsequence(purpose):
    """Roots with words below 2^32 change numpy's entropy layout (padding): all covered."""
    keys = K.stream_keys(ROOTS, purpose, [0, 1, 12, 999])
    assert keys.shape == (len(ROOTS), 4, 2)
    for ri, root in enumerate(ROOTS):
        for jj, j in enumerate([0, 1, 12, 999]):
            assert np.array_equal(keys[ri, jj], K.KeyedStream(root, purpose, j).key), (root, j)


def test_bulk_words_equal_stream_blocks():
    keys = K.stream_keys(ROOTS[:3], K.PURPOSE_NOISE, range(4)).reshape(-1, 2)
    nc = 37
    w = K.contiguous_words(keys, nc, rnd=2, lane=1).reshape(len(keys), nc, 4)
    ids = np.arange(nc)
    for s in range(len(keys)):
        st = _stream_with(keys[s])
        assert np.array_equal(w[s], st.block(ids, 2, 1))
        sparse = ids[[0, 5, 36]]
        vec = K.philox_keyed(np.full(3, keys[s, 0]), np.full(3, keys[s, 1]), sparse + 1, 3, 0, 0)
        assert np.array_equal(vec, st.block(sparse, 3, 0))


def test_bulk_extra_generators_equal_stream_extra():
    keys = K.stream_keys(ROOTS[:2], K.PURPOSE_NOISE, range(2)).reshape(-1, 2)
    s, c = np.array([0, 3, 1]), np.array([4, 0, 9])
    get = K._bulk_extra(keys, s, c, 2)
    for i in range(3):
        a = get(i).integers(0, 2**64, size=5, dtype=np.uint64)
        b = _stream_with(keys[s[i]]).extra(int(c[i]), 2).integers(0, 2**64, size=5, dtype=np.uint64)
        assert np.array_equal(a, b)
    assert get(1) is get(1)  # one generator per draw and round, as the single path's cache


@pytest.mark.parametrize("nc", [1, 9, 600])
def test_bulk_laplace_equals_single_draws(nc):
    """Rates from tiny (the remainder path) to large (many "−0" redraws: several rounds)."""
    rates = np.array([1e-15, 3e-9, 1e-3, 0.2, 1.0, 7.0, 40.0])
    keys = K.stream_keys(ROOTS[:2], K.PURPOSE_NOISE, range(len(rates))).reshape(-1, 2)
    r = np.tile(rates, 2)
    z = K.discrete_laplace_bulk(keys, nc, r)
    assert z.shape == (len(keys), nc)
    for s in range(len(keys)):
        assert np.array_equal(z[s], K.discrete_laplace(_stream_with(keys[s]), np.arange(nc), r[s])), s
    with pytest.raises(ValueError):
        K.discrete_laplace_bulk(keys[:1], nc, [0.0])


def test_bulk_record_linkage_equals_per_run():
    """Ties (repeated centroids, exact copies of originals), linked and unlinked records,
    strong and weak noise in one batch: the same Pr_j per record as ``_rl_numeric``."""
    from dpstudio.engine.measures.repeated import _rl_numeric_bulk

    rng = np.random.default_rng(5)
    n, m = 400, 4
    xs = np.round(rng.normal(size=(n, m)), 1)
    xs[50:60] = xs[40]  # duplicated originals: ties
    runs = [
        xs.copy(),  # every record its own original (ties where duplicated)
        np.repeat(xs[::4], 4, axis=0),  # microaggregation-like repeats
        xs + rng.normal(scale=0.05, size=xs.shape),
        xs + rng.normal(scale=5.0, size=xs.shape),
    ]
    YS = np.ascontiguousarray(np.stack(runs))
    pr = _rl_numeric_bulk(xs, YS, lambda: RK._kdtree(xs))
    for r in range(len(runs)):
        ref = RK._rl_numeric(xs, np.ascontiguousarray(YS[r]), lambda: RK._kdtree(xs))
        assert np.array_equal(pr[r], ref), r
    assert 0 < pr[0].sum() < n and pr[3].sum() < pr[2].sum()


def test_noisy_cells_skip_the_per_run_pipeline(census, monkeypatch):
    """After the baseline, every noisy ir-dp cell is drawn in bulk: run_prepared runs once per
    k (the noise-free baseline) and never for a noisy repetition."""
    from dpstudio.engine import sweeps

    calls = []
    real = sweeps.run_prepared
    monkeypatch.setattr(
        sweeps, "run_prepared", lambda *a, **kw: calls.append(kw.get("epsilon")) or real(*a, **kw)
    )
    cols = list(census.columns)[:5]
    domains = {c: (0.0, 1.5 * float(census[c].max())) for c in cols}
    pts = list(
        engine.sweep(
            census[cols],
            "ir-dp",
            {c: "eps-quasi" for c in cols},
            domains,
            ks=[2, 7],
            epsilons=[0.5, 5.0],
            repeats=3,
            seed=11,
        )
    )
    assert calls == [None, None]
    assert [p.repeats for p in pts] == [1, 3, 3, 1, 3, 3]
    # and a noisy point still equals a separate run (the bulk draws are the run's draws)
    p = pts[5]
    res = engine.protect(
        census[cols],
        "ir-dp",
        {c: "eps-quasi" for c in cols},
        domains,
        k=7,
        epsilon=5.0,
        shuffle=False,
        seed=point_rng(11, 1, 2, 2),
    )
    ev = engine.evaluate(
        res.aligned_original(), res.data, res.protected_attributes, measures=("sse", "rl"), result=res
    )
    assert p.epsilon == 5.0 and all(p.runs[2][key] == ev[key] for key in ("sse_raw", "sse_normalized", "rl"))


def test_staircase_sweeps_keep_the_per_run_path(census):
    """No bulk staircase sampler: such cells run repetition by repetition (same results)."""
    cols = list(census.columns)[:3]
    domains = {c: (0.0, 1.5 * float(census[c].max())) for c in cols}
    pts = list(
        engine.sweep(
            census[cols],
            "ir-dp",
            {c: "eps-quasi" for c in cols},
            domains,
            ks=[3],
            epsilons=[1.0],
            repeats=2,
            seed=3,
            noise="staircase",
        )
    )
    res = engine.protect(
        census[cols],
        "ir-dp",
        {c: "eps-quasi" for c in cols},
        domains,
        k=3,
        epsilon=1.0,
        shuffle=False,
        noise="staircase",
        seed=point_rng(3, 0, 1, 1),
    )
    ev = engine.evaluate(
        res.aligned_original(), res.data, res.protected_attributes, measures=("sse", "rl"), result=res
    )
    assert pts[1].runs[1]["rl"] == ev["rl"] and pts[1].runs[1]["sse_raw"] == ev["sse_raw"]
