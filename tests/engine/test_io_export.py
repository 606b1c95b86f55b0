"""Reading/writing tables, atomic writes, and the release export (no seed, no original values)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio.engine import io as dio
from dpstudio.engine.errors import InputError
from dpstudio.engine.export import export_release
from dpstudio.engine.io import reading
from dpstudio.engine.report import render_assessment, render_release_note
from dpstudio.engine.types import ProtectionResult


def frame(n=20, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n).astype(np.int64),
            "income": np.round(rng.normal(30000, 8000, n), 2),
            "code": rng.integers(1, 4, n).astype(np.int64),
        }
    )


@pytest.mark.parametrize("ext", ["csv", "tsv", "xlsx", "parquet", "dta", "sav"])
def test_round_trip(tmp_path, ext):
    df = frame()
    p = tmp_path / f"t.{ext}"
    dio.write_table(df, p)
    back, meta = dio.read_table(p)
    assert list(back.columns) == list(df.columns)
    assert meta.n_rows == len(df)
    for c in df.columns:
        np.testing.assert_allclose(back[c].to_numpy(float), df[c].to_numpy(float))
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp") or ".tmp." in f] == []


def test_labels_survive_stata_and_spss(tmp_path):
    import pyreadstat

    df = frame()
    for ext, writer in (("dta", pyreadstat.write_dta), ("sav", pyreadstat.write_sav)):
        src = tmp_path / f"in.{ext}"
        writer(
            df,
            str(src),
            column_labels=["Age in years", "Yearly income", "Region"],
            variable_value_labels={"code": {1: "north", 2: "south", 3: "east"}},
        )
        back, meta = dio.read_table(src)
        assert meta.value_labels["code"][1] == "north"
        assert meta.column_labels["age"] == "Age in years"
        out = tmp_path / f"out.{ext}"
        dio.write_table(back, out, meta=meta)
        _, meta2 = dio.read_table(out)
        assert meta2.value_labels["code"] == meta.value_labels["code"]
        assert meta2.column_labels["income"] == "Yearly income"
        # a masked labelled column (no longer codes) is written, without its value labels
        noisy = back.assign(code=back["code"] + 0.37)
        out2 = tmp_path / f"out2.{ext}"
        dio.write_table(noisy, out2, meta=meta)
        back3, meta3 = dio.read_table(out2)
        assert "code" not in meta3.value_labels
        np.testing.assert_allclose(back3["code"], noisy["code"])


def test_sniff_semicolon_decimal_comma(tmp_path):
    p = tmp_path / "eu.csv"
    p.write_bytes("name;value;n\nÄpfel;1,5;3\nBirnen;1.234,25;4\nKiwi;-0,75;5\n".encode("cp1252"))
    info = dio.sniff_csv(p)
    assert (info["sep"], info["decimal"], info["header"]) == (";", ",", True)
    assert info["encoding"] in ("cp1252", "latin-1")
    df, meta = dio.read_table(p)
    assert df["value"].tolist() == [1.5, 1234.25, -0.75]
    assert df["name"].iloc[0] == "Äpfel"
    # written back in the input's conventions
    out = tmp_path / "out.csv"
    dio.write_table(df, out, meta=meta)
    assert "1,5" in out.read_bytes().decode(meta.encoding)


def test_late_non_utf8_bytes_fall_back_to_cp1252(tmp_path):
    p = tmp_path / "late.csv"
    body = "".join(f"{i},name{i}\n" for i in range(40_000))  # > the sniffed sample
    p.write_bytes(("id,name\n" + body + "40000,Jos\xe9\n").encode("cp1252"))
    df, meta = dio.read_table(p)
    assert meta.encoding == "cp1252" and df["name"].iloc[-1] == "José" and len(df) == 40_001


@settings(max_examples=25, deadline=None)
@given(sep=st.sampled_from([",", ";", "\t", "|"]), seed=st.integers(0, 10_000), bom=st.booleans())
def test_sniff_property(tmp_path_factory, sep, seed, bom):
    d = tmp_path_factory.mktemp("sniff")
    df = frame(15, seed)
    p = d / "x.csv"
    text = df.to_csv(sep=sep, index=False)
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    info = dio.sniff_csv(p)
    assert info["sep"] == sep and info["header"]
    back, _ = dio.read_table(p)
    assert list(back.columns) == list(df.columns)
    np.testing.assert_allclose(back["income"], df["income"])


def test_bad_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty.csv"):
        dio.read_table(empty)
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)))
    with pytest.raises(InputError, match="garbage.csv.*binary"):
        dio.read_table(garbage)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b,c\n1,2,3\n4,5\n6,7,8\n")
    with pytest.raises(InputError, match=r"ragged.csv, line 3"):
        dio.read_table(ragged)
    ragged2 = tmp_path / "ragged2.csv"
    ragged2.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"ragged2.csv, line 3"):
        dio.read_table(ragged2)
    dup = tmp_path / "dup.csv"
    dup.write_text("a,b,a\n1,2,3\n4,5,6\n")
    with pytest.raises(InputError, match="duplicate column"):
        dio.read_table(dup)
    with pytest.raises(FileNotFoundError):
        dio.read_table(tmp_path / "nope.csv")
    xdup = tmp_path / "dup.xlsx"
    pd.DataFrame([[1, 2, 3], [4, 5, 6]], columns=["a", "b", "a"]).to_excel(xdup, index=False)
    with pytest.raises(InputError, match="duplicate column"):
        dio.read_table(xdup)
    notxl = tmp_path / "fake.xlsx"
    notxl.write_text("hello")
    with pytest.raises(InputError, match="fake.xlsx"):
        dio.read_table(notxl)
    with pytest.raises(InputError, match="unknown file type"):
        dio.file_format(tmp_path / "x.weird")


def test_chunked_read_reports_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "_CHUNK_BYTES", 1000)
    df = frame(3000)
    p = tmp_path / "big.csv"
    df.to_csv(p, index=False)
    seen = []
    back, _ = dio.read_table(p, progress=seen.append)
    assert len(back) == 3000 and seen[-1] == 1.0
    assert all(0 <= a <= b <= 1 for a, b in zip(seen, seen[1:]))


def test_atomic_write_failure_keeps_old_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old content\n")

    def failing(tmp):
        with open(tmp, "w") as fh:
            fh.write("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        dio.atomic_write(target, failing)
    assert target.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["out.csv"]
    # a table that cannot be written as Stata (a space in a name) -> InputError naming it, no temp
    bad = pd.DataFrame({"a b": [1, 2]})
    with pytest.raises(InputError, match="bad.dta"):
        dio.write_table(bad, tmp_path / "bad.dta")
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]


def test_never_overwrites_input(tmp_path):
    df = frame()
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    before = src.read_bytes()
    _, meta = dio.read_table(src)
    with pytest.raises(InputError, match="input"):
        dio.write_table(df.iloc[:3], src, meta=meta)
    with pytest.raises(InputError, match="input"):
        dio.write_table(df.iloc[:3], tmp_path / "." / "in.csv", protect=(str(src),))
    assert src.read_bytes() == before


# ------------------------------------------------------------------ export


def fake_result(df: pd.DataFrame, seed_marker: int = 987654321) -> ProtectionResult:
    prot = df.copy()
    prot["income"] = np.round(prot["income"].mean() + 0.0, 2)
    return ProtectionResult(
        data=prot,
        method="test",
        method_name="Test method",
        params={"k": 3, "epsilon": 1.0, "seed": seed_marker},
        guarantee="Nothing at all (test).",
        is_dp=False,
        roles={"age": "other", "income": "k-quasi", "code": "other"},
        domains={"income": (0.0, 100000.0)},
        protected_attributes=["income"],
        info={"secret_original": df["income"].tolist()},
        warnings=["a warning"],
        row_map=None,
        dropped_rows=[],
        tables={"groups": pd.DataFrame({"g": [1, 2]})},
        original=df,
    )


def _all_strings(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from _all_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _all_strings(v)
    else:
        yield str(obj)


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_export_release(tmp_path, ext):
    df = frame(30, 3)
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    before = src.read_bytes()
    _, meta = dio.read_table(src)
    res = fake_result(df)
    html = render_assessment(
        res,
        {"sse_raw": 1.0, "rl": 2.0, "delta_mean": {"income": 0.0}, "delta_var": {"income": 1.0}},
        input_name="in.csv",
        curves=[("SSE vs k", b"\x89PNG fake")],
    )
    out = tmp_path / f"out.{ext}"
    written = export_release(
        res, out, input_path=src, input_meta=meta, release_note=True, assessment_html=html
    )
    assert set(written) == {"data", "metadata", "table:groups", "release_note", "assessment", "private"}
    assert written["table:groups"].endswith(f"out.groups.{ext}")
    assert written["release_note"].endswith("out.release-note.html")
    assert written["assessment"].endswith("out.assessment.private.html")
    assert written["private"].endswith("out.private.json")
    md = json.loads(open(written["metadata"], encoding="utf-8").read())
    strings = list(_all_strings(md))
    assert not any("seed" in s.lower() for s in strings)
    assert not any("987654321" in s for s in strings)
    originals = {f"{v:.2f}" for v in df["income"]} | {repr(float(v)) for v in df["income"]}
    assert not originals & set(strings)
    # no fingerprint of the input in the public metadata: neither its digest nor its name
    assert "input" not in md["files"]
    assert dio.file_sha256(src) not in json.dumps(md) and "in.csv" not in json.dumps(md)
    assert "records_dropped_for_missing_values" not in md
    assert md["files"]["output"]["sha256"] == dio.file_sha256(written["data"])
    # ... they are in the private audit trail
    trail = json.loads(open(written["private"], encoding="utf-8").read())
    assert trail["input"]["sha256"] == dio.file_sha256(src) and trail["input"]["name"] == "in.csv"
    assert trail["records_in_input"] == 30 and trail["records_dropped_for_missing_values"] == 0
    assert "987654321" not in json.dumps(trail) and "seed" not in json.dumps(trail).lower()
    assert src.read_bytes() == before
    report = open(written["assessment"], encoding="utf-8").read()
    assert "Nothing at all (test)." in report and "987654321" not in report
    assert "data:image/png;base64," in report
    note = open(written["release_note"], encoding="utf-8").read()
    assert "Nothing at all (test)." in note and "987654321" not in note and "<img" not in note
    with pytest.raises(InputError):
        export_release(res, src, input_path=src)
    assert src.read_bytes() == before
    assert [f for f in os.listdir(tmp_path) if ".tmp" in f] == []


@settings(max_examples=25, deadline=None)
@given(text=st.text(min_size=1, max_size=30))
def test_report_escapes_and_never_shows_seed(text):
    import html as _html

    df = frame(10, 1)
    res = fake_result(df, seed_marker=55555)
    res.guarantee = text
    res.warnings = [text]
    res.public_warnings = [text]
    for html in (
        render_assessment(res, {"rl": 1.0, "warnings": ["<b>w</b>"]}, input_name=text),
        render_release_note(res),
    ):
        assert "55555" not in html and "'seed'" not in html
        assert "<b>w</b>" not in html
        assert _html.escape(text, quote=True) in html
        assert "@media print" in html and "class='guarantee" in html
        # no external resources: everything is inline
        assert "http://" not in html.replace(text, "") and "<script" not in html.replace(
            _html.escape(text, quote=True), ""
        )
    assert "&lt;b&gt;w&lt;/b&gt;" in render_assessment(res, {"rl": 1.0, "warnings": ["<b>w</b>"]})
