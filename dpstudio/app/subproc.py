"""Run a long engine generator in a child process and stream its items back.

Why: the GUI thread and a worker *thread* share the GIL, and a pyqtgraph repaint makes
hundreds of Python callbacks, each of which may wait for the GIL while the worker computes —
during a sweep that stretched repaints to 200–600 ms.  A child process has its own GIL.

The :class:`~dpstudio.app.workers.Worker` (a QRunnable) still drives the task: it iterates
:func:`stream`, which yields the child's items, forwards progress, and turns the worker's
cancel flag into a cancel event for the child (which raises ``Cancelled`` inside the engine);
a child that does not stop within two seconds is terminated.  Nothing of a cancelled or failed
task reaches the GUI.

A spare child (issue 27.4): starting a process and importing numpy, pandas, pyarrow and the
engine (and numba's MDAV kernel) took 1.5–6 s before a sweep could report any progress.  So one
child is kept started and warm in advance (:func:`prestart`, called when a table is loaded and
after each task): it imports the engine, loads the MDAV kernel while it waits, and runs the next
task handed to it (one task per child, as before: it exits after it, and a stuck one is still
terminated).  Without a spare (it died, or two tasks run at once) a fresh child is started.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import queue
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dpstudio import engine
from dpstudio.engine.parallel import start_thread

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
    _exit_now(q)


def _exit_now(q) -> None:
    """End the child at once once its events are in the pipe: the interpreter's own exit
    (tearing down a 200,000-record table, pandas, pyarrow and scipy) took 0.1-1.2 s of CPU on
    the core the window's thread needed just then -- the table just read arriving, its panels
    being filled, the next spare importing (issue 24: a 181 ms event-loop gap in the open phase,
    85 ms of it the window's own CPU).  Nothing of the child's is left to save: its results are
    sent, and it holds no file open for writing (a task writing a file ends it before it
    returns: writes are atomic and complete before the "end" event).
    """
    try:
        q.close()
        q.join_thread()  # every event written to the pipe (the parent reads until "end")
    finally:
        os._exit(0)


#: what a spare child loads while it waits (what the app's tasks need first), in this order:
#: the app's task functions and the engine; the method registry; the measures' k-d tree
#: (scipy.spatial: 1 s) and Arrow's pandas layer (tables arrive with Arrow text columns)
_PRELOAD = (
    "dpstudio.app.compute",
    "dpstudio.app.sweep_view",
    "dpstudio.engine.sweeps",
    "dpstudio.engine.assessment",
    "scipy.spatial",
    "pyarrow.pandas_compat",
)


@dataclass
class _Spare:
    """A started child waiting for its task."""

    process: Any
    results: Any  # the queue its task's events come back on
    cancel: Any  # the event that cancels its task
    send: Any  # the pipe end its task is sent through
    ready: Any  # set once it has imported and warmed up


_spare_lock = threading.Lock()
_spare: list[_Spare] = []  # at most one


def _warm_up(conn, preload: tuple) -> None:
    """Import ``preload``, load the method registry and the compiled MDAV kernel (numba loads a
    cached function only at its first call: one call on 64 records), each step only while no
    task is waiting (a task loads what it needs itself).  Results do not depend on any of it.
    """
    steps: list = [lambda m=m: importlib.import_module(m) for m in preload]
    steps.append(lambda: engine.methods())
    steps.append(_warm_mdav)
    for step in steps:
        if conn.poll(0):
            return
        try:
            step()
        except Exception:  # noqa: BLE001 - only a warm-up
            pass


def _warm_mdav() -> None:
    from dpstudio.engine.sweeps import warm_up

    warm_up()


def _spare_main(conn, q, cancel_ev, ready, preload: tuple) -> None:
    """Body of a spare child: import, warm up, then run the one task sent through ``conn``."""
    try:
        _warm_up(conn, preload)
        ready.set()
        task = conn.recv()
    except (EOFError, OSError, KeyboardInterrupt):
        return  # the app went away, or the spare was retired
    except BaseException as exc:  # noqa: BLE001 - e.g. a task that cannot be unpickled
        q.put(("error", (f"{type(exc).__name__}: {exc}", traceback.format_exc())))
        return
    if task is None:
        return
    target, args, kwargs = task
    _child(q, cancel_ev, target, args, kwargs)


def _new_spare() -> _Spare:
    q = _CTX.Queue()
    ev = _CTX.Event()
    ready = _CTX.Event()
    recv, send = _CTX.Pipe(duplex=False)
    p = _CTX.Process(
        target=_spare_main, args=(recv, q, ev, ready, _PRELOAD), daemon=True, name="dpstudio-worker"
    )
    p.start()
    recv.close()  # the child's end
    return _Spare(p, q, ev, send, ready)


def spares_enabled() -> bool:
    """Whether a warm child is kept (``DPSTUDIO_SPARE_WORKER=0`` turns it off)."""
    return os.environ.get("DPSTUDIO_SPARE_WORKER", "1") not in ("0", "")


def prestart() -> None:
    """Start the spare child if there is none (call it off the GUI thread: starting a process
    takes 10–50 ms).
    """
    if not spares_enabled():
        return
    with _spare_lock:
        if _spare and _spare[0].process.is_alive():
            return
        for old in _spare:
            _retire(old)
        _spare.clear()
        _spare.append(_new_spare())


def _retire(spare: _Spare) -> None:
    try:
        spare.send.close()  # EOF: the waiting child returns
    except OSError:
        pass
    p = spare.process
    p.join(0.5)
    if p.is_alive():
        p.terminate()
        p.join(1.0)
    spare.results.close()
    spare.results.join_thread()


def discard_spare() -> None:
    """Stop the spare child (tests; it is a daemon child, stopped with the app in any case)."""
    with _spare_lock:
        for old in _spare:
            _retire(old)
        _spare.clear()


def _take_spare() -> _Spare | None:
    with _spare_lock:
        if not _spare:
            return None
        spare = _spare.pop()
    if not spare.process.is_alive():
        _retire(spare)
        return None
    return spare


def _start(target: str, args: tuple, kwargs: dict) -> _Spare:
    """The child running the task: the warm spare when there is one, else a fresh child.

    The whole record is kept while the task runs: a semaphore the parent drops is unlinked,
    and a child still starting could then not open it.
    """
    spare = _take_spare()
    if spare is not None:
        try:
            spare.send.send((target, args, kwargs))  # pickled here, in the worker thread
            spare.send.close()
            return spare
        except (OSError, ValueError):  # the spare died meanwhile
            _retire(spare)
    q = _CTX.Queue()
    ev = _CTX.Event()
    p = _CTX.Process(target=_child, args=(q, ev, target, args, kwargs), daemon=True, name="dpstudio-worker")
    p.start()
    return _Spare(p, q, ev, None, None)


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
    The task runs in the warm spare child when there is one; a new spare is started once the
    task has ended.  The child of a task that ended (or whose consumer stopped taking items)
    is joined in the background; a cancelled or failed task's child is gone on return.
    """
    child = _start(target, args, dict(kwargs or {}))
    p, q, ev = child.process, child.results, child.cancel
    # the task ran to its end, or its consumer took what it wanted: the child exits by itself
    # and is joined in the background (a child's exit -- its interpreter freeing a 200,000-row
    # table -- took 0.8-1.2 s under load, which the consumer waited for; issue 24 §5)
    ended = False
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
                if p.is_alive():
                    continue
                try:  # what it wrote just before it ended (it exits at once: _exit_now)
                    kind, payload = q.get(timeout=0.5)
                except queue.Empty:
                    raise ChildError(
                        f"The worker process stopped unexpectedly (exit code {p.exitcode}); out of memory?",
                        "",
                    ) from None
            if kind == "item":
                try:
                    yield payload
                except GeneratorExit:
                    ended = True
                    raise
            elif kind == "progress":
                if progress is not None:
                    progress(payload)
            elif kind == "end":
                ended = True
                return
            elif kind == "cancelled":
                raise engine.Cancelled()
            elif kind == "user_error":
                raise engine.DPStudioError(payload)
            else:
                raise ChildError(*payload)
    finally:
        ev.set()
        if not ended or not start_thread(
            threading.Thread(target=_reap, args=(p, q), name="dpstudio-reap", daemon=True)
        ):
            _reap(p, q)  # cancelled, failed: the child is gone when the caller goes on
        prestart()  # the next task starts warm


def _reap(p, q) -> None:
    """Wait for a task's child to exit (terminated after two seconds) and close its queue."""
    p.join(2.0)
    if p.is_alive():
        p.terminate()
        p.join(1.0)
    q.close()
    q.join_thread()
