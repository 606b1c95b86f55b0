"""The Dask options of ``protect`` and ``evaluate`` (--engine, --scheduler, --workers,
--memory-limit): their argparse types, their help, and the client a command runs on.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distributed import Client

#: Smallest --memory-limit of a local Dask worker.  Measured (issue 21): a worker holds about
#: 130 MB once dpstudio's modules are imported and about 200 MB protecting even a 3,000-record
#: input; Dask pauses a worker at 80 % of its limit, so at 256 MB it paused for good (the run
#: hung) and at 1 kB it was restarted forever; 320 MB was the least that finished.  512 MB
#: leaves room for the partitions themselves.
MIN_WORKER_MEMORY = 512 * 2**20
#: Most local Dask workers (--workers).
MAX_WORKERS = 1024
#: Seconds to wait for the --scheduler before giving up with one line.
SCHEDULER_TIMEOUT = 10


def workers_arg(text: str) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS` (argparse type)."""
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"the number of local workers must be a whole number from 1 to {MAX_WORKERS:,}; got {text!r}"
        )
    return n


def memory_limit_arg(text: str) -> int | str:
    """``--memory-limit``: 'auto' or a size dask reads (2GB, 512MiB) of at least
    :data:`MIN_WORKER_MEMORY` (argparse type).
    """
    t = str(text).strip()
    if t.lower() == "auto":
        return "auto"
    try:
        from dask.utils import parse_bytes
    except ImportError:  # the --engine dask check says what to install
        return t
    try:
        n = parse_bytes(t)
    except (ValueError, TypeError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a memory size; write e.g. 2GB, 512MB or auto"
        ) from None
    if n < MIN_WORKER_MEMORY:
        raise argparse.ArgumentTypeError(
            f"{text} is less than the {MIN_WORKER_MEMORY // 2**20} MB a Dask worker needs (it "
            "holds about 200 MB before any data; below that it is paused or restarted forever)"
        )
    return int(n)


_SCHEDULER = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})/?$")


def scheduler_arg(text: str) -> str:
    """``--scheduler``: the address of a running Dask scheduler, tcp://HOST:PORT (argparse type)."""
    t = str(text).strip()
    m = _SCHEDULER.match(t)
    if not m or not 1 <= int(m.group(1)) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a scheduler address; write tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786)"
        )
    return t


def add_dask_options(p: argparse.ArgumentParser, engine_help: str) -> None:
    """--engine, --scheduler, --workers, --memory-limit (protect and evaluate)."""
    p.add_argument("--engine", choices=("memory", "dask"), default="memory", help=engine_help)
    p.add_argument(
        "--scheduler",
        metavar="tcp://HOST:8786",
        type=scheduler_arg,
        help="with --engine dask: an existing Dask scheduler (default: a local cluster)",
    )
    p.add_argument(
        "--workers", type=workers_arg, help="with --engine dask: local workers, 1 or more (default 2)"
    )
    p.add_argument(
        "--memory-limit",
        metavar="2GB",
        type=memory_limit_arg,
        help="with --engine dask: per local worker, at least 512MB (default auto)",
    )


@contextlib.contextmanager
def dask_client(args: argparse.Namespace) -> Iterator[Client]:
    """A Dask client: on ``--scheduler`` if given, else on a LocalCluster started and stopped
    here (its workers' logs silenced: a worker's traceback is never printed; the error
    itself reaches this process and is reported in one line).
    """
    import logging

    from dpstudio.engine.backends import dask_backend as DB
    from dpstudio.engine.errors import InputError

    try:
        from distributed import Client
    except ImportError:
        raise DB.NotOnDask(
            "--engine dask needs the optional extra: pip install 'dpstudio[scale]' (or use --engine memory)."
        ) from None
    stack = contextlib.ExitStack()  # the LocalCluster started here, closed after the client
    if args.scheduler:
        try:
            client = Client(args.scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"--scheduler {args.scheduler}: cannot connect within {SCHEDULER_TIMEOUT} s ({msg}); "
                "check the address, or leave --scheduler out to start a local cluster."
            ) from None
    else:
        cluster = stack.enter_context(
            DB.local_cluster(
                n_workers=args.workers or 2,
                threads_per_worker=1,
                memory_limit=args.memory_limit or "auto",
                # any free port: with None the scheduler's HTTP server still tries 8787 and warns
                # "Port 8787 is already in use" when another cluster holds it (a second line)
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        )
        client = Client(cluster)
    try:
        yield client
    except Exception as exc:
        if type(exc).__name__ == "KilledWorker":  # distributed.KilledWorker (optional dependency)
            raise InputError(
                "the Dask workers died repeatedly on this task (most often: out of memory); "
                "give them more memory (--memory-limit), more workers, or smaller input parts."
            ) from None
        raise
    finally:
        client.close()
        stack.close()
