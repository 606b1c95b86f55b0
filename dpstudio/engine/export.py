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

Every file goes through one :class:`~dpstudio.engine.safe_write.WritePlan`
(:func:`release_plan`): all of them are checked before anything is written (none may be an
input, another of the files, a FIFO/device/folder/link or read-only), each is written
atomically, and the set is renamed into place under the folder's lock.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.io import TableMeta, file_format, file_sha256, relabelled, write_table
from dpstudio.engine.safe_write import WritePlan, discard

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


def audit_trail(
    result,
    *,
    input_path: str | os.PathLike | None = None,
    written: dict[str, str] | None = None,
    digests: dict[str, str] | None = None,
) -> dict:
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
        "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "method": result.method,
        "input": None,
        "records_in_input": (len(orig) + dropped) if orig is not None else None,
        "records_dropped_for_missing_values": dropped,
        "records_not_released_by_method": (len(orig) - len(result.data)) if orig is not None else None,
        "records_released": int(len(result.data)),
        "private_notes": [str(w) for w in result.private_notes]
        if hasattr(result, "private_notes")
        else [str(w) for w in getattr(result, "warnings", [])],
        "public_warnings": [str(w) for w in getattr(result, "public_warnings", []) or []],
    }
    if input_path and os.path.exists(str(input_path)):
        p = Path(str(input_path))
        trail["input"] = {
            "name": p.name,
            "path": str(p.resolve()),
            "bytes": p.stat().st_size,
            "sha256": file_sha256(str(p)),
        }
    if written:
        trail["files"] = {
            k: {
                "name": Path(v).name,
                "published": is_public_kind(k),
                **(
                    {"sha256": (digests or {}).get(k) or file_sha256(v)}
                    if is_public_kind(k) and k != "release_note"
                    else {}
                ),
            }
            for k, v in written.items()
        }
    return _strip_forbidden(trail)


def _check_metadata_owner(paths: dict[str, str]) -> None:
    """Refuse to replace the metadata (and so the release note and audit trail) of ANOTHER
    release that stays in the folder: ``x.sav`` and ``x.csv`` share ``x.metadata.json``, and
    writing one would leave the other described by a guarantee and digest that are not its own.
    Replacing the same release (same data file name) is fine.
    """
    meta_path = Path(paths["metadata"])
    if not meta_path.is_file():
        return
    try:
        old = json.loads(meta_path.read_text(encoding="utf-8"))
        owner = ((old.get("files") or {}).get("output") or {}).get("name")
    except (OSError, ValueError, AttributeError):
        return  # unreadable or foreign: replaced like any stale file
    mine = Path(paths["data"]).name
    if owner and owner != mine and (meta_path.parent / owner).exists():
        raise ParameterError(
            f"{meta_path.name} describes the release {owner}, which is still in "
            f"{meta_path.parent}; writing {mine} would replace its metadata, so {owner} would be "
            "published with a guarantee and digest that are not its own. Choose another name "
            f"for {mine}, or another folder, or remove {owner} first."
        )


#: What each kind of file is called in messages.
_WHAT = {
    "data": "release",
    "metadata": "metadata file",
    "release_note": "release note",
    "private": "audit trail",
    "assessment": "assessment report",
}


def _what(kind: str) -> str:
    return _WHAT.get(kind) or (
        f"released table {kind[6:]!r}" if kind.startswith("table:") else f"{kind} file"
    )


def release_paths(
    out_path: str | os.PathLike,
    *,
    table_names=(),
    fmt: str | None = None,
    release_note: bool | str | os.PathLike = False,
    assessment: bool = False,
    assessment_path: str | os.PathLike | None = None,
    audit: bool = True,
) -> dict[str, str]:
    """{kind: path} of every file :func:`export_release` writes with these options (the
    public/private naming rules checked: a ParameterError names the file).
    """
    defaults = sidecar_paths(out_path, table_names, fmt)
    paths = {k: v for k, v in defaults.items() if k in ("data", "metadata") or k.startswith("table:")}
    if release_note:
        paths["release_note"] = (
            os.path.abspath(str(release_note))
            if not isinstance(release_note, bool)
            else defaults["release_note"]
        )
    if assessment:
        if assessment_path and not marked_private(assessment_path):
            raise ParameterError(
                f"The assessment report {Path(str(assessment_path)).name} is private: its file "
                "name must say so (contain 'private' or 'internal'), e.g. "
                "out.assessment.private.html."
            )
        paths["assessment"] = (
            os.path.abspath(str(assessment_path)) if assessment_path else defaults["assessment"]
        )
    if audit:
        paths["private"] = defaults["private"]
    if "release_note" in paths and marked_private(paths["release_note"]):
        raise ParameterError(
            f"The release note {Path(paths['release_note']).name} is public: do not call it private or internal."
        )
    return paths


