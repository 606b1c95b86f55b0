"""Qt-free computations the app runs in a worker thread or a child process.

Kept apart from the widgets so that a child process (see :mod:`dpstudio.app.subproc`) can
import them without Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpstudio import engine


@dataclass
class ColumnStats:
    """Cheap per-column facts computed once when the data is loaded."""

    name: str
    dtype: str
    numeric: bool
    missing: int
    distinct: int
    minimum: float | None
    maximum: float | None
    non_numeric: int = 0  # text cells in an otherwise numeric-looking column


def column_stats(df: pd.DataFrame) -> dict[str, ColumnStats]:
    from dpstudio.engine.codes import factorize

    out: dict[str, ColumnStats] = {}
    for c in df.columns:
        s = df[c]
        missing = int(s.isna().sum())
        try:
            distinct = int(s.nunique(dropna=True))
        except TypeError:
            distinct = -1
        numeric = bool(pd.api.types.is_numeric_dtype(s)) and not pd.api.types.is_bool_dtype(s)
        mn = mx = None
        non_numeric = 0
        if numeric:
            vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isfinite(vals).any():
                mn, mx = float(np.nanmin(vals)), float(np.nanmax(vals))
        else:
            # each distinct value converted once (issue 27: pandas' converter holds the GIL,
            # 0.3-0.6 s per 200,000-row text column in which the window could not react)
            codes, uniques = factorize(s)
            conv = pd.to_numeric(pd.Series(uniques.astype(object), dtype=object), errors="coerce")
            ok = conv.notna().to_numpy()
            counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
            non_numeric = int(counts[~ok].sum())
            if ok.any():
                mn, mx = float(conv[ok].min()), float(conv[ok].max())
        out[str(c)] = ColumnStats(str(c), str(s.dtype), numeric, missing, distinct, mn, mx, non_numeric)
    return out


# corr(protected) − corr(original): the engine's (level "full" of engine.assess)
# The measurement policy (distances, which measures on which columns, skipped sweep cells)
# is the engine's: dpstudio.engine.measures.measurement_plan / engine.evaluate / engine.sweep.
from dpstudio.engine.measures import HierarchyDistance  # noqa: E402,F401  (used by tests)
from dpstudio.engine.measures.utility import correlation_difference  # noqa: E402,F401


def protect_and_evaluate(
    df,
    method: str,
    roles: dict,
    domains: dict,
    hierarchies: dict,
    seed: int,
    params: dict,
    progress=None,
    check_cancel=None,
) -> tuple:
    """Worker body of Protect: run, then ``engine.assess`` at level ``full`` (the measures of
    the engine's policy and the correlation difference).
    """
    res = engine.protect(
        df,
        method,
        roles,
        domains,
        seed=seed,
        hierarchies=hierarchies or None,
        progress=progress,
        check_cancel=check_cancel,
        **params,
    )
    if check_cancel:
        check_cancel()
    # the one assess path (issue 22 §2): the same figures as the command line's
    a = engine.assess(res, level="full", weighted=False, check_cancel=check_cancel)
    ev = dict(a.measures)
    ev["_app"] = {"corr": a.corr_difference}
    return res, ev


def run_chain_steps(
    run, steps, *, start=None, figures=(), weighted=None, progress=None, check_cancel=None
) -> tuple:
    """Worker body of the step list (issue 23 §2): ``run.run(steps)`` from ``start`` (default:
    the first step that differs from those already run; the earlier steps' outcomes are kept),
    then ``engine.assess`` at level ``step`` after every step that ran (the figures of the
    kept steps reused from ``figures``).  Returns (the new ChainRun, its figures, the
    original's risk figures).  An incomplete chain may run (its result says what is not
    protected yet).  ``weighted``: the weighted estimates' variables (None: the defaults).
    """
    from dpstudio.engine.assessment import original_figures
    from dpstudio.engine.chain import parse_steps

    parsed = parse_steps(steps)
    s0 = run.first_changed(parsed) if start is None else max(0, min(int(start), len(run), len(parsed)))
    s0 = min(s0, len(figures))

    def prog(f: float) -> None:
        if progress is not None:
            progress(0.85 * f)

    new = run.run(parsed, start=s0, progress=prog, check_cancel=check_cancel, complete=False)
    figs = list(figures[:s0])
    todo = range(s0, len(new))
    for j, i in enumerate(todo):
        if check_cancel:
            check_cancel()
        figs.append(engine.assess(new.result(i), level="step", weighted=weighted, check_cancel=check_cancel))
        if progress is not None:
            progress(0.85 + 0.15 * (j + 1) / max(len(todo), 1))
    before = original_figures(new.result(0)) if len(new) else {}
    return new, figs, before


def reassess_chain(run, weighted=None, progress=None, check_cancel=None) -> list:
    """The step figures of every step of ``run`` again (other weighted-estimate variables):
    no step runs again.
    """
    out = []
    for i in range(len(run)):
        out.append(engine.assess(run.result(i), level="step", weighted=weighted, check_cancel=check_cancel))
        if progress is not None:
            progress((i + 1) / max(len(run), 1))
    return out


def assess_release(res, progress=None, check_cancel=None) -> tuple:
    """Worker body of "Use as the release" (a chain's result): ``engine.assess`` at level
    ``full`` as for Protect (the Results tab's measures and correlation difference).
    """
    a = engine.assess(res, level="full", weighted=False, check_cancel=check_cancel)
    ev = dict(a.measures)
    ev["_app"] = {"corr": a.corr_difference}
    return res, ev


def sweep_points(
    df, method, roles, domains, *, ks, epsilons, repeats, seed, hierarchies, params, check_cancel, progress
):
    """A trade-off sweep (run in a child process): the engine's SweepPoints, one by one
    (cells the method cannot run arrive with ``point.skipped`` set).
    """
    from dpstudio.app.sweep_view import sweep_view

    for pt in engine.sweep(
        df,
        method,
        roles,
        domains,
        measures=sweep_view(method).measures,  # per method family (issue 10)
        ks=ks,
        epsilons=epsilons,
        repeats=repeats,
        seed=seed,
        hierarchies=hierarchies or None,
        check_cancel=check_cancel,
        progress=progress,  # within a point too (issue 27)
        **params,
    ):
        pt.runs = []  # per-repetition dicts are not needed by the app
        progress((pt.index + 1) / max(pt.total, 1))
        yield pt


def load_table(path, options, *, check_cancel, progress):
    """Open a file (in a thread for small files, else in a child process: see
    :func:`load_table_to_send`): the table, its read conventions and column statistics.
    A file that is gone (moved or deleted since it was chosen) is one line, not a traceback.
    """
    from pathlib import Path

    from dpstudio.engine import io as engine_io

    try:
        df, meta = engine_io.read_table(path, progress=progress, **options)
    except FileNotFoundError:
        raise engine.InputError(
            f"{Path(path).name}: the file is no longer there (moved or deleted?); the current data is kept."
        ) from None
    check_cancel()
    return df, meta, column_stats(df)


def load_table_to_send(path, options, *, check_cancel, progress):
    """:func:`load_table` in a child process (issue 24 §5: typing the texts and the column
    statistics call pandas' converters, which hold the GIL for 50-250 ms on a 200,000-record
    column -- in a thread of the window's process the window waited that long), packed for the
    parent (:func:`table_received`): the kept-aside texts' typed columns are the table's own
    columns (sent once, as names), and the codes the reader found for the text columns
    (:mod:`dpstudio.engine.codes`) go along, so the parent never hashes those columns again.
    """
    import pyarrow as pa

    from dpstudio.engine import codes

    df, meta, stats = load_table(path, options, check_cancel=check_cancel, progress=progress)
    typed = [c for c in meta.typed if c in df.columns]
    meta.typed = {}
    known = {}
    for c in df.columns:
        s = df[c]
        if codes.known(s):
            k, uniques = codes.factorize(s)
            # (as Arrow arrays: sent as buffers, taken over by the parent without a pass
            # over Python objects)
            known[c] = (pa.array(k), pa.array(uniques.to_numpy(dtype=object), type=pa.large_string()))
    return df, meta, stats, typed, known


def table_received(sent) -> tuple:
    """The (table, meta, stats) of :func:`load_table`, from what :func:`load_table_to_send`
    sent: ``meta.typed`` rebuilt from the table's columns, the text columns' codes remembered.
    """
    from dpstudio.engine import codes

    df, meta, stats, typed, known = sent
    meta.typed = {c: df[c] for c in typed}
    for c, (indices, dictionary) in known.items():
        codes.remember(df[c], indices, dictionary)
    return df, meta, stats
