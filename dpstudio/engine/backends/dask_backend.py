"""The Dask backend (issue 12): methods on data larger than memory.

``protect_dask(source, method, ...)`` runs every method whose spec declares an out-of-core
plan (:mod:`dpstudio.engine.outofcore`, issue 22 §3): row-wise (laplace), ranked (individual
ranking: ir-dp, idp-ls, idp-cbls, ir-swap), single order (single-order insensitive-dp) and
frequency set (k-eps with OLA).  The backend owns partitioning, sorting, shuffles and I/O;
the calibration is the method's own (the plan's functions, which its in-memory run calls
too) and nothing here tests a method's id.  It runs on a ``dask.dataframe`` (or a Parquet
file/folder or CSV path, read lazily) and gives the release the in-memory engine gives for
the same seed, value for value:

* the run's root key is the first draw of the run's generator, derived as in memory from
  ``as_rng(seed)``, the method, its parameters and the data digest
  (:func:`dpstudio.engine.keying.keyed_rng`; the digest's per-partition sums are taken in the
  validation pass and combined in partition order, :func:`dpstudio.engine.keying.digest_partial`),
  as :func:`dpstudio.engine.protection._common.job_stream` does; every draw is keyed by
  (root, purpose, attribute, cluster or record id) (:mod:`dpstudio.engine.algorithms.keyed`),
  so it does not depend on the partitioning;
* record ids are global positions (partition lengths from the Parquet metadata, or counted
  in the validation pass);
* partitions are sized from the workers' memory limit (:class:`Budget`, :class:`Source`,
  issue 27 §3), never from the input's layout;
* NOTHING is gathered on one worker (issue 25): the ranked methods and the single order are
  distributed sorts -- splitters from a sample, ranges counted, records shuffled to their
  range and sorted there, global ranks from the ranges' prefix counts, ranges recut at
  cluster boundaries so that every cluster (ties across range boundaries included) is
  released whole by the plan, the released values shuffled back to their input partitions
  (see "ranked methods" below); a task holds at most a partition, a range or a cluster;
  when every worker runs on this machine, the records go to their ranges, and the released
  values back to their records, through files in a private scratch folder instead of Dask's
  p2p shuffles (:mod:`dask_scratch`), and so does the final random order when every column
  is a number;
* the random order of the in-memory engine (records ordered by keyed 128-bit sort keys; every
  method unless order='input') is one range partitioning on the top bits of the keys with
  known divisions (uniform keys), then a sort inside each output partition.

Other methods raise :class:`NotOnDask` naming ``--engine memory``.  Dask is optional
(``pip install 'dpstudio[scale]'``); this module imports it lazily.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.outofcore import (
    Attribute,
    FrequencySet,
    NotOutOfCore,
    Ranked,
    Rowwise,
    SingleOrder,
    cluster_block,
)
from dpstudio.engine.random import as_rng
from dpstudio.engine.roles import Role

SAMPLE_ROWS = 10_000
_ROW = "__dp_row"

#: A method or option the Dask backend does not run (raised here and by the methods' plans).
NotOnDask = NotOutOfCore


def dask_methods() -> tuple[str, ...]:
    """The ids of the methods that run on Dask: those whose spec declares an out-of-core plan
    (:mod:`dpstudio.engine.outofcore`), in menu order.
    """
    from dpstudio.engine.registry import all_methods

    return tuple(s.id for s in all_methods() if s.outofcore is not None)


def __getattr__(name: str):
    if name == "DASK_METHODS":  # the old constant, now derived from the specs
        return dask_methods()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dd():
    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - depends on the installation
        raise InputError(
            "The Dask backend needs the optional extra: pip install 'dpstudio[scale]'"
            " (or run with --engine memory)."
        ) from None
    return dd


def read_lazy(source: Any, client: Any = None):
    """A ``dask.dataframe`` from a dask frame, a pandas frame, or a Parquet file/folder or CSV
    path (read lazily), partitioned from the workers' memory (:func:`open_source`).
    """
    dd = _dd()
    if isinstance(source, dd.DataFrame):
        return source
    return open_source(source, worker_budget(client)).raw()


def check_input(path: str | os.PathLike) -> None:
    """Refuse, in one line and before any cluster starts, an input the Dask backend cannot
    read: missing, not Parquet or CSV, a FIFO or device, or a Parquet input
    :func:`check_parquet_input` refuses.
    """
    from dpstudio.engine.io import check_regular_file

    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"Input {path!r} does not exist.")
    low = path.lower()
    if os.path.isdir(path) or low.endswith(PARQUET_EXTENSIONS):
        check_parquet_input(path)
    elif low.endswith((".csv", ".txt", ".tsv")):
        check_regular_file(path, what="Input")  # a FIFO or device: one line, never read
    else:
        raise InputError(
            f"The Dask backend reads Parquet (a file or a folder of parts) and CSV; "
            f"{os.path.basename(path)!r} is neither. Convert it or use --engine memory."
        )


#: The names Dask reads as Parquet parts of a folder.
PARQUET_EXTENSIONS = (".parquet", ".parq", ".pq")


def parquet_parts(path: str) -> list[str]:
    """The Parquet files of ``path`` (itself, or the parts below a folder, sorted)."""
    if not os.path.isdir(path):
        return [path]
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out += [os.path.join(root, f) for f in sorted(files) if f.lower().endswith(PARQUET_EXTENSIONS)]
    return out


def check_parquet_input(path: str) -> None:
    """Refuse, in one line and before any worker starts, a Parquet input Dask would fail on
    with a worker traceback: an empty folder, a folder without Parquet parts, a part that is
    not a regular file or not Parquet (its footer is read: cheap), parts whose columns differ.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpstudio.engine.io import check_regular_file

    name = os.path.basename(os.path.normpath(path)) or path
    parts = parquet_parts(path)
    if os.path.isdir(path) and not parts:
        empty = not any(True for _ in os.scandir(path))
        raise InputError(
            f"Input folder {name!r} is empty."
            if empty
            else f"Input folder {name!r} holds no Parquet parts (files ending in "
            f"{', '.join(PARQUET_EXTENSIONS)}); give the folder of the parts or a Parquet file."
        )
    first: tuple[str, list[str]] | None = None
    for part in parts:
        rel = os.path.relpath(part, path) if os.path.isdir(path) else os.path.basename(part)
        check_regular_file(part, what="Parquet part")
        try:
            schema = pq.read_schema(part)
        except (pa.ArrowException, OSError, ValueError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"Input {name!r}: part {rel!r} is not a readable Parquet file ({msg}); replace or remove it."
            ) from None
        cols = [c for c in schema.names if not c.startswith("__index_level_")]
        if first is None:
            first = (rel, cols)
        elif cols != first[1]:
            missing = [c for c in first[1] if c not in cols]
            extra = [c for c in cols if c not in first[1]]
            what = (
                f"lacks column(s) {', '.join(map(repr, missing))}"
                if missing
                else f"has extra column(s) {', '.join(map(repr, extra))}"
                if extra
                else "has the columns in another order"
            )
            raise InputError(
                f"Input {name!r}: part {rel!r} {what} compared with part {first[0]!r}; every "
                "part must have the same columns."
            )


# --------------------------------------------------------------------------- memory and partitions

#: What a Dask worker holds before any data: dpstudio, numpy, pandas, pyarrow and distributed
#: imported (measured about 200 MB, issue 21), plus the scheduler's bookkeeping.
WORKER_BASE_BYTES = 256 * 2**20
#: Share of a worker's memory limit the partitions may plan on: Dask spills to disk from 60 %
#: ("target"), pauses the worker at 80 % and restarts it at 95 %.
USABLE_SHARE = 0.6
#: A task's peak memory as a multiple of the in-memory size of the partition it works on
#: (reading, copies for sorting and shuffling, Arrow conversion); measured, see docs/scale.md.
TASK_FACTOR = 12
#: Rows of a partition (or of a sorted range) at most, whatever the memory: more, smaller
#: tasks keep every worker busy and the shuffles' pieces small.
MAX_PARTITION_ROWS = 2_000_000
#: Rows of a partition at least (below it the scheduler's overhead per task dominates).
MIN_PARTITION_ROWS = 1_000


@dataclass(frozen=True)
class Budget:
    """The memory a task may plan on: ``worker`` bytes per worker (its limit) and how many
    rows of ``row_bytes`` in-memory bytes make one partition.
    """

    worker: int
    #: where ``worker`` comes from, for messages ("the workers' --memory-limit", ...)
    source: str
    #: rows per partition forced by the caller (``partition_rows=``), else None
    forced_rows: int | None = None

    @property
    def usable(self) -> int:
        """Bytes of one task's working set."""
        return max(0, int(self.worker * USABLE_SHARE) - WORKER_BASE_BYTES)

    def rows(self, row_bytes: float) -> int:
        """Rows per partition for records of ``row_bytes`` in-memory bytes."""
        if self.forced_rows:
            return int(self.forced_rows)
        rows = int(self.usable / (TASK_FACTOR * max(float(row_bytes), 8.0)))
        return max(MIN_PARTITION_ROWS, min(MAX_PARTITION_ROWS, rows))

    def fits(self, rows: int, row_bytes: float) -> bool:
        """Whether a task over ``rows`` records of ``row_bytes`` bytes fits a worker."""
        return self.forced_rows is not None or rows * TASK_FACTOR * max(float(row_bytes), 8.0) <= self.usable

    @staticmethod
    def minimum(rows: int, row_bytes: float) -> int:
        """The smallest worker memory limit for a task over ``rows`` records."""
        need = WORKER_BASE_BYTES + rows * TASK_FACTOR * max(float(row_bytes), 8.0)
        return int(np.ceil(need / USABLE_SHARE))


#: Bytes a record of the release's final phase carries beyond the input's in-memory bytes (the
#: input's columns and the record id: :attr:`Source.row_bytes`): the three keys of the shuffle
#: into the in-memory engine's random order (two 64-bit key words and the output partition,
#: :func:`_with_sort_keys`).
SHUFFLE_KEY_BYTES = 24


