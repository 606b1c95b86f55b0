"""Utility and risk measures (docs/measures.md): SSE, record linkage, Δ statistics, correlation loss, Score."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import measures as M
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.measures import _base
from dpstudio.engine.measures import risk as R


def brute_rl(x: np.ndarray, y: np.ndarray, standardize: bool = True) -> float:
    """O(n²) reference of record linkage exactly as docs/measures.md defines it."""
    if standardize:
        sd = x.std(axis=0, ddof=1)
        sd = np.where(sd > 0, sd, 1.0)
        x, y = x / sd, y / sd
    n = len(x)
    total = 0.0
    for lo in range(0, n, 500):  # all n × n distances, 500 protected records at a time
        d = np.sqrt(((y[lo : lo + 500, None, :] - x[None, :, :]) ** 2).sum(axis=2))
        g = d <= d.min(axis=1, keepdims=True) * (1 + 1e-12)
        rows = np.arange(lo, min(lo + 500, n))
        own = g[np.arange(len(rows)), rows]
        total += (own / g.sum(axis=1)).sum()
    return 100.0 * total / n


def frames(x, y):
    cols = [f"a{i}" for i in range(x.shape[1])]
    return pd.DataFrame(x, columns=cols), pd.DataFrame(y, columns=cols), cols


# ----------------------------------------------------------------- record linkage


class search_path:
    """Force the k-d tree path (``tree=True``) or the exact-candidates path of record linkage."""

    def __init__(self, tree: bool):
        self.value = 0 if tree else 10**12

    def __enter__(self):
        self.saved = R._BRUTE_MAX_PAIRS
        R._BRUTE_MAX_PAIRS = self.value

    def __exit__(self, *exc):
        R._BRUTE_MAX_PAIRS = self.saved


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 60),
    m=st.integers(1, 4),
    kind=st.sampled_from(["noise", "grid", "centroids", "dupes"]),
    tree=st.booleans(),
)
def test_rl_matches_bruteforce(seed, n, m, kind, tree):
    rng = np.random.default_rng(seed)
    if kind == "grid":  # integers: many exact distance ties
        x = rng.integers(0, 4, size=(n, m)).astype(float)
        y = x + rng.choice([-0.5, 0.0, 0.5, 1.0], size=(n, m))
    elif kind == "centroids":  # microaggregation-like: repeated protected rows
        x = rng.normal(size=(n, m))
        g = rng.integers(0, max(1, n // 3), size=n)
        y = pd.DataFrame(x).groupby(g).transform("mean").to_numpy()
    elif kind == "dupes":  # duplicated originals and duplicated protected
        base = rng.normal(size=(max(1, n // 2), m))
        x = base[rng.integers(0, len(base), size=n)]
        y = x.copy()
        flip = rng.random(n) < 0.5
        y[flip] = base[rng.integers(0, len(base), size=int(flip.sum()))]
    else:
        x = rng.normal(size=(n, m)) * rng.uniform(0.1, 100, size=m)
        y = x + rng.normal(size=(n, m)) * rng.uniform(0, 2) * x.std(axis=0)
    o, p, cols = frames(x, y)
    with search_path(tree):
        assert M.record_linkage(o, p, cols) == pytest.approx(brute_rl(x, y), abs=1e-9)
        assert M.record_linkage(o, p, cols, "raw") == pytest.approx(brute_rl(x, y, False), abs=1e-9)


def test_rl_prefilter_path_matches_bruteforce():
    """Large enough for the sampled prefilter and the approximate search to run."""
    rng = np.random.default_rng(7)
    n = 3000
    # (m, noise): small noise, moderate noise in 4-D (the approximate search runs), large noise
    for m, s in ((3, 0.02), (4, 0.2), (3, 0.3), (3, 3.0)):
        x = np.round(rng.normal(size=(n, m)), 1)  # rounded: ties
        y = np.round(x + s * rng.normal(size=(n, m)), 1)
        o, p, cols = frames(x, y)
        ref = brute_rl(x, y)
        for tree in (True, False):
            with search_path(tree):
                assert M.record_linkage(o, p, cols) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("tree", [True, False])
def test_rl_ties_exact_values(tree):
    x = pd.DataFrame({"a": [0.0, 2.0, 10.0, 10.0]})
    # x'0 = 1: tie between 0 and 2 -> 1/2; x'1 = 2 exact -> 1; x'2 = 10: two identical originals -> 1/2 each
    y = pd.DataFrame({"a": [1.0, 2.0, 10.0, 10.0]})
    # not linked: nearest is another record
    y2 = pd.DataFrame({"a": [2.0, 0.0, 10.0, 9.0]})
    with search_path(tree):
        assert M.record_linkage(x, y, ["a"], "raw") == pytest.approx(100 * (0.5 + 1 + 0.5 + 0.5) / 4)
        assert M.record_linkage(x, y2, ["a"], "raw") == pytest.approx(100 * (0 + 0 + 0.5 + 0.5) / 4)


def test_rl_probabilities_and_missing():
    x = pd.DataFrame({"a": [0.0, 5.0, 9.0]})
    y = pd.DataFrame({"a": [0.0, np.nan, 9.0]})
    warns: list[str] = []
    rl, pr = M.record_linkage(x, y, ["a"], warnings=warns, return_probabilities=True)
    assert pr.tolist() == [1.0, 0.0, 1.0] and rl == pytest.approx(200 / 3)
    assert any("missing" in w for w in warns)


def test_rl_constant_attribute_warns_and_is_unscaled():
    x = pd.DataFrame({"a": [1.0, 2.0, 3.0], "c": [5.0, 5.0, 5.0]})
    warns: list[str] = []
    assert M.record_linkage(x, x, ["a", "c"], warnings=warns) == 100.0
    assert any("'c'" in w and "constant" in w for w in warns)


def test_rl_cache_reuses_tree(monkeypatch):
    # the tree is built lazily, only on the k-d tree path (many pairs): force that path
    monkeypatch.setattr(R, "_BRUTE_MAX_PAIRS", 0)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 2))
    o, p, cols = frames(x, x + 0.1 * rng.normal(size=x.shape))
    cache: dict = {}
    r1 = M.record_linkage(o, p, cols, cache=cache)
    entries = [v for v in cache.values() if isinstance(v, dict) and "tree" in v]
    assert len(entries) == 1
    tree = entries[0]["tree"]
    assert M.record_linkage(o, p, cols, cache=cache) == r1
    assert [v for v in cache.values() if isinstance(v, dict) and "tree" in v][0]["tree"] is tree
    # new originals (e.g. re-aligned at each run) do not pile up in the cache
    for _ in range(10):
        M.record_linkage(o.copy(), p, cols, cache=cache)
    assert len([v for v in cache.values() if isinstance(v, dict) and "tree" in v]) <= _base._CACHE_KEEP


def test_rl_small_data_needs_no_tree():
    """Census-sized data are decided by BLAS candidates: no k-d tree is built (nor scipy
    imported for it), and the result equals the k-d tree path's."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 4))
    o, p, cols = frames(x, x + 0.2 * rng.normal(size=x.shape))
    cache: dict = {}
    r1 = M.record_linkage(o, p, cols, cache=cache)
    assert not [v for v in cache.values() if isinstance(v, dict) and v.get("tree") is not None]
    old = R._BRUTE_MAX_PAIRS
    try:
        R._BRUTE_MAX_PAIRS = 0
        assert M.record_linkage(o, p, cols) == r1
    finally:
        R._BRUTE_MAX_PAIRS = old


