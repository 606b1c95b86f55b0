"""Individual ranking + noise: three methods (docs/methods.md §4).

* ``ir-dp`` (DP-UM, paper 002): one noise draw per group of k consecutive values, calibrated
  to the L1 sensitivity Δ/k of all centroids of an attribute -- ε-DP per attribute;
* ``idp-ls`` (paper 001 §3.2.1): each group's noise scaled to its local sensitivity;
* ``idp-cbls`` (paper 001 §3.2.2): extreme values pulled in to their neighbours first, noise
  from the cluster-based local sensitivity (no domain needed).

The three share the ranking, the cached per-group statistics and the noise on the integer
group sums (:func:`_run_ranked`); each says what differs -- the bounds it uses, its
noise-free centroids and its group sums with their sensitivity -- as functions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.notices import notice
from dpstudio.engine.outofcore import Attribute, ClusterBlock, Ranked
from dpstudio.engine.parallel import map_ordered
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    CLUSTERED_DP_PARAMS,
    STAIRCASE_VECTOR_NOTE,
    as_k,
    baseline_guarantee,
    budget_clause,
    chunks,
    dp_budget,
    dp_guarantee,
    eps_info,
    eps_quasi,
    fmt,
    household_order,
    ir_sorted,
    ir_sorted_all,
    job_root,
    job_stream,
    k_param,
    keep_order,
    layout_scope,
    noise_name,
    ordering,
    record_permutation,
    released,
    separate_tables,
    staircase_split,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

# --------------------------------------------------------------------------- guarantee texts

IDP_MEANING = (
    "individual differential privacy: the release is almost as likely when any one "
    "record of THIS data set is replaced by any other value, which protects every "
    "actual respondent but, unlike ε-DP, not every possible data set; it is not ε-DP"
)

JOINT_RANKING_REASON = (
    "each of the {m} attributes is clustered separately, so released together in records the "
    "pattern of which clusters a record combines is not hidden by the noise (neighbouring data "
    "sets can even differ in the number of distinct records released; a gap in paper 002's "
    "argument)"
)

JOINT_RANKING_REMEDY = (
    " For a record-level guarantee choose the release layout 'separate-tables' (each attribute "
    "in its own independently shuffled one-column table: the guarantee then holds for the whole "
    "release by sequential composition over the tables), or use insensitive-dp."
)


def joint_ranking_gap(ctx: GuaranteeContext) -> bool:
    """Individual ranking of m >= 2 attributes released together in records with k >= 2
    (not when each attribute is released in its own independently shuffled table).

    Then the record-level release is not ε-DP: each attribute's column is ε_i-DP (paper 002
    Lemma 1, with the rows shuffled), but the pattern of which clusters a record combines is
    deterministic in the data (neighbouring data sets can give different numbers of distinct
    released records); see ``JOINT_RANKING_REASON``.  With ``layout='separate-tables'`` every
    attribute is its own independently shuffled table: ε-DP by sequential composition.
    """
    return len(ctx.attributes) >= 2 and int(ctx.get("k") or 1) >= 2 and not separate_tables(ctx.params)


def _ranked(ctx: GuaranteeContext, g: Guarantee) -> Guarantee:
    """``g`` with the record order, and narrowed to the attributes when the ranking is joint."""
    order, void = ordering(ctx)
    g = g.with_clauses(order).evolve(k=as_k(ctx.get("k")), voided_by=void)
    if joint_ranking_gap(ctx):
        g = g.narrowed_to_attributes(JOINT_RANKING_REASON.format(m=len(ctx.attributes)))
        g = g.with_clauses(Clause("remedy-layout", JOINT_RANKING_REMEDY))
    return g


def guarantee_ir_dp(ctx: GuaranteeContext) -> Guarantee:
    k = ctx.get("k")
    if ctx.get("epsilon") is None:
        return baseline_guarantee(ctx, f"individual ranking with k = {k}")
    if ctx.get("noise") == "staircase" and int(k or 1) > 1:
        how = (
            f"; individual ranking with k = {k}, one staircase draw per cluster of sensitivity "
            "Δ(A_i)/k and budget ε_i/n_c, n_c = ⌊n/k⌋ (sequential composition over the "
            "clusters: staircase noise does not take paper 002's L1 bound), clamped to the domain."
        )
    else:
        how = (
            f"; individual ranking with k = {k}, one {noise_name(ctx)} draw per cluster of scale "
            "Δ(A_i)/(k·ε_i) (paper 002 Lemma 1), clamped to the domain."
        )
    return _ranked(ctx, dp_guarantee(ctx, Clause("mechanism", how)))


def _idp_guarantee(ctx: GuaranteeContext, how: str) -> Guarantee:
    k = ctx.get("k")
    eps = fmt(ctx.get("epsilon"))
    head = (
        f"(m·{eps})-individual differential privacy"
        if ctx.get("budget") == "per-attribute"
        else f"{eps}-individual differential privacy (ε-iDP)"
    )
    g = Guarantee(
        model=Model.INDIVIDUAL_DP,
        scope=layout_scope(ctx),
        covered=ctx.attributes,
        clauses=(
            Clause("claim", f"{head} ("),
            Clause("budget", budget_clause(ctx)),
            Clause("meaning", f"): {IDP_MEANING}."),
            Clause("mechanism", f" Individual ranking with k = {k}; {how}."),
            Clause(
                "caveat",
                " As in paper 001, the local sensitivity assumes each record stays in its "
                "cluster; replacing a record can also shift others between clusters, which this "
                "calibration does not bound (our neighbour tests found changes up to 1.4× LS for "
                "iDP-LS and more for iDP-CBLS).",
            ),
        ),
        **dp_budget(ctx),
    )
    return _ranked(ctx, g)


def guarantee_idp_ls(ctx: GuaranteeContext) -> Guarantee:
    if ctx.get("epsilon") is None:
        return baseline_guarantee(ctx, f"individual ranking with k = {ctx.get('k')}")
    return _idp_guarantee(
        ctx,
        f"{noise_name(ctx)} noise of scale LS(C)/ε_i per cluster, "
        "LS(C) = max(ub − min C, max C − lb)/|C|, clamped to the domain",
    )


def guarantee_idp_cbls(ctx: GuaranteeContext) -> Guarantee:
    if ctx.get("epsilon") is None:
        return baseline_guarantee(
            ctx, f"individual ranking with k = {ctx.get('k')} and extreme-value pre-processing"
        )
    return _idp_guarantee(
        ctx,
        "each cluster's smallest and largest values are replaced by their "
        f"neighbours, then {noise_name(ctx)} noise of scale LS(C)/ε_i from "
        "the cluster-based local sensitivity (paper 001 Prop. 3)",
    )


# --------------------------------------------------------------------------- shared run


def _ir_stats(job: Job, cols: list[str], k: int) -> list[dict]:
    """Per attribute: order, sorted values, chunk starts/sizes, sums, min, max (cached)."""
    starts, sizes = chunks(job.n, k)
    ir_sorted_all(job, cols)  # the sorts of a large table side by side (parallel.py)
    out = []
    for c in cols:
        order, xs = ir_sorted(job, c)
        key = ("num.ir-stats", int(k), c)
        if key not in job.cache:
            job.cache[key] = {
                "sum": np.add.reduceat(xs, starts),
                "min": xs[starts],
                "max": xs[starts + sizes - 1],
            }
        st = dict(job.cache[key])
        st.update(order=order, xs=xs, starts=starts, sizes=sizes)
        out.append(st)
    return out


def _spread(values_per_cluster: np.ndarray, sizes: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """Give every record of a sorted-order chunk its cluster's value."""
    vals = np.asarray(values_per_cluster)
    out = np.empty(n, dtype=vals.dtype if vals.dtype.kind in "iu" else np.float64)
    out[order] = np.repeat(vals, sizes)
    return out


