"""Numeric methods through the public API: registry entries, guarantees, calibration (the
empirical noise matches the declared scale), iDP-CBLS local sensitivity, swaps, k-anonymity,
determinism, caching, Census end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from tests.engine._order import in_input_order, protect_in_order, run_prepared_in_order  # noqa: F401
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.api import prepare, run_prepared
from dpstudio.engine.errors import Cancelled, NotApplicableError, ParameterError
from dpstudio.engine.registry import get_method
from dpstudio.engine.roles import Role

NUMERIC = ["mdav", "mdav-swap", "ir-swap", "laplace", "insensitive-dp", "ir-dp", "idp-ls",
           "idp-cbls"]
CENSUS4 = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]


def census_setup(census, role="eps-quasi"):
    roles = {c: role for c in CENSUS4}
    doms = {c: (0.0, 1.5 * float(census[c].max())) for c in CENSUS4}
    return roles, doms


def middle_data(n, m, seed=0, lo=400.0, hi=600.0):
    """Values far from the domain bounds [0, 1000] (noise rarely clamped)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.uniform(lo, hi, size=(n, m)), columns=[f"a{i}" for i in range(m)])
    df["other"] = np.arange(n)
    roles = {f"a{i}": "eps-quasi" for i in range(m)}
    doms = {f"a{i}": (0.0, 1000.0) for i in range(m)}
    return df, roles, doms


# ---------------------------------------------------------------- registry

def test_all_numeric_methods_registered():
    ids = [m["id"] for m in engine.methods()]
    for mid in NUMERIC:
        assert mid in ids


@pytest.mark.parametrize("mid, protects, needs_domain, uses_k, min_k", [
    ("mdav", Role.K_QUASI, False, True, 1),
    ("mdav-swap", Role.K_QUASI, False, True, 1),
    ("ir-swap", Role.CONFIDENTIAL, False, True, 1),
    ("laplace", Role.EPS_QUASI, True, False, 1),
    ("insensitive-dp", Role.EPS_QUASI, True, True, 1),
    ("ir-dp", Role.EPS_QUASI, True, True, 1),
    ("idp-ls", Role.EPS_QUASI, True, True, 1),
    ("idp-cbls", Role.EPS_QUASI, False, True, 3),
])
def test_method_specs(mid, protects, needs_domain, uses_k, min_k):
    spec = get_method(mid)
    assert spec.protects == (protects,)
    assert spec.requires == (protects,)
    assert spec.needs_domain is needs_domain
    assert spec.uses_k is uses_k
    assert spec.min_k == min_k
    assert spec.description and spec.paper
    names = {p.name for p in spec.params}
    assert "drop_missing" in names
    if spec.uses_epsilon:
        assert {"epsilon", "noise", "budget", "weights"} <= names
    assert ("k" in names) is uses_k
    d = spec.to_dict()
    assert isinstance(d["guarantee"], str) and d["guarantee"]


def test_insensitive_dp_params():
    spec = get_method("insensitive-dp")
    assert spec.param("variant").choices == ("single", "multi")
    cal = spec.param("calibration")
    assert cal.default == "rigorous"
    assert "does not satisfy ε-DP (see paper 002 §3)" in cal.warning["as-published"]
    assert spec.param("reference").default == "lower"


# ---------------------------------------------------------------- guarantees

def _g(mid, **p):
    spec = get_method(mid)
    params = {q.name: q.default for q in spec.params}
    params.update(p)
    return spec.guarantee(params), bool(spec.is_dp(params))


@pytest.mark.parametrize("mid", ["laplace", "ir-dp", "insensitive-dp"])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_dp_guarantee_mentions_epsilon(mid, eps):
    text, is_dp = _g(mid, epsilon=eps)
    assert f"{eps:g}-differential privacy" in text
    assert "split equally" in text and "neighbouring data sets differ in one record" in text
    assert is_dp
    text, _ = _g(mid, epsilon=eps, budget="per-attribute")
    assert "(m·ε)-DP" in text and f"ε = {eps:g}" in text
    assert f"{eps:g}-differential privacy" not in text


def test_as_published_guarantee_is_labelled_not_dp():
    text, is_dp = _g("insensitive-dp", epsilon=1.0, calibration="as-published", k=5)
    assert "does not satisfy ε-DP (see paper 002 §3)" in text
    assert not is_dp
    text, is_dp = _g("insensitive-dp", epsilon=1.0, k=5)
    assert "rigorous" in text and "does not satisfy" not in text and is_dp


