"""Tests of ``idp-cbls`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.api import prepare
from dpstudio.engine.errors import ParameterError
from tests.engine._order import protect_in_order, run_prepared_in_order
from tests.engine.methods._numeric import (
    _cbls_centroid,
    _per_cluster,
    census_setup,
)


def test_idp_cbls_scale_and_preprocessed_centroid():
    rng = np.random.default_rng(4)
    x = rng.uniform(400, 600, 20_000)
    df = pd.DataFrame({"a0": x})
    k, eps = 5, 1.0
    prep = prepare(
        df, "idp-cbls", {"a0": "eps-quasi"}, {}, k=k, epsilon=eps, precision={"a0": 1e-6}
    )  # no domain: the output grid must be declared
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None).data["a0"].to_numpy()
    L = MA.individual_ranking(x[:, None], k)[:, 0]
    nc = int(L.max()) + 1
    # pre-processed centroid, cluster by cluster (reference, clusters of exactly k here)
    order = np.argsort(x, kind="stable")
    xs = x[order].reshape(nc, k)
    pre = xs.copy()
    pre[:, 0] = xs[:, 1]
    pre[:, -1] = xs[:, -2]
    assert np.allclose(_per_cluster(base, L), pre.mean(axis=1))
    e_up = (xs[:, -1] - xs[:, 1]) + (xs[:, 2] - xs[:, 1]) + (xs[:, -1] - xs[:, -2])
    e_down = (xs[:, -2] - xs[:, 0]) + (xs[:, -2] - xs[:, -3]) + (xs[:, 1] - xs[:, 0])
    ls = np.maximum(e_up, e_down) / k
    res = run_prepared_in_order(prep, rng=np.random.default_rng(1))
    per = _per_cluster(res.data["a0"].to_numpy() - base, L)
    assert (per / (ls / eps)).var() == pytest.approx(2.0, rel=0.1)
    assert "domain_width" not in res.info["noise_per_attribute"]["a0"]
    assert res.info["noise_per_attribute"]["a0"]["clamped"] is False


def test_cbls_engine_matches_reference_formula():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 50, 37).astype(float)
    df = pd.DataFrame({"a": x})
    prep = prepare(df, "idp-cbls", {"a": "eps-quasi"}, {"a": (0, 100)}, k=4, epsilon=1.0)
    res = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None)
    L = MA.individual_ranking(x[:, None], 4)[:, 0]
    for c in range(int(L.max()) + 1):
        members = np.flatnonzero(L == c)
        assert np.allclose(res.data["a"].to_numpy()[members], _cbls_centroid(x[members]))


def test_idp_cbls_needs_k_at_least_3(census):
    roles, doms = census_setup(census)
    with pytest.raises(ParameterError):
        protect_in_order(census, "idp-cbls", roles, doms, k=2, epsilon=1.0, seed=1)
