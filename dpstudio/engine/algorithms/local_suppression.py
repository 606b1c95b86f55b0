"""Local suppression to k-anonymity on categorical keys (sdcMicro's ``localSuppression``, done better).

``local_suppression(df, keys, k, importance=...)`` sets key values to missing until every record
shares its key combination with at least ``k - 1`` others, where a missing value matches any
value (sdcMicro's ``freqCalc`` rule, see :mod:`dpstudio.engine.measures.survey_risk`).  The keys are
suppressed in an importance order as sdcMicro offers it: the least important key first; by
default, as in sdcMicro, keys with more categories are less important.

How sdcMicro 5.8.1 does it (``localSuppression`` -> ``suppSubset`` + C++ ``cpp_calcSuppInds``):
in passes, every record with ``f_k < k`` (ordered by decreasing individual risk) gets one value
suppressed -- in the least important key where it differs from one of its nearest records
(fewest differing keys) -- whether or not an earlier suppression of the same pass already made
it safe; passes repeat until all ``f_k >= k``.  So it suppresses at least one value in *every*
record that was unsafe.

What we do (same importance semantics, fewer suppressions, vectorised):

1. compute ``f_k`` (missing matches any);
2. for every unsafe record and every key ``j``, the ``f_k`` it would have with ``j`` suppressed
   (exact, against the current file);
3. choose for each unsafe record the least important key whose suppression alone makes it
   safe; if none does, the key that raises its ``f_k`` most (ties: less important first);
4. go through the unsafe records from the lowest ``f_k`` up and suppress a record only if the
   suppressions already chosen in this pass have not made it safe: suppressing key ``j`` of
   record ``s`` adds ``s`` to the ``f_k`` of every record that agrees with ``s`` on all other
   keys (same missing pattern) and differs on ``j``.  This gain is a lower bound of the true
   gain, so skipped records are truly safe;
5. repeat until every record is safe (the final file is checked with the exact ``f_k``).

With ``missing_matches_any=False`` (missing = one more category, as ARX's suppression) step 4
is skipped (a suppressed record leaves its combination, so gains are not monotone) and, when
the only unsafe records have every key suppressed, further records are suppressed entirely
until that all-missing combination has k records; this variant is a plain heuristic.

On sdcMicro's ``free1`` with keys SEX, AGE, MARSTAT, KINDPERS, NUMYOUNG, NUMOLD and k = 3,
sdcMicro suppresses 862 values; this suppresses fewer (see ``tests/engine/test_local_suppression.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.frequencies import WildcardIndex, _group_ids, wildcard_counts
from dpstudio.engine.errors import InputError, ParameterError

__all__ = ["local_suppression", "suppression_order"]

_CHUNK = 1 << 16  # unsafe records turned into Python lists at a time in the greedy step


def suppression_order(df: pd.DataFrame, keys: list[str], importance=None) -> list[str]:
    """Keys in the order they are suppressed (least important first).

    ``importance`` is either a list of key names, most important first, or -- as in sdcMicro --
    a list of integers 1..m parallel to ``keys`` (1 = most important).  ``None``: sdcMicro's
    default, keys with more distinct values are less important (ties: the later key first).
    """
    m = len(keys)
    if importance is None:
        nuniq = [int(df[k].nunique(dropna=True)) for k in keys]
        # sdcMicro: importance = rank of the number of categories (ascending, stable);
        # suppression order = decreasing importance number
        ranks = np.empty(m, dtype=int)
        ranks[np.argsort(nuniq, kind="stable")] = np.arange(1, m + 1)
        return [keys[i] for i in np.argsort(-ranks, kind="stable")]
    imp = list(importance)
    if len(imp) != m:
        raise ParameterError(f"importance must list all {m} key variables (got {len(imp)})")
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in imp):
        if sorted(imp) != list(range(1, m + 1)):
            raise ParameterError("importance as numbers must be 1..m, one per key (1 = most important)")
        return [keys[i] for i in np.argsort(-np.asarray(imp), kind="stable")]
    names = [str(v) for v in imp]
    if sorted(names) != sorted(keys):
        raise ParameterError(
            f"importance must name each key variable once, most important first (keys: {', '.join(keys)})"
        )
    return list(reversed(names))


def _encode(df: pd.DataFrame, keys: list[str], wildcard: bool):
    n, m = len(df), len(keys)
    codes = np.empty((n, m), dtype=np.int64)
    cards = np.empty(m, dtype=np.int64)
    supp_code = np.full(m, -1, dtype=np.int64)
    for j, key in enumerate(keys):
        c, uniq = pd.factorize(df[key], use_na_sentinel=True)
        card = max(len(uniq), 1)
        if not wildcard:  # missing = one more category, the one suppressed values join
            c = np.where(c < 0, card, c)
            supp_code[j] = card
            card += 1
        codes[:, j] = c
        cards[j] = card
    return codes, cards, supp_code


def local_suppression(
    df: pd.DataFrame,
    keys: Iterable[str],
    k: int,
    *,
    importance: Sequence | None = None,
    missing_matches_any: bool = True,
    max_passes: int | None = None,
    on_pass: Callable[[int], None] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Suppress key values (set them to missing) until the file is k-anonymous.

    Parameters
    ----------
    df : DataFrame
    keys : list of str
        Categorical key variables.
    k : int
        Every record must match at least ``k`` records (itself included).
    importance : list, optional
        Key names, most important (suppressed last) first; or sdcMicro's integer vector
        (1 = most important).  Default: sdcMicro's, more categories = less important.
    missing_matches_any : bool
        True (sdcMicro): a missing value matches every value of its key.  False: missing is one
        more category (suppressed values then only match each other).
    on_pass : callable, optional
        Called with the number of passes done after each pass (progress; it may raise to
        cancel).

    Returns
    -------
    (DataFrame, dict)
        The file with suppressed key values set to missing (integer columns become pandas'
        nullable ``Int64``), and a report: ``suppressed_per_key``, ``suppressed_total``,
        ``records_with_suppression``, ``order`` (least important first), ``passes``, ``k``.
    """
    keys, k = _checked(df, keys, k)
    n = len(df)
    if n < k:
        raise InputError(f"the file has {n} records, fewer than k = {k}: no k-anonymous release exists")
    order = suppression_order(df, keys, importance)
    pos = {key: i for i, key in enumerate(keys)}
    order_idx = [pos[key] for key in order]  # least important first
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order_idx] = np.arange(len(keys))  # 0 = suppressed first

    codes, cards, supp_code = _encode(df, keys, missing_matches_any)
    if max_passes is None:
        max_passes = n * len(keys) + 1  # every pass suppresses at least one value
    suppressed = np.zeros(codes.shape, dtype=bool)  # values set to missing here (not a copy of codes)
    m = len(keys)
    passes = 0
    while True:
        # the file of this pass, indexed once for f_k and the m "what if key j is suppressed"
        # queries (None: codes too wide for one integer, the general path)
        index = WildcardIndex.build(codes, cards)
        fk, _ = index.self_counts() if index is not None else wildcard_counts(codes, cards)
        unsafe = np.flatnonzero(fk < k)
        if len(unsafe) == 0:
            break
        passes += 1
        if passes > max_passes:
            raise InputError(f"local suppression did not reach {k}-anonymity in {max_passes} passes")
        U = codes[unsafe]
        is_supp = U == supp_code[None, :] if not missing_matches_any else U < 0
        # 2. f_k with key j suppressed, for every unsafe record and key
        fk_j = _counts_if_suppressed(U, is_supp, supp_code, index, codes, cards)
        # 3. chosen key: least important that suffices, else the largest gain
        score = np.where(fk_j >= k, 2.0 * n + (m - rank[None, :]), fk_j + (m - rank[None, :]) / (m + 1.0))
        score[fk_j < 0] = -np.inf
        chosen = np.argmax(score, axis=1)
        has_cand = ~np.isneginf(score[np.arange(len(unsafe)), chosen])
        if not has_cand.any():
            _suppress_whole_records(codes, suppressed, supp_code, fk, k)
            continue
        # 4. mutual help: cell of each unsafe record for each key (pattern + other keys), as
        # integer group ids (no per-record tuples: they held most of the memory at 10^6 records)
        Uz = np.maximum(U, 0)  # a missing value's digit; the pattern tells it apart
        del U
        cell, cellval = _cells(Uz, is_supp, cards)
        del Uz
        do = _mutual_help(cell, cellval, unsafe, fk, chosen, has_cand, k, missing_matches_any)
        del cell, cellval
        rows = unsafe[do]
        cols = chosen[do]
        suppressed[rows, cols] |= codes[rows, cols] != supp_code[cols]
        codes[rows, cols] = supp_code[cols]
        if on_pass is not None:
            on_pass(passes)

    per_key = {key: int(suppressed[:, pos[key]].sum()) for key in keys}
    out = _with_missing(df, keys, suppressed)
    report = {
        "method": "local-suppression",
        "k": k,
        "missing_matches_any": bool(missing_matches_any),
        "order": order,
        "suppressed_per_key": per_key,
        "suppressed_total": int(suppressed.sum()),
        "records_with_suppression": int(suppressed.any(axis=1).sum()),
        "missing_before_per_key": {key: int(df[key].isna().sum()) for key in keys},
        "passes": passes,
        "records": n,
    }
    return out, report


