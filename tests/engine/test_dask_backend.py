"""Dask backend (issue 12): the same release as in memory, value for value, under one seed.

Runs on dask's synchronous scheduler with several partitions (the partitioning is what could
change results; a LocalCluster adds process start-up time but no different arithmetic)."""

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from tests.engine._dask_cluster import assert_ranked_equals_memory  # noqa: E402


def _data(n=1003, seed=7):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "income": np.round(rng.gamma(2.0, 20000.0, n), 2),
            "hours": rng.integers(0, 80, n).astype(float),
            "region": rng.choice(list("abc"), n),
        }
    )


ROLES = {"id": "identifier", "age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
DOMAINS = {"age": (0, 120), "income": (0, 1_000_000), "hours": (0, 100)}

CASES = [
    ("laplace", {"epsilon": 1.0}),
    ("laplace", {"epsilon": 2.0, "noise": "staircase"}),
    ("ir-dp", {"k": 5, "epsilon": 1.0}),
    ("ir-dp", {"k": 7, "epsilon": 1.0, "noise": "staircase"}),
    ("ir-dp", {"k": 5, "epsilon": 1.0, "shuffle": False}),
    ("idp-ls", {"k": 6, "epsilon": 1.0}),
    ("idp-cbls", {"k": 5, "epsilon": 1.0}),
]


@pytest.mark.parametrize("method,params", CASES)
@pytest.mark.parametrize("nparts,rows", [(1, None), (4, None), (4, 97)])
def test_dask_release_equals_in_memory(method, params, nparts, rows):
    df = _data()
    mem = engine.protect(df, method, ROLES, DOMAINS, seed=11, **params).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts),
            method,
            ROLES,
            DOMAINS,
            seed=11,
            partition_rows=rows,
            **params,
        )
        got = rel.compute()
    assert list(got.columns) == list(mem.columns)
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)
    assert rel.guarantee == engine.protect(df, method, ROLES, DOMAINS, seed=11, **params).guarantee
    assert rel.guarantee_info.render() == rel.guarantee and rel.guarantee_info.is_dp == rel.is_dp


def _ir_swap_case(df, roles, seed, nparts, rows):
    mem = engine.protect(df, "ir-swap", roles, seed=seed, k=4).data
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts), "ir-swap", roles, seed=seed, k=4, partition_rows=rows
        ).compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


@pytest.mark.parametrize("nparts,rows", [(1, None), (3, None), (3, 60)])
def test_dask_ir_swap_equals_in_memory(nparts, rows):
    roles = {"id": "identifier", "income": "confidential", "hours": "confidential"}
    _ir_swap_case(_data(501), roles, 5, nparts, rows)


def test_other_seed_differs():
    df = _data(300)
    with dask.config.set(scheduler="synchronous"):
        a = DB.protect_dask(df, "ir-dp", ROLES, DOMAINS, seed=1, k=5, epsilon=1.0).compute()
        b = DB.protect_dask(df, "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0).compute()
    assert not a.equals(b)


@pytest.mark.parametrize("method", ["mdav", "t-close-dp", "categorical-dp"])
def test_methods_not_on_dask_name_the_memory_engine(method):
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DB.protect_dask(_data(50), method, ROLES, DOMAINS, seed=1, k=5)


def test_missing_values_refused_with_column(tmp_path):
    df = _data(200)
    df.loc[3, "age"] = np.nan
    with dask.config.set(scheduler="synchronous"), pytest.raises(engine.InputError, match="'age'"):
        DB.protect_dask(df, "laplace", ROLES, DOMAINS, seed=1, epsilon=1.0)


def test_write_release_atomic_and_public_metadata(tmp_path):
    df = _data(400)
    src = tmp_path / "in.parquet"
    df.to_parquet(src)
    out = tmp_path / "out"
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(str(src), "ir-dp", ROLES, DOMAINS, seed=3, k=5, epsilon=1.0)
        paths = DB.write_release(rel, out, input_path=src)
        with pytest.raises(engine.InputError, match="exists"):
            DB.write_release(rel, out, input_path=src)
    back = pd.read_parquet(out / "release").reset_index(drop=True)
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=3, k=5, epsilon=1.0).data
    pd.testing.assert_frame_equal(back, mem, check_dtype=False)
    import json

    meta = json.loads((out / "metadata.json").read_text())
    assert "seed" not in meta["parameters"] and "records" not in meta  # no seed, no count
    assert meta["guarantee"] == rel.guarantee
    import os
    import stat

    assert stat.S_IMODE(os.stat(paths["private"]).st_mode) == 0o600
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".dpstudio-")]


