"""File formats: the names and extensions read and written, and :class:`TableMeta`, what
reading a file learnt (its conventions, labels and declared types) for writing the release
in the same conventions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpstudio.engine.errors import InputError

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
#: Encodings whose text is not ASCII-compatible (read through a UTF-8 copy).
WIDE_ENCODINGS = ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")


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
