"""Query desk (issue 26, session 3): the 95 % interval of several-part statistics (mean,
variance, ratio) covers 95 ± 2 % on Census and Adult at ε ∈ {0.1, 1}, a too-narrow interval
fails that test, and the fast paths (planning simulation, refinement) answer exactly what the
slow ones did.
"""

from __future__ import annotations

import math
import random
import zlib
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.query import NumericRange, Prior, parse_query
from dpstudio.engine.query import mechanisms as M
from dpstudio.engine.query.parser import evaluate_filter, parse_filter
from dpstudio.engine.query.refinement import (
    factors,
    refine_weights,
    refine_weights_array,
    sample_refined,
    sample_refined_array,
)
from tests.conftest import shared_path

DRAWS = 2000
LOW, HIGH = 0.93, 0.97  # 95 ± 2 %

CENSUS_DOM = {"FICA": (0, 12000), "FEDTAX": (0, 32000)}
ADULT_DOM = {"age": (17, 90)}
CASES = [  # (data, query, declared range, domains)
    ("census", "mean(FICA)", NumericRange(0, 12000, 1), CENSUS_DOM),
    ("census", "variance(FICA)", NumericRange(0, 36_000_000, 10000), CENSUS_DOM),
    ("census", "ratio(FEDTAX, FICA)", NumericRange(0, 10, 0.01), CENSUS_DOM),
    ("adult", "mean(age)", NumericRange(17, 90, 0.1), ADULT_DOM),
    ("adult", "variance(age)", NumericRange(0, 1400, 1), ADULT_DOM),
]


@pytest.fixture(scope="module")
def frames():
    return {
        "census": pd.read_csv(shared_path("census.csv")),
        "adult": pd.read_csv(shared_path("adult", "adult.csv"), sep=";"),
    }


def _coverage(df, text, sup, dom, eps, mech, seed, interval=None) -> float:
    """Share of DRAWS answers whose printed interval holds the true (clamped) statistic."""
    q = parse_query(text)
    stat = M.noisy_stat(q, sup, mech, Fraction(repr(eps)), n_total=len(df), bounds=dom, delta=1e-6)
    units, tv = stat.truth(df, evaluate_filter(df, parse_filter(q.where)))
    truth = min(max(float(tv), sup.lo), sup.hi)
    rng = np.random.default_rng(seed)
    noise = [p.draw(rng, DRAWS) for p in stat.parts]  # the exact samplers, as an answer draws
    hits = 0
    for i in range(DRAWS):
        noisy = [float(t + int(z[i])) for t, z in zip(units, noise)]
        lo, hi = (interval or M.stat_interval)(stat, noisy)
        hits += lo - 1e-9 <= truth <= hi + 1e-9
    return hits / DRAWS


