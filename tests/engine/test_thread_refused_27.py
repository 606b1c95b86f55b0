"""Issue 27 follow-up: every thread the command line's path starts is optional.  Under an
address-space limit (``RLIMIT_AS``) starting a thread can fail -- ``RuntimeError: can't start
new thread``, its stack refused -- and the work must then run in the calling thread with the
same result (or end as the one out-of-memory line), never a traceback; a MemoryError raised in
a worker thread reaches the caller as a MemoryError.  Every test here starts no thread at all
(``threading.Thread.start`` raises) or fails in the worker, and failed on the code before.
"""

from __future__ import annotations

import hashlib
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from dpstudio.engine import parallel
from dpstudio.engine.background import Ahead
from dpstudio.engine.io import files
from tests.engine._cli_process import cli_script, random_ints, run_cli, write_int_csv

REFUSED = "can't start new thread"


@pytest.fixture
def no_threads(monkeypatch):
    """Threads allowed by the settings (two, any size), refused by the system."""
    monkeypatch.setenv("DPSTUDIO_THREADS", "2")
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)

    def refuse(self):
        raise RuntimeError(REFUSED)

    monkeypatch.setattr(threading.Thread, "start", refuse)


@pytest.fixture
def second_thread_refused(monkeypatch):
    """The first thread starts, every later one is refused (memory ran out in between)."""
    monkeypatch.setenv("DPSTUDIO_THREADS", "3")
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)
    real, started = threading.Thread.start, []

    def first_only(self):
        if started:
            raise RuntimeError(REFUSED)
        started.append(self)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", first_only)
    return started


def test_map_ordered_without_threads_gives_the_loop(no_threads):
    seen = []
    out = parallel.map_ordered(lambda x: x * x, range(7), cells=1, each=lambda i, r: seen.append((i, r)))
    assert out == [x * x for x in range(7)]
    assert seen == [(i, i * i) for i in range(7)]


def test_map_ordered_with_one_thread_then_refused(second_thread_refused):
    out = parallel.map_ordered(lambda x: x + 1, range(9), cells=1)
    assert out == list(range(1, 10))
    assert second_thread_refused  # one worker did start


@pytest.mark.parametrize("ahead", [None, 1, 5])
def test_imap_ordered_without_threads_gives_the_loop(no_threads, ahead):
    assert list(parallel.imap_ordered(lambda x: -x, range(11), cells=1, ahead=ahead)) == [
        -x for x in range(11)
    ]


def test_imap_ordered_with_one_thread_then_refused(second_thread_refused):
    assert list(parallel.imap_ordered(str, range(12), cells=1)) == [str(x) for x in range(12)]


def test_gather_rows_without_threads(no_threads):
    import pandas as pd

    df = pd.DataFrame({"a": np.arange(10.0), "b": np.arange(10)})
    rows = [3, 1, 4, 1, 5]
    pd.testing.assert_frame_equal(parallel.gather_rows(df, rows), df.iloc[rows].reset_index(drop=True))


def test_ahead_without_a_thread_runs_in_the_caller(no_threads):
    a = Ahead(lambda: 42, cells=1, min_cells=0)
    assert not a.threaded
    assert a.result() == 42


def test_sha256_in_background_without_a_thread(no_threads, tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 100_000)
    files.sha256_in_background(p)
    assert files.file_sha256(p) == hashlib.sha256(p.read_bytes()).hexdigest()


def test_memory_error_in_a_worker_reaches_the_caller(monkeypatch):
    monkeypatch.setenv("DPSTUDIO_THREADS", "2")
    monkeypatch.setattr(parallel, "MIN_CELLS", 0)

    def fn(x):
        if x == 3:
            raise MemoryError
        return x

    with pytest.raises(MemoryError):
        parallel.map_ordered(fn, range(6), cells=1)
    with pytest.raises(MemoryError):
        list(parallel.imap_ordered(fn, range(6), cells=1))

    def boom():
        raise MemoryError

    a = Ahead(boom, cells=1, min_cells=0)
    assert a.threaded
    with pytest.raises(MemoryError):
        a.result()


# --------------------------------------------------------------------- the command line

SCRIPT = cli_script(
    """
import threading
if sys.argv[1] == "refuse":
    def refuse(self):
        raise RuntimeError("can't start new thread")
    threading.Thread.start = refuse
"""
)


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """Large enough (> MIN_CELLS cells) for the threaded paths: 600,000 × 3."""
    a, b = random_ints(600_000)
    return write_int_csv(tmp_path_factory.mktemp("thr") / "big.csv", ["a", "b", "c"], a, b, 7)


def _protect(mode: str, src: Path, out: Path) -> subprocess.CompletedProcess:
    args = [
        "protect",
        src,
        out,
        *"--method mdav --k 5 --role b=k-quasi --role a=k-quasi --no-measures --seed 7".split(),
    ]
    return run_cli(SCRIPT, [mode], args, timeout=600, env={"DPSTUDIO_THREADS": "2"})


def test_protect_without_threads_gives_the_same_release(big_csv, tmp_path):
    ok = _protect("allow", big_csv, tmp_path / "a.csv")
    assert ok.returncode == 0, ok.stderr
    r = _protect("refuse", big_csv, tmp_path / "b.csv")
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        assert (tmp_path / "b.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()
    else:
        assert r.returncode == 2, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("dpstudio: error: out of memory"), r.stderr


def test_no_arrow_reader_under_a_process_memory_limit(monkeypatch, tmp_path):
    """Under RLIMIT_AS / RLIMIT_DATA Arrow's CSV reader aborted the process on a failed
    allocation (``ValueOrDie called on an error: Out of memory``, SIGABRT) or flooded stderr
    (jemalloc ``background thread creation failed``): pandas reads the file instead, the same
    table."""
    import pyarrow.csv as pcsv

    from dpstudio.engine import memory
    from dpstudio.engine.io import reading

    p = tmp_path / "t.csv"
    p.write_text("a,b,c\n" + "".join(f"{i},{i % 7},x{i % 3}\n" for i in range(200)))
    monkeypatch.setattr(reading, "_ARROW_MIN_BYTES", 0)  # Arrow's size, on a small file
    free, _ = reading.read_table(str(p))
    monkeypatch.setattr(memory, "_rlimits", lambda: {"the process limit RLIMIT_AS": 1 << 30})

    def arrow(*a, **k):
        raise AssertionError("Arrow's CSV reader used under a process memory limit")

    monkeypatch.setattr(pcsv, "read_csv", arrow)
    monkeypatch.setattr(pcsv, "open_csv", arrow)
    limited, _ = reading.read_table(str(p))
    import pandas as pd

    pd.testing.assert_frame_equal(limited, free)
