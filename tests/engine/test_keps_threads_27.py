"""Issue 27 §1, k-eps on both cores: each path gives exactly what the path it replaced gave --
the release order from the keyed order of all records (computed alongside the generalisation)
against sorting the released records' own keys, the released columns gathered in threads
against ``take_rows`` + column assignment, the shared combination gather of the generalised
labels, and the cached class sizes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine import parallel
from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms.generalization import CodedLabels, GeneralisationResult
from dpstudio.engine.background import Ahead
from dpstudio.engine.codes import factorize, take_rows
from dpstudio.engine.protection import k_eps as KE


def _stream(seed: int) -> K.KeyedStream:
    return K.KeyedStream((seed, seed + 1), K.PURPOSE_SHUFFLE, 0)


def _exact_order(stream: K.KeyedStream, kept: np.ndarray, rel_idx: np.ndarray) -> np.ndarray:
    """The release order as run_keps computed it before issue 27's threads."""
    k0, k1 = K.sort_keys(stream, kept[rel_idx])
    return rel_idx[K.order_by_keys(k0, k1)]


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 5000),
    keep=st.floats(0.0, 1.0),
    release=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    chunk=st.sampled_from([1, 7, 1000, 1 << 18]),
)
def test_order_of_all_records_restricted_is_the_subset_order(n, keep, release, seed, chunk):
    rng = np.random.default_rng(seed)
    kept = np.flatnonzero(rng.random(n) < keep)  # records the generalisation kept
    rel_idx = np.flatnonzero(rng.random(kept.size) < release)  # positions in kept released
    stream = _stream(seed)
    old_chunk = KE._KEY_CHUNK
    KE._KEY_CHUNK = chunk  # the keys drawn in chunks of this many ids
    try:
        order_all = KE._keyed_order_all(stream, n)
    finally:
        KE._KEY_CHUNK = old_chunk
    assert order_all is not None  # 128-bit keys: no tie among 5,000
    got = KE._order_of_subset(order_all, kept[rel_idx], rel_idx, n)
    assert np.array_equal(got, _exact_order(stream, kept, rel_idx))


def test_tied_first_keys_leave_the_exact_path(monkeypatch):
    """Two ids with the same first key: no order of all records (None), and _release_order
    sorts the released records' own keys (ties broken by the second key)."""
    n = 300
    real = K.KeyedStream.block

    def tied(self, ids, rnd=0, lane=0):
        w = real(self, ids, rnd, lane)
        w[:, 0] = w[:, 0] % np.uint64(7)  # many ties in the first word
        return w

    monkeypatch.setattr(K.KeyedStream, "block", tied)
    stream = _stream(3)
    assert KE._keyed_order_all(stream, n) is None

    class _J:  # what _release_order reads of a job
        params = {"order": "random"}
        n = 300

    kept = np.arange(0, n, 2)
    rel = np.ones(kept.size, dtype=bool)
    ahead = Ahead(lambda: KE._keyed_order_all(stream, n), cells=0)
    got = KE._release_order(_J(), kept, rel, stream, ahead)  # type: ignore[arg-type]
    assert np.array_equal(got, _exact_order(stream, kept, np.arange(kept.size)))


def test_ahead_runs_in_a_thread_and_raises_there(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)
    monkeypatch.setenv("DPSTUDIO_THREADS", "2")
    import threading

    seen = []
    a = Ahead(lambda: seen.append(threading.current_thread().name) or 7, cells=1)
    assert a.result() == 7 and seen == ["dpstudio-ahead"]

    def boom():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        Ahead(boom, cells=1).result()
    monkeypatch.setenv("DPSTUDIO_THREADS", "1")
    seen.clear()
    a = Ahead(lambda: seen.append(threading.current_thread().name) or 8, cells=1)
    assert seen == [] and a.result() == 8 and seen == [threading.current_thread().name]


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cats = np.array(["a", "bb", "ccc", "dddd"], dtype=object)
    df = pd.DataFrame(
        {
            "t_codes": pd.Series(cats[rng.integers(0, 4, n)], dtype="str"),
            "t_plain": pd.Series(cats[rng.integers(0, 4, n)], dtype="str"),
            "t_missing": pd.Series(
                np.where(rng.random(n) < 0.2, None, cats[rng.integers(0, 4, n)]), dtype="str"
            ),
            "obj": pd.Series(cats[rng.integers(0, 4, n)], dtype=object),
            "i": rng.integers(-5, 5, n),
            "f": rng.normal(size=n),
            "b": rng.random(n) < 0.5,
            "nullable": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 3, n)), dtype="Int64"),
            "cat": pd.Categorical(cats[rng.integers(0, 4, n)]),
        }
    )
    factorize(df["t_codes"])  # remembered codes: gathered through them
    factorize(df["t_missing"])
    return df


