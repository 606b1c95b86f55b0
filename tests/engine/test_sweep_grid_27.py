"""Issue 27: the bulk release of an ir-dp sweep cell with the grid arithmetic of all columns at
once (``noise.from_units_columns``, one gather by each record's cluster) equals every
repetition's separate release bit for bit, on grids of every kind (decimal, integer-typed,
a γ outside the decimal path) and cluster layouts with a larger last cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.random import point_rng


def _grids():
    return [
        N.make_grid("a", 1.0, (0.0, 1000.0)),
        N.make_grid("b", 0.01, (-5.0, 5.0)),
        N.make_grid("c", 1.0, (0.0, 50.0), integer=True),
        N.make_grid("d", 1 / 3, (0.0, 10.0)),
        N.make_grid("e", 0.25, (2.0, 7.0)),
        N.make_grid("f", 0.5),  # no domain: no clamp
    ]


@pytest.mark.parametrize("cols", [[0, 1, 4], [0, 1, 2, 3, 4, 5], [1]])
def test_from_units_columns_equals_from_units(cols):
    grids = [_grids()[i] for i in cols]
    rng = np.random.default_rng(1)
    u = rng.integers(-5000, 5000, size=(3, len(grids), 40))
    got = N.from_units_columns(grids, u)
    assert got.dtype == np.float64 and got.shape == u.shape
    for j, g in enumerate(grids):
        ref = np.asarray(g.from_units(u[:, j, :]), dtype=np.float64)
        assert np.array_equal(got[:, j, :], ref) and not np.any(
            np.signbit(got[:, j, :]) != np.signbit(ref)
        ), j


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame(
        {
            "x": np.round(rng.uniform(0, 900, n), 0),
            "y": np.round(rng.normal(0, 2, n), 2),
            "z": rng.integers(0, 50, n).astype(np.int64),
            "w": np.round(rng.uniform(1, 9, n), 3),
        }
    )


@pytest.mark.parametrize(("n", "k"), [(103, 2), (103, 5), (64, 7), (50, 25)])
def test_bulk_cell_releases_equal_separate_runs(n, k):
    from dpstudio.engine.api import prepare
    from dpstudio.engine.protection.ir_dp import bulk_releases
    from dpstudio.engine.sweeps import _cell_job, _cell_params, run_roots

    df = _frame(n)
    roles = {c: "eps-quasi" for c in df.columns}
    domains = {"x": (0.0, 1000.0), "y": (-10.0, 10.0), "z": (0.0, 60.0), "w": (0.0, 10.0)}
    opts = dict(precision={"y": 0.01, "w": 1 / 3}, types={"z": "integer"})
    eps, reps, seed = 0.7, 3, 5
    prep = prepare(df, "ir-dp", roles, domains, k=k, epsilon=eps, order="input", **opts)
    job = _cell_job(prep, eps, k, {}, None)
    roots = run_roots(seed, [(0, 1, reps, prep.run_context(_cell_params(prep, eps, k)))])[0]
    cols, Y = bulk_releases(job, roots)
    for r in range(reps):
        res = engine.protect(
            df,
            "ir-dp",
            roles,
            domains,
            k=k,
            epsilon=eps,
            order="input",
            seed=point_rng(seed, 0, 1, r),
            **opts,
        )
        ref = res.data[cols].to_numpy(dtype=np.float64)
        assert np.array_equal(Y[r], ref), (r, np.argwhere(Y[r] != ref)[:5])