def release_plan(
    out_path: str | os.PathLike,
    *,
    inputs=(),
    plan: WritePlan | None = None,
    table_names=(),
    fmt: str | None = None,
    release_note: bool | str | os.PathLike = False,
    assessment: bool = False,
    assessment_path: str | os.PathLike | None = None,
    audit: bool = True,
    what: dict[str, str] | None = None,
) -> WritePlan:
    """The :class:`~dpstudio.engine.safe_write.WritePlan` of a release, CHECKED: call it before
    any work (the CLI and the app do), add other targets of the command to ``plan`` first
    (e.g. a recipe) so that they are checked together, and pass the plan to
    :func:`export_release`.  ``what``: names for messages by kind (e.g. the CLI's options).
    Raises :class:`~dpstudio.engine.safe_write.WriteRefused` or ParameterError.
    """
    plan = plan if plan is not None else WritePlan()
    plan.add_input(inputs)
    paths = release_paths(
        out_path,
        table_names=table_names,
        fmt=fmt,
        release_note=release_note,
        assessment=assessment,
        assessment_path=assessment_path,
        audit=audit,
    )
    for kind, p in paths.items():
        plan.file(
            p,
            what=(what or {}).get(kind) or _what(kind),
            private=not is_public_kind(kind),
            role=f"release:{kind}",
        )
    plan.check()
    _check_metadata_owner(paths)
    return plan


