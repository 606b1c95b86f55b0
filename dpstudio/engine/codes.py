"""Integer codes of the text columns, computed once per column (issue 27: work on codes, not
strings).

A run on 3,000,000 records hashed each text column three times (the data digest, the
hierarchy encoding of a generalising method, the shuffle of the release) and gathered its
strings record by record.  :func:`factorize` is ``pd.factorize(s, use_na_sentinel=True)``
remembered for the column's Arrow array: pandas' text columns hold an immutable
``pyarrow.ChunkedArray`` (a change to the column replaces it), so the codes stay valid as long
as that array lives, and they are forgotten with it (weak reference).  The CSV reader seeds the
memory with the dictionary it builds while typing the columns (:func:`remember`), so a column
read from a file is never hashed again.  :func:`take` gathers rows of a column through its
codes when they are known: one integer gather and one gather from the small dictionary instead
of a random gather of strings.

Results never depend on the memory: a column that is not Arrow-backed (numbers, object
columns, pandas 2's text columns) is factorized as pandas does, every time.

>>> import pandas as pd
>>> s = pd.Series(["b", "a", "b", None], dtype="str")
>>> codes, uniques = factorize(s)
>>> codes.tolist(), list(uniques)
([0, 1, 0, -1], ['b', 'a'])
>>> take(s, [3, 2, 1]).tolist()
[nan, 'b', 'a']
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["factorize", "from_codes", "known", "remember", "take", "take_rows"]

# id(Arrow array) -> (weak reference to it, codes, uniques, uniques as an Arrow array or None),
# or (weak reference, None, None, a function that numbers the codes and stores them)
_MEMORY: dict[int, tuple[Any, Any, Any, Any]] = {}


def _arrow_of(s: pd.Series):
    """The column's ``pyarrow.ChunkedArray`` when pandas holds it as one, else None."""
    arr = getattr(s.array, "_pa_array", None)  # pandas' Arrow-backed arrays (ArrowStringArray, ...)
    if arr is None:
        return None
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    return arr if isinstance(arr, pa.ChunkedArray) else None


def _small(codes: np.ndarray, n_uniques: int) -> np.ndarray:
    """The codes in the smallest signed integer type that holds them and −1."""
    return np.asarray(codes).astype(np.min_scalar_type(-max(int(n_uniques), 1)), copy=False)


def _store(key, codes: np.ndarray, uniques: pd.Index, dictionary=None) -> None:
    k = id(key)
    codes = _small(codes, len(uniques))
    codes.setflags(write=False)

    def forget(_ref: Any, k: int = k, memory: dict = _MEMORY) -> None:
        memory.pop(k, None)

    _MEMORY[k] = (weakref.ref(key, forget), codes, uniques, dictionary)


def _recall(s: pd.Series):
    key = _arrow_of(s)
    if key is None:
        return None, None
    hit = _MEMORY.get(id(key))
    if hit is not None and hit[0]() is key:
        if hit[1] is None:  # remembered lazily (:func:`_store_recoded`): numbered now
            hit[3]()
            hit = _MEMORY[id(key)]
        return key, hit
    return key, None


def known(s: pd.Series) -> bool:
    """True when the codes of ``s`` are remembered (:func:`factorize` computes nothing)."""
    return _recall(s)[1] is not None


