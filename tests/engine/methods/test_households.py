"""Households (issue 23 §3) on sdcMicro's ``testdata`` (ori_hid): the records of a household
are released together, households in random order, never in input order (default with a
household id; members shuffled inside, or in input order); household variables are
protected once per household and stay constant within it; household risk before and after."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.measures.survey_risk import release_with_household_ids
from dpstudio.engine.protection._survey import quantile7
from tests.conftest import shared_path

HH = {"ori_hid": "household"}
KEYS = ["urbrur", "roof", "sex", "age"]


@pytest.fixture(scope="module")
def td() -> pd.DataFrame:
    return pd.read_csv(shared_path("testdata", "testdata.csv"))


def _runs(hid: np.ndarray) -> int:
    """How many runs of equal consecutive ids (= number of households when each is together)."""
    return int(1 + np.count_nonzero(hid[1:] != hid[:-1]))


def _household_order(released_hid: np.ndarray) -> list:
    return list(dict.fromkeys(released_hid.tolist()))


@pytest.mark.parametrize(
    "method,kw",
    [
        ("recode", {"breaks": {"age": "0,15,30,45,60,120"}}),
        ("top-bottom-coding", {"top": {"income": "p95"}}),
        ("pram", {"variables": "walls"}),
        ("local-suppression", {"k": 3}),
        ("mdav", {"k": 3}),
    ],
)
def test_households_released_together_in_random_order_by_default(td, method, kw):
    roles = dict(HH)
    if method == "local-suppression":
        roles.update({c: "k-quasi" for c in ("urbrur", "roof", "sex")})
    if method == "mdav":
        roles.update({"age": "k-quasi"})
    res = engine.protect(td, method, roles, seed=7, keep_household=True, **kw)
    assert res.params["order"] == "households"
    hid = res.data["ori_hid"].to_numpy()
    n_hh = td["ori_hid"].nunique()
    assert _runs(hid) == n_hh  # each household in one block
    order = _household_order(hid)
    assert order != list(dict.fromkeys(td["ori_hid"]))  # never the input order
    assert sorted(order) == sorted(td["ori_hid"].unique())
    # the aligned original holds the same households (row_map keeps records with their ids)
    assert np.array_equal(res.aligned_original()["ori_hid"].to_numpy(), hid)
    assert "random order of households" in res.guarantee


def test_members_shuffled_inside_or_in_input_order(td):
    shuffled = engine.protect(td, "recode", HH, breaks={"age": "0,50,120"}, seed=3, keep_household=True)
    kept = engine.protect(
        td, "recode", HH, breaks={"age": "0,50,120"}, seed=3, keep_household=True, order="households-input"
    )
    for res in (shuffled, kept):
        assert _runs(res.data["ori_hid"].to_numpy()) == td["ori_hid"].nunique()
    rk = kept.row_map
    hid = td["ori_hid"].to_numpy()[rk]
    same = hid[1:] == hid[:-1]
    assert np.all(np.diff(rk)[same] > 0)  # members in input order
    rs = shuffled.row_map
    hid_s = td["ori_hid"].to_numpy()[rs]
    same_s = hid_s[1:] == hid_s[:-1]
    assert np.any(np.diff(rs)[same_s] < 0)  # some members reordered
    assert "in their input order" in kept.guarantee and "in random order inside it" in shuffled.guarantee
    # the same values whatever the order (order is not part of the run's key)
    assert sorted(shuffled.data["age"].astype(str)) == sorted(kept.data["age"].astype(str))


def test_random_order_splits_households_and_input_order_is_input(td):
    res = engine.protect(
        td, "recode", HH, breaks={"age": "0,50,120"}, seed=3, keep_household=True, order="random"
    )
    assert _runs(res.data["ori_hid"].to_numpy()) > 2 * td["ori_hid"].nunique()
    assert "Records are released in random order." in res.guarantee
    without = engine.protect(td, "recode", {}, breaks={"age": "0,50,120"}, seed=3)
    assert without.params["order"] == "random"  # no household id: random records


def test_household_order_needs_a_household_id(td):
    with pytest.raises(ParameterError, match="household-id column"):
        engine.protect(td, "recode", {}, breaks={"age": "0,50,120"}, seed=3, order="households")
    with pytest.raises(ParameterError, match="household-id column"):
        engine.api.preview_guarantee(list(td.columns), "mdav", {"age": "k-quasi"}, order="households")


def test_preview_and_form_defaults_follow_the_household_role(td):
    g = engine.api.preview_guarantee(
        list(td.columns), "recode", HH, breaks={"age": "0,50,120"}, keep_household=True
    )
    assert "random order of households" in g.render()
    assert engine.api.default_params("recode", HH, td.columns, keep_household=True)["order"] == "households"
    assert engine.api.default_params("recode", {}, td.columns, keep_household=True)["order"] == "random"
    # the id withheld: records one by one (adjacent members would give the households back)
    assert engine.api.default_params("recode", HH, td.columns)["order"] == "random"
    g2 = engine.api.preview_guarantee(list(td.columns), "recode", HH, breaks={"age": "0,50,120"})
    assert "Records are released in random order." in g2.render()


def test_household_id_withheld_default_random_records_households_on_request(td):
    res = engine.protect(td, "recode", HH, breaks={"age": "0,50,120"}, seed=3)
    assert "ori_hid" not in res.data.columns and res.params["order"] == "random"
    hid = res.aligned_original()["ori_hid"].to_numpy()
    assert _runs(hid) > 2 * td["ori_hid"].nunique()  # members not adjacent
    asked = engine.protect(td, "recode", HH, breaks={"age": "0,50,120"}, seed=3, order="households")
    hid = asked.aligned_original()["ori_hid"].to_numpy()
    assert _runs(hid) == td["ori_hid"].nunique()  # households together, as asked
    assert "random order of households" in asked.guarantee


def test_missing_household_ids_are_households_of_their_own(td):
    d = td.copy()
    d.loc[d.index[:10], "ori_hid"] = np.nan
    res = engine.protect(d, "recode", HH, breaks={"age": "0,50,120"}, seed=1, keep_household=True)
    hid = res.data["ori_hid"].to_numpy()
    ok = ~np.isnan(hid)
    assert _runs(hid[ok]) <= d["ori_hid"].nunique() + 10


# ------------------------------------------------------------------ household variables


def test_household_quantile_breaks_over_households_and_constant_after(td):
    res = engine.protect(
        td,
        "recode",
        HH,
        breaks={"household_weights": "quantile:3"},
        household_vars="household_weights",
        seed=1,
        keep_household=True,
    )
    per_hh = td.groupby("ori_hid", sort=False)["household_weights"].first().to_numpy(float)
    want = np.unique(quantile7(per_hh, [0, 1 / 3, 2 / 3, 1]))
    assert res.info["recode"]["household_weights"]["breaks"] == want.tolist()
    per_person = np.unique(quantile7(td["household_weights"].to_numpy(float), [0, 1 / 3, 2 / 3, 1]))
    assert not np.array_equal(want, per_person)  # households, not persons, counted
    assert (res.data.groupby("ori_hid")["household_weights"].nunique() == 1).all()


def test_household_top_coding_percentile_over_households(td):
    d = td.copy()
    d["hh_income"] = d.groupby("ori_hid")["income"].transform("sum")
    res = engine.protect(
        d,
        "top-bottom-coding",
        HH,
        top={"hh_income": "p90"},
        household_vars="hh_income",
        seed=1,
        keep_household=True,
    )
    per_hh = d.groupby("ori_hid", sort=False)["hh_income"].first().to_numpy(float)
    assert res.info["coded"]["hh_income"]["top"]["threshold"] == quantile7(per_hh, [0.9])[0]
    assert (res.data.groupby("ori_hid")["hh_income"].nunique() == 1).all()


def test_household_variable_that_varies_is_refused(td):
    with pytest.raises(InputError, match=r"'age' is declared a household variable but differs"):
        engine.protect(td, "recode", HH, breaks={"age": "quantile:3"}, household_vars="age", seed=1)
    with pytest.raises(ParameterError, match="household-id column"):
        engine.protect(td, "recode", {}, breaks={"age": "quantile:3"}, household_vars="roof", seed=1)
    with pytest.raises(ParameterError, match="household id 'ori_hid' itself"):
        engine.protect(td, "recode", HH, breaks={"age": "quantile:3"}, household_vars="ori_hid", seed=1)


# ------------------------------------------------------------------ household risk


def test_household_risk_before_and_after(td):
    res = engine.protect(td, "recode", HH, breaks={"age": "0,15,30,45,60,120"}, seed=1)
    assert "ori_hid" not in res.data.columns  # not released by default
    before = engine.assess_risk(td, KEYS, household="ori_hid", weight="sampling_weight")
    after = engine.assess_risk(
        release_with_household_ids(res, "ori_hid"), KEYS, household="ori_hid", weight="sampling_weight"
    )
    assert after.household_expected_reidentifications < before.household_expected_reidentifications
    # the households of the release are those of the original, record for record
    rel = release_with_household_ids(res, "ori_hid")
    assert rel["ori_hid"].tolist() == res.aligned_original()["ori_hid"].tolist()
    assert "ori_hid" not in res.data.columns  # the release itself is untouched
