"""Files larger than memory (issue 12): work on a uniform sample, release the whole file on Dask.

Opening a Parquet or CSV file larger than :func:`dpstudio.app.settings.large_file_bytes`
(default: a quarter of the available memory) offers this mode.  The preview, roles, types
and sweeps then work on a uniform random sample of ``N`` records (default 200,000, all of them
when the file is smaller) drawn without loading the file: the partitions' lengths are counted
lazily with ``dask.dataframe``, ``N`` global record positions are drawn without replacement
from a seed of OS entropy (recorded in ``AppState.sample_of`` so the sample can be drawn again;
the seed never reaches a public file), and each partition is read once to take its chosen rows.

Protect (and Export) then run the chosen method on the WHOLE file with the engine's Dask
backend (:func:`dpstudio.engine.backends.dask_backend.protect_dask`, the function behind
``dpstudio protect ... --engine dask``) on a ``distributed.LocalCluster`` started in the worker
and closed after (or on the scheduler named in the settings), and write the release as the CLI
does (:func:`~dpstudio.engine.backends.dask_backend.write_release`: a folder of Parquet parts or
one CSV, atomically, never over the input, public metadata, a private 0600 audit trail).

Everything here but the two dialogs is Qt-free and runs in a worker thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstudio import engine
from dpstudio.engine import io as engine_io
from dpstudio.engine.random import fresh_seed

#: file formats the Dask backend reads lazily
DASK_FORMATS = ("parquet", "csv")


# --------------------------------------------------------------------------- the question


def file_bytes(path: str | Path) -> int:
    """The size of a file, or of all the files in a folder (a Parquet data set)."""
    p = Path(path)
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return p.stat().st_size


def on_dask_format(path: str | Path) -> bool:
    """Whether the Dask backend reads ``path`` lazily (Parquet or comma-separated CSV)."""
    try:
        return engine_io.file_format(path) in DASK_FORMATS
    except Exception:  # noqa: BLE001 - unknown extension
        return False


def offer_sample_mode(path: str | Path, threshold: int) -> bool:
    """A readable-on-Dask file above ``threshold`` bytes."""
    return on_dask_format(path) and file_bytes(path) > threshold


def human_bytes(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"  # pragma: no cover


def question_text(path: str | Path, nbytes: int, threshold: int, n_sample: int) -> str:
    return (
        f"This file ({Path(path).name}, {human_bytes(nbytes)}) is larger than a quarter of the "
        f"memory available ({human_bytes(threshold)}, the large-file threshold).\n\n"
        f"Work on a uniform sample of {n_sample:,} records (the preview, roles and trade-off "
        "curves) and protect the whole file on Dask in the background?"
    )


def ask_sample_mode(path: str, info: dict) -> bool:
    """GUI thread: "Work on a sample … / Cancel" (tests replace ``Controller.ask_large``)."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    box = QMessageBox(QApplication.activeWindow())
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Large file")
    box.setText(question_text(path, info["bytes"], info["threshold"], info["n_sample"]))
    ok = box.addButton(
        f"Work on a {info['n_sample']:,}-record sample, protect on Dask", QMessageBox.ButtonRole.AcceptRole
    )
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(ok)
    box.exec()
    return box.clickedButton() is ok


def ask_release_path(input_path: str) -> tuple[str, str] | None:
    """GUI thread: where the whole-file release goes -- a new folder of Parquet parts or one CSV
    file (tests replace ``Controller.ask_release_path``).  None: cancelled.
    """
    from PySide6.QtWidgets import QApplication, QFileDialog

    p = Path(input_path)
    default = str(p.with_name(p.stem + "-protected"))
    path, flt = QFileDialog.getSaveFileName(
        QApplication.activeWindow(),
        "Release of the whole file (written on Dask)",
        default,
        "Folder of Parquet parts (*);;One CSV file (*.csv)",
    )
    if not path:
        return None
    return path, ("csv" if "CSV" in flt or path.lower().endswith(".csv") else "parquet")


# --------------------------------------------------------------------------- the sample


def _dask_read(path: str):
    from dpstudio.engine.backends import dask_backend as DB

    return DB.read_lazy(path)


