"""What a run's randomness is keyed on (issue 21 §3, N3).

A pinned seed used twice must never give the same noise to two different releases: with
laplace at ε = 1 and ε = 2 from one seed, 2·y₂ − y₁ was the original value; two neighbouring
files released with one seed differed by exactly the true change.  So every run's generator
is derived from the seed's stream AND from what the run releases:

* the method id and its validated parameters (ε, k, noise, budget, calibration, ...; not the
  record ``order`` and ``layout``, which only arrange the same values: see
  :data:`_ARRANGEMENT`), the roles,
  the declared domains, types, output precisions and hierarchies (:func:`run_context`);
* a digest of the input data (:func:`data_digest`): the protected columns of every record,
  in input order, and the number of records.

:func:`keyed_rng` draws 128 bits from the seed's generator and mixes them with the SHA-256
of that context (``SeedSequence``).  The same seed, the same data and the same parameters
give the same generator bit for bit; change any of them and every draw is independent.  With
no pinned seed (OS entropy) nothing changes conceptually.  The context is not secret (it is
a function of the data and the parameters); the seed is.

The data digest is computed identically in memory and per partition on Dask
(:func:`digest_partial` + :func:`combine_partials`): every record's row hash (pandas'
``hash_array`` of each protected column, canonicalised: numbers as float64 with one NaN and
no −0, anything else as text, folded over the columns) enters two 64-bit polynomial sums
Σ h_i·A^(i+1) mod 2⁶⁴ (and the same of a remix of h_i with another odd multiplier B).  A
partition starting at record s contributes A^s times its local sum, so the combination does
not depend on how the records are split into partitions, and is order-dependent: a sorted
copy of a file is another input.  Any change of one record changes the sum (A is odd, so A^i
is invertible modulo 2⁶⁴).  Cost on 1,000,000 × 10 numbers: about 0.2 s (benchmarks).
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.parallel import MIN_CELLS

#: The odd multipliers of the two polynomial lanes.
_A = 0x9E3779B97F4A7C15
_B = 0xC2B2AE3D27D4EB4F
_MASK = (1 << 64) - 1
_FOLD = np.uint64(0x100000001B3)
_TAG_DATA = b"dpstudio.data-digest.v1\0"
_TAG_RUN = b"dpstudio.run-context.v1\0"
#: Parameters that only arrange the released values, never change them: left out of the key,
#: so the same seed, data and other parameters give the same values in another order.  Two
#: releases that differ only in order then hold the SAME noisy values (nothing composes: the
#: second adds no information about the data beyond its own arrangement), where independent
#: noise would let the two be averaged.
_ARRANGEMENT = ("order", "layout")


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _mix64_inplace(x: np.ndarray) -> np.ndarray:
    """:func:`_mix64` of ``x`` (uint64), written into ``x`` (no temporaries but the shifts)."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _column_hash(s: pd.Series) -> np.ndarray:
    """One uint64 per value of ``s``, the same for equal values whatever the dtype: numbers
    as float64 (1 and 1.0 agree, one NaN, no −0), booleans and anything else as text.
    """
    from pandas.util import hash_array

    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0
        nan = np.isnan(v)
        if nan.any():
            v = np.where(nan, np.nan, v)
        return np.asarray(hash_array(v), dtype=np.uint64)
    if _all_texts(s):
        # the same hashes, each distinct text hashed once (issue 27: 3 s per column of
        # 3,000,000 texts one by one, 0.1 s this way): the values are texts, so two values are
        # equal for factorize exactly when their str() is; missing values are converted as
        # the general path converts them (None -> 'None', NaN -> 'nan', NA -> '<NA>')
        from dpstudio.engine.codes import factorize

        codes, uniques = factorize(s)
        texts = np.asarray([str(u) for u in uniques.astype(object)], dtype=object)
        out = np.empty(len(s), dtype=np.uint64)
        if texts.size:
            out[:] = np.asarray(hash_array(texts), dtype=np.uint64)[np.maximum(codes, 0)]
        miss = np.flatnonzero(codes < 0)
        if miss.size:
            rest = np.asarray(s.iloc[miss].astype(object).map(str).to_numpy(), dtype=object)
            out[miss] = np.asarray(hash_array(rest), dtype=np.uint64)
        return out
    text = np.asarray(s.astype(object).map(str).to_numpy(), dtype=object)
    return np.asarray(hash_array(text), dtype=np.uint64)


