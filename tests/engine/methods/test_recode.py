"""The ``recode`` method (issue 23 §1): global recoding as sdcMicro's ``globalRecode`` --
band counts on free1 equal sdcMicro 5.8.1's (given breaks, equidistant, quantiles), the lowest
value in the first interval, a function of the value, ordered readable labels (value labels
in .sav/.dta), merged categories (text, file), data-dependent breaks said privately, hostile
inputs refused in one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyreadstat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.export import export_release
from dpstudio.engine.guarantee import Effect, GuaranteeContext, Model
from dpstudio.engine.io import read_table
from dpstudio.engine.protection.recode import SPEC, assign, interval_labels, parse_breaks
from tests.conftest import shared_path

AGE_BREAKS = "0,15,25,35,45,55,65,100"


@pytest.fixture(scope="module")
def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


@pytest.fixture(scope="module")
def ref() -> dict:
    return json.loads(shared_path("free1", "free1_toolbox_reference.json").read_text())


@pytest.fixture(scope="module")
def mref() -> dict:
    return json.loads(shared_path("free1", "free1_methods_reference.json").read_text())


def _counts(s: pd.Series) -> list[int]:
    return [int(v) for v in s.value_counts(sort=False).sort_index().to_numpy()]


def test_given_breaks_band_counts_equal_sdcmicro(free1, ref):
    assert ref["recode_age_breaks"] == [float(x) for x in AGE_BREAKS.split(",")]
    res = engine.protect(free1, "recode", {}, breaks={"AGE": AGE_BREAKS}, seed=1, order="input")
    got = res.data["AGE"]
    assert isinstance(got.dtype, pd.CategoricalDtype) and got.dtype.ordered
    assert list(got.cat.categories) == [
        "[0, 15]",
        "(15, 25]",
        "(25, 35]",
        "(35, 45]",
        "(45, 55]",
        "(55, 65]",
        "(65, 100]",
    ]
    want = [ref["recode_age_band_counts"][str(i)] for i in range(1, 8)]
    assert _counts(got) == want
    # every other column byte-identical (values and dtypes)
    pd.testing.assert_frame_equal(res.data.drop(columns="AGE"), free1.drop(columns="AGE"))


def test_equidistant_and_quantile_counts_equal_sdcmicro(free1, mref):
    eq = engine.protect(free1, "recode", {}, breaks={"AGE": "5"}, seed=1, order="input")
    assert _counts(eq.data["AGE"]) == list(mref["recode_age_equidistant5"]["counts"].values())
    # sdcMicro's labels [14,26] (26,38] ... are ours with a space
    assert [c.replace(" ", "") for c in eq.data["AGE"].cat.categories] == list(
        mref["recode_age_equidistant5"]["counts"]
    )
    for col, n, key in (("AGE", 4, "recode_age_quantile4"), ("INCOME", 5, "recode_income_quantile5")):
        q = engine.protect(free1, "recode", {}, breaks={col: f"quantile:{n}"}, seed=1, order="input")
        assert q.info["recode"][col]["breaks"] == [float(b) for b in mref[key]["breaks"]]  # to the last digit
        assert _counts(q.data[col]) == list(mref[key]["counts"].values())


def test_lowest_value_belongs_to_the_first_interval():
    df = pd.DataFrame({"x": [0.0, 0.5, 10.0, 10.0000001, 20.0, np.nan]})
    res = engine.protect(df, "recode", {}, breaks={"x": "0,10,20"}, seed=1, order="input")
    assert res.data["x"].astype(object).tolist()[:5] == [
        "[0, 10]",
        "[0, 10]",
        "[0, 10]",
        "(10, 20]",
        "(10, 20]",
    ]
    assert pd.isna(res.data["x"].iloc[5])  # missing stays missing


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.integers(-50, 150), st.none()), min_size=1, max_size=60),
    st.lists(st.integers(-40, 140), min_size=1, max_size=8, unique=True),
)
def test_recoding_is_a_monotone_function_of_the_value(values, inner):
    b = sorted({-60, *inner, 160})
    x = np.array([np.nan if v is None else float(v) for v in values])
    codes = assign(x, np.asarray(b, dtype=float))
    labels = interval_labels(b)
    for v, c in zip(x, codes):
        if np.isnan(v):
            assert c == -1
            continue
        assert 0 <= c < len(labels)
        lo, hi = b[c], b[c + 1]
        assert (lo < v <= hi) or (c == 0 and v == lo)  # (a, b], the lowest in the first
    # equal values -> equal codes; larger values -> codes never smaller
    ok = ~np.isnan(x)
    order = np.argsort(x[ok], kind="stable")
    assert np.all(np.diff(codes[ok][order]) >= 0)


def test_labels_are_readable_and_ordered():
    assert interval_labels([0, 10, 20.5, float("inf")]) == ["[0, 10]", "(10, 20.5]", "(20.5, inf]"]
    df = pd.DataFrame({"x": [5.0, 55.0, 15.0, 25.0]})
    res = engine.protect(df, "recode", {}, breaks={"x": "-inf,10,20,inf"}, seed=1, order="input")
    assert res.data["x"].astype(object).tolist() == ["[-inf, 10]", "(20, inf]", "(10, 20]", "(20, inf]"]
    assert res.data["x"].min() == "[-inf, 10]" and res.data["x"].max() == "(20, inf]"  # ordered


def test_equal_width_over_the_declared_domain_is_a_fixed_map(free1):
    res = engine.protect(free1, "recode", {}, {"AGE": (0, 100)}, breaks={"AGE": "4"}, seed=1)
    assert res.info["recode"]["AGE"]["breaks"] == [0, 25, 50, 75, 100]
    assert not any(n.code == "recode-breaks-from-data" for n in res.private_notes)
    eff = SPEC.step_effects(GuaranteeContext.of(res.params, res.protected_attributes, run=res.info))
    assert dict(eff.changes) == {"AGE": Effect.FIXED_MAP}
    assert "declared domain" in res.guarantee
    # without a domain the breaks come from the data: said privately, DATA_MAP for chains
    d = engine.protect(free1, "recode", {}, breaks={"AGE": "4"}, seed=1)
    assert any(n.code == "recode-breaks-from-data" for n in d.private_notes)
    assert not any(n.code == "recode-breaks-from-data" for n in map(engine_notice, d.public_warnings))
    eff = SPEC.step_effects(GuaranteeContext.of(d.params, d.protected_attributes, run=d.info))
    assert dict(eff.changes) == {"AGE": Effect.DATA_MAP}
    assert "computed from the data" in d.guarantee


def engine_notice(w):
    from dpstudio.engine.notices import as_notice

    return as_notice(w)


def test_data_dependent_breaks_never_reach_public_files(free1, tmp_path):
    res = engine.protect(free1, "recode", {}, breaks={"INCOME": "quantile:5"}, seed=1)
    breaks = res.info["recode"]["INCOME"]["breaks"]
    paths = export_release(res, tmp_path / "out.csv")
    meta = (tmp_path / "out.metadata.json").read_text()
    note = (
        (tmp_path / "out.release-note.html").read_text()
        if (tmp_path / "out.release-note.html").exists()
        else ""
    )
    assert "quantile:5" in meta
    for b in breaks[1:-1]:  # inner breaks: in the labels of the data only
        assert f"{b:g}" not in meta and f"{int(b)}" not in meta and f"{int(b)}" not in note
    private = json.loads((tmp_path / "out.private.json").read_text())
    assert any(str(int(breaks[1])) in n for n in private["private_notes"])
    assert paths


def test_merge_categories_numeric_text_and_file(free1, tmp_path):
    res = engine.protect(free1, "recode", {}, merge={"MARSTAT": "1+2:12,3:3"}, seed=1, order="input")
    m = res.data["MARSTAT"]
    assert pd.api.types.is_numeric_dtype(m)
    assert sorted(m.unique().tolist()) == [3, 4, 12]
    assert int((m == 12).sum()) == int(free1["MARSTAT"].isin([1, 2]).sum())
    assert res.info["relabel"] == {"MARSTAT": {"12": ["1", "2"], "3": ["3"]}}
    text = engine.protect(free1, "recode", {}, merge={"MARSTAT": "1+2:couple"}, seed=1, order="input")
    assert text.data["MARSTAT"].tolist()[:3] == [
        "couple" if v in (1, 2) else str(v) for v in free1["MARSTAT"].tolist()[:3]
    ]
    f = tmp_path / "map.csv"
    f.write_text("column,from,to\nMARSTAT,1,12\nMARSTAT,2,12\nKINDPERS,7,6\n", encoding="utf-8")
    byfile = engine.protect(free1, "recode", {}, merge_file=str(f), seed=1, order="input")
    assert byfile.data["MARSTAT"].tolist() == res.data["MARSTAT"].where(res.data["MARSTAT"] != 3, 3).tolist()
    assert (byfile.data["KINDPERS"] == 7).sum() == 0
    assert (byfile.data["KINDPERS"] == 6).sum() == free1["KINDPERS"].isin([6, 7]).sum()
    assert set(byfile.protected_attributes) == {"MARSTAT", "KINDPERS"}


def test_merge_of_recoded_intervals_keeps_the_order(tmp_path):
    """A chain: intervals first, then two of them merged (a mapping file: the labels hold
    commas); the merged category takes the place of its first member."""
    df = pd.DataFrame({"x": [1.0, 12.0, 25.0, 38.0]})
    a = engine.protect(df, "recode", {}, breaks={"x": "0,10,20,30,40"}, seed=1, order="input")
    path = tmp_path / "merge.csv"
    pd.DataFrame({"column": ["x", "x"], "from": ["(10, 20]", "(20, 30]"], "to": ["(10, 30]"] * 2}).to_csv(
        path, index=False
    )
    b = engine.protect(a.data, "recode", {}, merge_file=str(path), seed=1, order="input")
    assert list(b.data["x"].cat.categories) == ["[0, 10]", "(10, 30]", "(30, 40]"]
    assert b.data["x"].dtype.ordered
    assert b.data["x"].astype(object).tolist() == ["[0, 10]", "(10, 30]", "(10, 30]", "(30, 40]"]


def test_value_labels_on_export(free1, tmp_path):
    d = free1[["SEX", "AGE", "MARSTAT"]].astype(float)
    pyreadstat.write_sav(
        d,
        tmp_path / "in.sav",
        variable_value_labels={"MARSTAT": {1: "married", 2: "cohab", 3: "div", 4: "single"}},
    )
    df, meta = read_table(tmp_path / "in.sav")
    res = engine.protect(df, "recode", {}, breaks={"AGE": AGE_BREAKS}, merge={"MARSTAT": "1+2:12"}, seed=1)
    for ext, reader in (("sav", pyreadstat.read_sav), ("dta", pyreadstat.read_dta)):
        export_release(res, tmp_path / f"o_{ext}.{ext}", input_meta=meta)
        back, m = reader(str(tmp_path / f"o_{ext}.{ext}"))
        age = {float(k): v for k, v in m.variable_value_labels["AGE"].items()}
        assert age == {float(i + 1): lab for i, lab in enumerate(res.data["AGE"].cat.categories)}
        assert sorted(back["AGE"].dropna().unique()) == list(range(1, 8))  # ordered codes
        assert back["AGE"].map(age).tolist() == res.data["AGE"].astype(object).tolist()
        mar = {float(k): v for k, v in m.variable_value_labels["MARSTAT"].items()}
        assert mar == {3.0: "div", 4.0: "single", 12.0: "married + cohab"}
    export_release(res, tmp_path / "o.csv")
    txt = pd.read_csv(tmp_path / "o.csv")
    assert txt["AGE"].tolist() == res.data["AGE"].astype(object).tolist()  # text in CSV


def test_guarantee_is_no_formal_guarantee_and_names_the_columns(free1):
    res = engine.protect(free1, "recode", {"SEX": "k-quasi"}, breaks={"AGE": AGE_BREAKS}, seed=1)
    g = res.guarantee_info
    assert g.model is Model.NONE and not res.is_dp
    assert "AGE" in res.guarantee and "(65, 100]" in res.guarantee
    assert res.protected_attributes == ["AGE"]
    assert "SEX" in {u.column for u in g.uncovered}  # a key left unchanged


def test_without_named_columns_the_numeric_keys_get_bins(free1):
    res = engine.protect(
        free1,
        "recode",
        {"AGE": "k-quasi", "SEX": "k-quasi"},
        {"AGE": (0, 100)},
        types={"SEX": "categorical"},
        bins=2,
        seed=1,
    )
    assert res.protected_attributes == ["AGE"]  # SEX is typed categorical: no bins
    assert list(res.data["AGE"].cat.categories) == ["[0, 50]", "(50, 100]"]
    assert res.data["SEX"].equals(free1["SEX"].iloc[res.row_map].reset_index(drop=True))


# ------------------------------------------------------------------ hostile inputs


@pytest.mark.parametrize(
    "text,words",
    [
        ("10,5", "increase strictly"),
        ("0,10,10", "increase strictly"),
        ("0,nan,10", "NaN"),
        ("0,abc", "not a number"),
        ("0,inf,10", "increase strictly"),
        ("5.5", "whole number"),
        ("0", "whole number"),
        ("quantile:0", "whole number"),
        ("1e9", "whole number"),
        (",", "not a number"),
    ],
)
def test_bad_breaks_are_refused_in_one_line(free1, text, words):
    with pytest.raises(ParameterError) as exc:
        engine.protect(free1, "recode", {}, breaks={"AGE": text}, seed=1)
    msg = str(exc.value)
    assert "\n" not in msg and "'AGE'" in msg and words in msg, msg
    assert msg.startswith("The 'breaks' parameter of method 'recode' must be")


def test_huge_breaks_and_values_outside(free1):
    res = engine.protect(free1, "recode", {}, breaks={"AGE": "0,1e300,1e400"}, seed=1)
    assert list(res.data["AGE"].cat.categories) == ["[0, 1e+300]", "(1e+300, inf]"]
    with pytest.raises(InputError, match=r"Column 'AGE': \d+ value\(s\) lie outside the breaks \[20, 60\]"):
        engine.protect(free1, "recode", {}, breaks={"AGE": "20,60"}, seed=1)
    with pytest.raises(ParameterError, match="not numeric"):
        engine.protect(pd.DataFrame({"t": ["a", "b"]}), "recode", {}, breaks={"t": "0,1"}, seed=1)
    with pytest.raises(ParameterError, match="typed categorical"):
        engine.protect(free1, "recode", {}, breaks={"SEX": "0,1,2"}, types={"SEX": "categorical"}, seed=1)
    with pytest.raises(ParameterError, match="not in the data"):
        engine.protect(free1, "recode", {}, breaks={"NOPE": "0,1"}, seed=1)
    with pytest.raises(ParameterError, match="both intervals and merged"):
        engine.protect(free1, "recode", {}, breaks={"AGE": "0,100"}, merge={"AGE": "1:2"}, seed=1)
    with pytest.raises(ParameterError, match="identifier"):
        engine.protect(free1, "recode", {"AGE": "identifier"}, breaks={"AGE": "0,100"}, seed=1)


@pytest.mark.parametrize("text", ["1+2", "1+:3", ":3", "1:2,1:3", "1+1:2", "a:"])
def test_bad_merge_text_is_refused(free1, text):
    with pytest.raises(ParameterError) as exc:
        engine.protect(free1, "recode", {}, merge={"MARSTAT": text}, seed=1)
    assert "\n" not in str(exc.value) and "'MARSTAT'" in str(exc.value)


def test_merge_file_hostile(free1, tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):  # refused, never waited on
        engine.protect(free1, "recode", {}, merge_file=str(fifo), seed=1)
    with pytest.raises(InputError, match="no such file"):
        engine.protect(free1, "recode", {}, merge_file=str(tmp_path / "none.csv"), seed=1)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="'column', 'from'"):
        engine.protect(free1, "recode", {}, merge_file=str(bad), seed=1)
    bad.write_text("column,from,to\nMARSTAT,1,12\nMARSTAT,1,13\n")
    with pytest.raises(InputError, match="mapped to '12' and to '13'"):
        engine.protect(free1, "recode", {}, merge_file=str(bad), seed=1)
    bad.write_bytes(b"column,from,to\nMARSTAT,\xff\xfe,1\n")
    with pytest.raises(InputError, match="UTF-8"):
        engine.protect(free1, "recode", {}, merge_file=str(bad), seed=1)
    bad.write_text("column,from,to\nNOPE,1,2\n")
    with pytest.raises(ParameterError, match="'NOPE'"):
        engine.protect(free1, "recode", {}, merge_file=str(bad), seed=1)


def test_input_is_never_modified(free1):
    before = free1.copy()
    engine.protect(free1, "recode", {}, breaks={"AGE": AGE_BREAKS}, merge={"MARSTAT": "1+2:12"}, seed=1)
    pd.testing.assert_frame_equal(free1, before)


def test_parse_breaks_grammar():
    assert parse_breaks(" 0 , 10 ,20 ").breaks == (0.0, 10.0, 20.0)
    assert parse_breaks("equal-width:3").how == "equal-width"
    assert parse_breaks("-inf,0,inf").breaks == (-np.inf, 0.0, np.inf)
