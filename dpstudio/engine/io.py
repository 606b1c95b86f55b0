r"""Reading and writing tables: CSV/TSV/TXT, Excel, Parquet, Stata, SPSS, SAS (read only).

Every problem with a file becomes an :class:`~dpstudio.engine.errors.InputError`
naming the file (and the line, for text files).  :func:`write_table` only serialises a
table: the file itself is written by the one guarded writer,
:mod:`dpstudio.engine.safe_write` (checks before any work, atomic, never over an input).

>>> import os, tempfile, pandas as pd
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "t.csv")
>>> _ = open(p, "w").write("a;b\n1,5;2\n3,25;4\n")
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
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError

# the writing half lives in safe_write (the one guarded writer); re-exported for old callers
from dpstudio.engine.safe_write import (  # noqa: F401
    PRIVATE_MODE,
    WritePlan,
    WriteRefused,
    atomic_write,
    check_output_not_input,
    commit_write,
    discard,
    file_mode,
    remove_stale_temps,
    same_file,
    stage_write,
    temp_pattern,
)

TEXT_EXT = {".csv", ".tsv", ".txt", ".dat", ".tab"}
FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".dat": "csv",
    ".tab": "csv",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".xls": "xls",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".dta": "dta",
    ".sav": "sav",
    ".zsav": "sav",
    ".sas7bdat": "sas7bdat",
}
WRITE_FORMATS = ("csv", "xlsx", "parquet", "dta", "sav")
SEPARATORS = (",", ";", "\t", "|")
ENCODINGS = ("utf-8-sig", "utf-8", "cp1252", "latin-1")
_CHUNK_BYTES = 8 * 1024 * 1024
#: A separator guessed (not given) that splits the header into more columns than this is
#: questioned before the table is built (e.g. a Latin-1 file read as 52,018 columns).
MAX_SNIFFED_COLUMNS = 10_000
#: Encodings whose text is not ASCII-compatible (read through a UTF-8 copy).
WIDE_ENCODINGS = ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")

# fields longer than the csv module's default 131,072 characters are legal (a free-text field)
_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
if csv.field_size_limit() < _FIELD_LIMIT:
    csv.field_size_limit(_FIELD_LIMIT)


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
    #: line break of a CSV ("\n" or "\r\n"), kept when writing
    lineterminator: str = "\n"
    #: CSV columns whose texts the typed values would not reproduce (00001, 1.50, FALSE, NA):
    #: {column: texts as read}; written back as read when a column is not changed
    texts: dict = field(default_factory=dict, repr=False)
    #: {column: the typed values read} for the columns in ``texts`` (to tell unchanged columns)
    typed: dict = field(default_factory=dict, repr=False)
    #: the columns read as numbers: a generalised one stays numeric in a .sav/.dta release
    #: (codes with value labels, issue 24 §1)
    numeric: tuple = ()
    #: column types the file declares (SPSS measure level and format, Stata storage type):
    #: {column: "integer" | "categorical" | "ordinal"}; the defaults of the CLI and the app
    #: (shown to the user), never guessed from the values (issue 24 §2)
    declared_types: dict = field(default_factory=dict)


def file_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    """The format name of ``path`` (from ``fmt`` or the extension)."""
    if fmt:
        f = str(fmt).lower().lstrip(".")
        f = {"tsv": "csv", "txt": "csv", "excel": "xlsx", "stata": "dta", "spss": "sav", "pq": "parquet"}.get(
            f, f
        )
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


# --------------------------------------------------------------------- small files (settings)

#: Largest recipe / project file, query ledger or release metadata read (a real one is a few
#: kB; a ledger of 100,000 answers about 50 MB).
MAX_SETTINGS_BYTES = 64 * 2**20
#: Largest hierarchy file read (ARX hierarchies of every 5-digit ZIP code are a few MB).
MAX_HIERARCHY_BYTES = 256 * 2**20
#: Deepest nesting of arrays/objects accepted in a JSON settings file (ours nest at most 5).
MAX_JSON_DEPTH = 100
#: Most digits of an integer in a JSON file (Python's own limit for int <-> text conversion).
MAX_JSON_INT_DIGITS = 4300

_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind_of(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def check_regular_file(path: str | os.PathLike, *, what: str) -> os.stat_result:
    """``os.stat`` of ``path`` when it is a regular file (symbolic links followed); else a
    one-line :class:`InputError` naming ``what`` and the path.  Never opens the file, so a
    FIFO or a device never blocks and /dev/zero is never read.

    >>> try:
    ...     check_regular_file("/dev/null", what="recipe")
    ... except InputError as e:
    ...     print(e)
    recipe /dev/null: this is a character device, not a regular file; give the path of a file.
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file.") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{what} {p}: this is {_kind_of(st.st_mode)}, not a regular file; give the path of a file."
        )
    return st


