"""Automatic hierarchies (dpstudio.engine.hierarchies.build) and the real ARX Adult hierarchies."""

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.build import (
    auto_hierarchy,
    date_hierarchy,
    factorize_strings,
    flat_hierarchy,
    interval_hierarchy,
    masking_hierarchy,
    value_strings,
)
from dpstudio.engine.hierarchies.hierarchy import Hierarchy, load_hierarchy
from tests.conftest import shared_path

ADULT_COLS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]


def _int_range(label):
    a, b = label.split("-") if not label.startswith("-") else (None, None)
    return int(a), int(b)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-500, 500), min_size=1, max_size=60), st.sampled_from([None, 1, 3, 5, 10]))
def test_integer_intervals_contain_values_and_nest(vals, width):
    s = pd.Series(vals)
    h = interval_hierarchy(s, width=width)
    assert set(h.leaves) == {str(v) for v in vals}
    assert h.table[0, -1] == "*" and len(set(h.table[:, -1])) == 1
    for row in h.table:
        v = int(row[0])
        prev = None
        for lab in row[1:-1]:
            m = re.fullmatch(r"(-?\d+)-(-?\d+)", lab)
            assert m, lab
            a, b = int(m.group(1)), int(m.group(2))
            assert a <= v <= b
            if prev is not None:  # each level's interval contains the previous one
                assert a <= prev[0] and prev[1] <= b
            prev = (a, b)
    # widths double from level to level
    if h.height > 3:
        m1 = re.fullmatch(r"(-?\d+)-(-?\d+)", h.table[0, 1])
        m2 = re.fullmatch(r"(-?\d+)-(-?\d+)", h.table[0, 2])
        w1 = int(m1.group(2)) - int(m1.group(1)) + 1
        w2 = int(m2.group(2)) - int(m2.group(1)) + 1
        assert w2 == 2 * w1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=40))
def test_float_intervals_contain_values(vals):
    """Every label contains its value: half-open [a, b) for real values, closed 'a-b' when
    all values are whole numbers (e.g. [0.0, 1.0] gives '0-0', '1-1')."""
    h = interval_hierarchy(pd.Series(vals))
    for row in h.table:
        v = float(row[0])
        for lab in row[1:-1]:
            m = re.fullmatch(r"\[(\S+), (\S+)\)", lab)
            if m:
                assert float(m.group(1)) - 1e-9 <= v < float(m.group(2)) + 1e-9
                continue
            m = re.fullmatch(r"(-?[\d.]+)-(-?[\d.]+)", lab)
            assert m, lab
            assert float(v).is_integer()
            assert float(m.group(1)) <= v <= float(m.group(2))


def test_tiny_negative_value_does_not_break_the_anchor():
    """Regression (found by hypothesis in CI): lo = -2.2e-308 made lo/W underflow to -0.0,
    so the anchor landed above the smallest value."""
    h = interval_hierarchy(pd.Series([1.0, -2.2250738585072014e-308]))
    assert h.height >= 2


def test_fixed_width_anchor_and_levels():
    h = interval_hierarchy(pd.Series([17, 23, 38, 61]), width=5)
    assert h.table[0].tolist() == ["17", "15-19", "10-19", "0-19", "0-39", "*"]
    h2 = interval_hierarchy(pd.Series([17, 23, 38, 61]), width=5, levels=2, start=15)
    assert h2.table[0].tolist() == ["17", "15-19", "15-24", "*"]
    with pytest.raises(ParameterError, match="width"):
        interval_hierarchy(pd.Series([1, 2]), width=-1)
    with pytest.raises(ParameterError, match="start"):
        interval_hierarchy(pd.Series([1, 2]), width=1, start=5)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 200), min_size=4, max_size=80), st.integers(1, 4))