def _domain_bounds(job: Job, cols: list[str]) -> dict:
    """The declared domain of every column (ir-dp, idp-ls: required)."""
    lb, ub = job.bounds(cols)
    return {c: (lb[j], ub[j]) for j, c in enumerate(cols)}


def _declared_bounds(job: Job, cols: list[str]) -> dict:
    """The declared domains, where given (idp-cbls: optional, used for clamping only)."""
    return {c: job.domains[c] for c in cols if c in job.domains}


def _mean_centroids(st: dict) -> np.ndarray:
    return st["sum"] / st["sizes"].astype(np.float64)


def _plain_sums(ts: np.ndarray, s0: np.ndarray, sz: np.ndarray) -> np.ndarray:
    return np.add.reduceat(ts, s0)


SumsFn = Callable[[np.ndarray, np.ndarray, np.ndarray, "N.Grid"], tuple]


def _eps_draw(eps_i: float, kind: str, k: int, nc: int, global_sensitivity: bool) -> float:
    """The budget of one draw: ε_i, or ε_i/n_c for staircase noise when the sensitivity bounds
    all the clusters of an attribute together (ir-dp: one record can move several centroids).
    """
    return eps_i / nc if global_sensitivity and staircase_split(kind, k, nc) else eps_i


def _check_precision(g: N.Grid, xs: np.ndarray, n: int, c: str) -> None:
    """Without a domain (idp-cbls) the grid sums must stay exact integers."""
    if g.span is None and xs.size and (float(np.abs(xs).max()) / g.gamma * n >= 2.0**53):
        raise ParameterError(
            f"Precision {g.gamma:g} of column {c!r} is too fine for its values (sums "
            "would overflow exact integer arithmetic); choose a coarser precision."
        )


