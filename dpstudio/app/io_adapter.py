"""The app's only door to files: delegates to ``dpstudio.engine.io`` / ``export`` / ``report``.

Those engine modules are being written in parallel; until one is importable a minimal pandas
fallback keeps the app usable.  Every fallback is marked ``# FALLBACK`` and is removed once the
engine module exists.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import os
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from dpstudio import engine

FORMATS = {  # format id -> (label, extensions)
    "csv": ("CSV (comma/semicolon separated)", (".csv", ".txt", ".tsv", ".tab")),
    "xlsx": ("Excel workbook", (".xlsx", ".xls")),
    "parquet": ("Parquet", (".parquet", ".pq")),
    "dta": ("Stata", (".dta",)),
    "sav": ("SPSS", (".sav", ".zsav")),
}


def _engine_module(name: str):
    try:
        return importlib.import_module(f"dpstudio.engine.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"dpstudio.engine.{name}":
            return None
        raise


def format_of(path: str | os.PathLike) -> str:
    ext = Path(path).suffix.lower()
    for fmt, (_, exts) in FORMATS.items():
        if ext in exts:
            return fmt
    return "csv"


def open_filter() -> str:
    allx = " ".join(f"*{e}" for _, exts in FORMATS.values() for e in exts)
    parts = [f"All data files ({allx})"]
    parts += [f"{label} ({' '.join('*' + e for e in exts)})" for label, exts in FORMATS.values()]
    parts.append("All files (*)")
    return ";;".join(parts)


# --------------------------------------------------------------------------- reading
def sniff_csv(path: str) -> dict:
    """Delimiter, encoding, decimal mark, header flag and a preview of a CSV file."""
    mod = _engine_module("io")
    if mod is not None and hasattr(mod, "sniff_csv"):
        return dict(mod.sniff_csv(path))
    # FALLBACK
    raw = Path(path).read_bytes()[:65536]
    enc = "utf-8"
    for enc in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            text = raw.decode(enc)
            break
        except UnicodeDecodeError:
            continue
    try:
        sep = csv.Sniffer().sniff(text.split("\n", 20)[0] + "\n", delimiters=",;\t|").delimiter
    except csv.Error:
        sep = ","
    decimal = "," if sep == ";" and "," in text else "."
    return {"sep": sep, "encoding": enc, "decimal": decimal, "header": True,
            "preview": "\n".join(text.splitlines()[:20])}


def preview_frame(path: str, sep: str, encoding: str, decimal: str, nrows: int = 50
                  ) -> pd.DataFrame:
    """The first rows of a CSV with the given options (for the preview dialog)."""
    mod = _engine_module("io")
    if mod is not None and hasattr(mod, "preview_csv"):
        return mod.preview_csv(path, sep=sep, encoding=encoding, decimal=decimal, nrows=nrows)
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    return pd.read_csv(io.BytesIO(head), sep=sep, encoding=encoding, decimal=decimal,
                       nrows=nrows, on_bad_lines="skip", engine="python")


def read_table(path: str, *, sep: str | None = None, encoding: str | None = None,
               decimal: str | None = None, sheet: Any = None,
               progress: Callable[[float], None] | None = None) -> tuple[pd.DataFrame, Any]:
    mod = _engine_module("io")
    if mod is not None and hasattr(mod, "read_table"):
        return mod.read_table(path, sep=sep, encoding=encoding, decimal=decimal, sheet=sheet,
                              progress=progress)
    # FALLBACK
    fmt = format_of(path)
    try:
        if fmt == "csv":
            size = max(os.path.getsize(path), 1)
            chunks = []
            with open(path, "rb") as fh:
                reader = pd.read_csv(fh, sep=sep or ",", encoding=encoding or "utf-8",
                                     decimal=decimal or ".", chunksize=100_000)
                for ch in reader:
                    chunks.append(ch)
                    if progress:
                        progress(min(fh.tell() / size, 0.99))
            df = pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()
        elif fmt == "xlsx":
            df = pd.read_excel(path, sheet_name=sheet or 0)
        elif fmt == "parquet":
            df = pd.read_parquet(path)
        elif fmt == "dta":
            df = pd.read_stata(path)
        else:
            df = pd.read_spss(path)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise engine.InputError(f"Cannot read {Path(path).name}: {exc}".splitlines()[0]) from None
    if progress:
        progress(1.0)
    return df, {"format": fmt, "sep": sep, "encoding": encoding, "decimal": decimal}


# --------------------------------------------------------------------------- writing
def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_release(result, out_path: str, *, input_path: str | None = None,
                   fmt: str | None = None, input_meta: Any = None,
                   report_html: str | None = None) -> dict[str, str]:
    """Write the protected file, its public metadata (and the report); return the paths."""
    out = Path(out_path)
    if input_path and out.resolve() == Path(input_path).resolve():
        raise engine.ParameterError("The protected file cannot overwrite the input file. "
                                    "Choose another name.")
    mod = _engine_module("export")
    if mod is not None and hasattr(mod, "export_release"):
        return mod.export_release(result, str(out), input_path=input_path, fmt=fmt,
                                  input_meta=input_meta, report_html=report_html)
    # FALLBACK
    fmt = fmt or format_of(out)
    tmp = out.with_name(out.name + ".part")
    df = result.data
    if fmt == "csv":
        df.to_csv(tmp, index=False)
    elif fmt == "xlsx":
        df.to_excel(tmp, index=False, engine="openpyxl")
    elif fmt == "parquet":
        df.to_parquet(tmp, index=False)
    elif fmt == "dta":
        df.to_stata(tmp, write_index=False)
    else:
        import pyreadstat
        pyreadstat.write_sav(df, str(tmp))
    os.replace(tmp, out)
    meta = result.public_metadata()
    meta["output_file"] = out.name
    meta["output_file_sha256"] = _sha256(str(out))
    if input_path and os.path.exists(input_path):
        meta["input_file"] = Path(input_path).name
        meta["input_file_sha256"] = _sha256(input_path)
    paths = {"data": str(out)}
    mpath = out.with_name(out.stem + ".metadata.json")
    mtmp = mpath.with_name(mpath.name + ".part")
    mtmp.write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(mtmp, mpath)
    paths["metadata"] = str(mpath)
    if report_html is not None:
        rpath = out.with_name(out.stem + ".report.html")
        rtmp = rpath.with_name(rpath.name + ".part")
        rtmp.write_text(report_html, encoding="utf-8")
        os.replace(rtmp, rpath)
        paths["report"] = str(rpath)
    return paths


def render_report(result, measures: dict, *, curves: list[tuple[str, bytes]] | None = None,
                  input_name: str | None = None, chosen: dict | None = None) -> str:
    mod = _engine_module("report")
    if mod is not None and hasattr(mod, "render_html"):
        return mod.render_html(result, measures, curves=curves or [], input_name=input_name,
                               chosen=chosen)
    # FALLBACK: a plain report until dpstudio.engine.report exists
    import base64
    import html

    meta = result.public_metadata()
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in meta["parameters"].items())
    mrows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in measures.items() if not isinstance(v, (dict, list)))
    imgs = "".join(f"<h3>{html.escape(t)}</h3><img src='data:image/png;base64,"
                   f"{base64.b64encode(b).decode()}' style='max-width:100%'>"
                   for t, b in (curves or []))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>dpstudio report</title>"
            f"</head><body><h1>{html.escape(meta['method_name'])}</h1>"
            f"<p>{html.escape(meta['guarantee'])}</p><p>Input: {html.escape(input_name or '')}</p>"
            f"<h2>Parameters</h2><table>{rows}</table><h2>Measures</h2><table>{mrows}</table>"
            f"{imgs}</body></html>")
