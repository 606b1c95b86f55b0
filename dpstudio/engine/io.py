"""Reading and writing tables: CSV/TSV/TXT, Excel, Parquet, Stata, SPSS, SAS (read only).

Every problem with a file becomes an :class:`~dpstudio.engine.errors.InputError`
naming the file (and the line, for text files).  Writing is atomic: a temporary
file in the target folder, flushed and fsync'ed, then ``os.replace``; the input
file is never overwritten.

>>> import os, tempfile, pandas as pd
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "t.csv")
>>> _ = open(p, "w").write("a;b\\n1,5;2\\n3,25;4\\n")
>>> info = sniff_csv(p)
>>> info["sep"], info["decimal"]
(';', ',')
>>> df, meta = read_table(p)
>>> df["a"].tolist()
[1.5, 3.25]
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError

TEXT_EXT = {".csv", ".tsv", ".txt", ".dat", ".tab"}
FORMATS = {
    ".csv": "csv", ".tsv": "csv", ".txt": "csv", ".dat": "csv", ".tab": "csv",
    ".xlsx": "xlsx", ".xlsm": "xlsx", ".xls": "xls",
    ".parquet": "parquet", ".pq": "parquet",
    ".dta": "dta", ".sav": "sav", ".zsav": "sav", ".sas7bdat": "sas7bdat",
}
WRITE_FORMATS = ("csv", "xlsx", "parquet", "dta", "sav")
SEPARATORS = (",", ";", "\t", "|")
ENCODINGS = ("utf-8-sig", "utf-8", "cp1252", "latin-1")
_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass
class TableMeta:
    """What was learnt reading a file (used to write the release in the same conventions)."""

    path: str | None = None
    format: str = "csv"
    sep: str | None = None
    encoding: str | None = None
    decimal: str | None = None
    value_labels: dict[str, dict] = field(default_factory=dict)
    column_labels: dict[str, str] = field(default_factory=dict)
    n_rows: int = 0
    sheet: Any = None


def file_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    """The format name of ``path`` (from ``fmt`` or the extension)."""
    if fmt:
        f = str(fmt).lower().lstrip(".")
        f = {"tsv": "csv", "txt": "csv", "excel": "xlsx", "stata": "dta", "spss": "sav",
             "pq": "parquet"}.get(f, f)
        if f not in set(FORMATS.values()):
            raise InputError(f"Unknown file format {fmt!r}. Use one of: csv, xlsx, parquet, dta, sav.")
        return f
    ext = Path(str(path)).suffix.lower()
    if ext not in FORMATS:
        raise InputError(
            f"{Path(str(path)).name}: unknown file type {ext or '(no extension)'!r}. "
            "dpstudio reads .csv .tsv .txt .xlsx .parquet .dta .sav .sas7bdat."
        )
    return FORMATS[ext]


# --------------------------------------------------------------------- sniffing


def _head(path: str, nbytes: int = 256 * 1024) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(nbytes)


def _check_text(raw: bytes, name: str) -> None:
    if not raw.strip():
        raise InputError(f"{name}: the file is empty.")
    sample = raw[:65536]
    if b"\x00" in sample:
        raise InputError(f"{name}: this is not a text table (binary content). Open a CSV/TSV "
                         "text file, or a .xlsx/.parquet/.dta/.sav file by its extension.")
    ctrl = sum(1 for b in sample if b < 32 and b not in (9, 10, 13))
    if ctrl > 0.01 * len(sample):
        raise InputError(f"{name}: this is not a text table (binary content).")


def _decode(raw: bytes, name: str, encoding: str | None = None) -> tuple[str, str]:
    if encoding:
        try:
            return raw.decode(encoding), encoding
        except UnicodeDecodeError as exc:
            if len(raw) - exc.start > 4:  # not only a character cut at the end of the sample
                line = raw[:exc.start].count(b"\n") + 1
                raise InputError(f"{name}, line {line}: cannot be decoded as {encoding}.") from None
            return raw[:exc.start].decode(encoding), encoding
        except LookupError:
            raise InputError(f"Unknown encoding {encoding!r}.") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        return _decode(raw, name, "utf-8-sig")
    for enc in ("utf-8", "cp1252", "latin-1"):
        try:
            return raw.decode(enc), enc
        except UnicodeDecodeError as exc:
            if enc == "utf-8" and len(raw) - exc.start <= 4 and exc.start > 0:
                # the sample may cut a multi-byte character
                try:
                    return raw[:exc.start].decode(enc), enc
                except UnicodeDecodeError:
                    pass
            continue
    return raw.decode("latin-1"), "latin-1"  # pragma: no cover - latin-1 decodes anything


_NUM_DOT = re.compile(r"^\s*[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\s*$")
_NUM_COMMA = re.compile(r"^\s*[-+]?(\d+,\d*|,\d+)([eE][-+]?\d+)?\s*$")
_NUM_THOUSANDS_DOT = re.compile(r"^\s*[-+]?\d{1,3}(\.\d{3})+(,\d+)?\s*$")


def _guess_sep(lines: list[str]) -> str:
    best, best_score = ",", (-1, -1)
    for sep in SEPARATORS:
        try:
            rows = list(csv.reader(lines, delimiter=sep))
        except csv.Error:
            continue
        widths = [len(r) for r in rows if r]
        if not widths or max(widths) < 2:
            continue
        w0 = widths[0]
        consistent = sum(1 for w in widths if w == w0)
        score = (consistent, w0)
        if score > best_score:
            best, best_score = sep, score
    return best


def sniff_csv(path: str | os.PathLike, nrows: int = 200, *, sep: str | None = None,
              encoding: str | None = None, decimal: str | None = None) -> dict:
    """Guess ``sep`` (, ; tab |), ``encoding`` (utf-8, utf-8-sig, cp1252, latin-1), ``decimal``
    ('.' or ','), ``header`` (bool) and return a ``preview`` DataFrame of ``nrows`` rows."""
    path = str(path)
    name = Path(path).name
    raw = _head(path)
    _check_text(raw, name)
    text, enc = _decode(raw, name, encoding)
    lines = text.splitlines()
    if len(raw) >= 256 * 1024 and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln for ln in lines if ln.strip()][: max(nrows, 2) + 1]
    if sep is None:
        sep = _guess_sep(lines)
    rows = [r for r in csv.reader(lines, delimiter=sep) if r]
    body = [f for r in rows[1:] for f in r]
    if decimal is None:
        dots = sum(1 for f in body if _NUM_DOT.match(f) and "." in f)
        commas = sum(1 for f in body if _NUM_COMMA.match(f) and "," in f)
        commas += sum(1 for f in body if _NUM_THOUSANDS_DOT.match(f) and "," in f)
        decimal = "," if (sep != "," and commas > dots) else "."
    first = rows[0] if rows else []

    def isnum(f: str) -> bool:
        return bool(_NUM_DOT.match(f) or _NUM_COMMA.match(f))

    header = bool(first) and not any(isnum(f) for f in first if f.strip())
    preview = _read_csv_text(path, sep=sep, encoding=enc, decimal=decimal,
                             header=0 if header else None, nrows=nrows)
    return {"sep": sep, "encoding": enc, "decimal": decimal, "header": header, "preview": preview}


# --------------------------------------------------------------------- reading


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
        return InputError(f"{name}, line {m.group(2)}: {m.group(3)} fields where the header has "
                          f"{m.group(1)} (ragged row). Fix that line or check the separator.")
    if isinstance(exc, pd.errors.EmptyDataError):
        return InputError(f"{name}: the file is empty (no columns).")
    if isinstance(exc, UnicodeDecodeError):
        return _DecodeError(f"{name}: cannot be decoded ({exc.encoding}); choose another encoding.")
    return InputError(f"{name}{_line_of(msg)}: cannot be read as a table ({msg}).")


def _read_csv_text(path: str, *, sep: str, encoding: str, decimal: str, header, nrows=None,
                   chunksize=None, fh=None):
    kw: dict[str, Any] = dict(sep=sep, encoding=encoding, decimal=decimal, header=header,
                              engine="c", skip_blank_lines=True)
    if decimal == ",":
        kw["thousands"] = "."
    try:
        return pd.read_csv(fh if fh is not None else path, nrows=nrows, chunksize=chunksize, **kw)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise _csv_error(path, exc) from None


def _raw_header(path: str, sep: str, encoding: str) -> list[str]:
    with open(path, encoding=encoding, newline="", errors="replace") as fh:
        for row in csv.reader(fh, delimiter=sep):
            if any(f.strip() for f in row):
                return row
    return []


def _check_columns(cols: list[str], name: str) -> None:
    cols = [str(c) for c in cols]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(f"{name}: duplicate column name(s) {', '.join(map(repr, dup))}. "
                         "Rename them so that every column name is unique.")
    empty = [i + 1 for i, c in enumerate(cols) if not c.strip()]
    if empty:
        raise InputError(f"{name}: column(s) {', '.join(map(str, empty))} have no name in the header.")


def _check_ragged(path: str, sep: str, name: str, max_bytes: int = 512 * 1024 * 1024) -> None:
    """Refuse rows whose number of fields differs from the first row's (vectorised count
    of separators per line; skipped for files with quoted fields, which pandas checks)."""
    if os.path.getsize(path) > max_bytes:
        return
    with open(path, "rb") as fh:
        raw = fh.read()
    if b'"' in raw:
        return
    b = np.frombuffer(raw, dtype=np.uint8)
    nl = np.flatnonzero(b == 10)
    ends = np.append(nl, b.size) if (b.size and b[-1] != 10) else nl
    if ends.size == 0:
        return
    starts = np.concatenate([[0], ends[:-1] + 1])
    csum = np.concatenate([[0], np.cumsum(b == ord(sep))])
    counts = csum[ends] - csum[starts]
    ws = np.isin(b, (9, 10, 13, 32)) if sep != "\t" else np.isin(b, (10, 13, 32))
    wsum = np.concatenate([[0], np.cumsum(~ws)])
    nonblank = (wsum[ends] - wsum[starts]) > 0
    lines = np.flatnonzero(nonblank)
    if lines.size < 2:
        return
    expected = counts[lines[0]]
    bad = lines[counts[lines] != expected]
    if bad.size:
        ln = int(bad[0])
        raise InputError(
            f"{name}, line {ln + 1}: {int(counts[ln]) + 1} fields where the first row has "
            f"{int(expected) + 1} (ragged row; {bad.size} such line(s)). Fix those lines or "
            "check the separator."
        )


def _read_csv(path: str, sep, encoding, decimal, progress) -> tuple[pd.DataFrame, TableMeta]:
    name = Path(path).name
    info = sniff_csv(path, nrows=50, sep=sep, encoding=encoding, decimal=decimal)
    sep, enc, dec = info["sep"], info["encoding"], info["decimal"]
    if info["header"]:
        _check_columns(_raw_header(path, sep, enc), name)
    header = 0 if info["header"] else None
    _check_ragged(path, sep, name)

    def load(enc: str) -> pd.DataFrame:
        size = max(os.path.getsize(path), 1)
        if size <= _CHUNK_BYTES:
            df = _read_csv_text(path, sep=sep, encoding=enc, decimal=dec, header=header)
            if progress:
                progress(1.0)
        else:
            parts = []
            with open(path, "rb") as fh:
                reader = _read_csv_text(path, sep=sep, encoding=enc, decimal=dec, header=header,
                                        chunksize=200_000, fh=fh)
                try:
                    for chunk in reader:
                        parts.append(chunk)
                        if progress:
                            progress(min(fh.tell() / size, 1.0))
                except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
                    raise _csv_error(path, exc) from None
            df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
            # chunks may infer different dtypes for a column: re-infer
            df = df.infer_objects()
            if progress:
                progress(1.0)
        return df

    try:
        df = load(enc)
    except _DecodeError:
        if encoding is not None or enc not in ("utf-8", "utf-8-sig"):
            raise
        # the sniffed sample was valid UTF-8 but a later part of the file is not
        try:
            enc = "cp1252"
            df = load(enc)
        except _DecodeError:
            enc = "latin-1"
            df = load(enc)
    if header is None:
        df.columns = [f"V{i + 1}" for i in range(df.shape[1])]
    df.columns = [str(c) for c in df.columns]
    meta = TableMeta(path=os.path.abspath(path), format="csv", sep=sep, encoding=enc, decimal=dec,
                     n_rows=len(df))
    return df, meta


def read_table(path: str | os.PathLike, *, sep: str | None = None, encoding: str | None = None,
               decimal: str | None = None, sheet: Any = None,
               progress: Callable[[float], None] | None = None) -> tuple[pd.DataFrame, TableMeta]:
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
    fmt = file_format(path)
    if os.path.getsize(path) == 0:
        raise InputError(f"{name}: the file is empty.")
    if fmt == "csv":
        return _read_csv(path, sep, encoding, decimal, progress)
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

            reader = {"dta": pyreadstat.read_dta, "sav": pyreadstat.read_sav,
                      "sas7bdat": pyreadstat.read_sas7bdat}[fmt]
            kw = {"encoding": encoding} if encoding else {}
            df, rmeta = reader(path, **kw)
            meta.value_labels = {str(k): dict(v) for k, v in
                                 (getattr(rmeta, "variable_value_labels", None) or {}).items()}
            meta.column_labels = {str(k): str(v) for k, v in
                                  (getattr(rmeta, "column_names_to_labels", None) or {}).items()
                                  if v}
            meta.encoding = getattr(rmeta, "file_encoding", None)
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
    return df, meta


# --------------------------------------------------------------------- writing


def same_file(a: str | os.PathLike | None, b: str | os.PathLike | None) -> bool:
    """True when ``a`` and ``b`` name the same file (resolved paths, or the same inode)."""
    if not a or not b:
        return False
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.normcase(os.path.realpath(str(a))) == os.path.normcase(os.path.realpath(str(b)))


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (thread-safe on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o077)  # fallback: the classic set-and-restore
    os.umask(old)
    return old


#: Permissions of a private file (project, assessment report, audit trail): owner only.
PRIVATE_MODE = 0o600


def file_mode(private: bool = False) -> int:
    """Permissions a new file gets: 0600 if ``private``, else 0666 minus the umask (e.g. 0644)."""
    return PRIVATE_MODE if private else (0o666 & ~_umask())


def atomic_write(path: str | os.PathLike, writer: Callable[[str], None], *, protect: tuple = (),
                 private: bool = False) -> str:
    """Call ``writer(tmp_path)`` on a temporary file next to ``path``, fsync it, then replace ``path``.

    On any failure the temporary file is removed and ``path`` is left as it was.
    ``protect``: paths that must never be written (e.g. the input file).
    ``private``: owner-only permissions (0600) for files that must not be published (the
    temporary file is 0600 from its creation, so the content is never readable by others);
    otherwise the file gets normal permissions (0666 minus the umask, e.g. 0644), also when it
    replaces an existing file with other permissions.
    """
    path = os.path.abspath(str(path))
    for p in protect:
        if same_file(path, p):
            raise InputError(f"Refusing to write {Path(path).name} over the input file {p}: "
                             "choose another output name (the input is never overwritten).")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder")
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=f".tmp{p.suffix}", dir=folder)
    os.close(fd)
    try:
        writer(tmp)
        with open(tmp, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        if os.name == "posix":  # mkstemp made it 0600; a writer may have recreated it
            os.chmod(tmp, file_mode(private))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename durable too
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def _stata_labels(df: pd.DataFrame, meta: TableMeta | None) -> tuple[dict, list | None]:
    if meta is None:
        return {}, None
    vl = {}
    for c, labels in meta.value_labels.items():
        if c not in df.columns:
            continue
        s = df[c]
        if pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            v = v[np.isfinite(v)]
            if v.size and not np.all(v == np.round(v)):
                continue  # values were masked into non-codes: the labels no longer apply
        vl[c] = {k: lab for k, lab in labels.items()}
    cl = [meta.column_labels.get(c, "") or None for c in df.columns] if meta.column_labels else None
    return vl, cl


def write_table(df: pd.DataFrame, path: str | os.PathLike, fmt: str | None = None,
                meta: TableMeta | None = None, *, protect: tuple = (), private: bool = False) -> str:
    """Write ``df`` atomically as csv/xlsx/parquet/dta/sav (format from ``fmt`` or the extension).

    ``meta`` is the input's :class:`TableMeta`: the output keeps its CSV conventions
    (separator, decimal mark, encoding) and its Stata/SPSS labels, and writing over
    ``meta.path`` (the input) is refused with an :class:`InputError`.
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
                    "\t" if Path(path).suffix.lower() == ".tsv" else ",")
                dec = meta.decimal if meta and meta.decimal else "."
                if sep == "," and dec == ",":
                    dec = "."
                enc = meta.encoding if meta and meta.encoding in ENCODINGS else "utf-8"
                df.to_csv(tmp, sep=sep, decimal=dec, encoding=enc, index=False,
                          lineterminator="\n")
            elif f == "xlsx":
                df.to_excel(tmp, index=False, engine="openpyxl")
            elif f == "parquet":
                df.to_parquet(tmp, index=False)
            else:
                import pyreadstat

                vl, cl = _stata_labels(df, meta)
                kw: dict[str, Any] = {}
                if vl:
                    kw["variable_value_labels"] = vl
                if cl:
                    kw["column_labels"] = cl
                if f == "dta":
                    pyreadstat.write_dta(df, tmp, **kw)
                else:
                    pyreadstat.write_sav(df, tmp, **kw)
        except (OSError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{name}: cannot write the table as {f} ({msg}).") from None

    return atomic_write(path, writer, protect=guard, private=private)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (streamed)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


__all__ = ["TableMeta", "sniff_csv", "read_table", "write_table", "atomic_write", "same_file",
           "file_sha256", "file_format", "file_mode", "PRIVATE_MODE"]
