"""Measures on Dask (issue 12): the in-memory engine's measures on data larger than memory.

``evaluate_dask(original, release, attributes, ...)`` gives the figures of
:func:`dpstudio.engine.evaluate` for numeric attributes:

* ``sse`` (raw and normalised), ``delta`` (relative Δ of mean and variance) and ``corr``
  (correlation loss) from distributed sums over the records joined on their record id --
  the same numbers as in memory up to the order of floating-point summation;
* ``kanon`` (class sizes of the k-quasi-identifiers by one group-by) and ``reid`` (f_k, F_k,
  sample uniques and the Benedetti-Franconi risk of :mod:`..measures.survey_risk`, applied to
  the aggregated counts), both on the release;
* ``rl``: distance-based record linkage on a uniform sample of ``rl_sample`` records (without
  replacement, drawn with ``rl_seed``): for each sampled protected record the nearest
  distance and its ties are found among ALL original records (one k-d tree per partition,
  two passes), so each sampled Pr_j is exact and the sample mean estimates RL without bias;
  it is reported with a Wilson score interval (finite-population corrected: it shrinks to the
  point when the sample is the whole data) and labelled as sampled.

Pairing: a :class:`~dpstudio.engine.backends.dask_backend.DaskRelease` is joined to the
original on the record id the backend assigned (the input position) -- the release's own
order (the keyed shuffle) does not matter; any other release is paired position by position,
as ``dpstudio evaluate`` does in memory.  What is not here (categorical distances,
hierarchies, wildcard keys, il1s/eigen/freq/classification) refuses with a message naming
``--engine memory``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.backends.dask_backend import _ROW, DaskRelease, NotOnDask, read_lazy
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.measures.risk import TIE_RTOL

#: Measures :func:`evaluate_dask` computes; the others need ``--engine memory``.
DASK_MEASURES = ("sse", "rl", "delta", "corr", "kanon", "reid")
#: Default size of the record-linkage sample.
RL_SAMPLE = 100_000
_P = "__p"  # suffix of the protected columns in the joined frame


def _with_ids(ddf):
    ones = ddf[ddf.columns[0]].map_partitions(
        lambda s: pd.Series(np.ones(len(s), np.int64), index=s.index), meta=("x", "int64")
    )
    return ddf.assign(**{_ROW: ones.cumsum() - 1})


def _frames(original, release):
    o = read_lazy(original)
    o = o.rename(columns={c: str(c) for c in o.columns})
    if isinstance(release, DaskRelease):
        if release.aligned is None:
            raise InputError(
                "This Dask release carries no record ids; evaluate it position by "
                "position (pass its data frame)."
            )
        p = release.aligned
    else:
        p = read_lazy(release)
        p = _with_ids(p.rename(columns={c: str(c) for c in p.columns}))
    if _ROW not in o.columns:
        o = _with_ids(o)
    return o, p


def _wilson(p: float, m: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion estimated from a sample of m of n records
    without replacement (z scaled by the finite-population correction √((n − m)/(n − 1))).
    """
    if m <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if n > 1:
        z *= math.sqrt(max(n - m, 0) / (n - 1))
    z2 = z * z
    den = 1 + z2 / m
    c = (p + z2 / (2 * m)) / den
    h = z / den * math.sqrt(max(p * (1 - p), 0.0) / m + z2 / (4 * m * m))
    return max(0.0, c - h), min(1.0, c + h)


def rl_label(out: dict) -> str:
    """Label RL as sampled: "RL on a 100,000-record sample: 0.4 % (95 % CI 0.36–0.44 %)"."""
    m, n = out["rl_sample"], out["rl_records"]
    conf = round(100 * out["rl_confidence"])
    if m >= n:
        return f"RL on all {n:,} records: {out['rl']:.4g} %"
    return (
        f"RL on a {m:,}-record sample: {out['rl']:.4g} % ({conf} % CI "
        f"{out['rl_ci_low']:.4g}–{out['rl_ci_high']:.4g} %)"
    )


def _sample_ids(n: int, m: int, seed: int) -> np.ndarray:
    if m >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False)).astype(np.int64)


def _part_nearest(part: pd.DataFrame, attrs, sc, ys) -> np.ndarray:
    """Nearest distance from each row of ``ys`` to this partition's originals."""
    from dpstudio.engine.measures.risk import _kdtree

    if len(part) == 0 or ys.shape[0] == 0:
        return np.full(ys.shape[0], np.inf)
    xs = np.ascontiguousarray(part[attrs].to_numpy(dtype=np.float64) / sc)
    d, _ = _kdtree(xs).query(ys, k=1)
    return np.asarray(d, dtype=np.float64)


