"""Run engine work on the QThreadPool without blocking the UI (style.md §3–5).

* :class:`Worker` is a ``QRunnable``; its signals live on a companion :class:`WorkerSignals`
  ``QObject`` (a QRunnable is not a QObject).
* The pool thread never touches a Qt object: it posts events (progress, items, result, error)
  to a thread-safe queue, and the GUI thread drains that queue on a 25 ms timer and emits the
  signals there.  (Emitting Python-object signals across threads corrupts memory in some
  PySide6 releases, PYSIDE-3124; the queue also batches the items of a generator for free.)
* Cancellation is cooperative: :meth:`Worker.cancel` sets a flag that ``check_cancel`` (handed
  to the engine) turns into :class:`dpstudio.engine.Cancelled`.  A cancelled task emits no
  result.
* :class:`TaskRunner` runs one task per channel: starting a new task cancels the running one
  first, and events of a superseded task are dropped (last request wins), so a cancel never
  leaves half a state behind.
* Progress is posted when it changes by at least 1 %, or by at least 0.1 % once 0.1 s has
  passed since the last post (the bar has 1,000 steps: a long first step still moves).
* While a task runs, Python's cyclic garbage collector runs in the GUI thread only (see
  :func:`gui_thread_gc`).  An automatic collection runs in whichever thread allocates; in a
  pool thread it destroyed unreachable Qt objects there (pyqtgraph's parentless view-box
  menus, the exporter's parameters…).  Seen deadlocked under load: the export worker, in
  ``~QMenu`` -> ``~QObject``, held Qt's signal-slot lock and waited for the GIL, while the
  GUI thread, holding the GIL, deleted another menu (Shiboken's main-thread deletion) and
  waited for that lock.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QRunnable, QThread, QThreadPool, QTimer, Signal

from dpstudio import engine

ProgressFn = Callable[[float], None]
CancelFn = Callable[[], None]
POLL_MS = 25
PROGRESS_EVERY_S = 0.1  # small progress steps are posted at most this often


class _GuiThreadGC(QObject):
    """Collect garbage in the GUI thread only while pool threads run Python.

    Automatic collection is disabled while any pool used by a :class:`TaskRunner` has an
    active thread; a GUI-thread timer collects instead, by the interpreter's own thresholds.
    Once every such pool is idle, automatic collection is restored (if it was on before).
    """

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.pools: list[QThreadPool] = []
        self._reenable = False
        self._next_full = 0.0
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.tick)

    def hold(self, pool: QThreadPool) -> None:
        """A task is about to start on ``pool`` (GUI thread)."""
        if pool not in self.pools:
            self.pools.append(pool)
        if not self.timer.isActive():
            self._reenable = gc.isenabled()
            gc.disable()
            self.timer.start()

    def tick(self) -> None:
        self.collect_if_due()
        if all(self._idle(p) for p in self.pools):
            self.timer.stop()
            if self._reenable:
                gc.enable()

    @staticmethod
    def _idle(pool: QThreadPool) -> bool:
        try:
            return pool.activeThreadCount() == 0
        except RuntimeError:  # a private pool already deleted
            return True

    def collect_if_due(self) -> None:
        """What the interpreter's automatic collection would do now, in this thread.

        A full collection (≈50–150 ms with the app loaded) runs at most once a second and at
        most 10 % of the time (the interpreter's own long-lived-objects rule is not
        reachable from Python); young garbage, the bulk, is collected at every due tick.
        """
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if not t0 or c0 <= t0:
            return
        now = time.monotonic()
        if c1 > t1 and c2 > t2 and now >= self._next_full:
            gc.collect(2)
            self._next_full = time.monotonic() + max(1.0, 10 * (time.monotonic() - now))
        else:
            gc.collect(1 if c1 > t1 else 0)


def gui_thread_gc() -> _GuiThreadGC | None:
    """The application's collector guard (None without a Qt application or off its thread)."""
    app = QCoreApplication.instance()
    if app is None or QThread.currentThread() is not app.thread():
        return None
    g = app.findChild(_GuiThreadGC, "dpstudio_gui_thread_gc")
    if g is None:
        g = _GuiThreadGC(app)
        g.setObjectName("dpstudio_gui_thread_gc")
    return g


