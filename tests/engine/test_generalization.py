"""OLA and Mondrian (dpstudio.engine.algorithms.ola, .mondrian): k-anonymity of every output, OLA's optimum
against brute force, the suppression limit, bad input, determinism."""

import itertools
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.algorithms.generalization import verify_k_anonymity
from dpstudio.engine.algorithms.mondrian import mondrian
from dpstudio.engine.algorithms.ola import ola
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.build import interval_hierarchy
from dpstudio.engine.hierarchies.hierarchy import Hierarchy
from tests.conftest import shared_path

# a small categorical hierarchy (3 levels) for "c"
C_LEAVES = ["a1", "a2", "a3", "b1", "b2", "c1"]
C_H = Hierarchy.from_rows([[x, x[0], "*"] for x in C_LEAVES], name="c")
S_H = Hierarchy.from_rows([["M", "*"], ["F", "*"]], name="s")


def _frame(seed, n):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "c": rng.choice(C_LEAVES, n, p=[0.3, 0.2, 0.1, 0.2, 0.15, 0.05]),
            "s": rng.choice(["M", "F"], n),
        }
    )


def _hiers(df):
    return {"age": interval_hierarchy(df["age"], width=5), "c": C_H, "s": S_H}


def _class_sizes(labels, keep):
    frame = pd.DataFrame({c: pd.Series(v, dtype=object)[keep] for c, v in labels.items()})
    return frame.value_counts().to_numpy()


def _brute_force(df, cols, hs, k, suppression, loss="precision"):
    """Every lattice node, classes from the generalised labels (independent of OLA's code:
    no lattice search, no roll-ups, labels generalised from the hierarchy tables)."""
    n = len(df)
    max_sup = int(np.floor(suppression * n + 1e-9))
    best = np.inf
    heights = [hs[c].height for c in cols]
    codes = {
        (c, l): pd.factorize(pd.Series(hs[c].generalize(df[c].astype(str), l)))[0]
        for c in cols
        for l in range(hs[c].height)
    }
    for lv in itertools.product(*[range(h) for h in heights]):
        key = np.zeros(n, dtype=np.int64)
        for c, l in zip(cols, lv):
            key = key * (n + 1) + codes[(c, l)]
        _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        size = cnt[inv]
        sup = int((size < k).sum())
        if sup > max_sup:
            continue
        if loss == "precision":
            base = np.mean([l / (h - 1) if h > 1 else 1.0 for l, h in zip(lv, heights)])
            v = (1 - sup / n) * base + sup / n
        else:
            kept = cnt[cnt >= k].astype(float)
            v = (np.sum(kept**2) + n * sup) / n**2
        best = min(best, v)
    return best


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 10_000), st.integers(20, 120), st.integers(2, 8), st.sampled_from([0.0, 0.02, 0.05, 0.2])
)
def test_ola_is_optimal_and_k_anonymous(seed, n, k, suppression):
    df = _frame(seed, n)
    hs = _hiers(df)
    cols = ["age", "c", "s"]
    res = ola(df, cols, k, hierarchies=hs, suppression=suppression)
    assert res.n_suppressed <= int(np.floor(suppression * n + 1e-9))
    keep = ~res.suppressed
    sizes = _class_sizes(res.labels, keep)
    assert sizes.min() >= k
    assert res.min_class_size >= k
    assert res.loss == pytest.approx(_brute_force(df, cols, hs, k, suppression), abs=1e-12)
    # labels are the hierarchy labels at the chosen levels
    for c in cols:
        exp = hs[c].generalize(df[c].astype(str), res.levels[c])
        assert (res.labels[c][keep] == exp[keep]).all()


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.integers(20, 80), st.integers(2, 6))
def test_ola_pluggable_loss_discernibility(seed, n, k):
    df = _frame(seed, n)
    hs = _hiers(df)
    res = ola(df, ["age", "c"], k, hierarchies=hs, suppression=0.05, loss="discernibility")
    assert res.loss == pytest.approx(_brute_force(df, ["age", "c"], hs, k, 0.05, "discernibility"), abs=1e-12)
    calls = []

    def my_loss(levels, class_sizes, n_suppressed, n_):
        calls.append(levels)
        return float(sum(levels)) + n_suppressed / n_

    res2 = ola(df, ["age", "c"], k, hierarchies=hs, loss=my_loss)
    assert calls and res2.min_class_size >= k


def test_suppression_zero_means_no_suppression():
    df = _frame(1, 200)
    res = ola(df, ["age", "c", "s"], 5, hierarchies=_hiers(df), suppression=0.0)
    assert res.n_suppressed == 0 and res.min_class_size >= 5


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(10, 300), st.integers(2, 10))
def test_mondrian_k_anonymous_and_truthful(seed, n, k):
    if k > n:
        k = n
    df = _frame(seed, n)
    res = mondrian(df, ["age", "c", "s"], k, hierarchies={"c": C_H})
    assert res.n_suppressed == 0
    assert _class_sizes(res.labels, np.ones(n, bool)).min() >= k
    # numeric labels are ranges that contain the value; categorical labels are ancestors
    for v, lab in zip(df["age"], res.labels["age"]):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", lab)
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        assert lo <= v <= hi
    anc = {x: {x, x[0], "*"} for x in C_LEAVES}
    assert all(lab in anc[v] for v, lab in zip(df["c"], res.labels["c"]))
    assert all(lab in (v, "*") for v, lab in zip(df["s"], res.labels["s"]))
    assert 0.0 <= res.loss <= 1.0


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 9))
def test_mondrian_one_numeric_dim_has_classes_below_2k(seed, k):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.permutation(500).astype(float)})  # distinct values
    res = mondrian(df, ["x"], k)
    sizes = res.class_sizes
    assert sizes.min() >= k and sizes.max() <= 2 * k - 1


