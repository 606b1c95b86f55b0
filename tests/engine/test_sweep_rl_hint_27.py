"""Issue 27: the record-linkage classifier tries the original that settled the previous record
first (``_rl_kernel.classify``'s hint).  Pr_j stays that of the exact search: on records
clamped to the same far points (strong noise), on exact ties with duplicated originals right
after a settled record, and at random."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.measures import risk as RK
from dpstudio.engine.measures.repeated import _rl_numeric_bulk

pytestmark = pytest.mark.skipif(RK._rl_kernel() is None, reason="numba unavailable: no classifier")


@pytest.fixture(autouse=True)
def _kernel_always(monkeypatch):
    monkeypatch.setattr(RK, "_KERNEL_LOAD_S", 0.0)  # the classifier from the first call


def _reference(xs, YS):
    return np.stack([RK._rl_numeric(xs, np.ascontiguousarray(y), lambda: RK._kdtree(xs)) for y in YS])


def _check(xs, YS):
    got = _rl_numeric_bulk(xs, np.ascontiguousarray(YS), lambda: RK._kdtree(xs), {})
    assert np.array_equal(got, _reference(xs, YS))
    return got


def test_a_tie_right_after_a_settled_record_is_not_settled_by_the_hint():
    # B's record lands next to A (settled 0 by A or its duplicate A2); then the records of A
    # and A2 are exact copies: both originals tie (Pr = 1/2), whatever the previous decider
    xs = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [20.0, 20.0]])
    y = xs.copy()
    y[2] = [0.1, 0.0]
    order = [2, 0, 1, 3, 4]  # the classifier sees the records of one run in input order
    xs2, y2 = xs[order], y[order]
    pr = _check(xs2, y2[None])
    assert pr[0, 0] == 0 and pr[0, 1] == pr[0, 2] == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_clamped_releases_equal_the_exact_search(seed):
    rng = np.random.default_rng(seed)
    n, m = 300, 4
    xs = np.round(rng.uniform(0, 10, size=(n, m)), 0)
    xs[10:20] = xs[5]  # duplicated originals
    noise = rng.laplace(scale=30.0, size=(3, n, m))
    YS = np.clip(xs[None] + noise, 0.0, 15.0)  # strong noise, clamped to the domain's corners
    YS[1, ::7] = xs[::7]  # some exact copies among them (ties with the duplicates)
    YS[2] = np.round(xs + rng.normal(scale=0.4, size=(n, m)), 0)  # weak noise on a grid
    pr = _check(xs, YS)
    assert pr[0].sum() < pr[2].sum()
