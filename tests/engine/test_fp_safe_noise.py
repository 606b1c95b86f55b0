"""Floating-point-safe noise (issue 8 §3): exact discrete Laplace / staircase samplers, the
low-bits attack of Mironov (2012) against the old float sampler and its failure against the
grid mechanism, releases on the declared grid, determinism, calibration on the grid."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpstudio import engine
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError

# ---------------------------------------------------------------- exact pmfs, goodness of fit


def _dlap_cdf(z, rate):
    """P(Z ≤ z) of the discrete Laplace with P(z) ∝ e^{-rate|z|}."""
    q = math.exp(-rate)
    z = np.asarray(z, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(z >= 0, 1 - np.exp(-rate * (z + 1)) / (1 + q), np.exp(rate * z) / (1 + q))


def _chi2_pvalue(draws, cdf, nbins=40):
    """Chi-square goodness of fit on integer bins with (roughly) equal expected counts."""
    qs = np.quantile(draws, np.linspace(0, 1, nbins + 1)[1:-1])
    edges = np.unique(np.floor(qs).astype(np.int64))  # bins (e_{i-1}, e_i]
    cum = np.concatenate([[0.0], cdf(edges), [1.0]])
    expected = np.diff(cum) * draws.size
    observed = np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size + 1)
    keep = expected > 5
    obs, exp_ = observed[keep], expected[keep]
    exp_ = exp_ * obs.sum() / exp_.sum()
    return stats.chisquare(obs, exp_).pvalue


@pytest.mark.parametrize("rate", [3.0, 1.0, 0.3, 0.01, 1e-5, 2.2e-8, 3e-12])
def test_discrete_laplace_matches_its_exact_pmf(rate):
    """Direct path (rate ≥ 2⁻²⁴) and the exact split Y = M·G + R (smaller rates)."""
    z = N.discrete_laplace(np.random.default_rng(11), rate, 200_000)
    assert z.dtype == np.int64
    assert _chi2_pvalue(z, lambda e: _dlap_cdf(e, rate)) > 1e-3
    # symmetric: the signs are a fair coin among non-zero draws
    nz = z[z != 0]
    assert stats.binomtest(int((nz > 0).sum()), nz.size).pvalue > 1e-3
    q = math.exp(-rate)
    assert z.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.05)


def test_small_rates_exact_pmf_near_zero():
    """Point masses for a few small |z| (chi-square on single values)."""
    rate = 0.7
    z = N.discrete_laplace(np.random.default_rng(3), rate, 300_000)
    vals = np.arange(-6, 7)
    obs = np.array([(z == v).sum() for v in vals] + [(np.abs(z) > 6).sum()])
    p = np.append(N.discrete_laplace_pmf(vals, rate), 0)
    p[-1] = 1 - p[:-1].sum()
    assert stats.chisquare(obs, p * z.size).pvalue > 1e-3


def test_goodness_of_fit_has_power():
    """The same test rejects a 10 % wrong rate: it can fail."""
    z = N.discrete_laplace(np.random.default_rng(5), 0.1, 200_000)
    assert _chi2_pvalue(z, lambda e: _dlap_cdf(e, 0.11)) < 1e-6


@pytest.mark.parametrize("sens, eps", [(1, 1.0), (3, 1.0), (10, 0.5), (50, 2.0)])
def test_discrete_staircase_matches_its_exact_pmf_and_is_eps_dp(sens, eps):
    c = N.staircase_center(sens, eps)
    assert 0 <= c < sens
    z = N.discrete_staircase(np.random.default_rng(8), sens, eps, 200_000)
    lim = int(c + sens * (12 / eps + 2))
    vals = np.arange(-lim, lim + 1)
    p = N.discrete_staircase_pmf(vals, sens, eps, c)
    assert p.sum() == pytest.approx(1.0, abs=1e-4)
    # chi-square on single values with enough mass, the rest pooled
    big = p * z.size > 20
    obs = np.array([(z == v).sum() for v in vals[big]] + [(~np.isin(z, vals[big])).sum()])
    exp_ = np.append(p[big], 1 - p[big].sum()) * z.size
    assert stats.chisquare(obs, exp_).pvalue > 1e-3
    assert z.var() == pytest.approx(N.discrete_staircase_variance(sens, eps, c), rel=0.05)
    # ε-DP: shifting the input by up to Δ changes the pmf by at most e^ε
    for s in range(1, sens + 1):
        assert np.max(np.abs(np.log(p[s:] / p[:-s]))) <= eps * (1 + 1e-12)
    # less variance than the discrete Laplace of the same ε and sensitivity (the point of it)
    assert N.discrete_staircase_variance(sens, eps, c) <= N.grid_noise_variance("laplace", sens, eps)


def test_fallback_path_agrees_with_the_fast_path():
    """The exact (lazy-bit, decimal-bounded) geometric gives the inverse-CDF answer wherever the
    double-precision filter had already decided it."""
    rng = np.random.default_rng(0)
    for rate in (0.37, 1e-3, 5.0):
        for _ in range(200):
            k = int(rng.integers(1, 2**53))
            u = k / 2.0**53
            y = math.floor(-math.log(u) / rate)
            # decide exactly with rationals from scratch (any guess; no extra bits needed
            # unless U is within 2^-53 of a boundary)
            got = N._geometric_one(np.random.default_rng(1), k, 53, Fraction(rate), 0)
            if abs(-math.log(u) / rate - round(-math.log(u) / rate)) > 1e-6:
                assert got == y


def test_grid_noise_is_deterministic_under_a_seed():
    for kind in ("laplace", "staircase"):
        a = N.grid_noise(kind, np.random.default_rng(5), 1000, 0.7, 5000)
        b = N.grid_noise(kind, np.random.default_rng(5), 1000, 0.7, 5000)
        c = N.grid_noise(kind, np.random.default_rng(6), 1000, 0.7, 5000)
        assert np.array_equal(a, b) and not np.array_equal(a, c)
    # zero sensitivity: no noise, and per-element sensitivities
    z = N.grid_noise("laplace", np.random.default_rng(1), np.array([0, 10, 0, 10]), 1.0, 4)
    assert z[0] == 0 and z[2] == 0


# ---------------------------------------------------------------- Mironov's low-bits attack


def _float_laplace(u, scale):
    """The old sampler (noise.laplace_noise) as a function of its uniform u = k/2⁵³."""
    v = u - 0.5
    return -scale * np.sign(v) * np.log1p(-2.0 * np.abs(v)) + 0.0


def _reachable_float(y, x, scale):
    """True where some 53-bit uniform makes the old mechanism output exactly y from x."""
    target = y - x
    lo = np.zeros(y.size, dtype=np.int64)
    hi = np.full(y.size, 2**53 - 1, dtype=np.int64)
    for _ in range(54):  # noise(k) is non-decreasing in k: binary search
        mid = (lo + hi) // 2
        up = _float_laplace(mid / 2.0**53, scale) < target
        lo = np.where(up, mid + 1, lo)
        hi = np.where(up, hi, mid)
    hit = np.zeros(y.size, dtype=bool)
    for d in range(-3, 4):
        k = np.clip(lo + d, 0, 2**53 - 1)
        hit |= (x + _float_laplace(k / 2.0**53, scale)) == y
    return hit


def test_low_bits_attack_separates_neighbours_under_the_old_float_sampler():
    rng = np.random.default_rng(2012)
    eps, x0, x1 = 1.0, 0.3, 1.3  # neighbouring true values, Δ = 1
    k = rng.integers(0, 2**53, 4000)
    y = x0 + _float_laplace(k / 2.0**53, 1.0 / eps)
    assert _reachable_float(y, x0, 1 / eps).all()  # the attack's own sanity check
    ruled_out = ~_reachable_float(y, x1, 1 / eps)
    # most outputs are impossible under the neighbour: an e^ε bound cannot hold
    assert ruled_out.mean() > 0.3


def test_low_bits_attack_fails_against_the_grid_mechanism():
    """Outputs from x and from x + Δ live on the same grid; every output has probability
    ratio ≤ e^ε under the two (exact pmf); empirically the supports coincide."""
    eps, gamma, lb, ub = 1.0, 0.01, 0.0, 1.0
    g = N.make_grid("x", gamma, (lb, ub))
    x0, x1 = 0.3, 0.3 + 0.004  # neighbouring values, not on the grid
    t0, t1 = g.to_units(np.array([x0]))[0], g.to_units(np.array([x1]))[0]
    rng = np.random.default_rng(9)
    rate = eps * (1 - N.EPS_SAFETY) / g.span
    out0 = g.from_units(t0 + N.grid_noise("laplace", rng, g.span, eps, 20_000))
    out1 = g.from_units(t1 + N.grid_noise("laplace", rng, g.span, eps, 20_000))
    # every output lies on the grid: no low bits to read
    for out in (out0, out1):
        assert np.all(np.abs(out / gamma - np.rint(out / gamma)) < 1e-9)
    u = np.rint(out0 / gamma).astype(np.int64) - g.base
    # exact likelihood ratio of each observed unclamped output under x0 vs x1
    inside = (u > g.lo) & (u < g.hi)
    llr = rate * (np.abs(u[inside] - t1) - np.abs(u[inside] - t0))
    assert np.max(np.abs(llr)) <= eps
    # any two inputs of the domain, not only these: sensitivity in grid steps is the span
    assert rate * g.span < eps
    # empirical: the outputs of x1 cover those of x0 where both have mass
    common = np.intersect1d(np.unique(out0), np.unique(out1))
    assert common.size > 0.8 * np.unique(out0).size


# ---------------------------------------------------------------- releases on the grid


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(0, 100, n),  # integer column
            "income": np.round(rng.gamma(2, 900, n), 3),  # float column
            "x": rng.uniform(0, 7, n),
        }
    )


DOMS = {"age": (0, 120), "income": (0.0, 20000.0), "x": (0.0, 7.0)}


@pytest.mark.parametrize(
    "method, params",
    [
        ("laplace", {}),
        ("ir-dp", {"k": 5}),
        ("idp-ls", {"k": 5}),
        ("idp-cbls", {"k": 5}),
        ("insensitive-dp", {"k": 30}),
        ("ir-dp", {"k": 5, "noise": "staircase"}),
        ("laplace", {"noise": "staircase"}),
        ("insensitive-dp", {"k": 30, "noise": "staircase"}),
    ],
)
def test_released_values_lie_on_the_declared_grid_and_in_the_domain(method, params):
    df = _frame()
    prec = {"income": 100.0, "x": 0.05}
    roles = {c: "eps-quasi" for c in df.columns}
    res = engine.protect(
        df, method, roles, DOMS, precision=prec, epsilon=2.0, seed=3, types={"age": "integer"}, **params
    )
    grid = {"age": 1.0, **prec}
    for c, g in grid.items():
        v = res.data[c].to_numpy(dtype=np.float64)
        assert np.all(np.abs(v / g - np.rint(v / g)) < 1e-9), c
        assert v.min() >= DOMS[c][0] and v.max() <= DOMS[c][1], c
        # printed with no more digits than γ implies
        dec = N.decimals_of(g)
        digits = [len(t.split(".")[1].rstrip("0")) if "." in t else 0 for t in res.data[c].astype(str)]
        assert max(digits) <= dec
    assert pd.api.types.is_integer_dtype(res.data["age"])  # declared integer: integer out
    assert res.public_metadata()["precision"] == {"age": 1.0, "income": 100.0, "x": 0.05}
    assert "output precision γ (age 1 (default), income 100, x 0.05;" in res.guarantee
    assert "ε′ = ε·(1 − 2⁻⁴⁰) ≤ ε" in res.guarantee


def test_k_eps_and_categorical_numeric_noise_on_the_grid():
    df = _frame()
    df["g"] = np.where(df["age"] < 50, "young", "old")
    res = engine.protect(
        df[["g", "income"]],
        "k-eps",
        {"g": "k-quasi", "income": "eps-quasi"},
        precision={"income": 10},
        k=5,
        epsilon=1.0,
        seed=2,
    )
    v = res.data["income"].to_numpy(dtype=float)
    assert np.all(v % 10 == 0)
    res = engine.protect(
        df[["age", "x"]],
        "categorical-dp",
        {"age": "eps-quasi", "x": "eps-quasi"},
        {"age": DOMS["age"], "x": DOMS["x"]},
        k=100,
        epsilon=5.0,
        seed=2,
    )
    v = res.data["x"].to_numpy(dtype=float)
    g = N.default_precision(DOMS["x"], False)
    assert g == 1e-6
    assert np.all(np.abs(v / g - np.rint(v / g)) < 1e-6)


def test_default_precision_comes_from_type_and_domain_only():
    assert N.default_precision((0, 7500), True) == 1.0
    assert N.default_precision((0, 7500), False) == pytest.approx(1e-3)
    assert N.default_precision((0, 0.5), False) == pytest.approx(1e-7)
    assert N.default_precision(None, False) is None
    # the data's values play no part: two frames with different values, same default
    a, b = _frame(seed=1), _frame(seed=2)
    ra = engine.protect(a, "laplace", {"x": "eps-quasi"}, DOMS, epsilon=1.0, seed=1)
    rb = engine.protect(b, "laplace", {"x": "eps-quasi"}, DOMS, epsilon=1.0, seed=1)
    assert ra.public_metadata()["precision"] == rb.public_metadata()["precision"] == {"x": 1e-6}


def test_same_seed_same_release_on_the_grid():
    df = _frame()
    roles = {"income": "eps-quasi"}
    a = engine.protect(df, "ir-dp", roles, DOMS, k=5, epsilon=1.0, seed=42, precision={"income": 1})
    b = engine.protect(df, "ir-dp", roles, DOMS, k=5, epsilon=1.0, seed=42, precision={"income": 1})
    c = engine.protect(df, "ir-dp", roles, DOMS, k=5, epsilon=1.0, seed=43, precision={"income": 1})
    assert a.data.equals(b.data) and not a.data.equals(c.data)


# ---------------------------------------------------------------- calibration on the grid


def test_laplace_calibration_is_the_discrete_scale():
    """Scale in grid steps span/ε′ with span = (ub − lb)/γ; empirical variance of the noise
    = γ²·Var(discrete Laplace)."""
    n, eps, gamma = 40_000, 50.0, 0.5  # scale 4000: the clamp at ±10⁵ is 25 scales away
    df = pd.DataFrame({"v": np.full(n, 40.0)})
    res = engine.protect(
        df, "laplace", {"v": "eps-quasi"}, {"v": (-1e5, 1e5)}, precision={"v": gamma}, epsilon=eps, seed=1
    )
    info = res.info["noise_per_attribute"]["v"]
    span = int(2e5 / gamma)
    assert info["sensitivity_grid_units"] == span
    assert info["scale"] == pytest.approx(gamma * span / (eps * (1 - N.EPS_SAFETY)), rel=1e-15)
    noise = res.data["v"].to_numpy() - 40.0
    assert noise.var() == pytest.approx(gamma**2 * N.grid_noise_variance("laplace", span, eps), rel=0.05)


def test_ir_dp_calibration_on_cluster_sums():
    """ir-dp: one draw per cluster on the integer sum, sensitivity span (Lemma 1 on the grid
    values); the centroid noise has variance γ²·Var(Z)/k²."""
    rng = np.random.default_rng(2)
    n, k, eps = 50_000, 5, 10.0
    df = pd.DataFrame({"v": rng.integers(4000, 5000, n)})
    dom = {"v": (0, 10_000)}  # centroid noise scale 200: the clamp is 20 scales away
    prep = engine.prepare(
        df, "ir-dp", {"v": "eps-quasi"}, dom, k=k, epsilon=eps, order="input", types={"v": "integer"}
    )
    base = engine.run_prepared(prep, rng=np.random.default_rng(0), epsilon=None).data["v"]
    res = engine.run_prepared(prep, rng=np.random.default_rng(1))
    info = res.info["noise_per_attribute"]["v"]
    assert info["sensitivity_grid_units"] == 10_000
    assert info["scale"] == pytest.approx(10_000 / (k * eps * (1 - N.EPS_SAFETY)))
    assert pd.api.types.is_integer_dtype(res.data["v"])
    order = np.argsort(df["v"].to_numpy(), kind="stable")
    diff = (res.data["v"].to_numpy() - base.to_numpy())[order][::k]  # one per cluster
    expected = N.grid_noise_variance("laplace", 10_000, eps) / k**2
    assert np.var(diff) == pytest.approx(expected, rel=0.06)


# ---------------------------------------------------------------- bad input


def test_precision_errors_are_one_line_and_name_the_column():
    df = _frame()
    with pytest.raises(ParameterError, match="'x'.*too fine.*coarser precision"):
        engine.protect(df, "laplace", {"x": "eps-quasi"}, DOMS, precision={"x": 1e-15}, epsilon=1.0, seed=1)
    with pytest.raises(ParameterError, match="'x'.*> 0"):
        engine.protect(df, "laplace", {"x": "eps-quasi"}, DOMS, precision={"x": -1}, epsilon=1.0, seed=1)
    with pytest.raises(ParameterError, match="not in the data"):
        engine.protect(df, "laplace", {"x": "eps-quasi"}, DOMS, precision={"nope": 1}, epsilon=1.0, seed=1)
    with pytest.raises(ParameterError, match="'x'.*no grid point"):
        engine.protect(
            df.assign(x=0.5 + df["x"] * 0.8),
            "laplace",
            {"x": "eps-quasi"},
            {"x": (0.1, 7.0)},
            precision={"x": 100},
            epsilon=1.0,
            seed=1,
        )
    # idp-cbls needs no domain; a float column then needs a declared precision
    with pytest.raises(ParameterError, match="'x' needs an output precision"):
        engine.protect(df, "idp-cbls", {"x": "eps-quasi"}, k=5, epsilon=1.0, seed=1)


def test_noise_free_baseline_is_unchanged():
    df = _frame()
    prep = engine.prepare(df, "ir-dp", {"x": "eps-quasi"}, DOMS, k=5, epsilon=1.0)
    res = engine.run_prepared(prep, rng=np.random.default_rng(0), epsilon=None)
    assert "Floating-point-safe" not in res.guarantee
    assert res.public_metadata()["precision"] == {}
    v = res.data["x"].to_numpy() / 1e-6
    assert np.any(np.abs(v - np.rint(v)) > 1e-3)  # the raw cluster means, not on a grid


def test_sweep_passes_the_precision():
    df = _frame()
    pts = list(
        engine.sweep(
            df,
            "ir-dp",
            {"income": "eps-quasi"},
            DOMS,
            ks=(5,),
            epsilons=(1.0,),
            seed=1,
            precision={"income": 1000},
            measures=("sse",),
            baselines=False,
        )
    )
    assert pts


@pytest.mark.parametrize("eps", [50.0, 1000.0, 1e4])
def test_staircase_refuses_instead_of_dividing_by_zero_or_freezing(eps):
    """ε per draw beyond e^{-ε} underflow is capped, and a sampler that would need more than
    10,000 tries per value is refused with one clear message (issue 15), never hangs."""
    from dpstudio import engine

    df = pd.DataFrame({"x": np.arange(200, dtype=np.int64)})
    with pytest.raises(engine.ParameterError, match="staircase"):
        engine.protect(
            df, "laplace", {"x": "eps-quasi"}, {"x": (0, 1_000_000)}, epsilon=eps, noise="staircase"
        )


def test_staircase_large_eps_small_sensitivity_still_samples():
    from dpstudio.engine.algorithms import noise as N

    z = N.discrete_staircase(np.random.default_rng(1), 3, 1000.0, 1000)
    assert np.all(z == 0)  # ε capped at 700: all mass on the centre


@pytest.mark.parametrize(
    "gamma,domain,integer",
    [
        (0.1, (0, 100000), False),
        (0.1, (-3.05, 7.2), False),  # bounds off the grid
        (0.25, (-10, 10), False),
        (1e-3, (0, 1), False),
        (1.0, (-5, 5), True),
        (100.0, (-1e6, 1e6), True),
        (0.1, None, False),
        (1e-6, (0, 2**40 * 1e-6), False),  # huge spans in grid units
        (3e-7, (0, 1.5), False),  # γ without a short decimal form: the rounding path
    ],
)
def test_grid_in_place_paths_give_the_same_values(gamma, domain, integer):
    # laplace's noisy_values converts its own scratch in place (issue 27): the same values,
    # bit for bit (±0 included), as the copying conversion, for values in and out of the domain
    g = N.make_grid("c", gamma, domain, integer=integer)
    rng = np.random.default_rng(3)
    lo, hi = (g.lo, g.hi) if g.lo is not None else (-(10**6), 10**6)
    u = np.concatenate(
        [
            rng.integers(lo - 50, hi + 50, size=5000),
            [lo, hi, lo - 1, hi + 1, 0, -1, 1, -(2**40), 2**40],
        ]
    ).astype(np.int64)
    ref = g.from_units(u)
    mine = u.copy()
    got = g.from_units(mine, overwrite=True)
    assert got.dtype == ref.dtype and np.array_equal(
        np.asarray(got).view(np.int64), np.asarray(ref).view(np.int64)
    )
    x = np.concatenate([rng.uniform(-1e6, 1e6, 3000) * gamma, [-0.0, 0.0, 0.05, -0.05, 0.15, 2.5]])
    old_units = np.rint(x / g.gamma).astype(np.int64) - g.base
    assert np.array_equal(g.to_units(x), old_units)
    assert g.to_units(np.float64(x[0])) == old_units[0]
