"""The desk's one entry point: :func:`answer_query` chooses the mechanism (``auto``: the smaller
expected error for the declared prior and ε), states its accuracy before drawing
(:func:`assess`), draws, and prints the 95 % interval with the answer.

Accuracy figures are PUBLIC planning figures: they use only the query, the declared range,
prior and domains, ε, δ and the number of records n of the data set (public under bounded DP),
never the data -- the choice ``auto`` makes must not depend on the data.  Where the error of a
mechanism depends on how many records the filter matches (mean, variance, ratio, quantiles),
the planning size is ``records_hint`` (the office's declared expectation) or n.

Intervals printed with an answer are computed from the RELEASED values only:

* noise, one part (count, proportion, sum, value): the part's noise lies within its exact 95 %
  quantile, so the true (clamped) statistic lies in the interval with probability ≥ 95 %;
* noise, several parts (mean, variance, ratio): the estimator's error simulated from the
  mechanism at the noisy parts (:func:`mechanisms.stat_interval`: all parts' noise drawn
  jointly, a basic parametric bootstrap), coverage ≈ 95 %;
* refinement: the Neyman construction over the grid -- for every possible true answer f, the
  smallest ball around f holding ≥ 95 % of the refined distribution R_f; the interval is the
  hull of the f whose ball holds the response (exact coverage ≥ 95 % for every f; computed for
  grids of at most :data:`NEYMAN_MAX` points, else the whole declared range);
* quantiles and modes (exponential mechanism): no value interval exists without the data; the
  desk states the rank accuracy instead (the mechanism's utility bound) and prints the declared
  range as the value interval.

Randomness: a pinned seed is mixed (``keying.keyed_rng``) with the query, mechanism, ε, δ,
prior, range, domains, groups and a digest of the columns the query reads: the same seed,
query and data reproduce the answer; any other ε or query draws independent noise.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query import mechanisms as M
from dpstudio.engine.query.answer import QueryAnswer, check_epsilon, positive_epsilon
from dpstudio.engine.query.ledger import BudgetLedger, eps_fraction, locked_ledger
from dpstudio.engine.query.parser import (
    MultiQuery,
    Query,
    _col,
    _compare,
    _plain,
    evaluate_filter,
    filter_columns,
    parse_any,
    parse_filter,
)
from dpstudio.engine.query.ranges import CategoricalRange, NumericRange, Prior

#: Largest grid for which the refinement's interval is computed (Neyman construction).
NEYMAN_MAX = 2001
#: Points of the prior at which the refinement's expected error is evaluated (larger grids).
_PRIOR_POINTS = 101


# =========================================================================== refinement matrices


def refinement_rows(
    prior: Prior, epsilon: float, kind: str, centers: np.ndarray, split: float = 0.5
) -> np.ndarray:
    """R[f, k]: the refined distribution (floats, for accuracy only) for true answer
    ``centers[f]`` (grid indices), the same rule as Algorithm 5.1 (whole distance levels).
    """
    p = prior.probabilities()
    n = p.size
    if kind == "individual":
        up, down = epsilon, epsilon
    else:
        up, down = split * epsilon, (1 - split) * epsilon
    au, ad = math.exp(up), math.exp(-down)
    pu = (1 - ad) / (au - ad)
    sup = prior.support
    nominal = isinstance(sup, CategoricalRange) and not sup.ordered
    idx = np.arange(n)
    out = np.empty((len(centers), n))
    for r, c in enumerate(centers):
        d = (idx != c).astype(np.int64) if nominal else np.abs(idx - c)
        order = np.argsort(d, kind="stable")
        ds = d[order]
        # level masses: cumulative prior mass by distance level
        lv, start = np.unique(ds, return_index=True)
        mass = np.add.reduceat(p[order], start)
        cum = np.cumsum(mass)
        j = int(np.searchsorted(cum, pu - 1e-15))  # first level where the ball reaches pu
        j = min(j, len(lv) - 1)
        inner = cum[j - 1] if j > 0 else 0.0
        mid = mass[j]
        outer = 1.0 - inner - mid
        f = np.where(d < lv[j], au, np.where(d == lv[j], 0.0, ad))
        aud = (1 - au * inner - ad * outer) / mid if mid > 0 else 0.0
        f = np.where(d == lv[j], aud, f)
        row = p * f
        out[r] = row / row.sum()
    return out


def _grid_values(sup) -> np.ndarray:
    if isinstance(sup, NumericRange):
        return sup.values()
    return np.arange(sup.size, dtype=np.float64)


def _factors_float(epsilon: float, kind: str, split: float) -> tuple[float, float]:
    if kind == "individual":
        return math.exp(epsilon), math.exp(-epsilon)
    return math.exp(split * epsilon), math.exp(-(1 - split) * epsilon)


class _Balls:
    """Prefix sums of a numeric prior for balls {|i − c| ≤ r} around every centre c at once."""

    def __init__(self, prior: Prior, epsilon: float, kind: str, split: float):
        self.p = prior.probabilities()
        self.x = prior.support.values()
        self.n = self.p.size
        self.P = np.concatenate([[0.0], np.cumsum(self.p)])
        self.Q = np.concatenate([[0.0], np.cumsum(self.p * self.x)])
        self.c = np.arange(self.n)
        self._s95: np.ndarray | None = None  # computed once (s95)
        self._accuracy: float | None = None  # computed once (refinement_accuracy)
        self.au, self.ad = _factors_float(epsilon, kind, split)
        pu = (1 - self.ad) / (self.au - self.ad) if self.au > self.ad else 1.0
        self.r = self._search(lambda r: self.mass(r) >= pu)
        inner = np.where(self.r > 0, self.mass(self.r - 1), 0.0)
        self.inner = inner
        self.mid = self.mass(self.r) - inner
        self.outer = 1.0 - self.mass(self.r)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.aud = np.where(self.mid > 0, (1 - self.au * inner - self.ad * self.outer) / self.mid, 0.0)

    def _bounds(self, r):
        r = np.maximum(r, -1)
        lo = np.clip(self.c - r, 0, self.n)
        hi = np.clip(self.c + r, -1, self.n - 1)
        return lo, hi

    def mass(self, r) -> np.ndarray:
        lo, hi = self._bounds(np.asarray(r))
        return np.where(np.asarray(r) < 0, 0.0, self.P[hi + 1] - self.P[lo])

    def spread(self, r) -> np.ndarray:
        """Σ p_i |x_i − x_c| over the ball of radius r around every c."""
        r = np.asarray(r)
        lo, hi = self._bounds(r)
        xc = self.x[self.c]
        c1 = self.c + 1
        left = xc * (self.P[c1] - self.P[lo]) - (self.Q[c1] - self.Q[lo])
        right = (self.Q[hi + 1] - self.Q[self.c]) - xc * (self.P[hi + 1] - self.P[self.c])
        return np.where(r < 0, 0.0, left + right)

    def _search(self, ok) -> np.ndarray:
        lo = np.zeros(self.n, dtype=np.int64)
        hi = np.full(self.n, self.n - 1, dtype=np.int64)
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            good = ok(mid)
            hi = np.where(good, mid, hi)
            lo = np.where(good, lo, mid + 1)
        return lo

    def s95(self) -> np.ndarray:
        """For every centre f, the smallest radius whose ball holds ≥ 95 % of R_f (computed once)."""
        if self._s95 is None:
            self._s95 = self._search(lambda s: self.refined_mass(s) >= M.LEVEL + 1e-9)
        return self._s95

    def refined_mass(self, s) -> np.ndarray:
        """R_c(ball of radius s) for every centre c: αu inside the refined ball, αud on its
        boundary level, αd beyond.
        """
        s = np.asarray(s)
        r = self.r
        m_in = self.mass(np.minimum(s, r - 1))
        edge = np.where(s >= r, self.aud * self.mid, 0.0)
        far = np.where(s > r, self.mass(s) - self.mass(r), 0.0)
        return self.au * m_in + edge + self.ad * far

    def expected_error(self) -> np.ndarray:
        r = self.r
        a_in = self.spread(r - 1)
        a_ball = self.spread(r)
        a_all = self.spread(np.full(self.n, self.n - 1))
        return self.au * a_in + self.aud * (a_ball - a_in) + self.ad * (a_all - a_ball)


def _balls(prior: Prior, epsilon: float, kind: str, split: float) -> _Balls:
    """The :class:`_Balls` of (prior, ε, kind, split), kept for the last few (read-only; public:
    no data).  An answer uses them twice (the expected error, the interval); the office often
    asks again with the same prior and ε.
    """
    try:
        return _balls_cached(prior, float(epsilon), kind, float(split))
    except TypeError:  # unhashable prior parameters
        return _Balls(prior, epsilon, kind, split)


@functools.lru_cache(maxsize=8)
def _balls_cached(prior: Prior, epsilon: float, kind: str, split: float) -> _Balls:
    return _Balls(prior, epsilon, kind, split)


def refinement_accuracy(prior: Prior, epsilon: float, kind: str, split: float = 0.5) -> float:
    """E|K − f| under the prior (f ∼ prior, K ∼ R_f): the expected error of refinement for a
    researcher whose prior is right (numeric), or P(K ≠ f) for categories.  Public.
    """
    sup = prior.support
    if isinstance(sup, NumericRange):
        b = _balls(prior, epsilon, kind, split)
        if b._accuracy is None:
            b._accuracy = float(np.dot(b.p, b.expected_error()))
        return b._accuracy
    p = prior.probabilities()
    R = refinement_rows(prior, epsilon, kind, np.arange(sup.size), split)
    return float(np.dot(p, 1.0 - np.diag(R)))


def refinement_interval(prior: Prior, epsilon: float, kind: str, response_index: int, split: float = 0.5):
    """The Neyman interval of a refined response (see the module notes): the hull of the true
    answers f whose smallest ball holding ≥ 95 % of R_f contains the response.  None for
    categories.
    """
    sup = prior.support
    if not isinstance(sup, NumericRange):
        return None
    b = _balls(prior, epsilon, kind, split)
    hit = np.abs(response_index - b.c) <= b.s95()
    if not hit.any():
        return (sup.lo, sup.hi)
    f = np.flatnonzero(hit)
    return (float(b.x[f[0]]), float(b.x[f[-1]]))


def refinement_interval_width(prior: Prior, epsilon: float, kind: str, split: float = 0.5) -> float | None:
    """Expected width of the refinement's 95 % interval (Neyman construction, as printed with
    the answer) for a researcher whose prior is right: Σ_f p_f Σ_k R_f(k)·width(k).  Public.
    None for categories and for grids of more than :data:`NEYMAN_MAX` points (the interval
    printed is then the declared range).
    """
    sup = prior.support
    if not isinstance(sup, NumericRange) or sup.size > NEYMAN_MAX:
        return None
    b = _balls(prior, epsilon, kind, split)
    s95 = b.s95()
    k = b.c[:, None]
    f = b.c[None, :]
    hit = np.abs(k - f) <= s95[None, :]  # hit[k, f]: response k lies in f's 95 % ball
    anyhit = hit.any(axis=1)
    lo = np.where(anyhit, np.argmax(hit, axis=1), 0)
    hi = np.where(anyhit, b.n - 1 - np.argmax(hit[:, ::-1], axis=1), b.n - 1)
    width = b.x[hi] - b.x[lo]
    total = 0.0
    for start in range(0, b.n, 256):  # R_f in blocks of rows (memory: 256 × N)
        f = b.c[start : start + 256]
        d = np.abs(f[:, None] - b.c[None, :])
        r = b.r[f][:, None]
        fac = np.where(d < r, b.au, np.where(d == r, b.aud[f][:, None], b.ad))
        rows = b.p[None, :] * fac
        rows /= rows.sum(axis=1, keepdims=True)
        total += float(b.p[f] @ (rows @ width))
    return total


def planned_interval_width(stat: M.NoisyStat, n_plan: int, n_total: int | None = None) -> float:
    """Width of the 95 % interval a noise answer will print (before clamping to the declared
    range): analytic for one-part statistics, else the interval of the planning truth.  Public.
    A proportion divides by ``n_total`` (the data set's size, public), not the planning size.
    """
    m = len(stat.parts)
    level = 1 - (1 - M.LEVEL) / m
    if m == 1 and stat.query.agg in ("count", "proportion", "sum", "value"):
        p = stat.parts[0]
        per = 1.0 / (n_total or n_plan) if stat.query.agg == "proportion" else 1.0
        step = float(getattr(stat.support, "step", 0) or 0)
        return 2 * p.quantile(level) * float(p.unit) * per + step
    truth = [float(t) for t in stat.plan_truth(n_plan)]
    bx = M.stat_interval(stat, truth)  # the interval an answer whose noisy parts are the plan's
    return float("nan") if bx is None else float(bx[1] - bx[0])


# =========================================================================== planning accuracy of noise


def noise_accuracy(
    stat: M.NoisyStat, n_plan: int, rng: np.random.Generator, n_total: int | None = None
) -> tuple[float, str]:
    """(expected absolute error, how) of a noisy statistic: analytic when the parts' noise is
    the error (count, proportion, sum, value), else by simulation at the planning size.
    """
    agg = stat.query.agg
    if agg in ("count", "proportion", "sum", "value"):
        p = stat.parts[0]
        per = 1.0 / (n_total or n_plan) if agg == "proportion" else 1.0  # the count over n
        return p.mean_abs() * float(p.unit) * per, "analytic"
    truth = stat.plan_truth(n_plan)
    sims = M.simulate(stat, truth, rng, 200)
    exact = float(stat.finish([float(t) for t in truth]))
    return float(np.mean(np.abs(sims - exact))), f"simulation (200 draws, {n_plan:,} records)"


def rank_accuracy(stat: M.RankStat, n_plan: int) -> tuple[float, str]:
    """Planning error of the exponential mechanism: n_plan records spread evenly over the range
    (a quantile) or a lead of n_plan/k records (a mode: the probability of a wrong category).
    """
    sup = stat.support
    eps = float(stat.epsilon)
    if isinstance(sup, CategoricalRange):
        k = sup.size
        lead = n_plan / k
        wrong = (k - 1) * math.exp(-eps * lead / 4)
        return min(1.0, wrong / (1 + wrong)), "planning model (a lead of n/k records)"
    N = sup.size
    rate = eps * n_plan / (2 * N)  # weight per grid step for evenly spread records
    q = math.exp(-rate)
    steps = 2 * q / (1 - q * q) if q < 1 else float(N)
    width = sup.hi - sup.lo
    return min(steps * float(sup.step or 0), width / 3), f"planning model ({n_plan:,} records spread evenly)"


# =========================================================================== assessment


def _component_budget(mechanism: str, epsilon: Fraction, n_comp: int, grouped: bool):
    """ε per component and group: sequential over the components (ε/n each), ÷2 per group
    under bounded DP (a record can move between two groups).
    """
    e = epsilon / n_comp
    return e / 2 if grouped else e


def assess(
    query,
    epsilon,
    *,
    support=None,
    prior: Prior | None = None,
    n_total: int,
    bounds: dict | None = None,
    delta: float | None = None,
    split: float = 0.5,
    groups: dict | None = None,
    records_hint: int | None = None,
    seed: int = 0,
    only: str | None = None,
    intervals: bool = True,
) -> dict:
    """PUBLIC accuracy of every applicable mechanism before anything is drawn, and the choice
    of ``auto``: {'mechanisms': {name: {'expected_error', 'how', 'interval_width', 'interval_how'}},
    'auto', 'why', 'measure'}; ``interval_width`` is the width of the 95 % interval the answer will
    print (None: no value interval, e.g. quantiles and modes; not computed with
    ``intervals=False``, as when :func:`answer_query` chooses).
    Uses no data (the planning size is ``records_hint`` or ``n_total``).  ``only``: assess one
    mechanism (an explicit choice; ``auto`` needs them all).
    """
    q = _one_query(query)
    sup, prior = _support_prior(q, support, prior)
    eps = eps_fraction(check_epsilon(positive_epsilon(epsilon)))
    grouped = bool(q.by)
    e = _component_budget("", eps, 1, grouped)
    n_plan = int(records_hint or n_total)
    rng = np.random.default_rng(seed)  # planning simulations: public, data independent
    table: dict[str, dict] = {}
    kind = q.kind
    if only in (None, "refinement"):  # grouped: ε for every group (Proposition 4, add/remove)
        try:
            table["refinement"] = {
                "expected_error": refinement_accuracy(prior, float(eps), kind, split),
                "how": f"exact, averaged over the prior ({prior.describe()})",
                "interval_width": refinement_interval_width(prior, float(eps), kind, split)
                if intervals
                else None,
                "interval_how": "expected width of the Neyman interval for a researcher whose prior is right"
                if isinstance(sup, NumericRange) and sup.size <= NEYMAN_MAX
                else "no value interval computed: the declared range is printed",
            }
        except ParameterError as exc:
            if only is not None:
                raise
            table["refinement"] = {
                "expected_error": None,
                "how": str(exc),
                "interval_width": None,
                "interval_how": "",
            }
    for mech in M.applicable(q.agg):
        if (mech == "gaussian" and delta is None) or (only is not None and mech != only):
            continue
        try:
            width: float | None = None
            if mech == "exponential":
                st = M.rank_stat(q, sup, e)
                err, how = rank_accuracy(st, n_plan)
                iv_how = (
                    f"no value interval without the data: the response's rank is within "
                    f"{st.rank_bound():.4g} records of the target with probability ≥ 95 %"
                )
            else:
                r = None
                if mech == "gaussian" and delta is not None:
                    r = M.rho_for(eps, delta) / (2 if grouped else 1)
                stat = M.noisy_stat(
                    q, sup, mech, e, n_total=n_total, bounds=bounds, delta=delta, split=split, rho=r
                )
                err, how = noise_accuracy(stat, n_plan, rng, n_total)
                width = planned_interval_width(stat, n_plan, n_total) if intervals else None
                iv_how = "response ± half this width (clamped to the declared range)" + (
                    "" if len(stat.parts) == 1 else f" at the planning size ({n_plan:,} records)"
                )
        except ParameterError as exc:
            if only is not None:
                raise
            table[mech] = {
                "expected_error": None,
                "how": str(exc),
                "interval_width": None,
                "interval_how": "",
            }
            continue
        table[mech] = {"expected_error": err, "how": how, "interval_width": width, "interval_how": iv_how}
    usable = {k: v for k, v in table.items() if v["expected_error"] is not None}
    if not usable:
        reasons = "; ".join(f"{k}: {v['how']}" for k, v in table.items())
        raise ParameterError(
            f"No mechanism answers {q.describe()!r} with these settings"
            + (f" ({reasons})" if reasons else ".")
        )
    order = ["laplace", "geometric", "exponential", "gaussian", "refinement"]
    best = min(usable, key=lambda k: (usable[k]["expected_error"], order.index(k)))
    measure = "P(wrong category)" if isinstance(sup, CategoricalRange) else "mean absolute error"
    others = ", ".join(f"{k} {_fmt(v['expected_error'])}" for k, v in usable.items() if k != best)
    why = (
        f"auto: {best} (expected {measure} {_fmt(usable[best]['expected_error'])}"
        + (f"; {others}" if others else "")
        + ")"
    )
    return {"mechanisms": table, "auto": best, "why": why, "measure": measure, "planning_records": n_plan}


def assess_components(
    query,
    epsilon,
    *,
    supports: list,
    priors: list | None = None,
    n_total: int,
    bounds: dict | None = None,
    delta: float | None = None,
    split: float = 0.5,
    records_hint: int | None = None,
) -> dict:
    """``auto`` for a multicomponent query (PUBLIC, no data read): every component assessed with
    its own declared range and prior at ε/n; the mechanism usable for every component with the
    smallest sum of relative errors (each component's error over its best mechanism's).
    Returns {'auto', 'why', 'components': [assess(...) per component]}.
    """
    q = parse_any(query, allow_by=True) if isinstance(query, str) else query
    comps = list(q.components) if isinstance(q, MultiQuery) else [q]
    if len(supports) != len(comps) or (priors is not None and len(priors) != len(comps)):
        raise ParameterError(f"Give one declared range (and prior) per component ({len(comps)}).")
    eps = positive_epsilon(epsilon)
    accs = [
        assess(
            c,
            eps / len(comps),
            support=s,
            prior=None if priors is None else priors[i],
            n_total=n_total,
            bounds=bounds,
            delta=delta,
            split=split,
            records_hint=records_hint,
            intervals=False,
        )  # fmt: skip
        for i, (c, s) in enumerate(zip(comps, supports))
    ]
    order = ["laplace", "geometric", "exponential", "gaussian", "refinement"]
    scores: dict[str, float] = {}
    for mech in order:
        errs = [a["mechanisms"].get(mech, {}).get("expected_error") for a in accs]
        if any(e is None for e in errs):
            continue
        best = [
            min(v["expected_error"] for v in a["mechanisms"].values() if v["expected_error"] is not None)
            for a in accs
        ]
        scores[mech] = sum(e / b if b > 0 else (0.0 if e == 0 else math.inf) for e, b in zip(errs, best))
    if not scores:
        raise ParameterError(f"No one mechanism answers every component of {q.describe()!r}.")
    chosen = min(scores, key=lambda k: (scores[k], order.index(k)))
    why = (
        f"auto: {chosen} (sum over the {len(comps)} components of error / the component's best: "
        + ", ".join(f"{k} {v:.3g}" for k, v in scores.items())
        + ")"
    )
    return {"auto": chosen, "why": why, "components": accs}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _one_query(query) -> Query:
    q = parse_any(query, allow_by=True) if isinstance(query, str) else query
    if isinstance(q, MultiQuery):
        return q.components[0]
    return q


def _support_prior(q: Query, support, prior):
    if prior is not None:
        if not isinstance(prior, Prior):
            raise ParameterError("prior must be a dpstudio Prior (parse_prior or Prior.uniform(range)).")
        return prior.support, prior
    if support is None:
        raise ParameterError(
            f"Declare the range of the answer of {q.describe()!r} (never taken from the data)."
        )
    return support, Prior.uniform(support)


# =========================================================================== answering


def answer_query(
    df: pd.DataFrame,
    query,
    epsilon,
    *,
    mechanism: str = "auto",
    support=None,
    prior: Prior | None = None,
    bounds: dict | None = None,
    groups: dict | Iterable | None = None,
    delta: float | None = None,
    split: float = 0.5,
    kind: str | None = None,
    records_hint: int | None = None,
    ledger: BudgetLedger | str | os.PathLike | None = None,
    requester: str | None = None,
    rng=None,
    distance: str | None = None,
) -> QueryAnswer:
    """Answer ``query`` with ``mechanism`` (``auto``: the smaller planning error, see
    :func:`assess`) and charge ε to the ledger.  Returns a :class:`QueryAnswer` whose public
    part has the mechanism, the response, the 95 % interval and the guarantee.

    ``support``: the declared range of the answer (or ``prior``, whose support it is);
    ``bounds``: declared domains {column: (lo, hi)} (sums, means, variances, ratios clamp each
    record to them); ``groups``: {column: declared values} of a ``… by COL`` (or ``by A, B``)
    query; ``delta``: δ of the Gaussian mechanism (the ledger's, when it has one);
    ``distance``: the researcher's d_i for refinement (Protocol 2: grid, log, asymmetric:R);
    ``split``: the mean's ε split (sum, count); ``rng``: a seed or Generator (keyed with the
    query and the data), default OS entropy.
    """
    if isinstance(ledger, (str, os.PathLike)):
        with locked_ledger(ledger) as bound:
            return answer_query(
                df, query, epsilon, mechanism=mechanism, support=support, prior=prior, bounds=bounds,
                groups=groups, delta=delta, split=split, kind=kind, records_hint=records_hint,
                ledger=bound, requester=requester, rng=rng, distance=distance,
            )  # fmt: skip
    if mechanism not in M.MECHANISMS:
        raise ParameterError(
            f"The 'mechanism' parameter must be a str among {{{', '.join(M.MECHANISMS)}}}. Got {mechanism!r} instead."
        )
    q = parse_any(query, allow_by=True) if isinstance(query, str) else query
    comps = list(q.components) if isinstance(q, MultiQuery) else [q]
    if ledger is not None and delta is None:
        delta = ledger.delta
    if delta is not None:
        delta = M.check_delta(delta)
    eps_in = positive_epsilon(epsilon)
    n_total = len(df)
    if mechanism not in ("auto", "refinement"):
        for c in comps:
            if mechanism not in M.applicable(c.agg):
                raise ParameterError(
                    f"--mechanism {mechanism}: {c.agg} is answered by "
                    f"{', '.join(('refinement', *M.applicable(c.agg)))}."
                )
        if mechanism == "gaussian" and delta is None:
            raise ParameterError("The Gaussian mechanism needs δ (--delta, e.g. 1e-6; or the ledger's).")
    acc = assess(
        comps[0], eps_in / len(comps), support=support[0] if isinstance(support, (list, tuple)) else support,
        prior=prior, n_total=n_total, bounds=bounds,
        delta=delta, split=split, groups=None, records_hint=records_hint,
        only=None if mechanism == "auto" else mechanism, intervals=False,
    )  # fmt: skip
    chosen = acc["auto"] if mechanism == "auto" else mechanism
    if mechanism != "auto":
        e = acc["mechanisms"].get(chosen, {}).get("expected_error")
        acc["why"] = f"{chosen}: chosen by the office (expected {acc['measure']} {_fmt(e)})"
    if chosen == "refinement":
        return _by_refinement(
            df, q, comps, eps_in, prior, support, kind, groups, split, ledger, requester, rng, acc,
            distance=distance,
        )  # fmt: skip
    if chosen not in M.applicable(comps[0].agg):
        raise ParameterError(
            f"--mechanism {chosen}: {comps[0].agg} is answered by "
            f"{', '.join(('refinement', *M.applicable(comps[0].agg)))}."
        )
    if chosen == "gaussian" and delta is None:
        raise ParameterError("The Gaussian mechanism needs δ (--delta, e.g. 1e-6; or the ledger's).")
    for c in comps[1:]:
        if chosen not in M.applicable(c.agg):
            raise ParameterError(
                f"--mechanism {chosen} does not answer {c.agg} (component {c.describe()!r})."
            )
    return _by_noise(
        df,
        q,
        comps,
        eps_in,
        chosen,
        support,
        prior,
        bounds,
        groups,
        delta,
        split,
        ledger,
        requester,
        rng,
        acc,
    )


def _keyed(rng, df: pd.DataFrame, comps, context: dict) -> np.random.Generator:
    """The answer's generator: the seed's stream mixed with the request and the data read."""
    from dpstudio.engine import keying
    from dpstudio.engine.random import as_rng

    cols: set[str] = set()
    for c in comps:
        cols |= filter_columns(parse_filter(c.where))
        cols |= {x for x in (c.column, c.column2, c.by, c.by2) if x}
    present = [str(c) for c in df.columns if str(c) in cols]
    digest = keying.data_digest(df, present) if present else "empty"
    ctx = (
        b"dpstudio.query-desk.v1\0"
        + json.dumps({**context, "data": digest}, sort_keys=True, default=str, ensure_ascii=True).encode()
    )
    return keying.keyed_rng(as_rng(rng), ctx)


def _group_cells(df: pd.DataFrame, q: Query, groups) -> list[tuple[str, np.ndarray]]:
    """(label, mask) of every declared group (or cell of a contingency table)."""
    if not q.by:
        return [("", np.ones(len(df), dtype=bool))]
    if groups is None:
        raise ParameterError(
            f"'by {q.by}' needs the groups declared (never read from the data): --groups {q.by}=a,b,c."
        )
    g = dict(groups) if isinstance(groups, dict) else {q.by: list(groups)}
    keys = [q.by] + ([q.by2] if q.by2 else [])
    for k in keys:
        if not g.get(k):
            raise ParameterError(f"'by {k}' needs the groups declared: --groups {k}=a,b,c.")
    cells = [("", np.ones(len(df), dtype=bool))]
    for k in keys:
        col = _col(df, k)
        cells = [
            (f"{lab}{', ' if lab else ''}{k} = {v}", m & _compare(col, "==", v).to_numpy())
            for lab, m in cells
            for v in g[k]
        ]
    return cells


def _by_noise(
    df, q, comps, eps_in, mech, support, prior, bounds, groups, delta, split, ledger, requester, rng, acc
):
    first = support[0] if isinstance(support, (list, tuple)) else support
    sup, prior = _support_prior(comps[0], first, prior)
    if len(comps) > 1 and support is not None and not isinstance(support, (list, tuple)):
        sups = [sup] * len(comps)
    elif isinstance(support, (list, tuple)):
        sups = list(support)
    else:
        sups = [sup] * len(comps)
    n_total = len(df)
    grouped = bool(comps[0].by)
    if ledger is not None:
        ledger.check_answer(eps_in, mechanism=mech, delta=delta, requester=requester)
    eps = eps_fraction(check_epsilon(eps_in))
    e_comp = _component_budget(mech, eps, len(comps), grouped)
    rho = M.rho_for(eps, delta) if mech == "gaussian" else None
    r_comp = None if rho is None else rho / len(comps) / (2 if grouped else 1)  # zCDP adds ρ
    g = _rng_context(comps, mech, eps, delta, sups, bounds, groups, split)
    gen = _keyed(rng, df, comps, g)
    cells_all = None
    responses, intervals, trues, notes, records, labels = [], [], [], [], [], []
    notes_rank = []
    for c, s in zip(comps, sups):
        base = evaluate_filter(df, parse_filter(c.where))
        cells = _group_cells(df, c, groups)
        cells_all = cells
        for lab, m in cells:
            mask = base & m
            records.append(int(np.count_nonzero(mask)))
            labels.append(
                (c.describe() if len(comps) > 1 else "") + ((" · " if len(comps) > 1 and lab else "") + lab)
            )
            if mech == "exponential":
                st = M.rank_stat(c, s, e_comp)
                scores, tv = st.scores(df, mask)
                i = st.draw(scores, gen)
                responses.append(_plain(s.value(i)))
                # no value interval exists without the data: the declared range (covers always)
                intervals.append((s.lo, s.hi) if isinstance(s, NumericRange) else None)
                trues.append(tv)
                notes_rank.append(st.rank_bound())
                continue
            stat = M.noisy_stat(
                c, s, mech, e_comp, n_total=n_total, bounds=bounds, delta=delta, split=split, rho=r_comp
            )
            units, tv = stat.truth(df, mask)
            resp, itv = M.draw_stat(stat, units, gen)
            responses.append(_plain(resp))
            intervals.append(itv)
            trues.append(tv)
    guarantee = _noise_guarantee(
        comps, mech, eps, e_comp, delta, rho, r_comp, sups, bounds, grouped, split, notes_rank
    )
    single = len(responses) == 1
    ans = QueryAnswer(
        query=q.describe(),
        kind="statistical" if comps[0].agg != "value" else "individual",
        epsilon=float(eps),
        response=responses[0] if single else responses,
        guarantee=guarantee,
        prior="none (noise mechanism)",
        true_value=trues[0] if single else trues,
        notes=notes,
        groups=None if single else labels,
        records=records[0] if single else records,
    )
    ans.mechanism = mech
    ans.interval = intervals[0] if single else intervals
    ans.accuracy = acc
    ans.delta = delta if mech == "gaussian" else None
    ans.rho = float(rho) if rho is not None else None
    if mech == "exponential":
        k = notes_rank[0]
        ans.interval_note = (
            f"no value interval without the data: with probability ≥ 95 % the response's rank is within "
            f"{k:.4g} records of the {'mode' if comps[0].agg == 'mode' else 'target rank'} "
            "(beyond the best grid point's); the value interval printed is the declared range"
        )
    else:
        covers = list(dict.fromkeys(_covers(c, s, bounds, split, mech) for c, s in zip(comps, sups)))
        ans.interval_note = "covers " + "; ".join(covers)
    if ledger is not None:
        ledger.spend_answer(
            eps, mechanism=mech, delta=delta, rho=rho, query=ans.query, kind=ans.kind,
            prior=ans.prior, response=ans.public()["response"], requester=requester,
            interval_95=ans.public()["interval_95"],
        )  # fmt: skip
        ans.remaining = ledger.remaining
    _ = cells_all
    return ans


def _covers(q: Query, sup, bounds, split, mech) -> str:
    try:
        stat = M.noisy_stat(q, sup, "laplace", Fraction(1), n_total=1, bounds=bounds, split=split)
        if len(stat.parts) > 1 and stat.raw is not None:
            return (
                stat.covers + " with probability ≈ 95 % (its error simulated from the mechanism at the "
                f"released noisy parts, {M.INTERVAL_DRAWS:,} draws)"
            )
        return stat.covers + " with probability ≥ 95 %"
    except ParameterError:
        return "the true answer with probability ≥ 95 %"


def _rng_context(comps, mech, eps, delta, sups, bounds, groups, split) -> dict:
    return {
        "query": [c.describe() for c in comps],
        "mechanism": mech,
        "epsilon": str(eps),
        "delta": repr(delta),
        "ranges": [s.describe() for s in sups],
        "bounds": {str(k): [float(v[0]), float(v[1])] for k, v in (bounds or {}).items()},
        "groups": {str(k): [str(x) for x in v] for k, v in (groups or {}).items()}
        if isinstance(groups, dict)
        else str(groups),
        "split": repr(split),
    }


def _noise_guarantee(
    comps, mech, eps, e_comp, delta, rho, r_comp, sups, bounds, grouped, split, rank_bounds
) -> str:
    nc = len(comps)
    if mech == "exponential":
        how = (
            "the exponential mechanism over the declared range's grid (exact integer weights, a uniform "
            "integer draw), score |(1 − p)·#below − p·#above| scaled to integers, Δ its denominator"
            if comps[0].agg != "mode"
            else "the exponential mechanism over the declared categories, score the modal category's lead over each candidate, Δ = 2"
        )
    elif mech == "gaussian":
        how = (
            f"discrete Gaussian noise (exact sampler) with ρ-zero-concentrated DP, ρ = {float(rho or 0):.6g} "
            f"in total (for this answer alone (ε, δ)-DP with ε = {float(eps):g}, δ = {delta:g}; the ledger "
            "composes the ρ of all Gaussian answers of the data set and charges the ε it converts to)"
        )
    else:
        how = "discrete Laplace noise (exact sampler, ε′ = ε·(1 − 2⁻⁴⁰)) on the answer's grid"
    parts = []
    if nc > 1:
        parts.append(f"the {nc} aggregates share ε by sequential composition (ε/{nc} each)")
    if grouped:
        parts.append(
            "the groups are disjoint records (parallel composition), but one record can move between two "
            "groups, so every group is answered with half of its ε"
        )
    stats = []
    for c, s in zip(comps, sups):
        if mech == "exponential":
            continue
        try:
            st = M.noisy_stat(
                c, s, mech, e_comp, n_total=1, bounds=bounds, delta=delta, split=split, rho=r_comp
            )
            stats.append(
                "; ".join(p.describe() for p in st.parts) + (f" ({st.split_text})" if st.split_text else "")
            )
        except ParameterError:
            pass
    core = (
        f"{'(ε, δ)' if mech == 'gaussian' else 'ε'}-differential privacy with ε = {float(eps):g}"
        + (f", δ = {delta:g}" if mech == "gaussian" else "")
        + " with respect to changing one record's values (bounded DP: n is public)"
    )
    return (
        (f"Answered by {mech} noise: {how}; " if mech != "exponential" else f"Answered by {how}; ")
        + core
        + ". "
        + (" ".join(p[0].upper() + p[1:] + "." for p in parts) + " " if parts else "")
        + ("Calibration: " + " | ".join(stats) + ". " if stats else "")
        + ("The response lies in the declared range " + "; ".join(s.describe() for s in sups) + ". ")
        + f"Sequential composition: this answer spends ε = {float(eps):g} of the data set's query budget"
        + (" (its ρ is composed in zCDP by the ledger)." if mech == "gaussian" else ".")
    )


def _by_refinement(
    df, q, comps, eps_in, prior, support, kind, groups, split, ledger, requester, rng, acc, distance=None
):
    from dpstudio.engine.query.multi import refine_multicomponent
    from dpstudio.engine.query.refinement import refine_query

    sup, pr = _support_prior(comps[0], support, prior)
    g = _rng_context(comps, "refinement", eps_fraction(eps_in), None, [sup], None, groups, split)
    g["prior"] = pr.describe()
    g["distance"] = str(distance)
    gen = _keyed(rng, df, comps, g)
    if isinstance(q, MultiQuery):
        ans = refine_multicomponent(
            df, q, [pr] * len(comps), eps_in, rng=gen, ledger=ledger, split=split, requester=requester
        )
    else:
        grp = None
        if q.by:
            grp = groups.get(q.by) if isinstance(groups, dict) else groups
        ans = refine_query(
            df, q, pr, eps_in, kind, gen, ledger=ledger, groups=grp, split=split, requester=requester,
            distance=distance,
        )  # fmt: skip
    ans.mechanism = "refinement"
    ans.accuracy = acc
    if ans.groups is None and ans.components is None and isinstance(sup, NumericRange):
        try:
            i = sup.index_of(float(ans.response))[0]
            ans.interval = refinement_interval(pr, ans.epsilon, ans.kind, i, split) or (sup.lo, sup.hi)
            ans.interval_note = (
                "covers the true answer (clamped to the declared range) with probability ≥ 95 % whatever it is "
                "(Neyman construction over the refined distributions)"
                if sup.size <= NEYMAN_MAX
                else f"the declared range (the refinement's interval is computed for grids of at most {NEYMAN_MAX:,} points)"
            )
        except (TypeError, ValueError):
            pass
    return ans


# =========================================================================== the researcher's answer file

ANSWERS_FORMAT = "dpstudio-query-answers"
#: The fields of a ledger entry the researcher may see (the ledger never holds a true answer).
PUBLIC_FIELDS = ("n", "time", "query", "kind", "mechanism", "epsilon", "response", "interval_95", "prior")


def answer_file(ledger: BudgetLedger, requester: str | None) -> dict:
    """The PUBLIC answer file of one requester: their answers' public fields only (query,
    mechanism, ε, response, 95 % interval, prior), and their remaining budget when they have
    one.  Nothing else of the ledger (other requesters, the data set's total, events).
    """
    mine = [e for e in ledger.entries if (e.get("requester") or None) == (requester or None)]
    out: dict[str, Any] = {
        "format": ANSWERS_FORMAT,
        "version": 1,
        "dataset": ledger.dataset,
        "requester": requester,
        "answers": [{k: e[k] for k in PUBLIC_FIELDS if k in e} for e in mine],
    }
    if requester and requester in ledger.requesters:
        out["budget"] = float(ledger.requesters[requester])
        out["remaining"] = float(ledger.requesters[requester] - ledger.spent_by_exact(requester))
    return out


def _answer_file_plan(path, inputs):
    """The one guarded writer's plan of an answer file (:mod:`dpstudio.engine.safe_write`)."""
    from dpstudio.engine.errors import InputError
    from dpstudio.engine.safe_write import WritePlan

    if not str(path).lower().endswith(".json"):
        raise InputError(f"Answer file {path}: name a .json file.")
    plan = WritePlan(inputs=[x for x in inputs if x])
    key = plan.file(path, what="answer file")
    return plan.check(), key


def check_answer_file_target(path, inputs=()) -> str:
    """Refuse (one line) an answer-file target the guarded writer would refuse -- an input (the
    data, the ledger), a folder, a FIFO, a device, a link, a read-only file, a missing folder --
    BEFORE any answer is drawn, so that a bad target never costs ε.
    """
    _plan, key = _answer_file_plan(path, inputs)
    return key


def export_answer_file(path, ledger: BudgetLedger, requester: str | None, *, inputs=()) -> str:
    """Write :func:`answer_file` to ``path`` (a PUBLIC file: normal permissions) through the one
    guarded writer (atomic; the target checked first).
    """
    plan, key = _answer_file_plan(path, inputs)
    text = json.dumps(answer_file(ledger, requester), indent=2, ensure_ascii=False, allow_nan=False)

    def writer(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return plan.write(key, writer)


# =========================================================================== text of an answer (CLI)


def _num(v) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.6g}"
    return str(v)


def answer_lines(ans: QueryAnswer, *, remaining: str | None = None) -> list[str]:
    """The PUBLIC text of an answer, one ``key: value`` per line (``dpstudio query`` prints
    them): query, mechanism (and why, for ``auto``), ``response: …``, ``interval 95 %: [lo, hi]``
    (one per group; for quantiles and modes the declared range with the rank statement), prior,
    ε spent, the remaining budget and the guarantee.
    """
    pub = ans.public()
    lines = [f"query: {pub['query']}"]
    why = (pub.get("accuracy") or {}).get("why")
    lines.append(f"mechanism: {pub['mechanism']}" + (f" ({why})" if why else ""))
    resp = pub["response"]
    lines.append(
        "response: "
        + (", ".join(f"{k}={_num(v)}" for k, v in resp.items()) if isinstance(resp, dict) else _num(resp))
    )
    itv = pub.get("interval_95")
    note = pub.get("interval_note") or ""
    if itv is None:
        sup = ans.support
        rng_txt = (
            f"[{_num(sup[0])}, {_num(sup[-1])}]"
            if sup and not isinstance(sup[0], list)
            else "the declared range"
        )
        lines.append(f"interval 95 %: {rng_txt} ({note})" if note else f"interval 95 %: {rng_txt}")
    elif itv and isinstance(itv[0], list) or (itv and itv[0] is None):
        labels = ans.groups or [str(i + 1) for i in range(len(itv))]
        parts = [
            f"{g}=[{_num(v[0])}, {_num(v[1])}]" if v else f"{g}=(rank statement)" for g, v in zip(labels, itv)
        ]
        lines.append("interval 95 %: " + "; ".join(parts) + (f" ({note})" if note else ""))
    else:
        lines.append(f"interval 95 %: [{_num(itv[0])}, {_num(itv[1])}]" + (f" ({note})" if note else ""))
    lines.append(f"prior: {pub['prior']}")
    eps_line = f"epsilon spent: {_num(pub['epsilon'])}"
    if pub.get("rho") is not None:
        eps_line += f" (Gaussian: ρ = {pub['rho']:.6g}, δ = {pub['delta']:g})"
    if remaining is not None:
        eps_line += f"; remaining budget: {remaining}"
    lines.append(eps_line)
    lines.append(f"guarantee: {pub['guarantee']}")
    return lines


__all__ = [
    "answer_lines",
    "ANSWERS_FORMAT",
    "PUBLIC_FIELDS",
    "answer_file",
    "check_answer_file_target",
    "export_answer_file",
    "NEYMAN_MAX",
    "answer_query",
    "assess",
    "assess_components",
    "refinement_accuracy",
    "planned_interval_width",
    "refinement_interval",
    "refinement_interval_width",
    "refinement_rows",
]
_ = Any
