"""Issue 21, part 4 (Dask and memory): bad Dask options and inputs give one line before any
cluster starts -- never a hang (``--workers -3``, ``--memory-limit 1kB`` restarting workers
forever), a silently changed option (``--workers 0`` ran 2 workers) or a worker traceback; a
process memory limit (RLIMIT / cgroup) gives the "use --engine dask" line, not a MemoryError.
Every test failed on the code before this change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

from dpstudio import cli  # noqa: E402
from dpstudio.cli import _dask as cli_dask  # noqa: E402
from dpstudio.cli import protect as cli_protect  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.errors import InputError  # noqa: E402
from tests.engine._cli_process import cli_script, random_ints, run_cli, write_int_csv  # noqa: E402


def one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpstudio: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]
    return lines[0]


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(0, 100, n).round(2), "y": rng.integers(0, 5, n).astype(str)})


@pytest.fixture
def parts(tmp_path) -> Path:
    d = tmp_path / "good"
    d.mkdir()
    for i in range(3):
        _frame(seed=i).to_parquet(d / f"part{i}.parquet")
    return d


PROTECT = "--method ir-dp --k 3 --epsilon 1 --role x=eps-quasi --domain x=0:100 --engine dask".split()


@pytest.fixture
def no_cluster(monkeypatch):
    """Fail if a cluster would start: the refusal must come first."""
    import distributed

    def boom(*a, **k):
        raise AssertionError("a Dask cluster was started before the refusal")

    monkeypatch.setattr(distributed, "LocalCluster", boom)
    monkeypatch.setattr(distributed, "Client", boom)


@pytest.mark.parametrize(
    "opt,value,words",
    [
        ("--workers", "-3", ["--workers", "1 to"]),  # was: hung starting -3 workers
        ("--workers", "0", ["--workers", "1 to"]),  # was: silently 2 workers
        ("--workers", "two", ["--workers"]),
        ("--memory-limit", "lots", ["--memory-limit", "not a memory size"]),  # was: a traceback
        ("--memory-limit", "1kB", ["--memory-limit", "512 MB"]),  # was: workers restarted forever
        ("--memory-limit", "256MB", ["--memory-limit", "512 MB"]),  # measured: paused for good
        ("--memory-limit", "-2GB", ["--memory-limit"]),
        ("--memory-limit", "1e999GB", ["--memory-limit"]),
        ("--scheduler", "not a url", ["--scheduler", "tcp://HOST:PORT"]),  # was: a traceback
        ("--scheduler", "tcp://host:99999", ["--scheduler"]),
    ],
)
def test_dask_options_are_checked_before_any_cluster(opt, value, words, parts, tmp_path, capsys, no_cluster):
    code = cli.main(["protect", str(parts), str(tmp_path / "out"), *PROTECT, opt, value])
    one_line(code, capsys.readouterr().err, *words)
    code = cli.main(["evaluate", str(parts), str(parts), "--engine", "dask", "--attributes", "x", opt, value])
    one_line(code, capsys.readouterr().err, *words)
    assert not (tmp_path / "out").exists()


def test_valid_dask_options_parse():
    assert cli_dask.workers_arg("4") == 4
    assert cli_dask.memory_limit_arg("2GB") == 2_000_000_000 and cli_dask.memory_limit_arg("auto") == "auto"
    assert cli_dask.scheduler_arg("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert cli_dask.scheduler_arg("localhost:8786") == "localhost:8786"


def _bad_inputs(tmp_path: Path, parts: Path) -> dict[str, tuple[Path, list[str]]]:
    empty = tmp_path / "empty"
    empty.mkdir()
    noparq = tmp_path / "noparq"
    noparq.mkdir()
    (noparq / "readme.txt").write_text("hello")
    trunc = tmp_path / "trunc"
    trunc.mkdir()
    for i in range(3):
        b = (parts / f"part{i}.parquet").read_bytes()
        (trunc / f"part{i}.parquet").write_bytes(b if i != 1 else b[: len(b) // 2])
    missing = tmp_path / "missing"
    missing.mkdir()
    for i in range(3):
        df = _frame(seed=i)
        (df if i != 2 else df[["x"]]).to_parquet(missing / f"part{i}.parquet")
    return {
        "empty folder": (empty, ["'empty'", "is empty"]),
        "folder without Parquet": (noparq, ["no parquet parts"]),
        "corrupt part": (trunc, ["part1.parquet", "not a readable parquet"]),
        "column missing in one part": (missing, ["part2.parquet", "lacks column(s) 'y'"]),
    }


@pytest.mark.parametrize(
    "case", ["empty folder", "folder without Parquet", "corrupt part", "column missing in one part"]
)
def test_bad_parquet_inputs_are_one_line_before_any_cluster(case, parts, tmp_path, capsys, no_cluster):
    """Was: dask's traceback (KeyError, 'No files satisfy …'), or worker tracebacks."""
    src, words = _bad_inputs(tmp_path, parts)[case]
    with pytest.raises(InputError):
        DB.check_input(src)
    code = cli.main(["protect", str(src), str(tmp_path / "out"), *PROTECT])
    one_line(code, capsys.readouterr().err, *words)
    code = cli.main(["evaluate", str(src), str(src), "--engine", "dask", "--attributes", "x"])
    one_line(code, capsys.readouterr().err, *words)


