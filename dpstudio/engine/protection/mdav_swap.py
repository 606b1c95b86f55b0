"""``mdav-swap``: probabilistic k-anonymity -- MDAV clusters of the k-quasi-identifiers, their
values permuted jointly at random inside each cluster (docs/methods.md §4).
"""

from __future__ import annotations

import numpy as np

from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import as_k, named
from dpstudio.engine.protection.mdav import MDAV_FIELDS, mdav_labels
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    k = ctx.get("k")
    return Guarantee(
        model=Model.PROBABILISTIC_K_ANONYMITY,
        k=as_k(k),
        covered=ctx.attributes,
        clauses=(
            Clause("claim", f"Probabilistic k-anonymity with k = {k} on the k-quasi-identifiers{named(ctx)}"),
            Clause(
                "mechanism",
                ": the released k-quasi values are the original ones, permuted jointly at random "
                "inside MDAV clusters of at least k records, so linking a record to its "
                "respondent succeeds with probability at most 1/k.",
            ),
            Clause("not-dp", " Not differential privacy."),
        ),
    )


def permute_within(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """The permutation src such that record i receives the values of record src[i]; a uniformly random
    permutation inside each cluster.
    """
    n = labels.size
    base = np.argsort(labels, kind="stable")
    shuffled = np.lexsort((rng.random(n), labels))
    src = np.empty(n, dtype=np.int64)
    src[base] = shuffled
    return src


def run(job: Job) -> Output:
    cols = job.columns(Role.K_QUASI)
    k = int(job.params["k"])
    labels = mdav_labels(job, cols, k)
    src = permute_within(job.rng, labels)
    df = job.data.copy()
    for c in cols:
        df[c] = job.data[c].to_numpy()[src]  # keep the column's dtype (original values)
    nc = int(labels.max()) + 1
    job.progress(1.0)
    return Output(
        df,
        info={"clusters": nc, "k": k, "records_moved": int(np.count_nonzero(src != np.arange(job.n)))},
        protected=cols,
    )


SPEC = MethodSpec(
    id="mdav-swap",
    name="Probabilistic k-anonymity: MDAV + swap",
    family="probabilistic k-anonymity",
    description=(
        "Forms MDAV clusters of at least k records on the k-quasi-identifiers and "
        "shuffles their k-quasi values (jointly) among the records of each cluster. "
        "Values stay real and means/variances are preserved exactly, but which record "
        "they belong to is uncertain (at most 1/k chance of a correct link)."
    ),
    paper=_P.SORIA_COMAS_2013_THESIS + ", §3.3.1",
    guarantee=guarantee,
    run=run,
    **MDAV_FIELDS,
)
