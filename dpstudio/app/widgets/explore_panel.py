"""Step 4: live trade-off plots of a k × ε sweep (pyqtgraph).

SSE against k and RL against k (one curve per ε plus the noise-free baseline, log axes, error
bars over repetitions) and the risk–utility plane (RL against SSE) with its Pareto front.
Curves are created once per sweep and only ``setData`` afterwards; points arrive in batches.
Hover a point for its values; click it to set k and ε in the method form.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt, QTimer, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import turns
from dpstudio.app.state import AppState
from dpstudio.app.sweep_view import NUMERIC, SweepView, sweep_view
from dpstudio.app.widgets.common import Banner
from dpstudio.app.widgets.plot_axes import log_plot_widget
from dpstudio.engine.sweeps import parse_grid

PALETTE = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#7f7f7f",
]
BASELINE_COLOR = "#222222"
SSE_KEYS = {"normalized": "sse_normalized", "raw": "sse_raw"}
REDRAW_MS = 400  # curves are redrawn at most 2.5 times a second while a sweep runs
LEGEND_ROWS = 8  # entries per column of the plane's legend
IDLE_STATUS = "Run a sweep to see how information loss and risk change with k and ε."


def parse_numbers(text: str, integer: bool = False) -> list:
    """'2-10, 15, 20:50:10' -> numbers: the engine's grid grammar (shared with the CLI)."""
    return parse_grid(text, integer=integer, what="")


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points not dominated in (minimise x, minimise y), sorted by x."""
    if len(x) == 0:
        return np.zeros(0, dtype=int)
    order = np.lexsort((y, x))
    best = np.inf
    keep = []
    for i in order:  # loop over grid points (tens), not records
        if y[i] < best:
            keep.append(i)
            best = y[i]
    return np.asarray(keep, dtype=int)


def _fmt_eps(e) -> str:
    return "no noise" if e is None else f"ε = {e:g}"


@dataclass
class _Series:
    eps: float | None
    color: str
    sse: pg.PlotDataItem
    rl: pg.PlotDataItem
    sse_err: pg.ErrorBarItem
    rl_err: pg.ErrorBarItem
    plane: pg.PlotDataItem
    name: str = ""
    style: object = None  # the pen style the items were drawn with (with ``color``)


class ExplorePanel(QWidget):
    sig_point_chosen = Signal(object, object)
    """The user clicked a point: k (int or None), ε (float or None = no noise)."""
    sig_sweep_requested = Signal()
    """The user asked to (re)run the sweep."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.points: list = []
        self.skipped: list = []  # (k, ε) cells the method could not run, with the reason
        self.series: dict = {}
        #: every series' items ever made, kept in their plots (empty while unused) and reused
        #: by the next sweep: making and adding them was most of a sweep's first turn
        self._pool: list[_Series] = []
        self._view_key: tuple | None = None  # what _apply_view last set (titles, log modes)
        self.chosen: tuple | None = None
        self.sweep_method: str | None = None
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(REDRAW_MS)
        self._redraw_timer.timeout.connect(self._redraw_staggered)
        self._redraw_gen = 0  # staggered parts of an older redraw are dropped
        self._sse_choice = "sse_normalized"
        self.view: SweepView = NUMERIC  # what the curves show (per method family)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)

        # --- sweep settings
        box = self._build_sweep_box()
        lay.addWidget(box)
        self.banner = Banner(self)
        lay.addWidget(self.banner)
        from dpstudio.app.large_file import add_sample_label

        self.sample_label = add_sample_label(state, lay, "explore")  # issue 12: curves from a sample
        self.status = QLabel(IDLE_STATUS)
        self.status.setObjectName("sweep_status")
        lay.addWidget(self.status)

        # --- plots
        self._build_plots()
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(_holder(self.sse_plot))
        left.addWidget(_holder(self.rl_plot))
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("explore_splitter")
        self.splitter.addWidget(left)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(_holder(self.plane), 1)
        # --- target box
        tbox = self._build_target_box()
        rl.addWidget(tbox)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 1)
        lay.addWidget(self.splitter, 1)
        # each plot is shown in a turn of the event loop of its own after the tab is shown
        # (their layout and paint made most of the tab's show, issue 24 §5); hidden with the
        # tab, their room kept (each sits alone in a holder), so nothing moves meanwhile
        for plot in self._plots():
            plot.hide()
        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("hover_label")
        self.hover_label.setStyleSheet("color:#333;")
        lay.addWidget(self.hover_label)
        for plot in (self.sse_plot, self.rl_plot, self.plane):
            plot.scene().sigMouseMoved.connect(lambda pos, p=plot: self._on_mouse_moved(p, pos))
            plot.scene().sigMouseClicked.connect(lambda ev, p=plot: self._on_mouse_clicked(p, ev))
        self._connect_state(state)
        self._enable_grid_fields(state.recipe.method)
        self._status_before_stale = ""

    def _build_sweep_box(self) -> QGroupBox:
        """The sweep settings: k, ε, repeats, the SSE scale, log axes and the run button."""
        state = self.state
        box = QGroupBox("Sweep")
        g = QGridLayout(box)
        g.setContentsMargins(6, 4, 6, 4)
        sw = state.recipe.sweep
        self.ks = QLineEdit(str(sw.get("ks", "")))
        self.ks.setObjectName("sweep_ks")
        self.ks.setToolTip(
            "Values of k to try: '2-10' = every k from 2 to 10, '20:100:10' = 20, 30 … 100, or a list."
        )
        self.eps = QLineEdit(str(sw.get("epsilons", "")))
        self.eps.setObjectName("sweep_eps")
        self.eps.setToolTip(
            "Values of ε to try (one curve each); the noise-free baseline is added automatically."
        )
        self.repeats = QSpinBox()
        self.repeats.setRange(1, 100)
        self.repeats.setValue(int(sw.get("repeats", 3)))
        self.ks.textChanged.connect(lambda t: self.state.set_sweep(ks=t))
        self.eps.textChanged.connect(lambda t: self.state.set_sweep(epsilons=t))
        self.repeats.valueChanged.connect(lambda v: self.state.set_sweep(repeats=int(v)))
        self.repeats.setToolTip(
            "Repetitions per (k, ε) point; the error bars show ± 1 standard "
            "deviation over them (the papers use 10)."
        )
        self.sse_scale = QComboBox()
        self.sse_scale.addItem("normalised SSE", "normalized")
        self.sse_scale.addItem("raw SSE", "raw")
        self.sse_scale.setToolTip(
            "normalised: squared errors divided by each attribute's "
            "variance, per record and attribute (1 ≈ error as large as "
            "the spread); raw: as in the papers."
        )
        self.sse_scale.currentIndexChanged.connect(self._on_scale_changed)
        self.log_y = QCheckBox("log axes")
        self.log_y.setChecked(True)
        self.log_y.setToolTip(
            "Logarithmic k (or ε) and SSE axes (RL, suppressed values and re-identifications stay linear)."
        )
        self.log_y.toggled.connect(self._on_log_toggled)
        self.run_btn = QPushButton("▶  Run sweep")
        self.run_btn.setObjectName("sweep_button")
        self.run_btn.setToolTip(
            "Run the method over the k × ε grid (Ctrl+E). The curves "
            "fill in as points are computed; Esc cancels."
        )
        self.run_btn.clicked.connect(self.sig_sweep_requested)
        g.addWidget(QLabel("k:"), 0, 0)
        g.addWidget(self.ks, 0, 1)
        g.addWidget(QLabel("ε:"), 0, 2)
        g.addWidget(self.eps, 0, 3)
        g.addWidget(QLabel("repeats:"), 0, 4)
        g.addWidget(self.repeats, 0, 5)
        g.addWidget(self.sse_scale, 0, 6)
        g.addWidget(self.log_y, 0, 7)
        g.addWidget(self.run_btn, 0, 8)
        g.setColumnStretch(1, 3)
        g.setColumnStretch(3, 2)
        return box

    def _build_plots(self) -> None:
        """The SSE and RL plots against k, the risk–utility plane, its legend, front and markers."""
        pg.setConfigOptions(antialias=True)
        self.sse_plot = self._make_plot("Information loss (SSE) vs k", "k", "SSE")
        self.rl_plot = self._make_plot("Disclosure risk (RL %) vs k", "k", "RL (%)")
        self.plane = self._make_plot("Risk–utility plane", "SSE", "RL (%)")
        self.sse_plot.setLogMode(True, True)
        self.rl_plot.setLogMode(True, False)
        self.plane.setLogMode(True, False)
        self.legend = _side_legend(self.plane)  # beside the data, never over a point
        self._legend_watched: set[int] = set()
        # after the window has put its other items on the plane (empty ones leave the legend)
        QTimer.singleShot(0, self, self._sync_legend)
        self.front = pg.PlotDataItem(pen=pg.mkPen("#444", width=1.5, style=Qt.PenStyle.DashLine))
        self.plane.addItem(self.front)
        self._set_k_ticks()
        self.markers = {}
        for name, plot in (("sse", self.sse_plot), ("rl", self.rl_plot), ("plane", self.plane)):
            m = pg.PlotDataItem(
                [],
                [],
                pen=None,
                symbol="star",
                symbolSize=22,
                symbolBrush=pg.mkBrush("#ffd400"),
                symbolPen=pg.mkPen("#000", width=1.2),
            )
            m.setZValue(100)
            plot.addItem(m)
            self.markers[name] = m

    def _build_target_box(self) -> QGroupBox:
        """The target box: the best computed point under a limit on RL or SSE."""
        tbox = QGroupBox("Target")
        tl = QGridLayout(tbox)
        tl.setContentsMargins(6, 4, 6, 4)
        self.target_kind = QComboBox()
        self.target_kind.addItem("max RL (%) → least SSE", "rl")
        self.target_kind.addItem("max SSE → least RL", "sse")
        self.target_kind.setToolTip(
            "Solve the other way round: the computed point that meets "
            "the limit with the least loss (or the least risk)."
        )
        self.target_value = QDoubleSpinBox()
        self.target_value.setDecimals(4)
        self.target_value.setRange(0, 1e18)
        self.target_value.setValue(5.0)
        self.target_value.setToolTip(
            "The limit: maximum record-linkage risk in percent, or maximum SSE (in the SSE scale shown)."
        )
        self.target_btn = QPushButton("Find")
        self.target_btn.setToolTip(
            "Pick the best computed point under the limit and put its k and ε in the form."
        )
        self.target_btn.clicked.connect(self._on_target_clicked)
        self.target_result = QLabel("")
        self.target_result.setWordWrap(True)
        self.target_result.setObjectName("target_result")
        tl.addWidget(self.target_kind, 0, 0)
        tl.addWidget(self.target_value, 0, 1)
        tl.addWidget(self.target_btn, 0, 2)
        tl.addWidget(self.target_result, 1, 0, 1, 3)
        return tbox

    def _connect_state(self, state: AppState) -> None:
        """Follow the state: new data, types, roles, sweep settings and recipe."""
        state.sig_data_changed.connect(self.clear)
        state.sig_types_changed.connect(lambda _c: self.clear())
        state.sig_roles_changed.connect(self._on_inputs_changed)
        state.sig_sweep_changed.connect(self._on_state_sweep_changed)
        state.sig_recipe_changed.connect(self._on_state_recipe_changed)

    def _plots(self) -> tuple:
        return (self.sse_plot, self.rl_plot, self.plane)

    def showEvent(self, ev) -> None:  # noqa: N802 - Qt API
        super().showEvent(ev)
        for i, plot in enumerate(self._plots()):
            if plot.isHidden():
                turns.later(plot.show, owner=self, key=f"show-plot-{i}")

    def hideEvent(self, ev) -> None:  # noqa: N802 - Qt API
        super().hideEvent(ev)
        if not ev.spontaneous():  # another tab: the plots wait for the next show (above)
            for plot in self._plots():
                plot.hide()

    # --- Public API
    def request(self) -> dict:
        """The sweep settings of the state, parsed (ValueError with a readable message)."""
        return self.state.sweep_request()

    def set_stale(self, stale: bool) -> None:
        """Say so when the plotted curves no longer match the settings (they stay visible)."""
        note = (
            "⚠ The settings changed since this sweep: the curves show the earlier "
            "settings. Run the sweep again (Ctrl+E)."
        )
        if stale and self.points and not self.status.text().startswith("⚠"):
            self._status_before_stale = self.status.text()
            self.status.setText(note)
            self.status.setStyleSheet("color:#8a5a00;")
        elif not stale and self.status.text().startswith("⚠"):
            self.status.setText(self._status_before_stale)
            self.status.setStyleSheet("")

    def _on_state_sweep_changed(self) -> None:
        sw = self.state.recipe.sweep
        for edit, key in ((self.ks, "ks"), (self.eps, "epsilons")):
            if edit.text() != str(sw.get(key, "")):
                edit.setText(str(sw.get(key, "")))
        if self.repeats.value() != int(sw.get("repeats", 1)):
            self.repeats.setValue(int(sw.get("repeats", 1)))

    def _on_state_recipe_changed(self) -> None:
        p = self.state.recipe.params
        self.set_chosen(p.get("k"), p.get("epsilon"), self.state.recipe.method)
        self._enable_grid_fields(self.state.recipe.method)

    def _enable_grid_fields(self, method: str | None) -> None:
        """The k and ε grid fields only for a method that has that parameter (a method without
        ε, e.g. local-suppression, ignores the ε grid; one without k, e.g. laplace, the k grid).
        """
        from dpstudio.engine.registry import get_method

        try:
            spec = get_method(str(method)) if method else None
        except (KeyError, ValueError):
            spec = None
        for field, used, name in (
            (self.ks, spec is None or spec.uses_k, "k"),
            (self.eps, spec is None or spec.uses_epsilon, "ε"),
        ):
            field.setEnabled(used)
            field.setStatusTip("" if used else f"{spec.name if spec else ''} has no {name}: not swept")

    def clear(self) -> None:
        self._redraw_gen += 1  # no staggered redraw of the former sweep after this
        self.points = []
        self.skipped = []
        self.sweep_method = None
        for s in self.series.values():  # emptied, kept for the next sweep (self._pool)
            for item in (s.sse, s.rl, s.plane):
                item.setData([], [])
            for err in (s.sse_err, s.rl_err):
                _empty_err(err)
        self.series = {}
        self._sync_legend()
        self.front.setData([], [])
        for m in self.markers.values():
            m.setData([], [])
        self.target_result.setText("")
        self.hover_label.setText(" ")  # the chosen point of the previous sweep is gone
        # no "Sweep done: 72 points…" or "⚠ The settings changed…" over empty plots (issue 11 #8)
        self.status.setText(IDLE_STATUS)
        self.status.setStyleSheet("")
        self._status_before_stale = ""
        self.banner.hide()
        self.banner.label.setToolTip("")

    def begin(
        self, epsilons: list, uses_eps: bool, baselines: bool = True, method: str | None = None
    ) -> None:
        """Prepare one curve per ε (plus the baseline) before points arrive; while shown, the
        RL plot and the plane repaint in turns of their own (the three emptied and re-ranged
        plots painted in one turn were a sweep's longest stall, issue 24 §5).
        """
        turns.paint_later(self.rl_plot, owner=self, key="paint-rl")
        turns.paint_later(self.plane, owner=self, key="paint-plane")
        self.clear()
        self.sweep_method = method
        # the form's k and ε starred on these curves once drawn (set before the sweep, under
        # no sweep method, they were starred only at the next change of the recipe: a
        # Protect's new seed, which then repainted the three plots in its turn)
        rec = self.state.recipe
        self.chosen = (rec.params.get("k"), rec.params.get("epsilon")) if rec.method == method else None
        self.view = sweep_view(method) if method else NUMERIC
        self._apply_view()
        if self.view.x == "epsilon":  # no k: one curve against ε
            keys: list = ["all"]
        else:
            keys = ([None] if baselines else []) + list(epsilons) if uses_eps else [None]
        for i, e in enumerate(keys):
            color = BASELINE_COLOR if (e is None and uses_eps) else PALETTE[i % len(PALETTE)]
            style = Qt.PenStyle.DashLine if (e is None and uses_eps) else Qt.PenStyle.SolidLine
            s = self._series_items(i, color, style)
            s.eps, s.name = e, _fmt_eps(e) if (uses_eps and e != "all") else "method"
            self.series[e] = s
        self._sync_legend()  # empty until a series has a point on the plane
        self._empty_axes(epsilons)
        self.status.setText("Sweep running…")
        self.status.setStyleSheet("")

    def _series_items(self, i: int, color: str, style) -> _Series:
        """The ``i``-th series' items (empty), in ``color`` and ``style``: from the pool when
        an earlier sweep made them (restyled only when the style differs), else made and
        added to the plots once.
        """
        pen = pg.mkPen(color, width=2, style=style)
        if i < len(self._pool):
            s = self._pool[i]
            if (s.color, s.style) != (color, style):
                for item in (s.sse, s.rl):
                    item.setPen(pen)
                    item.setSymbolBrush(color)
                    item.setSymbolPen(color)
                for err in (s.sse_err, s.rl_err):
                    err.setData(pen=pg.mkPen(color, width=1))
                s.plane.setSymbolBrush(pg.mkBrush(color))
                s.color, s.style = color, style
            return s
        sse = pg.PlotDataItem([], [], pen=pen, symbol="o", symbolSize=5, symbolBrush=color, symbolPen=color)
        rl = pg.PlotDataItem([], [], pen=pen, symbol="o", symbolSize=5, symbolBrush=color, symbolPen=color)
        sse_err = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), pen=pg.mkPen(color, width=1))
        rl_err = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), pen=pg.mkPen(color, width=1))
        plane = pg.PlotDataItem(
            [],
            [],
            pen=None,
            symbol="o",
            symbolSize=7,
            symbolBrush=pg.mkBrush(color),
            symbolPen=pg.mkPen("w", width=0.5),
        )
        for plot, item in (
            (self.sse_plot, sse),
            (self.rl_plot, rl),
            (self.sse_plot, sse_err),
            (self.rl_plot, rl_err),
            (self.plane, plane),
        ):
            plot.addItem(item)
        s = _Series(None, color, sse, rl, sse_err, rl_err, plane, "", style)
        self._pool.append(s)
        return s

    def _empty_axes(self, epsilons: list) -> None:
        """Axes that say what is coming while no point is drawn (issue 27: the empty RL axis
        ran −0.4 … 0.4): x over the grid's k (or ε), RL 0 … 100 %, a loss 0 … 1; the plots
        follow their points again from the first one on.
        """
        try:
            req = self.state.sweep_request()
        except ValueError:
            req = {"ks": [], "epsilons": list(epsilons)}
        xs = [float(e) for e in (req["epsilons"] if self.view.x == "epsilon" else req["ks"]) if e]
        lo, hi = (min(xs), max(xs)) if xs else (1.0, 10.0)
        if hi <= lo:
            lo, hi = lo * 0.5, hi * 2.0
        log_x = self.log_y.isChecked()
        for plot in (self.sse_plot, self.rl_plot):
            plot.setXRange(np.log10(lo) if log_x else lo, np.log10(hi) if log_x else hi, padding=0.05)
        n = len(self.state.df) if self.state.df is not None else 0
        risk_hi = 100.0 if self.view.risk == "rl" else max(1.0, 0.01 * n)  # RL %, or 1 % of records
        self.rl_plot.setYRange(0.0, risk_hi, padding=0.02)
        self.plane.setYRange(0.0, risk_hi, padding=0.02)
        if self._loss_log():
            self.sse_plot.setYRange(-4.0, 0.0, padding=0.02)  # 10⁻⁴ … 1 (log axis)
        else:
            self.sse_plot.setYRange(0.0, 1.0, padding=0.02)
        if self.view.loss is None:
            self.plane.setXRange(-4.0, 0.0, padding=0.02)
        else:
            self.plane.setXRange(0.0, 1.0, padding=0.02)
        self._axes_fixed = True

    def add_points(self, batch: list) -> None:
        """Slot for the worker's batches of SweepPoints (redraws are coalesced)."""
        self.skipped.extend(p for p in batch if getattr(p, "skipped", None))
        self.points.extend(p for p in batch if not getattr(p, "skipped", None))
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()
        last = batch[-1]
        self.status.setText(f"Sweep: {last.index + 1} / {last.total} points ({last.elapsed:.1f} s)")

    def finish(self, cancelled: bool = False, error: str = "") -> None:
        """The sweep ended: the last points drawn (one plot per turn of the event loop while
        the panel is shown), then the closing status, banner and marker.
        """
        self._redraw_timer.stop()
        self._redraw(stagger=True, then=lambda: self._finished(cancelled, error))

    def _finished(self, cancelled: bool, error: str) -> None:
        n = len(self.points)
        if error:
            self.status.setText(f"Sweep failed after {n} point(s).")
            self.banner.show_message(error, "error")
        elif cancelled:
            self.status.setText(f"Sweep cancelled: {n} point(s) computed.")
        else:
            t = self.points[-1].elapsed if self.points else 0.0
            self.status.setText(
                f"Sweep done: {n} points in {t:.1f} s. Hover a point for its "
                "values; click it to use its k and ε." + self._off_plane_note()
            )
        if self.skipped and not error:
            # one short line (the plots need the room); the full list on hover
            full = self.skipped_message()
            first = self.skipped[0]
            reason = first.skipped if len(first.skipped) <= 150 else first.skipped[:149] + "…"
            self.banner.show_message(
                f"{len(self.skipped)} (k, ε) point(s) left out: the method cannot run there, "
                f"e.g. {reason} (hover for the list)",
                "warning",
            )
            self.banner.label.setToolTip(full)
        self._update_marker()

    def _off_plane_note(self) -> str:
        """Why a series with points is missing from the plane and its legend ("" if none is)."""
        notes = []
        for s in self.off_plane():
            vals = [
                self._loss_value(p)
                for p in self.points
                if (p.epsilon is not None if s.eps == "all" else p.epsilon == s.eps)
            ]
            what = "SSE" if self.view.loss is None else "loss"
            zero = all(v is not None and v[0] == 0 for v in vals)
            # short: the label does not wrap and sets the panel's minimum width
            notes.append(f"{s.name}: {what} = 0, off the log axes" if zero else f"{s.name}: no {what}")
        return (" (" + "; ".join(notes) + ")") if notes else ""

    def skipped_message(self, limit: int = 6) -> str:
        """Which (k, ε) cells were left out and why (grouped by reason)."""
        by: dict[str, list[str]] = {}
        for p in self.skipped:
            cell = f"k = {p.k}" if p.k is not None else ""
            if p.epsilon is not None:
                cell += (", " if cell else "") + f"ε = {p.epsilon:g}"
            by.setdefault(p.skipped, []).append(cell or "?")
        lines = [f"{len(self.skipped)} (k, ε) point(s) left out — the method cannot run there:"]
        for reason, cells in list(by.items())[:limit]:
            lines.append(f"• {'; '.join(cells)}: {reason}")
        if len(by) > limit:
            lines.append(f"• … and {len(by) - limit} more reason(s).")
        return "\n".join(lines)

    def set_chosen(self, k, eps, method: str | None = None) -> None:
        """Mark (k, ε) of the form — only on curves of the same method."""
        self.chosen = (k, eps) if (method is None or method == self.sweep_method) else None
        self._update_marker()

    def n_plotted(self) -> int:
        """Number of points currently drawn (for tests; flushes a pending redraw)."""
        if self._redraw_timer.isActive():
            self._redraw_timer.stop()
            self._redraw()
        for key in ("redraw-rl", "redraw-plane"):  # a staggered redraw's rest
            turns.flush(self, key)
        return self.n_drawn()

    def n_drawn(self) -> int:
        """Number of points drawn now (what the window shows: no pending redraw forced)."""
        return sum(len(s.sse.xData) if s.sse.xData is not None else 0 for s in self.series.values())

    def find_target(self, kind: str, limit: float):
        """Best computed point under the limit: ``kind='rl'``: RL ≤ limit, least SSE."""
        uses_eps = any(p.epsilon is not None for p in self.points)
        cands = [p for p in self.points if (p.epsilon is not None or not uses_eps)]
        get_lim, get_min = (
            (self._risk_value, self._loss_value) if kind == "rl" else (self._loss_value, self._risk_value)
        )
        ok = []
        for p in cands:
            lim, mn = get_lim(p), get_min(p)
            if (
                lim is not None
                and mn is not None
                and math.isfinite(lim[0])
                and math.isfinite(mn[0])
                and lim[0] <= limit
            ):
                ok.append((mn[0], -(p.epsilon or 0), p.k or 0, p.index, p))
        if not ok:
            return None
        return min(ok, key=lambda t: t[:4])[-1]

    def export_images(self) -> list[tuple[str, bytes]]:
        """The three plots as PNG bytes (for the HTML report), chosen point marked."""
        from pyqtgraph.exporters import ImageExporter

        out = []
        for title, plot in (
            ("SSE vs k", self.sse_plot),
            ("RL vs k", self.rl_plot),
            ("Risk–utility plane", self.plane),
        ):
            exp = ImageExporter(plot.getPlotItem())
            exp.parameters()["width"] = 900
            img = exp.export(toBytes=True)
            ba = QByteArray()
            buf = QBuffer(ba)
            buf.open(QIODevice.OpenModeFlag.WriteOnly)
            img.save(buf, "PNG")
            buf.close()
            out.append((title, bytes(ba.data())))
        return out

    # --- Internals
    def _make_plot(self, title: str, xlab: str, ylab: str) -> pg.PlotWidget:
        w = log_plot_widget()  # log axes label only what fits (issue 11 #7)
        w.setBackground("w")
        w.setTitle(title, size="10pt", color="#222")
        w.setLabel("bottom", xlab)
        w.setLabel("left", ylab)
        # no grid: on a software-rendered log plot it doubles the paint time (~40 ms)
        w.setMinimumSize(260, 170)
        for ax in ("left", "bottom"):
            w.getAxis(ax).setTextPen("#333")
            w.getAxis(ax).setPen("#888")
            # no "(x0.001)" unit prefix: on a log axis it rescaled the tick labels (SSE 0.01
            # read as 10¹)
            w.getAxis(ax).enableAutoSIPrefix(False)
        return w

    @property
    def _sse_key(self) -> str | None:
        """The plane's SSE scale, ``None`` when the plane is not SSE against RL (the candidate
        releases of the history panel are then not drawn on it).
        """
        return self._sse_choice if self.view.sse_plane else None

    def _sse_value(self, p):
        v = p.values.get(self._sse_choice)
        if v is None:
            for k_, vv in p.values.items():
                if k_.startswith("sse"):
                    return vv
        return v

    def _loss_value(self, p):
        """(mean, sd) of the information-loss axis at point ``p`` (None when not measured)."""
        if self.view.loss is None:
            return self._sse_value(p)
        v = p.values.get(self.view.loss)
        return None if v is None else (v[0] * self.view.loss_scale, v[1] * self.view.loss_scale)

    def _risk_value(self, p):
        """(mean, sd) of the risk axis at point ``p`` (RL when the point lacks the view's)."""
        return p.values.get(self.view.risk) or p.values.get("rl")

    def _x_value(self, p) -> float:
        if self.view.x == "epsilon":
            return float(p.epsilon) if p.epsilon is not None else float("nan")
        return float(p.k) if p.k is not None else 1.0

    def _loss_log(self) -> bool:
        return self.log_y.isChecked() and self.view.loss is None

    def _apply_view(self) -> None:
        """Titles, axis labels and log modes for the current view (nothing when they are
        already those: each title and label is a text item laid out anew).
        """
        v, log = self.view, self.log_y.isChecked()
        key = (v, log, self._sse_choice)
        if key == self._view_key:
            return
        self._view_key = key
        xl = v.x_label
        loss_lab = self._loss_label()
        self.sse_plot.setTitle(
            f"Information loss ({'SSE' if v.loss is None else 'suppressed'}) vs {xl}",
            size="10pt",
            color="#222",
        )
        self.rl_plot.setTitle(
            f"Disclosure risk ({'RL %' if v.risk == 'rl' else 're-identifications'}) vs {xl}",
            size="10pt",
            color="#222",
        )
        for plot in (self.sse_plot, self.rl_plot):
            plot.setLabel("bottom", xl)
        self.sse_plot.setLabel("left", loss_lab)
        self.rl_plot.setLabel("left", v.risk_label)
        self.plane.setLabel("bottom", loss_lab)
        self.plane.setLabel("left", v.risk_label)
        self.sse_plot.setLogMode(log, self._loss_log())
        self.rl_plot.setLogMode(log, False)
        self.plane.setLogMode(v.loss is None, False)
        self.sse_scale.setEnabled(v.loss is None)
        loss_short = "SSE" if v.loss is None else "suppressed %"
        risk_short = "RL (%)" if v.risk == "rl" else "re-identifications"
        self.target_kind.setItemText(0, f"max {risk_short} → least {loss_short}")
        self.target_kind.setItemText(1, f"max {loss_short} → least {risk_short}")
        self._set_k_ticks()

    def _loss_label(self) -> str:
        if self.view.loss is not None:
            return self.view.loss_label
        return "SSE (normalised)" if self._sse_choice == "sse_normalized" else "SSE (raw)"

    def _redraw_staggered(self) -> None:
        """The redraw of a running sweep (the throttle's timer): one plot per turn of the
        event loop (dpstudio.app.turns), so that each paint is one plot's (issue 27.4: the
        three plots painted in one turn were the sweep's longest stall).
        """
        self._redraw(stagger=True)

    def _redraw(self, stagger: bool = False, then=None) -> None:
        """Set the plots' data from the points; ``stagger``: one plot per turn of the event
        loop while the panel is shown (hidden, nothing is painted: all at once); ``then``
        after the last plot.
        """
        self._redraw_gen += 1
        gen = self._redraw_gen
        ops: dict[str, list] = {"sse": [], "rl": [], "plane": []}
        self._redraw_ops(ops)
        if not stagger or not self.isVisible():
            for name in ("sse", "rl", "plane"):
                for op in ops[name]:
                    op()
            self._after_redraw()
            if then is not None:
                then()
            return
        for op in ops["sse"]:
            op()

        def later(name: str) -> None:
            if gen != self._redraw_gen:
                return  # a newer redraw (or a clear) replaced this one
            for op in ops[name]:
                op()
            if name == "plane":
                self._after_redraw()
                if then is not None:
                    then()

        turns.later(lambda: later("rl"), owner=self, key="redraw-rl")
        turns.later(lambda: later("plane"), owner=self, key="redraw-plane")

    def _after_redraw(self) -> None:
        self._sync_legend()
        self._update_marker()

    def _redraw_ops(self, ops: dict) -> None:
        """What a redraw sets, per plot (``ops[plot]``: calls to make), from the points."""
        if self.points and getattr(self, "_axes_fixed", False):
            self._axes_fixed = False  # the first points: the plots follow them again
            for plot in (self.sse_plot, self.rl_plot, self.plane):
                plot.enableAutoRange()
        log = self.log_y.isChecked()
        log_loss = self._loss_log()
        by_eps = self.view.x == "epsilon"
        groups: dict = {}
        for p in self.points:
            if by_eps and p.epsilon is None:
                continue  # a noise-free point has no place on an ε axis
            groups.setdefault("all" if by_eps else p.epsilon, []).append(p)
        all_x, all_y = [], []
        for e, pts in groups.items():
            s = self.series.get(e)
            if s is None:
                continue
            pts = sorted(pts, key=self._x_value)
            ks = np.array([self._x_value(p) for p in pts], dtype=float)
            loss = [self._loss_value(p) or (np.nan, 0.0) for p in pts]
            risk = [self._risk_value(p) or (np.nan, 0.0) for p in pts]
            sse = np.array([v[0] for v in loss], dtype=float)
            sse_sd = np.array([v[1] for v in loss], dtype=float)
            rl = np.array([v[0] for v in risk], dtype=float)
            rl_sd = np.array([v[1] for v in risk], dtype=float)
            sy = _pos(sse) if log_loss else sse
            ops["sse"].append(lambda s=s, ks=ks, sy=sy: _set_curve(s.sse, ks, sy))
            ops["sse"].append(
                lambda s=s, ks=ks, m=sse, sd=sse_sd: self._set_err(s.sse_err, ks, m, sd, log, log_y=log_loss)
            )
            ops["rl"].append(lambda s=s, ks=ks, rl=rl: _set_curve(s.rl, ks, rl))
            ops["rl"].append(
                lambda s=s, ks=ks, m=rl, sd=rl_sd: self._set_err(s.rl_err, ks, m, sd, log, log_y=False)
            )
            px = _pos(sse) if self.view.loss is None else sse
            on_plane = np.isfinite(px) & np.isfinite(rl)  # the plane has no lines: no gaps to keep
            ops["plane"].append(lambda s=s, x=px[on_plane], y=rl[on_plane]: s.plane.setData(x, y))
            all_x.append(sse)
            all_y.append(rl)
        if all_x:
            x = np.concatenate(all_x)
            y = np.concatenate(all_y)
            ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) if self.view.loss is None else (x >= 0))
            idx = pareto_front(x[ok], y[ok])
            fx, fy = x[ok][idx], y[ok][idx]
            if len(fx):  # staircase
                sx = np.repeat(fx, 2)[1:]
                sy = np.repeat(fy, 2)[:-1]
                ops["plane"].append(lambda: self.front.setData(sx, sy))

    def _sync_legend(self, *_args) -> None:
        """The plane's legend lists the items drawn on the plane: the series with a point
        there, in curve order, then other named items with points (the history panel's
        candidate releases, followed through their ``sigPlotChanged``).

        A series can have points and none on the plane: the noise-free baseline of k-eps has
        SSE 0 at every k (no noise on the ε-quasi-identifiers, the only attributes SSE is
        measured on), and the plane's SSE axis is logarithmic.  Its legend entry was an empty
        "no noise" (polish task, issue 11 leftover).
        """
        ours = {id(s.plane) for s in self._pool}  # the series' (in use or not)
        items = [(s.plane, s.name) for s in self.series.values()]
        for it in self.plane.getPlotItem().listDataItems():
            if id(it) in ours or not it.name():
                continue
            items.append((it, it.name()))
            if id(it) not in self._legend_watched:  # e.g. candidates drawn after a protect
                self._legend_watched.add(id(it))
                it.sigPlotChanged.connect(self._sync_legend)
        want = [(it, name) for it, name in items if it.xData is not None and len(it.xData)]
        if [it for it, _ in want] == [sample.item for sample, _ in self.legend.items]:
            return
        self.legend.clear()
        for it, name in want:
            self.legend.addItem(it, name)
        # one column while it fits beside a short plane, then as many as needed
        self.legend.setColumnCount(max(1, math.ceil(len(want) / LEGEND_ROWS)))

    def off_plane(self) -> list:
        """The series with computed points of which none can be drawn on the plane (e.g. the
        k-eps baseline: SSE 0 on a log axis).
        """
        by_eps = self.view.x == "epsilon"
        with_points = {
            ("all" if by_eps else p.epsilon) for p in self.points if not (by_eps and p.epsilon is None)
        }
        return [
            s
            for e, s in self.series.items()
            if e in with_points and not (s.plane.xData is not None and len(s.plane.xData))
        ]

    @staticmethod
    def _set_err(item: pg.ErrorBarItem, ks, mean, sd, log: bool, log_y: bool = True) -> None:
        m = np.isfinite(mean) & (sd > 0) & np.isfinite(ks) & ((ks > 0) if log else True)
        if not m.any():
            _empty_err(item)
            return
        x, y, s = ks[m], mean[m], sd[m]
        xs = np.log10(x) if log else x
        # caps a fixed share of the x span of the curve: a constant beam was a full-width line
        # when every point sat at one x (a Laplace sweep, k = 1)
        span = float(np.ptp(np.log10(ks[np.isfinite(ks) & (ks > 0)]) if log else ks[np.isfinite(ks)]))
        beam = 0.025 * span if span > 0 else 0.0
        if log_y:  # the plot is in log10 view coordinates; ErrorBarItem is not log-aware
            ok = y > 0
            xs, y, s = xs[ok], y[ok], s[ok]
            top = np.log10(y + s) - np.log10(y)
            # at most one decade down (a lower bar reaching 0 is -inf on a log axis)
            low = np.log10(y) - np.log10(np.maximum(y - s, y / 10))
            item.setData(x=xs, y=np.log10(y), top=top, bottom=low, beam=beam)
        else:
            item.setData(x=xs, y=y, top=s, bottom=np.minimum(s, np.maximum(y, 0)), beam=beam)

    def _point_coords(self, plot) -> list[tuple[float, float, object]]:
        """(x, y) in view coordinates of every drawn point of ``plot``, with its SweepPoint."""
        log, log_loss = self.log_y.isChecked(), self._loss_log()
        out = []
        for p in self.points:
            sse = (self._loss_value(p) or (np.nan, 0))[0]
            rl = (self._risk_value(p) or (np.nan, 0))[0]
            k = self._x_value(p)
            kx = _log(k) if log else k
            if plot is self.sse_plot:
                x, y = kx, (_log(sse) if log_loss else sse)
            elif plot is self.rl_plot:
                x, y = kx, rl
            else:
                x, y = (_log(sse) if self.view.loss is None else sse), rl
            if math.isfinite(x) and math.isfinite(y):
                out.append((x, y, p))
        return out

    def _nearest(self, plot, scene_pos, max_px: float = 12.0):
        vb = plot.getPlotItem().vb
        best, best_d = None, max_px
        for x, y, p in self._point_coords(plot):
            sp = vb.mapViewToScene(pg.Point(x, y))
            d = math.hypot(sp.x() - scene_pos.x(), sp.y() - scene_pos.y())
            if d < best_d:
                best, best_d = p, d
        return best

    def describe(self, p) -> str:
        sse = self._sse_value(p)
        rl = p.values.get("rl")
        parts = [f"k = {p.k}" if p.k is not None else "", _fmt_eps(p.epsilon)]
        if self.view.loss is not None and p.values.get(self.view.loss):
            v = self._loss_value(p)
            parts.append(f"{self.view.loss_label} = {v[0]:.3g} ± {v[1]:.2g}")
        if sse:
            parts.append(f"SSE = {sse[0]:.4g} ± {sse[1]:.2g}")
        if self.view.risk != "rl" and p.values.get(self.view.risk):
            v = p.values[self.view.risk]
            parts.append(f"{self.view.risk_label} = {v[0]:.3g} ± {v[1]:.2g}")
        if rl:
            parts.append(f"RL = {rl[0]:.3g} % ± {rl[1]:.2g}")
        parts.append(f"({p.repeats} run{'s' if p.repeats > 1 else ''})")
        return ",  ".join(x for x in parts if x)

    def _on_mouse_moved(self, plot, pos) -> None:
        p = self._nearest(plot, pos)
        if p is None:
            return
        text = self.describe(p)
        self.hover_label.setText(text + "  — click to use this k and ε")
        QToolTip.showText(QCursor.pos(), text, plot)

    def _on_mouse_clicked(self, plot, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        p = self._nearest(plot, ev.scenePos())
        if p is not None:
            self.choose(p)

    def choose(self, p) -> None:
        self.sig_point_chosen.emit(p.k, p.epsilon)
        self.hover_label.setText("Chosen: " + self.describe(p))

    def _on_target_clicked(self) -> None:
        kind = self.target_kind.currentData()
        limit = float(self.target_value.value())
        if not self.points:
            self.target_result.setText("Run a sweep first.")
            return
        p = self.find_target(kind, limit)
        if p is None:
            what = "RL" if kind == "rl" else "SSE"
            self.target_result.setText(
                f"<span style='color:#b00020'>No computed point has "
                f"{what} ≤ {limit:g}. Try larger k / smaller ε, or a "
                "wider grid.</span>"
            )
            return
        self.target_result.setText("Best: " + self.describe(p))
        self.choose(p)

    def _on_scale_changed(self) -> None:
        self._sse_choice = SSE_KEYS[self.sse_scale.currentData()]
        self._apply_view()
        self._redraw()

    def _on_log_toggled(self, _on: bool) -> None:
        self._apply_view()
        self._redraw()

    def _set_k_ticks(self) -> None:
        """Readable k ticks (1, 2, 5, 10, 20, 50…) on the log axis."""
        for plot in (self.sse_plot, self.rl_plot):
            ax = plot.getAxis("bottom")
            if self.log_y.isChecked() and self.view.x == "k":
                vals = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
                minor = [3, 4, 6, 7, 8, 9, 30, 40, 60, 70, 80, 90, 300, 400, 600, 700, 800, 900]
                ax.setTicks([[(math.log10(v), str(v)) for v in vals], [(math.log10(v), "") for v in minor]])
            else:
                ax.setTicks(None)

    def _on_inputs_changed(self) -> None:
        if self.points and not self.status.text().startswith("⚠"):  # set_stale says more
            self.status.setText(
                "Roles or domains changed: the curves below are from the "
                "previous settings. Run the sweep again."
            )

    def _update_marker(self) -> None:
        """The chosen point's star on each plot; a plot whose star does not move is left
        alone (each change repaints the plot: a Protect's new seed in the recipe repainted all
        three in its turn, issue 24 §5).
        """
        want = self._marker_positions()
        for name, m in self.markers.items():
            xy = want.get(name)
            have = (m.xData[0], m.yData[0]) if m.xData is not None and len(m.xData) else None
            if xy == have:
                continue
            if xy is None:
                m.setData([], [])
            else:
                m.setData([xy[0]], [xy[1]])

    def _marker_positions(self) -> dict:
        """{plot name: (x, y)} of the chosen point's star (view coordinates)."""
        out: dict = {}
        if not self.chosen:
            return out
        k, eps = self.chosen
        match = [
            p
            for p in self.points
            if p.k == k
            and (
                (p.epsilon is None and eps is None)
                or (p.epsilon is not None and eps is not None and math.isclose(p.epsilon, eps))
            )
        ]
        if not match:
            return out
        p = match[0]
        sse = (self._loss_value(p) or (np.nan, 0))[0]
        rl = (self._risk_value(p) or (np.nan, 0))[0]
        k = self._x_value(p)
        log, log_loss = self.log_y.isChecked(), self._loss_log()
        for name, (x, y) in (("sse", (k, sse)), ("rl", (k, rl)), ("plane", (sse, rl))):
            x_log = log if name != "plane" else self.view.loss is None
            y_log = log_loss and name == "sse"
            if not (math.isfinite(x) and math.isfinite(y)) or (x_log and x <= 0) or (y_log and y <= 0):
                continue
            out[name] = (float(x), float(y))
        return out


class _SideLegend(pg.LegendItem):
    """The plane's legend, laid out in the plot's grid to the right of the view box: it takes
    its own room and never covers a point (a statistician must see every candidate release;
    the legend anchored inside the top-right corner hid the points there).

    pyqtgraph's legend sizes itself by ``setGeometry`` at (0, 0) of its parent; here the plot's
    layout places it, from the legend's size hint.  It is not draggable (the layout would put
    it back).
    """

    def updateSize(self) -> None:  # noqa: N802 - pyqtgraph's name
        self.layout.invalidate()
        self.updateGeometry()  # the plot's layout asks the new size hint

    def paint(self, p, *args) -> None:
        if self.items:  # no empty frame before anything is drawn
            super().paint(p, *args)

    def mouseDragEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph's name
        ev.ignore()


def _side_legend(plot: pg.PlotWidget) -> _SideLegend:
    """A legend in ``plot``'s layout beside the view box (row of the view box, after the right
    axis), top-aligned, its own size; registered as the plot item's legend so that named items
    added later are listed as with ``addLegend``.
    """
    pi = plot.getPlotItem()
    legend = _SideLegend(labelTextSize="9pt", labelTextColor="#333", brush=pg.mkBrush(255, 255, 255, 220))
    legend.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
    # scaled with the plot, as its axes' text (the report's PNG is rendered at 900 px: an
    # unscaled legend was small in a column twice its size)
    legend.setFlag(legend.GraphicsItemFlag.ItemIgnoresTransformations, False)
    pi.layout.addItem(legend, 2, 3)
    pi.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    pi.legend = legend
    return legend


def _holder(plot: QWidget) -> QWidget:
    """``plot`` alone in a plain widget whose layout keeps its room while it is hidden."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    keep = plot.sizePolicy()
    keep.setRetainSizeWhenHidden(True)
    plot.setSizePolicy(keep)
    lay.addWidget(plot)
    return box


def _empty_err(item: pg.ErrorBarItem) -> None:
    """No error bars (the earlier bars' extents go too: arrays of another length broke the
    item's bounds).
    """
    item.setData(
        x=np.zeros(0), y=np.zeros(0), top=None, bottom=None, left=None, right=None, height=None, width=None
    )


def _log(v: float) -> float:
    return math.log10(v) if v is not None and v > 0 else float("nan")


def _set_curve(item: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """``item.setData(x, y)``; nothing when no point is finite (pyqtgraph's bounds of an all-NaN
    curve warned "All-NaN slice encountered").
    """
    if np.isfinite(y).any():
        item.setData(x, y)
    else:
        item.setData([], [])


def _pos(a: np.ndarray) -> np.ndarray:
    a = a.astype(float).copy()
    a[~(a > 0)] = np.nan
    return a


if __name__ == "__main__":
    import pandas as pd
    from PySide6.QtWidgets import QApplication

    from dpstudio.app.resources import sample_path
    from dpstudio.engine import sweep

    app = QApplication(sys.argv)
    st = AppState()
    st.set_data(pd.read_csv(sample_path()), str(sample_path()))
    w = ExplorePanel(st)
    cols = ["FICA", "FEDTAX"]  # a preview sweep on the sample: MDAV over a few k
    w.begin([], False, method="mdav")
    w.add_points(list(sweep(st.df, "mdav", {c: "k-quasi" for c in cols}, ks=[2, 5, 10, 20], seed=1)))
    w.finish()
    w.resize(1200, 700)
    w.show()
    app.exec()