def read_sample(
    path: str,
    n: int,
    *,
    seed: int | None = None,
    progress: Callable[[float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """A uniform random sample (without replacement) of ``min(n, records)`` records of ``path``,
    in file order, read lazily: one pass counts the partitions' lengths (Parquet: the footers),
    then each partition holding chosen records is read once.  Never more than one partition
    and the sample in memory.

    Returns the sample (text columns in pandas' default text dtype, as the in-memory reader
    gives them) and
    ``{"path", "bytes", "n_total", "n_sample", "seed"}``; ``seed`` (OS entropy unless given)
    redraws the same sample and is private.
    """
    import dask

    progress = progress or (lambda f: None)
    check_cancel = check_cancel or (lambda: None)
    seed = fresh_seed() if seed is None else int(seed)
    ddf = _dask_read(path)
    with dask.config.set(scheduler="threads"):
        lens = np.asarray(ddf.map_partitions(len).compute(), dtype=np.int64)
    check_cancel()
    progress(0.1)
    total = int(lens.sum())
    if total == 0:
        raise engine.InputError(f"{Path(path).name} holds no records; there is nothing to protect.")
    m = min(int(n), total)
    pos = np.sort(np.random.default_rng(seed).choice(total, size=m, replace=False))
    bounds = np.r_[0, np.cumsum(lens)]
    parts = []
    todo = [i for i in range(len(lens)) if lens[i]]
    for j, i in enumerate(todo):
        check_cancel()
        lo, hi = np.searchsorted(pos, [bounds[i], bounds[i + 1]])
        if hi > lo:
            part = ddf.get_partition(i).compute(scheduler="sync")
            parts.append(part.iloc[pos[lo:hi] - bounds[i]])
        progress(0.1 + 0.9 * (j + 1) / len(todo))
    df = pd.concat(parts, ignore_index=True) if parts else ddf._meta.copy()
    df = df.rename(columns={c: str(c) for c in df.columns})
    # dask reads text as strings with pd.NA; the app's reader gives pandas' default text dtype
    text = pd.Series(["x"]).dtype
    for c in df.columns:
        if isinstance(df[c].dtype, pd.StringDtype) and df[c].dtype != text:
            df[c] = df[c].astype(text)
    info = {"path": str(path), "bytes": file_bytes(path), "n_total": total, "n_sample": m, "seed": seed}
    return df, info


def sample_label(info: dict | None) -> str:
    """The one sentence every view shows in sample mode ('' otherwise)."""
    if not info:
        return ""
    if info["n_sample"] >= info["n_total"]:
        return (
            f"Curves from all {info['n_total']:,} records of a large file "
            f"({human_bytes(info['bytes'])}); Protect runs on Dask."
        )
    return (
        f"Curves from a {info['n_sample']:,}-record sample of {info['n_total']:,} records "
        f"({human_bytes(info['bytes'])}); Protect runs on the whole file on Dask."
    )


def dask_refusal(method: str | None, params: dict | None = None) -> str:
    """The engine's reason why ``method`` does not run on Dask ('' when it does)."""
    if not method:
        return ""
    from dpstudio.engine.backends import dask_backend as DB

    try:
        DB.check_runs_on_dask(method, params or {})
    except engine.DPStudioError as exc:
        return str(exc).replace("--engine memory", "a file that fits in memory")
    return ""


# --------------------------------------------------------------------------- the whole-file run


@contextlib.contextmanager
def dask_client(scheduler: str = "", *, processes: bool = True, n_workers: int = 2) -> Iterator[Any]:
    """A ``distributed.Client`` on ``scheduler``, else on a LocalCluster started and closed here."""
    try:
        from distributed import Client
    except ImportError:
        raise engine.InputError(
            "Large files are protected on Dask, an optional extra: pip install 'dpstudio[scale]'."
        ) from None
    from dpstudio.engine.backends.dask_backend import local_cluster

    stack = contextlib.ExitStack()  # the LocalCluster started here, closed after the client
    if scheduler:
        client = Client(scheduler, set_as_default=False)
    else:
        cluster = stack.enter_context(
            local_cluster(
                n_workers=n_workers if processes else 1,
                threads_per_worker=1 if processes else 2,
                processes=processes,
                dashboard_address=":0",  # any free port: 8787 may be taken
            )
        )
        client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()
        with contextlib.suppress(Exception):
            stack.close()


def _scheduler_fraction(dask_scheduler=None) -> tuple[int, int]:  # runs on the scheduler
    done = total = 0
    for tg in dask_scheduler.task_groups.values():
        st = tg.states
        total += sum(st.values())
        done += st.get("memory", 0) + st.get("released", 0) + st.get("forgotten", 0)
    return done, total


class _Watch:
    """A thread beside the run: turns a cancel request into closing the client (the blocked
    computation then raises and the worker reports 'cancelled') and reports the scheduler's
    share of finished tasks as progress within the current phase.
    """

    def __init__(self, client, check_cancel, progress) -> None:
        self.client, self.check_cancel, self.progress = client, check_cancel, progress
        self.lo, self.hi, self.best = 0.0, 0.0, 0.0
        self.cancelled = False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name="dpstudio-dask-watch", daemon=True)

    def phase(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi
        self.best = max(self.best, lo)
        self.progress(self.best)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.check_cancel()
            except engine.Cancelled:
                self.cancelled = True
                with contextlib.suppress(Exception):
                    self.client.close()
                return
            if self.hi > self.lo:
                with contextlib.suppress(Exception):
                    done, total = self.client.run_on_scheduler(_scheduler_fraction)
                    if total:
                        f = self.lo + (self.hi - self.lo) * done / total
                        if f > self.best:
                            self.best = f
                            self.progress(f)

    def __enter__(self) -> _Watch:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(2.0)


def protect_whole_file(
    input_path: str,
    out_path: str,
    method: str,
    roles: dict,
    domains: dict,
    *,
    seed: int,
    fmt: str = "parquet",
    precision: dict | None = None,
    hierarchies: dict | None = None,
    params: dict | None = None,
    scheduler: str = "",
    processes: bool = True,
    progress: Callable[[float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> dict:
    """Protect the whole of ``input_path`` on Dask and write the release at ``out_path`` (as
    ``dpstudio protect ... --engine dask``).  Returns the written paths plus ``guarantee``,
    ``records``, ``method`` and ``public_warnings`` for the Results view.
    """
    import dask

    from dpstudio.engine.backends import dask_backend as DB

    progress = progress or (lambda f: None)
    check_cancel = check_cancel or (lambda: None)
    DB.check_runs_on_dask(method, params or {})
    # every file it writes, checked before any work (the one guarded writer)
    plan = DB.release_plan(out_path, input_path=input_path)
    check_cancel()
    with dask_client(scheduler, processes=processes) as client, _Watch(client, check_cancel, progress) as w:
        # every computation goes to this client only: once it is closed (cancel), a computation
        # fails instead of falling back to a local scheduler
        with dask.config.set(scheduler=client.get):
            w.phase(0.02, 0.2)  # validation: one pass over the file
            rel = DB.protect_dask(
                input_path,
                method,
                roles,
                domains,
                seed=seed,
                precision=precision or None,
                client=client,
                hierarchies=hierarchies or None,
                **(params or {}),
            )
            check_cancel()
            w.phase(0.2, 0.99)  # the release: computed and written
            written = DB.write_release(rel, out_path, input_path=input_path, fmt=fmt, plan=plan)
    if w.cancelled:  # pragma: no cover - the close makes the computation fail first
        raise engine.Cancelled()
    check_cancel()
    progress(1.0)
    return {
        **written,
        "guarantee": rel.guarantee,
        "records": rel.n,
        "method": rel.method,
        "public_warnings": list(rel.public_warnings),
        # the run's private notes (facts about the data, e.g. a k-quasi wiped to '*'): shown
        # on the operator's screen only, as the in-memory run's notes are
        "private_notes": [w for w in rel.warnings if w not in set(rel.public_warnings)],
        "format": fmt,
    }


# --------------------------------------------------------------------------- the label


def release_text(release: dict | None) -> str:
    """Results in sample mode: what the last whole-file Dask run wrote (HTML)."""
    if not release:
        return "No release of the whole file yet: press Protect (Ctrl+R) to write one on Dask."
    from html import escape

    warns = "".join(f"<br>⚠ {escape(w)}" for w in release.get("public_warnings", []))
    warns += "".join(
        f"<br><span style='color:#8a4b00'>Private note (keep internal): {escape(w)}</span>"
        for w in release.get("private_notes", [])
    )
    return (
        f"<b>Released {release['records']:,} records on Dask</b> ({escape(release['method'])}) — "
        f"public: {escape(release['release'])}; private, keep internal: "
        f"{escape(release['private'])}.<br><i>Guarantee:</i> {escape(release['guarantee'])}{warns}"
        "<br><span style='color:#666'>Measures of the whole release: "
        "<tt>dpstudio evaluate --engine dask</tt>.</span>"
    )


def add_sample_label(state: Any, layout: Any, where: str) -> Any:
    """Put the sample-mode label into ``layout`` of a panel (``where``: ``data``, ``explore``
    or ``results``); hidden unless ``state.sample_of`` is set.  Returns the QLabel.
    """
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    from dpstudio.app.widgets.common import BANNER_STYLES

    lab = QLabel()
    lab.setObjectName(f"sample_label_{where}")
    lab.setWordWrap(True)
    lab.setTextFormat(Qt.TextFormat.RichText)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    lab.setStyleSheet(BANNER_STYLES["info"] + "border-radius:3px; padding:4px 6px;")
    layout.addWidget(lab)

    def refresh() -> None:
        info = state.sample_of
        if not info:
            lab.hide()
            return
        from html import escape

        text = f"<b>{escape(sample_label(info))}</b>"
        if where == "data":
            text += (
                "<br>The table, roles, types and sweeps use this uniform random sample (drawn "
                "without loading the file); the header's record count is the sample's."
            )
        if where == "results":
            text += "<br>" + release_text(state.dask_release)
        lab.setText(text)
        lab.show()

    state.sig_data_changed.connect(refresh)
    if where == "results":
        state.sig_dask_release_changed.connect(refresh)
    refresh()
    return lab
