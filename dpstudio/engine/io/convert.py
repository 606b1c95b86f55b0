"""Typing a table read as texts: every column becomes booleans, integers, floats or stays
text, value by value (vectorised with Arrow for long columns, through the distinct texts
for columns of few values), and the texts that writing the typed values would not give back
(00001, 1.50, FALSE, NA) are kept aside to be written back as read.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError

#: Texts read as a missing value (pandas' defaults; "" included).  The text itself is kept
#: aside and written back unchanged when the column is not changed by the method.
NA_TEXTS = frozenset(
    [
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    ]
)
_BOOL_TEXTS = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False, "false": False}
_INT_TEXT = re.compile(r"^[-+]?\d+$", re.ASCII)
_LEADING_ZERO = re.compile(r"^[-+]?0\d", re.ASCII)
# decimal-comma files: 1234,5  1.234,5  1.234.567  -,5 (a '.' only as a thousands separator)
_COMMA_NUM = re.compile(r"^\s*[-+]?(\d+|\d{1,3}(\.\d{3})+)?(,\d*)?([eE][-+]?\d+)?\s*$", re.ASCII)
_MULTI_GROUP = re.compile(r"\d\.\d{3}\.\d{3}")


# columns up to this many values are converted in plain Python (wide files); longer ones are
# vectorised (as fast for text/float columns from ~500 values, 5x faster for integers:
# Census 1,080 x 13 typed in 2 ms instead of 13 ms, start-up, issue 13)
_SMALL = 500
_NUM_TEXT = re.compile(r"^[ \t]*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[ \t]*$", re.ASCII)


def _written_text(values: np.ndarray, dec: str) -> list:
    """How :func:`write_table` writes typed values (missing values excluded by the caller)."""
    if values.dtype == bool:
        return ["True" if v else "False" for v in values]
    if values.dtype.kind in "iu":
        return [str(int(v)) for v in values]
    out = [repr(float(v)) for v in values]
    return [t.replace(".", dec) for t in out] if dec != "." else out


def _to_float(texts: np.ndarray, large: bool | None = None) -> np.ndarray | None:
    """Floats of numeric texts ('.' decimal), or None if one is not a number.  ``large``:
    whether the texts come from a long column (default: more than ``_SMALL`` texts), which
    decides the parser, as it always has (pandas for long columns, ``float()`` for short).
    """

    def one_by_one() -> np.ndarray | None:
        if not all(_NUM_TEXT.match(t) for t in texts):
            return None
        try:
            return np.array([float(t) for t in texts], dtype=np.float64)
        except ValueError:  # pragma: no cover - the pattern admits only what float() reads
            return None

    if not (texts.size > _SMALL if large is None else large):
        return one_by_one()
    # errors="raise" stops at the first text that is not a number (a text column is refused
    # after one value instead of being parsed to the end); "" still parses to NaN: checked below
    try:
        num = pd.to_numeric(pd.Series(texts, dtype=object), errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        # pandas gives up on integers of more than 4,300 digits, which float() reads (as ±inf,
        # like 1e999): the per-value path decides, as for a short column
        return one_by_one()
    if np.isnan(num).any():
        return None
    return num


def _convert_column(raw: np.ndarray, dec: str, explicit: bool = False) -> tuple[np.ndarray, bool]:
    """Typed values of one column of texts and whether the texts must be kept aside to be
    written back as read (True when writing the typed values would give other texts).
    ``explicit``: the decimal mark was given by the user (then ``1.234`` in a decimal-comma
    file is a thousands group, 1234; guessed, such a column stays text).
    """
    _, vals, keep = _typed_texts(raw, dec, explicit)
    return vals, keep


def _typed_texts(
    raw: np.ndarray, dec: str, explicit: bool = False, large: bool | None = None
) -> tuple[str, np.ndarray, bool]:
    """:func:`_convert_column` with the kind of column it found ("text", "bool" or
    "number").  Every test is a test of each value (any / all) and every conversion is
    value by value, so the distinct texts of a column give the same answer as the column
    (:func:`_convert_distinct`); ``large`` says which float parser the column's length
    calls for (:func:`_to_float`).
    """
    n = raw.size
    na = np.fromiter((t in NA_TEXTS for t in raw), dtype=bool, count=n)
    any_na = bool(na.any())
    nonmiss = raw[~na] if any_na else raw
    na_text = any(t != "" for t in raw[na]) if any_na else False
    if nonmiss.size == 0:
        return "number", np.full(n, np.nan), na_text
    if set(nonmiss[:200].tolist()) <= _BOOL_TEXTS.keys() and set(nonmiss.tolist()) <= _BOOL_TEXTS.keys():
        flags = np.array([_BOOL_TEXTS.get(t, np.nan) for t in raw], dtype=object)
        return "bool", (flags.astype(bool) if not any_na else flags), True

    def text() -> tuple[str, np.ndarray, bool]:
        vals = raw.copy()
        if any_na:
            vals[na] = np.nan
        return "text", vals, na_text

    if any(
        _LEADING_ZERO.match(t.strip()) and not t.strip().lstrip("+-").startswith(("0.", "0,"))
        for t in nonmiss
    ):
        return text()  # codes with leading zeros (00001) are text, not numbers
    texts = nonmiss
    if dec == ",":
        if not all(_COMMA_NUM.match(t) for t in nonmiss):
            return text()
        if (
            not explicit
            and any("." in t for t in nonmiss)
            and not (any("," in t for t in nonmiss) or any(_MULTI_GROUP.search(t) for t in nonmiss))
        ):
            return text()  # only forms like 1.234: thousands group or decimal point? never guess
        texts = np.array([t.replace(".", "").replace(",", ".") for t in nonmiss], dtype=object)
    num = _to_float(texts, large)
    if num is None:
        return text()
    vals: np.ndarray | None = None
    if not any_na and all(_INT_TEXT.match(t.strip()) for t in nonmiss):
        try:
            vals = np.array([int(t) for t in nonmiss], dtype=np.int64)
        except (OverflowError, ValueError):  # beyond int64, or beyond int()'s 4,300 digits
            vals = None  # the floats (±inf beyond 1.8e308; the texts are kept as read)
    if vals is None:
        vals = np.full(n, np.nan)
        vals[~na] = num
    written = _written_text(vals[~na] if any_na else vals, dec)
    keep = na_text or written != nonmiss.tolist()
    return "number", vals, keep


_FIRST_DIGIT_ZERO = r"^[^0-9]*0[0-9]"  # necessary for _LEADING_ZERO after strip(): a prefilter
_PLAIN_INT = r"^[-+]?[0-9]+$"  # RE2: '$' is the end of the text, '[0-9]' ASCII digits


def _arrow_texts(s: pd.Series, *, chunked: bool = False):
    """The texts of ``s`` as one Arrow string array (no copy for an Arrow-backed column of
    one chunk), or None when ``s`` holds anything but texts (or a missing value).
    ``chunked``: a column read in several chunks is given as they are (a
    ``pyarrow.ChunkedArray``, no copy into one array).
    """
    import pyarrow as pa

    try:
        a = pa.array(s.array) if hasattr(s.array, "__arrow_array__") else None
        if a is None:
            a = pa.array(s.to_numpy(dtype=object), type=pa.large_string())
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if isinstance(a, pa.ChunkedArray) and not (chunked and a.num_chunks):
        a = a.combine_chunks()
    if a.null_count or not (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
        return None
    return a


#: a long column is typed through its distinct texts when a sample of it has at most this
#: share of distinct values (categories, codes, ages: the usual microdata column)
_DISTINCT_SHARE = 0.05
_DISTINCT_SAMPLE = 20_000


def _convert_distinct(s: pd.Series, dec: str, explicit: bool) -> tuple[Any, bool] | None:
    """:func:`_convert_column` of one long column of texts computed on its distinct texts
    (:func:`_typed_texts` says why that is the same) and gathered back: the same values
    and the same keep flag, in time proportional to the number of distinct texts (issue 27).
    None when the column has too many distinct texts for it to pay (then
    :func:`_convert_large`).  Text columns come back as the reader's own array with the
    missing values masked (no round trip through objects).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    # the chunks as read (issue 27: no copy of the column into one array first); the
    # dictionary encoding of a chunked array has one dictionary for all its chunks, in order
    # of first appearance, as for the array they make
    a = _arrow_texts(s, chunked=True)
    if a is None:
        return None
    n = len(a)
    head = a.slice(0, _DISTINCT_SAMPLE)
    if pc.count_distinct(head).as_py() > _DISTINCT_SHARE * len(head):
        return None
    enc = pc.dictionary_encode(a)
    if isinstance(enc, pa.ChunkedArray):
        dictionary = enc.chunk(0).dictionary
        if not all(ch.dictionary.equals(dictionary) for ch in enc.chunks[1:]):  # pragma: no cover
            return None  # (never seen: every chunk holds the whole dictionary)
        indices = pa.concat_arrays([ch.indices for ch in enc.chunks])
    else:
        dictionary, indices = enc.dictionary, enc.indices
    del enc
    texts = np.asarray(dictionary.to_pylist(), dtype=object)
    if texts.size > max(_SMALL, _DISTINCT_SHARE * n):
        return None
    kind, vals, keep = _typed_texts(texts, dec, explicit, large=n > _SMALL)
    if kind != "text":
        return vals[np.asarray(indices.to_numpy(zero_copy_only=False))], keep
    na = np.fromiter((t in NA_TEXTS for t in texts), dtype=bool, count=texts.size)
    if not na.any():
        from dpstudio.engine.codes import remember

        remember(s, indices, dictionary)  # the column's codes: never hashed again
        return s.array, keep
    idx = np.asarray(indices.to_numpy(zero_copy_only=False))
    return s.mask(pd.Series(na[idx], index=s.index)).array, keep


