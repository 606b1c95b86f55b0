"""Input checks shared by every method.  Each error names the column/rows and says what to do."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError, PrivacyLeakWarning, format_rows


def check_frame(df) -> None:
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"Expected a table (pandas DataFrame), got {type(df).__name__}.")
    if df.shape[1] == 0:
        raise InputError("The data has no columns.")
    if len(df) == 0:
        raise InputError("The data has no records: there is nothing to protect.")
    if len(df) == 1:
        raise InputError("The data has a single record: it cannot be protected for release "
                         "(no method can hide one person among others). Add records.")
    cols = [str(c) for c in df.columns]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(f"Duplicate column name(s): {', '.join(map(repr, dup))}. "
                         "Rename them so that every column name is unique.")


def numeric_column(df: pd.DataFrame, col: str, role_label: str) -> None:
    """Raise if ``col`` holds non-numeric values (naming the first offending rows)."""
    s = df[col]
    if pd.api.types.is_bool_dtype(s):
        raise InputError(f"Column {col!r} ({role_label}) is boolean; this method needs numbers. "
                         "Recode it as 0/1 or give it another role.")
    if pd.api.types.is_numeric_dtype(s):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        inf = np.flatnonzero(np.isinf(vals))
        if inf.size:
            raise InputError(f"Column {col!r} has infinite values in row(s) {format_rows(inf)}. "
                             "Fix or remove them.")
        return
    conv = pd.to_numeric(s, errors="coerce")
    bad = np.flatnonzero(conv.isna().to_numpy() & s.notna().to_numpy())
    if bad.size:
        examples = ", ".join(repr(str(s.iloc[i])) for i in bad[:3])
        raise InputError(
            f"Column {col!r} ({role_label}) must be numeric, but row(s) {format_rows(bad)} hold "
            f"text ({examples}). Correct those values, or give the column another role."
        )


def missing_rows(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    if not cols:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(df[cols].isna().to_numpy().any(axis=1))


def missing_message(df: pd.DataFrame, cols: list[str]) -> str:
    parts = []
    for c in cols:
        n = int(df[c].isna().sum())
        if n:
            rows = np.flatnonzero(df[c].isna().to_numpy())
            parts.append(f"{c!r}: {n} (rows {format_rows(rows, 5)})")
    total = len(missing_rows(df, cols))
    return (f"{total} record(s) have missing values in protected attributes — "
            + "; ".join(parts)
            + ". Impute them before protection, or enable 'drop records with missing values' "
              "(drop_missing=True / --drop-missing) to release without those records.")


def check_domains(df: pd.DataFrame, cols: list[str], domains: dict, required: bool,
                  method_id: str) -> dict[str, tuple[float, float]]:
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
                    "leak individuals' values), e.g. --domain " f"{c}=0:150000."
                )
            continue
        try:
            lb, ub = (float(domains[c][0]), float(domains[c][1]))
        except (TypeError, ValueError, IndexError):
            raise ParameterError(f"Domain of column {c!r} must be a pair (lower, upper). Got {domains[c]!r}.") from None
        if not (math.isfinite(lb) and math.isfinite(ub)) or not lb < ub:
            raise ParameterError(f"Domain of column {c!r} must have finite lower < upper. Got [{lb}, {ub}].")
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


def check_k(k: int, n: int, method_id: str, min_k: int = 1) -> None:
    if k < min_k:
        raise ParameterError(f"The 'k' parameter of method {method_id!r} must be at least {min_k}. Got {k}.")
    if k > 1 and k > n // 2:
        raise ParameterError(
            f"The 'k' parameter of method {method_id!r} must be at most n/2 = {n // 2} for "
            f"{n} records (at least two clusters are needed). Got {k}."
        )


def check_epsilon(eps) -> float:
    try:
        e = float(eps)
    except (TypeError, ValueError):
        raise ParameterError(f"ε (epsilon) must be a positive number. Got {eps!r}.") from None
    if not math.isfinite(e) or e <= 0:
        raise ParameterError(f"ε (epsilon) must be a positive finite number. Got {eps!r}.")
    if e > 20:
        warnings.warn(f"ε = {e:g} is very large: the differential-privacy guarantee is weak.",
                      PrivacyLeakWarning, stacklevel=3)
    return e


def constant_columns(df: pd.DataFrame, cols: list[str]) -> list[str]:
    out = []
    for c in cols:
        s = df[c]
        if pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            if v.size == 0 or np.all(np.isnan(v)) or np.nanmin(v) == np.nanmax(v):
                out.append(c)
        elif s.nunique(dropna=True) <= 1:
            out.append(c)
    return out


def check_precision(df: pd.DataFrame, cols: list[str], precision: dict | None,
                    domains: dict, uses_noise: bool) -> dict[str, float]:
    """Output grid γ > 0 of every noisy numeric attribute: the declared one, else the default
    from public facts (integer type: 1; else the declared domain); columns with neither are
    left out (the method asks for one when it draws noise)."""
    from dpstudio.engine.noise import default_precision, make_grid, pd_is_integer

    given = dict(precision or {})
    unknown = [c for c in given if c not in df.columns]
    if unknown:
        raise ParameterError(f"Precision given for column(s) not in the data: {', '.join(map(repr, unknown))}.")
    out: dict[str, float] = {}
    if not uses_noise:
        return out
    for c in cols:
        g = given.get(c)
        if g is None:
            g = default_precision(domains.get(c), pd_is_integer(df[c]))
            if g is None:
                continue
        try:
            g = float(g)
        except (TypeError, ValueError):
            raise ParameterError(f"Precision of column {c!r} must be a number > 0 (e.g. 0.01 or 100). Got {g!r}.") from None
        if not (math.isfinite(g) and g > 0):
            raise ParameterError(f"Precision of column {c!r} must be a finite number > 0 (e.g. 0.01 or 100). Got {g!r}.")
        make_grid(c, g, domains.get(c), pd_is_integer(df[c]), len(df))   # usable?
        out[c] = g
    return out
