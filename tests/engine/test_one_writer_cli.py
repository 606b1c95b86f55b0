"""Issue 21 part 1, through the command line only: never destroy or replace a file the user
did not name as the output.  Every case runs a real command and checks that it is refused
with one line (exit 2) BEFORE any work, and that the folder is exactly as before: nothing
written, nothing replaced, a FIFO still a FIFO.  (Only ``dpstudio.cli`` is used, so this file
also runs against older code: the reproductions of the issue failed there.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli

ROOT = Path(__file__).resolve().parents[2]
CENSUS = ROOT / "resources" / "census.csv"
pytestmark = pytest.mark.timeout(120)  # opening a FIFO would hang: fail instead

PROTECT = [
    "--method",
    "laplace",
    "--epsilon",
    "1",
    "--role",
    "FICA=eps-quasi",
    "--domain",
    "FICA=0:12000",
    "--no-measures",
]
QUERY = ["mean(FICA)", "--range", "FICA=0:12000", "--epsilon", "0.1"]
SWEEP = [
    "--method",
    "laplace",
    "--epsilon",
    "1",
    "--role",
    "FICA=eps-quasi",
    "--domain",
    "FICA=0:12000",
    "--repeats",
    "1",
    "--measures",
    "sse",
]


def snapshot(folder: Path) -> dict:
    """Every entry below ``folder``: kind, permissions, and the digest of regular files (a FIFO
    or device is never opened)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = os.lstat(p)
            entry = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
            if stat.S_ISREG(st.st_mode):
                entry += (hashlib.sha256(p.read_bytes()).hexdigest(),)
            elif stat.S_ISLNK(st.st_mode):
                entry += (os.readlink(p),)
            out[str(p.relative_to(folder))] = entry
    return out


@pytest.fixture
def work(tmp_path):
    shutil.copy(CENSUS, tmp_path / "data.csv")
    return tmp_path