def _all_texts(s: pd.Series) -> bool:
    """True when every non-missing value of ``s`` is a ``str`` (a text dtype, a categorical of
    texts, or an object column of texts only): then equality is equality of the texts.
    """
    dt = s.dtype
    if isinstance(dt, pd.CategoricalDtype):
        cats = dt.categories
        return isinstance(cats.dtype, pd.StringDtype) or (
            cats.dtype == object and pd.api.types.infer_dtype(cats, skipna=False) == "string"
        )
    if isinstance(dt, pd.StringDtype):
        return True
    return pd.api.types.is_object_dtype(dt) and pd.api.types.infer_dtype(s, skipna=True) in (
        "string",
        "empty",
    )


def row_hashes(frame: pd.DataFrame, cols: list[str], *, parallel: bool = False) -> np.ndarray:
    """One uint64 per record of ``frame`` from its values in ``cols`` (in that order).
    ``parallel``: hash the columns of a large frame in several threads
    (:func:`dpstudio.engine.parallel.map_ordered`; the same hashes, folded in order).
    """
    h = np.zeros(len(frame), dtype=np.uint64)
    if parallel:
        from dpstudio.engine.parallel import map_ordered

        series = [frame[c] for c in cols]  # taken in this thread
        hashes = map_ordered(_column_hash, series, cells=len(frame) * len(cols))
        with np.errstate(over="ignore"):
            for hc in hashes:
                h *= _FOLD
                h ^= hc
        return _mix64(h)
    with np.errstate(over="ignore"):
        for c in cols:
            h = (h * _FOLD) ^ _column_hash(frame[c])
    return _mix64(h)


def row_hashes_matrix(
    X: np.ndarray, *, by_column: np.ndarray | None = None, finite: bool = False
) -> np.ndarray:
    """:func:`row_hashes` of a frame whose columns are the float64 columns of ``X`` (what
    :func:`_column_hash` hashes for a numeric column), in a few passes over one copy (issue
    27 §2).

    The copy is transposed (each column contiguous) and canonicalised as :func:`_column_hash`
    does (no −0, one NaN); each value's hash is then pandas' ``hash_array`` of a float64
    (its 64 bits through the splitmix64 finaliser, :func:`_mix64`) computed in place, and the
    columns are folded in order: the same words as the column path
    (``tests/engine/test_small_table_path.py``, ``tests/engine/test_small_mdav_overhead.py``).
    ``by_column``: ``X.T`` as a C-contiguous (m, n) matrix when the caller has it
    (:func:`dpstudio.engine.validation.numeric_blocks`; read, not changed).
    ``finite``: the caller has checked that ``X`` holds no NaN (nor infinity): the scan for
    NaNs to canonicalise is skipped (the same words; a wrong ``True`` would leave a NaN's
    payload and sign in its hash).
    """
    T = X.T if by_column is None else by_column
    V = np.add(T, 0.0, order="C")  # one (m, n) copy, each column contiguous; no −0
    if not finite:
        nan = np.isnan(V)
        if nan.any():
            V[nan] = np.nan  # one NaN
    m, n = V.shape
    if m == 0:
        return _mix64(np.zeros(n, dtype=np.uint64))
    H = _mix64_inplace(V.view(np.uint64))  # hash_array of each float64, in place
    h = H[0].copy()  # (0 · FOLD) ^ H[0]
    with np.errstate(over="ignore"):
        for j in range(1, m):
            h *= _FOLD
            h ^= H[j]
    return _mix64_inplace(h)


def _powers(mult: int, n: int) -> np.ndarray:
    """mult^1 … mult^n modulo 2⁶⁴ (read-only; a small table's are computed once per
    (mult, n) and kept: every call on the same table reuses them, issue 27 §2).
    """
    if n <= _POWERS_KEPT_UP_TO:
        return _kept_powers(int(mult), int(n))
    return _fresh_powers(mult, n)


