"""The Query desk (issue 14, thesis ch. 5): answer one researcher's statistic under ε-DP by
knowledge refinement, with the data set's privacy-budget ledger.

The office builds the query from the loaded data's columns, types the researcher's DECLARED
range (never filled from the data) and prior, ε and the kind, and presses Answer: the engine
(:func:`dpstudio.engine.query.refine_query`, off the UI thread) spends ε in the ledger and
returns one draw; the panel shows the public answer text to copy to the researcher, and —
marked office only — the refined distribution against the prior and against Laplace noise
of the same ε (thesis Figures 5.5–5.6; the Laplace density is computed analytically).

The ledger is a file of its own, one per data set (engine :mod:`dpstudio.engine.query.ledger`):
by default ``ledgers/<name>-<sha>.ledger.json`` in the app's config folder, keyed by the data
file's SHA-256; the user may name another one (e.g. the file the command line uses, on a shared
drive), remembered at once and saved in the project.  An answer is drawn under the file's lock
and the file is written (atomically, 0600) before the answer is shown, exactly as
``dpstudio query --ledger``: closing without saving the project loses no spending.  A ledger of
other data is never used or reset silently; a ledger an older project held inside is moved to
its file.

Run ``python -m dpstudio.app.widgets.query_panel`` for a preview on the Census sample.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import turns
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import Banner, filter_example
from dpstudio.app.widgets.query_answering import AnswerJob
from dpstudio.app.widgets.query_plots import (  # noqa: F401 - laplace_* re-exported
    DRAW_BINS,
    OFFICE_ONLY,
    QueryPlots,
    laplace_density,
    laplace_in_range,
)
from dpstudio.app.workers import TaskRunner
from dpstudio.engine import query as qd
from dpstudio.engine.errors import DPStudioError
from dpstudio.engine.query import ledger as ql

AGGREGATES = qd.AGGREGATES  # the desk's (engine) constants, never copied
NEEDS_COLUMN = qd.NEEDS_COLUMN
PRIOR_KINDS = ("uniform", "normal", "histogram", "categorical")
PRIOR_HINTS = {
    "uniform": "",
    "normal": "MEAN:SD  e.g. 30000:10000",
    "histogram": "E0,E1,…,Ek:W1,…,Wk  e.g. 0,10,20:1,3",
    "categorical": "VALUE=P,…  e.g. 1=0.2,2=0.8",
}
RANGE_NOTE = (
    "Declared by the researcher or the office, never filled from the data: the "
    "range itself would disclose the data."
)
LEDGER_COLUMNS = ("#", "time (UTC)", "requester", "query", "ε", "remaining", "mechanism", "response")
ALL_REQUESTERS = "(all requesters)"
NO_GROUPS = "(no grouping)"
DEFAULT_BUDGET = "1"
ACCURACY_DELAY_MS = 300  # the form settles before the accuracy is recomputed


def parse_epsilon(text: str) -> float:
    """ε as typed (one-line error naming the field); the desk's range (the engine's one)."""
    try:
        e = float(str(text).strip())
    except ValueError:
        e = float("nan")
    if not (math.isfinite(e) and qd.EPSILON_MIN <= e <= qd.EPSILON_MAX):
        raise qd.ParameterError(
            f"ε: a number between {qd.EPSILON_MIN:g} and {qd.EPSILON_MAX:g}, got {str(text).strip()!r}."
        )
    return e


def _filter_columns(node) -> set[str]:
    """Column names in a parsed filter tree (the engine's, without recursion)."""
    return qd.filter_columns(node)


def input_digest(state: AppState) -> tuple[str, str]:
    """(data set name, SHA-256) the ledger is bound to: the input file's bytes (as the CLI),
    or the loaded table's content when there is no file.
    """
    from dpstudio.engine.io import file_sha256
    from dpstudio.engine.types import frame_sha256

    if state.path and Path(state.path).is_file():
        return Path(state.path).name, file_sha256(state.path)
    return "table in memory", frame_sha256(state.df)


class QueryPanel(QueryPlots):
    """Query builder, office-only refinement plot, public answer and the budget ledger."""

    sig_answered = Signal(dict)
    """A query was answered: the public answer (what the researcher may see)."""
    sig_status = Signal(str)

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = TaskRunner("query", self)
        self.digest_runner = TaskRunner("query-digest", self)
        # the accuracy of every mechanism, recomputed off the UI thread when the form changes
        # (public planning figures: nothing is drawn or spent; the last request wins)
        self.accuracy_runner = TaskRunner("query-accuracy", self)
        self._acc_timer = QTimer(self)
        self._acc_timer.setSingleShot(True)
        self._acc_timer.setInterval(ACCURACY_DELAY_MS)
        self._acc_timer.timeout.connect(self.update_accuracy)
        self.last_answer: qd.QueryAnswer | None = None
        self._digest: tuple[str, str, str] | None = None  # (path, name, sha) cache
        self._build()
        state.sig_data_changed.connect(self._on_data_changed)
        state.sig_types_changed.connect(lambda _c: self._on_data_changed())
        state.sig_query_ledger_changed.connect(self.refresh_ledger)
        self.runner.sig_busy_changed.connect(self._on_busy)
        self._on_data_changed()

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        outer = QHBoxLayout(self)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("query_splitter")
        outer.addWidget(self.splitter)

        form_w = QWidget()
        left = QVBoxLayout(form_w)
        left.addWidget(self._build_query_box())
        left.addWidget(self._build_range_box())
        left.addWidget(self._build_prior_box())
        left.addWidget(self._build_components_box())
        self.components: list[dict] = []  # {'query': Query, 'prior': Prior, 'text': str}
        self.drawn: list[float] | None = None  # bin heights of a drawn prior
        self._build_buttons(left)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(form_w)
        scroll.setMinimumWidth(400)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.splitter.addWidget(scroll)
        self.splitter.addWidget(self._build_right())
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([480, 880])
        self._wire()

    def _build_query_box(self) -> QGroupBox:
        """The query: aggregate, attribute, filter, grouping, requester."""
        gq = QGroupBox("Query")
        fq = QFormLayout(gq)
        self.agg_combo = QComboBox()
        self.agg_combo.addItems(AGGREGATES)
        self.agg_combo.setCurrentText("mean")
        self.agg_combo.setToolTip(
            "count / proportion of records matching the filter; mean, sum, "
            "median of a numeric column; mode (most frequent declared "
            "category); value of one record (individual query)"
        )
        self.col_combo = QComboBox()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText(filter_example(self.state.df))  # the loaded columns (issue 11)
        self.state.sig_data_changed.connect(self._placeholder_later)
        self.filter_error = QLabel()
        self.filter_error.setObjectName("filter_error")
        self.filter_error.setStyleSheet("color:#b00020;")
        self.filter_error.setWordWrap(True)
        self.query_text = QLabel()
        self.query_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.query_text.setStyleSheet("font-family:monospace;")
        self.query_text.setWordWrap(True)
        self.requester_edit = QLineEdit()
        self.requester_edit.setPlaceholderText("who asked (for the ledger; optional)")
        fq.addRow("Aggregate", self.agg_combo)
        fq.addRow("Attribute", self.col_combo)
        fq.addRow("Filter", self.filter_edit)
        fq.addRow("", self.filter_error)
        self.by_combo = QComboBox()
        self.by_combo.setObjectName("by_combo")
        self.by_combo.setToolTip(
            "One answer per declared group (disjoint records: ε in total, thesis Prop. 4)"
        )
        self.groups_edit = QLineEdit()
        self.groups_edit.setObjectName("groups_edit")
        self.groups_edit.setPlaceholderText("declared groups a,b,c (never read from the data)")
        fq.addRow("Group by", self.by_combo)
        fq.addRow("Groups", self.groups_edit)
        fq.addRow("Query", self.query_text)
        fq.addRow("Requester", self.requester_edit)
        return gq

    def _build_range_box(self) -> QGroupBox:
        """The declared range of the answer (never from the data)."""
        gr = QGroupBox("Declared range of the answer")
        fr = QFormLayout(gr)
        note = QLabel("⚠ " + RANGE_NOTE)
        note.setObjectName("range_note")
        note.setWordWrap(True)
        note.setStyleSheet("color:#6a4a00;")
        fr.addRow(note)
        self.lo_edit, self.hi_edit, self.step_edit = QLineEdit(), QLineEdit(), QLineEdit()
        self.lo_edit.setPlaceholderText("lower")
        self.hi_edit.setPlaceholderText("upper")
        self.step_edit.setPlaceholderText("default")
        for w in (self.lo_edit, self.hi_edit, self.step_edit):
            w.setMinimumWidth(50)
        self.num_row = QWidget()
        h = QHBoxLayout(self.num_row)
        h.setContentsMargins(0, 0, 0, 0)
        for w in (self.lo_edit, QLabel("to"), self.hi_edit, QLabel("step"), self.step_edit):
            h.addWidget(w)
        self.cats_edit = QLineEdit()
        self.cats_edit.setPlaceholderText("categories a,b,c")
        self.ordered_check = QCheckBox("ordered")
        self.ordered_check.setToolTip("Ordinal categories: distance |i − j| (else 0/1)")
        self.cat_row = QWidget()
        h2 = QHBoxLayout(self.cat_row)
        h2.setContentsMargins(0, 0, 0, 0)
        h2.addWidget(self.cats_edit, 1)
        h2.addWidget(self.ordered_check)
        self.categorical_check = QCheckBox("categorical answer")
        self.categorical_check.setToolTip("value(…) of a category instead of a number")
        fr.addRow("Numeric", self.num_row)
        fr.addRow("Categories", self.cat_row)
        fr.addRow("", self.categorical_check)
        return gr

    def _build_prior_box(self) -> QGroupBox:
        """The researcher's prior, ε and the kind."""
        gp = QGroupBox("Researcher's prior and privacy")
        fp = QFormLayout(gp)
        self.prior_combo = QComboBox()
        self.prior_combo.addItems(PRIOR_KINDS)
        self.prior_edit = QLineEdit()
        self.eps_edit = QLineEdit("0.5")
        self.eps_edit.setToolTip("ε spent by this answer (added exactly as typed in the ledger)")
        self.kind_combo = QComboBox()
        self.kind_combo.addItems(["statistical", "individual"])
        self.kind_combo.setToolTip(
            "statistical: αu/αd ≤ e^ε (any two data sets); individual "
            "(value of one record): αu ≤ e^ε, αd ≥ e^−ε"
        )
        self.delta_edit = QLineEdit()
        self.delta_edit.setPlaceholderText("default: the query's sensitivity")
        self.delta_edit.setToolTip(
            "Sensitivity Δ of the Laplace curve drawn for comparison (scale Δ/ε); only the plot "
            "uses it. Default: count 1, proportion 1/n, sum the width of the column's declared "
            "domain (else of the range), mean ≈ that width / the records matched, median and "
            "value the range's width"
        )
        self.mechanism_combo = QComboBox()
        self.mechanism_combo.setObjectName("mechanism_combo")
        self.mechanism_combo.addItems(list(qd.MECHANISMS))
        self.mechanism_combo.setToolTip(
            "auto: the mechanism with the smaller expected error for the declared prior and ε "
            "(Preview shows every mechanism's); refinement: the researcher's prior refined "
            "(thesis ch. 5); laplace/geometric, gaussian, exponential: noise calibrated to the "
            "statistic (sums and means need the column's declared domain)"
        )
        self.gdelta_edit = QLineEdit()
        self.gdelta_edit.setObjectName("gaussian_delta")
        self.gdelta_edit.setPlaceholderText("δ of the Gaussian mechanism, e.g. 1e-6 (fixed per ledger)")
        fp.addRow("Mechanism", self.mechanism_combo)
        fp.addRow("δ (Gaussian)", self.gdelta_edit)
        fp.addRow("Prior", self.prior_combo)
        fp.addRow("Parameters", self.prior_edit)
        fp.addRow("ε", self.eps_edit)
        fp.addRow("Kind", self.kind_combo)
        fp.addRow("Laplace Δ (plot)", self.delta_edit)
        self.draw_check = QCheckBox("Draw the prior on the plot with the mouse")
        self.draw_check.setObjectName("draw_check")
        self.draw_check.setToolTip(
            "Press and drag on the plot to set the height of each bin; the drawn histogram is "
            "normalised and used as the prior (its parameters appear above, editable)"
        )
        fp.addRow("", self.draw_check)
        return gp

    def _build_components_box(self) -> QGroupBox:
        """The components of a vector query (thesis §5.3)."""
        gc = QGroupBox("Multicomponent query (thesis §5.3)")
        vc = QVBoxLayout(gc)
        self.comp_list = QListWidget()
        self.comp_list.setObjectName("components")
        self.comp_list.setMaximumHeight(90)
        self.comp_list.setToolTip("Two or more components: Answer returns the vector")
        hc = QHBoxLayout()
        self.add_comp_btn = QPushButton("Add query above as a component")
        self.del_comp_btn = QPushButton("Remove")
        hc.addWidget(self.add_comp_btn)
        hc.addWidget(self.del_comp_btn)
        hm = QHBoxLayout()
        self.mode_combo = QComboBox()
        self.mode_combo.addItems(list(qd.MODES))
        self.mode_combo.setToolTip(
            "joint: one refinement over the product range, one ε for the vector; split: each "
            "component with ε/n (ε each when the filters are disjoint), drawn independently"
        )
        self.distance_combo = QComboBox()
        self.distance_combo.addItems(list(qd.DISTANCES))
        self.distance_combo.setToolTip(
            "joint: distance over the product range, each component as a fraction of its "
            "range (priority: the first component decides)"
        )
        hm.addWidget(QLabel("Mode"))
        hm.addWidget(self.mode_combo)
        hm.addWidget(QLabel("distance"))
        hm.addWidget(self.distance_combo, 1)
        vc.addWidget(self.comp_list)
        vc.addLayout(hc)
        vc.addLayout(hm)
        return gc

    def _build_buttons(self, left: QVBoxLayout) -> None:
        """The error line and the Preview / Answer / Cancel buttons."""
        self.error_label = QLabel()
        self.error_label.setObjectName("query_error")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color:#b00020;")
        left.addWidget(self.error_label)
        bh = QHBoxLayout()
        self.preview_btn = QPushButton("Preview (spends nothing)")
        self.preview_btn.setToolTip(
            "The accuracy of every mechanism and, for refinement, the refined distribution "
            "(office only), without answering"
        )
        self.answer_btn = QPushButton("Answer — spend ε")
        self.answer_btn.setObjectName("answer_button")
        self.answer_btn.setDefault(True)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setEnabled(False)
        self.cancel_btn.setToolTip("A cancelled answer spends nothing and shows nothing")
        bh.addWidget(self.preview_btn)
        bh.addWidget(self.answer_btn)
        bh.addWidget(self.cancel_btn)
        left.addLayout(bh)
        left.addStretch(1)

    def _build_right(self) -> QWidget:
        """Office-only plot, the public answer and the ledger."""
        right_w = QWidget()
        right = QVBoxLayout(right_w)
        self.office_label = QLabel("⚠ " + OFFICE_ONLY)
        self.office_label.setObjectName("office_only")
        self.office_label.setWordWrap(True)
        self.office_label.setStyleSheet(
            "background:#fde2e1; border:1px solid #e08a85; color:#5c0b06; padding:4px; font-weight:bold;"
        )
        right.addWidget(self.office_label)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMinimumHeight(220)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setLabel("left", "probability per point")
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.legend = self.plot.addLegend(offset=(-10, 10))
        right.addWidget(self.plot, 3)
        hv = QHBoxLayout()
        hv.addWidget(QLabel("Plot"))
        self.view_combo = QComboBox()
        self.view_combo.setObjectName("view_combo")
        self.view_combo.setToolTip("Which group or component of the last answer to plot")
        hv.addWidget(self.view_combo, 1)
        right.addLayout(hv)
        self.stats_label = QLabel()
        self.stats_label.setObjectName("plot_stats")
        self.stats_label.setWordWrap(True)
        right.addWidget(self.stats_label)

        gacc = QGroupBox("Before answering: accuracy of every mechanism (public, nothing drawn)")
        vacc = QVBoxLayout(gacc)
        self.accuracy_label = QLabel()
        self.accuracy_label.setObjectName("accuracy_label")
        self.accuracy_label.setWordWrap(True)
        self.accuracy_label.setTextFormat(Qt.TextFormat.RichText)
        self.accuracy_label.setToolTip(
            "Expected error of every mechanism for this query, computed from public facts only "
            "(the declared range, prior, domains, ε, δ and the number of records): no data is read"
        )
        vacc.addWidget(self.accuracy_label)
        right.addWidget(gacc)

        ga = QGroupBox("Public answer — copy this to the researcher")
        va = QVBoxLayout(ga)
        self.answer_text = QPlainTextEdit()
        self.answer_text.setObjectName("public_answer")
        self.answer_text.setReadOnly(True)
        self.answer_text.setMaximumHeight(110)
        self.copy_btn = QPushButton("Copy answer")
        self.copy_btn.setEnabled(False)
        va.addWidget(self.answer_text)
        va.addWidget(self.copy_btn, 0, Qt.AlignmentFlag.AlignRight)
        right.addWidget(ga, 1)

        gl = QGroupBox("Privacy-budget ledger of this data set (private)")
        vl = QVBoxLayout(gl)
        hb = QHBoxLayout()
        self.budget_edit = QLineEdit(DEFAULT_BUDGET)
        self.budget_edit.setMaximumWidth(80)
        self.budget_edit.setToolTip(
            "The data set's total ε for all answers (sequential composition); fixed once the ledger exists"
        )
        self.budget_label = QLabel()
        self.budget_label.setObjectName("budget_label")
        self.choose_ledger_btn = QPushButton("Use another ledger file…")
        self.choose_ledger_btn.setToolTip(
            "The data set's ledger file: e.g. the one `dpstudio query --ledger` uses, on a shared drive"
        )
        self.export_btn = QPushButton("Export audit trail…")
        hb.addWidget(QLabel("Total budget ε"))
        hb.addWidget(self.budget_edit)
        hb.addWidget(self.budget_label, 1)
        hb.addWidget(self.choose_ledger_btn)
        hb.addWidget(self.export_btn)
        vl.addLayout(hb)
        self.ledger_path_label = QLabel()
        self.ledger_path_label.setObjectName("ledger_path_label")
        self.ledger_path_label.setWordWrap(True)
        self.ledger_path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        vl.addWidget(self.ledger_path_label)
        self.banner = Banner(closable=False)
        vl.addWidget(self.banner)
        self.ledger_table = QTableWidget(0, len(LEDGER_COLUMNS))
        self.ledger_table.setObjectName("ledger_table")
        self.ledger_table.setHorizontalHeaderLabels(LEDGER_COLUMNS)
        self.ledger_table.verticalHeader().setVisible(False)
        self.ledger_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        hh = self.ledger_table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        hr = QHBoxLayout()
        self.requester_filter = QComboBox()
        self.requester_filter.setObjectName("requester_filter")
        self.requester_filter.setToolTip(
            "History of the answers of one requester (thesis Protocol 2 is per user)"
        )
        self.requester_summary = QLabel()
        self.requester_summary.setObjectName("requester_summary")
        self.requester_summary.setWordWrap(True)
        self.answers_btn = QPushButton("Export researcher's answer file…")
        self.answers_btn.setObjectName("answers_button")
        self.answers_btn.setToolTip(
            "A PUBLIC file for the researcher chosen on the left: their answers' query, mechanism, ε, "
            "response and 95 % interval only"
        )
        hr.addWidget(QLabel("History of"))
        hr.addWidget(self.requester_filter)
        hr.addWidget(self.requester_summary, 1)
        hr.addWidget(self.answers_btn)
        vl.addLayout(hr)
        hq = QHBoxLayout()
        self.req_budget_edit = QLineEdit()
        self.req_budget_edit.setObjectName("requester_budget_edit")
        self.req_budget_edit.setPlaceholderText("NAME=ε: the budget of one requester (an office decision)")
        self.req_budget_btn = QPushButton("Set requester budget")
        self.req_budget_btn.setToolTip(
            "Once the ledger gives budgets per requester, every answer needs a requester with budget "
            "left; the data set's total still caps them all"
        )
        hq.addWidget(self.req_budget_edit, 1)
        hq.addWidget(self.req_budget_btn)
        vl.addLayout(hq)
        vl.addWidget(self.ledger_table)
        right.addWidget(gl, 2)
        return right_w

    def _wire(self) -> None:
        """Signals of the form."""
        self.agg_combo.currentTextChanged.connect(self._on_agg_changed)
        for w in (self.col_combo, self.prior_combo, self.kind_combo, self.by_combo, self.mode_combo):
            w.currentTextChanged.connect(self._validate)
        self.groups_edit.textChanged.connect(self._validate)
        self.mechanism_combo.currentTextChanged.connect(self._validate)
        self.gdelta_edit.textChanged.connect(self._validate)
        self.requester_filter.currentTextChanged.connect(lambda _t: self._fill_ledger_table())
        self.answers_btn.clicked.connect(self.answers_dialog)
        self.req_budget_btn.clicked.connect(lambda: self.set_requester_budget(self.req_budget_edit.text()))
        self.add_comp_btn.clicked.connect(self.add_component)
        self.del_comp_btn.clicked.connect(self.remove_component)
        self.draw_check.toggled.connect(self._on_draw_toggled)
        self.view_combo.currentIndexChanged.connect(self._replot_view)
        self.plot.viewport().installEventFilter(self)
        self.prior_combo.currentTextChanged.connect(
            lambda k: self.prior_edit.setPlaceholderText(PRIOR_HINTS.get(k, ""))
        )
        for w in (
            self.filter_edit,
            self.lo_edit,
            self.hi_edit,
            self.step_edit,
            self.cats_edit,
            self.prior_edit,
            self.eps_edit,
            self.delta_edit,
            self.budget_edit,
        ):
            w.textChanged.connect(self._validate)
        for w in (self.ordered_check, self.categorical_check):
            w.toggled.connect(self._validate)
        self.answer_btn.clicked.connect(self.answer)
        self.preview_btn.clicked.connect(self.preview)
        self.cancel_btn.clicked.connect(self.runner.cancel)
        self.copy_btn.clicked.connect(self.copy_answer)
        self.export_btn.clicked.connect(self.export_dialog)
        self.choose_ledger_btn.clicked.connect(self.choose_ledger_dialog)

    # ------------------------------------------------------------------ the request
    def _set_placeholder(self) -> None:
        self.filter_edit.setPlaceholderText(filter_example(self.state.df))  # the loaded columns

    def _placeholder_later(self) -> None:
        """The filter's example for the new table: now when shown, else in a turn of its own
        (not in the turn that installs a file, issue 24 §5).
        """
        if self.isVisible():
            self._set_placeholder()
        else:
            turns.later(self._set_placeholder, owner=self, key="placeholder")

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        turns.flush(self, "placeholder")  # shown before its turn came: set now
        super().showEvent(event)

    def _on_data_changed(self) -> None:
        df = self.state.df
        cur = self.col_combo.currentText()
        self.col_combo.blockSignals(True)
        self.col_combo.clear()
        if df is not None:
            self.col_combo.addItems([str(c) for c in df.columns])
            if cur in [str(c) for c in df.columns]:
                self.col_combo.setCurrentText(cur)
        self.col_combo.blockSignals(False)
        by = self.by_combo.currentText()
        self.by_combo.blockSignals(True)
        self.by_combo.clear()
        self.by_combo.addItem(NO_GROUPS)
        if df is not None:
            self.by_combo.addItems([str(c) for c in df.columns])
            if by in [str(c) for c in df.columns]:
                self.by_combo.setCurrentText(by)
        self.by_combo.blockSignals(False)
        self.components.clear()
        self.comp_list.clear()
        self._digest = None
        self._on_agg_changed(self.agg_combo.currentText())
        self.refresh_ledger()

    def _on_agg_changed(self, agg: str) -> None:
        self.col_combo.setEnabled(agg in NEEDS_COLUMN)
        self.kind_combo.setCurrentText("individual" if agg == "value" else "statistical")
        if agg == "proportion" and not (self.lo_edit.text() or self.hi_edit.text()):
            # a proportion's range is [0, 1] whatever the data (the engine's default)
            self.lo_edit.setText("0")
            self.hi_edit.setText("1")
            self.step_edit.setText("0.001")
        self._validate()

    def categorical(self) -> bool:
        agg = self.agg_combo.currentText()
        return agg == "mode" or (agg == "value" and self.categorical_check.isChecked())

    def query_string(self) -> str:
        agg = self.agg_combo.currentText()
        col = self.col_combo.currentText()
        if agg in NEEDS_COLUMN:
            head = f"{agg}({col if col.isidentifier() else '`' + col + '`'})"
        else:
            head = agg
        flt = self.filter_edit.text().strip()
        by = self.by_combo.currentText()
        grp = "" if by in ("", NO_GROUPS) else " by " + (by if by.isidentifier() else f"`{by}`")
        return head + (f" where {flt}" if flt else "") + grp

    def groups(self) -> list | None:
        """The declared groups of a '… by COL' query (typed, never read from the data)."""
        by = self.by_combo.currentText()
        if by in ("", NO_GROUPS):
            return None
        txt = self.groups_edit.text().strip()
        if not txt:
            raise qd.ParameterError(f"Groups: declare the groups of {by} (a,b,c), never read from the data.")
        return [qd.parse_literal(g.strip()) for g in txt.split(",") if g.strip()]

    def multi(self) -> bool:
        return len(self.components) >= 2

    def range_spec(self) -> str:
        if self.categorical():
            return self.cats_edit.text().strip()
        parts = [self.lo_edit.text().strip(), self.hi_edit.text().strip()]
        if self.step_edit.text().strip():
            parts.append(self.step_edit.text().strip())
        return ":".join(parts)

    def build_request(self) -> dict[str, Any]:
        """The engine objects of the current form (ParameterError naming the field)."""
        df = self.state.df
        if df is None:
            raise qd.ParameterError("Open a data file first (Ctrl+O).")
        agg = self.agg_combo.currentText()
        if agg in NEEDS_COLUMN and not self.col_combo.currentText():
            raise qd.ParameterError(f"Attribute: {agg} needs a column.")
        q = qd.parse_query(self.query_string())
        col = q.column
        if col and self.state.roles.get(col) == "identifier":
            raise qd.ParameterError(
                f"Attribute {col!r} is an identifier: use it in the filter "
                f"(value(COL) where {col} == …), not as the answer."
            )
        spec = self.range_spec()
        if not spec or spec.startswith(":") or spec.endswith(":") or "::" in spec:
            raise qd.ParameterError(
                "Range: declare "
                + ("the categories a,b,c" if self.categorical() else "LOWER and UPPER")
                + " (never taken from the data)."
            )
        try:
            rng = qd.resolve_range(
                q, {"answer": spec}, df, self.ordered_check.isChecked(), types=self.state.types
            )
        except qd.ParameterError as exc:
            raise qd.ParameterError(f"Range: {exc}") from None
        if self.categorical() and not isinstance(rng, qd.CategoricalRange):
            raise qd.ParameterError("Range: declare categories a,b,c for a categorical answer.")
        pk, pp = self.prior_combo.currentText(), self.prior_edit.text().strip()
        if pk != "uniform" and not pp:
            raise qd.ParameterError(f"Prior: give the {pk} prior's parameters ({PRIOR_HINTS[pk]}).")
        prior = qd.parse_prior(pk + (f":{pp}" if pk != "uniform" else ""), rng)
        prior.weights()
        eps = parse_epsilon(self.eps_edit.text())
        try:
            total = float(self.budget_edit.text())
        except ValueError:
            total = float("nan")
        if not (total > 0 and math.isfinite(total)):
            raise qd.ParameterError("Total budget ε: a number > 0.")
        groups = self.groups()
        if groups is not None:  # the engine's checks (e.g. proportion … by is refused) before any run
            qd.validate_request(df, q, prior, self.kind_combo.currentText(), groups)
        mech, gdelta = self.mechanism(q)
        req = {
            "query": q,
            "prior": prior,
            "epsilon": eps,
            "total": total,
            "kind": self.kind_combo.currentText(),
            "requester": self.requester_edit.text().strip() or None,
            "groups": groups,
            "multi": None,
            "mechanism": mech,
            "delta": gdelta,
        }
        return req

    def mechanism(self, q: qd.Query | None = None) -> tuple[str, float | None]:
        """(mechanism chosen in the form, δ typed or None); one-line errors naming the field."""
        mech = self.mechanism_combo.currentText() or "auto"
        txt = self.gdelta_edit.text().strip()
        gdelta = None
        if txt:
            try:
                gdelta = qd.mechanisms.check_delta(txt)
            except DPStudioError as exc:
                raise qd.ParameterError(f"δ (Gaussian): {exc}") from None
        if (
            q is not None
            and mech not in ("auto", "refinement")
            and mech not in qd.mechanisms.applicable(q.agg)
        ):
            raise qd.ParameterError(
                f"Mechanism: {q.agg} is answered by refinement or "
                f"{', '.join(qd.mechanisms.applicable(q.agg)) or 'refinement only'}."
            )
        if mech == "gaussian" and gdelta is None:
            led = self.ledger()
            if led is None or led.delta is None:
                raise qd.ParameterError(
                    "δ (Gaussian): give δ, e.g. 1e-6 (then fixed for this data set's ledger)."
                )
        return mech, gdelta

    def assess_request(self, req: dict) -> dict | None:
        """The public accuracy of every mechanism for a one-component request (no data read)."""
        if req["multi"] is not None:
            return None
        led = self.ledger()
        delta = req["delta"] if req["delta"] is not None else (led.delta if led is not None else None)
        groups = None if req["groups"] is None else {req["query"].by: req["groups"]}
        return qd.assess(
            req["query"],
            req["epsilon"],
            prior=req["prior"],
            n_total=len(self.state.df),
            bounds=dict(self.state.domains),
            delta=delta,
            groups=groups,
        )

    def show_accuracy(self, acc: dict | None, chosen: str | None = None) -> None:
        """Every mechanism's expected error and the width of the 95 % interval its answer will
        print (public planning figures), and the choice of auto or the office.
        """
        if not acc:
            self.accuracy_label.setText("")
            return
        rows = []
        pick = chosen or (acc["auto"] if self.mechanism_combo.currentText() == "auto" else None)
        for name, v in acc["mechanisms"].items():
            e = v["expected_error"]
            if e is None:
                rows.append(f"<li>{name}: n/a ({v['how']})</li>")
                continue
            w = v.get("interval_width")
            wtxt = (
                "" if "interval_width" not in v else
                "; no value interval (a rank statement)" if w is None else f"; 95 % interval width {w:.4g}"
            )  # fmt: skip
            mark = ("<b>", " ◀</b>") if name == pick else ("", "")
            rows.append(f"<li>{mark[0]}{name}: expected error {e:.4g}{wtxt}{mark[1]}</li>")
        head = (
            f"<b>Accuracy before spending</b> ({acc['measure']}; public planning figures, no data read, "
            "nothing drawn):"
        )
        mech = self.mechanism_combo.currentText() or "auto"
        why = acc["why"] if mech == "auto" else f"{chosen or mech}: chosen by the office"
        self.accuracy_label.setText(head + "<ul style='margin:0'>" + "".join(rows) + f"</ul>{why}")

    def update_accuracy(self) -> bool:
        """Recompute the accuracy of every mechanism for the form's query off the UI thread
        (a large refinement grid takes a while); nothing is drawn or spent.
        """
        if self.state.df is None or self.multi() or self.runner.busy:
            return False
        try:
            req = self.build_request()
        except DPStudioError:
            return False
        led = self._ledger_snapshot if hasattr(self, "_ledger_snapshot") else None
        mech = req.get("mechanism") or "auto"
        kw = {
            "prior": req["prior"],
            "n_total": len(self.state.df),
            "bounds": dict(self.state.domains),
            "delta": req["delta"] if req["delta"] is not None else (led.delta if led is not None else None),
            "groups": None if req["groups"] is None else {req["query"].by: req["groups"]},
            "only": None if mech == "auto" else mech,
        }
        q, eps = req["query"], req["epsilon"]

        def work(progress, check_cancel):
            return qd.assess(q, eps, **kw)

        def failed(msg, _details):
            self.accuracy_label.setText(f"Accuracy: {msg}")

        self.accuracy_runner.start(work, finished=self.show_accuracy, errored=failed)
        return True

    def build_multi_request(self) -> dict[str, Any]:
        """The request when the component list holds 2+ components (the form only supplies ε)."""
        eps = parse_epsilon(self.eps_edit.text())
        try:
            total = float(self.budget_edit.text())
        except ValueError:
            total = float("nan")
        if not (total > 0 and math.isfinite(total)):
            raise qd.ParameterError("Total budget ε: a number > 0.")
        mq = qd.MultiQuery(
            tuple(c["query"] for c in self.components), "; ".join(c["text"] for c in self.components)
        )
        priors = [c["prior"] for c in self.components]
        mode = self.mode_combo.currentText()
        if mode == "joint" and math.prod(p.support.size for p in priors) > qd.MAX_SUPPORT:
            raise qd.ParameterError(
                "Components: the product of the declared ranges is too large for a joint answer: "
                "coarser steps, or mode split."
            )
        return {
            "query": mq,
            "prior": priors,
            "epsilon": eps,
            "total": total,
            "kind": None,
            "requester": self.requester_edit.text().strip() or None,
            "groups": None,
            "multi": {"mode": mode, "distance": self.distance_combo.currentText()},
            "mechanism": "refinement",
            "delta": None,
        }

    # ------------------------------------------------------------------ components
    def add_component(self) -> bool:
        """Add the query of the form (with its range and prior) to the component list."""
        try:
            req = self.build_request()
        except DPStudioError as exc:
            self.error_label.setText(str(exc))
            return False
        if req["groups"] is not None:
            self.error_label.setText(
                "Components: a '… by COL' query cannot be a component; remove the grouping."
            )
            return False
        q = req["query"]
        text = q.describe()
        if any(c["text"] == text for c in self.components):
            self.error_label.setText(f"Components: {text!r} is already a component.")
            return False
        self.components.append({"query": q, "prior": req["prior"], "text": text})
        self.comp_list.addItem(f"{text}  —  {req['prior'].describe()}")
        self._validate()
        return True

    def remove_component(self) -> None:
        row = self.comp_list.currentRow()
        if row < 0:
            row = self.comp_list.count() - 1
        if row >= 0:
            self.comp_list.takeItem(row)
            del self.components[row]
        self._validate()

    def _validate(self, *_a, replot: bool = True) -> bool:
        self.query_text.setText(
            "; ".join(c["text"] for c in self.components) if self.multi() else self.query_string()
        )
        ferr = ""
        df = self.state.df
        try:
            node = qd.parse_filter(self.filter_edit.text())
            if df is not None:
                missing = [c for c in sorted(_filter_columns(node)) if c not in [str(x) for x in df.columns]]
                if missing:
                    ferr = f"Column {missing[0]!r} is not in the data."
        except DPStudioError as exc:
            ferr = str(exc)
        self.filter_error.setText(ferr)
        self.filter_error.setVisible(bool(ferr))
        cat = self.categorical()
        self.num_row.setEnabled(not cat)
        self.cat_row.setEnabled(cat)
        self.categorical_check.setVisible(self.agg_combo.currentText() == "value")
        err = ""
        prior = None
        try:
            if self.multi():
                self.build_multi_request()
            else:
                req = self.build_request()
                prior = req["prior"]
        except DPStudioError as exc:
            err = str(exc)
        if ferr and not self.multi():
            err = "Filter: " + ferr
        self.answer_btn.setText(
            f"Answer {len(self.components)} components — spend ε" if self.multi() else "Answer — spend ε"
        )
        self.mode_combo.setEnabled(self.multi())
        self.distance_combo.setEnabled(self.multi() and self.mode_combo.currentText() == "joint")
        self.error_label.setText(err)
        busy = self.runner.busy
        self.answer_btn.setEnabled(not err and not busy)
        self.preview_btn.setEnabled(not err and not busy)
        if not err and not busy:
            self._acc_timer.start()  # the accuracy before spending, once the form settles
        elif err:
            self._acc_timer.stop()
            self.accuracy_runner.cancel()
            self.accuracy_label.setText("")
        if not busy and replot and self.draw_check.isChecked():
            self._plot_drawn()
        elif prior is not None and not busy and replot:
            self._plot_prior(prior)  # the prior alone is data independent: safe to draw
        return not err

    # ------------------------------------------------------------------ the ledger
    def _dataset(self) -> tuple[str, str]:
        """(name, SHA-256) of the loaded data (computed here if the background task has not yet)."""
        key = self.state.path or ""
        if self._digest is None or self._digest[0] != key:
            name, sha = input_digest(self.state)
            self._digest = (key, name, sha)
        return self._digest[1], self._digest[2]

    def _digest_ready(self) -> bool:
        return self._digest is not None and self._digest[0] == (self.state.path or "")

    def _start_digest(self) -> None:
        """The data file's SHA-256 (the ledger's key) off the UI thread: a large file takes a while."""
        st = self.state
        if st.df is None:
            return
        key = st.path or ""

        def work(progress, check_cancel):
            return (key, *input_digest(st))

        def done(out):
            if out[0] == (self.state.path or ""):
                self._digest = out
                self.refresh_ledger()

        self.digest_runner.start(work, finished=done)

    def _default_path(self, name: str, sha: str) -> str:
        from dpstudio.app import settings as app_settings

        chosen = app_settings.ledger_for(sha)
        return chosen or str(app_settings.ledgers_dir() / ql.default_ledger_name(name, sha))

    def ledger_path(self) -> str | None:
        """The loaded data set's ledger file: the one chosen for it (project, then the app's
        memory of the choice), else the default in the app's config folder.  None without data.
        """
        if self.state.df is None:
            return None
        name, sha = self._dataset()
        return self.state.query_ledger_file() or self._default_path(name, sha)

    def _snapshot(self) -> tuple[qd.BudgetLedger | None, str]:
        """(the ledger on file or None when there is none yet, '') or (None, why it cannot be used)."""
        path = self.ledger_path()
        if path is None:
            return None, ""
        try:
            led = ql.read_ledger_file(path)
        except DPStudioError as exc:
            return None, f"{exc} Queries are refused until the ledger is usable."
        if led is None:
            ref = self.state.query_ledger_file()
            name, sha = self._dataset()
            if ref and os.path.abspath(ref) != os.path.abspath(self._default_path(name, sha)):
                return None, (
                    f"The ledger file {ref} named by the project is missing: put it back, or "
                    "use another ledger file (a new one starts a new budget)."
                )
            return None, ""
        name, sha = self._dataset()
        if led.digest and led.digest != sha:
            return None, (
                f"The ledger file {path} belongs to another data set ({led.dataset}), not to "
                f"{name}: queries are refused. Open {led.dataset}, or use another ledger file."
            )
        return led, ""

    def ledger(self) -> qd.BudgetLedger | None:
        """The loaded data set's ledger as on file now (None when there is none, or unusable)."""
        return self._snapshot()[0]

    def _migrate_legacy(self) -> str:
        """Move a ledger that an older project held inside to its data set's ledger file."""
        data = self.state.legacy_query_ledger()
        if data is None or self.state.df is None:
            return ""
        try:
            led = qd.BudgetLedger.from_dict(data, source="the ledger inside the project")
        except DPStudioError as exc:
            return str(exc)
        name, sha = self._dataset()
        if led.digest and led.digest != sha:
            from dpstudio.app import settings as app_settings

            target = app_settings.ledger_for(led.digest) or str(
                app_settings.ledgers_dir() / ql.default_ledger_name(led.dataset or "data", led.digest)
            )
        else:
            target = self.ledger_path() or ""
        try:
            moved = ql.migrate_embedded(led, target)
        except DPStudioError as exc:
            return str(exc)
        if not moved:
            return (
                f"The project holds a query ledger of an older dpstudio ({len(led.entries)} answers) that "
                f"differs from the ledger file {target}: use another ledger file for it (a new name "
                "receives the project's ledger). Queries are refused until then."
            )
        self.state.drop_legacy_query_ledger()
        self.sig_status.emit(f"The project's query ledger was moved to its own file: {target}")
        return ""

    def refresh_ledger(self) -> None:
        if self.state.df is not None and not self._digest_ready():
            if not self.digest_runner.busy:
                self._start_digest()
            self.ledger_path_label.setText("Finding the data set's ledger (fingerprint of the data file)…")
            return
        why = self._migrate_legacy()
        led, why2 = self._snapshot()
        why = why or why2
        path = self.ledger_path()
        self.export_btn.setEnabled(led is not None)
        self.choose_ledger_btn.setEnabled(path is not None)
        entries = led.entries if led is not None else []
        self._ledger_snapshot = led
        self._fill_requesters(led)
        self._fill_ledger_table()
        if led is not None:
            self.budget_edit.setText(f"{led.total:g}")
            self.budget_edit.setReadOnly(True)
            self.budget_label.setText(
                f"spent {led.spent:g} on {len(entries)} answers · <b>remaining {led.remaining:g}</b>"
            )
        else:
            self.budget_edit.setReadOnly(False)
            self.budget_label.setText(
                "no answers yet: the ledger starts with the first answer" if not why else ""
            )
        self.ledger_path_label.setText(
            ""
            if path is None
            else f"Ledger file (private, written at every answer; the command line's --ledger): {path}"
        )
        if why:
            self.banner.show_message(why, "error")
        else:
            self.banner.hide()

    def _fill_requesters(self, led) -> None:
        """The requesters of the ledger in the History box, and their spending."""
        cur = self.requester_filter.currentText()
        names = [r["requester"] for r in led.requester_summary()] if led is not None else []
        self.requester_filter.blockSignals(True)
        self.requester_filter.clear()
        self.requester_filter.addItems([ALL_REQUESTERS, *names])
        if cur in names:
            self.requester_filter.setCurrentText(cur)
        self.requester_filter.blockSignals(False)
        if led is None:
            self.requester_summary.setText("")
            return
        parts = []
        for r in led.requester_summary():
            b = "" if r["budget"] is None else f" of {r['budget']:g}"
            parts.append(f"{r['requester']}: {r['spent']:g}{b} on {r['answers']}")
        self.requester_summary.setText("spent per requester — " + "; ".join(parts) if parts else "")

    def _fill_ledger_table(self) -> None:
        """The ledger's answers (of the requester chosen in the History box)."""
        led = getattr(self, "_ledger_snapshot", None)
        entries = led.entries if led is not None else []
        who = self.requester_filter.currentText()
        if who and who != ALL_REQUESTERS:
            entries = [e for e in entries if (e.get("requester") or "(none)") == who]
        self.ledger_table.setRowCount(len(entries))
        for r, e in enumerate(entries):
            vals = [
                e.get("n"),
                e.get("time"),
                e.get("requester") or "",
                e.get("query"),
                f"{e.get('epsilon'):g}",
                f"{e.get('remaining', float('nan')):g}",
                e.get("mechanism") or "refinement",
                e.get("response"),
            ]
            for c, v in enumerate(vals):
                self.ledger_table.setItem(r, c, QTableWidgetItem(str(v)))
        self.ledger_table.scrollToBottom()
        self.answers_btn.setEnabled(bool(entries) and who not in ("", ALL_REQUESTERS))

    def answers_dialog(self) -> None:
        who = self.requester_filter.currentText()
        path, _ = QFileDialog.getSaveFileName(
            self, f"Answer file for {who} (PUBLIC: their answers only)", "answers.json", "JSON (*.json)"
        )
        if path:
            self.export_answers(path, who)

    def export_answers(self, path: str, requester: str) -> str | None:
        """Write the PUBLIC answer file of ``requester`` (their answers' public fields only);
        the target is checked first (never the data file or the ledger, a folder or a FIFO).
        """
        led = self.ledger()
        if led is None:
            self.error_label.setText("No ledger yet: nothing to export.")
            return None
        who = None if requester in ("(none)", "") else requester
        try:
            out = qd.export_answer_file(path, led, who, inputs=[self.state.path, self.ledger_path()])
        except (DPStudioError, OSError) as exc:
            self.error_label.setText(f"Answer file: {exc}")
            return None
        self.sig_status.emit(f"Answer file for {requester} written (public): {Path(out).name}")
        return out

    def choose_ledger_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self,
            "The data set's ledger file (an existing one, or a new name)",
            self.ledger_path() or "ledger.json",
            "Query ledger (*.json)",
            options=QFileDialog.Option.DontConfirmOverwrite,
        )
        if path:
            self.choose_ledger(path)

    def choose_ledger(self, path: str) -> bool:
        """Use the ledger file ``path`` for the loaded data set (an existing ledger of this
        data, or a new name: a new budget, or the older project's ledger if one is pending).
        Remembered at once (app settings) and saved with the project.
        """
        from dpstudio.app import settings as app_settings

        if self.state.df is None:
            return False
        path = os.path.abspath(path)
        name, sha = self._dataset()
        try:
            led = ql.read_ledger_file(path)
            ql.check_ledger_path(path)
            if led is not None and led.digest and led.digest != sha:
                raise qd.ParameterError(
                    f"{path} is the ledger of another data set ({led.dataset}): choose this data set's."
                )
        except DPStudioError as exc:
            self.error_label.setText(str(exc))
            return False
        self.error_label.setText("")
        app_settings.set_ledger_for(sha, path)
        self.state.set_query_ledger_file(path)  # emits: refresh (and moves a pending older ledger)
        return True

    def _input_files(self) -> list[str]:
        st = self.state
        srcs = getattr(getattr(st, "recipe", None), "hierarchies", None) or {}
        return [str(p) for p in (getattr(st, "path", None),) if p] + [
            str(s["path"]) for s in srcs.values() if isinstance(s, dict) and s.get("path")
        ]

    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export query ledger (private audit trail)",
            "query_ledger.csv",
            "CSV (*.csv);;JSON (*.json)",
        )
        if path:
            self.export_ledger(path)

    def set_requester_budget(self, text: str) -> bool:
        """``NAME=EPSILON``: give a requester a budget, written to the ledger file under its lock
        (an event of the ledger; a new ledger starts with the total budget typed).
        """
        name, sep, val = str(text).rpartition("=")
        try:
            eps = float(val)
        except ValueError:
            eps = math.nan
        if not sep or not name.strip() or not (math.isfinite(eps) and eps > 0):
            self.error_label.setText("Requester budget: write NAME=EPSILON, e.g. Dr. Smith=0.5.")
            return False
        led, why = self._snapshot()
        path = self.ledger_path()
        if why or path is None:
            self.error_label.setText(why or "Open a data file first.")
            return False
        dname, sha = self._dataset()
        try:
            total = float(self.budget_edit.text())
            with ql.locked_ledger(path, total=None if led else total, dataset=dname, digest=sha) as bound:
                bound.set_requester_budget(name.strip(), eps, by="office")
                if not bound.on_file and bound.path:
                    bound.save()
        except (DPStudioError, ValueError, OSError) as exc:
            self.error_label.setText(f"Requester budget: {exc}")
            return False
        self.error_label.setText("")
        self.refresh_ledger()
        return True

    def export_ledger(self, path: str) -> str | None:
        led = self.ledger()
        if led is None:
            self.error_label.setText("No ledger yet: nothing to export.")
            return None
        try:  # through the one guarded writer, never over the data or hierarchy files
            out = led.export(path, protect=self._input_files())
        except (DPStudioError, OSError) as exc:
            self.error_label.setText(f"Export: {exc}")
            return None
        self.sig_status.emit(f"Ledger exported (private, owner-only): {Path(out).name}")
        return out

    # ------------------------------------------------------------------ answering
    def _start(self, spend: bool) -> bool:
        if not self._validate(replot=False):
            return False
        req = self.build_multi_request() if self.multi() else self.build_request()
        job = self._answer_job(req, spend)
        if job is None:
            return False
        self.error_label.setText("Answering…" if spend else "Refining (preview)…")
        self.runner.start(
            job.work,
            finished=lambda out: self._answer_done(job, out),
            errored=self._answer_errored,
            cancelled=lambda: self._answer_cancelled(job),
        )
        return True

    def _answer_job(self, req: dict[str, Any], spend: bool) -> AnswerJob | None:
        """The job of one answer (a preview without ``spend``), or None after naming why it is
        refused (a foreign or legacy ledger; beyond the budget) before anything runs.
        """
        df = self.state.df
        job = AnswerJob(df=df, req=req, plan={})
        if spend:
            led, why = self._snapshot()
            if why or self.state.legacy_query_ledger() is not None:
                self.error_label.setText(why or "Move the project's older ledger first (see above).")
                return None
            job.path = self.ledger_path()
            job.dataset = self._dataset()
            job.new_total = req["total"] if led is None else None
            try:  # refused before anything runs, with the remaining budget named
                (led or qd.BudgetLedger(req["total"])).check(req["epsilon"], req["requester"])
            except DPStudioError as exc:
                self.error_label.setText(str(exc))
                return None
        job.plan = self._answer_plan(req, self.ledger() if spend else None)
        return job

    def _answer_plan(self, req: dict[str, Any], led_now: qd.BudgetLedger | None) -> dict[str, Any]:
        """Public planning facts of an answer: n, the declared domains, δ (the form's or the
        ledger's), the declared groups.
        """
        return {
            "n_total": len(self.state.df),
            "bounds": dict(self.state.domains),
            "delta": req.get("delta")
            if req.get("delta") is not None
            else (led_now.delta if led_now else None),
            "groups": None if req["groups"] is None else {req["query"].by: req["groups"]},
        }

    def _answer_done(self, job: AnswerJob, out) -> None:
        ans, spent = out
        self.show_accuracy(job.accuracy, job.chosen)
        if ans is None:  # preview of a noise mechanism
            return
        if spent:
            self.refresh_ledger()
            self.show_answer(ans)
        self.plot_answer(ans, preview=not spent)

    def _answer_cancelled(self, job: AnswerJob) -> None:
        if job.spent:
            self.error_label.setText(
                "Cancelled after the answer was recorded in the ledger: its ε is spent; "
                "the answer is not shown."
            )
        else:
            self.error_label.setText("Cancelled: nothing was spent or shown.")
        self.refresh_ledger()

    def _answer_errored(self, msg: str, _details) -> None:
        self.error_label.setText(msg)
        self.refresh_ledger()

    def answer(self) -> bool:
        """Answer the query: spend ε in the ledger (refused beyond the budget)."""
        return self._start(spend=True)

    def preview(self) -> bool:
        """The refined distribution for the office only; nothing is answered or spent."""
        return self._start(spend=False)

    def _on_busy(self, busy: bool) -> None:
        self.cancel_btn.setEnabled(busy)
        if not busy:
            msg = self.error_label.text()
            if msg in ("Answering…", "Refining (preview)…"):
                self.error_label.setText("")
        self._validate(replot=False)  # keep the answer's plot

    def show_answer(self, ans: qd.QueryAnswer) -> None:
        self.last_answer = ans
        pub = ans.public()
        resp = pub["response"]
        resp_txt = ", ".join(f"{g}: {v}" for g, v in resp.items()) if isinstance(resp, dict) else str(resp)
        rem = pub.get("remaining_budget")
        itv = pub.get("interval_95")
        itv_txt = ""
        if itv is not None and not isinstance(itv[0], list):
            itv_txt = f"\nInterval 95 %: [{itv[0]:g}, {itv[1]:g}] ({pub.get('interval_note', '')})"
        elif pub.get("interval_note"):
            itv_txt = f"\nInterval 95 %: {pub['interval_note']}"
        text = (
            f"Query: {pub['query']}\nMechanism: {pub.get('mechanism', 'refinement')}\nAnswer: {resp_txt}"
            f"{itv_txt}\nPrior used: {pub['prior']}\n"
            f"ε spent: {pub['epsilon']:g}"
            + (f"; remaining budget of this data set: {rem:g}" if rem is not None else "")
            + f"\nGuarantee: {pub['guarantee']}"
        )
        self.answer_text.setPlainText(text)
        self.copy_btn.setEnabled(True)
        self.sig_answered.emit(pub)
        self.sig_status.emit(f"Answered {pub['query']}: {resp_txt} (ε {pub['epsilon']:g} spent)")

    def copy_answer(self) -> None:
        QGuiApplication.clipboard().setText(self.answer_text.toPlainText())


def _preview() -> int:  # pragma: no cover - manual look
    import tempfile

    from PySide6.QtWidgets import QApplication

    from dpstudio.app.compute import load_table
    from dpstudio.app.resources import sample_path

    app = QApplication.instance() or QApplication(sys.argv)
    st = AppState()
    df, meta, stats = load_table(str(sample_path()), {}, check_cancel=lambda: None, progress=lambda f: None)
    st.set_data(df, str(sample_path()), meta, stats=stats)
    st.project_path = None
    w = QueryPanel(st)
    w.resize(1366, 760)
    w.agg_combo.setCurrentText("mean")
    w.col_combo.setCurrentText("FEDTAX")
    w.filter_edit.setText("STATETAX > 1000")
    w.lo_edit.setText("0")
    w.hi_edit.setText("20000")
    w.step_edit.setText("10")
    w.prior_combo.setCurrentText("normal")
    w.prior_edit.setText("6000:4000")
    w.eps_edit.setText("0.5")
    w.show()
    w.answer()
    w.runner.wait(30)
    out = sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.gettempdir()) / "query.png")
    if "--shot" in sys.argv or len(sys.argv) > 1:
        app.processEvents()
        w.grab().save(out)
        print(out)
        return 0
    return app.exec()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_preview())
