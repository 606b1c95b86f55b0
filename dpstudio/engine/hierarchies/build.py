"""Automatic generalisation hierarchies (docs/methods.md ``k-eps``; issue 3).

Every builder returns a :class:`dpstudio.engine.hierarchies.hierarchy.Hierarchy` whose leaves
(level 0) are the distinct values of the column written as *canonical strings*
(:func:`value_strings`), so that a hierarchy built here and an ARX file written by
hand match the same data.  Kinds:

- :func:`interval_hierarchy` — numeric intervals of fixed width doubling per level
  (``0-4 → 0-9 → 0-19 → … → *``), or quantile-based bins merged pairwise per level;
- :func:`date_hierarchy` — day → month → year → 2-year → 4-year … → ``*``;
- :func:`masking_hierarchy` — codes masked from the right (``12345 → 1234* → 123** … → *``);
- :func:`flat_hierarchy` — categorical value → ``*``;
- :func:`auto_hierarchy` — picks one of the above from the column's type.

>>> import pandas as pd
>>> h = interval_hierarchy(pd.Series([17, 23, 38, 61]), width=5)
>>> h.table[0].tolist()
['17', '15-19', '10-19', '0-19', '0-39', '*']
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.hierarchy import Hierarchy

__all__ = [
    "value_strings",
    "factorize_strings",
    "code_counts",
    "interval_hierarchy",
    "date_hierarchy",
    "masking_hierarchy",
    "flat_hierarchy",
    "auto_hierarchy",
    "breaks_hierarchy",
    "mapping_hierarchy",
    "level_table",
    "level_counts",
]


# ---------------------------------------------------------------------------
# canonical value strings
# ---------------------------------------------------------------------------


def _fmt_number(v: float) -> str:
    v = float(v)
    if math.isfinite(v) and v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(v)


def _fmt_bound(v: float) -> str:
    """Interval bounds: round away floating-point dust (0.6000000000000001 → 0.6)."""
    v = float(f"{float(v):.12g}")
    return _fmt_number(v)


def factorize_strings(values, *, small: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)``: integer code of each value and the canonical string of each code.

    Numbers are written without a trailing ``.0`` when integral (``39.0 → "39"``, as in
    ARX's files); everything else with ``str``.  Only the distinct values are converted
    to strings, so this is fast on millions of records.  Missing values get code -1.
    ``small``: the codes in the smallest signed integer type :func:`~dpstudio.engine.codes.factorize`
    gives them (a text column's remembered codes, read-only: no int64 copy of every record,
    issue 27), else int64.
    """
    from dpstudio.engine.codes import factorize

    s = values if isinstance(values, pd.Series) else pd.Series(values)
    codes, uniques = factorize(s)
    uniq = np.asarray(uniques, dtype=object)
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        labels = np.array([_fmt_number(u) for u in uniq], dtype=object)
    elif pd.api.types.is_datetime64_any_dtype(s):
        labels = np.array([pd.Timestamp(u).strftime("%Y-%m-%d") for u in uniq], dtype=object)
    else:
        labels = np.array([str(u).strip() for u in uniq], dtype=object)
    # two raw values may share a canonical string (e.g. " a" and "a"): merge them
    lab_u, lab_inv = np.unique(labels.astype(str), return_inverse=True)
    if len(lab_u) != len(labels):
        codes = np.where(codes >= 0, lab_inv[np.maximum(codes, 0)], -1)
        labels = lab_u.astype(object)
    return (np.asarray(codes) if small else np.asarray(codes, dtype=np.int64)), labels


