"""Tests of ``ir-swap`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.algorithms import microaggregation as MA
from tests.engine._order import protect_in_order
from tests.engine.methods._numeric import (
    kquasi_frames,
)


@settings(max_examples=40, deadline=None)
@given(kquasi_frames(), st.integers(0, 1000))
def test_ir_swap_preserves_each_column_multiset(data, seed):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    roles = {c: "confidential" for c in q + ["conf"]}
    res = protect_in_order(df, "ir-swap", roles, k=k, seed=seed)
    for c in roles:
        a, b = res.data[c].to_numpy(), df[c].to_numpy()
        assert np.array_equal(np.sort(a), np.sort(b))
        assert a.mean() == pytest.approx(b.mean())
        assert a.var() == pytest.approx(b.var())
        # each value stays inside its individual-ranking group
        L = MA.individual_ranking(b[:, None], k)[:, 0]
        for g in range(int(L.max()) + 1):
            m = L == g
            assert np.array_equal(np.sort(a[m]), np.sort(b[m]))
