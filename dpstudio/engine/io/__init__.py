r"""Reading and writing tables: CSV/TSV/TXT, Excel, Parquet, Stata, SPSS, SAS (read only).

Every problem with a file becomes an :class:`~dpstudio.engine.errors.InputError`
naming the file (and the line, for text files).  :func:`write_table` only serialises a
table: the file itself is written by the one guarded writer,
:mod:`dpstudio.engine.safe_write` (checks before any work, atomic, never over an input).

One module per job; this package re-exports their public names
(``from dpstudio.engine.io import read_table`` and ``from dpstudio.engine import io`` keep
working).  A private name (``_raw_frame``, ``_CSV_BLOCK_ROWS``, ...) lives only in its own
module: patch it there, where it is looked up.

- :mod:`~dpstudio.engine.io.formats`: format names and extensions, :class:`TableMeta`
- :mod:`~dpstudio.engine.io.files`: settings files (regular files only, size and nesting
  limits), :func:`file_sha256`
- :mod:`~dpstudio.engine.io.dialect`: how a text table is written (encoding, separator)
- :mod:`~dpstudio.engine.io.ragged`: the ragged-row check of a CSV file
- :mod:`~dpstudio.engine.io.convert`: typing a table read as texts
- :mod:`~dpstudio.engine.io.labels`: SPSS/Stata declared types and value labels
- :mod:`~dpstudio.engine.io.reading`: :func:`sniff_csv`, :func:`read_table`
- :mod:`~dpstudio.engine.io.writing`: :func:`write_table`

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

from dpstudio.engine.io.convert import NA_TEXTS, check_decimal_ambiguity
from dpstudio.engine.io.dialect import ImplausibleShape
from dpstudio.engine.io.files import (
    MAX_HIERARCHY_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_INT_DIGITS,
    MAX_SETTINGS_BYTES,
    check_regular_file,
    file_sha256,
    json_depth,
    loads_json,
    read_json_file,
    read_small_file,
)
from dpstudio.engine.io.formats import (
    ENCODINGS,
    FORMATS,
    SEPARATORS,
    TEXT_EXT,
    WIDE_ENCODINGS,
    WRITE_FORMATS,
    TableMeta,
    file_format,
)
from dpstudio.engine.io.labels import generalised_codes, relabelled
from dpstudio.engine.io.reading import MAX_SNIFFED_COLUMNS, read_table, sniff_csv
from dpstudio.engine.io.writing import write_table

# the writing half lives in safe_write (the one guarded writer); re-exported for old callers
from dpstudio.engine.safe_write import (
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
    # also public (used across dpstudio)
    "WritePlan",
    "WriteRefused",
    "read_small_file",
    "read_json_file",
    "loads_json",
    "json_depth",
    "check_regular_file",
    "MAX_SETTINGS_BYTES",
    "MAX_HIERARCHY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_INT_DIGITS",
    "MAX_SNIFFED_COLUMNS",
    "TEXT_EXT",
    "FORMATS",
    "WRITE_FORMATS",
    "SEPARATORS",
    "ENCODINGS",
    "WIDE_ENCODINGS",
    "NA_TEXTS",
    "check_decimal_ambiguity",
    "generalised_codes",
    "relabelled",
]
