"""Work for later turns of the event loop, one job per turn (issue 24 §5, issue 27.4).

After a run the views have more to do than one turn of the event loop can hold without a
stall the user feels (over 100 ms): switch to the Results tab and lay it out, size its header,
draw its histogram, fill the release's tables, the candidates' row, the risk panel's tables.
Each view queues its parts here; they run one at a time in the GUI thread, each at least
:data:`GAP_MS` after the previous one's turn ended (its paint included), so that two parts
never share a stall.  Independent timers did not guarantee that: every timer that falls due
while a long turn runs fires in the next one, all together.

``later(fn, owner=widget, key="hist")`` queues ``fn``; a job whose owner was deleted is
dropped; a job queued again under the same ``(owner, key)`` replaces the waiting one (it runs
once, at the place of the newest).  ``pending(owner)`` says whether ``owner`` has jobs
waiting; ``flush(owner)`` runs them at once (tests, or a reader who needs the result now).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QTimer

#: the pause between the end of one job's turn (its paint) and the next job (ms)
GAP_MS = 15


@dataclass
class _Job:
    fn: Callable[[], object]
    owner: QObject
    key: object


class TurnQueue(QObject):
    """The jobs waiting for a turn of their own (one queue per application: :func:`queue`)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs: list[_Job] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._run_next)
        # the gap is counted from the end of the turn (a 0 ms hop first: the turn's posted
        # events, its paint among them, are handled before the gap starts)
        self._hop = QTimer(self)
        self._hop.setSingleShot(True)
        self._hop.setInterval(0)
        self._hop.timeout.connect(lambda: self._timer.start(GAP_MS))

    def later(
        self, fn: Callable[[], object], *, owner: QObject, key: object = None, first: bool = False
    ) -> None:
        if key is not None:
            self.jobs = [j for j in self.jobs if not (j.owner is owner and j.key == key)]
        job = _Job(fn, owner, key)
        if first:
            self.jobs.insert(0, job)
        else:
            self.jobs.append(job)
        self._arm()

    def pending(self, owner: QObject | None = None, key: object = None) -> bool:
        self._drop_dead()
        return any((owner is None or j.owner is owner) and (key is None or j.key == key) for j in self.jobs)

    def flush(self, owner: QObject | None = None, key: object = None) -> None:
        """Run the waiting jobs of ``owner`` (and ``key``; all when None) now, in order."""
        mine = [j for j in self.jobs if (owner is None or j.owner is owner) and (key is None or j.key == key)]
        self.jobs = [j for j in self.jobs if j not in mine]
        for j in mine:
            if shiboken6.isValid(j.owner):
                j.fn()

    def _drop_dead(self) -> None:
        self.jobs = [j for j in self.jobs if shiboken6.isValid(j.owner)]

    def _arm(self) -> None:
        if self.jobs and not self._timer.isActive() and not self._hop.isActive():
            self._hop.start()

    def _run_next(self) -> None:
        self._drop_dead()
        if not self.jobs:
            return
        job = self.jobs.pop(0)
        try:
            job.fn()
        finally:
            self._arm()


_QUEUE: list[TurnQueue] = []


def queue() -> TurnQueue:
    """The application's queue (made on first use, a child of the application object)."""
    app = QCoreApplication.instance()
    if not _QUEUE or not shiboken6.isValid(_QUEUE[0]) or _QUEUE[0].parent() is not app:
        _QUEUE[:] = [TurnQueue(app)]
    return _QUEUE[0]


def later(fn: Callable[[], object], *, owner: QObject, key: object = None, first: bool = False) -> None:
    """Run ``fn`` in a turn of its own after the jobs already waiting (``first``: before
    them; see the module).
    """
    queue().later(fn, owner=owner, key=key, first=first)


def paint_later(widget, *, owner: QObject, key: object) -> None:
    """Hold ``widget``'s paint (it shows its last picture) until a turn of its own: for a
    change that dirties several plots at once, each plot's paint in a turn of its own.
    Nothing for a hidden widget (nothing is painted) or one already held.
    """
    if not widget.isVisible() or not widget.updatesEnabled():
        return
    widget.setUpdatesEnabled(False)
    later(lambda: widget.setUpdatesEnabled(True), owner=owner, key=key)


def pending(owner: QObject | None = None, key: object = None) -> bool:
    """Whether jobs of ``owner`` (under ``key``) are waiting."""
    return queue().pending(owner, key)


def flush(owner: QObject | None = None, key: object = None) -> None:
    """Run the waiting jobs of ``owner`` (under ``key``) now."""
    queue().flush(owner, key)
