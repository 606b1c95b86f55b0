"""Issue 27 (§1-2), the second round: each faster path gives exactly what the path it replaced
gave -- the individual-ranking order (radix sort of whole numbers), OLA's frequency set
(hashing instead of sorting the records' keys), the wipe-risk counts (per value instead of
per record), the constant-column check (remembered codes, integer min/max), the missing-row
check (column by column), the small table's checks and the float release's gather.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpstudio.engine import codes
from dpstudio.engine import validation as V
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import ola as OLA
from dpstudio.engine.algorithms.generalization import encode_quasis
from dpstudio.engine.hierarchies.hierarchy import Hierarchy
from dpstudio.engine.transformation import wipe_risks

# ----------------------------------------------------------------------------- ir_order


def _values(kind: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == 0:  # small whole numbers, many ties (one radix pass)
        return rng.integers(-50, 50, n).astype(np.float64)
    if kind == 1:  # a range beyond 2^16 (two passes)
        return (rng.integers(0, 2**20, n) * rng.choice([1, -1], n)).astype(np.float64)
    if kind == 2:  # the widest range of the radix path
        return rng.integers(-(2**31), 2**31 - 1, n).astype(np.float64)
    if kind == 3:  # no whole numbers: the float sort
        return rng.normal(size=n)
    if kind == 4:  # −0 and 0 tie (input order)
        return np.where(rng.random(n) < 0.5, -0.0, 0.0) + rng.integers(0, 3, n) * (rng.random(n) < 0.5)
    if kind == 5:  # near 2^53: whole, but offsets are not exact beyond it
        return rng.integers(2**53 - 100, 2**53, n).astype(np.float64)
    if kind == 6:  # a range of 2^32 or more: the float sort
        return np.concatenate([[0.0, 2.0**32], rng.integers(0, 50, n - 2).astype(np.float64)])
    if kind == 7:  # a range just above 2^16 (two passes)
        return np.concatenate([[0.0, 2.0**16], rng.integers(0, 100_000, n - 2).astype(np.float64)])
    # whole numbers and one fraction: the float sort
    x = rng.integers(0, 9, n).astype(np.float64)
    x[n // 2] = 0.5
    return x


@settings(max_examples=40, deadline=None)
@given(
    kind=st.integers(0, 8),
    n=st.integers(MA._RADIX_MIN - 2, MA._RADIX_MIN + 3000),
    seed=st.integers(0, 2**32 - 1),
)
def test_ir_order_is_the_stable_float_sort(kind, n, seed):
    x = _values(kind, n, np.random.default_rng(seed))
    assert np.array_equal(MA.ir_order(x), np.argsort(x, kind="stable"))


def test_ir_order_takes_the_radix_path():
    # the path is taken (the comparison above would pass with the float sort alone)
    x = np.random.default_rng(1).integers(0, 2**20, 50_000).astype(np.float64)
    calls = []
    real = np.argsort

    def spy(a, *args, **kw):
        calls.append(a.dtype)
        return real(a, *args, **kw)

    try:
        np.argsort = spy
        MA.ir_order(x)
    finally:
        np.argsort = real
    assert calls == [np.dtype(np.uint16), np.dtype(np.uint16)]


# ----------------------------------------------------------------------------- OLA bottom table


def _hier(values: list[str], groups: int) -> Hierarchy:
    rows = [[v, f"g{i % groups}", "*"] for i, v in enumerate(values)]
    return Hierarchy.from_rows(rows, name="x")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ola_frequency_set_is_np_unique(seed):
    # cards large enough that the bottom key range exceeds the dense limit (the hashed path)
    rng = np.random.default_rng(seed)
    n = 3000
    cols = {f"q{j}": [f"v{j}_{i}" for i in range(60)] for j in range(4)}
    df = pd.DataFrame({c: pd.Series(rng.choice(v, n), dtype="str") for c, v in cols.items()})
    hs = {c: _hier(v, 6) for c, v in cols.items()}
    qs = encode_quasis(df, list(cols), hs)
    lat = OLA._Lattice(qs, 5, 0, OLA._make_loss("precision", [q.height for q in qs]))
    assert OLA._combine_lazy([OLA._leaf_codes(q) for q in qs], [q.card(0) for q in qs])[1] > 4 * n + 4096
    key, _, _ = OLA._combine_lazy([OLA._leaf_codes(q) for q in qs], [q.card(0) for q in qs])
    uk, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    assert np.array_equal(lat.record_combo, inv)
    assert np.array_equal(lat.tables[0][1], counts)
    first = np.zeros(len(uk), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    for j, q in enumerate(qs):
        assert np.array_equal(lat.tables[0][0][j], q.codes[0][q.leaf[first]])


# ----------------------------------------------------------------------------- wipe risks


def _wipe_reference(df, c, h, k):
    """The record-wise count the per-value count replaced."""
    from dpstudio.engine.hierarchies.build import factorize_strings

    codes_, labels = factorize_strings(df[c])
    idx = {v: i for i, v in enumerate(h.leaves)}
    leaf = np.array([idx.get(str(v), -1) for v in labels], dtype=np.int64)
    _, inv = h.level_codes(h.height - 2)
    try:
        lv = np.where(codes_ >= 0, inv[np.maximum(leaf, 0)][np.maximum(codes_, 0)], -1)
    except IndexError:  # no value at all (the old path skipped the column)
        return 0
    cnt = np.bincount(lv[lv >= 0]) if lv.size else np.zeros(0, dtype=np.int64)
    return int(cnt[cnt < k].sum())


@settings(max_examples=30, deadline=None)
@given(
    vals=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "zz", None]), min_size=2, max_size=200),
    k=st.integers(2, 40),
    groups=st.integers(1, 3),
)
def test_wipe_risk_counts_per_value_equal_per_record(vals, k, groups):
    df = pd.DataFrame({"x": pd.Series(vals, dtype="str"), "y": pd.Series(["u"] * len(vals), dtype="str")})
    h = _hier(["a", "b", "c", "d", "e"], groups)  # 'zz' is outside the hierarchy
    got = wipe_risks(df, ["x"], k=k, suppression=0.0, hierarchies={"x": h})
    ref = _wipe_reference(df, "x", h, k)
    certain = [r for r in got if r["reason"] == "certain"]
    assert bool(certain) == (ref > 0)
    if certain:
        assert f"{ref:,} records" in certain[0]["text"]


# ----------------------------------------------------------------------------- validation


def test_constant_columns_same_answers():
    s_text = pd.Series(["a"] * 5 + [None], dtype="str")
    codes.factorize(s_text)  # remembered
    df = pd.DataFrame(
        {
            "t1": s_text,
            "t2": pd.Series(["a", "b", "a", "a", "a", "a"], dtype="str"),
            "i1": np.array([2**53, 2**53 + 1, 2**53, 2**53, 2**53, 2**53], dtype=np.int64),  # equal as floats
            "i2": np.array([1, 2, 1, 1, 1, 1], dtype=np.int64),
            "u": np.zeros(6, dtype=np.uint8),
            "o": pd.Series(["a", "a", "a", "a", "a", "b"], dtype=object),
        }
    )
    codes.factorize(df["t2"])
    assert codes.known(df["t1"]) and codes.known(df["t2"])
    got = V.constant_columns(df, list(df.columns))
    ref = [
        c
        for c in df.columns
        if (
            pd.api.types.is_numeric_dtype(df[c])
            and np.nanmin(df[c].to_numpy(np.float64)) == np.nanmax(df[c].to_numpy(np.float64))
        )
        or (not pd.api.types.is_numeric_dtype(df[c]) and df[c].nunique(dropna=True) <= 1)
    ]
    assert got == ref == ["t1", "i1", "u"]


@settings(max_examples=40, deadline=None)
@given(
    cells=st.lists(
        st.lists(
            st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0.0)), min_size=3, max_size=3
        ),
        min_size=2,
        max_size=30,
    )
)
def test_small_block_checks_equal_column_checks(cells):
    df = pd.DataFrame(cells, columns=["a", "b", "c"], dtype=np.float64)
    cols = ["a", "b", "c"]
    X = V.numeric_block(df, cols)
    assert X is not None
    ref_inf = next((c for c in cols if np.isinf(df[c].to_numpy()).any()), None)
    assert V.first_infinite(X, cols) == ref_inf
    ref_miss = np.flatnonzero(df[cols].isna().to_numpy().any(axis=1))
    assert np.array_equal(V.missing_rows(df, cols, matrix=X), ref_miss)
    assert np.array_equal(V.missing_rows(df, cols), ref_miss)
    assert V.constant_columns(df, cols, matrix=X) == V.constant_columns(df, cols)


def test_missing_rows_mixed_columns():
    df = pd.DataFrame(
        {
            "i": np.arange(6),
            "f": [0.0, np.nan, 1.0, 2.0, 3.0, 4.0],
            "t": pd.Series(["a", "b", None, "c", "d", "e"], dtype="str"),
            "o": pd.Series(["a", "b", "c", "d", None, "e"], dtype=object),
            "b": [True, False, True, True, False, True],
        }
    )
    cols = list(df.columns)
    assert V.missing_rows(df, cols).tolist() == [1, 2, 4]
    assert V.missing_rows(df, ["i", "b"]).tolist() == []


# ----------------------------------------------------------------------------- take_rows


def test_take_rows_of_a_float_frame_is_iloc():
    rng = np.random.default_rng(4)
    df = pd.DataFrame(rng.normal(size=(40, 3)), columns=pd.Index(["a", "b", "c"], dtype="str"))
    rows = rng.permutation(40)[:25]
    got = codes.take_rows(df, rows)
    pd.testing.assert_frame_equal(got, df.iloc[rows].reset_index(drop=True), check_exact=True)
    got.iloc[0, 0] = 1e300  # a copy: the input is never changed
    assert df.iloc[rows[0], 0] != 1e300


# ----------------------------------------------------------------------------- float texts


@settings(max_examples=40, deadline=None)
@given(
    tenths=st.lists(st.integers(-(10**11), 10**11), min_size=1, max_size=60),
    others=st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.sampled_from([0.0, -0.0, 1e-4, -1e-4, 5e-5, 1e10, -1e10, 9999999999.9, 0.1, 1e16, 2.5e-7]),
        ),
        max_size=40,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_float_texts_are_numpy_str(tenths, others, seed):
    """The tenths path (decimals of scale 1), the cast path and their mix write what pandas
    writes: numpy's ``str`` of each value, NaN as nothing.
    """
    import pyarrow as pa

    from dpstudio.engine.io.writing import _float_texts

    v = np.array([t / 10.0 for t in tenths] + list(others), dtype=np.float64)
    v = v[np.random.default_rng(seed).permutation(v.size)]
    got = _float_texts(pa.array(v)).to_pylist()
    assert got == [None if np.isnan(x) else str(x) for x in v]


# ----------------------------------------------------------------------------- integer columns


@settings(max_examples=40, deadline=None)
@given(
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=30),
    odd=st.lists(
        st.sampled_from(
            ["+5", "007", "-0", " 5", "5 ", "0", "NA", "", "1.0", "True", "9223372036854775808", "x"]
        ),
        max_size=3,
    ),
    seed=st.integers(0, 2**32 - 1),
)
@example(ints=[5, -3], odd=["007"], seed=0)
@example(ints=[5, -3], odd=["-0"], seed=0)
@example(ints=[5, -3], odd=["+5"], seed=0)
def test_long_integer_columns_typed_as_the_per_value_path(ints, odd, seed):
    """The canonical-int64 fast path of _convert_large: the same values and keep flag as the
    per-value path, and the same answer as without it (odd texts fall through to it).
    """
    from dpstudio.engine.io import convert as C

    rng = np.random.default_rng(seed)
    texts = [str(i) for i in rng.choice(np.array(ints, dtype=object), 600)] + odd
    texts = [texts[i] for i in rng.permutation(len(texts))]
    s = pd.Series(texts, dtype="str")
    got = C._convert_large(s, ".", False)
    ref_vals, ref_keep = C._convert_column(np.asarray(texts, dtype=object), ".", False)
    if got is None:  # the per-value path decides
        return
    vals, keep = got
    assert keep == ref_keep
    if isinstance(ref_vals, np.ndarray) and ref_vals.dtype.kind in "iuf":
        assert np.array_equal(np.asarray(vals), ref_vals, equal_nan=ref_vals.dtype.kind == "f")
    else:
        assert pd.Series(vals).astype(object).where(pd.notna(pd.Series(vals)), None).tolist() == [
            None if (v is None or (isinstance(v, float) and np.isnan(v))) else v for v in ref_vals
        ]