@pytest.mark.parametrize("mid", ["idp-ls", "idp-cbls"])
def test_idp_guarantee(mid):
    text, is_dp = _g(mid, epsilon=2.0, k=4)
    assert "2-individual differential privacy" in text
    assert "not ε-DP" in text and "THIS data set" in text
    assert not is_dp


def test_other_guarantees():
    assert "k-anonymity with k = 7" in _g("mdav", k=7)[0]
    assert "Probabilistic k-anonymity with k = 4" in _g("mdav-swap", k=4)[0]
    assert "Probabilistic k-anonymity with k = 4" in _g("ir-swap", k=4)[0]
    for mid in ("mdav", "mdav-swap", "ir-swap"):
        assert not _g(mid)[1]
    text, is_dp = _g("ir-dp", epsilon=None)
    assert "no differential privacy" in text and not is_dp


def test_protect_result_carries_guarantee(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=0.7, seed=1)
    assert "0.7-differential privacy" in res.guarantee
    # four attributes ranked separately and released together: DP per column only
    assert not res.is_dp and res.guarantee.startswith("Per-attribute only — not ε-differential")
    # one attribute, the other columns released unchanged beside it: they show the grouping,
    # so the records are not ε-DP (issue 8 §5); the sentence leads with that scope
    one = protect_in_order(census, "ir-dp", {"FICA": "eps-quasi"}, {"FICA": doms["FICA"]},
                           k=5, epsilon=0.7, seed=1)
    assert not one.is_dp and one.guarantee.startswith("Per-attribute only — not ε-differential")
    assert "0.7-differential privacy" in one.guarantee and "FEDTAX" in one.guarantee
    alone = protect_in_order(census[["FICA"]], "ir-dp", {"FICA": "eps-quasi"},
                             {"FICA": doms["FICA"]}, k=5, epsilon=0.7, seed=1)
    assert alone.is_dp and alone.guarantee.startswith("0.7-differential privacy")
    assert res.info["epsilon_per_attribute"] == {c: pytest.approx(0.7 / 4) for c in
                                                 res.info["epsilon_per_attribute"]}
    meta = res.public_metadata()
    assert "seed" not in str(meta["parameters"])


# ---------------------------------------------------------------- calibration: empirical noise

def _residuals(mid, df, roles, doms, reps=1, **params):
    """Released value minus the noise-free value, per cluster (one row per cluster draw)."""
    prep = prepare(df, mid, roles, doms, **params)
    cache: dict = {}
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache).data
    out = []
    for r in range(reps):
        res = run_prepared_in_order(prep, rng=np.random.default_rng(100 + r), cache=cache)
        out.append((res, res.data[list(roles)].to_numpy() - base[list(roles)].to_numpy()))
    return out, base


def _per_cluster(resid_col, labels):
    """One residual per cluster (all records of a cluster share the draw: check it)."""
    nc = int(labels.max()) + 1
    first = np.full(nc, np.nan)
    first[labels[::-1]] = resid_col[::-1]
    assert np.allclose(resid_col, first[labels])
    return first


def test_ir_dp_one_draw_per_cluster_of_scale_delta_over_k_eps():
    df, roles, doms = middle_data(20_000, 2)
    k, eps = 10, 10.0             # ε_i = 5: scale = 1000 / (10 · 5) = 20
    runs, _ = _residuals("ir-dp", df, roles, doms, k=k, epsilon=eps)
    res, R = runs[0]
    X = df[list(roles)].to_numpy()
    L = MA.individual_ranking(X, k)
    for a in range(2):
        per = _per_cluster(R[:, a], L[:, a])
        assert per.size == 2000
        assert per.var() == pytest.approx(2 * 20.0 ** 2, rel=0.1)
        assert abs(per.mean()) < 3 * np.sqrt(2 * 400 / 2000)
    info = res.info["noise_per_attribute"]["a0"]
    assert info["scale"] == pytest.approx(20.0)
    assert info["sensitivity"] == pytest.approx(100.0)


