"""Columns no method changes are released exactly as read (issue 15), and the readers' robustness."""

from __future__ import annotations

import csv
import errno
import os

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.engine import io as dio
from dpstudio.engine.errors import InputError


def _records(path, sep, encoding="utf-8"):
    with open(path, encoding=encoding, newline="") as fh:
        return [r for r in csv.reader(fh, delimiter=sep) if r]


def _columns(recs):
    head, body = recs[0], recs[1:]
    return {h: [r[i] for r in body] for i, h in enumerate(head)}


def _rows(cols: dict, names) -> list:
    """The records as tuples of ``names``, sorted: releases are in random order (issue 21 §3),
    so unchanged columns are compared record by record, whatever the order."""
    return sorted(zip(*(cols[c] for c in names)))


def _protect(tmp_path, src, *extra, method="mdav", col="x", out="out.csv"):
    out = tmp_path / out
    rc = cli.main(
        [
            "protect",
            str(src),
            str(out),
            "--method",
            method,
            "--k",
            "2",
            "--role",
            f"{col}=k-quasi",
            "--no-measures",
            *extra,
        ]
    )
    assert rc == 0
    return out


NASTY = [  # id, flag, text, price, na, sci, x (protected)
    ("00001", "FALSE", "plain", "1.50", "NA", "1e3", "10"),
    ("00002", "TRUE", "with, comma", "2.00", "", "2E-2", "11"),
    ("00003", "false", 'quote "inside"', "36.63", "null", "0.1", "13"),
    ("00004", "True", "line\nbreak", "-0", "None", "+7", "17"),
    ("00105", "FALSE", "bare\rcr", "1234567890123456789", "n/a", "1.0", "19"),
    ("00006", "TRUE", " lead space", ".5", "#N/A", "5.", "23"),
]


@pytest.mark.parametrize("sep,lt", [(",", "\n"), (";", "\n"), ("\t", "\r\n"), ("|", "\n")])
def test_unprotected_columns_are_released_as_read(tmp_path, sep, lt):
    src = tmp_path / "in.csv"

    def field(f):
        if any(ch in f for ch in (sep, '"', "\r", "\n")):
            return '"' + f.replace('"', '""') + '"'
        return f

    text = (
        lt.join(
            sep.join(field(f) for f in r) for r in [("id", "flag", "text", "price", "na", "sci", "x"), *NASTY]
        )
        + lt
    )
    src.write_bytes(text.encode("utf-8"))
    out = _protect(tmp_path, src, "--sep", sep if sep != "\t" else "\\t")
    a, b = _columns(_records(src, sep)), _columns(_records(out, sep))
    assert len(_records(out, sep)) == len(_records(src, sep))  # a bare CR never adds records
    names = ("id", "flag", "text", "price", "na", "sci")
    assert _rows(b, names) == _rows(a, names)  # every unchanged field as read, row by row
    assert sorted(b["x"]) != sorted(a["x"])  # the protected column did change
    if lt == "\r\n":  # same line breaks, minimal quoting: every unprotected byte as read
        keep = [ln.split(sep.encode())[:6] for ln in src.read_bytes().split(b"\r\n")]
        got = [ln.split(sep.encode())[:6] for ln in out.read_bytes().split(b"\r\n")]
        assert keep[0] == got[0] and sorted(keep[1:]) == sorted(got[1:])
    # with --order input the release keeps the input order: the same bytes in the same places
    out2 = _protect(
        tmp_path, src, "--sep", sep if sep != "\t" else "\\t", "--order", "input", out="ordered.csv"
    )
    b2 = _columns(_records(out2, sep))
    for c in names:
        assert b2[c] == a[c], c


