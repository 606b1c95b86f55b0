"""Counter-based keyed noise (issue 12): partition-independent, exact distributions."""

import numpy as np
import pytest
from scipy import stats

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import noise as N


def _stream(i=0):
    return K.KeyedStream((12345, 678), K.PURPOSE_NOISE, i)


def test_vectorised_philox_matches_numpy_words():
    s = _stream()
    ids = np.arange(17, 1017)
    for rnd, lane in ((0, 0), (2, 1)):
        fast = s.block(ids, rnd, lane)  # numpy's C Philox (contiguous)
        vec = K.philox_block(s.key, ids.astype(np.uint64) + np.uint64(1), rnd, lane, 0)
        assert np.array_equal(fast, vec)
    sparse = ids[::7]
    assert np.array_equal(s.block(sparse, 1, 0), s.block(ids, 1, 0)[::7])


@pytest.mark.parametrize("kind,sens", [("laplace", 2), ("laplace", 10**9), ("staircase", 3)])
def test_draw_of_an_id_does_not_depend_on_the_others(kind, sens):
    s = _stream(3)
    ids = np.arange(3000)
    whole = K.grid_noise(kind, s, ids, sens, 0.7)
    rng = np.random.default_rng(0)
    perm = rng.permutation(ids.size)
    parts = np.empty_like(whole)
    for block in np.array_split(perm, 5):  # any partition, any order
        parts[block] = K.grid_noise(kind, s, ids[block], sens, 0.7)
    assert np.array_equal(whole, parts)
    assert not np.array_equal(whole, K.grid_noise(kind, _stream(4), ids, sens, 0.7))


def _chi2_pvalue(z, pmf, cut):
    v = np.clip(z, -cut, cut)
    grid = np.arange(-cut, cut + 1)
    obs = np.array([(v == g).sum() for g in grid])
    p = pmf(grid)
    p[0] = pmf(np.arange(-200 * cut, -cut + 1)).sum()
    p[-1] = p[0]
    p = p / p.sum()
    return stats.chisquare(obs, p * z.size).pvalue


def test_keyed_discrete_laplace_pmf():
    z = K.grid_noise("laplace", _stream(), np.arange(400_000), 2, 1.0)
    rate = 1.0 * (1 - N.EPS_SAFETY) / 2
    assert _chi2_pvalue(z, lambda g: N.discrete_laplace_pmf(g, rate), 12) > 1e-4


def test_keyed_discrete_laplace_small_rate_variance():
    sens = 10**9  # rate < 2^-24: the split path
    z = K.grid_noise("laplace", _stream(), np.arange(200_000), sens, 1.0)
    var = N.grid_noise_variance("laplace", sens, 1.0)
    assert abs(z.var() / var - 1) < 0.03
    assert abs(z.mean()) < 4 * np.sqrt(var / z.size)


def test_keyed_discrete_staircase_pmf():
    sens, eps = 3, 1.0
    e = eps * (1 - N.EPS_SAFETY)
    c = int(N._staircase_centers(np.array([sens]), np.array([e]))[0])
    z = K.grid_noise("staircase", _stream(), np.arange(400_000), sens, eps)
    assert _chi2_pvalue(z, lambda g: N.discrete_staircase_pmf(g, sens, e, c), 15) > 1e-4


def test_sensitivity_zero_gives_zero_and_arrays_broadcast():
    s = _stream()
    assert not K.grid_noise("laplace", s, np.arange(10), 0, 1.0).any()
    sens = np.array([0, 5, 0, 5])
    z = K.grid_noise("staircase", s, np.arange(4), sens, 1.0)
    assert z[0] == 0 and z[2] == 0


def test_permutation_is_a_permutation_and_keyed():
    p = K.permutation(K.KeyedStream((1, 2), K.PURPOSE_SHUFFLE, 0), 1000)
    assert sorted(p.tolist()) == list(range(1000))
    q = K.permutation(K.KeyedStream((1, 3), K.PURPOSE_SHUFFLE, 0), 1000)
    assert not np.array_equal(p, q)
