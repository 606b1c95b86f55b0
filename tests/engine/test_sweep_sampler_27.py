"""Issue 27: round 0 of the sweep's bulk keyed Laplace sampler by the compiled kernel
(``keyed._bulk_round0``: all streams of a cell in one call) gives the numpy bulk sampler's
draws and the single-stream sampler's draws bit for bit, including a stream the kernel
cannot decide (redone by numpy's round) and the redraws of later rounds."""

from __future__ import annotations

import numpy as np
import pytest

from dpstudio.engine.algorithms import keyed as K

kernel = pytest.importorskip("dpstudio.engine.algorithms._noise_kernel")

ROOTS = [K.root_key(np.random.default_rng(i)) for i in range(3)] + [(5, 2**40), (2**64 - 1, 7)]
# tiny (the split M·G + R), around the split's edge, moderate, large (many "−0" redraws)
RATES = np.array([2.0**-62, 1e-15, 3e-9, 2.0**-24, np.nextafter(2.0**-24, 0), 1e-3, 0.2, 1.0, 7.0, 40.0])


def _stream_with(key) -> K.KeyedStream:
    s = K.KeyedStream.__new__(K.KeyedStream)
    s.key = np.asarray(key, dtype=np.uint64)
    return s


def _keys_rates(nrates: int):
    keys = K.stream_keys(ROOTS, K.PURPOSE_NOISE, range(nrates)).reshape(-1, 2)
    return keys, np.tile(RATES[:nrates], len(ROOTS))


@pytest.mark.parametrize("nc", [1, 2, 9, 300, 700])
def test_kernel_round_equals_numpy_and_single_streams(nc, monkeypatch):
    keys, r = _keys_rates(len(RATES))
    monkeypatch.setattr(K, "noise_kernel", lambda draws: None)
    ref = K.discrete_laplace_bulk(keys, nc, r)
    monkeypatch.setattr(K, "noise_kernel", lambda draws: kernel)
    got = K.discrete_laplace_bulk(keys, nc, r)
    assert np.array_equal(got, ref)
    for s in range(0, len(keys), 7):
        assert np.array_equal(got[s], K.discrete_laplace(_stream_with(keys[s]), np.arange(nc), r[s])), s


class _Declining:
    """The kernel, declining streams ``bad`` (as for a draw only the exact fallbacks decide)
    after scribbling over their draws."""

    def __init__(self, bad):
        self.bad = bad
        self.philox_streams = kernel.philox_streams

    def laplace_rounds(self, u, w1, w2, x, nc, *consts_out):
        *consts, y, ok, undecided = consts_out
        kernel.laplace_rounds(u, w1, w2, x, nc, *consts, y, ok, undecided)
        for s in self.bad:
            y[s * nc : (s + 1) * nc] = 12345
            ok[s * nc : (s + 1) * nc] = True
            undecided[s] = 0


def test_a_declined_stream_is_redone_by_numpy(monkeypatch):
    keys, r = _keys_rates(len(RATES))
    nc = 50
    monkeypatch.setattr(K, "noise_kernel", lambda draws: None)
    ref = K.discrete_laplace_bulk(keys, nc, r)
    monkeypatch.setattr(K, "noise_kernel", lambda draws: _Declining([0, 3, len(keys) - 1]))
    assert np.array_equal(K.discrete_laplace_bulk(keys, nc, r), ref)


def test_the_kernel_loads_only_when_the_draws_pay(monkeypatch):
    seen = []
    monkeypatch.setattr(K, "noise_kernel", lambda draws: seen.append(draws))
    monkeypatch.setattr(K, "_BULK_DRAWS", [0])
    keys, r = _keys_rates(2)
    K.discrete_laplace_bulk(keys, 10, r)
    K.discrete_laplace_bulk(keys, 10, r)
    assert seen == [len(keys) * 10, 2 * len(keys) * 10]  # the process's draws so far