class WorkerSignals(QObject):
    """Signals of one :class:`Worker` (always emitted in the GUI thread by :meth:`Worker.drain`)."""

    progress = Signal(float)
    """Fraction done in [0, 1], in steps of at least 1 % (0.1 % at most ten times a second)."""
    yielded = Signal(object)
    """A list of items produced by a generator task since the last drain."""
    finished = Signal(object)
    """The task's return value (never emitted after a cancel)."""
    errored = Signal(str, str)
    """A readable message and the details (traceback; empty for user errors)."""
    cancelled = Signal()
    """The task stopped because it was cancelled."""
    done = Signal()
    """Always emitted last."""


class Worker(QRunnable):
    """Run ``fn(progress, check_cancel)`` in the pool.

    If ``generator`` is true, ``fn`` returns an iterable whose items are emitted in batches
    through ``yielded``; ``finished`` then carries the list of all items.
    """

    def __init__(self, fn: Callable[[ProgressFn, CancelFn], Any], *, generator: bool = False) -> None:
        super().__init__()
        self.setAutoDelete(False)
        self.fn = fn
        self.generator = generator
        self.signals = WorkerSignals()
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._abort = threading.Event()
        self._finished = threading.Event()
        self._drained_done = False
        self._last_progress = -1.0
        self._last_post = 0.0

    # --- Public API (GUI thread)
    def cancel(self) -> None:
        """Ask the task to stop at its next check (it is up to the engine to honour it)."""
        self._abort.set()

    @property
    def abort_requested(self) -> bool:
        return self._abort.is_set()

    def is_finished(self) -> bool:
        return self._finished.is_set()

    @property
    def ended(self) -> bool:
        """The task finished and its last event was delivered."""
        return self._drained_done

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    def drain(self) -> None:
        """Emit the pending events in the calling (GUI) thread; items are batched."""
        sig = self.signals
        batch: list = []
        while True:
            try:
                kind, payload = self._events.get_nowait()
            except queue.Empty:
                break
            if kind == "item":
                batch.append(payload)
                continue
            if batch:
                sig.yielded.emit(batch)
                batch = []
            if kind == "progress":
                sig.progress.emit(payload)
            elif kind == "finished":
                sig.finished.emit(payload)
            elif kind == "errored":
                sig.errored.emit(*payload)
            elif kind == "cancelled":
                sig.cancelled.emit()
            elif kind == "done":
                self._drained_done = True
                sig.done.emit()
        if batch:
            sig.yielded.emit(batch)

    # --- Called in the pool thread
    def check_cancel(self) -> None:
        if self._abort.is_set():
            raise engine.Cancelled()

    def report_progress(self, fraction: float) -> None:
        if self._abort.is_set():
            raise engine.Cancelled()
        f = min(max(float(fraction), 0.0), 1.0)
        step = f - self._last_progress
        now = time.monotonic()
        if (
            step >= 0.01
            or (f >= 1.0 > self._last_progress)
            or (step >= 0.001 and now - self._last_post >= PROGRESS_EVERY_S)
        ):
            self._last_progress = f
            self._last_post = now
            self._events.put(("progress", f))

    def run(self) -> None:  # noqa: D401 - QRunnable API
        post = self._events.put
        try:
            if self.generator:
                items: list = []
                iterator: Iterable = self.fn(self.report_progress, self.check_cancel)
                for item in iterator:
                    self.check_cancel()
                    items.append(item)
                    post(("item", item))
                result: Any = items
            else:
                result = self.fn(self.report_progress, self.check_cancel)
            post(("cancelled", None) if self._abort.is_set() else ("finished", result))
        except engine.Cancelled:
            post(("cancelled", None))
        except engine.DPStudioError as exc:
            post(("cancelled", None) if self._abort.is_set() else ("errored", (str(exc), "")))
        except MemoryError:
            post(
                (
                    "errored",
                    (
                        "Not enough memory for this task. Try a smaller file or fewer grid points.",
                        traceback.format_exc(),
                    ),
                )
            )
        except Exception as exc:  # noqa: BLE001 - shown to the user with details
            details = getattr(exc, "details", "") or traceback.format_exc()
            msg = str(exc) if hasattr(exc, "details") else f"{type(exc).__name__}: {exc}"
            post(("cancelled", None) if self._abort.is_set() else ("errored", (msg, details)))
        finally:
            self._finished.set()
            post(("done", None))


