"""Noise mechanisms: staircase figures of thesis Table 4.1, exact samplers (KS tests against
the exact CDFs), the ε-DP ratio bound of the staircase density, exponential mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpstudio.engine.algorithms import noise as N

# ---------------------------------------------------------------- staircase: Table 4.1


@pytest.mark.parametrize("eps, expected, laplace", [(0.1, 199.92, 200.0), (0.5, 7.92, 8.0), (1.0, 1.92, 2.0)])
def test_staircase_min_variance_matches_thesis_table_4_1(eps, expected, laplace):
    v = N.staircase_variance(1.0, eps)
    assert round(v, 2) == expected
    assert v < laplace
    assert N.noise_variance("laplace", 1.0, eps) == pytest.approx(laplace)


def test_staircase_optimal_d_eps_1():
    assert N.staircase_optimal_d(1.0, 1.0) == pytest.approx(0.416737, abs=2e-6)
    assert N.staircase_variance(1.0, 1.0, 0.416737) == pytest.approx(1.918, abs=1e-3)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.05, 5.0), sens=st.floats(0.1, 50.0), frac=st.floats(0.0, 1.0))
def test_staircase_variance_closed_form_matches_integration(eps, sens, frac):
    d = frac * sens
    m0 = 1.0 / (2 * d + 2 * sens * math.exp(-eps) / (-math.expm1(-eps)))
    # integrate x^2 * density over the steps until the tail is negligible
    total = d**3 / 3.0
    i = 0
    while True:
        a, b = d + i * sens, d + (i + 1) * sens
        step = math.exp(-(i + 1) * eps) * (b**3 - a**3) / 3.0
        total += step
        if step < 1e-15 * total and i > 5:
            break
        i += 1
    assert N.staircase_variance(sens, eps, d) == pytest.approx(2 * m0 * total, rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(eps=st.floats(0.05, 5.0), sens=st.floats(0.1, 10.0))
def test_optimal_d_is_a_minimum_and_scales_with_sensitivity(eps, sens):
    d = N.staircase_optimal_d(sens, eps)
    assert 0.0 <= d <= sens
    assert d == pytest.approx(sens * N.staircase_optimal_d(1.0, eps), rel=1e-12)
    v = N.staircase_variance(sens, eps, d)
    for g in np.linspace(0, sens, 41):
        assert v <= N.staircase_variance(sens, eps, g) * (1 + 1e-9)
    # never worse than Laplace with the same ε and sensitivity
    assert v <= 2 * (sens / eps) ** 2 * (1 + 1e-9)


@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0])
def test_staircase_density_integrates_to_one_and_is_eps_dp(eps):
    sens = 2.0
    d = N.staircase_optimal_d(sens, eps)
    # the density is piecewise constant: integrate exactly step by step (midpoint x width)
    steps = int(80 / eps)
    edges = np.concatenate([[0.0, d], d + sens * np.arange(1, steps + 1)])
    mids = (edges[:-1] + edges[1:]) / 2
    mass = 2 * float(np.sum(N.staircase_pdf(mids, sens, eps) * np.diff(edges)))
    assert mass == pytest.approx(1.0, abs=1e-9)
    x = np.linspace(-8 * sens, 8 * sens, 4001)
    for t in np.linspace(-sens, sens, 21):
        ratio = N.staircase_pdf(x, sens, eps) / N.staircase_pdf(x + t, sens, eps)
        assert ratio.max() <= math.exp(eps) * (1 + 1e-12)


def test_staircase_cdf_consistent_with_pdf():
    sens, eps = 1.5, 0.7
    x = np.linspace(-10, 10, 2001)
    F = N.staircase_cdf(x, sens, eps)
    assert np.all(np.diff(F) >= -1e-15)
    assert N.staircase_cdf(-1e6, sens, eps) == pytest.approx(0.0, abs=1e-12)
    assert N.staircase_cdf(1e6, sens, eps) == pytest.approx(1.0, abs=1e-12)
    assert N.staircase_cdf(0.0, sens, eps) == pytest.approx(0.5)
    h = 1e-6
    pts = np.array([-3.3, -0.1, 0.05, 0.9, 2.71, 7.2])
    num = (N.staircase_cdf(pts + h, sens, eps) - N.staircase_cdf(pts - h, sens, eps)) / (2 * h)
    assert num == pytest.approx(N.staircase_pdf(pts, sens, eps), rel=1e-5)


# ---------------------------------------------------------------- goodness of fit


@pytest.mark.parametrize("eps, sens", [(0.1, 1.0), (1.0, 1.0), (2.5, 3.0)])
def test_staircase_sampler_kstest(eps, sens):
    rng = np.random.default_rng(2024)
    x = N.staircase_noise(rng, sens, eps, 50_000)
    res = stats.kstest(x, lambda t: N.staircase_cdf(t, sens, eps))
    assert res.pvalue > 0.001
    assert x.var() == pytest.approx(N.staircase_variance(sens, eps), rel=0.05)


def test_staircase_sampler_detects_wrong_distribution():
    """The KS test has power: staircase draws are not Laplace with the same ε."""
    rng = np.random.default_rng(7)
    x = N.staircase_noise(rng, 1.0, 1.0, 50_000)
    assert stats.kstest(x, stats.laplace(scale=1.0).cdf).pvalue < 1e-6


@pytest.mark.parametrize("scale", [0.5, 3.0, 1e4])
def test_laplace_sampler_kstest(scale):
    rng = np.random.default_rng(99)
    x = N.laplace_noise(rng, scale, 50_000)
    assert stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue > 0.001


def test_sample_noise_dispatch_and_broadcasting():
    rng = np.random.default_rng(3)
    sens = np.array([0.0, 1.0, 10.0])
    x = N.sample_noise("laplace", rng, sens, 0.5, (20_000, 3))
    assert x.shape == (20_000, 3)
    assert np.all(x[:, 0] == 0)
    assert x[:, 2].var() == pytest.approx(2 * (10 / 0.5) ** 2, rel=0.06)
    y = N.sample_noise("staircase", rng, sens, np.array([1.0, 1.0, 0.5]), (20_000, 3))
    assert np.all(y[:, 0] == 0)
    assert y[:, 1].var() == pytest.approx(N.staircase_variance(1.0, 1.0), rel=0.06)
    assert y[:, 2].var() == pytest.approx(N.staircase_variance(10.0, 0.5), rel=0.06)
    with pytest.raises(ValueError):
        N.sample_noise("gaussian", rng, 1.0, 1.0, 3)
    with pytest.raises(ValueError):
        N.sample_noise("laplace", rng, 1.0, 0.0, 3)


def test_staircase_per_element_epsilon_matches_scalar_runs():
    rng = np.random.default_rng(11)
    eps = np.repeat([0.3, 2.0], 20_000)
    x = N.staircase_noise(rng, 1.0, eps)
    assert stats.kstest(x[:20_000], lambda t: N.staircase_cdf(t, 1.0, 0.3)).pvalue > 0.001
    assert stats.kstest(x[20_000:], lambda t: N.staircase_cdf(t, 1.0, 2.0)).pvalue > 0.001


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
def test_noise_is_deterministic_under_a_seed(kind):
    a = N.sample_noise(kind, np.random.default_rng(5), 2.0, 0.7, 1000)
    b = N.sample_noise(kind, np.random.default_rng(5), 2.0, 0.7, 1000)
    c = N.sample_noise(kind, np.random.default_rng(6), 2.0, 0.7, 1000)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


# ---------------------------------------------------------------- exponential mechanism


def test_exponential_mechanism_frequencies():
    rng = np.random.default_rng(1)
    q = np.array([0.0, -1.0, -2.0, -5.0])
    eps, dq = 2.0, 1.0
    draws = N.exponential_mechanism(rng, np.broadcast_to(q, (40_000, 4)), eps, dq)
    assert draws.shape == (40_000,)
    counts = np.bincount(draws, minlength=4)
    p = np.exp(eps * q / (2 * dq))
    p /= p.sum()
    assert stats.chisquare(counts, 40_000 * p).pvalue > 0.001


def test_exponential_mechanism_is_stable_and_scalar_for_1d():
    rng = np.random.default_rng(2)
    q = np.array([1e6, 1e6 - 1, -1e308])
    i = N.exponential_mechanism(rng, q, 1.0, 1.0)
    assert isinstance(i, int) and i in (0, 1)
    # sensitivity 0: uniform among the best candidates only
    draws = [N.exponential_mechanism(rng, [3.0, 1.0, 3.0], 1.0, 0.0) for _ in range(200)]
    assert set(draws) == {0, 2}


def test_exponential_mechanism_deterministic():
    q = np.random.default_rng(0).normal(size=(50, 7))
    a = N.exponential_mechanism(np.random.default_rng(9), q, 1.0, 2.0)
    b = N.exponential_mechanism(np.random.default_rng(9), q, 1.0, 2.0)
    assert np.array_equal(a, b)


def test_clamp():
    x = np.array([[-5.0, 0.5], [3.0, 20.0]])
    out = N.clamp(x, np.array([0.0, 1.0]), np.array([1.0, 10.0]))
    assert out.tolist() == [[0.0, 1.0], [1.0, 10.0]]
