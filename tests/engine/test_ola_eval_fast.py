"""Issue 13, cheaper OLA node evaluations: the evaluation's shortcuts must give exactly the
plain computation.  On random tables with random hierarchies, at every node of the lattice:
the class sizes (two-group dense ids, bincount or packed sort) equal a plain group-by of the
generalised codes, and the one-pass ``_from_counts`` of discernibility and AECS equals their
``bound_from_counts`` and ``__call__`` bit for bit (the search compares losses exactly)."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.algorithms.generalization import encode_quasis
from dpstudio.engine.algorithms.generalization_metrics import AECSLoss, DiscernibilityLoss, _make_loss
from dpstudio.engine.algorithms.ola import _Lattice
from dpstudio.engine.hierarchies.hierarchy import Hierarchy


def _hierarchy(rng, name, n_leaves, height):
    cols = [[f"{name}{i}" for i in range(n_leaves)]]
    for lv in range(1, height - 1):
        prev = cols[-1]
        n_new = int(rng.integers(1, len(set(prev)) + 1))
        assign = {g: f"{name}L{lv}g{int(rng.integers(0, n_new))}" for g in sorted(set(prev))}
        cols.append([assign[g] for g in prev])
    cols.append(["*"] * n_leaves)
    return Hierarchy.from_rows([list(r) for r in zip(*cols)], name=name)


def _table(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    n = int(rng.integers(30, 400))
    hs, data = {}, {}
    for j in range(d):
        nl = int(rng.integers(2, 40))
        h = _hierarchy(rng, f"a{j}", nl, int(rng.integers(2, 5)))
        hs[f"a{j}"] = h
        p = rng.dirichlet(np.full(nl, 0.3))  # skewed: many small classes
        data[f"a{j}"] = [h.leaves[i] for i in rng.choice(nl, size=n, p=p)]
    return pd.DataFrame(data), hs


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("metric", ["discernibility", "aecs"])
def test_node_evaluation_equals_plain_computation(seed, metric):
    df, hs = _table(seed)
    cols = list(df.columns)
    qs = encode_quasis(df, cols, hs)
    k = int(np.random.default_rng(seed).integers(2, 7))
    lossf = _make_loss(metric, [q.height for q in qs])
    lat = _Lattice(qs, k, len(df) // 10, lossf)
    assert lat._split is not None and lat._fast is not None
    n = len(df)
    # half the cases through the packed-sort branch of the class counts
    if seed % 2:
        lat._split[0]["maps"] = {}
        lat._split[0]["rows"] = {}
    plain_cls = type(lossf)
    for node in range(lat.size):
        lv = lat.L[node]
        if seed % 2:  # force the sparse branch: pretend the key range is large
            ida, na = lat._group_ids(0, node)
            lat._split[0]["rows"][lat._split[0]["vec_of"][node]] = (ida, na + 10**6)
        counts = np.asarray(lat._split_counts(node))
        labels = [
            tuple(q.labels[int(lv[j])][q.codes[int(lv[j])][q.leaf[r]]] for j, q in enumerate(qs))
            for r in range(n)
        ]
        plain = np.array(sorted(Counter(labels).values()))
        assert np.array_equal(np.sort(counts.astype(np.int64)), plain), node
        small = counts < k
        sup = int(counts.compress(small).sum())
        assert sup == int(plain[plain < k].sum())
        b, v = lat._fast(counts, small, sup, n, k)
        assert b == plain_cls.bound_from_counts(plain, n, k)
        assert v == lossf(lv, plain[plain >= k], sup, n)
    assert plain_cls in (DiscernibilityLoss, AECSLoss)
