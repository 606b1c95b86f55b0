"""Mondrian (LeFevre, DeWitt, Ramakrishnan 2006): strict multidimensional k-anonymity.

Each partition is cut at the median of its widest (normalised) dimension among the cuts that
leave ≥ k records on each side; categorical attributes are cut along their hierarchy (a
partition's value is the lowest common ancestor of its leaves; a cut splits it into its
children, allowed when every non-empty child holds ≥ k records).  All partitions of one depth
are processed together with sorted int64 keys, so there is no per-record or per-partition
Python loop.  The result is verified k-anonymous
(:func:`.generalization.verify_k_anonymity`).

>>> import pandas as pd
>>> df = pd.DataFrame({"sex": ["M", "F"] * 6, "age": [20, 21, 22, 23, 30, 31] * 2})
>>> res = mondrian(df, ["sex", "age"], k=3)
>>> res.min_class_size >= 3
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.generalization import GeneralisationResult, _encode_one, verify_k_anonymity
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.build import _fmt_number, auto_hierarchy
from dpstudio.engine.hierarchies.hierarchy import load_hierarchy

__all__ = [
    "mondrian",
]


# ---------------------------------------------------------------------------
# Mondrian
# ---------------------------------------------------------------------------


def _seg_bounds(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ends = np.cumsum(sizes)
    return ends - sizes, ends


def mondrian(
    df: pd.DataFrame,
    columns: Sequence[str],
    k: int,
    *,
    hierarchies: dict | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> GeneralisationResult:
    """Strict multidimensional Mondrian k-anonymity.

    Numeric columns are cut at the median and released as ranges ``"lo-hi"`` (the
    smallest and largest value of the class); other columns are cut along their
    hierarchy (given, or flat ``value → *``) and released as hierarchy nodes.  The loss
    is paper 003's precision: numerical (range width / attribute range) or categorical
    (level / (h−1)), averaged over cells.
    """
    if not columns:
        raise ParameterError("Mondrian needs at least one k-quasi.")
    k = int(k)
    n = len(df)
    if k < 1:
        raise ParameterError(f"k must be at least 1. Got {k}.")
    if k > n:
        raise ParameterError(f"k = {k} exceeds the number of records ({n}).")
    hierarchies = dict(hierarchies or {})
    dims = [_dimension(df[c], c, hierarchies) for c in columns]
    d = len(dims)
    final_cls = np.full(n, -1, dtype=np.int64)
    labels: dict[str, np.ndarray] = {dd["name"]: np.empty(n, dtype=object) for dd in dims}
    cell = np.zeros(n)
    act = np.arange(n, dtype=np.int64)
    seg = np.zeros(n, dtype=np.int64)
    S = 1
    next_cls = 0
    rounds = 0
    while S > 0:
        rounds += 1
        if check_cancel is not None:
            check_cancel()
        sizes = np.bincount(seg, minlength=S).astype(np.int64)
        starts, ends = _seg_bounds(sizes)
        W = np.full((d, S), -1.0)
        stats: list[dict[str, Any]] = []
        for j, dd in enumerate(dims):
            cuts = _numeric_cuts if dd["kind"] == "num" else _categorical_cuts
            W[j], st = cuts(dd, act, seg, S, sizes, starts, ends, k)
            stats.append(st)
        best = np.argmax(W, axis=0)
        split = W[best, np.arange(S)] >= 0
        # finalise segments without an allowable cut
        fin_seg = ~split
        if fin_seg.any():
            next_cls = _finalise(dims, stats, fin_seg, act, seg, S, next_cls, final_cls, labels, cell)
        if not split.any():
            break
        act, seg = _cut(dims, stats, best, split, act, seg)
        S = int(seg.max()) + 1 if seg.size else 0
    keep = final_cls >= 0
    if not keep.all():  # pragma: no cover - every record is finalised
        raise RuntimeError("internal error: Mondrian left records unassigned")
    smallest = verify_k_anonymity(labels, keep, k)
    return GeneralisationResult(
        algorithm="mondrian",
        k=k,
        columns=[dd["name"] for dd in dims],
        class_id=final_cls,
        labels=labels,
        loss=float(cell.mean()),
        loss_name="precision",
        cell_loss=cell,
        info={"rounds": rounds, "smallest_class_verified": smallest},
    )


def _dimension(s: pd.Series, c: str, hierarchies: dict) -> dict[str, Any]:
    """One k-quasi as Mondrian's arrays and scalars, keyed by name: a numeric column by the
    rank of each value, any other by the depth-first position of its leaf in its hierarchy.
    """
    if s.isna().any():
        row = int(np.flatnonzero(s.isna().to_numpy())[0])
        raise InputError(
            f"Column {c!r} has a missing value in row {row + 1}; impute it or enable drop_missing."
        )
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        vals = s.to_numpy(dtype=np.float64)
        uniq, rank = np.unique(vals, return_inverse=True)
        span = float(uniq[-1] - uniq[0])
        return {
            "kind": "num",
            "name": c,
            "rank": rank.astype(np.int64),
            "uniq": uniq,
            "span": span,
            "R": len(uniq),
        }
    qq = _encode_one(
        c,
        s,
        load_hierarchy(hierarchies[c], c) if c in hierarchies else auto_hierarchy(s, name=c, kind="flat"),
    )
    h = qq.height
    # leaves in depth-first order: every node covers a contiguous range of positions
    order = np.lexsort(tuple(qq.codes[lv] for lv in range(h)))  # last key = top level
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    T = np.stack([qq.codes[lv][order] for lv in range(h)]).astype(np.int64)  # (h, leaves)
    return {
        "kind": "cat",
        "name": c,
        "pos": pos[qq.leaf],
        "T": T,
        "h": h,
        "labels": qq.labels,
        "R": len(order),
        "leaves_under": [np.bincount(T[lv], minlength=len(qq.labels[lv])) for lv in range(h)],
        "Cmax": int(T.max()) + 1,
    }


def _numeric_cuts(dd, act, seg, S, sizes, starts, ends, k) -> tuple[np.ndarray, dict[str, Any]]:
    """The median cut of a numeric dimension in every segment: its normalised width (−1 where
    no cut leaves ≥ k records on each side) and what the cut and the labels need.
    """
    R = dd["R"]
    r = dd["rank"][act]
    sk = np.sort(seg * R + r)
    off = np.arange(S, dtype=np.int64) * R
    lo = sk[starts] - off
    hi = sk[ends - 1] - off
    med = sk[starts + (sizes - 1) // 2] - off
    le = np.searchsorted(sk, off + med, side="right") - starts
    lt = np.searchsorted(sk, off + med, side="left") - starts
    use_le = le < sizes
    left = np.where(use_le, le, lt)
    thr = np.where(use_le, med, med - 1)
    allow = (left >= k) & (sizes - left >= k) & (hi > lo)
    span = dd["span"]
    width = (dd["uniq"][hi] - dd["uniq"][lo]) / span if span > 0 else np.zeros(S)
    return np.where(allow, width, -1.0), {"lo": lo, "hi": hi, "thr": thr, "width": width}


def _categorical_cuts(dd, act, seg, S, sizes, starts, ends, k) -> tuple[np.ndarray, dict[str, Any]]:
    """The cut of a categorical dimension into the children of each segment's lowest common
    ancestor: its width (−1 where a non-empty child would hold fewer than k records) and what
    the cut and the labels need.
    """
    R = dd["R"]
    p = dd["pos"][act]
    sk = np.sort(seg * R + p)
    off = np.arange(S, dtype=np.int64) * R
    pmin = sk[starts] - off
    pmax = sk[ends - 1] - off
    T, h = dd["T"], dd["h"]
    eq = T[:, pmin] == T[:, pmax]  # (h, S)
    lca = np.where(eq.any(axis=0), np.argmax(eq, axis=0), h)
    # children of the LCA node = codes one level below
    below = np.maximum(lca - 1, 0)
    Cmax = dd["Cmax"]
    child = T[below[seg], p]
    uk, cnt = np.unique(seg * Cmax + child, return_counts=True)
    gseg = uk // Cmax
    firsts = np.searchsorted(gseg, np.arange(S))
    minchild = np.minimum.reduceat(cnt, np.minimum(firsts, len(cnt) - 1))
    allow = (lca > 0) & (minchild >= k)
    lvl_for_w = np.minimum(lca, h - 1)
    node_code = T[lvl_for_w, pmin]
    under = _leaves_under(dd, lvl_for_w, node_code)
    width = np.where(lca >= h, 1.0, under / R) if h > 1 else np.zeros(S)
    width = np.where(lca == 0, 0.0, width)
    return np.where(allow, width, -1.0), {"lca": lca, "pmin": pmin, "child": child, "Cmax": Cmax}


def _finalise(dims, stats, fin_seg, act, seg, S, next_cls, final_cls, labels, cell) -> int:
    """Make the segments ``fin_seg`` (no allowable cut) classes: their records get a class id,
    their labels and their cell loss (written into ``final_cls``, ``labels``, ``cell``).
    Returns the next free class id.
    """
    d = len(dims)
    new_ids = np.full(S, -1, dtype=np.int64)
    nf = int(fin_seg.sum())
    new_ids[fin_seg] = next_cls + np.arange(nf)
    rec_fin = fin_seg[seg]
    rec = act[rec_fin]
    rseg = seg[rec_fin]
    final_cls[rec] = new_ids[rseg]
    next_cls += nf
    loss_seg = np.zeros(S)
    for j, dd in enumerate(dims):
        st = stats[j]
        if dd["kind"] == "num":
            lo_v = dd["uniq"][st["lo"]]
            hi_v = dd["uniq"][st["hi"]]
            lab = np.array(
                [
                    _fmt_number(a) if a == b else f"{_fmt_number(a)}-{_fmt_number(b)}"
                    for a, b in zip(lo_v[fin_seg], hi_v[fin_seg])
                ],
                dtype=object,
            )
            loss_seg += st["width"]
        else:
            h = dd["h"]
            lca = st["lca"]
            lv = np.minimum(lca, h - 1)
            codes = dd["T"][lv, st["pmin"]]
            lab = np.array(
                [("*" if l_ >= h else dd["labels"][l_][c]) for l_, c in zip(lca[fin_seg], codes[fin_seg])],
                dtype=object,
            )
            if h > 1:
                loss_seg += np.where(lca >= h, 1.0, lca / (h - 1))
        seg_lab = np.empty(S, dtype=object)
        seg_lab[fin_seg] = lab
        labels[dd["name"]][rec] = seg_lab[rseg]
    cell[rec] = (loss_seg / d)[rseg]
    return next_cls


def _cut(dims, stats, best, split, act, seg) -> tuple[np.ndarray, np.ndarray]:
    """Cut every segment of ``split`` along its best dimension: the records still active and
    their new segment ids (dense, 0 … S − 1).
    """
    rec_sp = split[seg]
    act = act[rec_sp]
    seg = seg[rec_sp]
    sub = np.zeros(len(act), dtype=np.int64)
    bseg = best[seg]
    C = 2
    for j, dd in enumerate(dims):
        m = bseg == j
        if not m.any():
            continue
        if dd["kind"] == "num":
            sub[m] = (dd["rank"][act[m]] > stats[j]["thr"][seg[m]]).astype(np.int64)
        else:
            sub[m] = stats[j]["child"][rec_sp][m]
            C = max(C, stats[j]["Cmax"])
    _, seg = np.unique(seg * C + sub, return_inverse=True)
    return act, seg.astype(np.int64)


def _leaves_under(dd, levels: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(levels), dtype=np.float64)
    for lv in np.unique(levels):  # loop over hierarchy levels (few)
        m = levels == lv
        out[m] = dd["leaves_under"][int(lv)][codes[m]]
    return out
