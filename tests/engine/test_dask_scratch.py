"""The ranked methods' sorts through a private scratch folder (issue 25, dask_scratch): the
same release as the in-memory engine and as the p2p path, the folder private and removed,
the fall-backs (workers elsewhere, no room on the disk) and hostile folders."""

from __future__ import annotations

import gc
import os
import stat

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.backends import dask_scratch as S  # noqa: E402
from dpstudio.engine.errors import InputError  # noqa: E402

from ._dask_cluster import in_process_cluster  # noqa: E402


def _data(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n).astype(float),  # heavy ties
            "income": np.round(rng.lognormal(10, 1, n), 2),
            "hours": rng.integers(1, 4, n),  # three values: ties across every range boundary
            "region": rng.integers(0, 5, n),
        }
    )


EPS = {"age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
CONF = {"age": "confidential", "income": "confidential", "hours": "confidential"}
DOMAINS = {"age": (18, 90), "income": (0, 2e6), "hours": (1, 3)}
CASES = [
    ("ir-dp", EPS, {"k": 5, "epsilon": 1.0}),
    ("ir-dp", EPS, {"k": 40, "epsilon": 0.5}),  # clusters larger than the ranges
    ("ir-swap", CONF, {"k": 4}),  # the released values are the originals: kept in the records
    ("insensitive-dp", EPS, {"k": 6, "epsilon": 1.0, "variant": "single"}),  # one sort of three columns
]


@pytest.fixture()
def tmp_dask(tmp_path):
    """Dask's temporary-directory (where the scratch folders go) in the test's own folder."""
    root = tmp_path / "dask-tmp"
    with dask.config.set({"temporary-directory": str(root)}):
        yield root


def _run(df, method, roles, params, *, scratch=None, nparts=4, rows=60, progress=None):
    with dask.config.set(scheduler="synchronous"):
        return DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts),
            method,
            roles,
            DOMAINS,
            seed=11,
            partition_rows=rows,
            scratch=scratch,
            progress=progress,
            **params,
        )


def _folders(root) -> list:
    return sorted(p for p in os.listdir(root) if p.startswith(S.PREFIX)) if os.path.isdir(root) else []


@pytest.mark.parametrize("method, roles, params", CASES)
def test_scratch_sorts_equal_in_memory_and_p2p(tmp_dask, method, roles, params):
    df = _data(500)
    mem = engine.protect(df, method, roles, DOMAINS, seed=11, **params).data
    files = _run(df, method, roles, params)
    assert files.info["sorts"] == "scratch files" and files.info["ranges"] >= 5
    with dask.config.set(scheduler="synchronous"):
        got = files.compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)
    p2p = _run(df, method, roles, params, scratch=False)
    assert p2p.info["sorts"] == "p2p shuffles" and p2p.scratch is None
    with dask.config.set(scheduler="synchronous"):
        pd.testing.assert_frame_equal(p2p.compute(), got)


