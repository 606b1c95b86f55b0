"""Trade-off sweeps over a k × ε grid (docs/measures.md "Trade-off sweeps").

Layering: a sweep is a loop over the engine's protect pipeline (:func:`~dpstudio.engine.api.prepare`,
:func:`~dpstudio.engine.api.run_prepared`) and the one assess path (:func:`dpstudio.engine.assessment.assess`
with a :class:`~dpstudio.engine.measures.repeated.Measurer`: the measurement policy of
:func:`~dpstudio.engine.measures.measurement_plan` planned once, the original's arrays cached,
SSE and record linkage of all-numeric releases from arrays).  It sits
above ``api``: ``api`` does not import this module (``engine.sweep`` is exported from here).

A (k, ε) cell the method cannot run (e.g. t-close-dp needs k ≥ ⌊e^ε⌋ + 1) does not stop the
sweep: it is yielded as a point with empty ``values`` and the reason in ``skipped``.  A sweep
whose first cell fails raises (the settings, not one cell, are wrong).

The microaggregation of each k is computed once and reused for every ε and
repetition (methods keep it in ``Job.cache``).  Points are yielded one by one, so
the app can draw curves while the sweep runs; cancelling (``check_cancel`` raising
:class:`~dpstudio.engine.errors.Cancelled`, or simply closing the generator) stops
between points.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstudio.engine.api import prepare, run_prepared
from dpstudio.engine.assessment import assess
from dpstudio.engine.errors import DPStudioError, ParameterError
from dpstudio.engine.measures import measurement_plan
from dpstudio.engine.measures.repeated import Measurer
from dpstudio.engine.random import point_rng
from dpstudio.engine.registry import get_method
from dpstudio.engine.types import Job

#: ``Job.cache`` entries that depend on the prepared data only, never on k or ε (their keys
#: hold every other input): the individual-ranking order and sorted values of a column
#: (``protection._common.ir_sorted``) and a column's output grid (``noise.job_grid``).  They
#: are kept when the sweep moves on to the next k; everything else (the previous k's
#: clustering, its group sums) is freed.
DATA_ONLY_CACHE = frozenset({"num.ir-order", "noise.grid"})

#: Most repetitions per sweep point.  The mean of a measure over r repetitions has a Monte
#: Carlo standard error of σ/√r: at 10,000 it is 1 % of one run's spread, finer than any
#: curve shows; and the cost is linear in r (the Census ir-dp sweep, 495 points, takes about
#: 3 ms per point and repetition: 10,000 repetitions are about 4 hours).  More is a typo
#: (``1e9`` ran for weeks) and is refused.
MAX_REPEATS = 10_000


def check_repeats(repeats: Any, what: str = "repeats") -> int:
    """``repeats`` as an int from 1 to :data:`MAX_REPEATS`, else a one-line
    :class:`~dpstudio.engine.errors.ParameterError` naming ``what``.

    >>> check_repeats(10)
    10
    """
    ok = isinstance(repeats, (int, np.integer)) and not isinstance(repeats, (bool, np.bool_))
    if not ok or not 1 <= int(repeats) <= MAX_REPEATS:
        shown = repr(repeats) if len(repr(repeats)) < 40 else repr(repeats)[:39] + "…"
        raise ParameterError(
            f"{what} must be a whole number from 1 to {MAX_REPEATS:,} (the mean over 10,000 runs "
            f"is already within 1 % of one run's spread). Got {shown} instead."
        )
    return int(repeats)


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
    #: why the method could not run at this cell ("" for a measured point)
    skipped: str = ""

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
        if self.skipped:
            row["skipped"] = self.skipped
        return row


def warm_up() -> None:
    """Load the compiled MDAV kernel (numba imports it, then loads a cached function only at
    its first call: one call on 64 records), as a sweep's first microaggregation cell would:
    the app's spare worker does it while it waits (issue 27.4).  Results do not depend on it;
    without numba it does nothing.
    """
    from dpstudio.engine.algorithms.microaggregation import _mdav_kernel

    kernel = _mdav_kernel()
    if kernel is not None:
        z = np.random.default_rng(0).random((64, 3))
        kernel.run(np.ascontiguousarray(z), 2, None, lambda f: None)


def parse_grid(text: str, integer: bool = False, what: str = "--k") -> list:
    """The one grammar of sweep grids (CLI ``--k``/``--epsilon`` and the app's fields).

    Items separated by commas, semicolons or spaces; an item is a number, a range
    ``a:b`` or ``a:b:step`` (inclusive, a ≤ b, step > 0) or, for whole numbers, ``a-b``
    (every integer from a to b).  Returns the distinct values in increasing order (possibly
    empty); raises :class:`~dpstudio.engine.errors.ParameterError` naming ``what``.

    >>> parse_grid("2:10:4, 3", integer=True)
    [2, 3, 6, 10]
    >>> parse_grid("2-5, 12", integer=True)
    [2, 3, 4, 5, 12]
    >>> parse_grid("0.01,0.1;1 10")
    [0.01, 0.1, 1.0, 10.0]
    """
    import re

    kind = "whole numbers" if integer else "numbers"
    out: list = []
    for part in re.split(r"[,;\s]+", str(text).strip()):
        if not part:
            continue
        try:
            m = re.fullmatch(r"(\d+)-(\d+)", part)
            if m and integer:
                a, b = int(m.group(1)), int(m.group(2))
                if b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            elif ":" in part:
                bits = [float(b) for b in part.split(":")]
                if len(bits) not in (2, 3):
                    raise ValueError
                lo, hi, step = bits[0], bits[1], (bits[2] if len(bits) == 3 else 1.0)
                if not step > 0 or hi < lo or (integer and not all(v.is_integer() for v in bits)):
                    raise ValueError
                count = int(np.floor((hi - lo) / step + 1e-9)) + 1
                vals = [lo + i * step for i in range(count)]
                out.extend(int(round(v)) for v in vals) if integer else out.extend(vals)
            else:
                v = float(part)
                if integer:
                    if not v.is_integer():
                        raise ValueError
                    v = int(v)
                out.append(v)
        except ValueError:
            raise ParameterError(
                f"{(what + ' ') if what else ''}{text!r}: {part!r} is not valid. Give {kind} as a list (2,5,10), a "
                "range a:b or a:b:step with a ≤ b and step > 0" + (", or a-b" if integer else "") + "."
            ) from None
    return sorted(set(out))


def grid(spec, ks, epsilons, baselines: bool) -> list[tuple[int, int | None, int, float | None]]:
    """The (k-index, k, ε-index, ε) cells in sweep order."""
    ks_ = list(ks) if spec.uses_k else [None]
    eps_: list[float | None] = list(epsilons) if spec.uses_epsilon else [None]
    if spec.uses_epsilon and baselines and spec.uses_k:
        eps_ = [None, *eps_]
    cells = []
    for ki, k in enumerate(ks_):
        for ei, e in enumerate(eps_):
            cells.append((ki, k, ei, e))
    return cells


def run_sweep(
    df,
    method: str,
    roles=None,
    domains=None,
    *,
    ks=(2, 5, 10),
    epsilons=(1.0,),
    repeats: int = 1,
    seed: int | None = None,
    measures=None,
    baselines: bool = True,
    hierarchies=None,
    check_cancel: Callable[[], None] | None = None,
    evaluate_options: dict | None = None,
    progress: Callable[[float], None] | None = None,
    **params: Any,
) -> Iterator[SweepPoint]:
    repeats = check_repeats(repeats)
    if measures is None:  # the engine's defaults for the method, as `dpstudio sweep` and the app
        from dpstudio.engine.measures import default_measures

        measures = default_measures(method)
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
    if "order" in prep.params:
        # sweep points are measured, never released, and every measure is a sum or mean over
        # records: skip the release shuffle (same noise, same values, no reordering cost)
        from dpstudio.engine.protection._common import ORDER_INPUT

        prep.params["order"] = ORDER_INPUT
    total = len(cells)
    # the measurement policy, planned once for the whole sweep; the measurer keeps the
    # original's arrays (k-d tree, scaling) and the array fast path over every run
    plan = measurement_plan(
        prep.data, method=spec.id, roles=prep.roles, hierarchies=hierarchies, types=prep.types
    )
    measurer = Measurer(prep.data, measures=measures, plan=plan, evaluate_options=evaluate_options)
    cache: dict = {}
    roots: dict = {}  # (ki, ei) -> the keyed roots of the cell's repetitions (run_roots)
    current_k = object()
    t0 = time.perf_counter()
    shown = [0.0]

    def report(f: float) -> None:
        # the whole sweep's fraction, within a cell too (issue 27: a long first cell showed
        # 0 % for 12 s); in steps of at least 0.1 % (a sweep of 60 cells moves within the
        # first tenth of its first cell)
        if progress is not None and (f >= shown[0] + 0.001 or f >= 1.0):
            shown[0] = f
            progress(min(f, 1.0))

    for idx, (ki, k, ei, eps) in enumerate(cells):
        if check_cancel is not None:
            check_cancel()
        if k != current_k:  # free the previous k's clustering, keep what depends on the data only
            cache = {
                key: v
                for key, v in cache.items()
                if isinstance(key, tuple) and key[:1] and key[0] in DATA_ONLY_CACHE
            }
            current_k = k
        reps = 1 if (eps is None and spec.uses_epsilon) else int(repeats)
        runs = []
        try:
            if eps is not None and measurer.bulk_ready:
                # every repetition of the cell at once (same draws, same values; no DataFrame,
                # no guarantee text per repetition: a measured point shows neither)
                if (ki, ei) not in roots:  # every noisy cell's roots at once (from this one on)
                    todo = [c for c in cells[idx:] if c[3] is not None]
                    got = run_roots(
                        seed,
                        [(c[0], c[2], reps, prep.run_context(_cell_params(prep, c[3], c[1]))) for c in todo],
                    )
                    roots = {(c[0], c[2]): g for c, g in zip(todo, got)}
                runs = _bulk_cell(prep, roots.pop((ki, ei)), eps, k, cache, check_cancel, measurer)
            for r in range(reps if not runs else 0):
                rng = point_rng(seed, ki, ei, r)
                res = run_prepared(
                    prep,
                    rng=rng,
                    epsilon=eps if spec.uses_epsilon else "param",
                    k=int(k) if k is not None else None,
                    cache=cache,
                    check_cancel=check_cancel,
                    notes=False,
                    # the method's own progress fills 80 % of this run's share, the measures
                    # the rest
                    progress=None if progress is None else _run_progress(report, idx, r, reps, total),
                )
                report((idx + (r + 0.8) / reps) / total)
                runs.append(assess(res, measures=measures, measurer=measurer).measures)
        except DPStudioError as exc:
            if idx == 0:
                raise  # the settings, not one cell, are wrong
            yield SweepPoint(
                k=None if k is None else int(k),
                epsilon=eps,
                repeats=0,
                values={},
                index=idx,
                total=total,
                elapsed=time.perf_counter() - t0,
                skipped=(str(exc).splitlines() or [type(exc).__name__])[0],
            )
            continue
        report((idx + 1) / total)
        values = {}
        for name in runs[0]:
            vals = [r_[name] for r_ in runs if isinstance(r_.get(name), (int, float, np.floating))]
            if len(vals) == len(runs):
                arr = np.asarray(vals, dtype=float)
                values[name] = (float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0)
        yield SweepPoint(
            k=None if k is None else int(k),
            epsilon=eps,
            repeats=reps,
            values=values,
            index=idx,
            total=total,
            elapsed=time.perf_counter() - t0,
            runs=runs,
        )


def sweep(
    df,
    method: str,
    roles: dict | None = None,
    domains: dict | None = None,
    *,
    ks=(2, 5, 10),
    epsilons=(1.0,),
    repeats: int = 1,
    seed: int | None = None,
    measures=None,
    baselines: bool = True,
    hierarchies: dict | None = None,
    check_cancel: Callable[[], None] | None = None,
    evaluate_options: dict | None = None,
    progress: Callable[[float], None] | None = None,
    **params: Any,
) -> Iterator[SweepPoint]:
    """Run ``method`` over a k × ε grid; yield one :class:`SweepPoint` per cell.

    Every point is measured by the engine's measurement policy (the distances of
    ``hierarchies``, 0/1 for numeric k-quasis a generalising method turns into intervals), as
    ``protect``'s summary is; a cell the method cannot run is yielded with ``skipped`` set.
    ``measures`` default to :func:`~dpstudio.engine.measures.default_measures` of the method.
    ``evaluate_options`` are passed to :func:`~dpstudio.engine.measures.evaluate`
    (e.g. ``{"rl_distance": "raw"}``).  ``progress(fraction)`` is called as the sweep goes,
    also within a cell (the method's own progress), in steps of at least 0.1 %.
    """
    return run_sweep(
        df,
        method,
        roles,
        domains,
        ks=ks,
        epsilons=epsilons,
        repeats=repeats,
        seed=seed,
        measures=measures,
        baselines=baselines,
        hierarchies=hierarchies,
        check_cancel=check_cancel,
        evaluate_options=evaluate_options,
        progress=progress,
        **params,
    )


def _cell_params(prep, eps, k) -> dict:
    """The parameters of one run of the cell (as ``run_prepared`` sets them)."""
    params = dict(prep.params)
    if prep.spec.uses_epsilon:
        params["epsilon"] = eps
    if k is not None:
        params["k"] = int(k)
    return params


def _cell_job(prep, eps, k, cache: dict, check_cancel) -> Job:
    """The Job ``run_prepared`` would build for one run of the cell (its generator unused)."""
    spec = prep.spec
    params = _cell_params(prep, eps, k)
    job = Job(
        data=prep.data,
        roles=prep.roles,
        domains=prep.domains,
        params=params,
        rng=np.random.default_rng(),  # not drawn from: the runs' roots are passed in
        method=spec.id,
        cache=cache,
        hierarchies=prep.hierarchies,
        precision=dict(prep.precision or {}),
        types=dict(prep.types),
    )
    if check_cancel is not None:
        job.check_cancel = check_cancel
    return job


def _bulk_cell(prep, roots, eps, k, cache, check_cancel, measurer: Measurer) -> list[dict]:
    """The measures of every repetition of a (k, ε) cell from one bulk draw, or [] when the
    method has no bulk path (then the cell runs repetition by repetition).  ``roots[r]``:
    the keyed root of the run of ``point_rng(seed, ki, ei, r)`` (:func:`run_roots`: the first
    draw of the run's generator derived from it and the cell's context, as in
    ``run_prepared``; tests/engine/test_sweep_sharing.py pins the equality).
    """
    from dpstudio.engine.protection.ir_dp import bulk_releases

    job = _cell_job(prep, eps, k, cache, check_cancel)
    out = bulk_releases(job, roots)
    if out is None:
        return []
    cols, Y = out
    return measurer.measure_bulk(cols, Y) or []


def run_roots(seed: int | None, cells: list[tuple[int, int, int, bytes]]) -> list[list[tuple[int, int]]]:
    """The keyed roots of the repetitions of sweep cells: for each cell (ki, ei, reps, ctx),
    ``[root_key(keyed_rng(point_rng(seed, ki, ei, r), ctx)) for r in range(reps)]``, as
    ``run_prepared`` derives a run's root from the repetition's generator.

    For a pinned seed all cells at once, from the same numbers: numpy's SeedSequence → PCG64
    → two full-range words, twice (``keyed.default_rng_words``; the second sequence's entropy
    is keyed_rng's integer: the two words, then the SHA-256 of ``ctx`` from bit 128).  Building
    the three numpy generators of each repetition cost ~55-120 µs (7 % of the Census sweep,
    issue 27); the whole sweep's roots take a few ms.  ``seed=None`` (OS entropy) and what the
    replica does not cover: the generators themselves.  tests/engine/test_sweep_roots_27.py
    pins the equality.
    """
    from dpstudio.engine.algorithms import keyed as K

    total = sum(int(c[2]) for c in cells)
    seed_words = None  # a seed point_rng would refuse (or None): point_rng itself
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        seed_words = K.assembled_entropy(int(seed), (0, 0, 0))
    ctxw = [K._words32(int.from_bytes(hashlib.sha256(bytes(c[3])).digest(), "little")) for c in cells]
    big = any(max(int(c[0]), int(c[1]), int(c[2])) >= 2**32 for c in cells)
    if seed_words is None or big or not total or len({len(w) for w in ctxw}) != 1 or ctxw[0] == [0]:
        from dpstudio.engine.algorithms.keyed import root_key
        from dpstudio.engine.keying import keyed_rng

        return [
            [root_key(keyed_rng(point_rng(seed, ki, ei, r), ctx)) for r in range(reps)]
            for ki, ei, reps, ctx in cells
        ]
    L = len(seed_words)  # the seed's words (padded to the pool), then the spawn key (ki, ei, r)
    ent1 = np.empty((total, L), dtype=np.uint32)
    ent1[:, : L - 3] = np.asarray(seed_words[: L - 3], dtype=np.uint32)
    ent2 = np.empty((total, 4 + len(ctxw[0])), dtype=np.uint32)
    pos = 0
    for (ki, ei, reps, _ctx), cw in zip(cells, ctxw):
        ent1[pos : pos + reps, L - 3] = ki
        ent1[pos : pos + reps, L - 2] = ei
        ent1[pos : pos + reps, L - 1] = np.arange(reps, dtype=np.uint32)
        ent2[pos : pos + reps, 4:] = np.asarray(cw, dtype=np.uint32)  # c > 0 from bit 128 on
        pos += reps
    w = K.default_rng_words(ent1, 2)  # keyed_rng's draw from point_rng's generator
    ent2[:, 0:4:2] = w & np.uint64(0xFFFFFFFF)
    ent2[:, 1:4:2] = w >> np.uint64(32)
    roots = K.default_rng_words(ent2, 2).tolist()
    out, pos = [], 0
    for c in cells:
        out.append([(int(a_), int(b_)) for a_, b_ in roots[pos : pos + int(c[2])]])
        pos += int(c[2])
    return out


def _run_progress(
    report: Callable[[float], None], idx: int, r: int, reps: int, total: int
) -> Callable[[float], None]:
    """Progress of one run inside the sweep: the method's own progress fills 80 % of this
    run's share, the measures the rest.
    """

    def run_progress(f: float) -> None:
        report((idx + (r + 0.8 * max(0.0, min(f, 1.0))) / reps) / total)

    return run_progress
