"""MDAV's size-dependent overhead on EIA-sized tables (issue 27 §2, p-eia): the shortcuts must
give the same bytes as the plain path -- the release, its record order, the data digest, the
clustering -- on random tables of several shapes and dtypes (C and non-contiguous numpy
inputs, several blocks, Arrow-backed columns, a named index, NaNs dropped), in random and
input order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine import api, keying
from dpstudio.engine import validation as V
from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.protection import _common as C
from dpstudio.engine.types import Job, listener


def _plain_path(monkeypatch) -> None:
    """The column-by-column path: no numeric block, no release block (the reference)."""
    monkeypatch.setattr(V, "BLOCK_CELLS", 0)
    monkeypatch.setattr(C, "BLOCK_CELLS", 0)


def _table(kind: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, 400))
    m = int(rng.integers(1, 7))
    base = np.round(np.exp(rng.normal(6.0, 1.5, size=(n, m))), int(rng.integers(0, 3)))
    base[rng.random((n, m)) < 0.05] = -0.0  # −0 digests as +0
    if kind == "float-C":
        return pd.DataFrame(np.ascontiguousarray(base), columns=[f"c{j}" for j in range(m)])
    if kind == "float-strided":  # a frame over a non-contiguous view (every other column)
        wide = np.repeat(base, 2, axis=1)[:, ::2]
        return pd.DataFrame(wide, columns=[f"c{j}" for j in range(m)], copy=False)
    if kind == "ints-mixed":  # one block per dtype, several dtypes
        cols = {}
        for j in range(m):
            dt = [np.int64, np.int32, np.uint16, np.float32, np.float64][j % 5]
            cols[f"c{j}"] = (base[:, j] % 60000).astype(dt)
        return pd.DataFrame(cols)
    if kind == "arrow":
        return pd.DataFrame(
            {f"c{j}": pd.array(base[:, j], dtype="float64[pyarrow]") for j in range(m)}
            | {"i": pd.array(rng.integers(0, 9, n), dtype="int64[pyarrow]")}
        )
    if kind == "named-index":
        df = pd.DataFrame(base, columns=[f"c{j}" for j in range(m)])
        df.index = pd.RangeIndex(n, name="rec")
        return df
    if kind == "with-nan":
        df = pd.DataFrame(base, columns=[f"c{j}" for j in range(m)])
        df.iloc[rng.choice(n, 3, replace=False), 0] = np.nan
        return df
    raise AssertionError(kind)


KINDS = ["float-C", "float-strided", "ints-mixed", "arrow", "named-index", "with-nan"]


def _protect(df: pd.DataFrame, order: str, seed: int):
    roles = {c: "k-quasi" for c in df.columns}
    return engine.protect(df, "mdav", roles=roles, k=3, seed=seed, order=order, drop_missing=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", ["random", "input"])
@pytest.mark.parametrize("seed", range(3))
def test_release_is_the_plain_paths_bytes(monkeypatch, kind, order, seed):
    df = _table(kind, seed)
    before = df.copy(deep=True)
    fast = _protect(df, order, seed)
    pd.testing.assert_frame_equal(df, before, check_exact=True)  # the input untouched
    with monkeypatch.context() as mp:
        _plain_path(mp)
        slow = _protect(df, order, seed)
    pd.testing.assert_frame_equal(fast.data, slow.data, check_exact=True)
    assert fast.data.dtypes.tolist() == slow.data.dtypes.tolist()
    assert fast.data.to_csv(index=False).encode() == slow.data.to_csv(index=False).encode()
    assert fast.data.index.equals(slow.data.index) and fast.data.index.name == slow.data.index.name
    assert np.array_equal(np.asarray(fast.row_map), np.asarray(slow.row_map))
    assert fast.guarantee == slow.guarantee and fast.info == slow.info
    assert fast.warnings == slow.warnings and fast.dropped_rows == slow.dropped_rows


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_prepared_digest_is_the_column_digest(kind, seed):
    """The digest of a prepared run (block, finite hint) equals the column path's digest of
    the same records.
    """
    df = _table(kind, seed)
    prep = api.prepare(df, "mdav", {c: "k-quasi" for c in df.columns}, k=3, drop_missing=True)
    assert prep._finite == (prep._matrix is not None and kind != "with-nan")
    assert prep.digest() == keying.data_digest(prep.data, list(prep.protected))
    assert prep.names == prep.data.columns.tolist()


def test_finite_hint_skips_only_the_nan_scan():
    rng = np.random.default_rng(3)
    for shape in [(1, 1), (7, 3), (4092, 10), (333, 1)]:
        X = np.round(rng.normal(size=shape) * 100.0, 1)
        X[rng.random(shape) < 0.1] = -0.0
        X[:, 0] = X[0, 0] if shape[0] > 1 else X[:, 0]  # a constant column
        T = np.ascontiguousarray(X.T)
        assert np.array_equal(keying.row_hashes_matrix(X, finite=True), keying.row_hashes_matrix(X))
        assert np.array_equal(
            keying.row_hashes_matrix(X, by_column=T, finite=True), keying.row_hashes_matrix(X, by_column=T)
        )
        df = pd.DataFrame(X, columns=[f"c{j}" for j in range(shape[1])])
        cols = df.columns.tolist()
        want = V.constant_columns(df, cols)
        assert V.constant_columns(df, cols, matrix=X, by_column=T, finite=True) == want
        assert "c0" in want or shape[0] == 1
    # a NaN: the hint is never given for it; without the hint the NaNs are canonicalised
    X = np.array([[1.0, np.nan], [2.0, -np.nan]])
    assert keying.row_hashes_matrix(X)[0] != keying.row_hashes_matrix(np.array([[1.0, 0.0]]))[0]
    assert np.array_equal(
        keying.row_hashes_matrix(X)[1:], keying.row_hashes_matrix(np.array([[2.0, np.nan]]))
    )


@pytest.mark.parametrize("n", [2, 3, 4, 5, 64, 65, 834, 1080, 4092, 1 << 16, (1 << 16) + 1])
def test_permutation_is_the_lexsort_of_the_sort_keys(n):
    for i in range(3):
        stream = K.KeyedStream((n * 7 + i, 99), K.PURPOSE_SHUFFLE, i)
        k0, k1 = K.sort_keys(stream, np.arange(n, dtype=np.int64))
        want = np.lexsort((k1, k0))
        got = K.permutation(stream, n)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("tie", ["high-bits", "first-key"])
def test_permutation_with_tied_keys_takes_the_exact_path(monkeypatch, tie):
    """Crafted words whose first keys tie in their high bits (the packed words cannot order
    them) or entirely (the second key decides): still ``lexsort((k1, k0))``.
    """
    n = 300
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    if tie == "high-bits":  # equal above bit 9, different below: the packed order is wrong
        words[10, 0] = (words[20, 0] & ~np.uint64(511)) | np.uint64(500)
        words[20, 0] = words[20, 0] & ~np.uint64(511)
    else:
        words[10, 0] = words[20, 0]
        words[10, 1] = words[20, 1] - np.uint64(1)
    monkeypatch.setattr(K.KeyedStream, "block", lambda self, ids, rnd=0, lane=0: words[np.asarray(ids)])
    stream = K.KeyedStream((1, 2), K.PURPOSE_SHUFFLE, 0)
    want = np.lexsort((words[:, 1], words[:, 0]))
    assert np.array_equal(K.permutation(stream, n), want)
    assert list(want).index(10) < list(want).index(20) if tie == "first-key" else True


def test_listener_is_none_only_for_the_jobs_defaults():
    job = Job(
        data=pd.DataFrame({"a": [1.0, 2.0]}), roles={}, domains={}, params={}, rng=np.random.default_rng(0)
    )
    assert listener(job.progress) is None and listener(job.check_cancel) is None and listener(None) is None
    seen: list[float] = []
    assert listener(seen.append) == seen.append


def test_clustering_runs_in_one_kernel_entry_when_no_one_listens(monkeypatch):
    """engine.protect without callbacks: one entry into the compiled loop (not one per 64
    steps); with a progress callback the loop still stops to report.  The same release.
    """
    pytest.importorskip("numba")
    MA._mdav_kernel()  # (loaded: the kernel path)
    if not MA._KERNEL or MA._KERNEL[0] is None:
        pytest.skip("numba kernel not available")
    kernel = MA._KERNEL[0]
    monkeypatch.setattr(MA, "_kernel_pays", lambda n, m, k: True)
    entries = []
    real = kernel.mdav_run

    def counted(*a):
        entries.append(1)
        return real(*a)

    monkeypatch.setattr(kernel, "mdav_run", counted)
    rng = np.random.default_rng(4)
    df = pd.DataFrame(rng.normal(size=(3000, 3)), columns=list("abc"))
    roles = {c: "k-quasi" for c in df.columns}
    quiet = engine.protect(df, "mdav", roles=roles, k=3, seed=2)
    assert len(entries) == 1
    entries.clear()
    seen: list[float] = []
    loud = engine.protect(df, "mdav", roles=roles, k=3, seed=2, progress=seen.append)
    assert len(entries) > 1 and seen
    pd.testing.assert_frame_equal(quiet.data, loud.data, check_exact=True)


def test_job_column_names_are_the_frames():
    df = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    job = Job(data=df, roles={}, domains={}, params={}, rng=np.random.default_rng(0))
    assert job.column_names() == ["x", "y"] and job.column_names() is job.names
    prep = api.prepare(
        pd.DataFrame({1: np.arange(6.0), "z": np.arange(6.0) % 2}), "mdav", {1: "k-quasi"}, k=3
    )
    assert prep.names == ["1", "z"] == prep.data.columns.tolist()


@pytest.mark.parametrize("kind", KINDS)
def test_column_dtypes_are_the_frames_dtypes(kind):
    df = _table(kind, 5)
    df["t"] = pd.Series(["x", "y"] * (len(df) // 2) + ["z"] * (len(df) % 2), dtype="str")
    df["k"] = pd.Categorical(["a"] * len(df))
    df["b"] = df.index % 2 == 0
    df["n"] = pd.array([1] * len(df), dtype="Int64")
    for frame in (df, df[df.columns[::-1]], df.copy(deep=False), df.iloc[::2]):
        assert V.column_dtypes(frame) == frame.dtypes.tolist()
