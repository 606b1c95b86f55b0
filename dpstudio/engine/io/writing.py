"""Writing tables: :func:`write_table` serialises a table as csv/xlsx/parquet/dta/sav in the
input's conventions (CSV columns the method did not change written back as the texts read,
byte for byte; SPSS/Stata labels kept); the file itself is written by the one guarded
writer, :mod:`dpstudio.engine.safe_write` (checks before any work, atomic, never over an
input).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine._kernels import Tiered
from dpstudio.engine.errors import InputError
from dpstudio.engine.io.formats import ENCODINGS, WIDE_ENCODINGS, WRITE_FORMATS, TableMeta, file_format
from dpstudio.engine.io.labels import _categorical_codes, _stata_labels, _typed_for_labels
from dpstudio.engine.safe_write import WritePlan


def _same_values(out: pd.Series, ref: pd.Series, rows: np.ndarray | None) -> bool:
    """True when ``out`` holds exactly the values ``ref`` holds at ``rows`` (missing = missing)."""
    # pandas accepts na_value=None (missing as None); the pandas-stubs do not list None
    a = out.to_numpy(dtype=object, na_value=None)  # type: ignore[call-overload]
    b = ref.to_numpy(dtype=object, na_value=None)  # type: ignore[call-overload]
    if rows is not None:
        if rows.size and (rows.min() < 0 or rows.max() >= b.size):
            return False
        b = b[rows]
    if a.shape != b.shape:
        return False
    na_a = pd.isna(out.to_numpy())
    na_b = pd.isna(ref.to_numpy())
    if rows is not None:
        na_b = na_b[rows]
    if not np.array_equal(na_a, na_b):
        return False
    keep = ~na_a
    try:
        return bool(np.all(a[keep] == b[keep]))
    except (TypeError, ValueError):
        return False


def _with_texts(df: pd.DataFrame, meta: TableMeta | None, rows) -> pd.DataFrame:
    """``df`` with every column that holds the values read written as the texts read."""
    if meta is None or not meta.texts:
        return df
    if rows is None and meta.n_rows != len(df):
        return df
    rows = None if rows is None else np.asarray(rows, dtype=np.int64)
    out = None
    for c, texts in meta.texts.items():
        ref = meta.typed.get(c)
        if c not in df.columns or ref is None or len(ref) != len(texts):
            continue
        if _same_values(df[c], ref, rows):
            if out is None:
                out = df.copy(deep=False)
            t = texts if rows is None else texts[rows]
            out[c] = pd.Series(t, index=df.index, dtype=object)
    return df if out is None else out


def _has_cr(df: pd.DataFrame) -> bool:
    for c in df.columns:
        s = df[c]
        if s.dtype == object or pd.api.types.is_string_dtype(s):
            try:
                if s.astype(str).str.contains("\r", regex=False).any():
                    return True
            except (TypeError, ValueError):  # pragma: no cover
                return True
    return False


_PLAIN_SEPS = (",", ";", "\t", "|")


def _csv_bytes(data: pd.DataFrame, sep: str, lt: str, enc: str) -> bytes | None:
    """The bytes ``data.to_csv(sep=sep, lineterminator=lt, encoding=enc, index=False)`` writes,
    built with pyarrow for the common case -- columns of texts, integers and float64 (missing =
    empty; floats as numpy's ``str``, which pandas writes, :func:`_float_texts`) where no name
    or text needs quoting -- or None (then pandas writes the file).  Booleans, dates, other
    float types... always go to pandas.
    """
    blocks = _csv_blocks(data, sep, lt, enc)
    if blocks is None:
        return None
    try:
        return b"".join(bytes(b) for b in blocks)
    except _NeedsPandas:
        return None


class _NeedsPandas(Exception):
    """A field needs quoting, or a text cannot be encoded: pandas writes the file."""


#: records per block of the Arrow CSV writer (its memory: a block's lines, not the file's)
_CSV_BLOCK_ROWS = 500_000


#: float64 values Arrow's cast to text writes with the digits and form of numpy's ``str``
#: (which pandas' ``to_csv`` writes), once ".0" is added to a whole number: zero and
#: 1e-4 <= |x| < 1e10 (Arrow switches to an exponent at 1e10, numpy at 1e16 and below 1e-4);
#: any other value is written by numpy's ``str`` itself
_FLOAT_ARROW_RANGE = (1e-4, 1e10)


def _float_texts(a):
    """The texts pandas' ``to_csv`` writes for a float64 Arrow array (numpy's ``str`` of each
    value; NaN as nothing), built with Arrow compute, never a Python object per value.

    Values on a grid of tenths (the usual noisy release: γ = 0.1, 1 or whole numbers) are
    written as Arrow decimals (:func:`_tenths_texts`, 3x faster than Arrow's float cast);
    the others by :func:`_float_texts_cast`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    v = a.to_numpy(zero_copy_only=False)
    texts, ok = _tenths_texts(v)
    if texts is None:
        return _float_texts_cast(v)
    if ok.all():
        return texts
    rest = ~ok
    return pc.replace_with_mask(texts, pa.array(rest), _float_texts_cast(v[rest]))


def _tenths_texts(v: np.ndarray):
    """(texts, written) for the values of ``v`` that are the doubles nearest to a number of
    tenths ``k/10`` with 1e-4 <= |v| < 1e10 or +0: numpy's ``str`` of such a value is that
    decimal with one digit after the point ("12.0", "-0.5", "69010.1"), which is what Arrow
    writes for the decimal ``k`` of scale 1.  (Why: the double's rounding interval is
    narrower than 0.1 below 1e10, so the shortest digits that read back as it are those of
    ``k/10``; ``k / 10.0 == v`` checks that ``v`` is the double nearest to ``k/10``, IEEE
    division being correctly rounded.)  −0 and the other values are not written
    (``written`` False); (None, None) when fewer than half of the values are.
    """
    lo, hi = _FLOAT_ARROW_RANGE
    with np.errstate(invalid="ignore", over="ignore"):
        # the tests below on two scratch arrays (issue 27: a temporary per test was ~40 % of
        # the writer's numpy time and most of its page faults)
        k = np.multiply(v, 10.0)
        np.rint(k, out=k)
        t = np.divide(k, 10.0)
        ok = t == v
        np.abs(v, out=t)
        ok &= t < hi
        small = t < lo
        if small.any():  # below 1e-4 only +0 is written
            small &= ~((v == 0) & ~np.signbit(v))
            ok &= ~small
        del t, small
    if 2 * int(np.count_nonzero(ok)) < v.size:
        return None, None
    with np.errstate(invalid="ignore"):
        ki = k.astype(np.int64)  # |k| < 1e11 where ok: exact
    del k
    if not ok.all():
        ki[~ok] = 0
    return _decimal_texts(ki), ok


#: whether pyarrow casts decimal64 to text (pyarrow >= 18; 20 % faster than decimal128, and
#: the int64 scaled values are its buffer as they are); None until tried
_DECIMAL64: list[bool] = []


#: the compiled texts of tenths (:mod:`._texts_kernel`: Arrow's texts byte for byte, the tests
#: compare them): ~18 ns per value against Arrow's cast's ~44 ns (under load); loaded for a
#: table of at least 2²⁵ float cells when numba's import (~0.2-0.5 s of CPU) is to be paid
#: for it, 2²¹ when another kernel imported numba already (the keyed noise's), 2²⁶ while
#: numba has not cached it (:class:`~dpstudio.engine._kernels.Tiered`; 2,000,000 × 10 ir-dp
#: measured no better with it, its import included); ``DPSTUDIO_TEXTS_NUMPY=1`` asks for
#: Arrow's cast
TEXTS_KERNEL = Tiered("dpstudio.engine.io._texts_kernel", "DPSTUDIO_TEXTS_NUMPY", "tenths_fill", 1 << 25)


def _decimal_texts(ki: np.ndarray):
    """Arrow's texts of the decimals ``ki``/10 (int64 ``ki``, |ki| < 10^18): "12.0", "-0.5"."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kernel = TEXTS_KERNEL.get(0)  # (loaded by _csv_block_iter for a large table)
    if kernel is not None and ki.size < 1 << 26:  # (int32 offsets: < 2^31 bytes)
        ki = np.ascontiguousarray(ki, dtype=np.int64)
        offsets = np.empty(ki.size + 1, dtype=np.int32)
        kernel.tenths_offsets(ki, offsets)
        data = np.empty(int(offsets[-1]), dtype=np.uint8)
        kernel.tenths_fill(ki, offsets, data)
        return pa.Array.from_buffers(pa.string(), ki.size, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if not _DECIMAL64 or _DECIMAL64[0]:
        try:
            dec = pa.Array.from_buffers(pa.decimal64(18, 1), ki.size, [None, pa.py_buffer(ki)])
            out = pc.cast(dec, pa.string())
            if not _DECIMAL64:
                _DECIMAL64.append(True)
            return out
        except (AttributeError, pa.ArrowNotImplementedError, pa.ArrowInvalid):
            _DECIMAL64[:] = [False]
    words = np.empty((ki.size, 2), dtype=np.int64)  # decimal128: 16 bytes little-endian
    words[:, 0] = ki
    words[:, 1] = ki >> 63
    dec = pa.Array.from_buffers(pa.decimal128(18, 1), ki.size, [None, pa.py_buffer(words)])
    return pc.cast(dec, pa.string())


def _float_texts_cast(v: np.ndarray):
    """:func:`_float_texts` of the float64 values ``v`` through Arrow's float cast: its
    shortest digits, ".0" added to a whole number, numpy's ``str`` outside
    :data:`_FLOAT_ARROW_RANGE` (where Arrow's form differs).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    nan = np.isnan(v)
    t = pc.cast(pa.array(v, mask=nan if nan.any() else None), pa.string())
    with np.errstate(invalid="ignore"):
        m = np.abs(v)
        lo, hi = _FLOAT_ARROW_RANGE
        finite = np.isfinite(v)
        # a whole number: Arrow writes "12" (no "." and no exponent below 1e10), numpy "12.0"
        whole = finite & (v == np.trunc(v)) & (m < hi)
        other = finite & (v != 0) & ((m < lo) | (m >= hi))
    wi = np.flatnonzero(whole)
    if wi.size:
        joined = pc.binary_join_element_wise(t.take(pa.array(wi)), pa.scalar(".0"), "")
        t = pc.replace_with_mask(t, pa.array(whole), joined)
    idx = np.flatnonzero(other)
    if idx.size:
        texts = v[idx].astype(str)
        t = pc.replace_with_mask(t, pa.array(other), pa.array(texts, type=pa.string()))
    return t


def _csv_blocks(
    data: pd.DataFrame,
    sep: str,
    lt: str,
    enc: str,
    block_rows: int | None = None,
    *,
    decimal: str = ".",
):
    """:func:`_csv_bytes` as an iterator of consecutive blocks of bytes (the header, then the
    lines of ``block_rows`` records at a time, written by Arrow's CSV writer: never a Python
    object per value or per line, and never the whole file in memory, issue 27), or None when
    a column is not of a kind it writes.  Iterating raises :class:`_NeedsPandas` when a block
    holds a field that needs quoting (Arrow's writer refuses it unquoted) or a text the
    encoding cannot hold (the caller then has pandas write the whole file).
    """
    import pyarrow as pa

    if sep not in _PLAIN_SEPS or data.shape[1] < 2 or len(data) == 0:
        return None  # (one column: the csv module quotes a lone empty field)
    specials = (sep, '"', "\r", "\n")
    names = list(data.columns)
    if not all(isinstance(c, str) and not any(ch in c for ch in specials) for c in names):
        return None
    sources = []
    floats = []
    for j in range(len(names)):
        s = data.iloc[:, j]
        dt = s.dtype
        if isinstance(dt, np.dtype) and dt == np.float64 and decimal == ".":
            # float64: turned into numpy's texts block by block (_float_texts)
            sources.append(pa.array(s.to_numpy()))
            floats.append(j)
            continue
        try:
            if isinstance(dt, pd.StringDtype) or (isinstance(dt, np.dtype) and dt.kind == "O"):
                a = pa.array(s.array) if isinstance(dt, pd.StringDtype) else None
                if a is None or not (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
                    a = pa.array(s.to_numpy(dtype=object), type=pa.large_string(), from_pandas=True)
            elif isinstance(dt, np.dtype) and dt.kind in "iu":
                a = pa.array(s.to_numpy())
            else:
                return None
        except (pa.ArrowException, TypeError, ValueError):
            return None  # objects that are not all texts
        sources.append(a)
    table = pa.table(sources, names=[f"c{j}" for j in range(len(names))])
    return _csv_block_iter(table, names, sep, lt, enc, block_rows or _CSV_BLOCK_ROWS, floats)


def _csv_block_iter(
    table,
    names: list[str],
    sep: str,
    lt: str,
    enc: str,
    block_rows: int,
    floats: tuple[int, ...] | list[int] = (),
):
    import codecs

    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        utf8 = codecs.lookup(enc).name == "utf-8"
    except LookupError:
        raise _NeedsPandas from None
    encoder = None if utf8 else codecs.getincrementalencoder(enc)()  # one BOM at the start

    def out(b):
        if encoder is None:
            return b
        try:
            return encoder.encode(memoryview(b).tobytes().decode("utf-8"))
        except UnicodeError:
            raise _NeedsPandas from None  # pandas reports it

    # quoting "none": a text holding the separator, a quote or a line break is refused (then
    # pandas quotes it); texts as they are, integers in decimal, a missing value as nothing
    opts = pcsv.WriteOptions(
        include_header=False, delimiter=sep, quoting_style="none", eol=lt, batch_size=65536
    )

    def lines(a: int):
        """The CSV lines of records a … a + block_rows − 1 (UTF-8)."""
        sink = pa.BufferOutputStream()
        part = table.slice(a, block_rows)
        for j in floats:
            part = part.set_column(j, f"c{j}", _float_texts(part.column(j).combine_chunks()))
        try:
            pcsv.write_csv(part, sink, opts)
        except pa.ArrowInvalid:
            raise _NeedsPandas from None
        return sink.getvalue()

    from dpstudio.engine.parallel import imap_ordered

    if floats:  # the compiled texts of tenths, when this table's floats pay its load (here, once)
        TEXTS_KERNEL.get(len(floats) * table.num_rows)
    yield out((sep.join(names) + lt).encode("utf-8"))
    # the blocks of a large table are built a few at a time in threads (parallel.py: Arrow's
    # casts and writer and numpy release the GIL) and written in order: the same bytes
    starts = range(0, table.num_rows, block_rows)
    for b in imap_ordered(lines, starts, cells=table.num_rows * table.num_columns):
        yield out(b)
    if encoder is not None:
        yield encoder.encode("", final=True)


def write_table(
    df: pd.DataFrame,
    path: str | os.PathLike,
    fmt: str | None = None,
    meta: TableMeta | None = None,
    *,
    protect: tuple = (),
    private: bool = False,
    rows=None,
    stage: bool = False,
    plan: WritePlan | None = None,
    what: str = "table",
    digests: dict[str, str] | None = None,
) -> str:
    """Write ``df`` atomically as csv/xlsx/parquet/dta/sav (format from ``fmt`` or the extension).

    ``meta`` is the input's :class:`TableMeta`: the output keeps its CSV conventions
    (separator, decimal mark, encoding, line break) and its Stata/SPSS labels, and writing over
    ``meta.path`` (the input) is refused with an :class:`InputError`.  A CSV column that
    holds the values read (``rows``: the input row of each row of ``df``; default the same
    rows) is written back as the texts read, byte for byte (00001, 1.50, FALSE, NA stay so).
    A field holding a line break is always quoted, so the number of records never changes.
    ``stage``: only write the temporary file and return its path (``plan.commit`` renames it).
    ``plan``: the command's :class:`~dpstudio.engine.safe_write.WritePlan` holding ``path``
    (checked before any work); default a plan of its own with ``protect`` and ``meta.path``
    as inputs.  ``digests``: when given, the SHA-256 of a CSV written block by block is
    computed from the blocks as they are written and recorded there under the path written
    (the staged temporary file with ``stage``), so that it need not be read back.
    """
    path = str(path)
    f = file_format(path, fmt)
    if f not in WRITE_FORMATS:
        raise InputError(f"Cannot write {f} files. Write one of: {', '.join(WRITE_FORMATS)}.")
    guard = tuple(protect) + ((meta.path,) if meta is not None and meta.path else ())
    name = Path(path).name

    def writer(tmp: str) -> None:
        try:
            if f == "csv":
                sep = (meta.sep if meta and meta.sep else None) or (
                    "\t" if Path(path).suffix.lower() == ".tsv" else ","
                )
                dec = meta.decimal if meta and meta.decimal else "."
                if sep == "," and dec == ",":
                    dec = "."
                enc = meta.encoding if meta and meta.encoding in ENCODINGS + WIDE_ENCODINGS else "utf-8"
                if enc in WIDE_ENCODINGS:
                    enc = {"utf-16": "utf-16", "utf-32": "utf-32"}.get(enc, enc)
                data = _with_texts(df, meta, rows) if meta is not None and meta.format == "csv" else df
                lt = meta.lineterminator if meta and meta.lineterminator in ("\n", "\r\n") else "\n"
                # the same bytes as pandas, without its per-row writer (None when a field needs
                # quoting, e.g. holds a CR: then the line break below decides)
                blocks = _csv_blocks(data, sep, lt, enc, decimal=dec)
                if blocks is not None:
                    import hashlib

                    h = hashlib.sha256() if digests is not None else None
                    try:
                        with open(tmp, "wb") as fh:
                            for b in blocks:
                                fh.write(b)
                                if h is not None:
                                    h.update(b)  # (releases the GIL: the next blocks are built meanwhile)
                    except _NeedsPandas:
                        blocks = None  # pandas writes the file (over the partial one)
                    else:
                        if digests is not None and h is not None:
                            digests[tmp] = h.hexdigest()
                if blocks is None:
                    if lt == "\n" and _has_cr(data):
                        lt = "\r\n"  # only then is a field with a bare CR quoted (records kept)
                    data.to_csv(tmp, sep=sep, decimal=dec, encoding=enc, index=False, lineterminator=lt)
            elif f == "xlsx":
                df.to_excel(tmp, index=False, engine="openpyxl")
            elif f == "parquet":
                df.to_parquet(tmp, index=False)
            else:
                import pyreadstat

                vl, cl = _stata_labels(df, meta)
                out = _categorical_codes(df, vl)  # recoded categories (pandas categoricals)
                # a numeric column generalised to texts (k-eps) stays numeric (issue 24 §1)
                out, gen_labels = _typed_for_labels(out, meta)
                vl.update(gen_labels)
                vl = {c: v for c, v in vl.items() if v}
                kw: dict[str, Any] = {}
                if vl:
                    kw["variable_value_labels"] = vl
                if cl:
                    kw["column_labels"] = cl
                if f == "dta":
                    pyreadstat.write_dta(out, tmp, **kw)
                else:
                    pyreadstat.write_sav(out, tmp, **kw)
        except (OSError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{name}: cannot write the table as {f} ({msg}).") from None

    if plan is None:
        plan = WritePlan(inputs=guard)
        plan.file(path, what=what, private=private)
        plan.check()
    else:
        plan.add_input(guard)
    if stage:
        return plan.stage(path, writer)
    return plan.write(path, writer)
