"""Step 5: what the protection did — measures, k-anonymity check, histograms, correlations."""

from __future__ import annotations

import html
import sys

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import turns
from dpstudio.app.compute import correlation_difference  # noqa: F401 (re-export)
from dpstudio.app.models.dataframe_model import format_value
from dpstudio.app.state import AppState
from dpstudio.app.widgets.common import Banner, WrapLabel
from dpstudio.app.widgets.help_dialog import (
    annotate_headers,
    annotate_measure_row,
    guarantee_rich,
    open_measure_help,
)
from dpstudio.app.widgets.roles_panel import short_label

MEASURE_LABELS = {
    "sse_normalized": "SSE (normalised, per record & attribute)",
    "sse_raw": "SSE (raw)",
    "rl": "Record linkage RL (%)",
    "corr_loss_mean": "Correlation loss (mean |Δcorr|)",
    "corr_loss_std": "Correlation loss (sd |Δcorr|)",
    "delta_mean_avg": "Δ mean (average relative change)",
    "delta_var_avg": "Δ variance (average relative change)",
    "k_min_class_size": "Smallest equivalence class (k-quasis)",
    "k_share_below": "Share of records in classes < k",
    "delta_mean": "Δ mean",
    "delta_var": "Δ variance",
    "keps_rel_error": "(k, ε): average relative error of the ε-quasis",
    "keps_rel_error_zeros": "(k, ε): cells left out of the relative error (value 0)",
    "keps_rel_error_expected": "(k, ε): expected relative error (before noise)",
    "keps_linking_risk": "(k, ε): linking risk inside classes",
    "keps_conf_suppressed_pct": "(k, ε): records suppressed by c-confidence (%)",
    "keps_conf_suppressed_classes_pct": "(k, ε): classes suppressed by c-confidence (%)",
    "keps_conf_c": "(k, ε): confidence c",
    "keps_gen_loss": "Generalisation loss (precision, 0 … 1)",
    "keps_ola_suppressed_pct": "Records suppressed by generalisation (%)",
    "keps_min_class_size": "Smallest class on the released k-quasis",
    "keps_share_below_k": "Share of records in classes < k (released k-quasis)",
    # survey measures (local suppression, risk): readable labels, never the raw keys
    "suppressed_cells": "Key values suppressed (cells)",
    "suppressed_share": "Key values suppressed (share of key cells)",
    "suppressed_per_key": "Key values suppressed",
    "expected_reidentifications": "Expected re-identifications (individual risk)",
    "household_expected_reidentifications": "Expected re-identifications (households)",
    "global_risk": "Global risk (mean individual risk)",
    "sample_uniques": "Sample uniques on the keys",
    "tv_mean": "Frequency change of the keys (total variation, mean)",
    "hellinger_mean": "Frequency change of the keys (Hellinger, mean)",
}


_LABEL_KEYS = {v: k for k, v in MEASURE_LABELS.items()}  # label -> measure key


PER_ATTR_CAPTION = "<b>Per attribute</b> (Δ mean, Δ variance: relative change)"
CORR_CAPTION = "corr(protected) − corr(original); red: correlation lost or reversed, blue: added."


def compact_warnings(warns: list[str]) -> list[str]:
    """Merge warnings that differ only in the attribute named ("Attribute 'a' is …",
    "Attribute 'b' is …" → one line naming both), keeping the first occurrence's order.
    """
    import re

    groups: dict[str, list[str]] = {}
    order: list[tuple[str, str]] = []
    for w in warns:
        m = re.match(r"^Attribute '([^']+)'(:? .*)$", w, re.S)
        if m:
            key = m.group(2)
            if key not in groups:
                groups[key] = []
                order.append(("g", key))
            if m.group(1) not in groups[key]:
                groups[key].append(m.group(1))
        elif ("w", w) not in order:
            order.append(("w", w))
    out = []
    for kind, v in order:
        if kind == "w":
            out.append(v)
        else:
            names = groups[v]
            if len(names) == 1:
                out.append(f"Attribute '{names[0]}'{v}")
            else:
                out.append(
                    "Attributes "
                    + ", ".join(f"'{n}'" for n in names)
                    + (" (each)" if not v.startswith(":") else "")
                    + v
                )
    return out


