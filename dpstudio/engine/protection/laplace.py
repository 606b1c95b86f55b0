"""``laplace``: plain Laplace (or staircase) noise on every value of the ε-quasi-identifiers,
no microaggregation -- the k = 1 baseline of the clustered DP methods (docs/methods.md §4).

The worked example of docs/ARCHITECTURE.md: a method is its guarantee sentence, its run
function and its :class:`~dpstudio.engine.registry.MethodSpec`, in one file.
"""

from __future__ import annotations

import numpy as np

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext
from dpstudio.engine.notices import notice
from dpstudio.engine.outofcore import Attribute, Rowwise
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    DP_PARAMS,
    baseline_guarantee,
    dp_guarantee,
    eps_info,
    eps_quasi,
    frame_with,
    job_attribute,
    noise_name,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    """What the release guarantees, for the validated parameters and columns of ``ctx``."""
    if ctx.get("epsilon") is None:
        return baseline_guarantee(ctx, "original values")
    return dp_guarantee(
        ctx,
        Clause(
            "mechanism",
            f"; {noise_name(ctx)} noise of scale Δ(A_i)/ε_i added to every value, clamped to the domain.",
        ),
    )


def noisy_values(x: np.ndarray, rows: np.ndarray, a: Attribute) -> np.ndarray:
    """The released values of records ``rows`` (input positions) holding ``x``: one keyed draw
    per record (record r of attribute j, whatever the partitioning) on the grid γ, of
    sensitivity span (Δ in grid units) and budget ε_i, clamped to the domain.  The in-memory
    run and the out-of-core plan both call it.
    """
    t = a.grid.to_units(x)
    t += K.grid_noise(
        a.params.get("noise", "laplace"), a.stream(K.PURPOSE_NOISE), rows, a.grid.span, a.epsilon
    )
    return a.grid.from_units(t, overwrite=True)  # t is ours: clamped and scaled in place


def run(job: Job) -> Output:
    cols = eps_quasi(job)
    eps, info = eps_info(job, cols)
    if eps is None:
        return Output(
            job.data.copy(),
            info=info,
            protected=cols,
            warnings=[notice("baseline", "No ε given: the original values are returned (baseline).")],
        )
    X = job.matrix(cols)
    lb, ub = job.bounds(cols)
    kind = job.params.get("noise", "laplace")
    new = {}
    per = {}
    for j, c in enumerate(cols):
        job.check_cancel()
        delta = ub[j] - lb[j]
        g = N.job_grid(job, c)  # exact integer noise on the grid γ (issue 8 §3)
        new[c] = noisy_values(X[:, j], np.arange(job.n), job_attribute(job, j, c, grid=g, epsilon=eps[j]))
        per[c] = {"domain_width": float(delta), **N.grid_info(kind, g, g.span, float(eps[j]))}
        job.progress((j + 1) / len(cols))
    info.update(noise_per_attribute=per, draws_per_attribute=job.n)
    return Output(frame_with(job, new), info=info, protected=cols)


SPEC = MethodSpec(
    id="laplace",
    name="Plain Laplace noise (no microaggregation)",
    family="differential privacy",
    description=(
        "Adds random noise to every value of the ε-quasi-identifiers, calibrated to the "
        "width of each attribute's declared domain, and clamps the result to the "
        "domain. The k = 1 baseline of the microaggregation-based methods."
    ),
    paper=_P.cite(_P.SORIA_COMAS_2013_TRUSTCOM, _P.SANCHEZ_2014_PSD),
    params=DP_PARAMS,
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=guarantee,
    run=run,
    needs_domain=True,
    uses_k=False,
    uses_epsilon=True,
    outofcore=Rowwise(release=noisy_values),
)