def _size_text(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"  # pragma: no cover


def read_small_file(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_SETTINGS_BYTES) -> bytes:
    """The bytes of a small file (a recipe, project, ledger, metadata or hierarchy file).

    Only a regular file is read (``os.stat`` first; the file is then opened with
    ``O_NONBLOCK`` and checked again with ``fstat``, so a FIFO or device swapped in between
    is refused, never waited on), and at most ``max_bytes`` (a file that grows past it while
    being read is refused too).

    Parameters
    ----------
    path : path
        The file.
    what : str
        What the file is, for the message ("recipe", "hierarchy file of column 'age'", ...).
    max_bytes : int
        The size limit.

    Raises
    ------
    InputError
        One line naming ``what`` and the path: no such file, not a regular file (a folder,
        a FIFO, a device, a socket), larger than ``max_bytes``, or unreadable.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> _ = open(p, "w").write("{}")
    >>> read_small_file(p, what="recipe")
    b'{}'
    """
    p = os.fspath(path)
    name = Path(p).name or p
    st = check_regular_file(p, what=what)

    def too_big(size: float) -> InputError:
        return InputError(
            f"{what} {name}: the file is {_size_text(size)}, more than the {_size_text(max_bytes)} "
            f"such a file may have; check that this is the right file."
        )

    if st.st_size > max_bytes:
        raise too_big(st.st_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
            raise InputError(
                f"{what} {p}: this is {_kind_of(st.st_mode)}, not a regular file; give the path of a file."
            )
        chunks, total = [], 0
        while total <= max_bytes:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > max_bytes:
            raise too_big(total)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be read ({exc.strerror or exc}).") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def json_depth(raw: bytes | str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings are
    not counted), found without recursion.

    >>> json_depth('{"a": [1, [2, "]]]"]]}')
    3
    """
    b = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b.count(b"[") + b.count(b"{") == 0:
        return 0
    if b'"' in b:
        b = _JSON_STRING.sub(b'""', b)
    a = np.frombuffer(b, dtype=np.uint8)
    step = ((a == 0x5B) | (a == 0x7B)).astype(np.int64) - ((a == 0x5D) | (a == 0x7D))
    return int(np.cumsum(step).max(initial=0))


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_JSON_INT_DIGITS:
        raise _HugeInt(digits)
    return int(text)


class _HugeInt(Exception):
    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads_json(
    text: str | bytes, *, what: str, max_depth: int = MAX_JSON_DEPTH, name: str | None = None
) -> Any:
    """``json.loads`` that fails with one line naming ``what`` (and ``name``): malformed JSON
    (with its line and column), nesting deeper than ``max_depth`` (checked before parsing, so
    100,000 nested brackets never reach the parser's recursion), integers longer than
    :data:`MAX_JSON_INT_DIGITS` digits, text that is not UTF-8.

    >>> loads_json('{"k": 5}', what="recipe")
    {'k': 5}
    >>> try:
    ...     loads_json("[" * 1000 + "]" * 1000, what="recipe")
    ... except InputError as e:
    ...     print(e)
    recipe: nested 1000 levels deep (at most 100); this is not a dpstudio file.
    """
    import json

    label = f"{what} {name}" if name else what
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{label}: not UTF-8 text (byte {exc.start + 1}); this is not a dpstudio file."
            ) from None
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(
            f"{label}: nested {depth} levels deep (at most {max_depth}); this is not a dpstudio file."
        )
    try:
        return json.loads(text, parse_int=_json_int)
    except _HugeInt as exc:
        raise InputError(
            f"{label}: a number with {exc.digits:,} digits (at most {MAX_JSON_INT_DIGITS:,}); correct the file."
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    except (ValueError, RecursionError) as exc:  # e.g. a float literal json cannot convert
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{label}: not valid JSON ({msg}).") from None


def read_json_file(
    path: str | os.PathLike,
    *,
    what: str,
    max_bytes: int = MAX_SETTINGS_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The JSON value of a small settings file: :func:`read_small_file` then
    :func:`loads_json` (one-line :class:`InputError` for every problem).
    """
    raw = read_small_file(path, what=what, max_bytes=max_bytes)
    return loads_json(raw, what=what, max_depth=max_depth, name=Path(os.fspath(path)).name)


# --------------------------------------------------------------------- sniffing


def _head(path: str, nbytes: int = 256 * 1024) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(nbytes)


_CTRL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13))


