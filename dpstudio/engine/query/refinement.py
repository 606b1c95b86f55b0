"""Query desk: answer single statistics under ε-DP by knowledge refinement (thesis ch. 5).

A researcher submits a query (``"mean(income) where region == 3"``) *and* her prior knowledge
of the answer: a distribution over a declared range (uniform if she knows nothing).  The office
computes the true answer f(D), refines the prior -- the points nearest f(D) get their mass
multiplied by αu, the farthest by αd, one distance level in between by αud so the total is
one (thesis Algorithm 5.1) -- and returns ONE draw of the refined distribution.

Guarantee.  The response's distribution is the prior times a factor in [αd, αu]:

* statistical queries (count, proportion, mean, sum, median, mode): αu/αd ≤ e^ε, so for ANY
  two data sets (not only neighbours) the probability of every response differs by at most
  e^ε -- ε-DP whatever the query's sensitivity (thesis Table 5.2, Proposition 2);
* individual queries (``value(col) where <filter>``: one record's value): αu ≤ e^ε,
  αd ≥ e^{-ε}.  When exactly one record matches the filter the prior is refined around its
  value, otherwise (none, or several) the response is a draw from the prior itself; adding or
  removing one record moves between these, so the ratio to the neighbour's distribution is at
  most e^ε (Proposition 3; changing the record's value is two steps: 2ε).

Decisions where the thesis is silent (see ``docs/query_desk.md``):

* Ranges are DECLARED, never read from the data.  A true answer outside the declared range is
  clamped into it (refusing would tell the researcher that it lies outside; clamping is part of
  the query function, which knowledge refinement does not need to bound).  It is then snapped to
  the nearest grid point (numeric ranges are discretised with a declared step).
* An empty filter (no records for a mean/median/mode, no or several records for an individual
  query) answers from the prior: also ε-DP, and it is not refused (a refusal would leak).
* The response support is finite: the declared categories, or the grid lo, lo+step, …, hi.
  Distances (Table 5.1) are exact integers: |i − j| grid steps (continuous and ordinal), 0/1
  (nominal).
* Exactness: the prior is quantised once to integer weights (data independent, total ≈ 2⁵²);
  αu, αd are dyadic rationals A/2⁶⁴ rounded towards privacy (αu down from e^{tε}, αd up from
  e^{-(1-t)ε}, with rigorous decimal bounds of e^x), so αu/αd ≤ e^ε holds exactly; the sets Uu,
  Ud and the factor αud are computed in integer arithmetic, and the draw uses only uniform
  integers (rejection from random bits).  No floating-point number enters the distribution
  that is sampled.

Thesis slips found while implementing (tests ``test_thesis_*``):

* §5.2 / Algorithm 5.1 steps a-b swap pu and pd: the mass condition αu·P(Uu) + αd·(1−P(Uu)) = 1
  gives P(Uu) = (1 − αd)/(αu − αd), not (αu − 1)/(αu − αd) (Table 5.5 uses the right one:
  size(Uu) = 0.269 at ε = 1).
* Algorithm 5.1 step iv divides by 1 − pu − pd, which is 0; the factor that makes the mass one
  is αud = (1 − αu·P(U'u) − αd·P(U'd)) / (1 − P(U'u) − P(U'd)).
* §5.5.1 writes 0.02182 for 0.027182 in the last sum and rounds e^{±1}/100 down
  (0.003678, 0.027182; 0.0036788 and 0.0271828 to 5 digits); P(K = 1) = 0.0039138, not 0.003912.
* Table 5.5's Laplace column "P(K ∈ [0, 1])" is not 1 − e^{−ε/2} (0.0488, 0.293, 0.393, 0.632
  for ε = 0.1, ln 2, 1, 2); the thesis prints 0.476, 0.549, 0.607, 0.684.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query.answer import QueryAnswer, check_epsilon, positive_epsilon
from dpstudio.engine.query.ledger import BudgetLedger, eps_fraction, locked_ledger
from dpstudio.engine.query.parser import (
    NUMERIC_AGGREGATES,
    MultiQuery,
    Query,
    _col,
    _columns_of,
    _compare,
    _key,
    _plain,
    evaluate_filter,
    parse_any,
    parse_filter,
    parse_query,
)
from dpstudio.engine.query.ranges import CategoricalRange, NumericRange, Prior
from dpstudio.engine.random import as_rng

ALPHA_BITS = 64  # αu, αd are A / 2^64


# =========================================================================== exact factors


def exp_bounds(x: Fraction, prec: int = 60) -> tuple[Fraction, Fraction]:
    """Rigorous rational bounds lo ≤ e^x ≤ hi for a rational x (any sign)."""
    from dpstudio.engine.algorithms.noise import _exp_neg_bounds

    if x >= 0:
        lo, hi = _exp_neg_bounds(x, prec)  # bounds of e^{-x}
        return 1 / hi, 1 / lo
    return _exp_neg_bounds(-x, prec)


def factors(epsilon: float | Fraction, kind: str, split: float = 0.5) -> tuple[int, int]:
    """Integer numerators (Au, Ad) of αu = Au/2⁶⁴ and αd = Ad/2⁶⁴ (Table 5.2).

    individual: αu ≤ e^ε, αd ≥ e^{-ε}; statistical: αu ≤ e^{tε}, αd ≥ e^{-(1-t)ε} with
    t = ``split`` ∈ [0, 1], so αu/αd ≤ e^ε.  Rounded towards privacy (αu down, αd up).

    >>> au, ad = factors(1.0, "individual")
    >>> round(au / 2**64, 6), round(ad / 2**64, 6)
    (2.718282, 0.367879)
    """
    eps = epsilon if isinstance(epsilon, Fraction) else eps_fraction(epsilon)
    if kind == "individual":
        up, down = eps, eps
    else:
        t = Fraction(float(split))
        up, down = t * eps, (1 - t) * eps
    one = 1 << ALPHA_BITS
    au = math.floor(exp_bounds(up)[0] * one)
    ad = math.ceil(exp_bounds(-down)[1] * one)
    return max(au, one), min(ad, one)


# =========================================================================== the true answer (PRIVATE)


def true_answer(df: pd.DataFrame, query: Query, mask: np.ndarray | None = None):
    """f(D) for one component (``None`` when undefined: no records / no unique record).
    PRIVATE: never shown to the researcher.
    """
    if mask is None:
        mask = evaluate_filter(df, parse_filter(query.where))
    agg = query.agg
    if agg == "count":
        return int(mask.sum())
    if agg == "proportion":
        return float(mask.sum()) / len(df) if len(df) else None
    if query.column is None:
        raise ParameterError(f"Query: {agg}(…) needs a column.")
    s = _col(df, query.column)[mask]
    if agg == "value":
        if len(s) != 1 or pd.isna(s.iloc[0]):
            return None
        return _plain(s.iloc[0])
    if agg == "mode":
        s = s.dropna()
        if not len(s):
            return None
        return s.map(_key).value_counts()  # modal category chosen among the declared ones
    x = pd.to_numeric(s, errors="coerce")
    if x.isna().all() and len(x) and not pd.api.types.is_numeric_dtype(s):
        raise ParameterError(f"Query: {agg}({query.column}) needs a numeric column.")
    xs = x.dropna().to_numpy(dtype=np.float64)
    if agg == "sum":
        return _exact_sum(xs)
    if agg == "ratio":
        den = pd.to_numeric(_col(df, query.column2 or "")[mask], errors="coerce")
        both = x.notna().to_numpy() & den.notna().to_numpy()
        d = _exact_sum(den.to_numpy(dtype=np.float64)[both])
        return None if d == 0 else _exact_sum(x.to_numpy(dtype=np.float64)[both]) / d
    if not len(xs):
        return None
    if agg == "mean":
        return _exact_sum(xs) / len(xs)
    if agg == "variance":  # population variance (ddof 0)
        return float(np.var(xs))
    if agg in ("min", "max", "quantile"):
        p = {"min": 0.0, "max": 1.0}.get(agg, query.param)
        return float(np.quantile(xs, float(p if p is not None else 0.5)))
    return float(np.median(xs))


def _exact_sum(xs: np.ndarray) -> float:
    """``math.fsum`` of the values; ±inf when they include ±inf (or overflow), NaN when they
    include both +inf and -inf (an undefined answer: answered from the prior).
    """
    try:
        return float(math.fsum(xs))
    except ValueError:  # -inf + inf
        return math.nan
    except OverflowError:  # finite values whose sum exceeds 1.8e308
        return math.copysign(math.inf, float(np.sum(xs)))


# =========================================================================== refinement


def refine_weights(
    prior_w: Sequence[int], dist: Sequence[int], au: int, ad: int, one: int = 1 << ALPHA_BITS
) -> tuple[list[int], list[int], dict]:
    """Algorithm 5.1 in integer arithmetic.

    ``prior_w``: integer prior weights; ``dist``: integer distance of each point to f(D);
    factors αu = au/one ≥ 1, αd = ad/one ≤ 1.  Returns (class, mass, info): ``class[i]`` is
    0 (U'u, factor αu), 1 (middle level, factor αud) or 2 (U'd, factor αd); ``mass`` the three
    class totals over the common denominator one·W (exact; they sum to one·W).

    The sets Uu are balls {d ≤ r} (= {d < r'}), unions of whole distance levels: with
    pu = (1 − αd)/(αu − αd) (the prior mass that Uu must have), if a ball has mass exactly pu
    it gets αu and the rest αd; otherwise U'u is the largest ball with mass < pu, U'd the
    complement of the smallest ball with mass > pu, and the one level between them gets
    αud = (1 − αu·P(U'u) − αd·P(U'd)) / P(level) ∈ (αd, αu).
    """
    w = list(map(int, prior_w))
    d = list(map(int, dist))
    W = sum(w)
    if W <= 0:
        raise ParameterError("The prior has no mass.")
    if au == ad:  # ε so small that both factors round to 1
        return [2] * len(w), [0, 0, one * W], {"branch": "identity", "pu": None}
    levels: dict[int, int] = {}
    for wi, di in zip(w, d):
        levels[di] = levels.get(di, 0) + wi
    num, den = (one - ad), (au - ad)  # pu = num/den
    cum = 0
    r_mid = None
    exact = False
    inner = 0
    for r in sorted(levels):
        c = cum + levels[r]
        lhs, rhs = c * den, num * W  # compare P(ball r) = c/W with pu
        if lhs == rhs:
            r_mid, exact, inner = r, True, c
            break
        if lhs > rhs:
            r_mid, inner = r, cum
            break
        cum = c
    if r_mid is None:  # cannot happen (pu < 1); keep the prior
        return [2] * len(w), [0, 0, one * W], {"branch": "identity", "pu": None}
    if exact:
        cls = [0 if di <= r_mid else 2 for di in d]
        mass = [au * inner, 0, ad * (W - inner)]
        info = {"branch": "then", "radius": r_mid}
    else:
        mid = levels[r_mid]
        outer = W - inner - mid
        cls = [0 if di < r_mid else (1 if di == r_mid else 2) for di in d]
        m_mid = one * W - au * inner - ad * outer
        mass = [au * inner, m_mid, ad * outer]
        info = {"branch": "else", "radius": r_mid, "alpha_ud": Fraction(m_mid, one * mid) if mid else None}
    assert sum(mass) == one * W
    info.update(pu=Fraction(num, den), alpha_u=Fraction(au, one), alpha_d=Fraction(ad, one))
    return cls, mass, info


def refine_weights_array(
    w: np.ndarray, d: np.ndarray, au: int, ad: int, one: int = 1 << ALPHA_BITS
) -> tuple[np.ndarray, list[int]] | None:
    """:func:`refine_weights` vectorised for int64 weights whose total is below 2⁶² and int64
    distances: the same classes (an int8 array) and the same exact masses (Python integers),
    the level masses summed exactly in int64 and compared with pu in Python integers
    (tested against :func:`refine_weights`).  None when it does not apply (the caller uses
    :func:`refine_weights`).
    """
    W = int(w.sum()) if w.size else 0
    if W <= 0 or W >= (1 << 62) or au == ad or int(w.min()) < 0:
        return None
    order = np.argsort(d, kind="stable")
    ds = d[order]
    lv, start = np.unique(ds, return_index=True)
    cum = np.cumsum(np.add.reduceat(w[order], start))
    num, den = (one - ad), (au - ad)
    # the first level whose ball reaches pu: c·den ≥ num·W  ⟺  c ≥ ⌈num·W/den⌉ (c an integer)
    T = -((-num * W) // den)
    j = int(np.searchsorted(cum, T, side="left"))
    if j >= lv.size:
        return None
    r_mid = int(lv[j])
    c = int(cum[j])
    if c * den == num * W:
        cls = np.where(d <= r_mid, 0, 2).astype(np.int8)
        return cls, [au * c, 0, ad * (W - c)]
    inner = int(cum[j - 1]) if j > 0 else 0
    outer = W - c
    cls = np.where(d < r_mid, 0, np.where(d == r_mid, 1, 2)).astype(np.int8)
    return cls, [au * inner, one * W - au * inner - ad * outer, ad * outer]


def sample_refined_array(rng: np.random.Generator, w: np.ndarray, cls: np.ndarray, mass) -> int:
    """:func:`sample_refined` for int64 weights (total below 2⁶²) and an array of classes: the
    same uniform integers drawn in the same order, hence the same point (tested).
    """
    u = _uniform_int(rng, sum(mass))
    c = 0 if u < mass[0] else (1 if u < mass[0] + mass[1] else 2)
    idx = np.flatnonzero((cls == c) & (w > 0))
    cw = np.cumsum(w[idx])
    v = _uniform_int(rng, int(cw[-1]))
    return int(idx[int(np.searchsorted(cw, v, side="right"))])


def refined_floats(prior_w, cls, mass) -> list[float]:
    """:func:`refined_probabilities` as floats, computed with numpy (for display: the office's
    plot); the draw never uses them.
    """
    if isinstance(prior_w, np.ndarray):
        w = prior_w.astype(np.float64)
    else:
        w = (
            np.asarray([float(x) for x in prior_w])
            if len(prior_w) and max(prior_w) >= 2**62
            else np.asarray(prior_w, dtype=np.float64)
        )
    c = np.asarray(cls, dtype=np.int64)
    tot = np.array([w[c == k].sum() for k in range(3)])
    total = float(sum(mass))
    share = np.array([float(m) / total if t > 0 else 0.0 for m, t in zip(mass, tot)])
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(tot > 0, share / np.where(tot > 0, tot, 1.0), 0.0)
    return (w * per[c]).tolist()


def refined_probabilities(prior_w, cls, mass) -> list[Fraction]:
    """Exact refined probability of every point (for tests and display)."""
    tot = [0, 0, 0]
    for wi, c in zip(prior_w, cls):
        tot[c] += int(wi)
    total = sum(mass)
    return [
        Fraction(mass[c] * int(wi), tot[c] * total) if tot[c] else Fraction(0) for wi, c in zip(prior_w, cls)
    ]


def _uniform_int(rng: np.random.Generator, n: int) -> int:
    """Exact uniform integer in [0, n) from random bits (rejection): the engine's one such draw
    (:func:`dpstudio.engine.algorithms.noise._uniform_below`).
    """
    from dpstudio.engine.algorithms.noise import _uniform_below

    return _uniform_below(rng, n)


def sample_refined(rng: np.random.Generator, prior_w, cls, mass) -> int:
    """One exact draw: a class ∝ its exact mass, then a point of it ∝ its prior weight.

    Weights may be arbitrarily large integers (a joint prior is the exact product of its
    components' weights): beyond int64 the cumulative sums are Python integers.
    """
    u = _uniform_int(rng, sum(mass))
    c = 0 if u < mass[0] else (1 if u < mass[0] + mass[1] else 2)
    idx = [i for i, k in enumerate(cls) if k == c and prior_w[i] > 0]
    ws = [int(prior_w[i]) for i in idx]
    if sum(ws) < (1 << 62):
        cw = np.cumsum(np.asarray(ws, dtype=np.int64))
        v = _uniform_int(rng, int(cw[-1]))
        return idx[int(np.searchsorted(cw, v, side="right"))]
    acc = list(itertools.accumulate(ws))
    v = _uniform_int(rng, acc[-1])
    return idx[bisect.bisect_right(acc, v)]


#: The distances d_i a researcher may ask for (thesis Protocol 2: q_i = (f_i, P_fi, d_i, ε_i)).
USER_DISTANCES = ("grid", "log", "asymmetric:R")


def check_distance(distance: str | None, support=None) -> str | None:
    """Validate a user distance (one line otherwise): ``grid`` (|i − j| steps, Table 5.1;
    the default), ``log`` (|ln x − ln f| for a range of numbers ≥ 0: relative errors), or
    ``asymmetric:R`` (an under-estimate counts R times an over-estimate, R > 0).
    """
    if distance in (None, "", "grid"):
        return None
    d = str(distance).strip().lower()
    if d == "log":
        if support is not None and (not isinstance(support, NumericRange) or support.lo < 0):
            raise ParameterError("distance log: needs a numeric range of numbers >= 0.")
        return d
    if d.startswith("asymmetric:"):
        try:
            r = float(d.split(":", 1)[1])
        except ValueError:
            r = math.nan
        if not (0 < r < 1e6):
            raise ParameterError(f"distance {distance!r}: write asymmetric:R with R > 0 (e.g. asymmetric:3).")
        if (
            support is not None
            and not isinstance(support, NumericRange)
            and not getattr(support, "ordered", False)
        ):
            raise ParameterError("distance asymmetric: needs a numeric or ordered range.")
        return d
    raise ParameterError(f"distance {distance!r}: use {', '.join(USER_DISTANCES)}.")


def _distances(support, center: int, distance: str | None = None) -> list[int]:
    """Integer distance of every point to the centre: Table 5.1 (grid steps; nominal 0/1), or the
    researcher's d_i (Protocol 2).  Any distance keeps ε-DP: the factors stay in [αd, αu]; it
    only decides which points gain.  Exact integers (scaled by 10⁶ and rounded for log).
    """
    n = support.size
    if isinstance(support, CategoricalRange) and not support.ordered:
        return [0 if i == center else 1 for i in range(n)]
    if distance is None:
        return [abs(i - center) for i in range(n)]
    if distance == "log":
        x = support.values()
        shift = float(support.step or 1.0)  # log(x + step): 0 stays finite
        lx = np.log(x + shift)
        return [int(v) for v in np.rint(np.abs(lx - lx[center]) * 1e6)]
    r = float(distance.split(":", 1)[1])
    k = Fraction(repr(r)).limit_denominator(10**6)
    return [
        int((center - i) * k.numerator) if i < center else int((i - center) * k.denominator) for i in range(n)
    ]


def _guarantee(kind: str, eps: float, support, groups: list | None, split: float) -> str:
    rng_txt = "the declared range " + support.describe()
    outside = (
        "a true answer outside it was clamped into it"
        if isinstance(support, NumericRange)
        else "a true answer that is not a declared category is answered from the prior"
    )
    if kind == "individual":
        core = (
            f"ε-differential privacy with ε = {eps:g} with respect to adding or removing one "
            "record (changing the queried record's value is covered with 2ε): the prior was "
            "refined with αu ≤ e^ε on the values nearest the record's value and αd ≥ e^−ε on "
            "the others (thesis Proposition 3); when no single record matches the filter the "
            "response is a draw from the prior."
        )
    else:
        core = (
            f"ε-differential privacy with ε = {eps:g}, independent of the query's "
            "sensitivity: the prior was refined with factors αu ≤ e^(tε), αd ≥ e^(−(1−t)ε) "
            f"(t = {split:g}), so for any two data sets the probability of every response "
            "differs by at most e^ε (thesis Proposition 2)."
        )
    grp = ""
    if groups is not None:
        grp = (
            f" The {len(groups)} group answers come from disjoint sets of records and are "
            "drawn independently, so together they are ε-DP with respect to adding or removing "
            "one record (thesis Proposition 4)."
        )
    return (
        "Answered by knowledge refinement (Soria-Comas, thesis ch. 5): one draw from the "
        "researcher's prior after refinement towards the true answer; "
        + core
        + grp
        + f" The response lies in {rng_txt}; {outside}. "
        "The draw is exact: integer arithmetic and uniform random integers only, no "
        "floating-point approximation of the distribution. Sequential composition: this "
        f"answer spends ε = {eps:g} of the data set's query budget."
    )


def _as_prior(prior, query: Query) -> Prior:
    if isinstance(prior, Prior):
        return prior
    raise ParameterError(
        "prior must be a dpstudio Prior (e.g. Prior.uniform(NumericRange(0, 1))) "
        "or parsed with parse_prior()."
    )


def validate_request(
    df: pd.DataFrame, query: Query, prior: Prior, kind: str | None, groups
) -> tuple[str, list | None]:
    """(kind, groups) of a request, checked against the data's columns and the declared range
    (one-line :class:`ParameterError`; nothing is computed from the values).
    """
    if kind is None:
        kind = query.kind
    if kind not in ("statistical", "individual"):
        raise ParameterError(f"kind must be 'statistical' or 'individual', got {kind!r}.")
    if kind == "individual" and query.kind != "individual":
        raise ParameterError(
            f"{query.agg} is a statistical query (it depends on many records): "
            "answer it with kind='statistical'; the individual factors would "
            "spend 2ε."
        )
    cols = _columns_of(parse_filter(query.where))
    if query.column:
        cols.add(query.column)
    for c in (query.column2, query.by, query.by2):
        if c:
            cols.add(c)
    for c in cols:
        _col(df, c)
    if query.by2:
        raise ParameterError(
            f"by {query.by}, {query.by2}: a contingency table is answered by noise "
            "(--mechanism laplace or gaussian), not by knowledge refinement."
        )
    sup = prior.support
    if query.agg != "mode" and query.agg != "value" and not isinstance(sup, NumericRange):
        raise ParameterError(f"{query.agg} has a numeric answer: declare a numeric range LOWER:UPPER[:STEP].")
    if query.agg == "mode" and not isinstance(sup, CategoricalRange):
        raise ParameterError(
            f"mode({query.column}) answers a category: declare the categories "
            f"(e.g. --range {query.column}=1,2,3)."
        )
    for c in (query.column, query.column2):
        if (
            c
            and (query.agg in NUMERIC_AGGREGATES or (query.agg == "value" and isinstance(sup, NumericRange)))
            and not pd.api.types.is_numeric_dtype(df[c])
        ):
            raise ParameterError(f"{query.agg}({query.column}): column {c!r} is not numeric.")
    if query.by:
        if groups is None or len(list(groups)) == 0:
            raise ParameterError(
                f"'by {query.by}' needs the groups declared (not read from the "
                f"data), e.g. --groups {query.by}=1,2,3."
            )
        if query.agg == "proportion":
            raise ParameterError(
                f"proportion … by {query.by}: every group's proportion divides by the number of ALL "
                "records, so the groups are not disjoint (thesis Proposition 4 does not apply); ask "
                f"count … by {query.by} instead."
            )
        groups = list(groups)
        if len(set(map(_key, groups))) != len(groups):
            raise ParameterError(f"The declared groups of {query.by!r} contain duplicates.")
    else:
        groups = None
    prior.weights()  # prior errors now, before any spending
    return kind, groups


def _component(df, query: Query, sup, w, mask, au: int, ad: int, distance: str | None = None):
    """(class, mass, center index, true value, operator note) of one query component.  With
    ``w`` an int64 array (total below 2⁶²) and the grid distance, the vectorised
    :func:`refine_weights_array` (classes as an array); else :func:`refine_weights`.
    """
    center, tv, note = _center(df, query, sup, mask)
    if center is None:
        return [2] * len(w), [0, 0, (1 << ALPHA_BITS) * int(sum(w))], None, tv, note
    if isinstance(w, np.ndarray) and distance is None and isinstance(sup, NumericRange):
        fast = refine_weights_array(w, np.abs(np.arange(sup.size, dtype=np.int64) - center), au, ad)
        if fast is not None:
            return fast[0], fast[1], center, tv, note
    cls, mass, _ = refine_weights(list(map(int, w)), _distances(sup, center, distance), au, ad)
    return cls, mass, center, tv, note


def _center(df, query: Query, sup, mask):
    """(grid index of f(D) or None when undefined, true value, operator note). PRIVATE."""
    tv = true_answer(df, query, mask)
    center, note = None, ""
    if tv is not None:
        if query.agg == "mode":
            cnt = [int(tv.get(_key(c), 0)) for c in sup.values()]
            # the most frequent declared category (ties: the first declared)
            center = int(np.argmax(cnt)) if max(cnt) > 0 else None
            if center is None:
                note = "no record has a declared category: answered from the prior."
        elif isinstance(sup, CategoricalRange):
            center, _ = sup.index_of(tv)
            if center is None:
                note = f"the true value {tv!r} is not a declared category: answered from the prior."
        else:
            try:
                x = float(tv)
            except (TypeError, ValueError):
                x = float("nan")
            if math.isnan(x):
                note = f"the true value {tv!r} is not a number: answered from the prior."
            else:
                center, clamped = sup.index_of(x)
                if clamped:
                    note = (
                        f"the true answer {x:g} lies outside the declared range and was "
                        f"clamped to {sup.value(center):g}."
                    )
    else:
        why = "no single record matches" if query.agg == "value" else "no record matches"
        note = f"{why} the filter: answered from the prior."
    return center, tv, note


def exact_distribution(
    df: pd.DataFrame,
    query,
    prior: Prior,
    epsilon: float,
    kind: str | None = None,
    split: float = 0.5,
    *,
    distance: str | None = None,
) -> list[Fraction]:
    """The exact refined distribution (fractions over the support) that :func:`refine_query`
    samples for a query without groups.  PRIVATE: it discloses the true answer.
    """
    if not isinstance(query, Query):
        query = parse_query(query)
    eps = check_epsilon(epsilon)
    kind, _groups = validate_request(df, query, prior, kind, None)
    au, ad = factors(eps, kind, split)
    w = prior.weights()
    mask = evaluate_filter(df, parse_filter(query.where))
    dist = check_distance(distance, prior.support)
    cls, mass, *_ = _component(df, query, prior.support, w, mask, au, ad, dist)
    return refined_probabilities(w, cls, mass)


def refine_query(
    df: pd.DataFrame,
    query,
    prior: Prior,
    epsilon: float,
    kind: str | None = None,
    rng=None,
    *,
    ledger: BudgetLedger | str | os.PathLike | None = None,
    groups: Iterable | None = None,
    split: float = 0.5,
    requester: str | None = None,
    distance: str | None = None,
) -> QueryAnswer:
    """Answer ``query`` on ``df`` by knowledge refinement of ``prior`` (ε-DP, thesis ch. 5).
    ``distance``: the researcher's d_i (Protocol 2; :func:`check_distance`), default the grid.

    ``query``: a :class:`Query` or its text (:func:`parse_query`); ``prior``: a :class:`Prior`
    over the declared range of the answer; ``kind``: 'statistical' or 'individual' (default
    from the query: ``value(…)`` is individual; claiming 'individual' for a statistical query
    is refused); ``split`` t ∈ [0, 1] for statistical queries (αu = e^{tε}, αd = e^{-(1-t)ε});
    ``groups``: declared groups of a ``… by COL`` query (one component per group, disjoint
    records: ε in total, Proposition 4).  With a ``ledger`` the ε is spent there; a query
    beyond the remaining budget raises :class:`BudgetExceeded` and spends nothing, as does
    any invalid query.  ``ledger`` may be the path of a ledger file: the whole answer then runs
    under the file's lock (:func:`locked_ledger`) and the file is written before the answer
    is returned.  ``rng``: a Generator or seed (default: OS entropy).
    """
    if isinstance(ledger, (str, os.PathLike)):
        with locked_ledger(ledger) as bound:
            return refine_query(
                df,
                query,
                prior,
                epsilon,
                kind,
                rng,
                ledger=bound,
                groups=groups,
                split=split,
                requester=requester,
                distance=distance,
            )
    if isinstance(query, str):
        query = parse_any(query)
    if isinstance(query, MultiQuery):  # a vector answer (thesis §5.3): jointly, one prior each
        if groups is not None:
            raise ParameterError("A multicomponent query has no groups (ask '… by COL' separately).")
        from dpstudio.engine.query.multi import refine_multicomponent

        return refine_multicomponent(
            df, query, prior, epsilon, kind=kind, rng=rng, ledger=ledger, split=split, requester=requester
        )
    if not isinstance(query, Query):
        query = parse_query(query)
    prior = _as_prior(prior, query)
    eps = positive_epsilon(epsilon)
    if not (0.0 <= float(split) <= 1.0):
        raise ParameterError(f"split t must be in [0, 1], got {split!r}.")
    kind, groups = validate_request(df, query, prior, kind, groups)
    dist = check_distance(distance, prior.support)
    if ledger is not None:
        ledger.check(eps, requester)  # beyond the budget: refused first, whatever ε (nothing spent)
    eps = check_epsilon(eps)
    rng = as_rng(rng)
    au, ad = factors(eps, kind, split)
    w = prior.weights()
    sup = prior.support
    wa = np.asarray(w, dtype=np.int64) if w and sum(w) < (1 << 62) and min(w) >= 0 else None
    base_mask = evaluate_filter(df, parse_filter(query.where))
    comps = [None] if groups is None else groups
    responses, trues, refined_all, notes, counts = [], [], [], [], []
    for g in comps:
        mask = base_mask if g is None else base_mask & _compare(df[query.by], "==", g).to_numpy()
        counts.append(int(np.count_nonzero(mask)))
        label = "" if g is None else f"group {query.by} = {g}: "
        cls, mass, center, tv, note = _component(df, query, sup, w if wa is None else wa, mask, au, ad, dist)
        if note:
            notes.append(label + note)
        if wa is not None and isinstance(cls, np.ndarray):
            i = sample_refined_array(rng, wa, cls, mass)
        else:
            i = sample_refined(rng, w, cls, mass)
        responses.append(sup.value(i))
        trues.append(
            tv if query.agg != "mode" or tv is None else (sup.value(center) if center is not None else None)
        )
        refined_all.append(refined_floats(w if wa is None else wa, cls, mass))
    support_vals = (
        sup.values().tolist() if isinstance(sup, NumericRange) else [_plain(v) for v in sup.values()]
    )
    ans = QueryAnswer(
        query=query.describe(),
        kind=kind,
        epsilon=eps,
        response=responses[0] if groups is None else responses,
        guarantee=_guarantee(kind, eps, sup, groups, float(split))
        + (
            f" The researcher's distance d = {dist} ordered the points (any distance keeps ε-DP)."
            if dist
            else ""
        ),
        prior=prior.describe(),
        support=support_vals,
        prior_probs=prior.probabilities().tolist(),
        refined=refined_all[0] if groups is None else refined_all,
        true_value=trues[0] if groups is None else trues,
        notes=notes,
        groups=None if groups is None else [_plain(g) for g in groups],
        records=counts[0] if groups is None else counts,
    )
    if ledger is not None:
        ledger.spend(
            eps,
            query=ans.query,
            kind=kind,
            prior=ans.prior,
            response=ans.public()["response"],
            requester=requester,
        )
        ans.remaining = ledger.remaining
    return ans


# =========================================================================== (ε, δ) variant (§5.2)


def delta_refinement(
    refined: Sequence[Fraction], dist: Sequence[int], delta, epsilon, kind: str
) -> list[Fraction]:
    """The (ε, δ) variant of §5.2 (Figures 5.2, 5.3 bottom/right), exact: move δ′ of probability
    from the points farthest from f(D) (the farthest first, each emptied before the next) to
    f(D) (distance 0).  δ′ = δ·e^{−ε} for an individual query (compared with the prior: the
    removed mass may be owed e^ε times over) and δ′ = δ/(1 + e^ε) for a statistical one (any
    two data sets: added at one, removed at the other).  The thesis's δ′ = δ/2 for statistical
    queries breaks (ε, δ)-DP when f(D1) is among the points farthest from f(D2): the excess is
    δ′(1 + e^ε) > δ (``tests/engine/test_query_desk2.py``).  Not offered by the desk: with an
    admissible δ (≪ 1/n) the gain is below δ times the range's width.
    """
    eps = Fraction(repr(float(epsilon)))
    e_lo, e_hi = exp_bounds(eps)
    d = Fraction(repr(float(delta)))
    move = d / e_hi if kind == "individual" else d / (1 + e_hi)  # rounded towards privacy
    out = list(refined)
    centre = [i for i, x in enumerate(dist) if x == 0]
    left = move
    for i in sorted(range(len(out)), key=lambda i: -dist[i]):
        if left <= 0 or dist[i] == 0:
            break
        take = min(out[i], left)
        out[i] -= take
        left -= take
    out[centre[0]] += move - left
    return out
