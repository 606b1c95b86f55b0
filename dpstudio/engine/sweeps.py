"""Trade-off sweeps over a k × ε grid (metrics.md "Trade-off sweeps").

The microaggregation of each k is computed once and reused for every ε and
repetition (methods keep it in ``Job.cache``).  Points are yielded one by one, so
the app can draw curves while the sweep runs; cancelling (``check_cancel`` raising
:class:`~dpstudio.engine.errors.Cancelled`, or simply closing the generator) stops
between points.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from dpstudio.engine.api import prepare, run_prepared
from dpstudio.engine.random import point_rng


@dataclass
class SweepPoint:
    """Mean and spread of each measure over the repetitions at one (k, ε).

    ``epsilon is None`` marks the noise-free baseline of the method at this k
    (microaggregation only).  ``values[name] = (mean, std)``.
    """

    k: int | None
    epsilon: float | None
    repeats: int
    values: dict[str, tuple[float, float]]
    index: int
    total: int
    elapsed: float
    runs: list[dict] = field(default_factory=list, repr=False)

    @property
    def is_baseline(self) -> bool:
        return self.epsilon is None

    def mean(self, name: str) -> float:
        return self.values[name][0]

    def std(self, name: str) -> float:
        return self.values[name][1]

    def as_row(self) -> dict:
        row: dict[str, Any] = {"k": self.k, "epsilon": self.epsilon, "repeats": self.repeats}
        for name, (m, s) in self.values.items():
            row[f"{name}_mean"] = m
            row[f"{name}_std"] = s
        return row


def grid(spec, ks, epsilons, baselines: bool) -> list[tuple[int, int | None, int, float | None]]:
    """The (k-index, k, ε-index, ε) cells in sweep order."""
    ks_ = list(ks) if spec.uses_k else [None]
    eps_: list[float | None] = list(epsilons) if spec.uses_epsilon else [None]
    if spec.uses_epsilon and baselines and spec.uses_k:
        eps_ = [None] + eps_
    cells = []
    for ki, k in enumerate(ks_):
        for ei, e in enumerate(eps_):
            cells.append((ki, k, ei, e))
    return cells


def run_sweep(df, method: str, roles=None, domains=None, *, ks=(2, 5, 10), epsilons=(1.0,),
              repeats: int = 1, seed: int | None = None, measures=("sse", "rl"),
              baselines: bool = True, hierarchies=None,
              check_cancel: Callable[[], None] | None = None,
              evaluate_options: dict | None = None, **params: Any) -> Iterator[SweepPoint]:
    from dpstudio.engine.measures import metrics

    from dpstudio.engine.errors import ParameterError

    if int(repeats) < 1:
        raise ParameterError(f"repeats must be at least 1. Got {repeats}.")
    from dpstudio.engine.registry import get_method

    spec0 = get_method(method)
    ks = list(ks) if ks is not None else []
    epsilons = list(epsilons) if epsilons is not None else []
    names = {p.name for p in spec0.params}
    base = dict(params)
    if "k" in names and spec0.uses_k and "k" not in base and ks:
        base["k"] = ks[0]
    if "epsilon" in names and "epsilon" not in base and epsilons:
        base["epsilon"] = epsilons[0]
    prep = prepare(df, method, roles, domains, hierarchies, **base)
    spec = prep.spec
    from dpstudio.engine.params import check_grid

    check_grid(spec, ks, epsilons, len(prep.data), baselines)
    cells = grid(spec, ks, epsilons, baselines)
    n = len(prep.data)
    if "shuffle" in prep.params:
        # sweep points are measured, never released, and every measure is a sum or mean over
        # records: skip the release shuffle (same noise, same values, no reordering cost)
        prep.params["shuffle"] = False
    total = len(cells)
    cache: dict = {}
    mcache: dict = {}  # measures' cache (e.g. the k-d tree of the original), whole sweep
    current_k = object()
    t0 = time.perf_counter()
    for idx, (ki, k, ei, eps) in enumerate(cells):
        if check_cancel is not None:
            check_cancel()
        if k != current_k:
            cache = {}  # free the previous k's clustering
            current_k = k
        reps = 1 if (eps is None and spec.uses_epsilon) else int(repeats)
        runs = []
        for r in range(reps):
            rng = point_rng(seed, ki, ei, r)
            res = run_prepared(prep, rng=rng, epsilon=eps if spec.uses_epsilon else "param",
                               k=int(k) if k is not None else None, cache=cache,
                               check_cancel=check_cancel)
            orig, prot = _aligned(res, n)
            runs.append(metrics.evaluate(orig, prot,
                                         res.protected_attributes, measures=measures,
                                         result=res, cache=mcache,
                                         **(evaluate_options or {})))
        values = {}
        for name in runs[0]:
            vals = [r_[name] for r_ in runs if isinstance(r_.get(name), (int, float, np.floating))]
            if len(vals) == len(runs):
                arr = np.asarray(vals, dtype=float)
                values[name] = (float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0)
        yield SweepPoint(k=None if k is None else int(k), epsilon=eps, repeats=reps, values=values,
                         index=idx, total=total, elapsed=time.perf_counter() - t0, runs=runs)


def _aligned(res, n: int):
    """(original, protected) row-aligned for the measures.  A shuffled release (row_map a
    permutation of all records) is put back in input order, so the original stays the same
    object across runs and the measures' cache (k-d tree, scaling) is reused; all measures
    are sums or means over records, unchanged by a joint permutation.  Releases that drop
    records (suppression) use the original rows that were released."""
    rm = res.row_map
    if rm is None:
        return res.original, res.data
    if len(rm) == n:
        inv = np.empty(n, dtype=np.int64)
        inv[rm] = np.arange(n)
        if np.array_equal(np.sort(rm), np.arange(n)):
            return res.original, res.data.iloc[inv].reset_index(drop=True)
    return res.aligned_original(), res.data
