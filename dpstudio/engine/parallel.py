"""Independent column work of large tables on several cores (issue 27 §1).

The heavy loops of a large run -- typing the texts read (pyarrow compute), hashing the
protected columns for the data digest, the keyed noise of one attribute, the individual
ranking's sort, turning a block of the release into CSV text -- are numpy, pandas or Arrow
calls that release the GIL while they work.  Work on different columns (or on different
blocks of records) is independent, so :func:`map_ordered` runs it in a few threads and hands
the results back in order: the results are those of the plain loop, whatever the number of
threads (each item is computed by the same function from the same inputs, and nothing
random is drawn here -- callers derive every stream before dispatching).

Small work stays in the calling thread (a thread costs ~0.1 ms to hand work to; the small
tables of issue 27 §2 must not pay it).  ``DPSTUDIO_THREADS=n`` fixes the number of threads
(1: none; tests compare the two paths); by default one thread per CPU this process may run
on, at most :data:`MAX_WORKERS`, and one on a machine already oversubscribed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")
R = TypeVar("R")

#: most threads a call uses (the work is memory-bound beyond a few cores)
MAX_WORKERS = 4
#: cells (records × columns) below which the work runs in the calling thread
MIN_CELLS = 1 << 20


#: a machine whose load average is at least this many runnable tasks per CPU gets one thread
#: (measured on 2 CPUs at load 5-10: a second thread made laplace and ir-dp on 2,000,000 × 10
#: 15-40 % slower -- every hand-over of the GIL waits for the OS to schedule the other thread)
BUSY_LOAD_PER_CPU = 2.0


#: the most threads ``DPSTUDIO_THREADS`` may ask for
MAX_THREADS_SETTING = 1024
_WARNED: set[str] = set()  # the invalid DPSTUDIO_THREADS values already warned about


def _threads_setting(env: str) -> int:
    """The number of threads ``DPSTUDIO_THREADS=env`` asks for: a whole number from 1 to
    :data:`MAX_THREADS_SETTING`; anything else (text, 0, negative, huge) means 1 thread, said
    once per value in a warning naming the variable and what it accepts.
    """
    try:
        n = int(env)
    except ValueError:
        n = 0
    if 1 <= n <= MAX_THREADS_SETTING:
        return n
    if env not in _WARNED:
        _WARNED.add(env)
        import warnings

        shown = env if len(env) <= 40 else env[:40] + "…"
        warnings.warn(
            f"DPSTUDIO_THREADS={shown!r} is not a whole number from 1 to {MAX_THREADS_SETTING}; "
            "using 1 thread (set it to such a number, or unset it for one thread per CPU).",
            UserWarning,
            stacklevel=3,
        )
    return 1


def workers() -> int:
    """Threads :func:`map_ordered` may use: ``DPSTUDIO_THREADS`` when set (a whole number from
    1 to :data:`MAX_THREADS_SETTING`; another value warns and means 1), else the CPUs this
    process may run on, at most :data:`MAX_WORKERS` -- one when the machine is already
    oversubscribed (:data:`BUSY_LOAD_PER_CPU`).
    """
    env = os.environ.get("DPSTUDIO_THREADS", "").strip()
    if env:
        return _threads_setting(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    try:
        if os.getloadavg()[0] >= BUSY_LOAD_PER_CPU * max(os.cpu_count() or 1, 1):
            return 1
    except (AttributeError, OSError):  # pragma: no cover - no load average
        pass
    return max(1, min(n, MAX_WORKERS))


def map_ordered(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    cells: int,
    each: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, in threads when the work is large (``cells`` ≥
    :data:`MIN_CELLS`) and more than one thread is allowed.

    ``each(i, result)`` is called in the calling thread for every result, in order, as soon
    as it and the ones before it are done (progress, cancellation: an exception raised there
    or by ``fn`` cancels the items not yet started and propagates once the running ones have
    finished).  ``fn`` must not draw from a shared generator or write shared state.
    """
    seq = list(items)
    w = min(workers(), len(seq))
    if w <= 1 or cells < MIN_CELLS:
        out: list[R] = []
        for i, x in enumerate(seq):
            r = fn(x)
            if each is not None:
                each(i, r)
            out.append(r)
        return out
    return list(_threaded(fn, seq, w, each))


