"""The controller: opening data, runs (protect, sweep), export, project files, crash recovery.

A QObject without widgets.  It reads everything from :class:`~dpstudio.app.state.AppState`
(the one source of truth), runs the engine through :mod:`dpstudio.app.compute` on its
:class:`~dpstudio.app.workers.TaskRunner` channels and reports back through signals that the
main window shows (status line, error dialogs, the sweep's curves).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from PySide6.QtCore import QObject, QTimer, Signal

from dpstudio import engine
from dpstudio.app import compute, io_adapter, large_file, project, subproc, turns
from dpstudio.app import settings as app_settings
from dpstudio.app.resources import adult_sample_path, sample_path
from dpstudio.app.state import AppState
from dpstudio.app.workers import TaskRunner
from dpstudio.engine.hierarchies.hierarchy import Hierarchy
from dpstudio.engine.recipe import Recipe
from dpstudio.engine.registry import get_method

#: files above this are read in a child process (issue 24 §5: typing a file's texts holds the
#: GIL for ~20 ms per 1 MB of CSV in one call, and the window waits for it; below, a thread is
#: quicker than handing the work over)
BIG_FILE_BYTES = 1024 * 1024
BIG_TABLE_CELLS = 2_000_000  # tables above this are protected in a child process

SEED_REUSE_WARNING = (
    "This pinned seed was already used for another exported release: the two "
    "releases share their noise, and comparing them can remove it. Unpin the "
    "seed (or press New) and protect again unless the releases are meant to "
    "be identical."
)


def release_digest(result: Any) -> str:
    """A short digest of a release's data (which releases were exported with a seed)."""
    h = pd.util.hash_pandas_object(result.data, index=False).to_numpy()
    cols = "\x1f".join(map(str, result.data.columns)).encode()
    return hashlib.sha256(cols + h.tobytes()).hexdigest()[:16]


def missing_folder_message(out_path: str) -> str:
    """The user's message when the folder ``out_path`` would be written into is missing or is
    a file ("" when it is a folder).  Folders are never created silently.
    """
    folder = Path(out_path).expanduser().absolute().parent
    if folder.is_dir():
        return ""
    if folder.exists():
        return f"{folder} is a file, not a folder. Choose an existing folder."
    return f"The folder {folder} does not exist. Choose an existing folder or create it first."


def _ask_shape(path: str, shape: dict) -> str | None:
    from dpstudio.app.widgets.csv_dialog import ask_implausible_shape

    return ask_implausible_shape(path, shape)


def missing_refused_message(st) -> str:
    """'' or, when the chosen method would refuse the missing values of its columns, one
    sentence in the app's words (issue 24 §4: it failed after 17 s on 200,000 rows, in the
    command line's words).
    """
    from dpstudio.engine.api import missing_refused
    from dpstudio.engine.registry import get_method

    mid = st.recipe.method
    if st.df is None or not mid:
        return ""
    roles = st.active_roles()
    # cached per table, roles, method and the drop setting: the Method tab asks on every
    # change of a parameter (34 ms on 200,000 × 6 on a loaded machine: isna of each column)
    # (the table held by a weak reference: the same object, never an id reused by another)
    import weakref

    key = (tuple(sorted(roles.items())), mid, bool((st.recipe.params or {}).get("drop_missing")))
    cached = getattr(st, "_missing_refused_cache", None)
    if cached is not None and cached[0]() is st.df and cached[1] == key:
        miss = cached[2]
    else:
        miss = missing_refused(st.df, mid, roles, st.recipe.params)
        st._missing_refused_cache = (weakref.ref(st.df), key, miss)
    if not miss:
        return ""
    cols = ", ".join(f"{c} ({n:,})" for c, n in miss.items())
    return (
        f"{get_method(mid).name} cannot use records with missing values, and these columns have "
        f"some: {cols}. Tick 'drop records with missing values' under Advanced parameters in the "
        "Method tab (those records are then left out of the release), fill the values in, or "
        "choose a method that keeps them (local suppression treats a missing key value as "
        "matching any value)."
    )


def prime_result_views(res, *, labelled: set, types: dict) -> None:
    """In the worker that made ``res``: what the Results and Release views read from the whole
    tables (the aligned original, changed cells, frequency tables, histograms), so that
    showing a result costs the GUI thread no pass over the records (issue 27.4).
    """
    from dpstudio.app.widgets import release_view, results_panel

    release_view.prime(res, labelled=labelled, types=types)
    results_panel.prime(res)