def _part_count(part: pd.DataFrame, attrs, sc, ys, r) -> np.ndarray:
    from dpstudio.engine.measures.risk import _kdtree

    if len(part) == 0 or ys.shape[0] == 0:
        return np.zeros(ys.shape[0], dtype=np.int64)
    xs = np.ascontiguousarray(part[attrs].to_numpy(dtype=np.float64) / sc)
    return np.asarray(_kdtree(xs).query_ball_point(ys, r, return_length=True), dtype=np.int64)


def _rl_sampled(o, joined, attrs, sc, n, m, seed, warns) -> dict:
    """Pr_j of a uniform sample of records, each exact against all originals."""
    import dask

    ids = _sample_ids(n, m, seed)
    cols = [_ROW, *attrs, *[a + _P for a in attrs]]
    if m >= n:
        s = joined[cols].compute()
    else:
        s = joined[cols][joined[_ROW].isin(ids)].compute()
    s = s.sort_values(_ROW)
    x = s[attrs].to_numpy(dtype=np.float64) / sc
    y = s[[a + _P for a in attrs]].to_numpy(dtype=np.float64) / sc
    pr = np.zeros(len(s))
    ok = np.isfinite(y).all(axis=1)
    if (~ok).any():
        warns.append(
            f"{int((~ok).sum())} sampled protected record(s) have missing or infinite "
            "values and count as not linked."
        )
    idx = np.flatnonzero(ok)
    ys = np.ascontiguousarray(y[idx])
    diff = x[idx] - ys
    d_own = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    if idx.size:
        # pass 1: the nearest original of each sampled record (min over the partitions)
        parts = o[attrs].to_delayed()
        ysd = dask.delayed(ys)
        near = dask.compute(*[dask.delayed(_part_nearest)(p, attrs, sc, ysd) for p in parts])
        dmin = np.minimum.reduce(near) if near else np.full(idx.size, np.inf)
        linked = d_own <= dmin * (1.0 + TIE_RTOL)
        li = np.flatnonzero(linked)
        if li.size:
            # pass 2: the ties -- originals within d_min·(1 + 1e-12) of the linked records
            yl, rl = dask.delayed(ys[li]), dask.delayed(dmin[li] * (1.0 + TIE_RTOL))
            cnt = dask.compute(*[dask.delayed(_part_count)(p, attrs, sc, yl, rl) for p in parts])
            c = np.maximum(np.sum(cnt, axis=0), 1)
            pr[idx[li]] = 1.0 / c
    return {"pr": pr, "ids": s[_ROW].to_numpy()}