def _check_text(raw: bytes, name: str) -> None:
    if not raw.strip():
        raise InputError(f"{name}: the file is empty.")
    sample = raw[:65536]
    if b"\x00" in sample:
        raise InputError(
            f"{name}: this is not a text table (binary content). Open a CSV/TSV "
            "text file, or a .xlsx/.parquet/.dta/.sav file by its extension."
        )
    ctrl = len(sample) - len(sample.translate(None, _CTRL_BYTES))  # bytes < 32 but tab, LF, CR
    if ctrl > 0.01 * len(sample):
        raise InputError(f"{name}: this is not a text table (binary content).")


def _decode(raw: bytes, name: str, encoding: str | None = None) -> tuple[str, str]:
    if encoding:
        try:
            return raw.decode(encoding), encoding
        except UnicodeDecodeError as exc:
            if len(raw) - exc.start > 4:  # not only a character cut at the end of the sample
                line = raw[: exc.start].count(b"\n") + 1
                raise InputError(f"{name}, line {line}: cannot be decoded as {encoding}.") from None
            return raw[: exc.start].decode(encoding), encoding
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
                    return raw[: exc.start].decode(enc), enc
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


def _check_options(sep: str | None, decimal: str | None) -> None:
    if sep is not None and (not isinstance(sep, str) or len(sep) != 1 or sep in '"\r\n'):
        raise InputError(
            f"The separator must be one character such as , ; | or a tab (written \\t). Got {sep!r}."
        )
    if decimal is not None and decimal not in (".", ","):
        raise InputError(f"The decimal mark must be '.' or ','. Got {decimal!r}.")
    if sep is not None and decimal is not None and sep == decimal == ".":
        raise InputError("The separator and the decimal mark cannot both be '.'.")


def _wide_encoding(raw: bytes, encoding: str | None) -> str | None:
    """The UTF-16/32 encoding of the file (given, or from its byte-order mark), else None."""
    if encoding:
        import codecs

        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            raise InputError(f"Unknown encoding {encoding!r}.") from None
        return name if name.startswith(("utf-16", "utf-32")) else None
    if raw.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "utf-32"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    return None


class ImplausibleShape(InputError):
    """A guessed separator would give an implausible number of columns (> MAX_SNIFFED_COLUMNS).

    ``sep``, ``encoding`` and ``n_columns`` say what was guessed; ``widths`` maps each usual
    separator to the number of fields it gives the first line (the app offers to open anyway
    with the separator given explicitly, or to choose another one).
    """

    def __init__(self, msg: str, *, sep: str, encoding: str, n_columns: int, widths: dict) -> None:
        super().__init__(msg)
        self.sep, self.encoding, self.n_columns, self.widths = sep, encoding, n_columns, widths


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


