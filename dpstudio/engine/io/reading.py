r"""Reading tables: :func:`sniff_csv` and :func:`read_table` (CSV/TSV/TXT, Excel, Parquet,
Stata, SPSS, SAS).

Every problem with a file becomes an :class:`~dpstudio.engine.errors.InputError` naming
the file (and the line, for text files).  A text table is parsed as texts (by Arrow for big
files without quotes, else by pandas), checked (header, ragged rows) and typed by
:mod:`~dpstudio.engine.io.convert`.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from dpstudio.engine.errors import InputError
from dpstudio.engine.io.convert import _convert
from dpstudio.engine.io.dialect import (
    _NUM_COMMA,
    _NUM_DOT,
    _NUM_THOUSANDS_DOT,
    ImplausibleShape,
    _check_options,
    _check_text,
    _decode,
    _guess_sep,
    _head,
    _utf8_copy,
    _wide_encoding,
)
from dpstudio.engine.io.files import check_regular_file, sha256_in_background
from dpstudio.engine.io.formats import SEPARATORS, TableMeta, file_format
from dpstudio.engine.io.labels import _declared_types, _numeric_columns, _whole_numbers_as_integers
from dpstudio.engine.io.ragged import _check_ragged, _scan

_CHUNK_BYTES = 8 * 1024 * 1024
#: A separator guessed (not given) that splits the header into more columns than this is
#: questioned before the table is built (e.g. a Latin-1 file read as 52,018 columns).
MAX_SNIFFED_COLUMNS = 10_000


def _line_of(msg: str) -> str:
    m = re.search(r"line (\d+)", msg)
    return f", line {m.group(1)}" if m else ""


class _DecodeError(InputError):
    """The text could not be decoded with the chosen encoding."""


def _csv_error(path: str, exc: Exception) -> InputError:
    name = Path(path).name
    msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", msg)
    if m:
        return InputError(
            f"{name}, line {m.group(2)}: {m.group(3)} fields where the header has "
            f"{m.group(1)} (ragged row). Fix that line or check the separator."
        )
    if isinstance(exc, pd.errors.EmptyDataError):
        return InputError(f"{name}: the file is empty (no columns).")
    if isinstance(exc, UnicodeDecodeError):
        return _DecodeError(f"{name}: cannot be decoded ({exc.encoding}); choose another encoding.")
    return InputError(f"{name}{_line_of(msg)}: cannot be read as a table ({msg}).")


def _bare_cr(src) -> bool:
    """Whether the file (a path or a seekable handle, read from where it stands) ends its lines
    with a carriage return alone: its first MiB holds a CR and no LF.
    """
    try:
        if isinstance(src, (str, os.PathLike)):
            with open(src, "rb") as fh:
                head = fh.read(1 << 20)
        elif hasattr(src, "seek") and hasattr(src, "tell") and src.seekable():
            pos = src.tell()
            head = src.read(1 << 20)
            src.seek(pos)
        else:
            return False
    except (OSError, ValueError):
        return False
    cr, lf = ("\r", "\n") if isinstance(head, str) else (b"\r", b"\n")
    return cr in head and lf not in head


def _raw_frame(src, *, sep: str, encoding: str | None, header, nrows=None, chunksize=None):
    """The table as read, every field as its text ('' for an empty field): nothing converted."""
    # index_col=False: a row longer than the header never turns the first columns into a
    # (multi-)index -- 25,000 extra fields took pandas 15 s; the ragged check refuses them
    kw: dict[str, Any] = dict(
        sep=sep,
        header=header,
        engine="c",
        skip_blank_lines=True,
        dtype=str,
        na_filter=False,
        keep_default_na=False,
        quoting=csv.QUOTE_MINIMAL,
        index_col=False,
    )
    if encoding is not None:
        kw["encoding"] = encoding
    if _bare_cr(src):
        # old Mac line ends: pandas' C parser, left to detect them, shifts the fields of the
        # line after a blank one (",5,6" read as "5", "6", ""); told, it reads them right
        kw["lineterminator"] = "\r"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.ParserWarning)
        return pd.read_csv(src, nrows=nrows, chunksize=chunksize, **kw)


def _read_csv_text(
    path: str, *, sep: str, encoding: str, decimal: str, header, nrows=None, chunksize=None, fh=None
):
    """A preview / small read: typed values (texts kept aside are dropped)."""
    try:
        raw = _raw_frame(
            fh if fh is not None else path, sep=sep, encoding=encoding, header=header, nrows=nrows
        )
    except (
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
        UnicodeDecodeError,
        ValueError,
        csv.Error,
    ) as exc:
        raise _csv_error(path, exc) from None
    df, _ = _convert(raw, decimal)
    return df


def _raw_header(path: str, sep: str, encoding: str) -> list[str]:
    with open(path, encoding=encoding, newline="", errors="replace") as fh:
        try:
            for row in csv.reader(fh, delimiter=sep):
                if any(f.strip() for f in row):
                    return row
        except csv.Error as exc:
            raise InputError(f"{Path(path).name}, line 1: cannot be read as a table ({exc}).") from None
    return []


def _check_columns(cols: list[str], name: str) -> None:
    cols = [str(c) for c in cols]
    counts: dict[str, int] = {}
    for c in cols:  # linear (a 40,000-column header must not take a minute)
        counts[c] = counts.get(c, 0) + 1
    dup = sorted(c for c, n in counts.items() if n > 1)
    if dup:
        shown = ", ".join(map(repr, dup[:10])) + (f" and {len(dup) - 10} more" if len(dup) > 10 else "")
        raise InputError(
            f"{name}: duplicate column name(s) {shown}. Rename them so that every column name is unique."
        )
    empty = [i + 1 for i, c in enumerate(cols) if not c.strip()]
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        raise InputError(f"{name}: column(s) {shown} have no name in the header.")


def sniff_csv(
    path: str | os.PathLike,
    nrows: int = 200,
    *,
    sep: str | None = None,
    encoding: str | None = None,
    decimal: str | None = None,
    preview: bool = True,
) -> dict:
    """Guess ``sep`` (, ; tab |), ``encoding`` (utf-8, utf-8-sig, cp1252, latin-1), ``decimal``
    ('.' or ','), ``header`` (bool) and return a ``preview`` DataFrame of ``nrows`` rows
    (None with ``preview=False``: :func:`read_table` reads the whole file next, start-up, issue 13).
    """
    path = str(path)
    name = Path(path).name
    _check_options(sep, decimal)
    check_regular_file(path, what="data file")  # a FIFO or device would block the read
    raw = _head(path)
    wide = _wide_encoding(raw, encoding)
    if wide:
        with _utf8_copy(path, wide) as tmp:
            info = sniff_csv(tmp, nrows, sep=sep, encoding="utf-8", decimal=decimal, preview=preview)
        info["encoding"] = encoding or wide
        return info
    _check_text(raw, name)
    text, enc = _decode(raw, name, encoding)
    lines = text.splitlines()
    if len(raw) >= 256 * 1024 and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln for ln in lines if ln.strip()][: max(nrows, 2) + 1]
    guessed = sep is None
    try:
        if sep is None:
            sep = _guess_sep(lines)
        rows = [r for r in csv.reader(lines, delimiter=sep) if r]
    except csv.Error as exc:
        raise InputError(f"{name}: cannot be read as a table ({exc}).") from None
    if guessed and rows and len(rows[0]) > MAX_SNIFFED_COLUMNS:
        widths = {}
        for s_ in SEPARATORS:
            try:
                widths[s_] = len(next(csv.reader(lines[:1], delimiter=s_), []))
            except csv.Error:
                continue
        raise ImplausibleShape(
            f"{name}: the separator {sep!r} (guessed) splits the first line into "
            f"{len(rows[0]):,} columns, which is implausible; check the file and its encoding, "
            "or give the separator explicitly (--sep) if it really has that many columns.",
            sep=sep,
            encoding=enc,
            n_columns=len(rows[0]),
            widths=widths,
        )
    body = [f for r in rows[1:] for f in r]
    if decimal is None:
        # 1.234 may be a thousands group as well as a decimal point: not evidence either way
        dots = sum(1 for f in body if _NUM_DOT.match(f) and "." in f and not _NUM_THOUSANDS_DOT.match(f))
        commas = sum(1 for f in body if _NUM_COMMA.match(f) and "," in f)
        commas += sum(1 for f in body if _NUM_THOUSANDS_DOT.match(f) and "," in f)
        decimal = "," if (sep != "," and commas > dots) else "."
    first = rows[0] if rows else []

    def isnum(f: str) -> bool:
        return bool(_NUM_DOT.match(f) or _NUM_COMMA.match(f))

    header = bool(first) and not any(isnum(f) for f in first if f.strip())
    table = (
        _read_csv_text(
            path, sep=sep, encoding=enc, decimal=decimal, header=0 if header else None, nrows=nrows
        )
        if preview
        else None
    )
    lt = "\r\n" if b"\r\n" in raw else "\n"
    return {
        "sep": sep,
        "encoding": enc,
        "decimal": decimal,
        "header": header,
        "preview": table,
        "lineterminator": lt,
    }


#: files from this size on have their SHA-256 computed in the background while they are read
BACKGROUND_DIGEST_BYTES = 32 * 1024 * 1024
#: files from this size on are parsed by Arrow's CSV reader when they allow it (tests set 0)
_ARROW_MIN_BYTES = 1024 * 1024
#: bytes per block of Arrow's reader (a column comes back in one chunk per block; tests set
#: a few bytes to read small files in many chunks)
_ARROW_BLOCK_BYTES = 4 * 1024 * 1024
#: encodings Arrow's reader is given (its own UTF-8; the others through Python's codecs)
_ARROW_CODECS = {
    "utf-8": "utf8",
    "utf-8-sig": "utf8",
    "ascii": "utf8",
    "cp1252": "cp1252",
    "latin-1": "latin-1",
}


def _arrow_frame(
    path: str, *, sep: str, encoding: str, header, progress: Callable[[float], None] | None
) -> pd.DataFrame | None:
    """The table as read, every field as its text, parsed by Arrow (issue 27: 3,000,000
    records in 1-2 s instead of 6) -- the frame :func:`_raw_frame` gives, or None when
    Arrow cannot be trusted to give it (then pandas parses the file).

    Only called for files without quotes or NUL bytes and with at least two columns (the
    ragged-row check has passed): such a file is split at the separator and at the line
    breaks (LF, CR LF, bare CR) by both parsers.  They differ on lines of blanks only, which
    pandas skips and Arrow reads as a row of one field: with two or more columns Arrow then
    stops (wrong number of fields) and pandas parses the file; so do invalid text in the
    encoding and anything else Arrow refuses.
    """
    from dpstudio.engine.memory import allocation_can_fail

    if allocation_can_fail():
        return None  # Arrow aborts the process on a failed allocation (see there)
    import pyarrow as pa
    import pyarrow.csv as pcsv

    codec = _ARROW_CODECS.get(encoding.lower().replace("_", "-"))
    if codec is None:
        return None
    try:
        names = _raw_header(path, sep, encoding)
    except InputError:
        return None
    if len(names) < 2:
        return None
    keys = names if header is not None else [f"f{i}" for i in range(len(names))]
    size = max(os.path.getsize(path), 1)
    options = dict(
        read_options=pcsv.ReadOptions(
            block_size=_ARROW_BLOCK_BYTES, encoding=codec, autogenerate_column_names=header is None
        ),
        parse_options=pcsv.ParseOptions(
            delimiter=sep,
            quote_char=False,
            double_quote=False,
            escape_char=False,
            ignore_empty_lines=True,
        ),
        convert_options=pcsv.ConvertOptions(
            column_types={k: pa.large_string() for k in keys},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    try:
        if progress is None:
            # nothing to report (the command line): Arrow parses the blocks on all cores
            # (the streaming reader below parses them in this thread; issue 27)
            table = pcsv.read_csv(path, **options)
            if table.schema.names != keys or not all(pa.types.is_large_string(t) for t in table.schema.types):
                return None
        else:
            reader = pcsv.open_csv(path, **options)
            schema = reader.schema
            if schema.names != keys or not all(pa.types.is_large_string(t) for t in schema.types):
                return None
            batches, done = [], 0
            for batch in reader:
                batches.append(batch)
                # bytes parsed so far: the texts and a separator / line break per field
                done += sum(col.buffers()[2].size if col.buffers()[2] else 0 for col in batch.columns)
                done += batch.num_rows * batch.num_columns
                progress(min(done / size, 1.0) * 0.9)
            table = pa.Table.from_batches(batches, schema=schema)
            del batches
    except (pa.ArrowException, UnicodeError, LookupError, OSError):
        return None
    df = table.to_pandas()
    if header is None:
        df.columns = range(len(keys))
    return df


def _read_csv(path: str, sep, encoding, decimal, progress) -> tuple[pd.DataFrame, TableMeta]:
    name = Path(path).name
    _check_options(sep, decimal)
    wide = _wide_encoding(_head(path, 4), encoding)
    if wide:
        with _utf8_copy(path, wide) as tmp:
            df, meta = _read_csv(tmp, sep, "utf-8", decimal, progress)
        meta.path, meta.encoding = os.path.abspath(path), (encoding or wide)
        return df, meta
    info = sniff_csv(path, nrows=50, sep=sep, encoding=encoding, decimal=decimal, preview=False)
    sep, enc, dec = info["sep"], info["encoding"], info["decimal"]
    if info["header"]:
        _check_columns(_raw_header(path, sep, enc), name)
    header = 0 if info["header"] else None
    quoted, nul = _scan(path)
    size = max(os.path.getsize(path), 1)
    by_arrow = size >= _ARROW_MIN_BYTES and not quoted and not nul
    checked = [False]

    def check_ragged() -> None:
        if not checked[0]:
            _check_ragged(path, sep, name, enc, quoted=quoted)
            checked[0] = True

    if not by_arrow:
        check_ragged()

    def load(enc: str) -> pd.DataFrame:
        if by_arrow:
            # Arrow refuses a row with another number of fields than the first: a frame
            # from it has passed the ragged-row check; otherwise the check (for its message)
            # and pandas
            raw = _arrow_frame(path, sep=sep, encoding=enc, header=header, progress=progress)
            if raw is not None:
                return raw
            check_ragged()
        try:
            if size <= _CHUNK_BYTES:
                raw = _raw_frame(path, sep=sep, encoding=enc, header=header)
                if progress:
                    progress(1.0)
                return raw
            parts = []
            with open(path, "rb") as fh:
                reader = _raw_frame(fh, sep=sep, encoding=enc, header=header, chunksize=200_000)
                for chunk in reader:
                    parts.append(chunk)
                    if progress:
                        progress(min(fh.tell() / size, 1.0) * 0.9)
            return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        except (
            pd.errors.ParserError,
            pd.errors.EmptyDataError,
            UnicodeDecodeError,
            ValueError,
            csv.Error,
        ) as exc:
            raise _csv_error(path, exc) from None

    try:
        raw = load(enc)
    except _DecodeError:
        if encoding is not None or enc not in ("utf-8", "utf-8-sig"):
            raise
        # the sniffed sample was valid UTF-8 but a later part of the file is not
        try:
            enc = "cp1252"
            raw = load(enc)
        except _DecodeError:
            enc = "latin-1"
            raw = load(enc)
    df, texts = _convert(raw, dec, explicit=decimal is not None)
    del raw
    if progress:
        progress(1.0)
    if header is None:
        names = [f"V{i + 1}" for i in range(df.shape[1])]
        texts = {names[int(c)]: t for c, t in texts.items()}
        df.columns = names
    df.columns = [str(c) for c in df.columns]
    meta = TableMeta(
        path=os.path.abspath(path),
        format="csv",
        sep=sep,
        encoding=enc,
        decimal=dec,
        n_rows=len(df),
        lineterminator=info.get("lineterminator", "\n"),
        texts=texts,
        typed={c: df[c] for c in texts},
    )
    return df, meta


def read_table(
    path: str | os.PathLike,
    *,
    sep: str | None = None,
    encoding: str | None = None,
    decimal: str | None = None,
    sheet: Any = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[pd.DataFrame, TableMeta]:
    """Read a data file into a DataFrame and its :class:`TableMeta`.

    CSV/TSV/TXT (separator, encoding and decimal mark guessed unless given; big
    files are read in chunks and ``progress(fraction)`` is called by bytes),
    Excel .xlsx (``sheet``: name or index, default the first), Parquet, Stata .dta
    and SPSS .sav (value labels and variable labels kept in the meta; values are
    the codes), SAS .sas7bdat (read only).
    """
    path = str(path)
    name = Path(path).name
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path} is a folder, not a data file.")
    # a FIFO or a device would block the readers or never end (/dev/zero): refused unopened
    check_regular_file(path, what="data file")
    fmt = file_format(path)
    size = os.path.getsize(path)
    if size == 0:
        raise InputError(f"{name}: the file is empty.")
    if size >= BACKGROUND_DIGEST_BYTES:
        # the file's SHA-256 (the private audit trail's input digest) read alongside the
        # parsing, on another core, instead of after the release is written (issue 27)
        sha256_in_background(path)
    if fmt == "csv":
        df, meta = _read_csv(path, sep, encoding, decimal, progress)
        meta.numeric = _numeric_columns(df)
        return df, meta
    meta = TableMeta(path=os.path.abspath(path), format=fmt)
    try:
        if fmt == "xlsx":
            sh = 0 if sheet is None else sheet
            head = pd.read_excel(path, sheet_name=sh, engine="openpyxl", header=None, nrows=1)
            if len(head):  # pandas renames duplicate names ('x', 'x.1'): check the raw header
                _check_columns(["" if pd.isna(v) else str(v) for v in head.iloc[0].tolist()], name)
            df = pd.read_excel(path, sheet_name=sh, engine="openpyxl")
            meta.sheet = sheet
        elif fmt == "xls":
            raise InputError(f"{name}: old Excel .xls files are not supported; save it as .xlsx or CSV.")
        elif fmt == "parquet":
            df = pd.read_parquet(path)
        else:
            import pyreadstat

            readers: dict[str, Callable[..., tuple[pd.DataFrame, Any]]] = {
                "dta": pyreadstat.read_dta,
                "sav": pyreadstat.read_sav,
                "sas7bdat": pyreadstat.read_sas7bdat,
            }
            reader = readers[fmt]
            kw = {"encoding": encoding} if encoding else {}
            df, rmeta = reader(path, **kw)
            meta.value_labels = {
                str(k): dict(v) for k, v in (getattr(rmeta, "variable_value_labels", None) or {}).items()
            }
            meta.column_labels = {
                str(k): str(v) for k, v in (getattr(rmeta, "column_names_to_labels", None) or {}).items() if v
            }
            meta.encoding = getattr(rmeta, "file_encoding", None)
            meta.declared_types = _declared_types(df, rmeta, fmt)
            if fmt == "sav":
                df = _whole_numbers_as_integers(df)
    except InputError:
        raise
    except (OSError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - every reader has its own exception types
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{name}: cannot be read as a {fmt} file ({msg}).") from None
    if progress:
        progress(1.0)
    _check_columns([str(c) for c in df.columns], name)
    df.columns = [str(c) for c in df.columns]
    meta.n_rows = len(df)
    meta.numeric = _numeric_columns(df)
    return df, meta
