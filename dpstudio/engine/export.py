"""Export a release: the public files to publish and the private files to keep.

Public (publish them; normal permissions, i.e. 0666 minus the umask, e.g. 0644):

* the protected data (identifiers already dropped by the engine), ``<stem>.<ext>``;
* extra released tables, ``<stem>.<name>.<ext>`` (e.g. Anatomy's two tables);
* ``<stem>.metadata.json``: :meth:`ProtectionResult.public_metadata` plus the digests of the
  *released* files -- nothing computed from the original data (no input name, digest, size
  or record count, no count of dropped records, no data-dependent warning);
* optionally ``<stem>.release-note.html`` (:func:`dpstudio.engine.report.render_release_note`).

Private (keep them internal; owner-only permissions 0600, "private" in the name):

* ``<stem>.private.json``: the audit trail (input file name and SHA-256, records in the input,
  records dropped or suppressed, data-dependent notes, software version, time) -- never the seed;
* optionally ``<stem>.assessment.private.html``
  (:func:`dpstudio.engine.report.render_assessment`: measures against the original).

Every file is written atomically and none may be the input file.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.io import TableMeta, atomic_write, file_format, file_sha256, same_file, write_table

#: Keys that must never appear in released metadata nor in the audit trail.
FORBIDDEN_KEYS = ("seed", "rng", "random_state", "entropy")

#: Kinds of file (keys of :func:`export_release`'s result) that may be published.
PUBLIC_KINDS = ("data", "metadata", "release_note")  # + "table:<name>"
#: Kinds of file that must stay internal (written 0600).
PRIVATE_KINDS = ("private", "assessment")

_EXT = {"csv": ".csv", "xlsx": ".xlsx", "parquet": ".parquet", "dta": ".dta", "sav": ".sav"}


def is_public_kind(kind: str) -> bool:
    return kind in PUBLIC_KINDS or kind.startswith("table:")


def sidecar_paths(out_path: str | os.PathLike, table_names=(), fmt: str | None = None) -> dict[str, str]:
    """Where :func:`export_release` writes each file for ``out_path`` (by default)."""
    out = Path(os.path.abspath(str(out_path)))
    f = file_format(out, fmt)
    ext = out.suffix if out.suffix else _EXT.get(f, "." + f)
    stem = out.with_suffix("") if out.suffix else out
    paths = {"data": str(out), "metadata": f"{stem}.metadata.json"}
    for name in table_names:
        safe = re.sub(r"[^\w.-]+", "_", str(name)).strip("._") or "table"
        paths[f"table:{name}"] = f"{stem}.{safe}{ext}"
    paths["release_note"] = f"{stem}.release-note.html"
    paths["private"] = f"{stem}.private.json"
    paths["assessment"] = f"{stem}.assessment.private.html"
    return paths


def marked_private(path: str | os.PathLike) -> bool:
    """True when the file name says it is private ('private' or 'internal' in the name)."""
    name = Path(str(path)).name.lower()
    return "private" in name or "internal" in name


def _strip_forbidden(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_forbidden(v) for k, v in obj.items() if str(k).lower() not in FORBIDDEN_KEYS}
    if isinstance(obj, list):
        return [_strip_forbidden(v) for v in obj]
    return obj


def audit_trail(result, *, input_path: str | os.PathLike | None = None,
                written: dict[str, str] | None = None) -> dict:
    """The PRIVATE audit trail of a release (what ``<stem>.private.json`` holds).

    Facts about the original data that must not be published: the input's name and digest,
    its record count, the records dropped (missing values) or not released by the method,
    the data-dependent notes.  Never the seed.
    """
    from dpstudio import __version__

    orig = getattr(result, "original", None)
    dropped = len(getattr(result, "dropped_rows", []) or [])
    trail: dict[str, Any] = {
        "warning": "PRIVATE audit trail: do not publish. It describes the original data "
                   "(input digest, record counts); keep it with the project file.",
        "software": "dpstudio",
        "software_version": __version__,
        "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "method": result.method,
        "input": None,
        "records_in_input": (len(orig) + dropped) if orig is not None else None,
        "records_dropped_for_missing_values": dropped,
        "records_not_released_by_method": (len(orig) - len(result.data)) if orig is not None else None,
        "records_released": int(len(result.data)),
        "private_notes": [str(w) for w in result.private_notes] if hasattr(result, "private_notes")
        else [str(w) for w in getattr(result, "warnings", [])],
        "public_warnings": [str(w) for w in getattr(result, "public_warnings", []) or []],
    }
    if input_path and os.path.exists(str(input_path)):
        p = Path(str(input_path))
        trail["input"] = {"name": p.name, "path": str(p.resolve()), "bytes": p.stat().st_size,
                          "sha256": file_sha256(str(p))}
    if written:
        trail["files"] = {k: {"name": Path(v).name,
                              "published": is_public_kind(k),
                              **({"sha256": file_sha256(v)} if is_public_kind(k) and k != "release_note"
                                 else {})}
                          for k, v in written.items()}
    return _strip_forbidden(trail)


def export_release(result, out_path: str | os.PathLike, *, input_path: str | os.PathLike | None = None,
                   fmt: str | None = None, input_meta: TableMeta | None = None,
                   release_note: bool | str | os.PathLike = False,
                   assessment_html: str | None = None,
                   assessment_path: str | os.PathLike | None = None,
                   audit: bool = True) -> dict[str, str]:
    """Write the release of ``result`` next to ``out_path``; return {kind: path}.

    Parameters
    ----------
    result : ProtectionResult
        What :func:`dpstudio.engine.protect` returned.
    out_path : path
        The protected file (format from ``fmt`` or its extension).  Must not be the input.
    input_path : path, optional
        The input file (its digest goes to the private audit trail only, and it is never
        overwritten); defaults to ``input_meta.path``.
    input_meta : TableMeta, optional
        Read conventions of the input (CSV separator/decimal/encoding, Stata/SPSS labels).
    release_note : bool or path
        Also write the PUBLIC release note (``<stem>.release-note.html``, or this path).
    assessment_html, assessment_path : str, path, optional
        The PRIVATE assessment report (:func:`dpstudio.engine.report.render_assessment`),
        written 0600 to ``assessment_path`` (default ``<stem>.assessment.private.html``;
        a given name must contain 'private' or 'internal').
    audit : bool
        Write the PRIVATE audit trail ``<stem>.private.json`` (0600).

    Kinds in the returned dict: public ``data``, ``metadata``, ``table:<name>``,
    ``release_note``; private ``private``, ``assessment`` (see :func:`is_public_kind`)
    (no ``data`` in the 'separate-tables' layout: one ``table:<attribute>`` each).
    """
    from dpstudio.engine.report import render_release_note

    if input_path is None and input_meta is not None:
        input_path = input_meta.path
    guard = tuple(str(p) for p in (input_path,) if p)
    tables = dict(getattr(result, "tables", {}) or {})
    defaults = sidecar_paths(out_path, tables.keys(), fmt)
    paths = {k: v for k, v in defaults.items() if k in ("data", "metadata") or k.startswith("table:")}
    if release_note:
        paths["release_note"] = (os.path.abspath(str(release_note))
                                 if not isinstance(release_note, bool) else defaults["release_note"])
    if assessment_html is not None:
        if assessment_path and not marked_private(assessment_path):
            raise ParameterError(
                f"The assessment report {Path(str(assessment_path)).name} is private: its file "
                "name must say so (contain 'private' or 'internal'), e.g. "
                "out.assessment.private.html.")
        paths["assessment"] = (os.path.abspath(str(assessment_path)) if assessment_path
                               else defaults["assessment"])
    if audit:
        paths["private"] = defaults["private"]
    # refuse before writing anything
    for kind, p in paths.items():
        for g in guard:
            if same_file(p, g):
                raise InputError(f"Refusing to write the {kind} file over the input file {g}: "
                                 "choose another output name (the input is never overwritten).")
    seen: dict[str, str] = {}
    for kind, p in paths.items():
        key = os.path.normcase(os.path.realpath(p))
        if key in seen:
            raise ParameterError(f"The {kind} file and the {seen[key]} file would both be {p}: "
                                 "choose different names.")
        seen[key] = kind
    if "release_note" in paths and marked_private(paths["release_note"]):
        raise ParameterError(f"The release note {Path(paths['release_note']).name} is public: "
                             "do not call it private or internal.")

    def write_text(path: str, text: str, private: bool) -> str:
        def writer(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)

        return atomic_write(path, writer, protect=guard, private=private)

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
    meta = _strip_forbidden(meta)
    text = json.dumps(meta, indent=2, ensure_ascii=False, allow_nan=True, default=str) + "\n"
    written["metadata"] = write_text(paths["metadata"], text, private=False)
    if "release_note" in paths:
        written["release_note"] = write_text(paths["release_note"], render_release_note(result),
                                             private=False)
    if "assessment" in paths:
        written["assessment"] = write_text(paths["assessment"], assessment_html, private=True)
    if "private" in paths:
        trail = audit_trail(result, input_path=input_path, written=written)
        written["private"] = write_text(
            paths["private"], json.dumps(trail, indent=2, ensure_ascii=False, allow_nan=True,
                                         default=str) + "\n", private=True)
    return written


__all__ = ["export_release", "sidecar_paths", "audit_trail", "is_public_kind", "marked_private",
           "FORBIDDEN_KEYS", "PUBLIC_KINDS", "PRIVATE_KINDS"]