def test_rl_categorical_blockwise_matches_bruteforce(monkeypatch):
    monkeypatch.setattr(R, "_BLOCK_ENTRIES", 50)  # force several blocks
    rng = np.random.default_rng(3)
    n = 40
    cats = np.array(["a", "b", "c"])
    dist = {("a", "b"): 0.5, ("a", "c"): 1.0, ("b", "c"): 0.5}

    def delta(u, v):
        return np.array([0.0 if s == t else dist[tuple(sorted((s, t)))] for s, t in zip(u, v)])

    o = pd.DataFrame({"x": rng.integers(0, 3, n).astype(float), "c": cats[rng.integers(0, 3, n)]})
    p = pd.DataFrame({"x": o["x"] + rng.choice([0.0, 1.0], n), "c": cats[rng.integers(0, 3, n)]})
    got = M.record_linkage(o, p, ["x", "c"], "raw", categorical_distance={"c": delta})
    # reference: encode categories on a line where |pos| reproduces δ (a=0, b=0.5, c=1)
    pos = {"a": 0.0, "b": 0.5, "c": 1.0}
    xo = np.column_stack([o["x"], o["c"].map(pos)])
    xp = np.column_stack([p["x"], p["c"].map(pos)])
    assert got == pytest.approx(brute_rl(xo, xp, False), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), embed=st.booleans())
