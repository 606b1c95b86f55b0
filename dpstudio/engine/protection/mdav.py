"""``mdav``: k-anonymity by MDAV microaggregation of the k-quasi-identifiers (docs/methods.md §4).

The clustering (deterministic, depends on k but not on the seed) is kept in ``job.cache`` so
that sweeps reuse it; ``mdav-swap`` (:mod:`.mdav_swap`) uses the same clustering.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.params import Param
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    DROP_MISSING_PARAM,
    ORDER_PARAM,
    as_k,
    k_param,
    matrix_output,
    named,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output, listener

DISTANCE_PARAM = Param(
    "distance",
    "choice",
    "standardized",
    "How MDAV measures distances between records: 'standardized' (each attribute divided by "
    "its standard deviation — the default of the spec), 'raw' (original units, as thesis ch. 3 "
    "did), 'domain' (each attribute divided by its declared domain width, as thesis ch. 6 did; "
    "needs a domain for every k-quasi).",
    label="distance",
    choices=("standardized", "raw", "domain"),
    choice_labels={
        "standardized": "Standardised (÷ std. dev.)",
        "raw": "Raw units",
        "domain": "Scaled by domain width",
    },
    advanced=True,
)


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    k = ctx.get("k")
    return Guarantee(
        model=Model.K_ANONYMITY,
        k=as_k(k),
        covered=ctx.attributes,
        clauses=(
            Clause("claim", f"k-anonymity with k = {k} on the k-quasi-identifiers{named(ctx)}"),
            Clause(
                "mechanism",
                ": every combination of released k-quasi-identifier values is shared by at "
                "least k records (MDAV microaggregation).",
            ),
            Clause("not-dp", " Not differential privacy."),
        ),
    )


def mdav_labels(job: Job, cols: list[str], k: int) -> np.ndarray:
    """MDAV cluster labels of the records on ``cols`` (cached per k, columns and distance)."""
    dist = job.params.get("distance", "standardized")
    key = ("num.mdav", int(k), tuple(cols), dist)
    if key not in job.cache:
        job.check_cancel()
        X = job.matrix(cols)
        if dist == "domain":
            missing = [c for c in cols if c not in job.domains]
            if missing:
                raise ParameterError(
                    "distance='domain' scales each k-quasi by its domain width; declare a domain "
                    f"for {', '.join(map(repr, missing))} or choose another distance."
                )
            lb, ub = job.bounds(cols)
            X = (X - lb) / (ub - lb)
        # (callbacks only when someone listens: the kernel otherwise runs in one go instead of
        # stopping every 64 steps, issue 27 §2; the same labels either way)
        job.cache[key] = MA.mdav(
            X,
            k,
            standardized=(dist != "standardized"),
            check_cancel=listener(job.check_cancel),
            progress=listener(job.progress),
        )
    return job.cache[key]


def run(job: Job) -> Output:
    cols = job.columns(Role.K_QUASI)
    k = int(job.params["k"])
    labels = mdav_labels(job, cols, k)
    X = job.matrix(cols)
    nc = int(labels.max()) + 1
    cent = MA.cluster_means(X, labels, nc)
    vals = np.take(cent, labels, axis=0)  # (= cent[labels], in a third of its time)
    job.progress(1.0)
    sizes = np.bincount(labels, minlength=nc)
    return matrix_output(
        job,
        cols,
        vals,
        info={
            "clusters": nc,
            "min_cluster_size": int(sizes.min()),
            "max_cluster_size": int(sizes.max()),
            "k": k,
        },
        protected=cols,
    )


#: The declaration fields the MDAV-clustered k-quasi methods share (mdav, mdav-swap): their
#: parameters, roles and flags.
MDAV_FIELDS: dict[str, Any] = dict(
    params=(k_param(), DISTANCE_PARAM, DROP_MISSING_PARAM, ORDER_PARAM),
    protects=(Role.K_QUASI,),
    requires=(Role.K_QUASI,),
    needs_domain=False,
    uses_k=True,
    uses_epsilon=False,
    clusters=True,
)

SPEC = MethodSpec(
    id="mdav",
    name="MDAV k-anonymity (MDAV-ID)",
    family="k-anonymity",
    description=(
        "Groups records into clusters of at least k similar records (MDAV "
        "microaggregation on the k-quasi-identifiers) and replaces each record's "
        "k-quasi values by its cluster's average. Every released combination is then "
        "shared by at least k records."
    ),
    paper=_P.SORIA_COMAS_2013_THESIS + ", §2.8, §3.4",
    guarantee=guarantee,
    run=run,
    k_anonymous=True,
    **MDAV_FIELDS,
)
