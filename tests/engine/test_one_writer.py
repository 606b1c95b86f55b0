"""Issue 21 part 1: one guarded writer (``dpstudio.engine.safe_write``).

* the plan's checks (a) and (b), made without opening anything (a FIFO never hangs them);
* the target looked at again at commit time (a FIFO or link made meanwhile is never replaced);
* every writer of the engine and the CLI goes through it (the low-level primitives patched
  while each command runs: tests/write_spy.py); the app's writers: tests/app/test_one_writer_app.py;
* a sweep killed mid-write leaves no partial CSV under its final name;
* two commands writing the same release at once: one complete set, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.cli import _dask as cli_dask
from dpstudio.engine import safe_write as sw
from dpstudio.engine.export import verify_release
from dpstudio.engine.safe_write import WritePlan, WriteRefused
from tests.write_spy import TEMP, WriteSpy

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)  # a FIFO opened by mistake would hang: fail instead


def _frame(n=60, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 60, n),
            "income": rng.integers(1000, 90000, n),
            "region": rng.choice(["north", "south", "east"], n),
            "sick": rng.choice(["yes", "no"], n),
        }
    )


@pytest.fixture
def src(tmp_path) -> Path:
    p = tmp_path / "in.csv"
    _frame().to_csv(p, index=False)
    return p


def _refusal(plan: WritePlan, *needles: str) -> str:
    with pytest.raises(WriteRefused) as ei:
        plan.check()
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("Refusing to write "), msg
    for n in needles:
        assert n in msg, msg
    return msg


def _plan(path, *, inputs=(), what="release", private=False) -> WritePlan:
    plan = WritePlan(inputs=inputs)
    plan.file(path, what=what, private=private)
    return plan


# ------------------------------------------------------------------ (a) inputs and other targets


def test_refuses_inputs_and_their_other_names(src, tmp_path):
    os.symlink(src, tmp_path / "sym.csv")
    os.link(src, tmp_path / "hard.csv")
    for alias in (src, tmp_path / "." / "in.csv", tmp_path / "sym.csv", tmp_path / "hard.csv"):
        _refusal(_plan(alias, inputs=[src]), "over the input file")
    _refusal(_plan(src, inputs=[tmp_path / "sym.csv"]), "over the input file")  # input given by a link
    # a folder target holding the input, a target inside an input folder
    p = WritePlan(inputs=[src])
    p.folder(tmp_path, what="release folder")
    _refusal(p, "folder of the input")
    ds = tmp_path / "ds"
    ds.mkdir()
    _refusal(_plan(ds / "x.csv", inputs=[ds]), "inside the input folder")


def test_refuses_two_targets_on_one_file(tmp_path):
    p = WritePlan()
    p.file(tmp_path / "a.csv", what="release")
    p.file(tmp_path / "." / "a.csv", what="recipe", private=True)
    _refusal_msg = _refusal(p, "both the release and the recipe")
    assert str(tmp_path / "a.csv") in _refusal_msg
    (tmp_path / "b.csv").write_text("x")
    os.link(tmp_path / "b.csv", tmp_path / "c.json")
    p = WritePlan()
    p.file(tmp_path / "b.csv", what="release")
    p.file(tmp_path / "c.json", what="recipe")
    _refusal(p, "the same file")
    p = WritePlan()
    p.folder(tmp_path / "rel", what="release folder")
    p.file(tmp_path / "rel" / "x.json", what="recipe")
    _refusal(p, "inside the release folder")
    # the same path for the same role is one target
    p = WritePlan()
    p.file(tmp_path / "d.csv", what="release", role="r")
    p.file(tmp_path / "d.csv", what="the release (--out)", role="r")
    p.check()
    assert len(p.targets) == 1


# ------------------------------------------------------------------ (b) what exists at the target


def _socket(path: Path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    return s


def test_refuses_every_non_regular_target_without_opening_it(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    s = _socket(tmp_path / "sock")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    (tmp_path / "target.csv").write_text("x")
    os.symlink(tmp_path / "target.csv", tmp_path / "link")
    try:
        for name, needle in [
            ("fifo", "named pipe (FIFO)"),
            ("sock", "a socket"),
            ("dir", "a folder"),
            ("dangling", "symbolic link"),
            ("link", "symbolic link"),
        ]:
            _refusal(_plan(tmp_path / name), needle)
    finally:
        s.close()
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert (tmp_path / "target.csv").read_text() == "x"


def test_refuses_a_device_node(tmp_path):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (OSError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    _refusal(_plan(node), "character device")
    with pytest.raises(WriteRefused):
        sw.atomic_write(node, lambda t: Path(t).write_text("x"))
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_refuses_read_only_files_and_folders_never_chmods(tmp_path):
    ro = tmp_path / "ro.json"
    ro.write_text("{}")
    os.chmod(ro, 0o444)
    msg = _refusal(_plan(ro, what="query ledger"), "read-only", "0444", "never changes permissions")
    assert "make it writable" in msg
    assert stat.S_IMODE(os.stat(ro).st_mode) == 0o444
    _refusal(_plan(tmp_path / "no" / "x.csv"), "no such folder")
    (tmp_path / "file").write_text("x")
    _refusal(_plan(tmp_path / "file" / "x.csv"), "not a folder")
    _refusal(_folder_plan(tmp_path / "ro.json"), "it exists")  # a folder target is always new


def _folder_plan(path) -> WritePlan:
    p = WritePlan()
    p.folder(path, what="release folder")
    return p


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_refuses_a_folder_the_user_cannot_write(tmp_path):  # pragma: no cover - CI runs as root
    d = tmp_path / "locked"
    d.mkdir()
    os.chmod(d, 0o555)
    try:
        _refusal(_plan(d / "x.csv"), "not writable")
    finally:
        os.chmod(d, 0o755)


def test_fifo_made_after_the_check_is_never_replaced(tmp_path):
    """Checked, staged, then a FIFO appears at the target: the commit refuses, removes its
    temporary file and leaves the FIFO (the second look comes right before the rename)."""
    out = tmp_path / "out.csv"
    plan = _plan(out).check()
    tmp = plan.stage(out, lambda t: Path(t).write_text("data\n"))
    os.mkfifo(out)
    with pytest.raises(WriteRefused, match="FIFO"):
        plan.commit(tmp, out)
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert os.listdir(tmp_path) == ["out.csv"]
    # a link made meanwhile, a file made read-only meanwhile
    for make, needle in (
        (lambda p: os.symlink(tmp_path / "x", p), "symbolic link"),
        (lambda p: (p.write_text("old"), os.chmod(p, 0o444)), "read-only"),
    ):
        out2 = tmp_path / f"o{len(os.listdir(tmp_path))}.csv"
        plan = _plan(out2).check()
        tmp = plan.stage(out2, lambda t: Path(t).write_text("data\n"))
        make(out2)
        with pytest.raises(WriteRefused, match=needle):
            plan.commit(tmp, out2)
        assert not os.path.exists(tmp)
    # a folder target made meanwhile
    plan = _folder_plan(tmp_path / "rel").check()
    t = plan.stage_folder(tmp_path / "rel")
    (tmp_path / "rel").mkdir()
    with pytest.raises(WriteRefused, match="exists"):
        plan.commit_folder(t, tmp_path / "rel")
    assert not os.path.exists(t)


def test_the_check_never_opens_a_fifo(tmp_path, monkeypatch):
    """Opening a FIFO for reading or writing blocks until the other end comes: the checks
    look with lstat/stat only (an alarm fails the test instead of hanging)."""
    os.mkfifo(tmp_path / "p.csv")
    opened = []
    real = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: (opened.append(str(p)), real(p, *a, **k))[1])
    old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("hung on a FIFO")))
    signal.alarm(10)
    try:
        p = WritePlan(inputs=[tmp_path / "p.csv"])
        p.file(tmp_path / "o.csv", what="release")
        p.file(tmp_path / "p.csv", what="recipe")
        with pytest.raises(WriteRefused):
            p.check()
        with pytest.raises(WriteRefused):
            _plan(tmp_path / "p.csv").check()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not [o for o in opened if o.endswith("p.csv")]


# ------------------------------------------------------------------ (c) atomic, permissions


def test_write_is_atomic_and_keeps_the_old_file_on_failure(tmp_path):
    out = tmp_path / "o.csv"
    out.write_text("old\n")

    def failing(t):
        Path(t).write_text("half")
        raise RuntimeError("disk died")

    with pytest.raises(RuntimeError):
        sw.atomic_write(out, failing)
    assert out.read_text() == "old\n" and os.listdir(tmp_path) == ["o.csv"]
    sw.atomic_write(out, lambda t: Path(t).write_text("new\n"), private=True)
    assert out.read_text() == "new\n" and stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_a_plan_writes_only_its_targets(tmp_path):
    plan = _plan(tmp_path / "a.csv").check()
    with pytest.raises(ValueError, match="not a target"):
        plan.write_text(tmp_path / "b.csv", "x")
    assert not (tmp_path / "b.csv").exists()


def test_stale_temporary_files_of_a_live_writer_are_kept(tmp_path):
    """A plan's clean-up removes the temporary files killed runs left, never those of a writer
    still at work (each writer locks its temporary file until it renames it)."""
    out = tmp_path / "o.csv"
    (tmp_path / ".o.abcd1234.tmp.csv").write_text("stale\n")
    a = _plan(out).check()
    ready, go = threading.Event(), threading.Event()

    def slow_writer(t):
        Path(t).write_text("a\n")
        ready.set()
        go.wait(20)

    th = threading.Thread(target=lambda: a.write(out, slow_writer))
    th.start()
    assert ready.wait(20)
    live = [n for n in os.listdir(tmp_path) if TEMP.match(n)]
    assert ".o.abcd1234.tmp.csv" not in live and len(live) == 1  # the stale one went first
    _plan(out).check().write_text(out, "b\n")  # another writer of the same file meanwhile
    assert out.read_text() == "b\n" and live[0] in os.listdir(tmp_path)  # a's file kept
    go.set()
    th.join(20)
    assert out.read_text() == "a\n" and os.listdir(tmp_path) == ["o.csv"]


def test_renames_of_two_plans_into_one_folder_never_interleave(tmp_path):
    """While one plan renames its set into place (it holds the folder's lock), another plan's
    rename into the same folder waits -- also from another thread of the same process."""
    a = _plan(tmp_path / "a.csv").check()
    inside, go = threading.Event(), threading.Event()

    def hold():
        with a.committing():
            inside.set()
            go.wait(20)

    th = threading.Thread(target=hold)
    th.start()
    assert inside.wait(20)
    done = threading.Event()
    tb = threading.Thread(
        target=lambda: (_plan(tmp_path / "b.csv").check().write_text(tmp_path / "b.csv", "b"), done.set())
    )
    tb.start()
    time.sleep(0.3)
    assert not done.is_set()
    assert [n for n in os.listdir(tmp_path) if TEMP.match(n)]  # b staged, waits to rename
    go.set()
    th.join(20)
    tb.join(20)
    assert done.is_set() and (tmp_path / "b.csv").read_text() == "b"


# ------------------------------------------------------------------ every writer goes through it


def _cli(argv) -> None:
    code = cli.main([str(a) for a in argv])
    assert code == 0, argv


@contextlib.contextmanager
def _sync_dask(args):
    import dask

    with dask.config.set(scheduler="threads"):
        yield None


def test_every_engine_and_cli_writer_goes_through_the_one_writer(tmp_path, monkeypatch, capsys):
    """Each command and engine writer is run with the low-level primitives patched: every
    file operation below tmp_path happened inside the writer, content only ever went to our
    temporary names, and final names appeared only by the writer's rename."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy
    from dpstudio.engine.measures.survey_risk import assess_risk, write_per_record_risk

    data = tmp_path / "in.csv"
    _frame(80).to_csv(data, index=False)
    hier = tmp_path / "age_h.csv"
    hier.write_text("".join(f"{a};{a // 10 * 10}s;*\n" for a in range(18, 60)))
    w = tmp_path / "w"
    w.mkdir()
    (w / "old.csv").write_text("an old release\n")
    (w / "old.metadata.json").write_text("{}")
    (w / ".old.abcd1234.tmp.csv").write_text("left by a killed run\n")
    spy = WriteSpy(w).install(monkeypatch)
    dp = ["--role", "income=eps-quasi", "--domain", "income=0:100000", "--role", "id=identifier"]
    runs = {
        "protect": [
            "protect",
            data,
            w / "old.csv",
            "--method",
            "laplace",
            "--epsilon",
            "1",
            *dp,
            "--report",
            w / "note.html",
            "--assessment",
            w / "a.private.html",
            "--save-recipe",
            w / "r.json",
            "--seed",
            "0x9e3779b97f4a7c15f39cc0605cedc835",
        ],
        "tables": [
            "protect",
            data,
            w / "sep.csv",
            "--method",
            "ir-dp",
            "--k",
            "3",
            "--epsilon",
            "1",
            *dp,
            "--role",
            "age=eps-quasi",
            "--domain",
            "age=0:100",
            "--layout",
            "separate-tables",
            "--no-measures",
        ],
        "anatomy": [
            "protect",
            data,
            w / "anat.csv",
            "--method",
            "t-close-dp",
            "--epsilon",
            "1",
            "--role",
            "region=k-quasi",
            "--role",
            "income=confidential",
            "--no-measures",
        ],
        "sweep": [
            "sweep",
            data,
            "--method",
            "laplace",
            "--epsilon",
            "0.5,1",
            *dp,
            "--repeats",
            "1",
            "--measures",
            "sse",
            "--out",
            w / "sweep.csv",
            "--save-recipe",
            w / "sr.json",
        ],
        "evaluate": ["evaluate", data, data, "--method", "laplace", "--save-recipe", w / "er.json"],
        "query": [
            "query",
            data,
            "mean(income)",
            "--range",
            "income=0:100000",
            "--epsilon",
            "0.1",
            "--ledger",
            w / "l.json",
            "--budget",
            "5",
            "--audit",
            w / "audit.csv",
        ],
        "query-json": [
            "query",
            data,
            "mean(income)",
            "--range",
            "income=0:100000",
            "--epsilon",
            "0.1",
            "--ledger",
            w / "l.json",
            "--audit",
            w / "audit.json",
        ],
        "risk": [
            "risk",
            data,
            "--role",
            "region=k-quasi",
            "--role",
            "sick=k-quasi",
            "--per-record",
            w / "per.csv",
        ],
        "k-eps": [
            "protect",
            data,
            w / "ke.csv",
            *"--method k-eps --k 3 --epsilon 1 --role age=k-quasi".split(),
            *("--hierarchy", f"age={hier}"),
            *"--role income=eps-quasi --domain income=0:100000 --no-measures".split(),
        ],
    }
    for fmt in ("xlsx", "parquet", "dta", "sav"):
        runs[fmt] = [
            "protect",
            data,
            w / f"{fmt}_rel.{fmt}",
            "--method",
            "laplace",
            "--epsilon",
            "1",
            *dp,
            "--no-measures",
        ]
    for name, argv in runs.items():
        n0 = len(spy.ops)
        _cli(argv)
        assert len(spy.ops) > n0, f"{name}: the spy saw no write at all"
    capsys.readouterr()
    # the Dask folder writer (threads: the parts are written by worker threads)
    pytest.importorskip("dask")
    monkeypatch.setattr(cli_dask, "dask_client", _sync_dask)
    _cli(
        [
            "protect",
            data,
            w / "rel",
            "--method",
            "laplace",
            "--epsilon",
            "1",
            *dp,
            "--engine",
            "dask",
            "--save-recipe",
            w / "dr.json",
        ]
    )
    _cli(
        [
            "protect",
            data,
            w / "relc",
            "--method",
            "laplace",
            "--epsilon",
            "1",
            *dp,
            "--engine",
            "dask",
            "--format",
            "csv",
        ]
    )
    # engine functions called directly
    Hierarchy.read_arx(str(hier)).write_arx(w / "h_out.csv")
    led = qd.BudgetLedger(3.0, dataset="in.csv")
    led.export(w / "led.csv")
    qd.save_ledger(w / "led.json", led)
    rep = assess_risk(pd.read_csv(data), ["region", "sick"])
    write_per_record_risk(rep, str(w / "per2.csv"))
    capsys.readouterr()

    assert spy.violations() == []
    expected = {
        "old.csv",
        "old.metadata.json",
        "old.private.json",
        "note.html",
        "a.private.html",
        "r.json",
        "sep.age.csv",
        "sep.income.csv",
        "anat.quasi.csv",
        "anat.sensitive.csv",
        "sweep.csv",
        "sr.json",
        "er.json",
        "l.json",
        "audit.csv",
        "audit.json",
        "per.csv",
        "ke.csv",
        "xlsx_rel.xlsx",
        "parquet_rel.parquet",
        "dta_rel.dta",
        "sav_rel.sav",
        "rel",
        "rel.private.json",
        "dr.json",
        "relc",
        "h_out.csv",
        "led.csv",
        "led.json",
        "per2.csv",
    }
    assert expected <= spy.finals(), expected - spy.finals()
    # the stale temporary file of the killed run was removed by the writer, none left behind
    assert not [n for n in os.listdir(w) if TEMP.match(n)]
    assert ("unlink", str(w / ".old.abcd1234.tmp.csv"), True, True) in spy.ops


def test_the_spy_catches_a_writer_that_bypasses_the_one_writer(tmp_path, monkeypatch):
    """The enumeration above can fail: direct writes, renames and removals are reported."""
    spy = WriteSpy(tmp_path).install(monkeypatch)
    with open(tmp_path / "direct.csv", "w") as fh:
        fh.write("x")
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "pandas.csv")
    os.replace(tmp_path / "direct.csv", tmp_path / "moved.csv")
    os.unlink(tmp_path / "moved.csv")
    kinds = [v[:2] for v in spy.violations()]
    assert ("content written to a final name", "open") in kinds
    assert ("content written to a final name", "to_csv") in kinds
    assert ("outside the writer", "replace") in kinds and ("outside the writer", "unlink") in kinds
    # and a hierarchy writer as it was (its own tmp + os.replace) would be caught
    spy.ops.clear()
    tmp = str(tmp_path / "h.csv") + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("a;*\n")
    os.replace(tmp, tmp_path / "h.csv")
    assert len(spy.violations()) == 2