def test_ir_dp_staircase_noise_variance():
    df, roles, doms = middle_data(20_000, 1)
    # staircase is ε-DP for one number only: with n_c = 2000 centroids each draw gets
    # sensitivity Δ/k = 100 and ε_i/n_c (audit fix), so ε = 10000 gives 5 per draw
    runs, _ = _residuals("ir-dp", df, roles, doms, k=10, epsilon=10_000.0, noise="staircase")
    _, R = runs[0]
    L = MA.individual_ranking(df[["a0"]].to_numpy(), 10)
    per = _per_cluster(R[:, 0], L[:, 0])
    assert per.var() == pytest.approx(N.staircase_variance(100.0, 5.0), rel=0.1)


def test_laplace_per_record_scale():
    df, roles, doms = middle_data(10_000, 2)
    runs, _ = _residuals("laplace", df, roles, doms, epsilon=100.0)   # ε_i = 50: scale 20
    _, R = runs[0]
    for a in range(2):
        assert R[:, a].var() == pytest.approx(2 * 20.0 ** 2, rel=0.1)


def test_laplace_per_attribute_budget_scale():
    df, roles, doms = middle_data(10_000, 3)
    runs, _ = _residuals("laplace", df, roles, doms, epsilon=50.0, budget="per-attribute")
    res, R = runs[0]
    assert R.var(axis=0) == pytest.approx(np.full(3, 2 * 20.0 ** 2), rel=0.1)
    assert res.info["epsilon_total_composed"] == pytest.approx(150.0)


def test_laplace_weights_budget():
    df, roles, doms = middle_data(10_000, 2)
    runs, _ = _residuals("laplace", df, roles, doms, epsilon=100.0, budget="weights",
                         weights={"a0": 1.0, "a1": 3.0})
    res, R = runs[0]
    # ε_0 = 25 -> scale 40, ε_1 = 75 -> scale 13.33
    assert R[:, 0].var() == pytest.approx(2 * 40.0 ** 2, rel=0.1)
    assert R[:, 1].var() == pytest.approx(2 * (1000 / 75) ** 2, rel=0.1)


@pytest.mark.parametrize("calibration, variant", [("rigorous", "multi"), ("rigorous", "single"),
                                                  ("as-published", "multi")])
def test_insensitive_dp_scale(calibration, variant):
    df, roles, doms = middle_data(2000, 3)
    k = 100                                   # n_c = 20
    eps = 300.0 if calibration == "rigorous" else 15.0   # per-attribute: ε_i = ε
    # rigorous: 20 * 1000 / (100 * 300) = 0.667; as-published: 1000 / (100 * 15) = 0.667
    runs, _ = _residuals("insensitive-dp", df, roles, doms, reps=15, k=k, epsilon=eps,
                         budget="per-attribute", calibration=calibration, variant=variant)
    X = df[list(roles)].to_numpy()
    lb, ub = np.zeros(3), np.full(3, 1000.0)
    lab = MA.multi_reference(X, k, lb, ub) if variant == "multi" else MA.insensitive_mdav(X, k, lb, ub)
    draws = []
    for res, R in runs:
        assert res.info["n_c"] == 20
        for a in range(3):
            draws.append(_per_cluster(R[:, a], lab))
    draws = np.concatenate(draws)
    assert draws.size == 15 * 3 * 20
    assert draws.var() == pytest.approx(2 * (2.0 / 3.0) ** 2, rel=0.2)
    sens = runs[0][0].info["noise_per_attribute"]["a0"]["sensitivity"]
    assert sens == pytest.approx(200.0 if calibration == "rigorous" else 10.0)


def test_idp_ls_scale_per_cluster():
    df, roles, doms = middle_data(20_000, 1)
    k, eps = 10, 20.0
    runs, _ = _residuals("idp-ls", df, roles, doms, k=k, epsilon=eps)
    _, R = runs[0]
    x = df["a0"].to_numpy()
    L = MA.individual_ranking(x[:, None], k)[:, 0]
    per = _per_cluster(R[:, 0], L)
    nc = per.size
    mn = np.full(nc, np.inf)
    mx = np.full(nc, -np.inf)
    np.minimum.at(mn, L, x)
    np.maximum.at(mx, L, x)
    ls = np.maximum(1000.0 - mn, mx - 0.0) / np.bincount(L)
    z = per / (ls / eps)
    assert z.var() == pytest.approx(2.0, rel=0.1)


