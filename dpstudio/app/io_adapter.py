"""The app's door to files: thin wrappers over ``dpstudio.engine.io`` / ``export`` / ``report``.

No I/O logic lives here: only what the dialogs need (labels, file-dialog filters, the default
export format) on top of the engine functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from dpstudio.engine import export as engine_export
from dpstudio.engine import io as engine_io
from dpstudio.engine import report as engine_report
from dpstudio.engine import safe_write as engine_safe_write

LABELS = {
    "csv": "CSV (comma/semicolon separated)",
    "xlsx": "Excel workbook",
    "xls": "Excel 97",
    "parquet": "Parquet",
    "dta": "Stata",
    "sav": "SPSS",
    "sas7bdat": "SAS",
}


def _exts(fmt: str) -> tuple[str, ...]:
    exts = tuple(e for e, f in engine_io.FORMATS.items() if f == fmt)
    return tuple(sorted(exts, key=lambda e: (e != "." + fmt, e != ".csv", e)))


#: writable formats: id -> (label, extensions; the first is the default)
FORMATS = {f: (LABELS.get(f, f), _exts(f) or ("." + f,)) for f in engine_io.WRITE_FORMATS}


def format_of(path: str | os.PathLike) -> str:
    """The format of ``path`` by its extension ('csv' if unknown)."""
    try:
        return engine_io.file_format(path)
    except Exception:  # noqa: BLE001 - unknown extension: treat as text
        return "csv"


def export_format_for(input_path: str | None) -> str:
    """The release format: the input's when it can be written, else CSV."""
    f = format_of(input_path) if input_path else "csv"
    return f if f in FORMATS else "csv"


def open_filter() -> str:
    readable = sorted(engine_io.FORMATS)
    parts = [f"All data files ({' '.join('*' + e for e in readable)})"]
    by_fmt: dict[str, list[str]] = {}
    for e, f in engine_io.FORMATS.items():
        by_fmt.setdefault(f, []).append("*" + e)
    parts += [f"{LABELS.get(f, f)} ({' '.join(exts)})" for f, exts in by_fmt.items()]
    parts.append("All files (*)")
    return ";;".join(parts)


def sniff_csv(path: str) -> dict:
    """Delimiter, encoding, decimal mark, header flag and a preview DataFrame."""
    return engine_io.sniff_csv(path)


def sniff_for_open(path: str) -> dict:
    """:func:`sniff_csv` for the app's open path (run in the load worker): an implausible
    guessed shape is returned as ``{"implausible": {sep, encoding, n_columns, widths}}`` (to be
    questioned before any table is built) instead of an error.
    """
    try:
        return engine_io.sniff_csv(path)
    except engine_io.ImplausibleShape as exc:
        return {
            "implausible": {
                "sep": exc.sep,
                "encoding": exc.encoding,
                "n_columns": exc.n_columns,
                "widths": dict(exc.widths),
                "message": str(exc),
            }
        }


def plausible_sep(shape: dict) -> str:
    """The usual separator giving the first line the most columns below the implausible
    count (the guessed one when none does).
    """
    ok = {s: w for s, w in shape.get("widths", {}).items() if 1 < w <= engine_io.MAX_SNIFFED_COLUMNS}
    return max(ok, key=lambda s: ok[s]) if ok else shape["sep"]


def preview_frame(path: str, sep: str, encoding: str, decimal: str, nrows: int = 50) -> pd.DataFrame:
    """The first rows of a CSV as they will be read with these options."""
    return engine_io.sniff_csv(path, nrows=nrows, sep=sep, encoding=encoding, decimal=decimal)["preview"]


def read_table(
    path: str,
    *,
    sep: str | None = None,
    encoding: str | None = None,
    decimal: str | None = None,
    sheet: Any = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[pd.DataFrame, Any]:
    return engine_io.read_table(
        path, sep=sep, encoding=encoding, decimal=decimal, sheet=sheet, progress=progress
    )


def release_plan(
    out_path: str,
    *,
    inputs=(),
    fmt: str | None = None,
    release_note: bool = True,
    assessment: bool = False,
    audit: bool = True,
    dask: bool = False,
):
    """The CHECKED write plan of an export (every file it writes, against every file the
    project reads), made before any work; raises the engine's one-line DPStudioError.
    ``dask``: the whole-file release folder written on Dask (sample mode).
    """
    if dask:
        from dpstudio.engine.backends import dask_backend

        plan = engine_safe_write.WritePlan(inputs=inputs)
        return dask_backend.release_plan(out_path, plan=plan)
    return engine_export.release_plan(
        out_path,
        inputs=inputs,
        fmt=fmt,
        release_note=release_note,
        assessment=assessment,
        audit=audit,
    )


def release_refusal(out_path: str, **kw) -> str:
    """The one-line refusal of :func:`release_plan` ("" when every file may be written)."""
    try:
        release_plan(out_path, **kw)
    except ValueError as exc:  # DPStudioError: WriteRefused, ParameterError
        return str(exc)
    return ""


def export_release(
    result,
    out_path: str,
    *,
    input_path: str | None = None,
    fmt: str | None = None,
    input_meta: Any = None,
    release_note: bool = True,
    assessment_html: str | None = None,
    audit: bool = True,
    plan: Any = None,
) -> dict[str, str]:
    """Public: protected file + ``<stem>.metadata.json`` (+ ``<stem>.release-note.html``);
    private (0600): ``<stem>.private.json`` (+ ``<stem>.assessment.private.html``).
    Through the one guarded writer (``plan``: from :func:`release_plan`, checked before the
    work): atomically, never over an input or a FIFO/device/folder/link/read-only file.
    """
    return engine_export.export_release(
        result,
        out_path,
        input_path=input_path,
        fmt=fmt,
        input_meta=input_meta,
        release_note=release_note,
        assessment_html=assessment_html,
        audit=audit,
        plan=plan,
    )


def render_assessment(
    result,
    measures: dict,
    *,
    curves: list[tuple[str, bytes]] | None = None,
    input_name: str | None = None,
    chosen: dict | None = None,
) -> str:
    """The PRIVATE assessment report (measures against the original): never publish it."""
    return engine_report.render_assessment(
        result, measures, curves=curves or [], input_name=input_name, chosen=chosen
    )


#: The one never-overwrite-the-input check (raises InputError naming both paths).
check_output_not_input = engine_io.check_output_not_input


def stem_with(path: str | Path, suffix: str, fmt: str) -> Path:
    p = Path(path)
    return p.with_name(p.stem + suffix + FORMATS[fmt][1][0])