def test_quantile_bins_nest_and_cover(vals, levels):
    h = interval_hierarchy(pd.Series(vals), method="quantile", levels=levels)
    assert h.height == levels + 2
    for row in h.table:
        v = int(row[0])
        for lab in row[1:-1]:
            parts = lab.split("-")
            a, b = (int(parts[0]), int(parts[-1])) if len(parts) == 2 else (int(lab), int(lab))
            assert a <= v <= b
    # level 1 has about equal masses: no bin holds more than half the records when levels >= 2
    if levels >= 2 and len(set(vals)) > 8:
        lab1 = pd.Series(h.generalize(pd.Series(vals).astype(str), 1))
        assert lab1.value_counts().max() <= len(vals) * 0.75


def test_dates_day_month_year_multi_year():
    s = pd.Series(["2020-01-05", "1999-12-31", "2021-06-01", "2020-02-29"])
    h = date_hierarchy(s)
    row = dict(zip(h.table[:, 0], h.table.tolist()))["2020-02-29"]
    assert row[1] == "2020-02" and row[2] == "2020" and row[3] == "2020-2021" and row[-1] == "*"
    for r in h.table:
        y = int(r[0][:4])
        for lab in r[3:-1]:
            a, b = map(int, lab.split("-"))
            assert a <= y <= b and (b - a + 1) & (b - a) == 0  # span is a power of two
    dt = pd.Series(pd.to_datetime(["2001-03-04", "2002-05-06"]))
    assert auto_hierarchy(dt).table[0, 1] == "2001-03"
    with pytest.raises(InputError, match="not a date"):
        date_hierarchy(pd.Series(["2020-01-01", "banana"]))


def test_masking_codes():
    h = masking_hierarchy(pd.Series(["12345", "12399", "22340"]))
    assert h.table[0].tolist() == ["12345", "1234*", "123**", "12***", "1****", "*"]
    assert auto_hierarchy(pd.Series(["12345", "54321", "11111"])).source == "auto:masking"
    mixed = masking_hierarchy(pd.Series(["123", "45"]))  # different lengths: valid tree
    assert mixed.table[:, -1].tolist() == ["*", "*"]


def test_flat_and_auto_kinds():
    h = flat_hierarchy(pd.Series(["b", "a", "b"]))
    assert h.table.tolist() == [["a", "*"], ["b", "*"]]
    assert auto_hierarchy(pd.Series([1.5, 2.5])).source == "auto:intervals"
    assert auto_hierarchy(pd.Series(["x", "y"])).source == "auto:flat"
    assert auto_hierarchy(pd.Series([True, False])).source == "auto:flat"
    assert auto_hierarchy(pd.Series(["2020-01-01", "2021-01-01"])).source == "auto:dates"
    assert auto_hierarchy(pd.Series([1, 2, 3]), kind="quantiles").source == "auto:intervals"
    with pytest.raises(ParameterError, match="kind"):
        auto_hierarchy(pd.Series([1]), kind="nope")


def test_missing_values_refused():
    with pytest.raises(InputError, match="row 2"):
        interval_hierarchy(pd.Series([1.0, np.nan]), name="x")
    with pytest.raises(InputError, match="missing"):
        flat_hierarchy(pd.Series(["a", None]), name="x")


def test_canonical_strings():
    codes, labels = factorize_strings(pd.Series([39.0, 40.5, 39.0]))
    assert labels.tolist() == ["39", "40.5"] and codes.tolist() == [0, 1, 0]
    assert value_strings(pd.Series([" a", "a", None])).tolist() == ["a", "a", None]


def test_roundtrip_arx(tmp_path):
    h = interval_hierarchy(pd.Series(range(17, 91)), width=5)
    p = tmp_path / "age.csv"
    h.write_arx(p)
    h2 = load_hierarchy(str(p), "age")
    assert (h2.table == h.table).all()


@pytest.mark.parametrize("col", ADULT_COLS)
def test_real_adult_hierarchies_load_and_cover(col):
    data = pd.read_csv(shared_path("adult", "adult.csv"), sep=";")
    h = load_hierarchy(str(shared_path("adult", "hierarchies", f"adult_hierarchy_{col}.csv")), col)
    assert isinstance(h, Hierarchy) and h.height >= 2
    h.check_values(data[col], col)  # every value of the column is a leaf
