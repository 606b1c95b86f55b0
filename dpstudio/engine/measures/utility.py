"""Utility measures (docs/measures.md "Utility"): SSE (raw and normalised), relative
Δ of mean and variance, correlation loss, and the trade-off score.

>>> import pandas as pd
>>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0]})
>>> y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5]})
>>> sse(x, y, ["a"])
1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.measures._base import (
    _cache_entry,
    _categorical_sq,
    _check_pair,
    _col,
    _distance_fn,
    _dtypes,
    _is_numeric,
    _matrix,
    _num_dtype,
    _numeric,
    _warn,
)


def _sse_both(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attrs: list[str],
    categorical_distance: dict | None,
    warns: list[str],
    cache: dict | None = None,
    normalized_warnings: bool = True,
) -> tuple[float, float]:
    """(raw SSE, normalized SSE) in one pass; the original's matrix and variances are cached."""
    n, m = len(original), len(attrs)
    odt, pdt = _dtypes(original), _dtypes(protected)
    num, other = [], []
    for a in attrs:
        if (
            _distance_fn(categorical_distance, a) is None
            and _num_dtype(odt[a])
            and (_num_dtype(pdt[a]) or _col(protected, a).isna().all())
        ):
            num.append(a)
        else:
            other.append(a)
    raw = norm = 0.0
    if num:
        ent = _cache_entry(cache, original, ("sse", tuple(num)))
        if "x" not in ent:
            x = _matrix(original, num, "original")
            var = np.nanvar(x, axis=0, ddof=1) if n > 1 else np.zeros(len(num))
            bad = ~(var > 0) | ~np.isfinite(var)
            ent["x"], ent["var"] = x, np.where(bad, 1.0, var)
            ent["const"] = [num[i] for i in np.flatnonzero(bad)]
        if normalized_warnings:
            for a in ent["const"]:
                _warn(
                    warns,
                    f"Attribute {a!r} is constant in the original data: its SSE is "
                    "not divided by its variance (scale 1).",
                )
        sq = (ent["x"] - _matrix(protected, num, "protected")) ** 2
        nan = np.isnan(sq)
        if nan.any():
            for i in np.flatnonzero(nan.any(axis=0)):
                _warn(
                    warns,
                    f"Attribute {num[i]!r}: {int(nan[:, i].sum())} record(s) with a missing "
                    "value are left out of the SSE.",
                )
            sq = np.where(nan, 0.0, sq)
        colsum = sq.sum(axis=0)
        raw += float(colsum.sum())
        norm += float((colsum / ent["var"]).sum())
    for a in other:
        fn = _distance_fn(categorical_distance, a)
        if fn is None:
            _warn(
                warns,
                f"Attribute {a!r} is not numeric and has no semantic distance: SSE "
                "counts a changed category as distance 1.",
            )
        sq = _categorical_sq(_col(original, a), _col(protected, a), fn)
        nan = np.isnan(sq)
        if nan.any():
            _warn(
                warns,
                f"Attribute {a!r}: {int(nan.sum())} record(s) with a missing value are left out of the SSE.",
            )
            sq = np.where(nan, 0.0, sq)
        raw += float(sq.sum())
        norm += float(sq.sum())
    return raw, norm / (n * m)


def sse(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attributes: Iterable[str],
    scaling: str = "raw",
    *,
    categorical_distance: dict | None = None,
    warnings: list[str] | None = None,
    cache: dict | None = None,
) -> float:
    """Sum of squared errors over the protected attributes.

    ``scaling='raw'``: ``Σ_j Σ_i dist(x_ji, x′_ji)²`` (the papers' figures).
    ``scaling='normalized'`` (paper 001 eq. 5): each numeric attribute's squared
    differences divided by its sample variance in X, summed, divided by n·m.
    A constant attribute (variance 0) is not scaled (scale 1) and reported in
    ``warnings``.  Categorical attributes use the callable in
    ``categorical_distance[col]`` (semantic distance δ, unscaled) or, without
    one, a 0/1 mismatch (reported in ``warnings``).

    >>> import pandas as pd
    >>> x = pd.DataFrame({"a": [0.0, 2.0]}); y = pd.DataFrame({"a": [1.0, 1.0]})
    >>> sse(x, y, ["a"]), sse(x, y, ["a"], "normalized")
    (2.0, 0.5)
    """
    attrs = _check_pair(original, protected, attributes)
    if scaling not in ("raw", "normalized"):
        raise ParameterError(f"SSE scaling must be 'raw' or 'normalized'. Got {scaling!r}.")
    warns = warnings if warnings is not None else []
    raw, norm = _sse_both(
        original,
        protected,
        attrs,
        categorical_distance,
        warns,
        cache,
        normalized_warnings=scaling == "normalized",
    )
    return raw if scaling == "raw" else norm