def _old_released(job, gen, kq, row_map: np.ndarray) -> pd.DataFrame:
    """run_keps's release table before issue 27's threads: take_rows of the unchanged columns,
    the generalised ones assigned."""
    new_cols = {c: KE._released_labels(gen, c, row_map) for c in kq if gen.levels.get(c, -1) != 0}
    data = take_rows(job.data[[c for c in job.data.columns if c not in new_cols]], row_map)
    for c, v in new_cols.items():
        data[c] = v
    return data[list(job.data.columns)]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_released_columns_in_threads_equal_take_rows(monkeypatch, threads, seed):
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)
    monkeypatch.setenv("DPSTUDIO_THREADS", threads)
    n = 500
    df = _frame(n, seed)
    rng = np.random.default_rng(seed + 10)
    # a generalisation of two columns given as codes per combination (as OLA returns them)
    n_combos = 9
    rows = rng.integers(0, n_combos, n)
    codes = {
        "t_codes": rng.integers(0, 3, n_combos).astype(np.int32),
        "i": rng.integers(0, 2, n_combos).astype(np.int32),
    }
    cats = {"t_codes": np.array(["x", "y", "z"], dtype=object), "i": np.array(["<0", ">=0"], dtype=object)}
    gen = GeneralisationResult(
        algorithm="ola",
        k=2,
        columns=["t_codes", "i", "t_plain"],
        class_id=np.zeros(n, dtype=np.int64),
        labels=CodedLabels(codes, cats, rows=rows),
        loss=0.0,
        loss_name="precision",
        cell_loss=np.zeros(n),
        levels={"t_codes": 1, "i": 2, "t_plain": 0},
    )

    class _J:
        data = df

    row_map = rng.permutation(n)[: n - 37]
    new = KE._released_data(
        _J(), gen, ["t_codes", "i", "t_plain"], [], np.zeros((n, 0)), row_map, None, row_map
    )  # type: ignore[arg-type]
    old = _old_released(_J(), gen, ["t_codes", "i", "t_plain"], row_map)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert list(new.dtypes) == list(old.dtypes) and new.index.equals(old.index)
    assert new.to_csv(index=False) == old.to_csv(index=False)


def test_codes_of_with_shared_combos():
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 6, 100)
    lab = CodedLabels(
        {"a": np.arange(6, dtype=np.int32), "b": np.arange(6, dtype=np.int32)[::-1].copy()}, {}, rows=rows
    )
    r = rng.permutation(100)[:40]
    combos = lab.combos_of(r)
    for c in "ab":
        assert np.array_equal(lab.codes_of(c, r, combos=combos), lab.codes_of(c, r))
        assert np.array_equal(lab.codes_of(c, r), lab._codes[c][rows[r]])
    per_record = CodedLabels({"a": np.arange(5)}, {})
    assert per_record.combos_of(np.arange(3)) is None
    assert np.array_equal(per_record.codes_of("a", np.array([4, 1])), [4, 1])


@pytest.mark.parametrize("ids", [[], [-1, -1], [0, 0, 2, -1], [3, -1, 3, 0, 1]])
def test_class_sizes_counted_once_as_bincount(ids):
    cid = np.asarray(ids, dtype=np.int64)
    g = GeneralisationResult("ola", 2, ["a"], cid, {}, 0.0, "precision", np.zeros(len(cid)))
    kept = cid[cid >= 0]
    expect = np.bincount(kept) if kept.size else np.zeros(0, dtype=np.int64)
    got = g.class_sizes
    assert np.array_equal(got, expect) and got.dtype == expect.dtype
    assert g.class_sizes is got and not got.flags.writeable
    assert g.n_classes == expect.size and g.min_class_size == (int(expect.min()) if expect.size else 0)


