"""Utility and risk measures (``/shared/spec/metrics.md``).

Every measure compares the original data X (n records) with its protected
version X′ record by record: row j of ``protected`` is the protected version of
row j of ``original`` (pass ``result.aligned_original()`` for methods that
reorder or suppress rows).  Everything is vectorised; nothing loops over records
in Python and nothing builds an n × n matrix.

>>> import pandas as pd
>>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0]})
>>> y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5]})
>>> sse(x, y, ["a"])
1.0
>>> record_linkage(x, y, ["a"])   # each x′ is tied between two originals
50.0
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError

#: Relative tolerance under which two distances count as a tie (metrics.md).
TIE_RTOL = 1e-12

#: Size of the random sample of original records used to reject far-away
#: protected records before the exact k-d tree search (see :func:`record_linkage`).
_PREFILTER_SAMPLE = 384

#: Below this many (record, original) pairs left after the prefilter, record linkage uses
#: exact BLAS-selected candidates instead of the k-d tree (faster in several dimensions).
_BRUTE_MAX_PAIRS = 20_000_000

#: Entries of a distance block in the brute-force (categorical) path.
_BLOCK_ENTRIES = 2_000_000

#: Categorical attributes without a semantic distance are one-hot embedded (exact for the
#: 0/1 distance) and searched with the k-d tree when the total dimension stays this small.
_MAX_EMBED_DIMS = 12

_METHOD_MEASURES: dict[str, list[Callable[..., dict]]] = {}

#: The ``kanon`` measure is computed only for methods whose release claims k-anonymity on
#: the k-quasi-identifiers (their spec's ``k_anonymous`` flag; for probabilistic
#: k-anonymity and t-closeness the released k-quasi values are not meant to form classes
#: of k, and the check would mislead).
from dpstudio.engine.registry import is_k_anonymous  # noqa: E402

SCALAR_KEYS = ("sse_raw", "sse_normalized", "rl", "corr_loss_mean", "corr_loss_std",
               "delta_mean_avg", "delta_var_avg")


# ---------------------------------------------------------------- helpers


def register_method_measures(method_id: str, fn: Callable[..., dict]) -> Callable[..., dict]:
    """Let a method add its own measures to :func:`evaluate`.

    ``fn(original, protected, result, measures, cache) -> dict`` is called by
    :func:`evaluate` when ``result is not None and result.method == method_id``;
    its keys are merged into the returned dict (scalar values are averaged by
    sweeps).  Registering the same function twice is a no-op.  Returns ``fn`` so
    that it can be used as a decorator factory argument.
    """
    fns = _METHOD_MEASURES.setdefault(str(method_id), [])
    if fn not in fns:
        fns.append(fn)
    return fn


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
                raise InputError(f"Duplicate column name(s) {', '.join(map(repr, dup))} in the {name} "
                                 "data: rename the columns so that they are unique.")
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

        raise InputError(f"Column {a!r} of the {which} data must be numeric; row(s) "
                         f"{format_rows(bad)} hold text. Give a distance for it or leave it out.")
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
    o = orig.astype(object).to_numpy()
    p = prot.astype(object).to_numpy()
    codes, uniq = pd.factorize(np.concatenate([o, p]), use_na_sentinel=False)
    n = len(o)
    co, cp = codes[:n], codes[n:]
    if fn is None:
        return (co != cp).astype(np.float64)
    k = len(uniq)
    pair = co.astype(np.int64) * k + cp
    up, inv = np.unique(pair, return_inverse=True)
    vals = np.asarray(uniq, dtype=object)
    d = _pair_distances(fn, vals[up // k], vals[up % k])
    return (d ** 2)[inv]


# --------------------------------------------------------------- SSE


def _matrix(df: pd.DataFrame, cols: list[str], which: str) -> np.ndarray:
    """Numeric columns as an (n, m) float64 array (one conversion when the dtypes allow)."""
    if not cols:
        return np.zeros((len(df), 0))
    dt = _dtypes(df)
    plain = [pd.api.types.is_numeric_dtype(t) and not isinstance(t, pd.api.extensions.ExtensionDtype)
             and not pd.api.types.is_bool_dtype(t) for t in dt.values()]
    if all(plain) and df.columns.is_unique and len(dt) <= 4 * len(cols):
        # one conversion of the whole (numeric) frame, then the wanted columns
        pos = [df.columns.get_loc(c) for c in cols]
        return np.ascontiguousarray(df.to_numpy(dtype=np.float64)[:, pos])
    out = np.empty((len(df), len(cols)))
    for i, a in enumerate(cols):
        t = dt[a]
        if pd.api.types.is_numeric_dtype(t) and not isinstance(t, pd.api.extensions.ExtensionDtype):
            out[:, i] = _col(df, a).to_numpy()
        else:
            out[:, i] = _numeric(df, a, which)
    return out


def _sse_both(original: pd.DataFrame, protected: pd.DataFrame, attrs: list[str],
              categorical_distance: dict | None, warns: list[str], cache: dict | None = None,
              normalized_warnings: bool = True) -> tuple[float, float]:
    """(raw SSE, normalized SSE) in one pass; the original's matrix and variances are cached."""
    n, m = len(original), len(attrs)
    odt, pdt = _dtypes(original), _dtypes(protected)
    num, other = [], []
    for a in attrs:
        if _distance_fn(categorical_distance, a) is None and _num_dtype(odt[a]) and (
                _num_dtype(pdt[a]) or _col(protected, a).isna().all()):
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
                _warn(warns, f"Attribute {a!r} is constant in the original data: its SSE is "
                             "not divided by its variance (scale 1).")
        sq = (ent["x"] - _matrix(protected, num, "protected")) ** 2
        nan = np.isnan(sq)
        if nan.any():
            for i in np.flatnonzero(nan.any(axis=0)):
                _warn(warns, f"Attribute {num[i]!r}: {int(nan[:, i].sum())} record(s) with a missing "
                             "value are left out of the SSE.")
            sq = np.where(nan, 0.0, sq)
        colsum = sq.sum(axis=0)
        raw += float(colsum.sum())
        norm += float((colsum / ent["var"]).sum())
    for a in other:
        fn = _distance_fn(categorical_distance, a)
        if fn is None:
            _warn(warns, f"Attribute {a!r} is not numeric and has no semantic distance: SSE "
                         "counts a changed category as distance 1.")
        sq = _categorical_sq(_col(original, a), _col(protected, a), fn)
        nan = np.isnan(sq)
        if nan.any():
            _warn(warns, f"Attribute {a!r}: {int(nan.sum())} record(s) with a missing value are "
                         "left out of the SSE.")
            sq = np.where(nan, 0.0, sq)
        raw += float(sq.sum())
        norm += float(sq.sum())
    return raw, norm / (n * m)


