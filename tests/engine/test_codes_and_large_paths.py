"""Large files on codes, not strings (issue 27.1): every fast path gives exactly what the path
it replaced gave -- the text columns' codes (engine.codes), the data digest's text hashes, the
keyed sort keys of sparse ids, the typing of long columns through their distinct texts, the
CSV writer's blocks, OLA's coded labels and the k-eps release built from them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import codes, keying
from dpstudio.engine import io as dio
from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.io import convert as dconv
from dpstudio.engine.io import reading, writing

TEXTS = st.sampled_from(["a", "b", "Zürich", "", " a", "1", "1.0", "NA", "x;y", "日本"])
DTYPES = ["str", "string", "string[pyarrow]", "object", "category"]


def _series(vals, dtype):
    s = pd.Series(vals, dtype=object)
    return s if dtype == "object" else s.astype(dtype)


@settings(max_examples=80, deadline=None)
@given(
    vals=st.lists(st.one_of(TEXTS, st.none()), max_size=60),
    dtype=st.sampled_from(DTYPES),
    rows=st.lists(st.integers(0, 59), max_size=80),
)
def test_codes_are_pandas_factorize_and_take_is_iloc(vals, dtype, rows):
    s = _series(vals, dtype)
    got_c, got_u = codes.factorize(s)
    ref_c, ref_u = pd.factorize(s, use_na_sentinel=True)
    assert np.array_equal(got_c, ref_c)
    pd.testing.assert_index_equal(got_u, ref_u)
    again_c, _ = codes.factorize(s)  # remembered (Arrow-backed columns): the same answer
    assert np.array_equal(again_c, ref_c)
    rows = [r for r in rows if r < len(s)]
    t = codes.take(s, rows)
    pd.testing.assert_series_equal(t, s.iloc[rows].reset_index(drop=True))
    # the gathered column's own codes are factorize's too
    tc, tu = codes.factorize(t)
    rc, ru = pd.factorize(t, use_na_sentinel=True)
    assert np.array_equal(tc, rc)
    pd.testing.assert_index_equal(tu, ru)


def test_take_rows_and_from_codes():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "t": pd.Series(rng.choice(["x", "y", None], 500), dtype="str"),
            "i": rng.integers(0, 9, 500),
            "o": pd.Series(rng.choice(["p", "q"], 500), dtype=object),
        }
    )
    codes.factorize(df["t"])
    rows = rng.permutation(500)[:321]
    pd.testing.assert_frame_equal(codes.take_rows(df, rows), df.iloc[rows].reset_index(drop=True))
    c = rng.integers(0, 4, 1000)
    s = codes.from_codes(c, ["b", "a", "c", "unused"])
    assert s.tolist() == [["b", "a", "c", "unused"][i] for i in c]
    assert s.dtype == pd.Series([], dtype=str).dtype
    k, u = codes.factorize(s)
    rk, ru = pd.factorize(s, use_na_sentinel=True)
    assert np.array_equal(k, rk)
    pd.testing.assert_index_equal(u, ru)


def test_the_reader_remembers_the_codes_it_computed(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "_ARROW_MIN_BYTES", 0)
    p = tmp_path / "t.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame({"sex": rng.choice(["Male", "Female"], 3000), "n": rng.integers(0, 5, 3000)}).to_csv(
        p, index=False
    )
    df, _ = dio.read_table(p)
    assert codes._recall(df["sex"])[1] is not None  # seeded by the reader: not hashed again
    k, u = codes.factorize(df["sex"])
    rk, ru = pd.factorize(df["sex"], use_na_sentinel=True)
    assert np.array_equal(k, rk)
    pd.testing.assert_index_equal(u, ru)


def _old_column_hash(s):
    from pandas.util import hash_array

    return np.asarray(
        hash_array(np.asarray(s.astype(object).map(str).to_numpy(), dtype=object)), dtype=np.uint64
    )


@settings(max_examples=80, deadline=None)
@given(
    vals=st.lists(st.one_of(TEXTS, st.none(), st.just(float("nan"))), max_size=50),
    dtype=st.sampled_from(DTYPES),
)
def test_text_hash_through_distinct_values_is_the_per_value_hash(vals, dtype):
    s = _series(vals, dtype)
    assert np.array_equal(keying._column_hash(s), _old_column_hash(s))


def test_text_hash_of_mixed_objects_and_number_like_categoricals():
    for s in (
        pd.Series([1, "1", 1.0, True, None], dtype=object),
        pd.Series(pd.Categorical([1, 2, 1])),
        pd.Series([pd.NA, "a", float("nan"), None], dtype=object),
    ):
        assert np.array_equal(keying._column_hash(s), _old_column_hash(s))


@pytest.mark.parametrize("n,p", [(5000, 0.96), (5000, 0.5), (4000, 0.05), (3000, 1.0)])
def test_sort_keys_of_increasing_ids_are_the_words_of_each_id(n, p):
    stream = K.KeyedStream((11, 22), K.PURPOSE_SHUFFLE, 0)
    ids = np.flatnonzero(np.random.default_rng(n).random(n) < p)
    w = stream.block(ids, 1, 0)
    ref = K.philox_block(stream.key, ids.astype(np.uint64) + np.uint64(1), 1, 0, 0)
    assert np.array_equal(w, ref)
    k0, k1 = K.sort_keys(stream, ids)
    assert np.array_equal(K.order_by_keys(k0, k1), np.lexsort((k1, k0)))


def test_order_by_keys_breaks_ties_by_the_second_key():
    k0 = np.array([5, 3, 5, 1], dtype=np.uint64)
    k1 = np.array([2, 9, 1, 0], dtype=np.uint64)
    assert K.order_by_keys(k0, k1).tolist() == np.lexsort((k1, k0)).tolist() == [3, 1, 2, 0]


def test_distinct_typing_equals_the_per_value_path(monkeypatch):
    """io.convert._convert through the distinct texts of every column (the share forced to 1) gives
    what the per-value path gives, on test_io_convert_fast's nasty columns."""
    from tests.engine import test_io_convert_fast as F

    monkeypatch.setattr(dconv, "_DISTINCT_SHARE", 1.0)
    calls = []
    real = dconv._typed_texts

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(dconv, "_typed_texts", spy)
    for dec, explicit in ((".", False), (",", False), (",", True)):
        raw = F._frame(0)
        got, got_keep = dconv._convert(raw, dec, explicit)
        ref, ref_keep = F._reference(raw, dec, explicit)
        pd.testing.assert_frame_equal(got, ref, check_dtype=True, check_exact=True)
        assert sorted(got_keep) == sorted(ref_keep)
        for c in ref_keep:
            assert got_keep[c].tolist() == ref_keep[c].tolist(), c
    assert len(calls) >= len(F.COLUMNS)  # the distinct route was taken


