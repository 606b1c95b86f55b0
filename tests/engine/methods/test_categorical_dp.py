"""categorical-dp: mixed insensitive microaggregation, exponential-mechanism centroids,
calibrations, bad input, determinism, semantic SSE/RL."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpstudio import engine
from dpstudio.engine import api
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.taxonomy import Taxonomy
from dpstudio.engine.protection import categorical_dp as C
from tests.engine._order import protect_in_order

PARENTS = {"a": "X", "b": "X", "c": "Y", "d": "Y", "e": "Y", "f": "*", "X": "*", "Y": "*"}
TAX = Taxonomy.from_parent_map(PARENTS, name="v")
LEAVES = TAX.leaves


def mixed_frame(rng, n):
    return pd.DataFrame(
        {
            "v": rng.choice(LEAVES, n),
            "x": rng.integers(0, 100, n).astype(float),
            "w": rng.choice(LEAVES, n),
            "o": rng.normal(size=n),
        }
    )


ROLES = {"v": "eps-quasi", "x": "eps-quasi", "w": "eps-quasi"}
HIER = {"v": TAX, "w": TAX}
DOM = {"x": (0, 100)}


def labels_for(df, k):
    prep = api.prepare(df, "categorical-dp", ROLES, DOM, HIER, k=k)
    from dpstudio.engine.types import Job

    job = Job(
        data=prep.data,
        roles=prep.roles,
        domains=prep.domains,
        params=prep.params,
        rng=np.random.default_rng(0),
        hierarchies=prep.hierarchies,
    )
    schema = C.MixedSchema(job, job.columns(C.Role.EPS_QUASI))
    db, dt = schema.corner_sq_distances()
    return C.multi_reference_mixed(db, dt, schema.tie, k)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(12, 60))
def test_insensitive_definition_3(seed, k, n):
    """X, X′ differ in one record: matched clusters differ in at most one record."""
    if n < 2 * k:
        return
    rng = np.random.default_rng(seed)
    X = mixed_frame(rng, n)
    X2 = X.copy()
    r = int(rng.integers(n))
    X2.iloc[r] = mixed_frame(rng, 1).iloc[0].to_numpy()
    l1, l2 = labels_for(X, k), labels_for(X2, k)
    assert l1.max() == l2.max() == n // k - 1
    ids1 = np.arange(n)
    ids2 = np.arange(n)
    ids2[r] = n  # the replaced record is a different individual
    for c in range(n // k):
        a, b = set(ids1[l1 == c]), set(ids2[l2 == c])
        assert len(a - b) <= 1 and len(b - a) <= 1


def test_cluster_sizes_and_k_anonymity_noise_free():
    rng = np.random.default_rng(1)
    df = mixed_frame(rng, 203)
    prep = api.prepare(df, "categorical-dp", ROLES, DOM, HIER, k=5)
    res = api.run_prepared(prep, rng=np.random.default_rng(0), epsilon=None)
    sizes = res.data.groupby(["v", "x", "w"]).size()
    assert sizes.min() >= 5
    assert res.info["cluster_size_min"] == 5 and res.info["cluster_size_max"] <= 9
    assert res.info["clusters"] == 203 // 5
    assert not res.is_dp
    assert set(res.data["v"]) <= set(TAX.concepts)


def test_noise_free_centroid_is_marginality_argmin_over_tau_s():
    codes = np.array([TAX.code(x) for x in ["a", "a", "b", "c"]])
    labels = np.zeros(4, dtype=np.int64)
    got = C.categorical_centroids(codes, labels, 1, TAX, None, None)[0]
    counts = np.bincount(codes, minlength=TAX.n_concepts)
    m = TAX.marginality(counts)
    cand = [TAX.code(x) for x in ["a", "b", "c", "X", "Y", "*"]]  # τ(S)
    assert got == min(cand, key=lambda c: (m[c], TAX.concepts[c]))


def test_exponential_mechanism_frequencies_chi_square():
    """Centroid frequencies match Pr(a) ∝ exp(ε·(−m(S, a)) / (2Δq)) over ALL concepts."""
    S = ["a", "a", "c", "f"]
    reps = 20000
    codes = np.tile([TAX.code(x) for x in S], reps)
    labels = np.repeat(np.arange(reps), len(S))
    eps = 1.5
    got = C.categorical_centroids(codes, labels, reps, TAX, np.random.default_rng(7), eps)
    obs = np.bincount(got, minlength=TAX.n_concepts)
    m = TAX.marginality(np.bincount([TAX.code(x) for x in S], minlength=TAX.n_concepts))
    w = np.exp(eps * (-m) / (2 * TAX.sensitivity))
    exp = reps * w / w.sum()
    assert np.all(obs > 0)  # every concept is a candidate, also those absent from S
    chi2, pval = stats.chisquare(obs, exp)
    assert pval > 1e-3


def run(df, seed=3, **kw):
    params = dict(k=5, epsilon=1.0)
    params.update(kw)
    return protect_in_order(df, "categorical-dp", ROLES, DOM, seed=seed, hierarchies=HIER, **params)


def test_calibrations_and_labels():
    df = mixed_frame(np.random.default_rng(2), 100)
    r = run(df.drop(columns="o"))
    n_c = 20
    assert r.is_dp
    # with 'o' released unchanged beside the clusters the records are not ε-DP (issue 8 §5)
    assert not run(df).is_dp
    assert r.info["attributes"]["v"]["epsilon_per_cluster"] == pytest.approx(1.0 / 3 / n_c)
    assert r.info["attributes"]["x"]["sensitivity"] == pytest.approx(n_c * 100 / 5)
    assert "ε-DP" in r.guarantee
    p = run(df, calibration="as-published")
    assert not p.is_dp
    assert "does not satisfy ε-DP (see paper 002 §3)" in p.guarantee
    assert any("does not satisfy ε-DP (see paper 002 §3)" in w for w in p.warnings)
    assert p.info["attributes"]["v"]["epsilon_per_cluster"] == pytest.approx(1.0 / 3)
    assert p.info["attributes"]["x"]["sensitivity"] == pytest.approx(100 / 5)
    q = run(df, budget="per-attribute")
    assert q.info["attributes"]["w"]["epsilon_per_cluster"] == pytest.approx(1.0 / n_c)
    assert "(m·ε)-DP" in q.guarantee
    one = run(df, k=1)
    assert one.is_dp and one.info["attributes"]["v"]["epsilon_per_cluster"] == pytest.approx(1 / 3)


def test_numeric_output_clamped_and_other_columns_kept():
    df = mixed_frame(np.random.default_rng(4), 80)
    r = run(df, epsilon=0.01, calibration="as-published")
    assert r.data["x"].between(0, 100).all()
    assert np.array_equal(r.data["o"].to_numpy(), df["o"].to_numpy())


def test_deterministic_under_seed():
    df = mixed_frame(np.random.default_rng(5), 120)
    a, b, c = run(df, seed=11), run(df, seed=11), run(df, seed=12)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert not a.data.equals(c.data)


def test_bad_inputs_named():
    df = mixed_frame(np.random.default_rng(6), 40)
    bad = df.copy()
    bad.loc[7, "v"] = "zebra"
    with pytest.raises(InputError, match=r"'v'.*'zebra'.*8"):
        run(bad)
    with pytest.raises(InputError, match=r"'w'.*no taxonomy.*--hierarchy w="):
        api.protect(df, "categorical-dp", ROLES, DOM, seed=1, hierarchies={"v": TAX}, k=5)
    with pytest.raises(ParameterError, match=r"'x'.*domain"):
        api.protect(df, "categorical-dp", ROLES, {}, seed=1, hierarchies=HIER, k=5)
    with pytest.raises(ParameterError, match="'k'"):
        run(df, k=30)


def test_clustering_cached_per_k():
    df = mixed_frame(np.random.default_rng(8), 60)
    prep = api.prepare(df, "categorical-dp", ROLES, DOM, HIER, k=4)
    cache: dict = {}
    api.run_prepared(prep, rng=np.random.default_rng(0), cache=cache)
    keys = [k for k in cache if isinstance(k, tuple) and k[:2] == ("categorical-dp", "clusters")]
    assert len(keys) == 1 and keys[0][2] == 4
    api.run_prepared(prep, rng=np.random.default_rng(1), epsilon=0.5, cache=cache)
    assert len([k for k in cache if isinstance(k, tuple) and k[:2] == ("categorical-dp", "clusters")]) == 1


def test_semantic_metrics_through_evaluate():
    from dpstudio.engine.measures.semantic import semantic_sse

    df = mixed_frame(np.random.default_rng(9), 90)
    r = run(df)
    m = api.evaluate(r.aligned_original(), r.data, result=r, measures=("sse", "rl"))
    manual = semantic_sse(df, r.data, ["v", "x", "w"], HIER)
    assert m["sse_raw"] == pytest.approx(manual)
    v = (np.array([TAX.distance(a, b) for a, b in zip(df["v"], r.data["v"])]) ** 2).sum()
    w = (np.array([TAX.distance(a, b) for a, b in zip(df["w"], r.data["w"])]) ** 2).sum()
    assert manual == pytest.approx(v + w + ((df["x"] - r.data["x"]) ** 2).sum())
    assert 0 <= m["rl"] <= 100


def test_semantic_rl_against_bruteforce():
    from dpstudio.engine.measures.semantic import semantic_rl

    rng = np.random.default_rng(10)
    df = mixed_frame(rng, 60)[["v", "x"]]
    prot = df.copy()
    prot["v"] = rng.choice(TAX.concepts, 60)
    prot["x"] = df["x"] + rng.integers(-3, 4, 60)
    got = semantic_rl(df, prot, ["v", "x"], {"v": TAX})
    sd = df["x"].std(ddof=1)
    tot = 0.0
    for j in range(60):
        d = np.array(
            [
                TAX.distance(prot["v"][j], df["v"][i]) ** 2 + ((prot["x"][j] - df["x"][i]) / sd) ** 2
                for i in range(60)
            ]
        )
        G = np.flatnonzero(d <= d.min() * (1 + 1e-12) ** 2)
        tot += (1 / len(G)) if j in G else 0
    assert got == pytest.approx(100 * tot / 60)


def test_adult_end_to_end_small():
    from tests.conftest import shared_path

    path = shared_path("adult", "adult.csv")
    H = str(shared_path("adult", "hierarchies")) + "/adult_hierarchy_%s.csv"
    df = pd.read_csv(path, sep=";").iloc[:3000]
    r = protect_in_order(
        df,
        "categorical-dp",
        {"occupation": "eps-quasi", "native-country": "eps-quasi"},
        seed=1,
        hierarchies={"occupation": H % "occupation", "native-country": H % "native-country"},
        k=10,
        epsilon=1.0,
        calibration="as-published",
    )
    assert r.info["clusters"] == 300
    assert r.info["taxonomies"]["occupation"]["a_b"] == "Exec-managerial"


def test_sweep_over_k_and_epsilon_with_baseline():
    df = mixed_frame(np.random.default_rng(12), 120)
    pts = list(
        engine.sweep(
            df,
            "categorical-dp",
            ROLES,
            DOM,
            ks=(3, 6),
            epsilons=(0.5, 5.0),
            seed=4,
            hierarchies=HIER,
            measures=("sse", "rl"),
            calibration="as-published",
        )
    )
    assert [(p.k, p.epsilon) for p in pts] == [(3, None), (3, 0.5), (3, 5.0), (6, None), (6, 0.5), (6, 5.0)]
    base = {p.k: p.mean("sse_raw") for p in pts if p.epsilon is None}
    noisy = {p.k: p.mean("sse_raw") for p in pts if p.epsilon == 0.5}
    assert all(noisy[k] > base[k] for k in (3, 6))  # noise costs utility over the baseline


# ----------------------------------------------------------- issue 11, defect 1


def _ages_frame(n=240, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "sex": rng.choice(["m", "f"], n)})


def _generated(df):
    from dpstudio.engine.hierarchies.build import flat_hierarchy, interval_hierarchy

    return {"age": interval_hierarchy(df["age"]), "sex": flat_hierarchy(df["sex"])}


def test_numeric_eps_quasi_with_generated_hierarchy_and_domain_stays_numeric():
    """A numeric ε-quasi with a declared domain is released as numbers even when a generated
    interval hierarchy is given (issue 11: it was a mix of values and '[76, 85.5)' labels
    that evaluation refused, and 70 of 72 sweep points were left out)."""
    df = _ages_frame()
    hier = _generated(df)
    roles = {"age": "eps-quasi", "sex": "eps-quasi"}
    res = engine.protect(
        df, "categorical-dp", roles, {"age": (0, 100)}, hierarchies=hier, k=5, epsilon=1.0, seed=3
    )
    age = res.data["age"]
    assert pd.api.types.is_numeric_dtype(age)
    assert age.between(0, 100).all()
    assert "age" not in res.info["taxonomies"] and "sex" in res.info["taxonomies"]
    assert any("hierarchy of numeric ε-quasi attribute(s) 'age' was not used" in w for w in res.private_notes)
    m = engine.evaluate(res.aligned_original(), res.data, result=res, hierarchies=hier)
    assert np.isfinite(m["sse_normalized"]) and 0 <= m["rl"] <= 100
    pts = list(
        engine.sweep(
            df,
            "categorical-dp",
            roles,
            {"age": (0, 100)},
            hierarchies=hier,
            ks=(2, 5, 10),
            epsilons=(0.5, 2.0),
            seed=1,
        )
    )
    assert pts and not [p.skipped for p in pts if p.skipped]


def test_numeric_column_with_taxonomy_and_no_domain_is_released_as_labels_only():
    """Without a domain the hierarchy makes the column coded categories: every released value
    is a concept label (text), and the measurement policy measures it with δ."""
    df = _ages_frame()
    hier = _generated(df)
    roles = {"age": "eps-quasi", "sex": "eps-quasi"}
    res = engine.protect(df, "categorical-dp", roles, hierarchies=hier, k=5, epsilon=1.0, seed=3)
    assert res.data["age"].map(lambda v: isinstance(v, str)).all()
    m = engine.evaluate(res.aligned_original(), res.data, result=res, hierarchies=hier)
    assert np.isfinite(m["sse_normalized"]) and 0 <= m["rl"] <= 100
    # the policy: |x − x′| while numeric, δ once the release holds labels
    from dpstudio.engine.measures import measurement_plan

    plan = measurement_plan(df, method="categorical-dp", roles=roles, hierarchies=hier)
    assert "age" not in plan.distances and "age" in plan.if_labels
    assert "age" in plan.distances_for(res.data, ["age", "sex"])
    pts = list(
        engine.sweep(df, "categorical-dp", roles, hierarchies=hier, ks=(2, 5), epsilons=(1.0,), seed=1)
    )
    assert pts and not [p.skipped for p in pts if p.skipped]
