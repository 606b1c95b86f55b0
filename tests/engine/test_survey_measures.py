"""Issue 10 measures: sdcMicro's IL1s and eigenvalue measure (hand-computed and against a
literal transcription of sdcMicro's dUtility formulas), TV / Hellinger properties, suppressed
cells, classification utility (seeded, original vs original), roles and types."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.measures import categorical as C
from dpstudio.engine.measures.classification import classification_utility
from dpstudio.engine.measures.utility import eigen_utility, il1s
from dpstudio.engine.roles import Role, normalize_roles, normalize_types, suggest_types

# --------------------------------------------------------------------------- IL1s, eigen


def test_il1s_hand_computed():
    x = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [2.0, 4, 6, 8]})
    y = pd.DataFrame({"a": [1.0, 2, 3, 5], "b": [2.0, 4, 6, 8]})
    # |4 - 5| / (√2 · sd(a)), sd(a) = √(5/3); b unchanged
    want = 1 / (math.sqrt(2) * math.sqrt(5 / 3))
    got = il1s(x, y, ["a", "b"])
    assert got["il1s"] == pytest.approx(want, rel=1e-12)
    assert got["il1s_mean"] == pytest.approx(want / 8, rel=1e-12)


def test_eigen_hand_computed():
    # corr(a, b) = 0.8 -> eigenvalues 1.8, 0.2; released corr 0.6 -> 1.6, 0.4
    x = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [1.0, 3, 2, 4]})
    y = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [2.0, 1, 4, 3]})
    assert eigen_utility(x, y, ["a", "b"]) == pytest.approx(0.2 / 1.8 + 0.2 / 0.2, rel=1e-12)
    assert eigen_utility(x, x, ["a", "b"]) == pytest.approx(0.0, abs=1e-12)


def _sdcmicro_il1s(x: np.ndarray, xm: np.ndarray) -> float:
    """sdcMicro dUtilityWORK(method = "IL1s"), transcribed: a[[i]] <- abs(x[[i]] - xm[[i]]) /
    (sd(x[[i]], na.rm = TRUE) * sqrt(2)); sum(a, na.rm = TRUE)."""
    total = 0.0
    for i in range(x.shape[1]):
        total += np.sum(np.abs(x[:, i] - xm[:, i]) / (np.std(x[:, i], ddof=1) * np.sqrt(2)))
    return total


def _sdcmicro_eigen(x: np.ndarray, xm: np.ndarray) -> float:
    """sdcMicro dUtilityWORK(method = "eigen"): e <- eigen(var(scale(x)))$values (decreasing);
    sum(abs(e1 - e2) / e1)."""

    def ev(m):
        s = (m - m.mean(axis=0)) / m.std(axis=0, ddof=1)
        return np.sort(np.linalg.eig(np.cov(s, rowvar=False))[0].real)[::-1]

    e1, e2 = ev(x), ev(xm)
    return float(np.sum(np.abs(e1 - e2) / e1))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 5), st.floats(0.01, 3.0))
def test_il1s_and_eigen_match_sdcmicro_formulas(seed, p, noise):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(50, p)) @ rng.normal(size=(p, p))
    xm = x + rng.normal(scale=noise, size=x.shape)
    cols = [f"v{i}" for i in range(p)]
    X, XM = pd.DataFrame(x, columns=cols), pd.DataFrame(xm, columns=cols)
    assert il1s(X, XM, cols)["il1s"] == pytest.approx(_sdcmicro_il1s(x, xm), rel=1e-10)
    assert eigen_utility(X, XM, cols) == pytest.approx(_sdcmicro_eigen(x, xm), rel=1e-8, abs=1e-10)


def test_evaluate_reaches_il1s_and_eigen():
    x = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [1.0, 3, 2, 4]})
    y = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [2.0, 1, 4, 3]})
    out = engine.evaluate(x, y, ["a", "b"], measures=("il1s", "eigen"))
    assert out["eigen"] == pytest.approx(10 / 9) and out["il1s"] > 0
    with pytest.raises(ParameterError, match="Unknown measure"):
        engine.evaluate(x, y, ["a"], measures=("nope",))


# --------------------------------------------------------------------------- TV, Hellinger

cats = st.lists(st.one_of(st.integers(0, 4), st.none()), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(cats, cats, cats)
def test_frequency_distances_properties(a, b, c):
    n = min(len(a), len(b), len(c))
    X = pd.DataFrame({"k": a[:n], "j": c[:n]})
    Y = pd.DataFrame({"k": b[:n], "j": list(reversed(c[:n]))})
    same = C.frequency_distances(X, X, ["k", "j"])
    assert all(v == 0 for v in same["tv"].values()) and all(v == 0 for v in same["hellinger"].values())
    d1 = C.frequency_distances(X, Y, ["k", "j"])
    d2 = C.frequency_distances(Y, X, ["k", "j"])
    for m in ("tv", "hellinger"):
        for name, v in d1[m].items():
            assert 0 <= v <= 1 + 1e-12
            assert v == pytest.approx(d2[m][name], abs=1e-12)  # symmetric
        assert d1[m]["j"] == pytest.approx(0, abs=1e-12)  # same multiset of values
    # Hellinger and TV bound each other: H² ≤ TV ≤ √2·H
    for name in d1["tv"]:
        h, t = d1["hellinger"][name], d1["tv"][name]
        assert h * h <= t + 1e-12 and t <= math.sqrt(2) * h + 1e-12


def test_frequency_distance_hand_computed_and_suppression():
    x = pd.DataFrame({"s": [1, 1, 2, 2]})
    y = pd.DataFrame({"s": [1.0, np.nan, 2.0, 2.0]})  # one value suppressed (float column)
    d = C.frequency_distances(x, y, ["s"])
    # p = (½, ½, 0), q = (¼, ½, ¼) over (1, 2, missing)
    assert d["tv"]["s"] == pytest.approx(0.25)
    h = math.sqrt(0.5 * ((math.sqrt(0.5) - 0.5) ** 2 + 0 + 0.25))
    assert d["hellinger"]["s"] == pytest.approx(h)
    s = C.suppressed_cells(x, y, ["s"])
    assert s == {"suppressed_cells": 1, "suppressed_share": 0.25, "suppressed_per_key": {"s": 1}}


def test_disjoint_tables_are_at_distance_one():
    x = pd.DataFrame({"s": ["a", "a"]})
    y = pd.DataFrame({"s": ["b", "b"]})
    d = C.frequency_distances(x, y, ["s"])
    assert d["tv"]["s"] == pytest.approx(1) and d["hellinger"]["s"] == pytest.approx(1)


# --------------------------------------------------------------------------- classification


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = rng.integers(0, 3, n)
    y = ((a + 0.8 * b + rng.normal(scale=0.5, size=n)) > 1).astype(int)
    return pd.DataFrame({"a": a, "b": b, "income": a * 1000 + 5000, "y": y})


def test_classification_is_seeded_and_original_vs_original_is_equal():
    df = _frame()
    r1 = classification_utility(df, df, "y", ["a", "b"], seed=7)
    r2 = classification_utility(df, df, "y", ["a", "b"], seed=7)
    assert r1 == r2
    assert r1["f1_protected"] == r1["f1_original"] and r1["f1_ratio"] == 1.0
    assert r1["f1_macro_original"] > 0.7  # the signal is learnt
    assert r1["train_records"] == 396 and r1["test_records"] == 204
    # a release with the features destroyed predicts worse
    noisy = df.copy()
    noisy["a"] = np.random.default_rng(1).permutation(noisy["a"].to_numpy())
    noisy["b"] = np.random.default_rng(2).permutation(noisy["b"].to_numpy())
    r3 = classification_utility(df, noisy, "y", ["a", "b"], seed=7)
    assert r3["f1_ratio"] < 0.9


def test_classification_binarises_a_numeric_class():
    df = _frame()
    r = classification_utility(df, df, "income", ["b", "y"], binarise="median", seed=1)
    assert len(r["classes"]) == 2 and all("income" in c for c in r["classes"])
    r = classification_utility(df, df, "income", ["b", "y"], binarise=5000, seed=1)
    assert any("5000" in c for c in r["classes"])
    with pytest.raises(ParameterError, match="binarise"):
        classification_utility(df, df, "income", ["b"], binarise="top")
    out = engine.evaluate(
        df, df, ["a"], measures=("classification",), class_attribute="y", features=["a", "b"]
    )
    assert out["f1_ratio"] == 1.0
    with pytest.raises(ParameterError, match="class attribute"):
        engine.evaluate(df, df, ["a"], measures=("classification",))


# --------------------------------------------------------------------------- roles, types


def test_weight_and_household_roles():
    r = normalize_roles(["w", "h", "x"], {"w": "weight", "h": "household"})
    assert r["w"] is Role.WEIGHT and r["h"] is Role.HOUSEHOLD
    assert Role.WEIGHT.label == "sampling weight" and Role.HOUSEHOLD.label == "household id"
    df = pd.DataFrame({"x": [1.0, 2, 3, 4, 5, 6], "w": [10.0] * 6, "h": [1, 1, 2, 2, 3, 3]})
    res = engine.protect(df, "mdav", {"x": "k-quasi", "w": "weight", "h": "household"}, k=3)
    assert list(res.data.columns) == ["x", "w"]
    pd.testing.assert_series_equal(res.data["w"], df["w"])
    assert "sampling weight w is released unchanged" in res.guarantee
    assert "household id h is not released" in res.guarantee
    with pytest.raises(ParameterError, match="Only one column can be the sampling weight"):
        engine.protect(df, "mdav", {"x": "k-quasi", "w": "weight", "h": "weight"}, k=3)


def test_types_are_validated_and_suggested():
    assert normalize_types(["a", "b"], {"a": "nominal", "b": "ORDINAL"}) == {
        "a": "categorical",
        "b": "ordinal",
    }
    with pytest.raises(ParameterError, match="Column 'a': unknown type"):
        normalize_types(["a"], {"a": "colour"})
    with pytest.raises(ParameterError, match="'zz'"):
        normalize_types(["a"], {"zz": "numeric"})
    df = pd.DataFrame(
        {
            "SEX": [1, 2, 1, 2],
            "AGE": np.arange(40, 80, 10),
            "W": [1.5, 2.5, 3.5, 4.5],
            "R": [3.0, 4.0, 3.0, 4.0],
            "D": pd.to_datetime(["2020-01-01"] * 4),
            "T": list("abab"),
            "WIDE": np.arange(100, 104),
        }
    )
    sug = suggest_types(df, max_categories=3)
    # whole numbers with many values: 'integer' (a suggestion only, issue 21 §3 N2)
    assert sug == {
        "SEX": "categorical",
        "AGE": "integer",
        "W": "numeric",
        "R": "categorical",
        "D": "date",
        "T": "categorical",
        "WIDE": "integer",
    }
