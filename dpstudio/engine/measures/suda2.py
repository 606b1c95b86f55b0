"""SUDA2: special uniques of survey microdata, scored as sdcMicro's ``suda2`` does.

A *minimal sample unique* (MSU) of a record is a set of its key values (``key = value``
pairs, one per key of a subset S of the keys, no missing value among them) that no other
record shares, while every proper subset of it is shared by at least one other record
(Elliot, Manning, Mayes, Gurd & Bane, "SUDA: a program for detecting special uniques";
Manning, Haglin & Keane 2008, "A recursive search algorithm for statistical disclosure
assessment", Data Min. Knowl. Disc. 16:165--196).  With M key variables (M = 3 when fewer
are given: sdcMicro pads with constant dummy keys):

* the **SUDA score** of a record is ``sum over its MSUs of (M - |MSU|)!`` (Elliot et al.;
  sdcMicro >= 5.0.3's default ``original_scores = TRUE``), 0 for a record with no MSU;
* the **DIS score** estimates the probability that a record with that SUDA score is a
  correct match.  sdcMicro's C++ routine (``src/Suda2.h``) computes, with U its count of
  sample uniques, P the number of records in key combinations that occur exactly twice,
  f = ``DisFraction`` (the sampling fraction) and Q = 1 + (8 - M)/20::

      Dis    = U f / (U f + P (1 - f))
      A      = sum over records with score > 0 of score^-Q
      dis_i  = 1 / (1 + (U/Dis - U) / (score_i^Q * A))      (0 when score_i = 0)

  Algebraically U/Dis - U = P (1 - f)/f does not depend on U.  sdcMicro evaluates Dis,
  U/Dis - U and Q in single precision (``float``), and counts as U only the records that
  are alone in their bucket of a 16-bit hash of the key values -- which changes nothing
  but the float rounding (relative ~1e-7).  To equal sdcMicro to 1e-9 we evaluate the same
  single-precision expressions with the same U (:func:`sdcmicro_unique_and_pair_counts`).
  When that U is 0 (every record shares a bucket; sdcMicro returns NaN) we use the exact
  value P (1 - f)/f.

Missing key values (sdcMicro's ``suda2(missing = NA)``): a missing value is never part of an
MSU and matches no value, so a record with a missing value in key j has no MSU that uses j
and does not share any value of key j with anybody.

Implementation: our own level-wise search, not a port.  Only records whose complete key
combination is unique can have an MSU ("candidates").  Subsets S of the keys are visited by
size; a candidate stays *open* on S while it is non-missing on S and none of the subsets of S
is unique for it.  S is an MSU of a candidate r iff r is unique on S and open on every
S - {j}; subsets on which no candidate is open on every S - {j} are skipped with all their
supersets (the search stops as soon as a level has no open candidate).  Each visited subset
costs one mixed-radix code and one count over the n records.  ``max_size`` bounds the MSU
size (the search is exponential in the number of keys in the worst case); scores are then
sums over the MSUs found, i.e. a lower bound of sdcMicro's (equal when no MSU is larger).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.params import as_float, as_int, in_interval, interval_text, invalid_value

__all__ = [
    "Suda2Result",
    "suda2",
    "check_dis_fraction",
    "check_max_size",
    "sdcmicro_codes",
    "sdcmicro_unique_and_pair_counts",
    "dis_scores",
    "MAX_KEYS",
]

#: At most this many key variables (a subset is a bit mask in one int64; sdcMicro allows 256,
#: but 2^62 subsets could never be searched anyway -- use ``max_size``).
MAX_KEYS = 62
_INT_MIN = -(2**31)
_MAX_CODE = 1 << 62


# --------------------------------------------------------------------------- parameters


def check_dis_fraction(value: Any) -> float:
    """The sampling fraction of the DIS score: a float in the open interval (0, 1)."""
    c = f"a float in the range {interval_text(0.0, 1.0, False, False)} (the sampling fraction)"
    v = as_float(value, "suda_dis_fraction", None, c)
    if not in_interval(v, 0.0, 1.0, False, False):
        raise invalid_value("suda_dis_fraction", None, c, value)
    return v


def check_max_size(value: Any, m: int) -> int:
    """The largest MSU size searched: an int in [1, m] (``None``: m, no limit)."""
    if value is None:
        return m
    c = f"an int in the range [1, {m}] (at most the number of key variables, {m})"
    v = as_int(value, "suda_max_size", None, c)
    if not 1 <= v <= m:
        raise invalid_value("suda_max_size", None, c, value)
    return v


# --------------------------------------------------------------------------- sdcMicro's DIS


def sdcmicro_codes(df: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """The integer key values sdcMicro's C++ routine sees (n x max(m, 3), int64).

    Numeric columns are truncated towards zero to a 32-bit int (``(int)`` of a double; a
    missing value or a value outside the int range becomes INT_MIN, as on x86-64), other
    columns are coded 1..L in sorted order of their distinct values (R's ``as.factor``; R
    sorts text by the locale's collation, we by code point), booleans are 0/1; with fewer
    than 3 keys, constant columns of 1 are appended (sdcMicro's dummy keys).
    """
    n = len(df)
    cols = []
    for k in keys:
        s = df[k]
        if pd.api.types.is_bool_dtype(s.dtype):
            v = s.to_numpy(dtype=np.int64)
        elif pd.api.types.is_numeric_dtype(s.dtype):
            x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
            ok = np.isfinite(x) & (x > _INT_MIN - 1.0) & (x < 2.0**31)
            v = np.full(n, _INT_MIN, dtype=np.int64)
            v[ok] = np.trunc(x[ok]).astype(np.int64)
        else:
            isna = s.isna().to_numpy()
            txt = s.astype(object).where(~s.isna(), None)
            levels = sorted({str(t) for t in txt[~isna]})
            pos = {lv: i + 1 for i, lv in enumerate(levels)}
            v = np.full(n, _INT_MIN, dtype=np.int64)
            v[~isna] = [pos[str(t)] for t in txt[~isna]]
        cols.append(v)
    while len(cols) < 3:
        cols.append(np.ones(n, dtype=np.int64))
    return np.column_stack(cols) if n else np.zeros((0, len(cols)), dtype=np.int64)


def sdcmicro_unique_and_pair_counts(values: np.ndarray) -> tuple[int, int]:
    """(U, P) as sdcMicro's ``Suda2`` counts them from its integer key values.

    U: records alone in their bucket of the 16-bit hash ``h = rotl16(h) + value (mod 2^16)``
    over the keys (a unique record that shares its bucket with another record is not
    counted -- sdcMicro's loop never reaches its other branch).  P: twice the number of key
    combinations that occur exactly twice (missing = missing).
    """
    n = values.shape[0]
    if n == 0:
        return 0, 0
    h = np.zeros(n, dtype=np.int64)
    for j in range(values.shape[1]):
        carry = (h >> 15) & 1
        h = ((h << 1) + values[:, j] + carry) & 0xFFFF
    U = int(np.count_nonzero(np.bincount(h, minlength=1 << 16)[h] == 1))
    _, inv, cnt = np.unique(values, axis=0, return_inverse=True, return_counts=True)
    P = 2 * int(np.count_nonzero(cnt == 2))
    return U, P


def dis_scores(score: np.ndarray, *, U: int, P: int, dis_fraction: float, M: int) -> np.ndarray:
    """The DIS score of every record from its SUDA score, as sdcMicro (formulas in the module notes),
    with sdcMicro's single-precision steps.
    """
    score = np.asarray(score, dtype=np.float64)
    pos = score > 0
    out = np.zeros(len(score))
    if not pos.any():
        return out
    f32 = np.float32
    f = f32(dis_fraction)
    Q = float(f32(f32(1.0) + f32(f32(8.0) - f32(M)) / f32(20.0)))
    if U > 0:
        uf = f32(f32(U) * f)
        dis = f32(uf / f32(uf + f32(f32(P) * f32(f32(1.0) - f))))
        c = float(f32(f32(f32(U) / dis) - f32(U)))
    else:  # sdcMicro: 0/0 = NaN; the exact value of U/Dis - U
        c = P * (1.0 - float(f)) / float(f)
    sq = np.power(score[pos], Q)
    A = float(np.sum(1.0 / sq))
    out[pos] = 1.0 / (1.0 + c / (sq * A))
    return out


# --------------------------------------------------------------------------- result


@dataclass
class Suda2Result:
    """SUDA and DIS scores of every record, and the MSUs behind them.

    ``msu_records`` / ``msu_masks``: one row per MSU found (the record's 0-based position
    and the bit mask of its keys, bit j = ``keys[j]``), sorted by record.  Everything here
    is computed from the original records: private, never for a public file.
    """

    keys: list[str]
    dis_fraction: float
    max_size: int
    score: np.ndarray = field(repr=False)
    dis: np.ndarray = field(repr=False)
    msu_records: np.ndarray = field(repr=False)
    msu_masks: np.ndarray = field(repr=False)
    msu_counts_by_size: dict[int, int]
    unique_count: int  # U of the DIS formula (sdcMicro's count)
    pair_count: int  # P of the DIS formula
    subsets_visited: int

    @property
    def complete(self) -> bool:
        """True when MSUs of every size were searched (scores equal sdcMicro's)."""
        return self.max_size >= len(self.keys)

    def msus_of(self, record: int) -> list[tuple[str, ...]]:
        """The MSUs of ``record`` (0-based), each as the tuple of its key names, smallest first."""
        lo, hi = np.searchsorted(self.msu_records, [record, record + 1])
        out = [
            tuple(k for j, k in enumerate(self.keys) if (int(mk) >> j) & 1) for mk in self.msu_masks[lo:hi]
        ]
        return sorted(out, key=lambda t: (len(t), [self.keys.index(k) for k in t]))

    def top_records(self, count: int = 20) -> list[int]:
        """The ``count`` records with the highest DIS score (ties: higher SUDA score, then file
        order); only records with a score above 0.
        """
        pos = np.flatnonzero(self.score > 0)
        order = np.lexsort((pos, -self.score[pos], -self.dis[pos]))
        return [int(i) for i in pos[order[: max(int(count), 0)]]]

    def to_dict(self) -> dict:
        s, d = self.score, self.dis
        return {
            "records_with_msu": int(np.count_nonzero(s > 0)),
            "msus": int(len(self.msu_records)),
            "msus_by_size": {str(k): int(v) for k, v in sorted(self.msu_counts_by_size.items())},
            "score_sum": float(s.sum()),
            "score_max": float(s.max()) if len(s) else 0.0,
            "dis_sum": float(d.sum()),
            "dis_max": float(d.max()) if len(d) else 0.0,
            "dis_mean": float(d.mean()) if len(d) else 0.0,
            "records_dis_gt_0.1": int(np.count_nonzero(d > 0.1)),
            "settings": {
                "keys": list(self.keys),
                "dis_fraction": self.dis_fraction,
                "max_size": self.max_size,
                "complete": self.complete,
                "scores": "Elliot: sum over MSUs of (M - |MSU|)! (sdcMicro original_scores=TRUE)",
                "missing": "never part of an MSU (sdcMicro missing=NA)",
            },
        }


# --------------------------------------------------------------------------- search


def _key_codes(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Category codes 0..L-1 of each key (-1 = missing) and the number of categories."""
    n = len(df)
    codes = np.empty((n, len(keys)), dtype=np.int64, order="F")
    cards = np.empty(len(keys), dtype=np.int64)
    for j, k in enumerate(keys):
        c, uniq = pd.factorize(df[k], use_na_sentinel=True)
        codes[:, j] = c
        cards[j] = max(len(uniq), 1)
    return codes, cards


def _subset_code(codes: np.ndarray, cards: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    """One int64 per record identifying its values on ``cols`` (a missing value is one more
    category: it only has to differ from every real value).
    """
    code = np.zeros(codes.shape[0], dtype=np.int64)
    mult = 1
    for j in cols:
        base = int(cards[j]) + 1
        if mult * base >= _MAX_CODE:  # compact before it overflows
            ids, uniq = pd.factorize(code)
            code = ids.astype(np.int64)
            mult = max(len(uniq), 1)
        c = codes[:, j]
        code = code * base + np.where(c < 0, base - 1, c)
        mult *= base
    return code


def _counts_at(code: np.ndarray, at: np.ndarray, n: int) -> np.ndarray:
    """For the records ``at``, how many records share their ``code``."""
    top = int(code.max()) + 1 if len(code) else 1
    if top <= 4 * n + 1024:
        return np.bincount(code, minlength=top)[code[at]]
    ids, uniq = pd.factorize(code)
    return np.bincount(ids, minlength=len(uniq))[ids[at]]


def suda2(
    df: pd.DataFrame,
    keys: Iterable[str],
    *,
    dis_fraction: float = 0.01,
    max_size: int | None = None,
    progress: Callable[[float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> Suda2Result:
    """SUDA and DIS scores of every record of ``df`` with categorical keys ``keys``.

    Parameters
    ----------
    df : DataFrame
        The file (key values are category labels; a missing value is NaN/None).
    keys : list of str
        Key variables (quasi-identifiers), at most :data:`MAX_KEYS`.
    dis_fraction : float
        Sampling fraction of the DIS score, in (0, 1) (sdcMicro's ``DisFraction``, 0.01).
    max_size : int, optional
        Largest MSU size searched (default: all, as sdcMicro).  With a smaller value the
        scores count only the MSUs of at most that size.
    progress : callable, optional
        Called with the fraction done (0..1) between subsets.
    check_cancel : callable, optional
        Called between subsets; raises :class:`~dpstudio.engine.errors.Cancelled` to stop.

    Returns
    -------
    Suda2Result
    """
    keys = [keys] if isinstance(keys, str) else [str(k) for k in keys]
    if not keys:
        raise ParameterError("give at least one key variable (role k-quasi / key)")
    if len(set(keys)) != len(keys):
        raise ParameterError("a key column is listed twice")
    for k in keys:
        if k not in df.columns:
            raise ParameterError(f"key column '{k}' is not in the file")
    m = len(keys)
    if m > MAX_KEYS:
        raise ParameterError(f"SUDA2 takes at most {MAX_KEYS} key variables (got {m})")
    f = check_dis_fraction(dis_fraction)
    K = check_max_size(max_size, m)
    n = len(df)
    if n == 0:
        raise InputError("the file has no records")
    M = max(m, 3)
    weight = [0.0] + [float(math.factorial(M - s)) for s in range(1, m + 1)]

    codes, cards = _key_codes(df, keys)
    nonmiss = codes >= 0
    # candidates: records whose complete key combination (missing = a category) is unique
    full = _subset_code(codes, cards, tuple(range(m)))
    cand = np.flatnonzero(_counts_at(full, np.arange(n), n) == 1)
    nc = len(cand)
    score = np.zeros(n)
    found_rec: list[np.ndarray] = []
    found_mask: list[np.ndarray] = []
    by_size: dict[int, int] = {}
    visited = 0
    total_work = sum(math.comb(m, s) for s in range(1, K + 1))
    done = 0
    # open[S]: bit map (np.packbits) of the candidates that are non-missing on S and have no
    # unique subset of S (S as a bit mask): nc/8 bytes per subset, however many are open
    prev_open: dict[int, np.ndarray] = {0: np.packbits(np.ones(nc, dtype=bool))}
    for size in range(1, K + 1):
        if nc == 0 or not prev_open:
            break
        cur_open: dict[int, np.ndarray] = {}
        for cols in combinations(range(m), size):
            done += 1
            if check_cancel is not None:
                check_cancel()
            if progress is not None and done % 8 == 0:
                progress(done / total_work)
            mask = 0
            for j in cols:
                mask |= 1 << j
            got = [prev_open.get(mask & ~(1 << j)) for j in cols]
            subs = [sub for sub in got if sub is not None]
            if len(subs) < size:
                continue  # some S - {j} has no open candidate: nor has S
            if size == 1:
                at = np.flatnonzero(nonmiss[cand, cols[0]])
            else:
                pre = subs[0].copy()
                for sub in subs[1:]:
                    np.bitwise_and(pre, sub, out=pre)
                at = np.flatnonzero(np.unpackbits(pre, count=nc))
            if len(at) == 0:
                continue
            visited += 1
            cnt = _counts_at(_subset_code(codes, cards, cols), cand[at], n)
            uniq = cnt == 1
            if uniq.any():
                rec = cand[at[uniq]]
                score[rec] += weight[size]
                found_rec.append(rec)
                found_mask.append(np.full(len(rec), mask, dtype=np.int64))
                by_size[size] = by_size.get(size, 0) + len(rec)
            if not uniq.all():
                bits = np.zeros(nc, dtype=bool)
                bits[at[~uniq]] = True
                cur_open[mask] = np.packbits(bits)
        prev_open = cur_open
    if progress is not None:
        progress(1.0)

    recs = np.concatenate(found_rec) if found_rec else np.zeros(0, dtype=np.int64)
    masks = np.concatenate(found_mask) if found_mask else np.zeros(0, dtype=np.int64)
    order = np.argsort(recs, kind="stable")
    U, P = sdcmicro_unique_and_pair_counts(sdcmicro_codes(df, keys))
    dis = dis_scores(score, U=U, P=P, dis_fraction=f, M=M)
    return Suda2Result(
        keys=keys,
        dis_fraction=f,
        max_size=K,
        score=score,
        dis=dis,
        msu_records=recs[order],
        msu_masks=masks[order],
        msu_counts_by_size=by_size,
        unique_count=U,
        pair_count=P,
        subsets_visited=visited,
    )
