"""The measurement policy lives in the engine: the CLI, the API and the app's compute path
give EQUAL measures for equal settings (issue 9, problem 1)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.app import compute
from dpstudio.cli._common import parse_ints
from dpstudio.cli._output import fmt
from dpstudio.engine.io import read_table
from dpstudio.engine.measures import HierarchyDistance, measurement_plan, mismatch

ROOT = Path(__file__).resolve().parents[2]
CENSUS = ROOT / "resources" / "census.csv"
ADULT = ROOT / "resources" / "adult" / "adult.csv"
EDU = ROOT / "resources" / "adult" / "hierarchies" / "adult_hierarchy_education.csv"


def _subset(src: Path, dst: Path, n: int) -> pd.DataFrame:
    df, _ = read_table(str(src))
    df.iloc[:n].to_csv(dst, index=False)
    return read_table(str(dst))[0]


def _cli(capsys, args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def _engine_points(df, method, roles, hier, ks, eps, **params):
    return [
        (p.k, p.epsilon, p.values)
        for p in engine.sweep(
            df, method, roles, ks=ks, epsilons=eps, repeats=1, seed=3, hierarchies=hier, **params
        )
    ]


def _app_points(df, method, roles, hier, ks, eps, **params):
    return [
        (p.k, p.epsilon, p.values)
        for p in compute.sweep_points(
            df,
            method,
            roles,
            {},
            ks=ks,
            epsilons=eps,
            repeats=1,
            seed=3,
            hierarchies=hier,
            params=params,
            check_cancel=lambda: None,
            progress=lambda f: None,
        )
    ]


def _assert_same_points(cli_csv: Path, api, app):
    rows = pd.read_csv(cli_csv)
    assert len(rows) == len(api) == len(app) > 0
    for (_, row), (k, e, v_api), (k2, e2, v_app) in zip(rows.iterrows(), api, app):
        assert (k, e) == (k2, e2) and int(row["k"]) == k
        assert v_api == v_app  # bit for bit: the same engine call
        for name in ("sse_raw", "sse_normalized", "rl"):
            assert row[f"{name}_mean"] == pytest.approx(v_api[name][0], rel=1e-12, abs=1e-12)


def _summary(out: str) -> tuple[str, str]:
    m = re.search(r"SSE normalized (\S+), RL (\S+) %", out)
    assert m, out
    return m.group(1), m.group(2)


def test_keps_numeric_k_quasi_equal_in_cli_api_app(tmp_path, capsys):
    """`dpstudio sweep … --method k-eps --role AFNLWGT=k-quasi` used to fail ('must be
    numeric') where the app succeeded; now both give the same measures."""
    src = tmp_path / "census.csv"
    df = _subset(CENSUS, src, 300)
    roles = {"AFNLWGT": "k-quasi", "FICA": "eps-quasi"}
    types = {"FICA": "integer"}  # no domain: the output grid γ = 1 comes from the declared type
    ks, eps = [2, 25], [1.0]
    out_csv = tmp_path / "sweep.csv"
    _cli(
        capsys,
        [
            "sweep",
            src,
            "--method",
            "k-eps",
            "--role",
            "AFNLWGT=k-quasi",
            "--role",
            "FICA=eps-quasi",
            "--type",
            "FICA=integer",
            "--k",
            "2,25",
            "--epsilon",
            "1",
            "--repeats",
            "1",
            "--seed",
            "3",
            "--out",
            out_csv,
        ],
    )
    api = _engine_points(df, "k-eps", roles, None, ks, eps, types=types)
    _assert_same_points(out_csv, api, _app_points(df, "k-eps", roles, None, ks, eps, types=types))
    # generalised at k = 25: the numeric k-quasi is measured 0/1, so SSE is positive
    assert api[-1][2]["sse_raw"][0] > 0

    # protect: CLI summary == API evaluate == app compute path
    out, _ = _cli(
        capsys,
        [
            "protect",
            src,
            tmp_path / "rel.csv",
            "--method",
            "k-eps",
            "--role",
            "AFNLWGT=k-quasi",
            "--role",
            "FICA=eps-quasi",
            "--k",
            "25",
            "--type",
            "FICA=integer",
            "--epsilon",
            "1",
            "--seed",
            "5",
            "--no-audit-trail",
        ],
    )
    res, ev_app = compute.protect_and_evaluate(
        df, "k-eps", roles, {}, {}, 5, {"k": 25, "epsilon": 1.0, "types": types}
    )
    ev_api = engine.evaluate(
        res.aligned_original(),
        res.data,
        res.protected_attributes,
        result=res,
        measures=("sse", "rl", "delta", "corr", "kanon"),
    )
    for key in ("sse_raw", "sse_normalized", "rl", "k_min_class_size"):
        assert ev_api[key] == ev_app[key]
    assert "delta_mean" not in ev_api or "AFNLWGT" not in ev_api["delta_mean"]
    assert _summary(out) == (fmt(ev_api["sse_normalized"]), f"{ev_api['rl']:.3g}")
    assert any("measured as categories" in w and "AFNLWGT" in w for w in ev_api["warnings"])


def test_hierarchy_distance_equal_in_cli_api_app(tmp_path, capsys):
    """A k-quasi with a loaded hierarchy is measured by its semantic distance δ everywhere."""
    src = tmp_path / "adult.csv"
    df = _subset(ADULT, src, 300)
    roles = {"age": "k-quasi", "education": "k-quasi"}
    hier = {"education": str(EDU)}
    plan = measurement_plan(df, method="k-eps", roles=roles, hierarchies=hier)
    assert isinstance(plan.distances["education"], HierarchyDistance)
    assert plan.distances["age"] is mismatch and plan.flat == ["age"]
    ks, eps = [2, 30], [1.0]
    out_csv = tmp_path / "sweep.csv"
    _cli(
        capsys,
        [
            "sweep",
            src,
            "--method",
            "k-eps",
            "--role",
            "age=k-quasi",
            "--role",
            "education=k-quasi",
            "--hierarchy",
            f"education={EDU}",
            "--k",
            "2,30",
            "--epsilon",
            "1",
            "--repeats",
            "1",
            "--seed",
            "3",
            "--out",
            out_csv,
        ],
    )
    api = _engine_points(df, "k-eps", roles, hier, ks, eps)
    _assert_same_points(out_csv, api, _app_points(df, "k-eps", roles, hier, ks, eps))

    res, ev_app = compute.protect_and_evaluate(df, "k-eps", roles, {}, hier, 5, {"k": 30, "epsilon": 1.0})
    orig = res.aligned_original()
    ev_api = engine.evaluate(
        orig,
        res.data,
        res.protected_attributes,
        result=res,
        hierarchies=hier,
        measures=("sse", "rl", "delta", "corr", "kanon"),
    )
    assert ev_api["sse_raw"] == ev_app["sse_raw"] and ev_api["rl"] == ev_app["rl"]
    # δ, not 0/1: the SSE differs from the one measured with 0/1 on education
    flat = engine.evaluate(
        orig,
        res.data,
        res.protected_attributes,
        result=res,
        hierarchies=hier,
        measures=("sse",),
        categorical_distance={"education": mismatch},
    )
    changed = (orig["education"].astype(str) != res.data["education"].astype(str)).any()
    assert changed and flat["sse_raw"] != ev_api["sse_raw"]

    # CLI evaluate on two aligned files with --hierarchy == API evaluate
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    orig.to_csv(a, index=False)
    res.data.to_csv(b, index=False)
    out, _ = _cli(
        capsys,
        [
            "evaluate",
            a,
            b,
            "--attributes",
            "age,education",
            "--method",
            "k-eps",
            "--role",
            "age=k-quasi",
            "--role",
            "education=k-quasi",
            "--hierarchy",
            f"education={EDU}",
            "--json",
        ],
    )
    import json

    got = json.loads(out)
    oa, ob = read_table(str(a))[0], read_table(str(b))[0]
    want = engine.evaluate(oa, ob, ["age", "education"], method="k-eps", roles=roles, hierarchies=hier)
    assert got["sse_raw"] == pytest.approx(want["sse_raw"], rel=1e-12)
    assert got["rl"] == pytest.approx(want["rl"], rel=1e-12)
    assert np.isfinite(got["sse_raw"])


def test_sweep_yields_skipped_cells_in_grid_order():
    """t-close-dp needs k ≥ ⌊e^ε⌋ + 1: infeasible cells come back skipped, with their reason,
    and the other cells keep the random streams of an unbroken sweep."""
    df, _ = read_table(str(CENSUS))
    df = df.iloc[:400]
    roles = {"FICA": "k-quasi", "FEDTAX": "k-quasi", "INTVAL": "confidential"}
    pts = list(engine.sweep(df, "t-close-dp", roles, ks=[10, 2], epsilons=[1.0, 10.0], repeats=1, seed=4))
    assert [(p.k, p.epsilon) for p in pts] == [
        (10, None),
        (10, 1.0),
        (10, 10.0),
        (2, None),
        (2, 1.0),
        (2, 10.0),
    ]
    skipped = {(p.k, p.epsilon) for p in pts if p.skipped}
    assert {(10, 10.0), (2, 1.0), (2, 10.0)} <= skipped
    assert all(p.values == {} and p.repeats == 0 for p in pts if p.skipped)
    assert all(p.values for p in pts if not p.skipped)
    alone = list(engine.sweep(df, "t-close-dp", roles, ks=[10], epsilons=[1.0], repeats=1, seed=4))
    assert alone[1].values == pts[1].values


def test_grid_grammar_is_shared():
    from dpstudio.app.widgets.explore_panel import parse_numbers
    from dpstudio.engine.sweeps import parse_grid

    for text in ("2:100", "2:100:5", "2,5,10", "2-10, 12", "10:50:10 3"):
        assert parse_ints(text) == parse_grid(text, integer=True) == parse_numbers(text, integer=True)
    with pytest.raises(engine.ParameterError, match="--k"):
        parse_ints("5:2")