class _utf8_copy:
    """A temporary UTF-8 copy of a UTF-16/32 text file (removed on exit)."""

    def __init__(self, path: str, encoding: str):
        self.path, self.encoding = path, encoding
        self.tmp: str | None = None

    def __enter__(self) -> str:
        name = Path(self.path).name
        try:
            with open(self.path, encoding=self.encoding, newline="") as fh:
                text = fh.read()
        except UnicodeError:
            raise InputError(
                f"{name}: cannot be decoded as {self.encoding}; choose another encoding."
            ) from None
        if not text.strip():
            raise InputError(f"{name}: the file is empty.")
        if "\x00" in text[:65536]:
            raise InputError(f"{name}: this is not a text table (binary content).")
        fd, tmp = tempfile.mkstemp(prefix=".dpstudio-utf8.", suffix=".csv")
        self.tmp = tmp
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text.lstrip("\ufeff"))
        return tmp

    def __exit__(self, *exc) -> None:
        if self.tmp:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


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
        return InputError(
            f"{name}, line {m.group(2)}: {m.group(3)} fields where the header has "
            f"{m.group(1)} (ragged row). Fix that line or check the separator."
        )
    if isinstance(exc, pd.errors.EmptyDataError):
        return InputError(f"{name}: the file is empty (no columns).")
    if isinstance(exc, UnicodeDecodeError):
        return _DecodeError(f"{name}: cannot be decoded ({exc.encoding}); choose another encoding.")
    return InputError(f"{name}{_line_of(msg)}: cannot be read as a table ({msg}).")


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


def _arrow_texts(s: pd.Series):
    """The texts of ``s`` as one Arrow string array (no copy for an Arrow-backed column), or
    None when ``s`` holds anything but texts (or a missing value).
    """
    import pyarrow as pa

    try:
        a = pa.array(s.array) if hasattr(s.array, "__arrow_array__") else None
        if a is None:
            a = pa.array(s.to_numpy(dtype=object), type=pa.large_string())
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if isinstance(a, pa.ChunkedArray):
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
    import pyarrow.compute as pc

    a = _arrow_texts(s)
    if a is None:
        return None
    n = len(a)
    head = a.slice(0, _DISTINCT_SAMPLE)
    if pc.count_distinct(head).as_py() > _DISTINCT_SHARE * len(head):
        return None
    enc = pc.dictionary_encode(a)
    texts = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    if texts.size > max(_SMALL, _DISTINCT_SHARE * n):
        return None
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.intp)
    kind, vals, keep = _typed_texts(texts, dec, explicit, large=n > _SMALL)
    if kind != "text":
        return vals[idx], keep
    na = np.fromiter((t in NA_TEXTS for t in texts), dtype=bool, count=texts.size)
    if not na.any():
        from dpstudio.engine.codes import remember

        remember(s, enc.indices, enc.dictionary)  # the column's codes: never hashed again
        return s.array, keep
    return s.mask(pd.Series(na[idx], index=s.index)).array, keep


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
    arr = raw.to_numpy(dtype=object, na_value="") if raw.shape[1] and not big else None
    for j, c in enumerate(raw.columns):
        if big:
            col = raw.iloc[:, j]
            got = _convert_distinct(col, dec, explicit)
            if got is None:
                got = _convert_large(col, dec, explicit)
            if got is not None:
                cols[str(c)], k = got
                if k:
                    keep[str(c)] = col.to_numpy(dtype=object, na_value="")
                continue
            r = col.to_numpy(dtype=object, na_value="")
        else:
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


