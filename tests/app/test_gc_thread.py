"""While a pool task runs, Python's cyclic garbage collector runs in the GUI thread only.

An automatic collection is triggered by whichever thread allocates; in a worker thread it
destroys unreachable Qt objects (pyqtgraph's parentless menus, models, timers) there, which Qt
forbids.  Under load this deadlocked test_seeds (the export worker, collecting inside the xlsx
writer, held Qt's signal-slot lock in ~QMenu and waited for the GIL; the GUI thread held the
GIL and waited for that lock).  dpstudio.app.workers disables automatic collection while pool
threads are active and collects on a GUI-thread timer instead.
"""

import gc
import threading
import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QObject  # noqa: E402

from dpstudio.app.workers import TaskRunner  # noqa: E402


class _Probe:
    """Records the thread that finalises it (i.e. that collected its cycle)."""

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def __del__(self) -> None:
        self.seen.append(threading.current_thread().name)


def _garbage_worker(seconds: float):
    def work(progress, check_cancel):
        t = time.monotonic()
        n = 0
        while time.monotonic() - t < seconds:
            a: list = []
            a.append(a)  # cyclic garbage: only the collector frees it
            n += 1
        return n

    return work


def _plot_with_exported_image(deaths: list):
    """A plot rendered to PNG as ``ExplorePanel.export_images`` does: the exporter leaves
    pyqtgraph ``Parameter`` QObjects in reference cycles; record the thread each dies in."""
    import weakref

    import pyqtgraph as pg
    from pyqtgraph.exporters import ImageExporter
    from pyqtgraph.parametertree import Parameter

    w = pg.PlotWidget()
    w.plot([1, 2, 3], [3, 1, 2])
    before = set(map(id, gc.get_objects()))
    exp = ImageExporter(w.getPlotItem())
    exp.parameters()["width"] = 200
    exp.export(toBytes=True)
    for ob in gc.get_objects():
        if isinstance(ob, Parameter) and id(ob) not in before:
            weakref.finalize(ob, lambda: deaths.append(threading.current_thread().name))
    del exp, ob
    return w


@pytest.fixture
def collections():
    """The thread of every collection run during the test."""
    where: list[str] = []

    def cb(phase, _info):
        if phase == "start":
            where.append(threading.current_thread().name)

    gc.callbacks.append(cb)
    yield where
    gc.callbacks.remove(cb)


def test_collections_run_in_the_gui_thread_while_a_task_allocates(qtbot, collections):
    # a task of an earlier test may still be finishing in a pool (e.g. after a cancel): the
    # collector is off until every pool is idle, then back on
    qtbot.waitUntil(gc.isenabled, timeout=30000)
    r = TaskRunner("gc-test")
    out = []
    # an unreachable Qt object (in a reference cycle), young, before the task starts
    seen: list[str] = []
    pqg_deaths: list[str] = []
    plot = _plot_with_exported_image(pqg_deaths)  # garbage as the report's curves leave it
    gc.collect()
    o = QObject()
    o.probe = _Probe(seen)
    o.probe.owner = o
    del o
    _plot_with_exported_image(pqg_deaths)
    r.start(_garbage_worker(1.0), finished=out.append)
    assert not gc.isenabled()  # automatic collection is off while the pool works
    qtbot.waitUntil(lambda: bool(out), timeout=30000)
    assert r.wait(10)
    assert out[0] > 10_000  # the task did allocate (a collection would have been due often)
    main = threading.main_thread().name
    assert collections, "no collection ran at all: the garbage was never freed"
    assert set(collections) == {main}, collections  # never in a pool thread
    assert seen == [main]  # the Qt object in the cycle was destroyed in the GUI thread
    assert pqg_deaths and set(pqg_deaths) == {main}, pqg_deaths  # pyqtgraph's QObjects too
    plot.close()
    qtbot.waitUntil(gc.isenabled, timeout=5000)  # restored once the pool is idle


def test_collector_left_off_if_it_was_off(qtbot):
    gc.disable()
    try:
        r = TaskRunner("gc-test")
        out = []
        r.start(_garbage_worker(0.1), finished=out.append)
        qtbot.waitUntil(lambda: bool(out), timeout=30000)
        assert r.wait(10)
        qtbot.wait(200)  # the guard's timer sees the idle pool
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_finished_task_releases_what_it_captured(qtbot):
    """The Worker object outlives its task (held by its signal connections); the table the
    task captured and its callbacks' captures must not."""
    import weakref

    import pandas as pd

    class Table(pd.DataFrame):
        pass

    df, res = Table({"a": range(1000)}), Table({"b": range(10)})
    alive = [weakref.ref(df), weakref.ref(res)]
    r = TaskRunner("gc-test")
    out = []

    def work(progress, check_cancel, df=df):
        return len(df)

    def done(n, res=res):
        out.append(n + len(res))

    w = r.start(work, finished=done)
    del df, res, work, done
    qtbot.waitUntil(lambda: w.ended, timeout=30000)
    assert out == [1010]
    gc.collect()
    assert [a() is None for a in alive] == [True, True]