def test_cli_protect_engine_dask_equals_memory(tmp_path):
    from dpstudio.cli import main

    df = _data(600)
    src = tmp_path / "big.parquet"
    df.to_parquet(src)
    args = [
        str(src),
        str(tmp_path / "out"),
        "--method",
        "ir-dp",
        "--k",
        "5",
        "--epsilon",
        "1",
        "--seed",
        "9",
        "--role",
        "id=identifier",
        "--role",
        "age=eps-quasi",
        "--role",
        "income=eps-quasi",
        "--role",
        "hours=eps-quasi",
        "--domain",
        "age=0:120",
        "--domain",
        "income=0:1000000",
        "--domain",
        "hours=0:100",
    ]
    assert main(["protect", *args, "--engine", "dask", "--workers", "1"]) == 0
    got = pd.read_parquet(tmp_path / "out" / "release").reset_index(drop=True)
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=9, k=5, epsilon=1.0).data
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)
    assert (
        main(["protect", *args[:1], str(tmp_path / "o2"), *args[2:], "--engine", "dask", "--method", "mdav"])
        != 0
    )


@pytest.mark.parametrize(
    "params",
    [
        {"k": 5, "epsilon": 1.0},
        {"k": 7, "epsilon": 1.0, "noise": "staircase", "reference": "upper"},
        {"k": 4, "epsilon": 2.0, "calibration": "as-published", "shuffle": False},
        {"k": 1, "epsilon": 1.0},
    ],
)
@pytest.mark.parametrize("nparts,rows", [(1, None), (5, None), (5, 83)])
def test_dask_insensitive_single_equals_in_memory(params, nparts, rows):
    df = _data()
    df.loc[::3, "hours"] = 40.0  # ties in the distance: the lexicographic tie-break
    df.loc[::3, "age"] = 30
    df.loc[::3, "income"] = 50000.0
    mem = engine.protect(df, "insensitive-dp", ROLES, DOMAINS, seed=13, variant="single", **params)
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts),
            "insensitive-dp",
            ROLES,
            DOMAINS,
            seed=13,
            variant="single",
            partition_rows=rows,
            **params,
        )
        got = rel.compute()
    pd.testing.assert_frame_equal(got, mem.data, check_dtype=False)
    assert rel.guarantee == mem.guarantee


def test_dask_insensitive_multi_refused():
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DB.protect_dask(_data(50), "insensitive-dp", ROLES, DOMAINS, seed=1, k=5, epsilon=1.0)


def _heavy_ties(n=2000, seed=3):
    """Massive ties: integer columns with a handful of values (age-like), a rounded column
    with ~k copies of each value (blocks straddle every cluster boundary), one without ties."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.choice([20, 30, 40], n, p=[0.7, 0.2, 0.1]),
            "income": np.round(rng.uniform(0, 1000, n), 0) * 10.0,
            "hours": rng.uniform(0, 100, n),
            "region": rng.choice(list("abc"), n),
        }
    )


@pytest.mark.parametrize(
    "method,params",
    [
        ("ir-dp", {"k": 5, "epsilon": 1.0}),
        ("ir-dp", {"k": 3, "epsilon": 1.0, "shuffle": False}),
        ("ir-dp", {"k": 333, "epsilon": 1.0}),  # clusters spanning several ranges
        ("idp-ls", {"k": 4, "epsilon": 1.0, "shuffle": False}),
        ("idp-cbls", {"k": 7, "epsilon": 1.0}),
        ("laplace", {"epsilon": 1.0}),
    ],
)
@pytest.mark.parametrize("nparts,rows", [(1, None), (7, None), (7, 150), (3, 41)])
def test_dask_heavy_ties_equal_in_memory(method, params, nparts, rows):
    """Ties everywhere: a value held by 70 % of the records spans most ranges; the ranges
    split inside blocks of tied values (splitters are (value, record id)), clusters straddle
    the ranges' boundaries."""
    df = _heavy_ties()
    roles = {"id": "identifier", "age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
    domains = {"age": (0, 120), "income": (0, 10_000), "hours": (0, 100)}
    mem = engine.protect(df, method, roles, domains, seed=21, **params).data
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts),
            method,
            roles,
            domains,
            seed=21,
            partition_rows=rows,
            **params,
        )
        got = rel.compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)
    if rows and method != "laplace":
        assert rel.info["ranges"] >= 2000 // rows


