"""The synthetic household survey (issue 24): its generator's properties and the shipped
sample (resources/household_survey/household_survey.sav)."""

from __future__ import annotations

import importlib.util

import numpy as np

from dpstudio.engine.io import read_table
from tests.conftest import ROOT, shared_path


def _gen():
    spec = importlib.util.spec_from_file_location("mhs", ROOT / "scripts" / "make_household_survey.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(df):
    g = df.groupby("hh_id")
    size = g["person_nr"].transform("size")
    assert (size == df["hh_size"]).all() and df["hh_size"].between(1, 9).all()
    assert (g["person_nr"].transform("max") == df["hh_size"]).all()
    assert (g["relation"].transform(lambda r: (r == 1).sum()) == 1).all()  # one reference person
    child = df["age"] < 16
    assert df.loc[child, "econ_status"].isna().all() and df.loc[~child, "econ_status"].notna().all()
    for c in ("hh_weight", "income_hh", "region", "urban"):
        assert (g[c].transform("nunique") == 1).all(), c  # household variables
    assert (df["hh_weight"] > 0).all() and (df["person_weight"] > 0).all()
    assert (df["income_person"] >= 0).all() and df["income_person"].eq(0).mean() > 0.2


def test_generator_properties(tmp_path):
    mod = _gen()
    df = mod.make_survey(2_000, seed=5)
    assert 2_000 <= len(df) < 2_010
    _check(df)
    assert df.equals(mod.make_survey(2_000, seed=5))  # reproducible from its seed
    mod.write_sav(df, tmp_path / "s.sav")
    back, meta = read_table(tmp_path / "s.sav")
    assert meta.value_labels["econ_status"][5.0] == "Pupil or student"
    assert meta.declared_types["age"] == "integer" and meta.declared_types["sex"] == "categorical"
    assert meta.column_labels["income_hh"].startswith("Household disposable income")


def test_shipped_sample():
    df, meta = read_table(shared_path("household_survey", "household_survey.sav"))
    assert 10_000 <= len(df) <= 20_000
    _check(df)
    assert set(meta.value_labels) >= {"region", "sex", "relation", "econ_status", "education"}
    assert df["age"].dtype == np.int64  # whole numbers without missing values: integers
