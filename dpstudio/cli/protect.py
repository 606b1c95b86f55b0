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
from dpstudio.cli._common import apply_declared_types, assess_result, parse_list, read_input, split_assign
from dpstudio.cli._options import add_method_options
from dpstudio.cli._output import fmt, report_warnings, step, warn

if TYPE_CHECKING:
    import pandas as pd

    from dpstudio.engine.assessment import Assessment
    from dpstudio.engine.chain import ChainRun
    from dpstudio.engine.recipe import Recipe
    from dpstudio.engine.types import ProtectionResult

NAME = "protect"
SUMMARY = "protect a file and write the release"

#: The statistics of ``--estimate STAT=COLS`` (the weighted estimates' variables).
ESTIMATE_STATS = {"total": "totals", "mean": "means", "share": "shares"}

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
    p.add_argument(
        "--pipeline",
        metavar="STEPS.json",
        help='a release made of steps, applied in order: {"steps": [{"method": "local-suppression", '
        '"params": {"k": 3}}, {"method": "laplace", "params": {"epsilon": 1}}]} (at most 50 steps; '
        "roles, types, domains, hierarchies and --seed as for one method; instead of --method and "
        "its parameters; --save-recipe stores the chain, --recipe reads it)",
    )
    p.add_argument(
        "--estimate",
        action="append",
        metavar="STAT=COLS",
        help="weighted estimates, original vs release, printed (PRIVATE: computed from the "
        "original) after the summary: total=COLS, mean=COLS (numeric), share=COLS (category "
        "shares), or 'default' (the protected and confidential columns); weighted by the column "
        "with role weight (--role W=weight), unweighted without one (repeatable)",
    )
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


def _prepare_and_run(df: pd.DataFrame, args: argparse.Namespace, s: Recipe) -> ProtectionResult:
    from dpstudio import engine
    from dpstudio.engine.random import as_rng

    assert s.method is not None  # settings() refuses a protect without a method
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
    _say_wipe_risks(prep, s, hier)
    return engine.run_prepared(prep, rng=as_rng(s.seed))


def run_chain(df: pd.DataFrame, s: Recipe, *, keep_household: bool = False) -> ChainRun:
    """A release made of steps (``--pipeline`` or a recipe's steps): the engine's chain
    (:class:`~dpstudio.engine.chain.ChainRun`, what :func:`~dpstudio.engine.protect_chain`
    runs) with the shared settings of ``s``; every quasi-identifier must be protected by a step.
    """
    from dpstudio.engine.chain import ChainRun

    run = ChainRun(
        df,
        s.roles,
        s.domains,
        hierarchies=_hierarchy_paths(s) or None,
        precision=s.precision or None,
        types=s.types or None,
        keep_household=keep_household,
        seed=s.seed,
    )
    return run.run(s.steps, complete=True)


def _estimate_variables(items: list[str] | None) -> dict[str, Any] | bool:
    """``--estimate``: the weighted estimates' variables (``"default": True``: the engine's
    default variables too); False: none.
    """
    if not items:
        return False
    from dpstudio.engine.errors import ParameterError

    out: dict[str, Any] = {}
    for it in items:
        if it.strip().lower() == "default":
            out["default"] = True
            continue
        stat, cols = split_assign(
            it, "--estimate", "STAT=COLS (total=INCOME,WAGES or share=REGION) or default"
        )
        key = ESTIMATE_STATS.get(stat.lower())
        if key is None:
            raise ParameterError(
                f"--estimate {it}: the statistic must be one of {', '.join(ESTIMATE_STATS)} "
                f"(or 'default'). Got {stat!r}."
            )
        names = parse_list(cols)
        if not names:
            raise ParameterError(f"--estimate {it}: name at least one column (comma-separated).")
        out.setdefault(key, []).extend(n for n in names if n not in out.get(key, []))
    return out


def _check_estimate_columns(df: pd.DataFrame, wanted: dict[str, Any] | bool) -> None:
    from dpstudio.engine.errors import ParameterError

    if not isinstance(wanted, dict):
        return
    for key, cols in wanted.items():
        for c in cols if key in ESTIMATE_STATS.values() else ():
            if c not in df.columns:
                raise ParameterError(f"--estimate: {c!r} is not a column of the input.")