@pytest.mark.parametrize("nparts,rows", [(1, None), (6, None), (6, 70)])
def test_dask_ir_swap_heavy_ties_equal_in_memory(nparts, rows):
    roles = {"id": "identifier", "age": "confidential", "income": "confidential"}
    _ir_swap_case(_heavy_ties(900), roles, 8, nparts, rows)


def test_shuffle_order_breaks_equal_first_words_by_second():
    part = pd.DataFrame(
        {
            "x": [1, 2, 3, 4],
            "__k0": np.array([5, 5, 1, 5], np.uint64),
            "__k1": np.array([9, 2, 7, 4], np.uint64),
            DB._ROW: [0, 1, 2, 3],
        }
    )
    assert DB._by_sort_keys(part)["x"].tolist() == [3, 2, 4, 1]


def test_memory_engine_refuses_a_file_too_big_with_the_dask_hint(tmp_path, monkeypatch, capsys):
    """The in-memory engine refuses cleanly (one line, the --engine dask hint, nothing written)
    when the file will not fit: faked here with 1 kB of available memory."""
    psutil = pytest.importorskip("psutil")
    from dpstudio.cli import main
    from dpstudio.cli import protect as cli_protect

    monkeypatch.setattr(cli_protect, "ALWAYS_FITS_BYTES", 0)  # a small file stands for a big one

    src = tmp_path / "big.parquet"
    _data(300).to_parquet(src)

    class VM:
        available = 1024

    monkeypatch.setattr(psutil, "virtual_memory", lambda: VM())
    rc = main(
        [
            "protect",
            str(src),
            str(tmp_path / "out.csv"),
            "--method",
            "laplace",
            "--epsilon",
            "1",
            "--role",
            "age=eps-quasi",
            "--domain",
            "age=0:120",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "--engine dask" in err and "Traceback" not in err
    assert not (tmp_path / "out.csv").exists()


def _lex_count(keys, splitters):
    """How many splitter tuples are <= each key tuple, by brute force."""
    sp = list(zip(*[x.tolist() for x in splitters]))
    return np.array([sum(t <= k for t in sp) for k in zip(*[x.tolist() for x in keys])])


def test_range_of_counts_the_splitters_below_each_record():
    rng = np.random.default_rng(5)
    for _ in range(200):
        m = int(rng.integers(1, 4))
        n = int(rng.integers(1, 60))
        vals = [rng.integers(0, 4, n).astype(float) for _ in range(m)]  # heavy ties
        rows = rng.permutation(n).astype(np.int64)
        keys = [*vals, rows]
        for p in (1, 2, 5, 17):
            sp = DB._splitters(keys, p)
            assert all(x.size == (p - 1 if p > 1 else 0) for x in sp)
            got = DB._range_of(keys, sp)
            np.testing.assert_array_equal(got, _lex_count(keys, sp) if p > 1 else np.zeros(n))
            assert got.min() >= 0 and got.max() <= max(p - 1, 0)


def test_splitters_balance_the_ranges_even_with_one_value():
    """All records tied: the record id separates them, the ranges are even."""
    n = 10_000
    keys = [np.full(n, 7.0), np.arange(n, dtype=np.int64)]
    sp = DB._splitters(keys, 10)
    sizes = np.bincount(DB._range_of(keys, sp), minlength=10)
    assert sizes.max() <= 1_001 and sizes.min() >= 999


def test_cluster_boundaries_at_or_after_a_rank():
    # n = 11, k = 3: clusters start at 0, 3, 6 (the last takes 6..10)
    got = DB.cluster_starts_at_or_after(np.arange(12), 11, 3)
    assert got.tolist() == [0, 3, 3, 3, 6, 6, 6, 11, 11, 11, 11, 11]


# --------------------------------------------------------------------------- Parquet folders
# A folder of Parquet parts read by path: the single-column reads of the ranked methods are
# fused by Dask (fewer, longer partitions than the full reads); the release must still be the
# in-memory one, record for record (issue 12: found at 100M, where it raised IndexError).


def _parquet_folder(tmp_path, df, parts):
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[chunk].to_parquet(folder / f"part.{i:03d}.parquet", index=False)
    return folder


def test_single_column_reads_of_a_parquet_folder_keep_the_partitions(tmp_path):
    """Dask fuses the single-column reads of dd.read_parquet (fewer, longer partitions); the
    backend's own partitions of a Parquet input never are."""
    folder = _parquet_folder(tmp_path, _data(900), 9)
    assert len(dd.read_parquet(folder)["age"].to_delayed()) < 9  # Dask's fusion (why)
    src = DB.open_source(str(folder), DB.worker_budget(partition_rows=100))
    assert src.npartitions == 9
    assert len(src.raw(["age"]).to_delayed()) == 9 == len(src.frame(["age"]).to_delayed())


@pytest.mark.parametrize(
    "method,params",
    [
        ("ir-dp", {"k": 5, "epsilon": 1.0}),
        ("ir-dp", {"k": 3, "epsilon": 1.0, "shuffle": False}),
        ("idp-cbls", {"k": 4, "epsilon": 1.0, "shuffle": False}),
        ("laplace", {"epsilon": 1.0}),
        ("insensitive-dp", {"k": 5, "epsilon": 1.0, "variant": "single"}),
    ],
)
def test_parquet_folder_ranked_release_equals_in_memory(tmp_path, method, params):
    df = _heavy_ties(1_000)
    folder = _parquet_folder(tmp_path, df, 9)
    roles = {"id": "identifier", "age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
    domains = {"age": (0, 120), "income": (0, 10_000), "hours": (0, 100)}
    back = pd.read_parquet(folder)  # what the in-memory engine reads
    mem = engine.protect(back, method, roles, domains, seed=3, **params).data
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(str(folder), method, roles, domains, seed=3, **params).compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_parquet_folder_ir_swap_equals_in_memory(tmp_path):
    df = _heavy_ties(700)
    folder = _parquet_folder(tmp_path, df, 7)
    roles = {"id": "identifier", "age": "confidential", "income": "confidential"}
    mem = engine.protect(pd.read_parquet(folder), "ir-swap", roles, seed=8, k=4).data
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(str(folder), "ir-swap", roles, seed=8, k=4).compute()
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_slices_cut_pieces_back_into_partitions():
    rng = np.random.default_rng(4)
    for _ in range(300):
        lens = rng.integers(0, 6, rng.integers(1, 12))
        if lens.sum() == 0:
            lens[0] = 1
        n = int(lens.sum())
        starts = np.r_[0, np.cumsum(lens)[:-1]]
        # pieces: any cut of 0..n-1 into consecutive runs (fused partitions or not), some empty
        cuts = np.sort(rng.integers(0, n + 1, rng.integers(0, 6)))
        sizes = np.diff(np.r_[0, cuts, n]).tolist()
        bounds = np.r_[0, np.cumsum(sizes)]
        pieces = [np.arange(bounds[f], bounds[f + 1]) for f in range(len(sizes))]
        for i, parts in enumerate(DB._slices(starts, lens, sizes)):
            got = np.concatenate([pieces[f][lo:hi] for f, lo, hi in parts] or [np.zeros(0, int)])
            np.testing.assert_array_equal(got, np.arange(starts[i], starts[i] + lens[i]))


@pytest.mark.parametrize("scratch", [None, False])
def test_ranked_method_reports_its_steps_one_attribute_at_a_time(scratch):
    df = _data(300)
    said = []
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=3),
            "ir-dp",
            ROLES,
            DOMAINS,
            seed=1,
            k=5,
            epsilon=1.0,
            progress=said.append,
            partition_rows=100,
            scratch=scratch,
        )
    cols = [c for c, r in ROLES.items() if r == "eps-quasi"]
    assert said[0] == "counting the records of 3 ranges"
    if scratch is False:  # the p2p shuffles: one step per attribute
        assert rel.info["sorts"] == "p2p shuffles"
        steps = ["sorting 300 values in 3 ranges, releasing"]
    else:  # through the scratch folder: its three phases
        assert rel.info["sorts"] == "scratch files"
        steps = [
            "sorting 300 values in 3 ranges: by range",
            "sorting 300 values in 3 ranges: each range",
            "releasing 300 values",
        ]
    assert said[1:] == [
        f"attribute {j + 1} of {len(cols)} ({c}): {s}" for j, c in enumerate(cols) for s in steps
    ]


def test_ranges_smaller_than_a_cluster_and_ties_equal_in_memory():
    """d-sort: k larger than the ranges (a cluster spanning three or more sorted ranges, a
    release piece taking slices of all of them), ties across every boundary; the release is
    the in-memory one."""
    n = 2_000
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": rng.integers(0, 3, n).astype(float), "b": rng.normal(0, 1, n)})
    roles = {"a": "eps-quasi", "b": "eps-quasi"}
    doms = {"a": (0, 10), "b": (-10, 10)}
    assert_ranked_equals_memory(
        df, roles, doms, seed=2, ks=(1, 2, 150, 333), npartitions=4, partition_rows=100, min_ranges=10
    )