#: what starting a thread raises when it cannot start (under an address-space limit the
#: new thread's stack is refused: ``RuntimeError: can't start new thread``)
THREAD_START_ERRORS = (RuntimeError, MemoryError)


def start_thread(thread: threading.Thread) -> bool:
    """Start ``thread``; False (nothing started) when the system refuses a new thread -- the
    caller then does the work in its own thread.
    """
    try:
        thread.start()
    except THREAD_START_ERRORS:
        return False
    return True


def _submit(ex, fn, x):
    """``ex.submit(fn, x)``, or None when the pool could not start the thread it needed (the
    pool is then shut down: the items it has not started are cancelled, the running ones
    finish, and the caller computes the rest in its own thread).
    """
    try:
        return ex.submit(fn, x)
    except THREAD_START_ERRORS:
        ex.shutdown(wait=False, cancel_futures=True)
        return None


def _collect(fut, x, *, fn):
    """The result of ``fut``, or ``fn(x)`` in this thread when it never ran (cancelled)."""
    if fut is None or fut.cancelled():
        return fn(x)
    return fut.result()


def _threaded(fn, seq, w: int, each) -> Iterator:
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(max_workers=w, thread_name_prefix="dpstudio-work")
    try:
        futures: list = []
        for x in seq:
            f = _submit(ex, fn, x)
            if f is None:
                break
            futures.append(f)
        for i, x in enumerate(seq):
            r = _collect(futures[i] if i < len(futures) else None, x, fn=fn)
            if each is not None:
                each(i, r)
            yield r
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def imap_ordered(
    fn: Callable[[T], R], items: Iterable[T], *, cells: int, ahead: int | None = None
) -> Iterator[R]:
    """``(fn(x) for x in items)`` computed up to ``ahead`` items (default: the number of
    threads + 1) in advance in threads, yielded in order: a pipeline whose memory is a few
    items' results (the CSV writer's blocks).  In the calling thread when the work is small
    or one thread is allowed.
    """
    w = workers()
    if w <= 1 or cells < MIN_CELLS:
        for x in items:
            yield fn(x)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    ahead = max(1, ahead if ahead is not None else w + 1)
    ex = ThreadPoolExecutor(max_workers=w, thread_name_prefix="dpstudio-work")
    pending: deque = deque()  # (future or None, item)
    threads = True
    try:
        for x in items:
            f = _submit(ex, fn, x) if threads else None
            threads = f is not None
            pending.append((f, x))
            if len(pending) > ahead or not threads:
                yield _collect(*pending.popleft(), fn=fn)
        while pending:
            yield _collect(*pending.popleft(), fn=fn)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def gather_rows(data: pd.DataFrame, rows) -> pd.DataFrame:
    """``data.iloc[rows].reset_index(drop=True)``; a large frame of numpy columns (numbers,
    booleans) gathered column by column in threads (the same frame).
    """
    import numpy as np
    import pandas as pd

    m = data.shape[1]
    cells = len(rows) * m
    if (
        m < 2
        or cells < MIN_CELLS
        or workers() < 2
        or data.attrs
        or not all(isinstance(dt, np.dtype) and dt.kind in "biuf" for dt in data.dtypes)
    ):
        return data.iloc[rows].reset_index(drop=True)
    rows = np.asarray(rows, dtype=np.intp)
    arrays = [data.iloc[:, j].to_numpy() for j in range(m)]  # taken in this thread
    taken = map_ordered(lambda a: a[rows], arrays, cells=cells)
    out = pd.DataFrame(dict(enumerate(taken)), copy=False)
    out.columns = data.columns
    return out
