"""Issue 27 §1, session 8 (k-eps on Adult × 100): the reader's quote/NUL scan into one reused
buffer, the typing of long text columns through the dictionary of their chunks as read (no
copy into one array), and the small-code counts of the generalisation's encoding, OLA's
frequency set and the wipe risks -- each against the plain computation it replaces.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import codes as C
from dpstudio.engine import io as dio
from dpstudio.engine.errors import InputError
from dpstudio.engine.hierarchies.build import code_counts, factorize_strings
from dpstudio.engine.io import convert, ragged, reading
from tests.engine.test_io_arrow_reader import same_read

# ----------------------------------------------------------------------------- the scan


def _plain_scan(data: bytes) -> tuple[bool, bool]:
    return b'"' in data, b"\x00" in data


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(0, 300),
    quote_at=st.one_of(st.none(), st.integers(0, 299)),
    nul_at=st.one_of(st.none(), st.integers(0, 299)),
    block=st.integers(1, 64),
)
def test_scan_finds_quotes_and_nuls_wherever_they_are(tmp_path_factory, size, quote_at, nul_at, block):
    data = bytearray(b"a;b\n" * (size // 4 + 1))[:size]
    if quote_at is not None and quote_at < size:
        data[quote_at] = ord('"')
    if nul_at is not None and nul_at < size:
        data[nul_at] = 0
    path = tmp_path_factory.mktemp("s") / "t.csv"
    path.write_bytes(bytes(data))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ragged, "_SCAN_BLOCK", block)  # every block edge, a partial last block
        assert ragged._scan(str(path)) == _plain_scan(bytes(data))
    finally:
        mp.undo()


def test_scan_of_an_empty_file_and_at_the_default_block(tmp_path):
    p = tmp_path / "e.csv"
    p.write_bytes(b"")
    assert ragged._scan(str(p)) == (False, False)
    p.write_bytes(b"x" * (ragged._SCAN_BLOCK + 5) + b'"')  # past one whole block
    assert ragged._scan(str(p)) == (True, False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_input_is_refused_unopened(tmp_path):
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    out: list = []

    def read() -> None:
        try:
            dio.read_table(str(fifo))
        except InputError as exc:
            out.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert out and "in.csv" in str(out[0])


# ------------------------------------------------- long text columns typed from their chunks


def _series_of_chunks(values: list[str], cuts: list[int]) -> pd.Series:
    """A text column holding an Arrow array in the chunks given (as the reader's frame does)."""
    edges = sorted({0, len(values), *[c % (len(values) + 1) for c in cuts]})
    chunks = [pa.array(values[a:b], type=pa.large_string()) for a, b in zip(edges[:-1], edges[1:])]
    arr = pa.chunked_array(chunks, type=pa.large_string())
    dtype = pd.Series([], dtype="str").dtype
    s = pd.Series(type(pd.array([], dtype=dtype))(arr, dtype=dtype))
    assert C._arrow_of(s) is not None and C._arrow_of(s).num_chunks == len(chunks)
    return s


def _plain(values) -> list:
    """The values as a list, every missing value as None (NaN is not equal to itself)."""
    return [None if pd.isna(v) else (type(v).__name__, v) for v in pd.Series(values).astype(object)]


VALUES = st.sampled_from(["a", "b", "Zürich", "007", "12", "-3", "", "NA", "x y", "TRUE", "1.5", "b "])


@settings(max_examples=60, deadline=None)
@given(
    pool=st.lists(VALUES, min_size=1, max_size=6, unique=True),
    picks=st.lists(st.integers(0, 5), min_size=501, max_size=900),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_typing_from_the_chunks_is_the_typing_of_one_array(pool, picks, cuts):
    values = [pool[i % len(pool)] for i in picks]
    chunked = _series_of_chunks(values, cuts)
    one = _series_of_chunks(values, [])
    for dec, explicit in ((".", False), (",", False), (",", True)):
        got = convert._convert_long(chunked, dec, explicit)
        want = convert._convert_long(one, dec, explicit)
        ref = convert._convert_column(np.asarray(values, dtype=object), dec, explicit)
        gv = _plain(got[0])
        assert gv == _plain(want[0])
        assert gv == _plain(ref[0])  # the per-value path
        assert pd.Series(got[0]).dtype == pd.Series(want[0]).dtype
        assert (got[1] is None) == (want[1] is None) == (not ref[1])
        if got[1] is not None:
            assert list(got[1]) == list(want[1]) == values
    # the codes remembered for the chunked column are pandas' factorize of it
    if C.known(chunked):
        codes, uniques = C.factorize(chunked)
        pc_, pu = pd.factorize(chunked, use_na_sentinel=True)
        assert codes.tolist() == pc_.tolist() and list(uniques) == list(pu)


# ------------------------------- the reader on files of many blocks (Arrow) against pandas


FIELDS = st.sampled_from(
    ["1", "2", "-3", "007", "1.50", "NA", "", "TRUE", "abc", "Zürich", " x ", "1e3", "+7"]
)


def _read(path, mp, threshold, block):
    mp.setattr(reading, "_ARROW_MIN_BYTES", threshold)
    mp.setattr(reading, "_ARROW_BLOCK_BYTES", block)
    try:
        return dio.read_table(path)
    except (InputError, UnicodeError, ValueError) as exc:
        return exc


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.lists(FIELDS, min_size=3, max_size=3), min_size=1, max_size=12),
    reps=st.integers(50, 120),
    sep=st.sampled_from([",", ";", "\t"]),
    lt=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    enc=st.sampled_from(["utf-8", "latin-1"]),
    block=st.integers(64, 4096),
    hostile=st.sampled_from(["", "ragged", "quoted-newline", "bad-byte", "nul"]),
)
def test_many_blocks_read_as_pandas_reads(tmp_path_factory, rows, reps, sep, lt, bom, enc, block, hostile):
    body = [sep.join(r) for r in rows if not any(sep in f for f in r)] * reps
    if not body:
        return
    lines = [sep.join(["a", "b", "c"])] + body
    if hostile == "ragged":
        lines.insert(len(lines) // 2, sep.join(["1", "2"]))
    elif hostile == "quoted-newline":
        lines.insert(len(lines) // 2, sep.join(['"x\ny"', "1", "2"]))
    raw = (lt.join(lines) + lt).encode(enc, errors="replace")
    if hostile == "bad-byte":
        raw = raw[: len(raw) // 2] + b"\xff\xfe" + raw[len(raw) // 2 :]
    elif hostile == "nul":
        raw = raw[: len(raw) // 2] + b"\x00" + raw[len(raw) // 2 :]
    path = tmp_path_factory.mktemp("r") / "t.csv"
    path.write_bytes((b"\xef\xbb\xbf" if bom and enc == "utf-8" else b"") + raw)
    mp = pytest.MonkeyPatch()
    try:
        a = _read(path, mp, 0, block)  # Arrow, a column in many chunks
        b = _read(path, mp, 10**18, block)  # pandas
    finally:
        mp.undo()
    if not same_read(a, b):
        return
    da = a[0]
    for c in da.columns:  # remembered codes are pandas' factorize of the column
        if C.known(da[c]):
            codes, uniques = C.factorize(da[c])
            pc_, pu = pd.factorize(da[c], use_na_sentinel=True)
            assert codes.tolist() == pc_.tolist() and list(uniques) == list(pu), c


def test_an_empty_file_is_refused_with_one_line(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        dio.read_table(str(p))


# ------------------------------------------- small codes: counts, encoding, OLA's combination


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 40_000),
    dtype=st.sampled_from([np.int8, np.int16, np.int32, np.int64]),
    data=st.data(),
)
def test_code_counts_is_bincount_of_the_codes_present(n, dtype, data):
    n = min(n, int(np.iinfo(dtype).max) + 1)
    codes = np.asarray(data.draw(st.lists(st.integers(-1, n - 1), min_size=0, max_size=300)), dtype=dtype)
    want = np.bincount(codes[codes >= 0].astype(np.int64), minlength=n)[:n]
    got = code_counts(codes, n)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["str", object])
def test_small_codes_give_the_same_encoding_and_wipe_risks(dtype):
    from dpstudio.engine.algorithms.generalization import encode_quasis
    from dpstudio.engine.algorithms.ola import ola
    from dpstudio.engine.transformation import wipe_risks

    rng = np.random.default_rng(3)
    n = 5_000
    df = pd.DataFrame(
        {
            "sex": rng.choice(["M", "F", " M"], n),  # ' M' and 'M': one canonical label
            "region": rng.choice([f"r{i}" for i in range(200)], n),  # int16 codes
            "age": rng.integers(17, 90, n),
        }
    )
    df["sex"] = df["sex"].astype(dtype)
    df["region"] = df["region"].astype(dtype)
    codes_small, lab_s = factorize_strings(df["region"], small=True)
    codes_big, lab_b = factorize_strings(df["region"])
    assert codes_big.dtype == np.int64
    assert codes_small.tolist() == codes_big.tolist() and list(lab_s) == list(lab_b)
    qs = encode_quasis(df, ["sex", "region", "age"])
    for q in qs:  # the leaf indices are those of the int64 codes
        codes, labels = factorize_strings(df[q.name])
        index = {v: i for i, v in enumerate(q.hierarchy.leaves)}
        lut = np.array([index[str(v)] for v in labels])
        assert q.leaf.tolist() == lut[codes].tolist()
    g = ola(df, ["sex", "region", "age"], 20, suppression=0.1, quasis=qs)
    assert g.min_class_size >= 20
    risks = wipe_risks(df, ["sex", "region", "age"], k=60, suppression=0.01)
    plain = df.copy()
    for c in ("sex", "region"):  # object columns: pandas' int64 codes, never remembered
        plain[c] = df[c].astype(object)
    assert risks == wipe_risks(plain, ["sex", "region", "age"], k=60, suppression=0.01)
    assert any(r["reason"] == "certain" for r in risks) and len(risks) >= 2


def test_ola_leaf_codes_with_and_without_the_identity_level():
    from dpstudio.engine.algorithms import ola as O

    class Q:
        def __init__(self, lut, leaf):
            self.codes = [lut]
            self.leaf = leaf

    leaf = np.array([2, 0, 1, 1, 2], dtype=np.int8)
    ident = O._leaf_codes(Q(np.arange(3), leaf))()
    perm = O._leaf_codes(Q(np.array([2, 0, 1]), leaf))()
    assert ident.tolist() == leaf.tolist()
    assert perm.tolist() == [1, 2, 0, 0, 1]
    key, rng_, exact = O._combine_lazy([O._leaf_codes(Q(np.arange(3), leaf)), O._const(leaf)], [3, 3])
    assert key.dtype == np.int64 and key.tolist() == (leaf.astype(np.int64) * 3 + leaf).tolist()