def test_idp_cbls_scale_and_preprocessed_centroid():
    rng = np.random.default_rng(4)
    x = rng.uniform(400, 600, 20_000)
    df = pd.DataFrame({"a0": x})
    k, eps = 5, 1.0
    prep = prepare(df, "idp-cbls", {"a0": "eps-quasi"}, {}, k=k, epsilon=eps,
                   precision={"a0": 1e-6})   # no domain: the output grid must be declared
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None).data["a0"].to_numpy()
    L = MA.individual_ranking(x[:, None], k)[:, 0]
    nc = int(L.max()) + 1
    # pre-processed centroid, cluster by cluster (reference, clusters of exactly k here)
    order = np.argsort(x, kind="stable")
    xs = x[order].reshape(nc, k)
    pre = xs.copy()
    pre[:, 0] = xs[:, 1]
    pre[:, -1] = xs[:, -2]
    assert np.allclose(_per_cluster(base, L), pre.mean(axis=1))
    e_up = (xs[:, -1] - xs[:, 1]) + (xs[:, 2] - xs[:, 1]) + (xs[:, -1] - xs[:, -2])
    e_down = (xs[:, -2] - xs[:, 0]) + (xs[:, -2] - xs[:, -3]) + (xs[:, 1] - xs[:, 0])
    ls = np.maximum(e_up, e_down) / k
    res = run_prepared_in_order(prep, rng=np.random.default_rng(1))
    per = _per_cluster(res.data["a0"].to_numpy() - base, L)
    assert (per / (ls / eps)).var() == pytest.approx(2.0, rel=0.1)
    assert "domain_width" not in res.info["noise_per_attribute"]["a0"]
    assert res.info["noise_per_attribute"]["a0"]["clamped"] is False


# ---------------------------------------------------------------- iDP-CBLS: LS bounds the worst change

def _cbls_centroid(vals):
    v = np.sort(np.asarray(vals, dtype=float))
    return (v.sum() - v[0] + v[1] - v[-1] + v[-2]) / v.size


def _cbls_ls(vals):
    v = np.sort(np.asarray(vals, dtype=float))
    c = v.size
    e_up = (v[-1] - v[1]) + (v[2] - v[1]) + (v[-1] - v[-2])
    e_down = (v[-2] - v[0]) + (v[-2] - v[-3]) + (v[1] - v[0])
    return max(e_up, e_down) / c


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=3, max_size=7), st.booleans())
def test_cbls_local_sensitivity_bounds_brute_force_change(values, fractional):
    lo, hi = 0.0, 20.0
    vals = np.array(values, dtype=float) + (0.37 if fractional else 0.0)
    vals = np.clip(vals, lo, hi)
    base = _cbls_centroid(vals)
    ls = _cbls_ls(vals)
    grid = np.linspace(lo - 50, hi + 50, 561)   # beyond the domain too: CBLS needs no bounds
    worst = 0.0
    for i in range(vals.size):
        for g in grid:
            w = vals.copy()
            w[i] = g
            worst = max(worst, abs(_cbls_centroid(w) - base))
    assert worst <= ls + 1e-9


def test_cbls_engine_matches_reference_formula():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 50, 37).astype(float)
    df = pd.DataFrame({"a": x})
    prep = prepare(df, "idp-cbls", {"a": "eps-quasi"}, {"a": (0, 100)}, k=4, epsilon=1.0)
    res = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None)
    L = MA.individual_ranking(x[:, None], 4)[:, 0]
    for c in range(int(L.max()) + 1):
        members = np.flatnonzero(L == c)
        assert np.allclose(res.data["a"].to_numpy()[members], _cbls_centroid(x[members]))


# ---------------------------------------------------------------- clamping and domains

def test_dp_outputs_are_clamped_to_domain(census):
    roles, doms = census_setup(census)
    for mid, kw in [("laplace", {}), ("ir-dp", {"k": 3}), ("idp-ls", {"k": 3}),
                    ("insensitive-dp", {"k": 3}), ("idp-cbls", {"k": 3})]:
        res = protect_in_order(census, mid, roles, doms, epsilon=0.01, seed=3, **kw)
        for c in CENSUS4:
            v = res.data[c].to_numpy()
            assert v.min() >= doms[c][0] and v.max() <= doms[c][1], (mid, c)


