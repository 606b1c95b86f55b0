"""An in-process Dask cluster for tests whose workers share this process's memory (so the
memory monitor is off: no pause, no spill by the monitor; the SpillBuffer's bound stays as in
any cluster)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def in_process_cluster(memory_limit: int, *, n_workers: int = 2) -> Iterator:
    """A ``LocalCluster`` of ``n_workers`` single-threaded in-process workers of ``memory_limit``."""
    import dask
    from distributed import LocalCluster

    with (
        dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.spill": False}),
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=False,
            memory_limit=memory_limit,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        ) as cluster,
    ):
        yield cluster
