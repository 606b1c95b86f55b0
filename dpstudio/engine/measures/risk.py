"""Disclosure risk by distance-based record linkage (docs/measures.md "Record linkage").

>>> import pandas as pd
>>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0]})
>>> y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5]})
>>> record_linkage(x, y, ["a"])   # each x′ is tied between two originals
50.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.measures._base import (
    _cache_entry,
    _check_pair,
    _col,
    _distance_fn,
    _dtypes,
    _matrix,
    _num_dtype,
    _pair_distances,
    _warn,
)

#: Relative tolerance under which two distances count as a tie (docs/measures.md).
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


# --------------------------------------------------------------- record linkage


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of a float matrix and the inverse index (rows compared bit for bit)."""
    a = np.ascontiguousarray(a)
    a = a + 0.0  # -0.0 -> 0.0 so that equal values have equal bits
    if a.shape[0] == 0:
        return a, np.zeros(0, dtype=np.int64)
    if a.shape[1]:
        # all rows distinct (the usual case for noisy releases)?  Distinct values of a fixed
        # linear form prove it at the cost of one product and a sort of n numbers
        w = 1.0 + np.sqrt(np.arange(2.0, a.shape[1] + 2.0))
        h = np.sort(a @ w)
        if h.size < 2 or (np.isfinite(h).all() and bool((h[1:] != h[:-1]).all())):
            return a, np.arange(a.shape[0])
    v = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    _, first, inv = np.unique(v, return_index=True, return_inverse=True)
    return a[first], inv.ravel()


