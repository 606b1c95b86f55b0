"""The release CSV built with pyarrow (``io.writing._csv_bytes``, issue 12's whole-process time) is
byte for byte what pandas' ``to_csv`` writes, and pandas still writes every frame the fast
path does not cover (quoting, booleans, one column)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine import io as dio
from dpstudio.engine.io import writing

WORDS = [
    "Male",
    "Female",
    "Married-civ-spouse",
    "<=50K",
    "Zürich",
    "naïve",
    "",
    "nan",
    "NA",
    " padded ",
    "x y",
    "日本",
    "'single'",
    "tab\there",
    "semi;colon",
    "comma,here",
    'quo"te',
    "line\nbreak",
    "cr\rhere",
    "pipe|bar",
]


def _frame(rng, n, kinds, sep=","):
    cols = {}
    for j, kind in enumerate(kinds):
        if kind == "str":
            vals = [str(w) for w in rng.choice(WORDS[:13], n)]
            cols[f"s{j}"] = pd.Series(vals, dtype=str)
        elif kind == "str_na":
            vals = [str(w) for w in rng.choice(WORDS[:13], n)]
            cols[f"m{j}"] = pd.Series(vals, dtype=str).mask(rng.random(n) < 0.2)
        elif kind == "obj":
            vals = np.array([str(w) for w in rng.choice(WORDS[:13], n)], dtype=object)
            vals[rng.random(n) < 0.1] = None
            cols[f"o{j}"] = pd.Series(vals, dtype=object)
        elif kind in SPECIAL:  # one text needing quotes, among plain ones
            vals = [str(w) for w in rng.choice(WORDS[:13], n)]
            vals[int(rng.integers(0, n))] = "a" + (sep if kind == "sep" else SPECIAL[kind]) + "b"
            cols[f"q{j}"] = pd.Series(vals, dtype=str)
        elif kind == "nasty":
            cols[f"n{j}"] = pd.Series([str(w) for w in rng.choice(WORDS, n)], dtype=str)
        elif kind == "int":
            cols[f"i{j}"] = rng.integers(-(2**62), 2**62, n)
        elif kind == "small":
            cols[f"k{j}"] = rng.integers(0, 99, n).astype(np.int32)
        elif kind == "float":
            cols[f"f{j}"] = rng.normal(0, 1, n)
        elif kind == "bool":
            cols[f"b{j}"] = rng.random(n) < 0.5
        elif kind == "mixed":
            cols[f"x{j}"] = pd.Series([1, "a"] * (n // 2) + [1] * (n % 2), dtype=object)
    return pd.DataFrame(cols)


SPECIAL = {"sep": None, "quote": '"', "cr": "\r", "lf": "\n", "crlf": "\r\n"}

CASES = [
    (["str", "sep"], False),
    (["quote", "int"], False),
    (["str", "cr"], False),
    (["str", "lf"], False),
    (["crlf", "str"], False),
    (["str", "int"], True),
    (["str", "str_na", "obj", "int", "small"], True),
    (["str", "str", "str", "str", "str", "str", "str", "int", "str"], True),  # Adult's shape
    (["str", "nasty"], False),
    (["str", "float"], True),  # float64 as numpy's texts (test_io_float_writer.py)
    (["int", "bool"], False),
    (["str", "mixed"], False),
    (["str"], False),
]


@pytest.mark.parametrize("sep", [";", ",", "\t", "|"])
@pytest.mark.parametrize("lt", ["\n", "\r\n"])
@pytest.mark.parametrize("kinds,fast", CASES)
def test_fast_csv_bytes_equal_pandas(tmp_path, sep, lt, kinds, fast):
    rng = np.random.default_rng(len(kinds) * 7 + len(sep))
    df = _frame(rng, 400, kinds, sep)
    ref = tmp_path / "ref.csv"
    df.to_csv(ref, sep=sep, encoding="utf-8", index=False, lineterminator=lt)
    got = writing._csv_bytes(df, sep, lt, "utf-8")
    if fast:
        assert got == ref.read_bytes()
    else:  # texts that need quoting, booleans, mixed objects, one column: pandas writes
        assert got is None


def test_write_table_bytes_unchanged(tmp_path):
    """Through write_table (the release path): the same file as pandas writes."""
    rng = np.random.default_rng(3)
    df = _frame(rng, 3000, ["str", "str_na", "int", "obj"])
    out = tmp_path / "out.csv"
    dio.write_table(df, out)
    ref = tmp_path / "ref.csv"
    df.to_csv(ref, sep=",", encoding="utf-8", index=False, lineterminator="\n")
    assert writing._csv_bytes(df, ",", "\n", "utf-8") is not None
    assert out.read_bytes() == ref.read_bytes()


def test_cp1252_and_unencodable(tmp_path):
    df = pd.DataFrame({"a": pd.Series(["Zürich", "Genève"], dtype=str), "b": [1, 2]})
    assert writing._csv_bytes(df, ";", "\n", "cp1252") == "a;b\nZürich;1\nGenève;2\n".encode("cp1252")
    df2 = pd.DataFrame({"a": pd.Series(["日本", "x"], dtype=str), "b": [1, 2]})
    assert writing._csv_bytes(df2, ";", "\n", "cp1252") is None  # pandas raises its own error