#: the longest run of powers kept (2 × 8 bytes × n each; a few tables' worth at most)
_POWERS_KEPT_UP_TO = 1 << 16


@functools.lru_cache(maxsize=16)
def _kept_powers(mult: int, n: int) -> np.ndarray:
    p = _fresh_powers(mult, n)
    p.setflags(write=False)
    return p


def _fresh_powers(mult: int, n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.cumprod(np.full(n, mult, dtype=np.uint64))


def digest_partial(
    frame: pd.DataFrame,
    cols: list[str],
    *,
    matrix: np.ndarray | None = None,
    by_column: np.ndarray | None = None,
    parallel: bool = False,
    finite: bool = False,
) -> tuple[int, int, int]:
    """(records, lane A, lane B) of a block of consecutive records (a whole frame or one
    partition); combine the blocks in order with :func:`combine_partials`.  ``matrix``: the
    numeric columns ``cols`` of ``frame`` as one float64 matrix
    (:func:`dpstudio.engine.validation.numeric_block`), hashed at once; the same digest.
    ``by_column``: the same values by column (:func:`row_hashes_matrix`).
    ``parallel``: columns hashed in threads (a whole large frame; the Dask backend's
    partitions already run side by side).  ``finite``: ``matrix`` is known to hold no NaN
    (:func:`row_hashes_matrix`).
    """
    n = len(frame)
    if n == 0:
        return 0, 0, 0
    # (a small block runs in this thread without asking how many threads the machine allows:
    # that look at its CPUs and load costs more than the hashing, issue 27 §2)
    if matrix is not None:
        h = row_hashes_matrix(matrix, by_column=by_column, finite=finite)
    else:
        h = row_hashes(frame, cols, parallel=parallel and n * len(cols) >= MIN_CELLS)
    if parallel and n >= MIN_CELLS:  # the two lanes side by side
        from dpstudio.engine.parallel import map_ordered

        a, b = map_ordered(lambda f: f(h, n), (_lane_a, _lane_b), cells=n)
        return n, a, b
    return n, _lane_a(h, n), _lane_b(h, n)


def _lane_a(h: np.ndarray, n: int) -> int:
    with np.errstate(over="ignore"):
        return int((h * _powers(_A, n)).sum(dtype=np.uint64))


def _lane_b(h: np.ndarray, n: int) -> int:
    with np.errstate(over="ignore"):
        return int((_mix64(h ^ np.uint64(_B)) * _powers(_B, n)).sum(dtype=np.uint64))


def combine_partials(parts) -> str:
    """The digest of the records of ``parts`` (``(n, a, b)`` of consecutive blocks, in order)."""
    total, sa, sb = 0, 0, 0
    for n, a, b in parts:
        n, a, b = int(n), int(a), int(b)
        sa = (sa + a * pow(_A, total, 1 << 64)) & _MASK
        sb = (sb + b * pow(_B, total, 1 << 64)) & _MASK
        total += n
    h = hashlib.sha256(_TAG_DATA)
    h.update(total.to_bytes(8, "little") + sa.to_bytes(8, "little") + sb.to_bytes(8, "little"))
    return h.hexdigest()


def data_digest(
    frame: pd.DataFrame,
    cols: list[str],
    *,
    matrix: np.ndarray | None = None,
    by_column: np.ndarray | None = None,
    finite: bool = False,
) -> str:
    """The digest of the records of ``frame`` on ``cols`` (see the module docstring).
    ``matrix``: :func:`dpstudio.engine.validation.numeric_block` of ``frame[cols]`` when known
    (``by_column``: its values by column, :func:`dpstudio.engine.validation.numeric_blocks`;
    ``finite``: checked to hold no NaN and no infinity).

    >>> import pandas as pd
    >>> a = pd.DataFrame({"x": [1, 2, 3]})
    >>> data_digest(a, ["x"]) == data_digest(a.astype(float), ["x"])
    True
    >>> data_digest(a, ["x"]) == data_digest(a.iloc[::-1], ["x"])
    False
    """
    return combine_partials(
        [digest_partial(frame, list(cols), matrix=matrix, by_column=by_column, parallel=True, finite=finite)]
    )


def _digest_text(kind: str, parts) -> str:
    h = hashlib.sha256(kind.encode() + b"\0")
    for x in parts:
        h.update(str(x).encode("utf-8", "surrogatepass") + b"\x1f")
    return kind + ":" + h.hexdigest()


def hierarchy_id(obj: Any, column: str = "") -> str:
    """A stable description of a declared hierarchy: its CONTENT (the same for a file and the
    hierarchy read from it, so the app and the command line key runs alike), never an object
    address.
    """
    from dpstudio.engine.hierarchies.hierarchy import load_hierarchy

    try:
        h = load_hierarchy(obj, column)
        return _digest_text("hierarchy", [*h.table.shape, *h.table.ravel()])
    except Exception:  # not an ARX hierarchy: a taxonomy (child,parent CSV, dict, Taxonomy)
        pass
    try:
        from dpstudio.engine.hierarchies.taxonomy import load_taxonomy

        t = load_taxonomy(obj, column)
        return _digest_text("taxonomy", [t.n_leaves, *t.concepts, *t.parent.tolist()])
    except Exception:
        pass
    try:
        return "pickle:" + hashlib.sha256(pickle.dumps(obj, protocol=4)).hexdigest()
    except Exception:  # an object that cannot be pickled: its type only
        return "type:" + type(obj).__name__


def hierarchy_ids(hierarchies: dict | None) -> dict[str, str]:
    """:func:`hierarchy_id` of every declared hierarchy (computed once per prepared run)."""
    return {str(c): hierarchy_id(h, str(c)) for c, h in (hierarchies or {}).items() if h is not None}


def run_context(
    *,
    method: str,
    params: dict,
    roles: dict,
    domains: dict,
    precision: dict | None,
    types: dict | None,
    hierarchies: dict | None,
    keep_household: bool,
    digest: str,
    hierarchy_digests: dict[str, str] | None = None,
) -> bytes:
    """The canonical bytes of everything a run releases from: the declared parameters and
    the data digest (the key material of :func:`keyed_rng`, never published).
    ``hierarchy_digests``: :func:`hierarchy_ids` of ``hierarchies`` when already computed.
    """
    from dpstudio.engine.types import jsonable

    doc = {
        "method": str(method),
        "params": jsonable(
            {k: v for k, v in params.items() if not str(k).startswith("_") and k not in _ARRANGEMENT}
        ),
        "roles": {str(c): str(getattr(r, "value", r)) for c, r in roles.items()},
        "domains": {str(c): [float(a), float(b)] for c, (a, b) in domains.items()},
        "precision": {str(c): float(g) for c, g in (precision or {}).items()},
        "types": {str(c): str(t) for c, t in (types or {}).items()},
        "hierarchies": hierarchy_ids(hierarchies) if hierarchy_digests is None else dict(hierarchy_digests),
        "keep_household": bool(keep_household),
        "data": str(digest),
    }
    return _TAG_RUN + json.dumps(doc, sort_keys=True, ensure_ascii=True, allow_nan=True).encode()


def keyed_rng(rng: np.random.Generator, context: bytes) -> np.random.Generator:
    """The run's generator: 128 bits of ``rng`` (the seed's stream, or OS entropy) mixed with
    the SHA-256 of ``context`` (:func:`run_context`).  Same seed and context: the same
    generator; anything else: an independent one.
    """
    w = rng.integers(0, 2**64, size=2, dtype=np.uint64)
    ctx = int.from_bytes(hashlib.sha256(bytes(context)).digest(), "little")
    # one integer of fixed layout (bits 0-127 the draw, 128-383 the context): unambiguous
    entropy = int(w[0]) | (int(w[1]) << 64) | (ctx << 128)
    return np.random.default_rng(np.random.SeedSequence(entropy=entropy))


__all__ = [
    "row_hashes",
    "digest_partial",
    "combine_partials",
    "data_digest",
    "run_context",
    "keyed_rng",
]