def export_release(
    result,
    out_path: str | os.PathLike,
    *,
    input_path: str | os.PathLike | None = None,
    fmt: str | None = None,
    input_meta: TableMeta | None = None,
    release_note: bool | str | os.PathLike = False,
    assessment_html: str | None = None,
    assessment_path: str | os.PathLike | None = None,
    audit: bool = True,
    plan: WritePlan | None = None,
) -> dict[str, str]:
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
    plan : WritePlan, optional
        The command's plan from :func:`release_plan` (checked before the work); the extra
        tables of ``result`` are added to it and everything is checked again before the first
        byte is written.  Default: a plan made here.

    Kinds in the returned dict: public ``data``, ``metadata``, ``table:<name>``,
    ``release_note``; private ``private``, ``assessment`` (see :func:`is_public_kind`)
    (no ``data`` in the 'separate-tables' layout: one ``table:<attribute>`` each).
    """
    if input_path is None and input_meta is not None:
        input_path = input_meta.path
    # merged codes (a recoding's 1+2:12) get their value labels in .sav/.dta (issue 23)
    input_meta = relabelled(input_meta, (getattr(result, "info", None) or {}).get("relabel"))
    guard = tuple(str(p) for p in (input_path,) if p)
    tables = dict(getattr(result, "tables", {}) or {})
    opts: dict[str, Any] = dict(
        fmt=fmt,
        release_note=release_note,
        assessment=assessment_html is not None,
        assessment_path=assessment_path,
        audit=audit,
    )
    # refuse before writing anything: every file of the release (and of the caller's plan)
    plan = release_plan(out_path, inputs=guard, plan=plan, table_names=tables.keys(), **opts)
    paths = release_paths(out_path, table_names=tables.keys(), **opts)

    # Every file is first written to a temporary file next to it (digests are taken from those),
    # and only when all are written are they renamed into place: the metadata (which names the
    # digest of every released table) last of the public files, after the old metadata was
    # removed -- so after a kill or an error at any moment the folder never holds a metadata
    # describing another release: old pair, new pair, or a release without metadata
    # (`dpstudio verify` reports it).  The renames hold the folder's lock, so two exports to
    # the same names leave one set, never a mix; the plan's transaction removes the temporary
    # files interrupted runs left.
    f = file_format(paths["data"], fmt)
    # layout 'separate-tables': only the one-column tables are released (their rows do not
    # belong together); the side-by-side frame in result.data is not written
    separate = (getattr(result, "info", None) or {}).get("layout") == "separate-tables"
    # before anything is written; the release's digest is that of the bytes written (below),
    # not of a second serialisation of the table
    meta = dict(result.public_metadata(output_sha256=""))
    staged: dict[str, str] = {}
    written: dict[str, str] = {}

    def stage_text(kind: str, text: str) -> str:
        def writer(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)

        return plan.stage(paths[kind], writer)

    written_sha: dict[str, str] = {}
    with plan.transaction():
        try:
            _stage_tables(staged, result, tables, paths, f, input_meta, guard, plan, separate, written_sha)
            # each staged file read once (a CSV hashed as it was written: not read at all)
            digests = {k: written_sha.get(tmp) or file_sha256(tmp) for k, tmp in staged.items()}
            meta = _release_metadata(meta, digests, paths, tables, f, separate)
            text = json.dumps(meta, indent=2, ensure_ascii=False, allow_nan=True, default=str) + "\n"
            staged["metadata"] = stage_text("metadata", text)
            if "release_note" in paths:
                from dpstudio.engine.report import render_release_note  # only when asked (start-up)

                staged["release_note"] = stage_text("release_note", render_release_note(result))
            if "assessment" in paths and assessment_html is not None:  # set together above
                staged["assessment"] = stage_text("assessment", assessment_html)
            if "private" in paths:
                final = {k: paths[k] for k in staged}
                digests.update({k: file_sha256(t) for k, t in staged.items() if k not in digests})
                trail = audit_trail(result, input_path=input_path, written=final, digests=digests)
                staged["private"] = stage_text(
                    "private",
                    json.dumps(trail, indent=2, ensure_ascii=False, allow_nan=True, default=str) + "\n",
                )
            _commit_release(plan, staged, paths, written)
        except BaseException:
            for tmp in staged.values():
                discard(tmp)
            raise
    return {k: written[k] for k in _kind_order(written) if k in written}


def _kind_order(kinds) -> list[str]:
    """The order of the kinds in :func:`export_release`'s answer."""
    return [
        "data",
        *[k for k in kinds if k.startswith("table:")],
        "metadata",
        "release_note",
        "assessment",
        "private",
    ]


def _stage_tables(
    staged: dict[str, str],
    result,
    tables: dict,
    paths: dict[str, str],
    f: str,
    input_meta: TableMeta | None,
    guard: tuple,
    plan: WritePlan,
    separate: bool,
    digests: dict[str, str] | None = None,
) -> None:
    """Write the release (unless the layout is 'separate-tables') and its extra tables to
    temporary files of ``plan``, recorded in ``staged`` as each is written (so that a failure
    discards what was staged); ``digests``: the SHA-256 of those hashed while written, by
    temporary path (:func:`~dpstudio.engine.io.write_table`).
    """
    if not separate:
        staged["data"] = write_table(
            result.data,
            paths["data"],
            f,
            input_meta,
            protect=guard,
            rows=_source_rows(result, input_meta),
            stage=True,
            plan=plan,
            digests=digests,
        )
    for name, table in tables.items():
        key = f"table:{name}"
        staged[key] = write_table(
            table,
            paths[key],
            f,
            input_meta,
            protect=guard,
            rows=np.full(len(table), -1),
            stage=True,
            plan=plan,
            digests=digests,
        )


def _release_metadata(
    meta: dict, digests: dict[str, str], paths: dict[str, str], tables: dict, f: str, separate: bool
) -> dict:
    """The public metadata with the names and digests of the files written, stripped of every
    forbidden key.
    """
    meta["output_sha256"] = None if separate else digests["data"]
    meta["files"] = {
        "output": (
            {"name": None, "format": f, "layout": "separate-tables"}
            if separate
            else {"name": Path(paths["data"]).name, "format": f, "sha256": digests["data"]}
        ),
        "tables": {
            name: {"name": Path(paths[f"table:{name}"]).name, "sha256": digests[f"table:{name}"]}
            for name in tables
        },
    }
    return _strip_forbidden(meta)


