"""Issue 27 §1: the compiled round of the keyed dense Laplace sampler
(:mod:`dpstudio.engine.algorithms._noise_kernel`) gives the numpy round's draws bit for bit.

Word by word: for every word (crafted to reach every branch -- u = 0 and the 2⁻⁵³ edges, x̃
within an ulp of an integer, the split's acceptance bound, both signs, the int64 wrap of
huge draws at the smallest rates -- and random words over random rates by hypothesis) the
kernel either gives numpy's value and verdict, or declines the word, and it declines exactly
the words numpy decides by its exact fallbacks.  Whole samplers: with and without the kernel,
the same draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import noise as N

kernel = pytest.importorskip("dpstudio.engine.algorithms._noise_kernel")

from tests.engine.test_keyed_noise import _crafted_words, _CraftedStream  # noqa: E402

RATES = [30.0, 5.0, 0.7, 1e-5, 2.0**-24, np.nextafter(2.0**-24, 0), 1e-7, 3e-9, 2.0**-40, 2.0**-62]


def _consts(r: float):
    small, j, scaled = K._split(np.asarray(r))
    ji = int(j)
    limit = (1 << (64 - ji)) - (1 << (41 - ji)) if small else 0
    return float(-scaled), float(2.0**-52 / scaled), small, ji, np.uint64(limit)


def _kernel_word(w: np.ndarray, r: float):
    """The kernel on one word (1, 4): (y, ok), or None when it declines the word."""
    u = K._uniform(w[:, 0])
    with np.errstate(divide="ignore"):
        x = np.log(u)
    y, ok = np.empty(1, np.int64), np.empty(1, bool)
    if kernel.laplace_round(u, w[:, 1].copy(), w[:, 2].copy(), x, *_consts(r), y, ok) >= 0:
        return None
    return int(y[0]), bool(ok[0])


def _numpy_word(w: np.ndarray, r: float, monkeypatch):
    """numpy's round on one word: (y, ok, whether an exact fallback decided it)."""
    calls = []
    g, b = N._geometric_one, N._uniform_below_exp
    monkeypatch.setattr(N, "_geometric_one", lambda *a: calls.append(1) or g(*a))
    monkeypatch.setattr(N, "_uniform_below_exp", lambda *a: calls.append(1) or b(*a))
    try:
        s = K.KeyedStream((12345, 678), K.PURPOSE_NOISE, 9)
        y, ok = K._laplace_words(w, np.asarray(r), K._extra(s, np.array([77]), 0), K._Work(1))
    finally:
        monkeypatch.setattr(N, "_geometric_one", g)
        monkeypatch.setattr(N, "_uniform_below_exp", b)
    return int(y[0]), bool(ok[0]), bool(calls)


def _same_word_by_word(words: np.ndarray, r: float, monkeypatch) -> tuple[int, int]:
    declined = decided = 0
    for i in range(words.shape[0]):
        w = words[i : i + 1].copy()
        got = _kernel_word(w, r)
        y, ok, exact = _numpy_word(w, r, monkeypatch)
        if got is None:
            assert exact, (i, w, r)  # declined: only a word numpy's exact fallback decides
            declined += 1
        else:
            assert not exact and got == (y, ok), (i, w, r, got, (y, ok))
            decided += 1
    return declined, decided


@pytest.mark.parametrize("r", RATES)
def test_kernel_word_by_word_on_crafted_words(r, monkeypatch):
    words = _crafted_words(r, 300, np.random.default_rng(11))
    declined, decided = _same_word_by_word(words, float(r), monkeypatch)
    assert declined > 0 and decided > 0  # both kinds were exercised


def test_kernel_wraps_huge_draws_as_numpy_does(monkeypatch):
    # the smallest rate (scaled = 2⁻²⁴, j = 38): u ≤ 0.015 gives x̃ ≥ 2²⁶, shifted by 38 bits:
    # beyond 2⁶⁴, wrapped (numpy's int64 arithmetic wraps too)
    r = 2.0**-62
    us = [0.015, 0.01, 1e-3, 1e-5, 3e-7, 1e-9]
    w = np.zeros((2 * len(us), 4), dtype=np.uint64)
    w[:, 0] = np.array([int(u * 2.0**53) << 11 for u in us] * 2, dtype=np.uint64)
    w[len(us) :, 2] = np.uint64(1)  # both signs
    w[:, 1] = np.uint64(12345)
    declined, decided = _same_word_by_word(w, r, monkeypatch)
    assert decided >= 8  # (the smallest u: only the exact fallback decides; declined alike)
    ys = [_kernel_word(w[i : i + 1].copy(), r) for i in range(len(us))]
    assert any(
        y is not None and y[0] < 0 for y in ys
    )  # a positive draw wrapped past 2⁶³ (the same as numpy's)


@pytest.mark.parametrize("case", range(8))
def test_kernel_philox_words_are_numpys(case):
    rng = np.random.default_rng(case)
    s = K.KeyedStream(tuple(int(v) for v in rng.integers(0, 2**63, size=2)), K.PURPOSE_NOISE, case)
    first = [0, 1, 2**32 - 3, 2**40 + 5, 2**62, 2**63 - 2000][case % 6]
    rnd, lane = [(0, 0), (3, 1)][case % 2]
    m = 1000
    w = s._run(first, m, rnd, lane)  # numpy's C Philox
    u, w1, w2 = np.empty(m), np.empty(m, np.uint64), np.empty(m, np.uint64)
    kernel.philox_words(*(np.uint64(v) for v in (s.key[0], s.key[1], first, rnd, lane)), u, w1, w2)
    assert np.array_equal(u, K._uniform(w[:, 0]))
    assert np.array_equal(w1, w[:, 1]) and np.array_equal(w2, w[:, 2])


