"""Measures of (k, ε)-anonymity (docs/measures.md; paper 003 §V) and the within-class helpers that
the ``k-eps`` method shares with them.

All functions take *class ids* (one per released record) and work with sorted int64 keys,
so nothing loops over records.  Exact comparisons: values and window bounds are ranked
jointly (``np.unique``) before being combined with the class id, so ties at a window's
edge are counted as in the paper's closed intervals.

Measures (keys returned by :func:`keps_measures`, registered for ``k-eps``):

``keps_rel_error``
    realised average relative error ``mean |v′ − v| / |v|`` over ε-quasi cells with v ≠ 0;
``keps_rel_error_zeros``
    number of cells skipped because v = 0;
``keps_rel_error_expected``
    eq. 8 before noise, ``(1/ε) Σ_ec diam(ec)·|ec| / (H(ec)·n)``, computed as the mean of
    E|Z_ec| / |v| over the same cells (equal to eq. 8 when no v is 0);
``keps_linking_risk``
    share of released records whose original ε-quasi is (one of) the closest, inside its
    class, to its released value (§V-B; L1 distance for several ε-quasis);
``keps_conf_suppressed_pct`` / ``keps_conf_suppressed_classes_pct`` / ``keps_conf_c``
    c-confident k-anonymity (§V-C): percentage of records / classes it suppresses at
    confidence c (the method's ``confidence`` if it ran that step — then the shares it
    applied — else 0.99);
``keps_gen_loss``
    generalisation loss (precision, paper 003 §III-A) of the released k-quasis;
``keps_ola_suppressed_pct``
    records suppressed by the generalisation step (OLA), percent of the input;
``keps_min_class_size`` / ``keps_share_below_k``
    smallest class on the released k-quasis and the share of records in classes < k.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.frequencies import class_sizes

__all__ = [
    "keps_measures",
    "count_within",
    "nearest_member_linked",
    "class_diameters",
    "noise_abs_mean",
    "confidence_radius",
    "confident_suppression",
    "KEPS_MEASURE_KEYS",
]

KEPS_MEASURE_KEYS = (
    "keps_rel_error",
    "keps_rel_error_zeros",
    "keps_rel_error_expected",
    "keps_linking_risk",
    "keps_conf_suppressed_pct",
    "keps_conf_suppressed_classes_pct",
    "keps_conf_c",
    "keps_gen_loss",
    "keps_ola_suppressed_pct",
    "keps_min_class_size",
    "keps_share_below_k",
)


# ---------------------------------------------------------------------------
# noise facts (unit sensitivity; both scale linearly with the sensitivity)
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def noise_abs_mean(kind: str, epsilon: float) -> float:
    """E|Z| of ε-DP noise of ``kind`` for sensitivity 1 (Laplace: 1/ε)."""
    if kind == "laplace":
        return 1.0 / float(epsilon)
    if kind == "staircase":
        from dpstudio.engine.algorithms.noise import _m0, staircase_optimal_d

        eps = float(epsilon)
        d = staircase_optimal_d(1.0, eps)
        m0 = _m0(1.0, eps, d)
        q = math.exp(-eps)
        # 2 [ ∫_0^d x M0 dx + Σ_i M0 q^{i+1} ∫_{d+i}^{d+i+1} x dx ]
        #   = 2 M0 [ d²/2 + q (d + 1/2) / (1 − q) + q² / (1 − q)² ]
        return 2.0 * m0 * (d * d / 2.0 + q * (d + 0.5) / (1.0 - q) + q * q / (1.0 - q) ** 2)
    raise ValueError(f"unknown noise kind {kind!r}")


@functools.lru_cache(maxsize=256)
def confidence_radius(kind: str, epsilon: float, c: float) -> float:
    """The radius r with P(|Z| ≤ r) = c for sensitivity 1 (Laplace: −ln(1 − c)/ε, paper 003 §V-C)."""
    c = float(c)
    if not 0.0 < c < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if kind == "laplace":
        return -math.log1p(-c) / float(epsilon)
    if kind == "staircase":
        from dpstudio.engine.algorithms.noise import staircase_cdf

        lo, hi = 0.0, 1.0
        while 2.0 * (float(staircase_cdf(hi, 1.0, epsilon)) - 0.5) < c:
            hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if 2.0 * (float(staircase_cdf(mid, 1.0, epsilon)) - 0.5) < c:
                lo = mid
            else:
                hi = mid
        return hi
    raise ValueError(f"unknown noise kind {kind!r}")


# ---------------------------------------------------------------------------
# within-class helpers
# ---------------------------------------------------------------------------


def class_diameters(cls: np.ndarray, X: np.ndarray, n_classes: int | None = None) -> np.ndarray:
    """(n_classes, m) max − min of each column of ``X`` inside each class."""
    X = np.asarray(X, dtype=np.float64).reshape(len(cls), -1)
    if n_classes is None:
        n_classes = int(cls.max()) + 1 if len(cls) else 0
    out = np.zeros((n_classes, X.shape[1]))
    if len(cls) == 0:
        return out
    order = np.argsort(cls, kind="stable")
    cs = cls[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    ids = cs[starts]
    Xs = X[order]
    out[ids] = np.maximum.reduceat(Xs, starts, axis=0) - np.minimum.reduceat(Xs, starts, axis=0)
    return out


def _ranked_keys(cls_data, v, cls_q, *queries):
    """int64 keys (class, joint rank of value) for data and for each query array."""
    allv = np.concatenate(
        [np.asarray(v, dtype=np.float64)] + [np.asarray(q, dtype=np.float64) for q in queries]
    )
    _, rank = np.unique(allv, return_inverse=True)
    R = int(rank.max()) + 1 if rank.size else 1
    n = len(v)
    dk = cls_data.astype(np.int64) * R + rank[:n]
    out, pos = [], n
    for q in queries:
        out.append(cls_q.astype(np.int64) * R + rank[pos : pos + len(q)])
        pos += len(q)
    return dk, out


def count_within(
    cls_data: np.ndarray, data: np.ndarray, cls_q: np.ndarray, centre: np.ndarray, radius: np.ndarray
) -> np.ndarray:
    """For each query i: #{j : cls_data[j] == cls_q[i], centre[i] − radius[i] ≤ data[j] ≤
    centre[i] + radius[i]} (the paper's closed interval; a box for several columns).
    """
    data = np.asarray(data, dtype=np.float64)
    centre = np.asarray(centre, dtype=np.float64)
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), (len(cls_q),))
    if data.ndim == 1 or data.shape[1] == 1:
        v = data.reshape(-1)
        c = centre.reshape(-1)
        dk, (lk, hk) = _ranked_keys(cls_data, v, cls_q, c - radius, c + radius)
        sk = np.sort(dk)
        return (np.searchsorted(sk, hk, side="right") - np.searchsorted(sk, lk, side="left")).astype(np.int64)
    return _per_class(
        cls_data,
        data,
        cls_q,
        centre,
        lambda D, Q, r: (
            (
                (D[None, :, :] >= (Q - r[:, None])[:, None, :])
                & (D[None, :, :] <= (Q + r[:, None])[:, None, :])
            )
            .all(axis=2)
            .sum(1)
        ),
        radius,
    )


def nearest_member_linked(
    cls_data: np.ndarray, data: np.ndarray, released: np.ndarray, own: np.ndarray
) -> np.ndarray:
    """Linking indicator of paper 003 §V-B: query i (class ``cls_data[i]``, released value
    ``released[i]``, own original ``own[i]`` = data[i]) is linked when its original is (one
    of) the closest class members to its released value (L1 for several columns).
    """
    data = np.asarray(data, dtype=np.float64)
    rel = np.asarray(released, dtype=np.float64)
    if data.ndim == 1 or data.shape[1] == 1:
        v = data.reshape(-1)
        r = rel.reshape(-1)
        dk, (qk,) = _ranked_keys(cls_data, v, cls_data, r)
        order = np.lexsort((v, cls_data))
        sk = dk[order]
        vs = v[order]
        cs = cls_data[order]
        idx = np.searchsorted(sk, qk, side="right")
        n = len(v)
        best = np.full(n, np.inf)
        ok = idx > 0
        j = np.maximum(idx - 1, 0)
        ok &= cs[j] == cls_data
        best = np.where(ok, np.abs(r - vs[j]), best)
        ok2 = idx < n
        j2 = np.minimum(idx, n - 1)
        ok2 &= cs[j2] == cls_data
        best = np.minimum(best, np.where(ok2, np.abs(vs[j2] - r), np.inf))
        mine = np.abs(r - v)
        return mine <= best * (1 + 1e-12) + 1e-300
    mine = np.abs(rel - data).sum(axis=1)
    nearest = _per_class(
        cls_data,
        data,
        cls_data,
        rel,
        lambda D, Q, _r: np.abs(Q[:, None, :] - D[None, :, :]).sum(axis=2).min(axis=1),
        np.zeros(len(cls_data)),
        dtype=np.float64,
    )
    return mine <= nearest * (1 + 1e-12) + 1e-300


def _per_class(cls_data, data, cls_q, queries, fn, radius, dtype=np.int64):
    """Apply ``fn(members, queries, radius)`` class by class (several ε-quasis only: a loop
    over classes, blocks of at most ~4M distances).
    """
    out = np.zeros(len(cls_q), dtype=dtype)
    od = np.argsort(cls_data, kind="stable")
    oq = np.argsort(cls_q, kind="stable")
    cd, cq = cls_data[od], cls_q[oq]
    ids = np.unique(cq)
    ds = np.searchsorted(cd, ids, "left"), np.searchsorted(cd, ids, "right")
    qs = np.searchsorted(cq, ids, "left"), np.searchsorted(cq, ids, "right")
    for i in range(len(ids)):  # loop over classes (unavoidable for multi-column boxes)
        D = data[od[ds[0][i] : ds[1][i]]]
        qi = oq[qs[0][i] : qs[1][i]]
        step = max(1, 4_000_000 // max(len(D) * data.shape[1], 1))
        for s in range(0, len(qi), step):
            sl = qi[s : s + step]
            out[sl] = fn(D, queries[sl], radius[sl])
    return out


def confident_suppression(
    cls: np.ndarray, orig: np.ndarray, released: np.ndarray, radius: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """c-confident k-anonymity (paper 003 §V-C, docs/methods.md step 5).

    ``radius[i]`` = r_c of record i's class.  Returns (records to suppress (bool), classes
    suppressed whole (bool per class id)).  A record with 0 < ℓ < k is suppressed, ℓ being
    the number of original class members within [v′ − r_c, v′ + r_c]; a class left with
    fewer than k records is then suppressed whole.
    """
    ell = count_within(cls, orig, cls, released, radius)
    risky = (ell > 0) & (ell < k)
    n_cls = int(cls.max()) + 1 if len(cls) else 0
    size = np.bincount(cls, minlength=n_cls)
    left = size - np.bincount(cls[risky], minlength=n_cls)
    whole = (left < k) & (size > 0)
    sup = risky | whole[cls]
    return sup, whole


# ---------------------------------------------------------------------------
# the measures hook
# ---------------------------------------------------------------------------


def keps_measures(original: pd.DataFrame, protected: pd.DataFrame, result, measures=(), cache=None) -> dict:
    """Scalar (k, ε)-anonymity measures of a ``k-eps`` result (see the module docstring)."""
    info = getattr(result, "info", {}) or {}
    params = getattr(result, "params", {}) or {}
    roles = {c: str(getattr(r, "value", r)) for c, r in (getattr(result, "roles", {}) or {}).items()}
    eq = [c for c, r in roles.items() if r == "eps-quasi" and c in protected.columns]
    kq = [c for c, r in roles.items() if r == "k-quasi" and c in protected.columns]
    out: dict = {}
    k = int(params.get("k") or 1)
    cls = info.get("class_of_row")
    if cls is None or len(cls) != len(protected):
        return out
    cls = np.asarray(cls, dtype=np.int64)
    n = len(protected)
    scale = np.asarray(info.get("sensitivity_of_row", np.zeros(n)), dtype=np.float64)
    eps = params.get("epsilon")
    kind = params.get("noise") or "laplace"
    if eq and n:
        X = original[eq].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
        Y = protected[eq].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
        nz = X != 0
        zeros = int((~nz).sum())
        out["keps_rel_error"] = (
            float(np.mean(np.abs(Y - X)[nz] / np.abs(X[nz]))) if nz.any() else float("nan")
        )
        out["keps_rel_error_zeros"] = zeros
        if eps is None:
            out["keps_rel_error_expected"] = 0.0
        else:
            ez = scale * noise_abs_mean(kind, float(eps))  # E|Z| per record
            out["keps_rel_error_expected"] = (
                float(np.mean((ez[:, None] / np.abs(np.where(nz, X, 1.0)))[nz])) if nz.any() else float("nan")
            )
        linked = nearest_member_linked(cls, X, Y, X)
        out["keps_linking_risk"] = float(linked.mean())
        conf = info.get("confidence_step")
        if conf:
            out["keps_conf_c"] = float(conf["c"])
            out["keps_conf_suppressed_pct"] = 100.0 * conf["records_share"]
            out["keps_conf_suppressed_classes_pct"] = 100.0 * conf["classes_share"]
        elif eps is not None:
            c = 0.99
            r = scale * confidence_radius(kind, float(eps), c)
            sup, whole = confident_suppression(cls, X, Y, r, k)
            n_cls = int(len(np.unique(cls)))
            out["keps_conf_c"] = c
            out["keps_conf_suppressed_pct"] = 100.0 * float(sup.mean())
            out["keps_conf_suppressed_classes_pct"] = 100.0 * float(whole.sum()) / max(n_cls, 1)
        else:
            out["keps_conf_c"] = 0.99
            out["keps_conf_suppressed_pct"] = 0.0  # no noise: nothing to suppress
            out["keps_conf_suppressed_classes_pct"] = 0.0
    gen = info.get("generalisation") or {}
    if "released_loss" in info:
        out["keps_gen_loss"] = float(info["released_loss"])
    n_in = int(info.get("records_in", n) or n)
    out["keps_ola_suppressed_pct"] = 100.0 * float(gen.get("suppressed_records", 0)) / max(n_in, 1)
    if kq and n:
        codes, cnt = class_sizes(protected[c] for c in kq)
        out["keps_min_class_size"] = int(cnt.min())
        out["keps_share_below_k"] = float((cnt[codes] < k).mean())
    return out