# ------------------------------------------------------------------ kill drill: sweep --out


SWEEP_CHILD = r"""
import sys, time
import pandas as pd
import dpstudio.engine.io.writing as dwriting  # where write_table looks them up
dwriting._csv_bytes = lambda *a, **k: None      # every CSV through pandas (patched below)
dwriting._csv_blocks = lambda *a, **k: None
_to_csv = pd.DataFrame.to_csv
def slow_to_csv(self, path=None, *a, **kw):     # a slow disk: the text goes out in pieces
    text = _to_csv(self, None, *a, **{k: v for k, v in kw.items() if k != "encoding"})
    if path is None:
        return text
    print("writing", flush=True)
    with open(path, "w", encoding=kw.get("encoding") or "utf-8", newline="") as fh:
        for i in range(0, len(text), 40):
            fh.write(text[i:i + 40]); fh.flush(); time.sleep(0.01)
pd.DataFrame.to_csv = slow_to_csv
from dpstudio import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _complete_sweep_csv(path: Path) -> int:
    """Rows of a complete sweep CSV (raises if the file is partial)."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "the last line is cut"
    df = pd.read_csv(path)
    assert {"k", "epsilon"} <= set(df.columns) and not df.empty
    widths = {len(line.split(",")) for line in raw.decode().splitlines()}
    assert len(widths) == 1, widths
    return len(df)


