"""``dpstudio protect IN OUT``: protect a file and write the release (in memory, or on Dask
with ``--engine dask``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpstudio.cli import _dask
from dpstudio.cli._common import evaluate_result, read_input
from dpstudio.cli._options import add_method_options
from dpstudio.cli._output import fmt, report_warnings, step, warn

if TYPE_CHECKING:
    import pandas as pd

    from dpstudio.engine.recipe import Recipe
    from dpstudio.engine.registry import MethodSpec
    from dpstudio.engine.types import ProtectionResult

NAME = "protect"
SUMMARY = "protect a file and write the release"

#: Above this many records ``protect`` leaves record linkage out of its summary.
RL_SUMMARY_MAX = 300_000

#: Input files smaller than this always fit in memory: no psutil import for them (start-up, issue 13).
ALWAYS_FITS_BYTES = 2**24

#: Peak memory per field of a text table while it is read (every field is first a Python
#: text): measured 101 bytes (a 27 MB CSV of 4.5 million short fields peaked 435 MB above
#: the interpreter's own 107 MB).
BYTES_PER_TEXT_FIELD = 100


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``protect`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    add_method_options(p)
    p.add_argument("--format", help="output format: csv, xlsx, parquet, dta, sav (default: from OUT)")
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the PUBLIC release note (method, parameters, guarantee, what "
        "it does not cover, schema, statistics of the release only): publish it "
        "with the release",
    )
    p.add_argument(
        "--assessment",
        metavar="FILE.private.html",
        help="also write the PRIVATE assessment report (measures against the original "
        "data, histograms; owner-only 0600, marked 'INTERNAL - do not publish'; "
        "the name must contain 'private' or 'internal'): never publish it",
    )
    p.add_argument(
        "--no-audit-trail",
        action="store_true",
        help="do not write the PRIVATE audit trail OUT-stem.private.json (input name "
        "and SHA-256, record counts; 0600)",
    )
    p.add_argument(
        "--layout",
        choices=("records", "separate-tables"),
        help="records (default): one table; separate-tables: one independently "
        "shuffled table per protected attribute, other columns not released "
        "(ε-DP for clustered methods where the records are not)",
    )
    p.add_argument(
        "--no-measures",
        action="store_true",
        help="do not compute SSE / record linkage for the summary and the assessment",
    )
    _dask.add_dask_options(
        p,
        "memory (default) or dask: Parquet/CSV larger than memory, OUT a new "
        "folder of Parquet parts (sort-based methods and k-eps/OLA; pip install "
        "'dpstudio[scale]')",
    )
    return p


def _hierarchy_paths(s: Recipe) -> dict[str, str]:
    return {c: h["path"] for c, h in s.hierarchies.items()}


def _prepare_and_run(
    df: pd.DataFrame, args: argparse.Namespace, s: Recipe
) -> tuple[MethodSpec, ProtectionResult]:
    from dpstudio import engine
    from dpstudio.engine.random import as_rng
    from dpstudio.engine.registry import get_method

    assert s.method is not None  # settings() refuses a protect without a method
    spec = get_method(s.method)
    hier = _hierarchy_paths(s)
    prep = engine.prepare(
        df,
        s.method,
        s.roles,
        s.domains,
        hier or None,
        precision=s.precision or None,
        types=s.types or None,
        keep_household=bool(getattr(args, "keep_household", False)),
        **s.params,
    )
    if prep.dropped_rows:
        warn(
            f"{len(prep.dropped_rows)} record(s) with missing values in protected attributes "
            "were dropped (--drop-missing) and are not in the release."
        )
    res = engine.run_prepared(prep, rng=as_rng(s.seed))
    return spec, res


def _protect_dask(args: argparse.Namespace, s: Recipe) -> int:
    """``protect --engine dask``: the Dask backend (issue 12); a LocalCluster started and stopped
    here unless --scheduler names one; Ctrl-C cancels the computation and removes the
    temporary folder.
    """
    from dpstudio.cli._settings import save_recipe, write_plan
    from dpstudio.engine.backends import dask_backend as DB

    assert s.method is not None
    DB.check_runs_on_dask(
        s.method, s.params
    )  # the backend's and the method's own refusal, before any cluster
    plan = write_plan(args, s, args.input)
    DB.release_plan(args.output, plan=plan)  # every file, checked before any work
    DB.check_input(args.input)  # an unreadable input: one line before any cluster starts
    try:
        with _dask.dask_client(args) as client:
            rel = DB.protect_dask(
                args.input,
                s.method,
                s.roles,
                s.domains,
                seed=s.seed,
                precision=s.precision or None,
                types=s.types or None,
                client=client,
                hierarchies=_hierarchy_paths(s) or None,
                progress=step if sys.stderr.isatty() else None,
                **s.params,
            )
            fmt_ = "csv" if (args.format or "").lower() == "csv" else "parquet"
            written = DB.write_release(
                rel, args.output, input_path=args.input, fmt=fmt_, progress=sys.stderr.isatty(), plan=plan
            )
        save_recipe(args, s, plan, NAME)
    except KeyboardInterrupt:
        warn("cancelled: nothing was written.")
        return 130
    pub = set(rel.public_warnings)
    report_warnings(rel.public_warnings, [w for w in rel.warnings if w not in pub])
    print(f"Guarantee: {rel.guarantee}")
    print(f"Release: {written['release']} ({rel.n:,} records, Dask)")
    print(f"Private audit trail: {written['private']} (do not publish)")
    return 0


def _too_big_for_memory(path: str) -> str | None:
    """A refusal when the input obviously does not fit in memory (issue 12): the file's size
    (Parquet expands about 3× when loaded, text about 2×) against the memory this process may
    still use: the least of the free physical memory, its RLIMIT_AS / RLIMIT_DATA and its
    control group's limit (:func:`dpstudio.engine.memory.available_memory`).
    """
    p = Path(path)
    if not (p.is_file() or p.is_dir()):
        return None  # a FIFO or a device: never opened here (the reader refuses it in one line)
    if p.is_file() and p.stat().st_size < ALWAYS_FITS_BYTES:
        return None  # under 16 MB always fits: no psutil import (start-up, issue 13)
    from dpstudio.engine.memory import available_memory

    avail, what = available_memory()
    size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
    if str(path).lower().endswith((".parquet", ".pq")) or p.is_dir():
        need = 3 * size
    elif p.suffix.lower() in (".csv", ".tsv", ".txt", ".dat", ".tab"):
        need = 2 * size + _text_fields(p, size) * BYTES_PER_TEXT_FIELD
    else:
        need = 2 * size
    if need > avail:
        return (
            f"{p.name} ({_gb(size)} on disk) needs about {_gb(need)} in memory; "
            f"{_gb(avail)} are available ({what}). Use --engine dask (pip install 'dpstudio[scale]')."
        )
    return None


def _text_fields(p: Path, size: int) -> int:
    """About how many fields a text table holds: separators and line breaks per byte of its
    first MB, times its size (an upper bound: a separator inside quotes counts too).
    """
    try:
        with open(p, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return 0
    if not head:
        return 0
    marks = sum(head.count(c) for c in (b",", b";", b"\t", b"|", b"\n"))
    return int(marks / len(head) * size)


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**29 else f"{n / 2**20:.0f} MB"


def run(args: argparse.Namespace) -> int:
    """Protect ``args.input`` into ``args.output`` from the effective settings."""
    from dpstudio.cli._settings import save_recipe, settings, write_plan
    from dpstudio.engine.export import export_release

    s = settings(args, NAME)
    if getattr(args, "engine", "memory") == "dask":
        return _protect_dask(args, s)
    refusal = _too_big_for_memory(args.input) if os.path.exists(args.input) else None
    if refusal:
        from dpstudio.engine.errors import InputError

        raise InputError(refusal)
    if args.assessment:
        from dpstudio.engine.errors import ParameterError
        from dpstudio.engine.export import marked_private

        if not marked_private(args.assessment):
            raise ParameterError(
                f"--assessment {Path(args.assessment).name}: the assessment is private, so its "
                "file name must say so (contain 'private' or 'internal'), e.g. "
                "out.assessment.private.html."
            )
    from dpstudio.engine.export import release_plan

    plan = write_plan(args, s, args.input)
    release_plan(  # every file the command writes, checked before any work
        args.output,
        plan=plan,
        fmt=args.format,
        release_note=args.report or False,
        assessment=bool(args.assessment),
        assessment_path=args.assessment,
        audit=not args.no_audit_trail,
        what={"release_note": "release note (--report)", "assessment": "assessment (--assessment)"},
    )
    df, meta = read_input(args.input, s.read_options)
    spec, res = _prepare_and_run(df, args, s)
    measures = None
    if not args.no_measures:
        # the summary prints SSE and RL (and, for suppressing methods, the suppression measures
        # the engine adds): only those are computed; the assessment report shows every measure
        # (the set the app shows), so with --assessment all are computed (issue 12: whole time)
        wanted: tuple[str, ...] = (
            ("sse", "rl", "delta", "corr", "kanon") if args.assessment else ("sse", "rl")
        )
        if len(res.data) > RL_SUMMARY_MAX:
            warn(
                f"record linkage is not computed in the summary for more than "
                f"{RL_SUMMARY_MAX:,} records; run 'dpstudio evaluate' for it."
            )
            wanted = tuple(m for m in wanted if m != "rl")
        measures = evaluate_result(res, wanted, _hierarchy_paths(s))
    assessment = None
    if args.assessment:  # PRIVATE: measured against the original data
        from dpstudio.engine.report import render_assessment  # only when asked (start-up, issue 13)

        assessment = render_assessment(res, measures, input_name=Path(args.input).name)
    written = export_release(
        res,
        args.output,
        input_path=args.input,
        input_meta=meta,
        fmt=args.format,
        release_note=args.report or False,
        assessment_html=assessment,
        assessment_path=args.assessment,
        audit=not args.no_audit_trail,
        plan=plan,
    )
    save_recipe(args, s, plan, NAME)
    report_warnings(res.public_warnings, res.private_notes, skip_codes=("records-dropped",))
    print(f"Guarantee: {res.guarantee}")
    narrowed = res.guarantee_info is not None and res.guarantee_info.narrowed
    if narrowed and res.params.get("layout") == "records":  # DP per attribute only
        warn(
            "the records are not ε-DP (see the guarantee). Remedies: drop the other columns "
            "(e.g. --role COL=identifier) or protect them too, or release each protected "
            "attribute as its own shuffled table with --layout separate-tables."
        )
    print(_summary(spec, res, written, measures))
    if measures:  # plain readings of the two headline measures (issue 11)
        from dpstudio.engine.measures.readings import reading

        ctx = {"n": len(res.data), "k": res.params.get("k")}
        for key, name in (("sse_normalized", "SSE normalized"), ("rl", "RL")):
            text = reading(key, measures.get(key), ctx)
            if text:
                print(f"  {name}: {text}")
    return 0


def _summary(
    spec: MethodSpec, res: ProtectionResult, written: dict[str, str], measures: dict[str, Any] | None
) -> str:
    """The one-line summary: method, records, parameters, files, headline measures."""
    shown = {k: v for k, v in res.params.items() if v is not None and k not in ("drop_missing",)}
    public = [Path(written[k]).name for k in written if k != "data" and k not in ("private", "assessment")]
    private = [Path(written[k]).name for k in ("private", "assessment") if k in written]
    summ = (
        f"{spec.id}: {len(res.data)} records"
        + (f" ({len(res.dropped_rows)} dropped)" if res.dropped_rows else "")
        + f", {', '.join(f'{k}={fmt(v)}' for k, v in shown.items())}"
        + (
            f" -> {written['data']} (public: {', '.join(public)}"
            if "data" in written
            else " -> "
            + ", ".join(v for k, v in written.items() if k.startswith("table:"))
            + f" (one table per attribute; public: {', '.join(public)}"
        )
        + (f"; private, keep internal: {', '.join(private)}" if private else "")
        + ")"
    )
    if measures:
        summ += f"; SSE normalized {fmt(measures.get('sse_normalized', float('nan')))}"
        if "rl" in measures:
            summ += f", RL {measures['rl']:.3g} %"
        if "suppressed_cells" in measures:
            summ += (
                f"; suppressed cells {measures['suppressed_cells']} "
                f"({100 * measures['suppressed_share']:.3g} %), expected "
                f"re-identifications {fmt(measures.get('expected_reidentifications'))}"
            )
    return summ
