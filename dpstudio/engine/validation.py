"""Input checks shared by every method: the frame, its columns, domains and output grids.
Each error names the column/rows and says what to do.  Parameter values (k, ε, a method's
own parameters) are checked in :mod:`dpstudio.engine.params`, the one validation path.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError, format_rows

# the one notice type (issue 22 §1): the checks here build their private notes with it
from dpstudio.engine.notices import Notice, note_code, private_note, public_warning  # noqa: F401

#: Declared domain bounds lie in [−DOMAIN_LIMIT, DOMAIN_LIMIT]: whole numbers up to 10¹⁵ are
#: exact in a double (2⁵³ ≈ 9·10¹⁵), the width ub − lb stays finite and the grid arithmetic
#: (bound/γ, sums over the records) stays within exact integers.
DOMAIN_LIMIT = 1e15
#: An output precision γ lies in [PRECISION_MIN, PRECISION_MAX] and, with a domain, each bound
#: is at most 2⁵³ grid steps from 0 (offsets and sums in int64, exact in a double).
PRECISION_MIN = 1e-12
PRECISION_MAX = 1e15
MAX_BOUND_UNITS = 2**53


def check_frame(df) -> list[str]:
    """Refuse what no method can protect (not a table, no columns, fewer than two records,
    duplicate names); returns the column names as text (``str`` of each, in order).
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"Expected a table (pandas DataFrame), got {type(df).__name__}.")
    if df.shape[1] == 0:
        raise InputError("The data has no columns.")
    if len(df) == 0:
        raise InputError("The data has no records: there is nothing to protect.")
    if len(df) == 1:
        raise InputError(
            "The data has a single record: it cannot be protected for release "
            "(no method can hide one person among others). Add records."
        )
    names = [str(c) for c in df.columns.tolist()]  # (a list: no per-value Arrow iteration)
    if len(set(names)) == len(names):  # the usual case, without a pandas Series (issue 27 §2)
        return names
    cols = pd.Series(names)
    dup = sorted(set(cols[cols.duplicated()]))  # linear: cols.count per column was quadratic
    if dup:
        raise InputError(
            f"Duplicate column name(s): {', '.join(map(repr, dup))}. "
            "Rename them so that every column name is unique."
        )
    return names


def numeric_column(df: pd.DataFrame, col: str, role_label: str) -> None:
    """Raise if ``col`` holds non-numeric values (naming the first offending rows)."""
    s = df[col]
    if pd.api.types.is_bool_dtype(s):
        raise InputError(
            f"Column {col!r} ({role_label}) is boolean; this method needs numbers. "
            "Recode it as 0/1 or give it another role."
        )
    if pd.api.types.is_numeric_dtype(s):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        inf = np.flatnonzero(np.isinf(vals))
        if inf.size:
            raise InputError(
                f"Column {col!r} has infinite values in row(s) {format_rows(inf)}. Fix or remove them."
            )
        return
    conv = pd.to_numeric(s, errors="coerce")
    bad = np.flatnonzero(conv.isna().to_numpy() & s.notna().to_numpy())
    if bad.size:
        examples = ", ".join(repr(str(s.iloc[i])) for i in bad[:3])
        raise InputError(
            f"Column {col!r} ({role_label}) must be numeric, but row(s) {format_rows(bad)} hold "
            f"text ({examples}). Correct those values, or give the column another role."
        )


#: A table of at most this many cells (records × protected columns) of plain numbers is
#: checked, digested and handed to the method as one float matrix (:func:`numeric_block`):
#: small tables then pay no per-column pandas overhead (issue 27 §2), large ones keep the
#: column-by-column paths, which never hold a second copy of every protected column.
BLOCK_CELLS = 1 << 22