def _canonical_integers(a) -> bool:
    """Whether every text of the Arrow string array ``a`` (no missing values) has the form
    ``0`` or ``-?[1-9][0-9]*`` -- the decimal an integer is written as, so that it reads back
    as itself (issue 27: checked on the UTF-8 bytes and the offsets with numpy, no cast back).
    """
    import pyarrow as pa

    n = len(a)
    if n == 0 or a.null_count:
        return False
    large = pa.types.is_large_string(a.type)
    if not (large or pa.types.is_string(a.type)):
        return False
    bufs = a.buffers()
    width = 8 if large else 4
    offs = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32, count=n + 1, offset=a.offset * width)
    lens = np.diff(offs)
    if int(lens.min()) < 1:
        return False  # an empty text
    lo, hi = int(offs[0]), int(offs[-1])
    data = np.frombuffer(bufs[2], dtype=np.uint8, count=hi - lo, offset=lo)
    d = data - np.uint8(48)  # digits 0..9, '-' 253 (uint8 wraps)
    if not bool(np.all((d <= 9) | (d == 253))):
        return False  # another character
    starts = offs[:-1] - lo
    first = data[starts]
    neg = first == 45
    n_neg = int(np.count_nonzero(neg))
    if int(np.count_nonzero(d == 253)) != n_neg:
        return False  # a '-' after the first character
    if n_neg:
        if int(lens[neg].min()) < 2 or bool(np.any(data[starts[neg] + 1] == 48)):
            return False  # '-' alone, '-0', '-012'
    return not bool(np.any((first == 48) & (lens > 1)))  # '012' (the one zero is '0')