def test_methods_needing_domain_refuse_without(census):
    roles, _ = census_setup(census)
    for mid in ("laplace", "ir-dp", "idp-ls", "insensitive-dp"):
        with pytest.raises(ParameterError, match="domain"):
            protect_in_order(census, mid, roles, None, epsilon=1.0, seed=1)
    res = protect_in_order(census, "idp-cbls", roles, None, k=3, epsilon=1.0, seed=1)
    assert len(res.data) == len(census)


def test_idp_cbls_needs_k_at_least_3(census):
    roles, doms = census_setup(census)
    with pytest.raises(ParameterError):
        protect_in_order(census, "idp-cbls", roles, doms, k=2, epsilon=1.0, seed=1)


def test_unprotected_quasi_rejected(census):
    roles, doms = census_setup(census)
    roles["AGI"] = "k-quasi"
    with pytest.raises(NotApplicableError):
        protect_in_order(census, "ir-dp", roles, doms, k=3, epsilon=1.0, seed=1)


# ---------------------------------------------------------------- k-anonymity and swaps

@st.composite
def kquasi_frames(draw):
    n = draw(st.integers(4, 60))
    m = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        X = rng.integers(0, 3, size=(n, m)).astype(float)
    else:
        X = rng.normal(size=(n, m))
    k = draw(st.integers(1, n // 2))
    df = pd.DataFrame(X, columns=[f"q{i}" for i in range(m)])
    df["conf"] = rng.normal(size=n)
    return df, k


@settings(max_examples=40, deadline=None)
@given(kquasi_frames())
def test_mdav_output_is_k_anonymous(data):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    res = protect_in_order(df, "mdav", {c: "k-quasi" for c in q}, k=k, seed=0)
    counts = res.data.groupby(q).size()
    assert counts.min() >= k
    assert res.data["conf"].equals(df["conf"])
    # centroids preserve attribute means
    assert np.allclose(res.data[q].mean(), df[q].mean())


@settings(max_examples=40, deadline=None)
@given(kquasi_frames(), st.integers(0, 1000))
def test_mdav_swap_preserves_multisets_jointly(data, seed):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    res = protect_in_order(df, "mdav-swap", {c: "k-quasi" for c in q}, k=k, seed=seed)
    out = res.data
    # the multiset of k-quasi tuples (hence each column's multiset) is unchanged
    assert sorted(map(tuple, out[q].to_numpy())) == sorted(map(tuple, df[q].to_numpy()))
    for c in q:
        assert np.array_equal(np.sort(out[c].to_numpy()), np.sort(df[c].to_numpy()))
        assert out[c].mean() == pytest.approx(df[c].mean())
        assert out[c].var() == pytest.approx(df[c].var())
    # every record receives a tuple from its own MDAV cluster
    lab = MA.mdav(df[q].to_numpy(), k)
    for c_ in range(int(lab.max()) + 1):
        members = np.flatnonzero(lab == c_)
        got = sorted(map(tuple, out[q].to_numpy()[members]))
        assert got == sorted(map(tuple, df[q].to_numpy()[members]))
    assert out["conf"].equals(df["conf"])


@settings(max_examples=40, deadline=None)
@given(kquasi_frames(), st.integers(0, 1000))
def test_ir_swap_preserves_each_column_multiset(data, seed):
    df, k = data
    q = [c for c in df.columns if c.startswith("q")]
    roles = {c: "confidential" for c in q + ["conf"]}
    res = protect_in_order(df, "ir-swap", roles, k=k, seed=seed)
    for c in roles:
        a, b = res.data[c].to_numpy(), df[c].to_numpy()
        assert np.array_equal(np.sort(a), np.sort(b))
        assert a.mean() == pytest.approx(b.mean())
        assert a.var() == pytest.approx(b.var())
        # each value stays inside its individual-ranking group
        L = MA.individual_ranking(b[:, None], k)[:, 0]
        for g in range(int(L.max()) + 1):
            m = L == g
            assert np.array_equal(np.sort(a[m]), np.sort(b[m]))


def test_swaps_actually_permute(census):
    res = protect_in_order(census, "mdav-swap", {c: "k-quasi" for c in CENSUS4}, k=5, seed=1)
    assert res.info["records_moved"] > len(census) // 2
    res2 = protect_in_order(census, "ir-swap", {c: "confidential" for c in CENSUS4}, k=5, seed=1)
    assert not res2.data["FICA"].equals(census["FICA"])
    assert res2.data["FICA"].dtype == census["FICA"].dtype


def test_mdav_constant_column_does_not_crash():
    df = pd.DataFrame({"a": np.ones(20), "b": np.arange(20.0)})
    res = protect_in_order(df, "mdav", {"a": "k-quasi", "b": "k-quasi"}, k=4)
    assert res.data.groupby(["a", "b"]).size().min() >= 4
    assert np.all(res.data["a"] == 1.0)


# ---------------------------------------------------------------- determinism, caching, cancel

@pytest.mark.parametrize("mid, kw", [("laplace", {}), ("ir-dp", {"k": 4}), ("idp-ls", {"k": 4}),
                                     ("idp-cbls", {"k": 4}), ("insensitive-dp", {"k": 4}),
                                     ("insensitive-dp", {"k": 4, "variant": "single",
                                                         "noise": "staircase"}),
                                     ("ir-dp", {"k": 4, "noise": "staircase"})])
def test_determinism_under_seed(census, mid, kw):
    roles, doms = census_setup(census)
    a = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=42, **kw)
    b = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=42, **kw)
    c = protect_in_order(census, mid, roles, doms, epsilon=1.0, seed=43, **kw)
    assert a.data.equals(b.data)
    assert not a.data.equals(c.data)
    others = [col for col in census.columns if col not in CENSUS4]
    assert a.data[others].equals(census[others])