def test_rl_categorical_mismatch_embedding_matches_blockwise(seed, n, embed):
    """0/1 categorical distance: the one-hot k-d tree path equals the exact blockwise one."""
    rng = np.random.default_rng(seed)
    cats = np.array(["a", "b", "c", "d"])
    o = pd.DataFrame({"x": rng.integers(0, 3, n).astype(float), "c": cats[rng.integers(0, 4, n)]})
    p = pd.DataFrame(
        {
            "x": o["x"] + rng.choice([0.0, 0.5, 1.0], n),
            "c": np.where(rng.random(n) < 0.5, o["c"], cats[rng.integers(0, 4, n)]),
        }
    )
    saved = R._MAX_EMBED_DIMS
    R._MAX_EMBED_DIMS = 12 if embed else 0
    try:
        got = M.record_linkage(o, p, ["x", "c"], "raw")
    finally:
        R._MAX_EMBED_DIMS = saved
    # reference: one-hot/√2 coordinates reproduce the 0/1 distance exactly
    oh = lambda s: np.eye(4)[pd.Categorical(s, categories=cats).codes] / np.sqrt(2)  # noqa: E731
    xo = np.column_stack([o["x"], oh(o["c"])])
    xp = np.column_stack([p["x"], oh(p["c"])])
    assert got == pytest.approx(brute_rl(xo, xp, False), abs=1e-9)


# ----------------------------------------------------------------- SSE


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 50), m=st.integers(1, 4))
def test_sse_formulas(seed, n, m):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, m)) * rng.uniform(0.5, 50, size=m)
    y = x + rng.normal(size=(n, m))
    o, p, cols = frames(x, y)
    raw = ((x - y) ** 2).sum()
    norm = (((x - y) ** 2) / x.var(axis=0, ddof=1)).sum() / (n * m)
    assert M.sse(o, p, cols) == pytest.approx(raw)
    assert M.sse(o, p, cols, "normalized") == pytest.approx(norm)


def test_sse_constant_and_categorical():
    o = pd.DataFrame({"a": [1.0, 1.0, 1.0], "c": ["x", "y", "x"]})
    p = pd.DataFrame({"a": [2.0, 1.0, 1.0], "c": ["x", "x", "x"]})
    warns: list[str] = []
    assert M.sse(o, p, ["a"], "normalized", warnings=warns) == pytest.approx(1.0 / 3)
    assert any("'a'" in w and "constant" in w for w in warns)
    assert M.sse(o, p, ["c"], warnings=warns) == 1.0  # 0/1 mismatch without distance
    d = {"c": lambda u, v: np.where(u == v, 0.0, 0.25)}
    assert M.sse(o, p, ["c"], categorical_distance=d) == pytest.approx(0.0625)


def test_bad_inputs_raise():
    o = pd.DataFrame({"a": [1.0, 2.0]})
    with pytest.raises(InputError):
        M.sse(o, pd.DataFrame({"a": [1.0]}), ["a"])
    with pytest.raises(InputError):
        M.sse(o, o, ["zz"])
    with pytest.raises(ParameterError):
        M.sse(o, o, ["a"], "weird")
    with pytest.raises(ParameterError):
        M.evaluate(o, o, ["a"], measures=("nope",))


# ----------------------------------------------------------------- Δ, correlation, score, k-anonymity