def _convert_large(s: pd.Series, dec: str, explicit: bool) -> tuple[Any, bool] | None:
    """:func:`_convert_column` of one long column of texts, vectorised with pyarrow compute:
    the same values and the same keep flag; None where only the per-value path decides
    (booleans, decimal comma, integers out of int64 or not plain).  Text columns come back as
    the reader's own array with the missing values masked (no round trip through objects).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    a = _arrow_texts(s)
    if a is None:
        return None
    n = len(a)
    if dec != ",":
        # the usual column of numbers: every text the canonical decimal of an int64 (Arrow
        # reads it, and writes it back the same) -- what the checks below conclude for it
        # (no missing value, no boolean, no leading zero, plain integers, nothing to keep),
        # in three passes instead of seven (issue 27)
        # (canonical: each text the pattern 0 | -?[1-9][0-9]*, checked on the bytes, then one
        # cast: 3x cheaper than the cast back and the comparison it replaces, the same answer)
        ints = None
        if _canonical_integers(a):
            try:
                ints = pc.cast(a, pa.int64())
            except pa.ArrowInvalid:  # beyond int64
                ints = None
        if ints is not None:
            return np.asarray(ints.to_numpy(zero_copy_only=False), dtype=np.int64), False
    na = pc.is_in(a, value_set=pa.array(sorted(NA_TEXTS), type=a.type))
    any_na = bool(pc.any(na).as_py())
    na_np = np.asarray(na.to_numpy(zero_copy_only=False), dtype=bool) if any_na else None
    nonmiss = a.filter(pc.invert(na)) if any_na else a
    na_text = bool(pc.any(pc.and_(na, pc.greater(pc.binary_length(a), 0))).as_py()) if any_na else False
    if len(nonmiss) == 0:
        return np.full(n, np.nan), na_text
    if pc.all(pc.is_in(nonmiss.slice(0, 200), value_set=pa.array(sorted(_BOOL_TEXTS), type=a.type))).as_py():
        return None  # (maybe) booleans: the per-value path

    def text() -> tuple[Any, bool]:
        if na_np is None:
            return s.array, na_text
        return s.mask(pd.Series(na_np, index=s.index)).array, na_text

    cand = pc.match_substring_regex(nonmiss, _FIRST_DIGIT_ZERO)
    if pc.any(cand).as_py():  # the exact test of _convert_column on the candidates only
        for t in nonmiss.filter(cand).to_pylist():
            t = t.strip()
            if _LEADING_ZERO.match(t) and not t.lstrip("+-").startswith(("0.", "0,")):
                return text()
    if dec == ",":
        return None
    if not any_na and pc.all(pc.match_substring_regex(nonmiss, _PLAIN_INT)).as_py():
        try:
            ints = pc.cast(nonmiss, pa.int64())
        except pa.ArrowInvalid:  # out of int64 (or a form arrow does not read): per value
            return None
        written = pc.cast(ints, a.type)  # str(int(t)): no sign '+', no '-0', no leading zeros
        keep = not pc.all(pc.equal(written, nonmiss)).as_py()
        return np.asarray(ints.to_numpy(zero_copy_only=False), dtype=np.int64), keep
    texts = np.asarray(nonmiss.to_numpy(zero_copy_only=False), dtype=object)
    num = _to_float(texts)
    if num is None:
        return text()
    if not any_na and all(_INT_TEXT.match(t.strip()) for t in texts):
        return None  # integers with spaces: the per-value path
    vals = np.full(n, np.nan)
    if any_na:
        assert na_np is not None
        vals[~na_np] = num
    else:
        vals[:] = num
    written = _written_text(num, dec)
    return vals, na_text or written != texts.tolist()


def _convert_long(col: pd.Series, dec: str, explicit: bool) -> tuple[Any, np.ndarray | None]:
    """One long column of texts typed: (values, the texts to keep aside or None)."""
    got = _convert_distinct(col, dec, explicit)
    if got is None:
        got = _convert_large(col, dec, explicit)
    if got is not None:
        vals, k = got
        return vals, (col.to_numpy(dtype=object, na_value="") if k else None)
    r = col.to_numpy(dtype=object, na_value="")
    vals, k = _convert_column(r, dec, explicit)
    return vals, (r if k else None)


def _convert(
    raw: pd.DataFrame, dec: str, explicit: bool = False
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Typed table from the texts + {column: texts} for the columns whose texts would not
    survive being written back from the typed values (leading zeros, 1.50, FALSE, NA...).
    Long columns go through :func:`_convert_large` (vectorised), short ones (wide files)
    through :func:`_convert_column`.
    """
    cols: dict[str, Any] = {}
    keep: dict[str, np.ndarray] = {}
    big = len(raw) > _SMALL
    if big:
        # long columns: each typed on its own, several at a time (parallel.py: Arrow compute
        # releases the GIL; the same values as one after the other); the Series are taken
        # here, in this thread
        from dpstudio.engine.parallel import map_ordered

        series = [raw.iloc[:, j] for j in range(raw.shape[1])]
        typed = map_ordered(
            partial(_convert_long, dec=dec, explicit=explicit), series, cells=raw.shape[0] * raw.shape[1]
        )
        for c, (vals, texts) in zip(raw.columns, typed):
            cols[str(c)] = vals
            if texts is not None:
                keep[str(c)] = texts
    else:
        arr = raw.to_numpy(dtype=object, na_value="") if raw.shape[1] else None
        for j, c in enumerate(raw.columns):
            r = arr[:, j].copy() if arr is not None else np.empty(0, dtype=object)
            vals, k = _convert_column(r, dec, explicit)
            cols[str(c)] = vals
            if k:
                keep[str(c)] = r
    if not cols:
        return pd.DataFrame(index=pd.RangeIndex(len(raw))), keep
    df = pd.DataFrame(cols, index=pd.RangeIndex(len(raw)), copy=False)
    return df, keep


_GROUP_ONLY = re.compile(r"^\s*[-+]?\d{1,3}(\.\d{3})+\s*$", re.ASCII)


def check_decimal_ambiguity(column: str, values: pd.Series) -> None:
    """Refuse to turn a text column into numbers when every value reads as ``1.234``: a
    thousands group (1234) in a decimal-comma file or a decimal point (1.234) -- the reader kept
    it as text because the decimal mark was guessed, and a guess that would change a value is
    never applied.  ``InputError`` naming the column and the option that decides.
    """
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return
    texts = [str(v) for v in values.dropna().tolist() if str(v).strip() not in NA_TEXTS]
    if texts and all(_GROUP_ONLY.match(t) for t in texts):
        t = texts[0].strip()
        raise InputError(
            f"Column {column!r}: values such as {t!r} may be thousands groups "
            f"({t.replace('.', '')}) or decimals ({t}), and the decimal mark "
            "was guessed, not given. Give it: --decimal , (thousands groups) or --decimal . "
            "(decimals); in the app, choose the decimal mark when opening the file."
        )
