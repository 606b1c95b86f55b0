"""The command line: every bad input is one line on stderr with exit code 2, the input untouched."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpstudio import cli
from dpstudio.cli._common import parse_floats, parse_ints
from dpstudio.engine import registry
from dpstudio.engine.protection import _common
from dpstudio.engine.registry import MethodSpec, Param
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Output

# ---------------------------------------------------------------- a test-only method

_SEEN: dict = {}


def _run_test_method(job):
    _SEEN["params"] = dict(job.params)
    out = job.data.copy()
    cols = job.columns(Role.EPS_QUASI)
    x = job.matrix(cols)
    out[cols] = x + job.rng.normal(size=x.shape)
    return Output(out)


TEST_SPEC = MethodSpec(
    id="cli-test-noise",
    name="CLI test noise",
    family="test",
    description="test only",
    paper="-",
    params=(
        _common.k_param(),
        _common.epsilon_param(),
        Param("mode", "choice", "a", "test choice", choices=("a", "b")),
        Param("ratio", "float", 0.5, "test float", minimum=0.0, maximum=1.0),
        Param("count", "int", 2, "test int", minimum=1),
        _common.WEIGHTS_PARAM,
        _common.DROP_MISSING_PARAM,
    ),
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=lambda ctx: f"test guarantee eps={ctx.get('epsilon')}",  # plain text: no claim
    run=_run_test_method,
    uses_epsilon=True,
    needs_domain=True,
)
registry.register(TEST_SPEC)


# ---------------------------------------------------------------- helpers


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def write_csv(path: Path, df: pd.DataFrame) -> Path:
    df.to_csv(path, index=False)
    return path


def data(n=20, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "x": rng.uniform(0, 100, n).round(2),
            "y": rng.integers(0, 50, n),
            "z": rng.normal(size=n),
        }
    )


def run(capsys, args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpstudio: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]


SEED = "0x9e3779b97f4a7c15f39cc0605cedc835"  # full width (a seed below 2^64 is warned about)
PROTECT = [
    "--method",
    "cli-test-noise",
    "--epsilon",
    "1",
    "--role",
    "x=eps-quasi",
    "--domain",
    "x=0:100",
    "--seed",
    SEED,
]


def protect_bad(tmp_path, capsys, df_or_text, extra=(), needles=(), base=PROTECT):
    src = tmp_path / "in.csv"
    if isinstance(df_or_text, pd.DataFrame):
        write_csv(src, df_or_text)
    else:
        src.write_text(df_or_text)
    before = sha(src)
    out = tmp_path / "out.csv"
    code, _, err = run(capsys, ["protect", src, out, *base, *extra])
    assert_one_line_error(code, err, *needles)
    assert sha(src) == before
    assert not out.exists()
    return err


# ---------------------------------------------------------------- bad inputs (issue 2)


def test_text_in_numeric_role(tmp_path, capsys):
    df = data()
    df["x"] = df["x"].astype(object)
    df.loc[4, "x"] = "n/a?"
    protect_bad(tmp_path, capsys, df, needles=("'x'", "5", "numeric"))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(4, 40), data_=st.data())
def test_text_row_is_named(tmp_path, capsys, n, data_):
    row = data_.draw(st.integers(0, n - 1))
    df = data(n)
    df["x"] = df["x"].astype(object)
    df.loc[row, "x"] = "abc"
    err = protect_bad(tmp_path, capsys, df)
    assert f"row(s) {row + 1} " in err


def test_missing_values_and_drop_missing(tmp_path, capsys):
    df = data()
    df.loc[[2, 7, 11], "x"] = np.nan
    protect_bad(tmp_path, capsys, df, needles=("3 record(s)", "missing", "--drop-missing"))
    src = tmp_path / "in.csv"
    before = sha(src)
    out = tmp_path / "o.csv"
    code, stdout, err = run(capsys, ["protect", src, out, *PROTECT, "--drop-missing"])
    assert code == 0, err
    assert "3 record(s)" in err and "dropped" in err
    assert len(pd.read_csv(out)) == 17 and "(3 dropped)" in stdout
    assert sha(src) == before


def test_values_outside_domain(tmp_path, capsys):
    df = data()
    df.loc[[3, 9], "x"] = [150.0, -1.0]
    protect_bad(tmp_path, capsys, df, needles=("'x'", "outside", "4, 10"))


@pytest.mark.parametrize("k", ["0", "-3", "11", "2.5", "abc"])
def test_bad_k(tmp_path, capsys, k):
    protect_bad(tmp_path, capsys, data(20), extra=["--k", k], needles=("'k'",))


@pytest.mark.parametrize("eps", ["0", "-1", "inf", "nan", "abc"])
def test_bad_epsilon(tmp_path, capsys, eps):
    base = ["--method", "cli-test-noise", "--epsilon", eps, "--role", "x=eps-quasi", "--domain", "x=0:100"]
    protect_bad(tmp_path, capsys, data(), base=base, needles=("epsilon",))


def test_constant_column(tmp_path, capsys):
    """A constant protected column is not an error (noise still hides the value; MDAV leaves it
    unscaled) but the user is told, as in the app and the API."""
    df = data()
    df["x"] = 5.0
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, df)
    before = sha(src)
    code, _, err = run(capsys, ["protect", src, out, *PROTECT])
    assert code == 0, err
    assert "'x'" in err and "constant" in err
    assert sha(src) == before and out.exists()


def test_empty_and_one_row(tmp_path, capsys):
    protect_bad(tmp_path, capsys, "", needles=("in.csv", "empty"))
    protect_bad(tmp_path, capsys, "id,x,y,z\n", needles=("no records",))
    protect_bad(tmp_path, capsys, data(1), needles=("single record",))


def test_duplicate_column_names(tmp_path, capsys):
    protect_bad(tmp_path, capsys, "x,y,x\n1,2,3\n4,5,6\n7,8,9\n", needles=("duplicate", "'x'"))


def test_protected_without_domain(tmp_path, capsys):
    base = ["--method", "cli-test-noise", "--epsilon", "1", "--role", "x=eps-quasi"]
    protect_bad(tmp_path, capsys, data(), base=base, needles=("'x'", "domain", "--domain"))


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--role", "nope=eps-quasi"], "not in the data"),
        (["--role", "y=wizard"], "unknown role"),
        (["--domain", "x=100:0"], "lower < upper"),
        (["--domain", "x=0-100"], "lower:upper"),
        (["--param", "mode=c"], "'mode'"),
        (["--param", "ratio=2"], "'ratio'"),
        (["--param", "bogus=1"], "no parameter"),
        (["--k", "3", "--hierarchy", "x=/no/such/file.csv"], "not found"),
    ],
)
def test_bad_options(tmp_path, capsys, extra, needle):
    protect_bad(tmp_path, capsys, data(), extra=extra, needles=(needle,))


def test_unknown_method_lists_methods(tmp_path, capsys):
    src = write_csv(tmp_path / "in.csv", data())
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--method", "nope"])
    assert_one_line_error(code, err, "unknown method", "cli-test-noise")


def test_file_errors(tmp_path, capsys):
    code, _, err = run(capsys, ["protect", tmp_path / "missing.csv", tmp_path / "o.csv", *PROTECT])
    assert_one_line_error(code, err, "missing.csv")
    src = write_csv(tmp_path / "in.csv", data())
    before = sha(src)
    code, _, err = run(capsys, ["protect", src, src, *PROTECT])
    assert_one_line_error(code, err, "input")
    code, _, err = run(capsys, ["protect", src, tmp_path / "no" / "dir" / "o.csv", *PROTECT])
    assert_one_line_error(code, err, "no such")
    code, _, err = run(capsys, ["protect", src])
    assert_one_line_error(code, err)
    assert sha(src) == before


# ---------------------------------------------------------------- working commands


def test_protect_params_and_outputs(tmp_path, capsys):
    src = write_csv(tmp_path / "in.csv", data())
    out = tmp_path / "out.csv"
    params = ["--role", "id=identifier", "--param", "mode=b", "--param", "ratio=0.25"]
    params += ["--param", "count=3", "--param", "weights=x:2"]
    code, stdout, err = run(
        capsys, ["protect", src, out, *PROTECT, *params, "--report", tmp_path / "rep.html"]
    )
    assert code == 0, err
    assert _SEEN["params"]["mode"] == "b" and _SEEN["params"]["ratio"] == 0.25
    assert _SEEN["params"]["count"] == 3 and _SEEN["params"]["weights"] == {"x": 2.0}
    assert stdout.splitlines()[0].startswith("Guarantee: test guarantee eps=1.0")
    assert "Not covered" in stdout.splitlines()[0]  # columns y, z are released unchanged
    rel = pd.read_csv(out)
    assert "id" not in rel.columns and len(rel) == 20
    md = json.loads((tmp_path / "out.metadata.json").read_text())
    assert "seed" not in json.dumps(md).lower()
    assert (tmp_path / "rep.html").read_text().count("test guarantee") >= 1
    # same seed -> same output
    code, _, _ = run(capsys, ["protect", src, tmp_path / "out2.csv", *PROTECT, *params])
    assert (tmp_path / "out2.csv").read_bytes() == out.read_bytes()


def test_protect_summary_without_rl_for_big_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("dpstudio.engine.assessment.RL_SUMMARY_MAX", 10)
    src = write_csv(tmp_path / "in.csv", data())
    code, stdout, err = run(capsys, ["protect", src, tmp_path / "o.csv", *PROTECT])
    assert code == 0 and "SSE normalized" in stdout and "RL" not in stdout and "evaluate" in err
    code, stdout, err = run(capsys, ["protect", src, tmp_path / "o2.csv", *PROTECT, "--no-measures"])
    assert code == 0 and "SSE" not in stdout


def test_methods_and_version(capsys):
    code, out, _ = run(capsys, ["methods", "--json"])
    assert code == 0
    ids = [m["id"] for m in json.loads(out)]
    assert "cli-test-noise" in ids
    code, out, _ = run(capsys, ["methods"])
    assert code == 0 and "cli-test-noise" in out
    code, out, _ = run(capsys, ["--version"])
    assert code == 0 and out.startswith("dpstudio ")


def test_evaluate_command(tmp_path, capsys):
    df = data()
    a = write_csv(tmp_path / "a.csv", df)
    p = df.copy()
    p["x"] = p["x"] + 1
    b = write_csv(tmp_path / "b.csv", p)
    code, out, err = run(capsys, ["evaluate", a, b, "--attributes", "x,y", "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["sse_raw"] == pytest.approx(20.0) and 0 <= res["rl"] <= 100
    code, _, err = run(capsys, ["evaluate", a, b, "--attributes", "x,nope"])
    assert_one_line_error(code, err, "nope")
    code, _, err = run(
        capsys, ["evaluate", a, write_csv(tmp_path / "c.csv", df.iloc[:5]), "--attributes", "x"]
    )
    assert_one_line_error(code, err, "records")


def test_sweep_command(tmp_path, capsys):
    src = write_csv(tmp_path / "in.csv", data(30))
    out = tmp_path / "sweep.csv"
    sweep = ["sweep", src, "--method", "cli-test-noise", "--role", "x=eps-quasi", "--domain", "x=0:100"]
    code, stdout, err = run(
        capsys, [*sweep, "--k", "2:4", "--epsilon", "0.5,2", "--repeats", "2", "--seed", SEED, "--out", out]
    )
    assert code == 0, err
    rows = pd.read_csv(out)
    assert len(rows) == 9  # 3 k × (baseline + 2 ε)
    assert {"k", "epsilon", "repeats", "sse_raw_mean", "rl_mean", "rl_std"} <= set(rows.columns)
    assert err.count("[") == 9 and "[9/9]" in err
    code, _, err = run(capsys, [*sweep, "--k", "5:2", "--epsilon", "1", "--out", out])
    assert_one_line_error(code, err, "--k")


def test_parse_ranges():
    assert parse_ints("2:5") == [2, 3, 4, 5]
    assert parse_ints("2:10:4") == [2, 6, 10]
    assert parse_ints("2,5,10:12") == [2, 5, 10, 11, 12]
    assert parse_floats("0.01,0.1,1,10") == [0.01, 0.1, 1.0, 10.0]


# ---------------------------------------------------------------- end to end with real methods


def _has(method_id: str) -> bool:
    from dpstudio.engine.api import methods

    return any(m["id"] == method_id for m in methods())


@pytest.mark.parametrize(
    "method,args",
    [
        (
            "ir-dp",
            [
                "--k",
                "5",
                "--epsilon",
                "1",
                "--role",
                "FICA=eps-quasi",
                "--role",
                "FEDTAX=eps-quasi",
                "--domain",
                "FICA=0:10000",
                "--domain",
                "FEDTAX=0:200000",
            ],
        ),
        (
            "mdav",
            ["--k", "4", "--role", "FICA=k-quasi", "--role", "FEDTAX=k-quasi", "--role", "AGI=confidential"],
        ),
        (
            "laplace",
            [
                "--epsilon",
                "2",
                "--role",
                "FICA=eps-quasi",
                "--domain",
                "FICA=0:10000",
                "--budget",
                "per-attribute",
            ],
        ),
    ],
)
def test_real_methods_end_to_end(tmp_path, capsys, method, args):
    if not _has(method):
        pytest.skip(f"{method} not registered yet")
    src = tmp_path / "census.csv"
    src.write_bytes((Path(__file__).resolve().parents[2] / "resources" / "census.csv").read_bytes())
    before = sha(src)
    out = tmp_path / "out.csv"
    code, stdout, err = run(capsys, ["protect", src, out, "--method", method, "--seed", SEED, *args])
    assert code == 0, err
    assert stdout.startswith("Guarantee: ") and "RL" in stdout
    assert len(pd.read_csv(out)) == 1080 and sha(src) == before
    # bad k for the real method: k > n/2
    if "--k" in args:
        bad = list(args)
        bad[bad.index("--k") + 1] = "541"
        code, _, err = run(capsys, ["protect", src, tmp_path / "x.csv", "--method", method, *bad])
        assert_one_line_error(code, err, "n/2")


def test_demo(capsys):
    if not _has("ir-dp"):
        pytest.skip("ir-dp not registered yet")
    code, out, err = run(capsys, ["demo"])
    assert code == 0, err
    assert "Guarantee:" in out and "RL" in out and "SSE" in out


def test_subprocess_no_traceback(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("a,b\n1,2\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpstudio",
            "protect",
            str(src),
            str(tmp_path / "o.csv"),
            "--method",
            "mdav",
            "--k",
            "2",
            "--role",
            "a=k-quasi",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip().startswith("dpstudio: error:") and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run(
        [sys.executable, "-m", "dpstudio", "--version"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.startswith("dpstudio ")