def evaluate_dask(
    original: Any,
    release: Any,
    attributes: Iterable[str] | None = None,
    *,
    measures: Iterable[str] = ("sse", "rl", "delta", "corr"),
    confidential: Iterable[str] | None = None,
    rl_distance: str = "standardized",
    rl_sample: int = RL_SAMPLE,
    rl_seed: int = 0,
    confidence: float = 0.95,
    k_quasis: Iterable[str] | None = None,
    k: int | None = None,
    keys: Iterable[str] | None = None,
    weight: str | None = None,
) -> dict:
    """The measures of :func:`dpstudio.engine.evaluate` on Dask (see the module docstring).

    ``original``/``release``: dask or pandas frames, Parquet/CSV paths, or a
    :class:`DaskRelease` (joined on its record ids).  ``attributes`` default: the release's
    protected attributes, else the common numeric columns.  ``kanon`` needs ``k_quasis`` and
    ``k``; ``reid`` needs ``keys`` (``weight``: sampling weight column).  Keys of the result
    are those of ``evaluate`` plus, for ``rl``, ``rl_ci_low``/``rl_ci_high`` (percent),
    ``rl_sample``, ``rl_records``, ``rl_confidence`` and ``rl_label``.
    """
    import dask

    measures = tuple(measures)
    bad = [x for x in measures if x not in DASK_MEASURES]
    if bad:
        raise NotOnDask(
            f"Measure(s) {', '.join(map(repr, bad))} do not run on Dask; use "
            f"--engine memory (Dask measures: {', '.join(DASK_MEASURES)})."
        )
    if rl_distance not in ("standardized", "raw"):
        raise ParameterError(f"Record-linkage distance must be 'standardized' or 'raw'. Got {rl_distance!r}.")
    if int(rl_sample) < 1:
        raise ParameterError(f"rl_sample must be a positive number of records. Got {rl_sample!r}.")
    if not 0 < float(confidence) < 1:
        raise ParameterError(f"confidence must lie in (0, 1). Got {confidence!r}.")
    o, p = _frames(original, release)
    ocols = [c for c in o.columns if c != _ROW]
    pcols = [c for c in p.columns if c != _ROW]
    if attributes is None:
        if isinstance(release, DaskRelease):
            attributes = list(release.protected_attributes)
        else:
            attributes = [c for c in ocols if c in pcols and _num(o._meta[c])]
    attrs = [str(a) for a in attributes]
    for name, cols in (("original", ocols), ("protected", pcols)):
        missing = [a for a in attrs if a not in cols]
        if missing:
            raise InputError(
                f"Column(s) {', '.join(map(repr, missing))} are not in the {name} "
                f"data. Its columns are: {', '.join(cols)}."
            )
    for a in attrs:
        for name, f in (("original", o), ("protected", p)):
            if not _num(f._meta[a]):
                raise NotOnDask(
                    f"Column {a!r} of the {name} data is not numeric: categorical "
                    "distances are not on Dask; use --engine memory."
                )
    out: dict[str, Any] = {}
    warns: list[str] = []
    numeric_measures = [x for x in measures if x in ("sse", "rl", "delta", "corr")]
    if numeric_measures and not attrs:
        raise ParameterError("No attributes to evaluate: name at least one column.")
    if numeric_measures:
        out.update(
            _numeric_measures(
                o,
                p,
                attrs,
                measures,
                confidential,
                rl_distance,
                int(rl_sample),
                int(rl_seed),
                float(confidence),
                warns,
            )
        )
    if "kanon" in measures:
        if not k_quasis or not k:
            raise ParameterError(
                "The kanon measure on Dask needs the k-quasi-identifiers and k (k_quasis=, k=)."
            )
        out.update(kanon_dask(p, list(k_quasis), int(k)))
    if "reid" in measures:
        if not keys:
            warns.append(
                "No categorical key variables (k-quasi-identifiers compared as "
                "categories): reid not measured."
            )
        else:
            rep = risk_dask(p, list(keys), weight if weight in pcols else None)
            out.update(
                {
                    "expected_reidentifications": rep["expected_reidentifications"],
                    "global_risk": rep["global_risk"],
                    "sample_uniques": float(rep["sample_uniques"]),
                }
            )
    out["warnings"] = warns
    del dask
    return out


def _num(s) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _numeric_measures(
    o, p, attrs, measures, confidential, rl_distance, rl_sample, rl_seed, confidence, warns
) -> dict:
    import warnings

    # dask infers the result types on empty frames (RuntimeWarnings of var/corr of nothing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _numeric_measures_(
            o, p, attrs, measures, confidential, rl_distance, rl_sample, rl_seed, confidence, warns
        )