def _checked(df: pd.DataFrame, keys: Iterable[str] | str, k: int) -> tuple[list[str], int]:
    """The key names (one name, or a list of distinct columns of ``df``) and ``k`` (a whole
    number ≥ 1), or the one-line error.
    """
    keys = [keys] if isinstance(keys, str) else [str(c) for c in keys]
    if not keys:
        raise ParameterError("give at least one key variable for local suppression")
    for c in keys:
        if c not in df.columns:
            raise ParameterError(f"key column '{c}' is not in the file")
    if len(set(keys)) != len(keys):
        raise ParameterError("a key column is listed twice")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"k must be a whole number of at least 1 (got {k!r})")
    return keys, int(k)


def _counts_if_suppressed(
    U: np.ndarray, is_supp: np.ndarray, supp_code: np.ndarray, index, codes: np.ndarray, cards: np.ndarray
) -> np.ndarray:
    """``f_k`` of each unsafe record (rows ``U``) if its key ``j`` were suppressed, for every key
    (−1 where that key is suppressed already).
    """
    nu, m = U.shape
    fk_j = np.full((nu, m), -1.0)
    for j in range(m):
        cand = ~is_supp[:, j]
        if not cand.any():
            continue
        q = U[cand]
        q[:, j] = supp_code[j]
        fk_j[cand, j], _ = index.query(q) if index is not None else wildcard_counts(q, cards, d_codes=codes)
        del q
    return fk_j


