"""The sweep's keyed roots computed all at once (issue 27) are the roots of the plain chain
``root_key(keyed_rng(point_rng(seed, ki, ei, r), ctx))`` bit for bit: numpy's SeedSequence and
PCG64 replicated over many sequences (``keyed.seed_state`` / ``keyed.default_rng_words``)."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms.keyed import root_key
from dpstudio.engine.keying import keyed_rng
from dpstudio.engine.random import point_rng
from dpstudio.engine.sweeps import run_roots

SEEDS = [0, 7, 2**32 - 1, 2**32, 2**64 - 1, 2**64, 2**127 + 12345, 2**300 + 1]


def _plain(seed, ki, ei, reps, ctx):
    return [root_key(keyed_rng(point_rng(seed, ki, ei, r), ctx)) for r in range(reps)]


@pytest.mark.parametrize("seed", SEEDS)
def test_run_roots_equal_the_generators(seed):
    cells = [(0, 1, 3, b"a"), (5, 0, 1, b""), (2, 4, 10, b"x" * 5000), (99, 3, 2, bytes(range(256)))]
    got = run_roots(seed, cells)
    assert got == [_plain(seed, *c) for c in cells]


@pytest.mark.parametrize(
    ("entropy", "spawn"),
    [
        (0, ()),
        (1, ()),
        (7, (1, 2, 3)),
        (2**64 - 1, (0,)),
        (2**200 + 3, (4, 5)),
        (2**383 + 2**128, ()),
        (9, (2**32 - 1,)),
    ],
)
def test_default_rng_words_equal_numpy(entropy, spawn):
    ent = np.asarray([K.assembled_entropy(entropy, spawn)], dtype=np.uint32)
    ss = np.random.SeedSequence(entropy=entropy, spawn_key=spawn)
    assert np.array_equal(K.seed_state(ent, 4)[0], ss.generate_state(4, np.uint64))
    ref = np.random.default_rng(ss).integers(0, 2**64, size=5, dtype=np.uint64)
    assert np.array_equal(K.default_rng_words(ent, 5)[0], ref)


def test_many_sequences_at_once_and_outside_the_replica():
    rng = np.random.default_rng(3)
    ents = [int(rng.integers(0, 2**63)) * 2**64 + int(rng.integers(0, 2**63)) for _ in range(50)]
    rows = np.asarray([K.assembled_entropy(e, (3, 1, 4)) for e in ents], dtype=np.uint32)
    got = K.default_rng_words(rows, 2)
    for e, g in zip(ents, got):
        ss = np.random.SeedSequence(entropy=e, spawn_key=(3, 1, 4))
        assert np.array_equal(g, np.random.default_rng(ss).integers(0, 2**64, size=2, dtype=np.uint64))
    assert K.assembled_entropy(-1) is None and K.assembled_entropy(5, (2**32,)) is None


def test_unpinned_seed_uses_the_generators(monkeypatch):
    """seed=None: OS entropy per repetition, through point_rng itself (nothing to replicate)."""
    from dpstudio.engine import keying

    calls = []
    real = keying.keyed_rng
    monkeypatch.setattr(keying, "keyed_rng", lambda *a: calls.append(1) or real(*a))
    out = run_roots(None, [(0, 1, 4, b"c")])
    assert len(out[0]) == 4 and len(set(out[0])) == 4 and len(calls) == 4


@pytest.mark.parametrize("seed", [True, -1, 1.5, "7"])
def test_seeds_point_rng_refuses_are_refused_alike(seed):
    with pytest.raises((TypeError, ValueError)):
        point_rng(seed, 0, 1, 0)
    with pytest.raises((TypeError, ValueError)):
        run_roots(seed, [(0, 1, 2, b"c")])