def final_rows(budget: Budget, row_bytes: float, *, shuffled: bool) -> int:
    """Records per partition of the release's final phase -- the assembly of the input with its
    released columns and the shuffle into the in-memory engine's order (``shuffled``) -- for an
    input of ``row_bytes`` in-memory bytes a record: sized from the memory limit with the bytes
    that phase's records really carry (the input's columns, the record id and, shuffled, the
    three sort keys), separately from the reading partitions and the sort's ranges (issue 25:
    planned at the reading size, 8·m + 8 bytes, its tasks peaked at ~900 bytes a record
    against the 576 planned at m = 5 on 1 GB workers).
    """
    return budget.rows(float(row_bytes) + (SHUFFLE_KEY_BYTES if shuffled else 0))


def shuffle_buffer(limit: int) -> int:
    """Bytes each of a worker's two p2p shuffle buffers may hold (data waiting to be sent,
    data waiting to be written; Dask's defaults are 1 GiB and 100 MiB): a sixteenth of its
    memory limit, at least 32 MiB (:func:`_tune_worker`).
    """
    return max(32 * 2**20, int(limit) // 16)


#: Share of a worker's memory limit its stored results (task outputs waiting for the tasks
#: that need them, the sorts' released columns) may take in memory before Dask spills them to
#: disk.  Dask's own default ("target", 0.6) lets them take 60 % of the limit *beside* the
#: running task's working set and the shuffle buffers: a worker holding more results than
#: that -- which happens once N is large enough, whatever the partitions' size -- went past
#: 95 % and was restarted (100,000,000 × 5 on 1 GB workers, issue 25).  :func:`_tune_worker`
#: lowers it to this share on every worker of a run.
KEPT_SHARE = 0.1


def kept_bytes(limit: int) -> int:
    """Bytes of stored results a worker of ``limit`` keeps in memory (the rest is spilled)."""
    return int(int(limit) * KEPT_SHARE)


def peak_model(budget: Budget) -> int:
    """The memory model (docs/scale.md): the peak a worker is planned to reach -- what it
    holds before any data, plus one task's working set (TASK_FACTOR × the rows of its
    partition, range or cluster × their bytes, sized to fit ``budget.usable``), plus the p2p
    shuffle's two buffers, plus the stored results Dask keeps in memory before spilling them
    (:func:`kept_bytes`, a tenth of the limit: :func:`_tune_worker` sets the workers' spill
    target to it).  A function of the worker's limit alone: not of the number of records.
    """
    kept = kept_bytes(budget.worker)
    return WORKER_BASE_BYTES + budget.usable + 2 * shuffle_buffer(budget.worker) + kept


#: Environment of the worker processes of a cluster dpstudio starts itself (set before they
#: are spawned: :func:`local_cluster`).  PyArrow's mimalloc pool keeps pages its threads freed
#: for a while before giving them back (the p2p shuffle's comm and offload threads allocate
#: there); ``MIMALLOC_PURGE_DELAY=0`` gives them back at once.  Measured on 2 workers × 1 GB,
#: ir-dp 20,000,000 × 5 (results/bench_dask_issue25.md): the PyArrow pool and the interpreter
#: held 197–219 MB at the peaks instead of 246–314, the unmanaged memory's 99th percentile
#: was 544–552 MB instead of 678–709, the peaks 665 / 716 MB instead of 723–808, for more
#: page faults (20 M against 14 M a worker).  A cluster reached with ``--scheduler`` is not
#: changed.
WORKER_ENVIRON = {"MIMALLOC_PURGE_DELAY": "0"}


@contextmanager
def local_cluster(**kwargs: Any) -> Iterator[Any]:
    """A ``distributed.LocalCluster`` (``kwargs`` as its own) whose worker processes start
    with :data:`WORKER_ENVIRON` (Dask's own pre-spawn variables kept, the user's environment
    first: a variable already set is left as it is).  Closed at the end.
    """
    import dask
    from distributed import LocalCluster

    key = "distributed.nanny.pre-spawn-environ"
    # Dask's nanny gives a variable already in this process's environment precedence
    with dask.config.set({key: {**(dask.config.get(key, default={}) or {}), **WORKER_ENVIRON}}):
        cluster = LocalCluster(**kwargs)
    try:
        yield cluster
    finally:
        cluster.close()


#: Where :func:`_tune_worker` keeps a worker's own settings, to put them back (:func:`_untune_worker`).
_SAVED = "_dpstudio_untuned"


def _tune_worker(dask_worker=None) -> None:
    """Fit a worker to the memory model: its shuffle buffers sized from its memory limit
    (:func:`shuffle_buffer`), and the stored results it keeps in memory (its SpillBuffer's
    in-memory bound, Dask's "target") lowered to :func:`kept_bytes`; never raised; and no
    pause at 80 % of the process's memory (below).  The memory monitor's other thresholds
    (spill at 70 %, restart at 95 %) are Dask's.  The worker's own values are kept on it (the
    first time) for :func:`_untune_worker`.
    """
    mm = getattr(dask_worker, "memory_manager", None)
    limit = getattr(mm, "memory_limit", None)
    if not limit:
        return
    saved: dict = getattr(dask_worker, _SAVED, None) or {}
    ext = getattr(dask_worker, "extensions", {}).get("shuffle")
    if ext is not None:
        size = shuffle_buffer(int(limit))
        for name in ("memory_limiter_comms", "memory_limiter_disk"):
            lim = getattr(ext, name, None)
            if lim is not None and (lim.limit is None or lim.limit > size):
                saved.setdefault(name, lim.limit)
                lim.limit = size
    kept = kept_bytes(int(limit))
    fast = getattr(getattr(dask_worker, "data", None), "fast", None)
    if fast is not None and isinstance(getattr(fast, "n", None), (int, float)) and fast.n > kept:
        saved.setdefault("fast", fast.n)
        fast.n = kept
        # what is stored already beyond the new bound goes to disk now, not at the next store
        evict = getattr(dask_worker.data, "evict", None)
        while evict is not None and getattr(fast, "total_weight", 0) > kept and len(fast):
            if evict() < 0:
                break
    # no pause at 80 %: the planned peak (peak_model, 0.83·L) is above Dask's pause line, and a
    # worker paused with unmanaged memory it cannot spill never resumes -- the others wait for
    # it in the p2p shuffle and the run hangs (100,000,000 × 5 on 4 × 500 MB, issue 25); the
    # nanny's restart at 95 % stays: a run fails in one line rather than hanging
    pause = getattr(mm, "memory_pause_fraction", False)
    if mm is not None and pause is not False:
        saved.setdefault("pause", pause)
        mm.memory_pause_fraction = False
        from distributed.core import Status  # a worker with a memory manager: distributed is there

        if getattr(dask_worker, "status", None) == Status.paused:
            dask_worker.status = Status.running  # the monitor no longer resumes it
    try:
        setattr(dask_worker, _SAVED, saved)
    except AttributeError:  # pragma: no cover - a worker object refusing attributes
        pass


def _untune_worker(dask_worker=None) -> None:
    """Put back what :func:`_tune_worker` changed on a worker (its spill bound, its shuffle
    buffers): a cluster dpstudio did not start (``--scheduler``) is left as it was found.
    """
    saved = getattr(dask_worker, _SAVED, None)
    if not saved:
        return
    ext = getattr(dask_worker, "extensions", {}).get("shuffle")
    for name in ("memory_limiter_comms", "memory_limiter_disk"):
        lim = getattr(ext, name, None) if ext is not None else None
        if lim is not None and name in saved:
            lim.limit = saved[name]
    fast = getattr(getattr(dask_worker, "data", None), "fast", None)
    if fast is not None and "fast" in saved:
        fast.n = saved["fast"]
    mm = getattr(dask_worker, "memory_manager", None)
    if mm is not None and "pause" in saved:
        mm.memory_pause_fraction = saved["pause"]
    try:
        delattr(dask_worker, _SAVED)
    except AttributeError:  # pragma: no cover
        pass


class TuneWorkers:
    """A worker plugin (``distributed.WorkerPlugin``'s interface): :func:`_tune_worker` on every
    worker of the cluster, those started later included -- a worker restarted by its nanny
    (or added) would otherwise come back with Dask's default p2p buffers (1 GiB to send),
    twice a 500 MB worker's limit.  Registered by :func:`protect_dask` under one name (a
    second registration replaces the first) for one run: unregistered at its end
    (:func:`untune_workers`), which puts every worker's own settings back (``teardown``).
    """

    name = "dpstudio-tune-workers"

    def setup(self, worker=None) -> None:
        _tune_worker(worker)

    def teardown(self, worker=None) -> None:
        _untune_worker(worker)

    def transition(self, key, start, finish, **kwargs) -> None:
        pass


def tune_workers(client: Any) -> bool:
    """Register :class:`TuneWorkers` on ``client``'s cluster (now and for any later worker)
    for one run; True when registered (then :func:`untune_workers` at the run's end).
    """
    try:
        from distributed.diagnostics.plugin import WorkerPlugin

        plugin = type("TuneWorkersPlugin", (TuneWorkers, WorkerPlugin), {})()
        client.register_plugin(plugin, name=TuneWorkers.name)
        return True
    except Exception:  # pragma: no cover - a best effort (a scheduler refusing plugins)
        return False


def untune_workers(client: Any) -> None:
    """The end of a run: :class:`TuneWorkers` unregistered from ``client``'s cluster, every
    worker's own spill bound and shuffle buffers put back (a shared cluster reached with
    ``--scheduler`` keeps Dask's settings, or its owner's, after dpstudio disconnects).  A
    best effort: a client already closed (a cancelled run) cannot reach the workers.
    """
    try:
        client.unregister_worker_plugin(TuneWorkers.name)
    except Exception:  # a closed client, a plugin already gone
        pass


def _human(nbytes: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} bytes"


def worker_budget(client: Any = None, partition_rows: int | None = None) -> Budget:
    """The :class:`Budget` of the cluster: the smallest worker memory limit of ``client`` (or
    of the default distributed client); without one (Dask's local threaded or synchronous
    scheduler, all in this process), the memory this process may use
    (:func:`dpstudio.engine.memory.available_memory`) shared by Dask's threads.
    """
    if client is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = None
    if client is not None:
        try:
            workers = client.scheduler_info(n_workers=-1)["workers"].values()
            limits = [int(w.get("memory_limit") or 0) for w in workers]
        except Exception:  # pragma: no cover - a scheduler refusing the call
            limits = []
        limits = [x for x in limits if x > 0]
        if limits:
            return Budget(min(limits), "the Dask workers' memory limit", partition_rows)
    from dpstudio.engine.memory import available_memory

    avail, what = available_memory()
    threads = max(1, os.cpu_count() or 1)
    return Budget(max(int(avail) // threads, 1), f"this process's memory ({what}) per thread", partition_rows)


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _Piece:
    """One partition of a Parquet input: row groups ``groups`` of ``path`` (all of them), or a
    slice [lo, hi) of one row group; ``start`` = the record id of its first row.
    """

    path: str
    groups: tuple[int, ...]
    lo: int | None
    hi: int | None
    start: int
    rows: int
    #: the length of the slices of its row group (a slice is one batch of that size)
    step: int = 0


def _parquet_data_columns(schema) -> list[str]:
    """The data columns of a Parquet schema (an index stored by pandas is not one)."""
    meta = schema.pandas_metadata or {}
    index = {c for c in meta.get("index_columns", []) if isinstance(c, str)}
    return [c for c in schema.names if c not in index and not c.startswith("__index_level_")]


def _row_bytes(schema, groups_meta) -> float:
    """In-memory bytes of one record of a Parquet input (pandas), from its schema: the width
    of fixed-size types, else the uncompressed bytes per value plus an offset, + the record id.
    """
    import pyarrow as pa

    total = 8.0  # the record id
    cols = _parquet_data_columns(schema)
    for c in cols:
        t = schema.field(c).type
        try:
            total += max(1, t.bit_width // 8)
            continue
        except ValueError:
            pass
        if pa.types.is_dictionary(t):
            total += 8
            continue
        size = rows = 0
        for md in groups_meta:
            for i in range(md.num_columns):
                if md.column(i).path_in_schema == c:
                    size += md.column(i).total_uncompressed_size
            rows += md.num_rows
        total += 16 + size / max(rows, 1)
    return total


def _plan_parquet(path: str, budget: Budget, what: str) -> tuple[list[_Piece], pd.DataFrame, float]:
    """The partitions of a Parquet input (file or folder), sized from the memory budget: the
    consecutive row groups of a file are grouped up to the budget's rows, and a row group
    larger than that is split into slices read one at a time (issue 27 §3: a single file of
    5 row groups is no longer one 120 MB partition).  Refuses, in one line, a row group whose
    column chunks alone (read whole) do not fit a worker.  Returns (pieces, empty frame of
    the data columns, in-memory bytes per record).
    """
    import pyarrow.parquet as pq

    files = parquet_parts(path)
    first = pq.ParquetFile(files[0])
    schema = first.schema_arrow
    cols = _parquet_data_columns(schema)
    metas = []
    for f in files:
        pf = first if f == files[0] else pq.ParquetFile(f)
        metas.append([pf.metadata.row_group(g) for g in range(pf.metadata.num_row_groups)])
    row_bytes = _row_bytes(schema, [m for ms in metas for m in ms][:64])
    target = budget.rows(row_bytes)
    pieces: list[_Piece] = []
    start = 0
    for f, groups in zip(files, metas):
        run: list[int] = []
        run_rows = 0
        for g, md in enumerate(groups):
            compressed = sum(md.column(i).total_compressed_size for i in range(md.num_columns))
            if not budget.forced_rows and 2 * compressed > budget.usable:
                need = int(np.ceil((WORKER_BASE_BYTES + 2 * compressed) / USABLE_SHARE))
                raise InputError(
                    f"Input {what!r}: row group {g} of {os.path.basename(f)!r} holds "
                    f"{_human(compressed)} compressed, read whole; workers of "
                    f"{_human(budget.worker)} cannot read it. Give at least --memory-limit "
                    f"{_human(need)}, or rewrite the file with smaller row groups."
                )
            rows = int(md.num_rows)
            if rows > target:
                if run:
                    pieces.append(_Piece(f, tuple(run), None, None, start, run_rows))
                    start += run_rows
                    run, run_rows = [], 0
                step = int(np.ceil(rows / np.ceil(rows / target)))
                for lo in range(0, rows, step):
                    hi = min(rows, lo + step)
                    pieces.append(_Piece(f, (g,), lo, hi, start, hi - lo, step))
                    start += hi - lo
                continue
            if run and run_rows + rows > target:
                pieces.append(_Piece(f, tuple(run), None, None, start, run_rows))
                start += run_rows
                run, run_rows = [], 0
            run.append(g)
            run_rows += rows
        if run or not groups:
            pieces.append(_Piece(f, tuple(run), None, None, start, run_rows))
            start += run_rows
    meta = schema.empty_table().select(cols).to_pandas().reset_index(drop=True)
    return pieces, meta, row_bytes


def _read_piece(piece: _Piece, columns: list[str] | None = None, all_columns: tuple = ()) -> pd.DataFrame:
    """One partition of a Parquet input with its record ids (``_ROW``); ``columns``: the
    columns Dask asks for (projection), else all.  A slice of a row group is read in batches
    of its own size (never the whole row group at once).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    want = list(all_columns) + [_ROW] if columns is None else list(columns)
    read = [c for c in want if c != _ROW]
    if not read:  # only the record ids: the metadata's counts are enough
        df = pd.DataFrame(index=pd.RangeIndex(piece.rows))
        df[_ROW] = np.arange(piece.start, piece.start + piece.rows, dtype=np.int64)
        return df[want]
    pf = pq.ParquetFile(piece.path)
    if not piece.groups:
        table = pf.schema_arrow.empty_table().select(read)
    elif piece.lo is None:
        table = pf.read_row_groups(list(piece.groups), columns=read)
    else:
        assert piece.hi is not None and piece.step > 0
        table = None
        seen = 0
        # batches of the slices' common length: the slice is one of them
        for batch in pf.iter_batches(batch_size=piece.step, row_groups=[piece.groups[0]], columns=read):
            if seen == piece.lo:
                table = pa.Table.from_batches([batch])
                break
            seen += batch.num_rows
        if table is None or table.num_rows != piece.hi - piece.lo:  # pragma: no cover - the file changed
            raise InputError(f"The input {piece.path!r} changed while it was read; run again.")
    df = table.to_pandas().reset_index(drop=True)
    del table
    _release_arrow_memory()
    if len(df) != piece.rows:  # pragma: no cover - the file changed
        raise InputError(f"The input {piece.path!r} changed while it was read; run again.")
    if _ROW in want:
        df[_ROW] = np.arange(piece.start, piece.start + piece.rows, dtype=np.int64)
    return df[want]


@dataclass
class Source:
    """The input of a run, as partitions of known size with record ids.

    ``frame(columns)``: a ``dask.dataframe`` of ``columns`` (default all) and the record id
    ``_ROW`` (the input position).  A Parquet input is read by :func:`_read_piece` (its own
    partitions, sized from the memory budget, never fused by Dask: a projection reads only
    those columns and keeps the partitions); a CSV by Dask in blocks sized from the budget;
    a frame as given, its partitions split when larger than the budget.  ``lens`` (records
    per partition) is known from the Parquet metadata, else after :meth:`set_lengths`.
    """

    meta: pd.DataFrame
    row_bytes: float
    pieces: list[_Piece] | None = None
    ddf: Any = None
    lens: np.ndarray | None = None
    target_rows: int = MAX_PARTITION_ROWS

    @property
    def npartitions(self) -> int:
        return len(self.pieces) if self.pieces is not None else int(self.ddf.npartitions)

    @property
    def starts(self) -> np.ndarray:
        assert self.lens is not None
        return np.r_[0, np.cumsum(self.lens)[:-1]].astype(np.int64)

    def _pieces_frame(self):
        dd = _dd()
        return dd.from_map(
            _read_piece,
            self.pieces,
            meta=self.meta.assign(**{_ROW: np.array([], np.int64)}),
            all_columns=tuple(self.meta.columns),
            label="read-parquet-piece",
            enforce_metadata=False,
        )

    def raw(self, columns: list[str] | None = None):
        """The partitions WITHOUT record ids (before the lengths are known)."""
        cols = list(self.meta.columns) if columns is None else list(columns)
        if self.pieces is not None:
            return self._pieces_frame()[cols]
        return self.ddf if columns is None else self.ddf[cols]

    def frame(self, columns: list[str] | None = None):
        """The partitions with the record id column ``_ROW`` (``columns`` and ``_ROW``)."""
        cols = list(self.meta.columns) if columns is None else list(columns)
        if self.pieces is not None:
            return self._pieces_frame()[[*cols, _ROW]]
        full = self.ddf.map_partitions(
            _with_row, self.starts, meta=self.ddf._meta.assign(**{_ROW: np.array([], np.int64)})
        )
        return full if columns is None else full[[*cols, _ROW]]

    def head(self, n: int) -> pd.DataFrame:
        """The first ``n`` records (reading only the partitions needed)."""
        import dask

        if self.pieces is not None:
            rows = np.cumsum([p.rows for p in self.pieces])
            k = int(np.searchsorted(rows, n)) + 1
            parts = self.raw().to_delayed()[:k]
            got = dask.compute(*parts)
            return pd.concat(got, ignore_index=True).head(n) if got else self.meta
        got = []
        have = 0
        for i in range(self.ddf.npartitions):
            x = self.ddf.partitions[i].head(n - have, npartitions=1, compute=True)
            got.append(x)
            have += len(x)
            if have >= n:
                break
        return pd.concat(got, ignore_index=True) if got else self.meta

    def set_lengths(self, lens) -> None:
        """Record the partitions' lengths (counted in the validation pass); partitions longer
        than the budget are split (a frame given with huge partitions, a CSV block).
        """
        lens = np.asarray(lens, dtype=np.int64)
        if self.pieces is not None:
            if not np.array_equal(lens, [p.rows for p in self.pieces]):  # pragma: no cover
                raise InputError("The input changed while it was read (record counts differ); run again.")
            self.lens = lens
            return
        self.lens = lens
        if lens.size and int(lens.max()) > self.target_rows:
            self.ddf = _split_partitions(self.ddf, lens, self.target_rows)
            self.lens = np.concatenate(
                [
                    np.diff(np.r_[np.arange(0, ln, self.target_rows), ln]) if ln else [0]
                    for ln in lens.tolist()
                ]
            ).astype(np.int64)


def _split_partitions(ddf, lens: np.ndarray, target: int):
    """``ddf`` with every partition longer than ``target`` rows cut into slices of ``target``
    (in order; each big partition is computed once and sliced).
    """
    from dask import delayed

    dd = _dd()
    parts = []
    for x, ln in zip(ddf.to_delayed(), lens.tolist()):
        if ln <= target:
            parts.append(x)
            continue
        for lo in range(0, ln, target):
            parts.append(delayed(_iloc)(x, lo, min(ln, lo + target)))
    return dd.from_delayed(parts, meta=ddf._meta, verify_meta=False)


def _iloc(part: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    return part.iloc[lo:hi]


def open_source(source: Any, budget: Budget) -> Source:
    """The :class:`Source` of a dask frame, a pandas frame, or a Parquet file/folder or CSV
    path, partitioned from ``budget``.
    """
    dd = _dd()
    if isinstance(source, pd.DataFrame):
        source = source.rename(columns={c: str(c) for c in source.columns})
        row_bytes = 8.0 + float(source.memory_usage(deep=True, index=False).sum()) / max(len(source), 1)
        target = budget.rows(row_bytes)
        nparts = max(1, int(np.ceil(len(source) / target)))
        return Source(
            meta=source.iloc[:0],
            row_bytes=row_bytes,
            ddf=dd.from_pandas(source, npartitions=nparts),
            target_rows=target,
        )
    if isinstance(source, dd.DataFrame):
        source = source.rename(columns={c: str(c) for c in source.columns})
        row_bytes = 8.0 + sum(8 if t.kind in "biufcmM" else 48 for t in source._meta.dtypes)
        return Source(meta=source._meta, row_bytes=row_bytes, ddf=source, target_rows=budget.rows(row_bytes))
    path = os.fspath(source)
    check_input(path)
    low = path.lower()
    what = os.path.basename(os.path.normpath(path)) or path
    if os.path.isdir(path) or low.endswith(PARQUET_EXTENSIONS):
        pieces, meta, row_bytes = _plan_parquet(path, budget, what)
        meta = meta.rename(columns={c: str(c) for c in meta.columns})
        return Source(
            meta=meta,
            row_bytes=row_bytes,
            pieces=pieces,
            lens=np.array([p.rows for p in pieces], dtype=np.int64),
            target_rows=budget.rows(row_bytes),
        )
    # CSV: text is about as large as the values it holds; blocks of the budget's bytes
    block = max(1 << 20, int(budget.usable / TASK_FACTOR))
    ddf = dd.read_csv(path, sep="\t" if low.endswith(".tsv") else ",", blocksize=block)
    ddf = ddf.rename(columns={c: str(c) for c in ddf.columns})
    row_bytes = 8.0 + sum(8 if t.kind in "biufcmM" else 48 for t in ddf._meta.dtypes)
    return Source(meta=ddf._meta, row_bytes=row_bytes, ddf=ddf, target_rows=budget.rows(row_bytes))


@dataclass
class DaskRelease:
    """A lazy release: ``data`` is a ``dask.dataframe``; the texts are the in-memory ones."""

    data: Any
    method: str
    guarantee: str
    is_dp: bool
    params: dict
    protected_attributes: list
    n: int
    info: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    public_warnings: list = field(default_factory=list)
    #: the release with the record id column (``__dp_row``, the input position), before the
    #: shuffle: private, for pairing with the original in the measures
    aligned: Any = field(default=None, repr=False)
    #: the guarantee as data (:class:`~dpstudio.engine.guarantee.Guarantee`): ``guarantee`` is its text
    guarantee_info: Any = field(default=None, repr=False)
    #: the client whose workers :func:`protect_dask` tuned for this run (:meth:`finish`), or None
    tuned: Any = field(default=None, repr=False, compare=False)
    #: the private folder of the sorts' files the release reads (:mod:`dask_scratch`), or
    #: None: removed when the release is collected or the process ends
    scratch: Any = field(default=None, repr=False, compare=False)

    def finish(self) -> None:
        """The end of the run: the workers' own settings put back (:func:`untune_workers`).
        Called by :func:`write_release` and :meth:`compute`; a later computation of this
        release runs with the workers' own settings (same values, more memory).
        """
        client, self.tuned = self.tuned, None
        if client is not None:
            untune_workers(client)

    def compute(self) -> pd.DataFrame:
        try:
            return self.data.compute().reset_index(drop=True)
        finally:
            self.finish()


# --------------------------------------------------------------------------- validation


def check_runs_on_dask(method: str, params: dict | None = None):
    """Raise :class:`NotOnDask` saying why ``method`` (with ``params``) does not run on Dask;
    return its out-of-core plan when it does (no data needed: the app marks methods before a
    run).  The method's own refusals come from its plan (``refuse``).
    """
    from dpstudio.engine.registry import get_method

    params = params or {}
    plan = get_method(method).outofcore
    if plan is None:
        raise NotOnDask(
            f"Method {method!r} does not run on Dask (it declares no out-of-core plan); "
            f"use --engine memory, on strata that fit in memory for a larger file (docs/scale.md) "
            f"(Dask runs: {', '.join(dask_methods())})."
        )
    if params.get("layout", "records") == "separate-tables":
        raise NotOnDask("Layout 'separate-tables' does not run on Dask yet; use --engine memory.")
    if params.get("drop_missing"):
        raise NotOnDask(
            "drop_missing does not run on Dask yet; remove the records with missing "
            "values first or use --engine memory."
        )
    why = plan.refuse(params)
    if why:
        raise NotOnDask(why)
    return plan


def _validate(src: Source, method, roles, domains, precision, params, hierarchies=None, budget=None):
    """Validate on the first records with the engine's own ``prepare`` (one error format),
    then check the whole data (missing values, domains) and take the partitions' lengths, the
    data digest's partial sums and, for a sort (ranked or single-order plans), a random
    sample of the protected columns for the splitters, in one distributed pass
    (:func:`_scan_part`).
    """
    import dask
    from dask import delayed

    from dpstudio.engine import api
    from dpstudio.engine.keying import combine_partials

    spec = api.get_method(method)
    plan = check_runs_on_dask(method, params)
    prep = api.prepare(
        src.head(SAMPLE_ROWS), method, roles, domains, hierarchies, precision=precision, **params
    )
    cols = list(prep.protected)
    task = plan.setup(prep, hierarchies) if isinstance(plan, FrequencySet) else None
    bounded = [c for c in cols if c in prep.domains]
    # a Parquet input's own partitions read only the protected columns; any other input is
    # scanned whole (a projection of it could be read in fused, longer partitions)
    parts = src.raw(cols if src.pieces is not None else None).to_delayed()
    if len(parts) != src.npartitions:  # pragma: no cover - a Dask change would show here
        raise InputError(
            f"internal: {len(parts)} partitions read for {src.npartitions}; run with --engine memory."
        )
    sort = isinstance(plan, (Ranked, SingleOrder))
    rate = SAMPLES_PER_RANGE / _range_rows(plan, cols, budget) if sort and budget is not None else 0.0
    scans = dask.compute(*[delayed(_scan_part)(x, cols, bounded, rate, i) for i, x in enumerate(parts)])
    lens = np.array([s["len"] for s in scans], dtype=np.int64)
    digest = combine_partials([s["digest"] for s in scans])
    n = int(lens.sum())
    for c in cols:
        na = sum(s["na"][c] for s in scans)
        if na:
            raise InputError(
                f"Column {c!r} has {int(na):,} missing value(s); the Dask "
                "backend refuses them: remove those records first."
            )
    for c in bounded:
        lb, ub = prep.domains[c]
        mins = [s["min"][c] for s in scans if s["len"]]
        maxs = [s["max"][c] for s in scans if s["len"]]
        if mins and (min(mins) < lb or max(maxs) > ub):
            raise InputError(
                f"Column {c!r}: values lie outside the declared domain "
                f"[{lb:g}, {ub:g}]; widen --domain {c}=LOWER:UPPER."
            )
    if "k" in prep.params and prep.params.get("k") is not None:
        from dpstudio.engine import params as P

        P.check_k(prep.params["k"], n, spec.id, spec.min_k)
    prep._digest = digest  # the whole data's, not the sample's: the run's key material
    # the sample's record ids are global positions from the lengths of the partitions SCANNED
    # here (a frame's or a CSV's partitions are split after this pass: their starts change)
    first = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
    sample = (
        [(int(first[i]) + s["sample"][0], s["sample"][1]) for i, s in enumerate(scans) if s["sample"][0].size]
        if sort
        else []
    )
    return spec, plan, task, prep, cols, n, lens, sample


def _range_row_bytes(plan, cols: list[str]) -> float:
    """In-memory bytes of one record in a range of a distributed sort: its values (one
    attribute, or all of a single order), record id, range id, and the values in their own
    dtype when they are released themselves (ir-swap).
    """
    m = len(cols) if isinstance(plan, SingleOrder) else 1
    return 8.0 * m + 16.0 + (0.0 if getattr(plan, "noisy", True) else 8.0)


def _range_rows(plan, cols: list[str], budget: Budget) -> int:
    return budget.rows(_range_row_bytes(plan, cols))


def _scan_part(
    part: pd.DataFrame, cols: list[str], bounded: list[str], rate: float = 0.0, number: int = 0
) -> dict:
    """One partition's facts for the validation pass: its length, its (records, lane A, lane
    B) of the data digest, the missing values of each protected column, the least and
    greatest value of each column with a declared domain and (``rate`` > 0) a random sample
    of the protected columns' values (positions in the partition, float64 matrix).
    """
    from dpstudio.engine.keying import digest_partial

    out: dict = {"len": len(part), "digest": digest_partial(part, cols), "na": {}, "min": {}, "max": {}}
    pos = _sample_positions(len(part), rate, number)
    out["sample"] = (pos, _values(part.iloc[pos], cols) if pos.size else np.zeros((0, len(cols))))
    for c in cols:
        out["na"][c] = int(part[c].isna().sum())
    for c in bounded:
        if len(part):
            out["min"][c] = part[c].min()
            out["max"][c] = part[c].max()
    _release_arrow_memory()
    return out


def _grid(prep, integer: bool, c: str, n: int):
    """The grid of ``c`` as :func:`~dpstudio.engine.algorithms.noise.job_grid` in memory
    (``integer``: the column is declared of type integer).
    """
    dom = prep.domains.get(c)
    gamma = (prep.precision or {}).get(c)
    if gamma is None:
        gamma = N.default_precision(dom, integer)
    if gamma is None:  # as noise.job_grid in memory (idp-cbls needs no domain)
        raise ParameterError(N.missing_precision_message(c))
    return N.make_grid(c, gamma, dom, integer, n)


# --------------------------------------------------------------------------- the run


def protect_dask(
    source: Any,
    method: str,
    roles: dict | None = None,
    domains: dict | None = None,
    *,
    seed: int | np.random.Generator | None = None,
    precision: dict | None = None,
    client: Any = None,
    hierarchies: dict | None = None,
    progress: Any = None,
    partition_rows: int | None = None,
    scratch: Any = None,
    **params: Any,
) -> DaskRelease:
    """Protect ``source`` on Dask; returns a :class:`DaskRelease` (lazy).  ``progress``: an
    optional ``fn(message)`` told of each step of the ranked methods (they compute one
    attribute at a time before the release is written; the command line prints them).  ``client``: a
    ``distributed.Client`` (``None``: the current default scheduler).  Partitions are sized
    from the workers' memory limit (:func:`worker_budget`); ``partition_rows`` forces their
    rows (tests, tuning).  ``scratch``: where the ranked methods' sorts keep their files (None:
    automatic, in Dask's temporary-directory when every worker runs on this machine; False:
    never, the p2p shuffles; a folder: there, on the same conditions; :func:`dask_scratch.scratch_for`).
    """
    from dpstudio.engine import api

    budget = worker_budget(client, partition_rows)
    live = _client_for(client)
    # the workers fitted to the memory model for this run only: put back at its end
    # (DaskRelease.finish, called by write_release and compute) or if it fails here
    tuned = live if live is not None and tune_workers(live) else None
    scratch_dir = None
    try:
        src = open_source(source, budget)
        spec, plan, task, prep, cols, n, lens, sample = _validate(
            src, method, roles, domains, precision, params, hierarchies, budget
        )
        src.set_lengths(lens)
        lens = src.lens
        p = dict(prep.params)
        if spec.uses_epsilon and p.get("epsilon") is None:
            raise NotOnDask(
                "The noise-free baseline (no ε) is for sweeps and does not run on Dask; "
                "give --epsilon or use --engine memory."
            )
        from dpstudio.engine.keying import keyed_rng
        from dpstudio.engine.protection._common import keep_order
        from dpstudio.engine.roles import declared_integer

        # the first draw of the run's generator, derived from the seed, the parameters and the
        # data digest exactly as run_prepared does in memory (job_stream)
        root = K.root_key(keyed_rng(as_rng(seed), prep.run_context(p)))
        ddf = src.frame()
        info: dict = {"backend": "dask", "npartitions": int(src.npartitions)}
        shuffle = not keep_order(p)
        # the final phase's partitions, sized for its own records (not the reading partitions')
        final = final_rows(budget, src.row_bytes, shuffled=shuffle)
        info["final_rows"] = int(final)
        private_warns: list = []
        attrs: list[Attribute] = []
        if not isinstance(plan, FrequencySet):
            eps = _eps(p, cols) if spec.uses_epsilon else None
            for j, c in enumerate(cols):
                g = _grid(prep, declared_integer(prep.types, c), c, n) if plan.noisy else None
                attrs.append(
                    Attribute(c, j, root, p, n, grid=g, epsilon=None if eps is None else float(eps[j]))
                )
        if isinstance(plan, FrequencySet):
            out, kinfo, kwarns = _frequency_release(ddf, task, n, budget)
            info.update(kinfo)
            private_warns += kwarns
        elif isinstance(plan, Rowwise):
            new = {
                a.column: ddf[[a.column, _ROW]].map_partitions(
                    _rowwise_part, plan.release, a, meta=(a.column, _out_dtype(a.grid))
                )
                for a in attrs
            }
            out = ddf.assign(**new)
        else:
            out, info["ranges"], scratch_dir = _ranked_release(
                src, plan, attrs, prep, n, sample, budget, client, progress, final, scratch
            )
            info["sorts"] = "scratch files" if scratch_dir is not None else "p2p shuffles"
        read = src.lens
        if isinstance(plan, (Rowwise, FrequencySet)) and shuffle and read is not None and read.size:
            if int(read.max()) > final:  # a row-wise or frequency-set release, cut for the shuffle
                out = _split_partitions(out, read, final)
        ident = [c for c, r in prep.roles.items() if r is Role.IDENTIFIER and c in out.columns]
        if ident:
            out = out.drop(columns=ident)
        aligned = out
        if shuffle:
            fmeta = out._meta.drop(columns=[_ROW]).reset_index(drop=True)
            S = _scratch()
            fixed = all(S.fixed_width(t) for t in fmeta.dtypes)
            if scratch_dir is None and fixed and isinstance(plan, Rowwise):
                # a row-wise release: its shuffle through files when the workers share them (the
                # ranked methods decided it once, before their sorts)
                need = S.shuffle_bytes(n, fmeta.dtypes)
                scratch_dir = S.scratch_for(
                    scratch, client, list(fmeta.dtypes), need, progress or (lambda _m: None)
                )
            if scratch_dir is not None and fixed:
                have = scratch_dir.values
                write = [c for c in fmeta.columns if c not in have]
                # the ranked methods' other columns from the input; a row-wise release's all
                frame = src.frame(write) if have else out
                out = S.shuffled(
                    frame,
                    write,
                    fmeta,
                    root=root,
                    scratch=scratch_dir,
                    n=n,
                    nparts=out.npartitions,
                    say=progress or (lambda _m: None),
                )
                info["shuffle"] = "scratch files"
            else:
                out = _shuffled(out, root)
                info["shuffle"] = "p2p"
        else:  # computed in place: already in input order
            out = out.drop(columns=[_ROW])
        released_cols = [c for c in ddf.columns if c != _ROW and c not in ident]
        g = api.with_grid_clause(api.release_guarantee(spec, p, prep.roles, released_cols, cols), prep, p)
        # only the warnings that depend on the parameters: the others were computed on the sample
        warns = [w for w in prep.warnings if api._is_public_warning(w)]
        return DaskRelease(
            out,
            spec.id,
            g.render(),
            g.is_dp,
            p,
            cols,
            n,
            info,
            warns + private_warns,
            warns,
            aligned,
            g,
            tuned=tuned,
            scratch=scratch_dir,
        )
    except BaseException:
        if tuned is not None:
            untune_workers(tuned)
        if scratch_dir is not None:
            scratch_dir.close()
        raise


def _eps(p: dict, cols: list[str]) -> np.ndarray:
    from dpstudio.engine.types import epsilon_shares

    return epsilon_shares(p, cols)


def _out_dtype(g: N.Grid):
    return "int64" if g.integer else "float64"


def _rowwise_part(part: pd.DataFrame, release, a: Attribute) -> pd.Series:
    """One partition's released values of attribute ``a`` (a :class:`Rowwise` plan)."""
    x = part[a.column].to_numpy(dtype=np.float64)
    return pd.Series(release(x, part[_ROW].to_numpy(dtype=np.int64), a), index=part.index, name=a.column)


def _with_row(part: pd.DataFrame, starts, partition_info=None) -> pd.DataFrame:
    """The record id (global input position) from the partition lengths counted once."""
    i = partition_info["number"] if partition_info else 0
    return part.assign(**{_ROW: np.arange(len(part), dtype=np.int64) + int(starts[i])})


def _with_sort_keys(part: pd.DataFrame, root, bits: int) -> pd.DataFrame:
    k0, k1 = K.sort_keys(K.KeyedStream(root, K.PURPOSE_SHUFFLE, 0), part[_ROW].to_numpy(dtype=np.int64))
    return part.assign(__k0=k0, __k1=k1, __b=(k0 >> np.uint64(64 - bits)).astype(np.int64))


def _by_sort_keys(part: pd.DataFrame) -> pd.DataFrame:
    k0 = part["__k0"].to_numpy()
    order = np.argsort(k0)
    s0 = k0[order]
    if s0.size > 1 and bool(np.any(s0[1:] == s0[:-1])):  # equal first words (~n²/2⁶⁵): both
        order = np.lexsort((part["__k1"].to_numpy(), k0))
    return part.iloc[order].drop(columns=["__k0", "__k1", _ROW]).reset_index(drop=True)


def _shuffled(out, root):
    """The release in the in-memory engine's shuffled order (records ordered by their keyed
    128-bit sort keys).  The keys are uniform, so the top bits of the first word name the
    output partition: a range partitioning with known divisions (one all-to-all exchange, no
    quantile pass, the release computed once), then a sort by the keys inside each partition.
    """
    bits = max(1, int(np.ceil(np.log2(max(2, out.npartitions)))))
    meta = out._meta.assign(
        __k0=np.array([], np.uint64), __k1=np.array([], np.uint64), __b=np.array([], np.int64)
    )
    keyed = out.map_partitions(_with_sort_keys, root, bits, meta=meta)
    m = 1 << bits
    keyed = keyed.set_index("__b", divisions=[*range(m), m - 1], sorted=False)
    fmeta = out._meta.drop(columns=[_ROW]).reset_index(drop=True)
    return keyed.map_partitions(_by_sort_keys, meta=fmeta)


# --------------------------------------------------------------------------- ranked methods
#
# Individual ranking (Ranked plans) and the single order (SingleOrder plans) are a
# distributed sort: no column, and no record, is ever gathered on one worker (issue 25).  Per
# attribute (or once for the single order):
#
# 1. splitters: the validation pass draws a random sample of every partition (SAMPLES_PER_RANGE
#    per range on average); the sample's keys (value, or the plan's sort key, then the record
#    id: the in-memory order, ties by record id) sorted, every SAMPLES_PER_RANGE-th is a
#    splitter: P ranges of about the budget's rows each;
# 2. counts: each partition counts its records per range (one pass, all attributes at once);
#    the prefix sums are the global first rank of every range;
# 3. shuffle: every record goes to its range (Dask's shuffle: set_index on the range id with
#    known divisions); each range is sorted locally -- its records' global ranks follow;
# 4. whole clusters: the ranges are cut again at the first cluster boundary at or after their
#    first rank (slices of neighbouring sorted ranges), so every cluster lies in one piece,
#    ties across range boundaries included; the plan's release runs on each piece (a
#    ClusterBlock: the same functions the in-memory run calls, the same keyed draws);
# 5. shuffle back: every released value goes to its input partition by record id (known
#    divisions), sorted by record id, kept on the workers (spilled to disk when they must),
#    then the next attribute.  The release is each input partition with its released columns.

#: Sample records drawn per range for the splitters (oversampling: the ranges' sizes then
#: vary by a few tens of percent around the target).
SAMPLES_PER_RANGE = 32
#: The sample is drawn with this seed per partition: it only decides where ranges split, never
#: the release (which depends on the global ranks alone).
_SAMPLE_SEED = 0x5A17


def _release_arrow_memory(dask_worker=None) -> None:
    """Give the memory PyArrow's pool keeps after a Parquet read back to the system (mimalloc
    and jemalloc keep it: ~150 MB a worker after reading 1M-row parts of five columns, a
    quarter of a 600 MB worker).  Called in the tasks that read partitions and on every
    worker between the steps of the ranked methods.
    """
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - Parquet needs it; CSV does not
        return
    pa.default_memory_pool().release_unused()


def _sample_positions(length: int, rate: float, number: int) -> np.ndarray:
    """Positions of the sample of a partition of ``length`` records (ascending)."""
    if length == 0 or rate <= 0:
        return np.zeros(0, dtype=np.int64)
    m = min(length, int(np.ceil(length * rate)))
    rng = np.random.default_rng([_SAMPLE_SEED, int(number)])
    return np.sort(rng.choice(length, size=m, replace=False)).astype(np.int64)


def _lex_le(keys_a: list[np.ndarray], keys_b: list[np.ndarray]) -> np.ndarray:
    """Element-wise a <= b for tuples of key arrays compared lexicographically."""
    le = np.ones(keys_a[0].shape, dtype=bool)
    undecided = np.ones(keys_a[0].shape, dtype=bool)
    for a, b in zip(keys_a, keys_b):
        lt = a < b
        gt = a > b
        le[undecided & gt] = False
        undecided &= ~(lt | gt)
    return le


def _range_of(keys: list[np.ndarray], splitters: list[np.ndarray]) -> np.ndarray:
    """The range of each record: how many splitters are lexicographically <= its keys (the
    first key by ``searchsorted``; a vectorised binary search over the splitters that share
    it, comparing the following keys).
    """
    if not splitters or splitters[0].size == 0:
        return np.zeros(keys[0].size, dtype=np.int64)
    lo = np.searchsorted(splitters[0], keys[0], "left").astype(np.int64)
    hi = np.searchsorted(splitters[0], keys[0], "right").astype(np.int64)
    while True:
        active = np.flatnonzero(lo < hi)
        if active.size == 0:
            return lo
        mid = (lo[active] + hi[active]) // 2
        le = _lex_le([s[mid] for s in splitters], [k[active] for k in keys])
        lo[active[le]] = mid[le] + 1
        hi[active[~le]] = mid[~le]


def _splitters(keys: list[np.ndarray], nranges: int) -> list[np.ndarray]:
    """The ``nranges - 1`` splitters (tuples of key arrays) of a sample's keys."""
    if nranges <= 1 or keys[0].size == 0:
        return [np.zeros(0, dtype=k.dtype) for k in keys]
    order = np.lexsort(keys[::-1])
    s = keys[0].size
    pick = order[np.minimum((np.arange(1, nranges) * s) // nranges, s - 1)]
    return [k[pick] for k in keys]


def _first_column(X: np.ndarray) -> list[np.ndarray]:
    """The sort key of individual ranking: the attribute's value."""
    return [X[:, 0]]


def _plan_keys(X: np.ndarray, sort_key, lb, ub, params) -> list[np.ndarray]:
    """A :class:`SingleOrder` plan's sort key."""
    return list(sort_key(X, lb, ub, params))


@dataclass(frozen=True)
class _Order:
    """What a distributed sort needs to know: the columns it reads, how to compute the sort
    keys from them (record id last, added here), the splitters and the ranges' totals.
    """

    columns: list[str]
    #: the keys of a (records, len(columns)) float64 matrix, most significant first
    keyfn: Any
    splitters: list[np.ndarray]
    totals: np.ndarray

    @property
    def nranges(self) -> int:
        return int(self.totals.size)

    def keys(self, X: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
        return [*[np.asarray(k, dtype=np.float64) for k in self.keyfn(X)], np.asarray(rows, dtype=np.int64)]


def _values(part: pd.DataFrame, cols: list[str]) -> np.ndarray:
    return np.ascontiguousarray(part[cols].to_numpy(dtype=np.float64)).reshape(len(part), len(cols))


def _count_part(part: pd.DataFrame, orders: list[_Order]) -> list[np.ndarray]:
    """One partition's records per range of every order."""
    rows = part[_ROW].to_numpy(dtype=np.int64)
    out = []
    for o in orders:
        r = _range_of(o.keys(_values(part, o.columns), rows), o.splitters)
        out.append(np.bincount(r, minlength=o.nranges).astype(np.int64))
    _release_arrow_memory()
    return out


def _add_counts(*parts: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sum([p[i] for p in parts], axis=0) for i in range(len(parts[0]))]


def _tree(items: list, fn, width: int = 16):
    """A reduction of delayed ``items`` by ``fn`` in a tree of fan-in ``width`` (no task
    holds more than ``width`` of them).
    """
    from dask import delayed

    while len(items) > 1:
        items = [delayed(fn)(*items[i : i + width]) for i in range(0, len(items), width)]
    return items[0]


def _with_range(part: pd.DataFrame, order: _Order, keep: list[str]) -> pd.DataFrame:
    """The records of a partition with their range id (the shuffle's key) and what the ranges
    need: the order's columns (float64), the record id, ``keep`` (in their own dtype).
    """
    rows = part[_ROW].to_numpy(dtype=np.int64)
    X = _values(part, order.columns)
    out = {f"__x{j}": X[:, j] for j in range(X.shape[1])}
    out.update({f"__o{j}": part[c].to_numpy() for j, c in enumerate(keep)})
    out[_ROW] = rows
    out["__r"] = _range_of(order.keys(X, rows), order.splitters)
    _release_arrow_memory()
    return pd.DataFrame(out)


def _sort_range(part: pd.DataFrame, order: _Order, nkeep: int) -> dict:
    """One range's records sorted by the order's keys (record id last): the in-memory order."""
    m = len(order.columns)
    X = (
        np.column_stack([part[f"__x{j}"].to_numpy(dtype=np.float64) for j in range(m)])
        if len(part)
        else np.zeros((0, m))
    )
    rows = part[_ROW].to_numpy(dtype=np.int64)
    idx = np.lexsort(order.keys(X, rows)[::-1]) if len(part) else np.zeros(0, np.int64)
    out: dict = {"X": X[idx], "rows": rows[idx]}
    out["keep"] = [part[f"__o{j}"].to_numpy()[idx] for j in range(nkeep)]
    return out


def _release_piece(*ranges: dict, cuts, first_rank, n, k, plan, attrs, piece_starts, cols) -> pd.DataFrame:
    """The released values of the ranks [first_rank, ...) -- whole clusters, cut from the
    sorted ranges ``ranges`` (``cuts``: (lo, hi) of each) -- by the plan's release, with each
    record's id and input partition.
    """
    X = (
        np.concatenate([r["X"][lo:hi] for r, (lo, hi) in zip(ranges, cuts)])
        if ranges
        else np.zeros((0, len(cols)))
    )
    rows = (
        np.concatenate([r["rows"][lo:hi] for r, (lo, hi) in zip(ranges, cuts)])
        if ranges
        else np.zeros(0, np.int64)
    )
    keep = (
        [
            np.concatenate([r["keep"][j][lo:hi] for r, (lo, hi) in zip(ranges, cuts)])
            for j in range(len(ranges[0]["keep"]))
        ]
        if ranges
        else []
    )
    out: dict = {_ROW: rows}
    if rows.size:
        if isinstance(plan, SingleOrder):
            block = cluster_block(X, ranks=int(first_rank), n=n, k=k, rows=rows)
            vals = plan.release(block, attrs)
        else:
            block = cluster_block(
                X[:, 0], ranks=int(first_rank), n=n, k=k, rows=rows, original=keep[0] if keep else None
            )
            vals = [plan.release(block, attrs[0])]
        for c, v in zip(cols, vals):
            out[c] = np.asarray(v)
    out["__piece"] = np.searchsorted(piece_starts, rows, "right").astype(np.int64) - 1
    return pd.DataFrame(out)


def _piece_values(part: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """One input partition's released values, in record-id order."""
    rows = part[_ROW].to_numpy(dtype=np.int64)
    order = np.argsort(rows)
    return pd.DataFrame({_ROW: rows[order], **{c: part[c].to_numpy()[order] for c in cols}})


def _assemble(
    part: pd.DataFrame, *released: pd.DataFrame, dtypes, lo: int = 0, hi: int | None = None
) -> pd.DataFrame:
    """One partition of the release: records ``lo:hi`` of an input partition with their
    released columns (a slice sized for the final phase, :func:`final_rows`).
    """
    if lo or hi is not None:
        part = part.iloc[lo:hi]
        released = tuple(frame.iloc[lo:hi] for frame in released)
    new = {}
    rows = part[_ROW].to_numpy(dtype=np.int64)
    for frame in released:
        if len(frame) != len(part) or not np.array_equal(frame[_ROW].to_numpy(dtype=np.int64), rows):
            raise RuntimeError(  # pragma: no cover - the record counts are checked before
                f"internal: {len(frame):,} released values for a partition of {len(part):,} records."
            )
        for c in frame.columns:
            if c != _ROW:
                new[c] = pd.Series(frame[c].to_numpy(), index=part.index).astype(dtypes[c])
    out = part.assign(**new)
    other = {c: t for c, t in dtypes.items() if c in out.columns and out[c].dtype != t}
    return out.astype(other) if other else out


def _slices(starts: np.ndarray, lens: np.ndarray, sizes: list[int]) -> list[list[tuple[int, int, int]]]:
    """Per target piece (global first rank ``starts[i]``, ``lens[i]`` records): the
    (source, lo, hi) slices of the consecutive sources of sizes ``sizes`` that hold it.
    Both are in the same order; the totals must agree.
    """
    bounds = np.r_[0, np.cumsum(np.asarray(sizes, dtype=np.int64))]
    total = int(lens.sum()) if lens.size else 0
    if int(bounds[-1]) != total:  # pragma: no cover - the data changed under us
        raise InputError(
            f"The input changed while it was read ({int(bounds[-1]):,} values, {total:,} records)."
        )
    out: list[list[tuple[int, int, int]]] = []
    for s, ln in zip(starts.tolist(), lens.tolist()):
        if ln == 0:
            out.append([])
            continue
        e = s + ln
        f = int(np.searchsorted(bounds, s, "right")) - 1  # the last source starting at or before s
        parts = []
        while s < e:
            hi = min(e, int(bounds[f + 1]))
            if hi > s:
                parts.append((f, s - int(bounds[f]), hi - int(bounds[f])))
                s = hi
            f += 1
        out.append(parts)
    return out


def cluster_starts_at_or_after(ranks: np.ndarray, n: int, k: int) -> np.ndarray:
    """The first cluster boundary at or after each rank (``n`` past the last cluster's
    start): clusters are the ranks [c·k, (c+1)·k), the last taking the remainder.
    """
    kk = max(int(k), 1)
    nc = MA.n_clusters_for(n, k)
    c = -(-np.asarray(ranks, dtype=np.int64) // kk)
    return np.where(c <= nc - 1, c * kk, n).astype(np.int64)


def _persist_frame(frame, client=None):
    """``frame`` (a dask collection) computed and kept where it was computed (on the workers
    with a distributed client, spilled to disk when they must; else in this process); returns
    its partitions as delayed objects.
    """
    import dask

    client = _client_for(client)
    if client is None:
        (done,) = dask.persist(frame)
        return done.to_delayed()
    from distributed import futures_of, wait

    try:
        client.run(_release_arrow_memory)  # what the previous step's reads left behind
    except Exception:  # pragma: no cover - a best effort (e.g. a scheduler refusing run)
        pass
    done = client.persist(frame)
    futures = futures_of(done)
    with client.as_current():  # wait asks default_client(); the app's client is not the default
        wait(futures)
    for f in futures:
        if f.status == "error":
            f.result()  # raises the task's error (wait does not)
    return done.to_delayed()


def _client_for(client=None):
    """The distributed client computations go to (None: Dask's local schedulers)."""
    import dask

    sched = dask.config.get("scheduler", None)
    if client is None and (sched is None or sched == "dask.distributed" or callable(sched)):
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = None
        if client is not None and callable(sched) and sched != client.get:
            client = None  # another scheduler chosen explicitly: dask.persist computes there
    return client


def _sorted_release(
    src: Source, order: _Order, plan, attrs: list[Attribute], keep: list[str], *, n, k, client, say
):
    """The released columns of ``attrs`` under one distributed sort (steps 3-5 above): per
    input partition, a frame (record id, released columns) in record-id order, kept.
    """
    from dask import delayed

    dd = _dd()
    cols = [a.column for a in attrs]
    read = list(dict.fromkeys([*order.columns, *keep]))
    mapped = src.frame(read).map_partitions(
        _with_range,
        order,
        keep,
        meta=pd.DataFrame(
            {
                **{f"__x{j}": np.array([], np.float64) for j in range(len(order.columns))},
                **{f"__o{j}": src.meta[c].iloc[:0].to_numpy() for j, c in enumerate(keep)},
                _ROW: np.array([], np.int64),
                "__r": np.array([], np.int64),
            }
        ),
    )
    P = order.nranges
    ranged = mapped.set_index("__r", divisions=(*range(P), P - 1), sorted=False)
    ranges = [delayed(_sort_range)(x, order, len(keep)) for x in ranged.to_delayed()]
    if len(ranges) != P:  # pragma: no cover - a Dask change would show here
        raise InputError(f"internal: {len(ranges)} ranges for {P}; run with --engine memory.")
    # the pieces of whole clusters: each range's first rank moved up to a cluster boundary
    bounds = _release_bounds(order, n, k)
    lens = np.diff(bounds)
    pieces = []
    for q, cut in enumerate(_slices(bounds[:-1], lens, order.totals.tolist())):
        if not cut:
            continue
        pieces.append(
            delayed(_release_piece)(
                *[ranges[f] for f, _, _ in cut],
                cuts=[(lo, hi) for _, lo, hi in cut],
                first_rank=int(bounds[q]),
                n=n,
                k=k,
                plan=plan,
                attrs=attrs,
                piece_starts=src.starts,
                cols=cols,
            )
        )
    vmeta = pd.DataFrame(
        {
            _ROW: np.array([], np.int64),
            **{a.column: np.array([], _release_dtype(a, src.meta)) for a in attrs},
            "__piece": np.array([], np.int64),
        }
    )
    released = dd.from_delayed(pieces, meta=vmeta, verify_meta=False)
    nparts = src.npartitions
    back = released.set_index("__piece", divisions=(*range(nparts), nparts - 1), sorted=False)
    per_piece = back.map_partitions(_piece_values, cols, meta=vmeta.drop(columns=["__piece"]))
    say(f"sorting {n:,} values in {P:,} range{'s' if P != 1 else ''}, releasing")
    return _persist_frame(per_piece, client)


def _release_bounds(order: _Order, n: int, k: int) -> np.ndarray:
    """The first ranks of the release's pieces of whole clusters: each range's first rank
    moved up to a cluster boundary (ties across range boundaries released whole), and n.
    """
    first = np.r_[0, np.cumsum(order.totals)].astype(np.int64)
    bounds = cluster_starts_at_or_after(first, n, k)
    bounds[0], bounds[-1] = 0, n
    return np.maximum.accumulate(bounds)


def _release_dtype(a: Attribute, meta: pd.DataFrame):
    return _out_dtype(a.grid) if a.grid is not None else meta[a.column].dtype


def _ranked_release(
    src: Source,
    plan,
    attrs: list[Attribute],
    prep,
    n: int,
    sample,
    budget: Budget,
    client,
    progress,
    final: int,
    scratch=None,
):
    """The release of a :class:`Ranked` or :class:`SingleOrder` plan in input order, by
    distributed sorts (see above): splitters from the validation pass's sample, one counting
    pass for every order, then one sort per attribute (ranked) or one for all (single order).
    Returns (release with record ids, number of ranges per sort, the scratch folder the
    release reads or None); the release's partitions hold at most ``final`` records
    (:func:`final_rows`).  ``scratch``: see :func:`dask_scratch.scratch_for`.
    """
    import dask
    from dask import delayed

    dd = _dd()
    cols = [a.column for a in attrs]
    p = attrs[0].params
    k = int(p["k"])
    row_bytes = _range_row_bytes(plan, cols)
    # a cluster (up to 2k - 1 records) is released by one task: it must fit a worker
    if not budget.fits(2 * max(k, 1), row_bytes):
        raise NotOnDask(
            f"k = {k:,}: a cluster of up to {2 * k - 1:,} records is released by one task, more than "
            f"workers of {_human(budget.worker)} hold ({budget.source}); give at least --memory-limit "
            f"{_human(Budget.minimum(2 * k, row_bytes))}, a smaller k, or use --engine memory."
        )
    nranges = max(1, int(np.ceil(n / _range_rows(plan, cols, budget))))
    rows = np.concatenate([ids for ids, _ in sample]) if sample else np.zeros(0, np.int64)
    X = np.concatenate([x for _, x in sample]) if sample else np.zeros((0, len(cols)))
    if isinstance(plan, SingleOrder):
        lb = np.array([prep.domains[c][0] for c in cols], dtype=np.float64)
        ub = np.array([prep.domains[c][1] for c in cols], dtype=np.float64)
        keyfn = partial(_plan_keys, sort_key=plan.sort_key, lb=lb, ub=ub, params=p)
        orders = [_Order(cols, keyfn, [], np.zeros(nranges, np.int64))]
        groups = [list(attrs)]
    else:
        orders = [_Order([c], _first_column, [], np.zeros(nranges, np.int64)) for c in cols]
        groups = [[a] for a in attrs]
    orders = [
        replace(o, splitters=_splitters(o.keys(X[:, [cols.index(c) for c in o.columns]], rows), nranges))
        for o in orders
    ]
    say = progress or (lambda _msg: None)
    say(f"counting the records of {nranges:,} range{'s' if nranges != 1 else ''}")
    counts = [delayed(_count_part)(x, orders) for x in src.frame(cols).to_delayed()]
    (totals,) = dask.compute(_tree(counts, _add_counts))
    orders = [replace(o, totals=np.asarray(t, dtype=np.int64)) for o, t in zip(orders, totals)]
    for o in orders:
        if int(o.totals.sum()) != n:  # pragma: no cover - the data changed under us
            raise InputError("The input changed while it was read (record counts differ); run again.")
    dtypes = {a.column: _release_dtype(a, src.meta) for a in attrs}
    if scratch is not False:
        S = _scratch()
        keep_types = [] if plan.noisy else [src.meta[a.column].dtype for a in attrs]
        m = max(len(o.columns) for o in orders)
        # the largest sort's bucket and sorted files, every value file (kept to the end), and
        # the final shuffle's (:func:`dask_scratch.shuffled`)
        rec = 8 * m + 8 + (8 if keep_types else 0)
        need = n * (2 * rec + sum(np.dtype(t).itemsize for t in dtypes.values()))
        need += S.shuffle_bytes(n, src.meta.dtypes)
        scratch = S.scratch_for(scratch, client, [*dtypes.values(), *keep_types], need, say)
    else:
        scratch = None
    done = []
    for j, (o, group) in enumerate(zip(orders, groups)):
        if isinstance(plan, SingleOrder):
            what = f"{len(cols)} attribute{'s' if len(cols) != 1 else ''} together:"
        else:
            what = f"attribute {j + 1} of {len(cols)} ({group[0].column}):"
        keep = [] if plan.noisy else [group[0].column]
        step = partial(_say_with, say, what)
        if scratch is not None:
            try:
                files = _scratch().sort(
                    src,
                    o,
                    plan,
                    group,
                    keep,
                    n=n,
                    k=k,
                    scratch=scratch,
                    dtypes=dtypes,
                    say=step,
                    tag=f"sort{j}",
                )
            except BaseException:  # a failed or cancelled run: its files go at once
                scratch.close()
                raise
            done.append(files)
            continue
        parts = _sorted_release(src, o, plan, group, keep, n=n, k=k, client=client, say=step)
        if len(parts) != src.npartitions:  # pragma: no cover - a Dask change would show here
            raise InputError(f"internal: {len(parts)} released pieces for {src.npartitions}; run again.")
        done.append(parts)
    full = src.frame()
    # the meta Dask gives the input (its string conversion included): every partition of the
    # release is cast to it, whatever the process that computed it (the app's in-process
    # workers and the command line's gave text columns two different string dtypes)
    meta = full._meta.astype(dtypes)
    # the kept pieces go in as direct arguments of small tasks: nested in lists inside the
    # assembling task's arguments, the final compute failed ('lost dependencies', dask 2026.8)
    # the final phase (this assembly and the shuffle into the in-memory engine's order) on
    # slices of the input partitions sized for its own records (final_rows): the input
    # partition and its released pieces are read once, each slice assembled by its own task
    assert src.lens is not None
    if scratch is not None:  # the released columns in the scratch folder's value files
        files = [f for group in done for f in group]
        starts = src.starts
        frames = [
            delayed(_scratch().assemble)(
                x, files, dtypes=dict(meta.dtypes), first=int(starts[i]), lo=lo, hi=hi
            )
            for i, x in enumerate(full.to_delayed())
            for lo, hi in _cuts(int(src.lens[i]), final)
        ]
    else:
        frames = [
            delayed(_assemble)(x, *[parts[i] for parts in done], dtypes=dict(meta.dtypes), lo=lo, hi=hi)
            for i, x in enumerate(full.to_delayed())
            for lo, hi in _cuts(int(src.lens[i]), final)
        ]
    return dd.from_delayed(frames, meta=meta, verify_meta=False), nranges, scratch


def _scratch():
    """:mod:`dask_scratch` (imported when a run needs it, not at this module's import: it
    imports this module).
    """
    from dpstudio.engine.backends import dask_scratch

    return dask_scratch


def _say_with(say, what: str, message: str) -> None:
    say(f"{what} {message}")


def _cuts(length: int, rows: int) -> list[tuple[int, int]]:
    """``length`` records cut into the fewest consecutive slices of at most ``rows``, of even
    sizes (one slice if empty).
    """
    if length <= 0:
        return [(0, 0)]
    k = -(-length // max(1, int(rows)))
    cut = [length * i // k for i in range(k + 1)]
    return list(zip(cut[:-1], cut[1:]))


# --------------------------------------------------------------------------- k-eps (OLA)


def _part_frequencies(part: pd.DataFrame, encode, keys: list[str]) -> pd.DataFrame:
    """One partition's frequency set: distinct code combinations and their record counts."""
    codes = pd.DataFrame(encode(part))
    return codes.groupby(keys, sort=False).size().reset_index(name="__n")


def _frequency_set(*parts: pd.DataFrame, limit: int | None = None, worker: int = 0) -> pd.DataFrame:
    """The merged frequency set of ``parts`` (each a frequency set of some partitions);
    refuses, in one line, a table of more than ``limit`` distinct combinations (it is merged
    in a task and searched by the method in this process: it must stay bounded, issue 25).
    """
    keys = [c for c in parts[0].columns if c != "__n"]
    both = pd.concat(parts, ignore_index=True)
    out = both.groupby(keys, sort=True)["__n"].sum().reset_index()
    if limit is not None and len(out) > limit:
        raise InputError(
            f"The key columns {', '.join(map(repr, keys))} have more than {limit:,} distinct "
            f"combinations; their frequency set does not fit workers of {_human(worker)}. "
            "Recode them to coarser values first, use fewer of them, or use --engine memory."
        )
    return out


def _frequency_part(part: pd.DataFrame, encode, keys, combos, keep, labels, sdtype) -> pd.DataFrame:
    """One partition of a frequency-set release: the key columns rewritten to their labels, the
    records of the combinations not kept removed (input order; the shuffle comes after).
    """
    codes = encode(part)
    if len(keys) == 1:
        pos = combos.get_indexer(pd.Index(codes[keys[0]]))
    else:
        pos = combos.get_indexer(pd.MultiIndex.from_arrays([codes[c] for c in keys], names=keys))
    if (pos < 0).any():  # pragma: no cover - the data changed between the two passes
        raise InputError("The input changed while it was being protected; run again.")
    rows = keep[pos]
    out = part.loc[rows].copy()
    for c in keys:
        if labels[c] is not None:
            out[c] = pd.Series(labels[c][codes[c][rows]], index=out.index, dtype=sdtype)
    return out


def _frequency_release(ddf, task, n, budget: Budget):
    """A :class:`FrequencySet` plan's release: one distributed group-by of the encoded key
    columns with counts, merged in a tree (no task holds more than 16 partial tables, none
    larger than the budget's rows: :func:`_frequency_set`); the method's ``choose`` on that
    table; then each partition rewritten.  Returns (release with record ids, private info,
    private warnings).
    """
    import dask
    from dask import delayed

    keys = list(task.columns)
    limit = budget.rows(8.0 * (len(keys) + 1))
    parts = [delayed(_part_frequencies)(x, task.encode, keys) for x in ddf[keys].to_delayed()]
    merge = partial(_frequency_set, limit=limit, worker=budget.worker)
    (freq,) = dask.compute(_tree(parts, merge) if len(parts) > 1 else delayed(merge)(*parts))
    choice = task.choose(freq)
    combos = pd.Index(freq[keys[0]]) if len(keys) == 1 else pd.MultiIndex.from_frame(freq[keys])
    # the generalised labels as strings (the dtype dask gives string columns; Parquet needs one)
    sdtype = next(
        (ddf._meta[c].dtype for c in keys if isinstance(ddf._meta[c].dtype, pd.StringDtype)), pd.StringDtype()
    )
    meta = ddf._meta.astype({c: sdtype for c in keys if choice.labels[c] is not None})
    out = ddf.map_partitions(
        _frequency_part, task.encode, keys, combos, choice.keep, choice.labels, sdtype, meta=meta
    )
    return out, dict(choice.info), list(choice.warnings)


# --------------------------------------------------------------------------- writing


def release_plan(out_dir: str | os.PathLike, *, input_path=None, plan=None):
    """The CHECKED write plan of :func:`write_release` (the release folder, which must not exist,
    and the private audit trail beside it); call it before any work and pass it on.
    """
    from dpstudio.engine.safe_write import WritePlan

    plan = plan if plan is not None else WritePlan()
    plan.add_input(input_path)
    out_dir = os.path.abspath(os.fspath(out_dir))
    plan.folder(out_dir, what="release folder", role="release:folder")
    plan.file(_private_path(out_dir), what="audit trail", private=True, role="release:private")
    return plan.check()


def _private_path(out_dir: str) -> str:
    return out_dir.rstrip(os.sep) + ".private.json"


def write_release(
    rel: DaskRelease,
    out_dir: str | os.PathLike,
    *,
    input_path=None,
    fmt: str = "parquet",
    progress: bool = False,
    plan=None,
) -> dict:
    """Write the release atomically through the one guarded writer: parts into a temporary
    folder next to ``out_dir``, renamed at the end (never over the input, never over an
    existing path); public metadata beside the parts, the private audit trail (0600) beside
    the folder.  ``plan``: the command's checked plan from :func:`release_plan`.
    """
    out_dir = os.path.abspath(os.fspath(out_dir))
    try:
        plan = release_plan(out_dir, input_path=input_path, plan=plan)
        _write(rel, out_dir, plan, partial(_fill, rel, fmt=fmt, progress=progress), input_path)
    finally:
        if isinstance(rel, DaskRelease):
            rel.finish()  # the end of the run: the workers' own settings back
    return {
        "release": out_dir,
        "metadata": os.path.join(out_dir, "metadata.json"),
        "private": _private_path(out_dir),
    }


def _fill(rel: DaskRelease, tmp: str, *, fmt: str, progress: bool) -> None:
    """The release's parts and its public metadata, written into the folder ``tmp``."""
    if fmt == "csv":
        task = rel.data.to_csv(os.path.join(tmp, "release.csv"), single_file=True, index=False, compute=False)
    else:
        # zero-padded part names: a reader lists them in name order, which is then the
        # release's order (part.10 would come before part.2)
        task = rel.data.to_parquet(
            os.path.join(tmp, "release"), write_index=False, compute=False, name_function=_part_name
        )
    if progress:
        _compute_with_progress(task)
    else:
        import dask

        dask.compute(task)
    meta = {
        "method": rel.method,
        "guarantee": rel.guarantee,
        "is_dp": rel.is_dp,
        "parameters": {
            k: v for k, v in rel.params.items() if not k.startswith("_") and k not in ("seed", "rng")
        },
        "protected_attributes": rel.protected_attributes,
        "public_warnings": rel.public_warnings,
        "backend": "dask",
        "columns": [str(c) for c in rel.data.columns],
    }
    from dpstudio.engine.safe_write import file_mode

    with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2, default=str)
    os.chmod(os.path.join(tmp, "metadata.json"), file_mode(False))


def _write(rel: DaskRelease, out_dir: str, plan, fill, input_path) -> None:
    private = _private_path(out_dir)
    trail = {
        "records": rel.n,
        "warnings": rel.warnings,
        "info": rel.info,
        "input": os.fspath(input_path) if input_path is not None else None,
    }
    text = json.dumps(trail, indent=2, default=str)
    with plan.transaction():
        plan.write_folder(out_dir, fill)
        plan.write_text(private, text)


def _part_name(i: int) -> str:
    return f"part.{i:06d}.parquet"


def _compute_with_progress(task) -> None:
    try:
        from distributed import default_client
        from distributed import progress as dprogress

        client = default_client()
    except (ImportError, ValueError):
        import dask
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            dask.compute(task)
        return
    fut = client.compute(task)
    dprogress(fut)
    fut.result()
