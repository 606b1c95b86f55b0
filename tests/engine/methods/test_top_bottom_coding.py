"""The ``top-bottom-coding`` method (issue 23 §1): sdcMicro's ``topBotCoding`` -- counts and
sums on free1 equal sdcMicro 5.8.1's, the replacement defaults to the threshold, a percentile
threshold is a data-dependent parameter said in the private notes only, hostile thresholds
refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.export import export_release
from dpstudio.engine.guarantee import Effect, GuaranteeContext, Model
from dpstudio.engine.protection.top_bottom_coding import SPEC, parse_threshold
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


@pytest.fixture(scope="module")
def ref() -> dict:
    return json.loads(shared_path("free1", "free1_toolbox_reference.json").read_text())


@pytest.fixture(scope="module")
def mref() -> dict:
    return json.loads(shared_path("free1", "free1_methods_reference.json").read_text())


def test_top_coding_at_the_95th_percentile_equals_sdcmicro(free1, ref):
    res = engine.protect(free1, "top-bottom-coding", {}, top={"INCOME": "p95"}, seed=1)
    info = res.info["coded"]["INCOME"]["top"]
    assert info["threshold"] == ref["topcode_income_value"]  # R's type-7 quantile
    assert info["changed"] == ref["topcode_income_n_changed"]
    assert res.data["INCOME"].sum() == ref["topcode_income_sum_after"]
    assert res.data["INCOME"].max() == ref["topcode_income_value"]


@pytest.mark.parametrize(
    "kw,key,col",
    [
        ({"top": {"INCOME": "900000:950000"}}, "top_income_900000_to_950000", "INCOME"),
        ({"bottom": {"INCOME": "p5"}}, "bottom_income_q05", "INCOME"),
        ({"top": {"AGE": "65"}}, "top_age_65", "AGE"),
    ],
)
def test_counts_and_sums_equal_sdcmicro(free1, mref, kw, key, col):
    res = engine.protect(free1, "top-bottom-coding", {}, seed=1, **kw)
    side = next(iter(kw))
    info = res.info["coded"][col][side]
    want = mref[key]
    assert info["changed"] == want["n_changed"]
    assert res.data[col].sum() == want["sum_after"]
    if "value" in want:
        assert info["threshold"] == float(want["value"])


def test_replacement_defaults_to_the_threshold_and_only_extremes_change(free1):
    res = engine.protect(
        free1,
        "top-bottom-coding",
        {},
        top={"INCOME": "900000"},
        bottom={"INCOME": "150000:1"},
        seed=1,
        order="input",
    )
    x, y = free1["INCOME"].to_numpy(), res.data["INCOME"].to_numpy()
    assert np.all(y[x > 900000] == 900000) and np.all(y[x < 150000] == 1)
    mid = (x >= 150000) & (x <= 900000)
    assert np.array_equal(y[mid], x[mid])  # the rest unchanged
    pd.testing.assert_frame_equal(res.data.drop(columns="INCOME"), free1.drop(columns="INCOME"))
    # an integer column stays integer with whole replacements; missing stays missing
    df = pd.DataFrame({"a": pd.array([1, 50, None, 99], dtype="Int64"), "b": [1, 2, 3, 4]})
    r = engine.protect(df, "top-bottom-coding", {}, top={"a": "60"}, bottom={"b": "2"}, seed=1, order="input")
    assert r.data["a"].dtype == "Int64" and r.data["a"].tolist()[:2] == [1, 50]
    assert pd.isna(r.data["a"].iloc[2]) and r.data["a"].iloc[3] == 60
    assert r.data["b"].dtype == np.int64 and r.data["b"].tolist() == [2, 2, 3, 4]


def test_percentile_is_data_dependent_and_private(free1, tmp_path):
    res = engine.protect(free1, "top-bottom-coding", {}, top={"INCOME": "p95:1000000"}, seed=1)
    value = res.info["coded"]["INCOME"]["top"]["threshold"]
    assert any(n.code == "threshold-from-data" and "953910" in n for n in res.private_notes)
    assert "953910" not in res.guarantee and "95th percentile" in res.guarantee
    export_release(res, tmp_path / "out.csv")
    assert "953910" not in (tmp_path / "out.metadata.json").read_text()
    assert str(int(value)) in (tmp_path / "out.private.json").read_text()
    eff = SPEC.step_effects(GuaranteeContext.of(res.params, res.protected_attributes))
    assert dict(eff.changes) == {"INCOME": Effect.DATA_MAP} and not eff.removes_records
    fixed = engine.protect(free1, "top-bottom-coding", {}, top={"INCOME": "900000"}, seed=1)
    assert dict(SPEC.step_effects(GuaranteeContext.of(fixed.params, fixed.protected_attributes)).changes) == {
        "INCOME": Effect.FIXED_MAP
    }
    assert not any(n.code == "threshold-from-data" for n in fixed.private_notes)
    assert fixed.guarantee_info.model is Model.NONE and "INCOME top-coded at 900000" in fixed.guarantee


def test_without_named_columns_the_confidential_numbers_at_p99(free1):
    res = engine.protect(
        free1, "top-bottom-coding", {"INCOME": "confidential", "MONEY": "confidential"}, seed=1
    )
    assert res.protected_attributes == ["INCOME", "MONEY"]
    for c in ("INCOME", "MONEY"):
        assert res.info["coded"][c]["top"]["from_data"]
        assert res.data[c].max() <= np.percentile(free1[c], 99)


@pytest.mark.parametrize(
    "text,words",
    [
        ("abc", "not a number"),
        ("nan", "NaN"),
        ("inf", "finite"),
        ("1e400", "finite"),
        ("p0", "percentile"),
        ("p100", "percentile"),
        ("p-3", "percentile"),
        ("5:abc", "not a number"),
        ("5:inf", "finite"),
        ("5:6:7", "not a number"),
    ],
)
def test_bad_thresholds_are_refused_in_one_line(free1, text, words):
    with pytest.raises(ParameterError) as exc:
        engine.protect(free1, "top-bottom-coding", {}, top={"INCOME": text}, seed=1)
    msg = str(exc.value)
    assert "\n" not in msg and "'INCOME'" in msg and words in msg, msg


def test_hostile_columns_and_combinations(free1):
    with pytest.raises(ParameterError, match="bottom-coding threshold .* above"):
        engine.protect(free1, "top-bottom-coding", {}, top={"AGE": "30"}, bottom={"AGE": "40"}, seed=1)
    with pytest.raises(ParameterError, match="not numeric"):
        engine.protect(pd.DataFrame({"t": ["a", "b"]}), "top-bottom-coding", {}, top={"t": "1"}, seed=1)
    with pytest.raises(ParameterError, match="not numeric"):
        engine.protect(free1, "top-bottom-coding", {}, top={"SEX": "1"}, types={"SEX": "categorical"}, seed=1)
    with pytest.raises(ParameterError, match="weight"):
        engine.protect(free1, "top-bottom-coding", {"WEIGHT": "weight"}, top={"WEIGHT": "1"}, seed=1)
    with pytest.raises(InputError, match="all missing"):
        engine.protect(
            pd.DataFrame({"x": [np.nan, np.nan]}), "top-bottom-coding", {}, top={"x": "p50"}, seed=1
        )
    huge = pd.DataFrame({"x": [1e308, -1e308, 0.0]})
    r = engine.protect(
        huge, "top-bottom-coding", {}, top={"x": "1e307"}, bottom={"x": "-1e307"}, seed=1, order="input"
    )
    assert r.data["x"].tolist() == [1e307, -1e307, 0.0]


def test_parse_threshold():
    assert parse_threshold(" -5 : -10 ") == (-5.0, None, -10.0)
    assert parse_threshold("p99.5") == (None, 99.5, None)
