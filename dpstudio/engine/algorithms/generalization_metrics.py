"""The information-loss metrics of a full-domain generalisation, for OLA's search (:mod:`.ola`).

Each metric is a callable ``(levels, class_sizes, n_suppressed, n) -> loss`` with a
``lower_bound(levels)`` that OLA uses to skip nodes: ``PrecisionLoss`` (the default),
ARX's ``ARXLoss``, ``DiscernibilityLoss``, ``AECSLoss`` (average equivalence class size) and
``EntropyLoss`` (non-uniform entropy); their docstrings say how suppressed records count.
:func:`_make_loss` turns a name (``LOSSES``) or a plain function into one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from dpstudio.engine.algorithms.generalization import EncodedQuasi
from dpstudio.engine.errors import ParameterError

__all__ = [
    "PrecisionLoss",
    "DiscernibilityLoss",
    "ARXLoss",
    "AECSLoss",
    "EntropyLoss",
    "LOSSES",
]


# ---------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------


class PrecisionLoss:
    """Paper 003 §III-A categorical precision: a cell at level l of a hierarchy of h levels
    loses l/(h−1); averaged over the cells of all k-quasis; a suppressed record loses 1
    in every cell.  ``lower_bound`` (no suppression) is monotone in the lattice.
    """

    name = "precision"

    def __init__(self, heights: Sequence[int]):
        self.den = np.array([max(h - 1, 1) for h in heights], dtype=np.float64)
        self.flat = np.array([h <= 1 for h in heights])

    def base(self, levels: np.ndarray) -> np.ndarray:
        """Loss of the unsuppressed cells for level vectors ``levels`` (..., d)."""
        lv = np.where(self.flat, 1.0, np.asarray(levels, dtype=np.float64) / self.den)
        return lv.mean(axis=-1)

    def lower_bound(self, levels: np.ndarray) -> np.ndarray:
        return self.base(levels)

    def __call__(self, levels, class_sizes: np.ndarray, n_suppressed: int, n: int) -> float:
        b = float(self.base(np.asarray(levels)))
        s = n_suppressed / n
        return (1.0 - s) * b + s


class _FrequencyLoss:
    """Base of the metrics that need the frequency set (the distinct leaf combinations of
    the k-quasis and their record counts): :meth:`prepare` receives it once, before the
    search.  ``uses_suppressed`` metrics also get, for a node, the mask of the bottom
    combinations whose records are suppressed there.
    """

    uses_suppressed = False

    def __init__(self, heights: Sequence[int]):
        self.heights = [int(h) for h in heights]

    def prepare(
        self, quasis: list[EncodedQuasi], up: list[dict], bottom: list[np.ndarray], counts: np.ndarray
    ) -> None:
        self.n = float(counts.sum())
        self.n_combos = len(counts)
        # cards[j][l]: number of distinct codes of attribute j at level l (class-count bound)
        self.cards = [np.array([qq.card(lv) for lv in range(qq.height)], dtype=np.float64) for qq in quasis]

    def _max_classes(self, levels: np.ndarray) -> np.ndarray:
        """Upper bound on the number of classes at ``levels``: min(distinct bottom
        combinations, product of the attributes' numbers of codes at their levels).
        """
        lv = np.asarray(levels)
        prod = np.ones(lv.shape[:-1])
        for j, c in enumerate(self.cards):
            prod = prod * c[lv[..., j]]
        return np.minimum(prod, self.n_combos)


class DiscernibilityLoss(_FrequencyLoss):
    """ARX's (non-monotonic) discernibility metric DM (``MetricSDNMDiscernability``),
    normalised by n²: (Σ_kept |E|² + n·|suppressed|) / n² — a suppressed record counts as
    if it shared its class with all n records.  Lower bound: Σ_all |E|² ≥ n²/#classes
    (Cauchy–Schwarz; a suppressed class of size s < n adds n·s ≥ s²), so 1/#classes with
    #classes bounded by :meth:`_max_classes`.
    """

    name = "discernibility"

    def lower_bound(self, levels: np.ndarray) -> np.ndarray:
        if not hasattr(self, "cards"):
            return np.full(np.asarray(levels).shape[:-1], -np.inf)
        return 1.0 / self._max_classes(levels)

    def __call__(self, levels, class_sizes: np.ndarray, n_suppressed: int, n: int) -> float:
        cs = np.asarray(class_sizes, dtype=np.float64)
        return float((np.sum(cs * cs) + n * n_suppressed) / (n * n))

    @staticmethod
    def bound_from_counts(counts: np.ndarray, n: int, k: int) -> float:
        """Lower bound at every node N ≥ M (more generalised) from the sizes c of all classes
        of M: Σ_M c·max(c, k) / n².  A record of an M-class of size c is, at N, in a class of
        size e ≥ c (classes only merge) that is kept (e ≥ k: it adds e ≥ max(c, k) to Σ|E|²)
        or suppressed (it adds n ≥ max(c, k)).  ARX's ``MetricSDNMDiscernability`` bound is
        Σ c², here strengthened by the suppression rule.
        """
        cs = np.asarray(counts, dtype=np.float64)
        return float(np.sum(cs * np.maximum(cs, float(k))) / (float(n) * float(n)))

    @staticmethod
    def _from_counts(counts: np.ndarray, small: np.ndarray, sup: int, n: int, k: int) -> tuple[float, float]:
        """(:meth:`bound_from_counts`, loss) of one node in one pass over its class sizes
        ``counts`` (``small = counts < k``, ``sup`` = records in them): both are
        (Σ_kept c² + x·sup) / n² with x = k or n.  Equal to the plain ones as long as the
        sums are exact integers in float64 (n, k < 2**26, checked by the lattice).
        """
        kept = np.asarray(counts.compress(~small), dtype=np.float64)
        sq = float(np.dot(kept, kept))
        return (sq + float(k) * sup) / (float(n) * float(n)), float((sq + n * sup) / (n * n))


class AECSLoss(_FrequencyLoss):
    """ARX's average equivalence class size (``MetricSDAECS``, generalisation/suppression
    factor 0.5): n / (#kept classes + 1 if any record is suppressed) — all suppressed
    records together count as one class, and n includes them.  Not normalised by k (as in
    ARX).  Lower bound: n / #classes (ignoring suppression), #classes bounded by
    :meth:`_max_classes`.
    """

    name = "aecs"

    def lower_bound(self, levels: np.ndarray) -> np.ndarray:
        if not hasattr(self, "cards"):
            return np.full(np.asarray(levels).shape[:-1], -np.inf)
        return self.n / self._max_classes(levels)

    def __call__(self, levels, class_sizes: np.ndarray, n_suppressed: int, n: int) -> float:
        return float(n / (len(class_sizes) + (1 if n_suppressed else 0)))

    @staticmethod
    def bound_from_counts(counts: np.ndarray, n: int, k: int) -> float:
        """Lower bound at every node N ≥ M (more generalised) from the class sizes of M.
        Classes only merge upwards, so a kept class of N (≥ k records) contains an M-class of
        size ≥ k or is made of M-classes smaller than k holding together ≥ k records:
        #kept(N) ≤ #big(M) + ⌊records in small M-classes / k⌋, and all suppressed records
        count as one more class.  Also #kept(N) + [suppressed] ≤ #classes(N) ≤ #classes(M).
        """
        cs = np.asarray(counts, dtype=np.int64)
        big = cs >= k
        most = int(big.sum()) + int(cs[~big].sum()) // int(k) + (1 if (~big).any() else 0)
        return float(n / max(min(most, len(cs)), 1))

    @staticmethod
    def _from_counts(counts: np.ndarray, small: np.ndarray, sup: int, n: int, k: int) -> tuple[float, float]:
        """(:meth:`bound_from_counts`, loss) of one node from its numbers of classes, of
        small classes (``small = counts < k``) and of suppressed records ``sup``.
        """
        n_small = int(np.count_nonzero(small))
        n_kept = len(counts) - n_small
        most = n_kept + sup // int(k) + (1 if n_small else 0)
        den = n_kept + (1 if sup else 0)
        return float(n / max(min(most, len(counts)), 1)), (float(n / den) if den else math.nan)


class ARXLoss(_FrequencyLoss):
    """ARX's default "Loss" metric (``MetricMDNMLoss``, gs-factor 0.5, geometric mean).

    For attribute j at level l a generalised value v covers the share
    ``share_l(v) = (#hierarchy rows whose level-l label is v) / (#hierarchy rows)`` of the
    domain (level 0: 1/#rows).  Per attribute, ``L_j = Σ_records share`` with a
    **suppressed record counting 1** (its whole domain); normalised as in ARX,
    ``(L_j − n/#rows) / (n − n/#rows)`` clipped at 0 (0 when the hierarchy has one row);
    aggregated by ARX's geometric mean ``(Π_j (1 + L_j))^(1/d) − 1``.  Lower bound: the
    same without suppression (precomputed for every level, monotone).
    """

    name = "loss"
    uses_suppressed = True

    def prepare(self, quasis, up, bottom, counts) -> None:
        super().prepare(quasis, up, bottom, counts)
        cnt = counts.astype(np.float64)
        self.share: list[list[np.ndarray]] = []  # share[j][l][b], per bottom combination
        self.base: list[np.ndarray] = []  # base[j][l] = Σ_records share (no suppression)
        self.rows = []
        for j, qq in enumerate(quasis):
            rows = len(qq.hierarchy.leaves)
            self.rows.append(rows)
            per_l, base = [], np.zeros(qq.height)
            for lv in range(qq.height):
                per_code = np.bincount(qq.codes[lv], minlength=qq.card(lv)) / rows
                sh = per_code[up[j][(0, lv)][bottom[j]]]
                per_l.append(sh)
                base[lv] = float((cnt * sh).sum())
            self.share.append(per_l)
            self.base.append(base)
        self.counts = cnt

    def _aggregate(self, per_dim: np.ndarray) -> np.ndarray:
        rows = np.array(self.rows, dtype=np.float64)
        lo = self.n / rows
        den = self.n - lo
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(den > 0, (per_dim - lo) / np.where(den > 0, den, 1.0), 0.0)
        v = np.maximum(v, 0.0)
        return np.exp(np.mean(np.log1p(v), axis=-1)) - 1.0

    def lower_bound(self, levels: np.ndarray) -> np.ndarray:
        lv = np.asarray(levels)
        per_dim = np.stack([b[lv[..., j]] for j, b in enumerate(self.base)], axis=-1)
        return self._aggregate(per_dim)

    def __call__(self, levels, class_sizes, n_suppressed, n, suppressed=None) -> float:
        lv = [int(x) for x in levels]
        per_dim = np.array([b[lev] for b, lev in zip(self.base, lv)])
        if suppressed is not None and suppressed.any():
            c = self.counts[suppressed]
            per_dim = per_dim + np.array(
                [(c * (1.0 - self.share[j][lev][suppressed])).sum() for j, lev in enumerate(lv)]
            )
        return float(self._aggregate(per_dim))


class EntropyLoss(_FrequencyLoss):
    """ARX's non-uniform entropy (``MetricMDNUNMEntropy``, gs-factor 0.5, sum over the
    attributes), in bits.  Attribute j at level l loses ``Σ_records −log2(a/b)`` where a
    is the number of records with the record's original value and b the number with its
    level-l value — over **all** records, suppressed ones included; then the
    **suppressed records** add, per attribute, the entropy of replacing their level-l
    values by the suppression: ``Σ_v c_v·log2(S/c_v)``, c_v = suppressed records with
    level-l value v, S = all suppressed records (ARX's non-monotonic variant).  Lower
    bound: the first term alone (precomputed for every level, monotone).
    """

    name = "entropy"
    uses_suppressed = True

    def prepare(self, quasis, up, bottom, counts) -> None:
        super().prepare(quasis, up, bottom, counts)
        cnt = counts.astype(np.float64)
        self.counts = cnt
        self.codes: list[list[np.ndarray]] = []  # codes[j][lev][b]: level-l code of combo b
        self.base: list[np.ndarray] = []
        for j, qq in enumerate(quasis):
            a = np.bincount(bottom[j], weights=cnt, minlength=qq.card(0))
            nz = np.flatnonzero(a)
            per_l, base = [], np.zeros(qq.height)
            for lv in range(qq.height):
                m = up[j][(0, lv)]
                per_l.append(m[bottom[j]])
                b = np.bincount(m[nz], weights=a[nz], minlength=qq.card(lv))
                base[lv] = float(np.sum(a[nz] * np.log2(b[m[nz]] / a[nz])))
            self.codes.append(per_l)
            self.base.append(base)

    def lower_bound(self, levels: np.ndarray) -> np.ndarray:
        lv = np.asarray(levels)
        return sum(b[lv[..., j]] for j, b in enumerate(self.base))

    def __call__(self, levels, class_sizes, n_suppressed, n, suppressed=None) -> float:
        lv = [int(x) for x in levels]
        tot = float(sum(b[lev] for b, lev in zip(self.base, lv)))
        if suppressed is not None and suppressed.any():
            c = self.counts[suppressed]
            S = c.sum()
            for j, lev in enumerate(lv):
                cv = np.bincount(self.codes[j][lev][suppressed], weights=c)
                cv = cv[cv > 0]
                tot += float(np.sum(cv * np.log2(S / cv)))
        return tot


LOSSES = {
    "precision": PrecisionLoss,
    "loss": ARXLoss,
    "discernibility": DiscernibilityLoss,
    "aecs": AECSLoss,
    "entropy": EntropyLoss,
}


class _CallableLoss:
    name = "custom"

    def __init__(self, fn: Callable):
        self.fn = fn

    def lower_bound(self, levels):
        return np.full(np.asarray(levels).shape[:-1], -np.inf)

    def __call__(self, levels, class_sizes, n_suppressed, n):
        return float(self.fn(tuple(int(x) for x in levels), class_sizes, n_suppressed, n))


def _make_loss(loss, heights):
    if loss is None:
        return PrecisionLoss(heights)
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ParameterError(f"Unknown loss {loss!r}; use one of {', '.join(LOSSES)} or a function.")
        return LOSSES[loss](heights)
    if hasattr(loss, "lower_bound") and callable(loss):
        return loss
    if callable(loss):
        return _CallableLoss(loss)
    raise ParameterError(f"loss must be a name or a function; got {type(loss).__name__}.")
