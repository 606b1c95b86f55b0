"""A sweep shares work across k, ε and repetitions (cached clustering, output grids, the
original's matrices, the noise-parameter descriptions): every point must still equal a separate
``protect`` + ``evaluate`` with the same point stream, bit for bit (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio import engine
from dpstudio.engine.random import point_rng


def _setup(census):
    cols = list(census.columns)[:6]
    df = census[cols]
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    return df, {c: "eps-quasi" for c in cols}, domains


@pytest.mark.parametrize("method", ["ir-dp", "idp-ls"])
def test_sweep_points_equal_separate_runs(census, method):
    df, roles, domains = _setup(census)
    ks, epss, reps, seed = [3, 20], [0.1, 10.0], 2, 7
    pts = list(
        engine.sweep(
            df, method, roles, domains, ks=ks, epsilons=epss, repeats=reps, seed=seed, measures=("sse", "rl")
        )
    )
    assert len(pts) == len(ks) * (len(epss) + 1)
    checked = 0
    for pt in pts:
        if pt.epsilon is None:
            continue
        ki, ei = ks.index(pt.k), epss.index(pt.epsilon) + 1  # index 0 is the baseline
        for r in range(reps):
            res = engine.protect(
                df,
                method,
                roles,
                domains,
                k=pt.k,
                epsilon=pt.epsilon,
                shuffle=False,
                seed=point_rng(seed, ki, ei, r),
            )
            ev = engine.evaluate(
                res.aligned_original(), res.data, res.protected_attributes, measures=("sse", "rl"), result=res
            )
            for key in ("sse_raw", "sse_normalized", "rl"):
                assert pt.runs[r][key] == ev[key], (pt.k, pt.epsilon, r, key)
            checked += 1
    assert checked == len(ks) * len(epss) * reps


def test_repeated_protect_with_shared_cache_equals_fresh(census):
    """The output-grid cache a sweep keeps in Job.cache gives the same release as a fresh run."""
    df, roles, domains = _setup(census)
    prep = engine.prepare(df, "ir-dp", roles, domains, k=5, epsilon=1.0)
    cache: dict = {}
    first = engine.run_prepared(prep, rng=np.random.default_rng(3), cache=cache)
    assert any(isinstance(k, tuple) and k[0] == "noise.grid" for k in cache)
    again = engine.run_prepared(prep, rng=np.random.default_rng(3), cache=cache)
    fresh = engine.run_prepared(prep, rng=np.random.default_rng(3))
    assert again.data.equals(fresh.data) and first.data.equals(fresh.data)
    assert again.info == fresh.info


def test_sweep_evaluates_through_the_array_fast_path(census, monkeypatch):
    """After the first run, SSE + RL of an all-numeric release are computed from arrays (the
    points above prove they are equal); the full evaluate runs once per sweep."""
    from dpstudio.engine.measures import repeated

    calls = []
    real = repeated.evaluate
    monkeypatch.setattr(repeated, "evaluate", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    df, roles, domains = _setup(census)
    pts = list(
        engine.sweep(
            df, "ir-dp", roles, domains, ks=[3, 5], epsilons=[1.0], repeats=3, seed=1, measures=("sse", "rl")
        )
    )
    assert len(calls) == 1
    assert all(set(r) == {"sse_raw", "sse_normalized", "rl", "warnings"} for p in pts for r in p.runs)


def test_sweep_fast_path_keeps_evaluate_warnings(census):
    """A constant attribute makes evaluate warn (scale 1): such sweeps keep the full evaluation."""
    df, roles, domains = _setup(census)
    df = df.assign(**{df.columns[0]: 5.0})
    domains[df.columns[0]] = (0.0, 10.0)
    pts = list(
        engine.sweep(
            df, "ir-dp", roles, domains, ks=[3], epsilons=[1.0], repeats=2, seed=1, measures=("sse", "rl")
        )
    )
    assert all(any("constant" in w for w in r["warnings"]) for p in pts for r in p.runs)