def test_keps_run_same_release_with_and_without_threads(monkeypatch):
    """The whole k-eps run (OLA, records shuffled, a column kept, ε-quasi noise) with the
    order computed ahead and the columns gathered in threads, against one thread."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    adult = pd.read_csv(root / "resources" / "adult" / "adult.csv", sep=";").head(6000)
    adult["hours"] = np.random.default_rng(1).integers(1, 99, len(adult))
    hier = root / "resources" / "adult" / "hierarchies"
    qi = ["age", "education", "marital-status", "sex", "workclass"]
    roles = {c: "k-quasi" for c in qi} | {"hours": "eps-quasi"}
    kw = dict(
        hierarchies={c: str(hier / f"adult_hierarchy_{c}.csv") for c in qi},
        k=20,
        epsilon=1.0,
        suppression=0.05,
        seed=11,
    )
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)
    out = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("DPSTUDIO_THREADS", threads)
        out[threads] = engine.protect(adult, "k-eps", roles, {"hours": (0, 100)}, **kw)
    a, b = out["1"], out["2"]
    pd.testing.assert_frame_equal(a.data, b.data, check_exact=True)
    assert np.array_equal(a.row_map, b.row_map)
    assert a.guarantee == b.guarantee and a.warnings == b.warnings
    assert np.array_equal(a.info["class_of_row"], b.info["class_of_row"])


# ----------------------------------------------------------------------------- reading
# (io/reading.py: without a progress callback, the command line's case, Arrow's reader parses
# the blocks on all cores; with one, the streaming reader reports progress block by block)

_FIELDS = st.sampled_from(
    ["1", "-3", "007", "1.50", "NA", "", "abc", "Zürich", " x ", "1,5", "\xa01", "TRUE"]
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(_FIELDS, min_size=3, max_size=3), min_size=1, max_size=40),
    sep=st.sampled_from([",", ";", "\t", "|"]),
    lt=st.sampled_from(["\n", "\r\n", "\r"]),
    blank=st.sampled_from(["", "   ", "\t"]),
    header=st.booleans(),
    enc=st.sampled_from(["utf-8", "latin-1"]),
    ragged=st.booleans(),
)
def test_arrow_reader_same_frame_with_and_without_progress(
    tmp_path_factory, rows, sep, lt, blank, header, enc, ragged
):
    from dpstudio.engine.io import reading

    lines = ([sep.join(["a", "b", "c"])] if header else []) + [
        sep.join(r) for r in rows if not any(sep in f for f in r)
    ]
    if not lines:
        return
    if ragged:
        lines.append(sep.join(["1", "2", "3", "4"]))
    text = lt.join(lines[:1] + ([blank] if blank else []) + lines[1:]) + lt
    path = tmp_path_factory.mktemp("f") / "t.csv"
    path.write_bytes(text.encode(enc, errors="replace"))
    seen: list[float] = []
    kw = dict(sep=sep, encoding=enc, header=0 if header else None)
    threaded = reading._arrow_frame(str(path), progress=None, **kw)
    streamed = reading._arrow_frame(str(path), progress=seen.append, **kw)
    assert (threaded is None) == (streamed is None)
    if threaded is not None:
        assert streamed is not None and seen  # the streaming reader reported progress
        pd.testing.assert_frame_equal(threaded, streamed, check_exact=True)
        assert list(threaded.columns) == list(streamed.columns)


def test_arrow_reader_threads_on_a_large_file(tmp_path):
    """A file of several 4 MB blocks: the same frame by both readers."""
    from dpstudio.engine.io import reading

    rng = np.random.default_rng(2)
    n = 600_000
    words = np.array(["alpha", "beta", "gamma", "Zürich", "", "x y"], dtype=object)
    df = pd.DataFrame({"a": rng.integers(0, 10**6, n).astype(str), "b": words[rng.integers(0, 6, n)]})
    path = tmp_path / "big.csv"
    path.write_text("a;b\n" + "\n".join(df["a"] + ";" + df["b"]) + "\n", encoding="utf-8")
    assert path.stat().st_size > 4 * 1024 * 1024  # more than one block
    kw = dict(sep=";", encoding="utf-8", header=0)
    threaded = reading._arrow_frame(str(path), progress=None, **kw)
    streamed = reading._arrow_frame(str(path), progress=lambda f: None, **kw)
    assert threaded is not None and streamed is not None and len(threaded) == n
    pd.testing.assert_frame_equal(threaded, streamed, check_exact=True)
    assert threaded["b"].tolist()[:50] == df["b"].tolist()[:50]


@pytest.mark.parametrize("bad", [None, "education", "sex"])
def test_encode_quasis_in_threads_equals_one_by_one(monkeypatch, bad):
    """The k-quasis encoded side by side: the same encodings; with values outside a
    hierarchy in two columns, the first of them in order is the one reported."""
    from pathlib import Path

    from dpstudio.engine.algorithms.generalization import encode_quasis
    from dpstudio.engine.errors import InputError

    root = Path(__file__).resolve().parents[2]
    df = pd.read_csv(root / "resources" / "adult" / "adult.csv", sep=";").head(4000)
    hier = root / "resources" / "adult" / "hierarchies"
    qi = ["age", "education", "marital-status", "sex", "workclass"]
    hs = {c: str(hier / f"adult_hierarchy_{c}.csv") for c in qi}
    if bad is not None:
        df.loc[17, bad] = "not-in-the-hierarchy"
        df.loc[5, "workclass"] = "neither"
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("DPSTUDIO_THREADS", threads)
        try:
            got[threads] = encode_quasis(df, qi, hs)
        except InputError as exc:
            got[threads] = str(exc)
    if bad is not None:
        assert got["1"] == got["2"] and repr(bad) in got["1"]
        return
    for a, b in zip(got["1"], got["2"], strict=True):
        assert a.name == b.name and np.array_equal(a.leaf, b.leaf) and a.leaf.dtype == b.leaf.dtype
        assert all(np.array_equal(x, y) for x, y in zip(a.codes, b.codes, strict=True))
        assert all(np.array_equal(x, y) for x, y in zip(a.labels, b.labels, strict=True))
