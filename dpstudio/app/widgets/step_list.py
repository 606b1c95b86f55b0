"""The step list of the Method tab (issues 23 §2, 24): a release made of steps.

The user adds the method chosen above (with its parameters) as a step, reorders and removes
steps and runs the chain; every step's outcome is kept (:class:`dpstudio.engine.ChainRun`),
so undoing the last step is instant and a run starts at the first step that changed (or at
the step the user picks: "Re-run from here").  After every step the panel shows risk and
utility (:func:`dpstudio.engine.assess` at level ``step``: sdcApp's habit), a before/after
table of the whole chain and the weighted estimates of the last step.  The pipeline JSON and
the equivalent ``dpstudio protect --pipeline`` command line are shown and can be saved
(private files, 0600: the command line may hold the pinned seed and the declared domains).

Everything the panel shows is computed from the original data: PRIVATE (the operator's
screen).  The run happens in a worker thread (progress, Cancel); a cancelled or failed run
leaves the previous chain as it was.
"""

from __future__ import annotations

import html
import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import Banner
from dpstudio.app.workers import TaskRunner
from dpstudio.engine.chain import parse_steps

#: The figures of the step table: (key of Assessment.figures(), column title, format).
STEP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("records", "Records", "int"),
    ("sse_normalized", "SSE norm.", "g"),
    ("rl", "RL %", "g"),
    ("suppressed_cells", "Suppressed cells", "int"),
    ("risk_sample_uniques", "Sample uniques", "int"),
    ("risk_records_fk_lt_3", "Records f_k < 3", "int"),
    ("risk_expected_reidentifications", "Expected re-ids", "g"),
    ("risk_global_risk", "Global risk", "g"),
    ("weighted_max_rel_error", "Max |rel. error| of estimates", "g"),
)
#: The rows of the before/after table (a subset of the step columns).
BEFORE_AFTER_ROWS = STEP_COLUMNS
#: The columns of the weighted estimates table.
ESTIMATE_COLUMNS = ("variable", "statistic", "category", "original", "release", "relative_error")


def _fmt(v: Any, kind: str = "g") -> str:
    if v is None:
        return "—"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not np.isfinite(f):
        return "n/a"
    return f"{int(round(f)):,}" if kind == "int" else f"{f:.4g}"


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items() if v is not None)


