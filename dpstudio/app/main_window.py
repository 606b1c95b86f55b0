"""The main window: menus, shortcuts, the four workflow tabs, the task bar with Cancel.

Only layout and wiring.  Panels write to :class:`~dpstudio.app.state.AppState` and observe
it; opening data, runs, export, project files and crash recovery are the
:class:`~dpstudio.app.controller.Controller`'s, whose signals are shown here.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from dpstudio import __version__
from dpstudio.app import io_adapter, project, subproc, turns
from dpstudio.app import settings as app_settings
from dpstudio.app.controller import Controller
from dpstudio.app.resources import adult_sample_path, resources_dir, sample_path  # noqa: F401
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import show_error
from dpstudio.app.widgets.csv_dialog import CsvPreviewDialog
from dpstudio.app.widgets.data_panel import DataPanel
from dpstudio.app.widgets.explore_panel import ExplorePanel
from dpstudio.app.widgets.export_dialog import ExportDialog
from dpstudio.app.widgets.method_panel import MethodPanel
from dpstudio.app.widgets.query_panel import QueryPanel
from dpstudio.app.widgets.results_panel import ResultsPanel
from dpstudio.app.widgets.risk_panel import RiskPanel
from dpstudio.app.widgets.roles_panel import RolesPanel
from dpstudio.engine.parallel import start_thread
from dpstudio.engine.registry import get_method

TAB_DATA, TAB_ROLES, TAB_METHOD, TAB_RESULTS = range(4)


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
        self.controller = Controller(self.state, self)
        self._build_workflow_tabs()
        self._build_more_tabs()
        self._build_status_bar()
        self._make_actions()
        self._wire_signals()
        self._fit_to_screen()
        self._restore_ui()
        self._update_actions()
        if offer_recovery:
            QTimer.singleShot(0, self._offer_recovery)
        # the spare child started now, to be warm by the first open (issue 24 §5: files over
        # controller.BIG_FILE_BYTES are read in it); in a thread: a process start takes 10-50 ms
        start_thread(threading.Thread(target=subproc.prestart, name="dpstudio-prestart", daemon=True))

    def _build_workflow_tabs(self) -> None:
        """The panels of the four workflow tabs (Data, Attributes, Method, Results) and Risk."""
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.data_panel = DataPanel(self.state)
        self.roles_panel = RolesPanel(self.state)
        self.method_panel = MethodPanel(self.state)
        self.explore_panel = ExplorePanel(self.state)
        self.results_panel = ResultsPanel(self.state)
        from dpstudio.app.widgets.step_list import StepListPanel

        self.step_panel = StepListPanel(self.state)  # issue 23 §2: a release made of steps
        method_box = QWidget()
        method_lay = QVBoxLayout(method_box)
        method_lay.setContentsMargins(0, 0, 0, 0)
        method_lay.addWidget(self.method_panel)
        method_lay.addWidget(self.step_panel)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(method_box)
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
        self.risk_panel = RiskPanel(self.state)  # issue 10: risk of the file / release
        self.tabs.addTab(self.risk_panel, "5 · Risk")
        self.tabs.setTabToolTip(
            self.tabs.indexOf(self.risk_panel), "Re-identification risk of the file and the release (Ctrl+5)"
        )
        for i, tip in enumerate(
            [
                "Open a file and look at it (Ctrl+1)",
                "Give each attribute a role and a domain (Ctrl+2)",
                "Choose the method, explore k and ε (Ctrl+3)",
                "Inspect the protected data and export it (Ctrl+4)",
            ]
        ):
            self.tabs.setTabToolTip(i, tip)

    def _build_more_tabs(self) -> None:
        """Release data, Candidates and the Query desk; the tabs become the central widget."""
        ctl = self.controller
        # --- issue 11: the release next to the original; the session's candidate releases
        from dpstudio.app.widgets.history_panel import HistoryPanel
        from dpstudio.app.widgets.release_view import ReleaseView

        self.release_view = ReleaseView(self.state)
        self.history_panel = HistoryPanel(
            self.state, ctl, plane=self.explore_panel.plane, sse_key=lambda: self.explore_panel._sse_key
        )
        self.tabs.addTab(self.release_view, "6 · Release data")
        self.tabs.setTabToolTip(
            self.tabs.indexOf(self.release_view),
            "The protected records next to the original ones, changed "
            "cells marked; category frequencies before and after",
        )
        self.tabs.addTab(self.history_panel, "7 · Candidates")
        self.tabs.setTabToolTip(
            self.tabs.indexOf(self.history_panel),
            "Every Protect run of this session: compare, pin, restore, export",
        )
        self.setCentralWidget(self.tabs)
        # --- query desk (issue 14): its own tab, off the release workflow
        self.query_panel = QueryPanel(self.state)
        self.tab_query = self.tabs.addTab(self.query_panel, "8 · Query desk")
        self.tabs.setTabToolTip(
            self.tab_query,
            "Answer researchers' statistics under ε-DP "
            "(knowledge refinement) with the data set's budget ledger",
        )
        self.query_panel.sig_status.connect(lambda t: self.task_label.setText(t))

    def _build_status_bar(self) -> None:
        """The status bar: the task's text, its progress and Cancel (always visible)."""
        ctl = self.controller
        sb = self.statusBar()
        self.task_label = QLabel("Ready")
        self.task_label.setObjectName("task_label")
        self.progress = QProgressBar()
        self.progress.setObjectName("task_progress")
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(260)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p %")
        # shown only while a task runs (no idle "0 %" box); its room is kept, so nothing moves
        keep = self.progress.sizePolicy()
        keep.setRetainSizeWhenHidden(True)
        self.progress.setSizePolicy(keep)
        self.progress.setVisible(False)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setObjectName("cancel_button")
        self.cancel_btn.setToolTip("Stop the running task (Esc). Nothing is changed by a cancelled task.")
        self.cancel_btn.setEnabled(False)
        self.cancel_btn.clicked.connect(self.controller.cancel_all)
        sb.addWidget(self.task_label, 1)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_btn)
        for r in ctl.runners:
            r.sig_busy_changed.connect(self._on_runner_busy)
            r.sig_progress.connect(self._on_runner_progress)

    def _wire_signals(self) -> None:
        """Panels -> controller, controller -> window and panels."""
        ctl = self.controller
        self.data_panel.sig_open_requested.connect(self.open_dialog)
        self.data_panel.sig_sample_requested.connect(ctl.open_sample)
        self.method_panel.sig_protect_requested.connect(ctl.run_protect)
        self.explore_panel.sig_sweep_requested.connect(ctl.run_sweep)
        self.explore_panel.sig_point_chosen.connect(self._on_explore_point_chosen)
        self.results_panel.export_btn.clicked.connect(self.export_dialog)
        # issue 24: the hierarchy builder, from the pre-run warning, the results and the roles
        self.method_panel.sig_build_hierarchy.connect(self.open_hierarchy_builder)
        self.results_panel.sig_build_hierarchy.connect(self.open_hierarchy_builder)
        self.roles_panel.sig_build_hierarchy.connect(self.open_hierarchy_builder)
        ctl.confirm_csv = self._confirm_csv
        ctl.curve_images = lambda: self.explore_panel.export_images() if self.explore_panel.points else []
        ctl.sig_status.connect(self.task_label.setText)
        ctl.sig_status.connect(lambda _t: self._update_title())  # e.g. a project was saved
        ctl.sig_error.connect(self._on_controller_error)
        ctl.sig_loaded.connect(self.sig_loaded)
        ctl.sig_protected.connect(lambda: self.tabs.setCurrentIndex(TAB_RESULTS))
        self.step_panel.sig_release_set.connect(self._on_chain_release)
        ctl.sig_protected.connect(self.history_panel.add_current)  # issue 11: candidates
        self.history_panel.sig_export_requested.connect(self.export_dialog)
        self.explore_panel.sse_scale.currentIndexChanged.connect(self.history_panel._draw_plane)
        ctl.sig_sweep_started.connect(self._on_controller_sweep_started)
        ctl.sig_sweep_points.connect(self.explore_panel.add_points)
        ctl.sig_sweep_finished.connect(self._on_controller_sweep_finished)
        ctl.sig_sweep_invalid.connect(lambda m: self.explore_panel.banner.show_message(m, "error"))
        ctl.sig_sweep_stale.connect(self.explore_panel.set_stale)
        ctl.sig_seed_note.connect(self.method_panel.set_seed_note)
        self.state.sig_dirty_changed.connect(lambda _d: self._update_title())
        self.state.sig_data_changed.connect(self._update_title)
        self.state.sig_result_changed.connect(self._update_actions)

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

        self.act_open = act(
            fm,
            "&Open data…",
            self.open_dialog,
            QKeySequence.StandardKey.Open,
            "Open CSV, Excel, Parquet, Stata or SPSS data",
        )
        self.act_sample = act(
            fm,
            "Open &sample (Census)",
            self.controller.open_sample,
            "Ctrl+Shift+M",
            "The bundled CASC Census sample",
        )
        self.act_sample_adult = act(
            fm,
            "Open sample (&Adult)",
            self.controller.open_adult_sample,
            None,
            "The bundled UCI Adult sample (ARX extract, 30,162 records); "
            "its ARX hierarchies are in resources/adult/hierarchies",
        )
        self.act_sample_free1 = act(
            fm,
            "Open sample (&free1 survey)",
            self.controller.open_free1_sample,
            None,
            "sdcMicro's free1 survey file (4,000 records, integer codes, "
            "sampling weight) with its key variables preset",
        )
        self.recent_menu = fm.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        fm.addSeparator()
        self.act_open_project = act(
            fm, "Open &project…", self.open_project_dialog, "Ctrl+Shift+O", "Open a saved project (.dpsproj)"
        )
        self.act_save_project = act(
            fm,
            "Save project",
            self.save_project,
            "Ctrl+S",
            "Save roles, domains, method, parameters and seed",
        )
        act(fm, "Save project &as…", self.save_project_as, "Ctrl+Shift+S")
        fm.addSeparator()
        self.act_export = act(
            fm,
            "&Export protected file…",
            self.export_dialog,
            "Ctrl+Shift+E",
            "Write the release and its public metadata / release note, and the "
            "private audit trail / assessment",
        )
        fm.addSeparator()
        act(fm, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        # issue 11: undo/redo of role, type, domain, precision and hierarchy edits
        em = mb.addMenu("&Edit")
        self.act_undo = self.state.undo_stack.createUndoAction(self, "&Undo")
        self.act_undo.setShortcut(QKeySequence.StandardKey.Undo)
        self.act_redo = self.state.undo_stack.createRedoAction(self, "&Redo")
        self.act_redo.setShortcut(QKeySequence.StandardKey.Redo)
        em.addActions([self.act_undo, self.act_redo])
        rm = mb.addMenu("&Run")
        self.act_sweep = act(
            rm, "Run trade-off &sweep", self.controller.run_sweep, "Ctrl+E", "Sweep k × ε and draw the curves"
        )
        self.act_protect = act(
            rm, "&Protect", self.controller.run_protect, "Ctrl+R", "Run the method with the chosen parameters"
        )
        self.act_cancel = act(rm, "&Cancel", self.controller.cancel_all, "Esc", "Stop the running task")
        self.act_query = act(
            rm,
            "&Query desk…",
            lambda: self.tabs.setCurrentIndex(self.tab_query),
            "Ctrl+Shift+Q",
            "Answer one statistic under ε-DP and see the privacy-budget ledger",
        )
        vm = mb.addMenu("&View")
        for i, name in enumerate(["Data", "Attributes", "Method && trade-offs", "Results && export"]):
            act(vm, f"&{i + 1} {name}", lambda _=False, i=i: self.tabs.setCurrentIndex(i), f"Ctrl+{i + 1}")
        act(vm, "&5 Risk", lambda _=False: self.tabs.setCurrentWidget(self.risk_panel), "Ctrl+5")
        act(vm, "&6 Release data", lambda _=False: self.tabs.setCurrentWidget(self.release_view), "Ctrl+6")
        act(vm, "&7 Candidates", lambda _=False: self.tabs.setCurrentWidget(self.history_panel), "Ctrl+7")
        vm.addSeparator()
        # issue 24 §3: value labels instead of codes in every view (SPSS's View → Value Labels)
        self.labels_action = QAction("Value &labels", self)
        self.labels_action.setCheckable(True)
        self.labels_action.setChecked(self.state.show_labels)
        self.labels_action.setShortcut(QKeySequence("Ctrl+L"))
        self.labels_action.toggled.connect(self.state.set_show_labels)
        self.state.sig_labels_changed.connect(self.labels_action.setChecked)
        vm.addAction(self.labels_action)
        hm = mb.addMenu("&Help")
        # issue 11: the user guide and the glossary (docs/*.md)
        from dpstudio.app.widgets.help_dialog import open_help

        self.act_user_guide = act(
            hm,
            "&User guide",
            lambda: open_help(self, "user_guide.md"),
            QKeySequence.StandardKey.HelpContents,
            "The workflow, each role, each method in plain words",
        )
        self.act_glossary = act(
            hm,
            "&Glossary",
            lambda: open_help(self, "glossary.md"),
            None,
            "Every measure and term in plain words",
        )
        hm.addSeparator()
        act(hm, "&About dpstudio", self._about)

    def _update_actions(self) -> None:
        has = self.state.df is not None
        self.act_sweep.setEnabled(has)
        self.act_protect.setEnabled(has)
        self.act_export.setEnabled(self.state.result is not None)

    def _update_title(self) -> None:
        name = Path(self.state.path).name if self.state.path else "no data"
        proj = f" — {Path(self.state.project_path).name}" if self.state.project_path else ""
        self.setWindowTitle(f"dpstudio {__version__} — {name}{proj}" + (" *" if self.state.dirty else ""))
        self._update_actions()

    def _about(self) -> None:
        QMessageBox.about(
            self,
            "About dpstudio",
            f"<b>dpstudio {__version__}</b><p>Protect microdata before release: "
            "k-anonymity by microaggregation, differential privacy, and their "
            "combinations, with live risk–utility curves.</p>",
        )

    # ------------------------------------------------------------------ opening data
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open data", app_settings.last_folder(), io_adapter.open_filter()
        )
        if path:
            self.open_data(path)

    def open_data(self, path: str) -> bool:
        """Open a data file; when the current one has roles, ask whether to keep them for
        the columns of the same names (issue 11: roles were discarded without asking).
        """
        st = self.state
        if st.df is None or not st.active_roles():
            return self.controller.open_file(path)
        keep = self._ask_keep_roles(path)
        if keep is None:
            return False
        if not keep:
            return self.controller.open_file(path)
        prev = {c: v[:4] + (None, None) for c, v in st._column_settings().items()}

        def carry_over() -> None:
            same = {c: v for c, v in prev.items() if c in st.roles}
            st.apply_column_settings(same)
            st.mark_dirty()
            kept = sum(1 for v in same.values() if v[0] != "other")
            self.task_label.setText(
                f"Kept the roles, types and domains of {kept} column(s) with the same names "
                "(hierarchies are not carried over)."
            )

        return self.controller.open_file(path, then=carry_over)

    def _ask_keep_roles(self, path: str) -> bool | None:
        """True: keep the roles of same-named columns; False: discard them; None: cancel."""
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Open another file")
        box.setText(
            f"{len(self.state.active_roles())} attribute(s) of the current file have a role. "
            f"Keep the roles, types and domains of the columns of {Path(path).name} that have the "
            "same names?"
        )
        keep = box.addButton("Keep for same names", QMessageBox.ButtonRole.AcceptRole)
        discard = box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(keep)
        box.exec()
        clicked = box.clickedButton()
        return True if clicked is keep else False if clicked is discard else None

    def _confirm_csv(self, path: str, sniffed: dict) -> dict | None:
        dlg = CsvPreviewDialog(path, sniffed, self)
        return dlg.options() if dlg.exec() == QDialog.DialogCode.Accepted else None

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = app_settings.recent_files()
        if not files:
            a = self.recent_menu.addAction("(none)")
            a.setEnabled(False)
        for f in files:
            self.recent_menu.addAction(f, lambda f=f: self.open_data(f))

    def dragEnterEvent(self, ev) -> None:  # noqa: N802 - Qt API
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:  # noqa: N802 - Qt API
        urls = [u.toLocalFile() for u in ev.mimeData().urls() if u.isLocalFile()]
        if urls:
            if urls[0].endswith(project.SUFFIX):
                self.controller.open_project(urls[0])
            else:
                self.open_data(urls[0])

    # ------------------------------------------------------------------ controller -> view
    def _on_chain_release(self) -> None:
        """The step list's release became the current one: no sweep curve describes it.  The
        switch to the Results tab in a turn of its own (the views were filled in this one), as
        after a Protect.
        """
        self.controller.result_sig = None
        turns.later(lambda: self.tabs.setCurrentIndex(TAB_RESULTS), owner=self, key="chain-release")

    def _on_runner_busy(self, _busy: bool) -> None:
        busy = self.controller.busy
        self.cancel_btn.setEnabled(busy)
        self.progress.setVisible(busy)
        if not busy:
            self.progress.setValue(0)

    def _on_runner_progress(self, f: float) -> None:
        self.progress.setValue(int(f * 1000))

    def _on_controller_error(self, msg: str, details: str) -> None:
        show_error(self, msg, details)

    def _on_controller_sweep_started(
        self, epsilons: list, uses_eps: bool, baselines: bool, method: str
    ) -> None:
        self.explore_panel.begin(epsilons, uses_eps, baselines=baselines, method=method)
        self.tabs.setCurrentIndex(TAB_METHOD)

    def _on_controller_sweep_finished(self, cancelled: bool, error: str) -> None:
        ep = self.explore_panel
        ep.finish(cancelled=cancelled, error=error)
        if not cancelled and not error:
            self.task_label.setText(
                f"Sweep done: {len(ep.points)} points"
                + (f" ({len(ep.skipped)} left out: the method cannot run there)." if ep.skipped else ".")
            )

    def _on_explore_point_chosen(self, k, eps) -> None:
        """A point of the curves: its k and ε into the recipe (the method form follows)."""
        st = self.state
        vals = {}
        if k is not None and "k" in st.recipe.params:
            vals["k"] = k
        if eps is not None and "epsilon" in st.recipe.params:
            vals["epsilon"] = eps
        st.update_params(**vals)
        uses_eps = bool(st.recipe.method and get_method(st.recipe.method).uses_epsilon)
        if eps is None and uses_eps:
            self.task_label.setText(
                f"k = {k} set. That point is the noise-free baseline (not "
                "differentially private); ε is unchanged."
            )
        else:
            self.task_label.setText(
                f"k = {k}"
                + (f", ε = {eps:g}" if eps is not None else "")
                + " set in the method form. Protect with Ctrl+R."
            )

    # ------------------------------------------------------------------ export
    def hierarchy_builder(self, column: str):
        """The hierarchy builder of ``column`` (not shown), k from the method's form."""
        from dpstudio.app.widgets.hierarchy_builder import HierarchyBuilder

        k = (self.state.recipe.params or {}).get("k") or 5
        return HierarchyBuilder(self.state, column, k=int(k), parent=self)

    def open_hierarchy_builder(self, column: str) -> None:
        if self.state.df is None or column not in self.state.df.columns:
            return
        self.hierarchy_builder(column).open()

    def export_dialog(self) -> None:
        res = self.state.result
        if res is None:
            show_error(self, "Nothing to export yet: press Protect (Ctrl+R) first.")
            return
        dlg = ExportDialog(
            res,
            self.state.path,
            self,
            roles=self.state.roles,
            sample_folder=str(resources_dir()),
            export_folder=app_settings.last_export_folder(),
            extra_inputs=self.controller.input_files(),
        )
        if dlg.exec() != QDialog.DialogCode.Accepted:
            return
        o = dlg.options()
        app_settings.set_last_export_folder(str(Path(o["path"]).parent))
        self.controller.export(
            o["path"],
            fmt=o["fmt"],
            release_note=o["release_note"],
            assessment=o["assessment"],
            audit=o["audit"],
        )

    # ------------------------------------------------------------------ project
    def save_project(self) -> bool:
        if not self.state.project_path:
            return self.save_project_as()
        return self.controller.save_project_to(self.state.project_path)

    def save_project_as(self) -> bool:
        start = app_settings.last_folder()
        if self.state.path:
            start = str(Path(self.state.path).with_suffix(project.SUFFIX))
        path, _ = QFileDialog.getSaveFileName(
            self, "Save project", start, f"dpstudio project (*{project.SUFFIX})"
        )
        if not path:
            return False
        if not path.endswith(project.SUFFIX):
            path += project.SUFFIX
        return self.controller.save_project_to(path)

    def open_project_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open project",
            app_settings.last_folder(),
            f"dpstudio project (*{project.SUFFIX});;All files (*)",
        )
        if path:
            self.controller.open_project(path)

    def _offer_recovery(self) -> None:
        rec = self.controller.recovery()
        if rec is None:
            return
        name = Path(rec.input_path or "?").name
        ans = QMessageBox.question(
            self,
            "Recover unsaved work?",
            f"dpstudio was not closed normally. Recover the unsaved settings for {name} "
            f"(method {rec.method}, {len(rec.roles)} roles)?",
        )
        if ans == QMessageBox.StandardButton.Yes:
            self.controller.apply_project(rec, project_path=None)
        else:
            self.controller.discard_recovery()

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
        return [
            self.method_splitter,
            self.roles_panel.splitter,
            self.explore_panel.splitter,
            self.results_panel.splitter,
        ]

    def save_ui(self) -> None:
        s = app_settings.settings()
        s.setValue("geometry", self.saveGeometry())
        for sp in self._splitters():
            s.setValue(f"splitter/{sp.objectName()}", sp.saveState())
        s.sync()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every task and wait for the pool threads (no half state left)."""
        self.controller.shutdown(timeout)
        self.method_panel.preview_runner.cancel()
        self.method_panel.preview_runner.wait(timeout)
        self.step_panel.runner.cancel()
        self.step_panel.runner.wait(timeout)
        self.risk_panel.runner.cancel()
        self.risk_panel.runner.wait(timeout)
        for r in (self.query_panel.runner, self.query_panel.digest_runner):
            r.cancel()  # an answer whose ε is already on file stays recorded (write-ahead)
            r.wait(timeout)

    def closeEvent(self, ev) -> None:  # noqa: N802 - Qt API
        if self.state.dirty and self.state.df is not None and self.state.project_path:
            ans = QMessageBox.question(
                self,
                "Save project?",
                "Save the changes to the project before closing?",
                QMessageBox.StandardButton.Save
                | QMessageBox.StandardButton.Discard
                | QMessageBox.StandardButton.Cancel,
            )
            if ans == QMessageBox.StandardButton.Cancel:
                ev.ignore()
                return
            if ans == QMessageBox.StandardButton.Save and not self.save_project():
                ev.ignore()
                return
        self.save_ui()
        self.shutdown()
        self.controller.discard_recovery()
        ev.accept()
