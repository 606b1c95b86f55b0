"""Audit of the privacy calibration and guarantee statements (docs/methods.md §3–4).

The central check: on random neighbouring data sets (one record replaced, the same
clustering inputs) the released pre-noise statistic moves by at most the sensitivity the
code feeds to the noise — per released number for staircase noise, in L1 over all released
numbers of one attribute for Laplace.  Plus: staircase calibration, guarantee/is_dp
consistency, no seed in public metadata, independent sweep streams.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine import api
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.hierarchies.taxonomy import Taxonomy
from dpstudio.engine.protection import categorical_dp as C
from dpstudio.engine.random import point_rng
from tests.engine._order import in_input_order, protect_in_order, run_prepared_in_order  # noqa: F401

LB, UB = 0.0, 1000.0
DELTA = UB - LB


def _frame(rng, n, m):
    df = pd.DataFrame(rng.uniform(LB, UB, size=(n, m)), columns=[f"a{i}" for i in range(m)])
    return df


def _neighbour(rng, df):
    """Replace one random record by a random point, a corner or an extreme value."""
    d2 = df.copy()
    i = int(rng.integers(len(df)))
    kind = rng.integers(3)
    m = df.shape[1]
    if kind == 0:
        new = rng.uniform(LB, UB, m)
    elif kind == 1:
        new = np.where(rng.random(m) < 0.5, LB, UB)
    else:
        new = np.full(m, LB if rng.random() < 0.5 else UB)
    d2.iloc[i, :m] = new
    return d2


def _baseline(df, method, k, **kw):
    cols = [c for c in df.columns if c.startswith("a")]
    roles = {c: "eps-quasi" for c in cols}
    doms = {c: (LB, UB) for c in cols}
    prep = api.prepare(df, method, roles, doms, k=k, epsilon=1.0, **kw)
    cache: dict = {}
    res = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache)
    return res, cache


# ---------------------------------------------------------------- empirical sensitivity


def _ir_centroids(res, col, k):
    """Sorted centroid vector of individual ranking, read off the released values."""
    v = np.sort(res.data[col].to_numpy())
    n = v.size
    nc = max(n // k, 1)
    return v[np.arange(nc) * k]


@pytest.mark.parametrize("k", [2, 5])
def test_ir_dp_l1_change_of_centroids_at_most_delta_over_k(k):
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(60):
        df = _frame(rng, int(rng.integers(2 * k, 60)), 2)
        d2 = _neighbour(rng, df)
        r1, _ = _baseline(df, "ir-dp", k)
        r2, _ = _baseline(d2, "ir-dp", k)
        for c in ("a0", "a1"):
            ch = np.abs(_ir_centroids(r1, c, k) - _ir_centroids(r2, c, k))
            worst = max(worst, ch.sum() / (DELTA / k))
            assert ch.max() <= DELTA / k + 1e-9  # per centroid (staircase)
    assert worst <= 1.0 + 1e-9  # L1 over all centroids (Laplace, Lemma 1)


def _insensitive_clusters(cache):
    for key, val in cache.items():
        if isinstance(key, tuple) and key and key[0] == "num.insensitive":
            return val
    raise AssertionError("clustering not cached")


@pytest.mark.parametrize("variant", ["single", "multi"])
@pytest.mark.parametrize("k", [2, 4])
def test_insensitive_dp_each_centroid_moves_at_most_delta_over_k(variant, k):
    rng = np.random.default_rng(2)
    for _ in range(60):
        n = int(rng.integers(2 * k, 50))
        df = _frame(rng, n, 2)
        d2 = _neighbour(rng, df)
        r1, c1 = _baseline(df, "insensitive-dp", k, variant=variant)
        r2, c2 = _baseline(d2, "insensitive-dp", k, variant=variant)
        (l1, cent1), (_, cent2) = _insensitive_clusters(c1), _insensitive_clusters(c2)
        nc = cent1.shape[0]
        assert nc == n // k == cent2.shape[0]
        # the released records carry their cluster's centroid
        assert np.allclose(r1.data[["a0", "a1"]].to_numpy(), cent1[l1])
        ch = np.abs(cent1 - cent2)  # clusters matched by index
        assert ch.max() <= DELTA / k + 1e-9  # per draw: staircase sensitivity
        assert (ch.sum(axis=0) <= nc * DELTA / k + 1e-9).all()  # rigorous Laplace: n_c·Δ/k


PARENTS = {"a": "X", "b": "X", "c": "Y", "d": "Y", "e": "Y", "f": "*", "X": "*", "Y": "*"}
TAX = Taxonomy.from_parent_map(PARENTS, name="v")


def test_categorical_dp_quality_and_numeric_sensitivity():
    """Neighbours: |Δq(S_c, a)| ≤ Δq for every cluster and concept, numeric centroid ≤ Δ/k."""
    rng = np.random.default_rng(3)
    k = 3
    for _ in range(40):
        n = int(rng.integers(2 * k, 40))
        df = pd.DataFrame({"v": rng.choice(TAX.leaves, n), "x": rng.uniform(0, 100, n)})
        d2 = df.copy()
        i = int(rng.integers(n))
        d2.loc[i, "v"] = rng.choice(TAX.leaves)
        d2.loc[i, "x"] = float(rng.choice([0.0, 100.0, rng.uniform(0, 100)]))
        out = []
        for d in (df, d2):
            prep = api.prepare(
                d, "categorical-dp", {"v": "eps-quasi", "x": "eps-quasi"}, {"x": (0, 100)}, {"v": TAX}, k=k
            )
            from dpstudio.engine.types import Job

            job = Job(
                data=prep.data,
                roles=prep.roles,
                domains=prep.domains,
                params=prep.params,
                rng=np.random.default_rng(0),
                hierarchies=prep.hierarchies,
            )
            schema = C.MixedSchema(job, ["v", "x"])
            labels = C._clustering(job, schema, k)
            nc = int(labels.max()) + 1
            codes = schema.values[:, 0].astype(np.int64)
            counts = np.zeros((nc, TAX.n_concepts))
            np.add.at(counts, (labels, codes), 1.0)
            sizes = np.bincount(labels, minlength=nc)
            means = np.bincount(labels, weights=schema.values[:, 1], minlength=nc) / sizes
            out.append((-TAX.marginality(counts), means))
        (q1, m1), (q2, m2) = out
        assert np.abs(q1 - q2).max() <= TAX.sensitivity + 1e-9
        assert np.abs(m1 - m2).max() <= 100.0 / k + 1e-9


# ---------------------------------------------------------------- staircase calibration


def _per_cluster_residuals(method, k, eps, n=400, reps=30, **kw):
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a0": rng.uniform(450, 550, n)})
    roles, doms = {"a0": "eps-quasi"}, {"a0": (LB, UB)}
    prep = api.prepare(df, method, roles, doms, k=k, epsilon=eps, noise="staircase", **kw)
    cache: dict = {}
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache)
    res_all = []
    for r in range(reps):
        res = run_prepared_in_order(prep, rng=np.random.default_rng(100 + r), cache=cache)
        resid = res.data["a0"].to_numpy() - base.data["a0"].to_numpy()
        res_all.append(np.unique(np.round(resid, 9)))
        last = res
    return np.concatenate(res_all), last


@pytest.mark.parametrize(
    "method, kw",
    [("ir-dp", {}), ("insensitive-dp", {"variant": "single"}), ("insensitive-dp", {"variant": "multi"})],
)
def test_staircase_is_calibrated_per_centroid_with_split_budget(method, kw):
    """Staircase noise is ε-DP for one number only: with n_c centroids that can all move
    (each by ≤ Δ/k), every draw must get sensitivity Δ/k and ε_i/n_c.  Before the audit the
    code used one draw of (sensitivity Δ/k, ε_i) [ir-dp] or (n_c·Δ/k, ε_i) [insensitive-dp],
    whose privacy loss over the vector can reach n_c·ε_i."""
    k, n = 20, 400
    nc = n // k
    eps = 2.0 * nc  # ε_i/n_c = 2 per draw: the noise stays well inside the domain
    resid, res = _per_cluster_residuals(method, k, eps, n=n, **kw)
    info = res.info["noise_per_attribute"]["a0"]
    assert info["epsilon_per_draw"] * nc <= eps * (1 + 1e-12)
    assert info["sensitivity"] >= DELTA / k - 1e-9
    want = N.staircase_variance(DELTA / k, eps / nc)
    assert resid.var() == pytest.approx(want, rel=0.25)
    assert "ε_i/n_c" in res.guarantee


def test_categorical_dp_staircase_numeric_split():
    rng = np.random.default_rng(6)
    n, k = 60, 3
    df = pd.DataFrame({"v": rng.choice(TAX.leaves, n), "x": rng.uniform(40, 60, n)})
    res = protect_in_order(
        df,
        "categorical-dp",
        {"v": "eps-quasi", "x": "eps-quasi"},
        {"x": (0, 100)},
        hierarchies={"v": TAX},
        k=k,
        epsilon=1.0,
        noise="staircase",
        seed=1,
    )
    a = res.info["attributes"]["x"]
    nc = res.info["clusters"]
    assert a["epsilon_per_draw"] * nc <= a["epsilon_attribute"] * (1 + 1e-12)
    assert a["sensitivity"] >= 100.0 / k - 1e-9


def test_laplace_calibration_unchanged_by_staircase_fix():
    """Laplace keeps one draw of L1 sensitivity n_c·Δ/k and ε_i (insensitive-dp rigorous)."""
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"a0": rng.uniform(0, 1000, 100)})
    res = protect_in_order(
        df, "insensitive-dp", {"a0": "eps-quasi"}, {"a0": (0, 1000)}, k=20, epsilon=1.0, seed=1
    )
    info = res.info["noise_per_attribute"]["a0"]
    assert info["sensitivity"] == pytest.approx(5 * 1000 / 20)
    assert info["epsilon_per_draw"] == 1.0


# ---------------------------------------------------------------- guarantees / is_dp


def _protect(method, **kw):
    rng = np.random.default_rng(8)
    df = _frame(rng, 60, 3)
    roles = {c: "eps-quasi" for c in df.columns}
    doms = {c: (LB, UB) for c in df.columns}
    return protect_in_order(df, method, roles, doms, seed=3, **kw)


@pytest.mark.parametrize(
    "method, kw",
    [
        ("laplace", {}),
        ("ir-dp", {"k": 3}),
        ("insensitive-dp", {"k": 3}),
        ("insensitive-dp", {"k": 3, "variant": "single"}),
        ("idp-ls", {"k": 3}),
        ("idp-cbls", {"k": 3}),
        ("insensitive-dp", {"k": 3, "calibration": "as-published"}),
        ("ir-dp", {"k": 3, "noise": "staircase"}),
        ("laplace", {"noise": "staircase"}),
    ],
)
@pytest.mark.parametrize("budget", ["equal", "per-attribute", "weights"])
def test_guarantee_sentence_matches_is_dp(method, kw, budget):
    extra = {"weights": {"a0": 1.0, "a1": 2.0, "a2": 1.0}} if budget == "weights" else {}
    res = _protect(method, epsilon=0.5, budget=budget, **kw, **extra)
    g = res.guarantee
    asp = kw.get("calibration") == "as-published"
    idp = method.startswith("idp")
    joint = method in ("ir-dp", "idp-ls", "idp-cbls")  # 3 attributes ranked separately
    assert res.is_dp == (not asp and not idp and not joint)
    if joint:
        assert g.startswith("Per-attribute only — not") and "for the records" in g.split(":")[0]
    if asp:
        assert "does not satisfy ε-DP" in g
    if idp:
        assert "individual differential privacy" in g and "not ε-DP" in g
    if res.is_dp:
        assert "not" not in g.split("(")[0].lower()
        if budget == "per-attribute":
            assert g.startswith("(3·0.5 = 1.5)-differential privacy")
        else:
            assert g.startswith("0.5-differential privacy")
    if budget == "per-attribute" and not asp:
        assert "3·0.5" in g or "(m·0.5)" in g
    pub = json.dumps(res.public_metadata(), default=str)
    assert "seed" not in pub.lower()
    assert res.public_metadata()["differential_privacy"] == res.is_dp


def test_budget_shares_sum_to_epsilon():
    res = _protect("laplace", epsilon=0.9, budget="weights", weights={"a0": 1.0, "a1": 2.0, "a2": 6.0})
    per = res.info["epsilon_per_attribute"]
    assert sum(per.values()) == pytest.approx(0.9)
    assert per["a2"] == pytest.approx(0.6)
    res = _protect("laplace", epsilon=0.9)
    assert all(v == pytest.approx(0.3) for v in res.info["epsilon_per_attribute"].values())


def test_export_never_contains_seed_or_original(tmp_path):
    from dpstudio.engine.export import export_release

    rng = np.random.default_rng(9)
    df = _frame(rng, 40, 2)
    df["a0"] = np.round(df["a0"], 3) + 0.000123456
    seed = 987654321
    res = protect_in_order(
        df,
        "ir-dp",
        {"a0": "eps-quasi", "a1": "eps-quasi"},
        {"a0": (LB, UB), "a1": (LB, UB)},
        k=4,
        epsilon=1.0,
        seed=seed,
    )
    paths = export_release(res, tmp_path / "out.csv")
    for p in paths.values():
        text = open(p, encoding="utf-8", errors="ignore").read()
        assert str(seed) not in text
        assert "seed" not in text.lower()
        for v in df["a0"].to_numpy()[:10]:
            assert f"{v:.9f}"[:-2] not in text


# ---------------------------------------------------------------- sweep RNG streams


def test_point_rng_streams_distinct_and_reproducible():
    keys = [(k, e, r) for k in range(3) for e in range(3) for r in range(3)]
    draws = {key: point_rng(11, *key).random(4).tobytes() for key in keys}
    assert len(set(draws.values())) == len(keys)
    assert point_rng(11, 1, 2, 0).random(4).tobytes() == draws[(1, 2, 0)]
    assert point_rng(12, 1, 2, 0).random(4).tobytes() != draws[(1, 2, 0)]


def test_categorical_dp_guarantee_k1_and_per_attribute():
    """k = 1 spends ε_i per record (parallel composition), not ε_i/n_c; the text must say so.
    per-attribute names the actual m."""
    rng = np.random.default_rng(10)
    n = 30
    df = pd.DataFrame({"v": rng.choice(TAX.leaves, n), "x": rng.uniform(0, 100, n)})
    kw = dict(hierarchies={"v": TAX}, epsilon=1.0, seed=2)
    r1 = protect_in_order(
        df, "categorical-dp", {"v": "eps-quasi", "x": "eps-quasi"}, {"x": (0, 100)}, k=1, **kw
    )
    assert "ε_i/n_c" not in r1.guarantee and r1.is_dp
    assert r1.info["attributes"]["x"]["epsilon_per_draw"] == pytest.approx(0.5)
    r2 = protect_in_order(
        df,
        "categorical-dp",
        {"v": "eps-quasi", "x": "eps-quasi"},
        {"x": (0, 100)},
        k=3,
        budget="per-attribute",
        **kw,
    )
    assert "(2·1 = 2)-DP" in r2.guarantee and "(m·ε)-DP" in r2.guarantee
