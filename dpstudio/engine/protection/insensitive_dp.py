"""``insensitive-dp``: insensitive microaggregation of all ε-quasi-identifiers jointly, one
noise draw per cluster and attribute (paper 000, thesis ch. 6; correction in paper 002 §3).

The clustering (deterministic, depends on k but not on ε) is kept in ``job.cache`` so that
sweeps reuse it for every ε and repetition.
"""

from __future__ import annotations

import numpy as np

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.notices import notice
from dpstudio.engine.outofcore import Attribute, ClusterBlock, SingleOrder
from dpstudio.engine.params import Param
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    BUDGET_PARAM,
    DROP_MISSING_PARAM,
    LAYOUT_PARAM,
    NOISE_PARAM,
    NOT_DP_LABEL,
    ORDER_PARAM,
    WEIGHTS_PARAM,
    as_k,
    baseline_guarantee,
    budget_clause,
    dp_guarantee,
    eps_info,
    eps_quasi,
    epsilon_param,
    frame_with,
    job_stream,
    k_param,
    noise_name,
    ordering,
    released,
    staircase_split,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

VARIANT_PARAM = Param(
    "variant",
    "choice",
    "multi",
    "Insensitive microaggregation: 'single' = one total order by distance to one corner of the "
    "domain box (insensitive MDAV, paper 000); 'multi' = clusters taken in turn around the "
    "corners of the domain box in Hamming order (thesis Algorithm 6.1), usually more "
    "homogeneous clusters.",
    label="clustering",
    choices=("single", "multi"),
    choice_labels={
        "single": "Insensitive MDAV (single order)",
        "multi": "Multi-reference (corners in Hamming order)",
    },
)

CALIBRATION_PARAM = Param(
    "calibration",
    "choice",
    "rigorous",
    "Noise calibration. 'rigorous': scale n_c·Δ/(k·ε_i), n_c = ⌊n/k⌋ clusters — changing one "
    "record can move every centroid (paper 002 §3); this is ε-DP and beats plain Laplace only "
    "when k² > n. 'as-published': scale Δ/(k·ε_i) as in paper 000 and thesis ch. 6; it "
    + NOT_DP_LABEL
    + " and is offered only to reproduce the published figures.",
    label="calibration",
    choices=("rigorous", "as-published"),
    choice_labels={"rigorous": "Rigorous (ε-DP)", "as-published": "As published (NOT ε-DP)"},
    warning={"as-published": "As-published calibration " + NOT_DP_LABEL + "."},
)

REFERENCE_PARAM = Param(
    "reference",
    "choice",
    "lower",
    "Reference corner of the domain box for the single-order variant: all lower bounds "
    "(default) or all upper bounds.",
    label="reference corner",
    choices=("lower", "upper"),
    choice_labels={"lower": "Lower bounds", "upper": "Upper bounds"},
    advanced=True,
)


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    """What the release guarantees, for the validated parameters and columns of ``ctx``."""
    k = ctx.get("k")
    if ctx.get("epsilon") is None:
        return baseline_guarantee(ctx, f"insensitive microaggregation with k = {k}")
    as_published = ctx.get("calibration", "rigorous") == "as-published"
    if as_published and int(k or 1) > 1:
        return Guarantee(
            model=Model.NONE,
            epsilon=float(ctx.get("epsilon")),
            k=as_k(k),
            covered=ctx.attributes,
            clauses=(
                Clause(
                    "caveat",
                    f"As-published calibration (noise scale Δ(A_i)/(k·ε_i) per cluster, k = {k}, "
                    f"{budget_clause(ctx)}): this {NOT_DP_LABEL}.",
                ),
                Clause(
                    "mechanism",
                    " Changing one record can move every cluster centroid, so the noise is too "
                    "small by a factor n_c = ⌊n/k⌋. The microaggregated values are k-anonymous "
                    "before noise.",
                ),
            ),
        )
    if as_published:  # k = 1: singletons, plain Laplace
        return dp_guarantee(
            ctx,
            Clause(
                "mechanism",
                "; with k = 1 every record is its own cluster and the as-published calibration "
                f"is plain {noise_name(ctx)} noise of scale Δ(A_i)/ε_i per record, clamped to "
                "the domain.",
            ),
            k=as_k(k),
            voided_by=ordering(ctx)[1],  # input order: not stated here, but not ε-DP either
        )
    if ctx.get("noise") == "staircase" and int(k or 1) > 1:
        how = "of sensitivity Δ(A_i)/k and budget ε_i/n_c each (sequential composition over the clusters)"
    else:
        how = "of scale n_c·Δ(A_i)/(k·ε_i)"
    order, void = ordering(ctx)
    return dp_guarantee(
        ctx,
        Clause(
            "mechanism",
            f"; insensitive microaggregation with k = {k}, one {noise_name(ctx)} draw per cluster "
            f"and attribute {how}, n_c = ⌊n/k⌋ (rigorous calibration), clamped to the domain.",
        ),
        order,
        k=as_k(k),
        voided_by=void,
    )