def test_folder_private_while_the_release_lives_then_removed(tmp_dask):
    df = _data(300)
    rel = _run(df, "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    path = rel.scratch.path
    assert os.path.dirname(path) == str(tmp_dask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    names = sorted(os.listdir(path))
    # the bucket and sorted files are gone with their sort; one value file per attribute is
    # left, with the final shuffle's: the other column (region) and the records (keys and columns)
    assert names == [
        "release.3.values",
        "release.records",
        "release.slices.npy",
        "sort0.0.values",
        "sort1.0.values",
        "sort2.0.values",
        "token",
    ]
    assert rel.info["shuffle"] == "scratch files"
    for name in names:
        assert stat.S_IMODE(os.stat(os.path.join(path, name)).st_mode) == 0o600
    with dask.config.set(scheduler="synchronous"):
        rel.compute()  # the release can be computed (and measured) while it lives
        rel.compute()
    assert os.path.isdir(path)
    del rel
    gc.collect()
    assert not os.path.exists(path) and _folders(tmp_dask) == []


def test_two_releases_alive_at_once_use_their_own_folders(tmp_dask):
    a, b = _data(300, seed=1), _data(300, seed=2)
    ra = _run(a, "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    rb = _run(b, "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    assert ra.scratch.path != rb.scratch.path and len(_folders(tmp_dask)) == 2
    with dask.config.set(scheduler="synchronous"):
        gb, ga = rb.compute(), ra.compute()
    pd.testing.assert_frame_equal(
        ga, engine.protect(a, "ir-dp", EPS, DOMAINS, seed=11, k=5, epsilon=1.0).data
    )
    pd.testing.assert_frame_equal(
        gb, engine.protect(b, "ir-dp", EPS, DOMAINS, seed=11, k=5, epsilon=1.0).data
    )


def test_a_failed_run_leaves_no_folder(tmp_dask, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("a task failed")

    monkeypatch.setattr(S, "release_span", boom)
    with pytest.raises(RuntimeError, match="a task failed"):
        _run(_data(300), "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    assert _folders(tmp_dask) == []  # at once, not when collected


@pytest.mark.parametrize("method, roles", [("ir-dp", EPS), ("laplace", EPS)])
def test_a_run_failing_in_the_final_shuffle_leaves_no_folder(tmp_dask, monkeypatch, method, roles):
    def boom(*a, **k):
        raise RuntimeError("a key task failed")

    monkeypatch.setattr(S, "bucket_records", boom)
    with pytest.raises(RuntimeError, match="a key task failed"):
        _run(_data(300), method, roles, {"k": 5, "epsilon": 1.0} if method == "ir-dp" else {"epsilon": 1.0})
    assert _folders(tmp_dask) == []


def test_no_room_on_the_disk_falls_back_to_p2p_and_says_so(tmp_dask, monkeypatch):
    monkeypatch.setattr(S.Scratch, "free_bytes", lambda self: 1000)
    said: list = []
    df = _data(300)
    rel = _run(df, "ir-dp", EPS, {"k": 5, "epsilon": 1.0}, progress=said.append)
    assert rel.info["sorts"] == "p2p shuffles" and rel.scratch is None
    assert any(
        m.startswith("shuffling through Dask's workers, not files: the scratch files need")
        and m.endswith("has 1000 bytes free")
        for m in said
    )
    assert _folders(tmp_dask) == []
    with dask.config.set(scheduler="synchronous"):
        pd.testing.assert_frame_equal(
            rel.compute(), engine.protect(df, "ir-dp", EPS, DOMAINS, seed=11, k=5, epsilon=1.0).data
        )


def test_an_unusable_temporary_directory_is_named_with_what_to_do(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    where = str(blocker / "sub")
    with dask.config.set({"temporary-directory": where}), pytest.raises(InputError) as e:
        _run(_data(200), "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    assert str(e.value).startswith(f"Dask's temporary folder {where!r} cannot be used (")
    assert "set DASK_TEMPORARY_DIRECTORY to a writable folder" in str(e.value)
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("kind", ["missing", "file", "fifo", "device"])
def test_a_given_scratch_folder_that_is_not_one_is_refused_by_name(tmp_path, kind):
    where = {
        "missing": tmp_path / "nope",
        "file": tmp_path / "f",
        "fifo": tmp_path / "p",
        "device": "/dev/null",
    }[kind]
    if kind == "file":
        where.write_text("x")
    if kind == "fifo":
        os.mkfifo(where)
    with pytest.raises(
        InputError, match=r"The scratch folder .* is not a folder this process can write into"
    ):
        _run(_data(100), "ir-dp", EPS, {"k": 5, "epsilon": 1.0}, scratch=str(where))


def test_a_given_scratch_folder_is_used(tmp_path):
    where = tmp_path / "mine"
    where.mkdir()
    rel = _run(_data(200), "ir-dp", EPS, {"k": 5, "epsilon": 1.0}, scratch=str(where))
    assert os.path.dirname(rel.scratch.path) == str(where)


class _FakeClient:
    def __init__(self, answer):
        self.answer = answer

    def run(self, fn, *args):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(fn, *args)


def test_workers_on_another_machine_or_folder_are_detected(tmp_dask):
    sc = S.Scratch()
    try:
        assert sc.shared_with(None)  # this process's threads
        assert sc.shared_with(_FakeClient(lambda fn, *a: {"w1": fn(*a), "w2": fn(*a)}))
        same = S._sees(sc.path)
        assert same[0] == sc.token
        other_token = ("0" * 32, *same[1:])
        other_host = (same[0], same[1] + "-elsewhere", same[2])
        other_boot = (same[0], same[1], "another-boot")
        for seen in (other_token, other_host, other_boot):
            assert not sc.shared_with(_FakeClient(lambda fn, *a, s=seen: {"w1": fn(*a), "w2": s}))
        assert not sc.shared_with(_FakeClient(lambda fn, *a: {}))
        assert not sc.shared_with(_FakeClient(OSError("closed")))
    finally:
        sc.close()
    assert not os.path.exists(sc.path)


def test_in_process_workers_share_the_folder_and_equal_in_memory(tmp_dask):
    from distributed import Client

    df = _data(400)
    mem = engine.protect(df, "ir-dp", EPS, DOMAINS, seed=11, k=5, epsilon=1.0).data
    with in_process_cluster(2**30) as cluster, Client(cluster) as client:
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=4),
            "ir-dp",
            EPS,
            DOMAINS,
            seed=11,
            partition_rows=80,
            client=client,
            k=5,
            epsilon=1.0,
        )
        assert rel.info["sorts"] == "scratch files"
        got = rel.compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_fixed_width_types_only():
    assert S.fixed_width(np.dtype("float64")) and S.fixed_width("int64") and S.fixed_width(np.dtype(bool))
    assert not S.fixed_width(pd.Int64Dtype()) and not S.fixed_width(np.dtype(object))
    assert not S.fixed_width(pd.StringDtype()) and not S.fixed_width("datetime64[ns]")


@pytest.mark.parametrize("params", [{"epsilon": 1.0}, {"epsilon": 0.5, "shuffle": False}])
def test_row_wise_release_shuffled_through_files_equals_in_memory(tmp_dask, params):
    df = _data(700)
    mem = engine.protect(df, "laplace", EPS, DOMAINS, seed=11, **params).data
    rel = _run(df, "laplace", EPS, params, nparts=5, rows=90)
    if params.get("shuffle") is False:  # input order: no shuffle, no folder
        assert "shuffle" not in rel.info and rel.scratch is None
    else:
        assert rel.info["shuffle"] == "scratch files" and rel.scratch is not None
        assert sorted(os.listdir(rel.scratch.path)) == [f"release.{j}.values" for j in range(4)] + [
            "release.records",
            "release.slices.npy",
            "token",
        ]
    with dask.config.set(scheduler="synchronous"):
        got = rel.compute()
        pd.testing.assert_frame_equal(got, mem, check_dtype=False)
        pd.testing.assert_frame_equal(
            _run(df, "laplace", EPS, params, nparts=5, rows=90, scratch=False).compute(), got
        )


def test_a_text_column_keeps_the_p2p_final_shuffle_and_the_file_sorts(tmp_dask):
    df = _data(500).assign(region=lambda d: "r" + d["region"].astype(str))
    mem = engine.protect(df, "ir-dp", EPS, DOMAINS, seed=11, k=5, epsilon=1.0).data
    rel = _run(df, "ir-dp", EPS, {"k": 5, "epsilon": 1.0})
    assert rel.info["sorts"] == "scratch files" and rel.info["shuffle"] == "p2p"
    with dask.config.set(scheduler="synchronous"):
        pd.testing.assert_frame_equal(rel.compute(), mem, check_dtype=False)
    lap = _run(df, "laplace", EPS, {"epsilon": 1.0})
    assert lap.info["shuffle"] == "p2p" and lap.scratch is None


def test_output_part_orders_equal_first_words_by_the_second_as_the_p2p_path(tmp_dask):
    """Equal first words happen with probability ~n²/2⁶⁵: crafted here, the file path orders
    them as dask_backend._by_sort_keys does."""
    rng = np.random.default_rng(3)
    m = 300
    k0 = rng.integers(0, 2**63, m, dtype=np.uint64)
    k0[::3] = k0[0]  # a hundred equal first words
    k1 = rng.integers(0, 2**63, m, dtype=np.uint64)
    vals = rng.normal(size=m)
    flags = rng.random(m) < 0.5
    ftype = S.final_type([np.dtype("f8"), np.dtype(bool)])
    sc = S.Scratch()
    try:
        path = sc.file("records", m * ftype.itemsize)
        rec = np.empty(m, dtype=ftype)
        rec["k0"], rec["k1"], rec["c0"], rec["c1"] = k0, k1, vals, flags
        S._pwrite(path, rec, 0)
        # two partitions (records 0-99 and 100-299 of the file) sending to one destination
        table = S.save_slices(sc, "t.npy", np.array([0, 100]), np.array([[100], [m - 100]]))
        assert [a.tolist() for a in S.load_slices(table, 0)] == [[0, 100], [100, m - 100]]
        meta = pd.DataFrame({"v": np.array([], np.float64), "f": np.array([], bool)})
        got = S.output_part(table, 0, path, ftype, meta)
    finally:
        sc.close()
    frame = pd.DataFrame({"v": vals, "f": flags, "__k0": k0, "__k1": k1, DB._ROW: np.arange(m)})
    pd.testing.assert_frame_equal(got, DB._by_sort_keys(frame))


def test_released_values_come_back_in_record_order_from_any_spans(tmp_dask):
    """release_span's back records (ordered by input partition) and collect: each partition's
    values at its records' ids, whatever the spans and partitions (the phases 3-4 of a sort)."""
    rng = np.random.default_rng(4)
    n = 1000
    starts = np.array([0, 0, 130, 400, 401, 999])  # an empty partition and a one-record one
    lens = np.diff(np.r_[starts, n])
    btype = S.back_type([np.dtype("f8"), np.dtype("i4")])
    perm = rng.permutation(n)  # rank -> record id
    v0, v1 = rng.normal(size=n), rng.integers(-100, 100, n).astype("i4")
    spans = [(0, 7), (7, 350), (350, 351), (351, n)]
    sc = S.Scratch()
    try:
        back = sc.file("back", n * btype.itemsize)
        counts = []
        for lo, hi in spans:  # what release_span writes, for these spans
            rows = perm[lo:hi]
            dest = np.searchsorted(starts, rows, "right") - 1
            idx = np.argsort(dest, kind="stable")
            rec = np.empty(hi - lo, dtype=btype)
            rec["row"], rec["v0"], rec["v1"] = rows[idx], v0[rows][idx], v1[rows][idx]
            S._pwrite(back, rec, lo * btype.itemsize)
            counts.append(np.bincount(dest, minlength=starts.size))
        table = S.save_slices(sc, "t.npy", np.array([lo for lo, _ in spans]), np.array(counts))
        outs = [(sc.file("o0", n * 8), np.dtype("f8")), (sc.file("o1", n * 4), np.dtype("i4"))]
        got = [S.collect(table, i, back, btype, int(starts[i]), outs) for i in range(starts.size)]
        assert got == lens.tolist()
        np.testing.assert_array_equal(S.read_slice(outs[0][0], np.dtype("f8"), 0, n), v0)
        np.testing.assert_array_equal(S.read_slice(outs[1][0], np.dtype("i4"), 0, n), v1)
    finally:
        sc.close()


def test_slices_table_names_each_destinations_slices(tmp_dask):
    """save_slices/load_slices: partition i's records for destination j start after its
    records for the destinations before j; destinations it sends nothing are left out."""
    counts = np.array([[2, 0, 3], [0, 4, 1]])  # 2 partitions x 3 destinations
    sc = S.Scratch()
    try:
        table = S.save_slices(sc, "t.npy", np.array([10, 15]), counts)
        assert stat.S_IMODE(os.stat(table).st_mode) == 0o600
        got = [[a.tolist() for a in S.load_slices(table, j)] for j in range(3)]
    finally:
        sc.close()
    assert got == [[[10], [2]], [[15], [4]], [[12, 19], [3, 1]]]


def test_a_full_disk_names_the_scratch_file(tmp_dask, monkeypatch):
    sc = S.Scratch()
    try:
        path = sc.file("v", 80)

        def full(fd, data, offset):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "pwrite", full)
        with pytest.raises(OSError) as e:
            S._pwrite(path, np.arange(10.0), 0)
        assert (e.value.errno, e.value.strerror, e.value.filename) == (28, "No space left on device", path)
    finally:
        sc.close()
