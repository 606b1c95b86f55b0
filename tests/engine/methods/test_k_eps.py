"""The k-eps method ((k, ε)-anonymity, paper 003): k-anonymity, per-class noise scale,
c-confident suppression, measures formulas, bad input, determinism, sweeps, real Adult."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine.errors import InputError, NotApplicableError, ParameterError
from dpstudio.engine.hierarchies.hierarchy import Hierarchy
from dpstudio.engine.measures.keps import (
    class_diameters,
    confidence_radius,
    confident_suppression,
    count_within,
    keps_measures,
    nearest_member_linked,
    noise_abs_mean,
)
from dpstudio.engine.registry import get_method
from scripts.synth_height import add_height, synthetic_height
from tests.conftest import shared_path

PREC = {"height": 0.01}  # output grid of the noisy ε-quasi (issue 8 §3)
ROLES = {"age": "k-quasi", "sex": "k-quasi", "height": "eps-quasi", "name": "identifier"}


def _people(seed=0, n=400):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "name": [f"p{i}" for i in range(n)],
            "age": rng.integers(17, 90, n),
            "sex": rng.choice(["Male", "Female"], n),
            "income": rng.integers(0, 100_000, n),
        }
    )
    df["height"] = synthetic_height(df["age"], df["sex"], seed=seed).to_numpy()
    return df


def _classes(res):
    kq = [c for c, r in res.roles.items() if r == "k-quasi"]
    return res.data.groupby(kq, sort=False)[kq[0]].transform("size").to_numpy()


# ---------------------------------------------------------------- registry / guarantee


def test_registered_with_the_cli_keywords():
    spec = get_method("k-eps")
    names = {p.name for p in spec.params}
    assert {"k", "epsilon", "algorithm", "suppression", "confidence", "noise", "drop_missing"} <= names
    assert spec.param("algorithm").choices == ("ola", "mondrian")
    assert spec.param("suppression").default == 0.05
    assert spec.param("confidence").default is None
    assert not spec.numeric_only
    res = engine.protect(_people(), "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, seed=1)
    assert "NOT ε-differential privacy" in res.guarantee and not res.is_dp
    assert "5-anonymity" in res.guarantee
    assert "name" not in res.data.columns


# ---------------------------------------------------------------- k-anonymity, rows, shuffle


@settings(max_examples=12, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 12),
    st.sampled_from(["ola", "mondrian"]),
    st.sampled_from([None, 0.9]),
)
def test_every_release_is_k_anonymous_and_rows_align(seed, k, algorithm, conf):
    df = _people(seed, 300)
    res = engine.protect(
        df, "k-eps", ROLES, precision=PREC, k=k, epsilon=2.0, algorithm=algorithm, confidence=conf, seed=seed
    )
    assert _classes(res).min() >= k
    rm = res.row_map
    assert len(set(rm.tolist())) == len(rm) == len(res.data)
    orig = res.aligned_original()
    assert (orig["income"].to_numpy() == res.data["income"].to_numpy()).all()  # "other" kept
    suppressed = set(res.info["suppressed_rows"]) | set(res.info["confidence_suppressed_rows"])
    assert suppressed.isdisjoint(rm.tolist())
    assert len(suppressed) + len(rm) == len(df)
    if algorithm == "ola":
        assert len(res.info["suppressed_rows"]) <= int(0.05 * len(df))
    m = engine.evaluate(orig, res.data, measures=("kanon",), result=res)
    assert m["keps_min_class_size"] >= k and m["keps_share_below_k"] == 0.0


def test_records_are_shuffled_and_classes_reported():
    res = engine.protect(_people(1, 500), "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, seed=3)
    assert not (np.diff(res.row_map) > 0).all()
    cls = res.info["equivalence_classes"]
    assert cls["size"].sum() == len(res.data) and cls["size"].min() >= 5
    assert {"age", "sex", "size", "diam_height", "noise_scale"} <= set(cls.columns)
    assert set(res.info["generalisation"]) >= {"node", "loss", "suppressed_records", "levels"}


# ---------------------------------------------------------------- noise calibration


def _two_class_frame(n=4000):
    # k-quasi "g" with two values -> two classes; heights spread 10 and 30 wide; zero-width class
    rng = np.random.default_rng(5)
    g = np.repeat(["a", "b", "c"], n)
    h = np.r_[150 + 10 * rng.random(n), 150 + 30 * rng.random(n), np.full(n, 170.0)]
    w = np.r_[60 + 4 * rng.random(n), 60 + 2 * rng.random(n), np.full(n, 70.0)]
    h[0], h[1] = 150.0, 160.0  # exact diameters 10 and 30
    h[n], h[n + 1] = 150.0, 180.0
    return pd.DataFrame({"g": g, "h": h, "w": w})


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_noise_scale_is_class_diameter_over_epsilon(eps):
    df = _two_class_frame()
    roles = {"g": "k-quasi", "h": "eps-quasi"}
    flat = Hierarchy.from_rows([["a", "*"], ["b", "*"], ["c", "*"]])
    res = engine.protect(
        df,
        "k-eps",
        roles,
        hierarchies={"g": flat},
        k=5,
        epsilon=eps,
        suppression=0.0,
        seed=11,
        precision={"h": 0.01},
    )
    orig = res.aligned_original()
    noise = res.data["h"].to_numpy() - orig["h"].to_numpy()
    for grp, diam in (("a", 10.0), ("b", 30.0)):
        m = orig["g"].to_numpy() == grp
        # E|Laplace(b)| = b; with 4000 draws the standard error is b/sqrt(4000) ≈ 1.6 %
        assert np.mean(np.abs(noise[m])) == pytest.approx(diam / eps, rel=0.06)
    assert (noise[orig["g"].to_numpy() == "c"] == 0).all()  # diameter 0: no noise


def test_several_eps_quasis_use_record_level_sum_of_diameters():
    df = _two_class_frame()
    roles = {"g": "k-quasi", "h": "eps-quasi", "w": "eps-quasi"}
    flat = Hierarchy.from_rows([["a", "*"], ["b", "*"], ["c", "*"]])
    res = engine.protect(
        df,
        "k-eps",
        roles,
        hierarchies={"g": flat},
        k=5,
        epsilon=1.0,
        suppression=0.0,
        seed=12,
        precision={"h": 0.01, "w": 0.01},
    )
    orig = res.aligned_original()
    diam = class_diameters(pd.factorize(df["g"])[0], df[["h", "w"]].to_numpy())
    for i, grp in enumerate(["a", "b"]):
        m = orig["g"].to_numpy() == grp
        expect = diam[i].sum() / 1.0
        for col in ("h", "w"):
            noise = res.data[col].to_numpy()[m] - orig[col].to_numpy()[m]
            assert np.mean(np.abs(noise)) == pytest.approx(expect, rel=0.06)


def test_noise_free_baseline_and_domain_clamp():
    df = _people(2, 300)
    prep = engine.prepare(df, "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0)
    res = engine.run_prepared(prep, rng=np.random.default_rng(0), epsilon=None)
    assert np.allclose(res.data["height"], res.aligned_original()["height"])
    assert "without noise" in res.guarantee
    res2 = engine.protect(
        df, "k-eps", ROLES, precision=PREC, domains={"height": (100, 250)}, k=5, epsilon=0.05, seed=1
    )
    assert res2.data["height"].between(100, 250).all()


# ---------------------------------------------------------------- helpers vs brute force


def _bf_count(cls, data, centre, r):
    data = data.reshape(len(cls), -1)
    centre = centre.reshape(len(cls), -1)
    return np.array(
        [
            np.sum((cls == cls[i]) & ((data >= centre[i] - r[i]) & (data <= centre[i] + r[i])).all(1))
            for i in range(len(cls))
        ]
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(1, 2))
def test_count_within_and_linking_match_brute_force(seed, n, m):
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 4, n)
    data = np.round(rng.normal(0, 3, (n, m)), 1)  # rounded: many ties
    rel = data + np.round(rng.laplace(0, 1, (n, m)), 1)
    r = np.round(rng.random(n) * 2, 1)
    got = count_within(cls, data if m > 1 else data[:, 0], cls, rel if m > 1 else rel[:, 0], r)
    assert (got == _bf_count(cls, data, rel, r)).all()
    linked = nearest_member_linked(cls, data if m > 1 else data[:, 0], rel if m > 1 else rel[:, 0], None)
    d = np.abs(rel[:, None, :] - data[None, :, :]).sum(2)
    same = cls[:, None] == cls[None, :]
    nearest = np.where(same, d, np.inf).min(1)
    assert (linked == (np.diag(d) <= nearest + 1e-12)).all()


def test_confident_suppression_logic():
    # one class of 6 originals; k = 3
    cls = np.zeros(6, dtype=np.int64)
    orig = np.array([0.0, 1.0, 2.0, 10.0, 20.0, 30.0])
    rel = np.array([0.5, 100.0, 1.5, 10.0, 20.0, 30.0])
    r = np.full(6, 1.0)
    sup, whole = confident_suppression(cls, orig, rel, r, 3)
    # ℓ: [2 (0,1), 0, 2 (1,2), 1, 1, 1] -> 0<ℓ<3 suppressed except record 1 (ℓ = 0)
    assert sup.tolist() == [True, False, True, True, True, True] or whole[0]
    # 6 − 5 = 1 < 3 records left -> the whole class goes
    assert whole.tolist() == [True] and sup.all()
    # a big class survives: only risky records go
    cls2 = np.zeros(10, dtype=np.int64)
    orig2 = np.r_[np.zeros(9), 50.0]
    rel2 = np.r_[np.zeros(9), 50.0]
    sup2, whole2 = confident_suppression(cls2, orig2, rel2, np.full(10, 1.0), 3)
    assert sup2.tolist() == [False] * 9 + [True] and not whole2[0]


def test_confidence_radius_and_abs_mean():
    assert confidence_radius("laplace", 2.0, 0.99) == pytest.approx(-np.log(0.01) / 2.0)
    assert noise_abs_mean("laplace", 4.0) == 0.25
    rng = np.random.default_rng(0)
    from dpstudio.engine.algorithms.noise import staircase_noise

    z = staircase_noise(rng, 1.0, 1.0, 60_000)
    assert noise_abs_mean("staircase", 1.0) == pytest.approx(np.mean(np.abs(z)), rel=0.03)
    r = confidence_radius("staircase", 1.0, 0.9)
    assert np.mean(np.abs(z) <= r) == pytest.approx(0.9, abs=0.01)


def test_confidence_step_in_protect():
    df = _people(4, 600)
    res = engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, epsilon=8.0, confidence=0.5, seed=2)
    step = res.info["confidence_step"]
    assert step["c"] == 0.5 and step["records"] == len(res.info["confidence_suppressed_rows"])
    assert _classes(res).min() >= 5
    m = engine.evaluate(res.aligned_original(), res.data, measures=("kanon",), result=res)
    assert m["keps_conf_suppressed_pct"] == pytest.approx(100 * step["records_share"])


# ---------------------------------------------------------------- measures formulas


def test_measures_formulas_on_a_small_release():
    df = _people(6, 400)
    res = engine.protect(df, "k-eps", ROLES, precision=PREC, k=10, epsilon=4.0, seed=9)
    orig = res.aligned_original()
    m = keps_measures(orig, res.data, res, (), {})
    v = orig["height"].to_numpy()
    vp = res.data["height"].to_numpy()
    assert m["keps_rel_error"] == pytest.approx(np.mean(np.abs(vp - v) / np.abs(v)))
    # eq. 8: (1/ε) Σ_ec diam·|ec| / (H(ec)·n), H = harmonic mean of |v| in ec
    cls = res.info["class_of_row"]
    n = len(v)
    tot = 0.0
    for c in np.unique(cls):
        ec = v[cls == c]
        H = len(ec) / np.sum(1 / np.abs(ec))
        tot += (ec.max() - ec.min()) * len(ec) / (H * n)
    assert m["keps_rel_error_expected"] == pytest.approx(tot / 4.0)
    # linking risk, brute force within classes
    link = [np.abs(vp[i] - v[i]) <= np.min(np.abs(vp[i] - v[cls == cls[i]])) for i in range(n)]
    assert m["keps_linking_risk"] == pytest.approx(np.mean(link))
    assert m["keps_min_class_size"] >= 10 and m["keps_gen_loss"] >= 0
    # zeros are skipped and counted
    orig2 = orig.copy()
    orig2.loc[0, "height"] = 0.0
    m2 = keps_measures(orig2, res.data, res, (), {})
    assert m2["keps_rel_error_zeros"] == 1


# ---------------------------------------------------------------- bad input


def test_bad_inputs():
    df = _people(7, 200)
    bad = df.copy()
    bad["height"] = bad["height"].astype(object)
    bad.loc[3, "height"] = "tall"
    with pytest.raises(InputError, match=r"'height'.*numeric.*row\(s\) 4"):
        engine.protect(bad, "k-eps", ROLES, precision=PREC, k=5, seed=1)
    miss = df.copy()
    miss.loc[5, "age"] = np.nan
    with pytest.raises(InputError, match="missing"):
        engine.protect(miss, "k-eps", ROLES, precision=PREC, k=5, seed=1)
    res = engine.protect(miss, "k-eps", ROLES, precision=PREC, k=5, seed=1, drop_missing=True)
    assert res.dropped_rows == [5]
    h = Hierarchy.from_rows([["Male", "*"]])
    with pytest.raises(InputError, match="'Female'.*not in its hierarchy"):
        engine.protect(df, "k-eps", ROLES, precision=PREC, hierarchies={"sex": h}, k=5, seed=1)
    with pytest.raises(ParameterError, match="not in the data"):
        engine.protect(df, "k-eps", ROLES, precision=PREC, hierarchies={"nope": h}, k=5, seed=1)
    with pytest.raises(ParameterError, match="'algorithm'"):
        engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, algorithm="flash", seed=1)
    with pytest.raises(ParameterError, match="'confidence'"):
        engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, confidence=1.5, seed=1)
    with pytest.raises(NotApplicableError):
        engine.protect(df, "k-eps", {"height": "eps-quasi"}, k=5, seed=1)
    # k too large within the suppression limit: say which k works
    top = Hierarchy.from_rows([["Male", "Male"], ["Female", "Female"]])
    few = df.copy()
    few["sex"] = ["Female"] * 4 + ["Male"] * (len(df) - 4)
    with pytest.raises(ParameterError, match=r"largest k that works"):
        engine.protect(
            few,
            "k-eps",
            {"sex": "k-quasi", "height": "eps-quasi"},
            hierarchies={"sex": top},
            k=10,
            suppression=0.01,
            seed=1,
        )


# ---------------------------------------------------------------- determinism, sweeps


def test_same_seed_same_release():
    df = _people(8, 300)
    a = engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, confidence=0.9, seed=42)
    b = engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, confidence=0.9, seed=42)
    c = engine.protect(df, "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, confidence=0.9, seed=43)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert not a.data["height"].equals(c.data["height"])


def test_sweep_reports_measures_per_point_and_reuses_generalisation(monkeypatch):
    import dpstudio.engine.protection.k_eps as keps

    calls = []
    orig = keps.ola

    def counting(*a, **kw):
        calls.append(a[2])
        return orig(*a, **kw)

    monkeypatch.setattr(keps, "ola", counting)
    from dpstudio.engine.sweeps import sweep

    pts = list(
        sweep(
            _people(9, 300),
            "k-eps",
            ROLES,
            precision=PREC,
            ks=(3, 6),
            epsilons=(1.0, 8.0),
            repeats=2,
            seed=1,
            measures=("kanon",),
        )
    )
    assert len(pts) == 6  # baseline + 2 ε per k
    assert calls == [3, 6]
    assert all("keps_linking_risk" in p.values for p in pts)
    base = [p for p in pts if p.epsilon is None]
    assert all(p.mean("keps_rel_error") == 0 for p in base)


# ---------------------------------------------------------------- real data


def test_adult_with_arx_hierarchies_and_synthetic_height():
    data = pd.read_csv(shared_path("adult", "adult.csv"), sep=";")
    data = add_height(data, seed=1)
    kq = ["age", "sex", "race", "marital-status"]
    hs = {c: str(shared_path("adult", "hierarchies", f"adult_hierarchy_{c}.csv")) for c in kq}
    roles = {**{c: "k-quasi" for c in kq}, "height": "eps-quasi"}
    res = engine.protect(
        data, "k-eps", roles, hierarchies=hs, precision={"height": 0.1}, k=10, epsilon=8.0, seed=1
    )
    m = engine.evaluate(res.aligned_original(), res.data, measures=("kanon",), result=res)
    assert m["keps_min_class_size"] >= 10
    assert m["keps_rel_error"] < 0.05  # paper 003: below 5 % for ε ≥ 8
    assert m["keps_ola_suppressed_pct"] <= 5.0


def test_default_generic_measures_work_on_a_release():
    # the generalised k-quasis are strings: SSE / record linkage compare the ε-quasis
    res = engine.protect(_people(10, 300), "k-eps", ROLES, precision=PREC, k=5, epsilon=1.0, seed=1)
    assert res.protected_attributes == ["height"]
    m = engine.evaluate(res.aligned_original(), res.data, result=res)
    assert m["sse_raw"] > 0 and 0 <= m["rl"] <= 100 and "keps_gen_loss" in m


def test_staircase_noise_option():
    df = _two_class_frame(3000)
    roles = {"g": "k-quasi", "h": "eps-quasi"}
    flat = Hierarchy.from_rows([["a", "*"], ["b", "*"], ["c", "*"]])
    res = engine.protect(
        df,
        "k-eps",
        roles,
        hierarchies={"g": flat},
        k=5,
        epsilon=1.0,
        suppression=0.0,
        noise="staircase",
        confidence=0.9,
        seed=4,
        precision={"h": 0.01},
    )
    orig = res.aligned_original()
    m = orig["g"].to_numpy() == "b"
    noise = res.data["h"].to_numpy()[m] - orig["h"].to_numpy()[m]
    # staircase noise for sensitivity 30: E|Z| = 30 · E|Z_unit|
    assert np.mean(np.abs(noise)) == pytest.approx(30 * noise_abs_mean("staircase", 1.0), rel=0.08)
    meas = engine.evaluate(orig, res.data, measures=("kanon",), result=res)
    assert meas["keps_rel_error_expected"] > 0 and meas["keps_min_class_size"] >= 5


def test_staircase_refused_with_several_eps_quasis():
    """Staircase noise is calibrated for one number; the record-level L1 mechanism over several
    ε-quasis needs Laplace (audit)."""
    import numpy as np
    import pandas as pd

    from dpstudio import engine

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"q": rng.integers(0, 5, 200), "a": rng.normal(size=200), "b": rng.normal(size=200)})
    roles = {"q": "k-quasi", "a": "eps-quasi", "b": "eps-quasi"}
    with pytest.raises(engine.ParameterError, match="staircase"):
        engine.protect(df, "k-eps", roles, k=5, epsilon=1.0, noise="staircase", seed=1)
    one = engine.protect(
        df,
        "k-eps",
        {"q": "k-quasi", "a": "eps-quasi"},
        k=5,
        epsilon=1.0,
        noise="staircase",
        seed=1,
        precision={"a": 0.001},
    )
    assert len(one.data) > 0


def test_guarantee_without_eps_quasi_promises_no_noise():
    import numpy as np
    import pandas as pd

    from dpstudio import engine

    rng = np.random.default_rng(1)
    df = pd.DataFrame({"q": rng.integers(0, 5, 200), "o": rng.normal(size=200)})
    g = engine.protect(df, "k-eps", {"q": "k-quasi"}, k=5, epsilon=1.0, seed=1).guarantee
    assert "no ε-quasi-identifier" in g and "within-class noise" not in g
    assert "Not covered" in g and "(o)" in g and "(q" not in g.split("Not covered")[1]