def _noisy_cluster_values(t, starts, sizes, ids, g, stream, kind, eps_draw, grid_sums: SumsFn):
    """The released value of each cluster (ids ``ids``) of the sorted grid values ``t`` (and
    its sensitivity): the calibration on the integer cluster SUMS of the grid values
    t = rint(x/γ) − base (rint is monotone: the ranking, Lemma 1 and the local sensitivities
    carry over to t), one keyed draw per cluster, released as the sum's mean rounded to the
    grid.  The in-memory run and the out-of-core plan both call it.
    """
    tsum, sens_u = grid_sums(t, starts, sizes, g)
    noisy = tsum + K.grid_noise(kind, stream, ids, sens_u, eps_draw)
    return g.from_units(N.round_half_up_div(noisy, sizes)), sens_u


def _release_block(block: ClusterBlock, a: Attribute, *, grid_sums: SumsFn, global_sensitivity: bool):
    """The out-of-core plan's ``release``: every record of a block of whole clusters gets its
    cluster's released value (as :func:`_run_ranked` computes it for all the clusters).
    """
    kind = a.params.get("noise", "laplace")
    assert a.epsilon is not None  # the noise-free baseline does not run out of core
    _check_precision(a.grid, block.values, a.n, a.column)
    vals, _ = _noisy_cluster_values(
        a.grid.to_units(block.values),
        block.starts,
        block.sizes,
        block.ids,
        a.grid,
        a.stream(K.PURPOSE_NOISE),
        kind,
        _eps_draw(float(a.epsilon), kind, block.k, block.n_clusters, global_sensitivity),
        grid_sums,
    )
    return np.repeat(vals, block.sizes)


