"""``dpstudio protect --pipeline STEPS.json`` (issue 23 §2) and the command line's one assess
path (issue 22 §2): the same release as the engine's ``protect_chain`` for the same settings,
the chain stored and read as a recipe, measures after every step and weighted estimates, and
hostile pipelines (one line, exit code 2, nothing written).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from dpstudio import cli, engine
from tests.conftest import shared_path
from tests.engine._assess_cases import PROTECT_CASES, SEED

FREE1 = str(shared_path("free1", "free1.csv"))
KEYS = ("SEX", "AGE", "MARSTAT")
ROLES = {**{k: "k-quasi" for k in KEYS}, "WEIGHT": "weight", "INCOME": "eps-quasi"}
TYPES = {k: "categorical" for k in KEYS}
DOMAINS = {"INCOME": (0.0, 2_000_000.0)}
STEPS = [
    {"method": "local-suppression", "params": {"k": 3}},
    {"method": "laplace", "params": {"epsilon": 1.0}},
]
SHARED = (
    [a for c, r in ROLES.items() for a in ("--role", f"{c}={r}")]
    + [a for c, t in TYPES.items() for a in ("--type", f"{c}={t}")]
    + ["--domain", "INCOME=0:2000000"]
)


def run(capsys, argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def pipeline(tmp_path):
    p = tmp_path / "steps.json"
    p.write_text(json.dumps({"steps": STEPS}))
    return p


def test_cli_pipeline_equals_the_engine_chain(tmp_path, capsys, pipeline):
    out = tmp_path / "rel.csv"
    code, stdout, err = run(
        capsys, ["protect", FREE1, out, "--pipeline", pipeline, *SHARED, "--seed", hex(SEED), "--no-measures"]
    )
    assert code == 0, err
    df = pd.read_csv(FREE1)
    res = engine.protect_chain(df, STEPS, ROLES, DOMAINS, types=TYPES, seed=SEED)
    got = pd.read_csv(out)
    want = pd.read_csv(pd.io.common.StringIO(res.data.to_csv(index=False)))
    pd.testing.assert_frame_equal(got, want)
    md = json.loads((tmp_path / "rel.metadata.json").read_text())
    assert md["method"] == "chain" and md["guarantee"] == res.guarantee
    assert [s["method"] for s in md["parameters"]["steps"]] == ["local-suppression", "laplace"]
    assert stdout.startswith(f"Guarantee: {res.guarantee}\nchain: 4000 records, local-suppression(k=3")


def test_save_recipe_stores_the_chain_and_recipe_replays_it(tmp_path, capsys, pipeline):
    rec = tmp_path / "chain.private.json"
    code, _, err = run(
        capsys,
        [
            "protect",
            FREE1,
            tmp_path / "a.csv",
            "--pipeline",
            pipeline,
            *SHARED,
            "--seed",
            "0x1234567890abcdef1234567890abcdef",
            "--no-measures",
            "--save-recipe",
            rec,
        ],
    )
    assert code == 0, err
    d = json.loads(rec.read_text())
    assert d["method"] is None and d["steps"] == STEPS and d["roles"]["INCOME"] == "eps-quasi"
    assert os.stat(rec).st_mode & 0o077 == 0  # private
    code, _, err = run(capsys, ["protect", FREE1, tmp_path / "b.csv", "--recipe", rec, "--no-measures"])
    assert code == 0, err
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    # --method on the command line wins over the recipe's steps
    code, stdout, err = run(
        capsys,
        [
            "protect",
            FREE1,
            tmp_path / "c.csv",
            "--recipe",
            rec,
            "--method",
            "local-suppression",
            "--k",
            "3",
            "--role",
            "INCOME=other",
            "--no-measures",
        ],
    )
    assert code == 0, err
    assert "\nlocal-suppression: 4000 records" in stdout


def test_pipeline_prints_every_step_and_weighted_estimates(tmp_path, capsys, pipeline):
    code, stdout, err = run(
        capsys,
        [
            "protect",
            FREE1,
            tmp_path / "r.csv",
            "--pipeline",
            pipeline,
            *SHARED,
            "--seed",
            hex(SEED),
            "--estimate",
            "total=INCOME,MONEY",
            "--estimate",
            "share=SEX",
        ],
    )
    assert code == 0, err
    df = pd.read_csv(FREE1)
    run_ = engine.ChainRun(df, ROLES, DOMAINS, types=TYPES, seed=SEED).run(STEPS, complete=True)
    figs = [engine.assess(run_.result(i), level="step", weighted=False) for i in range(2)]
    lines = stdout.splitlines()
    i = lines.index("After every step (private: measured against the original):")
    for j, f in enumerate(figs):
        line = lines[i + 1 + j]
        assert line.startswith(f"  step {j + 1} (")
        assert f"suppressed cells {int(f.measures['suppressed_cells'])}" in line
        assert f"records with f_k < 3: {int(f.risk['records_fk_lt_3'])}" in line
    a = engine.assess(
        run_.result(), level="summary", weighted={"totals": ["INCOME", "MONEY"], "shares": ["SEX"]}
    )
    t = a.weighted.table
    k = lines.index("Weighted estimates (private: computed from the original; weight WEIGHT):")
    assert len(lines) == k + 1 + len(t)
    inc = float(t.loc[(t.variable == "INCOME") & (t.statistic == "total"), "release"].iloc[0])
    assert "INCOME total: original" in lines[k + 1] and f"release {inc:.6g}" in lines[k + 1]
    assert "SEX share [2]" in stdout


def test_protect_summary_figures_come_from_engine_assess(tmp_path, capsys):
    """The summary line of ``protect`` shows engine.assess's figures: those the OLD
    cli._evaluate_result computed (golden/assess.json), for a case with hierarchies too."""
    golden = json.loads((Path(__file__).parent / "golden" / "assess.json").read_text())
    for name in ("census-mdav", "adult-k-eps"):
        data, method, roles, domains, hier, params = PROTECT_CASES[name]
        src = tmp_path / f"{name}.csv"
        data().to_csv(src, index=False)
        argv = ["protect", src, tmp_path / f"{name}.out.csv", "--method", method, "--seed", hex(SEED)]
        argv += [a for c, r in roles.items() for a in ("--role", f"{c}={r}")]
        argv += [a for c, (lo, hi) in domains.items() for a in ("--domain", f"{c}={lo}:{hi}")]
        argv += [a for c, h in hier.items() for a in ("--hierarchy", f"{c}={h}")]
        argv += [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
        code, stdout, err = run(capsys, argv)
        assert code == 0, err
        want = golden["protect"][name]["cli_summary"]
        m = re.search(r"SSE normalized (\S+), RL (\S+) %", stdout)
        assert m, stdout
        assert m.group(1).rstrip(";") == f"{want['sse_normalized']:.6g}" and m.group(2) == f"{want['rl']:.3g}"


def test_no_command_module_keeps_its_own_measure_set():
    """One assess path: the commands do not choose measure sets or the RL limit themselves."""
    import inspect

    from dpstudio.cli import _common, demo, protect

    for mod in (protect, demo, _common):
        src = inspect.getsource(mod)
        assert "RL_SUMMARY_MAX" not in src and "engine.evaluate(" not in src, mod.__name__


# ------------------------------------------------------------------ hostile pipelines


def _hostile(tmp_path):
    d = tmp_path / "h"
    d.mkdir()
    big = {"steps": [{"method": "mdav", "params": {"k": 3}}] * 10_000}
    cases = {
        "bad-json": ('{"steps": [', "JSON"),
        "10000-steps": (json.dumps(big), "10,000 steps"),
        "unknown-method": (json.dumps({"steps": [{"method": "nope", "params": {}}]}), "nope"),
        "wrong-param-type": (
            json.dumps({"steps": [{"method": "local-suppression", "params": {"k": "three"}}]}),
            "'k'",
        ),
        "params-not-object": (
            json.dumps({"steps": [{"method": "local-suppression", "params": [3]}]}),
            "params",
        ),
        "steps-not-list": (json.dumps({"steps": "mdav"}), "steps"),
        "no-steps": (json.dumps({"steps": []}), "no steps"),
        "extra-key": (json.dumps({"steps": [], "seed": 1}), "seed"),
        "huge-k": (
            json.dumps({"steps": [{"method": "local-suppression", "params": {"k": 10**400}}, STEPS[1]]}),
            "'k'",
        ),
        "unprotected-key": (json.dumps({"steps": [{"method": "laplace", "params": {"epsilon": 1}}]}), "SEX"),
    }
    return d, cases


HOSTILE = [
    "bad-json",
    "10000-steps",
    "unknown-method",
    "wrong-param-type",
    "params-not-object",
    "steps-not-list",
    "no-steps",
    "extra-key",
    "huge-k",
    "unprotected-key",
    "fifo",
    "folder",
    "missing",
    "both-method-and-pipeline",
    "param-with-pipeline",
    "dask",
]


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_pipeline_is_one_line_exit_2(tmp_path, capsys, case):
    d, cases = _hostile(tmp_path)
    extra: list = []
    needle = None
    if case in cases:
        text, needle = cases[case]
        p = d / "steps.json"
        p.write_text(text)
    elif case == "fifo":
        p = d / "fifo.json"
        os.mkfifo(p)
        needle = "fifo.json"
    elif case == "folder":
        p = d
        needle = "h"
    elif case == "missing":
        p = d / "nope.json"
        needle = "nope.json"
    else:
        p = d / "steps.json"
        p.write_text(json.dumps({"steps": STEPS}))
        extra, needle = {
            "both-method-and-pipeline": (["--method", "mdav"], "--method"),
            "param-with-pipeline": (["--k", "3"], "--k"),
            "dask": (["--engine", "dask"], "memory"),
        }[case]
    out = tmp_path / "o" / "rel.csv"
    out.parent.mkdir()
    code, stdout, err = run(capsys, ["protect", FREE1, out, "--pipeline", p, *SHARED, *extra])
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("dpstudio: error: "), err
    assert needle in lines[0], err
    assert list(out.parent.iterdir()) == []  # nothing written


def test_hostile_estimates_one_line(tmp_path, capsys, pipeline):
    for est, needle in (
        ("median=INCOME", "median"),
        ("total=NOPE", "NOPE"),
        ("total=", "at least one"),
        ("total=SEXX", "SEXX"),
    ):
        out = tmp_path / "o.csv"
        code, _, err = run(
            capsys, ["protect", FREE1, out, "--pipeline", pipeline, *SHARED, "--estimate", est]
        )
        assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
        assert not out.exists()


def test_recipe_with_bad_steps_is_one_line(tmp_path, capsys):
    rec = tmp_path / "r.json"
    rec.write_text(json.dumps({"schema_version": 3, "steps": [{"method": 3}]}))
    code, _, err = run(capsys, ["protect", FREE1, tmp_path / "o.csv", "--recipe", rec])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Step 1" in err, err
    rec.write_text(json.dumps({"schema_version": 3, "steps": STEPS}))
    code, _, err = run(capsys, ["sweep", FREE1, "--out", tmp_path / "s.csv", "--recipe", rec])
    assert code == 2 and "only 'dpstudio protect'" in err, err


def test_the_pipeline_file_is_never_written_over(tmp_path, capsys, pipeline):
    before = pipeline.read_bytes()
    for extra in (["--save-recipe", pipeline], []):
        out = pipeline if not extra else tmp_path / "r.csv"
        code, _, err = run(capsys, ["protect", FREE1, out, "--pipeline", pipeline, *SHARED, *extra])
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert pipeline.read_bytes() == before
    assert not (tmp_path / "r.csv").exists()


def test_step_level_leaves_record_linkage_out_above_its_limit(monkeypatch):
    """After every step RL is left out above RL_STEP_MAX records (a quadratic search on
    categorical keys, once per step); the summary keeps its own limit."""
    df = pd.read_csv(FREE1)
    run_ = engine.ChainRun(df, ROLES, DOMAINS, types=TYPES, seed=SEED).run(STEPS, complete=True)
    monkeypatch.setattr("dpstudio.engine.assessment.RL_STEP_MAX", 1000)
    a = engine.assess(run_.result(), level="step", weighted=False)
    assert "rl" not in a.measures and [n.code for n in a.notices] == ["rl-not-computed"]
    assert "after every step" in a.notices[0]
    assert "rl" in engine.assess(run_.result(), level="summary").measures
