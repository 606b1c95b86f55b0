"""Run a long engine generator in a child process and stream its items back.

Why: the GUI thread and a worker *thread* share the GIL, and a pyqtgraph repaint makes
hundreds of Python callbacks, each of which may wait for the GIL while the worker computes —
during a sweep that stretched repaints to 200–600 ms.  A child process has its own GIL.

The :class:`~dpstudio.app.workers.Worker` (a QRunnable) still drives the task: it iterates
:func:`stream`, which yields the child's items, forwards progress, and turns the worker's
cancel flag into a cancel event for the child (which raises ``Cancelled`` inside the engine);
a child that does not stop within two seconds is terminated.  Nothing of a cancelled or failed
task reaches the GUI.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import queue
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from dpstudio import engine

_CTX = mp.get_context("spawn")  # never fork a process that runs Qt threads


class ChildError(RuntimeError):
    """An unexpected exception in the child; ``details`` holds its traceback."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def _child(q, cancel_ev, target: str, args: tuple, kwargs: dict) -> None:
    def check_cancel() -> None:
        if cancel_ev.is_set():
            raise engine.Cancelled()

    def progress(f: float) -> None:
        check_cancel()
        q.put(("progress", float(f)))

    try:
        mod, name = target.split(":")
        fn = getattr(importlib.import_module(mod), name)
        out = fn(*args, check_cancel=check_cancel, progress=progress, **kwargs)
        if hasattr(out, "__next__"):
            for item in out:
                check_cancel()
                q.put(("item", item))
        else:
            q.put(("item", out))
        q.put(("end", None))
    except engine.Cancelled:
        q.put(("cancelled", None))
    except engine.DPStudioError as exc:
        q.put(("user_error", str(exc)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent with details
        q.put(("error", (f"{type(exc).__name__}: {exc}", traceback.format_exc())))


def stream(
    target: str,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    check_cancel: Callable[[], None],
    progress: Callable[[float], None] | None = None,
    poll: float = 0.05,
) -> Iterator[Any]:
    """Yield the items of ``target(*args, check_cancel=…, progress=…, **kwargs)`` run in a child.

    ``target`` is ``"module:function"``; it returns a generator (items streamed) or a value
    (one item).  Raises ``engine.Cancelled``, ``engine.DPStudioError`` or :class:`ChildError`.
    """
    q = _CTX.Queue()
    ev = _CTX.Event()
    p = _CTX.Process(
        target=_child, args=(q, ev, target, args, dict(kwargs or {})), daemon=True, name="dpstudio-worker"
    )
    p.start()
    try:
        while True:
            try:
                check_cancel()
            except engine.Cancelled:
                ev.set()
                raise
            try:
                kind, payload = q.get(timeout=poll)
            except queue.Empty:
                if not p.is_alive():
                    raise ChildError(
                        f"The worker process stopped unexpectedly (exit code {p.exitcode}); out of memory?",
                        "",
                    ) from None
                continue
            if kind == "item":
                yield payload
            elif kind == "progress":
                if progress is not None:
                    progress(payload)
            elif kind == "end":
                return
            elif kind == "cancelled":
                raise engine.Cancelled()
            elif kind == "user_error":
                raise engine.DPStudioError(payload)
            else:
                raise ChildError(*payload)
    finally:
        ev.set()
        p.join(2.0)
        if p.is_alive():
            p.terminate()
            p.join(1.0)
        q.close()
        q.join_thread()