def test_decimal_comma_file_with_a_decimal_point_column(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text(
        "x;y;z;w\n1,5;36.63;1.234;1.234,5\n2,25;1.5;5.678;2.000,25\n3,5;7;9.999;3\n4,75;8.25;1.000;4\n"
    )
    for extra in ([], ["--decimal", ","]):
        out = _protect(tmp_path, src, *extra)
        a, b = _columns(_records(src, ";")), _columns(_records(out, ";"))
        assert sorted(b["y"]) == sorted(a["y"]) == sorted(["36.63", "1.5", "7", "8.25"])  # never 3663
        assert _rows(b, "yzw") == _rows(a, "yzw")
    df, meta = dio.read_table(src)
    assert meta.decimal == ","
    assert df["w"].tolist() == [1234.5, 2000.25, 3.0, 4.0]  # 1.234,5: thousands + comma
    assert not pd.api.types.is_numeric_dtype(df["z"])  # 1.234 alone: never guessed
    # a comma file read with --decimal , keeps its point-decimal column as read
    src2 = tmp_path / "in2.csv"
    src2.write_text("x,y\n1,36.63\n2,1.5\n3,7\n4,8\n")
    out = _protect(tmp_path, src2, "--decimal", ",", out="out2.csv")
    assert sorted(_columns(_records(out, ","))["y"]) == sorted(["36.63", "1.5", "7", "8"])


def test_unchanged_columns_after_dropped_and_shuffled_rows(tmp_path):
    src = tmp_path / "in.csv"
    rows = [f"{i:05d},{'TRUE' if i % 2 else 'FALSE'},{i * 1.5:.2f},{10 + i}" for i in range(12)]
    rows[3] = "00003,TRUE,4.50,"  # missing protected value: dropped with --drop-missing
    src.write_text("id,flag,price,x\n" + "\n".join(rows) + "\n")
    out = _protect(tmp_path, src, "--drop-missing")
    a, b = _columns(_records(src, ",")), _columns(_records(out, ","))
    keep = [i for i in range(12) if i != 3]
    kept = {c: [a[c][i] for i in keep] for c in ("id", "flag", "price")}
    assert _rows(b, ("id", "flag", "price")) == _rows(kept, ("id", "flag", "price"))


def test_short_row_in_quoted_file_is_refused(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text('a,b,c\n"1",2,3\n"4",5\n6,"7,5",8\n')
    with pytest.raises(InputError, match=r"q.csv, line 3: 2 fields"):
        dio.read_table(p)
    p.write_text('a,b,c\n"1\n1",2,3\n"4",5,6\n7,8\n')  # line numbers count physical lines
    with pytest.raises(InputError, match=r"q.csv, line 5"):
        dio.read_table(p)


def test_bare_cr_field_keeps_the_record_count(tmp_path):
    df = pd.DataFrame({"t": ["a\rb", "c", "d\r", "e"], "x": [1, 2, 3, 4]})
    out = tmp_path / "o.csv"
    dio.write_table(df, out)
    back, _ = dio.read_table(out)
    assert len(back) == 4 and back["t"].tolist() == df["t"].tolist()


def test_long_fields_utf16_and_wide_headers(tmp_path):
    p = tmp_path / "long.csv"
    p.write_text("a,b\n" + "x" * 200_000 + ",1\ny,2\n")
    df, _ = dio.read_table(p)
    assert len(df.loc[0, "a"]) == 200_000
    q = tmp_path / "u16.csv"
    q.write_text("a;b\n1,5;x\n2,5;é\n", encoding="utf-16")
    for enc in ("utf-16", None):
        df, meta = dio.read_table(q, encoding=enc)
        assert df["b"].tolist() == ["x", "é"] and df["a"].tolist() == [1.5, 2.5]
    out = tmp_path / "u16out.csv"
    dio.write_table(df, out, meta=meta)
    assert out.read_bytes().decode("utf-16").splitlines()[2] == "2,5;é"
    wide = tmp_path / "wide.csv"
    wide.write_text(";".join(f"c{i}" for i in range(20_000)) + "\n" + ";".join("1" * 20_000) + "\n")
    with pytest.raises(InputError, match="20,000 columns.*--sep"):
        dio.read_table(wide)
    df, _ = dio.read_table(wide, sep=";")  # given explicitly: built
    assert df.shape == (1, 20_000)
    dup = tmp_path / "dup.csv"
    dup.write_text(",".join(f"c{i % 30_000}" for i in range(40_000)) + "\n" + ",".join("1" * 40_000) + "\n")
    with pytest.raises(InputError, match="duplicate column.*and 9990 more"):
        dio.read_table(dup, sep=",")


@pytest.mark.parametrize("sep", ["", ";;", '"'])
def test_bad_separator_option(tmp_path, sep):
    p = tmp_path / "a.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="separator"):
        dio.read_table(p, sep=sep)


def test_binary_hierarchy_is_a_clean_error(tmp_path):
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy

    h = tmp_path / "h.csv"
    h.write_bytes(b"a;b\x00\x01\x02\n" * 10)
    with pytest.raises(InputError, match="h.csv.*binary"):
        Hierarchy.read_arx(str(h))


def test_write_errors_name_the_target(tmp_path, monkeypatch):
    df = pd.DataFrame({"a": [1, 2]})
    (tmp_path / "out.csv").mkdir()
    with pytest.raises(dio.WriteRefused) as ei:  # the one writer refuses before writing
        dio.write_table(df, tmp_path / "out.csv")
    assert str(tmp_path / "out.csv") in str(ei.value) and "folder" in str(ei.value)

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    with pytest.raises(OSError, match="No space left on device while writing o2.csv") as ei:
        dio.write_table(df, tmp_path / "o2.csv")
    assert ei.value.filename.endswith("o2.csv")
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]  # no temp file left


FORMATS = ["xlsx", "parquet", "dta", "sav"]


def _typed_frame(n=12):
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "x": rng.normal(50, 10, n).round(3),
            "age": rng.integers(18, 90, n).astype(np.int64),
            "income": np.round(rng.normal(30000, 8000, n), 2),
            "region": rng.integers(1, 4, n).astype(np.float64),
            "name": [f"p{i:03d}" for i in range(n)],
        }
    )


