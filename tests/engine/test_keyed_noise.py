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


# ----------------------------------------------------------------- the dense laplace sampler
# grid_noise's path for many contiguous ids at one rate (laplace's records, issue 27) must give
# the general path's draws bit for bit: the released bytes of every laplace run depend on it.


def _chunked_general(stream, ids, sens, eps):
    """The general path (discrete_laplace per block of _CHUNK ids), as before the dense one."""
    rate = eps * (1.0 - N.EPS_SAFETY) / np.float64(sens)
    out = np.empty(ids.size, dtype=np.int64)
    for a in range(0, ids.size, K._CHUNK):
        out[a : a + K._CHUNK] = K.discrete_laplace(stream, ids[a : a + K._CHUNK], rate)
    return out


@pytest.mark.parametrize("case", range(24))
def test_dense_laplace_equals_the_general_path(case):
    rng = np.random.default_rng(1000 + case)
    s = K.KeyedStream(tuple(int(v) for v in rng.integers(0, 2**63, size=2)), K.PURPOSE_NOISE, case)
    # ties and −0 (large rates: most draws 0), the split path (rates < 2^-24), huge domains
    sens = [1, 2, 3, 1000, 10**6 + 1, 2**30, 10**12, 2**50][case % 8]
    eps = [30.0, 5.0, 1.0, 0.05][case % 4]
    first = [0, 1, int(rng.integers(0, 2**40))][case % 3]
    n = [K._CHUNK + 1, 2 * K._CHUNK + 17][case % 2]
    ids = np.arange(first, first + n, dtype=np.int64)
    got = K.grid_noise("laplace", s, ids, sens, eps)
    assert np.array_equal(got, _chunked_general(s, ids, sens, eps))
    if eps >= 5 and sens <= 3:
        assert (got == 0).mean() > 0.5  # the −0 redraws were exercised


def test_dense_laplace_sensitivity_zero_and_errors():
    s = _stream()
    ids = np.arange(K._CHUNK + 5)
    assert not K.grid_noise("laplace", s, ids, 0, 1.0).any()
    with pytest.raises(Exception, match="2\\^50"):
        K.grid_noise("laplace", s, ids, 2**51, 1.0)
    with pytest.raises(ValueError):
        K.grid_noise("laplace", s, ids, 3, float("inf"))


def _reference_round(w, r, extra):
    y, ok = K._geometric(w, r, extra)
    neg = (w[:, 2] & np.uint64(1)).astype(bool)
    ok &= ~(neg & (y == 0))
    np.negative(y, out=y, where=neg)
    return y, ok


def _crafted_words(r, m, rng):
    """Words that reach every branch: u = 0, 1 and 2^-53 edges, x̃ = −ln(u)/r within an ulp of
    an integer (the exact geometric fallback), acceptance words of the split at and above the
    limit (the exact test), both signs.
    """
    w = rng.integers(0, 2**64, size=(m, 4), dtype=np.uint64)
    edges = [0, 1, 2, 2**52, 2**53 - 1, 2**53 - 2]
    scaled = float(r) * 2.0 ** max(0, int(np.ceil(np.log2(N._SMALL_RATE / float(r)))))
    while scaled < N._SMALL_RATE:
        scaled *= 2
    for yv in (1, 2, 3, 10, 1000, 10**6):  # u = e^{-scaled·y}: x̃ on an integer
        k = int(round(np.exp(-scaled * yv) * 2.0**53))
        edges += [k - 1, k, k + 1]
    k = np.array([e for e in edges if 0 <= e < 2**53], dtype=np.uint64)
    w[: k.size, 0] = (k << np.uint64(11)) | (w[: k.size, 0] & np.uint64(2047))
    w[: m // 3, 1] |= np.uint64(0xFFFFFF0000000000)  # high acceptance bits: exact test
    w[::2, 2] &= ~np.uint64(1)
    w[1::2, 2] |= np.uint64(1)
    return w


@pytest.mark.parametrize(
    "r",
    [30.0, 5.0, 0.7, 2.0**-24, np.nextafter(2.0**-24, 0), 1e-7, 3e-9, 2.0**-40, 2.0**-62],
)
def test_dense_round_equals_the_general_round_on_crafted_words(r, monkeypatch):
    rng = np.random.default_rng(7)
    m = 600
    w = _crafted_words(r, m, rng)
    s = _stream(9)
    cids = np.arange(50, 50 + m, dtype=np.int64)
    calls = []
    real = N._geometric_one
    monkeypatch.setattr(N, "_geometric_one", lambda *a: calls.append(1) or real(*a))
    ry, rok = _reference_round(w, np.asarray(r), K._extra(s, cids, 0))
    ref_calls = len(calls)
    ws = K._Work(1024).cut(m)
    y, ok = K._laplace_words(w, np.asarray(r), K._extra(s, cids, 0), ws)
    assert np.array_equal(y, ry) and np.array_equal(ok, rok)
    assert ref_calls > 0 and len(calls) == 2 * ref_calls  # the exact fallback ran, alike
    if r < N._SMALL_RATE:
        assert not rok.all()  # the split's rejections were exercised


class _CraftedStream(K.KeyedStream):
    """A stream whose round-0 words are :func:`_crafted_words` (the rare branches on purpose)."""

    def __init__(self, r):
        super().__init__((12345, 678), K.PURPOSE_NOISE, 11)
        self.r = r

    def _run(self, first, m, rnd, lane):
        w = super()._run(first, m, rnd, lane)
        if rnd == 0 and lane == 0:
            w = _crafted_words(self.r, m, np.random.default_rng(first))
        return w


@pytest.mark.parametrize("r", [5.0, 1e-7, 3e-9, 2.0**-62])
def test_dense_sampler_equals_discrete_laplace_through_the_rare_branches(r, monkeypatch):
    # the whole dense sampler (its per-chunk fallbacks keyed by id, its redraws from round 1)
    # against the general discrete_laplace on the same crafted words
    s = _CraftedStream(r)
    monkeypatch.setenv(
        "DPSTUDIO_NOISE_NUMPY", "1"
    )  # the numpy round (the compiled one: test_noise_kernel_27)
    calls = []
    real = N._geometric_one
    monkeypatch.setattr(N, "_geometric_one", lambda *a: calls.append(1) or real(*a))
    ids = np.arange(50, 650, dtype=np.int64)
    ref = K.discrete_laplace(s, ids, r)
    got = np.empty(ids.size, dtype=np.int64)
    K._laplace_dense(s, 50, ids.size, r, got)
    assert np.array_equal(got, ref)
    assert calls  # the exact fallback was reached
