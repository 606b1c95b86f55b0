"""Issue 15, item 2: a decimal-mark guess that would change a value is refused, never applied.

In a semicolon / decimal-comma file a column holding only ``1.234``-style values may be
thousands groups (1234) or decimals (1.234).  With the mark guessed the reader keeps it as
text, and ``prepare`` refuses to make numbers of it (one line naming the column and
``--decimal``); with the mark given the reader applies it.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine import io as dio
from dpstudio.engine.errors import InputError

ROWS = [
    ("1.234", "36,5"),
    ("2.500", "12,25"),
    ("3.750", "7,5"),
    ("1.005", "1,75"),
    ("4.321", "9,5"),
    ("2.222", "3,25"),
] * 3


@pytest.fixture
def comma_file(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("x;y\n" + "".join(f"{a};{b}\n" for a, b in ROWS), encoding="utf-8")
    return p


def test_reader_keeps_the_ambiguous_column_as_text_when_guessed(comma_file):
    df, meta = dio.read_table(comma_file)
    assert meta.decimal == ","
    assert df["y"].tolist()[:2] == [36.5, 12.25]
    assert df["x"].tolist()[:2] == ["1.234", "2.500"]  # not 1.234, not 1234: not guessed


def test_engine_refuses_to_guess(comma_file):
    df, _ = dio.read_table(comma_file)
    with pytest.raises(InputError) as ei:
        engine.protect(df, "laplace", {"x": "eps-quasi"}, domains={"x": (0, 5000)}, epsilon=1, seed=1)
    msg = str(ei.value)
    assert "'x'" in msg and "--decimal" in msg and "\n" not in msg


def test_given_mark_is_applied(comma_file):
    df, _ = dio.read_table(comma_file, decimal=",")
    assert df["x"].tolist()[:2] == [1234, 2500]
    df, _ = dio.read_table(comma_file, sep=";", decimal=".")
    assert df["x"].tolist()[:2] == [1.234, 2.5]


def test_unambiguous_text_columns_still_convert():
    """Other text columns a method needs numeric (e.g. codes 007) are not refused."""
    dio.check_decimal_ambiguity("c", pd.Series(["007", "12", "3"]))
    dio.check_decimal_ambiguity("c", pd.Series(["1.234", "36.63"]))  # 36.63: '.' is a decimal point
    with pytest.raises(InputError):
        dio.check_decimal_ambiguity("c", pd.Series(["1.234", None, "12.000"]))


def _protect(comma_file, tmp_path, *extra):
    return cli.main(
        [
            "protect",
            str(comma_file),
            str(tmp_path / "out.csv"),
            "--no-measures",
            "--method",
            "laplace",
            "--epsilon",
            "1",
            "--role",
            "x=eps-quasi",
            "--domain",
            "x=0:5000",
            *extra,
        ]
    )


def test_cli_refuses_with_exit_2(comma_file, tmp_path, capsys):
    code = _protect(comma_file, tmp_path)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "'x'" in err and "--decimal" in err
    assert not (tmp_path / "out.csv").exists()


def test_cli_with_decimal_given(comma_file, tmp_path, capsys):
    assert _protect(comma_file, tmp_path, "--decimal", ",") == 0, capsys.readouterr().err
    out = (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()
    assert out[0] == "x;y"
    # y byte-identical (the records in random order: compared as a multiset)
    assert sorted(ln.split(";")[1] for ln in out[1:]) == sorted(b for _a, b in ROWS)
