"""Issue 27 §3: Dask that cannot be killed by the input's layout.  Partitions are sized from
the workers' memory limit (row groups grouped, or split into slices read one at a time; CSV
blocks; a frame's big partitions cut) before any shuffle; a row group that cannot fit is
refused in one line naming the memory it needs; the release is the in-memory one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.errors import InputError  # noqa: E402

ROLES = {"a": "eps-quasi", "b": "eps-quasi", "c": "eps-quasi"}
DOMAINS = {"a": (0, 100), "b": (0, 1_000_000), "c": (0, 1000)}


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.integers(0, 101, n),
            "b": np.round(rng.uniform(0, 1e6, n), 0),
            "c": rng.integers(0, 1001, n),
        }
    )


def _write(path, df, row_group_size):
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=row_group_size)
    return path


def _budget_for_rows(rows: int, row_bytes: float = 32.0) -> DB.Budget:
    """A worker limit whose partitions hold about ``rows`` records of ``row_bytes``."""
    need = DB.Budget.minimum(rows, row_bytes)
    return DB.Budget(need, "test")


def test_plan_groups_and_splits_row_groups_from_the_memory_limit(tmp_path):
    df = _frame(10_000)
    src = _write(tmp_path / "one.parquet", df, row_group_size=2_600)  # 4 groups, the last short
    budget = _budget_for_rows(1_000)
    pieces, meta, row_bytes = DB._plan_parquet(str(src), budget, "one.parquet")
    target = budget.rows(row_bytes)
    assert list(meta.columns) == ["a", "b", "c"] and row_bytes == 32.0
    assert len(pieces) > 4 and all(0 < p.rows <= target for p in pieces)
    assert [p.start for p in pieces] == list(np.cumsum([0] + [p.rows for p in pieces])[:-1])
    assert sum(p.rows for p in pieces) == 10_000
    back = pd.concat([DB._read_piece(p, all_columns=("a", "b", "c")) for p in pieces], ignore_index=True)
    pd.testing.assert_frame_equal(back[["a", "b", "c"]], df)
    np.testing.assert_array_equal(back[DB._ROW], np.arange(10_000))
    # a projection reads those columns only, and the record ids still come from the metadata
    one = DB._read_piece(pieces[3], columns=["b", DB._ROW])
    assert list(one.columns) == ["b", DB._ROW] and one[DB._ROW].iloc[0] == pieces[3].start
    # small row groups are grouped up to the budget
    small = _write(tmp_path / "small.parquet", df, row_group_size=100)
    grouped, _, _ = DB._plan_parquet(str(small), budget, "small.parquet")
    assert len(grouped) < 100 / 2 and all(p.lo is None and p.rows <= target for p in grouped)


def test_a_row_group_too_big_for_the_workers_is_refused_naming_the_memory(tmp_path, monkeypatch):
    src = _write(tmp_path / "one.parquet", _frame(50_000), row_group_size=50_000)
    tiny = DB.Budget(300 * 2**20, "test")  # below the worker's own needs: nothing fits
    with pytest.raises(InputError, match=r"row group 0 of 'one.parquet'.*at least --memory-limit"):
        DB._plan_parquet(str(src), tiny, "one.parquet")
    monkeypatch.setattr(DB, "worker_budget", lambda client=None, rows=None: tiny)
    with pytest.raises(InputError, match="--memory-limit"):
        DB.protect_dask(str(src), "ir-dp", ROLES, DOMAINS, seed=1, k=5, epsilon=1.0)


@pytest.mark.parametrize(
    "method,params",
    [
        ("ir-dp", {"k": 7, "epsilon": 1.0}),
        ("ir-swap", {"k": 4}),
        ("laplace", {"epsilon": 1.0}),
        ("insensitive-dp", {"k": 5, "epsilon": 1.0, "variant": "single"}),
    ],
)
def test_slices_of_row_groups_give_the_in_memory_release(tmp_path, method, params):
    df = _frame(3_001)
    df.loc[::4, "a"] = 50  # ties across the slices
    src = _write(tmp_path / "one.parquet", df, row_group_size=2_000)
    roles = {c: "confidential" for c in ROLES} if method == "ir-swap" else ROLES
    mem = engine.protect(pd.read_parquet(src), method, roles, DOMAINS, seed=4, **params).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(str(src), method, roles, DOMAINS, seed=4, partition_rows=450, **params)
        got = rel.compute()
    assert rel.info["npartitions"] >= 7
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_csv_and_frames_are_partitioned_from_the_budget(tmp_path):
    csv = tmp_path / "in.csv"
    _frame(150_000).to_csv(csv, index=False)
    src = DB.open_source(str(csv), DB.Budget(300 * 2**20, "test"))  # the least blocks: 1 MB
    assert src.npartitions > 1
    df = _frame(20_000)
    src = DB.open_source(df, _budget_for_rows(2_000))
    assert src.npartitions >= 10
    # a dask frame given with one big partition is cut once its length is known
    one = DB.open_source(dd.from_pandas(df, npartitions=1), _budget_for_rows(2_000))
    one.set_lengths([20_000])
    assert one.npartitions >= 10 and int(one.lens.sum()) == 20_000
    with dask.config.set(scheduler="synchronous"):
        got = one.frame().compute()
    np.testing.assert_array_equal(got[DB._ROW], np.arange(20_000))
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=1),
            "ir-dp",
            ROLES,
            DOMAINS,
            seed=2,
            k=5,
            epsilon=1.0,
            partition_rows=3_000,
        )
        pd.testing.assert_frame_equal(rel.compute(), mem, check_dtype=False)
    assert rel.info["npartitions"] == 7


def test_written_parts_read_back_in_release_order(tmp_path):
    """More than 10 parts: their names sort in release order (part.10 came before part.2)."""
    df = _frame(2_400)
    mem = engine.protect(df, "laplace", ROLES, DOMAINS, seed=3, epsilon=1.0).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(df, "laplace", ROLES, DOMAINS, seed=3, epsilon=1.0, partition_rows=100)
        DB.write_release(rel, tmp_path / "out")
    assert len(list((tmp_path / "out" / "release").iterdir())) > 10
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out" / "release"), mem, check_dtype=False)


def test_one_large_single_file_under_a_tight_limit(tmp_path):
    """The issue's case at test scale: 1,000,000 × 3 in ONE row group of ONE file, 2 workers of
    512 MiB (the least the command line accepts).  Before: one 1M-record partition, whose
    shuffle got the workers killed (KilledWorker after ~1 min, measured); now: partitions sized
    from the limit, and the in-memory release."""
    pytest.importorskip("distributed")
    import logging

    from distributed import Client, LocalCluster

    df = _frame(1_000_000)
    src = _write(tmp_path / "big.parquet", df, row_group_size=1_000_000)
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=1, k=50, epsilon=1.0).data
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            memory_limit=512 * 2**20,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        rel = DB.protect_dask(str(src), "ir-dp", ROLES, DOMAINS, seed=1, k=50, epsilon=1.0, client=client)
        assert rel.info["npartitions"] > 1
        w = DB.write_release(rel, tmp_path / "out", input_path=src)
    got = pd.read_parquet(w["release"] + "/release")
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


@pytest.mark.parametrize(
    "method,params",
    [
        ("ir-dp", {"k": 5, "epsilon": 1.0}),
        ("insensitive-dp", {"k": 5, "epsilon": 1.0, "variant": "single"}),
        ("laplace", {"epsilon": 1.0}),
        ("ir-dp", {"k": 5, "epsilon": 1.0, "shuffle": False}),
    ],
)
@pytest.mark.parametrize("read_rows", [3_000, 6_000])
def test_final_phase_partitions_are_sized_from_the_limit_with_their_own_bytes(
    tmp_path, monkeypatch, method, params, read_rows
):
    """Issue 25 (d-dask2): the release's final phase -- the assembly and the shuffle into the
    in-memory engine's order -- runs on partitions sized from the memory limit for the bytes its
    records carry (the input's columns, the record id, and the shuffle's three sort keys), not
    on the reading partitions (sized for the input's columns and the record id only); and the
    release stays the in-memory one."""
    n = 12_000
    df = _frame(n)
    df.loc[::5, "a"] = 50  # ties across the slices
    src = _write(tmp_path / "in.parquet", df, row_group_size=250)
    budget = _budget_for_rows(read_rows)  # reading: 32 bytes a record (3 numbers + record id)
    monkeypatch.setattr(DB, "worker_budget", lambda client=None, rows=None: budget)
    shuffled = params.get("shuffle", True)
    final = budget.rows(32.0 + (DB.SHUFFLE_KEY_BYTES if shuffled else 0))
    assert DB.final_rows(budget, 32.0, shuffled=shuffled) == final
    mem = engine.protect(df, method, ROLES, DOMAINS, seed=6, **params).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(str(src), method, ROLES, DOMAINS, seed=6, **params)
        lens = rel.aligned.map_partitions(len).compute().tolist()
        got = rel.compute()
    read = DB.open_source(str(src), budget).lens
    assert rel.info["final_rows"] == final
    assert int(read.max()) > budget.rows(56.0)  # the reading partitions exceed the final phase's size
    assert sum(lens) == n
    if shuffled:
        # 56 bytes a record at the final phase: the partitions about 32/56 of the reading ones
        assert max(lens) <= final < int(read.max())
        assert len(lens) >= int(np.ceil(n / final))
    else:  # in input order, no sort keys: the reading partitions as they are
        assert final == budget.rows(32.0) and lens == read.tolist()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_final_phase_rows_follow_the_memory_limit():
    """The planned size of the final phase's partitions grows with the limit and shrinks with
    the bytes of a record; the three sort keys (24 bytes) count only when the release is shuffled."""
    small, large = DB.Budget(1 * 10**9, "test"), DB.Budget(2 * 10**9, "test")
    m5 = 8.0 * 5 + 8  # 5 numbers and the record id: the reading size
    assert DB.final_rows(small, m5, shuffled=True) == small.rows(m5 + 24)
    assert DB.final_rows(small, m5, shuffled=True) < small.rows(m5)  # smaller than the reading partitions
    assert DB.final_rows(large, m5, shuffled=True) > DB.final_rows(small, m5, shuffled=True)
    assert DB.final_rows(small, m5, shuffled=False) == small.rows(m5)
    # 1 GB workers, 5 numbers: 331 MB of working set, 12 × 72 bytes a record
    assert DB.final_rows(small, m5, shuffled=True) == int(small.usable / (12 * 72))


def test_final_phase_cuts_cover_a_partition_in_the_fewest_even_slices():
    for length in range(0, 90):
        for rows in range(1, 30):
            cuts = DB._cuts(length, rows)
            assert cuts[0][0] == 0 and cuts[-1][1] == length
            assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
            if length:
                sizes = [hi - lo for lo, hi in cuts]
                assert len(cuts) == -(-length // rows) and max(sizes) <= rows and max(sizes) - min(sizes) <= 1
    assert DB._cuts(500_000, 383_000) == [(0, 250_000), (250_000, 500_000)]