def _run_ranked(
    job: Job,
    *,
    bounds: Callable[[Job, list[str]], dict],
    centroids: Callable[[dict], np.ndarray],
    grid_sums: SumsFn,
    global_sensitivity: bool,
) -> Output:
    """Individual ranking of every ε-quasi, then noise on each group's integer grid sum.

    ``centroids(stats)``: the noise-free group values; ``grid_sums(t, starts, sizes, grid)``:
    the integer group sums of the grid values and their sensitivity (grid units, scalar or
    per group).  ``global_sensitivity``: the sensitivity bounds all groups of an attribute
    together (ir-dp, paper 002 Lemma 1), so staircase noise must split ε_i over the groups.
    """
    cols = eps_quasi(job)
    k = int(job.params["k"])
    n = job.n
    stats = _ir_stats(job, cols, k)
    eps, info = eps_info(job, cols)
    nc = MA.n_clusters_for(n, k)
    info.update(clusters_per_attribute=nc, k=k)
    kind = job.params.get("noise", "laplace")
    split = global_sensitivity and staircase_split(kind, k, nc)
    bnds = bounds(job, cols)
    per: dict[str, dict[str, Any]] = {}
    tasks: list[tuple[int, N.Grid | None, K.KeyedStream | None, float]] = []
    for j, c in enumerate(cols):  # grids, checks and keyed streams: in this thread, in order
        if eps is None:
            tasks.append((j, None, None, 0.0))
            continue
        # staircase: sensitivity Δ/k per centroid, ε_i/n_c per draw
        eps_draw = _eps_draw(float(eps[j]), kind, k, nc, global_sensitivity)
        g = N.job_grid(job, c)
        tasks.append((j, g, job_stream(job, K.PURPOSE_NOISE, j), eps_draw))

    def release(task) -> tuple[np.ndarray, Any]:
        """One attribute's released values (records in input order) and its sensitivity."""
        j, g, stream, eps_draw = task
        st = stats[j]
        if g is None:
            vals, sens_u = centroids(st), None
        else:
            _check_precision(g, st["xs"], n, cols[j])  # (refusals in column order, as before)
            vals, sens_u = _noisy_cluster_values(
                g.to_units(st["xs"]),
                st["starts"],
                st["sizes"],
                np.arange(nc),
                g,
                stream,
                kind,
                eps_draw,
                grid_sums,
            )
        return _spread(vals, st["sizes"], st["order"], n), sens_u

    # the records' keyed order (when they are shuffled) alongside: it depends on the run's
    # root key only (drawn here, in this thread), not on the noise
    shuffle = not keep_order(job.params) and not household_order(job.params)
    work: list[Callable[[], Any]] = [partial(release, t) for t in tasks]
    if shuffle:
        job_root(job)
        work.insert(0, partial(record_permutation, job, n))

    def done(i: int, _result) -> None:
        if i >= shuffle:
            job.progress((i - shuffle + 1) / len(cols))
        job.check_cancel()

    if eps is not None and kind == "laplace":  # the compiled sampler, when the draws pay its load
        K.noise_kernel(nc * len(cols))
    job.check_cancel()
    # the attributes of a large table side by side (parallel.py: each from its own stream)
    results = map_ordered(lambda f: f(), work, cells=n * len(cols), each=done)
    row_map = results.pop(0) if shuffle else None
    new = {}
    for (j, grid, _stream, eps_draw), (values, sens_u), c in zip(tasks, results, cols):
        new[c] = values
        if grid is None:
            per[c] = {}
            continue
        sz = stats[j]["sizes"]
        per[c] = N.grid_info(kind, grid, sens_u, eps_draw, k if global_sensitivity else sz)
        per[c]["noise_on"] = "cluster sums (grid units)"
        per[c]["epsilon_per_draw"] = eps_draw
        if c in bnds:
            per[c]["domain_width"] = float(bnds[c][1] - bnds[c][0])
        per[c]["clamped"] = c in bnds
    warnings: list[str] = []
    if eps is not None:
        info.update(noise_per_attribute=per, draws_per_attribute=nc)
        if split:
            warnings.append(
                notice(
                    "staircase-split",
                    f"Staircase noise with individual ranking: {STAIRCASE_VECTOR_NOTE}. Here that "
                    f"is ε_i/{nc} per draw, far more noise than Laplace (which needs no split): use "
                    "noise='laplace'.",
                )
            )
    return released(job, new, row_map=row_map, info=info, protected=cols, warnings=warnings)


# --------------------------------------------------------------------------- ir-dp


def _ir_dp_sums(ts, s0, sz, g):
    """L1 change of all sums ≤ span (paper 002 Lemma 1): one draw per group of that scale."""
    return _plain_sums(ts, s0, sz), g.span


def run_ir_dp(job: Job) -> Output:
    return _run_ranked(
        job, bounds=_domain_bounds, centroids=_mean_centroids, grid_sums=_ir_dp_sums, global_sensitivity=True
    )


# --------------------------------------------------------------------------- idp-ls


def _local_sums(ts, s0, sz, g):
    """LS(C) = max(ub − min C, max C − lb)/|C| as a change of the group sum, in grid units."""
    return _plain_sums(ts, s0, sz), np.maximum(g.span - ts[s0], ts[s0 + sz - 1])


def run_idp_ls(job: Job) -> Output:
    return _run_ranked(
        job, bounds=_domain_bounds, centroids=_mean_centroids, grid_sums=_local_sums, global_sensitivity=False
    )


# --------------------------------------------------------------------------- idp-cbls


def _cbls_centroids(st: dict) -> np.ndarray:
    """Group means with the smallest and largest value replaced by their neighbours."""
    xs, s0 = st["xs"], st["starts"]
    e = s0 + st["sizes"]
    x1, x2 = xs[s0], xs[s0 + 1]
    xc, xc1 = xs[e - 1], xs[e - 2]
    return (st["sum"] - x1 + x2 - xc + xc1) / st["sizes"].astype(np.float64)