def _numeric_measures_(
    o, p, attrs, measures, confidential, rl_distance, rl_sample, rl_seed, confidence, warns
) -> dict:
    import dask

    left = o[[_ROW, *attrs]]
    right = p[[_ROW, *attrs]].rename(columns={a: a + _P for a in attrs})
    joined = left.merge(right, on=_ROW, how="inner")
    pa = [a + _P for a in attrs]
    todo: dict[str, Any] = {
        "n_o": o.shape[0],
        "n_p": p.shape[0],
        "n_j": joined.shape[0],
        "na": o[attrs].isna().sum(),
    }
    todo["var_o"] = joined[attrs].var(ddof=1)
    todo["std_o"] = joined[attrs].std(ddof=1)
    if "sse" in measures:
        sq = joined[attrs].astype("float64") - joined[pa].astype("float64").rename(
            columns=dict(zip(pa, attrs))
        )
        sq = sq * sq
        todo["sse"] = sq.sum()  # NaN left out, as in memory
        todo["sse_nan"] = sq.isna().sum()
    if "delta" in measures:
        todo["mean_o"] = joined[attrs].mean()
        todo["mean_p"] = joined[pa].mean()
        todo["var_p"] = joined[pa].var(ddof=1)
    conf = [str(c) for c in (confidential or []) if str(c) in attrs]
    extra_conf = [str(c) for c in (confidential or []) if str(c) not in attrs]
    if extra_conf:
        raise NotOnDask(
            f"Confidential column(s) {', '.join(map(repr, extra_conf))} outside the "
            "attributes: on Dask name them in the attributes too (or use --engine "
            "memory)."
        )
    if "corr" in measures and conf and len(attrs) >= 2:
        todo["corr_o"] = joined[attrs].astype("float64").corr()
        todo["corr_p"] = joined[pa].astype("float64").corr()
    keys = list(todo)
    got = dict(zip(keys, dask.compute(*[todo[k] for k in keys])))
    n, n_p, n_j = int(got["n_o"]), int(got["n_p"]), int(got["n_j"])
    if n != n_p or n_j != n:
        raise InputError(
            f"The original data has {n} records but the protected data has {n_p} "
            f"({n_j} paired): measures compare each record with its release."
        )
    if n == 0:
        raise InputError("The data have no records: there is nothing to evaluate.")
    na = got["na"]
    if "rl" in measures and (na > 0).any():
        bad = [a for a in attrs if na[a] > 0]
        raise InputError(
            f"The original data have missing values in {', '.join(map(repr, bad))}: "
            "record linkage needs complete original records."
        )
    out: dict[str, Any] = {}
    m = len(attrs)
    if "sse" in measures:
        var = got["var_o"].reindex(attrs).to_numpy(dtype=np.float64)
        badv = ~(var > 0) | ~np.isfinite(var)
        for a in np.asarray(attrs)[badv]:
            warns.append(
                f"Attribute {a!r} is constant in the original data: its SSE is not "
                "divided by its variance (scale 1)."
            )
        var = np.where(badv, 1.0, var)
        colsum = got["sse"].reindex(attrs).to_numpy(dtype=np.float64)
        for a, c in zip(attrs, got["sse_nan"].reindex(attrs)):
            if c:
                warns.append(
                    f"Attribute {a!r}: {int(c)} record(s) with a missing value are left out of the SSE."
                )
        out["sse_raw"] = float(colsum.sum())
        out["sse_normalized"] = float((colsum / var).sum()) / (n * m)
    if "delta" in measures:
        dm: dict[str, float] = {}
        dv: dict[str, float] = {}
        for a in attrs:
            for d, th, th2, label in (
                (dm, got["mean_o"][a], got["mean_p"][a + _P], "mean"),
                (dv, got["var_o"][a], got["var_p"][a + _P], "variance"),
            ):
                if th == 0 or not np.isfinite(th):
                    warns.append(
                        f"Attribute {a!r} has original {label} 0: its relative Δ {label} is undefined."
                    )
                    d[a] = float("nan")
                else:
                    d[a] = float(abs(th2 - th) / abs(th))
        out["delta_mean"], out["delta_var"] = dm, dv
        for key, dd in (("delta_mean", dm), ("delta_var", dv)):
            vals = [v for v in dd.values() if np.isfinite(v)]
            out[f"{key}_avg"] = float(np.mean(vals)) if vals else float("nan")
    if "corr_o" in got:
        cx = got["corr_o"].reindex(index=attrs, columns=attrs).to_numpy()
        cy = got["corr_p"].reindex(index=pa, columns=pa).to_numpy()
        iu, ju = np.triu_indices(m, k=1)
        isconf = np.array([a in conf for a in attrs])
        sel = isconf[iu] | isconf[ju]
        d = np.abs(cy - cx)[iu[sel], ju[sel]]
        badc = ~np.isfinite(d)
        if badc.any():
            warns.append(
                f"{int(badc.sum())} attribute pair(s) with a constant attribute have no "
                "correlation and are left out of the correlation loss."
            )
            d = d[~badc]
        out["corr_loss_mean"] = float(d.mean()) if d.size else float("nan")
        out["corr_loss_std"] = float(d.std()) if d.size else float("nan")
    if "rl" in measures:
        if rl_distance == "raw":
            sc = np.ones(m)
        else:
            sd = got["std_o"].reindex(attrs).to_numpy(dtype=np.float64)
            bads = ~(sd > 0) | ~np.isfinite(sd)
            for a in np.asarray(attrs)[bads]:
                warns.append(
                    f"Attribute {a!r} is constant in the original data: record linkage "
                    "does not standardise it (scale 1)."
                )
            sc = np.where(bads, 1.0, sd)
        msz = min(int(rl_sample), n)
        res = _rl_sampled(o, joined, attrs, sc, n, msz, rl_seed, warns)
        phat = float(res["pr"].mean())
        lo, hi = _wilson(phat, msz, n, confidence)
        out.update(
            {
                "rl": 100.0 * phat,
                "rl_ci_low": 100.0 * lo,
                "rl_ci_high": 100.0 * hi,
                "rl_sample": msz,
                "rl_records": n,
                "rl_confidence": confidence,
            }
        )
        out["rl_label"] = rl_label(out)
        if msz < n:
            warns.append(
                out["rl_label"] + " (a uniform sample; each sampled record linked "
                "against all original records)."
            )
    return out


