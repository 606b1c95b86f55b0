"""``ir-swap``: probabilistic k-anonymity of each confidential attribute -- individual ranking
into groups of k consecutive values, values permuted at random inside each group (docs/methods.md §4).
"""

from __future__ import annotations

import numpy as np

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model, Scope
from dpstudio.engine.outofcore import Attribute, ClusterBlock, Ranked, cluster_block
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    DROP_MISSING_PARAM,
    ORDER_PARAM,
    as_k,
    ir_sorted,
    job_attribute,
    k_param,
    named,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    k = ctx.get("k")
    return Guarantee(
        model=Model.PROBABILISTIC_K_ANONYMITY,
        scope=Scope.PER_ATTRIBUTE,  # each confidential attribute separately, by design
        k=as_k(k),
        covered=ctx.attributes,
        clauses=(
            Clause(
                "claim",
                f"Probabilistic k-anonymity with k = {k} for each confidential attribute "
                f"separately{named(ctx)}",
            ),
            Clause(
                "mechanism",
                ": its values are permuted at random inside groups of at least k records with "
                "consecutive values (individual ranking).",
            ),
            Clause("not-dp", " Not differential privacy."),
        ),
    )


def swapped(block: ClusterBlock, a: Attribute) -> np.ndarray:
    """The released values of a block of whole clusters (rank order): inside each cluster the
    values in a random order -- the ranks ordered by their keyed sort keys (per rank: the same
    permutation whatever the partitioning).  The in-memory run and the out-of-core plan both
    call it.
    """
    assert block.original is not None
    chunk = np.repeat(block.ids, block.sizes)  # cluster of each rank
    k0, k1 = K.sort_keys(a.stream(K.PURPOSE_SWAP), block.ranks)
    return block.original[np.lexsort((k1, k0, chunk))]


def run(job: Job) -> Output:
    cols = job.columns(Role.CONFIDENTIAL)
    k = int(job.params["k"])
    n = job.n
    df = job.data.copy()
    for j, c in enumerate(cols):
        job.check_cancel()
        order, xs = ir_sorted(job, c)
        col = job.data[c].to_numpy()
        new = np.empty_like(col)
        block = cluster_block(xs, ranks=0, n=n, k=k, original=col[order])
        new[order] = swapped(block, job_attribute(job, j, c))
        df[c] = new
        job.progress((j + 1) / len(cols))
    return Output(df, info={"clusters_per_attribute": MA.n_clusters_for(n, k), "k": k}, protected=cols)


SPEC = MethodSpec(
    id="ir-swap",
    name="Probabilistic k-anonymity: individual ranking + swap",
    family="probabilistic k-anonymity",
    description=(
        "For each confidential attribute separately: sorts its values, forms groups of "
        "k consecutive values and shuffles the values inside each group. Values stay "
        "real and each attribute's distribution is preserved exactly."
    ),
    paper=_P.SORIA_COMAS_2013_THESIS + ", §3.3.3",
    params=(k_param(), DROP_MISSING_PARAM, ORDER_PARAM),
    protects=(Role.CONFIDENTIAL,),
    requires=(Role.CONFIDENTIAL,),
    guarantee=guarantee,
    run=run,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=False,
    clusters=True,
    outofcore=Ranked(release=swapped, noisy=False, constant_per_cluster=False),
)
