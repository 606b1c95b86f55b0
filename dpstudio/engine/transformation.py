"""What a generalising run did to each k-quasi-identifier (issue 24 §1).

ARX shows the transformation it chose (one level per attribute); dpstudio released a k-quasi
as ``*`` in every record without a word.  This module is the one place that reads a
result's generalisation and says, per k-quasi:

- :func:`transformation_rows` -- the chosen level and the hierarchy's height (private: an
  automatic hierarchy is built from the data), whether the column was generalised to the top
  of its hierarchy (``*`` everywhere: it carries no information), the number of distinct
  released values and a few of them (functions of the release);
- :func:`release_transformation_rows` -- the PUBLIC view for the release note: only what the
  release and the declared parameters show (the level is named only for a hierarchy the user
  gave, whose levels are a declared parameter; an automatic hierarchy is built from the data);
- :func:`wipe_risks` -- before a run: the k-quasis that can only be kept or wiped (no
  hierarchy but ``value → *``), and those that are certain to be generalised to the top
  (even alone, their coarsest level below the top leaves more records in groups smaller
  than k than may be suppressed).

>>> import pandas as pd
>>> df = pd.DataFrame({"age": [20, 21, 22, 60, 61, 62], "sex": list("mfmfmf")})
>>> [r["column"] for r in wipe_risks(df, ["age", "sex"], k=4, suppression=0.0)]
['age', 'sex']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "TOP_LABEL",
    "transformation_rows",
    "release_transformation_rows",
    "wipe_risks",
    "fully_generalised",
]

#: the label of a hierarchy's top level (every value generalised to it)
TOP_LABEL = "*"

_KIND_WORDS = {
    "auto:intervals": "automatic intervals",
    "auto:dates": "automatic dates",
    "auto:masking": "automatic masking of codes",
    "auto:flat": "none (value → *)",
}


def _released_summary(s: pd.Series, examples: int = 4) -> tuple[int, list[str], bool]:
    """(distinct released values, a few of them, every value ``*`` or missing)."""
    vals = s.dropna()
    txt = vals.astype(str)
    uniq = pd.unique(txt)
    wiped = bool(len(s)) and (len(vals) == 0 or (len(uniq) == 1 and uniq[0] == TOP_LABEL))
    return int(len(uniq)), [str(u) for u in uniq[:examples]], wiped


def fully_generalised(result: Any) -> list[str]:
    """The k-quasis of ``result`` whose released values are all ``*`` (or all missing): the
    release says nothing about them.  A function of the release (and the roles).
    """
    roles = {c: getattr(r, "value", r) for c, r in (getattr(result, "roles", {}) or {}).items()}
    data = result.data
    out = []
    for c, r in roles.items():
        if r == "k-quasi" and c in data.columns and len(data):
            if _released_summary(data[c])[2]:
                out.append(c)
    return out


def _hierarchy_kind(result: Any, c: str) -> str:
    info = getattr(result, "info", None) or {}
    src = (info.get("hierarchy_sources") or {}).get(c)
    given = c in (getattr(result, "hierarchies", None) or {})
    if given:
        return "given"
    return _KIND_WORDS.get(str(src), "automatic") if src else "automatic"


def transformation_rows(result: Any) -> list[dict]:
    """Per k-quasi of a generalising ``result`` (k-eps with OLA or Mondrian), in role order:
    ``column``, ``level`` / ``height`` (OLA; None for Mondrian, whose cells differ record by
    record), ``top`` (generalised to the hierarchy's top, or every released value ``*``),
    ``hierarchy`` (``given``, or the automatic kind), ``distinct`` and ``examples`` (of the
    released values).  Empty for a method that does not generalise.

    Private: an automatic hierarchy (its height, its levels) is built from the original data.
    """
    info = getattr(result, "info", None) or {}
    gen = info.get("generalisation") or {}
    kq = list(info.get("k_quasis") or [])
    if not gen or not kq:
        return []
    levels = gen.get("levels") or {}
    heights = gen.get("heights") or {}
    rows = []
    for c in kq:
        if c not in result.data.columns:
            continue
        distinct, ex, wiped = _released_summary(result.data[c])
        lv, h = levels.get(c), heights.get(c)
        top = wiped or (lv is not None and h is not None and int(h) > 1 and int(lv) >= int(h) - 1)
        rows.append(
            {
                "column": c,
                "level": None if lv is None else int(lv),
                "height": None if h is None else int(h),
                "top": bool(top),
                "hierarchy": _hierarchy_kind(result, c),
                "distinct": distinct,
                "examples": ex,
            }
        )
    return rows


def describe_row(row: Mapping[str, Any], *, public: bool = False) -> str:
    """One row of :func:`transformation_rows` in words (the app's results, the note)."""
    ex = ", ".join(repr(x) for x in row["examples"])
    if row["top"]:
        return "fully generalised: '*' in every released record — the column carries no information"
    if row.get("level") == 0:
        return f"not generalised (original values; {row['distinct']} distinct)"
    lvl = ""
    if row.get("level") is not None and (not public or row["hierarchy"] == "given"):
        lvl = f"level {row['level']} of {int(row['height']) - 1}: "
    return f"{lvl}generalised to {row['distinct']} distinct value(s), e.g. {ex}"


def release_transformation_rows(result: Any) -> list[tuple[str, str, str]]:
    """The PUBLIC rows (column, hierarchy, what the release holds) for the release note:
    the level is named only for a hierarchy the user declared; everything else is read off
    the release.
    """
    out = []
    for r in transformation_rows(result):
        hier = "declared" if r["hierarchy"] == "given" else "automatic"
        out.append((r["column"], hier, describe_row(r, public=True)))
    return out


def _one_column_below_k(codes: np.ndarray, k: int, n_values: int | None = None) -> int:
    """Records in values of fewer than ``k`` records (``codes``: −1 missing, not counted)."""
    from dpstudio.engine.hierarchies.build import code_counts

    if n_values is None:
        n_values = int(codes.max()) + 1 if codes.size else 0
    cnt = code_counts(codes, max(n_values, 0))
    cnt = cnt[cnt > 0]
    return int(cnt[cnt < k].sum())


def wipe_risks(
    df: pd.DataFrame,
    k_quasis: Sequence[str],
    *,
    k: int,
    suppression: float = 0.05,
    hierarchies: Mapping[str, Any] | None = None,
) -> list[dict]:
    """Before a generalising run (OLA): the k-quasis at risk of being wiped (``*`` in every
    record), most certain first.  Each row: ``column``, ``reason`` (``certain`` or
    ``all-or-nothing``) and ``text`` (one sentence for the user).

    ``certain``: even alone, at its coarsest level below the top, more records than the
    suppression limit allows lie in groups smaller than k -- adding other k-quasis only splits
    groups further, so every solution generalises it to the top.  ``all-or-nothing``: it has
    no hierarchy of more than two levels (a categorical column without one gets ``value →
    *``), so it is either kept as it is or wiped.  Reads the original data: private.
    """
    from dpstudio.engine.algorithms.generalization import resolve_hierarchies

    hs_given = {c: h for c, h in (hierarchies or {}).items() if h is not None}
    cols = [c for c in k_quasis if c in df.columns]
    try:
        hs = resolve_hierarchies(df, cols, hs_given)
    except Exception:  # noqa: BLE001 - a bad hierarchy or missing values: the run says so
        return []
    n = len(df)
    max_sup = int(np.floor(float(suppression) * n + 1e-9))
    certain, flat = [], []
    for c in cols:
        h = hs[c]
        if h.height <= 2:
            from dpstudio.engine.codes import factorize

            # (the column's codes, remembered for a column read from a file: no hashing)
            fc, fu = factorize(df[c])
            sub = _one_column_below_k(fc, k, len(fu))
            if sub > max_sup:
                certain.append(
                    {
                        "column": c,
                        "reason": "certain",
                        "text": (
                            f"'{c}' will be '*' in every record: it has no hierarchy, and even on "
                            f"its own {sub:,} records are in groups smaller than k = {k} (at most "
                            f"{max_sup:,} may be suppressed). Build a hierarchy for it."
                        ),
                    }
                )
            else:
                flat.append(
                    {
                        "column": c,
                        "reason": "all-or-nothing",
                        "text": (
                            f"'{c}' has no hierarchy: it can only be kept as it is or generalised to "
                            "'*' in every record. Build a hierarchy to allow steps in between."
                        ),
                    }
                )
            continue
        from dpstudio.engine.hierarchies.build import code_counts, factorize_strings

        try:
            codes, labels = factorize_strings(df[c], small=True)
            idx = {v: i for i, v in enumerate(h.leaves)}
            leaf = np.array([idx.get(str(v), -1) for v in labels], dtype=np.int64)
            _, inv = h.level_codes(h.height - 2)
            # records per value, then per group of the level: the same sizes as grouping the
            # records (issue 27: no pass over the records but one count of their codes)
            per_value = code_counts(codes, len(labels))  # (code −1: missing, not counted)
            sizes = np.zeros(int(inv.max()) + 1 if inv.size else 0, dtype=np.int64)
            np.add.at(sizes, inv[np.maximum(leaf, 0)], per_value)
        except Exception:  # noqa: BLE001 - values outside the hierarchy: the run says so
            continue
        sub = int(sizes[sizes < k].sum())
        if sub > max_sup:
            certain.append(
                {
                    "column": c,
                    "reason": "certain",
                    "text": (
                        f"'{c}' will be '*' in every record: even on its own, at its coarsest level "
                        f"below the top, {sub:,} records are in groups smaller than k = {k} (at most "
                        f"{max_sup:,} may be suppressed). Give it a hierarchy with wider groups, or "
                        "lower k."
                    ),
                }
            )
    return certain + flat


def levels_weighed(df: pd.DataFrame, columns: Sequence[str], k: int, **kw: Any) -> pd.DataFrame:
    """The generalisation levels OLA weighs for these k-quasis (every node of a small lattice,
    else the chosen node's neighbourhood): the front ends' access to
    :func:`dpstudio.engine.algorithms.ola.lattice_table` (same keywords).
    """
    from dpstudio.engine.algorithms.ola import lattice_table

    return lattice_table(df, columns, k, **kw)