def _ragged_error(name: str, line: int, got: int, expected: int, n_bad: int) -> InputError:
    return InputError(
        f"{name}, line {line}: {got} fields where the first row has {expected} "
        f"(ragged row; {n_bad} such line(s)). Fix those lines or check the separator."
    )


_WS_LUT = np.zeros(256, dtype=bool)
_WS_LUT[[9, 10, 13, 32]] = True  # blank-line bytes (a tab is a field when it is the separator)
_WS_LUT_TAB = _WS_LUT.copy()
_WS_LUT_TAB[9] = False
_FEW = 256  # at most this many suspect lines per chunk are looked at one by one


def _check_ragged_bytes(chunks, sep: str, name: str) -> None:
    """Refuse lines whose number of fields differs from the first line's, for files without
    quotes (vectorised, streamed over ``chunks`` of bytes; a bare CR ends a line as it does
    for the parser; a line of blanks only is skipped, as the parser skips it).

    Separators are counted per line by locating them between the line ends (no running sum
    over every byte); whether a line is blank is asked only of the lines whose count differs
    from the expected one (and of the first lines, until the first non-blank one).
    """
    qsep = ord(sep)
    lut = _WS_LUT_TAB if sep == "\t" else _WS_LUT
    blanks = bytes(np.flatnonzero(lut).astype(np.uint8).tolist())
    carry_seps, carry_nonblank = 0, False  # the unfinished line at the end of a chunk
    expected = None
    lines_before = 0
    bad_first, n_bad = None, 0
    for b in chunks:
        if not b:
            continue
        a = np.frombuffer(b, dtype=np.uint8)
        nxt = np.empty_like(a)
        nxt[:-1] = a[1:]
        nxt[-1] = 0
        ends = np.flatnonzero((a == 10) | ((a == 13) & (nxt != 10)))
        del nxt
        if ends.size:
            sp = np.flatnonzero(a == qsep)
            counts = np.diff(np.searchsorted(sp, ends), prepend=0)  # separators per line
            counts[0] += carry_seps
            starts = np.empty_like(ends)
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
            first_nonblank = carry_nonblank

            def real_one(i: int, b=b, starts=starts, ends=ends, first_nonblank=first_nonblank) -> bool:
                if i == 0 and first_nonblank:
                    return True
                return bool(b[int(starts[i]) : int(ends[i])].translate(None, blanks))

            def real_many(idx: np.ndarray, a=a, ends=ends, first_nonblank=first_nonblank) -> np.ndarray:
                cw = np.cumsum(~lut[a], dtype=np.int32)[ends]
                real = np.diff(cw, prepend=0) > 0
                real[0] = real[0] or first_nonblank
                return real[idx]

            if expected is None:  # the first non-blank line gives the width
                head = min(int(ends.size), _FEW)
                firsts = [i for i in range(head) if real_one(i)][:1]
                if not firsts and ends.size > head:
                    rest = np.flatnonzero(real_many(np.arange(ends.size)))
                    firsts = [int(rest[0])] if rest.size else []
                if firsts:
                    expected = int(counts[firsts[0]])
            if expected is not None:
                cand = np.flatnonzero(counts != expected)
                if cand.size:
                    if cand.size <= _FEW:
                        badi = np.array([i for i in cand.tolist() if real_one(i)], dtype=np.int64)
                    else:
                        badi = cand[real_many(cand)]
                    if badi.size:
                        i = int(badi[0])
                        if bad_first is None:
                            bad_first = (lines_before + i + 1, int(counts[i]))
                        n_bad += int(badi.size)
            last = int(ends[-1])
            carry_seps = int(sp.size - np.searchsorted(sp, last, side="right"))
            carry_nonblank = bool((~lut[a[last + 1 :]]).any())
        else:
            carry_seps += int(np.count_nonzero(a == qsep))
            carry_nonblank = carry_nonblank or bool((~lut[a]).any())
        lines_before += int(ends.size)
    if carry_nonblank:  # the last line has no line break
        if expected is None:
            expected = carry_seps
        elif carry_seps != expected:
            n_bad += 1
            if bad_first is None:
                bad_first = (lines_before + 1, carry_seps)
    if bad_first is not None:
        assert expected is not None  # a line is only counted as bad against an expected width
        raise _ragged_error(name, bad_first[0], bad_first[1] + 1, expected + 1, n_bad)


