"""Tests of ``idp-ls`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.algorithms import microaggregation as MA
from tests.engine.methods._numeric import (
    _per_cluster,
    _residuals,
    middle_data,
)


def test_idp_ls_scale_per_cluster():
    df, roles, doms = middle_data(20_000, 1)
    k, eps = 10, 20.0
    runs, _ = _residuals("idp-ls", df, roles, doms, k=k, epsilon=eps)
    _, R = runs[0]
    x = df["a0"].to_numpy()
    L = MA.individual_ranking(x[:, None], k)[:, 0]
    per = _per_cluster(R[:, 0], L)
    nc = per.size
    mn = np.full(nc, np.inf)
    mx = np.full(nc, -np.inf)
    np.minimum.at(mn, L, x)
    np.maximum.at(mx, L, x)
    ls = np.maximum(1000.0 - mn, mx - 0.0) / np.bincount(L)
    z = per / (ls / eps)
    assert z.var() == pytest.approx(2.0, rel=0.1)
