"""The fixed cost of a call on a small table (issue 27 §2) was cut by doing the same work in
fewer passes: these tests pin each shortcut against the path it replaced -- the same words,
frames, digests and releases.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.util import hash_array

from dpstudio import engine
from dpstudio.engine import keying
from dpstudio.engine import parallel as PAR
from dpstudio.engine import validation as V
from dpstudio.engine.protection import _common as C
from dpstudio.engine.types import Job


def _reference_row_hashes(X: np.ndarray) -> np.ndarray:
    """The matrix row hashes as first written: pandas' hash_array of the canonicalised values,
    folded column by column.
    """
    v = X + 0.0
    nan = np.isnan(v)
    if nan.any():
        v = np.where(nan, np.nan, v)
    H = np.asarray(hash_array(np.ascontiguousarray(v)), dtype=np.uint64).reshape(v.shape)
    h = np.zeros(v.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(v.shape[1]):
            h = (h * keying._FOLD) ^ H[:, j]
    return keying._mix64(h)


def _awkward(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Floats with every bit pattern the canonicalisation must handle: −0, NaNs of both
    signs and with payloads, ±inf, subnormals, integers beyond 2**53.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=shape) * 10.0 ** rng.integers(-300, 300, size=shape)
    flat = X.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 2.0**53 + 2, 1.0])
    pick = rng.random(flat.size) < 0.3
    flat[pick] = rng.choice(specials, int(pick.sum()))
    bits = flat.view(np.uint64)
    nan_at = rng.random(flat.size) < 0.1
    payload = rng.integers(1, 2**51, size=int(nan_at.sum()), dtype=np.uint64)
    sign = rng.integers(0, 2, size=int(nan_at.sum()), dtype=np.uint64) << np.uint64(63)
    bits[nan_at] = np.uint64(0x7FF8000000000000) | payload | sign  # NaNs, signed, with payloads
    return X


@pytest.mark.parametrize("shape", [(1080, 13), (1, 1), (1, 7), (50, 1), (9, 0), (0, 4), (333, 5)])
@pytest.mark.parametrize("seed", range(3))
def test_matrix_row_hashes_are_the_reference_words(shape, seed):
    X = _awkward(shape, seed)
    for M in (X, np.asfortranarray(X), X[:, ::-1] if shape[1] else X):
        M = M.copy(order="K")
        M.setflags(write=False)
        before = M.copy()
        got = keying.row_hashes_matrix(M)
        assert got.dtype == np.uint64 and got.shape == (shape[0],)
        assert np.array_equal(got, _reference_row_hashes(M))
        assert np.array_equal(M.view(np.uint64), before.view(np.uint64))  # input untouched


@pytest.mark.parametrize("seed", range(4))
def test_matrix_digest_is_the_column_digest(seed):
    X = _awkward((200, 6), seed)
    X[np.isinf(X)] = 1.0  # (a frame that prepare accepts holds no infinities)
    df = pd.DataFrame(X, columns=list("abcdef"))
    cols = ["d", "a", "f"]
    M = np.ascontiguousarray(df[cols].to_numpy())
    assert keying.data_digest(df, cols, matrix=M) == keying.data_digest(df, cols)
    assert np.array_equal(keying.row_hashes_matrix(M), keying.row_hashes(df, cols))


def test_small_digest_makes_no_thread_decision(monkeypatch):
    """A small block's two lanes are summed in the calling thread without asking how many
    threads the machine allows (that look costs more than the lanes); a large block still
    asks.
    """
    df = pd.DataFrame({"x": np.arange(1000.0), "y": np.arange(1000.0) % 7})
    expected = keying.digest_partial(df, ["x", "y"], parallel=False)
    asked = []
    monkeypatch.setattr(PAR, "workers", lambda: asked.append(1) or 1)
    assert keying.digest_partial(df, ["x", "y"], parallel=True) == expected
    assert asked == []
    monkeypatch.setattr(keying, "MIN_CELLS", 10)
    assert keying.digest_partial(df, ["x", "y"], parallel=True) == expected
    assert asked


def _job(df: pd.DataFrame) -> Job:
    return Job(data=df, roles={}, domains={}, params={}, rng=np.random.default_rng(0))


@pytest.mark.parametrize("order", ["all", "subset", "reordered"])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("small", [True, False])
def test_frame_with_matrix_is_frame_with(monkeypatch, order, layout, small):
    rng = np.random.default_rng(7)
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 9, 40),
            "b": rng.normal(size=40),
            "t": pd.Series(rng.choice(["x", "y"], 40), dtype="str"),
            "c": rng.integers(0, 3, 40).astype(np.int32),
        }
    )
    if order == "all":
        df = df.drop(columns="t")
    cols = {"all": ["a", "b", "c"], "subset": ["c", "a"], "reordered": ["c", "a", "b"]}[order]
    if order == "reordered":
        df = df.drop(columns="t")
    M = rng.normal(size=(40, len(cols)))
    M = {"C": np.ascontiguousarray(M), "F": np.asfortranarray(M), "strided": np.repeat(M, 2, axis=1)[:, ::2]}[
        layout
    ]
    if not small:
        monkeypatch.setattr(C, "BLOCK_CELLS", 0)
    want = C.frame_with(_job(df), {c: M[:, j].copy() for j, c in enumerate(cols)})
    got = C.frame_with_matrix(_job(df), cols, M.copy(order="K"))
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got.dtypes.tolist() == want.dtypes.tolist()
    assert got.columns.equals(want.columns) and got.index.equals(want.index)


def test_frame_with_matrix_hands_the_block_over_only_when_it_is_the_release():
    df = pd.DataFrame({"a": np.arange(6.0), "b": np.arange(6)})
    M = np.arange(12.0).reshape(6, 2)
    got = C.frame_with_matrix(_job(df), ["a", "b"], M)
    assert np.shares_memory(got.to_numpy(), M)  # the release block itself: no copy
    got2 = C.frame_with_matrix(_job(df), ["b", "a"], M)  # not the frame's order: a new frame
    assert got2["b"].tolist() == M[:, 0].tolist() and got2["a"].tolist() == M[:, 1].tolist()


def test_column_names_of_any_type_are_read_once_as_text():
    """prepare reads the column names as one list: non-text names become their text, roles
    and types named by either spelling find them, as before.
    """
    df = pd.DataFrame({1: np.arange(10.0), "x": np.arange(10.0) % 3, 2.5: np.arange(10) % 2})
    r = engine.protect(
        df, "mdav", roles={1: "k-quasi", "x": "k-quasi"}, types={"2.5": "numeric"}, k=3, seed=1
    )
    assert r.data.columns.tolist() == ["1", "x", "2.5"]
    assert r.protected_attributes == ["1", "x"]
    assert r.types == {"2.5": "numeric"}
    with pytest.raises(Exception, match="not in the data"):
        engine.protect(df, "mdav", roles={"nope": "k-quasi"}, k=3, seed=1)


def test_check_frame_duplicates_after_text_conversion():
    with pytest.raises(Exception, match="Duplicate column name"):
        V.check_frame(pd.DataFrame([[1, 2], [3, 4]], columns=[1, "1"]))
    V.check_frame(pd.DataFrame([[1, 2], [3, 4]], columns=["a", "b"]))


def _mixed(seed: int, n: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.integers(-5, 5, n),
            "t": pd.Series(rng.choice(["x", "y"], n), dtype="str"),
            "b": rng.normal(size=n),
            "c": np.full(n, 2.5),
            "d": rng.integers(0, 3, n).astype(np.uint8),
        }
    )


@pytest.mark.parametrize(
    "frame,cols",
    [
        ("numbers", ["a", "b", "c", "d"]),  # every column, in order: pandas' own block
        ("numbers", ["d", "a", "c"]),  # a subset of a frame of numbers: one gather
        ("mixed", ["b", "a", "c"]),  # beside a text column
        ("numbers", ["b"]),
    ],
)
def test_numeric_blocks_are_the_block_and_its_transpose(frame, cols):
    df = _mixed(1)
    if frame == "numbers":
        df = df.drop(columns="t")
    X, XT = V.numeric_blocks(df, cols)
    want = df[cols].to_numpy(dtype=np.float64)
    assert np.array_equal(X, want) and np.array_equal(XT, want.T)
    assert X.flags.c_contiguous and XT.flags.c_contiguous
    assert not X.flags.writeable and not XT.flags.writeable
    assert np.array_equal(V.numeric_block(df, cols), X)
    assert V.numeric_blocks(df, cols, names=df.columns.tolist())[0].tobytes() == X.tobytes()
    assert V.constant_columns(df, cols, matrix=X, by_column=XT) == V.constant_columns(df, cols)
    assert V.constant_columns(df, cols, matrix=X, by_column=XT) == (["c"] if "c" in cols else [])
    assert keying.data_digest(df, cols, matrix=X, by_column=XT) == keying.data_digest(df, cols)


def test_prepared_digest_reads_the_columns_once_and_lets_them_go():
    from dpstudio.engine import api

    df = _mixed(2)
    roles = {"a": "k-quasi", "b": "k-quasi", "d": "k-quasi"}
    prep = api.prepare(df, "mdav", roles, k=3)
    assert prep._by_column is not None
    assert np.array_equal(prep._by_column, prep._matrix.T)
    d = prep.digest()
    assert prep._by_column is None  # (not kept beside the matrix)
    assert d == keying.data_digest(prep.data, ["a", "b", "d"]) == prep.digest()


@pytest.mark.parametrize("order", ["random", "input", "households"])
def test_release_from_the_block_is_the_release_from_the_frame(monkeypatch, order):
    """mdav hands the API its release block (Output.block): the keyed order is then one
    gather of it -- the same release as the frame's gather (take_rows), for every order.
    """
    rng = np.random.default_rng(11)
    n = 90
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 40, n),
            "b": rng.normal(50.0, 9.0, n),
            "hh": np.repeat(np.arange(30), 3),
        }
    )
    roles = {"a": "k-quasi", "b": "k-quasi"}
    kw = {}
    if order == "households":
        roles["hh"] = "household"
        kw["keep_household"] = True
    else:
        df = df.drop(columns="hh")
    seen = []
    real = C._is_release_block

    def spy(job, cols, M):
        seen.append(real(job, cols, M))
        return seen[-1]

    # (since p-eia the block's frame is built once by the API: _is_release_block decides)
    monkeypatch.setattr(C, "_is_release_block", spy)
    fast = engine.protect(df, "mdav", roles=roles, k=3, seed=5, order=order, **kw)
    monkeypatch.setattr(C, "_is_release_block", lambda job, cols, M: False)
    slow = engine.protect(df, "mdav", roles=roles, k=3, seed=5, order=order, **kw)
    assert seen == [order != "households"]  # (a household column is not replaced: no block)
    pd.testing.assert_frame_equal(fast.data, slow.data, check_exact=True)
    assert np.array_equal(np.asarray(fast.row_map), np.asarray(slow.row_map))
    assert fast.guarantee == slow.guarantee and fast.info == slow.info


def _all_params():
    from dpstudio.engine.registry import all_methods

    return [(m.id, p) for m in all_methods() for p in m.params]


def test_cached_constraint_is_the_fresh_wording_of_each_parameter():
    """A parameter's constraint text is worded once and kept on it: it must equal a fresh
    wording from its own fields for every parameter of every method -- parameters of the same
    name differ (k from 1, 2 or 3), so a cache shared by name would give a wrong message.
    """
    import dataclasses

    from dpstudio.engine.params import Param

    seen: dict[str, set[str]] = {}
    for _mid, p in _all_params():
        for _ in range(2):  # the first call words it, the second reads it back
            assert p.constraint() == p._constraint()
        seen.setdefault(p.name, set()).add(p.constraint())
        q = dataclasses.replace(p)
        assert q == p and "_constraint_text" not in repr(p)
    assert len(seen["k"]) >= 2  # (what makes a cache by name wrong)
    a = Param("z", "int", 2, "", minimum=2)
    b = Param("z", "int", 2, "", minimum=3)
    assert a.constraint() == "an int in the range [2, inf)"
    assert b.constraint() == "an int in the range [3, inf)"


@pytest.mark.parametrize("bad", [0, "x", 2.5])
def test_parameter_messages_keep_their_constraint(bad):
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.registry import get_method

    spec = get_method("mdav")
    spec.check_params({"k": 3})  # (the text is cached by now)
    with pytest.raises(ParameterError, match=r"an int in the range \[1, inf\)"):
        spec.check_params({"k": bad})


@pytest.mark.parametrize("n", [1, 2, 1080, keying._POWERS_KEPT_UP_TO, keying._POWERS_KEPT_UP_TO + 1])
def test_kept_powers_are_fresh_powers_of_their_own_multiplier(n):
    """The digest's powers A^1..A^n and B^1..B^n are kept per (multiplier, n): each equals a
    fresh computation -- a cache keyed on n alone would hand lane B the powers of A.
    """
    for mult in (keying._A, keying._B):
        for _ in range(2):  # computed, then read back
            got = keying._powers(mult, n)
            with np.errstate(over="ignore"):
                want = np.cumprod(np.full(n, mult, dtype=np.uint64))
            assert got.dtype == np.uint64 and np.array_equal(got, want)
            if n <= keying._POWERS_KEPT_UP_TO:
                assert not got.flags.writeable
    assert not np.array_equal(keying._powers(keying._A, n), keying._powers(keying._B, n))
    h = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B1)
    a, b = keying._lane_a(h, n), keying._lane_b(h, n)
    assert (a, b) == (keying._lane_a(h, n), keying._lane_b(h, n))  # (the kept powers unchanged)