def sse(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str],
        scaling: str = "raw", *, categorical_distance: dict | None = None,
        warnings: list[str] | None = None, cache: dict | None = None) -> float:
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
    raw, norm = _sse_both(original, protected, attrs, categorical_distance, warns, cache,
                          normalized_warnings=scaling == "normalized")
    return raw if scaling == "raw" else norm


def _warn(warns: list[str], text: str) -> None:
    if text not in warns:
        warns.append(text)


# --------------------------------------------------------------- record linkage


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of a float matrix and the inverse index (rows compared bit for bit)."""
    a = np.ascontiguousarray(a)
    a = a + 0.0  # -0.0 -> 0.0 so that equal values have equal bits
    if a.shape[0] == 0:
        return a, np.zeros(0, dtype=np.int64)
    v = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    _, first, inv = np.unique(v, return_index=True, return_inverse=True)
    return a[first], inv.ravel()


def _scales(x: np.ndarray, attrs: list[str], distance: str, warns: list[str]) -> np.ndarray:
    if distance == "raw":
        return np.ones(x.shape[1])
    sd = np.nanstd(x, axis=0, ddof=1) if x.shape[0] > 1 else np.zeros(x.shape[1])
    bad = ~(sd > 0) | ~np.isfinite(sd)
    for i in np.flatnonzero(bad):
        _warn(warns, f"Attribute {attrs[i]!r} is constant in the original data: record linkage "
                     "does not standardise it (scale 1).")
    return np.where(bad, 1.0, sd)


def _own_distance(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    d = xs - ys
    return np.sqrt(np.einsum("ij,ij->i", d, d))


def _pr_by_candidates(xs: np.ndarray, yq: np.ndarray, d_own: np.ndarray) -> np.ndarray:
    """Exact Pr_j for the protected records ``yq`` (own distances ``d_own``) against all originals.

    Squared distances from the expansion |y|² + |x|² − 2 y·x (BLAS, row blocks) select a
    superset of the originals within d_min·(1 + 1e-12) (the margin exceeds the rounding
    error of the expansion); their distances are then recomputed exactly from the
    differences, and the nearest distance, the ties and whether x_j is among them are
    decided on those (x_j left out of the superset is farther than d_min·(1 + 1e-12)).
    """
    n = xs.shape[0]
    center = xs.mean(axis=0)
    xc = xs - center
    xn = np.einsum("ij,ij->i", xc, xc)
    xcT = np.ascontiguousarray(xc.T)
    out = np.zeros(yq.shape[0])
    r2 = (d_own * (1.0 + TIE_RTOL)) ** 2
    block = 64
    for lo in range(0, yq.shape[0], block):
        hi = min(lo + block, yq.shape[0])
        u = yq[lo:hi] - center
        un = np.einsum("ij,ij->i", u, u)
        d2 = (un[:, None] + xn[None, :]) - 2.0 * (u @ xcT)
        # a bound of the rounding error of the expansion, per row (generous)
        err = 1e-12 * (un + xn.max())
        # every original within d_min·(1 + 1e-12) has an estimate below this
        # (d_min ≤ the true distance of the estimated nearest ≤ its estimate + err)
        near = (d2.min(axis=1) + err) * (1.0 + TIE_RTOL) ** 2 + err
        lim = np.minimum(r2[lo:hi] + err, near)
        rows, cols = np.nonzero(d2 <= lim[:, None])
        diff = yq[lo + rows] - xs[cols]
        de = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        dmin = np.full(hi - lo, np.inf)
        np.minimum.at(dmin, rows, de)
        tie = de <= dmin[rows] * (1.0 + TIE_RTOL)
        cnt = np.bincount(rows[tie], minlength=hi - lo)
        linked = d_own[lo:hi] <= dmin * (1.0 + TIE_RTOL)
        out[lo:hi] = np.where(linked, 1.0 / np.maximum(cnt, 1), 0.0)
    return out


def _sample_bound(u: np.ndarray, xsamp: np.ndarray) -> np.ndarray:
    """Exact distance from each row of ``u`` to its (estimated) nearest row of ``xsamp``:
    an upper bound of its nearest distance to the originals."""
    center = xsamp.mean(axis=0)
    xsc = xsamp - center
    xn = np.einsum("ij,ij->i", xsc, xsc)
    xscT = np.ascontiguousarray(xsc.T)
    # small row blocks: OpenBLAS multithreads larger products, which only costs
    # (thread start-up and spinning) at these sizes
    block = 64
    best = np.empty(u.shape[0], dtype=np.int64)
    for lo in range(0, u.shape[0], block):
        uu = u[lo:lo + block] - center
        d2 = (np.einsum("ij,ij->i", uu, uu)[:, None] + xn[None, :]) - 2.0 * (uu @ xscT)
        best[lo:lo + block] = np.argmin(d2, axis=1)
    return _own_distance(u, xsamp[best])


def _rl_numeric(xs: np.ndarray, ys: np.ndarray, tree, *, workers: int | None = None) -> np.ndarray:
    """Pr_j for every record, numeric attributes (k-d tree on the original).

    1. Deduplicate the protected rows (microaggregated releases repeat centroids).
    2. Prefilter: the distance from each distinct protected row to a fixed random
       sample of originals is an upper bound of its nearest distance; records whose
       own original is farther than that bound are certainly not linked (Pr = 0).
       This removes the protected records far from the data (strong noise), for
       which a k-d tree search degenerates in several dimensions.
    3. For the rest, count the originals within d(x_j, x′_j)·(1 + 1e-12): a count of 1
       means G_j = {x_j}.  Otherwise the exact nearest distance d_min decides (linked iff
       d(x_j, x′_j) ≤ d_min·(1 + 1e-12)) and |G_j| = the count within d_min·(1 + 1e-12).
    """
    n = xs.shape[0]
    if workers is None:  # threads pay off only for many queries (start-up cost, shared cores)
        workers = -1 if n >= 20_000 else 1
    pr = np.zeros(n)
    ok = np.isfinite(ys).all(axis=1)
    if not ok.any():
        return pr
    idx_ok = np.flatnonzero(ok)
    d_own = _own_distance(xs[idx_ok], ys[idx_ok])
    uniq, inv = _unique_rows(ys[idx_ok])
    nu = uniq.shape[0]

    # --- 2. prefilter against samples of originals (BLAS, blockwise): 64 originals for
    # every distinct protected row, then 384 for the rows still undecided
    slack = (1.0 + TIE_RTOL) * (1.0 + 1e-9)
    perm = np.random.default_rng(0).permutation(n)[:_PREFILTER_SAMPLE]
    stages = (perm[:64], perm) if perm.size > 64 else (perm,)
    bound = np.full(nu, np.inf)
    rows = np.arange(nu)
    for smp in stages:
        if rows.size == 0:
            break
        bound[rows] = np.minimum(bound[rows], _sample_bound(uniq[rows], xs[smp]))
        need = np.zeros(nu, dtype=bool)
        need[inv[d_own <= bound[inv] * slack]] = True
        rows = np.flatnonzero(need)
    undecided_rec = d_own <= bound[inv] * slack
    if not undecided_rec.any():
        return pr
    need = np.zeros(nu, dtype=bool)
    need[inv[undecided_rec]] = True
    uq = np.flatnonzero(need)
    rec = np.flatnonzero(undecided_rec)
    if rec.size * n <= _BRUTE_MAX_PAIRS:
        # few pairs: exact distances from BLAS candidates beat a k-d tree in several dimensions
        pr[idx_ok[rec]] = _pr_by_candidates(xs, ys[idx_ok[rec]], d_own[rec])
        return pr
    if uq.size > 2000:
        # A cheap approximate search ((1+eps)-nearest: its distance is still the
        # distance to a real original, hence an upper bound of d_min) rejects most
        # of the remaining unlinked records when protected records lie between the
        # originals (moderate noise in several dimensions).  Tried on a subsample
        # first: with small noise it would only repeat the exact search.
        probe = uq[np.linspace(0, uq.size - 1, 400).astype(np.int64)]
        dap, _ = tree.query(uniq[probe], k=1, eps=2.0, workers=workers)
        rec_probe = np.isin(inv, probe) & undecided_rec
        b2 = bound.copy()
        b2[probe] = np.minimum(b2[probe], dap)
        rejected = rec_probe & ~(d_own <= b2[inv] * slack)
        if rejected.sum() > 0.1 * max(rec_probe.sum(), 1):
            dap, _ = tree.query(uniq[uq], k=1, eps=2.0, workers=workers)
            bound[uq] = np.minimum(bound[uq], dap)
            undecided_rec &= d_own <= bound[inv] * slack
            need[:] = False
            need[inv[undecided_rec]] = True
            uq = np.flatnonzero(need)
            if uq.size == 0:
                return pr

    # --- 3. count the originals within d(x_j, x'_j)·(1 + 1e-12) of each remaining record:
    # a count of 1 (x_j itself) means x_j is the only nearest original (Pr = 1); only the
    # records with more originals in that ball need the exact nearest distance and a
    # tie count.  (One ball count per record instead of a nearest search plus a ball
    # count: the two cost about the same in a k-d tree.)
    rec = np.flatnonzero(undecided_rec)
    own_r = d_own[rec] * (1.0 + TIE_RTOL)
    cnt = np.asarray(tree.query_ball_point(ys[idx_ok[rec]], own_r, return_length=True,
                                           workers=workers), dtype=np.int64)
    single = cnt <= 1
    pr[idx_ok[rec[single]]] = 1.0
    multi = rec[~single]
    if multi.size == 0:
        return pr
    mu, minv = np.unique(inv[multi], return_inverse=True)
    dq, _ = tree.query(uniq[mu], k=1, workers=workers)
    thr = dq[minv] * (1.0 + TIE_RTOL)
    is_linked = d_own[multi] <= thr
    linked = multi[is_linked]
    if linked.size == 0:
        return pr
    lu_idx = np.unique(minv[is_linked])
    counts_u = np.ones(mu.size, dtype=np.int64)
    counts_u[lu_idx] = tree.query_ball_point(uniq[mu[lu_idx]], dq[lu_idx] * (1.0 + TIE_RTOL),
                                             return_length=True, workers=workers)
    counts = np.ones(nu, dtype=np.int64)
    counts[mu] = counts_u
    c = np.maximum(counts[inv[linked]], 1)
    pr[idx_ok[linked]] = 1.0 / c
    return pr


def _rl_bruteforce(xnum: np.ndarray, ynum: np.ndarray, ocat: list[np.ndarray], pcat: list[np.ndarray],
                   dcat: list[np.ndarray]) -> np.ndarray:
    """Pr_j with categorical attributes: blockwise exact distances (never n × n at once).

    ``ocat``/``pcat`` are integer codes into the square matrix of squared distances ``dcat``.
    """
    n = xnum.shape[0]
    prot = np.column_stack([ynum] + [c.astype(np.float64)[:, None] for c in pcat]) if pcat else ynum
    ok = np.isfinite(prot).all(axis=1) if prot.size else np.ones(n, dtype=bool)
    pr = np.zeros(n)
    idx_ok = np.flatnonzero(ok)
    if idx_ok.size == 0:
        return pr
    uniq, inv = _unique_rows(prot[idx_ok])
    mnum = xnum.shape[1]
    # own squared distance
    d_own2 = np.zeros(idx_ok.size)
    if mnum:
        diff = xnum[idx_ok] - ynum[idx_ok]
        d_own2 += np.einsum("ij,ij->i", diff, diff)
    for oc, pc, dm in zip(ocat, pcat, dcat):
        d_own2 += dm[oc[idx_ok], pc[idx_ok]]
    nu = uniq.shape[0]
    dmin2 = np.empty(nu)
    cnt = np.empty(nu, dtype=np.int64)
    block = max(1, _BLOCK_ENTRIES // max(n, 1))
    for lo in range(0, nu, block):
        u = uniq[lo:lo + block]
        d2 = np.zeros((u.shape[0], n))
        for i in range(mnum):
            d2 += (u[:, i][:, None] - xnum[None, :, i]) ** 2
        for ci, (oc, dm) in enumerate(zip(ocat, dcat)):
            uc = u[:, mnum + ci].astype(np.int64)
            d2 += dm[uc[:, None], oc[None, :]]
        mn = d2.min(axis=1)
        dmin2[lo:lo + block] = mn
        cnt[lo:lo + block] = (d2 <= (mn * (1.0 + TIE_RTOL) ** 2)[:, None]).sum(axis=1)
    thr = dmin2[inv] * (1.0 + TIE_RTOL) ** 2
    linked = d_own2 <= thr
    pr[idx_ok[linked]] = 1.0 / np.maximum(cnt[inv[linked]], 1)
    return pr


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


def record_linkage(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str],
                   distance: str = "standardized", cache: dict | None = None, *,
                   categorical_distance: dict | None = None, warnings: list[str] | None = None,
                   return_probabilities: bool = False):
    """Distance-based record linkage RL, in percent (metrics.md).

    For each protected record x′_j, G_j is the set of original records at minimum
    distance (ties: relative tolerance 1e-12); ``Pr_j = 1/|G_j|`` if x_j ∈ G_j,
    else 0; ``RL = 100 · Σ Pr_j / n``.  Distance: Euclidean on attributes divided by
    the original's sample standard deviation (``'standardized'``) or ``'raw'``;
    categorical attributes add the squared semantic distance (callable in
    ``categorical_distance[col]``) or a 0/1 mismatch.  Numeric data use a k-d tree
    (sub-quadratic); categorical data an exact blockwise search.  Protected records
    with missing values are counted as not linked.  ``cache`` (a dict reused over
    a sweep) keeps the tree and the scaling of the original.

    >>> import pandas as pd
    >>> x = pd.DataFrame({"a": [0.0, 1.0, 5.0]})
    >>> record_linkage(x, x, ["a"])
    100.0
    """
    from scipy.spatial import cKDTree

    attrs = _check_pair(original, protected, attributes)
    if distance not in ("standardized", "raw"):
        raise ParameterError(f"Record-linkage distance must be 'standardized' or 'raw'. Got {distance!r}.")
    warns = warnings if warnings is not None else []
    n = len(original)
    num, cat = [], []
    odt = _dtypes(original)
    for a in attrs:
        if _distance_fn(categorical_distance, a) is None and _num_dtype(odt[a]):
            num.append(a)
        else:
            cat.append(a)
    ent = _cache_entry(cache, original, ("rl", tuple(num), distance))
    if "xs" not in ent:
        x = _matrix(original, num, "original")
        nan_rows = np.flatnonzero((~np.isfinite(x)).any(axis=1))
        if nan_rows.size:
            from dpstudio.engine.errors import format_rows

            raise InputError(f"The original data have missing or infinite values in row(s) {format_rows(nan_rows)}: "
                             "record linkage needs complete original records.")
        sw: list[str] = []
        sc = _scales(x, num, distance, sw)
        ent["scale"], ent["xs"], ent["scale_warnings"] = sc, np.ascontiguousarray(x / sc), sw
    for w in ent["scale_warnings"]:
        _warn(warns, w)
    xs = ent["xs"]
    y = _matrix(protected, num, "protected")
    ys = np.ascontiguousarray(y / ent["scale"])
    nan_p = int((~np.isfinite(ys)).any(axis=1).sum())
    if cat:
        ocat, pcat, dcat = [], [], []
        for a in cat:
            fn = _distance_fn(categorical_distance, a)
            if fn is None:
                _warn(warns, f"Attribute {a!r} is not numeric and has no semantic distance: record "
                             "linkage counts a changed category as distance 1.")
            o = _col(original, a).astype(object).to_numpy()
            p = _col(protected, a).astype(object).to_numpy()
            codes, uniq = pd.factorize(np.concatenate([o, p]), use_na_sentinel=False)
            k = len(uniq)
            if fn is None:
                dm = 1.0 - np.eye(k)
            else:
                vals = np.asarray(uniq, dtype=object)
                ii, jj = np.divmod(np.arange(k * k), k)
                dm = _pair_distances(fn, vals[ii], vals[jj]).reshape(k, k) ** 2
            ocat.append(codes[:n].astype(np.int64))
            pcat.append(codes[n:].astype(np.int64))
            dcat.append(dm)
        ncat_dims = sum(d.shape[0] for d in dcat)
        plain = all(_distance_fn(categorical_distance, a) is None for a in cat)
        if plain and xs.shape[1] + ncat_dims <= _MAX_EMBED_DIMS:
            # 0/1 mismatch = squared Euclidean distance of one-hot codes scaled by 1/√2:
            # exact, and the k-d tree path applies
            h = 1.0 / math.sqrt(2.0)
            xo = [xs] + [np.eye(d.shape[0])[oc] * h for oc, d in zip(ocat, dcat)]
            yo = [ys] + [np.eye(d.shape[0])[pc] * h for pc, d in zip(pcat, dcat)]
            xe = np.ascontiguousarray(np.column_stack(xo))
            pr = _rl_numeric(xe, np.ascontiguousarray(np.column_stack(yo)),
                             cKDTree(xe, balanced_tree=False, compact_nodes=False))
        else:
            pr = _rl_bruteforce(xs, ys, ocat, pcat, dcat)
    else:
        if "tree" not in ent:
            ent["tree"] = cKDTree(xs, balanced_tree=False, compact_nodes=False) if num else None
        pr = _rl_numeric(xs, ys, ent["tree"])
    if nan_p:
        _warn(warns, f"{nan_p} protected record(s) have missing or infinite values and count as not linked.")
    rl = 100.0 * float(pr.sum()) / n
    return (rl, pr) if return_probabilities else rl


# --------------------------------------------------------------- statistics


def delta_stats(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str],
                warnings: list[str] | None = None) -> dict[str, dict[str, float]]:
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
        for out, th, th2, label in ((dm, np.nanmean(x), np.nanmean(y), "mean"),
                                    (dv, np.nanvar(x, ddof=1), np.nanvar(y, ddof=1), "variance")):
            if th == 0 or not np.isfinite(th):
                _warn(warns, f"Attribute {a!r} has original {label} 0: its relative Δ {label} "
                             "is undefined.")
                out[a] = float("nan")
            else:
                out[a] = float(abs(th2 - th) / abs(th))
    return {"delta_mean": dm, "delta_var": dv}


def correlation_loss(original: pd.DataFrame, protected: pd.DataFrame, confidential: Iterable[str],
                     attributes: Iterable[str], warnings: list[str] | None = None) -> tuple[float, float]:
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
        _warn(warns, f"{int(bad.sum())} attribute pair(s) with a constant attribute have no "
                     "correlation and are left out of the correlation loss.")
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


def k_anonymity_check(protected: pd.DataFrame, k_quasis: Iterable[str], k: int) -> dict[str, float]:
    """Smallest equivalence class on ``k_quasis`` and the share of records in classes < k.

    >>> import pandas as pd
    >>> k_anonymity_check(pd.DataFrame({"a": [1, 1, 2]}), ["a"], 2)["share_below_k"]
    0.3333333333333333
    """
    q = [str(c) for c in k_quasis]
    n = len(protected)
    if not q or n == 0:
        return {"min_class_size": n, "classes": 1 if n else 0, "records_below_k": 0, "share_below_k": 0.0}
    codes = np.zeros(n, dtype=np.int64)
    for c in q:
        cc, uniq = pd.factorize(_col(protected, c), use_na_sentinel=False)
        codes = codes * (len(uniq) + 1) + cc
        codes = pd.factorize(codes)[0].astype(np.int64)
    sizes = np.bincount(codes)
    per_rec = sizes[codes]
    below = int((per_rec < int(k)).sum())
    return {"min_class_size": int(sizes.min()), "classes": int(sizes.size),
            "records_below_k": below, "share_below_k": below / n}


# --------------------------------------------------------------- evaluate


def evaluate(original: pd.DataFrame, protected: pd.DataFrame, attributes: Iterable[str] | None = None,
             *, measures: Iterable[str] = ("sse", "rl", "delta", "corr"), result: Any = None,
             cache: dict | None = None, confidential: Iterable[str] | None = None,
             rl_distance: str = "standardized", **opts: Any) -> dict:
    """All requested measures in one flat dict.

    Keys: ``sse_raw``, ``sse_normalized`` (measure ``sse``); ``rl`` (``rl``);
    ``delta_mean``/``delta_var`` ({attr: value}) and ``delta_mean_avg``/``delta_var_avg``
    (``delta``); ``corr_loss_mean``/``corr_loss_std`` (``corr``, when confidential
    attributes are known); ``k_min_class_size``/``k_share_below`` (``kanon``, with a
    ``result`` that has k-quasis and k); plus method-specific measures (see
    :func:`register_method_measures`); ``warnings`` (list of str).  Sweeps average
    the scalar keys.

    ``attributes`` default: ``result.protected_attributes`` or the common numeric
    columns.  ``confidential`` default: the result's confidential columns.
    ``opts``: ``categorical_distance`` = {col: callable}.
    """
    measures = tuple(measures)
    known = {"sse", "rl", "delta", "corr", "kanon"}
    unknown = [m for m in measures if m not in known]
    # unknown names may be method-specific measures: only refuse when no method hook exists
    if unknown and not (result is not None and getattr(result, "method", None) in _METHOD_MEASURES):
        raise ParameterError(f"Unknown measure(s) {', '.join(map(repr, unknown))}. "
                             f"Known: {', '.join(sorted(known))}.")
    cat_dist = opts.pop("categorical_distance", None)
    if opts:
        raise ParameterError(f"Unknown evaluation option(s): {', '.join(sorted(opts))}.")
    if attributes is None:
        if result is not None and getattr(result, "protected_attributes", None):
            attributes = list(result.protected_attributes)
        else:
            pcols = {str(c) for c in protected.columns}
            attributes = [str(c) for c in original.columns
                          if str(c) in pcols and _is_numeric(_col(original, str(c)))]
    attrs = _check_pair(original, protected, attributes)
    warns: list[str] = []
    out: dict[str, Any] = {}
    if "sse" in measures:
        out["sse_raw"], out["sse_normalized"] = _sse_both(original, protected, attrs, cat_dist,
                                                          warns, cache)
    if "rl" in measures:
        out["rl"] = record_linkage(original, protected, attrs, rl_distance, cache,
                                   categorical_distance=cat_dist, warnings=warns)
    if "delta" in measures:
        ds = delta_stats(original, protected, attrs, warnings=warns)
        out.update(ds)
        for key in ("delta_mean", "delta_var"):
            vals = [v for v in ds[key].values() if np.isfinite(v)]
            out[f"{key}_avg"] = float(np.mean(vals)) if vals else float("nan")
    if "corr" in measures:
        if confidential is None and result is not None:
            confidential = [c for c, r in getattr(result, "roles", {}).items()
                            if str(getattr(r, "value", r)) == "confidential"]
        conf = [c for c in (confidential or []) if c in original.columns and c in protected.columns]
        if conf:
            mean, std = correlation_loss(original, protected, conf, attrs, warnings=warns)
            out["corr_loss_mean"], out["corr_loss_std"] = mean, std
    if "kanon" in measures and result is not None and \
            is_k_anonymous(getattr(result, "method", None)):
        kq = [c for c, r in getattr(result, "roles", {}).items()
              if str(getattr(r, "value", r)) == "k-quasi" and c in protected.columns]
        k = (getattr(result, "params", {}) or {}).get("k")
        if kq and k:
            chk = k_anonymity_check(protected, kq, int(k))
            out["k_min_class_size"] = chk["min_class_size"]
            out["k_share_below"] = chk["share_below_k"]
    if result is not None:
        for fn in _METHOD_MEASURES.get(getattr(result, "method", None), []):
            extra = fn(original, protected, result, measures, cache)
            if extra:
                out.update(extra)
    out["warnings"] = warns
    return out


__all__ = ["sse", "record_linkage", "delta_stats", "correlation_loss", "score",
           "k_anonymity_check", "evaluate", "register_method_measures", "TIE_RTOL"]