def kanon_dask(release: Any, k_quasis: list[str], k: int) -> dict:
    """Smallest class on ``k_quasis`` and the share of records in classes below ``k`` (one
    group-by), as :func:`dpstudio.engine.measures.kanon.k_anonymity_check`.
    """
    import dask

    ddf = read_lazy(release) if not hasattr(release, "groupby") else release
    q = [str(c) for c in k_quasis]
    missing = [c for c in q if c not in ddf.columns]
    if missing:
        raise InputError(
            f"k-quasi-identifier column(s) {', '.join(map(repr, missing))} are not in the release."
        )
    sz = (
        ddf[q].assign(__one=1).groupby(q, dropna=False)["__one"].count(split_out=max(1, ddf.npartitions // 4))
    )
    mn, below, classes, n = dask.compute(sz.min(), sz[sz < k].sum(), sz.count(), ddf.shape[0])
    n = int(n)
    return {
        "k_min_class_size": int(mn) if classes else n,
        "k_share_below": int(below) / n if n else 0.0,
        "k_classes": int(classes),
        "k_records_below": int(below),
    }


def risk_dask(frame: Any, keys: list[str], weight: str | None = None) -> dict:
    """f_k, F_k and the Benedetti-Franconi risk of :mod:`..measures.survey_risk` from one
    group-by of the key combinations (with counts and weight sums).  Missing key values match
    any value in sdcMicro's model: that is not a group-by, so it refuses them.
    """
    import dask

    from dpstudio.engine.measures.survey_risk import bf_individual_risk

    ddf = read_lazy(frame) if not hasattr(frame, "groupby") else frame
    keys = [str(k) for k in keys]
    missing = [c for c in [*keys, *([weight] if weight else [])] if c not in ddf.columns]
    if missing:
        raise InputError(f"Column(s) {', '.join(map(repr, missing))} are not in the data.")
    todo = {"na": ddf[keys].isna().sum(), "n": ddf.shape[0]}
    if weight:
        w = ddf[weight].astype("float64")
        todo["w_bad"] = (~w.map_partitions(np.isfinite, meta=(weight, bool))).sum()
        todo["w_min"] = w.min()
    got = dict(zip(todo, dask.compute(*todo.values())))
    bad = [c for c in keys if got["na"][c] > 0]
    if bad:
        raise NotOnDask(
            f"Key column(s) {', '.join(map(repr, bad))} have missing values, which match "
            "any value in the risk model (not a group-by); use --engine memory."
        )
    if weight:
        if got["w_bad"]:
            raise InputError(
                f"weight column '{weight}': {int(got['w_bad'])} record(s) have a "
                "missing or non-numeric weight; give every record its sampling weight"
            )
        if got["w_min"] < 1:
            raise InputError(
                f"weight column '{weight}': a weight below 1 (minimum "
                f"{got['w_min']:g}); a sampling weight is at least 1 -- check the column"
            )
    n = int(got["n"])
    base = ddf[keys].assign(__w=ddf[weight].astype("float64") if weight else 1.0)
    g = base.groupby(keys, dropna=False)["__w"].agg(["count", "sum"], split_out=max(1, ddf.npartitions // 4))

    def per_group(t: pd.DataFrame) -> pd.DataFrame:
        fk = t["count"].to_numpy(dtype=np.float64)
        rk = bf_individual_risk(fk, t["sum"].to_numpy(dtype=np.float64) if weight else None)
        return pd.DataFrame(
            {
                "fk": fk,
                "er": fk * rk,
                "u": (fk == 1).astype(np.int64),
                "lt2": np.where(fk < 2, fk, 0),
                "lt3": np.where(fk < 3, fk, 0),
                "lt5": np.where(fk < 5, fk, 0),
            }
        )

    meta = pd.DataFrame(
        {
            "fk": np.array([], np.float64),
            "er": np.array([], np.float64),
            "u": np.array([], np.int64),
            "lt2": np.array([], np.float64),
            "lt3": np.array([], np.float64),
            "lt5": np.array([], np.float64),
        }
    )
    t = g.map_partitions(per_group, meta=meta)
    s, G = dask.compute(t.sum(), t.shape[0])
    er = float(s["er"])
    return {
        "records": n,
        "key_combinations": int(G),
        "sample_uniques": int(s["u"]),
        "records_fk_lt_2": int(s["lt2"]),
        "records_fk_lt_3": int(s["lt3"]),
        "records_fk_lt_5": int(s["lt5"]),
        "expected_reidentifications": er,
        "global_risk": er / n if n else float("nan"),
    }


__all__ = ["evaluate_dask", "kanon_dask", "risk_dask", "rl_label", "DASK_MEASURES", "RL_SAMPLE"]
