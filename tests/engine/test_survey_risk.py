"""assess_risk against sdcMicro 5.8.1's own figures on free1, independent oracles, properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import assess_risk
from dpstudio.engine.errors import DPStudioError
from dpstudio.engine.measures.survey_risk import bf_individual_risk

ROOT = Path(__file__).resolve().parents[2]
FREE1 = ROOT / "resources" / "free1"


@pytest.fixture(scope="module")
def free1():
    return pd.read_csv(FREE1 / "free1.csv")


@pytest.fixture(scope="module")
def ref():
    return json.loads((FREE1 / "free1_sdcmicro_reference.json").read_text())


def close(a, b, rel=1e-4):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=0.0)


def test_free1_every_sdcmicro_figure(free1, ref):
    rep = assess_risk(free1, ref["keys"], weight=ref["weight"], sensitive=[ref["sensitive"]])
    d = rep.to_dict()
    # integers exactly
    assert d["records"] == ref["n"] == 4000
    assert d["sample_uniques"] == ref["sample_uniques"]
    assert d["records_fk_lt_2"] == ref["fk_lt_2"]
    assert d["records_fk_lt_3"] == ref["fk_lt_3"]
    assert d["records_fk_lt_5"] == ref["fk_lt_5"]
    assert rep.records_above(0.1) == ref["n_indiv_risk_gt_0.1"]
    ld = d["l_diversity"][ref["sensitive"]]
    assert ld["distinct_min"] == ref["ldiv_distinct_min"]
    assert ld["records_l1"] == ref["ldiv_distinct_n_eq1"]
    # F_k summary (R's summary(): quantile type 7)
    Fk = rep.Fk
    s = ref["Fk_summary"]
    assert close(Fk.min(), s["Min."]) and close(Fk.max(), s["Max."]) and close(Fk.mean(), s["Mean"])
    q1, med, q3 = np.quantile(Fk, [0.25, 0.5, 0.75])
    assert close(q1, s["1st Qu."]) and close(med, s["Median"]) and close(q3, s["3rd Qu."])
    # risk figures to 1e-4 relative
    assert close(d["global_risk"], ref["global_risk"])
    assert close(d["global_risk"] * 100, ref["global_risk_pct"])
    assert close(d["expected_reidentifications"], ref["global_risk_ER"])
    ir = d["individual_risk"]
    assert close(ir["max"], ref["indiv_risk_max"])
    assert close(ir["mean"], ref["indiv_risk_mean"])
    assert close(ir["q50"], ref["indiv_risk_q"]["50%"])
    assert close(ir["q90"], ref["indiv_risk_q"]["90%"])
    assert close(ir["q99"], ref["indiv_risk_q"]["99%"])
    # no household in the reference: the field is absent, as sdcMicro's hier_risk_ER
    assert ref["hh_risk_ER"] == {} and "household_expected_reidentifications" not in d
    # field names of issue 10
    for f in (
        "records",
        "key_combinations",
        "sample_uniques",
        "records_fk_lt_2",
        "records_fk_lt_3",
        "records_fk_lt_5",
        "global_risk",
        "expected_reidentifications",
        "individual_risk",
        "l_diversity",
    ):
        assert f in d
    assert set(ir) == {"max", "mean", "q50", "q90", "q99"}
    json.dumps(d)  # JSON-serialisable


def _sdcmicro_indivrisk(fk, Fk):
    """Literal transcription of sdcMicro's R indivRisk(method='approx') loop."""
    pk = fk / Fk
    if fk == Fk:
        return 1 / fk
    if fk > 2:
        return pk / (fk - (1 - pk))
    if fk == 2:
        return (pk / (1 - pk)) - (((pk / (1 - pk)) ** 2) * math.log(1 / pk))
    if fk == 1:
        return (pk / (1 - pk)) * math.log(1 / pk)
    return 0.0


