"""Tests of ``mdav`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings

from dpstudio import engine
from tests.engine._order import protect_in_order
from tests.engine.methods._numeric import (
    kquasi_frames,
)


@settings(max_examples=40, deadline=None)
@given(kquasi_frames())
def test_mdav_output_is_k_anonymous(data):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    res = protect_in_order(df, "mdav", {c: "k-quasi" for c in q}, k=k, seed=0)
    counts = res.data.groupby(q).size()
    assert counts.min() >= k
    assert res.data["conf"].equals(df["conf"])
    # centroids preserve attribute means
    assert np.allclose(res.data[q].mean(), df[q].mean())


def test_mdav_constant_column_does_not_crash():
    df = pd.DataFrame({"a": np.ones(20), "b": np.arange(20.0)})
    res = protect_in_order(df, "mdav", {"a": "k-quasi", "b": "k-quasi"}, k=4)
    assert res.data.groupby(["a", "b"]).size().min() >= 4
    assert np.all(res.data["a"] == 1.0)


@pytest.mark.parametrize("distance", ["standardized", "raw", "domain"])
def test_mdav_distance_options_k_anonymous(census, distance):
    cols = ["FEDTAX", "FICA", "INTVAL"]
    doms = {c: (0.0, 1.5 * float(census[c].max())) for c in cols}
    res = protect_in_order(census, "mdav", {c: "k-quasi" for c in cols}, doms, k=7, distance=distance)
    assert res.data.groupby(cols).size().min() >= 7


def test_mdav_distance_changes_clusters_and_domain_needs_bounds(census):
    cols = ["FEDTAX", "INTVAL"]
    roles = {c: "k-quasi" for c in cols}
    a = protect_in_order(census, "mdav", roles, k=5, distance="standardized").data
    b = protect_in_order(census, "mdav", roles, k=5, distance="raw").data
    assert not a[cols].equals(b[cols])
    with pytest.raises(engine.ParameterError, match="domain"):
        protect_in_order(census, "mdav", roles, k=5, distance="domain")