def test_unreachable_scheduler_is_one_line_within_the_timeout(parts, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli_dask, "SCHEDULER_TIMEOUT", 2)
    code = cli.main(
        ["protect", str(parts), str(tmp_path / "out"), *PROTECT, "--scheduler", "tcp://127.0.0.1:1"]
    )
    one_line(code, capsys.readouterr().err, "--scheduler", "cannot connect within 2 s")


def test_bad_hierarchy_on_dask_prints_no_worker_traceback(parts, tmp_path, capfd):
    """Was: the worker's traceback (distributed's 'Compute Failed' log) before the clean line.
    capfd: the workers are other processes writing to the same stderr."""
    h = tmp_path / "h_y.csv"
    h.write_text("0;*\n1;*\n2;*\n")  # values 3 and 4 are not in it
    code = cli.main(
        [
            "protect",
            str(parts),
            str(tmp_path / "out"),
            "--method",
            "k-eps",
            "--k",
            "3",
            "--role",
            "y=k-quasi",
            "--hierarchy",
            f"y={h}",
            "--engine",
            "dask",
            "--workers",
            "1",
        ]
    )
    err = capfd.readouterr().err
    one_line(code, err, "'y'", "not in its hierarchy")


# =========================================================================== process memory limits

SCRIPT = cli_script(
    """
import resource
res, limit = getattr(resource, sys.argv[1]), int(sys.argv[2])
resource.setrlimit(res, (limit, limit))
"""
)


@pytest.fixture(scope="module")
def medium_csv(tmp_path_factory) -> Path:
    """About 20 MB of short fields (above the 16 MB that always fit)."""
    a, b = random_ints(2_000_000)
    p = write_int_csv(tmp_path_factory.mktemp("mem") / "medium.csv", ["a", "b"], a * 1000 + b, 7)
    assert p.stat().st_size > cli_protect.ALWAYS_FITS_BYTES
    return p


@pytest.mark.parametrize("limit,mb", [("RLIMIT_AS", 800), ("RLIMIT_DATA", 350)])
def test_process_memory_limit_gives_the_dask_line(limit, mb, medium_csv, tmp_path):
    """Was: the size check read the machine's free memory only; under a process limit the read
    died with a MemoryError traceback.  Now the check reads the limit and names it."""
    args = ["protect", medium_csv, tmp_path / "o.csv", "--method", "mdav", "--k", "5", "--role", "b=k-quasi"]
    r = run_cli(SCRIPT, [limit, mb << 20], [*args, "--no-measures"], timeout=300)
    line = one_line(r.returncode, r.stderr, "--engine dask")
    assert f"process limit {limit}" in line or "out of memory" in line
    assert not (tmp_path / "o.csv").exists()


def test_available_memory_reads_the_process_limit():
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from dpstudio.engine.memory import available_memory\n"
        "n, what = available_memory(); print(n, what)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    n, what = out.stdout.split(" ", 1)
    assert "RLIMIT_AS" in what or "physical" in what or "control group" in what
    assert int(n) < 3 << 30