def flatten_measures(ev: dict) -> tuple[list[tuple[str, str]], pd.DataFrame | None]:
    """Split an evaluation dict into scalar rows and a per-attribute table."""
    rows: list[tuple[str, str]] = []
    per_attr: dict[str, dict] = {}
    for key, v in (ev or {}).items():
        if isinstance(v, dict):
            if v and all(
                isinstance(x, (int, float, np.floating, np.integer)) or x is None for x in v.values()
            ):
                for attr, x in v.items():
                    per_attr.setdefault(str(attr), {})[key] = x
            elif v and all(isinstance(x, dict) for x in v.values()):
                for attr, d in v.items():
                    for kk, x in d.items():
                        if not isinstance(x, (dict, list)):
                            per_attr.setdefault(str(attr), {})[f"{key} {kk}"] = x
            else:
                for kk, x in v.items():
                    if not isinstance(x, (dict, list)):
                        rows.append((f"{key}: {kk}", _fmt(x)))
        elif isinstance(v, (list, tuple)):
            if not v or key == "warnings":
                continue
            rows.append((MEASURE_LABELS.get(key, key), ", ".join(_fmt(x) for x in v[:10])))
        else:
            rows.append((MEASURE_LABELS.get(key, key), _fmt(v)))
    table = pd.DataFrame.from_dict(per_attr, orient="index") if per_attr else None
    return rows, table


def _param_labels(method: str) -> dict:
    """Parameter name → its label in the method form (epsilon → ε)."""
    try:
        from dpstudio.engine.registry import get_method

        return {p.name: p.label or p.name for p in get_method(method).params}
    except Exception:  # noqa: BLE001 - an unknown method: the raw names
        return {}


def _params_line(method: str, params: dict) -> str:
    """``label = value, ...`` of a method's parameters."""
    labels = _param_labels(method)
    text = ", ".join(
        f"{labels.get(k, k)} = {_fmt(v) if isinstance(v, float) else v}"
        for k, v in params.items()
        if v is not None and not isinstance(v, dict) and not str(k).startswith("_")
    )
    return text


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        if np.isnan(x):
            return "n/a"
        return f"{x:.6g}"
    return format_value(x)


def reading_context(res, ev: dict) -> dict:
    """What the plain readings need: n, k and, for a release whose k-anonymity check holds,
    ``k_anonymous`` = the smallest class (record linkage is then read against 1/k, not 1/n;
    issue 24 §7).
    """
    from dpstudio.engine.measures.readings import reading_context as engine_context

    return engine_context(res, ev)


_GEN_HTML: list = []  # [(result, its generalisation_html)]: the current result's


def generalisation_html(res) -> str:
    """The chosen generalisation of every k-quasi of a generalising result, as a small table
    (empty for other methods): level / height, what the release holds; a k-quasi generalised
    to the top in red, with a link to build it a hierarchy.  Computed once per result (it
    reads the released columns: the Protect worker computes it beforehand, :func:`prime`).
    """
    if _GEN_HTML and _GEN_HTML[0][0] is res:
        return _GEN_HTML[0][1]
    out = _generalisation_html(res)
    _GEN_HTML[:] = [(res, out)]
    return out


