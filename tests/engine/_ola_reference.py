"""The brute-force reference of OLA's utility metrics for the tests: one metric at one node,
computed from the generalised labels ``gen[c]`` (lists), the originals and the hierarchy
tables ``hs`` -- no code shared with the engine."""

import math
from collections import Counter

import numpy as np


def metric(name, hs, cols, lv, gen, orig, keep, sizes_kept, n):
    sup = [i for i in range(n) if not keep[i]]
    if name == "precision":
        base = np.mean([(lev / (hs[c].height - 1)) if hs[c].height > 1 else 1.0 for c, lev in zip(cols, lv)])
        return (1 - len(sup) / n) * base + len(sup) / n
    if name == "discernibility":
        return (sum(s * s for s in sizes_kept) + n * len(sup)) / n**2
    if name == "aecs":
        return n / (len(sizes_kept) + (1 if sup else 0))
    if name == "loss":
        agg = 1.0
        for c, lev in zip(cols, lv):
            rows = hs[c].table[:, lev].tolist()
            share = {v: m / len(rows) for v, m in Counter(rows).items()}
            tot = sum(share[g] if keep[i] else 1.0 for i, g in enumerate(gen[c]))
            lo = n / len(rows)
            agg *= 1 + (max((tot - lo) / (n - lo), 0.0) if n - lo > 0 else 0.0)
        return agg ** (1 / len(cols)) - 1
    if name == "entropy":
        tot = 0.0
        for c in cols:
            a, b = Counter(orig[c]), Counter(gen[c])
            tot += sum(-math.log2(a[o] / b[g]) for o, g in zip(orig[c], gen[c]))
            sv = Counter(gen[c][i] for i in sup)
            tot += sum(m * math.log2(len(sup) / m) for m in sv.values())
        return tot
    raise AssertionError(name)
