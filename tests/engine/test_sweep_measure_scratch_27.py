"""Issue 27: a sweep cell's SSE and record linkage computed in scratch buffers kept from cell
to cell (``repeated._scratch``) give the bits of evaluate's per-run formulas, whatever the
previous cell left in the buffers (other shapes, other values)."""

from __future__ import annotations

import numpy as np

from dpstudio.engine.measures.repeated import _scratch, _sse_bulk


def _plain(x, var, Y):
    out = []
    n, m = x.shape
    for y in Y:  # evaluate's colsum = ((x − y)²).sum(axis=0), run by run
        colsum = ((x - y) ** 2).sum(axis=0)
        out.append((float(colsum.sum()), float((colsum / var).sum()) / (n * m)))
    return out


def test_sse_with_reused_scratch_equals_evaluates_formula():
    rng = np.random.default_rng(8)
    scratch: dict = {}
    for R, n, m in [(10, 300, 5), (3, 40, 2), (10, 300, 5), (7, 1000, 13), (1, 5, 1)]:
        x = rng.normal(size=(n, m)) * 1e3
        var = x.var(axis=0, ddof=1)
        Y = x[None] + rng.laplace(scale=50.0, size=(R, n, m))
        assert _sse_bulk(x, var, Y, scratch) == _plain(x, var, Y)
        assert _sse_bulk(x, var, Y) == _plain(x, var, Y)
    assert scratch["sse"].size == 7 * 1000 * 13  # one buffer, grown to the largest cell


def test_scratch_views_are_contiguous_and_bounded():
    store: dict = {}
    a = _scratch(store, "b", (2, 3, 4))
    assert a.shape == (2, 3, 4) and a.flags.c_contiguous and a.base is store["b"]
    big = _scratch(store, "b", (1 << 23,))
    assert big.base is None and store["b"].size == 24  # above the limit: a fresh array, not kept
