"""Tests over several numeric methods at once (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.api import prepare
from dpstudio.engine.errors import Cancelled, ParameterError
from dpstudio.engine.registry import get_method
from dpstudio.engine.roles import Role
from tests.engine._order import in_input_order, protect_in_order, run_prepared_in_order
from tests.engine.methods._numeric import (
    CENSUS4,
    NUMERIC,
    _cbls_centroid,
    _cbls_ls,
    _g,
    census_setup,
)


def test_all_numeric_methods_registered():
    ids = [m["id"] for m in engine.methods()]
    for mid in NUMERIC:
        assert mid in ids


@pytest.mark.parametrize(
    "mid, protects, needs_domain, uses_k, min_k",
    [
        ("mdav", Role.K_QUASI, False, True, 1),
        ("mdav-swap", Role.K_QUASI, False, True, 1),
        ("ir-swap", Role.CONFIDENTIAL, False, True, 1),
        ("laplace", Role.EPS_QUASI, True, False, 1),
        ("insensitive-dp", Role.EPS_QUASI, True, True, 1),
        ("ir-dp", Role.EPS_QUASI, True, True, 1),
        ("idp-ls", Role.EPS_QUASI, True, True, 1),
        ("idp-cbls", Role.EPS_QUASI, False, True, 3),
    ],
)
def test_method_specs(mid, protects, needs_domain, uses_k, min_k):
    spec = get_method(mid)
    assert spec.protects == (protects,)
    assert spec.requires == (protects,)
    assert spec.needs_domain is needs_domain
    assert spec.uses_k is uses_k
    assert spec.min_k == min_k
    assert spec.description and spec.paper
    names = {p.name for p in spec.params}
    assert "drop_missing" in names
    if spec.uses_epsilon:
        assert {"epsilon", "noise", "budget", "weights"} <= names
    assert ("k" in names) is uses_k
    d = spec.to_dict()
    assert isinstance(d["guarantee"], str) and d["guarantee"]


@pytest.mark.parametrize("mid", ["laplace", "ir-dp", "insensitive-dp"])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_dp_guarantee_mentions_epsilon(mid, eps):
    text, is_dp = _g(mid, epsilon=eps)
    assert f"{eps:g}-differential privacy" in text
    assert "split equally" in text and "neighbouring data sets differ in one record" in text
    assert is_dp
    text, _ = _g(mid, epsilon=eps, budget="per-attribute")
    assert "(m·ε)-DP" in text and f"ε = {eps:g}" in text
    assert f"{eps:g}-differential privacy" not in text


@pytest.mark.parametrize("mid", ["idp-ls", "idp-cbls"])
def test_idp_guarantee(mid):
    text, is_dp = _g(mid, epsilon=2.0, k=4)
    assert "2-individual differential privacy" in text
    assert "not ε-DP" in text and "THIS data set" in text
    assert not is_dp


def test_other_guarantees():
    assert "k-anonymity with k = 7" in _g("mdav", k=7)[0]
    assert "Probabilistic k-anonymity with k = 4" in _g("mdav-swap", k=4)[0]
    assert "Probabilistic k-anonymity with k = 4" in _g("ir-swap", k=4)[0]
    for mid in ("mdav", "mdav-swap", "ir-swap"):
        assert not _g(mid)[1]
    text, is_dp = _g("ir-dp", epsilon=None)
    assert "no differential privacy" in text and not is_dp


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=3, max_size=7), st.booleans())
def test_cbls_local_sensitivity_bounds_brute_force_change(values, fractional):
    lo, hi = 0.0, 20.0
    vals = np.array(values, dtype=float) + (0.37 if fractional else 0.0)
    vals = np.clip(vals, lo, hi)
    base = _cbls_centroid(vals)
    ls = _cbls_ls(vals)
    grid = np.linspace(lo - 50, hi + 50, 561)  # beyond the domain too: CBLS needs no bounds
    worst = 0.0
    for i in range(vals.size):
        for g in grid:
            w = vals.copy()
            w[i] = g
            worst = max(worst, abs(_cbls_centroid(w) - base))
    assert worst <= ls + 1e-9


def test_dp_outputs_are_clamped_to_domain(census):
    roles, doms = census_setup(census)
    for mid, kw in [
        ("laplace", {}),
        ("ir-dp", {"k": 3}),
        ("idp-ls", {"k": 3}),
        ("insensitive-dp", {"k": 3}),
        ("idp-cbls", {"k": 3}),
    ]:
        res = protect_in_order(census, mid, roles, doms, epsilon=0.01, seed=3, **kw)
        for c in CENSUS4:
            v = res.data[c].to_numpy()
            assert v.min() >= doms[c][0] and v.max() <= doms[c][1], (mid, c)


def test_methods_needing_domain_refuse_without(census):
    roles, _ = census_setup(census)
    for mid in ("laplace", "ir-dp", "idp-ls", "insensitive-dp"):
        with pytest.raises(ParameterError, match="domain"):
            protect_in_order(census, mid, roles, None, epsilon=1.0, seed=1)
    # idp-cbls needs no domain, but its output grid comes from a declared type or precision
    # (never from the data's int64 dtype: issue 21 §3 N2)
    with pytest.raises(ParameterError, match=r"--type \w+=integer"):
        protect_in_order(census, "idp-cbls", roles, None, k=3, epsilon=1.0, seed=1)
    types = {c: "integer" for c in roles}
    res = protect_in_order(census, "idp-cbls", roles, None, k=3, epsilon=1.0, seed=1, types=types)
    assert len(res.data) == len(census)
    assert res.precision == {c: 1.0 for c in roles} and res.data["FICA"].dtype == np.int64


def test_swaps_actually_permute(census):
    res = protect_in_order(census, "mdav-swap", {c: "k-quasi" for c in CENSUS4}, k=5, seed=1)
    assert res.info["records_moved"] > len(census) // 2
    res2 = protect_in_order(census, "ir-swap", {c: "confidential" for c in CENSUS4}, k=5, seed=1)
    assert not res2.data["FICA"].equals(census["FICA"])
    assert res2.data["FICA"].dtype == census["FICA"].dtype


@pytest.mark.parametrize(
    "mid, kw",
    [
        ("laplace", {}),
        ("ir-dp", {"k": 4}),
        ("idp-ls", {"k": 4}),
        ("idp-cbls", {"k": 4}),
        ("insensitive-dp", {"k": 4}),
        ("insensitive-dp", {"k": 4, "variant": "single", "noise": "staircase"}),
        ("ir-dp", {"k": 4, "noise": "staircase"}),
    ],
)
def test_determinism_under_seed(census, mid, kw):
    roles, doms = census_setup(census)
    a = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=42, **kw)
    b = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=42, **kw)
    c = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=43, **kw)
    assert a.data.equals(b.data)
    assert not a.data.equals(c.data)
    others = [col for col in census.columns if col not in CENSUS4]
    assert a.data[others].equals(census[others])


@pytest.mark.parametrize("mid", ["mdav-swap", "ir-swap"])
def test_swap_determinism(census, mid):
    role = "k-quasi" if mid == "mdav-swap" else "confidential"
    roles = {c: role for c in CENSUS4}
    a = protect_in_order(census, mid, roles, k=3, seed=5)
    b = protect_in_order(census, mid, roles, k=3, seed=5)
    assert a.data.equals(b.data)


def test_noise_free_baseline_and_cache_reuse(census):
    roles, doms = census_setup(census)
    prep = prepare(census, "ir-dp", roles, doms, k=5, epsilon=1.0)
    cache: dict = {}
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache)
    assert not base.is_dp and "no differential privacy" in base.guarantee
    keys_after_first = set(cache)
    assert any(isinstance(k_, tuple) and k_[0] == "num.ir-order" for k_ in cache)
    run_prepared_in_order(prep, rng=np.random.default_rng(1), cache=cache)
    # noisy runs add the output grids (one per column, then reused); nothing else
    keys_noisy = set(cache)
    assert {k_ for k_ in keys_noisy if k_[0] != "noise.grid"} == keys_after_first
    run_prepared_in_order(prep, rng=np.random.default_rng(2), epsilon=0.1, cache=cache)
    assert set(cache) == keys_noisy  # nothing recomputed
    # the individual-ranking clusters are shared by idp-ls / idp-cbls
    prep2 = prepare(census, "idp-ls", roles, doms, k=5, epsilon=1.0)
    run_prepared_in_order(prep2, rng=np.random.default_rng(0), cache=cache)
    assert set(cache) == keys_noisy
    # baseline values are the individual-ranking centroids
    x = census["FICA"].to_numpy(float)
    L = MA.individual_ranking(x[:, None], 5)[:, 0]
    assert np.allclose(base.data["FICA"], MA.cluster_means(x, L)[L])


def test_cancel_stops(census):
    roles, doms = census_setup(census)
    kroles = {c: "k-quasi" for c in CENSUS4}

    def cancel():
        raise Cancelled()

    calls = [
        lambda: protect_in_order(census, "laplace", roles, doms, epsilon=1.0, seed=1, check_cancel=cancel),
        lambda: protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=1.0, seed=1, check_cancel=cancel),
        lambda: protect_in_order(
            census, "insensitive-dp", roles, doms, k=5, epsilon=1.0, seed=1, check_cancel=cancel
        ),
        lambda: protect_in_order(census, "mdav", kroles, k=5, seed=1, check_cancel=cancel),
    ]
    for call in calls:
        with pytest.raises(Cancelled):
            call()


def test_census_utility_ordering(census):
    """With the per-attribute budget, ir-dp beats plain Laplace, and noise-free individual
    ranking loses less than insensitive multivariate microaggregation."""
    roles, doms = census_setup(census)
    X = census[CENSUS4].to_numpy(float)

    def sse(res):
        return float(((res.data[CENSUS4].to_numpy() - X) ** 2).sum())

    lap = np.mean(
        [
            sse(protect_in_order(census, "laplace", roles, doms, epsilon=1.0, budget="per-attribute", seed=s))
            for s in range(5)
        ]
    )
    # Laplace of scale Δ_i/ε on each attribute, clamped: SSE below the unclamped 2·n·ΣΔ²
    unclamped = 2 * len(census) * sum((doms[c][1] - doms[c][0]) ** 2 for c in CENSUS4)
    assert 0.05 * unclamped < lap < unclamped
    irdp = np.mean(
        [
            sse(
                protect_in_order(
                    census, "ir-dp", roles, doms, k=10, epsilon=1.0, budget="per-attribute", seed=s
                )
            )
            for s in range(5)
        ]
    )
    assert irdp < lap / 5
    prep_ir = prepare(census, "ir-dp", roles, doms, k=10, epsilon=1.0)
    prep_in = prepare(census, "insensitive-dp", roles, doms, k=10, epsilon=1.0)
    base_ir = sse(run_prepared_in_order(prep_ir, rng=np.random.default_rng(0), epsilon=None))
    base_in = sse(run_prepared_in_order(prep_in, rng=np.random.default_rng(0), epsilon=None))
    assert base_ir < base_in


def test_census_rigorous_insensitive_worse_than_laplace_when_k2_below_n(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "insensitive-dp", roles, doms, k=10, epsilon=1.0, seed=0)
    assert any("k² ≤ n" in w for w in res.warnings)
    lap_scale = protect_in_order(census, "laplace", roles, doms, epsilon=1.0, seed=0).info[
        "noise_per_attribute"
    ]["FICA"]["scale"]
    assert res.info["noise_per_attribute"]["FICA"]["scale"] >= lap_scale


def test_integer_and_nullable_columns_keep_working():
    df = pd.DataFrame({"a": pd.array(np.arange(30) % 7, dtype="Int64"), "b": np.arange(30, dtype=np.int32)})
    res = protect_in_order(df, "ir-swap", {"a": "confidential", "b": "confidential"}, k=3, seed=1)
    assert sorted(res.data["a"].tolist()) == sorted(df["a"].tolist())
    assert sorted(res.data["b"].tolist()) == sorted(df["b"].tolist())
    res = protect_in_order(df, "mdav-swap", {"a": "k-quasi", "b": "k-quasi"}, k=3, seed=1)
    assert sorted(zip(res.data["a"], res.data["b"])) == sorted(zip(df["a"], df["b"]))
    res = protect_in_order(df, "mdav", {"a": "k-quasi", "b": "k-quasi"}, k=3, seed=1)
    assert res.data.groupby(["a", "b"]).size().min() >= 3
    res = protect_in_order(
        df,
        "ir-dp",
        {"a": "eps-quasi", "b": "eps-quasi"},
        {"a": (0, 10), "b": (0, 40)},
        k=3,
        epsilon=1.0,
        seed=1,
    )
    assert res.data["a"].between(0, 10).all()


def test_budget_detail_names_attributes(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "laplace", roles, doms, epsilon=2.0, seed=1)
    assert "split equally over the 4 protected attributes" in res.info["budget_detail"]
    assert "FICA: 0.5" in res.info["budget_detail"]
    res = protect_in_order(census, "ir-dp", roles, doms, k=3, epsilon=2.0, seed=1, budget="per-attribute")
    assert "(4·2 = 8)-DP" in res.info["budget_detail"]


@pytest.mark.parametrize("method", ["ir-dp", "idp-ls", "idp-cbls", "insensitive-dp"])
def test_clustered_release_is_shuffled_and_shuffle_changes_only_order(census, method):
    """The release is a random permutation of the in-order release: same values (the noise
    is drawn before the permutation), row_map aligns it, and shuffle=False is flagged."""
    roles, doms = census_setup(census)
    a = engine.protect(census, method, roles, doms, k=5, epsilon=1.0, seed=4)
    b = engine.protect(census, method, roles, doms, k=5, epsilon=1.0, seed=4, shuffle=False)
    assert a.row_map is not None and sorted(a.row_map.tolist()) == list(range(len(census)))
    assert not np.array_equal(a.row_map, np.arange(len(census)))
    assert in_input_order(a).data.equals(b.data)
    assert "random order" in a.guarantee
    assert not b.is_dp and "INPUT ORDER" in b.guarantee