def _generalisation_html(res) -> str:
    from dpstudio.engine.transformation import describe_row, transformation_rows

    rows = transformation_rows(res)
    if not rows:
        return ""
    out = [
        "<b>Generalisation of the k-quasi-identifiers</b> (the transformation chosen)"
        "<table cellspacing='0' cellpadding='3' border='1' style='border-color:#ccc'>"
        "<tr><th align='left'>column</th><th>level</th><th align='left'>hierarchy</th>"
        "<th align='left'>in the release</th></tr>"
    ]
    for r in rows:
        lv = "–" if r["level"] is None else f"{r['level']} of {int(r['height']) - 1}"
        text = html.escape(describe_row(r), quote=False)
        if r["top"]:
            text = (
                f"<span style='color:#b00020'><b>⚠ {text}</b></span> — "
                f"<a href='build:{html.escape(r['column'])}'>build a hierarchy for "
                f"{html.escape(r['column'])}…</a>"
            )
        out.append(
            f"<tr><td>{html.escape(r['column'])}</td><td align='center'>{lv}</td>"
            f"<td>{html.escape(r['hierarchy'])}</td><td>{text}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


_HIST: list = []  # [(result, {attribute: histogram inputs})]: the current result's


def hist_inputs(res, attr: str) -> tuple:
    """What the histogram of ``attr`` needs from the whole columns, computed once per result
    and attribute (the Protect worker computes them beforehand, :func:`prime`: issue 27.4, the
    GUI thread spent 0.1-0.3 s on a 200,000-row release): ``("numeric", original values,
    released values)`` (finite floats; the original None when not kept), ``("bars", original
    counts, released counts)`` of each text, or ``("intervals", None, released counts)``.
    """
    if _HIST and _HIST[0][0] is res:
        cache = _HIST[0][1]
    else:
        cache = {}
        _HIST[:] = [(res, cache)]
    hit = cache.get(attr)
    if hit is not None:
        return hit
    orig = None
    if res.original is not None and attr in res.original.columns:
        from dpstudio.engine.codes import take

        # the one column, in the release's order (not the whole aligned original)
        o = res.original[attr]
        orig = o if res.row_map is None else take(o, res.row_map)
    prot = res.data[attr]
    out: tuple
    if not pd.api.types.is_numeric_dtype(prot):
        b = prot.astype(str).value_counts()
        if orig is not None and pd.api.types.is_numeric_dtype(orig):
            out = ("intervals", None, b)
        else:
            out = ("bars", orig.astype(str).value_counts() if orig is not None else None, b)
    else:
        try:
            x = (
                pd.to_numeric(orig, errors="coerce").to_numpy(dtype=float)
                if orig is not None
                else np.zeros(0)
            )
            y = pd.to_numeric(prot, errors="coerce").to_numpy(dtype=float)
            out = ("numeric", x[np.isfinite(x)], y[np.isfinite(y)])
        except (TypeError, ValueError):
            out = ("numeric", None, None)
    cache[attr] = out
    return out


def prime(res) -> None:
    """Compute, in the worker that made ``res``, what the panel's histograms read from the
    whole table (the protected attributes'), so that showing the result costs the GUI thread
    no pass over the records; and import the modules showing it needs (a first import on the
    GUI thread compiled them there when no bytecode is cached: ~13 ms each).
    """
    import importlib

    for mod in (
        "dpstudio.app.widgets.lattice_view",
        "dpstudio.engine.glossary",
        "dpstudio.engine.measures.readings",
        "dpstudio.engine.report",
    ):
        try:
            importlib.import_module(mod)
        except ImportError:  # pragma: no cover - an optional part missing: imported when used
            pass

    generalisation_html(res)
    for attr in res.protected_attributes:
        if attr in res.data.columns:
            hist_inputs(res, str(attr))


def fitted_width(table: QTableWidget, col: int, cap: int = 420) -> int:
    """The width of column ``col`` for its header and cells' texts, from the font (Qt's
    resizeColumnToContents lays out every cell with its delegate: issue 27.4).
    """
    fm = table.fontMetrics()
    head = table.horizontalHeaderItem(col)
    w = table.horizontalHeader().fontMetrics().horizontalAdvance(head.text()) + 24 if head else 0
    for i in range(table.rowCount()):
        it = table.item(i, col)
        if it is not None:
            w = max(w, fm.horizontalAdvance(it.text()) + 16)
    return min(max(w, 30), cap)


def fit_columns(table: QTableWidget) -> None:
    """Every column of ``table`` as wide as its texts (see :func:`fitted_width`)."""
    for j in range(table.columnCount()):
        table.setColumnWidth(j, fitted_width(table, j))


class ResultsPanel(QWidget):
    #: a column to build a hierarchy for (the generalisation table's link)
    sig_build_hierarchy = Signal(str)

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        # the guarantee, warnings and k-anonymity check scroll in their own area above the
        # measures, with a splitter between them: a long guarantee (every unprotected column
        # named) squeezed the measures and plots to a strip (issue 11)
        head = QWidget()
        self._head = head
        lay = QVBoxLayout(head)
        lay.setContentsMargins(0, 0, 6, 0)
        # word-wrapped labels whose size hints cost one text layout (issue 24 §5: QLabel's own
        # made most of the tab's first show after a Protect)
        self.header = WrapLabel("No result yet: choose a method and press Protect (Ctrl+R).")
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.header)
        from dpstudio.app.large_file import add_sample_label

        self.sample_label = add_sample_label(state, lay, "results")  # issue 12: the Dask release
        # issue 24 §1: the generalisation chosen for every k-quasi (as ARX shows the
        # transformation); a k-quasi wiped to '*' in red, with the way out
        self.generalisation = WrapLabel("")
        self.generalisation.setObjectName("generalisation_label")
        self.generalisation.setTextFormat(Qt.TextFormat.RichText)
        self.generalisation.linkActivated.connect(self._on_generalisation_link)
        lay.addWidget(self.generalisation)
        self.lattice_btn = QPushButton("Levels weighed by OLA…")
        self.lattice_btn.setObjectName("lattice_button")
        self.lattice_btn.setToolTip(
            "Every combination of generalisation levels OLA weighed: suppression, loss, the chosen one."
        )
        self.lattice_btn.clicked.connect(self.open_lattice)
        self.lattice_btn.hide()
        lay.addWidget(self.lattice_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.warn = Banner(self)
        lay.addWidget(self.warn)
        self.kanon = WrapLabel("")
        self.kanon.setObjectName("kanon_label")
        lay.addWidget(self.kanon)
        lay.addStretch(1)
        self.header_area = QScrollArea()
        self.header_area.setObjectName("results_header_area")
        self.header_area.setWidgetResizable(True)
        self.header_area.setFrameShape(QFrame.Shape.NoFrame)
        self.header_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.header_area.setWidget(head)
        self.header_area.setMinimumHeight(60)
        self.export_btn = QPushButton("Export protected file… (Ctrl+Shift+E)")
        self.export_btn.setObjectName("export_button")
        self.export_btn.setEnabled(False)
        hl = QHBoxLayout()
        hl.addStretch(1)
        hl.addWidget(self.export_btn)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("results_splitter")
        self.splitter = split
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        self.measures = QTableWidget(0, 2)
        self.measures.setObjectName("measures_table")
        self.measures.setHorizontalHeaderLabels(["Measure", "Value"])
        self.measures.verticalHeader().setVisible(False)
        self.measures.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.measures.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.measures.itemDoubleClicked.connect(lambda it: open_measure_help(self.window(), it))
        # the readings re-wrap when their column changes width (window, splitter)
        self.measures.horizontalHeader().sectionResized.connect(
            lambda i, _old, _new: i == 2 and self._fit_rows()
        )
        ll.addWidget(QLabel("<b>Measures</b> (protected vs original)"))
        ll.addWidget(self.measures, 2)
        self.per_attr = QTableWidget(0, 0)
        self.per_attr.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.per_attr_caption = QLabel(PER_ATTR_CAPTION)
        ll.addWidget(self.per_attr_caption)
        ll.addWidget(self.per_attr, 1)
        split.addWidget(left)
        tabs = QTabWidget()
        hw = QWidget()
        hl2 = QVBoxLayout(hw)
        self.hist_attr = QComboBox()
        self.hist_attr.setToolTip("Attribute whose distribution is shown.")
        self.hist_attr.currentTextChanged.connect(self._draw_hist)
        hl2.addWidget(self.hist_attr)
        self.hist = pg.PlotWidget()
        self.hist.setBackground("w")
        self.hist_legend = self.hist.addLegend(offset=(-5, 5))
        # no grid (on a software-rendered plot it doubles the paint time, as in the sweep's
        # plots) and no antialiasing of the axis-aligned steps and bars (issue 27.4)
        # the histogram's items are made once and updated (setData / setOpts) for every
        # result and attribute: recreating them cost the GUI thread their construction and a
        # first paint each time (issue 27.4)
        self.hist_orig = pg.PlotDataItem(
            stepMode="center",
            fillLevel=0,
            brush=(120, 120, 120, 90),
            pen=pg.mkPen("#555"),
            antialias=False,
        )
        self.hist_prot = pg.PlotDataItem(stepMode="center", pen=pg.mkPen("#1f77b4", width=2), antialias=False)
        self.bars_orig = pg.BarGraphItem(
            x=[], height=[], width=0.4, brush=(120, 120, 120, 160), pen=pg.mkPen("#555")
        )
        self.bars_prot = pg.BarGraphItem(x=[], height=[], width=0.4, brush="#1f77b4", pen=pg.mkPen("#1f77b4"))
        self._hist_items = (self.hist_orig, self.hist_prot, self.bars_orig, self.bars_prot)
        self._hist_shown: tuple = ()  # the items in the plot now
        # the legend's entries change only when the original comes or goes (each entry is a
        # label item of its own: re-adding them cost ~2 ms apiece)
        self._legend_entries: tuple = ()
        hl2.addWidget(self.hist, 1)
        tabs.addTab(hw, "Histograms")
        cw = QWidget()
        cl = QVBoxLayout(cw)
        self.corr_caption = QLabel(CORR_CAPTION)
        self.corr_caption.setWordWrap(True)
        cl.addWidget(self.corr_caption)
        self.corr = QTableWidget(0, 0)
        self.corr.setObjectName("corr_table")
        self.corr.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        cl.addWidget(self.corr, 1)
        tabs.addTab(cw, "Correlation difference")
        self.tabs = tabs
        split.addWidget(tabs)
        # the histogram's plot is shown a turn of the event loop after the tab's first show
        # (its first layout and paint; issue 24 §5); its room is kept meanwhile
        keep = self.hist.sizePolicy()
        keep.setRetainSizeWhenHidden(True)
        self.hist.setSizePolicy(keep)
        self.hist.hide()
        self._plot_shown = False
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([600, 760])  # room for the measures' plain readings
        self.vsplit = QSplitter(Qt.Orientation.Vertical)
        self.vsplit.setObjectName("results_vsplitter")
        self.vsplit.setChildrenCollapsible(False)
        self.vsplit.addWidget(self.header_area)
        body = QWidget()
        bl = QVBoxLayout(body)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addLayout(hl)
        bl.addWidget(split, 1)
        self.vsplit.addWidget(body)
        self.vsplit.setStretchFactor(0, 0)
        self.vsplit.setStretchFactor(1, 1)
        self.vsplit.setSizes([230, 600])  # the guarantee area; drag the handle for more
        outer.addWidget(self.vsplit, 1)
        self.corr_cols: list[str] = []
        self.corr_diff = np.zeros((0, 0))
        state.sig_result_changed.connect(self._on_state_result_changed)

    def fit_header(self) -> None:
        """Give the guarantee area the height of its text, at most 40 % of the panel (then
        it scrolls; the splitter handle gives it more).
        """
        w = max(self.header_area.viewport().width(), 200)
        need = self._head.heightForWidth(w) if self._head.hasHeightForWidth() else -1
        need = (need if need > 0 else self._head.sizeHint().height()) + 6
        sizes = self.vsplit.sizes()
        total = sum(sizes) or self.height()
        top = max(60, min(need, int(0.4 * total)))
        if sizes and abs(sizes[0] - top) <= 4:
            return  # as it is: no relayout of the tables and plots below (~25 ms)
        self.vsplit.setSizes([top, max(total - top, 100)])

    def _fit_readings(self) -> None:
        """The plain readings wrap in the last column, rows as tall as their text (they were
        cut to "error larger than the …" in a narrow column).
        """
        t = self.measures
        hh = t.horizontalHeader()
        if t.columnCount() >= 3:
            # fixed widths from the texts, not ResizeToContents (issue 27.4: Qt measured every
            # cell again in each layout of the tab)
            hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
            t.setColumnWidth(0, fitted_width(t, 0))
            hh.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        else:
            hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        t.setWordWrap(True)
        self._fit_rows()

    def _fit_rows(self) -> None:
        """Row heights of the measures from the wrapped readings, computed from the font for
        the reading column's width (resizeRowsToContents laid out every cell, issue 27.4).
        """
        t = self.measures
        if t.columnCount() < 3:
            return
        fm = t.fontMetrics()
        w = max(t.columnWidth(2) - 10, 40)
        base = t.verticalHeader().defaultSectionSize()
        for i in range(t.rowCount()):
            it = t.item(i, 2)
            text = it.text() if it is not None else ""
            h = base
            if text:
                r = fm.boundingRect(QRect(0, 0, w, 100_000), int(Qt.TextFlag.TextWordWrap), text)
                h = max(base, r.height() + 8)
            if t.rowHeight(i) != h:
                t.setRowHeight(i, h)

    def showEvent(self, ev) -> None:  # noqa: N802 - Qt API
        super().showEvent(ev)
        if not self._plot_shown:
            self._plot_shown = True
            turns.later(self.hist.show, owner=self, key="plot")
        # the rows' heights for the readings filled while hidden: the next turn, before the
        # other parts waiting
        turns.later(self._fit_rows, owner=self, key="fit_rows", first=True)

    def _veil_header(self) -> None:
        """Hide the header's texts (guarantee, generalisation, warnings, k-anonymity check)
        and show them one per turn of the event loop (dpstudio.app.turns), after the switch to
        this tab: the layout of all four word-wrapped rich texts in the turn of the tab's
        first show was most of its ~140 ms (issue 24 §5).  The header area keeps its height
        meanwhile (the tables and plots below do not move); the texts are set at once.
        """
        parts = [
            (self.header, self.header.setVisible),
            (self.generalisation, self.generalisation.setVisible),
            (self.warn, lambda on: self.warn.set_veiled(not on)),
            (self.kanon, self.kanon.setVisible),
        ]
        for i, (_w, show) in enumerate(parts):
            show(False)
            turns.later(lambda show=show: show(True), owner=self, key=f"reveal-{i}")

    def _on_state_result_changed(self) -> None:
        self._veil_header()
        # the header's height once the labels below have their text, in a turn of its own
        # (after the switch to this tab, queued first, and the texts: dpstudio.app.turns)
        turns.later(self.fit_header, owner=self, key="fit_header")
        st = self.state
        res = st.result
        self.export_btn.setEnabled(res is not None)
        self.hist_attr.blockSignals(True)
        self.hist_attr.clear()
        self.hist_attr.blockSignals(False)
        self._show_hist_items(())
        if res is None:
            self.header.setText(
                "No result yet (or the settings changed since the last run): press Protect (Ctrl+R)."
            )
            self.measures.setRowCount(0)
            self.per_attr.setRowCount(0)
            self.corr.setRowCount(0)
            self.kanon.setText("")
            self.generalisation.setText("")
            self.lattice_btn.hide()
            self.warn.hide()
            self.hist_legend.clear()
            self._legend_entries = ()
            return
        ev = dict(st.evaluation or {})
        extra = ev.pop("_app", {})
        params = (
            " → ".join(
                f"{i}. {s.method} ({_params_line(s.method, s.params)})" for i, s in enumerate(res.steps, 1)
            )
            if getattr(res, "steps", None)  # a release made of steps: each step's parameters
            else _params_line(getattr(res, "method", ""), res.params)
        )
        self.header.setText(
            f"<b>{html.escape(res.method_name)}</b> — {html.escape(params)}<br>"
            f"<div style='color:#0b4f8a'><b>Guarantee:</b> {guarantee_rich(res.guarantee)}</div>"
            f"<br>{len(res.data):,} records released; protected: "
            f"{html.escape(', '.join(res.protected_attributes))}"
        )
        # public warnings (published with the release) apart from the private notes (facts
        # about the original data: shown here, never published; issue 21 §3)
        pub = [str(w) for w in (getattr(res, "public_warnings", None) or [])]
        notes = compact_warnings(
            [str(w) for w in res.warnings if w not in pub]
            + [w for w in (ev.get("warnings") or []) if w not in res.warnings]
        )
        pub = compact_warnings(pub)
        if pub or notes:
            # always rich text (a lone warning without a tag would be shown as plain text,
            # with its escaped quotes as '&#x27;')
            # plain words for the private notes, no emoji: the lock rendered as an empty box
            # on machines without an emoji font
            lines = [f"⚠ {html.escape(w, quote=False)}" for w in pub] + [
                f"<b><i>Private note (not published):</i></b> {html.escape(w, quote=False)}" for w in notes
            ]
            self.warn.show_message("<span>" + "<br>".join(lines) + "</span>", "warning")
        else:
            self.warn.hide()
        rows, table = flatten_measures(ev)
        ctx = reading_context(res, ev)
        self.measures.setRowCount(len(rows))
        for i, (k, v) in enumerate(rows):
            self.measures.setItem(i, 0, QTableWidgetItem(k))
            it = QTableWidgetItem(v)
            it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.measures.setItem(i, 1, it)
            key = _LABEL_KEYS.get(k, k)  # issue 11: glossary tooltip, plain reading
            annotate_measure_row(self.measures, i, key, ev.get(key), ctx)
        self.measures.setColumnWidth(1, fitted_width(self.measures, 1))
        self._fit_readings()
        if table is not None:
            self.per_attr.setRowCount(table.shape[0])
            self.per_attr.setColumnCount(table.shape[1])
            self.per_attr.setHorizontalHeaderLabels(
                [MEASURE_LABELS.get(str(c), str(c)) for c in table.columns]
            )
            self.per_attr.setVerticalHeaderLabels([str(i) for i in table.index])
            annotate_headers(self.per_attr, [str(c) for c in table.columns])
            for i in range(table.shape[0]):
                for j in range(table.shape[1]):
                    self.per_attr.setItem(i, j, QTableWidgetItem(_fmt(table.iat[i, j])))
            fit_columns(self.per_attr)
        else:
            self.per_attr.setRowCount(0)
            self.per_attr.setColumnCount(0)
        self.per_attr_caption.setText(
            PER_ATTR_CAPTION
            + ("" if table is not None else " — none: no protected attribute is numeric in the release")
        )
        kq = [c for c, r in res.roles.items() if r == "k-quasi"]
        if "k_min_class_size" in ev:
            k = res.params.get("k")
            smallest, share = ev["k_min_class_size"], ev.get("k_share_below", 0.0)
            ok = share == 0 and smallest >= (k or 0)
            col = "#2e7d32" if ok else "#b00020"
            self.kanon.setText(
                f"<span style='color:{col}'><b>k-anonymity check</b> on the k-quasi-identifiers "
                f"of the output: smallest class {smallest:,} records (k = {k}); share of "
                f"records in classes smaller than k: {100 * share:.2f} %"
                f"{' ✔' if ok else ' ✘'}</span>"
            )
        elif kq:
            self.kanon.setText(
                "k-anonymity check: not applicable — this method does not claim "
                "classes of k identical k-quasi values."
            )
        else:
            self.kanon.setText("k-anonymity check: no k-quasi-identifier in this release.")
        self.generalisation.setText(generalisation_html(res))
        from dpstudio.app.widgets.lattice_view import lattice_inputs

        self.lattice_btn.setVisible(lattice_inputs(self.state) is not None)
        self.corr_cols, self.corr_diff = extra.get("corr", ([], np.zeros((0, 0))))
        self._draw_corr()
        # the histogram after the switch to this tab (a slice of its own, issue 27.4: the
        # tab's first paint is then lighter, and the plot repaints alone)
        self.hist_attr.blockSignals(True)
        self.hist_attr.addItems([c for c in res.protected_attributes if c in res.data.columns])
        self.hist_attr.blockSignals(False)
        turns.later(lambda: self._draw_hist(self.hist_attr.currentText()), owner=self, key="hist")

    def open_lattice(self):
        """The levels OLA weighed for the current result (a non-modal dialog)."""
        from dpstudio.app.widgets.lattice_view import LatticeDialog

        dlg = LatticeDialog(self.state, self)
        dlg.show()
        self._lattice_dialog = dlg
        return dlg

    def _on_generalisation_link(self, link: str) -> None:
        """'build:<column>': open the hierarchy builder of that column (main window)."""
        if link.startswith("build:"):
            self.sig_build_hierarchy.emit(link[len("build:") :])

    def _draw_corr(self) -> None:
        cols, d = self.corr_cols, self.corr_diff
        self.corr_caption.setText(
            CORR_CAPTION
            if len(cols) >= 2
            else "No correlation matrix: it needs at least two numeric "
            "protected or confidential attributes in the release."
        )
        self.corr.setRowCount(len(cols))
        self.corr.setColumnCount(len(cols))
        self.corr.setHorizontalHeaderLabels(cols)
        self.corr.setVerticalHeaderLabels(cols)
        for i in range(len(cols)):
            for j in range(len(cols)):
                v = d[i, j]
                it = QTableWidgetItem("" if i == j else (f"{v:+.2f}" if np.isfinite(v) else "n/a"))
                if i != j and np.isfinite(v):
                    a = min(abs(v), 1.0)
                    c = (
                        QColor(255, int(255 * (1 - a)), int(255 * (1 - a)))
                        if v < 0
                        else QColor(int(255 * (1 - a)), int(255 * (1 - a)), 255)
                    )
                    it.setBackground(QBrush(c))
                it.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.corr.setItem(i, j, it)
        fit_columns(self.corr)

    def _show_hist_items(self, items: tuple) -> None:
        """Put exactly ``items`` (of the histogram's own, made once) in the plot; the others
        leave it (and its legend).
        """
        for it in self._hist_shown:
            if it not in items:
                self.hist.removeItem(it)
        for it in items:
            if it not in self._hist_shown:
                self.hist.addItem(it)
        self._hist_shown = tuple(items)
        want = tuple(
            name
            for name, mine in (
                ("original", (self.hist_orig, self.bars_orig)),
                ("protected", (self.hist_prot, self.bars_prot)),
            )
            if any(it in items for it in mine)
        )
        if want and want != self._legend_entries:
            self.hist_legend.clear()
            for name in want:  # the step curves' samples stand for the bars too (same colours)
                self.hist_legend.addItem(self.hist_orig if name == "original" else self.hist_prot, name)
            self._legend_entries = want

    def _draw_hist(self, attr: str) -> None:
        self._show_hist_items(())
        self.hist.setTitle(None)
        self.hist.setToolTip("")
        res = self.state.result
        if res is None or not attr:
            return
        kind, a, b = hist_inputs(res, attr)
        if kind == "intervals":
            # generalised to intervals: the numeric original has no bar per interval
            self._draw_bars(attr, None, b)
            self.hist.setTitle(attr + " (released as intervals; the original is numeric)", color="#222")
            return
        if kind == "bars":
            self._draw_bars(attr, a, b)
            return
        self.hist.getAxis("bottom").setTicks(None)
        if a is None:
            return
        allv = np.concatenate([a, b])
        if allv.size == 0:
            return
        edges = np.histogram_bin_edges(allv, bins=40)
        cb, _ = np.histogram(b, bins=edges)
        self.hist_prot.setData(edges, cb)
        if a.size:
            ca, _ = np.histogram(a, bins=edges)
            self.hist_orig.setData(edges, ca)
            self._show_hist_items((self.hist_orig, self.hist_prot))
        else:
            self._show_hist_items((self.hist_prot,))
        self.hist.setTitle(attr, color="#222")

    def _draw_bars(self, attr: str, a: pd.Series | None, b: pd.Series, top: int = 20) -> None:
        """Categorical attribute: counts per category (``a``, ``b``: the original's and the
        release's counts of each text; ``a`` None for intervals), original vs protected (most
        frequent ``top`` categories of either; generalised values such as '*' appear as their
        own bar).
        """
        orig = a
        a = a if a is not None else pd.Series(dtype=float)
        cats = list((a.add(b, fill_value=0)).sort_values(ascending=False).index[:top])
        if orig is None:  # intervals: in label order (numbers first by value)

            def _key(c):
                num = pd.to_numeric(
                    pd.Series([str(c).lstrip("[(").split("-")[0].split(",")[0]]), errors="coerce"
                ).iloc[0]
                return (0, float(num), str(c)) if pd.notna(num) else (1, 0.0, str(c))

            cats = sorted(cats, key=_key)
        if not cats:
            return
        x = np.arange(len(cats), dtype=float)
        self.bars_prot.setOpts(x=x + 0.2, height=b.reindex(cats).fillna(0).to_numpy(float))
        if len(a):
            self.bars_orig.setOpts(x=x - 0.2, height=a.reindex(cats).fillna(0).to_numpy(float))
            self._show_hist_items((self.bars_orig, self.bars_prot))
        else:
            self._show_hist_items((self.bars_prot,))
        self.hist.getAxis("bottom").setTicks(
            [
                [
                    (float(i), short_label(c, len(cats), max(self.hist.width(), 300) // 8))
                    for i, c in enumerate(cats)
                ]
            ]
        )
        self.hist.setToolTip(
            "\n".join(f"{c}: original {int(a.get(c, 0)):,}, protected {int(b.get(c, 0)):,}" for c in cats)
        )
        more = max(len(a.index.union(b.index)) - len(cats), 0)
        self.hist.setTitle(
            attr + (f" (top {len(cats)} categories; {more} more)" if more else " (categories)"), color="#222"
        )


if __name__ == "__main__":
    import pandas as pd
    from PySide6.QtWidgets import QApplication

    from dpstudio.app import compute
    from dpstudio.app.resources import sample_path

    app = QApplication(sys.argv)
    st = AppState()
    st.set_data(pd.read_csv(sample_path()), str(sample_path()))
    w = ResultsPanel(st)
    roles = {"FICA": "k-quasi", "FEDTAX": "k-quasi", "AFNLWGT": "identifier"}
    res, ev = compute.protect_and_evaluate(st.df, "mdav", roles, {}, {}, None, {"k": 5})
    st.set_result(res, ev, {"method": "mdav", "params": {"k": 5}})
    w.resize(1000, 600)
    w.show()
    app.exec()