def code_counts(codes: np.ndarray, n: int) -> np.ndarray:
    """The number of records of each code 0 … n − 1 (int64; code −1, missing, not counted):
    ``np.bincount(codes[codes >= 0], minlength=n)``, in one pass over small codes (int8 /
    int16 read as their unsigned bits, −1 falling in a bin above every code: issue 27).
    """
    codes = np.asarray(codes)
    if codes.dtype in (np.int8, np.int16) and n <= np.iinfo(codes.dtype).max + 1:
        counts = np.bincount(codes.view(np.uint8 if codes.dtype == np.int8 else np.uint16), minlength=n)
        return counts[:n].astype(np.int64, copy=False)
    kept = codes[codes >= 0] if codes.size else codes
    return np.bincount(kept.astype(np.intp, copy=False), minlength=n)[:n].astype(np.int64, copy=False)


def value_strings(values) -> np.ndarray:
    """The canonical string of every value (see :func:`factorize_strings`)."""
    codes, labels = factorize_strings(values)
    out = np.empty(len(codes), dtype=object)
    ok = codes >= 0
    out[ok] = labels[codes[ok]]
    out[~ok] = None
    return out


def _distinct(values, column: str) -> pd.Series:
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if s.isna().any():
        rows = np.flatnonzero(s.isna().to_numpy())
        raise InputError(
            f"Column {column!r} has missing values (row {int(rows[0]) + 1}); "
            "a hierarchy cannot be built for them. Impute or drop those records."
        )
    if len(s) == 0:
        raise InputError(f"Column {column!r} is empty: no hierarchy can be built.")
    return s


def _nice(x: float) -> float:
    """The smallest 1, 2 or 5 × 10^p that is >= x."""
    if x <= 0:
        return 1.0
    p = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * 10**p >= x * (1 - 1e-12):
            return float(m * 10**p)
    return float(10 ** (p + 1))  # pragma: no cover


def _rows(leaves: np.ndarray, levels: list[np.ndarray]) -> list[list[str]]:
    table = np.column_stack([leaves] + levels).astype(object)
    return table.tolist()


# ---------------------------------------------------------------------------
# numeric intervals
# ---------------------------------------------------------------------------


