"""float64 columns in the Arrow CSV writer (issue 27 §1: laplace and ir-dp releases are floats,
and pandas' per-value writer took most of a 10M × 10 run): the texts are numpy's ``str`` of
each value -- what pandas' ``to_csv`` writes -- byte for byte, for every kind of double.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine import io as dio
from dpstudio.engine.io import writing


def _doubles(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "bits":  # every double, NaN payloads and subnormals included
        return np.frombuffer(rng.bytes(8 * n), dtype=np.float64).copy()
    if kind == "magnitudes":  # 1e-8 .. 1e22, both signs: both sides of every format switch
        return 10.0 ** rng.uniform(-8, 22, n) * rng.choice([-1.0, 1.0], n)
    if kind == "grid":  # releases on an output grid γ = 10^-j
        return rng.integers(0, 10**15, n) / 10.0 ** rng.integers(0, 18, n)
    if kind == "whole":  # whole numbers up to 2^62 ("12.0", "1e+16")
        return rng.integers(-(2**62), 2**62, n).astype(np.float64)
    if kind == "edges":
        e = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-4, np.nextafter(1e-4, 0), 1e10, np.nextafter(1e10, 0)]
        e += [1e15, 1e16, np.nextafter(1e16, 0), 5e-324, 1.7976931348623157e308, 0.1, 1 / 3]
        return np.array(e * (n // len(e) + 1))[:n]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["bits", "magnitudes", "grid", "whole", "edges"])
@pytest.mark.parametrize("seed", [0, 1])
def test_float_columns_written_as_pandas_writes_them(kind, seed):
    rng = np.random.default_rng(seed)
    n = 20_000
    df = pd.DataFrame({"x": _doubles(kind, rng, n), "k": np.arange(n), "y": _doubles(kind, rng, n)})
    ref = io.StringIO()
    df.to_csv(ref, index=False, lineterminator="\n")
    blocks = writing._csv_blocks(df, ",", "\n", "utf-8", block_rows=3_000)
    assert blocks is not None  # float64 columns are written by Arrow
    assert b"".join(bytes(b) for b in blocks) == ref.getvalue().encode()


def test_decimal_comma_and_float32_left_to_pandas(tmp_path):
    df = pd.DataFrame({"x": [1.5, 2.25], "y": [1, 2]})
    assert writing._csv_blocks(df, ";", "\n", "utf-8", decimal=",") is None
    assert writing._csv_blocks(df.astype({"x": np.float32}), ",", "\n", "utf-8") is None


def test_release_with_floats_through_write_table(tmp_path):
    """The release path: the same file as pandas writes, on a laplace-like release."""
    rng = np.random.default_rng(5)
    n = 50_000
    df = pd.DataFrame(
        {
            "a": np.round(rng.gamma(2.0, 1000.0, n), 1),
            "b": rng.integers(0, 100, n),
            "c": np.where(rng.random(n) < 0.05, np.nan, np.round(rng.normal(0, 1e4, n), 2)),
        }
    )
    out = tmp_path / "out.csv"
    dio.write_table(df, out)
    ref = tmp_path / "ref.csv"
    df.to_csv(ref, index=False, lineterminator="\n")
    assert out.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("decimal64", [True, False])
def test_tenths_texts_through_either_decimal_type(decimal64, monkeypatch):
    """Values on a grid of tenths are written as Arrow decimals: decimal64 where pyarrow casts
    it to text, else decimal128; the same bytes as pandas' either way (−0, NaN, out-of-range
    and off-grid values mixed in, so both the decimal texts and the others are exercised).
    """
    if decimal64 and not hasattr(__import__("pyarrow"), "decimal64"):
        pytest.skip("pyarrow without decimal64")
    monkeypatch.setattr(writing, "_DECIMAL64", [decimal64])
    df = pd.DataFrame({"x": tenths_mixed(np.random.default_rng(11), 30_000), "k": np.arange(30_000)})
    assert_writes_as_pandas(df)
    assert writing._DECIMAL64 == [decimal64]


def tenths_mixed(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values on a grid of tenths with −0, NaN, out-of-range and off-grid values mixed in."""
    v = np.round(rng.laplace(0, 1e5, n), 1)
    v[::97] = -0.0
    v[1::89] = np.nan
    v[2::83] = rng.uniform(-1, 1, v[2::83].size)  # off the grid
    v[3::79] = 2e10 + 0.5
    v[4::73] = -5e-5
    return v


def assert_writes_as_pandas(df: pd.DataFrame) -> None:
    """The CSV blocks of ``df`` (7,000 records each) are the bytes pandas writes."""
    ref = io.StringIO()
    df.to_csv(ref, index=False, lineterminator="\n")
    blocks = writing._csv_blocks(df, ",", "\n", "utf-8", block_rows=7_000)
    assert b"".join(bytes(b) for b in blocks) == ref.getvalue().encode()
