"""Helpers for the Dask tests: an in-process cluster whose workers share this process's memory
(so the memory monitor is off: no pause, no spill by the monitor; the SpillBuffer's bound stays
as in any cluster), and the check that a ranked release under Dask equals the in-memory one."""

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


def assert_ranked_equals_memory(
    df, roles: dict, doms: dict, *, seed: int, ks, npartitions: int, partition_rows: int, min_ranges: int
) -> None:
    """ir-dp on ``df`` for every k of ``ks``: the Dask release (synchronous scheduler,
    ``partition_rows`` per sorted range, at least ``min_ranges`` ranges) equals the in-memory
    engine's under the same seed, value for value."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from dpstudio import engine
    from dpstudio.engine.backends import dask_backend as DB

    for k in ks:
        mem = engine.protect(df, "ir-dp", roles, doms, seed=seed, k=k, epsilon=1.0).data
        with dask.config.set(scheduler="synchronous"):
            rel = DB.protect_dask(
                dd.from_pandas(df, npartitions=npartitions),
                "ir-dp",
                roles,
                doms,
                seed=seed,
                partition_rows=partition_rows,
                k=k,
                epsilon=1.0,
            )
            got = rel.compute()
        assert rel.info["ranges"] >= min_ranges
        pd.testing.assert_frame_equal(got, mem, check_dtype=False)