def test_delta_stats():
    o = pd.DataFrame({"a": [1.0, 2.0, 3.0], "z": [0.0, 0.0, 0.0]})
    p = pd.DataFrame({"a": [2.0, 2.0, 5.0], "z": [1.0, 0.0, 0.0]})
    warns: list[str] = []
    d = M.delta_stats(o, p, ["a", "z"], warnings=warns)
    assert d["delta_mean"]["a"] == pytest.approx(abs(3.0 - 2.0) / 2.0)
    assert d["delta_var"]["a"] == pytest.approx(abs(np.var([2, 2, 5], ddof=1) - 1.0) / 1.0)
    assert math.isnan(d["delta_mean"]["z"]) and warns


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_correlation_loss_vs_direct(seed):
    rng = np.random.default_rng(seed)
    n = 30
    x = rng.normal(size=(n, 4))
    x[:, 3] += x[:, 0]
    y = x + rng.normal(size=(n, 4)) * 0.5
    cols = ["q1", "q2", "c1", "c2"]
    o, p = pd.DataFrame(x, columns=cols), pd.DataFrame(y, columns=cols)
    mean, std = M.correlation_loss(o, p, ["c1", "c2"], ["q1", "q2"])
    cx, cy = np.corrcoef(x.T), np.corrcoef(y.T)
    diffs = [abs(cy[i, j] - cx[i, j]) for i in range(4) for j in range(i + 1, 4) if i >= 2 or j >= 2]
    assert len(diffs) == 5  # (q1,c1) (q1,c2) (q2,c1) (q2,c2) (c1,c2)
    assert mean == pytest.approx(np.mean(diffs)) and std == pytest.approx(np.std(diffs))


def test_score_reproduces_table_6_1():
    # Table 6.1 (k = 2, ε = 0.01): SSEf = 0.014, RLf = 386.92, Score ≈ 5.4
    sse0, rl0 = 1.0, 386.92
    sse = (1 / 0.014) ** 2  # so that √SSE0/√SSE = 0.014
    r = M.score(sse0, rl0, sse, 1.0)
    assert r["sse_factor"] == pytest.approx(0.014)
    assert r["rl_factor"] == pytest.approx(386.92)
    assert r["score"] == pytest.approx(0.014 * 386.92) and round(r["score"], 1) == 5.4
    assert M.score(1, 1, 1, 0)["rl_factor"] == math.inf


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 5))
def test_k_anonymity_check(seed, k):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.integers(0, 4, 40), "b": rng.choice(["x", "y"], 40)})
    chk = M.k_anonymity_check(df, ["a", "b"], k)
    sizes = df.groupby(["a", "b"]).size()
    assert chk["min_class_size"] == sizes.min()
    below = sizes[sizes < k].sum()
    assert chk["share_below_k"] == pytest.approx(below / 40)


# ----------------------------------------------------------------- evaluate


def test_evaluate_keys_and_hook(monkeypatch):
    rng = np.random.default_rng(0)
    o = pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"])
    p = o + 0.1
    out = M.evaluate(o, p, ["a", "b"], confidential=["c"])
    for key in ("sse_raw", "sse_normalized", "rl", "corr_loss_mean", "delta_mean_avg"):
        assert isinstance(out[key], float)
    assert set(out["delta_mean"]) == {"a", "b"}

    class R:
        method = "test-hooked"
        roles = {"a": "k-quasi", "b": "k-quasi", "c": "confidential"}
        params = {"k": 2}
        protected_attributes = ["a", "b"]

    calls = []

    def hook(original, protected, result, measures, cache):
        calls.append(measures)
        return {"my_measure": 1.5}

    M.register_method_measures("test-hooked", hook)
    M.register_method_measures("test-hooked", hook)
    out = M.evaluate(o, p, result=R(), measures=("sse", "kanon"))
    assert "k_min_class_size" not in out  # the method does not claim k-anonymity
    monkeypatch.setattr(M, "is_k_anonymous", lambda mid: mid == "test-hooked")
    out = M.evaluate(o, p, result=R(), measures=("sse", "kanon"))
    monkeypatch.undo()
    assert out["my_measure"] == 1.5 and len(calls) == 2
    assert out["k_min_class_size"] == 1 and out["k_share_below"] == 1.0
    assert "rl" not in out