def numeric_block(df: pd.DataFrame, cols: list[str], *, names: list[str] | None = None) -> np.ndarray | None:
    """``df[cols]`` as one read-only C-contiguous float64 (n, m) matrix when every column of
    ``cols`` has a plain numpy integer or float dtype and the table is small
    (:data:`BLOCK_CELLS`); else None.  Its columns are exactly what the column-by-column
    checks read (``df[c].to_numpy(dtype=float64)``), so every check gives the same answer on it.
    ``names``: ``df.columns.tolist()`` when the caller has it.
    """
    blocks = numeric_blocks(df, cols, names=names)
    return None if blocks is None else blocks[0]


def numeric_blocks(
    df: pd.DataFrame, cols: list[str], *, names: list[str] | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`numeric_block` and the same values by column: a read-only C-contiguous (m, n)
    matrix, each column's values contiguous (what the column-wise checks and the data digest
    read; pandas builds the values of a frame of several columns that way, so it usually
    costs no copy).  None when :func:`numeric_block` is None.
    """
    if not cols or len(df) * len(cols) > BLOCK_CELLS:
        return None
    names = df.columns.tolist() if names is None else names
    dts = dict(zip(names, column_dtypes(df)))
    if not all(isinstance(dts[c], np.dtype) and dts[c].kind in "iuf" for c in cols):
        return None
    if names == list(cols):
        T = df.to_numpy(dtype=np.float64).T
    elif all(isinstance(d, np.dtype) and d.kind in "iuf" for d in dts.values()):
        pos = {c: j for j, c in enumerate(names)}  # all numbers: one conversion, one gather
        T = df.to_numpy(dtype=np.float64).T[[pos[c] for c in cols]]
    else:
        T = df[cols].to_numpy(dtype=np.float64).T
    T = np.ascontiguousarray(T)  # (no copy when pandas built it so)
    X = np.ascontiguousarray(T.T)
    X.setflags(write=False)
    T.setflags(write=False)
    return X, T


def column_dtypes(df: pd.DataFrame) -> list:
    """``df.dtypes.tolist()`` without building that Series (its text index made it ~0.1 ms of
    a small table's call, issue 27 §2): the frame's own per-column dtypes when pandas exposes
    them, else the Series' (``tests/engine/test_eia_mdav_overhead.py`` pins the two equal).
    """
    get = getattr(getattr(df, "_mgr", None), "get_dtypes", None)
    if get is not None:
        try:
            dts = list(get())
        except Exception:  # pragma: no cover - another pandas' internals
            dts = None
        if dts is not None and len(dts) == df.shape[1]:
            return dts
    return df.dtypes.tolist()  # pragma: no cover - the public route


def first_infinite(X: np.ndarray, cols: list[str]) -> str | None:
    """The first column of ``cols`` (the columns of ``X``) holding an infinite value."""
    if np.isfinite(X).all():  # (one pass over the block: a reduction by column costs 8x)
        return None
    bad = np.flatnonzero(np.isinf(X).any(axis=0))
    return cols[int(bad[0])] if bad.size else None


def missing_rows(df: pd.DataFrame, cols: list[str], *, matrix: np.ndarray | None = None) -> np.ndarray:
    """Rows with a missing value in ``cols`` (``matrix``: :func:`numeric_block` of them)."""
    if not cols:
        return np.zeros(0, dtype=np.int64)
    if matrix is not None:
        if not np.isnan(matrix).any():  # (the usual case, without a reduction by row)
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isnan(matrix).any(axis=1))
    # column by column (no copy of the columns as one frame, issue 27); integer and boolean
    # numpy columns cannot hold a missing value
    miss = None
    for c in cols:
        dt = df[c].dtype
        if isinstance(dt, np.dtype) and dt.kind in "iub":
            continue
        m = np.asarray(df[c].isna().to_numpy(), dtype=bool)
        miss = m if miss is None else (miss | m)
    return np.zeros(0, dtype=np.int64) if miss is None else np.flatnonzero(miss)


def missing_message(df: pd.DataFrame, cols: list[str]) -> str:
    parts = []
    for c in cols:
        n = int(df[c].isna().sum())
        if n:
            rows = np.flatnonzero(df[c].isna().to_numpy())
            parts.append(f"{c!r}: {n} (rows {format_rows(rows, 5)})")
    total = len(missing_rows(df, cols))
    return (
        f"{total} record(s) have missing values in protected attributes — "
        + "; ".join(parts)
        + ". Impute them before protection, or enable 'drop records with missing values' "
        "(drop_missing=True / --drop-missing) to release without those records."
    )


def check_domains(
    df: pd.DataFrame, cols: list[str], domains: dict, required: bool, method_id: str
) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    domains = dict(domains or {})
    unknown = [c for c in domains if c not in df.columns]
    if unknown:
        raise ParameterError(f"Domain given for column(s) not in the data: {', '.join(map(repr, unknown))}.")
    for c in cols:
        if c not in domains or domains[c] is None:
            if required:
                raise ParameterError(
                    f"Column {c!r} has no declared domain [lower, upper], which method "
                    f"{method_id!r} needs to calibrate its noise. Declare the range of values the "
                    "attribute can take in the population (not the min/max of this file, which "
                    "leak individuals' values), e.g. --domain "
                    f"{c}=0:150000."
                )
            continue
        lb, ub = check_domain_pair(c, domains[c])
        vals = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        out_rows = np.flatnonzero((vals < lb) | (vals > ub))
        if out_rows.size:
            raise InputError(
                f"Column {c!r}: {out_rows.size} value(s) lie outside the declared domain "
                f"[{lb:g}, {ub:g}], in row(s) {format_rows(out_rows)} (e.g. {vals[out_rows[0]]:g}). "
                "Widen the domain or correct the values; dpstudio never clips input silently."
            )
        out[c] = (lb, ub)
    return out


def check_domain_pair(col: str, pair) -> tuple[float, float]:
    """A declared domain (lower, upper) of ``col``: two numbers in [−10¹⁵, 10¹⁵], lower < upper."""
    lim = f"[{-DOMAIN_LIMIT:g}, {DOMAIN_LIMIT:g}]"
    try:
        if isinstance(pair, (str, bytes)) or len(pair) != 2:
            raise TypeError
        lb, ub = (float(pair[0]), float(pair[1]))
    except (TypeError, ValueError, IndexError, OverflowError):
        raise ParameterError(
            f"Domain of column {col!r} must be a pair (lower, upper) of numbers "
            f"in the range {lim}. Got {pair!r}."[:300]
        ) from None
    if not (math.isfinite(lb) and math.isfinite(ub)) or not lb < ub:
        raise ParameterError(
            f"Domain of column {col!r} must have finite lower < upper. Got [{lb:g}, {ub:g}]."
        )
    if abs(lb) > DOMAIN_LIMIT or abs(ub) > DOMAIN_LIMIT:
        raise ParameterError(
            f"Domain of column {col!r} must have bounds in the range {lim} (beyond, the grid "
            f"arithmetic is not exact). Got [{lb:g}, {ub:g}]. Rescale the column (e.g. thousands) "
            "or declare the range the attribute can really take."
        )
    return lb, ub


def _same(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


def data_derived_domains(df: pd.DataFrame, domains: dict[str, tuple[float, float]]) -> dict[str, str]:
    """Declared domains whose bounds coincide with bounds derived from the data: the column's
    maximum, its minimum (unless 0, the natural lower bound of counts and amounts), or the
    '0 … 1.5 × max' suggestion of the app.  Column -> what coincides.
    """
    out: dict[str, str] = {}
    for c, (lb, ub) in domains.items():
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0:
            continue
        lo, hi = float(v.min()), float(v.max())
        sug_lo = min(0.0, lo)
        sug_hi = 1.5 * hi if hi > 0 else hi + 1.0
        if sug_hi <= sug_lo:
            sug_hi = sug_lo + 1.0
        if _same(lb, sug_lo) and _same(ub, sug_hi) and not _same(ub, hi):
            out[c] = "the '0 … 1.5 × max' suggestion computed from the data's maximum"
        elif _same(lb, lo) and _same(ub, hi):
            out[c] = "the data's minimum and maximum"
        elif _same(lb, lo) and lo != 0.0:  # a lower bound of 0 is usually the natural one
            out[c] = "the data's minimum (lower bound)"
        elif _same(ub, hi):
            out[c] = "the data's maximum (upper bound)"
    return out


def data_derived_domain_warning(col: str, why: str) -> Notice:
    """The PRIVATE note for a declared domain that coincides with a bound of the data.  It is
    never published: a public text that depended on whether someone sits at a bound would
    itself disclose it (issue 21 §3, N1), and real limits (0–7 days a week, income bands
    1–24) are often reached by the data.
    """
    return private_note(
        "domain-at-data-bound",
        f"The declared domain of {col!r} coincides with {why}. This note is private (it is "
        "not published). If these are the limits the attribute can take in the population "
        "(e.g. 0–100 for a percentage, 0–7 days a week), nothing is wrong. If the bounds were "
        "read off this file, declare the population's range instead: bounds taken from the "
        "data calibrate the noise to this data set, and publishing them reveals those extreme "
        "values.",
    )


def constant_columns(
    df: pd.DataFrame,
    cols: list[str],
    *,
    matrix: np.ndarray | None = None,
    by_column: np.ndarray | None = None,
    finite: bool = False,
) -> list[str]:
    """The columns of ``cols`` with at most one distinct non-missing value (``matrix``:
    :func:`numeric_block` of them; ``by_column``: the same values by column, from
    :func:`numeric_blocks`; ``finite``: the caller has checked that the block holds no
    missing and no infinite value, so it is not scanned for missing values again).
    """
    if by_column is None and matrix is not None and matrix.shape[0]:
        by_column = np.ascontiguousarray(matrix.T)  # (reductions along rows of it: 4x faster)
    if by_column is not None and by_column.shape[1] and (finite or not np.isnan(by_column).any()):
        same = by_column.min(axis=1) == by_column.max(axis=1)
        return [c for c, s in zip(cols, same) if s]
    from dpstudio.engine.codes import factorize, known

    out = []
    for c in cols:
        s = df[c]
        dt = s.dtype
        if isinstance(dt, np.dtype) and dt.kind in "iu" and len(s):
            # (the float64 values' min and max, without converting every value: the
            # conversion keeps the order, so they are equal exactly when these are)
            a = s.to_numpy()
            if float(a.min()) == float(a.max()):
                out.append(c)
        elif pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            if v.size == 0 or np.all(np.isnan(v)) or np.nanmin(v) == np.nanmax(v):
                out.append(c)
        elif known(s):  # the codes of a column read from a file: its distinct values, counted
            if len(factorize(s)[1]) <= 1:
                out.append(c)
        elif s.nunique(dropna=True) <= 1:
            out.append(c)
    return out


def default_precision(column: str, domains: dict, types: dict | None = None) -> float | None:
    """The default output grid γ of ``column`` from declared facts only: declared type
    ``integer`` gives 1, else the declared domain decides; None without either (the app shows
    it greyed in the empty cell, :func:`check_precision` uses it).

    >>> default_precision("age", {"age": (0, 120)}, {"age": "integer"})
    1.0
    """
    from dpstudio.engine.algorithms.noise import default_precision as from_domain
    from dpstudio.engine.roles import declared_integer

    return from_domain(domains.get(column), declared_integer(dict(types or {}), column))


def check_precision(
    df: pd.DataFrame,
    cols: list[str],
    precision: dict | None,
    domains: dict,
    uses_noise: bool,
    types: dict | None = None,
) -> dict[str, float]:
    """Output grid γ > 0 of every noisy numeric attribute: the declared one, else the default
    from declared facts only (declared type ``integer``: 1; else from the declared domain;
    never the values or their dtype, issue 21 §3 N2); columns with neither are left out (the
    method asks for one when it draws noise).
    """
    from dpstudio.engine.algorithms.noise import make_grid
    from dpstudio.engine.roles import declared_integer

    types = dict(types or {})

    given = dict(precision or {})
    unknown = [c for c in given if c not in df.columns]
    if unknown:
        raise ParameterError(
            f"Precision given for column(s) not in the data: {', '.join(map(repr, unknown))}."
        )
    out: dict[str, float] = {}
    if not uses_noise:
        return out
    for c in cols:
        g = given.get(c)
        if g is None:
            g = default_precision(c, domains, types)
            if g is None:
                continue
        rng_txt = f"[{PRECISION_MIN:g}, {PRECISION_MAX:g}]"
        try:
            g = float(g.strip() if isinstance(g, str) else g)
        except (TypeError, ValueError):
            raise ParameterError(
                f"Precision of column {c!r} must be a number > 0 in the range "
                f"{rng_txt} (e.g. 0.01 or 100). Got {g!r}."
            ) from None
        if not (math.isfinite(g) and g > 0):
            raise ParameterError(
                f"Precision of column {c!r} must be a number > 0 in the range "
                f"{rng_txt} (e.g. 0.01 or 100). Got {g!r}."
            )
        dom = domains.get(c)
        if dom is not None:  # advice relative to the domain first: a coarser γ that works
            top = max(abs(float(dom[0])), abs(float(dom[1])))
            if top / g > MAX_BOUND_UNITS:
                coarser = 10.0 ** math.ceil(math.log10(top / MAX_BOUND_UNITS))
                raise ParameterError(
                    f"Precision {g:g} of column {c!r} is too fine for its domain [{dom[0]:g}, "
                    f"{dom[1]:g}]: a bound lies more than 2^53 grid steps from 0, beyond exact "
                    f"integer arithmetic. Choose a coarser precision, e.g. --precision {c}={coarser:g}."
                )
            make_grid(c, g, dom, declared_integer(types, c), len(df))  # span and sums: usable?
        if not PRECISION_MIN <= g <= PRECISION_MAX:
            raise ParameterError(
                f"Precision of column {c!r} must be a number > 0 in the range "
                f"{rng_txt} (e.g. 0.01 or 100). Got {g!r}."
            )
        make_grid(c, g, dom, declared_integer(types, c), len(df))
        out[c] = g
    return out


def type_notes(
    df: pd.DataFrame, cols: list[str], types: dict, precision: dict | None, prec: dict[str, float]
) -> list[Notice]:
    """PRIVATE hints about the declared types of the noisy columns ``cols`` (issue 21 §3 N2).

    The default output precision is a function of the declared type and domain only; these
    notes tell the user when the data suggests another declaration: a column of whole numbers
    with no declared type (its default γ comes from the domain, not 1), or a column declared
    ``integer`` that holds values which are not whole numbers (rounded to the grid).
    """
    from dpstudio.engine.roles import INTEGER_TYPE

    given = dict(precision or {})
    out: list[Notice] = []
    for c in cols:
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        ok = np.isfinite(v)
        if not ok.any():
            continue
        frac = ok & (v != np.round(v))
        if c not in types and c not in given and not frac.any():
            gamma = prec.get(c)
            now = f"γ = {gamma:g}, from its declared domain" if gamma is not None else "none yet"
            out.append(
                private_note(
                    "integer-valued-untyped",
                    f"Column {c!r} looks integer-valued (every value is a whole number) but "
                    f"has no declared type, so its output precision is the default ({now}), "
                    f"not 1. If it counts or codes whole units, declare it: --type {c}=integer "
                    "(app: Attributes tab, column Type; the recipe stores the choice) for "
                    "γ = 1 and whole-number output. The default never looks at the values: "
                    "this hint is private.",
                )
            )
        elif types.get(c) == INTEGER_TYPE and frac.any():
            rows = np.flatnonzero(frac)
            out.append(
                private_note(
                    "non-integer-values",
                    f"Column {c!r} is declared integer but {rows.size} value(s) are not whole "
                    f"numbers (row(s) {format_rows(rows)}, e.g. {v[rows[0]]:g}): they are "
                    "rounded to the output grid before the noise is added (the guarantee covers "
                    "that). Declare the type numeric if the fractions matter.",
                )
            )
    return out