def _cbls_sums(ts, s0, sz, g):
    """The pulled-in group sums and their cluster-based local sensitivity (paper 001 Prop. 3)."""
    e_ = s0 + sz
    t1, t2, t3 = ts[s0], ts[s0 + 1], ts[s0 + 2]
    tc, tc1, tc2 = ts[e_ - 1], ts[e_ - 2], ts[e_ - 3]
    tsum = _plain_sums(ts, s0, sz) - t1 + t2 - tc + tc1
    sens_u = np.maximum((tc - t2) + (t3 - t2) + (tc - tc1), (tc1 - t1) + (tc1 - tc2) + (t2 - t1))
    return tsum, sens_u


def run_idp_cbls(job: Job) -> Output:
    return _run_ranked(
        job,
        bounds=_declared_bounds,
        centroids=_cbls_centroids,
        grid_sums=_cbls_sums,
        global_sensitivity=False,
    )


# --------------------------------------------------------------------------- sweeps (bulk)

#: Most (stream, cluster) draws one bulk call holds in memory (8 words of 8 bytes each).
_BULK_MAX_DRAWS = 1 << 20


def _ranked_bulk(
    job: Job,
    roots: list[tuple[int, int]],
    *,
    grid_sums: SumsFn,
) -> tuple[list[str], np.ndarray] | None:
    """The released ε-quasi values of R repetitions of :func:`_run_ranked` at once, or None
    when the bulk path does not apply (noise-free, staircase noise, shuffled or separate-table
    layout, too many draws).  ``roots[r]``: the keyed root of repetition r (what
    ``job_stream`` draws first from that run's generator).  Returns (columns, Y) with Y an
    (R, n, m) float64 array: Y[r] equals the columns of that run's release as
    ``measures._matrix`` reads them, bit for bit (same grid arithmetic, draws from
    :func:`keyed.discrete_laplace_bulk`, which equals the per-stream sampler).  Guarantee
    texts, infos and the DataFrame are not built: a sweep's measured points need none.
    """
    cols = eps_quasi(job)
    kind = job.params.get("noise", "laplace")
    if job.noise_free or kind != "laplace" or not keep_order(job.params) or separate_tables(job.params):
        return None
    k = int(job.params["k"])
    n = job.n
    nc = MA.n_clusters_for(n, k)
    R, m = len(roots), len(cols)
    if not R or not m or nc * m * R > _BULK_MAX_DRAWS or staircase_split(kind, k, nc):
        return None
    stats = _ir_stats(job, cols, k)
    eps, _ = eps_info(job, cols)
    assert eps is not None
    grids, sums, rates = [], [], []
    for j, c in enumerate(cols):  # the checks of the single path, in its order
        st = stats[j]
        eps_draw = float(eps[j])
        g = N.job_grid(job, c)
        # the grid sums depend on k and the column only: computed at the first ε of a sweep's k
        # (job.cache is the sweep's cache of this k), reused for the next ε
        memo = job.cache.get(("ir.bulk-sums", k, c))
        if memo is not None and memo[0] is g and memo[1] is grid_sums:
            tsum, sens_u = memo[2], memo[3]
        else:
            _check_precision(g, st["xs"], n, c)
            ts = g.to_units(st["xs"])
            tsum, sens_u = grid_sums(ts, st["starts"], st["sizes"], g)
            job.cache[("ir.bulk-sums", k, c)] = (g, grid_sums, tsum, sens_u)
        sens_a, eps_a = np.asarray(sens_u), np.asarray(eps_draw, dtype=np.float64)
        if sens_a.ndim:  # per-cluster sensitivities (idp-ls, idp-cbls): the single path
            return None
        N.check_grid_noise(sens_a, eps_a)
        if not eps_a > 0 or not np.isfinite(eps_a):
            raise ValueError("epsilon must be > 0")
        if sens_a < 0 or sens_a > N.MAX_GRID_UNITS:
            raise ValueError(f"grid sensitivity must be in [0, {N.MAX_GRID_UNITS}]")
        if not sens_a > 0:
            return None  # rate ∞ (no noise): the single path
        with np.errstate(divide="ignore"):
            rate = eps_a * (1.0 - N.EPS_SAFETY) / sens_a.astype(np.float64)
        grids.append(g)
        sums.append(tsum)
        rates.append(rate)
    keys = K.stream_keys(roots, K.PURPOSE_NOISE, range(m))  # (R, m, 2)
    z = K.discrete_laplace_bulk(keys.reshape(R * m, 2), nc, np.tile(np.asarray(rates), R)).reshape(R, m, nc)
    job.check_cancel()
    # every record's cluster in each column, as an index into the (m·nc) cluster values: it
    # depends on k and the data only (the sweep's cache of this k keeps it for every ε)
    lay = job.cache.get(("ir.bulk-layout", k))
    if lay is None or lay[0] != tuple(cols):
        cl = np.repeat(np.arange(nc, dtype=np.intp), stats[0]["sizes"])
        idx = np.empty((n, m), dtype=np.intp)
        for j in range(m):
            idx[stats[j]["order"], j] = cl + j * nc
        lay = (tuple(cols), idx)
        job.cache[("ir.bulk-layout", k)] = lay
    sizes = stats[0]["sizes"]  # chunks(n, k): the same for every column
    q = N.round_half_up_div(np.stack(sums)[None, :, :] + z, sizes)
    vals = N.from_units_columns(grids, q)  # (R, m, nc)
    Y = np.take(vals.reshape(R, m * nc), lay[1], axis=1)  # (R, n, m): record i, column j
    return cols, Y