@pytest.mark.parametrize("mid", ["mdav-swap", "ir-swap"])
def test_swap_determinism(census, mid):
    role = "k-quasi" if mid == "mdav-swap" else "confidential"
    roles = {c: role for c in CENSUS4}
    a = protect_in_order(census, mid, roles, k=3, seed=5)
    b = protect_in_order(census, mid, roles, k=3, seed=5)
    assert a.data.equals(b.data)


def test_noise_free_baseline_and_cache_reuse(census):
    roles, doms = census_setup(census)
    prep = prepare(census, "ir-dp", roles, doms, k=5, epsilon=1.0)
    cache: dict = {}
    base = run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=None, cache=cache)
    assert not base.is_dp and "no differential privacy" in base.guarantee
    keys_after_first = set(cache)
    assert any(isinstance(k_, tuple) and k_[0] == "num.ir-order" for k_ in cache)
    run_prepared_in_order(prep, rng=np.random.default_rng(1), cache=cache)
    run_prepared_in_order(prep, rng=np.random.default_rng(2), epsilon=0.1, cache=cache)
    assert set(cache) == keys_after_first           # nothing recomputed
    # the individual-ranking clusters are shared by idp-ls / idp-cbls
    prep2 = prepare(census, "idp-ls", roles, doms, k=5, epsilon=1.0)
    run_prepared_in_order(prep2, rng=np.random.default_rng(0), cache=cache)
    assert set(cache) == keys_after_first
    # baseline values are the individual-ranking centroids
    x = census["FICA"].to_numpy(float)
    L = MA.individual_ranking(x[:, None], 5)[:, 0]
    assert np.allclose(base.data["FICA"], MA.cluster_means(x, L)[L])


def test_insensitive_cache_reused_across_epsilons(census):
    roles, doms = census_setup(census)
    prep = prepare(census, "insensitive-dp", roles, doms, k=5, epsilon=1.0)
    cache: dict = {}
    run_prepared_in_order(prep, rng=np.random.default_rng(0), cache=cache)
    n_keys = len(cache)
    run_prepared_in_order(prep, rng=np.random.default_rng(0), epsilon=2.0, cache=cache)
    assert len(cache) == n_keys
    run_prepared_in_order(prep, rng=np.random.default_rng(0), k=6, cache=cache)
    assert len(cache) == n_keys + 1


def test_cancel_stops(census):
    roles, doms = census_setup(census)
    kroles = {c: "k-quasi" for c in CENSUS4}

    def cancel():
        raise Cancelled()

    calls = [
        lambda: protect_in_order(census, "laplace", roles, doms, epsilon=1.0, seed=1,
                               check_cancel=cancel),
        lambda: protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=1.0, seed=1,
                               check_cancel=cancel),
        lambda: protect_in_order(census, "insensitive-dp", roles, doms, k=5, epsilon=1.0, seed=1,
                               check_cancel=cancel),
        lambda: protect_in_order(census, "mdav", kroles, k=5, seed=1, check_cancel=cancel),
    ]
    for call in calls:
        with pytest.raises(Cancelled):
            call()


