"""k-anonymity by generalisation: OLA (optimal full-domain) and Mondrian (multidimensional).

Both work on integer codes, never on strings:

- every k-quasi is encoded once (:func:`encode_quasis`): the leaf index of each record
  in the column's hierarchy, and for every level an array leaf → code at that level;
- **OLA** (El Emam et al. 2009) searches the lattice of level vectors (one level per
  attribute) for the full-domain generalisation of least loss among those that are
  k-anonymous after suppressing at most ``suppression × n`` records (the records in
  classes smaller than k).  As in OLA it relies on *predictive tagging*: a k-anonymous
  node makes all its generalisations k-anonymous, a node that is not makes all its
  specialisations not k-anonymous.  The search itself differs from El Emam's recursive
  sub-lattice bisection (which revisits sub-lattices far too often to be fast in Python):
  a binary search along one generalisation path (bottom → top) gives a first k-anonymous
  node and loss bound; then every node whose loss *lower bound* is below the best loss
  found is visited from the top of that region downwards — a node found not k-anonymous
  there rules out everything below it — and k-anonymous ones are scored.  The optimum is
  therefore exact (the tests compare it with brute force), also for losses that are not
  monotone (the precision loss with suppressed records counted as fully generalised is
  not).  A node is evaluated on integer codes only: the attributes are split into two
  groups, each group's level vector gets dense ids for the distinct records (cached and
  shared by many nodes), and class sizes are ``bincount(id_A · n_B + id_B)`` (or a sort
  of packed int64 keys when that range is large);
- **Mondrian** (LeFevre, DeWitt, Ramakrishnan 2006), strict multidimensional
  partitioning: each partition is cut at the median of its widest (normalised)
  dimension among the cuts that leave ≥ k records on each side; categorical
  attributes are cut along their hierarchy (a partition's value is the lowest common
  ancestor of its leaves; a cut splits it into its children, allowed when every
  non-empty child holds ≥ k records).  All partitions of one depth are processed
  together with sorted int64 keys, so there is no per-record or per-partition Python
  loop.

Both verify the k-anonymity of what they return (:func:`verify_k_anonymity`).

>>> import pandas as pd
>>> from dpstudio.engine.hierarchies.hierarchy import Hierarchy
>>> df = pd.DataFrame({"sex": ["M", "F"] * 6, "age": [20, 21, 22, 23, 30, 31] * 2})
>>> res = mondrian(df, ["sex", "age"], k=3)
>>> res.min_class_size >= 3
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.build import _fmt_number, auto_hierarchy, factorize_strings
from dpstudio.engine.hierarchies.hierarchy import Hierarchy, load_hierarchy

__all__ = [
    "EncodedQuasi",
    "encode_quasis",
    "GeneralisationResult",
    "ola",
    "mondrian",
    "verify_k_anonymity",
    "PrecisionLoss",
    "DiscernibilityLoss",
    "ARXLoss",
    "AECSLoss",
    "EntropyLoss",
    "LOSSES",
    "resolve_hierarchies",
]

_MAX_LATTICE = 5_000_000


# ---------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------


class _SplitGroup(TypedDict):
    """One attribute group of :meth:`_Lattice._setup_split`."""

    attrs: list[int]  # attribute indices, sorted
    row_id: np.ndarray  # group combo id of every bottom row
    n0: int  # number of distinct group combos (at level 0)
    distinct: list[np.ndarray]  # level-0 codes of the group's combos
    vec_of: list[int]  # node -> index of its group level vector
    maps: dict[int, tuple[np.ndarray, int]]  # vector index -> (dense id of each group combo, count)
    rows: dict[int, tuple[np.ndarray, int]]  # vector index -> (dense id of each bottom row, count)


@dataclass
class EncodedQuasi:
    """One k-quasi as integers.

    ``leaf[r]`` is record r's leaf index in ``hierarchy``; ``codes[l][leaf]`` its code at
    level l and ``labels[l][code]`` the label of that code.
    """

    name: str
    hierarchy: Hierarchy
    leaf: np.ndarray
    codes: list[np.ndarray]
    labels: list[np.ndarray]

    @property
    def height(self) -> int:
        return self.hierarchy.height

    def card(self, level: int) -> int:
        return len(self.labels[level])


def resolve_hierarchies(
    df: pd.DataFrame, columns: Sequence[str], hierarchies: dict | None
) -> dict[str, Hierarchy]:
    """Column → :class:`Hierarchy`: the given ones (paths or objects), automatic ones otherwise."""
    hierarchies = dict(hierarchies or {})
    unknown = [c for c in hierarchies if c not in df.columns]
    if unknown:
        raise ParameterError(
            f"Hierarchy given for column(s) not in the data: {', '.join(map(repr, unknown))}."
        )
    out = {}
    for c in columns:
        h = hierarchies.get(c)
        out[c] = load_hierarchy(h, c) if h is not None else auto_hierarchy(df[c], name=c)
    return out


def _encode_one(name: str, values: pd.Series, h: Hierarchy) -> EncodedQuasi:
    codes, labels = factorize_strings(values)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise InputError(
            f"Column {name!r} has a missing value in row {row + 1}; impute it or enable drop_missing."
        )
    index = {v: i for i, v in enumerate(h.leaves)}
    lut = np.fromiter((index.get(str(v), -1) for v in labels), dtype=np.int64, count=len(labels))
    if (lut < 0).any():
        bad = np.flatnonzero(lut < 0)
        first = int(np.flatnonzero(codes == bad[0])[0])
        src = f" ({h.source})" if h.source and not h.source.startswith("auto") else ""
        raise InputError(
            f"Column {name!r}: value {labels[bad[0]]!r} (row {first + 1}) is not in its "
            f"hierarchy{src}"
            + (f"; {len(bad)} distinct values are missing in all" if len(bad) > 1 else "")
            + ". Add them to the hierarchy file, or remove the file to let dpstudio build one."
        )
    # (the smallest integers that hold the leaf indices: 3,000,000 records × 8 k-quasis are
    # 48 MB in int16 instead of 192 MB in int64, issue 27)
    leaf = lut.astype(np.min_scalar_type(-max(len(lut), 1)))[codes]
    lv_codes, lv_labels = [], []
    for lvl in range(h.height):
        lab, inv = h.level_codes(lvl)
        lv_codes.append(inv)
        lv_labels.append(lab)
    return EncodedQuasi(name, h, leaf, lv_codes, lv_labels)


def encode_quasis(
    df: pd.DataFrame, columns: Sequence[str], hierarchies: dict | None = None
) -> list[EncodedQuasi]:
    """Encode ``columns`` of ``df`` against their hierarchies (automatic where none given)."""
    hs = resolve_hierarchies(df, columns, hierarchies)
    return [_encode_one(c, df[c], hs[c]) for c in columns]


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


# ---------------------------------------------------------------------------
# results and verification
# ---------------------------------------------------------------------------


class CodedLabels(Mapping):
    """Column → the generalised value of every record (object array, ``None`` for suppressed
    records), held as codes: :meth:`codes_of` gives each record's index into
    ``categories[col]`` (−1 = suppressed), from the codes of the distinct combinations and
    each record's combination (``rows``) when given.  A column's object array is built on
    first access only; k-eps releases a column from its codes without ever building it
    (issue 27: 3,000,000 records).
    """

    def __init__(
        self, codes: dict[str, np.ndarray], categories: dict[str, np.ndarray], rows: np.ndarray | None = None
    ):
        self._codes = codes
        self._rows = rows
        self.categories = categories
        self._built: dict[str, np.ndarray] = {}

    def codes_of(self, col: str, rows: np.ndarray | None = None) -> np.ndarray:
        """The codes of records ``rows`` (default: all) in ``col``."""
        c = self._codes[col]
        if self._rows is not None:  # codes per distinct combination, rows[r] = record r's
            return c[self._rows if rows is None else self._rows[rows]]
        return c if rows is None else c[rows]

    def __getitem__(self, col: str) -> np.ndarray:
        if col not in self._built:
            cats = np.empty(len(self.categories[col]) + 1, dtype=object)
            cats[:-1] = self.categories[col]
            cats[-1] = None  # code -1
            self._built[col] = cats[self.codes_of(col)]
        return self._built[col]

    def __iter__(self):
        return iter(self._codes)

    def __len__(self) -> int:
        return len(self._codes)


@dataclass
class GeneralisationResult:
    """A k-anonymous generalisation of the k-quasis.

    ``class_id[r]`` is record r's equivalence class (0..n_classes−1), −1 when the record
    is suppressed.  ``labels[col]`` holds the generalised value of every record (object
    array; ``None`` for suppressed records; OLA gives a :class:`CodedLabels`).  ``node`` is
    OLA's level vector (None for Mondrian).  ``cell_loss[r]`` is record r's generalisation
    loss averaged over the k-quasis (1 for suppressed records).
    """

    algorithm: str
    k: int
    columns: list[str]
    class_id: np.ndarray
    labels: Mapping[str, np.ndarray]
    loss: float
    loss_name: str
    cell_loss: np.ndarray
    node: tuple[int, ...] | None = None
    levels: dict[str, int] = field(default_factory=dict)
    heights: dict[str, int] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def suppressed(self) -> np.ndarray:
        return self.class_id < 0

    @property
    def n_suppressed(self) -> int:
        return int(np.count_nonzero(self.class_id < 0))

    @property
    def suppression_share(self) -> float:
        return self.n_suppressed / max(len(self.class_id), 1)

    @property
    def class_sizes(self) -> np.ndarray:
        kept = self.class_id[self.class_id >= 0]
        return np.bincount(kept) if kept.size else np.zeros(0, dtype=np.int64)

    @property
    def n_classes(self) -> int:
        return int(self.class_sizes.size)

    @property
    def min_class_size(self) -> int:
        cs = self.class_sizes
        return int(cs.min()) if cs.size else 0

    def summary(self) -> dict:
        d = {
            "algorithm": self.algorithm,
            "k": self.k,
            "loss": self.loss,
            "loss_name": self.loss_name,
            "suppressed_records": self.n_suppressed,
            "suppression_share": self.suppression_share,
            "classes": self.n_classes,
            "min_class_size": self.min_class_size,
        }
        if self.node is not None:
            d["node"] = list(self.node)
            d["levels"] = dict(self.levels)
            d["heights"] = dict(self.heights)
        d.update({k: v for k, v in self.info.items() if np.isscalar(v) or isinstance(v, (list, dict))})
        return d


def verify_k_anonymity(
    labels: dict[str, np.ndarray], keep: np.ndarray, k: int, weights: np.ndarray | None = None
) -> int:
    """Smallest class size of the released (kept) records grouped by their generalised
    values; raise ``RuntimeError`` if it is below ``k`` (an internal error: it must never
    happen).  With ``weights``, each row stands for ``weights[row]`` records (a frequency
    set: distinct combinations and their record counts).
    """
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return 0
    from dpstudio.engine.measures.kanon import class_sizes

    codes, counts = class_sizes((lab[idx] for lab in labels.values()), n=idx.size)
    if weights is not None:
        counts = np.bincount(codes, weights=np.asarray(weights)[idx]).astype(np.int64)
    smallest = int(counts.min())
    if smallest < k:
        raise RuntimeError(
            f"internal error: generalised output has a class of {smallest} < k = {k} "
            "records; please report this."
        )
    return smallest


# ---------------------------------------------------------------------------
# OLA
# ---------------------------------------------------------------------------


def _combine(cols: list[np.ndarray], cards: list[int]) -> tuple[np.ndarray, int, bool]:
    """Combined int64 key of code columns; (key, key range, exact mixed radix?)."""
    return _combine_lazy([_const(c) for c in cols], cards)


def _const(a: np.ndarray) -> Callable[[], np.ndarray]:
    """A getter of ``a`` (for :func:`_combine_lazy`)."""

    def get() -> np.ndarray:
        return a

    return get


def _leaf_codes(qq: Any) -> Callable[[], np.ndarray]:
    """A getter of ``qq``'s records' level-0 codes (for :func:`_combine_lazy`)."""

    def get() -> np.ndarray:
        return qq.codes[0][qq.leaf]

    return get


def _combine_lazy(cols: list[Callable[[], np.ndarray]], cards: list[int]) -> tuple[np.ndarray, int, bool]:
    """:func:`_combine` of code columns made one at a time by ``cols`` (the same key)."""
    if not cols:
        return np.zeros(0, dtype=np.int64), 1, True
    key = np.array(cols[0](), dtype=np.int64)
    rng_ = int(cards[0])
    exact = True
    for c, m in zip(cols[1:], cards[1:]):
        if rng_ * m >= 2**62:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64)
            rng_ = int(key.max()) + 1 if key.size else 1
            exact = False
        key *= m
        key += c()
        rng_ *= m
    return key, rng_, exact


class _Lattice:
    """The generalisation lattice of level vectors, with predictive tagging and a cache of
    frequency tables (distinct code combinations at a node and their record counts).
    """

    _CACHE_CELLS = 2_000_000

    def __init__(self, quasis: list[EncodedQuasi], k: int, max_suppressed: int, loss):
        self.q = quasis
        self.d = len(quasis)
        self.k = k
        self.max_sup = max_suppressed
        self.heights = np.array([qq.height for qq in quasis], dtype=np.int64)
        size = int(np.prod(self.heights))
        if size > _MAX_LATTICE:
            raise ParameterError(
                f"The generalisation lattice has {size:,} nodes (hierarchy levels "
                f"{' × '.join(str(h) for h in self.heights)}); OLA handles at most "
                f"{_MAX_LATTICE:,}. Use fewer k-quasis, shorter hierarchies, or algorithm='mondrian'."
            )
        self.size = size
        self.L = np.stack(np.unravel_index(np.arange(size), tuple(self.heights)), axis=1).astype(np.int16)
        self.height_of = self.L.sum(axis=1).astype(np.int64)
        # ge[j][a] = nodes whose level of attribute j is >= a (tagging by AND of d masks)
        self._shape = tuple(int(h) for h in self.heights)
        self._strides = np.array([int(np.prod(self.heights[j + 1 :])) for j in range(self.d)])
        self.status = np.zeros(size, dtype=np.int8)  # 1 anonymous, -1 not, 0 unknown
        self.sup = np.full(size, -1, dtype=np.int64)
        self.loss = loss
        self.loss_val = np.full(size, np.nan)
        self.evaluated = 0
        self._last: tuple[int, np.ndarray] | None = None
        # bounds learnt during the search (issue 13): a loss with ``bound_from_counts`` gives,
        # from the class sizes of an evaluated node M, a lower bound of its loss at every node
        # N ≥ M (more generalised): it is raised on all of them at once
        self.dyn_lb = np.full(size, -np.inf) if hasattr(loss, "bound_from_counts") else None
        self._score_now = self.dyn_lb is not None and not getattr(loss, "uses_suppressed", False)
        self._fast: Callable | None = None  # set below, once n is known
        # n-dimensional views of the per-node arrays: the nodes >= / <= a node are a box
        self._dyn_nd = None if self.dyn_lb is None else self.dyn_lb.reshape(self._shape)
        self._status_nd = self.status.reshape(self._shape)
        self._nones = [None] * self.d
        self._zeros = [0] * self.d
        # level-a code -> level-b code maps per attribute
        self.up: list[dict[tuple[int, int], np.ndarray]] = []
        for qq in quasis:
            maps = {}
            for a in range(qq.height):
                rep = np.zeros(qq.card(a), dtype=np.int64)
                rep[qq.codes[a]] = np.arange(len(qq.codes[a]))
                for b in range(a, qq.height):
                    maps[(a, b)] = qq.codes[b][rep].astype(np.int64)
            self.up.append(maps)
        # the bottom table: distinct leaf combinations and their counts
        # (the frequency set: one group-by of the records; everything after works on it)
        # (the records' level-0 codes are combined one column at a time: never d columns of
        # n int64 at once, issue 27)
        cards0 = [qq.card(0) for qq in quasis]
        key, rng0, exact = _combine_lazy([_leaf_codes(qq) for qq in quasis], cards0)
        if exact and rng0 <= 4 * len(key) + 4096:
            present = np.bincount(key, minlength=rng0)
            nz = np.flatnonzero(present)
            counts = present[nz]
            dense = np.zeros(rng0, dtype=np.int64)
            dense[nz] = np.arange(len(nz))
            inv = dense[key]
            bottom = [c.astype(np.int64) for c in np.unravel_index(nz, tuple(cards0))]
        else:
            uk, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
            first = np.zeros(len(uk), dtype=np.int64)
            first[inv[::-1]] = np.arange(len(inv))[::-1]
            bottom = [np.ascontiguousarray(qq.codes[0][qq.leaf[first]]) for qq in quasis]
        del key
        self.record_combo = inv.astype(np.int64)
        self.n = int(len(inv))
        self._n = self.n
        self.tables: dict[int, tuple[list[np.ndarray], np.ndarray]] = {0: (bottom, counts.astype(np.int64))}
        self._tab_nodes = np.zeros(64, dtype=np.int64)
        self._tab_sizes = np.zeros(64, dtype=np.int64)
        self._tab_sizes[0] = len(counts)
        self._n_tabs = 1
        self._cells = len(counts) * self.d
        self._counts_f = counts.astype(np.float64)  # bincount weights (exact below 2**53)
        self._set_fast()
        self._setup_split()
        if hasattr(loss, "prepare"):
            loss.prepare(quasis, self.up, bottom, counts.astype(np.int64))

    def _set_fast(self) -> None:
        """Use the loss's one-pass ``_from_counts`` (bound and value from the suppressed
        records and the kept classes' statistics) when its sums are exact in float64.
        """
        f = getattr(self.loss, "_from_counts", None)
        exact = self.n < 2**26 and self.k < 2**26
        self._fast = (
            f if f is not None and type(self.loss) in (DiscernibilityLoss, AECSLoss) and exact else None
        )

    # -- split evaluation: two groups of attributes, dense ids per group level vector ------

    def _setup_split(self) -> None:
        """Split the attributes into two groups of similar lattice size; a node's classes are
        then ``id_A · n_B + id_B`` with per-group dense ids cached by level vector (shared by
        many nodes), counted with ``bincount`` when the key range is small.
        """
        self._split: list[_SplitGroup] | None = None
        if self.d < 2:
            return
        order = np.argsort(-self.heights, kind="stable")
        groups: list[list[int]] = [[], []]
        prod = [1, 1]
        for j in order.tolist():
            i = 0 if prod[0] <= prod[1] else 1
            groups[i].append(j)
            prod[i] *= int(self.heights[j])
        bottom, _ = self.tables[0]
        self._split = []
        for grp in groups:
            grp = sorted(grp)
            key, _, _ = _combine([bottom[j] for j in grp], [self.q[j].card(0) for j in grp])
            uk, inv = np.unique(key, return_inverse=True)
            first = np.zeros(len(uk), dtype=np.int64)
            first[inv] = np.arange(len(inv))
            distinct = [bottom[j][first] for j in grp]  # level-0 codes of the group's combos
            vec_of = np.ravel_multi_index(
                tuple(self.L[:, j].astype(np.int64) for j in grp), tuple(int(self.heights[j]) for j in grp)
            )
            self._split.append(
                {
                    "attrs": grp,
                    "row_id": inv.astype(np.int64),
                    "n0": len(uk),
                    "distinct": distinct,
                    "vec_of": vec_of.tolist(),
                    "maps": {},
                    "rows": {},
                }
            )

    def _group_map(self, gi: int, node: int) -> tuple[np.ndarray, int]:
        """(dense id at the node's group-``gi`` level vector of every group combo, count)."""
        assert self._split is not None  # only called behind that check
        g = self._split[gi]
        vi = g["vec_of"][node]
        hit = g["maps"].get(vi)
        if hit is None:
            lv = self.L[node]
            vec = [int(lv[j]) for j in g["attrs"]]
            cols = [
                self.up[j][(0, lvl)][c] if lvl else c for j, lvl, c in zip(g["attrs"], vec, g["distinct"])
            ]
            key, _, _ = _combine(cols, [self.q[j].card(lvl) for j, lvl in zip(g["attrs"], vec)])
            _, dense = np.unique(key, return_inverse=True)
            nv = int(dense.max()) + 1 if dense.size else 1
            hit = (dense.astype(np.int64), nv)
            g["maps"][vi] = hit
        return hit

    def _group_ids(self, gi: int, node: int) -> tuple[np.ndarray, int]:
        """(dense id of every bottom combination at the node's group-``gi`` vector, count),
        cached per vector.
        """
        assert self._split is not None
        g = self._split[gi]
        vi = g["vec_of"][node]
        hit = g["rows"].get(vi)
        if hit is None:
            dense, nv = self._group_map(gi, node)
            hit = (dense[g["row_id"]], nv)
            g["rows"][vi] = hit
        return hit

    def _split_counts(self, node: int) -> np.ndarray:
        """Class sizes at ``node`` (float64 when counted by ``bincount``, else int64)."""
        ida, na = self._group_ids(0, node)
        idb, nb = self._group_ids(1, node)
        key = ida * nb
        key += idb
        R = na * nb
        if R <= 4 * len(key) + 4096:
            # float weights prepared once (exact integers); compress is much cheaper than a
            # boolean index on this sparse mask
            tot = np.bincount(key, weights=self._counts_f, minlength=R)
            return tot.compress(tot > 0)
        packed = np.sort((key << 32) | self.tables[0][1])
        sk = packed >> 32
        f = np.empty(len(sk), dtype=bool)
        f[0] = True
        np.not_equal(sk[1:], sk[:-1], out=f[1:])
        return np.add.reduceat(packed & 0xFFFFFFFF, np.flatnonzero(f))

    # -- evaluation -------------------------------------------------------
    def _table(self, node: int) -> tuple[list[np.ndarray], np.ndarray]:
        """(code columns, counts) of the distinct combinations at ``node``, rolled up from
        the smallest cached table of a specialisation of ``node``.
        """
        if node in self.tables:
            return self.tables[node]
        lv = self.L[node]
        cand = self._tab_nodes[: self._n_tabs]
        idx = np.flatnonzero(np.all(self.L[cand] <= lv, axis=1))
        src_i = idx[np.argmin(self._tab_sizes[: self._n_tabs][idx])]
        src = int(cand[src_i])
        cols_s, counts = self.tables[src]
        slv = self.L[src]
        cols = []
        cards = []
        for j in range(self.d):
            a, b = int(slv[j]), int(lv[j])
            cols.append(cols_s[j] if a == b else self.up[j][(a, b)][cols_s[j]])
            cards.append(self.q[j].card(b))
        key, rng_, exact = _combine(cols, cards)
        g = len(key)
        if exact and rng_ <= 8 * g + 4096:
            tot = np.bincount(key, weights=counts, minlength=rng_)
            nz = np.flatnonzero(tot)
            new_counts = tot[nz].astype(np.int64)
            first = None
        elif rng_ < 2**31 and self._n < 2**32:
            # counts only (such tables are not cached: roll-ups from them did not pay off):
            # sort (key << 32 | count) packed in one int64, cheaper than an argsort
            packed = np.sort((key << 32) | counts)
            sk = packed >> 32
            starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
            new_counts = np.add.reduceat(packed & 0xFFFFFFFF, starts)
            return [], new_counts
        else:
            order = np.argsort(key)
            sk = key[order]
            starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
            new_counts = np.add.reduceat(counts[order], starts)
            first = order[starts]
        # cache the table if it is a useful (much smaller) source for later roll-ups
        if len(new_counts) * 2 <= g and self._worth_caching(g):
            if first is None:
                new_cols = [c.astype(np.int64) for c in np.unravel_index(nz, tuple(cards))]
            else:
                new_cols = [c[first] for c in cols]
            self.tables[node] = (new_cols, new_counts)
            if self._n_tabs == len(self._tab_nodes):
                self._tab_nodes = np.resize(self._tab_nodes, 2 * self._n_tabs)
                self._tab_sizes = np.resize(self._tab_sizes, 2 * self._n_tabs)
            self._tab_nodes[self._n_tabs] = node
            self._tab_sizes[self._n_tabs] = len(new_counts)
            self._n_tabs += 1
            self._cells += len(new_counts) * self.d
        return [], new_counts

    def _worth_caching(self, g: int) -> bool:
        """Whether the roll-up cache has room for a table of (at most) ``g`` rows."""
        return self._cells + g * self.d <= self._CACHE_CELLS

    def _class_counts(self, node: int) -> np.ndarray:
        if self._split is not None and self.n < 2**31:
            return self._split_counts(node)
        return self._table(node)[1]

    def _combo_sizes(self, node: int) -> np.ndarray:
        """Class size at ``node`` of every bottom combination (distinct leaf combination)."""
        counts = self.tables[0][1]
        if self._split is not None and self.n < 2**31:
            ida, na = self._group_ids(0, node)
            idb, nb = self._group_ids(1, node)
            key = ida * nb + idb
            if na * nb <= 4 * len(key) + 4096:
                return np.bincount(key, weights=counts, minlength=na * nb).astype(np.int64)[key]
        else:
            lv = self.L[node]
            bottom = self.tables[0][0]
            cols = [self.up[j][(0, int(lv[j]))][bottom[j]] for j in range(self.d)]
            key, _, _ = _combine(cols, [self.q[j].card(int(lv[j])) for j in range(self.d)])
        _, inv = np.unique(key, return_inverse=True)
        return np.bincount(inv, weights=counts).astype(np.int64)[inv]

    def evaluate(self, node: int) -> bool:
        """Suppression needed at ``node`` (cached); tag the lattice; True if within the limit."""
        sup = int(self.sup[node])
        if sup >= 0:
            return sup <= self.max_sup
        counts = self._class_counts(node)
        self._last = (node, counts)  # node_loss of the node just evaluated reuses them
        small = counts < self.k
        sup = int(counts.compress(small).sum())
        self.sup[node] = sup
        self.evaluated += 1
        ok = sup <= self.max_sup
        lv = self.L[node].tolist()
        dyn = self.dyn_lb
        if dyn is not None:
            fast = self._fast
            if fast is not None:
                # bound and loss from the same two statistics (issue 13), equal to the plain ones
                b, v = fast(counts, small, sup, self.n, self.k)
            else:
                b, v = float(self.loss.bound_from_counts(counts, self.n, self.k)), None
            # learnt bounds are monotone (raised on up-sets only): when b does not exceed the
            # node's own bound, every node above already has at least b
            if b > dyn[node]:
                assert self._dyn_nd is not None  # set with dyn_lb
                box = self._dyn_nd[tuple(map(slice, lv, self._nones))]
                np.maximum(box, b, out=box)
            if ok and self._score_now:
                # a loss of the class sizes: score it now (cheap), the counts are at hand
                if v is None:
                    v = self.loss(self.L[node], counts.compress(~small).astype(np.int64), sup, self.n)
                self.loss_val[node] = v
        if ok:
            self._status_nd[tuple(map(slice, lv, self._nones))] = 1
        else:
            self._status_nd[tuple(map(slice, self._zeros, [x + 1 for x in lv]))] = -1
        return ok

    def is_anon(self, node: int) -> bool:
        st = self.status[node]
        if st == 0:
            return self.evaluate(node)
        return bool(st == 1)

    def node_loss(self, node: int) -> float:
        if np.isnan(self.loss_val[node]):
            self.evaluate(node)
            last = self._last
            counts = last[1] if last is not None and last[0] == node else self._class_counts(node)
            kept = counts.compress(counts >= self.k).astype(np.int64)
            if getattr(self.loss, "uses_suppressed", False):
                sup = self._combo_sizes(node) < self.k
                v = self.loss(self.L[node], kept, int(self.sup[node]), self.n, suppressed=sup)
            else:
                v = self.loss(self.L[node], kept, int(self.sup[node]), self.n)
            self.loss_val[node] = v
        return float(self.loss_val[node])

    # -- search -----------------------------------------------------------
    def tag_from_above(self, node: int) -> None:
        """Settle the status of ``node`` (unknown) from above, Flash-style, instead of
        evaluating it: binary search on a generalisation path from ``node`` to the top (raise
        the attribute of lowest relative level first) for the path's lowest k-anonymous node;
        if ``node`` is below it, climb from the highest non-anonymous node of the path through
        successors of unknown status that are not anonymous, until none is.  The node reached
        is non-anonymous and its successors of unknown status are anonymous: it tags a large
        down-set at once (``node`` among it) and, evaluated, raises the learnt bounds of all
        nodes above it.  Only evaluates nodes; tagging and bounds stay sound, so the optimum
        is unchanged (the brute-force tests).
        """
        top = self.heights - 1
        lv = self.L[node].astype(np.int64)
        # the path's steps: attribute j goes from level l to l + 1 in the order of (l / top_j, j)
        steps = np.repeat(np.arange(self.d), top - lv)
        levels = np.concatenate([np.arange(a, b) for a, b in zip(lv.tolist(), top.tolist())])
        order = np.lexsort((steps, levels / np.maximum(top, 1)[steps]))
        path = [node] + (node + np.cumsum(self._strides[steps[order]])).tolist()
        lo = self._first_anonymous(path, len(path) - 1)
        if lo == 0:
            return
        cur = path[lo - 1]
        while True:
            clv = self.L[cur]
            rel = clv / np.maximum(top, 1)
            for j in np.argsort(rel, kind="stable").tolist():
                if clv[j] < top[j]:
                    nxt = cur + int(self._strides[j])
                    if self.status[nxt] == 0 and not self.evaluate(nxt):
                        cur = nxt
                        break
            else:
                return

    def _kernel_eligible(self) -> bool:
        """Whether the compiled search applies (see :meth:`_kernel_inputs`); the bottom group
        vectors have the most ids, so their product bounds every node's key range.
        """
        return (
            self._fast is not None
            and self._split is not None
            and self._score_now
            and self.dyn_lb is not None
            and self.n < 2**31
            and self._split[0]["n0"] * self._split[1]["n0"] <= 2**23
        )

    def _kernel_dense(self, kmod, gi: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The kernel's dense ids of group ``gi`` at every group vector, computed by
        :func:`._ola_kernel.group_dense` (None when the group's level-0 key range exceeds
        2**22, then the lattice's own ``_group_map`` serves).
        """
        assert self._split is not None
        g = self._split[gi]
        attrs = g["attrs"]
        gh = np.array([int(self.heights[j]) for j in attrs], dtype=np.int64)
        card0 = [self.q[j].card(0) for j in attrs]
        if float(np.prod([float(c) for c in card0])) > 2**22:
            return None
        up = np.zeros((len(attrs), int(gh.max()), max(card0)), dtype=np.int64)
        cards = np.ones((len(attrs), int(gh.max())), dtype=np.int64)
        for t, j in enumerate(attrs):
            for lvl in range(int(gh[t])):
                up[t, lvl, : card0[t]] = self.up[j][(0, lvl)]
                cards[t, lvl] = self.q[j].card(lvl)
        distinct = np.stack([np.asarray(c, dtype=np.int64) for c in g["distinct"]])
        n0 = distinct.shape[1]
        nv = int(np.prod(gh))
        dense = np.empty((nv, n0), dtype=np.int32)
        counts = np.empty(nv, dtype=np.int64)
        seen = np.full(int(np.prod(card0)), -1, dtype=np.int32)
        kmod.group_dense(distinct, up, cards, gh, dense, counts, seen, np.empty(n0, dtype=np.int64))
        return dense, counts

    def _kernel_inputs(self, kmod) -> tuple[tuple, tuple, tuple] | None:
        """(constants, state, work space) of the compiled search (:mod:`._ola_kernel`), or
        None when it does not apply: only discernibility and AECS (the losses scored in one
        pass from the class sizes, n and k below 2**26) on a split lattice whose key range
        fits a bin array of at most 2**23 entries.  The state arrays are this lattice's own:
        the kernel updates them in place.
        """
        if not self._kernel_eligible():
            return None
        assert self._split is not None  # checked above
        dense, counts = [], []
        for gi, g in enumerate(self._split):
            dc = self._kernel_dense(kmod, gi)
            if dc is None:  # mixed-radix keys too wide: the lattice's own maps
                vec_of = np.asarray(g["vec_of"], dtype=np.int64)
                _, rep = np.unique(vec_of, return_index=True)  # one node per group vector
                maps = [self._group_map(gi, int(node)) for node in rep.tolist()]
                dc = (
                    np.stack([m[0] for m in maps]).astype(np.int32),
                    np.array([m[1] for m in maps], dtype=np.int64),
                )
            dense.append(dc[0])
            counts.append(dc[1])
        max_r = int(counts[0].max()) * int(counts[1].max())
        w = np.asarray(self.tables[0][1], dtype=np.int32)
        m = len(w)
        kind = 0 if type(self.loss) is DiscernibilityLoss else 1
        consts = (
            self.heights.astype(np.int64),
            self._strides.astype(np.int64),
            self.L,
            self.height_of,
            np.asarray(self._split[0]["vec_of"], dtype=np.int64),
            np.asarray(self._split[1]["vec_of"], dtype=np.int64),
            dense[0],
            dense[1],
            counts[0],
            counts[1],
            self._split[0]["row_id"].astype(np.int32),
            self._split[1]["row_id"].astype(np.int32),
            w,
            np.array([self.k, self.max_sup, self.n, kind], dtype=np.int64),
        )
        self._kernel_count = np.zeros(1, dtype=np.int64)
        assert self.dyn_lb is not None
        state = (self.status, self.sup, self.loss_val, self.dyn_lb, self._kernel_count)
        # class tables of evaluated nodes, the sources of roll-ups: an arena of 64 tables of
        # the bottom's size, within 2**21..2**23 rows (FIFO; an overwritten table is not used)
        cap = _ARENA_ROWS[0] or min(max(64 * m, 2**21), 2**23)
        cap = max(cap, 2 * m)
        bins, touched, first, arena_a, arena_b, arena_c = _take_buffers(max_r, m, cap)
        work = (
            bins,  # all zero, left so by the kernel
            touched,  # keys of the classes of the table being counted
            first,  # their first source row
            arena_a,  # arena: group-A combination of a class's representative
            arena_b,  # group-B combination
            arena_c,  # records
            np.zeros(4, dtype=np.int64),  # write row, absolute position, -, stores
            np.full(self.size, -1, dtype=np.int64),  # node -> absolute position of its table
            np.zeros(self.size, dtype=np.int64),  # node -> its number of classes
            np.full(16, -1, dtype=np.int64),  # the last evaluated nodes
            np.isin(np.arange(self.d), self._split[0]["attrs"]),  # attribute in group A
        )
        return consts, state, work

    def path_bound(self) -> int:
        """Binary search along one generalisation strategy path (bottom → top, raising the
        attribute with the lowest relative level first) for its lowest k-anonymous node.
        """
        lv = np.zeros(self.d, dtype=np.int64)
        path = [0]
        top = self.heights - 1
        while np.any(lv < top):
            rel = np.where(lv < top, lv / np.maximum(top, 1), np.inf)
            j = int(np.argmin(rel))
            lv[j] += 1
            path.append(int(np.ravel_multi_index(tuple(lv), tuple(self.heights))))
        if not self.is_anon(path[-1]):
            return -1
        return path[self._first_anonymous(path, len(path) - 1)]

    def _first_anonymous(self, path: list[int], hi: int) -> int:
        """Binary search of path[0..hi] (generalisations in order, path[hi] k-anonymous) for
        the index of its first k-anonymous node.
        """
        lo = 0
        while lo < hi:
            mid = (lo + hi) // 2
            if self.is_anon(path[mid]):
                hi = mid
            else:
                lo = mid + 1
        return lo


_ARENA_ROWS = [0]  # rows of the compiled search's table arena (0: by the bottom's size; tests)
_BUFFERS: list[tuple[np.ndarray, ...]] = []  # the compiled search's large work arrays, reused


def _take_buffers(bins: int, rows: int, cap: int) -> tuple[np.ndarray, ...]:
    """Work arrays of the compiled search, reused across searches (fresh ones cost page
    faults: ~5 ms of ~45 on Adult); a search gives them back with :func:`_give_buffers`.
    Thread-safe: ``list.pop`` hands an entry to one caller only.
    """
    for i in range(len(_BUFFERS)):
        try:
            b = _BUFFERS.pop(i)
        except IndexError:  # taken by another thread meanwhile
            break
        if len(b[0]) >= bins and len(b[1]) >= rows and len(b[3]) >= cap:
            return b[0][:bins], b[1][:rows], b[2][:rows], b[3][:cap], b[4][:cap], b[5][:cap]
        _BUFFERS.append(b)
    return (
        np.zeros(bins, dtype=np.int32),
        np.empty(rows, dtype=np.int64),
        np.empty(rows, dtype=np.int64),
        np.empty(cap, dtype=np.int32),
        np.empty(cap, dtype=np.int32),
        np.empty(cap, dtype=np.int32),
    )


def _give_buffers(work: tuple) -> None:
    """Return a search's work arrays (the bins are all zero again: every count clears the
    bins it used) to be reused; one set of at most 64 MB is kept (~30 MB on Adult), so a
    long-running app holds no more than that once its searches are done.
    """
    arrays = tuple(a.base if a.base is not None else a for a in work[:6])
    if not _BUFFERS and sum(a.nbytes for a in arrays) <= 64 * 2**20:
        _BUFFERS.append(arrays)


_KERNEL: list = []  # [module or None], filled on first use
_NUMPY_SECONDS = [0.0]  # time this process has spent in numpy searches the kernel could run
_KERNEL_LOAD_S = 0.4  # importing numba and loading the cached search (Adult, cold process: the
# first compiled search takes 0.53-0.64 s, the numpy one 0.16 s)
_KERNEL_COMPILE_S = 10.0  # compiling it when numba has no cache of it yet (8-9 s here)
_LOAD_COST: list[float] = []  # the applicable one of the two, found once


def _kernel_load_seconds() -> float:
    """What switching to the compiled search costs this process: its load time when numba's
    cache of it is where numba will look (``NUMBA_CACHE_DIR``, ``__pycache__`` next to the
    source, or the user-wide cache of a read-only install: :func:`_kernels.has_numba_cache`)
    and not older than the source, else its compile time -- so that the first searches after
    an install do not stall for seconds in the middle of a sweep.
    """
    if not _LOAD_COST:
        from pathlib import Path

        from dpstudio.engine._kernels import has_numba_cache

        hit = has_numba_cache(Path(__file__).with_name("_ola_kernel.py"), "search")
        _LOAD_COST.append(_KERNEL_LOAD_S if hit else _KERNEL_COMPILE_S)
    return _LOAD_COST[0]


def _kernel_pays(nodes: int = 0, rows: int = 0) -> bool:
    """Tiered choice, results identical either way (the tests compare both paths): once
    loaded, the compiled search runs every discernibility / AECS search; before that, the
    numpy search runs unless its rough cost on this lattice (``nodes`` nodes, ``rows``
    bottom combinations: 2.5 ns per node and row, fitted on Adult where it takes 0.13 s)
    exceeds the kernel's load time (:func:`_kernel_load_seconds`), or until this process
    has spent that time in numpy searches (an app, a sweep over k, a benchmark) -- so that
    a one-shot CLI run on a small lattice does not pay 0.4 s for numba.  ``DPSTUDIO_OLA_KERNEL=1`` asks for the
    kernel at once (tests, benchmarks).
    """
    import os

    if _KERNEL:
        return _KERNEL[0] is not None
    if os.environ.get("DPSTUDIO_OLA_KERNEL", "") not in ("", "0"):
        return True
    load = _kernel_load_seconds()
    return 2.5e-9 * nodes * rows >= load or _NUMPY_SECONDS[0] >= load


def _ola_kernel():
    """The compiled search module, or None when numba is unavailable or
    ``DPSTUDIO_OLA_NUMPY=1`` asks for the numpy search (imported lazily, as the MDAV kernel).
    """
    from dpstudio.engine._kernels import load_kernel

    return load_kernel(_KERNEL, "dpstudio.engine.algorithms._ola_kernel", "DPSTUDIO_OLA_NUMPY")


def ola(
    df: pd.DataFrame,
    columns: Sequence[str],
    k: int,
    *,
    hierarchies: dict | None = None,
    suppression: float = 0.05,
    loss=None,
    quasis: list[EncodedQuasi] | None = None,
    check_cancel: Callable[[], None] | None = None,
    weights: np.ndarray | None = None,
) -> GeneralisationResult:
    """Optimal full-domain generalisation (OLA) of ``columns`` with record suppression.

    The lattice search (see the module docstring) returns the node of least ``loss``
    among all nodes at which at most ``suppression × n`` records lie in classes smaller
    than k (those records are suppressed).  Ties go to the lower node, then to the first
    in lattice order.

    Parameters
    ----------
    df : DataFrame
        The data (only ``columns`` are read).
    columns : list of str
        The k-quasis.
    k : int
        Minimum class size, ≥ 1.
    hierarchies : dict, optional
        Column → ARX file path or :class:`Hierarchy`; automatic hierarchies otherwise.
    suppression : float
        Largest share of records that may be suppressed, in [0, 1) (default 0.05).
    loss : str or callable, optional
        ``"precision"`` (default), ARX's ``"loss"``, ``"discernibility"``, ``"aecs"``
        (average equivalence class size), ``"entropy"`` (non-uniform entropy) — see their
        classes for how suppressed records count — or ``fn(levels, class_sizes,
        n_suppressed, n) -> float``.  A loss without a ``lower_bound`` method is
        evaluated on every k-anonymous node (slower, still exact).
    weights : array, optional
        A frequency set instead of records (issue 12, the Dask backend): row r of
        ``quasis`` stands for ``weights[r]`` records; the result is then per row
        (``class_id``, ``labels``, ``cell_loss`` of each row, −1 = suppressed).
    """
    if not columns:
        raise ParameterError("OLA needs at least one k-quasi.")
    k = int(k)
    if k < 1:
        raise ParameterError(f"k must be at least 1. Got {k}.")
    if not (0.0 <= float(suppression) < 1.0):
        raise ParameterError(f"The 'suppression' limit must be in [0, 1). Got {suppression!r}.")
    qs = quasis if quasis is not None else encode_quasis(df, columns, hierarchies)
    n = len(qs[0].leaf) if weights is None else int(np.sum(weights))
    max_sup = int(math.floor(float(suppression) * n + 1e-9))
    lossf = _make_loss(loss, [qq.height for qq in qs])
    lat = (
        _Lattice(qs, k, max_sup, lossf)
        if weights is None
        else _WeightedLattice(qs, k, max_sup, lossf, weights)
    )
    top = lat.size - 1
    t_search = time.perf_counter()
    eligible = lat._kernel_eligible()
    kmod = _ola_kernel() if eligible and _kernel_pays(lat.size, len(lat.tables[0][1])) else None
    kin = lat._kernel_inputs(kmod) if kmod is not None else None
    if kmod is not None and kin is not None:
        kc, ks, kw = kin
        top_ok = bool(kmod.is_anon(top, kc, ks, kw))
    else:
        kmod = None
        top_ok = lat.is_anon(top)
    if not top_ok:
        raise ParameterError(
            _k_too_large_message(
                k, lat._class_counts(top), n, max_sup, float(suppression), [qq.name for qq in qs]
            )
        )
    if kmod is not None:
        start = int(kmod.path_bound(kc, ks, kw))
        best, best_node = float(kmod.node_loss(start, kc, ks, kw)), start
    else:
        start = lat.path_bound()
        best, best_node = lat.node_loss(start), start
    # branch and bound: every node whose lower bound beats the best so far, from the top of
    # that region down (a non-anonymous node there rules out everything below it)
    lb = np.asarray(lossf.lower_bound(lat.L), dtype=np.float64)
    region = np.flatnonzero(lb < best)
    if lat.dyn_lb is None:
        region = region[np.lexsort((region, lb[region], -lat.height_of[region]))]
    else:
        # bounds learnt from evaluated nodes hold for the nodes above them: bottom-up, so that
        # every node is reached after (some of) the nodes below it (issue 13)
        region = region[np.lexsort((region, lb[region], lat.height_of[region]))]
    if kmod is not None:
        # the same loop, compiled (issue 13), in slices of 256 nodes between cancel checks
        for i in range(0, len(region), 256):
            if check_cancel is not None:
                check_cancel()
            b, bn = kmod.search(region[i : i + 256], lb, best, best_node, kc, ks, kw)
            best, best_node = float(b), int(bn)
        lat.evaluated += int(ks[4][0])
        _give_buffers(kw)
        region = region[:0]
    for i, node in enumerate(region.tolist()):
        if check_cancel is not None and i % 256 == 0:
            check_cancel()
        if lb[node] >= best or lat.status[node] == -1:
            continue
        if lat.dyn_lb is not None and lat.dyn_lb[node] > best + 1e-12:
            continue
        if lat.dyn_lb is not None and lat.status[node] == 0:
            # bottom-up, an unknown node is most often not anonymous: settle it (and a large
            # down-set) from above rather than one node at a time (issue 13)
            lat.tag_from_above(node)
            if lat.status[node] == -1 or lat.dyn_lb[node] > best + 1e-12:
                continue
        if not lat.is_anon(node):
            continue
        v = lat.node_loss(node)
        if v < best - 1e-12 or (
            abs(v - best) <= 1e-12 and (lat.height_of[node], node) < (lat.height_of[best_node], best_node)
        ):
            best, best_node = v, node
    if eligible and kmod is None:
        _NUMPY_SECONDS[0] += time.perf_counter() - t_search
    node = best_node
    lv = lat.L[node]
    # the chosen node on the frequency set (distinct leaf combinations and their counts);
    # records only get their combination's class and labels by one gather each
    bottom, bottom_counts = lat.tables[0]
    cols = [lat.up[j][(0, int(lv[j]))][bottom[j]] for j in range(lat.d)]
    key, _, _ = _combine(cols, [qs[j].card(int(lv[j])) for j in range(lat.d)])
    _, combo_cls = np.unique(key, return_inverse=True)
    cls_size = np.bincount(combo_cls, weights=bottom_counts).astype(np.int64)
    combo_keep = cls_size[combo_cls] >= k
    combo_out = np.full(len(combo_cls), -1, dtype=np.int64)
    _, combo_out[combo_keep] = np.unique(combo_cls[combo_keep], return_inverse=True)
    rc = lat.record_combo
    cls = combo_out[rc]
    keep = cls >= 0
    combo_labels = {qq.name: qq.labels[int(lv[j])][cols[j]] for j, qq in enumerate(qs)}
    # the release check, on the frequency set: the released labels of a record are its
    # combination's labels (gathered below), so classes of released labels have these sizes
    smallest = verify_k_anonymity(
        combo_labels,
        combo_keep,
        k,
        weights=np.bincount(
            rc[keep], weights=None if weights is None else np.asarray(weights)[keep], minlength=len(combo_cls)
        ),
    )
    # every record's code at its column's chosen level (−1 = suppressed): the labels are
    # gathered from them only when asked (CodedLabels), never one record at a time
    combo_codes, cats = {}, {}
    for j, qq in enumerate(qs):
        cc = np.asarray(cols[j], dtype=np.int64 if qq.card(int(lv[j])) >= 2**31 else np.int32).copy()
        cc[~combo_keep] = -1
        combo_codes[qq.name] = cc
        cats[qq.name] = qq.labels[int(lv[j])]
    labels = CodedLabels(combo_codes, cats, rows=rc)
    if (
        int((~keep).sum()) if weights is None else int(np.asarray(weights)[~keep].sum())
    ) > max_sup:  # pragma: no cover - guaranteed by the search
        raise RuntimeError("internal error: OLA exceeded the suppression limit")
    cell = np.ones(len(rc))  # precision per record, whatever metric was optimised
    cell[keep] = float(PrecisionLoss([qq.height for qq in qs]).base(lv))
    info = {
        "lattice_size": lat.size,
        "nodes_evaluated": int(lat.evaluated),
        "max_suppressed": max_sup,
        "suppression_limit": float(suppression),
        "smallest_class_verified": smallest,
    }
    return GeneralisationResult(
        algorithm="ola",
        k=k,
        columns=[qq.name for qq in qs],
        class_id=cls,
        labels=labels,
        loss=float(best),
        loss_name=lossf.name,
        cell_loss=cell,
        node=tuple(int(x) for x in lv),
        levels={qq.name: int(lv[j]) for j, qq in enumerate(qs)},
        heights={qq.name: qq.height for qq in qs},
        info=info,
    )


class _WeightedLattice(_Lattice):
    """The lattice of a frequency set (issue 12): ``quasis[j].leaf`` holds one row per
    combination (e.g. the result of a distributed group-by) and ``weights`` its record count.
    Built as the record lattice of the rows, then the bottom table's counts (and ``n``) are
    replaced by the weighted ones; everything after works on that table, as for records.
    """

    def __init__(self, quasis: list[EncodedQuasi], k: int, max_suppressed: int, loss, weights):
        super().__init__(quasis, k, max_suppressed, loss)
        w = np.asarray(weights, dtype=np.int64)
        bottom, unit = self.tables[0]
        counts = np.bincount(self.record_combo, weights=w, minlength=len(unit)).astype(np.int64)
        self.tables[0] = (bottom, counts)
        self._counts_f = counts.astype(np.float64)
        self.n = self._n = int(counts.sum())
        self._set_fast()
        if hasattr(loss, "prepare"):
            loss.prepare(quasis, self.up, bottom, counts)


def _k_too_large_message(k, counts, n, max_sup, suppression, cols) -> str:
    cs = np.sort(np.asarray(counts))
    # largest k' such that records in classes < k' are at most max_sup
    cum = np.r_[0, np.cumsum(cs)]
    below = cum[np.searchsorted(cs, cs, side="left")]  # records in classes smaller than each size
    feasible = cs[below <= max_sup]
    ok_k = int(feasible.max()) if feasible.size else 1
    need = int(cs[cs < k].sum())
    return (
        f"k = {k} cannot be reached on {', '.join(map(repr, cols))} within the suppression limit "
        f"of {suppression:.1%} ({max_sup} of {n} records), even at full generalisation: "
        f"{need} records ({need / n:.1%}) would have to be suppressed. The largest k that works "
        f"with these hierarchies is {ok_k}; or raise the suppression limit to at least "
        f"{math.ceil(1000 * need / n) / 1000:.1%}, or use hierarchies that end in a single '*'."
    )


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
    dims: list[dict[str, Any]] = []  # per-attribute arrays and scalars, keyed by name
    for c in columns:
        s = df[c]
        if s.isna().any():
            row = int(np.flatnonzero(s.isna().to_numpy())[0])
            raise InputError(
                f"Column {c!r} has a missing value in row {row + 1}; impute it or enable drop_missing."
            )
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            vals = s.to_numpy(dtype=np.float64)
            uniq, rank = np.unique(vals, return_inverse=True)
            span = float(uniq[-1] - uniq[0])
            dims.append(
                {
                    "kind": "num",
                    "name": c,
                    "rank": rank.astype(np.int64),
                    "uniq": uniq,
                    "span": span,
                    "R": len(uniq),
                }
            )
        else:
            qq = _encode_one(
                c,
                s,
                load_hierarchy(hierarchies[c], c)
                if c in hierarchies
                else auto_hierarchy(s, name=c, kind="flat"),
            )
            h = qq.height
            # leaves in depth-first order: every node covers a contiguous range of positions
            order = np.lexsort(tuple(qq.codes[lv] for lv in range(h)))  # last key = top level
            pos = np.empty(len(order), dtype=np.int64)
            pos[order] = np.arange(len(order))
            T = np.stack([qq.codes[lv][order] for lv in range(h)]).astype(np.int64)  # (h, leaves)
            dims.append(
                {
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
            )
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
            if dd["kind"] == "num":
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
                W[j] = np.where(allow, width, -1.0)
                stats.append({"lo": lo, "hi": hi, "thr": thr, "width": width})
            else:
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
                W[j] = np.where(allow, width, -1.0)
                stats.append({"lca": lca, "pmin": pmin, "child": child, "Cmax": Cmax})
        best = np.argmax(W, axis=0)
        split = W[best, np.arange(S)] >= 0
        # finalise segments without an allowable cut
        fin_seg = ~split
        if fin_seg.any():
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
                        [
                            ("*" if l_ >= h else dd["labels"][l_][c])
                            for l_, c in zip(lca[fin_seg], codes[fin_seg])
                        ],
                        dtype=object,
                    )
                    if h > 1:
                        loss_seg += np.where(lca >= h, 1.0, lca / (h - 1))
                seg_lab = np.empty(S, dtype=object)
                seg_lab[fin_seg] = lab
                labels[dd["name"]][rec] = seg_lab[rseg]
            cell[rec] = (loss_seg / d)[rseg]
        if not split.any():
            break
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
        seg = seg.astype(np.int64)
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


def _leaves_under(dd, levels: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(levels), dtype=np.float64)
    for lv in np.unique(levels):  # loop over hierarchy levels (few)
        m = levels == lv
        out[m] = dd["leaves_under"][int(lv)][codes[m]]
    return out
