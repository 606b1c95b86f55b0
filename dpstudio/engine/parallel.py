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


def workers() -> int:
    """Threads :func:`map_ordered` may use: ``DPSTUDIO_THREADS`` when set (≥ 1), else the CPUs
    this process may run on, at most :data:`MAX_WORKERS` -- one when the machine is already
    oversubscribed (:data:`BUSY_LOAD_PER_CPU`).
    """
    env = os.environ.get("DPSTUDIO_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            return 1
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


def _threaded(fn, seq, w: int, each) -> Iterator:
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(max_workers=w, thread_name_prefix="dpstudio-work")
    try:
        futures = [ex.submit(fn, x) for x in seq]
        for i, f in enumerate(futures):
            r = f.result()
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
    pending: deque = deque()
    try:
        it = iter(items)
        for x in it:
            pending.append(ex.submit(fn, x))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
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