def _say_wipe_risks(prep: Any, s: Recipe, hier: dict) -> None:
    """Before a full-domain generalisation: the k-quasis that will certainly be '*' in every
    record (a private note: it reads the data; issue 24 §1).
    """
    if not prep.spec.generalises:
        return
    if (prep.params.get("algorithm") or "ola") != "ola" or "k" not in prep.params:
        return
    from dpstudio.engine.transformation import wipe_risks

    kq = [c for c, r in s.roles.items() if r == "k-quasi"]
    sup = prep.params.get("suppression")
    for r in wipe_risks(
        prep.data,
        kq,
        k=int(prep.params["k"]),
        suppression=0.05 if sup is None else float(sup),
        hierarchies=hier or None,
    ):
        if r["reason"] == "certain":
            print(f"dpstudio: private note [k-quasi-wiped]: {r['text']}", file=sys.stderr)


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
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.export import export_release

    s = settings(args, NAME)
    estimates = _estimate_variables(args.estimate)
    if s.steps and args.layout:
        raise ParameterError("--layout: with --pipeline give 'layout' in the parameters of the last step.")
    if getattr(args, "engine", "memory") == "dask":
        if s.steps:
            raise ParameterError("--pipeline runs in memory only: use --engine memory (the default).")
        return _protect_dask(args, s)
    refusal = _too_big_for_memory(args.input) if os.path.exists(args.input) else None
    if refusal:
        from dpstudio.engine.errors import InputError

        raise InputError(refusal)
    if args.assessment:
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
    s.types = apply_declared_types(s.types, s.roles, meta, Path(args.input).name)
    _check_estimate_columns(df, estimates)
    chain = None
    if s.steps:
        chain = run_chain(df, s, keep_household=bool(getattr(args, "keep_household", False)))
        res = chain.result()
        if res.dropped_rows:
            warn(
                f"{len(res.dropped_rows)} record(s) with missing values in protected attributes "
                "were dropped (drop_missing) and are not in the release."
            )
    else:
        res = _prepare_and_run(df, args, s)
    a: Assessment | None = None
    if not args.no_measures or estimates is not False:
        # the one assess path (issue 22 §2): the summary's measures (SSE, RL and, for
        # suppressing methods, the suppression measures), every measure with --assessment
        # (the app's set), the weighted estimates when asked
        a = assess_result(res, level="full" if args.assessment else "summary", weighted=estimates)
    measures = a.measures if a is not None and not args.no_measures else None
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
    last_params = res.steps[-1].params if res.steps else res.params
    if narrowed and last_params.get("layout") == "records":  # DP per attribute only
        warn(
            "the records are not ε-DP (see the guarantee). Remedies: drop the other columns "
            "(e.g. --role COL=identifier) or protect them too, or release each protected "
            "attribute as its own shuffled table with "
            + ('"layout": "separate-tables" in the last step.' if res.steps else "--layout separate-tables.")
        )
    print(_summary(res, written, measures))
    if not args.no_measures:
        hh_line = household_risk_line(df, res, s.roles)
        if hh_line:
            print(hh_line)
    if measures:  # plain readings of the two headline measures (issue 11)
        from dpstudio.engine.measures.readings import reading, reading_context

        ctx = reading_context(res, measures)
        for key, name in (("sse_normalized", "SSE normalized"), ("rl", "RL")):
            text = reading(key, measures.get(key), ctx)
            if text:
                print(f"  {name}: {text}")
    if chain is not None and not args.no_measures:
        _print_steps(chain)
    if a is not None and a.weighted is not None:
        _print_estimates(a)
    return 0


