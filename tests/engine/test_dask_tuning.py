"""Issue 25 (d-dask2): dpstudio tunes the Dask workers of a run to its memory model (spill
bound, p2p shuffle buffers: :class:`~dpstudio.engine.backends.dask_backend.TuneWorkers`) for
that run only.  A cluster that outlives the run -- a shared cluster reached with
``--scheduler`` -- gets its workers' own settings back at the run's end (the release written,
computed, or the run failed), and keeps no dpstudio plugin."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
import dask  # noqa: E402
from distributed import Client  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.errors import InputError  # noqa: E402
from tests.engine._dask_cluster import in_process_cluster  # noqa: E402

ROLES = {"a": "eps-quasi", "b": "eps-quasi"}
DOMAINS = {"a": (0, 100), "b": (0, 10)}
LIMIT = 200 * 2**20


def _data(n: int = 3_000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.integers(0, 101, n).astype(float), "b": np.round(rng.uniform(0, 10, n), 1)})


def _settings(dask_worker=None) -> dict:
    """What TuneWorkers changes on a worker, and the plugins it carries."""
    ext = dask_worker.extensions["shuffle"]
    return {
        "fast": dask_worker.data.fast.n,
        "comms": ext.memory_limiter_comms.limit,
        "disk": ext.memory_limiter_disk.limit,
        "plugins": sorted(dask_worker.plugins),
    }


@pytest.fixture(scope="module")
def shared():
    """An in-process cluster standing for a shared one: started before the runs, used by
    them through a client of their own (as ``--scheduler`` does), alive after them."""
    with in_process_cluster(LIMIT) as cluster:
        yield cluster


def _own(cluster) -> dict:
    with Client(cluster.scheduler_address, set_as_default=False) as c:
        return c.run(_settings)


def test_the_workers_own_settings_are_back_after_a_run(shared, tmp_path):
    """The run is tuned (stored results and p2p buffers at the model's bounds during it);
    after write_release the workers have their own values again and no dpstudio plugin.
    Before the fix the plugin stayed registered and the workers kept K = 0.1·L (fails, seen)."""
    before = _own(shared)
    assert all(s["fast"] > DB.kept_bytes(LIMIT) for s in before.values())  # Dask's 0.6·L
    src = tmp_path / "in.parquet"
    df = _data()
    df.to_parquet(src, index=False)
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0).data
    with Client(shared.scheduler_address, set_as_default=False) as client:
        rel = DB.protect_dask(
            str(src), "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0, client=client, partition_rows=500
        )
        during = client.run(_settings)
        for s in during.values():  # tuned for the run
            assert s["fast"] == DB.kept_bytes(LIMIT)
            assert s["comms"] == s["disk"] == DB.shuffle_buffer(LIMIT)
            assert DB.TuneWorkers.name in s["plugins"]
        with dask.config.set(scheduler=client.get):
            out = DB.write_release(rel, tmp_path / "out", input_path=src)
        after = client.run(_settings)
    assert after == before
    assert _own(shared) == before  # seen by a later client too
    got = pd.read_parquet(out["release"] + "/release")
    pd.testing.assert_frame_equal(got, mem, check_dtype=False)


def test_the_settings_are_back_after_compute_and_after_a_failed_run(shared, tmp_path):
    before = _own(shared)
    df = _data(800)
    with Client(shared.scheduler_address, set_as_default=False) as client:
        ddf = dd_from(df)
        rel = DB.protect_dask(
            ddf, "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0, client=client, partition_rows=200
        )
        assert client.run(_settings) != before
        with dask.config.set(scheduler=client.get):
            rel.compute()
        assert client.run(_settings) == before
        # a run refused on the data (a value outside its domain), after the workers were tuned
        bad = df.assign(a=df["a"] + 1_000)
        with (
            pytest.raises(InputError, match="outside the declared domain"),
            dask.config.set(scheduler=client.get),
        ):
            DB.protect_dask(dd_from(bad), "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0, client=client)
        assert client.run(_settings) == before


def test_untune_puts_back_only_what_was_changed():
    """A worker whose own bounds are already below the model's keeps them, and gets them back."""
    from types import SimpleNamespace as NS

    class _Fast(dict):
        n = 10
        total_weight = 0

    lim = NS(limit=8 * 2**20)
    w = NS(
        extensions={"shuffle": NS(memory_limiter_comms=NS(limit=2**30), memory_limiter_disk=lim)},
        memory_manager=NS(memory_limit=10**9),
        data=NS(fast=_Fast()),
    )
    DB._tune_worker(w)
    assert w.extensions["shuffle"].memory_limiter_comms.limit == DB.shuffle_buffer(10**9)
    assert lim.limit == 8 * 2**20 and w.data.fast.n == 10
    DB._tune_worker(w)  # a second registration replaces the first: the originals are kept
    DB._untune_worker(w)
    assert w.extensions["shuffle"].memory_limiter_comms.limit == 2**30
    assert lim.limit == 8 * 2**20 and w.data.fast.n == 10
    DB._untune_worker(w)  # twice: nothing more to do
    assert w.extensions["shuffle"].memory_limiter_comms.limit == 2**30


def dd_from(df: pd.DataFrame):
    import dask.dataframe as dd

    return dd.from_pandas(df, npartitions=4)


def _environ(names) -> dict:
    import os

    return {n: os.environ.get(n) for n in names}


def test_a_cluster_dpstudio_starts_spawns_its_workers_with_the_worker_environment(monkeypatch):
    """The command line's and the app's LocalCluster (``DB.local_cluster``): its worker
    processes start with ``WORKER_ENVIRON`` (PyArrow's pool purged at once), Dask's own
    pre-spawn variables kept; a variable the user set already is left as the user set it."""
    names = [*DB.WORKER_ENVIRON, "MALLOC_TRIM_THRESHOLD_"]
    for name in DB.WORKER_ENVIRON:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")  # the user's own: kept
    with (
        DB.local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        (env,) = client.run(_environ, names).values()
    assert env == {**DB.WORKER_ENVIRON, "MALLOC_TRIM_THRESHOLD_": "131072"}
    for name, value in DB.WORKER_ENVIRON.items():
        monkeypatch.setenv(name, value + "1")  # the user's own value wins
    with (
        DB.local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        (env,) = client.run(_environ, list(DB.WORKER_ENVIRON)).values()
    assert env == {name: value + "1" for name, value in DB.WORKER_ENVIRON.items()}
    # the setting applies to the clusters dpstudio starts, not to Dask's configuration after
    assert not set(DB.WORKER_ENVIRON) & set(dask.config.get("distributed.nanny.pre-spawn-environ"))


def test_a_run_turns_the_pause_off_and_resumes_a_paused_worker_then_puts_it_back():
    """Dask pauses a worker at 80 % of its limit, below the model's planned peak (0.83·L); a
    worker paused with unmanaged memory it cannot spill never resumed and the run hung
    (100,000,000 × 5 on 4 × 500 MB, issue 25).  A run's workers do not pause (the nanny's
    restart at 95 % stays); a worker paused already runs again; its own setting comes back."""
    from types import SimpleNamespace as NS

    from distributed.core import Status

    w = NS(
        extensions={},
        memory_manager=NS(memory_limit=10**9, memory_pause_fraction=0.8),
        data=NS(fast=None),
        status=Status.paused,
    )
    DB._tune_worker(w)
    assert w.memory_manager.memory_pause_fraction is False
    assert w.status == Status.running
    DB._tune_worker(w)  # a second registration: the worker's own value is still the one kept
    DB._untune_worker(w)
    assert w.memory_manager.memory_pause_fraction == 0.8


def _pause(dask_worker=None):
    return dask_worker.memory_manager.memory_pause_fraction


def test_the_workers_of_a_real_cluster_do_not_pause_during_a_run():
    """On a process cluster (the memory monitor on): the plugin a run registers turns the pause
    off on the workers, unregistering it puts Dask's 0.8 back."""
    with (
        # Dask's default (this module's shared in-process cluster runs with the pause off)
        dask.config.set({"distributed.worker.memory.pause": 0.8}),
        DB.local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit=2**30, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        assert set(client.run(_pause).values()) == {0.8}
        assert DB.tune_workers(client)
        assert set(client.run(_pause).values()) == {False}
        DB.untune_workers(client)
        assert set(client.run(_pause).values()) == {0.8}
