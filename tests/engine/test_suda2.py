"""SUDA2 against sdcMicro 5.8.1 (free1 and random tables), a brute-force MSU oracle, properties."""

from __future__ import annotations

import json
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.errors import Cancelled, DPStudioError, ParameterError, ParameterTypeError
from dpstudio.engine.measures.suda2 import (
    dis_scores,
    sdcmicro_codes,
    sdcmicro_unique_and_pair_counts,
    suda2,
)

ROOT = Path(__file__).resolve().parents[2]
FREE1 = ROOT / "resources" / "free1"
SUDA_REF = ROOT / "resources" / "suda2_reference"
KEYS = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]


@pytest.fixture(scope="module")
def free1():
    return pd.read_csv(FREE1 / "free1.csv")


def rel_err(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    both0 = (a == 0) & (b == 0)
    return np.where(both0, 0.0, np.abs(a - b) / np.maximum(np.abs(b), 1e-300))


# --------------------------------------------------------------------------- sdcMicro


def test_free1_every_record_equals_sdcmicro(free1):
    ref = pd.read_csv(FREE1 / "free1_suda2_per_record.csv")
    tot = json.loads((FREE1 / "free1_toolbox_reference.json").read_text())
    r = suda2(free1, KEYS, dis_fraction=0.01)
    assert np.array_equal(r.score, ref["suda_score"].to_numpy(float))
    assert rel_err(r.dis, ref["suda_dis"]).max() <= 1e-9
    d = r.to_dict()
    assert d["records_with_msu"] == tot["suda_records_with_score"] == 510
    assert d["score_sum"] == tot["suda_score_sum"]
    assert math.isclose(d["dis_sum"], tot["suda_dis_sum"], rel_tol=1e-9)
    assert math.isclose(d["dis_max"], tot["suda_dis_max"], rel_tol=1e-9)
    assert r.complete


def _ref_cases():
    meta = SUDA_REF / "cases.json"
    if not meta.exists():
        return []
    return sorted(json.loads(meta.read_text()).items())


@pytest.mark.parametrize("name,case", _ref_cases(), ids=[c[0] for c in _ref_cases()])
def test_random_tables_equal_sdcmicro(name, case):
    """Missing keys, DisFraction 0.01..0.9, 1 to 10 keys, text keys (scripts/make_suda2_reference.R)."""
    d = pd.read_csv(SUDA_REF / f"{name}.csv", keep_default_na=True)
    r = suda2(d, case["keys"], dis_fraction=case["dis_fraction"])
    assert np.array_equal(r.score, d["suda_score"].to_numpy(float)), name
    assert rel_err(r.dis, d["suda_dis"]).max() <= 1e-9, name


def test_reference_cases_present():
    assert len(_ref_cases()) >= 5


# --------------------------------------------------------------------------- oracle


def brute_force(df: pd.DataFrame, keys: list[str], max_size: int | None = None):
    """MSUs by their definition: every subset of keys, every record, support by comparison."""
    X = df[keys].to_numpy(dtype=object)
    n, m = X.shape
    M = max(m, 3)
    miss = pd.isna(df[keys]).to_numpy()
    K = m if max_size is None else max_size

    def support(r, S):
        if any(miss[r, j] for j in S):
            return None
        return sum(all((not miss[q, j]) and X[q, j] == X[r, j] for j in S) for q in range(n))

    score = np.zeros(n)
    msus = {r: set() for r in range(n)}
    for r in range(n):
        for s in range(1, K + 1):
            for S in combinations(range(m), s):
                if support(r, S) != 1:
                    continue
                if all((support(r, T) or 0) > 1 for T in combinations(S, s - 1)) or s == 1:
                    score[r] += math.factorial(M - s)
                    msus[r].add(tuple(keys[j] for j in S))
    return score, msus


def random_table(rng, n, m, na, card_hi=4):
    cols = {}
    for j in range(m):
        c = rng.integers(1, card_hi + 1)
        x = rng.integers(0, c, n).astype(float)
        x[rng.random(n) < na] = np.nan
        cols[f"k{j}"] = x
    return pd.DataFrame(cols)


@pytest.mark.parametrize("seed", range(40))
def test_brute_force_oracle(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 26))
    m = int(rng.integers(1, 6))
    df = random_table(rng, n, m, na=[0.0, 0.1, 0.3][seed % 3])
    keys = list(df.columns)
    want, want_msus = brute_force(df, keys)
    got = suda2(df, keys)
    assert np.array_equal(got.score, want), (seed, got.score, want)
    for r in range(n):
        assert set(got.msus_of(r)) == want_msus[r]
    # with a size limit: the MSUs of at most that size
    K = int(rng.integers(1, m + 1))
    want_k, _ = brute_force(df, keys, max_size=K)
    assert np.array_equal(suda2(df, keys, max_size=K).score, want_k)