class TaskRunner(QObject):
    """One task at a time on a channel (load, sweep, run); the last request wins."""

    sig_busy_changed = Signal(bool)
    """A task started (True) or the last one ended (False)."""
    sig_progress = Signal(float)
    """Progress of the current task."""
    sig_error = Signal(str, str)
    """The current task failed: message, details."""

    def __init__(self, name: str, parent: QObject | None = None, pool: QThreadPool | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.pool = pool or QThreadPool.globalInstance()
        self._worker: Worker | None = None
        self._live: list[tuple[Worker, dict]] = []
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def start(
        self,
        fn: Callable[[ProgressFn, CancelFn], Any],
        *,
        generator: bool = False,
        finished: Callable | None = None,
        yielded: Callable | None = None,
        progress: Callable | None = None,
        errored: Callable | None = None,
        cancelled: Callable | None = None,
    ) -> Worker:
        """Cancel the running task (if any), then start ``fn`` in the pool."""
        self.cancel()
        w = Worker(fn, generator=generator)
        cb = dict(finished=finished, yielded=yielded, progress=progress, errored=errored, cancelled=cancelled)
        s = w.signals
        s.progress.connect(lambda f, w=w: self._on_progress(w, f))
        s.yielded.connect(lambda b, w=w: self._current(w) and cb["yielded"] and cb["yielded"](b))
        s.finished.connect(lambda r, w=w: self._current(w) and cb["finished"] and cb["finished"](r))
        s.errored.connect(lambda m, d, w=w: self._on_errored(w, cb, m, d))
        s.cancelled.connect(lambda w=w: self._on_cancelled(w, cb))
        s.done.connect(lambda w=w: self._on_done(w))
        self._live.append((w, cb))
        self._worker = w
        self.sig_busy_changed.emit(True)
        self.sig_progress.emit(0.0)
        g = gui_thread_gc()
        if g is not None:
            g.hold(self.pool)
        self.pool.start(w)
        if not self._timer.isActive():
            self._timer.start()
        return w

    def cancel(self) -> None:
        """Request the current task to stop; its late events are ignored."""
        w = self._worker
        if w is not None:
            w.cancel()
            self._worker = None
            self.sig_busy_changed.emit(False)

    def poll(self) -> None:
        """Deliver pending events of every live worker (GUI thread; also called by wait())."""
        for w, _cb in list(self._live):
            w.drain()
        for w, cb in self._live:
            if w.ended:
                # the Worker lives on in its own signal connections: release what the task
                # and its callbacks captured (tables, releases) now
                w.fn = None
                cb.update(dict.fromkeys(cb))
        self._live = [(w, cb) for w, cb in self._live if not w.ended]
        if not self._live:
            self._timer.stop()

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until every task started here has finished, then deliver its events."""
        deadline = time.monotonic() + timeout
        for w, _cb in list(self._live):
            if not w.wait(max(0.0, deadline - time.monotonic())):
                return False
        self.poll()
        return True

    # --- Internals (GUI thread)
    def _current(self, w: Worker) -> bool:
        return self._worker is w and not w.abort_requested

    def _on_progress(self, w: Worker, f: float) -> None:
        if self._current(w):
            self.sig_progress.emit(f)

    def _on_errored(self, w: Worker, cb: dict, msg: str, details: str) -> None:
        if self._current(w):
            if cb["errored"]:
                cb["errored"](msg, details)
            self.sig_error.emit(msg, details)

    def _on_cancelled(self, w: Worker, cb: dict) -> None:
        if self._worker in (None, w) and cb["cancelled"]:
            cb["cancelled"]()

    def _on_done(self, w: Worker) -> None:
        if self._worker is w:
            self._worker = None
            self.sig_busy_changed.emit(False)
