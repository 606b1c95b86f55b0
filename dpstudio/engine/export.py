"""Export a release: the protected file, its public metadata, extra tables, the report.

What is written is exactly what may be published: the protected data (identifiers
already dropped by the engine), ``<stem>.metadata.json`` with
``result.public_metadata()`` plus SHA-256 checksums of the input and output files,
extra released tables (``<stem>.<name>.<ext>``, e.g. Anatomy's two tables) and the
HTML report.  Never the seed, never original values.  Every file is written
atomically and none may be the input file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from dpstudio.engine.errors import InputError
from dpstudio.engine.io import TableMeta, atomic_write, file_format, file_sha256, same_file, write_table

#: Keys that must never appear in released metadata.
FORBIDDEN_KEYS = ("seed", "rng", "random_state", "entropy")

_EXT = {"csv": ".csv", "xlsx": ".xlsx", "parquet": ".parquet", "dta": ".dta", "sav": ".sav"}


def sidecar_paths(out_path: str | os.PathLike, table_names=(), fmt: str | None = None) -> dict[str, str]:
    """Where :func:`export_release` writes each file for ``out_path``."""
    out = Path(os.path.abspath(str(out_path)))
    f = file_format(out, fmt)
    ext = out.suffix if out.suffix else _EXT.get(f, "." + f)
    stem = out.with_suffix("") if out.suffix else out
    paths = {"data": str(out), "metadata": f"{stem}.metadata.json"}
    for name in table_names:
        safe = re.sub(r"[^\w.-]+", "_", str(name)).strip("._") or "table"
        paths[f"table:{name}"] = f"{stem}.{safe}{ext}"
    return paths


def _strip_forbidden(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_forbidden(v) for k, v in obj.items() if str(k).lower() not in FORBIDDEN_KEYS}
    if isinstance(obj, list):
        return [_strip_forbidden(v) for v in obj]
    return obj


def export_release(result, out_path: str | os.PathLike, *, input_path: str | os.PathLike | None = None,
                   fmt: str | None = None, input_meta: TableMeta | None = None,
                   report_html: str | None = None, report_path: str | os.PathLike | None = None
                   ) -> dict[str, str]:
    """Write the release of ``result`` next to ``out_path``; return {kind: path}.

    Parameters
    ----------
    result : ProtectionResult
        What :func:`dpstudio.engine.protect` returned.
    out_path : path
        The protected file (format from ``fmt`` or its extension).  Must not be the input.
    input_path : path, optional
        The input file (for its checksum, and so that it is never overwritten);
        defaults to ``input_meta.path``.
    input_meta : TableMeta, optional
        Read conventions of the input (CSV separator/decimal/encoding, Stata/SPSS labels).
    report_html : str, optional
        The HTML report text (:func:`dpstudio.engine.report.render_html`), written to
        ``report_path`` (default ``<stem>.report.html``).

    Kinds in the returned dict: ``data``, ``metadata``, ``table:<name>``, ``report``
    (no ``data`` in the 'separate-tables' layout: one ``table:<attribute>`` each).
    """
    if input_path is None and input_meta is not None:
        input_path = input_meta.path
    guard = tuple(str(p) for p in (input_path,) if p)
    tables = dict(getattr(result, "tables", {}) or {})
    paths = sidecar_paths(out_path, tables.keys(), fmt)
    if report_html is not None:
        out = Path(paths["data"])
        paths["report"] = os.path.abspath(str(report_path)) if report_path else \
            str(out.with_suffix("")) + ".report.html"
    # refuse before writing anything
    for kind, p in paths.items():
        for g in guard:
            if same_file(p, g):
                raise InputError(f"Refusing to write the {kind} file over the input file {g}: "
                                 "choose another output name (the input is never overwritten).")
    written: dict[str, str] = {}
    f = file_format(paths["data"], fmt)
    # layout 'separate-tables': only the one-column tables are released (their rows do not
    # belong together); the side-by-side frame in result.data is not written
    separate = (getattr(result, "info", None) or {}).get("layout") == "separate-tables"
    if not separate:
        written["data"] = write_table(result.data, paths["data"], f, input_meta, protect=guard)
    for name, table in tables.items():
        key = f"table:{name}"
        written[key] = write_table(table, paths[key], f, input_meta, protect=guard)

    meta = dict(result.public_metadata())
    meta["files"] = {
        "output": ({"name": None, "format": f, "layout": "separate-tables"} if separate else
                   {"name": Path(written["data"]).name, "format": f,
                    "sha256": file_sha256(written["data"])}),
        "tables": {name: {"name": Path(written[f"table:{name}"]).name,
                          "sha256": file_sha256(written[f"table:{name}"])} for name in tables},
    }
    if input_path and os.path.exists(str(input_path)):
        meta["files"]["input"] = {"name": Path(str(input_path)).name,
                                  "sha256": file_sha256(str(input_path))}
    meta = _strip_forbidden(meta)
    text = json.dumps(meta, indent=2, ensure_ascii=False, allow_nan=True, default=str)

    def write_json(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")

    written["metadata"] = atomic_write(paths["metadata"], write_json, protect=guard)
    if report_html is not None:
        def write_report(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(report_html)

        written["report"] = atomic_write(paths["report"], write_report, protect=guard)
    return written


__all__ = ["export_release", "sidecar_paths", "FORBIDDEN_KEYS"]