def refused(capsys, folder: Path, argv, *needles) -> str:
    """Run ``argv``; it must be refused in one line with nothing written at all."""
    before = snapshot(folder)
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("dpstudio: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    assert snapshot(folder) == before, "something was written or replaced"
    return lines[0]


def make_socket(path: Path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
    except OSError as exc:  # pragma: no cover - path too long for AF_UNIX
        s.close()
        pytest.skip(f"no unix socket here: {exc}")
    return s


# ---------------------------------------------------------------- the reproductions of the issue


def test_query_audit_over_the_input_is_refused(work, capsys):
    """`--audit data.csv` replaced the 1,080-record input with a 2-line audit CSV (exit 0)."""
    line = refused(
        capsys,
        work,
        [
            "query",
            work / "data.csv",
            *QUERY,
            "--ledger",
            work / "l.json",
            "--budget",
            "5",
            "--audit",
            work / "data.csv",
        ],
        "--audit",
    )
    assert "input" in line
    assert len(pd.read_csv(work / "data.csv")) == 1080
    assert not (work / "l.json").exists()  # refused before the ledger spent anything


@pytest.mark.parametrize("recipe", ["out.csv", "out.metadata.json", "out.private.json"])
def test_save_recipe_over_a_file_of_the_release_is_refused(work, capsys, recipe):
    """`--save-recipe out.csv` left the private recipe (input path, pinned seed) as the release."""
    refused(
        capsys,
        work,
        [
            "protect",
            work / "data.csv",
            work / "out.csv",
            *PROTECT,
            "--seed",
            "0x9e3779b97f4a7c15f39cc0605cedc835",
            "--save-recipe",
            work / recipe,
        ],
        "--save-recipe",
    )


def test_save_recipe_folder_is_refused_before_the_release_is_written(work, capsys):
    (work / "d").mkdir()
    refused(
        capsys,
        work,
        ["protect", work / "data.csv", work / "out.csv", *PROTECT, "--save-recipe", work / "d"],
        "--save-recipe",
        "folder",
    )
    assert not (work / "out.csv").exists()


def test_save_recipe_in_a_missing_folder_is_refused_before_any_work(work, capsys):
    refused(
        capsys,
        work,
        ["protect", work / "data.csv", work / "out.csv", *PROTECT, "--save-recipe", work / "no" / "r.json"],
        "no such folder",
    )


@pytest.mark.parametrize("option", ["output", "--save-recipe", "--report"])
def test_fifo_is_never_replaced(work, capsys, option):
    fifo = work / ("pipe.html" if option == "--report" else "pipe.csv")
    os.mkfifo(fifo)
    out, extra = (fifo, []) if option == "output" else (work / "out.csv", [option, fifo])
    line = refused(capsys, work, ["protect", work / "data.csv", out, *PROTECT, *extra], "FIFO")
    assert "never replaces" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_socket_output_is_never_replaced(work, capsys):
    s = make_socket(work / "s.csv")
    try:
        refused(capsys, work, ["protect", work / "data.csv", work / "s.csv", *PROTECT], "socket")
        assert stat.S_ISSOCK(os.lstat(work / "s.csv").st_mode)
    finally:
        s.close()


def test_device_node_is_never_replaced(work, capsys):
    """A character device made here (like /dev/null: 1, 3) -- never a real device of the system."""
    node = work / "null.csv"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (OSError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    refused(capsys, work, ["protect", work / "data.csv", node, *PROTECT], "character device")
    refused(
        capsys,
        work,
        ["protect", work / "data.csv", work / "o.csv", *PROTECT, "--save-recipe", node],
        "character device",
    )
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_read_only_output_is_never_replaced(work, capsys):
    ro = work / "out.csv"
    ro.write_text("kept\n")
    os.chmod(ro, 0o444)
    refused(capsys, work, ["protect", work / "data.csv", ro, *PROTECT], "read-only")
    assert ro.read_text() == "kept\n" and stat.S_IMODE(os.stat(ro).st_mode) == 0o444


def test_symlink_output_is_neither_replaced_nor_written_through(work, capsys):
    (work / "elsewhere.csv").write_text("kept\n")
    os.symlink(work / "elsewhere.csv", work / "out.csv")
    refused(capsys, work, ["protect", work / "data.csv", work / "out.csv", *PROTECT], "symbolic link")
    assert os.path.islink(work / "out.csv") and (work / "elsewhere.csv").read_text() == "kept\n"


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_links_to_the_input_are_refused_for_every_option(work, capsys, link):
    alias = work / "alias.csv"
    (os.symlink if link == "symlink" else os.link)(work / "data.csv", alias)
    data = work / "data.csv"
    for argv in (
        ["protect", data, alias, *PROTECT],
        ["protect", data, work / "o.csv", *PROTECT, "--save-recipe", alias],
        ["protect", data, work / "o.csv", *PROTECT, "--report", alias],
        ["sweep", data, *SWEEP, "--out", alias],
        ["query", data, *QUERY, "--ledger", work / "l.json", "--budget", "5", "--audit", alias],
        ["risk", data, "--role", "FICA=k-quasi", "--per-record", alias],
        ["evaluate", data, data, "--method", "laplace", "--save-recipe", alias],
    ):
        refused(capsys, work, argv, "input")


def test_two_outputs_of_one_command_may_not_be_the_same_file(work, capsys):
    data, out = work / "data.csv", work / "out.csv"
    refused(
        capsys,
        work,
        ["protect", data, out, *PROTECT, "--report", work / "out.metadata.json"],
        "metadata",
        "--report",
    )
    refused(
        capsys,
        work,
        ["protect", data, out, *PROTECT, "--assessment", work / "out.private.json"],
        "audit trail",
        "--assessment",
    )
    refused(
        capsys,
        work,
        ["protect", data, out, *PROTECT, "--report", work / "r.html", "--save-recipe", work / "r.html"],
        "--report",
        "--save-recipe",
    )
    refused(
        capsys,
        work,
        ["sweep", data, *SWEEP, "--out", work / "s.csv", "--save-recipe", work / "s.csv"],
        "--out",
        "--save-recipe",
    )
    refused(
        capsys,
        work,
        ["query", data, *QUERY, "--ledger", work / "l.json", "--budget", "5", "--audit", work / "l.json"],
        "--ledger",
        "--audit",
    )
    # two names of one file (a hard link between two outputs)
    (work / "r.html").write_text("old\n")
    os.link(work / "r.html", work / "r2.json")
    refused(
        capsys,
        work,
        ["protect", data, out, *PROTECT, "--report", work / "r.html", "--save-recipe", work / "r2.json"],
        "same file",
    )


def test_read_only_ledger_is_refused_and_kept(work, capsys):
    data, led = work / "data.csv", work / "l.json"
    assert cli.main([str(a) for a in ["query", data, *QUERY, "--ledger", led, "--budget", "5"]]) == 0
    capsys.readouterr()
    before = led.read_bytes()
    os.chmod(led, 0o444)
    refused(capsys, work, ["query", data, *QUERY, "--ledger", led], "read-only", "--ledger")
    assert led.read_bytes() == before


@pytest.mark.parametrize("what", ["--ledger", "--audit"])
def test_fifo_ledger_or_audit_is_refused_without_opening_it(work, capsys, what):
    fifo = work / ("pipe.json" if what == "--ledger" else "pipe.csv")
    os.mkfifo(fifo)
    led = fifo if what == "--ledger" else work / "l.json"
    extra = ["--audit", fifo] if what == "--audit" else []
    refused(
        capsys,
        work,
        ["query", work / "data.csv", *QUERY, "--ledger", led, "--budget", "5", *extra],
        "FIFO",
        what,
    )


@pytest.mark.parametrize("kind", ["fifo", "folder", "read-only"])
def test_sweep_risk_evaluate_targets_are_checked_before_any_work(work, capsys, kind):
    data = work / "data.csv"
    bad = work / "bad.csv"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "folder":
        bad.mkdir()
    else:
        bad.write_text("kept\n")
        os.chmod(bad, 0o444)
    needle = {"fifo": "FIFO", "folder": "folder", "read-only": "read-only"}[kind]
    refused(capsys, work, ["sweep", data, *SWEEP, "--out", bad], needle, "--out")
    refused(capsys, work, ["risk", data, "--role", "FICA=k-quasi", "--per-record", bad], needle)
    refused(capsys, work, ["evaluate", data, data, "--method", "laplace", "--save-recipe", bad], needle)
    refused(capsys, work, ["protect", data, work / "o.csv", *PROTECT, "--save-recipe", bad], needle)


def test_hierarchy_and_recipe_files_are_inputs_too(work, capsys):
    """Files a command reads besides the data (--hierarchy, --recipe) are never written over."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 30, 200), "x": rng.integers(0, 9, 200)})
    df.to_csv(work / "d.csv", index=False)
    hier = work / "age.csv"
    hier.write_text("".join(f"{a};{a // 5 * 5}-{a // 5 * 5 + 4};*\n" for a in range(18, 30)))
    refused(
        capsys,
        work,
        [
            *("protect", work / "d.csv", work / "o.csv"),
            *"--method k-eps --k 3 --epsilon 1 --role age=k-quasi".split(),
            *("--hierarchy", f"age={hier}", "--save-recipe", hier),
        ],
        "input",
    )
    rec = work / "r.json"
    assert (
        cli.main(
            [str(a) for a in ["protect", work / "data.csv", work / "o.csv", *PROTECT, "--save-recipe", rec]]
        )
        == 0
    )
    capsys.readouterr()
    refused(
        capsys,
        work,
        ["protect", work / "data.csv", work / "o2.csv", "--recipe", rec, "--save-recipe", rec],
        "input",
    )


def test_dask_release_targets_checked_before_any_work(work, capsys, monkeypatch):
    pytest.importorskip("dask")
    from dpstudio.engine.backends import dask_backend as DB

    def no_work(*a, **kw):
        raise AssertionError("protect_dask ran although a target is refused")

    monkeypatch.setattr(DB, "protect_dask", no_work)
    fifo = work / "r.json"
    os.mkfifo(fifo)
    data = work / "data.csv"
    refused(
        capsys,
        work,
        ["protect", data, work / "rel", *PROTECT, "--engine", "dask", "--save-recipe", fifo],
        "FIFO",
    )
    (work / "rel").mkdir()
    refused(capsys, work, ["protect", data, work / "rel", *PROTECT, "--engine", "dask"], "exists")
    os.mkfifo(work / "rel2.private.json")
    refused(capsys, work, ["protect", data, work / "rel2", *PROTECT, "--engine", "dask"], "FIFO")


def test_accepted_targets_still_work(work, capsys):
    """The guard refuses only what it must: fresh names and writable regular files are written
    (a replaced public file gets normal permissions, private ones 0600)."""
    data, out = work / "data.csv", work / "out.csv"
    out.write_text("old\n")
    argv = ["protect", data, out, *PROTECT, "--report", work / "note.html", "--save-recipe", work / "r.json"]
    assert cli.main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert len(pd.read_csv(out)) == 1080
    assert stat.S_IMODE(os.stat(work / "r.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(work / "out.private.json").st_mode) == 0o600
    assert not [n for n in os.listdir(work) if ".tmp" in n]