def _commit_release(
    plan: WritePlan, staged: dict[str, str], paths: dict[str, str], written: dict[str, str]
) -> None:
    """Rename the staged files into place (under the folder's lock: another export's renames
    never interleave): old metadata out, then tables, data, release note, new metadata,
    private files.  Each committed file moves from ``staged`` to ``written``.
    """
    order = [k for k in staged if k.startswith("table:")] + [
        "data",
        "release_note",
        "metadata",
        "assessment",
        "private",
    ]
    with plan.committing():
        plan.remove(paths["metadata"])
        for k in order:
            if k in staged:
                written[k] = plan.commit(staged.pop(k), paths[k])


def _source_rows(result, input_meta: TableMeta | None):
    """The input row of every released row (to write unchanged columns back as read), or
    None for 'the same rows'; rows that cannot be mapped are -1 (nothing written as read).
    """
    n_out = len(result.data)
    if input_meta is None or not input_meta.texts:
        return None
    n_in = int(input_meta.n_rows)
    dropped = sorted(int(i) for i in (getattr(result, "dropped_rows", None) or []))
    kept = np.delete(np.arange(n_in), dropped) if dropped else np.arange(n_in)
    rm = getattr(result, "row_map", None)
    if rm is None:
        return kept if kept.size == n_out else np.full(n_out, -1)
    rm = np.asarray(rm, dtype=np.int64)
    if rm.size != n_out or (rm.size and (rm.min() < 0 or rm.max() >= kept.size)):
        return np.full(n_out, -1)
    return kept[rm]


def _meta_path_for(release: Path) -> Path:
    stem = release.with_suffix("") if release.suffix else release
    return Path(f"{stem}.metadata.json")


#: Said with every verdict of :func:`verify_release`: what a digest check cannot detect.
UNSIGNED_NOTE = (
    "The metadata is not signed: edits to its ε, parameters or guarantee sentence cannot be "
    "detected; compare it with the copy you published."
)


def _metadata_files(meta: Any, name: str) -> tuple[dict, dict]:
    """(output, tables) of a metadata dict, every field's type checked (one-line InputError)."""

    def bad(what: str) -> InputError:
        return InputError(f"{name}: not a dpstudio release metadata file ({what}).")

    if not isinstance(meta, dict):
        raise bad("not a JSON object")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise bad("no 'files' with digests")
    output = {} if files.get("output") is None else files["output"]
    tables = {} if files.get("tables") is None else files["tables"]
    if not isinstance(output, dict):
        raise bad(f"'files.output' must be an object, got {type(output).__name__}")
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise bad("'files.tables' must be an object of objects")
    for where, entry in [("files.output", output)] + [(f"files.tables.{k}", t) for k, t in tables.items()]:
        for key in ("name", "sha256"):
            if entry.get(key) is not None and not isinstance(entry.get(key), str):
                raise bad(f"'{where}.{key}' must be text, got {type(entry.get(key)).__name__}")
    for key in ("output_sha256",):
        if meta.get(key) is not None and not isinstance(meta.get(key), str):
            raise bad(f"'{key}' must be text, got {type(meta.get(key)).__name__}")
    rr = meta.get("records_released")
    if rr is not None and (isinstance(rr, bool) or not isinstance(rr, int) or rr < 0):
        raise bad("'records_released' must be a whole number")
    return output, tables


def _count_records(path: Path) -> int | None:
    """The number of records of a released file as dpstudio reads it (None: unreadable)."""
    from dpstudio.engine.io import read_table

    try:
        df, _ = read_table(path)
    except (InputError, OSError, ValueError):
        return None
    return len(df)


