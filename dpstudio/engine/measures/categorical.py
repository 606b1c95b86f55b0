"""Utility and risk measures for categorical attributes (docs/measures.md "Categorical keys").

* :func:`frequency_distances` -- total variation and Hellinger distance between the original
  and the released frequency table of each key and of each pair of keys;
* :func:`suppressed_cells` -- key values missing in the release but not in the original;
* :func:`release_risk` -- expected re-identifications and global risk of the *release*
  (:func:`~dpstudio.engine.measures.survey_risk.assess_risk` on it, with its sampling weight).

Frequency tables count a missing value as a category of its own ("missing"): a suppressed
value moves a record from its category to "missing", which is a real loss of information
and shows in both distances.  Values are compared as printed labels (1 and 1.0 and '1' are
the same category), so an integer key that became a nullable column still matches.

Both distances are between probability vectors p (original) and q (release) over the union
of categories::

    TV(p, q)        = ½ Σ |p_i − q_i|                      ∈ [0, 1]
    Hellinger(p, q) = sqrt(½ Σ (sqrt(p_i) − sqrt(q_i))²)  ∈ [0, 1]

both 0 for identical tables and symmetric.

>>> import pandas as pd
>>> x = pd.DataFrame({"s": [1, 1, 2, 2]}); y = pd.DataFrame({"s": [1, 1, 1, 2]})
>>> frequency_distances(x, y, ["s"], pairs=False)["tv"]["s"]
0.25
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError

__all__ = ["total_variation", "hellinger", "frequency_distances", "suppressed_cells", "release_risk"]

_MISSING = "\x00missing"


def total_variation(p, q) -> float:
    """½ Σ |p − q| of two probability vectors over the same categories."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return float(0.5 * np.abs(p - q).sum())


def hellinger(p, q) -> float:
    """sqrt(½ Σ (√p − √q)²) of two probability vectors over the same categories."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return float(np.sqrt(max(0.0, 0.5 * ((np.sqrt(p) - np.sqrt(q)) ** 2).sum())))


def _labels(s: pd.Series) -> pd.Series:
    """Printed category labels (1, 1.0 and '1' alike), missing as its own label."""
    if pd.api.types.is_float_dtype(s):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        whole = np.isfinite(v) & (v == np.round(v))
        out = np.where(
            whole, np.char.mod("%d", np.where(whole, v, 0).astype(np.int64)), s.astype(str).to_numpy()
        )
        out = np.where(np.isnan(v), _MISSING, out)
        return pd.Series(out, index=s.index)
    lab = s.astype(str)
    return lab.where(s.notna(), _MISSING)


def _table(frames: list[pd.Series]) -> pd.Series:
    """Relative frequency of each (joint) category."""
    # pandas documents a list of Series for ``others``; the pandas-stubs only accept list[str]
    key = frames[0] if len(frames) == 1 else frames[0].str.cat(frames[1:], sep="\x01")  # type: ignore[arg-type]
    return key.value_counts(normalize=True, sort=False)


def frequency_distances(
    original: pd.DataFrame, protected: pd.DataFrame, keys: Iterable[str], pairs: bool = True
) -> dict:
    """TV and Hellinger distance of the frequency table of each key (and each key pair).

    Returns ``{"tv": {name: d}, "hellinger": {name: d}, "tv_mean", "tv_max",
    "hellinger_mean", "hellinger_max"}`` where a pair is named ``"A×B"``.  The files need not
    have the same records (tables are compared, not records).
    """
    keys = [str(k) for k in keys]
    for k in keys:
        for what, df in (("original", original), ("protected", protected)):
            if k not in df.columns:
                raise ParameterError(f"Key {k!r} is not a column of the {what} data.")
    lo = {k: _labels(original[k]) for k in keys}
    lp = {k: _labels(protected[k]) for k in keys}
    groups: list[tuple[str, list[str]]] = [(k, [k]) for k in keys]
    if pairs:
        groups += [(f"{a}×{b}", [a, b]) for a, b in combinations(keys, 2)]
    tv: dict[str, float] = {}
    he: dict[str, float] = {}
    for name, cols in groups:
        p = _table([lo[c].reset_index(drop=True) for c in cols])
        q = _table([lp[c].reset_index(drop=True) for c in cols])
        p, q = p.align(q, fill_value=0.0)
        tv[name] = total_variation(p.to_numpy(), q.to_numpy())
        he[name] = hellinger(p.to_numpy(), q.to_numpy())
    out: dict = {"tv": tv, "hellinger": he}
    for label, d in (("tv", tv), ("hellinger", he)):
        vals = list(d.values())
        out[f"{label}_mean"] = float(np.mean(vals)) if vals else float("nan")
        out[f"{label}_max"] = float(np.max(vals)) if vals else float("nan")
    return out


def suppressed_cells(original: pd.DataFrame, protected: pd.DataFrame, keys: Iterable[str]) -> dict:
    """Key values present in the original and missing in the release, record by record (row j
    of ``protected`` protects row j of ``original``).

    Returns ``{"suppressed_cells": total, "suppressed_share": total / (n · keys),
    "suppressed_per_key": {key: count}}``.
    """
    keys = [str(k) for k in keys]
    if len(original) != len(protected):
        raise ParameterError(
            f"Suppressed cells compare records one by one: the original has "
            f"{len(original)} records and the release {len(protected)}."
        )
    per = {}
    for k in keys:
        a = original[k].notna().to_numpy()
        b = protected[k].isna().to_numpy()
        per[k] = int(np.count_nonzero(a & b))
    total = sum(per.values())
    cells = len(original) * len(keys)
    return {
        "suppressed_cells": total,
        "suppressed_share": total / cells if cells else 0.0,
        "suppressed_per_key": per,
    }


def release_risk(
    protected: pd.DataFrame, keys: Iterable[str], weight: str | None = None, household: str | None = None
) -> dict:
    """Expected re-identifications (and global risk) of the release with sdcMicro's model
    (missing key values match any value).
    """
    from dpstudio.engine.measures.survey_risk import assess_risk

    keys = [str(k) for k in keys]
    w = weight if weight is not None and weight in protected.columns else None
    h = household if household is not None and household in protected.columns else None
    rep = assess_risk(protected, keys, weight=w, household=h)
    out = {
        "expected_reidentifications": rep.expected_reidentifications,
        "global_risk": rep.global_risk,
        "sample_uniques": float(rep.sample_uniques),
    }
    if rep.household_expected_reidentifications is not None:
        out["household_expected_reidentifications"] = rep.household_expected_reidentifications
    return out
