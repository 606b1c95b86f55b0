"""ARX's prosecutor / journalist / marketer risk, and `dpstudio risk --suda` end to end."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio.cli import main
from dpstudio.engine import assess_risk
from dpstudio.engine.errors import DPStudioError
from dpstudio.engine.measures.reid_models import reid_models

ROOT = Path(__file__).resolve().parents[2]
FREE1 = ROOT / "resources" / "free1"
KEYS = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]


@pytest.fixture(scope="module")
def free1():
    return pd.read_csv(FREE1 / "free1.csv")


def arx_by_classes(df, keys, weight, threshold):
    """ARX's RiskModelSampleSummary written out over equivalence classes (population = the
    classes' weight sums, ARX's population table), independent of the per-record code.
    """
    g = df.groupby(keys, dropna=False)
    f = g.size().to_numpy(float)
    F = g[weight].sum().to_numpy(float) if weight else f
    n = f.sum()
    pros = {
        "highest": 1 / f.min(),
        "average": len(f) / n,
        "share_above_threshold": f[1 / f > threshold].sum() / n,
    }
    rc1 = len(f) / F.sum()
    rc2 = (f / F).sum() / n
    jour = {
        "highest": 1 / F.min(),
        "average": max(rc1, rc2),
        "share_above_threshold": f[1 / F > threshold].sum() / n,
    }
    return pros, jour, rc2


@pytest.mark.parametrize("weight", [None, "WEIGHT"])
@pytest.mark.parametrize("threshold", [0.0, 0.05, 0.2, 0.5, 1.0])
def test_free1_equals_arx_class_formulas(free1, weight, threshold):
    rep = assess_risk(free1, KEYS, weight=weight, missing="category", reid_threshold=threshold)
    got = rep.to_dict()["reidentification_models"]
    pros, jour, market = arx_by_classes(free1, KEYS, weight, threshold)
    for k, v in pros.items():
        assert math.isclose(got["prosecutor"][k], v, rel_tol=1e-12), k
    for k, v in jour.items():
        assert math.isclose(got["journalist"][k], v, rel_tol=1e-12), k
    assert math.isclose(got["marketer"]["average"], market, rel_tol=1e-12)
    assert got["threshold"] == threshold
    if weight is None:  # the file is its own population: journalist = prosecutor
        assert got["journalist"] == got["prosecutor"]


def test_with_missing_categories_equals_arx(rng):
    df = pd.DataFrame(rng.integers(0, 3, (300, 3)).astype(float), columns=list("abc"))
    df.iloc[rng.random(300) < 0.2, 1] = np.nan
    df["w"] = rng.uniform(1, 40, 300)
    rep = assess_risk(df, list("abc"), weight="w", missing="category")
    got = rep.reid_models(0.1)
    pros, jour, market = arx_by_classes(df, list("abc"), "w", 0.1)
    assert math.isclose(got["prosecutor"]["average"], pros["average"], rel_tol=1e-12)
    assert math.isclose(got["journalist"]["average"], jour["average"], rel_tol=1e-12)
    assert math.isclose(got["marketer"]["average"], market, rel_tol=1e-12)


def test_journalist_average_is_the_larger_of_arxs_two_estimates():
    # a big class with F_k = f_k and a small one with F_k = 2 f_k: #classes / sum F_k wins
    df = pd.DataFrame({"a": [0] * 1000 + [1], "w": [1.0] * 1000 + [2.0]})
    got = assess_risk(df, ["a"], weight="w", missing="category").reid_models()
    rc1, rc2 = 2 / 1002, (1 + 0.5) / 1001
    assert rc1 > rc2
    assert math.isclose(got["journalist"]["average"], rc1, rel_tol=1e-12)
    assert math.isclose(got["marketer"]["average"], rc2, rel_tol=1e-12)
    assert arx_by_classes(df, ["a"], "w", 0.2)[1]["average"] == pytest.approx(rc1, rel=1e-12)


def test_properties(rng):
    f = rng.integers(1, 20, 500).astype(float)
    F = f * rng.uniform(1, 100, 500)
    r = reid_models(f, F, threshold=0.1)
    assert r["journalist"]["highest"] <= r["prosecutor"]["highest"]  # F_k >= f_k
    assert r["marketer"]["average"] <= r["journalist"]["average"] <= r["journalist"]["highest"]
    assert r["prosecutor"]["average"] <= r["prosecutor"]["highest"] <= 1
    r0 = reid_models(f, None, threshold=0.1)
    assert r0["marketer"]["average"] == pytest.approx(r0["prosecutor"]["average"])


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "x", True])
def test_bad_threshold(bad):
    with pytest.raises(DPStudioError, match="threshold"):
        reid_models(np.ones(3), None, threshold=bad)


# --------------------------------------------------------------------------- CLI


def _argv(*extra):
    argv = ["risk", str(FREE1 / "free1.csv"), "--weight", "WEIGHT", "--json"]
    for k in KEYS:
        argv += ["--role", f"{k}=k-quasi"]
    return argv + list(extra)


def test_cli_suda_json_and_per_record(free1, tmp_path, capsys):
    per = tmp_path / "per.csv"
    assert main(_argv("--suda", "--per-record", str(per))) == 0
    out = json.loads(capsys.readouterr().out)
    tot = json.loads((FREE1 / "free1_toolbox_reference.json").read_text())
    assert out["suda2"]["records_with_msu"] == 510
    assert math.isclose(out["suda2"]["dis_sum"], tot["suda_dis_sum"], rel_tol=1e-9)
    assert "prosecutor" in out["reidentification_models"]
    assert (per.stat().st_mode & 0o777) == 0o600
    ref = pd.read_csv(FREE1 / "free1_suda2_per_record.csv")
    got = pd.read_csv(per)
    assert list(got.columns) == ["record", "fk", "Fk", "individual_risk", "suda_score", "suda_dis"]
    assert np.array_equal(got["suda_score"], ref["suda_score"])
    np.testing.assert_allclose(got["suda_dis"], ref["suda_dis"], rtol=1e-9, atol=0)


def test_cli_options_imply_suda_and_limit(capsys):
    assert main(_argv("--suda-max-size", "2", "--suda-dis-fraction", "0.2")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["suda2"]["settings"] == {
        **out["suda2"]["settings"],
        "max_size": 2,
        "dis_fraction": 0.2,
        "complete": False,
    }
    assert set(out["suda2"]["msus_by_size"]) <= {"1", "2"}
    assert main(_argv()) == 0
    assert "suda2" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "opt,val,words",
    [
        ("--suda-max-size", str(10**6), "suda_max_size"),
        ("--suda-max-size", "0", "suda_max_size"),
        ("--suda-max-size", "2.5", "suda_max_size"),
        ("--suda-max-size", "abc", "suda_max_size"),
        ("--suda-max-size", "1e400", "suda_max_size"),
        ("--suda-dis-fraction", "0", "suda_dis_fraction"),
        ("--suda-dis-fraction", "1", "suda_dis_fraction"),
        ("--suda-dis-fraction", "-0.5", "suda_dis_fraction"),
        ("--suda-dis-fraction", "nan", "suda_dis_fraction"),
        ("--suda-dis-fraction", "inf", "suda_dis_fraction"),
        ("--suda-dis-fraction", "ten", "suda_dis_fraction"),
        ("--threshold", "2", "threshold"),
        ("--threshold", "nan", "threshold"),
    ],
)
def test_cli_hostile_options_one_line_exit_2(opt, val, words, capsys):
    assert main(_argv("--suda", opt, val)) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_cli_per_record_to_a_fifo_or_the_input(tmp_path, capsys):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    # never blocks on the FIFO, never replaces it: refused by the one writer before any work
    assert main(_argv("--suda", "--per-record", str(fifo))) == 2
    err = capsys.readouterr().err.strip()
    assert "FIFO" in err and len(err.splitlines()) == 1, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    src = tmp_path / "in.csv"
    src.write_bytes((FREE1 / "free1.csv").read_bytes())
    argv = _argv("--suda", "--per-record", str(src))
    argv[1] = str(src)
    assert main(argv) == 2
    assert src.read_bytes() == (FREE1 / "free1.csv").read_bytes()