@given(st.integers(1, 30), st.floats(1.0, 2000.0))
def test_bf_formula_matches_sdcmicro_transcription(fk, wmean):
    Fk = fk * wmean
    ours = bf_individual_risk(np.array([float(fk)]), np.array([Fk]))[0]
    theirs = _sdcmicro_indivrisk(float(fk), Fk)
    if 1 - fk / Fk > 1e-3:  # away from the cancellation region of the naive formula
        assert math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-15)
    assert 0 <= ours <= 1


def _pairwise_fk(X: np.ndarray, w: np.ndarray):
    """Oracle: f_k, F_k by comparing every pair of records (missing matches anything)."""
    a, b = X[:, None, :], X[None, :, :]
    ok = ((a == b) | np.isnan(a) | np.isnan(b)).all(axis=2)
    return ok.sum(axis=1).astype(float), ok @ w


frames = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.lists(st.one_of(st.integers(0, 2), st.none()), min_size=3, max_size=3), min_size=n, max_size=n
        ),
        st.lists(st.floats(1.0, 50.0), min_size=n, max_size=n),
    )
)


@settings(max_examples=80, deadline=None)
@given(frames)
def test_fk_Fk_match_pairwise_oracle_with_missing(data):
    rows, w = data
    X = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["w"] = w
    rep = assess_risk(df, ["a", "b", "c"], weight="w")
    fk, Fk = _pairwise_fk(X, np.asarray(w))
    np.testing.assert_array_equal(rep.fk, fk)
    np.testing.assert_allclose(rep.Fk, Fk, rtol=1e-12)
    assert ((rep.individual_risk >= 0) & (rep.individual_risk <= 1)).all()


@settings(max_examples=60, deadline=None)
@given(frames, st.randoms(use_true_random=False))
def test_unchanged_by_row_order(data, rnd):
    rows, w = data
    X = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["w"] = w
    df["h"] = np.arange(len(df)) // 3
    df["s"] = np.arange(len(df)) % 4
    perm = list(range(len(df)))
    rnd.shuffle(perm)
    r1 = assess_risk(df, ["a", "b", "c"], weight="w", household="h", sensitive=["s"])
    r2 = assess_risk(
        df.iloc[perm].reset_index(drop=True), ["a", "b", "c"], weight="w", household="h", sensitive=["s"]
    )
    np.testing.assert_allclose(r2.individual_risk, r1.individual_risk[perm], rtol=1e-12)
    np.testing.assert_allclose(r2.household_risk, r1.household_risk[perm], rtol=1e-12)
    d1, d2 = r1.to_dict(), r2.to_dict()
    for f in ("sample_uniques", "records_fk_lt_3", "key_combinations", "l_diversity"):
        assert d1[f] == d2[f]
    assert math.isclose(d1["expected_reidentifications"], d2["expected_reidentifications"], rel_tol=1e-12)


@given(st.floats(1.0, 5000.0))
def test_risk_monotone_in_fk_for_equal_weights(w):
    fk = np.arange(1, 60, dtype=float)
    r = bf_individual_risk(fk, fk * w)
    assert ((r >= 0) & (r <= 1)).all()
    assert (np.diff(r) <= 1e-15).all(), r


def test_unweighted_risk_is_one_over_fk():
    df = pd.DataFrame({"a": [1, 1, 2, 3, 3, 3], "b": [0, 0, 0, 1, 1, 1]})
    rep = assess_risk(df, ["a", "b"])
    np.testing.assert_allclose(rep.individual_risk, [1 / 2, 1 / 2, 1, 1 / 3, 1 / 3, 1 / 3])
    assert rep.key_combinations == 3 and rep.sample_uniques == 1
    assert math.isclose(rep.expected_reidentifications, 3.0)


