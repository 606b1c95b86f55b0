"""Tests of ``ir-dp`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import NotApplicableError
from tests.engine._order import protect_in_order
from tests.engine.methods._numeric import (
    _per_cluster,
    _residuals,
    census_setup,
    middle_data,
)


def test_protect_result_carries_guarantee(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=0.7, seed=1)
    assert "0.7-differential privacy" in res.guarantee
    # four attributes ranked separately and released together: DP per column only
    assert not res.is_dp and res.guarantee.startswith("Per-attribute only — not ε-differential")
    # one attribute, the other columns released unchanged beside it: they show the grouping,
    # so the records are not ε-DP (issue 8 §5); the sentence leads with that scope
    one = protect_in_order(
        census, "ir-dp", {"FICA": "eps-quasi"}, {"FICA": doms["FICA"]}, k=5, epsilon=0.7, seed=1
    )
    assert not one.is_dp and one.guarantee.startswith("Per-attribute only — not ε-differential")
    assert "0.7-differential privacy" in one.guarantee and "FEDTAX" in one.guarantee
    alone = protect_in_order(
        census[["FICA"]], "ir-dp", {"FICA": "eps-quasi"}, {"FICA": doms["FICA"]}, k=5, epsilon=0.7, seed=1
    )
    assert alone.is_dp and alone.guarantee.startswith("0.7-differential privacy")
    assert res.info["epsilon_per_attribute"] == {
        c: pytest.approx(0.7 / 4) for c in res.info["epsilon_per_attribute"]
    }
    meta = res.public_metadata()
    assert "seed" not in str(meta["parameters"])


def test_ir_dp_one_draw_per_cluster_of_scale_delta_over_k_eps():
    df, roles, doms = middle_data(20_000, 2)
    k, eps = 10, 10.0  # ε_i = 5: scale = 1000 / (10 · 5) = 20
    runs, _ = _residuals("ir-dp", df, roles, doms, k=k, epsilon=eps)
    res, R = runs[0]
    X = df[list(roles)].to_numpy()
    L = MA.individual_ranking(X, k)
    for a in range(2):
        per = _per_cluster(R[:, a], L[:, a])
        assert per.size == 2000
        assert per.var() == pytest.approx(2 * 20.0**2, rel=0.1)
        assert abs(per.mean()) < 3 * np.sqrt(2 * 400 / 2000)
    info = res.info["noise_per_attribute"]["a0"]
    assert info["scale"] == pytest.approx(20.0)
    assert info["sensitivity"] == pytest.approx(100.0)


def test_ir_dp_staircase_noise_variance():
    df, roles, doms = middle_data(20_000, 1)
    # staircase is ε-DP for one number only: with n_c = 2000 centroids each draw gets
    # sensitivity Δ/k = 100 and ε_i/n_c (audit fix), so ε = 10000 gives 5 per draw
    # four runs pooled (8000 draws): one run's variance of the heavy-tailed staircase noise
    # varies by about ±12 % from run to run
    runs, _ = _residuals("ir-dp", df, roles, doms, reps=4, k=10, epsilon=10_000.0, noise="staircase")
    L = MA.individual_ranking(df[["a0"]].to_numpy(), 10)
    per = np.concatenate([_per_cluster(R[:, 0], L[:, 0]) for _, R in runs])
    assert per.var() == pytest.approx(N.staircase_variance(100.0, 5.0), rel=0.1)


def test_unprotected_quasi_rejected(census):
    roles, doms = census_setup(census)
    roles["AGI"] = "k-quasi"
    with pytest.raises(NotApplicableError):
        protect_in_order(census, "ir-dp", roles, doms, k=3, epsilon=1.0, seed=1)


def test_progress_reported(census):
    roles, doms = census_setup(census)
    seen: list[float] = []
    protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=1.0, seed=1, progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)


def test_row_order_leaks_clusters_without_shuffle():
    """Why the shuffle: n = 4, k = 2, neighbours (0,1,2,3) and (4,1,2,3). In input order the
    rows sharing a value are {0,1} in one and {1,2} in the other, whatever the noise."""
    dom = {"x": (0.0, 4.0)}
    for data, pair in (([0.0, 1.0, 2.0, 3.0], (0, 1)), ([4.0, 1.0, 2.0, 3.0], (1, 2))):
        df = pd.DataFrame({"x": data})
        for seed in range(5):
            out = (
                engine.protect(
                    df, "ir-dp", {"x": "eps-quasi"}, dom, k=2, epsilon=1.0, seed=seed, shuffle=False
                )
                .data["x"]
                .to_numpy()
            )
            assert out[pair[0]] == out[pair[1]]


def test_measures_do_not_depend_on_release_order(census):
    """Sweeps measure unshuffled releases; that is only valid if the measures are invariant
    under the joint permutation (same seed: same noise, only the order differs)."""
    roles, doms = census_setup(census)
    a = engine.protect(census, "ir-dp", roles, doms, k=7, epsilon=1.0, seed=9)
    b = engine.protect(census, "ir-dp", roles, doms, k=7, epsilon=1.0, seed=9, shuffle=False)
    cols = a.protected_attributes
    ea = engine.evaluate(a.aligned_original(), a.data, cols, measures=("sse", "rl", "delta"))
    eb = engine.evaluate(census, b.data, cols, measures=("sse", "rl", "delta"))
    for key in ("sse_raw", "sse_normalized", "rl"):
        assert ea[key] == pytest.approx(eb[key], rel=1e-9)
