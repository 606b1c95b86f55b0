"""t-close-dp: buckets, quotas, achieved t ≤ e^ε, group sizes, outputs, bad input."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.engine import api
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.protection import t_close_dp as T


def frame(rng, n, distinct=None):
    c = rng.integers(0, distinct, n) if distinct else rng.lognormal(8, 1.5, n).round()
    return pd.DataFrame(
        {"q1": rng.normal(size=n), "q2": rng.integers(0, 50, n), "C": c, "other": np.arange(n)}
    )


ROLES = {"q1": "k-quasi", "q2": "k-quasi", "C": "confidential"}


def group_counts(res, df):
    g = res.tables["quasi"]["group_id"].to_numpy() if res.tables else None
    return g


def test_thesis_example_distance():
    # Fig. 7.5: three groups of 4 over three buckets of 4 -> 1.5-closeness
    counts = np.array([[2, 1, 1], [1, 2, 1], [1, 1, 2]])
    assert T.achieved_t(counts, np.array([4, 4, 4])) == pytest.approx(1.5)
    assert T.achieved_t(np.array([[2, 0], [2, 4]]), np.array([4, 4])) == math.inf


def test_buckets_and_sizes():
    assert [T.n_buckets(e) for e in (0.5, 1, 2)] == [2, 3, 8]
    assert T.group_sizes(10, 3).tolist() == [3, 4, 3]
    c = np.array([5, 1, 1, 1, 2, 3, 3, 4, 9, 9])
    b = T.bucketize_values(c, 3)
    for j in range(2):  # consecutive values, equal values share a bucket
        assert c[b == j].max() < c[b == j + 1].min()
    assert np.bincount(b).min() >= 2


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.3, 0.7, 1.0, 1.5, 2.0]),
    st.integers(1, 6),
    st.integers(200, 900),
)
def test_achieved_t_within_target_and_group_sizes(seed, eps, l, n):
    rng = np.random.default_rng(seed)
    df = frame(rng, n)
    b = T.n_buckets(eps)
    if n // (b * l) < b:
        return
    try:
        r = api.protect(df, "t-close-dp", ROLES, seed=seed, epsilon=eps, l=l)
    except ParameterError as exc:  # unequal buckets (ties) and tiny groups: refused, not violated
        assert "too small for t-closeness" in str(exc)
        return
    g = r.tables["quasi"]["group_id"].to_numpy()
    sizes = np.bincount(g)
    assert sizes.size == b * l
    assert sizes.min() >= n // (b * l)
    # recompute the bucket-level distance independently (records in release order)
    bucket = T.bucketize_values(r.aligned_original()["C"].to_numpy(float), b)
    counts = np.zeros((b * l, b))
    np.add.at(counts, (g, bucket), 1)
    assert np.all(counts > 0)
    pg = counts / counts.sum(1, keepdims=True)
    p = np.bincount(bucket) / n
    t = max((pg / p).max(), (p / pg).max())
    assert t == pytest.approx(r.info["t_achieved"])
    assert t <= math.exp(eps) * (1 + 1e-9)
    assert not r.warnings


def test_k_parameter_and_homogeneity_beats_random():
    rng = np.random.default_rng(3)
    df = frame(rng, 600)
    r = api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=1.0, k=12)
    df = r.aligned_original()  # records in release order (random by default)
    g = r.tables["quasi"]["group_id"].to_numpy()
    assert np.bincount(g).min() >= 12
    z = (df[["q1", "q2"]] - df[["q1", "q2"]].mean()) / df[["q1", "q2"]].std()
    within = z.groupby(g).var().mean().mean()
    rand = z.groupby(np.random.default_rng(0).permutation(g)).var().mean().mean()
    assert within < 0.6 * rand


def test_outputs_anatomy_and_permuted():
    rng = np.random.default_rng(4)
    df = frame(rng, 300)
    a = api.protect(df, "t-close-dp", ROLES, seed=2, epsilon=1.0, l=5)
    df = a.aligned_original()  # records in release order (random by default)
    qt, stt = a.tables["quasi"], a.tables["sensitive"]
    assert "C" not in qt.columns and list(stt.columns) == ["group_id", "C"]
    assert qt[["q1", "q2", "other"]].equals(df[["q1", "q2", "other"]])
    # the sensitive table holds each group's multiset of C, sorted by group then value
    g = qt["group_id"].to_numpy()
    for gid in range(5):
        assert sorted(df["C"][g == gid]) == stt.loc[stt["group_id"] == gid, "C"].tolist()
    assert stt["group_id"].is_monotonic_increasing
    # the single release: C permuted within groups, plus the group id
    assert np.array_equal(a.data["group_id"].to_numpy(), g)
    for gid in range(5):
        assert sorted(a.data["C"][g == gid]) == sorted(df["C"][g == gid])
    p = api.protect(df, "t-close-dp", ROLES, seed=2, epsilon=1.0, l=5, output="permuted")
    assert "group_id" not in p.data.columns and not p.tables
    assert sorted(p.data["C"]) == sorted(df["C"])
    assert p.data["C"].mean() == pytest.approx(df["C"].mean())
    assert not p.is_dp and "uninformed" in p.guarantee and "approximate" in p.guarantee


def test_bucket_values_release():
    df = frame(np.random.default_rng(5), 200)
    r = api.protect(df, "t-close-dp", ROLES, seed=2, epsilon=1.0, sensitive_values="bucket")
    assert r.data["C"].astype(str).str.startswith("bucket ").all()
    assert r.data["C"].nunique() == 3
    # no individual's value (e.g. the minimum or maximum) appears in the bucket labels
    text = " ".join(r.data["C"].astype(str).unique())
    for v in (df["C"].min(), df["C"].max()):
        assert f"{v:g}" not in text


def test_guarantee_states_achieved_t_when_target_missed(monkeypatch):
    """When rounding of small groups pushes the achieved t above e^ε, the guarantee itself
    (not only a warning) says so; otherwise it carries no caveat."""
    from dpstudio.engine.protection import t_close_dp as T

    df = frame(np.random.default_rng(5), 200)
    ok = api.protect(df, "t-close-dp", ROLES, seed=2, epsilon=1.0)
    assert ok.info["t_achieved"] <= math.e * (1 + 1e-9) and "CAVEAT" not in ok.guarantee
    monkeypatch.setattr(T, "achieved_t", lambda counts, supply: 5.0)  # force a miss
    bad = api.protect(df, "t-close-dp", ROLES, seed=2, epsilon=1.0)
    assert "CAVEAT" in bad.guarantee and "5-close" in bad.guarantee
    assert any("exceeds the target" in w for w in bad.warnings)


def test_compound_confidential():
    rng = np.random.default_rng(6)
    df = frame(rng, 400)
    df["C2"] = df["C"] * 0.5 + rng.normal(size=400)
    roles = dict(ROLES, C2="confidential")
    r = api.protect(df, "t-close-dp", roles, seed=1, epsilon=1.5, l=4)
    df = r.aligned_original()  # records in release order (random by default)
    assert r.info["buckets"] == 5 and r.info["t_achieved"] <= math.exp(1.5) + 1e-9
    g = r.tables["quasi"]["group_id"].to_numpy()
    for gid in range(3):  # compound values stay together
        orig = sorted(zip(df["C"][g == gid], df["C2"][g == gid]))
        assert orig == sorted(zip(r.data["C"][g == gid], r.data["C2"][g == gid]))


def test_deterministic_under_seed():
    df = frame(np.random.default_rng(7), 250)
    a = api.protect(df, "t-close-dp", ROLES, seed=9, epsilon=1.0, l=3, output="permuted")
    b = api.protect(df, "t-close-dp", ROLES, seed=9, epsilon=1.0, l=3, output="permuted")
    c = api.protect(df, "t-close-dp", ROLES, seed=10, epsilon=1.0, l=3, output="permuted")
    pd.testing.assert_frame_equal(a.data, b.data)
    assert not a.data.equals(c.data)


def test_bad_inputs():
    rng = np.random.default_rng(8)
    few = frame(rng, 100, distinct=2)
    with pytest.raises(InputError, match=r"'C'.*2 distinct.*b = 3"):
        api.protect(few, "t-close-dp", ROLES, seed=1, epsilon=1.0)
    df = frame(rng, 100)
    with pytest.raises(ParameterError, match=r"'k'.*b = ⌊e\^ε⌋ \+ 1 = 8"):
        api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=2.0, k=5)
    with pytest.raises(ParameterError, match="k < b"):
        api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=2.0, l=5)
    txt = df.astype({"C": object})
    txt.loc[3, "C"] = "high"
    with pytest.raises(InputError, match=r"'C'.*'high'"):
        api.protect(txt, "t-close-dp", ROLES, seed=1, epsilon=1.0)
    with pytest.raises(InputError, match="too many equal values"):
        api.protect(
            pd.DataFrame({"q1": range(30), "C": [0] * 28 + [1, 2]}),
            "t-close-dp",
            {"q1": "k-quasi", "C": "confidential"},
            seed=1,
            epsilon=1.0,
        )


def test_k_equal_b_with_equal_buckets_and_refusal_when_unequal():
    rng = np.random.default_rng(11)
    df = frame(rng, 300)
    df["C"] = rng.permutation(300).astype(float)  # distinct: 3 buckets of exactly 100
    r = api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=1.0, k=3)
    assert r.info["groups"] == 99 and r.info["k"] >= 3 and r.info["t_achieved"] <= math.e + 1e-9
    df.loc[df["C"] < 6, "C"] = 0.0  # ties move a cut point: one bucket is short
    df.loc[df["C"].between(95, 105), "C"] = 95.0
    with pytest.raises(ParameterError, match="too small for t-closeness.*Increase k"):
        api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=1.0, k=3)


def test_sweep_and_duplicate_quasi_vectors():
    rng = np.random.default_rng(13)
    df = frame(rng, 400)
    df["q1"] = 0.0  # many identical k-quasi vectors: ties by record index
    df["q2"] = rng.integers(0, 2, 400)
    pts = list(engine.sweep(df, "t-close-dp", ROLES, ks=(10, 20), epsilons=(1.0,), seed=2, measures=("sse",)))
    assert [(p.k, p.epsilon) for p in pts] == [(10, None), (10, 1.0), (20, None), (20, 1.0)]
    r = api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=1.0, k=10)
    assert r.info["t_achieved"] <= math.e + 1e-9 and r.info["k"] >= 10


def test_refusal_suggests_values_of_k_that_work():
    """Census, ε = 0.1 (b = 2): small odd k cannot meet the quotas; the message lists values
    of k, and each of them does run."""
    import re

    import pandas as pd

    from tests.conftest import ROOT

    df = pd.read_csv(ROOT / "resources" / "census.csv")
    roles = {c: "k-quasi" for c in df.columns[:6]}
    roles["INTVAL"] = "confidential"
    with pytest.raises(ParameterError, match="values of k that work here") as exc:
        api.protect(df, "t-close-dp", roles, epsilon=0.1, k=5, seed=1)
    ks = [int(x) for x in re.search(r"work here: ([\d, ]+)", str(exc.value)).group(1).split(",")]
    assert ks and min(ks) > 5
    for k in ks[:2]:
        r = api.protect(df, "t-close-dp", roles, epsilon=0.1, k=k, seed=1)
        assert r.info["t_achieved"] <= math.exp(0.1) * (1 + 1e-9)


def test_auto_k_is_stated_and_untouched_quasis_are_not_called_protected():
    """Issue 11 defect 6: with k = auto the sentence said "groups of at least k records" (no
    number), the report "k None", and the k-quasis (released exactly) were "protected"."""
    rng = np.random.default_rng(5)
    df = frame(rng, 834)
    r = api.protect(df, "t-close-dp", ROLES, seed=1, epsilon=0.8)  # b = 3, l = 1
    g = r.tables["quasi"]["group_id"].to_numpy()
    k_true = int(np.bincount(g).min())
    assert k_true == 278
    assert r.params["k"] == k_true and r.params["l"] == 1
    assert f"groups of at least k = {k_true} records" in r.guarantee
    assert "at least k records" not in r.guarantee
    assert "Protected attributes" not in r.guarantee
    assert "Not changed: the k-quasi-identifiers q1, q2" in r.guarantee
    assert "Changed: the confidential attribute(s) C" in r.guarantee
    # the quasi table really holds the k-quasis unchanged (what the sentence says)
    q = r.tables["quasi"]
    pd.testing.assert_frame_equal(q[["q1", "q2"]], r.aligned_original()[["q1", "q2"]])
    # the group id made by the method is not "a column released unchanged, not protected"
    assert "group_id" not in r.guarantee
    assert r.public_metadata()["parameters"]["k"] == k_true
    from dpstudio.engine.report import render_release_note

    assert "None" not in render_release_note(r)