def _suppress_whole_records(
    codes: np.ndarray, suppressed: np.ndarray, supp_code: np.ndarray, fk: np.ndarray, k: int
) -> None:
    """Only with missing as a category: every unsafe record has all keys suppressed and the
    all-suppressed combination has fewer than k records -> fully suppress the (k - size)
    records with the lowest f_k among the others (the group only grows, so this terminates).
    Changes ``codes`` and ``suppressed`` in place.
    """
    full = (codes == supp_code[None, :]).all(axis=1)
    others = np.flatnonzero(~full)
    need = k - int(full.sum())
    pick = others[np.lexsort((others, fk[others]))[:need]]
    suppressed[pick] |= codes[pick] != supp_code[None, :]
    codes[pick] = supp_code[None, :]


def _cells(Uz: np.ndarray, is_supp: np.ndarray, cards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each unsafe record and key j it may suppress: the id of its cell (its pattern of
    suppressed keys and its values of the other keys) and of its cell and value of key j
    (−1 where key j is suppressed already).
    """
    nu, m = Uz.shape
    pat = (is_supp.astype(np.int64) * (np.int64(1) << np.arange(m, dtype=np.int64))).sum(axis=1)
    pat_id, pat_u = pd.factorize(pat)
    cell = np.full((nu, m), -1, dtype=np.int64)
    cellval = np.full((nu, m), -1, dtype=np.int64)
    for j in range(m):
        cand = np.flatnonzero(~is_supp[:, j])
        if len(cand) == 0:
            continue
        rest = [i for i in range(m) if i != j]
        cid, G = _group_ids(
            [Uz[cand, i] for i in rest] + [pat_id[cand].astype(np.int64)],
            [int(cards[i]) for i in rest] + [max(len(pat_u), 1)],
            len(cand),
        )
        cell[cand, j] = cid
        cellval[cand, j] = cid * int(cards[j]) + Uz[cand, j]
    return cell, cellval


def _mutual_help(
    cell: np.ndarray,
    cellval: np.ndarray,
    unsafe: np.ndarray,
    fk: np.ndarray,
    chosen: np.ndarray,
    has_cand: np.ndarray,
    k: int,
    missing_matches_any: bool,
) -> np.ndarray:
    """Which unsafe records suppress their chosen key in this pass: lowest f_k first, a record
    is skipped when the suppressions already chosen in its cells make it safe (missing matches
    any value).
    """
    nu, m = cell.shape
    tot: list[dict[int, int]] = [dict() for _ in range(m)]
    per_val: list[dict[int, int]] = [dict() for _ in range(m)]
    prio = np.lexsort((unsafe, fk[unsafe]))  # lowest f_k first
    fk_u = fk[unsafe]
    do = np.zeros(nu, dtype=bool)
    for s0 in range(0, nu, _CHUNK):  # Python lists of one chunk at a time (memory)
        blk = prio[s0 : s0 + _CHUNK]
        cell_l, cv_l = cell[blk].tolist(), cellval[blk].tolist()
        fk_l, ch_l, has_cand_l = fk_u[blk].tolist(), chosen[blk].tolist(), has_cand[blk].tolist()
        for t_i, i in enumerate(blk.tolist()):
            eff = fk_l[t_i]
            ci, vi = cell_l[t_i], cv_l[t_i]
            for j in range(m):
                c = ci[j]
                if c >= 0:
                    t = tot[j].get(c)
                    if t:
                        eff += t - per_val[j].get(vi[j], 0)
            if not has_cand_l[t_i]:
                continue
            if eff >= k and missing_matches_any:
                continue
            do[i] = True
            j = ch_l[t_i]
            tot[j][ci[j]] = tot[j].get(ci[j], 0) + 1
            per_val[j][vi[j]] = per_val[j].get(vi[j], 0) + 1
    return do


def _with_missing(df: pd.DataFrame, keys: list[str], suppressed: np.ndarray) -> pd.DataFrame:
    """A copy of ``df`` with the ``suppressed`` key values set to missing (integer columns become
    pandas' nullable ``Int64``, booleans ``boolean``; categoricals keep their categories).
    """
    out = df.copy()
    for j, key in enumerate(keys):
        mask = suppressed[:, j]
        if not mask.any():
            continue
        col = out[key]
        if pd.api.types.is_integer_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
            col = col.astype("Int64" if pd.api.types.is_integer_dtype(col.dtype) else "boolean")
        elif isinstance(col.dtype, pd.CategoricalDtype):
            pass  # setting NaN keeps the categories
        out[key] = col.mask(mask)
    return out