def test_oracle_sees_a_known_table():
    # record 0 is unique on a=1 (1-MSU); record 3 on (a=2, b=1) only
    df = pd.DataFrame({"a": [1, 2, 2, 2, 3, 3], "b": [0, 0, 2, 1, 1, 2], "c": [5, 5, 5, 5, 5, 5]})
    r = suda2(df, ["a", "b", "c"])
    assert r.msus_of(0) == [("a",)]
    assert r.msus_of(3) == [("a", "b")]
    assert r.score[0] == math.factorial(2) and r.score[3] == math.factorial(1)


# --------------------------------------------------------------------------- properties


def test_row_order_and_labels_do_not_change_scores(free1):
    base = suda2(free1, KEYS)
    rng = np.random.default_rng(5)
    perm = rng.permutation(len(free1))
    shuffled = suda2(free1.iloc[perm].reset_index(drop=True), KEYS)
    assert np.array_equal(shuffled.score, base.score[perm])
    relabeled = free1.copy()
    relabeled["AGE"] = "age" + relabeled["AGE"].astype(str)
    other = suda2(relabeled, KEYS)
    assert np.array_equal(other.score, base.score)
    # DIS depends on labels only through sdcMicro's single-precision rounding
    assert rel_err(other.dis, base.dis).max() < 1e-6


def test_duplicates_and_missing_have_no_msu():
    df = pd.DataFrame({"a": [1, 1, 2, np.nan], "b": [1, 1, 3, 3], "c": [0, 0, 0, 0]})
    r = suda2(df, ["a", "b", "c"])
    assert r.score[0] == r.score[1] == 0  # a duplicated record has no MSU
    # record 3 shares b=3 with record 2; its missing a matches nothing and is no MSU item
    assert r.msus_of(3) == [] and r.msus_of(2) == [("a",)]


def test_max_size_is_a_lower_bound_and_complete_when_large(free1):
    full = suda2(free1, KEYS)
    prev = np.zeros(len(free1))
    for K in range(1, len(KEYS) + 1):
        part = suda2(free1, KEYS, max_size=K)
        assert np.all(part.score >= prev) and np.all(part.score <= full.score)
        prev = part.score
    assert np.array_equal(prev, full.score)
    assert not suda2(free1, KEYS, max_size=3).complete


def test_dis_is_a_probability_and_increases_with_score(free1):
    r = suda2(free1, KEYS, dis_fraction=0.2)
    assert np.all((r.dis >= 0) & (r.dis <= 1))
    pos = r.score > 0
    order = np.argsort(r.score[pos])
    assert np.all(np.diff(r.dis[pos][order]) >= 0)
    assert np.all(r.dis[~pos] == 0)


