"""Issue 27 §1: the compiled texts of tenths (:mod:`dpstudio.engine.io._texts_kernel`) are
Arrow's texts of the decimals k/10 byte for byte, and the CSV writer with them writes what
pandas writes (as without them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine.io import writing

kernel = pytest.importorskip("dpstudio.engine.io._texts_kernel")

from tests.engine.test_io_float_writer import assert_writes_as_pandas, tenths_mixed  # noqa: E402


def _arrow(k: np.ndarray) -> list[str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    dec = pa.Array.from_buffers(pa.decimal128(18, 1), k.size, [None, pa.py_buffer(np.stack([k, k >> 63], 1))])
    return pc.cast(dec, pa.string()).to_pylist()


def _compiled(k: np.ndarray, monkeypatch) -> list[str]:
    monkeypatch.setattr(writing.TEXTS_KERNEL, "slot", [kernel])
    monkeypatch.delenv("DPSTUDIO_TEXTS_NUMPY", raising=False)
    return writing._decimal_texts(k).to_pylist()


def _edges() -> np.ndarray:
    e = list(range(-1000, 1001))
    for d in range(1, 19):
        p = 10**d
        e += [p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]
    e += [2**63 - 1 - (2**63 - 1) % 10 - 10**18 + 10**17]  # below 10^18
    return np.array([v for v in e if abs(v) < 10**18], dtype=np.int64)


def test_edges_of_every_digit_count_are_arrows_texts(monkeypatch):
    k = _edges()
    assert _compiled(k, monkeypatch) == _arrow(k)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(10**18) + 1, 10**18 - 1), min_size=1, max_size=50))
def test_random_tenths_are_arrows_texts(values):
    import _pytest.monkeypatch

    mp = _pytest.monkeypatch.MonkeyPatch()
    try:
        k = np.array(values, dtype=np.int64)
        assert _compiled(k, mp) == _arrow(k)
    finally:
        mp.undo()


def test_empty_and_zero(monkeypatch):
    assert _compiled(np.array([], dtype=np.int64), monkeypatch) == []
    assert _compiled(np.array([0, -1, 1, -10, 10], dtype=np.int64), monkeypatch) == [
        "0.0",
        "-0.1",
        "0.1",
        "-1.0",
        "1.0",
    ]


@pytest.mark.parametrize("seed", [0, 1])
def test_csv_writer_with_the_kernel_writes_what_pandas_writes(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = 40_000
    df = pd.DataFrame(
        {"x": tenths_mixed(rng, n), "k": np.arange(n), "y": np.round(rng.gamma(2.0, 1000.0, n))}
    )
    monkeypatch.setattr(writing.TEXTS_KERNEL, "slot", [])
    monkeypatch.setattr(writing.TEXTS_KERNEL, "min_work", 0)
    monkeypatch.setattr(writing.TEXTS_KERNEL, "min_work_compile", 0)
    calls = []
    real = kernel.tenths_fill
    monkeypatch.setattr(kernel, "tenths_fill", lambda *a: calls.append(1) or real(*a))
    assert_writes_as_pandas(df)
    assert calls  # the kernel wrote the texts


def test_kernel_tiers(monkeypatch):
    import sys

    T = writing.TEXTS_KERNEL
    monkeypatch.setattr(T, "slot", [])
    monkeypatch.setattr(T, "cached", [True])
    monkeypatch.delenv("DPSTUDIO_TEXTS_NUMPY", raising=False)
    monkeypatch.delitem(sys.modules, "numba")  # as in a process that has not imported it
    df = pd.DataFrame({"x": np.round(np.linspace(0, 100, 1000), 1), "k": np.arange(1000)})
    b"".join(bytes(b) for b in writing._csv_blocks(df, ",", "\n", "utf-8"))
    assert not T.slot  # a small table: not loaded
    assert T.get(T.min_work - 1) is None
    assert T.get(T.min_work) is not None
    monkeypatch.setenv("DPSTUDIO_TEXTS_NUMPY", "1")
    assert T.get(1 << 40) is None
