"""The command line in a child process set up first (a resource limit, threads refused, ...),
and the CSVs of random whole numbers such tests read (test_thread_refused_27,
test_dask_memory_hostile)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def cli_script(setup: str) -> str:
    """A ``python -c`` program: ``setup`` (it reads its own arguments from ``sys.argv[1:]``),
    then ``dpstudio`` with the arguments after ``--``."""
    return f"import sys\n{setup}\nfrom dpstudio.cli import main\nsys.exit(main(sys.argv[sys.argv.index('--') + 1 :]))\n"


def run_cli(script: str, setup_args, cli_args, *, timeout: int, env=None) -> subprocess.CompletedProcess:
    """Run ``script`` (:func:`cli_script`) with ``setup_args``, ``--`` and ``cli_args`` from the
    repository's root (dpstudio on ``PYTHONPATH``; ``env``: more variables)."""
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, setup_args), "--", *map(str, cli_args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def random_ints(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two columns of ``n`` random whole numbers: in [0, 10⁵) and in [0, 100)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 10**5, n), rng.integers(0, 100, n)


def write_int_csv(path: Path, header: list[str], *columns) -> Path:
    """A CSV of whole numbers: the ``header`` line, then a line per record, fields joined by
    commas (an ``int`` among ``columns``: that number on every line)."""
    n = max(len(c) for c in columns if not isinstance(c, int))
    fields = [itertools.repeat(str(c), n) if isinstance(c, int) else map(str, c.tolist()) for c in columns]
    with open(path, "w") as fh:
        fh.write(",".join(header) + "\n")
        fh.writelines(",".join(row) + "\n" for row in zip(*fields))
    return path