def test_household_risk_as_sdcmicro():
    df = pd.DataFrame(
        {"a": [1, 2, 2, 3, 4, 4, 4], "w": [10, 20, 20, 5, 8, 8, 8], "hh": ["x", "x", "y", "y", "y", "z", "z"]}
    )
    rep = assess_risk(df, ["a"], weight="w", household="hh")
    r = rep.individual_risk
    hh = {
        "x": 1 - (1 - r[0]) * (1 - r[1]),
        "y": 1 - (1 - r[2]) * (1 - r[3]) * (1 - r[4]),
        "z": 1 - (1 - r[5]) * (1 - r[6]),
    }
    exp = np.array([hh[h] for h in df["hh"]])
    np.testing.assert_allclose(rep.household_risk, exp, rtol=1e-12)
    assert math.isclose(rep.to_dict()["household_expected_reidentifications"], exp.sum(), rel_tol=1e-12)


def test_ldiversity_against_direct_computation(rng):
    n = 300
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 4, n),
            "b": rng.integers(0, 3, n),
            "s": rng.choice([1.0, 2.0, 3.0, np.nan], n, p=[0.5, 0.3, 0.15, 0.05]),
        }
    )
    rep = assess_risk(df, ["a", "b"], sensitive=["s"])
    per = rep.l_diversity_per_record["s"]
    for _key, g in df.groupby(["a", "b"]):
        idx = g.index.to_numpy()
        vals = g["s"]
        counts = vals.value_counts(dropna=True)
        nna = int(vals.isna().sum())
        dist = len(counts) + (1 if nna and len(counts) else 0)
        allc = list(counts) + ([nna] if nna and len(counts) else [])
        ent = math.exp(-sum(c / len(g) * math.log(c / len(g)) for c in allc))
        srt = sorted(counts, reverse=True)
        rec = 1 + sum(1 for j in range(1, len(srt)) if 2 * sum(srt[j:]) > srt[0]) if srt else 0
        assert (per["distinct"][idx] == dist).all()
        np.testing.assert_allclose(per["entropy"][idx], ent, rtol=1e-12)
        assert (per["recursive"][idx] == rec).all()


def test_missing_as_category_differs_from_wildcard():
    df = pd.DataFrame({"a": [1, 1, np.nan, 2], "b": [0, 0, 0, 0]})
    any_ = assess_risk(df, ["a", "b"])
    cat = assess_risk(df, ["a", "b"], missing="category")
    np.testing.assert_array_equal(any_.fk, [3, 3, 4, 2])
    np.testing.assert_array_equal(cat.fk, [2, 2, 1, 1])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"keys": ["nope"]}, "nope"),
        ({"keys": ["a"], "weight": "w0"}, "w0"),
        ({"keys": ["a"], "weight": "a"}, "both"),
        ({"keys": ["a"], "household": "hna"}, "hna"),
        ({"keys": ["a"], "missing": "drop"}, "missing"),
        ({"keys": []}, "key"),
    ],
)
def test_bad_input_messages(kwargs, words):
    df = pd.DataFrame({"a": [1, 2], "w0": [0.5, 3.0], "hna": [1, None]})
    with pytest.raises(DPStudioError, match=words):
        assess_risk(df, **kwargs)


def test_cli_risk_equals_engine(free1, ref, tmp_path, capsys):
    from dpstudio.cli import main

    per = tmp_path / "per.csv"
    argv = [
        "risk",
        str(FREE1 / "free1.csv"),
        "--weight",
        "WEIGHT",
        "--role",
        "EDUC1=confidential",
        "--type",
        "SEX=categorical",
        "--per-record",
        str(per),
        "--json",
    ]
    for k in ref["keys"]:
        argv += ["--role", f"{k}=k-quasi"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    eng = assess_risk(free1, ref["keys"], weight="WEIGHT", sensitive=["EDUC1"]).to_dict()
    assert out["sample_uniques"] == eng["sample_uniques"]
    assert out["expected_reidentifications"] == pytest.approx(eng["expected_reidentifications"], rel=1e-12)
    assert out["l_diversity"] == eng["l_diversity"]
    assert (per.stat().st_mode & 0o777) == 0o600
    assert len(pd.read_csv(per)) == 4000
    assert main(["risk", str(FREE1 / "free1.csv"), "--role", "SEX=bogus"]) == 2
    assert "SEX=bogus" in capsys.readouterr().err


# ---------------------------------------------------------------- many missing patterns (issue 10, speed)
# The fast path (WildcardIndex: one sort per pair of missing patterns on distinct codes) and the
# general path (one group-by per pair on records) must give the pairwise oracle's counts exactly.

many = st.integers(1, 80).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.lists(st.one_of(st.integers(0, 3), st.none(), st.none()), min_size=6, max_size=6),
            min_size=n,
            max_size=n,
        ),
        st.lists(st.floats(1.0, 50.0), min_size=n, max_size=n),
    )
)


