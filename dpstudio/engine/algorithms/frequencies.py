"""Frequency counts of key combinations, the kernels that measures and methods share.

* exact equivalence classes: :func:`class_codes` (the class of every record, a missing value
  being a value of its own) and :func:`class_sizes` -- the k-anonymity measure, the (k, ε)
  measures and the generaliser's release check count classes with them;
* under sdcMicro's missing-matches-any rule: :func:`encode_keys`, :func:`wildcard_counts`
  and :class:`WildcardIndex` (``f_k`` and the weighted ``F_k`` of every record; how they work:
  :mod:`dpstudio.engine.measures.survey_risk`) -- the survey risk measures and local
  suppression use them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError

_MAX_CODE = 1 << 62

__all__ = ["WildcardIndex", "class_codes", "class_sizes", "encode_keys", "wildcard_counts"]


# --------------------------------------------------------------------------- exact classes


def class_codes(columns: Iterable) -> np.ndarray:
    """Equivalence-class index (0 … classes − 1) of every record, given the record values of
    each k-quasi-identifier (Series or 1-d arrays of equal length).  Values are compared as
    they are (a missing value is a value of its own); no column: one class.

    >>> class_codes([[1, 1, 2, 2], ["a", "b", "a", "a"]]).tolist()
    [0, 1, 2, 2]
    """
    codes: np.ndarray | None = None
    for col in columns:
        s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col, dtype=object), dtype=object)
        cc, uniq = pd.factorize(s, use_na_sentinel=False)
        cc = cc.astype(np.int64)
        if codes is None:
            codes = cc
            continue
        # combine, then renumber densely (keeps the combined key below n · (m + 1))
        codes = pd.factorize(codes * (len(uniq) + 1) + cc)[0].astype(np.int64)
    return np.zeros(0, dtype=np.int64) if codes is None else codes


def class_sizes(columns: Iterable, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, sizes)``: :func:`class_codes` and the size of each class."""
    cols = list(columns)
    if not cols:
        codes = np.zeros(int(n or 0), dtype=np.int64)
    else:
        codes = class_codes(cols)
    return codes, np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)


# --------------------------------------------------------------------------- key coding


