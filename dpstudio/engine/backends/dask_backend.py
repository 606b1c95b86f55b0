"""The Dask backend (issue 12): the sort-based methods on data larger than memory.

``protect_dask(source, method, ...)`` runs ``laplace``, ``ir-dp``, ``idp-ls``, ``idp-cbls``,
``ir-swap`` and single-order ``insensitive-dp`` (one distributed sort by the distance to the
domain corner) on a ``dask.dataframe`` (or a Parquet file/folder or CSV path, read lazily) and
gives the release the in-memory engine gives for the same seed, value for value:

* the run's root key is the first draw of ``as_rng(seed)``, as in memory
  (:func:`dpstudio.engine.protection._common.job_stream`); every draw is keyed by
  (root, purpose, attribute, cluster or record id) (:mod:`dpstudio.engine.algorithms.keyed`),
  so it does not depend on the partitioning;
* record ids are global positions (a cumulative count over the partitions); ranks come from a
  distributed sort on (value, record id) -- the stable order of the in-memory engine; cluster
  id = min(rank // k, n_c − 1), so the last cluster takes the remainder;
* per-cluster statistics are one group-by; the release is joined back on the record id and
  ordered by the records' keyed sort keys (shuffle) or by record id (shuffle off).

Other methods raise :class:`NotOnDask` naming ``--engine memory``.  Dask is optional
(``pip install 'dpstudio[scale]'``); this module imports it lazily.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import InputError, NotApplicableError, ParameterError
from dpstudio.engine.random import as_rng
from dpstudio.engine.roles import Role

#: Methods the Dask backend runs (all sort-based); the rest need ``--engine memory``.
DASK_METHODS = ("laplace", "ir-dp", "idp-ls", "idp-cbls", "ir-swap", "insensitive-dp")
SAMPLE_ROWS = 10_000
_ROW = "__dp_row"


class NotOnDask(NotApplicableError):
    """A method or option the Dask backend does not run."""


def _dd():
    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - depends on the installation
        raise InputError(
            "The Dask backend needs the optional extra: pip install 'dpstudio[scale]'"
            " (or run with --engine memory)."
        ) from None
    return dd


def read_lazy(source: Any):
    """A ``dask.dataframe`` from a dask frame, a pandas frame, or a Parquet file/folder or CSV
    path (read lazily).
    """
    dd = _dd()
    if isinstance(source, dd.DataFrame):
        return source
    if isinstance(source, pd.DataFrame):
        return dd.from_pandas(source, npartitions=max(1, min(8, len(source) // 50_000 + 1)))
    path = os.fspath(source)
    if not os.path.exists(path):
        raise InputError(f"Input {path!r} does not exist.")
    low = path.lower()
    if os.path.isdir(path) or low.endswith((".parquet", ".pq")):
        return dd.read_parquet(path)
    if low.endswith((".csv", ".txt", ".tsv")):
        return dd.read_csv(path, sep="\t" if low.endswith(".tsv") else ",", blocksize="64MB")
    raise InputError(
        f"The Dask backend reads Parquet (a file or a folder of parts) and CSV; "
        f"{os.path.basename(path)!r} is neither. Convert it or use --engine memory."
    )


@dataclass
class DaskRelease:
    """A lazy release: ``data`` is a ``dask.dataframe``; the texts are the in-memory ones."""

    data: Any
    method: str
    guarantee: str
    is_dp: bool
    params: dict
    protected_attributes: list
    n: int
    info: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    public_warnings: list = field(default_factory=list)
    #: the release with the record id column (``__dp_row``, the input position), before the
    #: shuffle: private, for pairing with the original in the measures
    aligned: Any = field(default=None, repr=False)

    def compute(self) -> pd.DataFrame:
        return self.data.compute().reset_index(drop=True)


# --------------------------------------------------------------------------- validation


def _validate(ddf, method, roles, domains, precision, params):
    """Validate on a sample with the engine's own ``prepare`` (one error format), then check
    the whole data (missing values, domains) with one distributed pass.
    """
    from dpstudio.engine import api

    spec = api.get_method(method)
    if method not in DASK_METHODS:
        raise NotOnDask(
            f"Method {method!r} does not run on Dask (it is not sort-based); "
            f"use --engine memory (Dask runs: {', '.join(DASK_METHODS)})."
        )
    if params.get("layout", "records") == "separate-tables":
        raise NotOnDask("Layout 'separate-tables' does not run on Dask yet; use --engine memory.")
    if method == "insensitive-dp" and params.get("variant", "multi") != "single":
        raise NotOnDask(
            "insensitive-dp runs on Dask with the single-order variant only "
            "(variant='single', --variant single); the multi-reference variant "
            "needs --engine memory."
        )
    if params.get("drop_missing"):
        raise NotOnDask(
            "drop_missing does not run on Dask yet; remove the records with missing "
            "values first or use --engine memory."
        )
    sample = ddf.head(SAMPLE_ROWS, npartitions=-1)
    prep = api.prepare(sample, method, roles, domains, precision=precision, **params)
    cols = list(prep.protected)
    aggs = {}
    for c in cols:
        aggs[(c, "na")] = ddf[c].isna().sum()
        aggs[(c, "min")] = ddf[c].min()
        aggs[(c, "max")] = ddf[c].max()
    import dask

    keys = list(aggs)
    vals = dask.compute(ddf.shape[0], *[aggs[k] for k in keys])
    n = int(vals[0])
    got = dict(zip(keys, vals[1:]))
    for c in cols:
        if got[(c, "na")]:
            raise InputError(
                f"Column {c!r} has {int(got[(c, 'na')]):,} missing value(s); the Dask "
                "backend refuses them: remove those records first."
            )
        if c in prep.domains:
            lb, ub = prep.domains[c]
            if got[(c, "min")] < lb or got[(c, "max")] > ub:
                raise InputError(
                    f"Column {c!r}: values lie outside the declared domain "
                    f"[{lb:g}, {ub:g}]; widen --domain {c}=LOWER:UPPER."
                )
    if "k" in prep.params and prep.params.get("k") is not None:
        from dpstudio.engine import params as P

        P.check_k(prep.params["k"], n, spec.id, spec.min_k)
    return spec, prep, cols, n


def _grid(prep, sample_dtype_int: bool, c: str, n: int):
    dom = prep.domains.get(c)
    gamma = (prep.precision or {}).get(c)
    if gamma is None:
        gamma = N.default_precision(dom, sample_dtype_int)
    if gamma is None:  # as noise.job_grid in memory (idp-cbls needs no domain)
        raise ParameterError(
            f"Column {c!r} needs an output precision (the grid its noisy values are rounded "
            f"to, e.g. 0.01 or 100) or a declared domain to derive one from: "
            f"--precision {c}=0.01 or --domain {c}=LOWER:UPPER."
        )
    return N.make_grid(c, gamma, dom, sample_dtype_int, n)


# --------------------------------------------------------------------------- the run


def protect_dask(
    source: Any,
    method: str,
    roles: dict | None = None,
    domains: dict | None = None,
    *,
    seed: int | np.random.Generator | None = None,
    precision: dict | None = None,
    client: Any = None,
    **params: Any,
) -> DaskRelease:
    """Protect ``source`` on Dask; returns a :class:`DaskRelease` (lazy).  ``client``: a
    ``distributed.Client`` (``None``: the current default scheduler).
    """
    from dpstudio.engine import api

    ddf = read_lazy(source)
    ddf = ddf.rename(columns={c: str(c) for c in ddf.columns})
    spec, prep, cols, n = _validate(ddf, method, roles, domains, precision, params)
    p = dict(prep.params)
    if spec.uses_epsilon and p.get("epsilon") is None:
        raise NotOnDask(
            "The noise-free baseline (no ε) is for sweeps and does not run on Dask; "
            "give --epsilon or use --engine memory."
        )
    root = K.root_key(as_rng(seed))  # the first draw, as job_stream in memory
    ones = ddf[cols[0]].isna().map_partitions(lambda s: (~s).astype("int64"), meta=("x", "int64"))
    ddf = ddf.assign(**{_ROW: ones.cumsum() - 1})
    info: dict = {"backend": "dask", "npartitions": int(ddf.npartitions)}
    is_int = {c: N.pd_is_integer(prep.data[c]) for c in cols}
    new = {}
    if method == "laplace":
        eps = _eps(p, cols)
        kind = p.get("noise", "laplace")
        for j, c in enumerate(cols):
            g = _grid(prep, is_int[c], c, n)
            new[c] = ddf[[c, _ROW]].map_partitions(
                _laplace_part, c, g, kind, root, j, float(eps[j]), meta=(c, _out_dtype(g))
            )
        out = ddf.assign(**new)
        shuffle = False
    elif method == "insensitive-dp":
        grids = [_grid(prep, is_int[c], c, n) for c in cols]
        vals = _insensitive(ddf, cols, int(p["k"]), n, p, grids, root, _eps(p, cols), prep)
        out = ddf.drop(columns=cols).merge(vals, on=_ROW, how="inner")[[*ddf.columns]]
        shuffle = bool(p.get("shuffle", True))
    else:
        k = int(p["k"])
        eps_r = None if method == "ir-swap" else _eps(p, cols)
        parts = {}
        for j, c in enumerate(cols):
            g = _grid(prep, is_int[c], c, n) if method != "ir-swap" else None
            parts[c] = _ranked(
                ddf, c, j, k, n, method, p, g, root, None if eps_r is None else float(eps_r[j])
            )
        out = ddf.drop(columns=cols)
        for c in cols:
            out = out.merge(parts[c], on=_ROW, how="inner")
        out = out[[*ddf.columns]]
        shuffle = method != "ir-swap" and bool(p.get("shuffle", True))
    ident = [c for c, r in prep.roles.items() if r is Role.IDENTIFIER and c in out.columns]
    if ident:
        out = out.drop(columns=ident)
    aligned = out
    if shuffle:
        out = out.map_partitions(_with_sort_keys, root, meta=_keys_meta(out))
        out = out.sort_values(["__k0", "__k1"]).drop(columns=["__k0", "__k1", _ROW])
    elif method == "laplace":  # computed in place: already in input order
        out = out.drop(columns=[_ROW])
    else:
        out = out.sort_values(_ROW).drop(columns=[_ROW])
    released_cols = [c for c in ddf.columns if c != _ROW and c not in ident]
    guarantee, is_dp = api.describe(spec, p, prep.roles, released_cols, cols)
    guarantee = api._with_clauses(guarantee, prep, p)
    # only the warnings that depend on the parameters: the others were computed on the sample
    warns = [w for w in prep.warnings if api._is_public_warning(w)]
    return DaskRelease(out, spec.id, guarantee, is_dp, p, cols, n, info, warns, warns, aligned)


def _eps(p: dict, cols: list[str]) -> np.ndarray:
    from dpstudio.engine.types import epsilon_shares

    return epsilon_shares(p, cols)


def _out_dtype(g: N.Grid):
    return "int64" if g.integer else "float64"


def _laplace_part(part: pd.DataFrame, c, g, kind, root, j, eps) -> pd.Series:
    t = g.to_units(part[c].to_numpy(dtype=np.float64))
    t += K.grid_noise(
        kind, K.KeyedStream(root, K.PURPOSE_NOISE, j), part[_ROW].to_numpy(dtype=np.int64), g.span, eps
    )
    return pd.Series(g.from_units(t), index=part.index, name=c)


def _keys_meta(ddf) -> pd.DataFrame:
    meta = ddf._meta.copy()
    meta["__k0"] = np.array([], dtype=np.uint64)
    meta["__k1"] = np.array([], dtype=np.uint64)
    return meta


def _with_sort_keys(part: pd.DataFrame, root) -> pd.DataFrame:
    k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SHUFFLE, 0), part[_ROW].to_numpy(dtype=np.int64))
    return part.assign(__k0=k0, __k1=k1)


def _ranked(ddf, c: str, j: int, k: int, n: int, method: str, p: dict, g, root, eps_j):
    """(record id, released value of ``c``) for the individual-ranking methods."""
    nc = MA.n_clusters_for(n, k)
    s = ddf[[c, _ROW]].sort_values([c, _ROW])
    ones = s[_ROW].isna().map_partitions(lambda s: (~s).astype("int64"), meta=("x", "int64"))
    s = s.assign(__rank=ones.cumsum() - 1)
    if method == "ir-swap":
        # random order inside each chunk: the keyed sort keys of the ranks (as in memory)
        def keyed(part):
            rank = part["__rank"].to_numpy(dtype=np.int64)
            k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SWAP, j), rank)
            return part.assign(__cl=np.minimum(rank // k, nc - 1), __k0=k0, __k1=k1)

        meta = s._meta.assign(
            __cl=np.array([], np.int64), __k0=np.array([], np.uint64), __k1=np.array([], np.uint64)
        )
        s = s.map_partitions(keyed, meta=meta)
        # as in memory: the record at rank r receives the value at rank perm[r], perm = the
        # ranks ordered by (chunk, keyed sort key)
        order = s[["__cl", "__k0", "__k1", "__rank"]].sort_values(["__cl", "__k0", "__k1"])
        ones2 = order["__rank"].isna().map_partitions(lambda v: (~v).astype("int64"), meta=("x", "int64"))
        order = order.assign(__pos=ones2.cumsum() - 1)[["__pos", "__rank"]]
        src = order.merge(s[["__rank", c]], on="__rank", how="inner")[["__pos", c]]
        dst = s[["__rank", _ROW]].rename(columns={"__rank": "__pos"})
        return dst.merge(src, on="__pos", how="inner")[[_ROW, c]]
    kind = p.get("noise", "laplace")

    def tag(part):
        rank = part["__rank"].to_numpy(dtype=np.int64)
        cl = np.minimum(rank // k, nc - 1)
        pos = rank - cl * k
        size = np.where(cl == nc - 1, n - (nc - 1) * k, k)
        t = g.to_units(part[c].to_numpy(dtype=np.float64))
        cols = {"__cl": cl, "__t": t}
        low = np.iinfo(np.int64).min  # the 1st..3rd smallest and largest t of each cluster
        for i in range(3):
            cols[f"__a{i}"] = np.where(pos == i, t, low)
        for i in range(3):
            cols[f"__b{i}"] = np.where(pos == size - 1 - i, t, low)
        return pd.DataFrame({_ROW: part[_ROW].to_numpy(), **cols}, index=part.index)

    meta = pd.DataFrame(
        {
            _ROW: np.array([], np.int64),
            "__cl": np.array([], np.int64),
            "__t": np.array([], np.int64),
            **{f"__{x}{i}": np.array([], np.int64) for x in "ab" for i in range(3)},
        }
    )
    tagged = s.map_partitions(tag, meta=meta)
    split = method == "ir-dp" and kind == "staircase" and k > 1 and nc > 1
    eps_draw = None if eps_j is None else (eps_j / nc if split else eps_j)

    def values(st: pd.DataFrame) -> pd.DataFrame:
        cid = st.index.to_numpy(dtype=np.int64)
        sz = np.where(cid == nc - 1, n - (nc - 1) * k, k)
        tsum = st["sum"].to_numpy(dtype=np.int64)
        a0, a1, a2 = (st[f"a{i}"].to_numpy(dtype=np.int64) for i in range(3))
        b0, b1, b2 = (st[f"b{i}"].to_numpy(dtype=np.int64) for i in range(3))
        if method == "ir-dp":
            sens = g.span
        elif method == "idp-ls":
            sens = np.maximum(g.span - a0, b0)
        else:  # idp-cbls: pulled-in sums, cluster-based local sensitivity
            tsum = tsum - a0 + a1 - b0 + b1
            sens = np.maximum((b0 - a1) + (a2 - a1) + (b0 - b1), (b1 - a0) + (b1 - b2) + (a1 - a0))
        if True:
            noisy = tsum + K.grid_noise(kind, K.KeyedStream(root, K.PURPOSE_NOISE, j), cid, sens, eps_draw)
            vals = g.from_units(N.round_half_up_div(noisy, sz))
        return pd.DataFrame({"__cl": cid, c: vals})

    # The sorted partitions hold consecutive ranks, so every cluster lies in one partition
    # except those cut by a partition boundary: per partition the statistics of its clusters
    # (one pass), the first and last cluster's partial statistics combined over the
    # partitions (a few rows), then the values computed in place -- no group-by, no join.
    emeta = _local_stats(tagged._meta)
    # one expression with the release (a separate to_delayed graph would sort twice); a
    # one-partition frame is broadcast to every partition of map_partitions
    combined = (
        tagged.map_partitions(_edge_stats, meta=emeta)
        .repartition(npartitions=1)
        .map_partitions(_combine_edges, meta=emeta)
    )

    def assign(part: pd.DataFrame, comb: pd.DataFrame) -> pd.DataFrame:
        st = _local_stats(part)
        if len(st) and len(comb):
            hit = st.index.isin(comb.index)
            if hit.any():
                st.loc[hit] = comb.loc[st.index[hit]].to_numpy()
        v = values(st)
        cl = part["__cl"].to_numpy(dtype=np.int64)
        pos = np.searchsorted(v["__cl"].to_numpy(dtype=np.int64), cl)
        return pd.DataFrame({_ROW: part[_ROW].to_numpy(), c: v[c].to_numpy()[pos]}, index=part.index)

    ometa = pd.DataFrame({_ROW: np.array([], np.int64), c: np.array([], _out_dtype(g))})
    return tagged.map_partitions(assign, combined, meta=ometa, align_dataframes=False)


_STATS = ["sum", "a0", "a1", "a2", "b0", "b1", "b2"]


def _local_stats(part: pd.DataFrame) -> pd.DataFrame:
    """Per-cluster sum of t and max of the a/b columns of one sorted partition (cluster ids
    ascending, each cluster's rows contiguous).
    """
    cl = part["__cl"].to_numpy(dtype=np.int64)
    if cl.size == 0:
        return pd.DataFrame(
            {k: np.array([], np.int64) for k in _STATS}, index=pd.Index(np.array([], np.int64))
        )
    start = np.flatnonzero(np.r_[True, cl[1:] != cl[:-1]])
    out = {"sum": np.add.reduceat(part["__t"].to_numpy(dtype=np.int64), start)}
    for x in "ab":
        for i in range(3):
            out[f"{x}{i}"] = np.maximum.reduceat(part[f"__{x}{i}"].to_numpy(dtype=np.int64), start)
    return pd.DataFrame(out, index=pd.Index(cl[start]))


def _edge_stats(part: pd.DataFrame) -> pd.DataFrame:
    """The partial statistics of the first and the last cluster of a sorted partition."""
    st = _local_stats(part)
    return st.iloc[[0, -1]] if len(st) > 1 else st


def _combine_edges(*edges: pd.DataFrame) -> pd.DataFrame:
    """Statistics of the clusters at partition boundaries, combined over the partitions (sum
    of the sums, max of the a/b columns); only clusters seen in more than one partition.
    """
    if not edges:
        return _local_stats(pd.DataFrame({"__cl": []}))
    t = pd.concat([e for e in edges if len(e)], axis=0) if any(len(e) for e in edges) else edges[0]
    if not len(t):
        return t
    g = t.groupby(level=0)
    multi = g.size()
    out = g.agg({"sum": "sum", **{k: "max" for k in _STATS[1:]}})
    return out.loc[multi.index[multi.to_numpy() > 1]][_STATS]


def _insensitive(ddf, cols, k, n, p, grids, root, eps, prep):
    """(record id, released values) of single-order insensitive-dp: the records sorted by
    (squared scaled distance to the reference corner, x_1, …, x_m, record id) -- the order of
    :func:`~dpstudio.engine.algorithms.microaggregation.insensitive_order` -- by one
    distributed sort, clusters = rank // k (the last takes the remainder), one group-by of the
    integer grid sums, one keyed draw per cluster and attribute (as in memory).
    """
    from dpstudio.engine.protection._common import staircase_split

    lb = np.array([prep.domains[c][0] for c in cols], dtype=np.float64)
    ub = np.array([prep.domains[c][1] for c in cols], dtype=np.float64)
    bits = [p.get("reference", "lower") == "upper"] * len(cols)
    nc = MA.n_clusters_for(n, k)
    kk = max(int(k), 1)
    xs = [f"__x{j}" for j in range(len(cols))]
    ts = [f"__t{j}" for j in range(len(cols))]

    def key(part):
        X = np.ascontiguousarray(part[cols].to_numpy(dtype=np.float64))
        d = MA._corner_key(MA._scaled(X, lb, ub), bits)
        return pd.DataFrame(
            {"__d": d, **{x: X[:, j] for j, x in enumerate(xs)}, _ROW: part[_ROW].to_numpy(dtype=np.int64)},
            index=part.index,
        )

    meta = pd.DataFrame(
        {
            "__d": np.array([], np.float64),
            **{x: np.array([], np.float64) for x in xs},
            _ROW: np.array([], np.int64),
        }
    )
    s = ddf[[*cols, _ROW]].map_partitions(key, meta=meta)
    if k > 1:
        s = s.sort_values(["__d", *xs, _ROW])
        ones = s[_ROW].isna().map_partitions(lambda v: (~v).astype("int64"), meta=("x", "int64"))
        s = s.assign(__rank=ones.cumsum() - 1)
    else:  # k = 1: every record its own cluster, id = record id (memory)
        s = s.assign(__rank=s[_ROW])

    def tag(part):
        rank = part["__rank"].to_numpy(dtype=np.int64)
        cl = np.minimum(rank // kk, nc - 1)
        out = {_ROW: part[_ROW].to_numpy(dtype=np.int64), "__cl": cl}
        for j, g in enumerate(grids):
            out[ts[j]] = g.to_units(part[xs[j]].to_numpy(dtype=np.float64))
        return pd.DataFrame(out, index=part.index)

    tmeta = pd.DataFrame(
        {
            _ROW: np.array([], np.int64),
            "__cl": np.array([], np.int64),
            **{t: np.array([], np.int64) for t in ts},
        }
    )
    tagged = s.map_partitions(tag, meta=tmeta)
    stats = tagged.groupby("__cl")[ts].sum(split_out=max(1, ddf.npartitions // 4))
    kind = p.get("noise", "laplace")
    calibration = p.get("calibration", "rigorous")
    factor = 1 if calibration == "as-published" else nc
    split = calibration == "rigorous" and staircase_split(kind, k, nc)

    def values(st: pd.DataFrame) -> pd.DataFrame:
        cid = st.index.to_numpy(dtype=np.int64)
        sz = np.where(cid == nc - 1, n - (nc - 1) * kk, kk)
        out = {"__cl": cid}
        for j, (c, g) in enumerate(zip(cols, grids)):
            if split:
                sens, eps_draw = g.span, float(eps[j]) / nc
            else:
                sens, eps_draw = int(factor) * g.span, float(eps[j])
            noisy = st[ts[j]].to_numpy(dtype=np.int64) + K.grid_noise(
                kind, K.KeyedStream(root, K.PURPOSE_NOISE, j), cid, sens, eps_draw
            )
            out[c] = g.from_units(N.round_half_up_div(noisy, sz))
        return pd.DataFrame(out)

    vmeta = pd.DataFrame(
        {"__cl": np.array([], np.int64), **{c: np.array([], _out_dtype(g)) for c, g in zip(cols, grids)}}
    )
    vals = stats.map_partitions(values, meta=vmeta)
    return tagged[[_ROW, "__cl"]].merge(vals, on="__cl", how="inner")[[_ROW, *cols]]


# --------------------------------------------------------------------------- writing


def write_release(
    rel: DaskRelease,
    out_dir: str | os.PathLike,
    *,
    input_path=None,
    fmt: str = "parquet",
    progress: bool = False,
) -> dict:
    """Write the release atomically: parts into a temporary folder next to ``out_dir``, renamed
    at the end (never over the input); public metadata beside the parts, the private audit
    trail (0600) beside the folder.
    """
    from dpstudio.engine import io as dio

    out_dir = os.path.abspath(os.fspath(out_dir))
    dio.check_output_not_input(out_dir, input_path, what="release folder")
    if os.path.exists(out_dir):
        raise InputError(f"Output {out_dir!r} exists; choose a new folder (nothing is overwritten).")
    parent = os.path.dirname(out_dir) or "."
    tmp = tempfile.mkdtemp(prefix=".dpstudio-", dir=parent)
    try:
        if fmt == "csv":
            task = rel.data.to_csv(
                os.path.join(tmp, "release.csv"), single_file=True, index=False, compute=False
            )
        else:
            task = rel.data.to_parquet(os.path.join(tmp, "release"), write_index=False, compute=False)
        if progress:
            _compute_with_progress(task)
        else:
            import dask

            dask.compute(task)
        meta = {
            "method": rel.method,
            "guarantee": rel.guarantee,
            "is_dp": rel.is_dp,
            "parameters": {
                k: v for k, v in rel.params.items() if not k.startswith("_") and k not in ("seed", "rng")
            },
            "protected_attributes": rel.protected_attributes,
            "public_warnings": rel.public_warnings,
            "backend": "dask",
            "columns": [str(c) for c in rel.data.columns],
        }
        with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=2, default=str)
        os.chmod(os.path.join(tmp, "metadata.json"), dio.file_mode(False))
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    private = out_dir.rstrip(os.sep) + ".private.json"
    trail = {
        "records": rel.n,
        "warnings": rel.warnings,
        "info": rel.info,
        "input": os.fspath(input_path) if input_path is not None else None,
    }
    dio.atomic_write(private, lambda p: _dump(p, trail), private=True)
    return {"release": out_dir, "metadata": os.path.join(out_dir, "metadata.json"), "private": private}


def _dump(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=str)


def _compute_with_progress(task) -> None:
    try:
        from distributed import default_client
        from distributed import progress as dprogress

        client = default_client()
    except (ImportError, ValueError):
        import dask
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            dask.compute(task)
        return
    fut = client.compute(task)
    dprogress(fut)
    fut.result()
