"""k-eps (OLA) on Dask through a frequency set (issue 12): the same optimal node and the same
release, value for value, as the in-memory engine under one seed, on the Adult sample with
ARX's hierarchies and several partitions; what k-eps does beyond OLA is refused by name."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402

ADULT = Path(__file__).resolve().parents[2] / "resources" / "adult"
QI = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex", "workclass"]


@pytest.fixture(scope="module")
def adult():
    df = pd.read_csv(ADULT / "adult.csv", sep=";").head(8000)
    hs = {c: str(ADULT / "hierarchies" / f"adult_hierarchy_{c}.csv") for c in QI}
    return df, hs


def _roles(qi):
    return {c: "k-quasi" for c in qi}


@pytest.mark.parametrize(
    "params",
    [
        {"k": 5, "suppression": 0.05},
        {"k": 10, "suppression": 0.02, "loss": "discernibility"},
        {"k": 3, "suppression": 0.0, "loss": "loss"},
    ],
)
@pytest.mark.parametrize("nparts", [1, 4, 7])
def test_dask_keps_equals_in_memory(adult, params, nparts):
    df, hs = adult
    qi = QI if params["k"] != 3 else QI[:5]
    mem = engine.protect(df, "k-eps", _roles(qi), hierarchies=hs, seed=3, **params)
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts), "k-eps", _roles(qi), seed=3, hierarchies=hs, **params
        )
        got = rel.compute()
    assert rel.info["chosen_levels"] == mem.info["chosen_levels"]
    assert rel.info["generalisation"]["suppressed_records"] == len(mem.info["suppressed_rows"])
    assert rel.info["generalisation"]["min_class_size"] == mem.info["min_class_size"]
    assert list(got.columns) == list(mem.data.columns)
    # value for value, in the same (shuffled) order
    pd.testing.assert_frame_equal(got.astype(str), mem.data.astype(str))
    assert rel.guarantee == mem.guarantee
    # some generalisation happened and the result is k-anonymous
    assert any(v > 0 for v in rel.info["chosen_levels"].values())
    assert got.groupby(qi).size().min() >= params["k"]


def test_dask_keps_other_seed_other_order_same_node(adult):
    df, hs = adult
    with dask.config.set(scheduler="synchronous"):
        a = DB.protect_dask(df, "k-eps", _roles(QI), seed=1, hierarchies=hs, k=5)
        b = DB.protect_dask(df, "k-eps", _roles(QI), seed=2, hierarchies=hs, k=5)
        ga, gb = a.compute(), b.compute()
    assert a.info["chosen_levels"] == b.info["chosen_levels"]
    assert not ga.equals(gb)
    key = list(ga.columns)
    assert ga.sort_values(key).reset_index(drop=True).equals(gb.sort_values(key).reset_index(drop=True))


def test_dask_keps_refusals_name_the_option(adult):
    df, hs = adult
    small = df.head(500)
    with pytest.raises(DB.NotOnDask, match="ε-quasi.*--engine memory"):
        DB.protect_dask(
            small,
            "k-eps",
            {**_roles(QI[:3]), "fnlwgt": "eps-quasi"}
            if "fnlwgt" in small
            else {**_roles(QI[:2]), "age": "eps-quasi"},
            seed=1,
            hierarchies=hs,
            k=5,
        )
    with pytest.raises(DB.NotOnDask, match="Mondrian.*--engine memory"):
        DB.protect_dask(small, "k-eps", _roles(QI[:3]), seed=1, hierarchies=hs, k=5, algorithm="mondrian")
    with pytest.raises(DB.NotOnDask, match="--hierarchy race=FILE.*--engine memory"):
        DB.protect_dask(small, "k-eps", _roles(["age", "race"]), seed=1, hierarchies={"age": hs["age"]}, k=5)


def test_dask_keps_value_not_in_hierarchy_is_named(adult):
    df, hs = adult
    bad = df.head(300).copy()
    bad.loc[250, "race"] = "Martian"
    with dask.config.set(scheduler="synchronous"), pytest.raises(Exception, match="'race'.*Martian"):
        DB.protect_dask(
            dd.from_pandas(bad, npartitions=3), "k-eps", _roles(["age", "race"]), seed=1, hierarchies=hs, k=5
        ).compute()


def test_dask_keps_written_release_and_private_trail(adult, tmp_path):
    df, hs = adult
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=3), "k-eps", _roles(QI), seed=4, hierarchies=hs, k=5
        )
        w = DB.write_release(rel, tmp_path / "out")
    got = pd.read_parquet(Path(w["release"]) / "release").reset_index(drop=True)
    assert len(got) == rel.info["records_released"]
    mem = engine.protect(df, "k-eps", _roles(QI), hierarchies=hs, seed=4, k=5).data
    pd.testing.assert_frame_equal(got.astype(str), mem.astype(str))
    meta = (tmp_path / "out" / "metadata.json").read_text()
    assert "record(s)" not in meta and "suppressed_records" not in meta  # counts: private only
    assert oct((tmp_path / "out.private.json").stat().st_mode & 0o777) == "0o600"
    assert "were suppressed" in (tmp_path / "out.private.json").read_text()
    assert np.all(got.groupby(QI).size() >= 5)


def test_dask_keps_parquet_folder_equals_in_memory(adult, tmp_path):
    """A folder of Parquet parts read by path (Dask fuses its single-column reads; the record
    ids must still be the global positions of the full frame's partitions)."""
    df, hs = adult
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, idx in enumerate(np.array_split(np.arange(len(df)), 9)):
        df.iloc[idx].to_parquet(folder / f"part.{i:03d}.parquet", index=False)
    back = pd.read_parquet(folder)
    mem = engine.protect(back, "k-eps", _roles(QI), hierarchies=hs, seed=4, k=5, suppression=0.05)
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(
            str(folder), "k-eps", _roles(QI), seed=4, hierarchies=hs, k=5, suppression=0.05
        ).compute()
    pd.testing.assert_frame_equal(got.astype(str), mem.data.astype(str))
