"""Tests of ``laplace`` (moved from test_numeric_methods.py; assertions unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.methods._numeric import (
    _residuals,
    middle_data,
)


def test_laplace_per_record_scale():
    df, roles, doms = middle_data(10_000, 2)
    runs, _ = _residuals("laplace", df, roles, doms, epsilon=100.0)  # ε_i = 50: scale 20
    _, R = runs[0]
    for a in range(2):
        assert R[:, a].var() == pytest.approx(2 * 20.0**2, rel=0.1)


def test_laplace_per_attribute_budget_scale():
    df, roles, doms = middle_data(10_000, 3)
    runs, _ = _residuals("laplace", df, roles, doms, epsilon=50.0, budget="per-attribute")
    res, R = runs[0]
    assert R.var(axis=0) == pytest.approx(np.full(3, 2 * 20.0**2), rel=0.1)
    assert res.info["epsilon_total_composed"] == pytest.approx(150.0)


def test_laplace_weights_budget():
    df, roles, doms = middle_data(10_000, 2)
    runs, _ = _residuals(
        "laplace", df, roles, doms, epsilon=100.0, budget="weights", weights={"a0": 1.0, "a1": 3.0}
    )
    res, R = runs[0]
    # ε_0 = 25 -> scale 40, ε_1 = 75 -> scale 13.33
    assert R[:, 0].var() == pytest.approx(2 * 40.0**2, rel=0.1)
    assert R[:, 1].var() == pytest.approx(2 * (1000 / 75) ** 2, rel=0.1)
