"""Qt-free computations the app runs in a worker thread or a child process.

Kept apart from the widgets so that a child process (see :mod:`dpstudio.app.subproc`) can
import them without Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
            conv = pd.to_numeric(s, errors="coerce")
            non_numeric = int((conv.isna() & s.notna()).sum())
            if conv.notna().any():
                mn, mx = float(conv.min()), float(conv.max())
        out[str(c)] = ColumnStats(str(c), str(s.dtype), numeric, missing, distinct, mn, mx,
                                  non_numeric)
    return out


def correlation_difference(orig: pd.DataFrame, prot: pd.DataFrame, cols: list[str]
                           ) -> tuple[list[str], np.ndarray]:
    """corr(protected) − corr(original) over the numeric ``cols`` (m × m)."""
    cols = [c for c in cols if c in orig.columns and c in prot.columns
            and pd.api.types.is_numeric_dtype(orig[c]) and pd.api.types.is_numeric_dtype(prot[c])]
    if len(cols) < 2:
        return cols, np.zeros((len(cols), len(cols)))
    a = orig[cols].to_numpy(dtype=float)
    b = prot[cols].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ca = np.corrcoef(a, rowvar=False)
        cb = np.corrcoef(b, rowvar=False)
    return cols, cb - ca


#: Whether a method generalises k-quasi-identifiers (a numeric one becomes interval text).
from dpstudio.engine.registry import generalises as _generalises  # noqa: E402
GENERALISED_NOTE = ("Generalised to intervals by the method, so measured as categories in SSE "
                    "and record linkage (a changed value counts 1, no numeric distance): ")


def _mismatch(a, b):
    """0/1 distance on the printed values (39 and '39' match; 39 and '35-39' do not)."""
    a = np.asarray(a, dtype=object).astype(str)
    b = np.asarray(b, dtype=object).astype(str)
    return (a != b).astype(np.float64)


class HierarchyDistance:
    """Semantic distance δ of a column's hierarchy (metrics.md: categorical dist = δ) as a
    ``categorical_distance`` callable.  Values are compared as printed labels (39 → '39');
    a label the hierarchy does not know counts as the largest distance when it differs."""

    def __init__(self, hierarchy, column: str = "") -> None:
        from dpstudio.engine.hierarchies.taxonomy import load_taxonomy

        self.tax = load_taxonomy(hierarchy, column)
        self.top = float(np.max(self.tax.dist)) if np.size(self.tax.dist) else 1.0
        self.known = np.asarray(list(self.tax.concepts), dtype=object).astype(str)

    def __call__(self, a, b):
        a = np.asarray(a, dtype=object).astype(str)
        b = np.asarray(b, dtype=object).astype(str)
        out = np.where(a == b, 0.0, self.top)
        ok = np.isin(a, self.known) & np.isin(b, self.known)
        if ok.any():
            out[ok] = np.asarray(self.tax.distance(a[ok], b[ok]), dtype=np.float64)
        return out


def generalised_distances(df, method: str, roles: dict, hierarchies: dict | None = None
                          ) -> dict:
    """``categorical_distance`` for the evaluation (the same for every sweep point and for
    Protect, so their measures agree):

    * a protected column with a hierarchy: its semantic distance δ;
    * a numeric k-quasi a generalising method turns into interval text (k-eps without an age
      hierarchy): 0/1 on the printed values (the engine's measures would otherwise reject
      text in a numeric column)."""
    out: dict = {}
    for c, h in (hierarchies or {}).items():
        if roles.get(c) in (None, "other", "identifier") or c not in df.columns:
            continue
        if pd.api.types.is_numeric_dtype(df[c]) and not (
                _generalises(method) and roles.get(c) == "k-quasi"):
            continue  # numeric values keep the numeric distance |x − x′|
        try:
            out[c] = HierarchyDistance(h, c)
        except engine.DPStudioError:
            pass  # the method validates hierarchies itself; measures then use 0/1
    if _generalises(method):
        for c, r in roles.items():
            if (r == "k-quasi" and c not in out and c in df.columns
                    and pd.api.types.is_numeric_dtype(df[c])):
                out[c] = _mismatch
    return out


def protect_and_evaluate(df, method: str, roles: dict, domains: dict, hierarchies: dict,
                         seed: int, params: dict, progress=None, check_cancel=None) -> tuple:
    """Worker body of Protect: run, evaluate, k-anonymity check and correlation difference."""
    res = engine.protect(df, method, roles, domains, seed=seed, hierarchies=hierarchies or None,
                         progress=progress, check_cancel=check_cancel, **params)
    if check_cancel:
        check_cancel()
    orig = res.aligned_original()
    notes: list[str] = []
    dist = generalised_distances(df, method, roles, hierarchies)
    flat = [c for c, f in dist.items() if f is _mismatch]
    if flat:
        notes.append(GENERALISED_NOTE + ", ".join(flat) + ".")
    if not dist:
        ev = dict(engine.evaluate(orig, res.data, res.protected_attributes, result=res,
                                  measures=("sse", "rl", "delta", "corr", "kanon")))
    else:  # Δ mean/variance and correlations only where the release is still numeric
        ev = dict(engine.evaluate(orig, res.data, res.protected_attributes, result=res,
                                  measures=("sse", "rl", "kanon"), categorical_distance=dist))
        # (text columns have no Δ / correlation anyway; numeric ones measured by δ may be
        # generalised, so they are left out too)
        rest = [a for a in res.protected_attributes if a not in dist
                or (pd.api.types.is_numeric_dtype(orig[a])
                    and pd.api.types.is_numeric_dtype(res.data[a]))]
        ev2 = dict(engine.evaluate(orig, res.data, rest, result=res,
                                   measures=("delta", "corr"))) if rest else {}
        warns = list(ev.get("warnings") or [])
        warns += [w for w in ev2.pop("warnings", None) or [] if w not in warns]
        ev.update(ev2)
        ev["warnings"] = warns
    if notes:
        ev["warnings"] = list(ev.get("warnings") or []) + notes
    extra: dict[str, Any] = {}
    conf = [c for c, r in res.roles.items() if r == "confidential"]
    cols = list(dict.fromkeys(list(res.protected_attributes) + conf))
    extra["corr"] = correlation_difference(orig, res.data, cols)
    ev["_app"] = extra
    return res, ev


def sweep_points(df, method, roles, domains, *, ks, epsilons, repeats, seed, hierarchies,
                 params, check_cancel, progress):
    """A trade-off sweep (run in a child process): the engine's SweepPoints, one by one.

    A (k, ε) cell the method cannot run (e.g. t-close-dp needs k ≥ ⌊e^ε⌋ + 1) no longer stops
    the whole sweep: it is yielded as a point with empty ``values`` and its reason in
    ``point.skipped``, and the sweep goes on with the remaining cells (a new engine sweep
    over them).  A sweep whose very first cell fails raises as before (bad settings)."""
    from dpstudio.engine import api
    from dpstudio.engine.registry import get_method
    from dpstudio.engine.sweeps import SweepPoint, grid

    spec = get_method(method)
    dist = generalised_distances(df, method, roles, hierarchies)
    common = dict(repeats=repeats, seed=seed, hierarchies=hierarchies or None,
                  check_cancel=check_cancel,
                  evaluate_options={"categorical_distance": dist} if dist else None, **params)
    total = len(grid(spec, ks, epsilons, True))
    state = {"done": 0, "t_off": 0.0}

    def part(ks_i, eps_i, base):
        cells = grid(spec, ks_i, eps_i, base)
        n, last = 0, 0.0
        try:
            for pt in api.sweep(df, method, roles, domains, ks=ks_i, epsilons=eps_i,
                                baselines=base, **common):
                pt.runs = []  # per-repetition dicts are not needed by the app
                pt.index, pt.total = state["done"], total
                last = pt.elapsed
                pt.elapsed = state["t_off"] + pt.elapsed
                state["done"] += 1
                n += 1
                progress(state["done"] / max(total, 1))
                yield pt
        except engine.Cancelled:
            raise
        except engine.DPStudioError as exc:
            if state["done"] == 0 or n >= len(cells):
                raise  # the settings, not one cell, are wrong
            state["t_off"] += last
            _ki, k, _ei, e = cells[n]
            skip = SweepPoint(k=k, epsilon=e, repeats=0, values={}, index=state["done"],
                              total=total, elapsed=state["t_off"])
            skip.runs = []
            skip.skipped = str(exc).splitlines()[0]
            state["done"] += 1
            yield skip
            # the rest of this k's ε, then every later k
            eps_k = [c[3] for c in cells[n + 1:] if c[1] == k and c[3] is not None]
            if eps_k and k is not None:
                yield from part([k], eps_k, False)
            later = [k_ for k_ in ks_i if k is not None and ks_i.index(k_) > ks_i.index(k)]
            if later:
                yield from part(later, eps_i, base)
            elif k is None:  # a method without k: the remaining ε
                rest = [c[3] for c in cells[n + 1:]]
                if rest:
                    yield from part(ks_i, rest, False)
            return
        state["t_off"] += last

    yield from part(list(ks), list(epsilons), True)


def load_table(path, options, *, check_cancel, progress):
    """Open a file (in a thread, or a child process for big files): the table, its read conventions and column statistics."""
    from dpstudio.engine import io as engine_io

    df, meta = engine_io.read_table(path, progress=progress, **options)
    check_cancel()
    return df, meta, column_stats(df)
