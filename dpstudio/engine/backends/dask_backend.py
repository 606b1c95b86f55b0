"""The Dask backend (issue 12): the sort-based methods on data larger than memory.

``protect_dask(source, method, ...)`` runs ``laplace``, ``ir-dp``, ``idp-ls``, ``idp-cbls``,
``ir-swap`` and single-order ``insensitive-dp`` (one distributed sort by the distance to the
domain corner) on a ``dask.dataframe`` (or a Parquet file/folder or CSV path, read lazily) and
gives the release the in-memory engine gives for the same seed, value for value:

* the run's root key is the first draw of the run's generator, derived as in memory from
  ``as_rng(seed)``, the method, its parameters and the data digest
  (:func:`dpstudio.engine.keying.keyed_rng`; the digest's per-partition sums are taken in the
  validation pass and combined in partition order, :func:`dpstudio.engine.keying.digest_partial`),
  as :func:`dpstudio.engine.protection._common.job_stream` does; every draw is keyed by
  (root, purpose, attribute, cluster or record id) (:mod:`dpstudio.engine.algorithms.keyed`),
  so it does not depend on the partitioning;
* record ids are global positions (partition lengths counted in the validation pass);
* ir-dp / idp-ls / idp-cbls / ir-swap move NO records, and work ONE ATTRIBUTE AT A TIME (the
  memory bound at 100M records): one task copies that attribute's values (read alone, one
  Parquet column) into one array, sorts it in place (S) and keeps the cluster boundaries (the
  value at rank c·k), the released value of every cluster (one keyed draw per cluster; the
  last cluster takes the remainder) and the tied values whose ranks cross a boundary; per
  partition, each record's exact rank (first rank of its value + records with that value in
  earlier partitions + earlier records of the partition) gives cluster id = min(rank // k,
  n_c − 1); the released column is kept on the workers, then the next attribute; the release
  is the input partitions with their released columns, in input order;
* the random order of the in-memory engine (records ordered by keyed 128-bit sort keys; every
  method unless order='input') is
  one range partitioning on the top bits of the keys with known divisions (uniform keys),
  then a sort inside each output partition; single-order insensitive-dp still uses a
  distributed sort (its key is multi-column).

Other methods raise :class:`NotOnDask` naming ``--engine memory``.  Dask is optional
(``pip install 'dpstudio[scale]'``); this module imports it lazily.
"""

from __future__ import annotations

import json
import os
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
DASK_METHODS = ("laplace", "ir-dp", "idp-ls", "idp-cbls", "ir-swap", "insensitive-dp", "k-eps")
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
    check_input(path)
    low = path.lower()
    if os.path.isdir(path) or low.endswith(PARQUET_EXTENSIONS):
        return dd.read_parquet(path)
    return dd.read_csv(path, sep="\t" if low.endswith(".tsv") else ",", blocksize="64MB")


def check_input(path: str | os.PathLike) -> None:
    """Refuse, in one line and before any cluster starts, an input the Dask backend cannot
    read: missing, not Parquet or CSV, a FIFO or device, or a Parquet input
    :func:`check_parquet_input` refuses.
    """
    from dpstudio.engine.io import check_regular_file

    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"Input {path!r} does not exist.")
    low = path.lower()
    if os.path.isdir(path) or low.endswith(PARQUET_EXTENSIONS):
        check_parquet_input(path)
    elif low.endswith((".csv", ".txt", ".tsv")):
        check_regular_file(path, what="Input")  # a FIFO or device: one line, never read
    else:
        raise InputError(
            f"The Dask backend reads Parquet (a file or a folder of parts) and CSV; "
            f"{os.path.basename(path)!r} is neither. Convert it or use --engine memory."
        )


#: The names Dask reads as Parquet parts of a folder.
PARQUET_EXTENSIONS = (".parquet", ".parq", ".pq")


def parquet_parts(path: str) -> list[str]:
    """The Parquet files of ``path`` (itself, or the parts below a folder, sorted)."""
    if not os.path.isdir(path):
        return [path]
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out += [os.path.join(root, f) for f in sorted(files) if f.lower().endswith(PARQUET_EXTENSIONS)]
    return out