class StepListPanel(QWidget):
    """The chain being built, its run and its figures (see the module docstring)."""

    sig_chain_changed = Signal()
    """The chain's run or figures changed (a run finished, a step was undone)."""
    sig_release_set = Signal()
    """The chain's release became the app's current release (Results, export)."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        #: the steps as edited: [{"method": id, "params": {...}}]
        self.steps: list[dict] = []
        #: the last completed run (ChainRun), its figures (Assessment per step) and the original's
        self.run: Any = None
        self.figures: list[Any] = []
        self.before: dict[str, float] = {}
        self._run_key: tuple | None = None
        #: the weighted estimates' variables ({"totals": ..., "means": ..., "shares": ...}; None: defaults)
        self.weighted: dict | None = None
        self.runner = TaskRunner("chain", self)
        self.runner.sig_progress.connect(self._on_progress)
        self.runner.sig_busy_changed.connect(self._on_busy)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        box = QGroupBox("Release in steps (chain)")
        outer.addWidget(box)
        lay = QVBoxLayout(box)
        self._build_step_controls(lay)
        self._build_figure_tabs(lay)
        self.private_label = QLabel()
        self.private_label.setWordWrap(True)
        lay.addWidget(self.private_label)
        self._connect_signals(state)
        self._refresh()

    def _build_step_controls(self, lay: QVBoxLayout) -> None:
        """The hint, the list of steps, its buttons, the progress bar, banner and status."""
        hint = QLabel(
            "Add the method above as a step, then the next one (e.g. local suppression, then "
            "PRAM or noise). Each step runs on the release of the previous one; risk and "
            "utility are shown after every step. A step protects only the roles its method "
            "protects (a 'cannot run' note above is about the method alone): together the "
            "steps must protect every quasi-identifier."
        )
        hint.setWordWrap(True)
        lay.addWidget(hint)
        self.list = QListWidget()
        self.list.setObjectName("step_list")
        self.list.setMinimumHeight(90)
        self.list.setMaximumHeight(160)
        self.list.currentRowChanged.connect(lambda _r: self._update_buttons())
        lay.addWidget(self.list)
        self._build_step_buttons(lay)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(8)
        self.progress.hide()
        lay.addWidget(self.progress)
        self.banner = Banner(self)
        lay.addWidget(self.banner)
        self.status = QLabel("No step yet.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.status)

    def _build_step_buttons(self, lay: QVBoxLayout) -> None:
        """Add / move / remove, run / re-run / undo / cancel, and "use as the release"."""
        row = QHBoxLayout()
        self.add_btn = QPushButton("＋ Add step")
        self.add_btn.setToolTip("Add the method chosen above, with its parameters, as the next step.")
        self.up_btn = QPushButton("▲")
        self.up_btn.setToolTip("Move the selected step up")
        self.down_btn = QPushButton("▼")
        self.down_btn.setToolTip("Move the selected step down")
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.setToolTip("Remove the selected step (run the chain again to apply)")
        for b in (self.add_btn, self.up_btn, self.down_btn, self.remove_btn):
            row.addWidget(b)
        lay.addLayout(row)
        row2 = QHBoxLayout()
        self.run_btn = QPushButton("▶ Run chain")
        self.run_btn.setObjectName("run_chain_button")
        self.run_btn.setToolTip("Run the steps that changed (the earlier steps' results are kept).")
        self.rerun_btn = QPushButton("Re-run from here")
        self.rerun_btn.setToolTip(
            "Run again from the selected step (fresh noise for it and the later steps)."
        )
        self.undo_btn = QPushButton("↶ Undo last step")
        self.undo_btn.setToolTip("Drop the last step and return to the release before it (instant: kept).")
        self.cancel_btn = QPushButton("Cancel")
        for b in (self.run_btn, self.rerun_btn, self.undo_btn, self.cancel_btn):
            row2.addWidget(b)
        lay.addLayout(row2)
        self.use_btn = QPushButton("Use as the release (Results && export)")
        self.use_btn.setObjectName("use_chain_button")
        self.use_btn.setToolTip(
            "Make the chain's release the current release: the Results tab measures it and "
            "Export writes it with its composed guarantee."
        )
        lay.addWidget(self.use_btn)

    def _build_figure_tabs(self, lay: QVBoxLayout) -> None:
        """The tabs of figures: after every step, before/after, weighted estimates, the log."""
        self.tabs = QTabWidget()
        self.step_table = self._table(["Step", "Method", *(t for _k, t, _f in STEP_COLUMNS)])
        self.step_table.setObjectName("step_table")
        self.before_after = self._table(["Measure", "Before (original)", "After the chain"])
        self.before_after.setObjectName("before_after_table")
        self.estimates = self._table(
            ["Variable", "Statistic", "Category", "Original", "Release", "Rel. error"]
        )
        self.estimates.setObjectName("estimates_table")
        estw = self._build_estimates_tab()
        logw = self._build_log_tab()
        self.tabs.addTab(self.step_table, "After every step")
        self.tabs.addTab(self.before_after, "Before / after")
        self.tabs.addTab(estw, "Weighted estimates")
        self.tabs.addTab(logw, "Pipeline && command line")
        self.tabs.setMinimumHeight(220)
        lay.addWidget(self.tabs)

    def _build_estimates_tab(self) -> QWidget:
        """The weighted estimates table under its line of variables."""
        estw = QWidget()
        el = QVBoxLayout(estw)
        el.setContentsMargins(0, 0, 0, 0)
        erow = QHBoxLayout()
        erow.addWidget(QLabel("Variables:"))
        self.estimates_edit = QLineEdit()
        self.estimates_edit.setObjectName("estimates_variables")
        self.estimates_edit.setPlaceholderText("default: the protected and confidential columns")
        self.estimates_edit.setToolTip(
            "Columns whose weighted estimates are compared (comma-separated): totals and means "
            "of numeric columns, category shares of the others. Weighted by the column with role "
            "'weight' (unweighted without one)."
        )
        self.estimates_btn = QPushButton("Apply")
        erow.addWidget(self.estimates_edit, 1)
        erow.addWidget(self.estimates_btn)
        el.addLayout(erow)
        el.addWidget(self.estimates)
        return estw

    def _build_log_tab(self) -> QWidget:
        """The pipeline JSON and command line, with its Save button."""
        self.log = QPlainTextEdit()
        self.log.setObjectName("pipeline_log")
        self.log.setReadOnly(True)
        self.log.setMinimumHeight(120)
        logw = QWidget()
        ll = QVBoxLayout(logw)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.log)
        self.save_btn = QPushButton("Save pipeline and command line…")
        self.save_btn.setToolTip(
            "Write the pipeline JSON (for dpstudio protect --pipeline) and the command line "
            "next to it (private files: they may hold your declared domains and a pinned seed)."
        )
        ll.addWidget(self.save_btn)
        return logw

    def _connect_signals(self, state: AppState) -> None:
        """The buttons to their actions; the app state's changes to the panel."""
        self.add_btn.clicked.connect(self.add_current_method)
        self.up_btn.clicked.connect(lambda: self.move_step(self.list.currentRow(), -1))
        self.down_btn.clicked.connect(lambda: self.move_step(self.list.currentRow(), +1))
        self.remove_btn.clicked.connect(lambda: self.remove(self.list.currentRow()))
        self.run_btn.clicked.connect(lambda: self.run_chain())
        self.rerun_btn.clicked.connect(lambda: self.run_chain(start=max(self.list.currentRow(), 0)))
        self.undo_btn.clicked.connect(self.undo)
        self.cancel_btn.clicked.connect(self.runner.cancel)
        self.save_btn.clicked.connect(self._save_dialog)
        self.use_btn.clicked.connect(self.use_as_release)
        self.estimates_btn.clicked.connect(lambda: self.set_estimate_variables(self.estimates_edit.text()))
        self.estimates_edit.returnPressed.connect(
            lambda: self.set_estimate_variables(self.estimates_edit.text())
        )
        state.sig_data_changed.connect(self._on_data_changed)
        state.sig_roles_changed.connect(self._refresh)
        state.sig_recipe_changed.connect(self._on_recipe_changed)

    # ------------------------------------------------------------------ editing the steps
    def add_step(self, method: str, params: dict | None = None) -> bool:
        """Append a step (checked by the engine: known method, valid parameters)."""
        step = {"method": method, "params": {k: v for k, v in dict(params or {}).items() if v is not None}}
        try:
            parse_steps([*self.steps, step])
        except engine.DPStudioError as exc:
            self.banner.show_message(str(exc), "error")
            return False
        self.banner.hide()
        self.steps.append(step)
        self._refresh()
        self.list.setCurrentRow(len(self.steps) - 1)
        return True

    def add_current_method(self) -> bool:
        """Add the method chosen in the panel above, with its parameters, as the next step."""
        r = self.state.recipe
        if not r.method:
            self.banner.show_message("Choose a method above first.", "error")
            return False
        params = {k: v for k, v in r.params.items() if k not in ("precision", "types")}
        return self.add_step(r.method, params)

    def move_step(self, i: int, delta: int) -> None:
        """Move step ``i`` up (``delta`` −1) or down (+1)."""
        j = i + delta
        if 0 <= i < len(self.steps) and 0 <= j < len(self.steps):
            self.steps[i], self.steps[j] = self.steps[j], self.steps[i]
            self._refresh()
            self.list.setCurrentRow(j)

    def remove(self, i: int) -> None:
        if 0 <= i < len(self.steps):
            del self.steps[i]
            self._refresh()
            self.list.setCurrentRow(min(i, len(self.steps) - 1))

    def set_steps(self, steps: list[dict]) -> None:
        """Replace the steps (e.g. from a pipeline file), checked by the engine."""
        parsed = parse_steps(steps) if steps else []
        self.steps = [s.to_dict() for s in parsed]
        self._refresh()

    # ------------------------------------------------------------------ running
    def _settings_key(self) -> tuple:
        st = self.state
        return (
            id(st.df),
            tuple(sorted(st.active_roles().items())),
            tuple(sorted(st.types.items())),
            tuple(sorted(st.active_domains().items())),
            tuple(sorted(st.active_precision().items())),
            tuple(sorted((c, str(s)) for c, s in st.hierarchy_sources.items())),
            st.recipe.seed if st.recipe.seed_pinned else None,
        )

    def _fresh_run(self) -> Any:
        st = self.state
        assert st.df is not None
        return engine.ChainRun(
            st.df,
            st.active_roles(),
            st.active_domains(),
            hierarchies=st.active_hierarchies() or None,
            precision=st.active_precision() or None,
            types=dict(st.types) or None,
            seed=st.run_seed(),
        )

    def run_chain(self, *, start: int | None = None) -> bool:
        """Run the chain in a worker: from ``start`` (default: the first step that changed).
        The settings (data, roles, domains, types, hierarchies, a pinned seed) changed since
        the last run: the whole chain runs again.
        """
        if self.state.df is None:
            self.banner.show_message("Open a data file first.", "error")
            return False
        if not self.steps:
            self.banner.show_message("Add a step first (＋ Add step).", "error")
            return False
        err = self.state.input_error()
        if err:
            self.banner.show_message(err, "error")
            return False
        self.banner.hide()
        key = self._settings_key()
        try:
            base = self.run if (self.run is not None and key == self._run_key) else self._fresh_run()
        except engine.DPStudioError as exc:
            self.banner.show_message(str(exc), "error")
            return False
        figures = list(self.figures) if base is self.run else []
        steps = [dict(s) for s in self.steps]
        from dpstudio.app import compute

        weighted = self.weighted

        def work(progress, check_cancel):
            return compute.run_chain_steps(
                base,
                steps,
                start=start,
                figures=figures,
                weighted=weighted,
                progress=progress,
                check_cancel=check_cancel,
            )

        def done(out):
            self.run, self.figures, self.before = out
            self._run_key = key
            self._refresh()
            self.sig_chain_changed.emit()

        def errored(msg, _details):
            self.banner.show_message(msg.splitlines()[0] if msg else "The chain failed.", "error")

        self.status.setText("Running the chain…")
        self.runner.start(
            work,
            finished=done,
            errored=errored,
            cancelled=self._on_cancelled,
        )
        return True

    def set_estimate_variables(self, text: str) -> bool:
        """Choose the weighted estimates' variables (comma-separated column names; empty: the
        defaults) and measure the steps that ran again (no step runs again).
        """
        names = [t.strip() for t in text.split(",") if t.strip()]
        st = self.state
        if st.df is None:
            return False
        from dpstudio.engine.measures.weighted import variables_for

        try:
            self.weighted = variables_for(st.df, names, dict(st.types)) if names else None
        except engine.DPStudioError as exc:
            self.banner.show_message(str(exc), "error")
            return False
        self.banner.hide()
        if self.run is None or not len(self.run):
            return True
        run, weighted = self.run, self.weighted
        from dpstudio.app import compute

        def done(figs):
            if self.run is run:
                self.figures = figs
                self._refresh()
                self.sig_chain_changed.emit()

        self.runner.start(
            lambda progress, check_cancel: compute.reassess_chain(run, weighted, progress, check_cancel),
            finished=done,
            errored=lambda msg, _d: self.banner.show_message(
                msg.splitlines()[0] if msg else "failed", "error"
            ),
        )
        return True

    def use_as_release(self) -> bool:
        """Make the release after the last step that ran the app's current release: measured
        as Protect's (in the worker), then ``state.set_result`` (Results tab, export,
        candidates).  Refused while steps are pending or the chain leaves a
        quasi-identifier unprotected.
        """
        res = self.result()
        if res is None:
            self.banner.show_message("Run the chain first.", "error")
            return False
        if any(not self._ran(i) for i in range(len(self.steps))) or len(self.steps) != len(self.run):
            self.banner.show_message(
                "Some steps have not run with these settings: run the chain first.", "error"
            )
            return False
        bare = [w for w in res.private_notes if getattr(w, "code", "") == "chain-incomplete"]
        if bare:
            self.banner.show_message(str(bare[0]), "error")
            return False
        st = self.state
        recipe = {
            "method": res.method,
            "params": dict(res.params),
            "seed": st.recipe.seed if st.recipe.seed_pinned else None,
            "seed_pinned": bool(st.recipe.seed_pinned),
            "precision": dict(st.active_precision()),
        }
        from dpstudio.app import compute
        from dpstudio.app.controller import prime_result_views

        labelled = set(getattr(st.input_meta, "value_labels", None) or {})
        types = dict(st.types)

        def work(progress, check_cancel):
            out = compute.assess_release(res, progress, check_cancel)
            check_cancel()
            # what the Results and Release views read from the whole tables, here in the
            # worker as for Protect (showing the release costs the GUI thread no pass over
            # the records)
            prime_result_views(out[0], labelled=labelled, types=types)
            return out

        def done(out):
            r, ev = out
            st.set_result(r, ev, recipe)
            self.status.setText(self.status.text() + " Now the current release: see Results & export.")
            self.sig_release_set.emit()

        self.runner.start(
            work,
            finished=done,
            errored=lambda msg, _d: self.banner.show_message(
                msg.splitlines()[0] if msg else "failed", "error"
            ),
        )
        return True

    def undo(self) -> bool:
        """Drop the last step that ran: the release before it, kept (no re-run)."""
        if self.run is None or not len(self.run):
            return False
        self.runner.cancel()
        self.run = self.run.undo()
        self.figures = self.figures[: len(self.run)]
        self.steps = [s.to_dict() for s in self.run.steps] + self.steps[len(self.run) + 1 :]
        if not len(self.run):
            self.run, self.figures, self.before = None, [], {}
        self._refresh()
        self.sig_chain_changed.emit()
        return True

    def wait(self, timeout: float = 60.0) -> bool:
        return self.runner.wait(timeout)

    def result(self) -> Any:
        """The release after the last step that ran (a ProtectionResult), or None."""
        return self.run.result() if self.run is not None and len(self.run) else None

    # ------------------------------------------------------------------ the log
    def pipeline(self) -> dict:
        """The pipeline JSON (what ``dpstudio protect --pipeline`` reads)."""
        return {"steps": [dict(s) for s in self.steps]}

    def command_line(
        self, pipeline: str = "steps.json", output: str = "release.csv"
    ) -> tuple[str, list[str]]:
        """The equivalent ``dpstudio protect`` command line (and what it cannot carry)."""
        from dpstudio.engine.recipe import Recipe, protect_command

        st = self.state
        rec = Recipe(
            input_path=st.path,
            read_options=dict(st.read_options or {}),
            roles=dict(st.active_roles()),
            types=dict(st.types),
            domains=dict(st.active_domains()),
            precision=dict(st.active_precision()),
            hierarchies={
                c: ({"path": str(src)} if isinstance(src, (str, Path)) else {})
                for c, src in st.hierarchy_sources.items()
                if c in st.active_hierarchies()
            },
            steps=[dict(s) for s in self.steps],
            seed=st.recipe.seed,
            seed_pinned=st.recipe.seed_pinned,
        )
        argv, left_out = protect_command(rec, output=output, pipeline=pipeline)
        return shlex.join(argv), left_out

    def log_text(self, pipeline: str = "steps.json") -> str:
        cmd, left_out = self.command_line(pipeline)
        text = (
            f"# {pipeline}\n{json.dumps(self.pipeline(), indent=2, ensure_ascii=False)}\n\n"
            f"# the equivalent command line\n{cmd}\n"
        )
        for n in left_out:
            text += f"# note: {n}\n"
        return text

    def save_log(self, path: str) -> tuple[str, str]:
        """Write the pipeline JSON to ``path`` and the command line next to it
        (``<stem>.command.txt``), both PRIVATE (0600), through the one guarded writer (never
        over the data file or a hierarchy file).  Returns the two paths.
        """
        from dpstudio.engine.safe_write import WritePlan

        p = Path(path)
        cmd_path = p.with_name(p.stem + ".command.txt")
        inputs = [str(self.state.path)] if self.state.path else []
        plan = WritePlan(inputs=inputs)
        a = plan.file(str(p), what="pipeline file", private=True)
        b = plan.file(str(cmd_path), what="command line", private=True)
        plan.check()
        plan.write_text(a, json.dumps(self.pipeline(), indent=2, ensure_ascii=False) + "\n")
        cmd, left_out = self.command_line(p.name)
        plan.write_text(b, cmd + "\n" + "".join(f"# note: {n}\n" for n in left_out))
        return a, b

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the pipeline", "steps.json", "Pipeline (*.json)")
        if not path:
            return
        try:
            a, b = self.save_log(path)
        except (OSError, engine.DPStudioError) as exc:
            self.banner.show_message(f"Cannot save the pipeline: {exc}", "error")
            return
        self.banner.show_message(f"Saved {Path(a).name} and {Path(b).name} (private: keep internal).", "info")

    # ------------------------------------------------------------------ display
    @staticmethod
    def _table(headers: list[str]) -> QTableWidget:
        t = QTableWidget(0, len(headers))
        t.setHorizontalHeaderLabels(headers)
        t.verticalHeader().setVisible(False)
        t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        return t

    def _ran(self, i: int) -> bool:
        """Whether step ``i`` as edited is the step that ran at that place (and all before it)."""
        if self.run is None or i >= len(self.run):
            return False
        return self.run.first_changed(parse_steps(self.steps[: i + 1])) > i

    def _refresh(self) -> None:
        if self.steps != self.state.step_list():
            self.state.set_step_list(self.steps)  # kept in the project file
        self.list.blockSignals(True)
        cur = self.list.currentRow()
        self.list.clear()
        for i, s in enumerate(self.steps):
            mark = "✓" if self._ran(i) else "…"
            it = QListWidgetItem(f"{mark} {i + 1}. {s['method']}  ({_params_text(s['params'])})")
            it.setToolTip("ran: result kept" if mark == "✓" else "not run yet with these settings")
            self.list.addItem(it)
        self.list.setCurrentRow(min(max(cur, 0), len(self.steps) - 1) if self.steps else -1)
        self.list.blockSignals(False)
        self._fill_tables()
        self.log.setPlainText(self.log_text() if self.steps else "")
        self._update_buttons()
        n = len(self.run) if self.run is not None else 0
        if not n:
            self.status.setText("No step has run yet." if self.steps else "No step yet.")
        else:
            res = self.result()
            pending = sum(not self._ran(i) for i in range(len(self.steps)))
            incomplete = [w for w in res.private_notes if getattr(w, "code", "") == "chain-incomplete"]
            self.status.setText(
                f"{n} step(s) ran: {len(res.data):,} records; {self._claim(res.guarantee_info)}"
                + (f"; {pending} step(s) not run yet" if pending else "")
                + (f". {incomplete[0]}" if incomplete else ".")
            )
            self.status.setToolTip(res.guarantee)

    @staticmethod
    def _claim(g: Any) -> str:
        """The composed guarantee in a few words (the sentence is the tooltip)."""
        if g is None:
            return "see the guarantee"
        if not g.is_dp:
            return "not ε-DP for the records (each step's own claim: see the guarantee)"
        eps = g.epsilon_total if g.epsilon_total is not None else g.epsilon
        others = [u.column for u in g.uncovered if u.reason in ("other-claim", "changed-no-claim")]
        return (f"ε-DP with ε = {eps:g}" if eps is not None else "ε-DP") + (
            f", not covering {', '.join(others)} (their steps' own claims apply)" if others else ""
        )

    def _fill_tables(self) -> None:
        figs = [f.figures() for f in self.figures]
        left_out = next((n for f in self.figures for n in f.notices if n.code == "rl-not-computed"), None)
        self.private_label.setText(
            "<i>Measured against the original data: private, never published.</i>"
            + (f" {html.escape(str(left_out))}" if left_out else "")
        )
        recs = self.run.records if self.run is not None else []
        t = self.step_table
        t.setRowCount(0)
        rows: list[tuple[str, str, dict]] = []
        if figs:
            n0 = len(self.run.original) if self.run is not None and self.run.original is not None else None
            rows.append(("0", "original", {"records": n0, **self.before}))
        for rec, f in zip(recs, figs, strict=False):
            rows.append((str(rec.result.index + 1), rec.result.method, {"records": rec.result.records, **f}))
        t.setRowCount(len(rows))
        for r, (num, method, f) in enumerate(rows):
            t.setItem(r, 0, QTableWidgetItem(num))
            t.setItem(r, 1, QTableWidgetItem(method))
            for c, (key, _title, kind) in enumerate(STEP_COLUMNS, start=2):
                t.setItem(r, c, QTableWidgetItem(_fmt(f.get(key), kind)))
        b = self.before_after
        b.setRowCount(0)
        if rows:
            first, last = rows[0][2], rows[-1][2]
            b.setRowCount(len(BEFORE_AFTER_ROWS))
            for r, (key, title, kind) in enumerate(BEFORE_AFTER_ROWS):
                b.setItem(r, 0, QTableWidgetItem(title))
                b.setItem(r, 1, QTableWidgetItem(_fmt(first.get(key), kind)))
                b.setItem(r, 2, QTableWidgetItem(_fmt(last.get(key), kind)))
        e = self.estimates
        e.setRowCount(0)
        w = self.figures[-1].weighted if self.figures else None
        if w is not None:
            tab = w.table
            e.setRowCount(len(tab))
            for r, row in enumerate(tab.itertuples(index=False)):
                vals = [
                    row.variable,
                    row.statistic,
                    row.category or "",
                    row.original,
                    row.release,
                    row.relative_error,
                ]
                for c, v in enumerate(vals):
                    e.setItem(r, c, QTableWidgetItem(v if isinstance(v, str) else _fmt(v)))

    def _update_buttons(self) -> None:
        i = self.list.currentRow()
        busy = self.runner.busy
        has = 0 <= i < len(self.steps)
        self.up_btn.setEnabled(has and i > 0 and not busy)
        self.down_btn.setEnabled(has and i < len(self.steps) - 1 and not busy)
        self.remove_btn.setEnabled(has and not busy)
        self.run_btn.setEnabled(bool(self.steps) and not busy)
        self.rerun_btn.setEnabled(has and not busy)
        self.undo_btn.setEnabled(self.run is not None and len(self.run) > 0 and not busy)
        self.cancel_btn.setEnabled(busy)
        self.save_btn.setEnabled(bool(self.steps))
        self.use_btn.setEnabled(self.run is not None and len(self.run) > 0 and not busy)

    def _on_progress(self, f: float) -> None:
        self.progress.setValue(int(1000 * f))

    def _on_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self._update_buttons()

    def _on_recipe_changed(self) -> None:
        """A project was opened (or another panel changed the recipe): show its step list."""
        kept = self.state.step_list()
        if kept == self.steps:
            return
        try:
            parsed = parse_steps(kept) if kept else []
        except engine.DPStudioError as exc:
            self.banner.show_message(f"The project's step list cannot be used: {exc}", "error")
            return
        self.steps = [s.to_dict() for s in parsed]
        self._refresh()

    def _on_cancelled(self) -> None:
        self._refresh()
        self.status.setText("Cancelled: the chain is as it was.")

    def _on_data_changed(self) -> None:
        self.runner.cancel()
        self.run, self.figures, self.before, self._run_key = None, [], {}, None
        self._refresh()
