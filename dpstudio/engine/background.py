"""One computation started now and collected later (issue 27): the keyed order of k-eps's
records while OLA runs, the next sweep cell's release while this cell is measured.

:class:`Ahead` runs ``fn()`` in a background thread when threads are allowed
(:func:`dpstudio.engine.parallel.workers` ≥ 2, ``DPSTUDIO_THREADS=1`` turns them off) and the
work is large enough to pay for the hand-over (``cells`` ≥ ``min_cells``); otherwise ``fn()``
runs in the calling thread when :meth:`Ahead.result` is first called -- as it does when
the system refuses a new thread (``can't start new thread`` under an address-space limit).  Either way
:meth:`~Ahead.result` returns what ``fn()`` returned or raises what it raised, so results never
depend on the threads: ``fn`` must draw nothing from a shared generator and write no state that
the calling thread reads or writes meanwhile.  The thread is a daemon: a result nobody asks for
(an error in the calling thread, a closed sweep) is dropped when it is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Ahead"]


class Ahead:
    """``fn()``, computed ahead in a background thread where that pays (see the module)."""

    def __init__(self, fn: Callable[[], Any], *, cells: int, min_cells: int | None = None):
        from dpstudio.engine import parallel

        self._fn: Callable[[], Any] | None = fn
        self._future: Any = None
        least = parallel.MIN_CELLS if min_cells is None else min_cells
        if cells >= least and parallel.workers() >= 2:
            from concurrent.futures import Future
            from threading import Thread

            fut: Future = Future()

            def work() -> None:
                try:
                    fut.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - raised again by result()
                    fut.set_exception(exc)

            # no thread to be had (an address-space limit refuses its stack): fn() runs in
            # the calling thread on result(), as when threads are off
            if parallel.start_thread(Thread(target=work, name="dpstudio-ahead", daemon=True)):
                self._future, self._fn = fut, None

    @property
    def threaded(self) -> bool:
        """Whether ``fn`` runs in a background thread."""
        return self._future is not None

    def result(self) -> Any:
        """What ``fn()`` returned (waiting for the thread), or raise what it raised."""
        if self._future is not None:
            return self._future.result()
        fn, self._fn = self._fn, None
        if fn is None:
            raise RuntimeError("Ahead.result() of an unthreaded computation asked twice")
        return fn()
