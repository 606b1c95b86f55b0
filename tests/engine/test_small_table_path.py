"""Small numeric tables take a faster preparation path (issue 27 §2): the protected columns
are read once as a float matrix (``validation.numeric_block``) for the checks, the data digest
and the method's ``job.matrix``, and a release whose every column is replaced is built as one
float block.  The path must change nothing: the same releases, digests, notes and errors as
the column-by-column path (forced here with ``BLOCK_CELLS = 0``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine import keying
from dpstudio.engine import validation as V
from dpstudio.engine.errors import InputError
from dpstudio.engine.protection import _common as C


def _column_path(monkeypatch) -> None:
    monkeypatch.setattr(V, "BLOCK_CELLS", 0)
    monkeypatch.setattr(C, "BLOCK_CELLS", 0)


def _frame(seed: int, *, n: int = 60, nan: bool = False, text: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 50, n),
            "b": np.round(rng.normal(100.0, 20.0, n), 2),
            "c": rng.integers(-(2**60), 2**60, n),  # beyond 2**53: the float conversion rounds
            "d": rng.choice([0.0, -0.0, 1.5], n),  # −0 and +0 must digest alike
        }
    )
    if nan:
        df.loc[rng.choice(n, 5, replace=False), "b"] = np.nan
    if text:
        df["t"] = pd.Series(rng.choice(["x", "y", "z"], n), dtype="str")
    return df


@pytest.mark.parametrize("seed", range(6))
def test_digest_of_the_matrix_is_the_digest_of_the_columns(seed):
    df = _frame(seed, nan=seed % 2 == 1)
    rng = np.random.default_rng(100 + seed)
    cols = list(rng.permutation(df.columns))[: 1 + seed % 4]
    X = V.numeric_block(df, cols)
    assert X is not None
    assert keying.data_digest(df, cols, matrix=X) == keying.data_digest(df, cols)
    assert np.array_equal(keying.row_hashes_matrix(X), keying.row_hashes(df, cols))


def test_numeric_block_only_for_plain_numbers_on_small_tables(monkeypatch):
    df = _frame(0, text=True)
    assert V.numeric_block(df, ["a", "t"]) is None  # text
    assert V.numeric_block(df.assign(a=df["a"].astype("Int64")), ["a"]) is None  # nullable
    assert V.numeric_block(df.assign(a=df["a"] > 3), ["a"]) is None  # boolean
    X = V.numeric_block(df, ["b", "a"])  # a subset, in the asked order, among text
    assert np.array_equal(X, df[["b", "a"]].to_numpy(dtype=np.float64), equal_nan=True)
    assert not X.flags.writeable
    monkeypatch.setattr(V, "BLOCK_CELLS", len(df) * 2 - 1)
    assert V.numeric_block(df, ["b", "a"]) is None  # too large


def _release(df, method, roles, **kw):
    r = engine.protect(df, method, roles=roles, seed=7, **kw)
    return r


def _same(r1, r2) -> None:
    pd.testing.assert_frame_equal(r1.data, r2.data, check_exact=True)
    assert r1.guarantee == r2.guarantee
    assert r1.info == r2.info
    assert r1.warnings == r2.warnings
    assert r1.public_warnings == r2.public_warnings
    assert np.array_equal(np.asarray(r1.row_map), np.asarray(r2.row_map))
    assert r1.dropped_rows == r2.dropped_rows


CASES = [
    ("mdav", {"a": "k-quasi", "b": "k-quasi", "c": "k-quasi", "d": "k-quasi"}, {"k": 3}),
    ("mdav", {"b": "k-quasi", "a": "k-quasi"}, {"k": 4}),  # a subset, other columns kept
    ("mdav", {"a": "k-quasi", "b": "k-quasi"}, {"k": 3, "order": "input"}),
    ("mdav-swap", {"a": "k-quasi", "b": "k-quasi", "c": "k-quasi", "d": "k-quasi"}, {"k": 3}),
    (
        "laplace",
        {"a": "eps-quasi", "b": "eps-quasi"},
        {"epsilon": 1.0, "domains": {"a": (0, 50), "b": (0, 200)}},
    ),
    (
        "ir-dp",
        {"a": "eps-quasi", "b": "eps-quasi"},
        {"k": 5, "epsilon": 1.0, "domains": {"a": (0, 50), "b": (0, 200)}},
    ),
]


@pytest.mark.parametrize("method,roles,kw", CASES)
@pytest.mark.parametrize("text", [False, True])
def test_release_is_the_same_on_both_paths(monkeypatch, method, roles, kw, text):
    df = _frame(3, text=text)
    kw = dict(kw)
    domains = kw.pop("domains", None)
    fast = _release(df, method, roles, domains=domains, **kw)
    with monkeypatch.context() as m:
        _column_path(m)
        slow = _release(df, method, roles, domains=domains, **kw)
    _same(fast, slow)


def test_missing_values_dropped_and_constant_columns_alike(monkeypatch):
    df = _frame(5, nan=True).assign(e=3.0)
    roles = {"a": "k-quasi", "b": "k-quasi", "e": "k-quasi"}
    fast = _release(df, "mdav", roles, k=3, drop_missing=True)
    with monkeypatch.context() as m:
        _column_path(m)
        slow = _release(df, "mdav", roles, k=3, drop_missing=True)
    _same(fast, slow)
    assert fast.dropped_rows and any("constant" in w for w in fast.warnings)


def test_refusals_are_the_same_on_both_paths(monkeypatch):
    roles = {"a": "k-quasi", "b": "k-quasi"}
    inf = _frame(1).astype({"a": float})
    inf.loc[[4, 9], "b"] = np.inf
    nan = _frame(1, nan=True)
    msgs = []
    for df in (inf, nan):
        with pytest.raises(InputError) as fast:
            _release(df, "mdav", roles, k=3)
        with monkeypatch.context() as m:
            _column_path(m)
            with pytest.raises(InputError) as slow:
                _release(df, "mdav", roles, k=3)
        assert str(fast.value) == str(slow.value)
        msgs.append(str(fast.value))
    assert "'b'" in msgs[0] and "infinite" in msgs[0]
    assert "missing" in msgs[1]


def test_input_and_release_stay_apart():
    """The private copy is shallow (copy-on-write): changing the input after the call, or the
    release, changes neither the other nor the result's copy of the original.
    """
    df = _frame(2)
    before = df.copy(deep=True)
    r = engine.protect(df, "mdav", roles={"a": "k-quasi", "b": "k-quasi"}, k=3, seed=1)
    released = r.data.copy(deep=True)
    original = r.original.copy(deep=True)
    df.loc[0, "a"] = 999
    df["b"] = -1.0
    pd.testing.assert_frame_equal(r.data, released)
    pd.testing.assert_frame_equal(r.original, original)
    r.data.loc[0, "a"] = -5.0
    r.original.loc[1, "b"] = -7.0
    pd.testing.assert_frame_equal(df.drop(index=0).drop(columns="b"), before.drop(index=0).drop(columns="b"))
    assert (df["b"] == -1.0).all()