def _check_ragged_quoted(path: str, sep: str, encoding: str, name: str) -> None:
    """The same check for files with quoted fields, with the csv module's own rules (a
    separator or line break inside quotes belongs to the field; a short row is never padded).
    """
    expected = None
    bad_first, n_bad = None, 0
    with open(path, encoding=encoding, newline="", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=sep, strict=False)
        try:
            line = 1
            for row in reader:
                if row and any(f.strip() for f in row):
                    if expected is None:
                        expected = len(row)
                    elif len(row) != expected:
                        n_bad += 1
                        if bad_first is None:
                            bad_first = (line, len(row))
                line = reader.line_num + 1
        except csv.Error as exc:
            raise InputError(f"{name}, line {reader.line_num}: cannot be read as a table ({exc}).") from None
    if bad_first is not None:
        assert expected is not None  # a row is only counted as bad against an expected width
        raise _ragged_error(name, bad_first[0], bad_first[1], expected, n_bad)


def _byte_chunks(path: str, size: int = 16 * 1024 * 1024):
    """Chunks of a file, each extended by the following byte (to tell CR LF from a bare CR)."""
    with open(path, "rb") as fh:
        buf = fh.read(size)
        while buf:
            more = fh.read(size)
            if buf[-1:] == b"\r" and more[:1] == b"\n":
                buf += b"\n"
                more = more[1:]
            yield buf
            buf = more


def _has_quote(path: str) -> bool:
    return _scan(path)[0]


def _scan(path: str) -> tuple[bool, bool]:
    """(has a quote, has a NUL byte): one pass over the file."""
    quote = nul = False
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(16 * 1024 * 1024), b""):
            quote = quote or b'"' in block
            nul = nul or b"\x00" in block
            if quote and nul:
                break
    return quote, nul


def _check_ragged(
    path: str, sep: str, name: str, encoding: str = "latin-1", quoted: bool | None = None
) -> None:
    if _has_quote(path) if quoted is None else quoted:
        _check_ragged_quoted(path, sep, encoding, name)
    else:
        _check_ragged_bytes(_byte_chunks(path), sep, name)


