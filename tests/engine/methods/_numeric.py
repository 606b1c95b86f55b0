"""Helpers shared by the tests of the numeric methods (moved from test_numeric_methods.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from dpstudio.engine.api import prepare
from dpstudio.engine.registry import get_method
from tests.engine._order import run_prepared_in_order

NUMERIC = ["mdav", "mdav-swap", "ir-swap", "laplace", "insensitive-dp", "ir-dp", "idp-ls", "idp-cbls"]


CENSUS4 = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]


def census_setup(census, role="eps-quasi"):
    roles = {c: role for c in CENSUS4}
    doms = {c: (0.0, 1.5 * float(census[c].max())) for c in CENSUS4}
    return roles, doms


def middle_data(n, m, seed=0, lo=400.0, hi=600.0):
    """Values far from the domain bounds [0, 1000] (noise rarely clamped)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.uniform(lo, hi, size=(n, m)), columns=[f"a{i}" for i in range(m)])
    df["other"] = np.arange(n)
    roles = {f"a{i}": "eps-quasi" for i in range(m)}
    doms = {f"a{i}": (0.0, 1000.0) for i in range(m)}
    return df, roles, doms


def _g(mid, **p):
    """The method's own sentence and ε-DP flag for parameters ``p`` (columns not known)."""
    from dpstudio.engine.guarantee import GuaranteeContext

    spec = get_method(mid)
    params = {q.name: q.default for q in spec.params}
    params.update(p)
    g = spec.describe(GuaranteeContext.of(params))
    return g.render(), g.is_dp


def _residuals(mid, df, roles, doms, reps=1, **params):
    """Released value minus the noise-free value, per cluster (one row per cluster draw)."""
    prep = prepare(df, mid, roles, doms, **params)
    cache: dict = {}
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache).data
    out = []
    for r in range(reps):
        res = run_prepared_in_order(prep, rng=np.random.default_rng(100 + r), cache=cache)
        out.append((res, res.data[list(roles)].to_numpy() - base[list(roles)].to_numpy()))
    return out, base


def _per_cluster(resid_col, labels):
    """One residual per cluster (all records of a cluster share the draw: check it)."""
    nc = int(labels.max()) + 1
    first = np.full(nc, np.nan)
    first[labels[::-1]] = resid_col[::-1]
    assert np.allclose(resid_col, first[labels])
    return first


def _cbls_centroid(vals):
    v = np.sort(np.asarray(vals, dtype=float))
    return (v.sum() - v[0] + v[1] - v[-1] + v[-2]) / v.size


def _cbls_ls(vals):
    v = np.sort(np.asarray(vals, dtype=float))
    c = v.size
    e_up = (v[-1] - v[1]) + (v[2] - v[1]) + (v[-1] - v[-2])
    e_down = (v[-2] - v[0]) + (v[-2] - v[-3]) + (v[1] - v[0])
    return max(e_up, e_down) / c


@st.composite
def kquasi_frames(draw):
    n = draw(st.integers(4, 60))
    m = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        X = rng.integers(0, 3, size=(n, m)).astype(float)
    else:
        X = rng.normal(size=(n, m))
    k = draw(st.integers(1, n // 2))
    df = pd.DataFrame(X, columns=[f"q{i}" for i in range(m)])
    df["conf"] = rng.normal(size=n)
    return df, k
