"""SPSS and Stata types and labels: the types a .sav/.dta file declares, whole numbers read
as integers, and the value labels a release carries (generalised columns as labelled codes,
recoded categories, merged codes relabelled).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.io.formats import TableMeta

_SPSS_WHOLE = re.compile(r"^(F|N|COMMA|DOT|DOLLAR|PCT)\d+(\.0)?$", re.I)
_STATA_INT = ("int8", "int16", "int32", "int64")


def _declared_types(df: pd.DataFrame, rmeta: Any, fmt: str) -> dict:
    """The types a .sav/.dta file declares for its numeric columns: SPSS's measure level
    (nominal → categorical, ordinal → ordinal) or a format without decimals (F3, F8.0 →
    integer); Stata's integer storage types (byte, int, long → integer).  Read from the
    file's dictionary, never from the values.
    """
    out: dict[str, str] = {}
    measure = getattr(rmeta, "variable_measure", None) or {}
    formats = getattr(rmeta, "original_variable_types", None) or {}
    storage = getattr(rmeta, "readstat_variable_types", None) or {}
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            continue
        c = str(c)
        if fmt == "sav":
            m = str(measure.get(c, "")).lower()
            if m in ("nominal", "ordinal"):
                out[c] = "categorical" if m == "nominal" else "ordinal"
            elif _SPSS_WHOLE.match(str(formats.get(c, ""))):
                out[c] = "integer"
        elif fmt == "dta" and str(storage.get(c, "")) in _STATA_INT:
            out[c] = "integer"
    return out


def _whole_numbers_as_integers(df: pd.DataFrame) -> pd.DataFrame:
    """SPSS stores every number as a double: a column of whole numbers without a missing
    value is read as int64 (PID shows 0–6, not 0.0–6.0; issue 24 §2).  The values are the
    same; a column with missing values stays float64 (NaN).
    """
    conv = {}
    for c in df.columns:
        s = df[c]
        if s.dtype != np.float64:
            continue
        v = s.to_numpy()
        if v.size and np.isfinite(v).all() and (np.abs(v) < 2.0**53).all() and (v == np.round(v)).all():
            conv[c] = v.astype(np.int64)
    if not conv:
        return df
    out = df.copy(deep=False)
    for c, v in conv.items():
        out[c] = v
    return out


def _numeric_columns(df: pd.DataFrame) -> tuple:
    return tuple(
        str(c)
        for c in df.columns
        if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    )


_LEADING_NUMBER = re.compile(r"^\s*[\[(]?\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def generalised_codes(s: pd.Series) -> tuple[pd.Series, dict]:
    """A generalised column (texts such as ``30-39``, ``[0.5, 1)``, ``*``) as numeric codes with
    value labels, for formats whose variables are typed (SPSS, Stata; issue 24 §1): ``*`` (the
    top of a hierarchy: nothing released) becomes a missing value, every other text a code
    1, 2, … in the order of its leading number (then of the text), labelled with the text.

    >>> codes, labels = generalised_codes(pd.Series(["40-49", "*", "30-39", "40-49"]))
    >>> codes.tolist(), labels
    ([2.0, nan, 1.0, 2.0], {1.0: '30-39', 2.0: '40-49'})
    """
    txt = s.astype("object").where(s.notna(), None)
    uniq = sorted({str(v) for v in txt if v is not None and str(v) != "*"})

    def key(t: str) -> tuple:
        m = _LEADING_NUMBER.match(t)
        return (0, float(m.group(1)), t) if m else (1, 0.0, t)

    uniq.sort(key=key)
    code = {t: float(i + 1) for i, t in enumerate(uniq)}
    out = pd.Series(
        [code.get(str(v), np.nan) if v is not None else np.nan for v in txt], index=s.index, dtype=np.float64
    )
    return out, {c: t for t, c in code.items()}


def _typed_for_labels(df: pd.DataFrame, meta: TableMeta | None) -> tuple[pd.DataFrame, dict]:
    """``df`` with every column that was numeric in the input but is text in the release (a
    generalised k-quasi) turned back into numeric codes, and those codes' value labels (they
    replace the input's labels of that column).
    """
    if meta is None or not meta.numeric:
        return df, {}
    conv = [
        c
        for c in df.columns
        if c in meta.numeric
        and not pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_datetime64_any_dtype(df[c])
    ]
    if not conv:
        return df, {}
    out = df.copy(deep=False)
    labels = {}
    for c in conv:
        out[c], labels[c] = generalised_codes(df[c])
    return out, labels


def relabelled(meta: TableMeta | None, merged: dict | None) -> TableMeta | None:
    """``meta`` with the value labels of merged codes (``merged``: column -> {new code: [old
    codes]}, as text, e.g. a recoding's ``1+2:12``): the new code is labelled with the old
    codes' labels joined by " + " (an old code without a label by its number), the old codes'
    labels that no longer occur are dropped.  Columns without labels stay without.
    """
    if meta is None or not merged:
        return meta
    import copy

    out = copy.copy(meta)
    out.value_labels = {c: dict(v) for c, v in meta.value_labels.items()}
    for c, groups in merged.items():
        labels = out.value_labels.get(c)
        if not labels:
            continue
        by_text = {_code_text(k): k for k in labels}
        for new, olds in groups.items():
            parts = [str(labels[by_text[o]]) if o in by_text else o for o in olds]
            for o in olds:
                if o in by_text and o != new:
                    labels.pop(by_text[o], None)
            key = by_text.get(new, float(new) if _code_text(float(new)) == new else new)
            labels[key] = " + ".join(parts)
    return out


def _code_text(k) -> str:
    """A value-label code as text (1, 1.0 and '1' alike)."""
    try:
        f = float(k)
    except (TypeError, ValueError):
        return str(k)
    return str(int(f)) if f == int(f) and abs(f) < 1e15 else repr(f)


def _categorical_codes(df: pd.DataFrame, vl: dict) -> pd.DataFrame:
    """Pandas categorical columns as codes 1, 2, … (missing stays missing) with their
    categories as value labels in ``vl`` (SPSS/Stata: an ordered categorical such as recoded
    intervals keeps its order in the codes); other columns untouched.
    """
    cats = [c for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)]
    if not cats:
        return df
    df = df.copy(deep=False)
    for c in cats:
        s = df[c]
        codes = s.cat.codes.to_numpy().astype(np.float64) + 1.0
        codes[codes == 0] = np.nan
        df[c] = codes
        vl[c] = {float(i + 1): str(lab) for i, lab in enumerate(s.cat.categories)}
    return df


def _stata_labels(df: pd.DataFrame, meta: TableMeta | None) -> tuple[dict, list | None]:
    if meta is None:
        return {}, None
    vl = {}
    for c, labels in meta.value_labels.items():
        if c not in df.columns:
            continue
        s = df[c]
        if pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            v = v[np.isfinite(v)]
            if v.size and not np.all(v == np.round(v)):
                continue  # values were masked into non-codes: the labels no longer apply
        vl[c] = {k: lab for k, lab in labels.items()}
    cl = [meta.column_labels.get(c, "") or None for c in df.columns] if meta.column_labels else None
    return vl, cl