@pytest.mark.parametrize("enc", ["utf-8", "utf-8-sig", "cp1252", "utf-16"])
@pytest.mark.parametrize("lt", ["\n", "\r\n"])
def test_csv_blocks_are_pandas_bytes_at_any_block_size(enc, lt):
    rng = np.random.default_rng(2)
    n = 2345
    df = pd.DataFrame(
        {
            "a": pd.Series(rng.choice(["x", "yy", "Zürich", ""], n), dtype=str).mask(rng.random(n) < 0.1),
            "b": rng.integers(-5, 10**12, n),
            "c": pd.Series(rng.choice(["p", "q"], n), dtype=object),
            "d": rng.integers(0, 3, n).astype(np.uint8),
        }
    )
    ref = df.to_csv(None, sep=";", index=False, lineterminator=lt).encode(enc)
    for rows in (1, 7, 1000, 10**6):
        got = b"".join(bytes(b) for b in writing._csv_blocks(df, ";", lt, enc, block_rows=rows))
        assert got == ref, rows


def test_a_field_needing_quotes_in_a_late_block_sends_the_file_to_pandas(tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "_CSV_BLOCK_ROWS", 100)
    n = 1000
    vals = ["plain"] * n
    vals[-3] = 'has "quote"'
    df = pd.DataFrame({"a": pd.Series(vals, dtype=str), "b": np.arange(n)})
    out = tmp_path / "o.csv"
    dio.write_table(df, out)
    assert out.read_bytes() == df.to_csv(None, index=False, lineterminator="\n").encode()


def test_ola_coded_labels_are_the_labels():
    from dpstudio.engine.algorithms.generalization import CodedLabels
    from dpstudio.engine.algorithms.ola import ola

    rng = np.random.default_rng(4)
    df = pd.DataFrame({"a": rng.integers(18, 80, 400), "s": rng.choice(["M", "F"], 400)})
    res = ola(df, ["a", "s"], 5, suppression=0.05)
    assert isinstance(res.labels, CodedLabels)
    for c in ("a", "s"):
        lab = res.labels[c]
        codes_ = res.labels.codes_of(c)
        cats = list(res.labels.categories[c])
        assert [None if k < 0 else cats[k] for k in codes_] == list(lab)
        assert ((codes_ < 0) == (res.class_id < 0)).all()
    assert set(res.labels) == {"a", "s"} and len(res.labels) == 2