def _frame(rows, w):
    X = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float).reshape(-1, 6)
    df = pd.DataFrame(X, columns=list("abcdef"))
    df["w"] = w
    return X, df


@settings(max_examples=60, deadline=None)
@given(data=many, path=st.sampled_from(["index", "pairwise"]))
def test_fk_Fk_many_missing_patterns_match_oracle(data, path):
    import dpstudio.engine.algorithms.frequencies as sr

    rows, w = data
    X, df = _frame(rows, w)
    old = sr._MAX_CODE
    if path == "pairwise":  # codes "too wide": the general path
        sr._MAX_CODE = 2
    try:
        rep = assess_risk(df, list("abcdef"), weight="w")
    finally:
        sr._MAX_CODE = old
    fk, Fk = _pairwise_fk(X, np.asarray(w))
    np.testing.assert_array_equal(rep.fk, fk)
    np.testing.assert_allclose(rep.Fk, Fk, rtol=1e-12)
    # exact combinations: a missing value is a value of its own
    assert rep.key_combinations == len({tuple("*" if np.isnan(v) else v for v in r) for r in X})


@settings(max_examples=60, deadline=None)
@given(many, many)
def test_query_counts_match_oracle(qdata, ddata):
    from dpstudio.engine.algorithms.frequencies import encode_keys, wildcard_counts

    Xq, dq = _frame(*qdata)
    Xd, dd = _frame(*ddata)
    both = pd.concat([dq, dd], ignore_index=True)  # one coding for query and data
    codes, cards = encode_keys(both, list("abcdef"))
    wd = np.asarray(ddata[1])
    fk, Fk = wildcard_counts(codes[: len(dq)], cards, d_codes=codes[len(dq) :], d_weights=wd)
    a, b = Xq[:, None, :], Xd[None, :, :]
    ok = ((a == b) | np.isnan(a) | np.isnan(b)).all(axis=2)
    np.testing.assert_array_equal(fk, ok.sum(axis=1))
    np.testing.assert_allclose(Fk, ok @ wd, rtol=1e-12)


def test_index_and_general_path_agree_on_a_larger_file(rng):
    import dpstudio.engine.algorithms.frequencies as sr

    n = 3000
    X = rng.integers(0, 5, (n, 5)).astype(float)
    X[rng.random((n, 5)) < 0.2] = np.nan  # ~ all 32 patterns
    df = pd.DataFrame(X, columns=list("abcde"))
    df["w"] = rng.uniform(1, 100, n)
    fast = assess_risk(df, list("abcde"), weight="w")
    old = sr._MAX_CODE
    sr._MAX_CODE = 2
    try:
        slow = assess_risk(df, list("abcde"), weight="w")
    finally:
        sr._MAX_CODE = old
    np.testing.assert_array_equal(fast.fk, slow.fk)
    np.testing.assert_allclose(fast.Fk, slow.Fk, rtol=1e-12)
    assert fast.key_combinations == slow.key_combinations
    fk, _ = _pairwise_fk(X, df["w"].to_numpy())
    np.testing.assert_array_equal(fast.fk, fk)
