"""The ``pram`` method (issue 23 §1): sdcMicro's ``pram`` -- the transition matrix equals
sdcMicro 5.8.1's bit for bit for the same diagonal draws, invariant PRAM keeps the expected
category frequencies (and agrees with sdcMicro's draws, statistically, fixed seeds), strata,
a user matrix from a file, the matrix as a public extra file, the guarantee (plausible
deniability, no k-anonymity, no DP), hostile inputs."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.export import export_release
from dpstudio.engine.guarantee import Effect, Effects, GuaranteeContext, Model
from dpstudio.engine.protection.pram import SPEC, draw, pram_matrix
from tests.conftest import shared_path

RUNS = 120


@pytest.fixture(scope="module")
def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


@pytest.fixture(scope="module")
def mref() -> dict:
    return json.loads(shared_path("free1", "free1_methods_reference.json").read_text())


@pytest.mark.parametrize("case", [0, 1, 2])
def test_matrix_equals_sdcmicro_bit_for_bit(free1, mref, case):
    c = mref["pram"][case]
    counts = free1[c["variable"]].value_counts().sort_index()
    assert [str(v) for v in counts.index] == c["levels"]
    diag = np.array([float(x) for x in c["diagonal_draws"]])
    assert np.all((diag >= c["pd"]) & (diag <= 1))
    R = pram_matrix(counts.to_numpy(float), diag, c["alpha"])
    want = np.array([[float(x) for x in row] for row in c["matrix"]])
    assert np.array_equal(R, want), np.abs(R - want).max()


def test_matrix_properties():
    rng = np.random.default_rng(3)
    for L in (1, 2, 5, 30):
        counts = rng.integers(0, 50, L).astype(float)
        counts[0] = max(counts[0], 1)
        diag = rng.uniform(0.6, 1, L)
        R = pram_matrix(counts, diag, alpha=0.7)
        assert np.allclose(R.sum(axis=1), 1) and np.all(R >= 0)
        assert np.allclose(counts @ R, counts)  # invariant: p R = p
        P = pram_matrix(counts, diag, alpha=0.7, invariant=False)
        assert np.allclose(np.diag(P), diag if L > 1 else 1) and np.allclose(P.sum(axis=1), 1)
    assert np.array_equal(pram_matrix(np.array([5.0, 0.0]), np.ones(2), 0.5), np.eye(2))  # pd = 1


def test_draw_follows_the_rows():
    R = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    codes = np.array([0, 0, 1, 1, 2, -1] * 2000)
    out = draw(codes, R, np.random.default_rng(0).random(codes.size))
    assert np.all(out[codes == 0] == 1) and np.all(out[codes == 2] == 2) and np.all(out[codes == -1] == -1)
    share = np.mean(out[codes == 1] == 0)
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / 4000)
    assert not np.any(out[codes == 1] == 2)  # a zero tail is never drawn


def _freqs(df, runs, **kw):
    levels = sorted(df["MARSTAT"].unique())
    out = []
    for s in range(runs):
        r = engine.protect(df, "pram", {}, variables="MARSTAT", seed=1000 + s, publish_matrix=False, **kw)
        out.append([int((r.data["MARSTAT"] == v).sum()) for v in levels])
    return np.array(out, dtype=float)


def test_invariant_pram_keeps_expected_frequencies_like_sdcmicro(free1, mref):
    ref = mref["pram_marstat_reps"]
    f = _freqs(free1[["MARSTAT"]], RUNS)
    mean, sd = f.mean(axis=0), f.std(axis=0, ddof=1)
    orig = np.array(ref["original"], dtype=float)
    se = sd / np.sqrt(RUNS)
    assert np.all(np.abs(mean - orig) <= 4.5 * se + 0.5), (mean, orig)  # E[released] = original
    se_both = np.sqrt(se**2 + (np.array(ref["sd"]) / np.sqrt(ref["runs"])) ** 2)
    assert np.all(np.abs(mean - np.array(ref["mean"])) <= 4.5 * se_both + 0.5), (mean, ref["mean"])
    # and the spread of the draws is sdcMicro's (ratio of standard deviations near 1)
    assert np.all(np.abs(sd / np.array(ref["sd"]) - 1) < 0.35), (sd, ref["sd"])
    # the basic matrix alone does not keep them (the test can fail)
    plain = _freqs(free1[["MARSTAT"]], 40, invariant=False).mean(axis=0)
    assert abs(plain[1] - orig[1]) > 50


def test_user_matrix_from_a_file_like_sdcmicro(free1, mref, tmp_path):
    ref = mref["pram_marstat_user_matrix"]
    M = np.array(ref["matrix"])
    f = tmp_path / "m.csv"
    f.write_text("from,1,2,3,4\n" + "\n".join(f"{i + 1}," + ",".join(map(str, r)) for i, r in enumerate(M)))
    got = []
    for s in range(RUNS):
        r = engine.protect(free1[["MARSTAT"]], "pram", {}, matrix={"MARSTAT": str(f)}, seed=s)
        got.append([int((r.data["MARSTAT"] == v).sum()) for v in (1, 2, 3, 4)])
    got = np.array(got, dtype=float)
    se = np.sqrt(got.std(axis=0, ddof=1) ** 2 / RUNS + np.array(ref["sd"]) ** 2 / ref["runs"])
    assert np.all(np.abs(got.mean(axis=0) - np.array(ref["mean"])) <= 4.5 * se + 0.5)
    t = r.tables["transition_matrix"]
    assert np.allclose(t["probability"].to_numpy().reshape(4, 4), M)
    assert "the user's matrix for MARSTAT" in r.guarantee and "reveals" not in r.guarantee


def test_strata_and_the_public_matrix(free1, tmp_path):
    res = engine.protect(free1, "pram", {}, variables="MARSTAT,EDUC1", strata="SEX", seed=4)
    t = res.tables["transition_matrix"]
    assert list(t.columns) == ["variable", "stratum", "from", "to", "probability"]
    assert set(t["stratum"]) == {"SEX=1", "SEX=2"}
    for (var, stratum), g in t.groupby(["variable", "stratum"]):
        L = int(np.sqrt(len(g)))
        R = g["probability"].to_numpy().reshape(L, L)
        sex = int(stratum.split("=")[1])
        counts = free1.loc[free1["SEX"] == sex, var].value_counts().sort_index().to_numpy(float)
        assert np.allclose(counts @ R, counts)  # invariant within its own stratum
    # strata columns and every other column unchanged, record for record
    aligned = res.aligned_original()
    for c in free1.columns:
        if c not in ("MARSTAT", "EDUC1"):
            assert res.data[c].equals(aligned[c]), c
    assert res.info["pram"]["MARSTAT"]["changed"] > 0
    paths = export_release(res, tmp_path / "out.csv")
    assert "table:transition_matrix" in paths
    meta = json.loads((tmp_path / "out.metadata.json").read_text())
    assert any("transition_matrix" in json.dumps(v) for v in meta["files"].values())
    mode = os.stat(paths["table:transition_matrix"]).st_mode & 0o777
    assert mode & 0o044  # public (not owner-only)
    back = pd.read_csv(paths["table:transition_matrix"])
    assert len(back) == len(t)
    hidden = engine.protect(free1, "pram", {}, variables="MARSTAT", publish_matrix=False, seed=4)
    assert not hidden.tables and "not published" in hidden.guarantee


def test_guarantee_plausible_deniability_not_k_anonymity_not_dp(free1):
    res = engine.protect(free1, "pram", {"MARSTAT": "k-quasi"}, variables="MARSTAT", seed=1)
    g = res.guarantee_info
    assert g.model is Model.PLAUSIBLE_DENIABILITY and not res.is_dp and g.k is None
    for words in (
        "Plausible deniability",
        "MARSTAT",
        "Not k-anonymity and not differential privacy",
        "published with the release",
        "reveals",
    ):
        assert words in res.guarantee, words
    e = SPEC.step_effects(GuaranteeContext.of(dict(res.params, strata="SEX"), ["MARSTAT"]))
    assert isinstance(e, Effects) and dict(e.changes) == {"MARSTAT": Effect.PERTURB} and e.reads == ("SEX",)
    assert not e.removes_records


def test_missing_values_and_text_and_categoricals():
    df = pd.DataFrame(
        {
            "c": ["a", "b", None, "c", "a", "b"] * 50,
            "k": pd.Categorical(
                ["x", "y", "x", None, "y", "x"] * 50, categories=["y", "x", "z"], ordered=True
            ),
        }
    )
    res = engine.protect(df, "pram", {}, variables="c,k", pd=0.5, seed=2, order="input")
    assert res.data["c"].isna().sum() == 50 and res.data["c"].isna().equals(df["c"].isna())
    assert set(res.data["c"].dropna()) <= {"a", "b", "c"}
    assert res.data["k"].dtype == df["k"].dtype and res.data["k"].isna().equals(df["k"].isna())
    assert (res.data["c"] != df["c"]).sum() > 0


def test_nullable_integers_with_missing_values():
    """A whole-number column with missing values (pandas Int64, as local suppression leaves a
    numeric key): missing stay missing, the rest are PRAMed (was a NaN-to-integer traceback)."""
    df = pd.DataFrame({"m": pd.array([1, 2, None, 4, 1, 2] * 50, dtype="Int64")})
    res = engine.protect(df, "pram", {}, variables="m", pd=0.5, seed=2, order="input")
    assert res.data["m"].isna().equals(df["m"].isna())
    assert set(res.data["m"].dropna().astype(int)) <= {1, 2, 4}
    assert (res.data["m"] != df["m"]).sum() > 0


def test_household_variables_drawn_once_per_household():
    d = pd.read_csv(shared_path("testdata", "testdata.csv"))
    res = engine.protect(
        d,
        "pram",
        {"ori_hid": "household"},
        variables="roof,sex",
        household_vars="roof",
        seed=3,
        order="input",
    )
    roof = res.data["roof"]
    hid = d["ori_hid"]
    assert (roof.groupby(hid).nunique() == 1).all()  # one category per household
    assert (roof != d["roof"]).sum() > 0
    changed = res.data["roof"] != d["roof"]
    assert (changed.groupby(hid).nunique() == 1).all()  # a household changes as a whole
    assert res.info["pram"]["roof"]["changed"] == int(changed.groupby(hid).any().sum())


# ------------------------------------------------------------------ hostile inputs


@pytest.mark.parametrize(
    "rows,words",
    [
        ("from,1,2\n1,0.5,0.4\n2,0,1\n", "sums to 0.9"),
        ("from,1,2\n1,0.5,0.5\n", "square"),
        ("from,1,2\n1,nan,1\n2,0,1\n", "in [0, 1]"),
        ("from,1,2\n1,-0.5,1.5\n2,0,1\n", "in [0, 1]"),
        ("from,1,2\n1,a,b\n2,0,1\n", "numbers"),
        ("from,1,1\n1,0.5,0.5\n1,0.5,0.5\n", "each category once"),
        ("from,1,2\n3,0.5,0.5\n2,0,1\n", "a category of the first row"),
    ],
)
def test_bad_matrix_files(tmp_path, rows, words):
    df = pd.DataFrame({"x": [1, 2] * 10})
    f = tmp_path / "m.csv"
    f.write_text(rows)
    with pytest.raises(InputError) as exc:
        engine.protect(df, "pram", {}, matrix={"x": str(f)}, seed=1)
    assert words in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_hostile_files_and_parameters(tmp_path, free1):
    df = pd.DataFrame({"x": [1, 2, 3] * 10, "s": [1, 2] * 15})
    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        engine.protect(df, "pram", {}, matrix={"x": str(fifo)}, seed=1)
    f = tmp_path / "m.csv"
    f.write_text("from,1,2\n1,1,0\n2,0,1\n")
    with pytest.raises(InputError, match="category '3' of the data is not in its transition matrix"):
        engine.protect(df, "pram", {}, matrix={"x": str(f)}, seed=1)
    for kw, exc_type, words in (
        ({"pd": 0}, ParameterError, "'pd'"),
        ({"pd": 1.5}, ParameterError, "'pd'"),
        ({"alpha": -0.1}, ParameterError, "'alpha'"),
        ({"strata": "x"}, ParameterError, "strata must be other columns"),
        ({"strata": "nope"}, ParameterError, "'nope'"),
        ({"variables": "nope"}, ParameterError, "'nope'"),
        ({"variables": "x,x"}, ParameterError, "each named once"),
        ({"household_vars": "x"}, ParameterError, "household-id column"),
    ):
        with pytest.raises(exc_type) as e:
            engine.protect(df, "pram", {}, **{"variables": "x", **kw}, seed=1)
        assert words in str(e.value) and "\n" not in str(e.value), (kw, str(e.value))
    with pytest.raises(InputError, match="at most"):
        engine.protect(pd.DataFrame({"x": np.arange(6000.0)}), "pram", {}, variables="x", seed=1)


def test_pd_one_changes_nothing_and_input_untouched(free1):
    before = free1.copy()
    res = engine.protect(free1, "pram", {}, variables="MARSTAT", pd=1.0, seed=1, order="input")
    assert res.data["MARSTAT"].equals(free1["MARSTAT"])
    pd.testing.assert_frame_equal(free1, before)


def test_a_reused_seed_with_another_matrix_file_draws_afresh(tmp_path):
    df = pd.DataFrame({"x": [1, 2] * 200})
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("from,1,2\n1,0.5,0.5\n2,0.5,0.5\n")
    b.write_text("from,1,2\n1,0.5,0.5\n2,0.5000000000,0.5000000000\n")  # same matrix, other bytes
    ra = engine.protect(df, "pram", {}, matrix={"x": str(a)}, seed=9, order="input")
    os.replace(b, a)  # same path, other content
    rb = engine.protect(df, "pram", {}, matrix={"x": str(a)}, seed=9, order="input")
    assert not ra.data["x"].equals(rb.data["x"])


def test_integer_levels_by_counting_equal_the_sorted_levels():
    """_levels' linear path for whole numbers gives the levels and codes of the sort."""
    from dpstudio.engine.protection.pram import _levels

    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        lo = int(rng.integers(-1000, 1000))
        x = pd.Series(rng.integers(lo, lo + int(rng.integers(1, 500)), n))
        codes, levels, numeric = _levels(x)
        xf = x.to_numpy(np.float64)
        want = np.unique(xf)
        assert numeric and levels == want.tolist() and np.array_equal(codes, np.searchsorted(want, xf))
    wide = pd.Series([0, 10**15, 5])  # too wide to count: the sort
    assert _levels(wide)[1] == [0.0, 5.0, 1e15]
