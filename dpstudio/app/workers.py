"""Run engine work on the QThreadPool without blocking the UI (style.md §3–5).

* :class:`Worker` is a ``QRunnable``; its signals live on a companion :class:`WorkerSignals`
  ``QObject`` (a QRunnable is not a QObject).
* Cancellation is cooperative: :meth:`Worker.cancel` sets a flag that ``check_cancel`` (handed to
  the engine) turns into :class:`dpstudio.engine.Cancelled`.  A cancelled task emits no result.
* :class:`TaskRunner` runs one task per channel: starting a new task cancels the running one
  first, and signals of a superseded task are dropped (last request wins), so a cancel never
  leaves half a state behind.
* Progress is emitted only when it changes by at least 1 %; items yielded by a generator are
  batched and emitted at most every ``batch_interval`` seconds (plus once at the end).
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any, Callable, Iterable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from dpstudio import engine

ProgressFn = Callable[[float], None]
CancelFn = Callable[[], None]


class WorkerSignals(QObject):
    """Signals of one :class:`Worker` (emitted from the pool thread, received queued)."""

    progress = Signal(float)
    """Fraction done in [0, 1], throttled to 1 % steps."""
    yielded = Signal(list)
    """A batch of items produced by a generator task."""
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

    def __init__(self, fn: Callable[[ProgressFn, CancelFn], Any], *, generator: bool = False,
                 batch_interval: float = 0.1) -> None:
        super().__init__()
        self.setAutoDelete(False)
        self.fn = fn
        self.generator = generator
        self.batch_interval = batch_interval
        self.signals = WorkerSignals()
        self._abort = threading.Event()
        self._finished = threading.Event()
        self._last_progress = -1.0

    # --- Public API
    def cancel(self) -> None:
        """Ask the task to stop at its next check (it is up to the engine to honour it)."""
        self._abort.set()

    @property
    def abort_requested(self) -> bool:
        return self._abort.is_set()

    def is_finished(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    # --- Called in the pool thread
    def check_cancel(self) -> None:
        if self._abort.is_set():
            raise engine.Cancelled()

    def report_progress(self, fraction: float) -> None:
        if self._abort.is_set():
            raise engine.Cancelled()
        f = min(max(float(fraction), 0.0), 1.0)
        if f - self._last_progress >= 0.01 or (f >= 1.0 > self._last_progress):
            self._last_progress = f
            self.signals.progress.emit(f)

    def run(self) -> None:  # noqa: D401 - QRunnable API
        sig = self.signals
        try:
            if self.generator:
                items: list = []
                batch: list = []
                last = time.monotonic()
                iterator: Iterable = self.fn(self.report_progress, self.check_cancel)
                for item in iterator:
                    self.check_cancel()
                    items.append(item)
                    batch.append(item)
                    now = time.monotonic()
                    if now - last >= self.batch_interval:
                        sig.yielded.emit(batch)
                        batch = []
                        last = now
                if batch and not self._abort.is_set():
                    sig.yielded.emit(batch)
                result: Any = items
            else:
                result = self.fn(self.report_progress, self.check_cancel)
            if self._abort.is_set():
                sig.cancelled.emit()
            else:
                sig.finished.emit(result)
        except engine.Cancelled:
            sig.cancelled.emit()
        except engine.DPStudioError as exc:
            if self._abort.is_set():
                sig.cancelled.emit()
            else:
                sig.errored.emit(str(exc), "")
        except MemoryError:
            sig.errored.emit("Not enough memory for this task. Try a smaller file or fewer "
                             "grid points.", traceback.format_exc())
        except Exception as exc:  # noqa: BLE001 - shown to the user with details
            if self._abort.is_set():
                sig.cancelled.emit()
            else:
                sig.errored.emit(f"{type(exc).__name__}: {exc}", traceback.format_exc())
        finally:
            self._finished.set()
            sig.done.emit()


class _Relay(QObject):
    """Lives in the GUI thread; forwards a worker's signals unless the task was superseded."""

    def __init__(self, runner: "TaskRunner", worker: Worker, callbacks: dict) -> None:
        super().__init__(runner)
        self.runner = runner
        self.worker = worker
        self.cb = callbacks
        self.ended = False
        s = worker.signals
        s.progress.connect(self._on_progress)
        s.yielded.connect(self._on_yielded)
        s.finished.connect(self._on_finished)
        s.errored.connect(self._on_errored)
        s.cancelled.connect(self._on_cancelled)
        s.done.connect(self._on_done)

    def _current(self) -> bool:
        return self.runner._worker is self.worker and not self.worker.abort_requested

    @Slot(float)
    def _on_progress(self, f: float) -> None:
        if self._current():
            self.runner.sig_progress.emit(f)
            if self.cb.get("progress"):
                self.cb["progress"](f)

    @Slot(list)
    def _on_yielded(self, batch: list) -> None:
        if self._current() and self.cb.get("yielded"):
            self.cb["yielded"](batch)

    @Slot(object)
    def _on_finished(self, result: Any) -> None:
        if self._current() and self.cb.get("finished"):
            self.cb["finished"](result)

    @Slot(str, str)
    def _on_errored(self, msg: str, details: str) -> None:
        if self._current():
            if self.cb.get("errored"):
                self.cb["errored"](msg, details)
            self.runner.sig_error.emit(msg, details)

    @Slot()
    def _on_cancelled(self) -> None:
        if self.runner._worker in (None, self.worker) and self.cb.get("cancelled"):
            self.cb["cancelled"]()

    @Slot()
    def _on_done(self) -> None:
        r = self.runner
        if r._worker is self.worker:
            r._worker = None
            r.sig_busy_changed.emit(False)
        self.ended = True  # purged by the runner later (never deleted inside its own slot)


class TaskRunner(QObject):
    """One task at a time on a channel (load, sweep, run); the last request wins."""

    sig_busy_changed = Signal(bool)
    """A task started (True) or the last one ended (False)."""
    sig_progress = Signal(float)
    """Progress of the current task."""
    sig_error = Signal(str, str)
    """The current task failed: message, details."""

    def __init__(self, name: str, parent: QObject | None = None,
                 pool: QThreadPool | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.pool = pool or QThreadPool.globalInstance()
        self._worker: Worker | None = None
        self._relays: set[_Relay] = set()
        self._all: list[Worker] = []

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def start(self, fn: Callable[[ProgressFn, CancelFn], Any], *, generator: bool = False,
              finished: Callable | None = None, yielded: Callable | None = None,
              progress: Callable | None = None, errored: Callable | None = None,
              cancelled: Callable | None = None, batch_interval: float = 0.1) -> Worker:
        """Cancel the running task (if any), then start ``fn`` in the pool."""
        self.cancel()
        for old in [x for x in self._relays if x.ended]:
            self._relays.discard(old)
            old.setParent(None)
        w = Worker(fn, generator=generator, batch_interval=batch_interval)
        relay = _Relay(self, w, dict(finished=finished, yielded=yielded, progress=progress,
                                     errored=errored, cancelled=cancelled))
        self._relays.add(relay)
        self._worker = w
        self._all = [x for x in self._all if not x.is_finished()] + [w]
        self.sig_busy_changed.emit(True)
        self.sig_progress.emit(0.0)
        self.pool.start(w)
        return w

    def cancel(self) -> None:
        """Request the current task to stop; its late signals are ignored."""
        w = self._worker
        if w is not None:
            w.cancel()
            self._worker = None
            self.sig_busy_changed.emit(False)

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until every task started here has finished (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        for w in list(self._all):
            if not w.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True