def test_sdcmicro_hash_quirk():
    # (1,0,0) and (0,2,0) share the 16-bit hash bucket: sdcMicro counts neither as unique
    v = np.array([[1, 0, 0], [0, 2, 0], [5, 5, 5], [5, 5, 5], [7, 7, 7]])
    assert sdcmicro_unique_and_pair_counts(v) == (1, 2)
    # the DIS formula does not depend on U except for single-precision rounding
    s = np.array([0.0, 2.0, 6.0, 1.0])
    a = dis_scores(s, U=1, P=40, dis_fraction=0.05, M=6)
    b = dis_scores(s, U=0, P=40, dis_fraction=0.05, M=6)
    assert rel_err(a, b).max() < 1e-6 and a[0] == 0


def test_sdcmicro_codes():
    df = pd.DataFrame(
        {"x": [1.9, -1.9, np.nan, 3e10], "t": ["b", "a", None, "b"], "f": [True, False, True, True]}
    )
    v = sdcmicro_codes(df, ["x", "t", "f"])
    assert v[:, 0].tolist() == [1, -1, -(2**31), -(2**31)]
    assert v[:, 1].tolist() == [2, 1, -(2**31), 2]
    assert v[:, 2].tolist() == [1, 0, 1, 1]
    assert sdcmicro_codes(df, ["x"]).shape == (4, 3)  # padded with dummy keys of 1


def test_top_records_and_msus(free1):
    r = suda2(free1, KEYS)
    top = r.top_records(10)
    assert len(top) == 10
    dis = r.dis[top]
    assert np.all(np.diff(dis) <= 0) and dis[0] == r.dis.max()
    for i in top:
        ms = r.msus_of(i)
        assert ms and sum(math.factorial(6 - len(t)) for t in ms) == r.score[i]


def test_cancel_and_progress(free1):
    seen = []

    def stop():
        if len(seen) > 3:
            raise Cancelled()

    with pytest.raises(Cancelled):
        suda2(free1, KEYS, progress=seen.append, check_cancel=lambda: (seen.append(-1), stop()))
    out = []
    suda2(free1, KEYS, progress=out.append)
    assert out[-1] == 1.0 and all(0 <= p <= 1 for p in out)


# --------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, float("nan"), float("inf"), 10**6])
def test_dis_fraction_out_of_range(free1, bad):
    with pytest.raises(ParameterError, match="suda_dis_fraction"):
        suda2(free1, KEYS, dis_fraction=bad)


@pytest.mark.parametrize("bad", ["abc", True, [0.1], None])
def test_dis_fraction_wrong_type(free1, bad):
    with pytest.raises(ParameterTypeError, match="suda_dis_fraction"):
        suda2(free1, KEYS, dis_fraction=bad)


@pytest.mark.parametrize("bad", [0, -1, 7, 10**6, 10**30])
def test_max_size_out_of_range(free1, bad):
    with pytest.raises(ParameterError, match=r"suda_max_size.*\[1, 6\]"):
        suda2(free1, KEYS, max_size=bad)


@pytest.mark.parametrize("bad", [2.5, "x", True, float("nan")])
def test_max_size_wrong_type(free1, bad):
    with pytest.raises(ParameterTypeError, match="suda_max_size"):
        suda2(free1, KEYS, max_size=bad)


def test_bad_keys(free1):
    for keys in ([], ["SEX", "SEX"], ["NOPE"]):
        with pytest.raises(DPStudioError):
            suda2(free1, keys)
    with pytest.raises(DPStudioError, match="no records"):
        suda2(free1.iloc[:0], KEYS)
    wide = pd.DataFrame({f"c{j}": [0, 1] for j in range(63)})
    with pytest.raises(ParameterError, match="at most 62"):
        suda2(wide, list(wide.columns))


def test_single_record_and_all_missing():
    one = pd.DataFrame({"a": [1], "b": [2], "c": [np.nan]})
    r = suda2(one, ["a", "b", "c"])
    assert r.msus_of(0) == [("a",), ("b",)]
    allna = pd.DataFrame({"a": [np.nan, np.nan, 1.0], "b": [np.nan, 2.0, 2.0]})
    assert np.all(np.isfinite(suda2(allna, ["a", "b"]).dis))