def check_parquet_input(path: str) -> None:
    """Refuse, in one line and before any worker starts, a Parquet input Dask would fail on
    with a worker traceback: an empty folder, a folder without Parquet parts, a part that is
    not a regular file or not Parquet (its footer is read: cheap), parts whose columns differ.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpstudio.engine.io import check_regular_file

    name = os.path.basename(os.path.normpath(path)) or path
    parts = parquet_parts(path)
    if os.path.isdir(path) and not parts:
        empty = not any(True for _ in os.scandir(path))
        raise InputError(
            f"Input folder {name!r} is empty."
            if empty
            else f"Input folder {name!r} holds no Parquet parts (files ending in "
            f"{', '.join(PARQUET_EXTENSIONS)}); give the folder of the parts or a Parquet file."
        )
    first: tuple[str, list[str]] | None = None
    for part in parts:
        rel = os.path.relpath(part, path) if os.path.isdir(path) else os.path.basename(part)
        check_regular_file(part, what="Parquet part")
        try:
            schema = pq.read_schema(part)
        except (pa.ArrowException, OSError, ValueError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"Input {name!r}: part {rel!r} is not a readable Parquet file ({msg}); replace or remove it."
            ) from None
        cols = [c for c in schema.names if not c.startswith("__index_level_")]
        if first is None:
            first = (rel, cols)
        elif cols != first[1]:
            missing = [c for c in first[1] if c not in cols]
            extra = [c for c in cols if c not in first[1]]
            what = (
                f"lacks column(s) {', '.join(map(repr, missing))}"
                if missing
                else f"has extra column(s) {', '.join(map(repr, extra))}"
                if extra
                else "has the columns in another order"
            )
            raise InputError(
                f"Input {name!r}: part {rel!r} {what} compared with part {first[0]!r}; every "
                "part must have the same columns."
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
    #: the guarantee as data (:class:`~dpstudio.engine.guarantee.Guarantee`): ``guarantee`` is its text
    guarantee_info: Any = field(default=None, repr=False)

    def compute(self) -> pd.DataFrame:
        return self.data.compute().reset_index(drop=True)


# --------------------------------------------------------------------------- validation


def check_runs_on_dask(method: str, params: dict | None = None) -> None:
    """Raise :class:`NotOnDask` saying why ``method`` (with ``params``) does not run on Dask;
    nothing when it does (no data needed: the app marks methods before a run).
    """
    params = params or {}
    if method not in DASK_METHODS:
        raise NotOnDask(
            f"Method {method!r} does not run on Dask (it is neither sort-based nor OLA); "
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


def _validate(ddf, method, roles, domains, precision, params, hierarchies=None):
    """Validate on a sample with the engine's own ``prepare`` (one error format), then check
    the whole data (missing values, domains) with one distributed pass.
    """
    from dpstudio.engine import api

    spec = api.get_method(method)
    check_runs_on_dask(method, params)
    sample = ddf.head(SAMPLE_ROWS, npartitions=-1)
    prep = api.prepare(sample, method, roles, domains, hierarchies, precision=precision, **params)
    cols = list(prep.protected)
    if method == "k-eps":
        _check_keps(prep, hierarchies)
    aggs = {}
    for c in cols:
        aggs[(c, "na")] = ddf[c].isna().sum()
        if method != "k-eps":  # k-quasis: strings, no domain
            aggs[(c, "min")] = ddf[c].min()
            aggs[(c, "max")] = ddf[c].max()
    import dask

    keys = list(aggs)
    # the lengths of the FULL frame's partitions (record ids = global positions): a length
    # taken from one column would follow Dask's fused single-column reads of a Parquet folder
    # (fewer, longer partitions), not the partitions the release is computed on.  The data
    # digest's partial sums are combined in order and do not depend on where the partitions
    # split: read from the protected columns only
    from dpstudio.engine.keying import combine_partials

    parts = ddf[cols].map_partitions(_digest_part, cols, meta=(None, object))
    vals = dask.compute(ddf.map_partitions(len), parts, *[aggs[k] for k in keys])
    lens = np.asarray(vals[0], dtype=np.int64)
    digest = combine_partials(list(vals[1]))
    vals = (vals[0], *vals[2:])
    if lens.size != ddf.npartitions:  # pragma: no cover - a Dask change would show here
        raise InputError(
            f"internal: {lens.size} partition lengths for {ddf.npartitions} partitions; run with --engine memory."
        )
    n = int(lens.sum())
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
    prep._digest = digest  # the whole data's, not the sample's: the run's key material
    return spec, prep, cols, n, lens


def _digest_part(part: pd.DataFrame, cols: list[str]) -> pd.Series:
    """One partition's (records, lane A, lane B) of the data digest, in a one-element Series
    (dask concatenates them in partition order).
    """
    from dpstudio.engine.keying import digest_partial

    return pd.Series([digest_partial(part, cols)], dtype=object)


def _grid(prep, integer: bool, c: str, n: int):
    """The grid of ``c`` as :func:`~dpstudio.engine.algorithms.noise.job_grid` in memory
    (``integer``: the column is declared of type integer).
    """
    dom = prep.domains.get(c)
    gamma = (prep.precision or {}).get(c)
    if gamma is None:
        gamma = N.default_precision(dom, integer)
    if gamma is None:  # as noise.job_grid in memory (idp-cbls needs no domain)
        raise ParameterError(N.missing_precision_message(c))
    return N.make_grid(c, gamma, dom, integer, n)


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
    hierarchies: dict | None = None,
    progress: Any = None,
    **params: Any,
) -> DaskRelease:
    """Protect ``source`` on Dask; returns a :class:`DaskRelease` (lazy).  ``progress``: an
    optional ``fn(message)`` told of each step of the ranked methods (they compute one
    attribute at a time before the release is written; the command line prints them).  ``client``: a
    ``distributed.Client`` (``None``: the current default scheduler).
    """
    from dpstudio.engine import api

    ddf = read_lazy(source)
    ddf = ddf.rename(columns={c: str(c) for c in ddf.columns})
    spec, prep, cols, n, lens = _validate(ddf, method, roles, domains, precision, params, hierarchies)
    p = dict(prep.params)
    if spec.uses_epsilon and p.get("epsilon") is None:
        raise NotOnDask(
            "The noise-free baseline (no ε) is for sweeps and does not run on Dask; "
            "give --epsilon or use --engine memory."
        )
    from dpstudio.engine.keying import keyed_rng
    from dpstudio.engine.protection._common import keep_order
    from dpstudio.engine.roles import declared_integer

    # the first draw of the run's generator, derived from the seed, the parameters and the
    # data digest exactly as run_prepared does in memory (job_stream)
    root = K.root_key(keyed_rng(as_rng(seed), prep.run_context(p)))
    starts = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
    columns = ddf  # the input as read: one column of it reads only that column (ranked methods)
    ddf = ddf.map_partitions(_with_row, starts, meta=ddf._meta.assign(**{_ROW: np.array([], np.int64)}))
    info: dict = {"backend": "dask", "npartitions": int(ddf.npartitions)}
    is_int = {c: declared_integer(prep.types, c) for c in cols}  # declared, never the sample's dtype
    new = {}
    private_warns: list = []
    if method == "k-eps":
        out, kinfo, kwarns = _keps_release(ddf, prep, p, hierarchies, n)
        info.update(kinfo)
        private_warns += kwarns
        shuffle = not keep_order(p)
    elif method == "laplace":
        eps = _eps(p, cols)
        kind = p.get("noise", "laplace")
        for j, c in enumerate(cols):
            g = _grid(prep, is_int[c], c, n)
            new[c] = ddf[[c, _ROW]].map_partitions(
                _laplace_part, c, g, kind, root, j, float(eps[j]), meta=(c, _out_dtype(g))
            )
        out = ddf.assign(**new)
        shuffle = not keep_order(p)
    elif method == "insensitive-dp":
        grids = [_grid(prep, is_int[c], c, n) for c in cols]
        vals = _insensitive(ddf, cols, int(p["k"]), n, p, grids, root, _eps(p, cols), prep)
        out = ddf.drop(columns=cols).merge(vals, on=_ROW, how="inner")[[*ddf.columns]]
        shuffle = not keep_order(p)
    else:
        eps_r = None if method == "ir-swap" else _eps(p, cols)
        grids = [None if method == "ir-swap" else _grid(prep, is_int[c], c, n) for c in cols]
        out = _ranked_release(
            ddf,
            cols,
            int(p["k"]),
            n,
            method,
            p,
            grids,
            root,
            eps_r,
            client,
            columns,
            starts,
            np.asarray(lens),
            progress,
        )
        shuffle = not keep_order(p)
    ident = [c for c, r in prep.roles.items() if r is Role.IDENTIFIER and c in out.columns]
    if ident:
        out = out.drop(columns=ident)
    aligned = out
    if shuffle:
        out = _shuffled(out, root)
    elif method == "insensitive-dp":
        out = out.sort_values(_ROW).drop(columns=[_ROW])
    else:  # computed in place: already in input order
        out = out.drop(columns=[_ROW])
    released_cols = [c for c in ddf.columns if c != _ROW and c not in ident]
    g = api.with_grid_clause(api.release_guarantee(spec, p, prep.roles, released_cols, cols), prep, p)
    # only the warnings that depend on the parameters: the others were computed on the sample
    warns = [w for w in prep.warnings if api._is_public_warning(w)]
    return DaskRelease(
        out, spec.id, g.render(), g.is_dp, p, cols, n, info, warns + private_warns, warns, aligned, g
    )


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


def _with_row(part: pd.DataFrame, starts, partition_info=None) -> pd.DataFrame:
    """The record id (global input position) from the partition lengths counted once."""
    i = partition_info["number"] if partition_info else 0
    return part.assign(**{_ROW: np.arange(len(part), dtype=np.int64) + int(starts[i])})


def _with_sort_keys(part: pd.DataFrame, root, bits: int) -> pd.DataFrame:
    k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SHUFFLE, 0), part[_ROW].to_numpy(dtype=np.int64))
    return part.assign(__k0=k0, __k1=k1, __b=(k0 >> np.uint64(64 - bits)).astype(np.int64))


def _by_sort_keys(part: pd.DataFrame) -> pd.DataFrame:
    k0 = part["__k0"].to_numpy()
    order = np.argsort(k0)
    s0 = k0[order]
    if s0.size > 1 and bool(np.any(s0[1:] == s0[:-1])):  # equal first words (~n²/2⁶⁵): both
        order = np.lexsort((part["__k1"].to_numpy(), k0))
    return part.iloc[order].drop(columns=["__k0", "__k1", _ROW]).reset_index(drop=True)


def _shuffled(out, root):
    """The release in the in-memory engine's shuffled order (records ordered by their keyed
    128-bit sort keys).  The keys are uniform, so the top bits of the first word name the
    output partition: a range partitioning with known divisions (one all-to-all exchange, no
    quantile pass, the release computed once), then a sort by the keys inside each partition.
    """
    bits = max(1, int(np.ceil(np.log2(max(2, out.npartitions)))))
    meta = out._meta.assign(
        __k0=np.array([], np.uint64), __k1=np.array([], np.uint64), __b=np.array([], np.int64)
    )
    keyed = out.map_partitions(_with_sort_keys, root, bits, meta=meta)
    m = 1 << bits
    keyed = keyed.set_index("__b", divisions=[*range(m), m - 1], sorted=False)
    fmeta = out._meta.drop(columns=[_ROW]).reset_index(drop=True)
    return keyed.map_partitions(_by_sort_keys, meta=fmeta)


# --------------------------------------------------------------------------- ranked methods

#: clusters per block when the per-cluster statistics are computed from the sorted values
_BLOCK = 1 << 16
_LOW = np.iinfo(np.int64).min


def _release_arrow_memory(dask_worker=None) -> None:
    """Give the memory PyArrow's pool keeps after a Parquet read back to the system (mimalloc
    and jemalloc keep it: ~150 MB a worker after reading 1M-row parts of five columns, a
    quarter of a 600 MB worker).  Called in the tasks that read partitions and on every
    worker between the steps of the ranked methods.
    """
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - Parquet needs it; CSV does not
        return
    pa.default_memory_pool().release_unused()


def _run(part: pd.Series) -> list:
    """One partition's values of one attribute, in a box (a one-element list) that the merge
    task empties: the merge copies each run into its preallocated array and drops it at once,
    so a run's memory is given back while the merge goes on (the scheduler still holds the
    box, now empty).  A run's only consumer is :func:`_attr_table`.
    """
    out = [part.to_numpy(dtype=np.float64, copy=True)]
    del part
    _release_arrow_memory()
    return out


def _attr_table(*runs: list, n: int, k: int, method: str, kind: str, g, root, j: int, eps_j) -> dict:
    """The per-attribute table of the ranked methods, from ALL the values of the attribute
    (only that column, sorted: S): the cluster boundaries ``B`` (the value at each cluster's
    first rank), the released value of every cluster (``vals``, one keyed draw per cluster, as
    in memory) and the tied values whose block of ranks crosses a cluster boundary (``U``,
    their first rank ``lo``), whose records need their exact rank (ir-swap: every tied value,
    and ``S`` itself).  Memory: S (8 bytes a record; the runs are moved into it one by one and
    freed, and it is sorted in place), then 16 bytes a cluster.
    """
    S = np.empty(n, dtype=np.float64)  # pages are touched as the runs are copied in
    pos = 0
    for box in runs:
        if not box:  # pragma: no cover - a run is consumed once; a retried merge recomputes them
            raise RuntimeError("internal: a sorted run was consumed twice; run again.")
        r = box.pop()
        if pos + r.size > n:  # pragma: no cover - the data changed under us
            raise InputError(f"The input changed while it was read (more than {n:,} values).")
        S[pos : pos + r.size] = r
        pos += r.size
        del r
    del runs
    if pos != n:  # pragma: no cover - the data changed under us
        raise InputError(f"The input changed while it was read ({pos:,} values, {n:,} records).")
    S.sort()  # in place (equal values are interchangeable: no stable sort needed)
    kk = max(int(k), 1)
    nc = MA.n_clusters_for(n, k)
    starts = np.arange(nc, dtype=np.int64) * kk
    tab: dict = {"B": S[starts], "nc": nc, "k": kk}
    if method == "ir-swap":
        dup = np.flatnonzero(S[1:] == S[:-1])
        tab["U"] = np.unique(S[dup])
    else:
        c = starts[1:]
        tab["U"] = np.unique(S[c][S[c - 1] == S[c]])
    tab["lo"] = np.searchsorted(S, tab["U"], "left").astype(np.int64)
    if method == "ir-swap":
        tab["S"] = S
        return tab
    split = method == "ir-dp" and kind == "staircase" and k > 1 and nc > 1
    eps_draw = eps_j / nc if split else eps_j
    stream = K.KeyedStream(root, K.PURPOSE_NOISE, j)
    vals = np.empty(nc, dtype=np.int64 if g.integer else np.float64)
    for a in range(0, nc, _BLOCK):
        b = min(nc, a + _BLOCK)
        cid = np.arange(a, b, dtype=np.int64)
        r0, r1 = a * kk, (n if b == nc else b * kk)
        t = g.to_units(S[r0:r1])
        loc = starts[a:b] - r0
        sz = np.where(cid == nc - 1, n - (nc - 1) * kk, kk)
        tsum = np.add.reduceat(t, loc).astype(np.int64)
        if method == "ir-dp":
            sens = g.span
        else:  # the 1st..3rd smallest (a) and largest (b) grid values of each cluster
            a0, a1, a2 = (np.where(i < sz, t[np.minimum(loc + i, t.size - 1)], _LOW) for i in range(3))
            b0, b1, b2 = (
                np.where(sz - 1 - i >= 0, t[np.maximum(loc + sz - 1 - i, 0)], _LOW) for i in range(3)
            )
            if method == "idp-ls":
                sens = np.maximum(g.span - a0, b0)
            else:  # idp-cbls: pulled-in sums, cluster-based local sensitivity
                tsum = tsum - a0 + a1 - b0 + b1
                sens = np.maximum((b0 - a1) + (a2 - a1) + (b0 - b1), (b1 - a0) + (b1 - b2) + (a1 - a0))
        noisy = tsum + K.grid_noise(kind, stream, cid, sens, eps_draw)
        vals[a:b] = g.from_units(N.round_half_up_div(noisy, sz))
    tab["vals"] = vals
    return tab


def _tie_index(v: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position in ``U`` of each value, and whether the value is in ``U``."""
    if U.size == 0:
        return np.zeros(v.size, np.int64), np.zeros(v.size, bool)
    idx = np.searchsorted(U, v)
    np.minimum(idx, U.size - 1, out=idx)
    return idx, U[idx] == v


