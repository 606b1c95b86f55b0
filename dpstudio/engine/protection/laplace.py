"""``laplace``: plain Laplace (or staircase) noise on every value of the ε-quasi-identifiers,
no microaggregation -- the k = 1 baseline of the clustered DP methods (docs/methods.md §4).

The worked example of docs/ARCHITECTURE.md: a method is its guarantee sentence, its run
function and its :class:`~dpstudio.engine.registry.MethodSpec`, in one file.
"""

from __future__ import annotations

import numpy as np

from dpstudio.engine import parallel
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
    lb, ub = job.bounds(cols)
    kind = job.params.get("noise", "laplace")
    cells = job.n * len(cols)
    # a large table: each column read on its own (no n × m float matrix, contiguous values;
    # the same float64 values) and the columns noised side by side (parallel.py: the same
    # draws, each from its own keyed stream); a small one: its matrix (prepared with the
    # checks when the table is a small block of numbers), one column after the other
    have = ("matrix", tuple(cols)) in job.cache
    X = job.matrix(cols) if have or cells < parallel.MIN_CELLS else None
    rows = np.arange(job.n)
    per = {}
    attrs = []
    for j, c in enumerate(cols):  # grids, streams and the run's root key: in this thread
        g = N.job_grid(job, c)  # exact integer noise on the grid γ (issue 8 §3)
        attrs.append(
            (j, job.data[c] if X is None else None, job_attribute(job, j, c, grid=g, epsilon=eps[j]))
        )

    def noisy(item) -> np.ndarray:
        j, s, a = item
        x = X[:, j] if X is not None else s.to_numpy(dtype=np.float64)
        return noisy_values(x, rows, a)

    def done(j: int, _values) -> None:
        job.progress((j + 1) / len(cols))
        job.check_cancel()

    if kind == "laplace":  # the compiled sampler, when this run's draws pay its load (here, once)
        K.noise_kernel(cells)
    job.check_cancel()
    new = dict(zip(cols, parallel.map_ordered(noisy, attrs, cells=cells, each=done)))
    for j, c in enumerate(cols):  # (after the draws: a sampler's refusal comes first, as before)
        g = attrs[j][2].grid
        per[c] = {"domain_width": float(ub[j] - lb[j]), **N.grid_info(kind, g, g.span, float(eps[j]))}
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
