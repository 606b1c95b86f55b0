"""The query desk's budget ledger (issue 21 part 2): never overspend.

Real concurrent processes against one ledger file; a process killed while it holds the lock;
ε validated on every path into the ledger (spend, loading a file); exact sums; a --budget
that differs from the ledger's; files that are not regular writable files.
"""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query import (
    BudgetExceeded,
    BudgetLedger,
    NumericRange,
    Prior,
    eps_fraction,
    load_ledger,
    refine_multicomponent,
    refine_query,
    save_ledger,
)

DF = pd.DataFrame(
    {"x": np.arange(40) % 17, "y": np.arange(40) % 5, "g": np.arange(40) % 3 + 1},
)
PRIOR = Prior.uniform(NumericRange(0, 40, 1))


@pytest.fixture
def data_csv(tmp_path):
    p = tmp_path / "d.csv"
    DF.to_csv(p, index=False)
    return p


def _cli(*argv):
    from dpstudio import cli

    return cli.main([str(a) for a in argv])


def _query_cmd(data, led, *extra, rng="x=0:40:1"):
    return [
        sys.executable, "-m", "dpstudio", "query", str(data), "mean(x)", "--range", rng,
        "--epsilon", "0.5", "--ledger", str(led), *map(str, extra),
    ]  # fmt: skip


def _env():
    env = dict(os.environ)
    import dpstudio

    root = str(Path(dpstudio.__file__).resolve().parents[1])  # the dpstudio under test
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ============================================================== real concurrent processes