def test_mondrian_widest_normalised_dimension_is_cut_first():
    # x spans a wide range, y a narrow one: the first cut must be on x
    df = pd.DataFrame({"x": np.r_[np.zeros(10), np.full(10, 100.0)], "y": np.tile([0.0, 1.0], 10)})
    res = mondrian(df, ["x", "y"], 10)
    assert set(res.labels["x"]) == {"0", "100"}
    assert set(res.labels["y"]) == {"0-1"}


def test_k_too_large_for_suppression_limit_names_largest_k():
    # hierarchies whose top is not a single value: full generalisation still has 2 classes
    df = pd.DataFrame({"g": ["a"] * 50 + ["b"] * 3})
    h = Hierarchy.from_rows([["a", "a"], ["b", "b"]], name="g")
    with pytest.raises(ParameterError, match=r"largest k that works .* is 3;") as exc:
        ola(df, ["g"], 10, hierarchies={"g": h}, suppression=0.05)
    assert "5.7%" in str(exc.value) or "5.7 %" in str(exc.value)
    ola(df, ["g"], 10, hierarchies={"g": h}, suppression=0.06)  # the suggested limit works
    assert ola(df, ["g"], 50, hierarchies={"g": h}, suppression=0.06).n_suppressed == 3


def test_value_missing_from_hierarchy():
    df = pd.DataFrame({"c": ["a1", "a2", "zz", "a1"]})
    with pytest.raises(InputError, match=r"'zz' \(row 3\) is not in its hierarchy"):
        ola(df, ["c"], 2, hierarchies={"c": C_H})
    with pytest.raises(InputError, match="'zz'"):
        mondrian(df, ["c"], 2, hierarchies={"c": C_H})


def test_inconsistent_hierarchy_files(tmp_path):
    df = pd.DataFrame({"c": ["a", "b"] * 5})
    p1 = tmp_path / "levels.csv"
    p1.write_text("a;x;*\nb;*\n")
    with pytest.raises(InputError, match="same number of levels"):
        ola(df, ["c"], 2, hierarchies={"c": str(p1)})
    p2 = tmp_path / "parents.csv"
    p2.write_text("a;x;p;*\nb;x;q;*\n")
    with pytest.raises(InputError, match="two parents"):
        ola(df, ["c"], 2, hierarchies={"c": str(p2)})
    with pytest.raises(ParameterError, match="not found"):
        ola(df, ["c"], 2, hierarchies={"c": str(tmp_path / "nope.csv")})


def test_missing_values_and_bad_params():
    df = pd.DataFrame({"c": ["a1", None, "a2", "a1"]})
    with pytest.raises(InputError, match="row 2"):
        ola(df, ["c"], 2, hierarchies={"c": C_H})
    with pytest.raises(InputError, match="row 2"):
        mondrian(pd.DataFrame({"x": [1.0, np.nan, 2.0]}), ["x"], 1)
    ok = _frame(0, 30)
    with pytest.raises(ParameterError, match="suppression"):
        ola(ok, ["age"], 2, suppression=1.5)
    with pytest.raises(ParameterError, match="exceeds"):
        mondrian(ok, ["age"], 31)
    with pytest.raises(ParameterError, match="Hierarchy given"):
        ola(ok, ["age"], 2, hierarchies={"nope": C_H})


def test_deterministic():
    df = _frame(3, 300)
    a = ola(df, ["age", "c", "s"], 4, hierarchies=_hiers(df))
    b = ola(df, ["age", "c", "s"], 4, hierarchies=_hiers(df))
    assert a.node == b.node and (a.class_id == b.class_id).all()
    m1 = mondrian(df, ["age", "c", "s"], 4, hierarchies={"c": C_H})
    m2 = mondrian(df, ["age", "c", "s"], 4, hierarchies={"c": C_H})
    assert all((m1.labels[c] == m2.labels[c]).all() for c in m1.labels)


def test_verify_k_anonymity_catches_violation():
    labels = {"a": np.array(["x", "x", "y"], dtype=object)}
    with pytest.raises(RuntimeError, match="internal error"):
        verify_k_anonymity(labels, np.ones(3, bool), 2)
    assert verify_k_anonymity(labels, np.array([True, True, False]), 2) == 2


def test_adult_ola_with_arx_hierarchies():
    data = pd.read_csv(shared_path("adult", "adult.csv"), sep=";")
    cols = ["age", "sex", "race", "marital-status"]
    hs = {c: str(shared_path("adult", "hierarchies", f"adult_hierarchy_{c}.csv")) for c in cols}
    res = ola(data, cols, 5, hierarchies=hs, suppression=0.05)
    assert res.min_class_size >= 5
    assert res.suppression_share <= 0.05
    assert res.info["nodes_evaluated"] < res.info["lattice_size"]