def int_sums(t: np.ndarray, labels: np.ndarray, nc: int) -> np.ndarray:
    """Exact int64 sums of the grid values per cluster (|sums| < 2⁵³ is checked by
    :func:`dpstudio.engine.algorithms.noise.make_grid`, so the float bincount is exact).
    """
    return np.rint(np.bincount(labels, weights=t.astype(np.float64), minlength=nc)).astype(np.int64)


def insensitive_labels(job: Job, cols: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Cluster labels and centroids of the insensitive clustering (cached)."""
    variant = job.params.get("variant", "multi")
    reference = job.params.get("reference", "lower")
    lb, ub = job.bounds(cols)
    key = (
        "num.insensitive",
        variant,
        reference if variant == "single" else None,
        int(k),
        tuple(cols),
        tuple(lb.tolist()),
        tuple(ub.tolist()),
    )
    if key not in job.cache:
        X = job.matrix(cols)
        if variant == "single":
            labels = MA.insensitive_mdav(X, k, lb, ub, reference)
        else:
            if len(cols) > MA.MAX_MULTI_REFERENCE_ATTRIBUTES:
                raise ParameterError(
                    f"The multi-reference variant supports at most "
                    f"{MA.MAX_MULTI_REFERENCE_ATTRIBUTES} protected attributes (got {len(cols)}); "
                    "use variant='single'."
                )
            labels = MA.multi_reference(X, k, lb, ub, check_cancel=job.check_cancel, progress=job.progress)
        nc = int(labels.max()) + 1
        job.cache[key] = (labels, MA.cluster_means(X, labels, nc))
    return job.cache[key]


def _calibration(p: dict, nc: int, k: int, span: int, eps_i: float) -> tuple[int, float]:
    """(sensitivity in grid units, budget) of each cluster sum's draw."""
    calibration = p.get("calibration", "rigorous")
    if calibration == "rigorous" and staircase_split(p.get("noise", "laplace"), k, nc):
        return span, eps_i / nc  # staircase: per-cluster sensitivity span (Δ/k as a centroid), ε_i/n_c
    factor = 1 if calibration == "as-published" else int(nc)
    return factor * span, eps_i  # Laplace: L1 sensitivity of the n_c sums n_c·span (as-published: span)


def _cluster_values(sums, sizes, ids, g: N.Grid, stream, kind: str, sens: int, eps_draw: float) -> np.ndarray:
    """Each cluster's released value: its integer grid sum plus one keyed draw (cluster id
    ``ids``), the mean rounded to the grid, clamped to the domain.  The in-memory run and the
    out-of-core plan both call it.
    """
    noisy = sums + K.grid_noise(kind, stream, ids, sens, eps_draw)
    return g.from_units(N.round_half_up_div(noisy, sizes))


def order_key(X: np.ndarray, lb: np.ndarray, ub: np.ndarray, p: dict) -> list[np.ndarray]:
    """The single order's sort keys, most significant first: the squared scaled distance to
    the reference corner, then the values (:func:`~dpstudio.engine.algorithms.microaggregation.insensitive_order`;
    record id last).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    bits = [p.get("reference", "lower") == "upper"] * X.shape[1]
    return [MA._corner_key(MA._scaled(X, lb, ub), bits), *(X[:, j] for j in range(X.shape[1]))]


def released_block(block: ClusterBlock, attributes: list[Attribute]) -> list[np.ndarray]:
    """The out-of-core plan's ``release``: the released values of every attribute for a block
    of whole clusters of the single order (as :func:`run` computes them for all clusters).
    With k = 1 every record is its own cluster, keyed by its record id
    (:func:`~dpstudio.engine.algorithms.microaggregation.insensitive_mdav`).
    """
    out = []
    for j, a in enumerate(attributes):
        p = a.params
        k = int(p["k"])
        ids = block.rows if k <= 1 else block.ids
        assert a.epsilon is not None  # the noise-free baseline does not run out of core
        t = a.grid.to_units(block.values[:, j])
        sums = np.add.reduceat(t, block.starts) if t.size else np.zeros(0, np.int64)
        sens, eps_draw = _calibration(p, block.n_clusters, k, a.grid.span, float(a.epsilon))
        vals = _cluster_values(
            sums,
            block.sizes,
            ids,
            a.grid,
            a.stream(K.PURPOSE_NOISE),
            p.get("noise", "laplace"),
            sens,
            eps_draw,
        )
        out.append(np.repeat(vals, block.sizes))
    return out


def refuse_out_of_core(p: dict) -> str | None:
    if p.get("variant", "multi") != "single":
        return (
            "insensitive-dp runs on Dask with the single-order variant only "
            "(variant='single', --variant single); the multi-reference variant "
            "needs --engine memory."
        )
    return None


def run(job: Job) -> Output:
    cols = eps_quasi(job)
    k = int(job.params["k"])
    labels, cent = insensitive_labels(job, cols, k)
    nc = cent.shape[0]
    lb, ub = job.bounds(cols)
    eps, info = eps_info(job, cols)
    calibration = job.params.get("calibration", "rigorous")
    info.update(clusters=nc, n_c=nc, k=k, variant=job.params.get("variant", "multi"), calibration=calibration)
    warnings: list[str] = []
    if eps is None:
        vals = cent[labels]
        return Output(frame_with(job, {c: vals[:, j] for j, c in enumerate(cols)}), info=info, protected=cols)
    kind = job.params.get("noise", "laplace")
    if calibration == "as-published" and k > 1:
        warnings.append(notice("as-published", "As-published calibration " + NOT_DP_LABEL + "."))
    if calibration == "rigorous" and k == 1:
        warnings.append(
            notice(
                "rigorous-k1",
                "With k = 1 the rigorous calibration n_c·Δ/(k·ε) = n·Δ/ε is n times the noise of "
                "method 'laplace', which gives the same guarantee at k = 1: use 'laplace'.",
            )
        )
    if calibration == "rigorous" and k > 1 and k * k <= job.n:
        warnings.append(
            notice(
                "microaggregation-no-gain",
                f"With k = {k} and n = {job.n} (k² ≤ n) the rigorous noise n_c·Δ/(k·ε) is at least "
                "as large as plain Laplace's Δ/ε: microaggregation does not help here.",
            )
        )
    new = {}
    per = {}
    sizes = np.bincount(labels, minlength=nc)
    X = job.matrix(cols)
    for j, c in enumerate(cols):
        job.check_cancel()
        delta = ub[j] - lb[j]
        # noise on the integer cluster SUMS of the grid values t = rint(x/γ) − base (each
        # record's t lies in [0, span]), released as the sum's mean rounded to the grid:
        # one record changes one member of a cluster, so |ΔS| ≤ span per cluster
        g = N.job_grid(job, c)
        span = g.span
        assert span is not None  # job.bounds() above requires a domain, so the grid has a span
        sums = int_sums(g.to_units(X[:, j]), labels, nc)
        sens, eps_draw = _calibration(job.params, nc, k, span, float(eps[j]))
        stream = job_stream(job, K.PURPOSE_NOISE, j)
        new[c] = _cluster_values(sums, sizes, np.arange(nc), g, stream, kind, sens, eps_draw)[labels]
        per[c] = {
            "domain_width": float(delta),
            **N.grid_info(kind, g, sens, eps_draw, k),
            "epsilon_per_draw": eps_draw,
            "noise_on": "cluster sums (grid units)",
        }
        job.progress((j + 1) / len(cols))
    info.update(noise_per_attribute=per, draws_per_attribute=nc)
    return released(job, new, info=info, protected=cols, warnings=warnings)


SPEC = MethodSpec(
    id="insensitive-dp",
    name="Insensitive microaggregation + noise",
    family="differential privacy",
    description=(
        "Clusters the records on all ε-quasi-identifiers jointly with a clustering whose "
        "clusters change by at most one record when one record changes (insensitive "
        "microaggregation), replaces values by cluster averages and adds one noise draw "
        "per cluster and attribute. With the rigorous calibration it is ε-DP but helps "
        "only when k² > n."
    ),
    paper=_P.cite(
        _P.SORIA_COMAS_2013_TRUSTCOM,
        _P.SORIA_COMAS_2013_THESIS + ", ch. 6",
        "sensitivity correction: " + _P.SANCHEZ_2014_PSD + ", §3",
    ),
    params=(
        k_param(),
        epsilon_param(),
        NOISE_PARAM,
        BUDGET_PARAM,
        VARIANT_PARAM,
        CALIBRATION_PARAM,
        REFERENCE_PARAM,
        WEIGHTS_PARAM,
        DROP_MISSING_PARAM,
        ORDER_PARAM,
        LAYOUT_PARAM,
    ),
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=guarantee,
    run=run,
    needs_domain=True,
    uses_k=True,
    uses_epsilon=True,
    clusters=True,
    orders_records=True,
    outofcore=SingleOrder(sort_key=order_key, release=released_block, refuse=refuse_out_of_core),
)