def bulk_releases(job: Job, roots: list[tuple[int, int]]) -> tuple[list[str], np.ndarray] | None:
    """:func:`_ranked_bulk` for the method of ``job`` (ir-dp), None for any other method."""
    if job.method == "ir-dp":
        return _ranked_bulk(job, roots, grid_sums=_ir_dp_sums)
    return None


# --------------------------------------------------------------------------- specs


def _ir_spec(
    *,
    grid_sums: Callable[..., Any],
    global_sensitivity: bool,
    min_k: int = 1,
    **fields: Any,
) -> MethodSpec:
    """The spec of one individual-ranking method: the roles and flags the three share, k with
    its minimum, the clustered-DP parameters, and the out-of-core plan that releases each
    block with the method's own group sums (``grid_sums``) and sensitivity.
    """
    return MethodSpec(
        protects=(Role.EPS_QUASI,),
        requires=(Role.EPS_QUASI,),
        uses_k=True,
        uses_epsilon=True,
        clusters=True,
        orders_records=True,
        params=(k_param(minimum=min_k),) + CLUSTERED_DP_PARAMS,
        min_k=min_k,
        outofcore=Ranked(
            release=partial(_release_block, grid_sums=grid_sums, global_sensitivity=global_sensitivity)
        ),
        **fields,
    )


IR_DP = _ir_spec(
    id="ir-dp",
    name="Individual ranking + noise (DP-UM)",
    family="differential privacy",
    description=(
        "For each ε-quasi-identifier separately: sorts the values, forms groups of k "
        "consecutive values, replaces them by the group average and adds ONE noise draw "
        "per group (k times less noise than plain Laplace)."
    ),
    paper=_P.cite(_P.SANCHEZ_2014_PSD, _P.SORIA_COMAS_2025_TDP + ", §3.1"),
    guarantee=guarantee_ir_dp,
    run=run_ir_dp,
    needs_domain=True,
    recommended=True,
    grid_sums=_ir_dp_sums,
    global_sensitivity=True,
)

IDP_LS = _ir_spec(
    id="idp-ls",
    name="Individual DP: individual ranking + local sensitivity (iDP-LS)",
    family="individual differential privacy",
    description=(
        "As individual ranking + noise, but each group's noise is scaled to how much "
        "its average could change if one of ITS records were replaced (local "
        "sensitivity). Less noise; the guarantee is individual DP, weaker than ε-DP."
    ),
    paper=_P.SORIA_COMAS_2025_TDP + ", §3.2.1",
    guarantee=guarantee_idp_ls,
    run=run_idp_ls,
    needs_domain=True,
    grid_sums=_local_sums,
    global_sensitivity=False,
)

IDP_CBLS = _ir_spec(
    id="idp-cbls",
    name="Individual DP: cluster-based local sensitivity (iDP-CBLS)",
    family="individual differential privacy",
    description=(
        "Individual ranking groups; inside each group the smallest and largest values "
        "are pulled in to their neighbours before averaging, so the noise depends only "
        "on the spread inside the group (no domain needed). Individual DP, weaker than "
        "ε-DP. Needs k ≥ 3."
    ),
    paper=_P.SORIA_COMAS_2025_TDP + ", §3.2.2, Prop. 3",
    guarantee=guarantee_idp_cbls,
    run=run_idp_cbls,
    needs_domain=False,
    min_k=3,
    grid_sums=_cbls_sums,
    global_sensitivity=False,
)

SPECS = (IR_DP, IDP_LS, IDP_CBLS)