#: files from this size on are parsed by Arrow's CSV reader when they allow it (tests set 0)
_ARROW_MIN_BYTES = 1024 * 1024
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
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(
                block_size=4 * 1024 * 1024, encoding=codec, autogenerate_column_names=header is None
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
        schema = reader.schema
        if schema.names != keys or not all(pa.types.is_large_string(t) for t in schema.types):
            return None
        batches, done = [], 0
        for batch in reader:
            batches.append(batch)
            if progress:  # bytes parsed so far: the texts and a separator / line break per field
                done += sum(col.buffers()[2].size if col.buffers()[2] else 0 for col in batch.columns)
                done += batch.num_rows * batch.num_columns
                progress(min(done / size, 1.0) * 0.9)
        table = pa.Table.from_batches(batches, schema=schema)
    except (pa.ArrowException, UnicodeError, LookupError, OSError):
        return None
    del batches
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
    if os.path.getsize(path) == 0:
        raise InputError(f"{name}: the file is empty.")
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


_SPSS_WHOLE = re.compile(r"^(F|N|COMMA|DOT|DOLLAR|PCT)\d+(\.0)?$", re.I)
_STATA_INT = ("int8", "int16", "int32", "int64")


def _declared_types(df: pd.DataFrame, rmeta: Any, fmt: str) -> dict:
    """The types a .sav/.dta file declares for its numeric columns: SPSS's measure level
    (nominal → categorical, ordinal → ordinal) or a format without decimals (F3, F8.0 →
    integer); Stata's integer storage types (byte, int, long → integer).  Read from the
    file's dictionary, never from the values.
    """
    out: dict[str, str] = {}
    measure = getattr(rmeta, "variable_measure", None) or {}
    formats = getattr(rmeta, "original_variable_types", None) or {}
    storage = getattr(rmeta, "readstat_variable_types", None) or {}
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            continue
        c = str(c)
        if fmt == "sav":
            m = str(measure.get(c, "")).lower()
            if m in ("nominal", "ordinal"):
                out[c] = "categorical" if m == "nominal" else "ordinal"
            elif _SPSS_WHOLE.match(str(formats.get(c, ""))):
                out[c] = "integer"
        elif fmt == "dta" and str(storage.get(c, "")) in _STATA_INT:
            out[c] = "integer"
    return out


def _whole_numbers_as_integers(df: pd.DataFrame) -> pd.DataFrame:
    """SPSS stores every number as a double: a column of whole numbers without a missing
    value is read as int64 (PID shows 0–6, not 0.0–6.0; issue 24 §2).  The values are the
    same; a column with missing values stays float64 (NaN).
    """
    conv = {}
    for c in df.columns:
        s = df[c]
        if s.dtype != np.float64:
            continue
        v = s.to_numpy()
        if v.size and np.isfinite(v).all() and (np.abs(v) < 2.0**53).all() and (v == np.round(v)).all():
            conv[c] = v.astype(np.int64)
    if not conv:
        return df
    out = df.copy(deep=False)
    for c, v in conv.items():
        out[c] = v
    return out


def _numeric_columns(df: pd.DataFrame) -> tuple:
    return tuple(
        str(c)
        for c in df.columns
        if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    )


_LEADING_NUMBER = re.compile(r"^\s*[\[(]?\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def generalised_codes(s: pd.Series) -> tuple[pd.Series, dict]:
    """A generalised column (texts such as ``30-39``, ``[0.5, 1)``, ``*``) as numeric codes with
    value labels, for formats whose variables are typed (SPSS, Stata; issue 24 §1): ``*`` (the
    top of a hierarchy: nothing released) becomes a missing value, every other text a code
    1, 2, … in the order of its leading number (then of the text), labelled with the text.

    >>> codes, labels = generalised_codes(pd.Series(["40-49", "*", "30-39", "40-49"]))
    >>> codes.tolist(), labels
    ([2.0, nan, 1.0, 2.0], {1.0: '30-39', 2.0: '40-49'})
    """
    txt = s.astype("object").where(s.notna(), None)
    uniq = sorted({str(v) for v in txt if v is not None and str(v) != "*"})

    def key(t: str) -> tuple:
        m = _LEADING_NUMBER.match(t)
        return (0, float(m.group(1)), t) if m else (1, 0.0, t)

    uniq.sort(key=key)
    code = {t: float(i + 1) for i, t in enumerate(uniq)}
    out = pd.Series(
        [code.get(str(v), np.nan) if v is not None else np.nan for v in txt], index=s.index, dtype=np.float64
    )
    return out, {c: t for t, c in code.items()}


def _typed_for_labels(df: pd.DataFrame, meta: TableMeta | None) -> tuple[pd.DataFrame, dict]:
    """``df`` with every column that was numeric in the input but is text in the release (a
    generalised k-quasi) turned back into numeric codes, and those codes' value labels (they
    replace the input's labels of that column).
    """
    if meta is None or not meta.numeric:
        return df, {}
    conv = [
        c
        for c in df.columns
        if c in meta.numeric
        and not pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_datetime64_any_dtype(df[c])
    ]
    if not conv:
        return df, {}
    out = df.copy(deep=False)
    labels = {}
    for c in conv:
        out[c], labels[c] = generalised_codes(df[c])
    return out, labels


# --------------------------------------------------------------------- writing


def relabelled(meta: TableMeta | None, merged: dict | None) -> TableMeta | None:
    """``meta`` with the value labels of merged codes (``merged``: column -> {new code: [old
    codes]}, as text, e.g. a recoding's ``1+2:12``): the new code is labelled with the old
    codes' labels joined by " + " (an old code without a label by its number), the old codes'
    labels that no longer occur are dropped.  Columns without labels stay without.
    """
    if meta is None or not merged:
        return meta
    import copy

    out = copy.copy(meta)
    out.value_labels = {c: dict(v) for c, v in meta.value_labels.items()}
    for c, groups in merged.items():
        labels = out.value_labels.get(c)
        if not labels:
            continue
        by_text = {_code_text(k): k for k in labels}
        for new, olds in groups.items():
            parts = [str(labels[by_text[o]]) if o in by_text else o for o in olds]
            for o in olds:
                if o in by_text and o != new:
                    labels.pop(by_text[o], None)
            key = by_text.get(new, float(new) if _code_text(float(new)) == new else new)
            labels[key] = " + ".join(parts)
    return out


def _code_text(k) -> str:
    """A value-label code as text (1, 1.0 and '1' alike)."""
    try:
        f = float(k)
    except (TypeError, ValueError):
        return str(k)
    return str(int(f)) if f == int(f) and abs(f) < 1e15 else repr(f)


def _categorical_codes(df: pd.DataFrame, vl: dict) -> pd.DataFrame:
    """Pandas categorical columns as codes 1, 2, … (missing stays missing) with their
    categories as value labels in ``vl`` (SPSS/Stata: an ordered categorical such as recoded
    intervals keeps its order in the codes); other columns untouched.
    """
    cats = [c for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)]
    if not cats:
        return df
    df = df.copy(deep=False)
    for c in cats:
        s = df[c]
        codes = s.cat.codes.to_numpy().astype(np.float64) + 1.0
        codes[codes == 0] = np.nan
        df[c] = codes
        vl[c] = {float(i + 1): str(lab) for i, lab in enumerate(s.cat.categories)}
    return df


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
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    v = a.to_numpy(zero_copy_only=False)
    nan = np.isnan(v)
    t = pc.cast(pa.array(v, mask=nan if nan.any() else None), pa.string())
    # a whole number: Arrow writes "12", numpy "12.0" (no "." and no exponent, finite)
    whole = pc.invert(pc.match_substring_regex(t, r"[.en]"))
    t = pc.if_else(whole, pc.binary_join_element_wise(t, pa.scalar(".0"), ""), t)
    with np.errstate(invalid="ignore"):
        m = np.abs(v)
        lo, hi = _FLOAT_ARROW_RANGE
        other = np.isfinite(v) & (v != 0) & ((m < lo) | (m >= hi))
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
    yield out((sep.join(names) + lt).encode("utf-8"))
    for a in range(0, table.num_rows, block_rows):
        sink = pa.BufferOutputStream()
        part = table.slice(a, block_rows)
        for j in floats:
            part = part.set_column(j, f"c{j}", _float_texts(part.column(j).combine_chunks()))
        try:
            pcsv.write_csv(part, sink, opts)
        except pa.ArrowInvalid:
            raise _NeedsPandas from None
        yield out(sink.getvalue())
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
    as inputs.
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
                    try:
                        with open(tmp, "wb") as fh:
                            for b in blocks:
                                fh.write(b)
                    except _NeedsPandas:
                        blocks = None  # pandas writes the file (over the partial one)
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


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (streamed)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


__all__ = [
    "TableMeta",
    "ImplausibleShape",
    "sniff_csv",
    "read_table",
    "write_table",
    "atomic_write",
    "same_file",
    "check_output_not_input",
    "stage_write",
    "commit_write",
    "discard",
    "remove_stale_temps",
    "temp_pattern",
    "file_sha256",
    "file_format",
    "file_mode",
    "PRIVATE_MODE",
]
