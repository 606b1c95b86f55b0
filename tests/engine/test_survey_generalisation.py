"""Issue 24 §1: a k-quasi wiped to '*' without a word (ANES: age '*' in all 918 records, the
.sav export turned the numeric age into a string).  Reproduced on an SPSS file with value
labels made here with pyreadstat.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyreadstat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine.export import export_release
from dpstudio.engine.io import generalised_codes, read_table
from dpstudio.engine.transformation import fully_generalised, transformation_rows, wipe_risks

PID = {
    0.0: "Strong Democrat",
    1.0: "Weak Democrat",
    2.0: "Independent-Democrat",
    3.0: "Independent",
    4.0: "Independent-Republican",
    5.0: "Weak Republican",
    6.0: "Strong Republican",
}


def _anes_like(path, n: int = 918, seed: int = 3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n).astype(float),
            "educ": rng.integers(1, 8, n).astype(float),
            "PID": rng.integers(0, 7, n).astype(float),
            "income": rng.normal(40000, 15000, n).round(0),
        }
    )
    pyreadstat.write_sav(
        df,
        str(path),
        variable_value_labels={"PID": PID, "educ": {float(i): f"level {i}" for i in range(1, 8)}},
        column_labels={"age": "Age of respondent", "PID": "Party identification"},
    )
    return path


ROLES = {"age": "k-quasi", "educ": "k-quasi", "PID": "k-quasi", "income": "eps-quasi"}


@pytest.fixture
def anes(tmp_path):
    return read_table(_anes_like(tmp_path / "anes.sav"))


def _run(df, **kw):
    return engine.protect(df, "k-eps", ROLES, {}, k=5, epsilon=1.0, seed=1, types={"income": "integer"}, **kw)


def test_wiped_k_quasi_is_said_after_the_run(anes):
    df, _meta = anes
    res = _run(df)
    wiped = fully_generalised(res)
    assert wiped == ["age"]  # the defect as reported: age '*' in every record
    assert (res.data["age"] == "*").all()
    codes = {getattr(w, "code", None) for w in res.warnings}
    assert "k-quasi-wiped" in codes
    text = next(str(w) for w in res.warnings if getattr(w, "code", None) == "k-quasi-wiped")
    assert "'age'" in text and "hierarch" in text
    # the notice is private (computed on this run's data), never in the public metadata
    assert "k-quasi-wiped" not in {getattr(w, "code", None) for w in res.public_warnings}
    rows = {r["column"]: r for r in transformation_rows(res)}
    assert set(rows) == {"age", "educ", "PID"}
    assert rows["age"]["top"] and rows["age"]["level"] == rows["age"]["height"] - 1
    assert not rows["PID"]["top"] and rows["PID"]["level"] == 0


def test_wiped_k_quasi_is_said_before_the_run(anes):
    df, _meta = anes
    # PID as its labels (text): without a hierarchy it is kept or wiped, nothing in between
    df = df.assign(PID=df["PID"].map(PID))
    risks = {r["column"]: r["reason"] for r in wipe_risks(df, ["age", "educ", "PID"], k=5)}
    assert risks.get("PID") == "all-or-nothing"
    assert "age" not in risks and "educ" not in risks  # automatic intervals: steps in between
    # k above every group of PID alone: certainly wiped, and said with the numbers
    r = {r["column"]: r for r in wipe_risks(df, ["PID"], k=200, suppression=0.0)}["PID"]
    assert r["reason"] == "certain" and "918 records are in groups smaller than k = 200" in r["text"]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(20, 200),
    k=st.integers(2, 12),
    sup=st.sampled_from([0.0, 0.02, 0.1]),
)
def test_certain_wipe_is_sound(seed, n, k, sup):
    """A k-quasi announced as certainly wiped is at the top in the run OLA chooses."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "a": rng.integers(0, int(rng.integers(2, 40)), n),
            "c": rng.choice(list("abcdefgh")[: int(rng.integers(2, 9))], n),
            "b": rng.choice(list("xyz"), n),
        }
    )
    risks = [r for r in wipe_risks(df, ["a", "c", "b"], k=k, suppression=sup) if r["reason"] == "certain"]
    try:
        res = engine.protect(
            df, "k-eps", {"a": "k-quasi", "c": "k-quasi", "b": "k-quasi"}, {}, k=k, suppression=sup, seed=0
        )
    except engine.DPStudioError:
        return  # k too large for this file: nothing released
    rows = {r["column"]: r for r in transformation_rows(res)}
    for r in risks:
        assert rows[r["column"]]["top"], (r, rows)


def test_release_note_shows_the_transformation(anes, tmp_path):
    df, meta = anes
    res = _run(df)
    paths = export_release(res, tmp_path / "out.sav", input_meta=meta, release_note=True)
    note = open(paths["release_note"], encoding="utf-8").read()
    assert "Generalisation of the k-quasi-identifiers" in note
    note = note[note.index("Generalisation of the k-quasi-identifiers") :]
    row = re.search(r"<tr><td>age</td>.*?</tr>", note).group(0)
    assert "fully generalised" in row
    assert "not generalised" in re.search(r"<tr><td>PID</td>.*?</tr>", note).group(0)
    # automatic hierarchies are built from the data: their level is not published
    assert "level " not in row


def test_sav_export_keeps_numeric_types(anes, tmp_path):
    """Decision (issue 24 §1): in .sav/.dta a numeric k-quasi stays numeric; '*' (nothing
    released) is system-missing, a generalised value (e.g. '30-39') a code 1, 2, … labelled
    with its text; the column's own labels are dropped once they no longer apply."""
    df, meta = anes
    res = _run(df)
    paths = export_release(res, tmp_path / "out.sav", input_meta=meta)
    out, m = pyreadstat.read_sav(paths["data"])
    assert m.original_variable_types["age"].startswith("F")  # not A (string) as before
    assert out["age"].isna().all()
    assert m.variable_value_labels["PID"] == PID  # kept: PID is released as its codes
    assert m.column_names_to_labels["age"] == "Age of respondent"


def test_sav_export_generalised_intervals_are_labelled_codes(tmp_path):
    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame(
        {"age": rng.integers(18, 91, n).astype(float), "sex": rng.integers(1, 3, n).astype(float)}
    )
    pyreadstat.write_sav(df, str(tmp_path / "in.sav"), variable_value_labels={"sex": {1.0: "m", 2.0: "f"}})
    data, meta = read_table(tmp_path / "in.sav")
    res = engine.protect(data, "k-eps", {"age": "k-quasi", "sex": "k-quasi"}, {}, k=10, seed=2)
    rel = res.data["age"].astype(str)
    assert rel.str.contains("-").all()  # intervals, not '*'
    paths = export_release(res, tmp_path / "out.sav", input_meta=meta)
    out, m = pyreadstat.read_sav(paths["data"])
    assert m.original_variable_types["age"].startswith("F")
    labels = m.variable_value_labels["age"]
    assert [labels[c] for c in out["age"]] == rel.tolist()  # the texts, by their codes
    lows = [int(labels[c].split("-")[0]) for c in sorted(labels)]
    assert lows == sorted(lows)  # codes in the order of the intervals


def test_generalised_codes_hostile():
    c, lab = generalised_codes(pd.Series(["*", None, "*"], dtype=object))
    assert c.isna().all() and lab == {}
    c, lab = generalised_codes(pd.Series(["[0.5, 1)", "[-1, 0.5)", "b", "a"], dtype=object))
    assert [lab[x] for x in c] == ["[0.5, 1)", "[-1, 0.5)", "b", "a"]
    assert lab[1.0] == "[-1, 0.5)" and lab[3.0] == "a"
