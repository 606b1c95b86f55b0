"""How a text table is written (the guesses :func:`~dpstudio.engine.io.reading.sniff_csv`
makes): text or binary content, the encoding (UTF-16/32 read through a UTF-8 copy), the
separator, the number forms that tell the decimal mark, and the check of the options given.
"""

from __future__ import annotations

import csv
import os
import re
import sys
import tempfile
from pathlib import Path

from dpstudio.engine.errors import InputError
from dpstudio.engine.io.formats import SEPARATORS

# fields longer than the csv module's default 131,072 characters are legal (a free-text field)
_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
if csv.field_size_limit() < _FIELD_LIMIT:
    csv.field_size_limit(_FIELD_LIMIT)


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
