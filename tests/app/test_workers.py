"""TaskRunner / Worker: results, cancel-first, last request wins, throttled progress."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.app.workers import TaskRunner, Worker


def test_result_and_progress_throttled(qtbot):
    r = TaskRunner("t")
    got, prog = [], []

    def fn(progress, check_cancel):
        for i in range(1001):
            progress(i / 1000)
        return 42

    r.sig_progress.connect(prog.append)
    with qtbot.waitSignal(r.sig_busy_changed, timeout=5000, check_params_cb=lambda b: not b):
        r.start(fn, finished=got.append)
    assert got == [42]
    # 0 from start() + at most one emission per 1 %
    assert 2 <= len(prog) <= 102
    assert prog == sorted(prog)


def test_cancel_emits_no_result(qtbot):
    r = TaskRunner("t")
    started = threading.Event()
    got, cancelled = [], []

    def fn(progress, check_cancel):
        started.set()
        while True:
            check_cancel()
            time.sleep(0.005)

    r.start(fn, finished=got.append, cancelled=lambda: cancelled.append(1))
    assert started.wait(5)
    r.cancel()
    assert not r.busy
    assert r.wait(5)
    qtbot.waitUntil(lambda: cancelled == [1], timeout=3000)
    assert got == []


def test_last_request_wins(qtbot):
    r = TaskRunner("t")
    got = []
    gate = threading.Event()

    def slow(progress, check_cancel):
        gate.wait(5)  # ignores the cancel flag until released
        return "old"

    r.start(slow, finished=got.append)
    r.start(lambda p, c: "new", finished=got.append)
    gate.set()
    assert r.wait(5)
    qtbot.waitUntil(lambda: "new" in got, timeout=3000)
    qtbot.wait(50)
    assert got == ["new"]


def test_generator_batches_and_errors(qtbot):
    r = TaskRunner("t")
    batches, done, errors = [], [], []

    def gen(progress, check_cancel):
        yield from range(25)

    r.start(gen, generator=True, yielded=batches.append, finished=done.append)
    assert r.wait(5)
    qtbot.waitUntil(lambda: bool(done), timeout=3000)
    assert [x for b in batches for x in b] == list(range(25))
    assert done[0] == list(range(25))

    def bad(progress, check_cancel):
        raise engine.InputError("Column 'x' is bad.")

    r.start(bad, errored=lambda m, d: errors.append((m, d)))
    assert r.wait(5)
    qtbot.waitUntil(lambda: bool(errors), timeout=3000)
    assert errors == [("Column 'x' is bad.", "")]  # user errors: no traceback


def test_unexpected_error_has_details(qtbot):
    r = TaskRunner("t")
    errors = []
    r.start(lambda p, c: 1 / 0, errored=lambda m, d: errors.append((m, d)))
    assert r.wait(5)
    qtbot.waitUntil(lambda: bool(errors), timeout=3000)
    assert errors[0][0].startswith("ZeroDivisionError")
    assert "Traceback" in errors[0][1]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=200))
def test_progress_monotone_steps(values):
    w = Worker(lambda p, c: None)
    emitted = []
    w.signals.progress.connect(emitted.append)
    for v in sorted(values):
        w.report_progress(v)
    w.drain()
    # steps of at least 1 %, except the final 1.0 which is always reported
    assert all(b - a >= 0.01 - 1e-12 or b == 1.0 for a, b in zip(emitted, emitted[1:]))
    assert emitted == sorted(emitted)
    assert len(emitted) <= 102
    if values and max(values) >= 1.0:
        assert emitted[-1] == 1.0
    w.cancel()
    with pytest.raises(engine.Cancelled):
        w.check_cancel()


def test_small_progress_steps_still_move_the_bar(qtbot):
    """Issue 27.4: a long first step (a sweep's first cell is 1/60 of it) reports 0.2 % at a
    time; the bar (1,000 steps) shows that, at most ten times a second, not only whole per cents.
    """
    r = TaskRunner("t")
    prog: list[float] = []

    def fn(progress, check_cancel):
        for i in range(1, 5):
            progress(0.002 * i)
            time.sleep(0.15)
        for i in range(1, 200):  # many tiny steps in a burst: few posts
            progress(0.008 + 0.00001 * i)
        return 1

    r.sig_progress.connect(prog.append)
    with qtbot.waitSignal(r.sig_busy_changed, timeout=10000, check_params_cb=lambda b: not b):
        r.start(fn)
    small = [f for f in prog if 0 < f < 0.01]
    assert len(small) >= 3, prog
    assert prog == sorted(prog)
    assert len(prog) <= 8, prog
