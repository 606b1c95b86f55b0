"""Measuring many releases of one original (a sweep's runs, a chain's steps): :class:`Measurer`.

A sweep measures hundreds of releases of the same original data.  The measurement plan
(:func:`~dpstudio.engine.measures.measurement_plan`) is made once; the original's derived
arrays (its matrix and variances for SSE, its scaled matrix and k-d tree for record linkage)
stay in the measures' cache; and once the first release went through
:func:`~dpstudio.engine.measures.evaluate`, the SSE and record linkage of every further
all-numeric release are computed straight from arrays -- the same operations, in the same
order, on the same cached arrays as ``evaluate`` (so the same bits), without its pandas
bookkeeping.  The bulk path measures R releases given as one (R, n, m) array (ir-dp's bulk
draws).  This module owns that fast path and the layout of the cache it reads (the keys
``_base._cache_entry`` writes): no caller outside ``measures`` needs to know either.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dpstudio.engine.errors import DPStudioError
from dpstudio.engine.measures import MeasurePlan, evaluate


class Measurer:
    """Measures releases of one ``original`` (the prepared records, in input order) with
    ``measures`` by ``plan``; ``evaluate_options`` go to :func:`evaluate` (e.g.
    ``{"rl_distance": "raw"}``).  :meth:`measure` takes a result, :meth:`measure_bulk` an
    array of R releases; both give the dicts ``evaluate`` would.
    """

    def __init__(
        self,
        original,
        *,
        measures,
        plan: MeasurePlan | None = None,
        evaluate_options: dict | None = None,
    ) -> None:
        self.original = original
        self.measures = tuple(measures)
        self.plan = plan
        self.evaluate_options = dict(evaluate_options or {})
        #: the measures' cache (the original's arrays, k-d tree) and the fast path's plan
        self.cache: dict = {}

    def measure(self, result, *, attributes=None) -> dict:
        """The measures of ``result`` (its records aligned with the original)."""
        orig, prot = aligned(result, len(self.original))
        fast = _fast_eval(orig, prot, self.measures, self.cache)
        if fast is not None:
            return fast
        ev = evaluate(
            orig,
            prot,
            result.protected_attributes if attributes is None else attributes,
            measures=self.measures,
            result=result,
            cache=self.cache,
            plan=self.plan,
            **self.evaluate_options,
        )
        if orig is self.original and self.plan is not None:  # the same original for every run
            _plan_fast_eval(orig, result, self.measures, self.plan, self.cache, self.evaluate_options, ev)
        return ev

    @property
    def bulk_ready(self) -> bool:
        """Whether :meth:`measure_bulk` can measure (the first release went through
        ``evaluate`` and showed the fast path applies).
        """
        return _fast_ready(self.original, self.measures, self.cache)

    def measure_bulk(self, cols: list[str], Y: np.ndarray) -> list[dict] | None:
        """The measures of R releases of the columns ``cols`` given as an (R, n, m) array, in
        input order; None when the fast path does not apply (measure them one by one).
        """
        return _fast_eval_bulk(self.original, cols, Y, self.measures, self.cache)


def aligned(res, n: int):
    """(original, protected) row-aligned for the measures.  A shuffled release (row_map a
    permutation of all records) is put back in input order, so the original stays the same
    object across runs and the measures' cache (k-d tree, scaling) is reused; all measures
    are sums or means over records, unchanged by a joint permutation.  Releases that drop
    records (suppression) use the original rows that were released.
    """
    rm = res.row_map
    if rm is None:
        return res.original, res.data
    if len(rm) == n:
        inv = np.empty(n, dtype=np.int64)
        inv[rm] = np.arange(n)
        if np.array_equal(np.sort(rm), np.arange(n)):
            return res.original, res.data.iloc[inv].reset_index(drop=True)
    return res.aligned_original(), res.data


def _fast_ready(orig, measures, mcache: dict) -> bool:
    fp = mcache.get(("sweep.fast", id(orig)))
    return fp is not None and fp["ref"] is orig and tuple(measures) == fp["measures"]


def _fast_eval_bulk(orig, cols: list[str], Y: np.ndarray, measures, mcache: dict) -> list[dict] | None:
    """:func:`_fast_eval` of R releases given as an (R, n, m) array of the columns ``cols``."""
    fp = mcache.get(("sweep.fast", id(orig)))
    if fp is None or fp["ref"] is not orig or tuple(measures) != fp["measures"]:
        return None
    attrs = fp["attrs"]
    R, n, _ = Y.shape
    if n != len(orig) or sorted(map(str, cols)) != sorted(attrs) or len(cols) != len(attrs):
        return None
    pos = [list(map(str, cols)).index(a) for a in attrs]
    if pos != list(range(len(pos))):
        Y = np.ascontiguousarray(Y[:, :, pos])
    if not np.isfinite(Y).all():
        return None
    outs: list[dict[str, Any]] = [{} for _ in range(R)]
    scratch = fp.setdefault("scratch", {})  # the cells' temporaries, reused (same shapes: same sums)
    if fp["sse"] is not None:
        x, var = fp["sse"]
        for o, (raw, norm) in zip(outs, _sse_bulk(x, var, Y, scratch)):
            o["sse_raw"], o["sse_normalized"] = raw, norm
    if fp["rl"] is not None:
        scale, xs, tree = fp["rl"]
        YS = np.divide(Y, scale, out=_scratch(scratch, "rl", Y.shape))  # Y / scale, as evaluate
        pr = _rl_numeric_bulk(xs, YS, tree, fp.setdefault("rl.cache", {}))
        for r in range(R):
            outs[r]["rl"] = 100.0 * float(pr[r].sum()) / n
    for o in outs:
        o["warnings"] = []
    return outs


#: largest scratch buffer a :class:`Measurer` keeps between cells (values; 32 MB)
_SCRATCH_MAX = 1 << 22


def _scratch(store: dict | None, name: str, shape: tuple) -> np.ndarray:
    """A C-contiguous float64 array of ``shape``: a view of ``store[name]``'s buffer (grown as
    needed) when a store is given, else a new array.  Its contents are undefined.
    """
    size = int(np.prod(shape))
    if store is None or size > _SCRATCH_MAX:
        return np.empty(shape)
    buf = store.get(name)
    if buf is None or buf.size < size:
        buf = store[name] = np.empty(size)
    return buf[:size].reshape(shape)


def _sse_bulk(
    x: np.ndarray, var: np.ndarray, Y: np.ndarray, scratch: dict | None = None
) -> list[tuple[float, float]]:
    """(raw SSE, normalized SSE) of each of the R releases ``Y`` (R, n, m) against ``x`` (n, m)
    with the column variances ``var``: the same bits as evaluate's ``colsum = ((x − y)²).sum(
    axis=0)`` run by run.  Every run at once: each column sum adds the records one after
    another as there; each run's row of column sums is then summed on its own.  Runs go in
    chunks of about 2^20 values (small temporaries; kept in ``scratch`` for the next cell).
    """
    R, n, m = Y.shape
    out: list[tuple[float, float]] = []
    step = max(1, (1 << 20) // max(n * m, 1))
    for r0 in range(0, R, step):
        part = Y[r0 : r0 + step]
        d = np.subtract(x[None, :, :], part, out=_scratch(scratch, "sse", part.shape))
        np.multiply(d, d, out=d)  # (x − y)²: numpy's square of a float is d·d
        colsums = d.sum(axis=1)
        scaled = colsums / var
        out.extend(
            (float(colsums[i].sum()), float(scaled[i].sum()) / (n * m)) for i in range(colsums.shape[0])
        )
    return out


def _rl_numeric_bulk(xs: np.ndarray, YS: np.ndarray, tree, cache: dict | None = None) -> np.ndarray:
    """``risk._rl_numeric(xs, YS[r], tree)`` for every r: an (R, n) array of Pr_j.

    Pr_j depends only on x′_j, x_j and the originals: each record is decided by exact
    distances (differences, then the sum of squares), and every pruning step of
    ``_rl_numeric`` is conservative (it only drops records whose exact distance to some
    original is shorter than their own by more than the tie tolerance).  So the records of
    all repetitions can be pruned and searched together, in larger blocks, with the same
    per-record result.  Only the exact candidate search (not the k-d tree) is used here, as
    ``_rl_numeric`` does whenever n² ≤ its brute-force limit; larger n: run by run.
    With numba, the compiled classifier ``risk._pr_classified`` settles the clear records
    (Pr = 1 or 0 with a 1e-9 margin) and hands the rest to the same exact search (``cache``
    keeps its neighbour lists over the sweep).
    """
    from dpstudio.engine.measures import risk as RK

    R, n, m = YS.shape
    if 0 < n and n * n <= RK._BRUTE_MAX_PAIRS:
        fast = RK._pr_classified(xs, YS.reshape(R * n, m), np.tile(np.arange(n), R), cache)
        if fast is not None:
            return fast.reshape(R, n)
    t0 = time.perf_counter()
    if n * n > RK._BRUTE_MAX_PAIRS or n == 0:
        return np.stack([RK._rl_numeric(xs, YS[r], tree) for r in range(R)]) if R else np.zeros((0, n))
    ys = YS.reshape(R * n, m)
    d_own = RK._own_distance(np.tile(xs, (R, 1)), ys)
    slack = (1.0 + RK.TIE_RTOL) * (1.0 + 1e-9)
    perm = np.random.default_rng(0).permutation(n)[: RK._PREFILTER_SAMPLE]
    stages = (perm[:64], perm) if perm.size > 64 else (perm,)
    bound = np.full(R * n, np.inf)
    rows = np.arange(R * n)
    for smp in stages:
        if rows.size == 0:
            break
        bound[rows] = np.minimum(bound[rows], RK._sample_bound(ys[rows] + 0.0, xs[smp]))
        rows = rows[d_own[rows] <= bound[rows] * slack]
    pr = np.zeros(R * n)
    if rows.size:
        pr[rows] = RK._pr_by_candidates(xs, ys[rows], d_own[rows])
    RK._NUMPY_SECONDS[0] += time.perf_counter() - t0
    return pr.reshape(R, n)


def _fast_eval(orig, prot, measures, mcache: dict) -> dict | None:
    """SSE and record linkage of an all-numeric release straight from arrays, or None.

    The same operations, in the same order, on the same cached arrays as
    :func:`~dpstudio.engine.measures.evaluate` (so the same bits): the pandas bookkeeping of a
    full evaluation (dtype checks, column look-ups, the measurement plan's distances) is done
    once, by the first run of the sweep through ``evaluate``, which also records here whether
    the fast path applies (numeric attributes, no categorical distance, no warnings).  A
    release with a missing or infinite value goes through ``evaluate`` (its warnings).
    """
    fp = mcache.get(("sweep.fast", id(orig)))
    if fp is None or fp["ref"] is not orig or tuple(measures) != fp["measures"]:
        return None
    from dpstudio.engine.measures._base import _matrix
    from dpstudio.engine.measures.risk import _BRUTE_MAX_PAIRS, _pr_classified, _rl_numeric

    attrs = fp["attrs"]
    if len(prot) != len(orig) or not all(a in prot.columns for a in attrs):
        return None
    try:
        y = _matrix(prot, attrs, "protected")  # as evaluate: same array, same layout
    except (DPStudioError, TypeError, ValueError):
        return None
    if not np.isfinite(y).all():
        return None  # missing values: evaluate words the warnings
    n, m = y.shape
    out: dict[str, Any] = {}
    if fp["sse"] is not None:
        x, var = fp["sse"]
        colsum = ((x - y) ** 2).sum(axis=0)
        out["sse_raw"], out["sse_normalized"] = float(colsum.sum()), float((colsum / var).sum()) / (n * m)
    if fp["rl"] is not None:
        scale, xs, tree = fp["rl"]
        ys = np.ascontiguousarray(y / scale)
        pr = (
            _pr_classified(xs, ys, np.arange(n), fp.setdefault("rl.cache", {}))
            if n * n <= _BRUTE_MAX_PAIRS
            else None
        )
        if pr is None:
            pr = _rl_numeric(xs, ys, tree)
        out["rl"] = 100.0 * float(pr.sum()) / n
    out["warnings"] = []
    return out


def _plan_fast_eval(
    orig, res, measures, plan, mcache: dict, evaluate_options: dict | None, first: dict
) -> None:
    """Decide once per original whether :func:`_fast_eval` reproduces ``evaluate`` (see there)."""
    key = ("sweep.fast", id(orig))
    if key in mcache:
        return
    mcache[key] = {"ref": orig, "measures": None}  # not applicable unless shown below
    ms = tuple(measures)
    opts = dict(evaluate_options or {})
    rl_distance = opts.pop("rl_distance", "standardized")
    expected = ({"sse_raw", "sse_normalized"} if "sse" in ms else set()) | ({"rl"} if "rl" in ms else set())
    if (
        opts
        or not ms
        or not set(ms) <= {"sse", "rl"}
        or first.get("warnings")
        or set(first) != expected | {"warnings"}
    ):
        return
    attrs = [str(a) for a in (res.protected_attributes or [])]
    if not attrs or len(set(attrs)) != len(attrs) or plan.wildcard or plan.distances_for(res.data, attrs):
        return
    from dpstudio.engine.measures._base import _dtypes, _num_dtype

    odt = _dtypes(orig)
    if not all(a in odt and _num_dtype(odt[a]) for a in attrs):
        return
    fp: dict[str, Any] = {"ref": orig, "measures": ms, "attrs": attrs, "sse": None, "rl": None}
    for ck, ent in mcache.items():
        if not (isinstance(ck, tuple) and len(ck) >= 5 and ck[0] == "metrics" and isinstance(ent, dict)):
            continue
        if ent.get("ref") is not orig:
            continue
        if ck[3:] == ("sse", tuple(attrs)) and "x" in ent and not ent["const"]:
            fp["sse"] = (ent["x"], ent["var"])
            fp["x"] = ent["x"]
        if ck[3:] == ("rl", tuple(attrs), rl_distance) and "xs" in ent and not ent["scale_warnings"]:
            xs = ent["xs"]

            def tree(ent=ent, xs=xs):
                from dpstudio.engine.measures.risk import _kdtree

                if ent.get("tree") is None:
                    ent["tree"] = _kdtree(xs)
                return ent["tree"]

            fp["rl"] = (ent["scale"], xs, tree)
    if ("sse" in ms) != (fp["sse"] is not None) or ("rl" in ms) != (fp["rl"] is not None):
        return
    mcache[key] = fp