# --------------------------------------------------------------- statistics


def delta_stats(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attributes: Iterable[str],
    warnings: list[str] | None = None,
) -> dict[str, dict[str, float]]:
    """``|Θ′ − Θ| / |Θ|`` per numeric attribute for the mean and the (sample) variance.

    Returns ``{"delta_mean": {attr: v}, "delta_var": {attr: v}}``; ``nan`` when Θ = 0
    (reported in ``warnings``).  Categorical attributes are skipped.
    """
    attrs = _check_pair(original, protected, attributes)
    warns = warnings if warnings is not None else []
    dm: dict[str, float] = {}
    dv: dict[str, float] = {}
    for a in attrs:
        if not _is_numeric(_col(original, a)):
            continue
        x = _numeric(original, a, "original")
        y = _numeric(protected, a, "protected")
        for out, th, th2, label in (
            (dm, np.nanmean(x), np.nanmean(y), "mean"),
            (dv, np.nanvar(x, ddof=1), np.nanvar(y, ddof=1), "variance"),
        ):
            if th == 0 or not np.isfinite(th):
                _warn(warns, f"Attribute {a!r} has original {label} 0: its relative Δ {label} is undefined.")
                out[a] = float("nan")
            else:
                out[a] = float(abs(th2 - th) / abs(th))
    return {"delta_mean": dm, "delta_var": dv}


def correlation_loss(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    confidential: Iterable[str],
    attributes: Iterable[str],
    warnings: list[str] | None = None,
) -> tuple[float, float]:
    """Mean and (population) standard deviation of ``|corr′ − corr|`` (thesis Tables 3.10–3.11).

    Pairs: the upper triangle (diagonal excluded) of the Pearson correlation matrix
    of ``attributes ∪ confidential`` restricted to pairs involving a confidential
    attribute.  Pairs with a constant attribute (undefined correlation) are left out
    and reported.  Returns ``(nan, nan)`` when no pair remains.
    """
    conf = [str(c) for c in confidential]
    cols = list(dict.fromkeys([str(a) for a in attributes] + conf))
    cols = _check_pair(original, protected, cols)
    warns = warnings if warnings is not None else []
    cols = [c for c in cols if _is_numeric(_col(original, c))]
    if len(cols) < 2 or not any(c in conf for c in cols):
        return float("nan"), float("nan")
    x = np.column_stack([_numeric(original, c, "original") for c in cols])
    y = np.column_stack([_numeric(protected, c, "protected") for c in cols])
    with np.errstate(invalid="ignore", divide="ignore"):
        cx = pd.DataFrame(x).corr().to_numpy()
        cy = pd.DataFrame(y).corr().to_numpy()
    iu, ju = np.triu_indices(len(cols), k=1)
    isconf = np.array([c in conf for c in cols])
    sel = isconf[iu] | isconf[ju]
    d = np.abs(cy - cx)[iu[sel], ju[sel]]
    bad = ~np.isfinite(d)
    if bad.any():
        _warn(
            warns,
            f"{int(bad.sum())} attribute pair(s) with a constant attribute have no "
            "correlation and are left out of the correlation loss.",
        )
        d = d[~bad]
    if d.size == 0:
        return float("nan"), float("nan")
    return float(d.mean()), float(d.std())


def score(sse0: float, rl0: float, sse: float, rl: float) -> dict[str, float]:
    """Trade-off against a baseline (thesis §6.4.2).

    ``SSEf = √SSE0 / √SSE``, ``RLf = RL0 / RL``, ``Score = SSEf · RLf``
    (> 1: net gain over the baseline).  Division by zero gives ``inf`` (or ``nan``
    for 0/0).

    >>> r = score(sse0=0.014 ** 2, rl0=386.92, sse=1.0, rl=1.0)
    >>> round(r["score"], 1)
    5.4
    """

    def div(a: float, b: float) -> float:
        a, b = float(a), float(b)
        if b == 0:
            return float("nan") if a == 0 else float("inf")
        return a / b

    ssef = div(math.sqrt(max(float(sse0), 0.0)), math.sqrt(max(float(sse), 0.0)))
    rlf = div(rl0, rl)
    return {"sse_factor": ssef, "rl_factor": rlf, "score": ssef * rlf}