def test_progress_reported(census):
    roles, doms = census_setup(census)
    seen: list[float] = []
    protect_in_order(census, "ir-dp", roles, doms, k=5, epsilon=1.0, seed=1, progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)


# ---------------------------------------------------------------- Census end to end

def test_census_utility_ordering(census):
    """With the per-attribute budget, ir-dp beats plain Laplace, and noise-free individual
    ranking loses less than insensitive multivariate microaggregation."""
    roles, doms = census_setup(census)
    X = census[CENSUS4].to_numpy(float)

    def sse(res):
        return float(((res.data[CENSUS4].to_numpy() - X) ** 2).sum())

    lap = np.mean([sse(protect_in_order(census, "laplace", roles, doms, epsilon=1.0,
                                      budget="per-attribute", seed=s)) for s in range(5)])
    # Laplace of scale Δ_i/ε on each attribute, clamped: SSE below the unclamped 2·n·ΣΔ²
    unclamped = 2 * len(census) * sum((doms[c][1] - doms[c][0]) ** 2 for c in CENSUS4)
    assert 0.05 * unclamped < lap < unclamped
    irdp = np.mean([sse(protect_in_order(census, "ir-dp", roles, doms, k=10, epsilon=1.0,
                                       budget="per-attribute", seed=s)) for s in range(5)])
    assert irdp < lap / 5
    prep_ir = prepare(census, "ir-dp", roles, doms, k=10, epsilon=1.0)
    prep_in = prepare(census, "insensitive-dp", roles, doms, k=10, epsilon=1.0)
    base_ir = sse(run_prepared_in_order(prep_ir, rng=np.random.default_rng(0), epsilon=None))
    base_in = sse(run_prepared_in_order(prep_in, rng=np.random.default_rng(0), epsilon=None))
    assert base_ir < base_in


def test_census_rigorous_insensitive_worse_than_laplace_when_k2_below_n(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "insensitive-dp", roles, doms, k=10, epsilon=1.0, seed=0)
    assert any("k² ≤ n" in w for w in res.warnings)
    lap_scale = protect_in_order(census, "laplace", roles, doms, epsilon=1.0,
                               seed=0).info["noise_per_attribute"]["FICA"]["scale"]
    assert res.info["noise_per_attribute"]["FICA"]["scale"] >= lap_scale


def test_census_as_published_reports_not_dp(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "insensitive-dp", roles, doms, k=5, epsilon=1.0, seed=0,
                         calibration="as-published", budget="per-attribute")
    assert not res.is_dp
    assert "does not satisfy ε-DP (see paper 002 §3)" in res.guarantee
    assert any("does not satisfy" in w for w in res.warnings)
    meta = res.public_metadata()
    assert meta["differential_privacy"] is False
    assert "does not satisfy ε-DP" in meta["guarantee"]


def test_insensitive_k1_texts():
    text, is_dp = _g("insensitive-dp", epsilon=1.0, k=1, calibration="as-published")
    assert is_dp and "1-differential privacy" in text and "k = 1" in text
    assert "does not satisfy" not in text


def test_integer_and_nullable_columns_keep_working():
    df = pd.DataFrame({"a": pd.array(np.arange(30) % 7, dtype="Int64"),
                       "b": np.arange(30, dtype=np.int32)})
    res = protect_in_order(df, "ir-swap", {"a": "confidential", "b": "confidential"}, k=3, seed=1)
    assert sorted(res.data["a"].tolist()) == sorted(df["a"].tolist())
    assert sorted(res.data["b"].tolist()) == sorted(df["b"].tolist())
    res = protect_in_order(df, "mdav-swap", {"a": "k-quasi", "b": "k-quasi"}, k=3, seed=1)
    assert sorted(zip(res.data["a"], res.data["b"])) == sorted(zip(df["a"], df["b"]))
    res = protect_in_order(df, "mdav", {"a": "k-quasi", "b": "k-quasi"}, k=3, seed=1)
    assert res.data.groupby(["a", "b"]).size().min() >= 3
    res = protect_in_order(df, "ir-dp", {"a": "eps-quasi", "b": "eps-quasi"},
                         {"a": (0, 10), "b": (0, 40)}, k=3, epsilon=1.0, seed=1)
    assert res.data["a"].between(0, 10).all()