@pytest.mark.parametrize("eps", [0.1, 1.0])
@pytest.mark.parametrize("data,text,sup,dom", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_several_part_intervals_cover_95_pm_2_percent(frames, data, text, sup, dom, eps):
    """2,000 answers (discrete Laplace): the simulated interval covers the truth 95 ± 2 %."""
    # a seed fixed per case: Python's hash() of text changes from process to process
    # (PYTHONHASHSEED), and Census's variance at ε = 0.1 covers ~93.6 % (8 seeds: 92.3–94.9 %),
    # so one process in about eight drew a seed below the band's 93 % (seen in a full run)
    seed = zlib.crc32(f"{data}|{text}|{eps}".encode())
    cover = _coverage(frames[data], text, sup, dom, eps, "laplace", seed=seed)
    assert LOW <= cover <= HIGH, cover


@pytest.mark.parametrize("eps", [0.1])
@pytest.mark.parametrize("data,text,sup,dom", [CASES[0], CASES[2]], ids=["census-mean", "census-ratio"])
def test_several_part_intervals_cover_95_pm_2_percent_gaussian(frames, data, text, sup, dom, eps):
    """The same with the discrete Gaussian (δ = 10⁻⁶) where the bootstrap failed (the ratio)."""
    cover = _coverage(frames[data], text, sup, dom, eps, "gaussian", seed=7)
    assert LOW <= cover <= HIGH, cover


def test_a_too_narrow_interval_fails_the_coverage_test(frames, monkeypatch):
    """The test can fail: the same interval at a 90 % level (too narrow) and the old union bound
    (too wide) are both outside 95 ± 2 %.
    """
    df = frames["census"]
    data, text, sup, dom = CASES[0]
    monkeypatch.setattr(M, "LEVEL", 0.90)
    narrow = _coverage(df, text, sup, dom, 1.0, "laplace", seed=3)
    monkeypatch.undo()
    assert not (LOW <= narrow <= HIGH), narrow

    def union_bound(stat, noisy):
        level = 1 - (1 - M.LEVEL) / len(stat.parts)
        return stat.box([(v - p.quantile(level), v + p.quantile(level)) for v, p in zip(noisy, stat.parts)])

    wide = _coverage(df, text, sup, dom, 1.0, "laplace", seed=3, interval=union_bound)
    assert not (LOW <= wide <= HIGH), wide


def test_the_interval_is_a_function_of_the_noisy_parts_only(frames):
    """The same noisy parts give the same interval (its simulation is seeded from them); the
    data are not an argument.
    """
    q = parse_query("mean(FICA)")
    sup = NumericRange(0, 12000, 1)
    stat = M.noisy_stat(q, sup, "laplace", Fraction(1), n_total=1080, bounds=CENSUS_DOM)
    a = M.stat_interval(stat, [120000.0, 1075.0])
    assert a == M.stat_interval(stat, [120000.0, 1075.0])
    assert a[0] <= 6000 + 120000 / 1075 <= a[1]
    assert a != M.stat_interval(stat, [120001.0, 1075.0])


@pytest.mark.parametrize(
    "text,sup,dom",
    [
        ("mean(FICA)", NumericRange(0, 12000, 1), CENSUS_DOM),
        ("mean(FICA)", NumericRange(100, 900, 0.5), CENSUS_DOM),
        ("variance(FICA)", NumericRange(0, 36_000_000, 10000), CENSUS_DOM),
        ("ratio(FEDTAX, FICA)", NumericRange(0, 10, 0.01), CENSUS_DOM),
        ("ratio(FEDTAX, FICA)", NumericRange(-1, 3, 0.001), CENSUS_DOM),
    ],
)
def test_finish_many_equals_finish_draw_by_draw(text, sup, dom):
    """The vectorised responses of the planning simulation are the scalar ones, bit for bit
    (the choice of ``auto`` is unchanged), including empty noisy counts and zero denominators.
    """
    q = parse_query(text)
    for mech in ("laplace", "gaussian"):
        stat = M.noisy_stat(q, sup, mech, Fraction(1, 10), n_total=1080, bounds=dom, delta=1e-6)
        rng = np.random.default_rng(1)
        truth = stat.plan_truth(40)
        noise = [p.draw(rng, 3000) for p in stat.parts]
        u = [(int(t) + z).astype(np.float64) for t, z in zip(truth, noise)]
        u[-1][:50] = np.arange(-25, 25)  # counts / denominators around 0
        fast = M.finish_many(stat, u)
        slow = np.array([float(stat.finish([float(x[i]) for x in u])) for i in range(3000)])
        assert np.array_equal(fast, slow)


def test_refine_weights_array_equals_refine_weights():
    """The vectorised Algorithm 5.1: the same classes and the same exact masses, and the same
    point drawn from the same seed, over random priors, centres and ε (including the exact
    branch, a ball of mass exactly pu).
    """
    r = random.Random(5)
    for trial in range(300):
        n = r.randint(2, 60)
        w = [r.choice([0, 1, 2, 5, 1 << 40, r.randint(0, 1 << 50)]) for _ in range(n)]
        if sum(w) == 0:
            w[0] = 1
        c = r.randrange(n)
        d = [abs(i - c) for i in range(n)]
        eps = r.choice([0.01, 0.1, 0.5, 1.0, math.log(2), 3.0])
        kind = r.choice(["statistical", "individual"])
        au, ad = factors(eps, kind)
        if trial % 10 == 0:  # force the exact branch: au, ad with pu = 1/2, a ball of half the mass
            one = 1 << 64
            au, ad = one + one // 2, one // 2
            w = [1] * n
            n2 = n if n % 2 == 0 else n - 1
            w = w[:n2] + [0] * (n - n2)
        cls, mass, _ = refine_weights(w, d, au, ad)
        fast = refine_weights_array(np.array(w, dtype=np.int64), np.array(d, dtype=np.int64), au, ad)
        assert fast is not None
        assert list(fast[0]) == list(cls) and fast[1] == mass, trial
        for seed in range(3):
            a = sample_refined(np.random.default_rng(seed), w, cls, mass)
            b = sample_refined_array(np.random.default_rng(seed), np.array(w, dtype=np.int64), fast[0], mass)
            assert a == b


def test_refinement_answers_are_unchanged_by_the_fast_path(frames):
    """refine_query (fast path) draws the same responses as Algorithm 5.1 on lists would."""
    from dpstudio.engine.query import refine_query

    df = frames["census"]
    sup = NumericRange(0, 12000, 1)
    for prior in (Prior.uniform(sup), Prior.normal(2500, 300, sup)):
        for seed in range(5):
            ans = refine_query(df, "mean(FICA)", prior, 1.0, rng=seed)
            w = prior.weights()
            au, ad = factors(1.0, "statistical")
            center = sup.index_of(float(ans.true_value))[0]
            cls, mass, _ = refine_weights(w, [abs(i - center) for i in range(sup.size)], au, ad)
            assert ans.response == sup.value(sample_refined(np.random.default_rng(seed), w, cls, mass))
