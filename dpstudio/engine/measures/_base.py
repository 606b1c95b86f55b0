"""Helpers shared by the measures (docs/measures.md): input checks, column access,
categorical distances and the per-sweep cache of the original's derived arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError


def _check_pair(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str]) -> list[str]:
    if not isinstance(original, pd.DataFrame) or not isinstance(protected, pd.DataFrame):
        raise InputError("Measures need two tables (pandas DataFrames): the original and the protected data.")
    attrs = [str(a) for a in attributes]
    if not attrs:
        raise ParameterError("No attributes to evaluate: name at least one column.")
    if len(original) != len(protected):
        raise InputError(
            f"The original data has {len(original)} records but the protected data has "
            f"{len(protected)}: measures compare record j with record j. Evaluate against the "
            "original records aligned with the release (result.aligned_original())."
        )
    if len(original) == 0:
        raise InputError("The data have no records: there is nothing to evaluate.")
    for name, df in (("original", original), ("protected", protected)):
        cols = [str(c) for c in df.columns]
        if not df.columns.is_unique:
            dup = sorted({a for a in attrs if cols.count(a) > 1})
            if dup:
                raise InputError(
                    f"Duplicate column name(s) {', '.join(map(repr, dup))} in the {name} "
                    "data: rename the columns so that they are unique."
                )
        missing = [a for a in attrs if a not in cols]
        if missing:
            raise InputError(
                f"Column(s) {', '.join(map(repr, missing))} are not in the {name} data. "
                f"Its columns are: {', '.join(cols)}."
            )
    return attrs


def _col(df: pd.DataFrame, a: str) -> pd.Series:
    s = df[a]
    if isinstance(s, pd.DataFrame):
        raise InputError(f"Duplicate column name {a!r}: rename the columns so that they are unique.")
    return s


def _num_dtype(t) -> bool:
    return pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t)


def _dtypes(df: pd.DataFrame) -> dict:
    return dict(zip((str(c) for c in df.columns), df.dtypes))


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _numeric(df: pd.DataFrame, a: str, which: str) -> np.ndarray:
    s = _col(df, a)
    if _is_numeric(s) or pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    conv = pd.to_numeric(s, errors="coerce")
    bad = np.flatnonzero(conv.isna().to_numpy() & s.notna().to_numpy())
    if bad.size:
        from dpstudio.engine.errors import format_rows

        raise InputError(
            f"Column {a!r} of the {which} data must be numeric; row(s) "
            f"{format_rows(bad)} hold text. Give a distance for it or leave it out."
        )
    return conv.to_numpy(dtype=np.float64, na_value=np.nan)


def _distance_fn(opts_dist: Any, a: str) -> Callable | None:
    if not opts_dist:
        return None
    fn = opts_dist.get(a) if isinstance(opts_dist, dict) else None
    if fn is None:
        return None
    if hasattr(fn, "distance") and callable(fn.distance):
        return fn.distance
    if callable(fn):
        return fn
    raise ParameterError(f"categorical_distance[{a!r}] must be a callable distance(a, b).")


def _pair_distances(fn: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``fn`` on pairs of category values (called once per distinct pair)."""
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    try:
        out = np.asarray(fn(a, b), dtype=np.float64)
        if out.shape == a.shape:
            return out
    except Exception:  # noqa: BLE001 - the callable may be scalar-only
        pass
    return np.fromiter((float(fn(x, y)) for x, y in zip(a, b)), dtype=np.float64, count=a.size)


def _categorical_sq(orig: pd.Series, prot: pd.Series, fn: Callable | None) -> np.ndarray:
    """Per-record squared distance of a categorical attribute (δ², or 0/1 mismatch)."""
    n = len(orig)
    fc: Any
    uniq: Any
    if isinstance(orig.dtype, pd.StringDtype) and orig.dtype == prot.dtype:
        # texts of one dtype (pyarrow-backed): factorised without converting every value to a
        # Python object (issue 12, whole-process time); the same distances as the object path
        fc, uniq = pd.factorize(pd.concat([orig, prot], ignore_index=True), use_na_sentinel=False)
    else:
        o = orig.astype(object).to_numpy()
        p = prot.astype(object).to_numpy()
        fc, uniq = pd.factorize(np.concatenate([o, p]), use_na_sentinel=False)
    codes = np.asarray(fc)
    co, cp = codes[:n], codes[n:]
    if fn is None:
        return (co != cp).astype(np.float64)
    k = len(uniq)
    pair = co.astype(np.int64) * k + cp
    up, inv = np.unique(pair, return_inverse=True)
    vals = np.asarray(uniq, dtype=object)
    d = _pair_distances(fn, vals[up // k], vals[up % k])
    return (d**2)[inv]


def _matrix(df: pd.DataFrame, cols: list[str], which: str) -> np.ndarray:
    """Numeric columns as an (n, m) float64 array (one conversion when the dtypes allow)."""
    if not cols:
        return np.zeros((len(df), 0))
    dt = _dtypes(df)
    plain = [
        pd.api.types.is_numeric_dtype(t)
        and not isinstance(t, pd.api.extensions.ExtensionDtype)
        and not pd.api.types.is_bool_dtype(t)
        for t in dt.values()
    ]
    if all(plain) and df.columns.is_unique and len(dt) <= 4 * len(cols):
        # one conversion of the whole (numeric) frame, then the wanted columns
        # the columns are unique (checked above), so get_loc gives one int position per column
        pos = [cast(int, df.columns.get_loc(c)) for c in cols]
        return np.ascontiguousarray(df.to_numpy(dtype=np.float64)[:, pos])
    out = np.empty((len(df), len(cols)))
    for i, a in enumerate(cols):
        t = dt[a]
        if pd.api.types.is_numeric_dtype(t) and not isinstance(t, pd.api.extensions.ExtensionDtype):
            out[:, i] = _col(df, a).to_numpy()
        else:
            out[:, i] = _numeric(df, a, which)
    return out


def _warn(warns: list[str], text: str) -> None:
    if text not in warns:
        warns.append(text)


_CACHE_KEEP = 4


def _cache_entry(cache: dict | None, original: pd.DataFrame, key: tuple) -> dict:
    """A per-original slot in ``cache`` (keeps a reference so the id cannot be reused).

    At most ``_CACHE_KEEP`` slots are kept (oldest dropped): methods that reorder rows
    give a new aligned original at every run, which must not pile up over a sweep.
    """
    if cache is None:
        return {}
    full = ("metrics", id(original), original.shape) + key
    order = cache.setdefault(("metrics", "order"), [])
    ent = cache.get(full)
    if ent is None or ent.get("ref") is not original:
        ent = {"ref": original}
        cache[full] = ent
        if full in order:
            order.remove(full)
        order.append(full)
        while len(order) > _CACHE_KEEP:
            cache.pop(order.pop(0), None)
    return ent
