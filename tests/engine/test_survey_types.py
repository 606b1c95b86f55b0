"""Issue 24 §2: integer-coded SPSS variables were read as float64, and the types a file
declares (SPSS measure level and format, Stata storage type) were ignored: the CLI asked for
an output precision of a whole-number income declared F8.0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyreadstat

from dpstudio import cli
from dpstudio.engine.io import read_table


def _sav(path, n=300, seed=2):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n).astype(float),
            "PID": rng.integers(0, 7, n).astype(float),
            "income": rng.integers(0, 150_000, n).astype(float),
            "score": rng.normal(0, 1, n),  # not whole numbers
            "hours": np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 60, n)),  # missing
        }
    )
    pyreadstat.write_sav(
        df,
        str(path),
        variable_format={"age": "F3.0", "PID": "F1.0", "income": "F8.0", "score": "F8.2", "hours": "F2.0"},
        variable_measure={
            "PID": "nominal",
            "age": "scale",
            "income": "scale",
            "score": "scale",
            "hours": "scale",
        },
        variable_value_labels={"PID": {0.0: "Strong Democrat", 6.0: "Strong Republican"}},
    )
    return df


def test_sav_whole_numbers_are_integers_and_types_are_declared(tmp_path):
    df0 = _sav(tmp_path / "a.sav")
    df, meta = read_table(tmp_path / "a.sav")
    assert df["age"].dtype == np.int64 and df["PID"].dtype == np.int64 and df["income"].dtype == np.int64
    assert df["score"].dtype == np.float64
    assert df["hours"].dtype == np.float64  # missing values stay NaN
    for c in df0.columns:  # the same values
        np.testing.assert_array_equal(df[c].to_numpy(dtype=float), df0[c].to_numpy())
    assert meta.declared_types == {
        "age": "integer",
        "PID": "categorical",
        "income": "integer",
        "hours": "integer",
    }


def test_stata_storage_types_are_declared(tmp_path):
    df = pd.DataFrame({"a": np.array([1, 2, 3], dtype=np.int16), "b": [0.5, 1.5, 2.0]})
    pyreadstat.write_dta(df, str(tmp_path / "a.dta"))
    _, meta = read_table(tmp_path / "a.dta")
    assert meta.declared_types == {"a": "integer"}


def test_cli_uses_declared_types_and_says_so(tmp_path, capsys):
    _sav(tmp_path / "a.sav")
    out = tmp_path / "o.csv"
    rc = cli.main(
        [
            "protect",
            str(tmp_path / "a.sav"),
            str(out),
            "--method",
            "laplace",
            "--role",
            "income=eps-quasi",
            "--domain",
            "income=0:200000",
            "--epsilon",
            "1",
            "--seed",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err  # before: "Column 'income' needs an output precision …"
    assert "column types declared in a.sav: income=integer" in err
    rel = pd.read_csv(out)
    assert (rel["income"] == rel["income"].round()).all()
    # --type wins over the file's declaration
    rc = cli.main(
        [
            "protect",
            str(tmp_path / "a.sav"),
            str(tmp_path / "o2.csv"),
            "--method",
            "laplace",
            "--role",
            "income=eps-quasi",
            "--domain",
            "income=0:200000",
            "--epsilon",
            "1",
            "--type",
            "income=numeric",
            "--precision",
            "income=0.01",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0 and "declared in" not in err