class Controller(QObject):
    """Runs, export, projects and recovery for one :class:`AppState`."""

    # --- Signals
    sig_status = Signal(str)
    """A one-line message for the status bar."""
    sig_error = Signal(str, str)
    """An error to show: message, details."""
    sig_loaded = Signal(str)
    """A data file finished loading (its path)."""
    sig_protected = Signal()
    """A Protect run finished and its result is in the state."""
    sig_sweep_started = Signal(list, bool, bool, str)
    """A sweep started: ε values, the method uses ε, noise-free baselines, method id."""
    sig_sweep_points = Signal(list)
    """A batch of SweepPoints arrived."""
    sig_sweep_finished = Signal(bool, str)
    """The sweep ended: cancelled, error message ('' when it completed)."""
    sig_sweep_invalid = Signal(str)
    """The sweep settings cannot be parsed (the message names the field)."""
    sig_sweep_stale = Signal(bool)
    """The plotted curves were (True) or are again (False) computed under other settings."""
    sig_seed_note = Signal(str)
    """A note about a loaded project's seed (e.g. weak); '' for none."""
    sig_exported = Signal(dict)
    """An export finished: kind -> path."""

    def __init__(self, state: AppState, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.load_runner = TaskRunner("load", self)
        self.sweep_runner = TaskRunner("sweep", self)
        self.run_runner = TaskRunner("run", self)
        self.export_runner = TaskRunner("export", self)
        self.runners = [self.load_runner, self.sweep_runner, self.run_runner, self.export_runner]
        for r in (self.load_runner, self.run_runner, self.export_runner):
            r.sig_error.connect(self._on_task_error)
        self.last_export: dict | None = None
        self.sweep_sig: tuple | None = None  # settings the plotted sweep was computed under
        self.result_sig: tuple | None = None  # settings the current result was made under
        self._stale = False
        #: set by the window: ``(path, sniffed) -> read options``, or None when the user
        #: cancels (the CSV preview dialog); without it the sniffed options are used
        self.confirm_csv: Callable[[str, dict], dict | None] | None = None
        #: ``(path, shape) -> 'open' | 'choose' | None``: asked (GUI thread) when a guessed
        #: separator would give an implausible number of columns, before any table is built;
        #: ``shape`` holds sep, encoding, n_columns, widths (tests replace it)
        self.ask_shape: Callable[[str, dict], str | None] = _ask_shape
        #: set by the window: the trade-off plots as PNGs for the assessment report
        self.curve_images: Callable[[], list] = lambda: []
        #: issue 12, files larger than memory (tests replace both): ``(path, info) -> bool``
        #: "work on a sample, protect on Dask?"; ``(input path) -> (release path, fmt) | None``
        self.ask_large: Callable[[str, dict], bool] = large_file.ask_sample_mode
        self.ask_release_path: Callable[[str], tuple[str, str] | None] = large_file.ask_release_path
        state.sig_recipe_changed.connect(self._check_stale)
        state.sig_roles_changed.connect(self._check_stale)
        # --- autosave to a recovery file (debounced)
        self.autosave_timer = QTimer(self)
        self.autosave_timer.setSingleShot(True)
        self.autosave_timer.setInterval(1500)
        self.autosave_timer.timeout.connect(self.autosave)
        for sig in (
            state.sig_roles_changed,
            state.sig_recipe_changed,
            state.sig_data_changed,
            state.sig_sweep_changed,
        ):
            sig.connect(self.autosave_timer.start)

    # ------------------------------------------------------------------ opening data
    def open_sample(self) -> bool:
        return self.open_file(str(sample_path()), confirm=False)

    def open_adult_sample(self) -> bool:
        """The Adult sample, with its bundled ARX hierarchies attached to every column (roles
        stay 'other': the user still chooses what to protect).
        """

        def attach() -> None:
            hdir = adult_sample_path().parent / "hierarchies"
            done = []
            for col in self.state.roles:
                hp = hdir / f"adult_hierarchy_{col}.csv"
                if hp.is_file():
                    try:
                        self.state.set_hierarchy(col, Hierarchy.read_arx(str(hp)), str(hp))
                        done.append(col)
                    except engine.DPStudioError:
                        pass
            self.sig_status.emit(
                f"Opened the Adult sample: {len(self.state.df):,} records; "
                f"ARX hierarchies attached to {len(done)} columns."
            )

        return self.open_file(str(adult_sample_path()), confirm=False, then=attach)

    def open_free1_sample(self) -> bool:
        """Open sdcMicro's free1 survey sample, with the roles of sdcMicro's reference (keys SEX,
        AGE, MARSTAT, KINDPERS, NUMYOUNG, NUMOLD, typed categorical; weight WEIGHT; EDUC1
        confidential).
        """
        from dpstudio.app.resources import FREE1_ROLES, free1_sample_path

        def preset() -> None:
            self.state.set_roles({c: r for c, r in FREE1_ROLES.items() if c in self.state.roles})
            for c, r in FREE1_ROLES.items():  # sdcMicro's key variables are categorical codes
                if r == "k-quasi" and c in self.state.roles:
                    self.state.set_type(c, "categorical")
            self.sig_status.emit(
                f"Opened the free1 survey sample: {len(self.state.df):,} "
                "records; key variables (typed categorical), weight and EDUC1 preset (see Risk)."
            )

        return self.open_file(str(free1_sample_path()), confirm=False, then=preset)

    def open_file(
        self,
        path: str,
        *,
        confirm: bool = True,
        options: dict | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        """Load ``path`` in the background (CSV: confirm delimiter etc. first).

        Nothing runs on the GUI thread but the dialogs: a CSV is sniffed in the load worker
        (an implausible guessed shape -- tens of thousands of columns -- is questioned before
        any table is built), then read in the worker.  Cancel (Esc) stops either step and
        keeps the data loaded before.
        """
        p = Path(path)
        if not p.is_file():
            self.sig_error.emit(f"File not found: {path}", "")
            return False
        opts = dict(options or {})
        if large_file.on_dask_format(p):  # issue 12: a file larger than memory
            threshold = app_settings.large_file_bytes()
            if large_file.offer_sample_mode(p, threshold):
                return self._open_large(p, threshold, then)
        if io_adapter.format_of(p) == "csv" and not opts:
            self.sig_status.emit(f"Reading {p.name}…")

            def sniff(progress, check_cancel):
                return io_adapter.sniff_for_open(str(p))

            def sniffed(info: dict) -> None:
                self._after_sniff(p, info, confirm, then)

            self.load_runner.start(
                sniff, finished=sniffed, cancelled=lambda: self.sig_status.emit("Opening cancelled.")
            )
            return True
        self._load(p, opts, then)
        return True

    def _open_large(self, p: Path, threshold: int, then: Callable[[], None] | None) -> bool:
        """Issue 12: offer a uniform sample for the views and the whole file on Dask."""
        n = app_settings.sample_rows()
        info = {"bytes": large_file.file_bytes(p), "threshold": threshold, "n_sample": n}
        if not self.ask_large(str(p), info):
            self.sig_status.emit("Opening cancelled; the current data is kept.")
            return False
        self.sig_status.emit(f"Drawing a {n:,}-record sample of {p.name}…")

        def work(progress, check_cancel):
            df, sample = large_file.read_sample(str(p), n, progress=progress, check_cancel=check_cancel)
            return df, sample, compute.column_stats(df)

        def done(out):
            df, sample, stats = out
            self.state.set_data(df, str(p), None, {}, stats=stats, sample_of=sample)
            app_settings.add_recent_file(str(p))
            self.sig_status.emit(f"Opened {p.name}: " + large_file.sample_label(sample))
            if then is not None:
                then()
            self.sig_loaded.emit(str(p))

        self.load_runner.start(
            work,
            finished=done,
            cancelled=lambda: self.sig_status.emit("Opening cancelled; the current data is kept."),
        )
        return True

    def _after_sniff(self, p: Path, info: dict, confirm: bool, then: Callable[[], None] | None) -> None:
        """GUI thread, after sniffing: question an implausible shape, confirm, then read."""
        shape = info.get("implausible")
        if shape is not None:
            answer = self.ask_shape(str(p), shape)
            if answer is None:
                self.sig_status.emit("Opening cancelled; the current data is kept.")
                return
            if answer == "open":  # the separator given explicitly: the reader accepts it
                self._load(p, {"sep": shape["sep"], "encoding": shape["encoding"]}, then)
                return
            # "choose": the dialog, preselecting the most plausible other separator
            info = {"sep": io_adapter.plausible_sep(shape), "encoding": shape["encoding"]}
        opts = {k: info.get(k) for k in ("sep", "encoding", "decimal")}
        if (confirm or shape is not None) and self.confirm_csv is not None:
            chosen = self.confirm_csv(str(p), info)
            if chosen is None:
                self.sig_status.emit("Opening cancelled; the current data is kept.")
                return
            opts = chosen
        self._load(p, opts, then)

    def _load(self, p: Path, opts: dict, then: Callable[[], None] | None) -> None:
        self.sig_status.emit(f"Opening {p.name}…")

        def work(progress, check_cancel):
            try:  # (here, not in the GUI thread: the file may be gone, or be a FIFO now)
                size = p.stat().st_size
            except FileNotFoundError:
                size = 0  # the reader says so in one line
            if size <= BIG_FILE_BYTES:  # small: a thread is quicker than handing it over
                out = compute.load_table(str(p), opts, check_cancel=check_cancel, progress=progress)
                subproc.prestart()  # a warm child for the sweeps and runs to come (issue 27.4)
                return out
            # in the warm child process: typing the texts holds the GIL (issue 24 §5)
            for sent in subproc.stream(
                "dpstudio.app.compute:load_table_to_send",
                (str(p), opts),
                check_cancel=check_cancel,
                progress=progress,
            ):
                return compute.table_received(sent)
            raise engine.InputError(f"{p.name}: nothing was read.")

        def done(out):
            df, meta, stats = out
            if len(df) == 0 or df.shape[1] == 0:
                # nothing to protect: keep the current table and its roles
                self.sig_status.emit(f"{p.name}: no records; nothing was opened.")
                self.sig_error.emit(
                    f"{p.name} holds no records (at most a header line), so "
                    "there is nothing to protect. The current data is kept.",
                    "",
                )
                return
            self.state.set_data(df, str(p), meta, opts, stats=stats)
            app_settings.add_recent_file(str(p))
            self.sig_status.emit(f"Opened {p.name}: {len(df):,} records × {df.shape[1]} columns.")
            if then is not None:
                then()
            self.sig_loaded.emit(str(p))

        self.load_runner.start(
            work,
            finished=done,
            cancelled=lambda: self.sig_status.emit("Opening cancelled; the current data is kept."),
        )

    # ------------------------------------------------------------------ running
    def settings_signature(self) -> tuple:
        """What a sweep's curves depend on besides k and ε: data, method, roles, types,
        domains, precision, hierarchies, the other parameters.  The report shows the curves
        only when the release was made under the same signature.
        """
        st = self.state
        params = {k: v for k, v in st.recipe.params.items() if k not in ("k", "epsilon")}
        return (
            st.path,
            id(st.df),
            st.recipe.method,
            tuple(sorted(st.active_roles().items())),
            tuple(sorted(st.types.items())),
            tuple(sorted(st.active_domains().items())),
            tuple(sorted(st.active_precision().items())),
            tuple(sorted((c, str(src)) for c, src in st.hierarchy_sources.items())),
            repr(sorted(params.items())),
        )

    def guard(self) -> bool:
        """Whether a run can start (else an error is reported)."""
        st = self.state
        if st.df is None:
            self.sig_error.emit("Open a data file first (Ctrl+O).", "")
            return False
        if not st.recipe.method:
            self.sig_error.emit("Choose a method first.", "")
            return False
        err = st.input_errors.get("seed")
        if err:
            self.sig_error.emit(err + " Correct the seed or press New next to it.", "")
            return False
        err = st.input_error()
        if err:
            self.sig_error.emit(err, "")
            return False
        return True

    def _engine_params(self, params: dict) -> dict:
        """The method's parameters plus the declared output precisions and column types."""
        prec = self.state.active_precision()
        out = {**params, "precision": prec} if prec else dict(params)
        if self.state.types:  # the user's column types (issue 10): numeric-only methods refuse
            out["types"] = dict(self.state.types)  # a categorical/ordinal quasi-identifier
        return out

    def run_sweep(self) -> bool:
        if not self.guard():
            return False
        st = self.state
        mid = st.recipe.method
        try:
            req = st.sweep_request()
        except ValueError as exc:
            self.sig_sweep_invalid.emit(str(exc))
            return False
        refused = missing_refused_message(st)
        if refused:  # before any work (issue 24 §4)
            self.sig_sweep_invalid.emit(refused)
            return False
        spec = get_method(mid)
        params = self._engine_params({k: v for k, v in st.recipe.params.items() if k not in ("k", "epsilon")})
        uses_eps, uses_k = bool(spec.uses_epsilon), bool(spec.uses_k)
        df, roles, domains = st.df, st.active_roles(), st.active_domains()
        hier = st.active_hierarchies()
        seed = st.run_seed()  # sweeps are never released; unpinned: a fresh one each time
        self.sig_sweep_started.emit(list(req["epsilons"]), uses_eps, uses_k, mid)
        self.sweep_sig = self.settings_signature()
        self._set_stale(False)
        self.sig_status.emit("Sweeping k × ε…")

        def work(progress, check_cancel):
            # in a child process: a worker thread would compete with the plots for the GIL
            yield from subproc.stream(
                "dpstudio.app.compute:sweep_points",
                (df, mid, roles, domains),
                # a grid axis the method does not have stays empty (else the engine would
                # pass that parameter to it)
                dict(
                    ks=req["ks"] if uses_k else [],
                    epsilons=req["epsilons"] if uses_eps else [],
                    repeats=req["repeats"],
                    seed=seed,
                    hierarchies=hier,
                    params=params,
                ),
                check_cancel=check_cancel,
                progress=progress,
            )

        def finished(_points):
            self.sig_sweep_finished.emit(False, "")

        def cancelled():
            self.sig_sweep_finished.emit(True, "")
            self.sig_status.emit("Sweep cancelled.")

        def errored(msg, _details):
            self.sig_sweep_finished.emit(False, msg)
            self.sig_status.emit("Sweep failed: " + msg.splitlines()[0][:120])

        self.sweep_runner.start(
            work,
            generator=True,
            yielded=self.sig_sweep_points.emit,
            finished=finished,
            cancelled=cancelled,
            errored=errored,
        )
        return True

    def run_protect(self) -> bool:
        if not self.guard():
            return False
        st = self.state
        if st.sample_of:  # issue 12: the whole file, on Dask, written where the user says
            return self.protect_on_dask()
        mid = st.recipe.method
        try:
            engine.check_applicable(st.df, mid, st.active_roles())
        except engine.DPStudioError as exc:
            self.sig_error.emit(str(exc), "")
            return False
        refused = missing_refused_message(st)
        if refused:  # before any work, in the app's words (issue 24 §4)
            self.sig_error.emit(refused, "")
            return False
        params = dict(st.recipe.params)
        df, roles, domains = st.df, st.active_roles(), st.active_domains()
        hier = st.active_hierarchies()
        pinned = st.recipe.seed_pinned
        seed = st.run_seed()  # unpinned: fresh OS entropy for every run (issue 8)
        run_params = self._engine_params(params)
        recipe = {
            "method": mid,
            "params": params,
            "seed": seed,
            "seed_pinned": pinned,
            "precision": dict(st.active_precision()),
        }
        run_sig = self.settings_signature()
        self.sig_status.emit("Protecting…")
        in_child = df.size > BIG_TABLE_CELLS

        labelled = set(getattr(st.input_meta, "value_labels", None) or {})
        types = dict(st.types)

        def work(progress, check_cancel):
            args = (df, mid, roles, domains, hier, seed, run_params)
            if not in_child:  # small: a thread is quicker than starting a process
                out = compute.protect_and_evaluate(*args, progress=progress, check_cancel=check_cancel)
            else:
                out = next(
                    subproc.stream(
                        "dpstudio.app.compute:protect_and_evaluate",
                        args,
                        check_cancel=check_cancel,
                        progress=progress,
                    ),
                    None,
                )
                if out is None:
                    raise engine.InputError("The protection produced no result.")
            check_cancel()
            prime_result_views(out[0], labelled=labelled, types=types)
            return out

        def done(out):
            res, ev = out
            # the window switches to the Results tab (layout and painting of a whole tab) in
            # a turn of its own, the first of the jobs the result's views queue (their header,
            # histogram, tables: dpstudio.app.turns); this turn fills the views
            turns.later(self.sig_protected.emit, owner=self, key="protected")
            st.record_run_seed(seed)  # the project records the seed of the current release
            st.set_result(res, ev, recipe)
            self.result_sig = run_sig
            self.sig_status.emit(
                f"Protected with {res.method_name}: {len(res.data):,} "
                "records. Inspect the results, then export (Ctrl+Shift+E)."
            )

        self.run_runner.start(
            work,
            finished=done,
            cancelled=lambda: self.sig_status.emit("Protection cancelled; nothing changed."),
        )
        return True

    def protect_on_dask(self, out_path: str | None = None, fmt: str = "parquet") -> bool:
        """Issue 12 (sample mode): protect the WHOLE file on Dask in the background and write
        the release at ``out_path`` (asked when None) as ``dpstudio protect --engine dask`` does.
        """
        if not self.guard():
            return False
        st = self.state
        mid = st.recipe.method
        why = st.applicability(mid)
        if why:
            self.sig_error.emit(why, "")
            return False
        if out_path is None:
            chosen = self.ask_release_path(str(st.path))
            if chosen is None:
                return False
            out_path, fmt = chosen
        if missing := missing_folder_message(out_path):  # as export: before the cluster starts
            self.sig_status.emit("Not protected: " + missing)
            self.sig_error.emit(missing, "")
            return False
        try:  # every file it writes, checked before the cluster starts (the one writer)
            io_adapter.release_plan(str(out_path), inputs=self.input_files(), dask=True)
        except engine.DPStudioError as exc:
            self.sig_error.emit(str(exc), "")
            return False
        params = dict(st.recipe.params)
        run_params = self._engine_params(params)
        # the declared types go with the run: they decide the default output precision (a
        # column declared integer: γ = 1), on the whole file as on the sample
        prec = run_params.pop("precision", None)
        seed = st.run_seed()
        args = (str(st.path), str(out_path), mid, st.active_roles(), st.active_domains())
        kw = dict(
            seed=seed,
            fmt=fmt,
            precision=prec,
            hierarchies=st.active_hierarchies(),
            params=run_params,
            scheduler=app_settings.dask_scheduler(),
            processes=app_settings.dask_processes(),
        )
        self.sig_status.emit(f"Protecting the whole of {Path(str(st.path)).name} on Dask…")

        def work(progress, check_cancel):
            try:
                return large_file.protect_whole_file(
                    *args, **kw, progress=progress, check_cancel=check_cancel
                )
            except (FileNotFoundError, NotADirectoryError, engine.InputError) as exc:
                # the folder went away after the check above (the OS or the writer says so):
                # the same one-line message
                if missing := missing_folder_message(str(out_path)):
                    raise engine.InputError(missing) from exc
                raise

        def done(out):
            st.record_run_seed(seed)
            st.set_dask_release(out)
            self.last_export = {k: out[k] for k in ("release", "metadata", "private")}
            self.sig_status.emit(
                f"Released {out['records']:,} records on Dask — public: {Path(out['release']).name} "
                f"· private, keep internal: {Path(out['private']).name}"
            )
            self.sig_exported.emit(dict(self.last_export))

        self.run_runner.start(
            work,
            finished=done,
            cancelled=lambda: self.sig_status.emit("Protection on Dask cancelled; nothing was written."),
        )
        return True

    def cancel_all(self) -> None:
        for r in self.runners:
            r.cancel()

    @property
    def busy(self) -> bool:
        return any(r.busy for r in self.runners)

    def _on_task_error(self, msg: str, details: str) -> None:
        self.sig_status.emit("Error: " + msg.splitlines()[0][:140])
        self.sig_error.emit(msg, details)

    def _set_stale(self, stale: bool) -> None:
        if stale != self._stale:
            self._stale = stale
            self.sig_sweep_stale.emit(stale)

    def _check_stale(self) -> None:
        """The plotted curves no longer match the settings (they stay visible)."""
        if self.sweep_sig is None or self.sweep_runner.busy:
            return
        self._set_stale(self.sweep_sig != self.settings_signature())

    # ------------------------------------------------------------------ export
    def export(
        self,
        out_path: str,
        *,
        fmt: str | None = None,
        release_note: bool = True,
        assessment: bool = False,
        audit: bool = True,
    ) -> bool:
        """Write the release (in the background).

        Public: the release, ``<stem>.metadata.json`` and, if ``release_note``, the release
        note.  Private (0600): the audit trail ``<stem>.private.json`` (``audit``) and, if
        ``assessment``, ``<stem>.assessment.private.html`` with the measures against the
        original and the trade-off curves (rendered here).
        """
        st = self.state
        if st.sample_of:  # issue 12: the release of the whole file is written on Dask
            return self.protect_on_dask(out_path, "csv" if (fmt or "").lower() == "csv" else "parquet")
        res = st.result
        if res is None:
            self.sig_error.emit("Nothing to export yet: press Protect (Ctrl+R) first.", "")
            return False
        if missing := missing_folder_message(out_path):  # not the OS's "[Errno 2] …"
            self.sig_status.emit("Not exported: " + missing)
            self.sig_error.emit(missing, "")
            return False
        try:  # every file of the export, checked before any work (the one guarded writer)
            plan = io_adapter.release_plan(
                out_path,
                inputs=self.input_files(),
                fmt=fmt,
                release_note=release_note,
                assessment=assessment,
                audit=audit,
            )
        except engine.DPStudioError as exc:
            self.sig_status.emit("Not exported: " + str(exc).splitlines()[0][:140])
            self.sig_error.emit(str(exc), "")
            return False
        html_text = None
        if assessment:
            measures = {k: v for k, v in (st.evaluation or {}).items() if k != "_app"}
            # only curves computed under the release's settings (same method, roles, domains,
            # hierarchies, other parameters): others would misdescribe the release
            same = self.sweep_sig is not None and self.sweep_sig == self.result_sig
            curves = self.curve_images() if same else []
            p = res.params
            chosen = {"k": p.get("k"), "epsilon": p.get("epsilon")}
            html_text = io_adapter.render_assessment(
                res,
                measures,
                curves=curves,
                input_name=Path(st.path).name if st.path else None,
                chosen=chosen,
            )
        input_path, input_meta = st.path, st.input_meta
        rr = st.result_recipe or {}
        reused = (
            bool(rr.get("seed_pinned"))
            and rr.get("seed") == st.recipe.seed
            and st.note_export(release_digest(res))
        )

        def work(progress, check_cancel):
            try:
                return io_adapter.export_release(
                    res,
                    out_path,
                    input_path=input_path,
                    fmt=fmt,
                    input_meta=input_meta,
                    release_note=release_note,
                    assessment_html=html_text,
                    audit=audit,
                    plan=plan,
                )
            except (FileNotFoundError, NotADirectoryError, engine.InputError) as exc:
                # the folder went away after the check above (the OS or the writer says so):
                # the same one-line message
                if missing := missing_folder_message(out_path):
                    raise engine.InputError(missing) from exc
                raise

        def done(paths):
            from dpstudio.engine.export import is_public_kind

            self.last_export = dict(paths)
            pub = ", ".join(Path(v).name for k, v in paths.items() if is_public_kind(k))
            priv = ", ".join(Path(v).name for k, v in paths.items() if not is_public_kind(k))
            self.sig_status.emit(
                ("⚠ " + SEED_REUSE_WARNING + " " if reused else "")
                + f"Exported — public: {pub}"
                + (f" · private, keep internal: {priv}" if priv else "")
            )
            self.sig_exported.emit(dict(paths))

        if reused:
            self.sig_error.emit(SEED_REUSE_WARNING, "")
        self.sig_status.emit(f"Writing {Path(out_path).name}…")
        self.export_runner.start(work, finished=done)
        return True

    # ------------------------------------------------------------------ project
    def input_files(self) -> list[str]:
        """The files the current project reads (data, hierarchy files): never written over."""
        return project.inputs_of(self.state.recipe, self.state.path)

    def save_project_to(self, path: str) -> bool:
        try:
            project.save(path, self.state.recipe, protect=self.input_files())
        except (OSError, engine.DPStudioError) as exc:
            self.sig_error.emit(f"Cannot save the project: {exc}", "")
            return False
        self.state.project_path = str(path)
        self.state.mark_dirty(False)
        self.sig_status.emit(f"Project saved: {Path(path).name} (private: it holds the seed).")
        return True

    def open_project(self, path: str, *, recovered: bool = False) -> bool:
        try:
            rec = project.load(path)
        except engine.DPStudioError as exc:
            self.sig_error.emit(str(exc), "")
            return False
        return self.apply_project(rec, project_path=None if recovered else path)

    def apply_project(self, rec: Recipe, project_path: str | None = None) -> bool:
        """Open the recipe's data file, then apply the recipe to the state."""
        fpath = rec.input_path
        if not fpath or not Path(fpath).is_file():
            self.sig_error.emit(
                f"The project's data file is missing: {fpath}. Move it back or "
                "open the data and set the roles again.",
                "",
            )
            return False

        def then():
            self.apply_recipe(rec)
            self.state.project_path = project_path
            self.state.mark_dirty(project_path is None)

        return self.open_file(fpath, confirm=False, options=rec.read_options or None, then=then)

    def apply_recipe(self, rec: Recipe) -> None:
        """Roles, types, domains, precision, hierarchies, method, parameters, seed and sweep
        settings of ``rec`` into the state (for the loaded table).
        """
        # the one generator the roles panel offers ("Generate"), so a project reproduces it
        from dpstudio.app.widgets.roles_panel import generate_hierarchy

        st = self.state
        cols = set(st.roles)
        unknown = [c for c in rec.roles if c not in cols]
        for c, kind in rec.types.items():
            if c in cols:
                try:
                    st.set_type(c, kind)
                except (engine.DPStudioError, ValueError) as exc:
                    self.sig_error.emit(f"Type of {c!r}: {exc}", "")
        st.set_roles({c: r for c, r in rec.roles.items() if c in cols})
        for c, b in rec.domains.items():
            if c in cols:
                st.set_domain(c, b)
        for c, g in rec.precision.items():
            if c in cols:
                st.set_precision(c, g)
        for c, src in rec.hierarchies.items():
            if c not in cols:
                continue
            try:
                if src.get("path"):
                    st.set_hierarchy(c, Hierarchy.read_arx(src["path"]), src["path"])
                elif src.get("generated"):
                    st.set_hierarchy(c, generate_hierarchy(st.df[c], c), {"generated": True})
            except engine.DPStudioError as exc:
                self.sig_error.emit(f"Hierarchy of {c!r}: {exc}", "")
        known = {m["id"] for m in engine.methods()}
        if rec.method and rec.method not in known:
            self.sig_error.emit(
                f"The project uses method {rec.method!r}, which this version of dpstudio does not have.", ""
            )
        elif rec.method:
            st.set_method(
                rec.method,
                {**st.recipe.params, **rec.params} if rec.method == st.recipe.method else dict(rec.params),
            )
        if rec.seed is None:
            st.new_seed()
        else:
            st.set_seed(rec.seed, pinned=rec.seed_pinned)
        st.recipe.seed_releases = list(rec.seed_releases)
        st.recipe.extra = dict(rec.extra)
        st.set_step_list(st.step_list())  # the Method tab's step list (issue 23 §2)
        st.sig_query_ledger_changed.emit()  # the query desk's ledger (issue 14)
        note = project.seed_note(st.recipe.seed if rec.seed is not None else None)
        self.sig_seed_note.emit(note)
        if note:
            self.sig_status.emit("⚠ " + note)
        st.set_sweep(**{k: v for k, v in rec.sweep.items() if v})
        if unknown:
            self.sig_error.emit("Column(s) of the project not in the data: " + ", ".join(unknown), "")

    def autosave(self) -> None:
        if self.state.df is None or not self.state.dirty or not self.state.active_roles():
            return  # nothing worth recovering yet
        try:
            project.save(app_settings.recovery_path(), self.state.recipe, protect=self.input_files())
        except (OSError, engine.DPStudioError):
            pass

    def recovery(self) -> Recipe | None:
        """The recovery file's recipe (a bad file is removed), or None."""
        rp = app_settings.recovery_path()
        if not rp.exists():
            return None
        try:
            return project.load(rp)
        except engine.DPStudioError:
            rp.unlink(missing_ok=True)
            return None

    def discard_recovery(self) -> None:
        app_settings.recovery_path().unlink(missing_ok=True)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every task and wait for the pool threads (no half state left)."""
        self.autosave_timer.stop()
        self.cancel_all()
        for r in self.runners:
            r.wait(timeout)
