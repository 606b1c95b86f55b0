"""The warm spare child of :mod:`dpstudio.app.subproc` (issue 27.4: a sweep showed no progress
for 6 s, most of it a new process importing numpy, pandas, the engine and numba).

The task runs in the child started in advance (same pid), which had the engine imported and
the MDAV kernel loaded before the task arrived; a new spare follows every task; a dead spare
falls back to a fresh child; cancel and errors work as with a fresh child.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from dpstudio import engine
from dpstudio.app import subproc


def whoami(*, check_cancel, progress):
    """Runs in the child: its pid and what it had imported when the task began."""
    mods = set(sys.modules)
    progress(0.5)
    return {
        "pid": os.getpid(),
        "engine": "dpstudio.app.compute" in mods,
        "kernel": "dpstudio.engine.algorithms._mdav_kernel" in mods,
    }


def spin(*, check_cancel, progress):
    """Runs in the child until cancelled."""
    while True:
        check_cancel()
        time.sleep(0.01)


def slow_tail(*, check_cancel, progress):
    """Runs in the child: yields its pid at once, then goes on for 5 s (a consumer that takes
    the first item and stops leaves the child running)."""
    yield os.getpid()
    time.sleep(5.0)
    yield None


def teardown_marker(path, *, check_cancel, progress):
    """Runs in the child: an exit handler that writes ``path`` if the interpreter's own exit
    runs (the teardown a 200,000-record table made slow)."""
    import atexit
    from pathlib import Path

    atexit.register(Path(path).write_text, "the interpreter's exit ran")
    return os.getpid()


def fail(*, check_cancel, progress):
    raise engine.InputError("column 'x': bad")


@pytest.fixture(autouse=True)
def _no_spare_left(monkeypatch):
    monkeypatch.setenv("DPSTUDIO_SPARE_WORKER", "1")
    subproc.discard_spare()
    yield
    subproc.discard_spare()


def _run(target: str, **kw):
    return list(subproc.stream(f"{__name__}:{target}", check_cancel=lambda: None, **kw))


def _spare_pid() -> int:
    assert subproc._spare, "no spare child"
    p = subproc._spare[0].process
    assert p.is_alive()
    return p.pid


def _wait_warm(timeout: float = 180.0) -> None:
    """Until the spare has imported and warmed up (it then waits for its task)."""
    assert subproc._spare[0].ready.wait(timeout), "the spare child did not get ready"


def test_the_task_runs_in_the_warm_spare():
    subproc.prestart()
    pid = _spare_pid()
    _wait_warm()
    prog: list[float] = []
    (out,) = _run("whoami", progress=prog.append)
    assert out["pid"] == pid
    assert out["engine"], "the engine was not imported before the task"
    if os.environ.get("DPSTUDIO_MDAV_NUMPY", "") in ("", "0"):
        pytest.importorskip("numba")
        assert out["kernel"], "the MDAV kernel was not loaded before the task"
    assert prog == [0.5]
    # a new spare is started for the next task
    assert _spare_pid() != pid


def test_prestart_keeps_one_spare():
    subproc.prestart()
    pid = _spare_pid()
    subproc.prestart()
    assert _spare_pid() == pid and len(subproc._spare) == 1


def test_a_dead_spare_falls_back_to_a_fresh_child():
    subproc.prestart()
    p = subproc._spare[0].process
    p.terminate()
    p.join(5)
    (out,) = _run("whoami")
    assert out["pid"] != p.pid
    assert _spare_pid() not in (p.pid, out["pid"])


def test_cancel_and_errors_in_the_spare():
    subproc.prestart()
    p = subproc._spare[0].process
    calls = [0]

    def check_cancel():
        calls[0] += 1
        if calls[0] > 20:
            raise engine.Cancelled()

    with pytest.raises(engine.Cancelled):
        list(subproc.stream(f"{__name__}:spin", check_cancel=check_cancel))
    assert not p.is_alive()  # the cancelled task's child has ended
    with pytest.raises(engine.DPStudioError, match="column 'x': bad"):
        _run("fail")


def test_switched_off(monkeypatch):
    monkeypatch.setenv("DPSTUDIO_SPARE_WORKER", "0")
    subproc.prestart()
    assert not subproc._spare
    (out,) = _run("whoami")
    assert out["pid"] != os.getpid()
    assert not subproc._spare


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # (a zombie not yet joined counts as alive)
    except ProcessLookupError:
        return False
    return True


def test_the_caller_does_not_wait_for_the_child_to_exit():
    """Issue 24 §5: a consumer that has what it wants goes on at once; the child, still running,
    is stopped and joined in the background.  (Its first version, with a child slow to exit
    after its task, failed on the code before u-open: the stream returned only once the child
    had exited.)"""
    items = subproc.stream(f"{__name__}:slow_tail", check_cancel=lambda: None)
    pid = next(items)
    items.close()
    assert _alive(pid), "the stream waited for the child's exit"
    end = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(pid), "the child was never joined"


def test_a_child_ends_without_the_interpreters_teardown(tmp_path):
    """Issue 24: a child whose task has ended exits at once (``os._exit`` once its events are in
    the pipe), so the interpreter's teardown -- 0.1-1.2 s of CPU after a 200,000-row read, on
    the core the window needed -- never runs; every result still arrives, several tasks in a
    row.  (Failed on the old code: the exit handler ran.)"""
    marker = tmp_path / "teardown.txt"
    for _ in range(3):
        (pid,) = list(
            subproc.stream(f"{__name__}:teardown_marker", (str(marker),), check_cancel=lambda: None)
        )
        end = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(pid)
        assert not marker.exists(), "the child ran the interpreter's exit"