def interval_hierarchy(
    values,
    *,
    width: float | None = None,
    start: float | None = None,
    method: str = "fixed",
    levels: int | None = None,
    name: str = "",
) -> Hierarchy:
    """Interval hierarchy for a numeric column.

    Parameters
    ----------
    values : array-like of numbers
        The column (its distinct values become the leaves).
    width : float, optional
        ``method="fixed"``: width of the level-1 intervals; each further level doubles
        it.  Default: a round number (1, 2 or 5 × 10^p) near range/32 (at least 1 for
        integer data).
    start : float, optional
        Anchor of the intervals (default: ``width × floor(min / width)``).
    method : {"fixed", "quantile"}
        ``"quantile"``: level 1 has 2^(levels−1) bins with (about) equal numbers of
        records, each further level merges neighbouring bins pairwise; labels are the
        smallest and largest value in the bin.
    levels : int, optional
        Number of interval levels (excluding the leaves and the final ``*``).  Default:
        double until one interval holds every value (fixed), or 5 (quantile).
    """
    s = _distinct(values, name)
    try:
        num = pd.to_numeric(s).to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"Column {name!r}: interval hierarchies need numbers.") from None
    if not np.all(np.isfinite(num)):
        raise InputError(f"Column {name!r} has infinite values; no interval hierarchy possible.")
    codes, leaves = factorize_strings(s)
    uniq = np.asarray([float(x) for x in leaves], dtype=np.float64)
    order = np.argsort(uniq, kind="stable")
    leaves, uniq = leaves[order], uniq[order]
    integer = bool(np.all(uniq == np.round(uniq)))
    lo, hi = float(uniq[0]), float(uniq[-1])
    lvls: list[np.ndarray] = []
    if method == "fixed":
        if width is None:
            width = _nice((hi - lo) / 32.0)
            if integer:
                width = max(1.0, round(width))
        width = float(width)
        if not (width > 0 and math.isfinite(width)):
            raise ParameterError(f"Interval width for column {name!r} must be positive. Got {width}.")
        if start is None:
            # anchor at a multiple of the widest interval so that labels are round
            W = width
            for _ in range(64):
                start = W * math.floor(lo / W)
                if start > lo:  # lo/W underflowed to -0.0 (tiny negative lo, wide W)
                    start -= W
                if start + W > hi or (levels is not None and W >= width * 2 ** (int(levels) - 1)):
                    break
                W *= 2
        assert start is not None  # the loop above ran at least once and set it
        start = float(start)
        if start > lo:
            raise ParameterError(
                f"Interval start {start:g} for column {name!r} lies above the smallest value {lo:g}."
            )
        int_w = integer and float(width).is_integer() and float(start).is_integer()
        max_levels = 64 if levels is None else int(levels)
        w = width
        for _ in range(max_levels):
            idx = np.floor((uniq - start) / w)
            a = start + idx * w
            b = a + w
            if int_w:
                lab = [f"{_fmt_number(x)}-{_fmt_number(y - 1)}" for x, y in zip(a, b)]
            else:
                lab = [f"[{_fmt_bound(x)}, {_fmt_bound(y)})" for x, y in zip(a, b)]
            lvls.append(np.asarray(lab, dtype=object))
            if levels is None and idx.min() == idx.max():
                break
            w *= 2
        if levels is None:
            # an interval holding every value says no more than "*": drop it
            while lvls and len(set(lvls[-1])) == 1:
                lvls.pop()
    elif method == "quantile":
        L = 5 if levels is None else int(levels)
        if L < 1:
            raise ParameterError(f"levels must be at least 1. Got {levels}.")
        bins = 2 ** (L - 1)
        edges = np.quantile(num, np.linspace(0, 1, bins + 1)[1:-1])
        idx = np.searchsorted(edges, uniq, side="right")
        for _ in range(L):
            # label = smallest-largest value in the bin (bins are disjoint → unique labels)
            mins = pd.Series(uniq).groupby(idx).transform("min").to_numpy()
            maxs = pd.Series(uniq).groupby(idx).transform("max").to_numpy()
            lab = [
                (_fmt_number(x) if x == y else f"{_fmt_number(x)}-{_fmt_number(y)}")
                if integer
                else f"[{_fmt_bound(x)}, {_fmt_bound(y)}]"
                for x, y in zip(mins, maxs)
            ]
            lvls.append(np.asarray(lab, dtype=object))
            idx = idx // 2
    else:
        raise ParameterError(f"Interval hierarchy method must be 'fixed' or 'quantile'. Got {method!r}.")
    lvls.append(np.full(len(leaves), "*", dtype=object))
    return Hierarchy.from_rows(_rows(leaves, lvls), name=name, source="auto:intervals")


# ---------------------------------------------------------------------------
# dates
# ---------------------------------------------------------------------------