# --------------------------------------------------------------- sdcMicro's dUtility


def il1s(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str]) -> dict[str, float]:
    """The sdcMicro IL1s (``dUtility(method="IL1s")``, sdcMicro ≥ 5.6): the absolute
    differences scaled by the original standard deviation times √2, summed over records and
    attributes.

    In full::

        IL1s = Σ_j Σ_i |x_ij − x′_ij| / (√2 · S_j)

    with S_j the sample standard deviation (n − 1) of original attribute j, missing values
    left out (``na.rm``).  ``il1s_mean`` divides by n · p (sdcMicro's older ``IL1old`` scale,
    comparable across files).  An attribute with S_j = 0 is left out.

    >>> import pandas as pd
    >>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0]}); y = pd.DataFrame({"a": [1.0, 2.0, 4.0]})
    >>> round(il1s(x, y, ["a"])["il1s"], 6)   # |3 − 4| / (√2 · 1)
    0.707107
    """
    attrs = [a for a in _check_pair(original, protected, attributes) if _is_numeric(_col(original, a))]
    total, n_attr = 0.0, 0
    for a in attrs:
        x = _numeric(original, a, "original")
        y = _numeric(protected, a, "protected")
        sd = float(np.nanstd(x, ddof=1)) if np.count_nonzero(~np.isnan(x)) > 1 else 0.0
        if not sd > 0:
            continue
        total += float(np.nansum(np.abs(x - y)) / (math.sqrt(2.0) * sd))
        n_attr += 1
    n = len(original)
    return {
        "il1s": total if n_attr else float("nan"),
        "il1s_mean": total / (n * n_attr) if n_attr and n else float("nan"),
    }


def eigen_utility(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str]) -> float:
    """The sdcMicro eigenvalue measure (``dUtility(method="eigen")``).

    In full::

        Σ_i |λ_i − λ′_i| / λ_i

    with λ (λ′) the eigenvalues, in decreasing order, of the covariance matrix of the
    standardised original (released) attributes -- i.e. of their correlation matrices,
    pairwise-complete.  0 when the correlation structure is kept; ``nan`` with fewer than two
    usable attributes or a zero eigenvalue of the original.

    >>> import pandas as pd
    >>> x = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [1.0, 3, 2, 4]})
    >>> eigen_utility(x, x, ["a", "b"])
    0.0
    """
    attrs = [a for a in _check_pair(original, protected, attributes) if _is_numeric(_col(original, a))]
    if len(attrs) < 2:
        return float("nan")
    X = pd.DataFrame({a: _numeric(original, a, "original") for a in attrs})
    Y = pd.DataFrame({a: _numeric(protected, a, "protected") for a in attrs})
    with np.errstate(invalid="ignore", divide="ignore"):
        cx = X.corr().to_numpy()  # var(scale(x)) = the correlation matrix (pairwise)
        cy = Y.corr().to_numpy()
    if not (np.all(np.isfinite(cx)) and np.all(np.isfinite(cy))):
        return float("nan")
    e1 = np.sort(np.linalg.eigvalsh(cx))[::-1]
    e2 = np.sort(np.linalg.eigvalsh(cy))[::-1]
    if np.any(np.abs(e1) < 1e-12):
        return float("nan")
    return float(np.sum(np.abs(e1 - e2) / e1))


__all__ = ["sse", "delta_stats", "correlation_loss", "score", "il1s", "eigen_utility"]


def correlation_difference(
    original: pd.DataFrame, protected: pd.DataFrame, cols: list[str]
) -> tuple[list[str], np.ndarray]:
    """corr(protected) − corr(original) over the columns of ``cols`` that are numeric on both
    sides (an m × m matrix; the app's correlation view, level ``full`` of
    :func:`dpstudio.engine.assessment.assess`).
    """
    cols = [
        c
        for c in cols
        if c in original.columns
        and c in protected.columns
        and pd.api.types.is_numeric_dtype(original[c])
        and pd.api.types.is_numeric_dtype(protected[c])
    ]
    if len(cols) < 2:
        return cols, np.zeros((len(cols), len(cols)))
    a = original[cols].to_numpy(dtype=float)
    b = protected[cols].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ca = np.corrcoef(a, rowvar=False)
        cb = np.corrcoef(b, rowvar=False)
    return cols, cb - ca