def factorize(s: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(s, use_na_sentinel=True)``: (codes, uniques in order of first appearance),
    −1 for a missing value; remembered for an Arrow-backed column (codes in the smallest signed
    integer type, read-only).
    """
    key, hit = _recall(s)
    if hit is not None:
        return hit[1], hit[2]
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    if key is None:
        return codes, uniques
    _store(key, codes, uniques)
    return _MEMORY[id(key)][1], uniques


def remember(s: pd.Series, indices, dictionary) -> None:
    """Record the codes of ``s`` from an Arrow dictionary encoding of the very array ``s``
    holds (``indices`` without nulls, ``dictionary`` in order of first appearance, as
    ``pyarrow.compute.dictionary_encode`` gives them): what :func:`factorize` would compute.
    """
    key = _arrow_of(s)
    if key is None:
        return
    uniques = pd.Index(pd.Series(dictionary.to_pandas(types_mapper=lambda t: s.dtype)), dtype=s.dtype)
    _store(key, np.asarray(indices.to_numpy(zero_copy_only=False)), uniques, dictionary)


def _store_recoded(key, codes: np.ndarray, values: np.ndarray, dtype) -> None:
    """Remember the codes of the column ``key`` whose record r holds ``values[codes[r]]`` (−1:
    missing), renumbered as :func:`factorize` numbers them (values in order of first
    appearance; unused values dropped) when they are first asked for (issue 27: a release
    written without measures never asks).
    """
    k = id(key)

    def number() -> None:
        _number_recoded(key, codes, values, dtype)

    def forget(_ref: Any, k: int = k, memory: dict = _MEMORY) -> None:
        memory.pop(k, None)

    _MEMORY[k] = (weakref.ref(key, forget), None, None, number)


def _number_recoded(key, codes: np.ndarray, values: np.ndarray, dtype) -> None:
    """:func:`_store_recoded`'s numbering, done."""
    import pyarrow as pa

    n = len(codes)
    first = np.full(len(values) + 1, n, dtype=np.int64)  # (the last slot: code −1)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    first = first[:-1]
    used = np.flatnonzero(first < n)
    order = used[np.argsort(first[used], kind="stable")]
    remap = np.full(len(values) + 1, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    kept = [values[i] for i in order]
    _store(key, remap[codes], pd.Index(kept, dtype=dtype), pa.array(kept, type=pa.large_string()))


def from_codes(codes: np.ndarray, categories) -> pd.Series:
    """The text column whose values are ``categories[codes]`` (codes ≥ 0, categories distinct
    texts), in the dtype pandas gives text read from a file, built by one Arrow gather, its
    codes remembered.  Where pandas keeps texts as objects (pandas 2), an object column.
    """
    cats = [str(x) for x in categories]
    codes = np.asarray(codes)
    text_dtype = pd.Series([], dtype=str).dtype
    if isinstance(text_dtype, pd.StringDtype):
        try:
            import pyarrow as pa
            import pyarrow.compute as pc

            dictionary = pa.array(cats, type=pa.large_string())
            col = pa.chunked_array([pc.take(dictionary, pa.array(codes))])
            out = pd.Series(pd.array(col.to_pandas(), dtype=text_dtype))
            if _arrow_of(out) is not None:
                _store_recoded(_arrow_of(out), codes, np.asarray(cats, dtype=object), text_dtype)
            return out
        except (ImportError, TypeError, ValueError):  # pragma: no cover - other pandas
            pass
    obj = np.empty(len(cats), dtype=object)
    obj[:] = cats
    return pd.Series(obj[codes], dtype=object)


def take(s: pd.Series, rows) -> pd.Series:
    """``s.iloc[rows]`` with a fresh ``RangeIndex``: the same values and dtype; a text column
    whose codes are remembered is gathered through them.
    """
    rows = np.asarray(rows, dtype=np.intp)
    key, hit = _recall(s)
    if hit is not None:
        try:
            import pyarrow as pa
            import pyarrow.compute as pc

            codes, dictionary = hit[1], hit[3]
            if dictionary is None:
                dictionary = pa.array(hit[2].to_numpy(dtype=object), type=key.type)
            c = codes[rows]
            miss = c < 0
            # (Arrow's take is ~2x slower with int8 indices than with int32 ones)
            c32 = c.astype(np.int32) if c.dtype.itemsize < 4 else c
            idx = pa.array(c32, mask=miss) if miss.any() else pa.array(c32)
            del c32
            out = pc.take(dictionary.cast(key.type), idx)
            res = pd.Series(type(s.array)(pa.chunked_array([out]), dtype=s.dtype), name=s.name)
            if _arrow_of(res) is not None:  # the gathered column's own codes
                _store_recoded(_arrow_of(res), c, np.asarray(hit[2].to_numpy(dtype=object)), s.dtype)
            return res
        except (TypeError, ValueError, AttributeError, ImportError):  # pragma: no cover - other pandas
            pass
    return s.iloc[rows].reset_index(drop=True)


#: the largest float table :func:`take_rows` gathers as one matrix (as validation.BLOCK_CELLS)
_GATHER_CELLS = 1 << 22


def take_rows(frame: pd.DataFrame, rows) -> pd.DataFrame:
    """``frame.iloc[rows].reset_index(drop=True)``, column by column through :func:`take`."""
    rows = np.asarray(rows, dtype=np.intp)
    # only an Arrow-backed column can have remembered codes: a frame of numpy columns is
    # gathered at once, without looking at each column (issue 27 §2: small tables)
    dts = frame.dtypes.tolist()
    arrow = [j for j, dt in enumerate(dts) if not isinstance(dt, np.dtype)]
    if not arrow and dts and len(frame) * len(dts) <= _GATHER_CELLS and all(dt == np.float64 for dt in dts):
        # numbers of one dtype (a small table's release): one gather of the matrix, the same
        # frame as ``iloc`` + ``reset_index`` gives, in a quarter of its time (issue 27 §2;
        # a large table is gathered block by block: no interleaved copy of all its columns)
        return pd.DataFrame(frame.to_numpy()[rows], columns=frame.columns, copy=False)
    if not any(_recall(frame.iloc[:, j])[1] is not None for j in arrow):
        from dpstudio.engine.parallel import gather_rows

        return gather_rows(frame, rows)  # (a large frame of numpy columns: in threads)
    cols = {j: take(frame.iloc[:, j], rows) for j in range(frame.shape[1])}
    out = pd.DataFrame({j: c.reset_index(drop=True) for j, c in cols.items()}, copy=False)
    out.columns = frame.columns
    return out
