"""Weighted estimates, original vs release (docs/measures.md "Weighted estimates").

What a statistical office checks before publishing survey microdata: do the estimates users
will compute from the release -- weighted totals and means of numeric variables, weighted
shares of categories -- stay close to those of the original file?  With sampling weights
w_i (the column with role ``weight``; without one every record weighs 1):

* **total** of x: T = Σ w_i x_i over the records whose x is known (missing values -- e.g.
  suppressed ones -- are left out, as a weighted total over the respondents);
* **mean** of x: T / Σ w_i over the same records;
* **share** of category c of a variable: Σ_{x_i = c} w_i / Σ w_i over all records, a missing
  value being a category of its own (``(missing)``: a suppressed value moves weight there).

Each estimate is computed on the original file and, separately, on the release (the two need
not hold the same records: a method that removes records changes the estimates, and that
shows here); the release is weighted by its own weight column (released unchanged: a
``weight`` role is never protected).  ``relative_error`` = (release − original) / |original|
(0 when both are 0 or when it is below :data:`SUM_ROUNDING`, the rounding of sums taken in
another record order; NaN when only the original is 0).  The table is computed against the
original data: it is PRIVATE (the assessment, the app), never part of a public file.

>>> import pandas as pd
>>> o = pd.DataFrame({"w": [1.0, 3.0], "inc": [10.0, 20.0], "sex": [1, 2]})
>>> r = pd.DataFrame({"w": [1.0, 3.0], "inc": [12.0, 20.0], "sex": [1, None]})
>>> t = weighted_estimates(o, r, weight="w", totals=["inc"], shares=["sex"]).table
>>> t[["statistic", "category", "original", "release"]].values.tolist()
[['total', None, 70.0, 72.0], ['share', '1', 0.25, 0.25], ['share', '2', 0.75, 0.0], ['share', '(missing)', 0.0, 0.75]]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError

#: The label of a missing value among a variable's categories.
MISSING_LABEL = "(missing)"
#: The columns of :attr:`WeightedEstimates.table`.
COLUMNS = ("variable", "statistic", "category", "original", "release", "difference", "relative_error")
#: At most this many categories of one variable are listed (the largest by original share);
#: the others are summed into one row ``(other categories)``.
MAX_CATEGORIES = 200


@dataclass
class WeightedEstimates:
    """The table of estimates (:data:`COLUMNS`), the weight used on each side and notes."""

    table: pd.DataFrame
    weight: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def max_abs_relative_error(self) -> float:
        """The largest |relative error| of any estimate (NaN when there is none)."""
        v = np.abs(self.table["relative_error"].to_numpy(dtype=np.float64))
        v = v[np.isfinite(v)]
        return float(v.max()) if v.size else float("nan")

    def summary(self) -> dict:
        """Scalars for a step's figures: ``weighted_max_rel_error`` and, per statistic, the
        largest |relative error| (``weighted_total_max_rel_error``, ...).
        """
        out = {"weighted_max_rel_error": self.max_abs_relative_error}
        for stat in ("total", "mean", "share"):
            v = self.table.loc[self.table["statistic"] == stat, "relative_error"].to_numpy(dtype=np.float64)
            v = np.abs(v[np.isfinite(v)])
            if v.size:
                out[f"weighted_{stat}_max_rel_error"] = float(v.max())
        return out

    def to_records(self) -> list[dict]:
        """The rows as dicts (JSON-ready: NaN stays NaN, the caller's writer decides)."""
        return [
            {
                c: (None if (isinstance(v, float) and c == "category" and np.isnan(v)) else v)
                for c, v in r.items()
            }
            for r in self.table.to_dict(orient="records")
        ]


def _weights(df: pd.DataFrame, weight: str | None, which: str) -> np.ndarray:
    if weight is None:
        return np.ones(len(df))
    if weight not in df.columns:
        raise InputError(f"The weight column {weight!r} is not in the {which} data.")
    w = pd.to_numeric(df[weight], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise InputError(
            f"Weight column {weight!r} of the {which} data: {int(bad.sum())} record(s) have a "
            "missing, non-numeric or negative weight; give every record its sampling weight."
        )
    return w


def _numeric(df: pd.DataFrame, col: str) -> np.ndarray | None:
    s = df[col]
    if pd.api.types.is_bool_dtype(s) or not pd.api.types.is_numeric_dtype(s):
        return None
    return s.to_numpy(dtype=np.float64, na_value=np.nan)


#: Relative differences below this are rounding of the sums (the release's records are in
#: another order): reported as 0.
SUM_ROUNDING = 1e-12


def _rel(orig: np.ndarray, rel: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (rel - orig) / np.abs(orig)
    out = np.where(np.abs(out) < SUM_ROUNDING, 0.0, out)
    both0 = (orig == 0) & (rel == 0)
    return np.where(both0, 0.0, np.where(orig == 0, np.nan, out))


def _labels(s: pd.Series) -> np.ndarray:
    """Category labels as printed (1, 1.0 and '1' alike), missing as :data:`MISSING_LABEL`."""
    from dpstudio.engine.measures.categorical import _MISSING
    from dpstudio.engine.measures.categorical import _labels as cat_labels

    lab = cat_labels(s).to_numpy(dtype=object)
    lab[lab == _MISSING] = MISSING_LABEL
    return lab


def _natural(label: str) -> tuple:
    """Sort key: numbers by value, before texts."""
    try:
        return (0, float(label), "")
    except ValueError:
        return (1, 0.0, label)


def _share_rows(var: str, lo: np.ndarray, wo: np.ndarray, lr: np.ndarray, wr: np.ndarray) -> list[tuple]:
    # hashing, not np.unique: sorting text labels took 0.5 s per 200,000-record column
    io, co = pd.factorize(lo, sort=False)
    ir, cr = pd.factorize(lr, sort=False)
    so = np.bincount(io, weights=wo, minlength=len(co))
    sr = np.bincount(ir, weights=wr, minlength=len(cr))
    to, tr = float(wo.sum()), float(wr.sum())
    po = pd.Series(so / to if to > 0 else so * np.nan, index=co)
    pr = pd.Series(sr / tr if tr > 0 else sr * np.nan, index=cr)
    po, pr = po.align(pr, fill_value=0.0)
    # at most MAX_CATEGORIES (the largest in the original, and (missing)), in label order
    cats = [c for c in po.index if c != MISSING_LABEL]
    by_size = sorted(cats, key=lambda c: (-po[c], _natural(c)))
    keep = sorted(by_size[:MAX_CATEGORIES], key=_natural)
    rest = by_size[MAX_CATEGORIES:]
    if MISSING_LABEL in po.index:
        keep.append(MISSING_LABEL)
    rows = [(var, "share", str(c), float(po[c]), float(pr[c])) for c in keep]
    if rest:
        rows.insert(
            len(keep) - (MISSING_LABEL in keep),
            (var, "share", "(other categories)", float(po[rest].sum()), float(pr[rest].sum())),
        )
    return rows


def weighted_estimates(
    original: pd.DataFrame,
    release: pd.DataFrame,
    *,
    weight: str | None = None,
    totals: Iterable[str] = (),
    means: Iterable[str] = (),
    shares: Iterable[str] = (),
    release_weight: str | None | bool = True,
) -> WeightedEstimates:
    """Weighted totals, means and category shares of ``original`` and ``release``.

    Parameters
    ----------
    original, release : DataFrame
        The original file and the release (any records: each is estimated on its own).
    weight : str, optional
        The sampling weight column (every weight finite and ≥ 0).  None: every record weighs 1.
    totals, means : list of str
        Numeric variables whose weighted total / mean is estimated.  A variable the release
        holds as text (generalised to intervals, recoded to labels) gets no release figure
        (NaN) and a note.
    shares : list of str
        Variables whose weighted category shares are estimated (values compared as printed
        labels; a missing value is the category ``(missing)``); at most
        :data:`MAX_CATEGORIES` categories per variable, the rest summed.
    release_weight : True, str or None
        The release's weight column: True (default) the same name as ``weight`` (its values
        as released); a name; None: unweighted.  When the release does not hold the weight
        column, the estimates of the release are unweighted and a note says so.

    Returns
    -------
    WeightedEstimates

    Raises
    ------
    ParameterError
        A variable is not a column of the original.
    InputError
        A weight is missing, not numeric or negative.
    """
    totals, means, shares = ([str(c) for c in v] for v in (totals, means, shares))
    for c in dict.fromkeys(totals + means + shares):
        if c not in original.columns:
            raise ParameterError(f"Weighted estimates: {c!r} is not a column of the data.")
    notes: list[str] = []
    wo = _weights(original, weight, "original")
    rw = weight if release_weight is True else (release_weight or None)
    if rw is not None and rw not in release.columns:
        notes.append(f"The release does not hold the weight column {rw!r}: its estimates are unweighted.")
        rw = None
    wr = _weights(release, rw, "released")
    rows: list[tuple] = []
    for stat, cols in (("total", totals), ("mean", means)):
        for c in cols:
            xo = _numeric(original, c)
            if xo is None:
                raise ParameterError(
                    f"Weighted estimates: the {stat} of {c!r} needs a numeric column; use its "
                    "category shares instead."
                )
            ok = np.isfinite(xo)
            vo = float(np.dot(wo[ok], xo[ok]))
            if stat == "mean":
                den = float(wo[ok].sum())
                vo = vo / den if den > 0 else float("nan")
            xr = _numeric(release, c) if c in release.columns else None
            if xr is None:
                notes.append(
                    f"{c!r} is not numeric in the release (generalised or recoded, or not "
                    f"released): no weighted {stat} of the release; see its category shares."
                )
                vr = float("nan")
            else:
                okr = np.isfinite(xr)
                vr = float(np.dot(wr[okr], xr[okr]))
                if stat == "mean":
                    den = float(wr[okr].sum())
                    vr = vr / den if den > 0 else float("nan")
            rows.append((c, stat, None, vo, vr))
    for c in shares:
        if c not in release.columns:
            notes.append(f"{c!r} is not released: no category shares of the release.")
            lr = np.zeros(0, dtype=object)
            rows += _share_rows(c, _labels(original[c]), wo, lr, np.zeros(0))
            continue
        rows += _share_rows(c, _labels(original[c]), wo, _labels(release[c]), wr)
    if rows:
        var_l, stat_l, cat, o, r = (list(x) for x in zip(*rows))
        o_arr, r_arr = np.asarray(o, dtype=np.float64), np.asarray(r, dtype=np.float64)
        table = pd.DataFrame(
            {
                "variable": var_l,
                "statistic": stat_l,
                "category": pd.Series(cat, dtype=object),
                "original": o_arr,
                "release": r_arr,
                "difference": r_arr - o_arr,
                "relative_error": _rel(o_arr, r_arr),
            }
        )
    else:
        table = pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    return WeightedEstimates(table=table, weight=weight, notes=notes)


def default_variables(
    original: pd.DataFrame, roles: dict, types: dict | None = None, keys: Iterable[str] = ()
) -> dict[str, list[str]]:
    """The variables an office checks first when none are chosen: totals and means of the
    numeric protected and confidential columns (not typed categorical/ordinal, not the weight),
    shares of the categorical keys (``keys``, the measurement plan's) and of the categorical
    confidential columns.
    """
    types = {str(c): str(t) for c, t in (types or {}).items()}
    roles = {str(c): str(getattr(r, "value", r)) for c, r in roles.items()}
    keys = [str(k) for k in keys]
    numeric, cats = [], list(keys)
    for c, r in roles.items():
        if c not in original.columns or r not in ("k-quasi", "eps-quasi", "confidential") or c in keys:
            continue
        s = original[c]
        if (
            pd.api.types.is_numeric_dtype(s)
            and not pd.api.types.is_bool_dtype(s)
            and types.get(c) not in ("categorical", "ordinal")
        ):
            numeric.append(c)
        elif r == "confidential":
            cats.append(c)
    return {"totals": numeric, "means": numeric, "shares": list(dict.fromkeys(cats))}


def variables_for(
    original: pd.DataFrame, columns: Iterable[str], types: dict | None = None
) -> dict[str, list[str]]:
    """The estimates of chosen ``columns``: totals and means of the numeric ones (not typed
    categorical/ordinal), category shares of the others.  Raises
    :class:`~dpstudio.engine.errors.ParameterError` naming a column that is not in the data.

    >>> o = pd.DataFrame({"inc": [1.0, 2.0], "sex": ["f", "m"]})
    >>> variables_for(o, ["inc", "sex"])
    {'totals': ['inc'], 'means': ['inc'], 'shares': ['sex']}
    """
    types = {str(c): str(t) for c, t in (types or {}).items()}
    out: dict[str, list[str]] = {"totals": [], "means": [], "shares": []}
    for c in dict.fromkeys(str(c) for c in columns):
        if c not in original.columns:
            raise ParameterError(f"Weighted estimates: {c!r} is not a column of the data.")
        s = original[c]
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and types.get(c) not in ("categorical", "ordinal"):
            out["totals"].append(c)
            out["means"].append(c)
        else:
            out["shares"].append(c)
    return out


__all__ = [
    "COLUMNS",
    "MISSING_LABEL",
    "WeightedEstimates",
    "default_variables",
    "variables_for",
    "weighted_estimates",
]