_WORD = st.integers(0, 2**64 - 1)
_RATE = st.one_of(
    st.sampled_from(RATES),
    st.floats(2.0**-62, 64.0, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.tuples(_WORD, _WORD, _WORD, _WORD), min_size=1, max_size=12),
    r=_RATE,
    top=st.integers(0, 53),
)
def test_kernel_word_by_word_on_random_words(words, r, top):
    import _pytest.monkeypatch

    w = np.array(words, dtype=np.uint64)
    w[:, 0] >>= np.uint64(top)  # small uniforms too (large draws, u near 0)
    mp = _pytest.monkeypatch.MonkeyPatch()
    try:
        _same_word_by_word(w, r, mp)
    finally:
        mp.undo()


@pytest.fixture
def numpy_noise(monkeypatch):
    """Switch the dense sampler between numpy (True) and the kernel (False) for any size."""

    def use(numpy: bool) -> None:
        monkeypatch.setenv("DPSTUDIO_NOISE_NUMPY", "1" if numpy else "0")
        monkeypatch.setattr(K.NOISE_KERNEL, "min_work", 0)
        monkeypatch.setattr(K.NOISE_KERNEL, "min_work_compile", 0)
        if not numpy:
            monkeypatch.setattr(K.NOISE_KERNEL, "slot", [])  # loaded for this test only

    return use


@pytest.mark.parametrize("case", range(12))
def test_dense_sampler_with_the_kernel_gives_the_same_draws(case, numpy_noise):
    rng = np.random.default_rng(500 + case)
    s = K.KeyedStream(tuple(int(v) for v in rng.integers(0, 2**63, size=2)), K.PURPOSE_NOISE, case)
    sens = [1, 3, 1000, 10**6 + 1, 2**30, 2**50][case % 6]
    eps = [30.0, 1.0, 0.05][case % 3]
    first = [0, int(rng.integers(0, 2**40))][case % 2]
    ids = np.arange(first, first + 2 * K._CHUNK + 17, dtype=np.int64)
    numpy_noise(True)
    ref = K.grid_noise("laplace", s, ids, sens, eps)
    numpy_noise(False)
    assert K.noise_kernel(ids.size) is not None
    got = K.grid_noise("laplace", s, ids, sens, eps)
    assert np.array_equal(got, ref)


class _WordsOf:
    """The compiled round, fed the words of ``stream._run`` (crafted words) instead of its
    own Philox's (which equal numpy's: test_kernel_philox_words_are_numpys)."""

    laplace_round = staticmethod(kernel.laplace_round)

    def __init__(self, stream):
        self.stream = stream
        self.chunks = 0

    def philox_words(self, k0, k1, first, rnd, lane, u, w1, w2):
        w = self.stream._run(int(first), u.size, int(rnd), int(lane))
        u[:], w1[:], w2[:] = K._uniform(w[:, 0]), w[:, 1], w[:, 2]
        self.chunks += 1


@pytest.mark.parametrize("r", [5.0, 1e-7, 2.0**-62])
def test_dense_sampler_with_the_kernel_through_the_rare_branches(r, numpy_noise, monkeypatch):
    # crafted round-0 words: chunks the kernel declines go to the numpy round (its exact
    # fallbacks), the others not; the result equals the general discrete_laplace
    s = _CraftedStream(r)
    ids = np.arange(50, 650, dtype=np.int64)
    numpy_noise(False)
    monkeypatch.setattr(K.NOISE_KERNEL, "slot", [_WordsOf(s)])  # the kernel's round on the crafted words
    ref = K.discrete_laplace(s, ids, r)
    got = np.empty(ids.size, dtype=np.int64)
    K._laplace_dense(s, 50, ids.size, r, got)
    assert np.array_equal(got, ref)
    assert K.NOISE_KERNEL.slot[0].chunks == 1  # the kernel's path was taken (and declined this chunk)


def test_kernel_tiers(monkeypatch):
    import sys

    T = K.NOISE_KERNEL
    monkeypatch.setattr(T, "slot", [])
    monkeypatch.setattr(T, "cached", [True])
    monkeypatch.delenv("DPSTUDIO_NOISE_NUMPY", raising=False)
    monkeypatch.delitem(sys.modules, "numba")  # as in a process that has not imported it
    assert K.noise_kernel(T.min_work - 1) is None and not T.slot  # not loaded
    assert K.noise_kernel(T.min_work) is not None
    assert K.noise_kernel(1) is not None  # once loaded, always
    monkeypatch.setenv("DPSTUDIO_NOISE_NUMPY", "1")
    assert K.noise_kernel(1 << 40) is None
    monkeypatch.delenv("DPSTUDIO_NOISE_NUMPY")
    monkeypatch.setattr(T, "slot", [])
    monkeypatch.setattr(T, "cached", [False])
    assert K.noise_kernel(T.min_work) is None  # not compiled yet: more work needed
    assert K.noise_kernel(T.min_work_compile) is not None
    monkeypatch.setattr(T, "slot", [])
    monkeypatch.setattr(T, "cached", [True])
    monkeypatch.setitem(sys.modules, "numba", __import__("numba"))  # imported by another kernel
    assert K.noise_kernel(T.min_work // 16 - 1) is None
    assert K.noise_kernel(T.min_work // 16) is not None