def _scales(x: np.ndarray, attrs: list[str], distance: str, warns: list[str]) -> np.ndarray:
    if distance == "raw":
        return np.ones(x.shape[1])
    sd = np.nanstd(x, axis=0, ddof=1) if x.shape[0] > 1 else np.zeros(x.shape[1])
    bad = ~(sd > 0) | ~np.isfinite(sd)
    for i in np.flatnonzero(bad):
        _warn(
            warns,
            f"Attribute {attrs[i]!r} is constant in the original data: record linkage "
            "does not standardise it (scale 1).",
        )
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
    center = xs.mean(axis=0)
    xc = xs - center
    xn = np.einsum("ij,ij->i", xc, xc)
    xcT2 = np.ascontiguousarray(-2.0 * xc.T)  # exact (a power of two)
    xnmax = xn.max()
    out = np.zeros(yq.shape[0])
    r2 = (d_own * (1.0 + TIE_RTOL)) ** 2
    block = 64
    for lo in range(0, yq.shape[0], block):
        hi = min(lo + block, yq.shape[0])
        u = yq[lo:hi] - center
        un = np.einsum("ij,ij->i", u, u)
        # g + |u|² = |x|² − 2 u·x + |u|² estimates the squared distance (fewer passes
        # over the block than forming it)
        g = u @ xcT2
        g += xn
        # a bound of the rounding error of the expansion, per row (generous)
        err = 1e-12 * (un + xnmax)
        # every original within d_min·(1 + 1e-12) has an estimate below this
        # (d_min ≤ the true distance of the estimated nearest ≤ its estimate + err)
        near = (g.min(axis=1) + un + err) * (1.0 + TIE_RTOL) ** 2 + err
        lim = np.minimum(r2[lo:hi] + err, near) - un + err
        rows, cols = np.nonzero(g <= lim[:, None])
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
    an upper bound of its nearest distance to the originals.
    """
    center = xsamp.mean(axis=0)
    xsc = xsamp - center
    xn = np.einsum("ij,ij->i", xsc, xsc)
    xscT = np.ascontiguousarray(xsc.T)
    # small row blocks: OpenBLAS multithreads larger products, which only costs
    # (thread start-up and spinning) at these sizes
    block = 64
    best = np.empty(u.shape[0], dtype=np.int64)
    for lo in range(0, u.shape[0], block):
        uu = u[lo : lo + block] - center
        d2 = (np.einsum("ij,ij->i", uu, uu)[:, None] + xn[None, :]) - 2.0 * (uu @ xscT)
        best[lo : lo + block] = np.argmin(d2, axis=1)
    return _own_distance(u, xsamp[best])


#: Originals kept in each original's neighbour list for the compiled classifier (beyond it
#: the classifier scans every original); the list costs 12 bytes per entry.
_NEIGHBOURS = 512

#: Up to this many originals the neighbour lists hold every original (at most 28 MB): a
#: record whose 2r-ball holds more than :data:`_NEIGHBOURS` originals (moderate noise in a
#: dense part of the data: a Census sweep's ε = 10 cells) then never goes on to the full
#: scan, which would visit the listed originals a second time.
_FULL_LISTS_MAX_N = 1536

#: The compiled classifier is used for at most this many originals (its neighbour lists are
#: built from all n² distances).
_KERNEL_MAX_N = 20_000

_KERNEL: list = []  # [module or None], filled on first use
_NUMPY_SECONDS = [0.0]  # time this process has spent in the numpy bulk search (sweeps)
_KERNEL_LOAD_S = 0.5  # importing numba and loading the cached classifier (measured 0.5–1.4 s)


def _rl_kernel():
    """The numba classifier module (:mod:`._rl_kernel`), or None when numba is unavailable
    or ``DPSTUDIO_RL_NUMPY=1`` asks for the pure-numpy path (imported lazily: numba costs
    about half a second to import).
    """
    from dpstudio.engine._kernels import load_kernel

    return load_kernel(_KERNEL, "dpstudio.engine.measures._rl_kernel", "DPSTUDIO_RL_NUMPY")


def _pr_classified(xs: np.ndarray, ys: np.ndarray, jidx: np.ndarray, cache: dict | None = None):
    """Pr_j of the protected records ``ys`` whose originals are ``xs[jidx]``, or None when the
    compiled classifier is unavailable (numba missing) or ``xs`` is too large for it.

    Exactly :func:`_rl_numeric`'s Pr_j: the classifier (see :mod:`._rl_kernel`) settles only
    the records whose answer is 1 or 0 with a relative margin of 1e-9 on every distance
    involved; every other record (ties, duplicates, anything within the margin) goes through
    :func:`_pr_by_candidates`, the exact search with today's formula.  Records with a
    missing or infinite value: 0.  ``cache`` (a dict reused over a sweep, for the same
    ``xs`` object) keeps the neighbour lists.
    """
    n = xs.shape[0]
    if n == 0 or n > _KERNEL_MAX_N:
        return None
    if not _KERNEL and _NUMPY_SECONDS[0] < _KERNEL_LOAD_S:
        # tiered, results identical either way: numba is loaded only once this process has
        # spent its load time in the numpy search (a short sweep does not pay for it)
        return None
    kernel = _rl_kernel()
    if kernel is None:
        return None
    ent = cache if cache is not None else {}
    if ent.get("rl.nbr.xs") is not xs:
        ent["rl.nbr"] = kernel.neighbours(xs, n if n <= _FULL_LISTS_MAX_N else min(n, _NEIGHBOURS))
        ent["rl.nbr.xs"] = xs
    nbr, nd2 = ent["rl.nbr"]
    if np.isfinite(ys).all():  # the usual case: no subset to gather
        ok = None
        yo = np.ascontiguousarray(ys)
        jo = np.ascontiguousarray(jidx, dtype=np.int64)
    else:
        ok = np.flatnonzero(np.isfinite(ys).all(axis=1))
        if ok.size == 0:
            return np.zeros(ys.shape[0])
        yo = np.ascontiguousarray(ys[ok])
        jo = np.ascontiguousarray(jidx[ok], dtype=np.int64)
    status = np.empty(yo.shape[0], dtype=np.int8)
    # the own distances are summed in the kernel (its margins cover the rounding); the exact
    # search below gets _rl_numeric's own distances, computed for its records only
    kernel.classify(np.ascontiguousarray(xs), yo, jo, nbr, nd2, TIE_RTOL, status)
    pro = (status == 1).astype(np.float64)
    amb = np.flatnonzero(status < 0)
    if amb.size:
        pro[amb] = _pr_by_candidates(xs, yo[amb], _own_distance(xs[jo[amb]], yo[amb]))
    if ok is None:
        return pro
    pr = np.zeros(ys.shape[0])
    pr[ok] = pro
    return pr


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
        yq, dq = ys[idx_ok[rec]], d_own[rec]
        pr[idx_ok[rec]] = _pr_by_candidates(xs, yq, dq)
        return pr
    if callable(tree) and not hasattr(tree, "query"):
        tree = tree()  # built lazily: small data never need it (nor the scipy import)
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
    cnt = np.asarray(
        tree.query_ball_point(ys[idx_ok[rec]], own_r, return_length=True, workers=workers), dtype=np.int64
    )
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
    counts_u[lu_idx] = tree.query_ball_point(
        uniq[mu[lu_idx]], dq[lu_idx] * (1.0 + TIE_RTOL), return_length=True, workers=workers
    )
    counts = np.ones(nu, dtype=np.int64)
    counts[mu] = counts_u
    c = np.maximum(counts[inv[linked]], 1)
    pr[idx_ok[linked]] = 1.0 / c
    return pr


def _rl_bruteforce(
    xnum: np.ndarray, ynum: np.ndarray, ocat: list[np.ndarray], pcat: list[np.ndarray], dcat: list[np.ndarray]
) -> np.ndarray:
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
        u = uniq[lo : lo + block]
        d2 = np.zeros((u.shape[0], n))
        for i in range(mnum):
            d2 += (u[:, i][:, None] - xnum[None, :, i]) ** 2
        for ci, (oc, dm) in enumerate(zip(ocat, dcat)):
            uc = u[:, mnum + ci].astype(np.int64)
            d2 += dm[uc[:, None], oc[None, :]]
        mn = d2.min(axis=1)
        dmin2[lo : lo + block] = mn
        cnt[lo : lo + block] = (d2 <= (mn * (1.0 + TIE_RTOL) ** 2)[:, None]).sum(axis=1)
    thr = dmin2[inv] * (1.0 + TIE_RTOL) ** 2
    linked = d_own2 <= thr
    pr[idx_ok[linked]] = 1.0 / np.maximum(cnt[inv[linked]], 1)
    return pr


def _kdtree(x: np.ndarray):
    from scipy.spatial import cKDTree  # imported when needed (a third of a second)

    return cKDTree(x, balanced_tree=False, compact_nodes=False)


def record_linkage(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attributes: Iterable[str],
    distance: str = "standardized",
    cache: dict | None = None,
    *,
    categorical_distance: dict | None = None,
    warnings: list[str] | None = None,
    return_probabilities: bool = False,
):
    """Distance-based record linkage RL, in percent (docs/measures.md).

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

            raise InputError(
                f"The original data have missing or infinite values in row(s) {format_rows(nan_rows)}: "
                "record linkage needs complete original records."
            )
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
                _warn(
                    warns,
                    f"Attribute {a!r} is not numeric and has no semantic distance: record "
                    "linkage counts a changed category as distance 1.",
                )
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
            pr = _rl_numeric(xe, np.ascontiguousarray(np.column_stack(yo)), lambda: _kdtree(xe))
        else:
            pr = _rl_bruteforce(xs, ys, ocat, pcat, dcat)
    else:

        def tree():
            if ent.get("tree") is None:
                ent["tree"] = _kdtree(xs)
            return ent["tree"]

        pr = _rl_numeric(xs, ys, tree if num else None)
    if nan_p:
        _warn(warns, f"{nan_p} protected record(s) have missing or infinite values and count as not linked.")
    rl = 100.0 * float(pr.sum()) / n
    return (rl, pr) if return_probabilities else rl


__all__ = ["record_linkage", "TIE_RTOL"]