def date_hierarchy(
    values, *, year_spans: tuple[int, ...] | None = None, name: str = "", date_format: str | None = None
) -> Hierarchy:
    """Date hierarchy: day → month (``YYYY-MM``) → year → multi-year periods → ``*``.

    ``year_spans`` (default 2, 4, 8, … until one period covers all years) are the
    multi-year periods, anchored at multiples of the span (``1990-1991``).  Leaves are
    the column's values as written (``YYYY-MM-DD`` for datetime columns).
    """
    s = _distinct(values, name)
    codes, leaves = factorize_strings(s)
    try:
        dates = pd.to_datetime(pd.Series(leaves), format=date_format or "mixed", errors="coerce")
    except (TypeError, ValueError):  # pragma: no cover - errors="coerce" does not raise
        dates = pd.Series(pd.NaT, index=range(len(leaves)))
    if dates.isna().any():
        bad = leaves[np.flatnonzero(dates.isna().to_numpy())[0]]
        row = int(np.flatnonzero(codes == np.flatnonzero(dates.isna().to_numpy())[0])[0])
        raise InputError(
            f"Column {name!r}: value {bad!r} (row {row + 1}) is not a date; correct "
            "it or give the column another hierarchy."
        )
    order = np.argsort(dates.to_numpy(), kind="stable")
    leaves = leaves[order]
    dates = dates.iloc[order].reset_index(drop=True)
    years = dates.dt.year.to_numpy()
    lvls = [
        np.asarray(dates.dt.strftime("%Y-%m").to_numpy(), dtype=object),
        np.asarray([str(y) for y in years], dtype=object),
    ]
    if year_spans is None:
        spans, sp = [], 2
        while True:
            spans.append(sp)
            if len(np.unique(years // sp)) == 1 or sp > 4096:
                break
            sp *= 2
    else:
        spans = [int(x) for x in year_spans]
    prev = 1
    for sp in spans:
        if sp <= prev or sp % prev:
            raise ParameterError(f"Year spans must increase and each divide the next; got {spans}.")
        a = (years // sp) * sp
        lvls.append(np.asarray([f"{x}-{x + sp - 1}" for x in a], dtype=object))
        prev = sp
    lvls.append(np.full(len(leaves), "*", dtype=object))
    return Hierarchy.from_rows(_rows(leaves, lvls), name=name, source="auto:dates")


# ---------------------------------------------------------------------------
# codes (ZIP-like)
# ---------------------------------------------------------------------------


def masking_hierarchy(values, *, mask: str = "*", name: str = "") -> Hierarchy:
    """Mask trailing characters one per level: ``12345 → 1234* → 123** → … → *``.

    Codes of different lengths are masked from their own right end; the last level is
    a single ``*`` (the root).
    """
    s = _distinct(values, name)
    codes, leaves = factorize_strings(s)
    lens = np.array([len(x) for x in leaves])
    maxlen = int(lens.max()) if len(lens) else 0
    lvls = []
    for lvl in range(1, maxlen):
        lvls.append(
            np.asarray([x[: max(len(x) - lvl, 0)] + mask * min(lvl, len(x)) for x in leaves], dtype=object)
        )
    lvls.append(np.full(len(leaves), mask, dtype=object))
    order = np.argsort(leaves.astype(str), kind="stable")
    return Hierarchy.from_rows(
        _rows(leaves[order], [v[order] for v in lvls]), name=name, source="auto:masking"
    )


def flat_hierarchy(values, *, name: str = "") -> Hierarchy:
    """Two levels: the value, then ``*`` (categorical attributes without a hierarchy)."""
    s = _distinct(values, name)
    codes, leaves = factorize_strings(s)
    leaves = np.sort(leaves.astype(str)).astype(object)
    return Hierarchy.from_rows(
        _rows(leaves, [np.full(len(leaves), "*", dtype=object)]), name=name, source="auto:flat"
    )


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CODE = re.compile(r"^[0-9A-Za-z]+$")


def auto_hierarchy(values, name: str = "", kind: str = "auto") -> Hierarchy:
    """An automatic hierarchy for a column.

    ``kind``: ``"auto"`` (numbers → fixed intervals, datetimes / ISO dates → dates,
    equal-length digit codes of ≥ 3 characters → masking, anything else → ``*``),
    or one of ``"intervals"``, ``"quantiles"``, ``"dates"``, ``"masking"``, ``"flat"``.
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if kind == "intervals":
        return interval_hierarchy(s, name=name)
    if kind == "quantiles":
        return interval_hierarchy(s, name=name, method="quantile")
    if kind == "dates":
        return date_hierarchy(s, name=name)
    if kind == "masking":
        return masking_hierarchy(s, name=name)
    if kind == "flat":
        return flat_hierarchy(s, name=name)
    if kind != "auto":
        raise ParameterError(
            f"Unknown hierarchy kind {kind!r}: use auto, intervals, quantiles, dates, masking or flat."
        )
    if pd.api.types.is_bool_dtype(s):
        return flat_hierarchy(s, name=name)
    if pd.api.types.is_numeric_dtype(s):
        return interval_hierarchy(s, name=name)
    if pd.api.types.is_datetime64_any_dtype(s):
        return date_hierarchy(s, name=name)
    _, labels = factorize_strings(_distinct(s, name))
    lab = [str(x) for x in labels]
    if lab and all(_ISO_DATE.match(x) for x in lab):
        try:
            return date_hierarchy(s, name=name, date_format="%Y-%m-%d")
        except InputError:
            pass
    lens = {len(x) for x in lab}
    if len(lens) == 1 and min(lens) >= 3 and all(x.isdigit() for x in lab):
        return masking_hierarchy(s, name=name)
    return flat_hierarchy(s, name=name)


# ---------------------------------------------------------------------------
# the hierarchy builder's kinds (issue 24): custom breaks, category groups, preview
# ---------------------------------------------------------------------------


def breaks_hierarchy(values, breaks, *, name: str = "") -> Hierarchy:
    """Intervals at custom ``breaks`` (level 1: ``[b_i, b_(i+1))``, the first from −∞ and the
    last to +∞ written ``<b_1`` and ``≥b_m``; integer data: ``18-29``), then neighbouring
    intervals merged pairwise per level, then ``*``.

    >>> h = breaks_hierarchy(pd.Series([17, 23, 38, 61]), [18, 30, 65])
    >>> h.table[:, 1].tolist()
    ['<18', '18-29', '30-64', '30-64']
    """
    s = _distinct(values, name)
    try:
        num = pd.to_numeric(s)
    except (TypeError, ValueError):
        raise InputError(f"Column {name!r}: intervals need numbers.") from None
    try:
        b = sorted({float(x) for x in breaks})
    except (TypeError, ValueError):
        raise ParameterError(f"Breaks for column {name!r} must be numbers. Got {breaks!r}.") from None
    if not b or not all(math.isfinite(x) for x in b):
        raise ParameterError(f"Give at least one finite break for column {name!r}.")
    if len(b) > 1000:
        raise ParameterError(f"At most 1,000 breaks for column {name!r}. Got {len(b):,}.")
    del num
    codes, leaves = factorize_strings(s)
    uniq = np.asarray([float(x) for x in leaves], dtype=np.float64)
    order = np.argsort(uniq, kind="stable")
    leaves, uniq = leaves[order], uniq[order]
    integer = bool(np.all(uniq == np.round(uniq))) and all(x.is_integer() for x in b)

    def label(lo: float | None, hi: float | None) -> str:
        if lo is None and hi is None:
            return "*"
        if lo is None:
            return f"<{_fmt_number(hi)}"  # type: ignore[arg-type]
        if hi is None:
            return f"≥{_fmt_number(lo)}"
        if integer:
            return f"{_fmt_number(lo)}-{_fmt_number(hi - 1)}"
        return f"[{_fmt_bound(lo)}, {_fmt_bound(hi)})"

    edges: list[float | None] = [None, *b, None]
    idx = np.searchsorted(np.asarray(b), uniq, side="right")  # bin i: [edges[i], edges[i+1])
    # drop the open bins no value falls in (a break below the minimum)
    lvls: list[np.ndarray] = []
    groups = [(i, i) for i in range(len(edges) - 1)]
    while True:
        lab = [label(edges[groups[g][0]], edges[groups[g][1] + 1]) for g in idx]
        lvls.append(np.asarray(lab, dtype=object))
        if len(set(lab)) <= 1 or len(groups) <= 1:
            break
        groups = [(groups[i][0], groups[min(i + 1, len(groups) - 1)][1]) for i in range(0, len(groups), 2)]
        idx = idx // 2
    while lvls and len(set(lvls[-1])) == 1:
        lvls.pop()
    lvls.append(np.full(len(leaves), "*", dtype=object))
    return Hierarchy.from_rows(_rows(leaves, lvls), name=name, source="builder:breaks")


def mapping_hierarchy(values, mapping, *, name: str = "") -> Hierarchy:
    """Categories grouped by a mapping table: value → group → ``*``.  ``mapping``: {value:
    group} (value as its canonical string, e.g. ``"3"`` for 3.0); a value the table does not
    map keeps its own value as its group.

    >>> h = mapping_hierarchy(pd.Series(["a", "b", "c"]), {"a": "ab", "b": "ab"})
    >>> h.table.tolist()
    [['a', 'ab', '*'], ['b', 'ab', '*'], ['c', 'c', '*']]
    """
    s = _distinct(values, name)
    _, leaves = factorize_strings(s)
    leaves = np.sort(leaves.astype(str)).astype(object)
    m = {str(k).strip(): str(v).strip() for k, v in dict(mapping).items()}
    empty = [k for k, v in m.items() if not v]
    if empty:
        raise ParameterError(f"Column {name!r}: value {empty[0]!r} is mapped to an empty group name.")
    grp = np.asarray([m.get(str(v), str(v)) for v in leaves], dtype=object)
    return Hierarchy.from_rows(
        _rows(leaves, [grp, np.full(len(leaves), "*", dtype=object)]), name=name, source="builder:groups"
    )


def _first_labels(labels, shown: int = 6) -> str:
    """The first ``shown`` labels, joined, with ", …" when there are more (the preview cut
    "0, 1, 2, 3, 4, 5" of 102 ages read as the whole level).
    """
    head = ", ".join(str(x) for x in labels[:shown])
    return head + (", …" if len(labels) > shown else "")


def level_table(values, hierarchy: Hierarchy, k: int) -> pd.DataFrame:
    """The builder's preview: per level of ``hierarchy`` on ``values`` (missing values left
    out), the number of groups, the smallest group and the records in groups smaller than k
    (this column alone: other k-quasis only split the groups further), with a few labels.
    """
    s = pd.Series(values).dropna()
    codes, labels = factorize_strings(s)
    idx = {v: i for i, v in enumerate(hierarchy.leaves)}
    leaf = np.asarray([idx.get(str(v), -1) for v in labels], dtype=np.int64)
    if (leaf < 0).any():
        bad = labels[int(np.flatnonzero(leaf < 0)[0])]
        raise InputError(f"Column {hierarchy.name!r}: value {bad!r} is not in the hierarchy.")
    rec_leaf = leaf[codes]
    rows = []
    for lvl in range(hierarchy.height):
        lab, inv = hierarchy.level_codes(lvl)
        cnt = np.bincount(inv[rec_leaf], minlength=len(lab))
        cnt = cnt[cnt > 0]
        rows.append(
            {
                "level": lvl,
                "groups": int(cnt.size),
                "smallest group": int(cnt.min()) if cnt.size else 0,
                "records in groups < k": int(cnt[cnt < k].sum()),
                "labels": _first_labels(pd.unique(lab[inv[np.sort(leaf)]])),
            }
        )
    return pd.DataFrame(rows)


def level_counts(values, hierarchy: Hierarchy, level: int) -> pd.Series:
    """Records per label of ``hierarchy`` at ``level`` (missing values left out), in the
    hierarchy's order of labels.
    """
    s = pd.Series(values).dropna()
    codes, labels = factorize_strings(s)
    idx = {v: i for i, v in enumerate(hierarchy.leaves)}
    leaf = np.asarray([idx.get(str(v), -1) for v in labels], dtype=np.int64)
    lab, inv = hierarchy.level_codes(int(level))
    ok = leaf[codes] >= 0
    cnt = np.bincount(inv[leaf[codes][ok]], minlength=len(lab))
    first = np.full(len(lab), len(inv), dtype=np.int64)  # the first leaf of each label
    np.minimum.at(first, inv, np.arange(len(inv)))
    order = np.argsort(first, kind="stable")
    out = pd.Series(cnt[order], index=[str(lab[i]) for i in order])
    return out[out > 0]