def test_budget_detail_names_attributes(census):
    roles, doms = census_setup(census)
    res = protect_in_order(census, "laplace", roles, doms, epsilon=2.0, seed=1)
    assert "split equally over the 4 protected attributes" in res.info["budget_detail"]
    assert "FICA: 0.5" in res.info["budget_detail"]
    res = protect_in_order(census, "ir-dp", roles, doms, k=3, epsilon=2.0, seed=1,
                         budget="per-attribute")
    assert "(4·2 = 8)-DP" in res.info["budget_detail"]


@pytest.mark.parametrize("distance", ["standardized", "raw", "domain"])
def test_mdav_distance_options_k_anonymous(census, distance):
    cols = ["FEDTAX", "FICA", "INTVAL"]
    doms = {c: (0.0, 1.5 * float(census[c].max())) for c in cols}
    res = protect_in_order(census, "mdav", {c: "k-quasi" for c in cols}, doms, k=7, distance=distance)
    assert res.data.groupby(cols).size().min() >= 7


def test_mdav_distance_changes_clusters_and_domain_needs_bounds(census):
    cols = ["FEDTAX", "INTVAL"]
    roles = {c: "k-quasi" for c in cols}
    a = protect_in_order(census, "mdav", roles, k=5, distance="standardized").data
    b = protect_in_order(census, "mdav", roles, k=5, distance="raw").data
    assert not a[cols].equals(b[cols])
    with pytest.raises(engine.ParameterError, match="domain"):
        protect_in_order(census, "mdav", roles, k=5, distance="domain")


@pytest.mark.parametrize("method", ["ir-dp", "idp-ls", "idp-cbls", "insensitive-dp"])
def test_clustered_release_is_shuffled_and_shuffle_changes_only_order(census, method):
    """The release is a random permutation of the in-order release: same values (the noise
    is drawn before the permutation), row_map aligns it, and shuffle=False is flagged."""
    roles, doms = census_setup(census)
    a = engine.protect(census, method, roles, doms, k=5, epsilon=1.0, seed=4)
    b = engine.protect(census, method, roles, doms, k=5, epsilon=1.0, seed=4, shuffle=False)
    assert a.row_map is not None and sorted(a.row_map.tolist()) == list(range(len(census)))
    assert not np.array_equal(a.row_map, np.arange(len(census)))
    assert in_input_order(a).data.equals(b.data)
    assert "random order" in a.guarantee
    assert not b.is_dp and "INPUT ORDER" in b.guarantee


def test_row_order_leaks_clusters_without_shuffle():
    """Why the shuffle: n = 4, k = 2, neighbours (0,1,2,3) and (4,1,2,3). In input order the
    rows sharing a value are {0,1} in one and {1,2} in the other, whatever the noise."""
    dom = {"x": (0.0, 4.0)}
    for data, pair in (([0., 1., 2., 3.], (0, 1)), ([4., 1., 2., 3.], (1, 2))):
        df = pd.DataFrame({"x": data})
        for seed in range(5):
            out = engine.protect(df, "ir-dp", {"x": "eps-quasi"}, dom, k=2, epsilon=1.0,
                                 seed=seed, shuffle=False).data["x"].to_numpy()
            assert out[pair[0]] == out[pair[1]]


def test_measures_do_not_depend_on_release_order(census):
    """Sweeps measure unshuffled releases; that is only valid if the measures are invariant
    under the joint permutation (same seed: same noise, only the order differs)."""
    roles, doms = census_setup(census)
    a = engine.protect(census, "ir-dp", roles, doms, k=7, epsilon=1.0, seed=9)
    b = engine.protect(census, "ir-dp", roles, doms, k=7, epsilon=1.0, seed=9, shuffle=False)
    cols = a.protected_attributes
    ea = engine.evaluate(a.aligned_original(), a.data, cols, measures=("sse", "rl", "delta"))
    eb = engine.evaluate(census, b.data, cols, measures=("sse", "rl", "delta"))
    for key in ("sse_raw", "sse_normalized", "rl"):
        assert ea[key] == pytest.approx(eb[key], rel=1e-9)
