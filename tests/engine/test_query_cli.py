"""``dpstudio query`` (issue 26, interface): ``--mechanism`` (default auto, named in the output),
the ``response:`` and ``interval 95 %:`` lines, ``--delta``, ``--domain``, ``--type``,
``--records-hint``, ``--user-distance``, ``--preview``, ``--requester-budget`` and
``--answer-file`` (the researcher's PUBLIC file through the one guarded writer).

Hostile cases for every new option: wrong types, huge values, FIFOs and devices as paths, the
input or the ledger as the answer file, concurrent runs against one ledger with a requester's
budget.  A refusal is one line, exit 2, and nothing is written or spent.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.engine.query import eps_fraction, load_ledger

N = 400
RNG = np.random.default_rng(11)
DF = pd.DataFrame(
    {
        "x": RNG.integers(0, 101, N),
        "g": RNG.integers(1, 4, N),
        "h": RNG.choice(["a", "b"], N),
    }
)


@pytest.fixture
def work(tmp_path):
    DF.to_csv(tmp_path / "d.csv", index=False)
    return tmp_path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(folder: Path) -> dict:
    return {
        p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(folder.iterdir())
        if not p.name.endswith(".lock")
    }


def refused(capsys, folder: Path, argv, *needles) -> str:
    """``argv`` is refused in one line (exit 2), nothing written, nothing spent."""
    before = snapshot(folder)
    code, _out, err = run(capsys, *argv)
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("dpstudio: error:")]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]
    assert snapshot(folder) == before, "something was written or spent"
    return lines[0]


def count_cmd(work, *extra):
    return [
        "query",
        work / "d.csv",
        "count where x > 50",
        "--range",
        "count=0:400",
        "--epsilon",
        "0.5",
        *extra,
    ]


def _interval(out: str) -> tuple[float, float]:
    m = re.search(r"^interval 95 %: \[([-\d.e+]+), ([-\d.e+]+)\]", out, re.M)
    assert m, out
    return float(m.group(1)), float(m.group(2))


# ============================================================== the interface


def test_default_auto_is_named_with_response_and_interval_lines(work, capsys):
    code, out, _ = run(capsys, *count_cmd(work, "--seed", "0x" + "ab" * 16))
    assert code == 0
    assert re.search(r"^mechanism: laplace \(auto: laplace \(expected mean absolute error", out, re.M), out
    assert re.search(r"^response: \d+$", out, re.M), out
    lo, hi = _interval(out)
    resp = int(re.search(r"^response: (\d+)$", out, re.M).group(1))
    assert lo <= resp <= hi and hi - lo < 30


@pytest.mark.parametrize(
    ("query", "extra", "mech"),
    [
        ("count where x > 50", ["--range", "count=0:400"], "refinement"),
        ("count where x > 50", ["--range", "count=0:400"], "geometric"),
        ("count where x > 50", ["--range", "count=0:400", "--delta", "1e-6"], "gaussian"),
        ("median(x)", ["--range", "x=0:100:1"], "exponential"),
        ("sum(x)", ["--range", "x=0:40000:1", "--domain", "x=0:100"], "laplace"),
    ],
)
def test_every_mechanism_by_name(work, capsys, query, extra, mech):
    code, out, err = run(
        capsys, "query", work / "d.csv", query, "--epsilon", "1", "--mechanism", mech, "--json", *extra
    )
    assert code == 0, err
    pub = json.loads(out)
    assert pub["mechanism"] == mech
    assert "true_value" not in pub and "refined" not in pub  # public fields only
    if mech == "gaussian":
        assert pub["delta"] == 1e-6 and pub["rho"] > 0


def test_explicit_choice_is_named_as_the_offices(work, capsys):
    code, out, _ = run(capsys, *count_cmd(work, "--mechanism", "refinement"))
    assert code == 0 and "mechanism: refinement (refinement: chosen by the office" in out
    assert "interval 95 %: [" in out


def test_mean_without_a_domain_goes_to_refinement_and_with_one_to_noise(work, capsys):
    base = ["query", work / "d.csv", "mean(x)", "--range", "x=0:100:0.1", "--epsilon", "1"]
    code, out, _ = run(capsys, *base)
    assert code == 0 and out.count("mechanism: refinement (auto: refinement") == 1  # no domain: no noise
    code, out, _ = run(capsys, *base, "--domain", "x=0:100")
    assert code == 0 and "mechanism: laplace (auto: laplace" in out
    lo, hi = _interval(out)
    assert lo <= DF["x"].mean() + 5 and hi >= DF["x"].mean() - 5


def test_preview_spends_nothing_and_states_error_and_interval(work, capsys):
    led = work / "l.json"
    assert run(capsys, *count_cmd(work, "--ledger", led, "--budget", "2"))[0] == 0
    before = led.read_bytes()
    code, out, _ = run(capsys, *count_cmd(work, "--ledger", led, "--preview"))
    assert code == 0 and led.read_bytes() == before
    assert "response:" not in out and "epsilon spent: 0 (preview)" in out
    assert re.search(r"laplace: expected error [\d.]+ \(analytic\); 95 % interval width 13", out), out
    assert "refinement: expected error" in out and "auto: laplace" in out


def test_groups_contingency_and_several_aggregates(work, capsys):
    code, out, err = run(
        capsys, "query", work / "d.csv", "count by g, h", "--range", "count=0:400", "--epsilon", "1",
        "--groups", "g=1,2,3", "--groups", "h=a,b", "--json",
    )  # fmt: skip
    assert code == 0, err
    pub = json.loads(out)
    assert len(pub["response"]) == 6 and len(pub["interval_95"]) == 6
    code, out, err = run(
        capsys, "query", work / "d.csv", "count, mean(x) by g", "--range", "count=0:400",
        "--range", "x=0:100:0.1", "--domain", "x=0:100", "--epsilon", "1", "--groups", "g=1,2,3",
    )  # fmt: skip
    assert code == 0, err
    assert "mechanism: laplace (auto: laplace (sum over the 2 components" in out
    assert out.count("=[") == 6


def test_type_integer_gives_value_a_whole_number_grid(work, capsys):
    code, out, err = run(
        capsys, "query", work / "d.csv", "median(x)", "--range", "x=0:100", "--epsilon", "1",
        "--type", "x=integer", "--mechanism", "refinement", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert float(json.loads(out)["response"]).is_integer()


def test_user_distance_is_named_in_the_guarantee(work, capsys):
    code, out, err = run(
        capsys, "query", work / "d.csv", "mean(x)", "--range", "x=1:100:1", "--epsilon", "1",
        "--mechanism", "refinement", "--user-distance", "asymmetric:3",
    )  # fmt: skip
    assert code == 0, err
    assert "asymmetric" in out


def test_requester_budget_and_answer_file(work, capsys):
    led, ans = work / "l.json", work / "ann.json"
    code, out, err = run(
        capsys, *count_cmd(work, "--ledger", led, "--budget", "3", "--requester", "ann",
                           "--requester-budget", "1", "--answer-file", ans),
    )  # fmt: skip
    assert code == 0, err
    assert "ann: 0.5 of 1" in out
    doc = json.loads(ans.read_text())
    assert doc["requester"] == "ann" and doc["budget"] == 1 and doc["remaining"] == 0.5
    [entry] = doc["answers"]
    assert set(entry) <= {
        "n",
        "time",
        "query",
        "kind",
        "mechanism",
        "epsilon",
        "response",
        "interval_95",
        "prior",
    }
    assert entry["response"] == int(re.search(r"^response: (\d+)$", out, re.M).group(1))
    assert stat.S_IMODE(os.stat(ans).st_mode) != 0o600 and stat.S_IMODE(os.stat(led).st_mode) == 0o600
    true = int((DF["x"] > 50).sum())
    assert str(true) not in json.dumps({k: v for k, v in doc.items() if k != "answers"})
    # another requester answers: not in ann's file; ann's second answer exceeds her budget
    assert (
        run(capsys, *count_cmd(work, "--ledger", led, "--requester", "bob", "--requester-budget", "1"))[0]
        == 0
    )
    refused(capsys, work, count_cmd(work, "--ledger", led, "--requester", "ann", "--epsilon", "0.6"), "ann")
    assert run(capsys, *count_cmd(work, "--ledger", led, "--requester", "ann", "--answer-file", ans))[0] == 0
    doc = json.loads(ans.read_text())
    assert len(doc["answers"]) == 2 and doc["remaining"] == 0 and "bob" not in ans.read_text()
    # a ledger with requester budgets: an answer without a requester is refused
    refused(capsys, work, count_cmd(work, "--ledger", led), "requester")


# ============================================================== hostile values


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--mechanism", "bogus"], "--mechanism"),
        (["--mechanism", "exponential"], "count is answered by"),
        (["--mechanism", "gaussian"], "δ"),
        (["--delta", "abc"], "--delta"),
        (["--delta", "0"], "--delta"),
        (["--delta", "0.5"], "--delta"),
        (["--delta", "nan"], "--delta"),
        (["--delta", "-1e-6"], "--delta"),
        (["--delta", "1e-99999"], "--delta"),
        (["--delta", "9" * 5000], "--delta"),
        (["--records-hint", "abc"], "--records-hint"),
        (["--records-hint", "0"], "--records-hint"),
        (["--records-hint", "-5"], "--records-hint"),
        (["--records-hint", "1.5"], "--records-hint"),
        (["--records-hint", "1e30"], "--records-hint"),
        (["--records-hint", "9" * 5000], "--records-hint"),
        (["--domain", "x=a:b"], "--domain"),
        (["--domain", "x=5:1"], "x"),
        (["--domain", "x=0:1e300"], "x"),
        (["--domain", "x=nan:1"], "x"),
        (["--domain", "x"], "--domain"),
        (["--type", "x=bogus"], "unknown type"),
        (["--type", "nope=integer"], "not in the data"),
        (["--type", "x"], "--type"),
        (["--user-distance", "bogus"], "--user-distance"),
        (["--user-distance", "asymmetric:-1"], "--user-distance"),
        (["--user-distance", "asymmetric:1e400"], "--user-distance"),
        (["--mechanism", "laplace", "--user-distance", "log"], "refinement only"),
        (["--requester-budget", "1"], "--requester-budget"),
        (["--requester", "ann", "--requester-budget", "1"], "--ledger"),
        (["--answer-file", "a.json"], "--ledger"),
        (["--groups", "g=1,2"], "groups by"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_hostile_options_are_one_line(work, capsys, monkeypatch, extra, needle):
    monkeypatch.chdir(work)
    refused(capsys, work, count_cmd(work, *extra), needle)


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1", "0", "1e400", "1e5", "9" * 5000, ""])
def test_hostile_requester_budgets(work, capsys, value):
    led = work / "l.json"
    assert run(capsys, *count_cmd(work, "--ledger", led, "--budget", "3"))[0] == 0
    refused(capsys, work, count_cmd(work, "--ledger", led, "--requester", "ann", "--requester-budget", value),
            "budget")  # fmt: skip


def test_a_requester_budget_below_what_was_spent_is_refused(work, capsys):
    led = work / "l.json"
    assert run(capsys, *count_cmd(work, "--ledger", led, "--budget", "3", "--requester", "ann",
                                  "--requester-budget", "2"))[0] == 0  # fmt: skip
    refused(capsys, work, count_cmd(work, "--ledger", led, "--requester", "ann", "--requester-budget", "0.25"),
            "ann")  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "input", "ledger", "txt", "nofolder", "link"])
def test_hostile_answer_files(work, capsys, kind):
    led = work / "l.json"
    assert run(capsys, *count_cmd(work, "--ledger", led, "--budget", "3"))[0] == 0
    target = {
        "fifo": work / "f.json",
        "device": Path("/dev/null"),
        "folder": work / "dir.json",
        "input": work / "d.csv",
        "ledger": led,
        "txt": work / "a.txt",
        "nofolder": work / "missing" / "a.json",
        "link": work / "link.json",
    }[kind]
    if kind == "fifo":
        os.mkfifo(target)
    if kind == "folder":
        target.mkdir()
    if kind == "link":
        (work / "real.json").write_text("{}")
        target.symlink_to(work / "real.json")
    refused(capsys, work, count_cmd(work, "--ledger", led, "--answer-file", target), "answer file")
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert len(load_ledger(led).entries) == 1  # nothing spent


def test_answer_file_on_the_audit_export_is_refused(work, capsys):
    led = work / "l.json"
    refused(capsys, work, count_cmd(work, "--ledger", led, "--budget", "3", "--audit", work / "a.json",
                                    "--answer-file", work / "a.json"), "answer file")  # fmt: skip


# ============================================================== concurrent runs


def _env():
    env = dict(os.environ)
    import dpstudio

    env["PYTHONPATH"] = (
        str(Path(dpstudio.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    )
    return env


def test_concurrent_runs_never_overspend_a_requesters_budget(work, capsys):
    """8 processes of one requester with 0.75 of her budget 1 left (ε = 0.25 each, the data set's
    total 10): exactly 3 answers are printed and recorded; the answer file is whole and holds all."""
    led = work / "l.json"
    assert run(capsys, *count_cmd(work, "--ledger", led, "--budget", "10", "--requester", "ann",
                                  "--requester-budget", "1", "--epsilon", "0.25"))[0] == 0  # fmt: skip
    cmd = [
        sys.executable, "-m", "dpstudio", "query", str(work / "d.csv"), "mean(x)", "--range", "x=0:100:0.001",
        "--mechanism", "refinement", "--epsilon", "0.25", "--ledger", str(led), "--requester", "ann",
        "--wait", "300", "--answer-file", str(work / "ann.json"),
    ]  # fmt: skip
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(8)]  # fmt: skip
    outs = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    answered = [o for rc, o, _e in outs if rc == 0 and "response: " in o]
    refused_ = [e for rc, _o, e in outs if rc == 2 and "ann" in e]
    assert len(answered) + len(refused_) == 8, [e for *_x, e in outs]
    back = load_ledger(led)
    spent = sum(
        (eps_fraction(e["epsilon"]) for e in back.entries if e.get("requester") == "ann"), Fraction(0)
    )
    assert len(answered) == 3 and spent == 1  # 0.25 before + 3 × 0.25
    doc = json.loads((work / "ann.json").read_text())
    assert len(doc["answers"]) == 4 and doc["remaining"] == 0
