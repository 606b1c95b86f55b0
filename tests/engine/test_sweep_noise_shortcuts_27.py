"""Issue 27: the shortcuts the sweep's bulk release takes in noise.py give the plain path's
answers: ``check_grid_noise`` on scalars (plain float tests) refuses exactly what the array
code refuses, with the same message; ``Grid.from_units`` clamps as ``np.clip`` does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError

SENS = [0, 1, 7, 2**20, 2**50, 2**50 + 1, 2.0**60, -3, math.nan, math.inf, np.int64(1033558), np.float64(0.5)]
EPS = [1.0, 0.01, 1e-12, 2.0**-62, 2.0**-70, 1e-30, 0.0, -1.0, math.nan, math.inf, np.float64(10.0)]


def _outcome(sens, eps):
    try:
        N.check_grid_noise(sens, eps)
    except ParameterError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("sens", SENS)
def test_scalar_check_equals_the_array_check(sens):
    for eps in EPS:
        ref = _outcome(np.asarray([sens], dtype=np.float64), np.asarray([eps], dtype=np.float64))
        assert _outcome(sens, eps) == ref, (sens, eps)


def test_scalar_check_refuses_what_it_must():
    assert _outcome(2**50 + 1, 1.0) is not None
    assert _outcome(2**40, 2.0**-30) is not None  # rate 2^-70 < 2^-62
    assert _outcome(2**10, 1.0) is None and _outcome(0, 1e-300) is None


@pytest.mark.parametrize(
    "grid",
    [
        N.make_grid("a", 1.0, (0.0, 1000.0)),
        N.make_grid("b", 0.01, (-5.0, 5.0)),
        N.make_grid("c", 1.0, (3.0, 50.0), integer=True),
        N.make_grid("d", 1 / 3, (0.0, 10.0)),
        N.make_grid("e", 0.25, (2.0, 7.0)),
    ],
)
def test_from_units_clamps_as_clip(grid):
    u = np.random.default_rng(2).integers(-5000, 5000, size=300)
    u[:4] = [grid.lo - 1, grid.lo, grid.hi, grid.hi + 1]
    ref = grid.from_units(np.clip(u, grid.lo, grid.hi))  # clamped already: only the clamp differs
    got = grid.from_units(u)
    assert got.dtype == ref.dtype and np.array_equal(got, ref)
    assert np.array_equal(grid.from_units(u.copy(), overwrite=True), ref)
    assert grid.from_units(np.int64(grid.hi + 9)) == ref[3]