def test_concurrent_processes_never_overspend(data_csv, tmp_path):
    """10 processes started together, each asking ε = 0.5 of a ledger with 2 left: exactly 4
    answers are printed, the ledger records exactly those 4 (and their responses), the spent
    total equals the budget and never exceeds it.  (Before: all answered, 1-3 recorded.)"""
    led = tmp_path / "L.json"
    rng = "x=0:200000:1"  # a large grid: each answer takes long enough for the runs to overlap
    first = subprocess.run(
        _query_cmd(data_csv, led, "--budget", "2.5", rng=rng),
        capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    n = 10
    procs = [
        subprocess.Popen(
            _query_cmd(data_csv, led, "--wait", "300", rng=rng),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )  # fmt: skip
        for _ in range(n)
    ]
    outs = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    answered = [o for rc, o, _e in outs if rc == 0 and "response: " in o]
    refused = [e for rc, _o, e in outs if rc == 2 and "refused" in e]
    assert len(answered) + len(refused) == n, [e for *_x, e in outs]
    data = json.loads(led.read_text())
    spent = sum((eps_fraction(e["epsilon"]) for e in data["entries"]), Fraction(0))
    assert spent <= Fraction(5, 2)  # never above the budget
    assert (1 + len(answered)) * Fraction(1, 2) <= Fraction(5, 2)  # what was released
    assert len(answered) == 4 and len(data["entries"]) == 1 + len(answered)  # released == recorded
    printed = sorted(int(o.split("response: ")[1].split()[0]) for o in answered)
    assert printed == sorted(int(e["response"]) for e in data["entries"][1:])
    assert data["spent"] == 2.5 and data["remaining"] == 0
    assert [e["n"] for e in data["entries"]] == [1, 2, 3, 4, 5]
    assert stat.S_IMODE(os.stat(led).st_mode) == 0o600


def test_threads_of_one_process_share_the_lock(tmp_path):
    """The app answers from worker threads: the lock holds between threads too."""
    led = tmp_path / "L.json"
    save_ledger(led, BudgetLedger(1.0, dataset="d"))
    results: list = []

    def ask():
        try:
            results.append(refine_query(DF, "mean(x)", PRIOR, 0.25, ledger=led).response)
        except BudgetExceeded:
            results.append("refused")

    ts = [threading.Thread(target=ask) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert len(results) == 8 and results.count("refused") == 4
    back = load_ledger(led)
    assert len(back.entries) == 4 and back.remaining == 0


HOLDER = """
import sys, time
from dpstudio.engine.query.ledger import locked_ledger
with locked_ledger(sys.argv[1], total=2) as led:
    print("locked", flush=True)
    time.sleep(600)
"""


def test_a_killed_process_releases_the_lock(data_csv, tmp_path):
    led = tmp_path / "L.json"
    assert _cli("query", data_csv, "mean(x)", "--range", "x=0:40:1", "--epsilon", "0.5",
                "--ledger", led, "--budget", "2") == 0  # fmt: skip
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(led)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = subprocess.run(_query_cmd(data_csv, led, "--wait", "0.5"), capture_output=True,
                              text=True, timeout=300, env=_env())  # fmt: skip
        assert busy.returncode == 2 and "response" not in busy.stdout
        lines = busy.stderr.strip().splitlines()
        assert len(lines) == 1 and "is in use by another query; try again" in lines[0]
        assert len(load_ledger(led).entries) == 1
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: the OS releases it
        holder.wait(60)
        ok = subprocess.run(_query_cmd(data_csv, led, "--wait", "30"), capture_output=True,
                            text=True, timeout=300, env=_env())  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        assert "remaining budget: 1 of 2" in ok.stdout and len(load_ledger(led).entries) == 2
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(60)


def test_waiting_for_the_lock_is_bounded_and_cancellable(tmp_path):
    from dpstudio.engine.errors import Cancelled
    from dpstudio.engine.query.ledger import LedgerBusy, locked_ledger

    led = tmp_path / "L.json"
    got = threading.Event()
    release = threading.Event()

    def hold():
        with locked_ledger(led, total=1):
            got.set()
            release.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert got.wait(30)
        with pytest.raises(LedgerBusy, match="in use by another query; try again"):
            with locked_ledger(led, total=1, timeout=0.2):
                pass

        def cancel():
            raise Cancelled()

        with pytest.raises(Cancelled):
            with locked_ledger(led, total=1, timeout=30, check_cancel=cancel):
                pass
    finally:
        release.set()
        t.join(30)
    with locked_ledger(led, total=1, timeout=1) as bound:  # free again
        assert bound.remaining == 1


# ============================================================== ε on every path


@pytest.mark.parametrize("bad", [-0.5, 0, 0.0, -0.0, math.nan, math.inf, -math.inf, "0.5", True, False,
                                 None, 10**400, [0.5], complex(0.5, 0)])  # fmt: skip
def test_spend_rejects_what_is_not_a_finite_positive_number(bad):
    led = BudgetLedger(5.0)
    led.spend(0.5)
    with pytest.raises(ParameterError):
        led.spend(bad)
    with pytest.raises(ParameterError):
        led.check(bad)
    assert len(led.entries) == 1 and led.remaining == 4.5 and led.spent == 0.5


@pytest.mark.parametrize("bad", [-1, 0, math.nan, math.inf, "5", True, None, 10**400])
def test_total_budget_must_be_a_finite_positive_number(bad):
    with pytest.raises(ParameterError):
        BudgetLedger(bad)


def _good_ledger(tmp_path) -> tuple[Path, dict]:
    led = BudgetLedger(5.0, dataset="d.csv", digest=None)
    for e in (0.5, 0.25, 0.1):
        refine_query(DF, "mean(x)", PRIOR, e, ledger=led, rng=0)
    path = tmp_path / "L.json"
    save_ledger(path, led)
    return path, json.loads(path.read_text())


def _entry(i, **kw):
    def f(d):
        d["entries"][i].update(kw)

    return f


def _set(key, value):
    def f(d):
        d[key] = value

    return f


def _drop(key, i=None):
    def f(d):
        (d if i is None else d["entries"][i]).pop(key)

    return f


BAD_FILES = {
    "negative ε": (_entry(2, epsilon=-0.5), "entry 3 has epsilon -0.5"),
    "text ε": (_entry(1, epsilon="0.25"), "entry 2 has epsilon '0.25'"),
    "NaN ε": (_entry(0, epsilon=math.nan), "entry 1 has epsilon nan"),
    "infinite ε": (_entry(0, epsilon=math.inf), "entry 1 has epsilon inf"),
    "bool ε": (_entry(0, epsilon=True), "entry 1 has epsilon True"),
    "zero ε": (_entry(0, epsilon=0), "entry 1 has epsilon 0"),
    "no ε": (_drop("epsilon", 1), "entry 2 has no epsilon"),
    "entry not a record": (lambda d: d["entries"].__setitem__(0, 0.5), "entry 1 is not a record"),
    "entries not a list": (_set("entries", {"a": 1}), "entries must be a list"),
    "entry missing (renumbered)": (lambda d: d["entries"].pop(1), "entry 2 is numbered 3"),
    "negative total": (_set("total", -5), "total budget must be a finite number > 0, got -5"),
    "text total": (_set("total", "5"), "got '5'"),
    "NaN total": (_set("total", math.nan), "got nan"),
    "no total": (_drop("total"), "has no total budget"),
    "spent edited": (_set("spent", 0.1), "does not match its answers"),
    "overspent": (_set("total", 0.5), "more than its total budget"),
    "not a ledger": (_set("format", "something"), "is not a dpstudio query ledger"),
    "newer version": (_set("version", 99), "newer dpstudio"),
    "digest not text": (_set("digest", 5), "digest 5 is not a text"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_damaged_ledger_file_is_refused_in_one_line(data_csv, tmp_path, capsys, case):
    path, data = _good_ledger(tmp_path)
    mutate, expected = BAD_FILES[case]
    mutate(data)
    path.write_text(json.dumps(data))  # json writes NaN / Infinity tokens as Python reads them
    before = path.read_bytes()
    with pytest.raises(ParameterError, match="ledger"):
        load_ledger(path)
    capsys.readouterr()
    rc = _cli("query", data_csv, "mean(x)", "--range", "x=0:40:1", "--epsilon", "0.1", "--ledger", path)
    out, err = capsys.readouterr()
    assert rc == 2 and "response" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpstudio: error: ") and expected in lines[0], lines
    assert str(path) in lines[0] or "ledger" in lines[0]
    assert path.read_bytes() == before  # never rewritten


def test_garbage_and_huge_numbers_in_a_ledger_file(data_csv, tmp_path, capsys):
    path = tmp_path / "L.json"
    for text in ("{not json", "[]", '{"format": "dpstudio-query-ledger", "total": 1e400}', "\xff\xfe"):
        path.write_text(text, encoding="latin-1")
        assert (
            _cli("query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.1", "--ledger", path)
            == 2
        )
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ============================================================== exact sums


def test_budget_arithmetic_is_exact():
    led = BudgetLedger(2)
    for _ in range(4):
        led.spend(0.5)
    assert led.remaining_exact == 0 and led.spent == 2.0
    with pytest.raises(BudgetExceeded):
        led.spend(0.5)
    led = BudgetLedger(1)
    for _ in range(10):
        refine_query(DF, "count", PRIOR, 0.1, ledger=led, rng=0)
    assert led.remaining_exact == 0
    with pytest.raises(BudgetExceeded):
        refine_query(DF, "count", PRIOR, 1e-9, ledger=led, rng=0)
    led = BudgetLedger(0.3)
    led.spend(0.1)
    led.spend(0.2)  # 0.1 + 0.2 is 0.30000000000000004 in floats: exactly 0.3 here
    assert led.remaining_exact == 0


def test_a_composed_epsilon_is_never_recorded_below_what_was_spent():
    """A split query's Σεi is an exact fraction; the float written for it is rounded UP (the
    old ledger wrote float(Σεi), whose decimal is below Σεi for these two values), and a
    budget equal to that rounded-down float does not cover the query."""
    a, b = 0.3842495632985409, 0.13498382261231662
    exact = eps_fraction(a) + eps_fraction(b)
    assert eps_fraction(float(exact)) < exact  # the trap
    led = BudgetLedger(5)
    refine_multicomponent(DF, "mean(x), mean(y)", [PRIOR, PRIOR], [a, b], mode="split", ledger=led, rng=0)
    assert eps_fraction(led.entries[0]["epsilon"]) >= exact
    assert BudgetLedger.from_json(led.to_json())._spent() >= exact
    tight = BudgetLedger(float(exact))
    with pytest.raises(BudgetExceeded):
        refine_multicomponent(DF, "mean(x), mean(y)", [PRIOR, PRIOR], [a, b], mode="split", ledger=tight)
    assert tight.entries == []


# ============================================================== --budget / --set-budget


def test_a_budget_that_differs_from_the_ledger_is_refused(data_csv, tmp_path, capsys):
    led = tmp_path / "L.json"
    base = ["query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.5", "--ledger", led]
    assert _cli(*base, "--budget", "2") == 0
    capsys.readouterr()
    before = led.read_bytes()
    assert _cli(*base, "--budget", "5") == 2
    out, err = capsys.readouterr()
    assert "response" not in out and len(err.strip().splitlines()) == 1
    assert "--budget 5 differs from the total budget 2" in err and "--set-budget 5" in err
    assert led.read_bytes() == before
    assert _cli(*base, "--budget", "2.0") == 0  # the same total: fine
    assert "remaining budget: 1 of 2" in capsys.readouterr().out
    # --set-budget changes it, recorded in the ledger as an event
    assert _cli(*base, "--set-budget", "3", "--requester", "head of unit") == 0
    assert "remaining budget: 1.5 of 3" in capsys.readouterr().out
    back = load_ledger(led)
    assert back.total == 3 and len(back.entries) == 3
    assert back.events == [
        {**back.events[0], "event": "total budget changed", "from": 2.0, "to": 3.0, "after_entry": 2,
         "requester": "head of unit"}
    ]  # fmt: skip
    assert _cli(*base, "--set-budget", "1") == 2  # below what was spent
    assert "1.5 is already spent" in capsys.readouterr().err
    assert load_ledger(led).total == 3
    # without a ledger, a budget means nothing: said, not ignored
    assert _cli("query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.5", "--budget", "2") == 2
    assert "--ledger" in capsys.readouterr().err
    for bad in ("nan", "inf", "-1", "0"):
        assert _cli(*base, "--set-budget", bad) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert load_ledger(led).total == 3


# ============================================================== the file itself


def test_a_read_only_ledger_is_refused_not_replaced(data_csv, tmp_path, capsys):
    led = tmp_path / "L.json"
    base = ["query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.5", "--ledger", led]
    assert _cli(*base, "--budget", "2") == 0
    os.chmod(led, 0o444)
    before, ino = led.read_bytes(), os.stat(led).st_ino
    capsys.readouterr()
    assert _cli(*base) == 2
    out, err = capsys.readouterr()
    assert "response" not in out and "read-only" in err and len(err.strip().splitlines()) == 1
    assert led.read_bytes() == before and os.stat(led).st_ino == ino
    assert stat.S_IMODE(os.stat(led).st_mode) == 0o444
    with pytest.raises(ParameterError, match="read-only"):
        refine_query(DF, "count", PRIOR, 0.5, ledger=led)
    assert load_ledger(led).remaining == 1.5  # still readable


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize("which", ["ledger", "lock"])
def test_fifos_devices_folders_and_links_are_refused_without_hanging(data_csv, tmp_path, which):
    led = tmp_path / "L.json"
    target = led if which == "ledger" else tmp_path / "L.json.lock"
    os.mkfifo(target)
    r = subprocess.run(_query_cmd(data_csv, led, "--budget", "2", "--wait", "1"),
                       capture_output=True, text=True, timeout=120, env=_env())  # fmt: skip
    assert r.returncode == 2 and "FIFO" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert stat.S_ISFIFO(os.lstat(target).st_mode)  # left as it was


def test_devices_folders_and_links_are_refused(data_csv, tmp_path, capsys):
    base = [
        "query",
        data_csv,
        "count",
        "--range",
        "count=0:40",
        "--epsilon",
        "0.5",
        "--budget",
        "2",
        "--ledger",
    ]
    (tmp_path / "folder").mkdir()
    real = tmp_path / "real.json"
    assert _cli(*base, real) == 0
    (tmp_path / "link.json").symlink_to(real)
    capsys.readouterr()
    for path, why in (("/dev/null", "not a regular file"), (tmp_path / "folder", "is a folder"),
                      (tmp_path / "link.json", "symbolic link"), (tmp_path / "no" / "L.json", "does not exist")):  # fmt: skip
        assert _cli(*base, path) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert Path("/dev/null").is_char_device() and (tmp_path / "link.json").is_symlink()


def test_a_failed_write_releases_no_answer(data_csv, tmp_path, capsys, monkeypatch):
    from dpstudio.engine import io as eio

    led = tmp_path / "L.json"
    base = ["query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.5", "--ledger", led]
    assert _cli(*base, "--budget", "2") == 0
    before = led.read_bytes()
    capsys.readouterr()

    def disk_full(path, writer, **kw):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(eio, "atomic_write", disk_full)
    assert _cli(*base) == 2
    out, err = capsys.readouterr()
    assert "response" not in out and "No space left" in err
    assert led.read_bytes() == before
    with pytest.raises(OSError):
        refine_query(DF, "count", PRIOR, 0.5, ledger=led)
    monkeypatch.undo()
    assert load_ledger(led).remaining == 1.5


def test_save_ledger_never_writes_a_stale_copy_over_new_answers(tmp_path):
    led = tmp_path / "L.json"
    save_ledger(led, BudgetLedger(2, dataset="d"))
    stale = load_ledger(led)
    refine_query(DF, "count", PRIOR, 0.5, ledger=led)  # another query meanwhile
    stale.spend(0.1)
    with pytest.raises(ParameterError, match="holds answers that this copy"):
        save_ledger(led, stale)
    assert [e["epsilon"] for e in load_ledger(led).entries] == [0.5]
    fresh = load_ledger(led)
    fresh.spend(0.1)
    save_ledger(led, fresh)  # a copy that extends the file is written
    assert [e["epsilon"] for e in load_ledger(led).entries] == [0.5, 0.1]


def test_a_project_names_the_ledger_file(data_csv, tmp_path, capsys):
    led = tmp_path / "L.json"
    proj = tmp_path / "study.dpsproj"
    proj.write_text(json.dumps({"schema_version": 3, "method": "ir-dp", "query_ledger_file": "L.json"}))
    before = proj.read_text()
    base = ["query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.5"]
    assert _cli(*base, "--ledger", proj, "--budget", "2") == 0
    assert proj.read_text() == before and load_ledger(led).remaining == 1.5
    assert load_ledger(proj).remaining == 1.5
    # an older project with the ledger inside: told what to do, nothing written
    old = tmp_path / "old.dpsproj"
    old.write_text(json.dumps({"schema_version": 3, "query_ledger": BudgetLedger(2).to_dict()}))
    capsys.readouterr()
    assert _cli(*base, "--ledger", old) == 2
    assert "older dpstudio" in capsys.readouterr().err


def test_a_missing_ledger_without_a_budget_leaves_no_file(data_csv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        _cli("query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.1", "--ledger", "new.json")
        == 2
    )
    assert "does not exist yet" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists() and not (tmp_path / "new.json.lock").exists()
    with pytest.raises(ParameterError, match="does not exist yet"):
        refine_query(DF, "count", PRIOR, 0.1, ledger=tmp_path / "new.json")


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_decimals = st.integers(1, 999).map(lambda i: i / 1000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(total=_decimals.map(lambda x: x * 3), plan=st.lists(_decimals, min_size=1, max_size=12))
def test_the_file_always_holds_exactly_the_spends_that_fit(tmp_path_factory, total, plan):
    """Any sequence of ε against any total, each spend through the file under the lock: the
    file's spent total is the exact sum of the accepted ε, never above the total, and a spend is
    refused exactly when it does not fit."""
    from dpstudio.engine.query.ledger import locked_ledger

    path = tmp_path_factory.mktemp("led") / "L.json"
    accepted = Fraction(0)
    for e in plan:
        fits = accepted + eps_fraction(e) <= eps_fraction(total)
        with locked_ledger(path, total=total) as led:
            try:
                led.spend(e)
            except BudgetExceeded:
                assert not fits
                continue
        assert fits
        accepted += eps_fraction(e)
        back = load_ledger(path)
        assert back._spent() == accepted <= eps_fraction(total)
        assert back.remaining_exact == eps_fraction(total) - accepted


@pytest.mark.parametrize(
    "opts",
    [["--wait", "nan"], ["--wait", "-1"], ["--wait", "1e9"], ["--budget", "nan"], ["--budget", "inf"],
     ["--budget", "0"], ["--budget", "-2"], ["--budget", "2", "--set-budget", "3"]],
)  # fmt: skip
def test_hostile_ledger_options_are_one_line_exit_2(data_csv, tmp_path, capsys, opts):
    led = tmp_path / "L.json"
    rc = _cli("query", data_csv, "count", "--range", "count=0:40", "--epsilon", "0.1", "--ledger", led, *opts)
    out, err = capsys.readouterr()
    assert rc == 2 and "response" not in out and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not led.exists() and not Path(str(led) + ".lock").exists()
