"""Tests of ``mdav-swap`` (moved from test_numeric_methods.py; assertions unchanged)."""

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
def test_mdav_swap_preserves_multisets_jointly(data, seed):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    res = protect_in_order(df, "mdav-swap", {c: "k-quasi" for c in q}, k=k, seed=seed)
    out = res.data
    # the multiset of k-quasi tuples (hence each column's multiset) is unchanged
    assert sorted(map(tuple, out[q].to_numpy())) == sorted(map(tuple, df[q].to_numpy()))
    for c in q:
        assert np.array_equal(np.sort(out[c].to_numpy()), np.sort(df[c].to_numpy()))
        assert out[c].mean() == pytest.approx(df[c].mean())
        assert out[c].var() == pytest.approx(df[c].var())
    # every record receives a tuple from its own MDAV cluster
    lab = MA.mdav(df[q].to_numpy(), k)
    for c_ in range(int(lab.max()) + 1):
        members = np.flatnonzero(lab == c_)
        got = sorted(map(tuple, out[q].to_numpy()[members]))
        assert got == sorted(map(tuple, df[q].to_numpy()[members]))
    assert out["conf"].equals(df["conf"])
