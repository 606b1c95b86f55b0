"""The hierarchy builder's engine side (issue 24): custom breaks, category groups, the per-level
preview; properties and hostile input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.errors import DPStudioError, InputError, ParameterError
from dpstudio.engine.hierarchies.build import (
    breaks_hierarchy,
    interval_hierarchy,
    level_counts,
    level_table,
    mapping_hierarchy,
)
from dpstudio.engine.hierarchies.hierarchy import Hierarchy


@settings(max_examples=25, deadline=None)
@given(
    vals=st.lists(st.integers(-50, 150), min_size=1, max_size=300),
    breaks=st.lists(st.integers(-60, 160), min_size=1, max_size=8),
    k=st.integers(1, 30),
)
def test_breaks_and_preview_properties(vals, breaks, k):
    s = pd.Series(vals)
    h = breaks_hierarchy(s, breaks)
    b = sorted(set(breaks))
    bins = {int(np.searchsorted(b, v, side="right")) for v in vals}
    if len(bins) == 1:  # one interval holds every value: it says no more than '*' (dropped)
        assert h.height == 2
        return
    # level 1: every value in the interval its breaks say
    for v, lab in zip(h.table[:, 0], h.table[:, 1]):
        v = int(v)
        i = int(np.searchsorted(b, v, side="right"))
        if i == 0:
            assert lab == f"<{b[0]}"
        elif i == len(b):
            assert lab == f"≥{b[-1]}"
        else:
            assert lab == f"{b[i - 1]}-{b[i] - 1}"
    assert set(h.table[:, -1]) == {"*"}
    t = level_table(s, h, k)
    # every level counts every record; groups only merge going up, so the records in groups
    # smaller than k never increase
    for lvl in range(h.height):
        assert int(level_counts(s, h, lvl).sum()) == len(s)
    below = t["records in groups < k"].tolist()
    assert all(a >= b_ for a, b_ in zip(below, below[1:]))
    assert t["groups"].tolist()[-1] == 1
    assert list(t["groups"]) == sorted(t["groups"], reverse=True)


def test_quantile_labels_show_the_values():
    s = pd.Series(np.arange(100))
    h = interval_hierarchy(s, method="quantile", levels=2)
    assert set(h.table[:, 1]) == {"0-49", "50-99"}


def test_mapping_groups():
    s = pd.Series([1.0, 2.0, 3.0, np.nan, 2.0])
    h = mapping_hierarchy(s.dropna(), {"1": "low", "2": "low"})
    assert h.table.tolist() == [["1", "low", "*"], ["2", "low", "*"], ["3", "3", "*"]]
    c = level_counts(s, h, 1)
    assert c.to_dict() == {"low": 3, "3": 1}  # missing values are no leaves


def test_builders_round_trip_through_the_arx_file(tmp_path):
    s = pd.Series([17, 23, 38, 61, 90])
    for h in (breaks_hierarchy(s, [18, 30, 65]), mapping_hierarchy(s.astype(str), {"17": "young"})):
        p = h.write_arx(tmp_path / "h.csv")
        back = Hierarchy.read_arx(p)
        assert back.table.tolist() == h.table.tolist()


@pytest.mark.parametrize(
    "call, err",
    [
        (lambda: breaks_hierarchy(pd.Series([1, 2]), []), ParameterError),
        (lambda: breaks_hierarchy(pd.Series([1, 2]), ["x"]), ParameterError),
        (lambda: breaks_hierarchy(pd.Series([1, 2]), [float("inf")]), ParameterError),
        (lambda: breaks_hierarchy(pd.Series([1, 2]), list(range(2000))), ParameterError),
        (lambda: breaks_hierarchy(pd.Series(["a", "b"]), [1]), InputError),
        (lambda: breaks_hierarchy(pd.Series([], dtype=float), [1]), InputError),
        (lambda: mapping_hierarchy(pd.Series(["a"]), {"a": "  "}), ParameterError),
        (lambda: level_table(pd.Series([5]), breaks_hierarchy(pd.Series([1, 2]), [2]), 2), InputError),
    ],
)
def test_hostile(call, err):
    with pytest.raises(err) as e:
        call()
    assert isinstance(e.value, DPStudioError) and "\n" not in str(e.value)