def household_risk_line(df: pd.DataFrame, res: ProtectionResult, roles: dict[str, str]) -> str | None:
    """With a household id and key columns: the household risk (sdcMicro's expected
    re-identifications at household level) of the original and of the release, the released
    records grouped by their original households (issue 23 §3).  Printed on the operator's
    terminal only (measured against the original: never in a public file).  None when it does
    not apply.
    """
    hid = next((c for c, r in roles.items() if r == "household"), None)
    keys = [c for c, r in roles.items() if r == "k-quasi"]
    if hid is None or not keys or hid not in df.columns:
        return None
    if any(k not in res.data.columns for k in keys):
        return None
    from dpstudio import engine  # only with households (start-up: tests/engine/test_startup_imports.py)
    from dpstudio.engine.measures.survey_risk import release_with_household_ids

    weight = next((c for c, r in roles.items() if r == "weight"), None)
    kw: dict[str, Any] = {"household": hid, "missing": "any"}
    try:
        before = engine.assess_risk(df, keys, weight=weight, **kw)
        rel = release_with_household_ids(res, hid)
        after = engine.assess_risk(rel, keys, weight=weight if weight in rel.columns else None, **kw)
    except engine.DPStudioError:
        return None
    b, a = before.household_expected_reidentifications, after.household_expected_reidentifications
    if b is None or a is None:
        return None
    return (
        f"  household risk (expected re-identifications of households, keys "
        f"{', '.join(keys)}): original {fmt(b)}, release {fmt(a)} (private: measured against the original)"
    )


def _print_steps(chain: ChainRun) -> None:
    """Risk and utility after every step (PRIVATE: measured against the original)."""
    from dpstudio.engine.chain import chain_figures
    from dpstudio.engine.errors import DPStudioError

    try:
        figs = chain_figures(chain, level="step", weighted=False)
    except (DPStudioError, KeyError, ValueError, TypeError) as exc:
        warn(f"the measures after every step were not computed: {exc}")
        return
    for n in next((f.notices for f in figs if f.notices), []):
        if n.code == "rl-not-computed":
            warn(n)
    print("After every step (private: measured against the original):")
    for rec, f in zip(chain.records, figs, strict=True):
        m = f.figures()
        parts = [f"{rec.result.records:,} records"]
        if "sse_normalized" in m:
            parts.append(f"SSE normalized {fmt(m['sse_normalized'])}")
        if "rl" in m:
            parts.append(f"RL {m['rl']:.3g} %")
        if "suppressed_cells" in m:
            parts.append(f"suppressed cells {int(m['suppressed_cells'])}")
        if "risk_records_fk_lt_3" in m:
            parts.append(f"records with f_k < 3: {int(m['risk_records_fk_lt_3'])}")
        if "risk_expected_reidentifications" in m:
            parts.append(f"expected re-identifications {fmt(m['risk_expected_reidentifications'])}")
        print(f"  step {rec.result.index + 1} ({rec.result.method}): " + "; ".join(parts))


def _print_estimates(a: Assessment) -> None:
    """The weighted estimates, original vs release (PRIVATE: computed from the original)."""
    w = a.weighted
    print(
        "Weighted estimates (private: computed from the original; "
        + (f"weight {w.weight}" if w.weight else "unweighted: no column with role weight")
        + "):"
    )
    for r in w.table.itertuples(index=False):
        what = f"{r.variable} {r.statistic}" + (f" [{r.category}]" if r.statistic == "share" else "")
        rel = float(r.relative_error)
        print(
            f"  {what}: original {fmt(float(r.original))}, release {fmt(float(r.release))}, "
            f"relative error {fmt(rel)}"
        )


def _step_text(method: str, params: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={fmt(v)}" for k, v in params.items() if v is not None and k != "drop_missing")
    return f"{method}({shown})"


def _summary(res: ProtectionResult, written: dict[str, str], measures: dict[str, Any] | None) -> str:
    """The one-line summary: method (or steps), records, parameters, files, headline measures."""
    if res.steps:
        label, shown = "chain", " → ".join(_step_text(st.method, st.params) for st in res.steps)
    else:
        label = res.method
        shown = ", ".join(
            f"{k}={fmt(v)}" for k, v in res.params.items() if v is not None and k != "drop_missing"
        )
    public = [Path(written[k]).name for k in written if k != "data" and k not in ("private", "assessment")]
    private = [Path(written[k]).name for k in ("private", "assessment") if k in written]
    summ = (
        f"{label}: {len(res.data)} records"
        + (f" ({len(res.dropped_rows)} dropped)" if res.dropped_rows else "")
        + f", {shown}"
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