def _groups(v: np.ndarray):
    """One stable sort of a partition's values: (order, distinct values ascending, group of
    each sorted record, position of each sorted record inside its group = number of earlier
    records of the partition with the same value).  Searches then use the sorted distinct
    values (fast, cache-friendly) instead of the records.
    """
    order = np.argsort(v, kind="stable")
    sv = v[order]
    first = np.empty(sv.size, dtype=bool)
    first[:1] = True
    np.not_equal(sv[1:], sv[:-1], out=first[1:])
    start = np.flatnonzero(first)
    grp = np.cumsum(first) - 1
    return order, sv[start], grp, np.arange(sv.size) - start[grp]


def _tie_counts(part: pd.Series, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per partition (its values, read again: the runs are not kept for this): the tied values
    it holds (positions in ``U``, ascending) and how many records hold each.
    """
    if U.size == 0 or len(part) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    idx, hit = _tie_index(part.to_numpy(dtype=np.float64), U)
    _release_arrow_memory()
    u, cnt = np.unique(idx[hit], return_counts=True)
    return u.astype(np.int64), cnt.astype(np.int64)


def _tie_prefix_step(prev, counts, size: int):
    """One step of the exclusive prefix over the partitions in input order: from ``prev``
    (``None`` for the first partition, else the previous step's ``(seen, before)``), the
    number of records holding each of this partition's tied values in the EARLIER partitions
    (``before``, aligned with its :func:`_tie_counts`) and the running totals ``seen``.  A
    chain of small tasks, so that no task holds every partition's counts.
    """
    u, cnt = counts
    seen = np.zeros(size, dtype=np.int64) if prev is None else prev[0].copy()
    before = seen[u]  # a copy (fancy indexing)
    seen[u] += cnt
    return seen, before


def _second(x):
    return x[1]


def _ranks_of(v: np.ndarray, tab: dict, before: np.ndarray, base: str) -> np.ndarray:
    """Per record: its cluster id (``base='cluster'``) or its exact rank (``'rank'``, ir-swap).
    Values not in ``U`` take the cluster of their boundary interval (or their first rank);
    values in ``U`` get their exact rank: first rank of the value + records holding it in
    earlier partitions (``before``) + earlier records of this partition holding it -- the
    stable (value, record id) order of the in-memory engine.
    """
    order, u, grp, local = _groups(v)
    if base == "rank":
        per_u = np.searchsorted(tab["S"], u, "left").astype(np.int64)
    else:
        per_u = np.searchsorted(tab["B"], u, "right").astype(np.int64) - 1
    out_sorted = per_u[grp]
    idx, hit = _tie_index(u, tab["U"])
    if hit.any():
        start_u = np.zeros(u.size, dtype=np.int64)
        start_u[hit] = tab["lo"][idx[hit]] + before
        rec = hit[grp]
        rank = start_u[grp[rec]] + local[rec]
        out_sorted[rec] = rank if base == "rank" else np.minimum(rank // tab["k"], tab["nc"] - 1)
    out = np.empty(v.size, dtype=np.int64)
    out[order] = out_sorted
    return out


def _swap_values(tab: dict, rank: np.ndarray, root, j: int) -> np.ndarray:
    """ir-swap: the record at rank r receives the value at rank perm[r], perm = the ranks of
    its chunk ordered by their keyed sort keys (as in memory).
    """
    S, kk, nc = tab["S"], tab["k"], tab["nc"]
    n = S.size
    cl = np.minimum(rank // kk, nc - 1)
    ucl = np.unique(cl)
    lo = ucl * kk
    sz = np.where(ucl == nc - 1, n - (nc - 1) * kk, kk)
    owner = np.repeat(np.arange(ucl.size), sz)
    ranks = np.repeat(lo, sz) + (np.arange(owner.size) - np.repeat(np.cumsum(sz) - sz, sz))
    k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SWAP, j), ranks)
    perm = ranks[np.lexsort((k1, k0, owner))]
    return S[perm[np.searchsorted(ranks, rank)]]


def _release_column(part: pd.Series, tab: dict, before: np.ndarray, method: str, root, j: int):
    """One partition's released values of one attribute, in input order: each record's cluster
    from its value (boundaries, exact ranks for the tied values at a boundary) and the
    cluster's value (ir-swap: the value at its permuted rank).
    """
    v = part.to_numpy(dtype=np.float64)
    _release_arrow_memory()
    if method == "ir-swap":
        out = _swap_values(tab, _ranks_of(v, tab, before, "rank"), root, j)
    else:
        out = tab["vals"][_ranks_of(v, tab, before, "cluster")]
    return np.asarray(out)


def _cut(*arrays: np.ndarray, cuts: list) -> np.ndarray:
    """A partition's released values of one attribute: the (lo, hi) slices ``cuts`` of the
    released ``arrays`` (the partitions of the single-column reads, which Dask may fuse: see
    :func:`_slices`), in input order.
    """
    if len(arrays) == 1:
        lo, hi = cuts[0]
        return arrays[0][lo:hi]
    return np.concatenate([a[lo:hi] for a, (lo, hi) in zip(arrays, cuts)])


def _assemble(part: pd.DataFrame, *columns: np.ndarray, cols, dtypes) -> pd.DataFrame:
    """One partition of the release: the input partition with its released columns."""
    for x in columns:
        if x.size != len(part):  # pragma: no cover - guarded by the lengths checked in _slices
            raise RuntimeError(
                f"internal: {x.size:,} released values for a partition of {len(part):,} records."
            )
    return part.assign(**{c: pd.Series(x, index=part.index).astype(dtypes[c]) for c, x in zip(cols, columns)})


def _slices(starts: np.ndarray, lens: np.ndarray, sizes: list[int]) -> list[list[tuple[int, int, int]]]:
    """Per input partition (global first record ``starts[i]``, ``lens[i]`` records): the
    (piece, lo, hi) slices of the pieces of sizes ``sizes`` that hold its records.

    The single-column reads of a Parquet input may have fewer partitions than the full reads:
    Dask fuses consecutive partitions when only a few columns are read (``FusedParquetIO``:
    buckets of consecutive partitions, "aligned with RepartitionToFewer"), so a released column
    is cut back into the input partitions by global record position.  Both are in input
    order; the totals must agree.
    """
    bounds = np.r_[0, np.cumsum(np.asarray(sizes, dtype=np.int64))]
    total = int(lens.sum()) if lens.size else 0
    if int(bounds[-1]) != total:  # pragma: no cover - the data changed under us
        raise InputError(
            f"The input changed while it was read ({int(bounds[-1]):,} values, {total:,} records)."
        )
    out = []
    for s, ln in zip(starts.tolist(), lens.tolist()):
        if ln == 0:
            out.append([(0, 0, 0)])
            continue
        e = s + ln
        f = int(np.searchsorted(bounds, s, "right")) - 1  # the last piece starting at or before s
        parts = []
        while s < e:
            hi = min(e, int(bounds[f + 1]))
            if hi > s:
                parts.append((f, s - int(bounds[f]), hi - int(bounds[f])))
                s = hi
            f += 1
        out.append(parts)
    return out


def _lengths(done: list, client=None) -> list[int]:
    """The lengths of the persisted arrays ``done`` (one small task each, run where they are:
    ``client.submit`` on their futures with a distributed client, else ``dask.compute``).
    """
    import dask

    futures: list = []
    try:
        from distributed import futures_of

        futures = futures_of(done)
    except ImportError:  # pragma: no cover - without distributed there is no client
        pass
    if client is None and futures:
        client = futures[0].client
    if client is not None and len(futures) == len(done):
        return [int(x) for x in client.gather([client.submit(len, f, pure=False) for f in futures])]
    return [int(len(x)) for x in dask.compute(*done)]


def _persist(objs: list, client=None) -> list:
    """Compute ``objs`` (delayed) and keep the results where they were computed (on the
    cluster's workers with a distributed client: the results stay there as futures; else in
    this process), waiting until they are done.  The intermediate results (the runs, the
    partitions read) are released at the end of each call: what one step needs is not kept
    alive by the next.
    """
    import dask

    sched = dask.config.get("scheduler", None)
    if client is None and (sched is None or sched == "dask.distributed" or callable(sched)):
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = None
        if client is not None and callable(sched) and sched != client.get:
            client = None  # another scheduler chosen explicitly: dask.persist computes there
    if client is None:
        return list(dask.persist(*objs))
    from distributed import futures_of, wait

    try:
        client.run(_release_arrow_memory)  # what the previous step's reads left behind
    except Exception:  # pragma: no cover - a best effort (e.g. a scheduler refusing run)
        pass
    out = client.persist(list(objs))
    futures = futures_of(out)
    with client.as_current():  # wait asks default_client(); the app's client is not the default
        wait(futures)
    for f in futures:
        if f.status == "error":
            f.result()  # raises the task's error (wait does not)
    return list(out)


def _ranked_release(
    ddf,
    cols,
    k,
    n,
    method,
    p,
    grids,
    root,
    eps,
    client=None,
    columns=None,
    starts=None,
    lens=None,
    progress=None,
):
    """The release of ir-dp / idp-ls / idp-cbls / ir-swap in input order, NO shuffle of records.

    ONE ATTRIBUTE AT A TIME (the memory bound: at most one attribute's values and one table
    are live; issue 12 at 100M records), three computations per attribute:

    1. the table (:func:`_attr_table`): one task moves the partitions' values (the runs) into
       one preallocated array, sorts it in place, keeps the table; the runs are gone after it;
    2. the tie prefix: per partition its tied values counted again from the partition
       (:func:`_tie_counts`), then a chain of small tasks takes their exclusive prefix over
       the partitions in input order (:func:`_tie_prefix_step`);
    3. the released column, partition by partition (:func:`_release_column`), kept (on the
       workers: the cluster spills it to disk when it must); then the table is dropped.

    The release is then each input partition with its released columns (:func:`_assemble`).
    ``columns``: the input as read (without the record ids), from which a single column is read
    alone (a Parquet column, not the whole row group); Dask may fuse its partitions, so the
    released columns are cut back into ``ddf``'s partitions by record position (:func:`_slices`;
    ``starts``/``lens``: the global first record and the length of each of ``ddf``'s partitions).
    """
    from dask import delayed

    dd = _dd()
    if starts is None or lens is None:
        lens = np.asarray(ddf.map_partitions(len).compute(), dtype=np.int64)
        starts = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
    starts, lens = np.asarray(starts, dtype=np.int64), np.asarray(lens, dtype=np.int64)
    kind = p.get("noise", "laplace")
    dtypes = {}
    released: list = []
    say = progress or (lambda _msg: None)
    for j, c in enumerate(cols):
        g = grids[j]
        dtypes[c] = ddf[c].dtype if method == "ir-swap" else _out_dtype(g)
        src = (ddf if columns is None else columns)[c]
        parts = src.to_delayed()
        what = f"attribute {j + 1} of {len(cols)} ({c}):"
        say(f"{what} sorting its {n:,} values")
        (tab,) = _persist(
            [
                delayed(_attr_table, pure=True)(
                    *[delayed(_run)(x) for x in parts],
                    n=n,
                    k=k,
                    method=method,
                    kind=kind,
                    g=g,
                    root=root,
                    j=j,
                    eps_j=None if eps is None else float(eps[j]),
                )
            ],
            client,
        )
        U = delayed(dict.get)(tab, "U")
        size = delayed(len)(U)
        step = None
        befores = []
        for x in src.to_delayed():
            step = delayed(_tie_prefix_step)(step, delayed(_tie_counts)(x, U), size)
            befores.append(delayed(_second)(step))
        say(f"{what} counting tied values")
        befores = _persist(befores, client)
        cols_j = [
            delayed(_release_column)(x, tab, b, method, root, j) for x, b in zip(src.to_delayed(), befores)
        ]
        say(f"{what} releasing")
        done = _persist(cols_j, client)
        sizes = _lengths(done, client)
        released.append((done, _slices(starts, lens, sizes)))
        del tab, U, befores, cols_j
    meta = ddf._meta.astype(dtypes)
    # the persisted arrays go in as direct arguments of small tasks: nested in lists inside
    # the assembling task's arguments, the final compute failed ('lost dependencies', dask 2026.8)
    frames = [
        delayed(_assemble)(
            x,
            *[
                delayed(_cut)(*[arrs[f] for f, _, _ in cuts[i]], cuts=[(lo, hi) for _, lo, hi in cuts[i]])
                for arrs, cuts in released
            ],
            cols=cols,
            dtypes=dtypes,
        )
        for i, x in enumerate(ddf.to_delayed())
    ]
    return dd.from_delayed(frames, meta=meta, verify_meta=False)


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


# --------------------------------------------------------------------------- k-eps (OLA)


def _check_keps(prep, hierarchies) -> None:
    """What k-eps does beyond OLA does not run on Dask yet: refuse it, naming the option."""
    p = prep.params
    if (p.get("algorithm") or "ola") != "ola":
        raise NotOnDask("k-eps runs on Dask with algorithm='ola' only; Mondrian needs --engine memory.")
    eq = [c for c, r in prep.roles.items() if r is Role.EPS_QUASI]
    if eq:
        raise NotOnDask(
            "k-eps on Dask runs the OLA generalisation of the k-quasi-identifiers only; the "
            f"within-class noise on the ε-quasi-identifiers ({', '.join(eq)}) does not run on "
            "Dask yet: release them with another role or use --engine memory."
        )
    if p.get("confidence") is not None:
        raise NotOnDask(
            "k-eps option confidence (c-confident suppression) does not run on Dask; use --engine memory."
        )
    kq = [c for c, r in prep.roles.items() if r is Role.K_QUASI]
    missing = [c for c in kq if c not in (hierarchies or {})]
    if missing:
        raise NotOnDask(
            f"k-eps on Dask needs a hierarchy file for every k-quasi-identifier; "
            f"{', '.join(map(repr, missing))} ha{'s' if len(missing) == 1 else 've'} none "
            "(an automatic hierarchy is built from all the values in memory): give "
            + " ".join(f"--hierarchy {c}=FILE" for c in missing)
            + " or use --engine memory."
        )


def _leaves(part: pd.DataFrame, kq: list[str], leaf_index: list[dict]) -> dict[str, np.ndarray]:
    """Every record's leaf index in its k-quasi's hierarchy (as ``encode_quasis`` in memory)."""
    from dpstudio.engine.hierarchies.build import factorize_strings

    out = {}
    for c, index in zip(kq, leaf_index):
        codes, labels = factorize_strings(part[c])
        if (codes < 0).any():
            raise InputError(
                f"Column {c!r} has missing values; the Dask backend refuses them: remove those records first."
            )
        lut = np.fromiter((index.get(str(v), -1) for v in labels), dtype=np.int64, count=len(labels))
        if (lut < 0).any():
            raise InputError(
                f"Column {c!r}: value {labels[int(np.flatnonzero(lut < 0)[0])]!r} is not in its "
                "hierarchy. Add it to the hierarchy file."
            )
        out[c] = lut[codes]
    return out


def _part_frequencies(part: pd.DataFrame, kq, leaf_index) -> pd.DataFrame:
    """One partition's frequency set: distinct leaf combinations and their record counts."""
    leaves = pd.DataFrame(_leaves(part, kq, leaf_index))
    return leaves.groupby(kq, sort=False).size().reset_index(name="__n")


def _frequency_set(*parts: pd.DataFrame) -> pd.DataFrame:
    kq = [c for c in parts[0].columns if c != "__n"]
    both = pd.concat(parts, ignore_index=True)
    return both.groupby(kq, sort=True)["__n"].sum().reset_index()


def _keps_part(part: pd.DataFrame, kq, leaf_index, combos, keep, gen_labels, levels, sdtype) -> pd.DataFrame:
    """One partition of the k-eps release: the k-quasis generalised to the chosen node, the
    records of the suppressed combinations removed (input order; the shuffle comes after).
    """
    leaves = _leaves(part, kq, leaf_index)
    if len(kq) == 1:
        pos = combos.get_indexer(pd.Index(leaves[kq[0]]))
    else:
        pos = combos.get_indexer(pd.MultiIndex.from_arrays([leaves[c] for c in kq], names=kq))
    if (pos < 0).any():  # pragma: no cover - the data changed between the two passes
        raise InputError("The input changed while it was being protected; run again.")
    rows = keep[pos]
    out = part.loc[rows].copy()
    for c in kq:
        if levels[c] > 0:
            out[c] = pd.Series(gen_labels[c][leaves[c][rows]], index=out.index, dtype=sdtype)
    return out


def _keps_release(ddf, prep, p, hierarchies, n):
    """k-eps (OLA) on Dask through a frequency set (ARX's approach): one distributed group-by
    of the k-quasis' leaf indices with counts; the lattice search in memory on that table
    (:func:`~dpstudio.engine.algorithms.generalization.ola` with ``weights``); then each
    partition generalised to the chosen node, the records of the flagged combinations
    suppressed.  Returns (release with record ids, private info, private warnings).
    """
    import dask
    from dask import delayed

    from dpstudio.engine.algorithms.generalization import EncodedQuasi, ola
    from dpstudio.engine.hierarchies.hierarchy import load_hierarchy

    kq = [c for c, r in prep.roles.items() if r is Role.K_QUASI]
    hs = {c: load_hierarchy(hierarchies[c], c) for c in kq}
    leaf_index = [{v: i for i, v in enumerate(hs[c].leaves)} for c in kq]
    parts = [delayed(_part_frequencies)(x, kq, leaf_index) for x in ddf[kq].to_delayed()]
    (freq,) = dask.compute(delayed(_frequency_set)(*parts))
    qs = []
    for c in kq:
        h = hs[c]
        lv = [h.level_codes(lvl) for lvl in range(h.height)]
        qs.append(EncodedQuasi(c, h, freq[c].to_numpy(np.int64), [x[1] for x in lv], [x[0] for x in lv]))
    counts = freq["__n"].to_numpy(np.int64)
    sup = p.get("suppression")
    gen = ola(
        None,
        kq,
        int(p["k"]),
        suppression=float(sup if sup is not None else 0.05),
        loss=p.get("loss") or "precision",
        quasis=qs,
        weights=counts,
    )
    keep = gen.class_id >= 0
    levels = dict(gen.levels)
    gen_labels = {c: q.labels[levels[c]][q.codes[levels[c]]] for c, q in zip(kq, qs)}  # leaf -> label
    combos = pd.Index(freq[kq[0]]) if len(kq) == 1 else pd.MultiIndex.from_frame(freq[kq])
    # the generalised labels as strings (the dtype dask gives string columns; Parquet needs one)
    sdtype = next(
        (ddf._meta[c].dtype for c in kq if isinstance(ddf._meta[c].dtype, pd.StringDtype)), pd.StringDtype()
    )
    meta = ddf._meta.astype({c: sdtype for c in kq if levels[c] > 0})
    out = ddf.map_partitions(_keps_part, kq, leaf_index, combos, keep, gen_labels, levels, sdtype, meta=meta)
    n_sup = int(counts[~keep].sum())
    summary = gen.summary()
    summary["suppressed_records"] = n_sup
    summary["suppression_share"] = n_sup / max(n, 1)
    sizes = np.bincount(gen.class_id[keep], weights=counts[keep]) if keep.any() else np.zeros(0)
    summary["min_class_size"] = int(sizes.min()) if sizes.size else 0
    info = {
        "generalisation": summary,
        "chosen_levels": levels,
        "frequency_set_rows": int(len(freq)),
        "records_in": int(n),
        "records_released": int(n - n_sup),
    }
    warns = []
    if n_sup:
        warns.append(
            f"{n_sup} record(s) ({100 * n_sup / n:.2f} %) were suppressed "
            "by the generalisation step and are not in the release."
        )
    return out, info, warns


# --------------------------------------------------------------------------- writing


def release_plan(out_dir: str | os.PathLike, *, input_path=None, plan=None):
    """The CHECKED write plan of :func:`write_release` (the release folder, which must not exist,
    and the private audit trail beside it); call it before any work and pass it on.
    """
    from dpstudio.engine.safe_write import WritePlan

    plan = plan if plan is not None else WritePlan()
    plan.add_input(input_path)
    out_dir = os.path.abspath(os.fspath(out_dir))
    plan.folder(out_dir, what="release folder", role="release:folder")
    plan.file(_private_path(out_dir), what="audit trail", private=True, role="release:private")
    return plan.check()


def _private_path(out_dir: str) -> str:
    return out_dir.rstrip(os.sep) + ".private.json"


def write_release(
    rel: DaskRelease,
    out_dir: str | os.PathLike,
    *,
    input_path=None,
    fmt: str = "parquet",
    progress: bool = False,
    plan=None,
) -> dict:
    """Write the release atomically through the one guarded writer: parts into a temporary
    folder next to ``out_dir``, renamed at the end (never over the input, never over an
    existing path); public metadata beside the parts, the private audit trail (0600) beside
    the folder.  ``plan``: the command's checked plan from :func:`release_plan`.
    """
    out_dir = os.path.abspath(os.fspath(out_dir))
    plan = release_plan(out_dir, input_path=input_path, plan=plan)

    def fill(tmp: str) -> None:
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
        from dpstudio.engine.safe_write import file_mode

        with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=2, default=str)
        os.chmod(os.path.join(tmp, "metadata.json"), file_mode(False))

    private = _private_path(out_dir)
    trail = {
        "records": rel.n,
        "warnings": rel.warnings,
        "info": rel.info,
        "input": os.fspath(input_path) if input_path is not None else None,
    }
    text = json.dumps(trail, indent=2, default=str)
    with plan.transaction():
        plan.write_folder(out_dir, fill)
        plan.write_text(private, text)
    return {"release": out_dir, "metadata": os.path.join(out_dir, "metadata.json"), "private": private}


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