def verify_release(path: str | os.PathLike) -> tuple[bool, str]:
    """Check a release (its data file, or its ``.metadata.json``) and its tables against its
    metadata: every released file's SHA-256 against ``files``, the top-level ``output_sha256``
    against the same digest, and ``records_released`` against the records of the release
    (the data file; in the 'separate-tables' layout, every table).

    Returns (ok, one line 'OK: ...' or 'MISMATCH: ...'); an OK line ends with
    :data:`UNSIGNED_NOTE`: the metadata is not signed, so an edit to its ε, parameters or
    guarantee sentence (which the digests do not cover) cannot be detected.  Raises
    :class:`InputError` (one line) when the files cannot be read at all: the metadata is read
    only from a regular file of at most :data:`~dpstudio.engine.io.MAX_SETTINGS_BYTES`.
    """
    from dpstudio.engine.io import check_regular_file, read_json_file

    p = Path(os.path.abspath(str(path)))
    if not p.exists():
        raise InputError(f"{p}: no such file.")
    if p.is_dir():
        raise InputError(f"{p} is a folder: give the release file or its .metadata.json.")
    if p.name.endswith(".metadata.json"):
        meta_path, release = p, None
    else:
        meta_path, release = _meta_path_for(p), p
        if not os.path.lexists(meta_path):
            return False, (
                f"MISMATCH: {p.name} has no metadata ({meta_path.name} is missing): "
                "the release is incomplete; export it again."
            )
    meta = read_json_file(meta_path, what="metadata file")
    output, tables = _metadata_files(meta, meta_path.name)

    def mismatch(text: str) -> tuple[bool, str]:
        return False, f"MISMATCH: {text}"

    separate = output.get("layout") == "separate-tables"
    checks: list[tuple[Path, str]] = []
    if output.get("name"):
        if release is not None and output["name"] != release.name:
            return mismatch(f"{meta_path.name} describes {output['name']}, not {release.name}.")
        checks.append((meta_path.parent / Path(output["name"]).name, str(output.get("sha256"))))
    elif release is not None and not separate:
        return mismatch(f"{meta_path.name} names no released file.")
    for t in tables.values():
        checks.append((meta_path.parent / Path(str(t.get("name"))).name, str(t.get("sha256"))))
    if not checks:
        return mismatch(f"{meta_path.name} names no released file.")
    for fp, want in checks:
        if not os.path.lexists(fp) or not fp.exists():
            return mismatch(f"{fp.name} (named in {meta_path.name}) is missing.")
        check_regular_file(fp, what="released file")  # a FIFO or device: one line, never read
        got = file_sha256(fp)
        if got != want:
            return mismatch(
                f"{fp.name} has SHA-256 {got[:16]}…, but {meta_path.name} names {want[:16]}…: "
                "the metadata describes another release."
            )
    top = meta.get("output_sha256")
    if output.get("name") and top != output.get("sha256"):
        return mismatch(
            f"{meta_path.name} names two digests for {output['name']} (output_sha256 "
            f"{str(top)[:16]}…, files.output {str(output.get('sha256'))[:16]}…): the metadata was edited."
        )
    if separate and top is not None:
        return mismatch(
            f"{meta_path.name} names a release digest (output_sha256) for a 'separate-tables' "
            "release, which has no single data file: the metadata was edited."
        )
    n_meta = meta.get("records_released")
    counted = checks[:1] if output.get("name") else (checks if separate else [])
    if n_meta is None and counted:
        return mismatch(f"{meta_path.name} does not say how many records were released.")
    for fp, _ in counted:
        n = _count_records(fp)
        if n is None:
            return mismatch(f"{fp.name} cannot be read to count its records.")
        if n != n_meta:
            return mismatch(
                f"{fp.name} holds {n:,} records, but {meta_path.name} says {n_meta:,} were "
                "released: the metadata was edited."
            )
    main = checks[0]
    extra = f" and {len(checks) - 1} table(s)" if len(checks) > 1 else ""
    recs = f", {n_meta:,} records" if counted else ""
    return True, (
        f"OK: {main[0].name}{extra} match{'' if extra else 'es'} {meta_path.name} "
        f"(SHA-256 {file_sha256(main[0])[:16]}…{recs}). {UNSIGNED_NOTE}"
    )


__all__ = [
    "export_release",
    "release_plan",
    "release_paths",
    "verify_release",
    "sidecar_paths",
    "audit_trail",
    "is_public_kind",
    "marked_private",
    "FORBIDDEN_KEYS",
    "PUBLIC_KINDS",
    "PRIVATE_KINDS",
]
