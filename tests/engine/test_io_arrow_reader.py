"""Large CSV files are parsed by Arrow (issue 27.1): the same frame, the same texts kept
aside, the same errors as pandas' parser gives.  The reader's own tests run again here with
Arrow taking every file it can (the size threshold set to 0), and a property test compares
both parsers on generated files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import io as dio
from dpstudio.engine.errors import InputError
from dpstudio.engine.io import reading

# the reader's tests, collected again in this module (with the fixture below)
from tests.engine.test_decimal_ambiguity import *  # noqa: F403,F401
from tests.engine.test_hostile_inputs import *  # noqa: F403,F401
from tests.engine.test_io_export import *  # noqa: F403,F401
from tests.engine.test_io_fidelity import *  # noqa: F403,F401
from tests.engine.test_io_ragged_fast import *  # noqa: F403,F401


@pytest.fixture(autouse=True)
def _arrow_for_every_file(monkeypatch):
    monkeypatch.setattr(reading, "_ARROW_MIN_BYTES", 0)
    calls = []
    real = reading._arrow_frame

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(reading, "_arrow_frame", spy)
    return calls


def _read_both(path, monkeypatch, **kw):
    """(frame, meta) by Arrow and by pandas (or the exception each raised)."""
    out = []
    for threshold in (0, 10**18):
        monkeypatch.setattr(reading, "_ARROW_MIN_BYTES", threshold)
        try:
            out.append(dio.read_table(path, **kw))
        except (InputError, UnicodeError, ValueError) as exc:
            out.append(exc)
    return out


def same_read(a, b, *, fields=()) -> bool:
    """Two reads of one file (``(frame, meta)`` or the exception raised) are the same: the
    same error, or the same frame, dtypes, kept texts and ``fields`` of the metadata.  False
    when both failed (nothing more to compare)."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return False
    (da, ma), (db, mb) = a, b
    pd.testing.assert_frame_equal(da, db, check_exact=True)
    assert list(da.dtypes) == list(db.dtypes)
    for f in fields:
        assert getattr(ma, f) == getattr(mb, f), f
    assert sorted(ma.texts) == sorted(mb.texts)
    for c in ma.texts:
        assert list(ma.texts[c]) == list(mb.texts[c]), c
    return True


def _same(a, b) -> None:
    same_read(a, b, fields=("sep", "encoding", "decimal", "n_rows", "lineterminator"))


FIELDS = st.sampled_from(
    [
        "1",
        "2",
        "-3",
        "007",
        "1.50",
        "2.5",
        "1e3",
        "NA",
        "",
        "null",
        "TRUE",
        "false",
        "abc",
        "Zürich",
        " x ",
        "\t",
        "1,5",
        "1.234",
        "inf",
        "nan",
        "99999999999999999999",
        "+7",
        "\xa01",
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    rows=st.lists(st.lists(FIELDS, min_size=3, max_size=3), min_size=1, max_size=40),
    sep=st.sampled_from([",", ";", "\t", "|"]),
    lt=st.sampled_from(["\n", "\r\n", "\r"]),
    blank=st.sampled_from(["", "\n", "   \n", "\t\n"]),
    header=st.booleans(),
    bom=st.booleans(),
    enc=st.sampled_from(["utf-8", "latin-1"]),
)
def test_arrow_and_pandas_read_the_same(tmp_path_factory, rows, sep, lt, blank, header, bom, enc):
    mp = pytest.MonkeyPatch()
    try:
        path = tmp_path_factory.mktemp("f") / "t.csv"
        lines = ([sep.join(["a", "b", "c"])] if header else []) + [
            sep.join(f for f in r) for r in rows if not any(sep in f for f in r)
        ]
        if len(lines) < 1:
            return
        text = lt.join(lines[:1] + ([blank.rstrip("\n")] if blank else []) + lines[1:]) + lt
        raw = text.encode(enc, errors="replace")
        path.write_bytes((b"\xef\xbb\xbf" if bom and enc == "utf-8" else b"") + raw)
        a, b = _read_both(path, mp)
        _same(a, b)
    finally:
        mp.undo()


def test_arrow_parses_a_plain_file_and_falls_back_where_pandas_decides(tmp_path, _arrow_for_every_file):
    calls = _arrow_for_every_file
    plain = tmp_path / "plain.csv"
    plain.write_text("a;b;c\n1;x;2.5\n3;y;\n")
    df, meta = dio.read_table(plain)
    assert calls == [True] and df["a"].tolist() == [1, 3] and df["b"].tolist() == ["x", "y"]
    # a line of blanks only: pandas skips it, Arrow would see a row of one field -> pandas
    blanks = tmp_path / "blanks.csv"
    blanks.write_text("a;b\n1;x\n   \n2;y\n")
    df, _ = dio.read_table(blanks)
    assert calls[-1] is False and df["a"].tolist() == [1, 2]
    # a file with quotes never goes to Arrow; with one column Arrow declines it
    n = len(calls)
    (tmp_path / "q.csv").write_text('a,b\n"1,5",x\n')
    (tmp_path / "one.csv").write_text("a\n1\n2\n")
    assert dio.read_table(tmp_path / "q.csv")[0]["a"].tolist() == ["1,5"]
    assert dio.read_table(tmp_path / "one.csv")[0]["a"].tolist() == [1, 2]
    assert calls[n:] == [False]
    # a ragged row: the one-line message of the ragged check, whoever parses
    (tmp_path / "r.csv").write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"line 3: 3 fields where the first row has 2"):
        dio.read_table(tmp_path / "r.csv")


def test_invalid_utf8_late_in_the_file_is_read_as_before(tmp_path, monkeypatch):
    p = tmp_path / "late.csv"
    p.write_bytes(b"a,b\n" + b"1,x\n" * 5000 + b"2,caf\xe9\n")
    a, b = _read_both(p, monkeypatch)
    _same(a, b)
    assert a[0]["b"].iloc[-1] == "café"


def test_large_columns_typed_the_same_with_and_without_codes(tmp_path, monkeypatch):
    """A file over the threshold, with categorical, code, float and text columns."""
    rng = np.random.default_rng(5)
    n = 30_000
    df = pd.DataFrame(
        {
            "cat": rng.choice(["Male", "Female", "NA"], n),
            "code": [f"{v:03d}" for v in rng.integers(0, 50, n)],
            "int": rng.integers(-5, 90, n),
            "flt": np.round(rng.normal(0, 10, n), 2),
            "txt": [f"id{v}" for v in rng.integers(0, 10**9, n)],
            "bool": rng.choice(["TRUE", "FALSE"], n),
        }
    )
    p = tmp_path / "big.csv"
    df.to_csv(p, index=False, sep=";")
    a, b = _read_both(p, monkeypatch)
    _same(a, b)
