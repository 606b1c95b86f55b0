"""k-anonymity by generalisation: what OLA (:mod:`.ola`) and Mondrian (:mod:`.mondrian`) share.

Both work on integer codes, never on strings: every k-quasi is encoded once
(:func:`encode_quasis`): the leaf index of each record in the column's hierarchy, and for
every level an array leaf → code at that level.  Both return a
:class:`GeneralisationResult` (the generalised values as :class:`CodedLabels`) and verify the
k-anonymity of what they return (:func:`verify_k_anonymity`).  OLA's information-loss metrics
are in :mod:`.generalization_metrics`.

>>> import pandas as pd
>>> from dpstudio.engine.algorithms.mondrian import mondrian
>>> df = pd.DataFrame({"sex": ["M", "F"] * 6, "age": [20, 21, 22, 23, 30, 31] * 2})
>>> res = mondrian(df, ["sex", "age"], k=3)
>>> res.min_class_size >= 3
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.build import auto_hierarchy, factorize_strings
from dpstudio.engine.hierarchies.hierarchy import Hierarchy, load_hierarchy

__all__ = [
    "EncodedQuasi",
    "encode_quasis",
    "resolve_hierarchies",
    "CodedLabels",
    "GeneralisationResult",
    "verify_k_anonymity",
]


# ---------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------


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
    """Encode ``columns`` of ``df`` against their hierarchies (automatic where none given);
    the columns of a large table side by side in threads (:mod:`dpstudio.engine.parallel`:
    the same encodings, and the first column in order that fails raises, as one by one).
    """
    from dpstudio.engine.parallel import map_ordered

    hs = resolve_hierarchies(df, columns, hierarchies)
    work = [(c, df[c], hs[c]) for c in columns]  # (the Series taken in this thread)
    return map_ordered(lambda w: _encode_one(*w), work, cells=len(df) * len(work))


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

    def codes_of(
        self, col: str, rows: np.ndarray | None = None, *, combos: np.ndarray | None = None
    ) -> np.ndarray:
        """The codes of records ``rows`` (default: all) in ``col``; ``combos``: what
        :meth:`combos_of` gave for these ``rows`` (shared by the columns, gathered once).
        """
        c = self._codes[col]
        if self._rows is not None:  # codes per distinct combination, rows[r] = record r's
            if combos is None:
                combos = self.combos_of(rows)
            return c[combos]
        return c if rows is None else c[rows]

    def combos_of(self, rows: np.ndarray | None = None) -> np.ndarray | None:
        """The combination of each record of ``rows`` (default: all), None when the codes are
        per record: one gather shared by every column's :meth:`codes_of`.
        """
        if self._rows is None:
            return None
        return self._rows if rows is None else self._rows[rows]

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
        # (counted once: the summary, n_classes and min_class_size each ask, 3,000,000
        # records a time in k-eps, issue 27; ``class_id`` is never changed after the fact)
        cached = self.__dict__.get("_class_sizes")
        if cached is not None and cached[0] is self.class_id:
            return cached[1]
        sizes = np.bincount(self.class_id + 1)[1:] if self.class_id.size else np.zeros(0, dtype=np.int64)
        sizes.setflags(write=False)
        self.__dict__["_class_sizes"] = (self.class_id, sizes)
        return sizes

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
    from dpstudio.engine.algorithms.frequencies import class_sizes

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
