"""CLI side of issue 10: --role weight/household, --type, --keep-household on protect and
sweep, local-suppression from the command line, evaluate's survey measures, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dpstudio import cli

FREE1 = Path(__file__).resolve().parents[2] / "resources" / "free1" / "free1.csv"
KEYS = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]
ROLES = [a for k in KEYS for a in ("--role", f"{k}=k-quasi")] + [
    "--role",
    "WEIGHT=weight",
    "--role",
    "REGION=household",
]


def test_protect_local_suppression_drops_household_keeps_weight(tmp_path, capsys):
    out = tmp_path / "rel.csv"
    assert (
        cli.main(["protect", str(FREE1), str(out), "--method", "local-suppression", "--k", "3", *ROLES]) == 0
    )
    text = capsys.readouterr().out
    assert "suppressed cells 276" in text and "household id REGION is not released" in text
    rel, orig = pd.read_csv(out), pd.read_csv(FREE1)
    # the records are in random order (issue 21 §3): the weights are released unchanged
    assert "REGION" not in rel.columns and sorted(rel["WEIGHT"]) == sorted(orig["WEIGHT"])
    assert not (rel["WEIGHT"] == orig["WEIGHT"]).all()
    out2 = tmp_path / "rel2.csv"
    assert (
        cli.main(
            [
                "protect",
                str(FREE1),
                str(out2),
                "--method",
                "local-suppression",
                "--k",
                "3",
                *ROLES,
                "--keep-household",
                "--order",
                "input",
            ]
        )
        == 0
    )
    assert (pd.read_csv(out2)["REGION"] == orig["REGION"]).all()
    assert (pd.read_csv(out2)["WEIGHT"] == orig["WEIGHT"]).all()
    capsys.readouterr()
    # 'evaluate' pairs record j with record j: the release kept in input order
    assert (
        cli.main(
            [
                "evaluate",
                str(FREE1),
                str(out2),
                "--measures",
                "freq,suppressed,reid",
                "--keys",
                ",".join(KEYS),
                "--weight",
                "WEIGHT",
                "--json",
            ]
        )
        == 0
    )
    ev = json.loads(capsys.readouterr().out)
    assert ev["suppressed_cells"] == 276 and 0 < ev["tv_mean"] < 1
    assert ev["expected_reidentifications"] > 0


def test_numeric_method_refuses_a_categorical_type_in_one_line(tmp_path, capsys):
    rc = cli.main(
        [
            "protect",
            str(FREE1),
            str(tmp_path / "o.csv"),
            "--method",
            "mdav",
            "--k",
            "3",
            "--role",
            "SEX=k-quasi",
            "--role",
            "AGE=k-quasi",
            "--type",
            "SEX=categorical",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "'SEX'" in err and "local-suppression" in err and "k-eps" in err
    rc = cli.main(
        [
            "sweep",
            str(FREE1),
            "--method",
            "mdav",
            "--k",
            "2,3",
            "--role",
            "AGE=k-quasi",
            "--type",
            "AGE=colour",
            "--out",
            str(tmp_path / "s.csv"),
        ]
    )
    assert rc == 2 and "unknown type" in capsys.readouterr().err


def test_sweep_local_suppression_default_measures(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    assert (
        cli.main(
            [
                "sweep",
                str(FREE1),
                "--method",
                "local-suppression",
                "--k",
                "2,3",
                "--repeats",
                "1",
                *ROLES,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    df = pd.read_csv(out)
    assert list(df["suppressed_cells_mean"]) == [160, 276]
    assert df["expected_reidentifications_mean"].is_monotonic_decreasing
    assert (out.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--measures", "classification"], "class attribute"),
        (["--measures", "classification", "--class-attribute", "EDUC1", "--binarise", "top"], "--binarise"),
    ],
)
def test_evaluate_classification_errors(tmp_path, capsys, argv, words):
    assert cli.main(["evaluate", str(FREE1), str(FREE1), "--attributes", "AGE", *argv]) == 2
    assert words in capsys.readouterr().err
