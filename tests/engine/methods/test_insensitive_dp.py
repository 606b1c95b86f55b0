"""Tests of ``insensitive-dp`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.api import prepare
from dpstudio.engine.registry import get_method
from tests.engine._order import protect_in_order, run_prepared_in_order
from tests.engine.methods._numeric import (
    _g,
    _per_cluster,
    _residuals,
    census_setup,
    middle_data,
)


def test_insensitive_dp_params():
    spec = get_method("insensitive-dp")
    assert spec.param("variant").choices == ("single", "multi")
    cal = spec.param("calibration")
    assert cal.default == "rigorous"
    assert "does not satisfy ε-DP (see paper 002 §3)" in cal.warning["as-published"]
    assert spec.param("reference").default == "lower"


def test_as_published_guarantee_is_labelled_not_dp():
    text, is_dp = _g("insensitive-dp", epsilon=1.0, calibration="as-published", k=5)
    assert "does not satisfy ε-DP (see paper 002 §3)" in text
    assert not is_dp
    text, is_dp = _g("insensitive-dp", epsilon=1.0, k=5)
    assert "rigorous" in text and "does not satisfy" not in text and is_dp


@pytest.mark.parametrize(
    "calibration, variant", [("rigorous", "multi"), ("rigorous", "single"), ("as-published", "multi")]
)
def test_insensitive_dp_scale(calibration, variant):
    df, roles, doms = middle_data(2000, 3)
    k = 100  # n_c = 20
    eps = 300.0 if calibration == "rigorous" else 15.0  # per-attribute: ε_i = ε
    # rigorous: 20 * 1000 / (100 * 300) = 0.667; as-published: 1000 / (100 * 15) = 0.667
    runs, _ = _residuals(
        "insensitive-dp",
        df,
        roles,
        doms,
        reps=15,
        k=k,
        epsilon=eps,
        budget="per-attribute",
        calibration=calibration,
        variant=variant,
    )
    X = df[list(roles)].to_numpy()
    lb, ub = np.zeros(3), np.full(3, 1000.0)
    lab = MA.multi_reference(X, k, lb, ub) if variant == "multi" else MA.insensitive_mdav(X, k, lb, ub)
    draws = []
    for res, R in runs:
        assert res.info["n_c"] == 20
        for a in range(3):
            draws.append(_per_cluster(R[:, a], lab))
    draws = np.concatenate(draws)
    assert draws.size == 15 * 3 * 20
    assert draws.var() == pytest.approx(2 * (2.0 / 3.0) ** 2, rel=0.2)
    sens = runs[0][0].info["noise_per_attribute"]["a0"]["sensitivity"]
    assert sens == pytest.approx(200.0 if calibration == "rigorous" else 10.0)


def test_insensitive_cache_reused_across_epsilons(census):
    roles, doms = census_setup(census)
    prep = prepare(census, "insensitive-dp", roles, doms, k=5, epsilon=1.0)
    cache: dict = {}
    run_prepared_in_order(prep, rng=np.random.default_rng(0), cache=cache)
    n_keys = len(cache)
    run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=2.0, cache=cache)
    assert len(cache) == n_keys
    run_prepared_in_order(prep, rng=np.random.default_rng(0), k=6, cache=cache)
    assert len(cache) == n_keys + 1


def test_census_as_published_reports_not_dp(census):
    roles, doms = census_setup(census)
    res = protect_in_order(
        census,
        "insensitive-dp",
        roles,
        doms,
        k=5,
        epsilon=1.0,
        seed=0,
        calibration="as-published",
        budget="per-attribute",
    )
    assert not res.is_dp
    assert "does not satisfy ε-DP (see paper 002 §3)" in res.guarantee
    assert any("does not satisfy" in w for w in res.warnings)
    meta = res.public_metadata()
    assert meta["differential_privacy"] is False
    assert "does not satisfy ε-DP" in meta["guarantee"]


def test_insensitive_k1_texts():
    text, is_dp = _g("insensitive-dp", epsilon=1.0, k=1, calibration="as-published")
    assert is_dp and "1-differential privacy" in text and "k = 1" in text
    assert "does not satisfy" not in text