def test_sweep_killed_mid_write_leaves_no_partial_csv(tmp_path):
    data = tmp_path / "in.csv"
    _frame(200).to_csv(data, index=False)
    out = tmp_path / "sweep.csv"
    argv = [
        "sweep",
        str(data),
        "--method",
        "laplace",
        "--epsilon",
        "0.1,0.2,0.5,1,2,5",
        "--role",
        "income=eps-quasi",
        "--domain",
        "income=0:100000",
        "--repeats",
        "1",
        "--measures",
        "sse",
        "--no-baselines",
        "--out",
        str(out),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rng = np.random.default_rng(21)
    seen_rows, kills = set(), 0
    for _ in range(6):
        p = subprocess.Popen(
            [sys.executable, "-c", SWEEP_CHILD, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for _ in range(int(rng.integers(1, 4))):  # into the 1st..3rd rewrite of the CSV
            line = p.stdout.readline()
            if not line:
                break
        time.sleep(float(rng.uniform(0.0, 0.15)))  # the slow write takes ~0.1-0.3 s
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait(timeout=60)
        if out.exists():  # absent, or a complete CSV of the points written so far
            seen_rows.add(_complete_sweep_csv(out))
    assert kills >= 4
    # a clean run finishes the CSV and removes the temporary files the killed runs left
    p = subprocess.run(
        [sys.executable, "-c", SWEEP_CHILD, *argv], capture_output=True, env=env, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert _complete_sweep_csv(out) == 6
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "sweep.csv"]


# ------------------------------------------------------------------ concurrent runs


CONCURRENT_CHILD = r"""
import os, sys, time
import dpstudio.engine.safe_write as sw
_commit = sw._commit
SLOW = float(os.environ.get("SLOW", "0"))
def slow_commit(*a, **kw):   # a slow disk: renames far apart, so that two runs overlap
    print("commit", flush=True)
    time.sleep(SLOW)
    return _commit(*a, **kw)
sw._commit = slow_commit
from dpstudio import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _consistent_set(folder: Path, out: Path) -> str:
    ok, line = verify_release(out)
    assert ok, line
    trail = json.loads((folder / "out.private.json").read_text())
    meta = json.loads((folder / "out.metadata.json").read_text())
    assert trail["files"]["data"]["sha256"] == meta["output_sha256"]
    assert not [n for n in os.listdir(folder) if ".tmp" in n], os.listdir(folder)
    return meta["output_sha256"]


def test_two_protect_commands_writing_the_same_release_at_once(tmp_path):
    """Two runs with different seeds into the same names: both succeed, and the folder holds
    ONE run's complete set (the metadata names the release's digest, the audit trail the same
    files), no temporary file, no mix -- started together, and with the second starting while
    the first is renaming its files (it waits for the folder's lock, then replaces the set)."""
    data = tmp_path / "in.csv"
    _frame(3000).to_csv(data, index=False)
    out = tmp_path / "out.csv"
    base = [
        "protect",
        str(data),
        str(out),
        "--method",
        "laplace",
        "--epsilon",
        "1",
        "--role",
        "income=eps-quasi",
        "--domain",
        "income=0:100000",
        "--no-measures",
        "--report",
        str(tmp_path / "out.html"),
    ]

    def start(i, slow):
        env = dict(os.environ, PYTHONPATH=str(ROOT), SLOW=str(slow))
        return subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_CHILD, *base, "--seed", str(10**20 + i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )

    for round_ in range(2):  # started together
        procs = [start(2 * round_ + i, 0.1) for i in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        _consistent_set(tmp_path, out)
    # the second starts while the first renames its files into place
    first = start(10, 1.0)  # ~5 s of renames: the second is ready to rename meanwhile
    assert first.stdout.readline().strip() == "commit"
    second = start(11, 0.0)
    for p in (first, second):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    digest = _consistent_set(tmp_path, out)
    # the second run's set is the one in place (it waited for the first, then replaced it)
    solo = tmp_path / "solo"
    solo.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpstudio",
            "protect",
            str(data),
            str(solo / "out.csv"),
            *base[3:-2],
            "--seed",
            str(10**20 + 11),
        ],
        capture_output=True,
        env=env,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((solo / "out.metadata.json").read_text())["output_sha256"] == digest