def encode_keys(df: pd.DataFrame, keys: list[str], missing: str = "any") -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (n x m, int64) of the key columns and the number of categories per key.

    Missing values get code -1 with ``missing="any"`` (they match anything) and a category of
    their own with ``missing="category"``.
    """
    n = len(df)
    codes = np.empty((n, len(keys)), dtype=np.int64, order="F")  # filled column by column
    cards = np.empty(len(keys), dtype=np.int64)
    for j, k in enumerate(keys):
        c, uniq = pd.factorize(df[k], use_na_sentinel=(missing == "any"))
        codes[:, j] = c
        cards[j] = max(len(uniq), 1)
    return codes, cards


def _group_ids(cols: list[np.ndarray], cards: list[int], n: int) -> tuple[np.ndarray, int]:
    """Dense-ish group ids of rows given their (non-negative) codes in ``cols``."""
    if not cols:
        return np.zeros(n, dtype=np.int64), 1
    code = np.zeros(n, dtype=np.int64)
    mult = 1
    for col, card in zip(cols, cards):
        card = int(card)
        if mult * card >= _MAX_CODE:
            code, uniq = pd.factorize(code)
            code = code.astype(np.int64)
            mult = max(len(uniq), 1)
        code = code * card + col
        mult *= card
    if mult > 4 * n + 1024:
        code, uniq = pd.factorize(code)
        return code.astype(np.int64), max(len(uniq), 1)
    return code, mult


def _patterns(codes: np.ndarray) -> tuple[np.ndarray, list[int], list[np.ndarray]]:
    """Missing-key pattern of each row (bit j set = key j missing), the distinct patterns and
    the rows of each.
    """
    m = codes.shape[1]
    if m > 62:
        raise ParameterError(f"at most 62 key variables are supported (got {m})")
    n = codes.shape[0]
    pat = np.zeros(n, dtype=np.int64)
    for j in range(m):
        nj = codes[:, j] < 0
        if nj.any():
            pat[nj] |= np.int64(1) << j
    if not pat.any():  # no missing key value: one pattern
        return pat, [0], [np.arange(n)]
    order = np.argsort(pat, kind="stable")
    sp = pat[order]
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
    ends = np.r_[starts[1:], len(sp)]
    upats = [int(sp[s]) for s in starts]
    rows = [order[s:e] for s, e in zip(starts, ends)]
    return pat, upats, rows


def _radix(cards: np.ndarray) -> np.ndarray | None:
    """Mixed-radix place values of the keys, or None if the product of ``cards`` does not fit."""
    R = np.ones(len(cards), dtype=np.int64)
    tot = 1
    for j, c in enumerate(cards):
        R[j] = tot
        tot *= max(int(c), 1)
        if tot >= _MAX_CODE:
            return None
    return R


class _PatternTable:
    """The distinct key combinations of the rows of one missing pattern, with their counts."""

    __slots__ = ("pattern", "rows", "uniq", "inv", "cnt", "wsum", "_digits")

    def __init__(self, pattern: int, rows: np.ndarray, code: np.ndarray, w: np.ndarray | None):
        self.pattern = pattern
        self.rows = rows
        self.uniq, inv = np.unique(code, return_inverse=True)
        self.inv = inv.reshape(-1)
        g = len(self.uniq)
        self.cnt = np.bincount(self.inv, minlength=g).astype(np.float64)
        self.wsum = None if w is None else np.bincount(self.inv, weights=w, minlength=g)
        self._digits: dict[int, np.ndarray] = {}

    def project(self, drop: list[int], R: np.ndarray, cards: np.ndarray) -> np.ndarray:
        """The distinct codes with the digits of keys ``drop`` set to 0 (they then match anything)."""
        if not drop:
            return self.uniq
        out = self.uniq.copy()
        for j in drop:
            d = self._digits.get(j)
            if d is None:  # the digit times its place value, once per key
                d = self._digits[j] = ((self.uniq // R[j]) % cards[j]) * R[j]
            out -= d
        return out


def _cross(pa, ca, wa, pb, cb, wb, both: bool, a_unique: bool = False, b_unique: bool = False):
    """Sums over equal codes: for each ``pa`` the count (weight) of equal ``pb``, and (``both``)
    for each ``pb`` the count (weight) of equal ``pa``.  One sort of one side (none if it is
    already sorted and unique: ``a_unique``/``b_unique``), one binary search of the other.
    """
    swap = both and (a_unique, -len(pa)) > (b_unique, -len(pb))
    if swap:  # sort the side that is sorted already, else the smaller one
        pa, ca, wa, pb, cb, wb = pb, cb, wb, pa, ca, wa
        b_unique = a_unique
    if b_unique:
        ub, invb = pb, np.arange(len(pb))
    else:
        ub, invb = np.unique(pb, return_inverse=True)
        invb = invb.reshape(-1)
    g = len(ub)
    sb = np.bincount(invb, weights=cb, minlength=g)
    swb = None if wb is None else np.bincount(invb, weights=wb, minlength=g)
    idx = np.searchsorted(ub, pa)
    np.minimum(idx, g - 1, out=idx)
    match = ub[idx] == pa
    to_a = np.where(match, sb[idx], 0.0)
    wto_a = None if swb is None else np.where(match, swb[idx], 0.0)
    to_b = wto_b = None
    if both:
        im = idx[match]
        to_b = np.bincount(im, weights=ca[match], minlength=g)[invb]
        if wa is not None:
            wto_b = np.bincount(im, weights=wa[match], minlength=g)[invb]
    if swap:
        return to_b, wto_b, to_a, wto_a
    return to_a, wto_a, to_b, wto_b


class WildcardIndex:
    """The rows of a coded file grouped for repeated missing-matches-any counting.

    Rows are grouped by their pattern of missing keys and, within a pattern, by their distinct
    key combination, coded as one mixed-radix integer (a missing digit is 0).  Rows of patterns
    P and Q are compatible iff their codes agree once the digits of the keys missing in P or Q
    are zeroed, so the count for a pair of patterns is a sort of the distinct codes of one side
    and a binary search of the other's -- no per-record work, and in :meth:`self_counts` each
    unordered pair of patterns is visited once for both directions.

    ``WildcardIndex.build`` returns None when the codes do not fit 62 bits
    (:func:`wildcard_counts` then takes the general path).
    """

    def __init__(self, codes, cards, R, weights):
        self.n, self.m = codes.shape
        self.cards = np.asarray(cards, dtype=np.int64)
        self.R = R
        self.weights = weights
        self.tables = self._tables(codes, weights)

    @classmethod
    def build(cls, codes: np.ndarray, cards: np.ndarray, weights: np.ndarray | None = None):
        R = _radix(np.asarray(cards))
        if R is None:
            return None
        return cls(codes, cards, R, weights)

    def _code(self, codes: np.ndarray) -> np.ndarray:
        return np.maximum(codes, 0) @ self.R if len(codes) else np.zeros(0, dtype=np.int64)

    def _tables(self, codes: np.ndarray, w: np.ndarray | None) -> list[_PatternTable]:
        _, pats, rows = _patterns(codes)
        code = self._code(codes)
        return [_PatternTable(P, r, code[r], None if w is None else w[r]) for P, r in zip(pats, rows)]

    def _drop(self, mine: int, other: int) -> list[int]:
        extra = other & ~mine
        return [j for j in range(self.m) if (extra >> j) & 1]

    def self_counts(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``f_k`` (and weighted ``F_k``) of every row against the rows of the index, itself included."""
        T = self.tables
        acc = [t.cnt.copy() for t in T]
        wacc = None if self.weights is None else [cast(np.ndarray, t.wsum).copy() for t in T]
        for a, A in enumerate(T):
            for b in range(a + 1, len(T)):
                B = T[b]
                da, db = self._drop(A.pattern, B.pattern), self._drop(B.pattern, A.pattern)
                pa, pb = A.project(da, self.R, self.cards), B.project(db, self.R, self.cards)
                ta, wta, tb, wtb = _cross(
                    pa, A.cnt, A.wsum, pb, B.cnt, B.wsum, True, a_unique=not da, b_unique=not db
                )
                acc[a] += ta
                acc[b] += tb
                if wacc is not None:
                    wacc[a] += wta
                    wacc[b] += wtb
        return self._expand(T, acc, wacc, self.n)

    def query(self, q_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """For rows ``q_codes`` (not part of the index), the count (weight) of compatible index rows."""
        Tq = self._tables(q_codes, None)
        acc = [np.zeros(len(t.uniq)) for t in Tq]
        wacc = None if self.weights is None else [np.zeros(len(t.uniq)) for t in Tq]
        for a, A in enumerate(Tq):
            for B in self.tables:
                db = self._drop(B.pattern, A.pattern)
                pa = A.project(self._drop(A.pattern, B.pattern), self.R, self.cards)
                pb = B.project(db, self.R, self.cards)
                ta, wta, _, _ = _cross(pa, A.cnt, None, pb, B.cnt, B.wsum, False, b_unique=not db)
                acc[a] += ta
                if wacc is not None:
                    wacc[a] += wta
        return self._expand(Tq, acc, wacc, len(q_codes))

    def exact_groups(self) -> tuple[np.ndarray, int]:
        """Id of every row's exact key combination (a missing value is a value of its own)
        and the number of combinations.
        """
        group = np.empty(self.n, dtype=np.int64)
        off = 0
        for t in self.tables:
            group[t.rows] = t.inv + off
            off += len(t.uniq)
        return group, off

    @staticmethod
    def _expand(T, acc, wacc, n):
        fk = np.zeros(n, dtype=np.float64)
        Fk = None if wacc is None else np.zeros(n, dtype=np.float64)
        for i, t in enumerate(T):
            fk[t.rows] = acc[i][t.inv]
            if Fk is not None and wacc is not None:
                Fk[t.rows] = wacc[i][t.inv]
        return fk, Fk


def wildcard_counts(
    q_codes: np.ndarray,
    cards: np.ndarray,
    d_codes: np.ndarray | None = None,
    d_weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """For every query row, the number (and total weight) of data rows compatible with it.

    Two rows are compatible when they agree on every key where neither is missing (code -1):
    sdcMicro's ``freqCalc`` rule with ``alpha = 1``.  ``d_codes=None`` means query = data (the
    ``f_k`` of a file), in which a row counts itself.

    Examples
    --------
    >>> codes = np.array([[0, 0], [0, -1], [1, 0]])
    >>> wildcard_counts(codes, np.array([2, 1]))[0]
    array([2., 2., 1.])
    """
    self_count = d_codes is None
    data = q_codes if d_codes is None else d_codes
    if len(q_codes) == 0 or len(data) == 0:
        nq = len(q_codes)
        return np.zeros(nq), None if d_weights is None else np.zeros(nq)
    idx = WildcardIndex.build(data, cards, d_weights)
    if idx is None:
        return _wildcard_counts_pairwise(q_codes, cards, d_codes, d_weights)
    return idx.self_counts() if self_count else idx.query(q_codes)


def _wildcard_counts_pairwise(
    q_codes: np.ndarray,
    cards: np.ndarray,
    d_codes: np.ndarray | None = None,
    d_weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`wildcard_counts` by one group-by of the records of each pair of missing patterns.

    The general path, used when the key codes do not fit one 62-bit mixed-radix integer
    (:class:`WildcardIndex` needs them to); slower (every pair regroups all its records).
    """
    self_count = d_codes is None
    if d_codes is None:
        d_codes = q_codes
    nq, m = q_codes.shape
    fk = np.zeros(nq, dtype=np.float64)
    Fk = None if d_weights is None else np.zeros(nq, dtype=np.float64)
    if nq == 0 or len(d_codes) == 0:
        return fk, Fk
    _, q_pats, q_rows = _patterns(q_codes)
    if self_count:
        d_pats, d_rows = q_pats, q_rows
    else:
        _, d_pats, d_rows = _patterns(d_codes)
    for P, rp in zip(q_pats, q_rows):
        for Q, rd in zip(d_pats, d_rows):
            S = [j for j in range(m) if not ((P | Q) >> j) & 1]
            if not S:  # every pair is compatible
                fk[rp] += len(rd)
                if Fk is not None and d_weights is not None:  # set together above
                    Fk[rp] += d_weights[rd].sum()
                continue
            same = self_count and P == Q
            rows = rp if same else np.concatenate([rd, rp])
            if same:
                cols = [q_codes[rows, j] for j in S]
            else:
                cols = [np.concatenate([d_codes[rd, j], q_codes[rp, j]]) for j in S]
            ids, G = _group_ids(cols, [cards[j] for j in S], len(rows))
            nd = 0 if same else len(rd)
            idd, idq = (ids, ids) if same else (ids[:nd], ids[nd:])
            fk[rp] += np.bincount(idd, minlength=G)[idq]
            if Fk is not None and d_weights is not None:  # set together above
                Fk[rp] += np.bincount(idd, weights=d_weights[rd if not same else rp], minlength=G)[idq]
    return fk, Fk
