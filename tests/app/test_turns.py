"""The turn queue (dpstudio/app/turns.py, issue 24 §5): work after a run runs one job per turn
of the event loop, in order, each after the previous one's turn ended -- so that two parts
never share a stall, even when one overruns (independent timers that fall due during a long
turn all fire in the next one).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QObject, QTimer  # noqa: E402

from dpstudio.app import turns  # noqa: E402


def _ticker(qtbot):
    """A 1 ms timer counting the turns of the event loop (its ticks between two jobs)."""
    ticks = [0]
    t = QTimer()
    t.setInterval(1)
    t.timeout.connect(lambda: ticks.__setitem__(0, ticks[0] + 1))
    t.start()
    return t, ticks


def test_jobs_run_in_order_one_per_turn_even_when_one_overruns(qtbot):
    owner = QObject()
    t, ticks = _ticker(qtbot)
    ran = []

    def job(name, busy_s=0.0):
        def run():
            ran.append((name, ticks[0]))
            end = time.perf_counter() + busy_s
            while time.perf_counter() < end:  # a long turn: the others fall due meanwhile
                pass

        return run

    turns.later(job("a", 0.08), owner=owner)
    turns.later(job("b"), owner=owner)
    turns.later(job("c"), owner=owner)
    assert turns.pending(owner)
    qtbot.waitUntil(lambda: len(ran) == 3, timeout=5000)
    t.stop()
    assert [n for n, _ in ran] == ["a", "b", "c"]
    # the event loop turned (the ticker ran) between every two jobs
    assert ran[0][1] < ran[1][1] < ran[2][1], ran
    assert not turns.pending(owner)


def test_a_key_replaces_the_waiting_job_and_a_dead_owner_drops_its_jobs(qtbot):
    keep, gone = QObject(), QObject()
    ran = []
    turns.later(lambda: ran.append("old"), owner=keep, key="x")
    turns.later(lambda: ran.append("other"), owner=keep, key="y")
    turns.later(lambda: ran.append("new"), owner=keep, key="x")  # replaces "old", runs after "other"
    turns.later(lambda: ran.append("dead"), owner=gone)
    gone.deleteLater()
    qtbot.wait(10)  # the deferred delete
    assert turns.pending(keep, "x") and not turns.pending(gone)
    qtbot.waitUntil(lambda: not turns.pending(keep), timeout=5000)
    qtbot.wait(50)
    assert ran == ["other", "new"]


def test_flush_runs_an_owners_jobs_now_and_a_failing_job_does_not_stall_the_queue(qtbot):
    a, b = QObject(), QObject()
    ran = []
    turns.later(lambda: ran.append("a1"), owner=a)
    turns.later(lambda: ran.append("b1"), owner=b)
    turns.later(lambda: ran.append("a2"), owner=a, key="k")
    turns.flush(a)
    assert ran == ["a1", "a2"] and turns.pending(b) and not turns.pending(a)

    def boom():
        raise RuntimeError("a job failed")

    turns.later(boom, owner=a)
    turns.later(lambda: ran.append("after"), owner=a)
    with qtbot.captureExceptions() as errors:
        qtbot.waitUntil(lambda: "after" in ran, timeout=5000)
    assert ran[-2:] == ["b1", "after"]
    assert any("a job failed" in str(e[1]) for e in errors)


def test_paint_later_holds_a_shown_widgets_paint_for_a_turn_of_its_own(qtbot):
    from PySide6.QtWidgets import QWidget

    owner = QObject()
    shown, hidden = QWidget(), QWidget()
    qtbot.addWidget(shown)
    qtbot.addWidget(hidden)
    shown.show()
    turns.paint_later(shown, owner=owner, key="a")
    turns.paint_later(hidden, owner=owner, key="b")  # nothing painted: nothing held
    assert not shown.updatesEnabled() and hidden.updatesEnabled()
    assert turns.pending(owner, "a") and not turns.pending(owner, "b")
    qtbot.waitUntil(lambda: shown.updatesEnabled(), timeout=5000)