@pytest.mark.parametrize("ext", FORMATS)
def test_unprotected_columns_round_trip_every_format(tmp_path, ext):
    import pyreadstat

    from dpstudio import engine
    from dpstudio.engine.export import export_release

    df = _typed_frame()
    src = tmp_path / f"in.{ext}"
    if ext in ("dta", "sav"):
        w = pyreadstat.write_dta if ext == "dta" else pyreadstat.write_sav
        w(
            df,
            str(src),
            column_labels=["x", "Age", "Income", "Region", "Name"],
            variable_value_labels={"region": {1: "north", 2: "south", 3: "east"}},
        )
    else:
        dio.write_table(df, src)
    back, meta = dio.read_table(src)
    res = engine.protect(back, "mdav", {"x": "k-quasi"}, seed=1, k=3)
    written = export_release(res, tmp_path / f"out.{ext}", input_meta=meta, audit=False)
    rel, meta2 = dio.read_table(written["data"])
    orig = res.aligned_original()  # the input's records in release order
    for c in ("age", "income", "region", "name"):
        assert rel[c].dtype == back[c].dtype, c
        assert rel[c].tolist() == orig[c].tolist(), c
    if ext in ("dta", "sav"):
        assert meta2.value_labels["region"] == meta.value_labels["region"]
    assert not np.allclose(rel["x"], back["x"])


def test_bare_cr_line_ends_with_a_blank_line_keep_the_fields_in_place(tmp_path):
    # pandas' C parser, left to detect '\r' line ends, shifted the fields of the line after a
    # blank one (",5,6" read as "5", "6", ""): found by the Arrow-vs-pandas property test
    p = tmp_path / "mac.csv"
    p.write_bytes(b"a,b,c\r1,1,1\r\r,5,6\r1,1,007\r")
    df, meta = dio.read_table(str(p))
    assert df["a"].isna().tolist() == [False, True, False]
    assert df["b"].tolist() == [1, 5, 1] and df["c"].tolist()[1] == "6"
