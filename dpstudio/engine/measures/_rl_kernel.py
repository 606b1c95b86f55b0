"""Compiled record-linkage classifier (numba), imported lazily by :mod:`.risk`.

It never decides a tie: for each protected record x′_q of original x_j (own distance r, its
sum of squares computed here in column order: within ~1e-15 of risk.py's ``_own_distance``,
far inside the margins below) it only settles the two clear cases, with a relative margin of 1e-9 (a million times the
rounding error of a 13-term sum of squares):

* ``1`` — every other original is farther than r·(1 + 1e-12)·(1 + 1e-9): x_j is the only
  nearest original, so Pr = 1 under risk.py's exact formula too;
* ``0`` — some original is nearer than r / (1 + 1e-12) · (1 − 1e-9): x_j is not among the
  nearest, Pr = 0;
* ``-1`` — anything else (an original within the margins of r: ties, duplicates, rounding
  doubt): risk.py decides it with its exact formula.

Originals are visited in increasing distance from x_j (a precomputed neighbour list); the
visit stops when that distance exceeds 2r (plus margin): by the triangle inequality no
later original is within r of x′_q.  ``0`` needs one original i ≠ j nearer than the lower
margin, and the visit finds one whenever there is one (every such i lies within 2r of x_j),
so the original that settled the previous record ``0`` is tried first (issue 27: strong noise
clamps many records to the same corners of the domain, and their nearer original repeats):
the same status, reached after one distance instead of a walk.  Partial sums of squares are abandoned as soon as they
exceed the threshold (terms are non-negative).

``cache=True``: the first process compiles (about a second) and stores the machine code under
``__pycache__``; later processes load it.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def classify(xs, ys, jidx, nbr, nd2, tie_rtol, out):  # pragma: no cover - compiled
    n, m = xs.shape
    K = nbr.shape[1]
    up = (1.0 + tie_rtol) * (1.0 + tie_rtol) * (1.0 + 1e-9)
    dn = (1.0 - 1e-9) / ((1.0 + tie_rtol) * (1.0 + tie_rtol))
    hint = -1
    for q in range(ys.shape[0]):
        j = jidx[q]
        r2 = 0.0
        for c in range(m):
            d = ys[q, c] - xs[j, c]
            r2 += d * d
        hi = r2 * up
        lo = r2 * dn
        if hint >= 0 and hint != j:  # the previous record's nearer original, tried first
            s = 0.0
            for c in range(m):
                d = ys[q, c] - xs[hint, c]
                s += d * d
                if s >= lo:
                    break
            if s < lo:
                out[q] = 0
                continue
        stop = 4.0 * hi * (1.0 + 1e-6)
        status = 1
        done = False
        for t in range(K):
            if nd2[j, t] > stop:
                done = True
                break
            i = nbr[j, t]
            if i == j:
                continue
            s = 0.0
            for c in range(m):
                d = ys[q, c] - xs[i, c]
                s += d * d
                if s > hi:
                    break
            if s < lo:
                status = 0
                hint = i
                done = True
                break
            if s <= hi:
                status = -1
        if not done and K < n:  # neighbour list exhausted: every original, in index order
            for i in range(n):
                if i == j:
                    continue
                s = 0.0
                for c in range(m):
                    d = ys[q, c] - xs[i, c]
                    s += d * d
                    if s > hi:
                        break
                if s < lo:
                    status = 0
                    hint = i
                    break
                if s <= hi:
                    status = -1
        out[q] = status


def neighbours(xs: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """The K nearest originals of every original (itself included) and their squared
    distances, in increasing order (differences, not the |a|²+|b|²−2ab expansion: exact zeros
    for duplicates, small relative error otherwise).
    """
    n = xs.shape[0]
    nbr = np.empty((n, K), dtype=np.int32)
    nd2 = np.empty((n, K))
    block = max(1, 2_000_000 // max(n * xs.shape[1], 1))
    for lo in range(0, n, block):
        d = xs[lo : lo + block, None, :] - xs[None, :, :]
        d2 = np.einsum("ijk,ijk->ij", d, d)
        o = np.argsort(d2, axis=1, kind="stable")[:, :K] if K < n else np.argsort(d2, axis=1, kind="stable")
        nbr[lo : lo + block] = o
        nd2[lo : lo + block] = np.take_along_axis(d2, o, axis=1)
    return nbr, nd2
