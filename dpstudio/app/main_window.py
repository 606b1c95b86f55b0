"""The main window: menus, shortcuts, the four workflow tabs, the task bar with Cancel.

Panels observe :class:`~dpstudio.app.state.AppState`; long work goes through
:class:`~dpstudio.app.workers.TaskRunner` (one per channel: load, sweep, run, export).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QIcon, QKeySequence
from PySide6.QtWidgets import (QDialog, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QProgressBar, QPushButton, QScrollArea, QSplitter, QTabWidget)

from dpstudio import __version__, engine
from dpstudio.app import compute, io_adapter, project, subproc
from dpstudio.app import settings as app_settings
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import show_error
from dpstudio.app.widgets.csv_dialog import CsvPreviewDialog
from dpstudio.app.widgets.data_panel import DataPanel
from dpstudio.app.widgets.explore_panel import ExplorePanel
from dpstudio.app.widgets.export_dialog import ExportDialog
from dpstudio.app.widgets.method_panel import MethodPanel
from dpstudio.app.widgets.results_panel import ResultsPanel
from dpstudio.app.widgets.roles_panel import RolesPanel, generate_hierarchy
from dpstudio.app.workers import TaskRunner
from dpstudio.engine.hierarchies.hierarchy import Hierarchy

TAB_DATA, TAB_ROLES, TAB_METHOD, TAB_RESULTS = range(4)
BIG_FILE_BYTES = 16 * 1024 * 1024  # files above this are read in a child process
BIG_TABLE_CELLS = 2_000_000  # tables above this are protected in a child process


def resources_dir() -> Path:
    import dpstudio

    return Path(dpstudio.__file__).resolve().parent.parent / "resources"


def sample_path() -> Path:
    return resources_dir() / "census.csv"


def adult_sample_path() -> Path:
    return resources_dir() / "adult" / "adult.csv"


class MainWindow(QMainWindow):
    sig_loaded = Signal(str)
    """A data file finished loading (its path)."""

    def __init__(self, offer_recovery: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("dpstudio")
        icon = resources_dir() / "icon.png"
        if icon.exists():
            self.setWindowIcon(QIcon(str(icon)))
        self.setAcceptDrops(True)
        self.state = AppState(self)
        self.load_runner = TaskRunner("load", self)
        self.sweep_runner = TaskRunner("sweep", self)
        self.run_runner = TaskRunner("run", self)
        self.export_runner = TaskRunner("export", self)
        self.runners = [self.load_runner, self.sweep_runner, self.run_runner, self.export_runner]
        self._pending_project: dict | None = None
        self._last_export: dict | None = None
        self._sweep_sig: tuple | None = None  # settings the plotted sweep was computed under
        self._result_sig: tuple | None = None  # settings the current result was made under

        # --- panels
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.data_panel = DataPanel(self.state)
        self.roles_panel = RolesPanel(self.state)
        self.method_panel = MethodPanel(self.state)
        self.explore_panel = ExplorePanel(self.state)
        self.results_panel = ResultsPanel(self.state)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.method_panel)
        scroll.setMinimumWidth(330)
        self.method_splitter = QSplitter(Qt.Orientation.Horizontal)
        self.method_splitter.setObjectName("method_splitter")
        self.method_splitter.addWidget(scroll)
        self.method_splitter.addWidget(self.explore_panel)
        self.method_splitter.setStretchFactor(0, 0)
        self.method_splitter.setStretchFactor(1, 1)
        self.method_splitter.setSizes([420, 940])
        self.tabs.addTab(self.data_panel, "1 · Data")
        self.tabs.addTab(self.roles_panel, "2 · Attributes")
        self.tabs.addTab(self.method_splitter, "3 · Method && trade-offs")
        self.tabs.addTab(self.results_panel, "4 · Results && export")
        for i, tip in enumerate(["Open a file and look at it (Ctrl+1)",
                                 "Give each attribute a role and a domain (Ctrl+2)",
                                 "Choose the method, explore k and ε (Ctrl+3)",
                                 "Inspect the protected data and export it (Ctrl+4)"]):
            self.tabs.setTabToolTip(i, tip)
        self.setCentralWidget(self.tabs)

        # --- status bar: progress + Cancel always visible
        sb = self.statusBar()
        self.task_label = QLabel("Ready")
        self.task_label.setObjectName("task_label")
        self.progress = QProgressBar()
        self.progress.setObjectName("task_progress")
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(260)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p %")
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setObjectName("cancel_button")
        self.cancel_btn.setToolTip("Stop the running task (Esc). Nothing is changed by a "
                                   "cancelled task.")
        self.cancel_btn.setEnabled(False)
        self.cancel_btn.clicked.connect(self.cancel_all)
        sb.addWidget(self.task_label, 1)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_btn)
        for r in self.runners:
            r.sig_busy_changed.connect(self._on_runner_busy)
            r.sig_progress.connect(self._on_runner_progress)
        for r in (self.load_runner, self.run_runner, self.export_runner):
            r.sig_error.connect(self._on_task_error)

        self._make_actions()
        # --- wiring
        self.data_panel.sig_open_requested.connect(self.open_dialog)
        self.data_panel.sig_sample_requested.connect(self.open_sample)
        self.method_panel.sig_protect_requested.connect(self.run_protect)
        self.explore_panel.sig_sweep_requested.connect(self.run_sweep)
        self.explore_panel.sig_point_chosen.connect(self._on_point_chosen)
        self.results_panel.export_btn.clicked.connect(self.export_dialog)
        self.state.sig_recipe_changed.connect(self._on_state_recipe_changed)
        self.state.sig_recipe_changed.connect(self._mark_stale_sweep)
        self.state.sig_roles_changed.connect(self._mark_stale_sweep)
        self.state.sig_dirty_changed.connect(lambda _d: self._update_title())
        self.state.sig_data_changed.connect(self._update_title)
        self.state.sig_result_changed.connect(self._update_actions)
        # --- autosave to a recovery file (debounced)
        self.autosave_timer = QTimer(self)
        self.autosave_timer.setSingleShot(True)
        self.autosave_timer.setInterval(1500)
        self.autosave_timer.timeout.connect(self.autosave)
        for sig in (self.state.sig_roles_changed, self.state.sig_recipe_changed,
                    self.state.sig_data_changed):
            sig.connect(self.autosave_timer.start)

        self._fit_to_screen()
        self._restore_ui()
        self._update_actions()
        if offer_recovery:
            QTimer.singleShot(0, self._offer_recovery)

    # ------------------------------------------------------------------ actions
    def _make_actions(self) -> None:
        mb = self.menuBar()
        fm = mb.addMenu("&File")

        def act(menu, text, slot, shortcut=None, tip=""):
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.setStatusTip(tip)
            a.setToolTip(tip)
            a.triggered.connect(slot)
            menu.addAction(a)
            return a

        self.act_open = act(fm, "&Open data…", self.open_dialog, QKeySequence.StandardKey.Open,
                            "Open CSV, Excel, Parquet, Stata or SPSS data")
        self.act_sample = act(fm, "Open &sample (Census)", self.open_sample, "Ctrl+Shift+M",
                              "The bundled CASC Census sample")
        self.act_sample_adult = act(fm, "Open sample (&Adult)", self.open_adult_sample, None,
                                    "The bundled UCI Adult sample (ARX extract, 30,162 records); "
                                    "its ARX hierarchies are in resources/adult/hierarchies")
        self.recent_menu = fm.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        fm.addSeparator()
        self.act_open_project = act(fm, "Open &project…", self.open_project_dialog,
                                    "Ctrl+Shift+O", "Open a saved project (.dpsproj)")
        self.act_save_project = act(fm, "Save project", self.save_project, "Ctrl+S",
                                    "Save roles, domains, method, parameters and seed")
        act(fm, "Save project &as…", self.save_project_as, "Ctrl+Shift+S")
        fm.addSeparator()
        self.act_export = act(fm, "&Export protected file…", self.export_dialog, "Ctrl+Shift+E",
                              "Write the release and its public metadata / release note, and the "
                              "private audit trail / assessment")
        fm.addSeparator()
        act(fm, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        rm = mb.addMenu("&Run")
        self.act_sweep = act(rm, "Run trade-off &sweep", self.run_sweep, "Ctrl+E",
                             "Sweep k × ε and draw the curves")
        self.act_protect = act(rm, "&Protect", self.run_protect, "Ctrl+R",
                               "Run the method with the chosen parameters")
        self.act_cancel = act(rm, "&Cancel", self.cancel_all, "Esc", "Stop the running task")
        vm = mb.addMenu("&View")
        for i, name in enumerate(["Data", "Attributes", "Method && trade-offs",
                                  "Results && export"]):
            act(vm, f"&{i + 1} {name}", lambda _=False, i=i: self.tabs.setCurrentIndex(i),
                f"Ctrl+{i + 1}")
        hm = mb.addMenu("&Help")
        act(hm, "&About dpstudio", self._about)

    def _update_actions(self) -> None:
        has = self.state.df is not None
        self.act_sweep.setEnabled(has)
        self.act_protect.setEnabled(has)
        self.act_export.setEnabled(self.state.result is not None)

    def _update_title(self) -> None:
        name = Path(self.state.path).name if self.state.path else "no data"
        proj = f" — {Path(self.state.project_path).name}" if self.state.project_path else ""
        self.setWindowTitle(f"dpstudio {__version__} — {name}{proj}"
                            + (" *" if self.state.dirty else ""))
        self._update_actions()

    def _about(self) -> None:
        QMessageBox.about(self, "About dpstudio",
                          f"<b>dpstudio {__version__}</b><p>Protect microdata before release: "
                          "k-anonymity by microaggregation, differential privacy, and their "
                          "combinations, with live risk–utility curves.</p>")

    # ------------------------------------------------------------------ opening data
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open data", app_settings.last_folder(),
                                              io_adapter.open_filter())
        if path:
            self.open_file(path)

    def open_sample(self) -> None:
        self.open_file(str(sample_path()), confirm=False)

    def open_adult_sample(self) -> None:
        """The Adult sample, with its bundled ARX hierarchies attached to every column (roles
        stay 'other': the user still chooses what to protect)."""
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
            self.task_label.setText(f"Opened the Adult sample: {len(self.state.df):,} records; "
                                    f"ARX hierarchies attached to {len(done)} columns.")

        self.open_file(str(adult_sample_path()), confirm=False, then=attach)

    def open_file(self, path: str, *, confirm: bool = True, options: dict | None = None,
                  then: Callable[[], None] | None = None) -> bool:
        """Load ``path`` in the background (CSV: confirm delimiter etc. first)."""
        p = Path(path)
        if not p.is_file():
            show_error(self, f"File not found: {path}")
            return False
        opts = dict(options or {})
        if io_adapter.format_of(p) == "csv" and not opts:
            try:
                sniffed = io_adapter.sniff_csv(str(p))
            except engine.DPStudioError as exc:
                show_error(self, str(exc))
                return False
            except Exception as exc:  # noqa: BLE001
                show_error(self, f"Cannot read {p.name}: {exc}")
                return False
            opts = {k: sniffed.get(k) for k in ("sep", "encoding", "decimal")}
            if confirm:
                dlg = CsvPreviewDialog(str(p), sniffed, self)
                if dlg.exec() != QDialog.DialogCode.Accepted:
                    return False
                opts = dlg.options()
        self.task_label.setText(f"Opening {p.name}…")

        in_child = p.stat().st_size > BIG_FILE_BYTES

        def work(progress, check_cancel):
            if not in_child:  # small: a thread is quicker than starting a process
                return compute.load_table(str(p), opts, check_cancel=check_cancel,
                                          progress=progress)
            # big: in a child process (the CSV parser holds the GIL for seconds)
            for out in subproc.stream("dpstudio.app.compute:load_table", (str(p), opts),
                                      check_cancel=check_cancel, progress=progress):
                return out
            raise engine.InputError(f"{p.name}: nothing was read.")

        def done(out):
            df, meta, stats = out
            if len(df) == 0 or df.shape[1] == 0:
                # nothing to protect: keep the current table and its roles
                self.task_label.setText(f"{p.name}: no records; nothing was opened.")
                show_error(self, f"{p.name} holds no records (at most a header line), so there "
                                 "is nothing to protect. The current data is kept.")
                return
            self.state.set_data(df, str(p), meta, opts, stats=stats)
            app_settings.add_recent_file(str(p))
            self.task_label.setText(f"Opened {p.name}: {len(df):,} records × {df.shape[1]} "
                                    "columns.")
            if then is not None:
                then()
            else:
                self.tabs.setCurrentIndex(TAB_DATA if self.tabs.currentIndex() == TAB_DATA
                                          else self.tabs.currentIndex())
            self.sig_loaded.emit(str(p))

        self.load_runner.start(work, finished=done,
                               cancelled=lambda: self.task_label.setText("Opening cancelled."))
        return True

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = app_settings.recent_files()
        if not files:
            a = self.recent_menu.addAction("(none)")
            a.setEnabled(False)
        for f in files:
            self.recent_menu.addAction(f, lambda f=f: self.open_file(f))

    def dragEnterEvent(self, ev) -> None:  # noqa: N802 - Qt API
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:  # noqa: N802 - Qt API
        urls = [u.toLocalFile() for u in ev.mimeData().urls() if u.isLocalFile()]
        if urls:
            if urls[0].endswith(project.SUFFIX):
                self.open_project(urls[0])
            else:
                self.open_file(urls[0])

    # ------------------------------------------------------------------ running
    def _settings_signature(self) -> tuple:
        """What a sweep's curves depend on besides k and ε: data, method, roles, types,
        domains, hierarchies, the other parameters.  The report shows the curves only when
        the release was made under the same signature."""
        st = self.state
        params = {k: v for k, v in self.method_panel.values().items()
                  if k not in ("k", "epsilon")}
        return (st.path, id(st.df), self.method_panel.current_method(),
                tuple(sorted(st.active_roles().items())), tuple(sorted(st.types.items())),
                tuple(sorted(st.active_domains().items())),
                tuple(sorted((c, str(src)) for c, src in st.hierarchy_sources.items())),
                repr(sorted(params.items())))

    def _guard(self) -> bool:
        if self.state.df is None:
            show_error(self, "Open a data file first (Ctrl+O).")
            return False
        if not self.method_panel.current_method():
            show_error(self, "Choose a method first.")
            return False
        err = self.method_panel.seed_error()
        if err:
            show_error(self, err + " Correct the seed or press New next to it.")
            return False
        return True

    def run_sweep(self) -> bool:
        if not self._guard():
            return False
        st = self.state
        mid = self.method_panel.current_method()
        try:
            req = self.explore_panel.request()
        except ValueError as exc:
            self.explore_panel.banner.show_message(str(exc), "error")
            return False
        m = self.method_panel.method_info(mid)
        params = {k: v for k, v in self.method_panel.values().items()
                  if k not in ("k", "epsilon")}
        uses_eps, uses_k = bool(m.get("uses_epsilon")), bool(m.get("uses_k"))
        df, roles, domains = st.df, st.active_roles(), st.active_domains()
        hier, seed = st.active_hierarchies(), st.recipe.seed
        self.explore_panel.begin(req["epsilons"], uses_eps, baselines=uses_k, method=mid)
        self._sweep_sig = self._settings_signature()
        self.tabs.setCurrentIndex(TAB_METHOD)
        self.task_label.setText("Sweeping k × ε…")

        def work(progress, check_cancel):
            # in a child process: a worker thread would compete with the plots for the GIL
            yield from subproc.stream(
                "dpstudio.app.compute:sweep_points", (df, mid, roles, domains),
                # a grid axis the method does not have stays empty (else the engine would
                # pass that parameter to it)
                dict(ks=req["ks"] if uses_k else [],
                     epsilons=req["epsilons"] if uses_eps else [], repeats=req["repeats"],
                     seed=seed, hierarchies=hier, params=params),
                check_cancel=check_cancel, progress=progress)

        def finished(points):
            self.explore_panel.finish()
            ep = self.explore_panel
            self.task_label.setText(f"Sweep done: {len(ep.points)} points"
                                    + (f" ({len(ep.skipped)} left out: the method cannot run "
                                       "there)." if ep.skipped else "."))

        def cancelled():
            self.explore_panel.finish(cancelled=True)
            self.task_label.setText("Sweep cancelled.")

        def errored(msg, details):
            self.explore_panel.finish(error=msg)
            self.task_label.setText("Sweep failed: " + msg.splitlines()[0][:120])

        self.sweep_runner.start(work, generator=True, yielded=self.explore_panel.add_points,
                                finished=finished, cancelled=cancelled, errored=errored)
        return True

    def run_protect(self) -> bool:
        if not self._guard():
            return False
        st = self.state
        mid = self.method_panel.current_method()
        reason = ""
        try:
            engine.check_applicable(st.df, mid, st.active_roles())
        except engine.DPStudioError as exc:
            reason = str(exc)
        if reason:
            show_error(self, reason)
            return False
        params = self.method_panel.values()
        df, roles, domains = st.df, st.active_roles(), st.active_domains()
        hier, seed = st.active_hierarchies(), st.recipe.seed
        recipe = {"method": mid, "params": dict(params), "seed": seed}
        run_sig = self._settings_signature()
        self.task_label.setText("Protecting…")

        in_child = df.size > BIG_TABLE_CELLS

        def work(progress, check_cancel):
            args = (df, mid, roles, domains, hier, seed, params)
            if not in_child:  # small: a thread is quicker than starting a process
                return compute.protect_and_evaluate(*args, progress=progress,
                                                    check_cancel=check_cancel)
            for out in subproc.stream("dpstudio.app.compute:protect_and_evaluate", args,
                                      check_cancel=check_cancel, progress=progress):
                return out
            raise engine.InputError("The protection produced no result.")

        def done(out):
            res, ev = out
            self.state.set_result(res, ev, recipe)
            self._result_sig = run_sig
            self.task_label.setText(f"Protected with {res.method_name}: {len(res.data):,} "
                                    "records. Inspect the results, then export (Ctrl+Shift+E).")
            self.tabs.setCurrentIndex(TAB_RESULTS)

        self.run_runner.start(work, finished=done,
                              cancelled=lambda: self.task_label.setText("Protection cancelled; "
                                                                        "nothing changed."))
        return True

    def cancel_all(self) -> None:
        for r in self.runners:
            r.cancel()

    def _on_runner_busy(self, _busy: bool) -> None:
        busy = any(r.busy for r in self.runners)
        self.cancel_btn.setEnabled(busy)
        if not busy:
            self.progress.setValue(0)

    def _on_runner_progress(self, f: float) -> None:
        self.progress.setValue(int(f * 1000))

    def _on_task_error(self, msg: str, details: str) -> None:
        self.task_label.setText("Error: " + msg.splitlines()[0][:140])
        show_error(self, msg, details)

    def _on_point_chosen(self, k, eps) -> None:
        self.method_panel.set_k_epsilon(k, eps)
        if eps is None and self.method_panel.method_info().get("uses_epsilon"):
            self.task_label.setText(f"k = {k} set. That point is the noise-free baseline (not "
                                    "differentially private); ε is unchanged.")
        else:
            self.task_label.setText(f"k = {k}" + (f", ε = {eps:g}" if eps is not None else "")
                                    + " set in the method form. Protect with Ctrl+R.")

    def _mark_stale_sweep(self) -> None:
        """Say so when the plotted curves no longer match the settings (they stay visible)."""
        ep = self.explore_panel
        if not ep.points or self._sweep_sig is None or self.sweep_runner.busy:
            return
        stale = self._sweep_sig != self._settings_signature()
        note = ("⚠ The settings changed since this sweep: the curves show the earlier "
                "settings. Run the sweep again (Ctrl+E).")
        if stale and not ep.status.text().startswith("⚠"):
            self._status_before_stale = ep.status.text()
            ep.status.setText(note)
            ep.status.setStyleSheet("color:#8a5a00;")
        elif not stale and ep.status.text().startswith("⚠"):
            ep.status.setText(getattr(self, "_status_before_stale", ""))
            ep.status.setStyleSheet("")

    def _on_state_recipe_changed(self) -> None:
        p = self.state.recipe.params
        self.explore_panel.set_chosen(p.get("k"), p.get("epsilon"), self.state.recipe.method)

    # ------------------------------------------------------------------ export
    def export_dialog(self) -> None:
        res = self.state.result
        if res is None:
            show_error(self, "Nothing to export yet: press Protect (Ctrl+R) first.")
            return
        dlg = ExportDialog(res, self.state.path, self, roles=self.state.roles)
        if dlg.exec() != QDialog.DialogCode.Accepted:
            return
        o = dlg.options()
        self.export(o["path"], fmt=o["fmt"], release_note=o["release_note"],
                    assessment=o["assessment"], audit=o["audit"])

    def export(self, out_path: str, *, fmt: str | None = None, release_note: bool = True,
               assessment: bool = False, audit: bool = True) -> bool:
        """Write the release (in the background).

        Public: the release, ``<stem>.metadata.json`` and, if ``release_note``, the release
        note.  Private (0600): the audit trail ``<stem>.private.json`` (``audit``) and, if
        ``assessment``, ``<stem>.assessment.private.html`` with the measures against the
        original and the trade-off curves (rendered here)."""
        st = self.state
        res = st.result
        if res is None:
            return False
        if st.path and (Path(out_path).resolve() == Path(st.path).resolve()
                        or io_adapter.same_file(out_path, st.path)):
            show_error(self, "The protected file cannot overwrite the input file.")
            return False
        html_text = None
        if assessment:
            measures = {k: v for k, v in (st.evaluation or {}).items() if k != "_app"}
            # only curves computed under the release's settings (same method, roles, domains,
            # hierarchies, other parameters): others would misdescribe the release
            same = (self._sweep_sig is not None and self._sweep_sig == self._result_sig)
            curves = (self.explore_panel.export_images()
                      if self.explore_panel.points and same else [])
            p = res.params
            chosen = {"k": p.get("k"), "epsilon": p.get("epsilon")}
            html_text = io_adapter.render_assessment(
                res, measures, curves=curves, input_name=Path(st.path).name if st.path else None,
                chosen=chosen)
        input_path, input_meta = st.path, st.input_meta

        def work(progress, check_cancel):
            return io_adapter.export_release(res, out_path, input_path=input_path, fmt=fmt,
                                             input_meta=input_meta, release_note=release_note,
                                             assessment_html=html_text, audit=audit)

        def done(paths):
            from dpstudio.engine.export import is_public_kind

            self._last_export = dict(paths)
            pub = ", ".join(Path(v).name for k, v in paths.items() if is_public_kind(k))
            priv = ", ".join(Path(v).name for k, v in paths.items() if not is_public_kind(k))
            self.task_label.setText(f"Exported — public: {pub}"
                                    + (f" · private, keep internal: {priv}" if priv else ""))

        self.task_label.setText(f"Writing {Path(out_path).name}…")
        self.export_runner.start(work, finished=done)
        return True

    # ------------------------------------------------------------------ project
    def project_dict(self) -> dict:
        ep = self.explore_panel
        sweep = {"ks": ep.ks.text(), "epsilons": ep.eps.text(), "repeats": ep.repeats.value()}
        return project.to_dict(self.state, sweep)

    def save_project(self) -> bool:
        if not self.state.project_path:
            return self.save_project_as()
        return self.save_project_to(self.state.project_path)

    def save_project_as(self) -> bool:
        start = app_settings.last_folder()
        if self.state.path:
            start = str(Path(self.state.path).with_suffix(project.SUFFIX))
        path, _ = QFileDialog.getSaveFileName(self, "Save project", start,
                                              f"dpstudio project (*{project.SUFFIX})")
        if not path:
            return False
        if not path.endswith(project.SUFFIX):
            path += project.SUFFIX
        return self.save_project_to(path)

    def save_project_to(self, path: str) -> bool:
        try:
            project.save(path, self.project_dict())
        except OSError as exc:
            show_error(self, f"Cannot save the project: {exc}")
            return False
        self.state.project_path = str(path)
        self.state.mark_dirty(False)
        self._update_title()
        self.task_label.setText(f"Project saved: {Path(path).name} (private: it holds the seed).")
        return True

    def open_project_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open project", app_settings.last_folder(),
                                              f"dpstudio project (*{project.SUFFIX});;"
                                              "All files (*)")
        if path:
            self.open_project(path)

    def open_project(self, path: str, *, recovered: bool = False) -> bool:
        try:
            data = project.load(path)
        except engine.DPStudioError as exc:
            show_error(self, str(exc))
            return False
        return self.apply_project(data, project_path=None if recovered else path)

    def apply_project(self, data: dict, project_path: str | None = None) -> bool:
        inp = data.get("input") or {}
        fpath = inp.get("path")
        if not fpath or not Path(fpath).is_file():
            show_error(self, f"The project's data file is missing: {fpath}. Move it back or "
                             "open the data and set the roles again.")
            return False

        def then():
            self._apply_recipe(data)
            self.state.project_path = project_path
            self.state.mark_dirty(project_path is None)
            self._update_title()

        return self.open_file(fpath, confirm=False, options=inp.get("read_options") or None,
                              then=then)

    def _apply_recipe(self, data: dict) -> None:
        st = self.state
        cols = set(st.roles)
        unknown = [c for c in data.get("roles", {}) if c not in cols]
        for c, kind in (data.get("types") or {}).items():
            if c in cols:
                try:
                    st.set_type(c, kind)
                except (engine.DPStudioError, ValueError) as exc:
                    show_error(self, f"Type of {c!r}: {exc}")
        st.set_roles({c: r for c, r in data.get("roles", {}).items() if c in cols})
        for c, b in (data.get("domains") or {}).items():
            if c in cols:
                st.domains[c] = (float(b[0]), float(b[1]))
        for c, src in (data.get("hierarchies") or {}).items():
            if c not in cols:
                continue
            try:
                if isinstance(src, dict) and src.get("path"):
                    st.set_hierarchy(c, Hierarchy.read_arx(src["path"]), src["path"])
                elif isinstance(src, dict) and src.get("generated"):
                    st.set_hierarchy(c, generate_hierarchy(st.df[c], c), {"generated": True})
            except engine.DPStudioError as exc:
                show_error(self, f"Hierarchy of {c!r}: {exc}")
        st.sig_roles_changed.emit()
        method = data.get("method")
        if method and not self.method_panel.select_method(method):
            show_error(self, f"The project uses method {method!r}, which this version of "
                             "dpstudio does not have.")
        self.method_panel.set_values(data.get("params") or {})
        seed = data.get("seed")  # an int after project.migrate (None: not in the file)
        if seed is None:
            st.new_seed()
        else:
            st.set_seed(seed)
        note = project.seed_note(st.recipe.seed)
        self.method_panel.set_seed_note(note)
        if note:
            self.task_label.setText("⚠ " + note)
        sw = data.get("sweep") or {}
        ep = self.explore_panel
        if sw.get("ks"):
            ep.ks.setText(str(sw["ks"]))
        if sw.get("epsilons"):
            ep.eps.setText(str(sw["epsilons"]))
        if sw.get("repeats"):
            ep.repeats.setValue(int(sw["repeats"]))
        if unknown:
            show_error(self, "Column(s) of the project not in the data: " + ", ".join(unknown))

    def autosave(self) -> None:
        if self.state.df is None or not self.state.dirty or not self.state.active_roles():
            return  # nothing worth recovering yet
        try:
            project.save(app_settings.recovery_path(), self.project_dict())
        except OSError:
            pass

    def _offer_recovery(self) -> None:
        rp = app_settings.recovery_path()
        if not rp.exists():
            return
        try:
            data = project.load(rp)
        except engine.DPStudioError:
            rp.unlink(missing_ok=True)
            return
        name = Path((data.get("input") or {}).get("path") or "?").name
        ans = QMessageBox.question(
            self, "Recover unsaved work?",
            f"dpstudio was not closed normally. Recover the unsaved settings for {name} "
            f"(method {data.get('method')}, {len(data.get('roles', {}))} roles)?")
        if ans == QMessageBox.StandardButton.Yes:
            self.apply_project(data, project_path=None)
        else:
            rp.unlink(missing_ok=True)

    # ------------------------------------------------------------------ window state
    def _restore_ui(self) -> None:
        s = app_settings.settings()
        g = s.value("geometry")
        if isinstance(g, QByteArray) and not g.isEmpty():
            self.restoreGeometry(g)
        for sp in self._splitters():
            v = s.value(f"splitter/{sp.objectName()}")
            if isinstance(v, QByteArray) and not v.isEmpty():
                sp.restoreState(v)

    def _fit_to_screen(self) -> None:
        """1366 × 740 (made for 1366 × 768 screens), or less on a smaller screen."""
        screen = QGuiApplication.primaryScreen()
        w, h = 1366, 740
        if screen is not None:
            avail = screen.availableGeometry()
            w, h = min(w, avail.width()), min(h, max(avail.height() - 30, 400))
        self.resize(w, h)

    def _splitters(self) -> list[QSplitter]:
        return [self.method_splitter, self.roles_panel.splitter, self.explore_panel.splitter,
                self.results_panel.splitter]

    def save_ui(self) -> None:
        s = app_settings.settings()
        s.setValue("geometry", self.saveGeometry())
        for sp in self._splitters():
            s.setValue(f"splitter/{sp.objectName()}", sp.saveState())
        s.sync()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every task and wait for the pool threads (no half state left)."""
        self.autosave_timer.stop()
        self.cancel_all()
        for r in self.runners:
            r.wait(timeout)

    def closeEvent(self, ev) -> None:  # noqa: N802 - Qt API
        if self.state.dirty and self.state.df is not None and self.state.project_path:
            ans = QMessageBox.question(
                self, "Save project?", "Save the changes to the project before closing?",
                QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                | QMessageBox.StandardButton.Cancel)
            if ans == QMessageBox.StandardButton.Cancel:
                ev.ignore()
                return
            if ans == QMessageBox.StandardButton.Save and not self.save_project():
                ev.ignore()
                return
        self.save_ui()
        self.shutdown()
        app_settings.recovery_path().unlink(missing_ok=True)
        ev.accept()
