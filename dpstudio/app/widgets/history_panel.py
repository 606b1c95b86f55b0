"""Candidate releases side by side: every Protect run of the session, kept in memory (issue 11).

Each run is a :class:`Candidate`: the result object (the release itself, in memory only —
nothing is written to disk), its measures, and the settings it was made with (roles, types,
domains, precision, hierarchies, method, parameters, seed).  The panel lists them in one table
(one row per run, the measures as columns, sortable), draws them on the risk–utility plane of
the trade-off tab (numbered points; the selected run ringed), and lets the user pin a run (kept
when old runs are dropped), restore it (its settings back into the
:class:`~dpstudio.app.state.AppState` and its release as the current result) and export it
(restore, then the window's export dialog, which writes through the controller's export).

The history belongs to the loaded data: opening another file clears it.  At most
:data:`MAX_UNPINNED` unpinned runs are kept (oldest dropped first): each holds a release and
its aligned original in memory.
"""

from __future__ import annotations

import copy
import datetime as _dt
import html
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import turns
from dpstudio.app.state import AppState

MAX_UNPINNED = 20

#: measure columns of the comparison table: key -> header (shown when any run has the key)
MEASURE_COLUMNS = {
    "sse_normalized": "SSE (norm.)",
    "sse_raw": "SSE (raw)",
    "rl": "RL (%)",
    "delta_mean_avg": "Δ mean",
    "delta_var_avg": "Δ var",
    "corr_loss_mean": "corr. loss",
    "k_min_class_size": "smallest class",
    "k_share_below": "share < k",
    "keps_linking_risk": "linking risk",
    "keps_rel_error": "rel. error",
    "keps_conf_suppressed_pct": "suppressed (%)",
    "keps_gen_loss": "gen. loss",
}
FIXED_COLUMNS = ["#", "Pinned", "Time", "Method", "Parameters", "DP"]
GUARANTEE = "Guarantee"  # the last column (after the measures)
PIN_COL = FIXED_COLUMNS.index("Pinned")
HIGHLIGHT = "#d62728"


@dataclass
class Candidate:
    """One Protect run of the session (everything in memory)."""

    number: int
    result: Any
    evaluation: dict
    result_recipe: dict
    settings: dict  # roles, types, domains, precision, hierarchies (objects + sources), method, params
    time: _dt.datetime = field(default_factory=_dt.datetime.now)
    pinned: bool = False

    @property
    def method(self) -> str:
        return str(getattr(self.result, "method", ""))

    def measure(self, key: str) -> float | None:
        v = (self.evaluation or {}).get(key)
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            return float(v)
        return None

    def params_text(self) -> str:
        p = getattr(self.result, "params", {}) or {}
        out = []
        for k, v in p.items():
            if v is None or isinstance(v, dict) or str(k).startswith("_") or k in ("seed",):
                continue
            name = "ε" if k == "epsilon" else k
            out.append(f"{name} = {v:g}" if isinstance(v, float) else f"{name} = {v}")
        return ", ".join(out)


def snapshot_settings(state: AppState) -> dict:
    """What a run was made with, copied (later edits of the state do not change it)."""
    r = state.recipe
    return {
        "path": state.path,
        "roles": dict(r.roles),
        "types": dict(r.types),
        "domains": {c: tuple(b) for c, b in r.domains.items()},
        "precision": dict(r.precision),
        "hierarchies": dict(state.hierarchies),  # the loaded objects (not re-read on restore)
        "hierarchy_sources": copy.deepcopy(dict(r.hierarchies)),
        "method": r.method,
        "params": copy.deepcopy(dict(r.params)),
    }


def _fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    if float(v).is_integer() and abs(v) < 1e12:
        return f"{int(v):,}"
    return f"{v:.4g}"


class _SortItem(QTableWidgetItem):
    """Sorts by the number in UserRole when both items have one (missing values last)."""

    def __lt__(self, other):  # noqa: D105
        a, b = self.data(Qt.ItemDataRole.UserRole), other.data(Qt.ItemDataRole.UserRole)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        if isinstance(a, (int, float)) != isinstance(b, (int, float)):
            return isinstance(a, (int, float))
        return super().__lt__(other)


class HistoryPanel(QWidget):
    """The session's Protect runs: compare, pin, restore, export."""

    sig_export_requested = Signal()
    """The selected run was restored as the current release: open the export dialog."""
    sig_restored = Signal(int)
    """A run (its number) was restored into the state."""

    def __init__(
        self,
        state: AppState,
        controller=None,
        plane: pg.PlotWidget | None = None,
        sse_key=lambda: "sse_normalized",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.state = state
        self.controller = controller
        self.candidates: list[Candidate] = []
        self._next = 1
        self._sse_key = sse_key
        self._select_after: int | None = None  # the run a pending rebuild selects
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.caption = QLabel("")
        self.caption.setObjectName("history_caption")
        self.caption.setWordWrap(True)
        lay.addWidget(self.caption)
        self.table = QTableWidget(0, len(FIXED_COLUMNS))
        self.table.setObjectName("history_table")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setSortIndicator(0, Qt.SortOrder.AscendingOrder)
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.itemSelectionChanged.connect(self._draw_plane)
        self.table.itemDoubleClicked.connect(lambda _it: self.restore_selected())
        lay.addWidget(self.table, 1)
        bl = QHBoxLayout()
        self.restore_btn = QPushButton("Restore settings")
        self.restore_btn.setObjectName("history_restore")
        self.restore_btn.setToolTip(
            "Put this run's roles, domains, method, parameters and seed "
            "back into the form, and its release back as the current "
            "result (double-click a row does the same)."
        )
        self.restore_btn.clicked.connect(self.restore_selected)
        self.export_btn = QPushButton("Export this release…")
        self.export_btn.setObjectName("history_export")
        self.export_btn.setToolTip(
            "Restore this run and export its release (the usual export "
            "dialog: public release and metadata, private audit trail)."
        )
        self.export_btn.clicked.connect(self.export_selected)
        self.pin_btn = QPushButton("Pin / unpin")
        self.pin_btn.setToolTip(
            "A pinned run is kept when older runs are dropped and when unpinned runs are cleared."
        )
        self.pin_btn.clicked.connect(self._toggle_pin_selected)
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.clicked.connect(self.remove_selected)
        self.clear_btn = QPushButton("Clear unpinned")
        self.clear_btn.clicked.connect(self.clear_unpinned)
        for b in (self.restore_btn, self.export_btn, self.pin_btn, self.remove_btn):
            bl.addWidget(b)
        bl.addStretch(1)
        bl.addWidget(self.clear_btn)
        lay.addLayout(bl)
        # --- the plane: the trade-off tab's, or a small one of our own
        self.own_plane = plane is None
        if plane is None:
            plane = pg.PlotWidget()
            plane.setBackground("w")
            plane.setLogMode(True, False)
            plane.setLabel("bottom", "SSE (normalised)")
            plane.setLabel("left", "RL (%)")
            plane.setTitle("Candidate releases", color="#222")
            plane.setMinimumHeight(220)
            lay.addWidget(plane, 1)
        self.plane = plane
        self.points = pg.PlotDataItem(
            [],
            [],
            pen=None,
            symbol="d",
            symbolSize=11,
            symbolBrush=pg.mkBrush(255, 255, 255, 230),
            symbolPen=pg.mkPen(HIGHLIGHT, width=2),
            name="candidate releases",
        )
        self.selected_point = pg.PlotDataItem(
            [],
            [],
            pen=None,
            symbol="o",
            symbolSize=22,
            symbolBrush=None,
            symbolPen=pg.mkPen(HIGHLIGHT, width=3),
        )
        for it in (self.points, self.selected_point):
            it.setZValue(90)
            plane.addItem(it)
        self.labels: list[pg.TextItem] = []
        state.sig_data_changed.connect(self.clear)
        self._update_buttons()
        self._update_caption()

    # --- Public API
    def add_current(self) -> Candidate | None:
        """Record the state's current result (slot for the controller's ``sig_protected``);
        its row and point are drawn in a turn of their own after the switch to the Results tab
        (issue 24 §5: ~11 ms were in the switch's turn; :meth:`flush` draws them at once).
        """
        st = self.state
        if st.result is None:
            return None
        c = Candidate(
            self._next,
            st.result,
            dict(st.evaluation or {}),
            dict(st.result_recipe or {}),
            snapshot_settings(st),
        )
        self._next += 1
        self.candidates.append(c)
        unpinned = [x for x in self.candidates if not x.pinned]
        for old in unpinned[: max(len(unpinned) - MAX_UNPINNED, 0)]:
            self.candidates.remove(old)
        self._select_after = c.number
        turns.later(self._rebuild, owner=self, key="rebuild")
        return c

    def rebuild_pending(self) -> bool:
        """A recorded run is not drawn yet (its table row and point come in a later turn)."""
        return turns.pending(self, "rebuild")

    def flush(self) -> None:
        """Draw what :meth:`add_current` recorded (the table, the plane) and select the run."""
        turns.flush(self, "rebuild")

    def candidate(self, number: int) -> Candidate | None:
        return next((c for c in self.candidates if c.number == number), None)

    def selected(self) -> Candidate | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        it = self.table.item(rows[0].row(), 0)
        return self.candidate(int(it.data(Qt.ItemDataRole.UserRole))) if it else None

    def select(self, number: int) -> None:
        for i in range(self.table.rowCount()):
            it = self.table.item(i, 0)
            if it is not None and int(it.data(Qt.ItemDataRole.UserRole)) == number:
                self.table.selectRow(i)
                return

    def set_pinned(self, number: int, pinned: bool) -> None:
        c = self.candidate(number)
        if c is None or c.pinned == pinned:
            return
        c.pinned = pinned
        sel = self.selected()
        self._rebuild()
        if sel is not None:
            self.select(sel.number)

    def measure_columns(self) -> list[str]:
        """The measure keys shown as columns (those some run has)."""
        return [k for k in MEASURE_COLUMNS if any(c.measure(k) is not None for c in self.candidates)]

    def column_of(self, key: str) -> int:
        """The table column of a measure key or fixed header (-1 when not shown)."""
        cols = FIXED_COLUMNS + self.measure_columns()
        return cols.index(key) if key in cols else -1

    def restore(self, number: int) -> bool:
        """Re-apply run ``number``'s settings to the state and make its release the current
        result (so it can be inspected and exported as made).
        """
        c = self.candidate(number)
        st = self.state
        if c is None or st.df is None:
            return False
        s = c.settings
        if s["path"] != st.path:
            return False
        for col, kind in s["types"].items():
            if st.types.get(col) != kind and col in st.roles:
                st.set_type(col, kind)
        st.set_roles({col: r for col, r in s["roles"].items() if col in st.roles})
        for col in [x for x in st.domains if x not in s["domains"]]:
            st.set_domain(col, None)
        for col, b in s["domains"].items():
            if st.domains.get(col) != tuple(b):
                st.set_domain(col, b)
        for col in [x for x in st.precision if x not in s["precision"]]:
            st.set_precision(col, None)
        for col, g in s["precision"].items():
            st.set_precision(col, g)
        for col in [x for x in st.hierarchies if x not in s["hierarchies"]]:
            st.set_hierarchy(col, None, None)
        for col, h in s["hierarchies"].items():
            if st.hierarchies.get(col) is not h:
                src = s["hierarchy_sources"].get(col) or {}
                st.set_hierarchy(col, h, src.get("path") or src)
        st.set_method(s["method"], copy.deepcopy(s["params"]))
        rr = c.result_recipe
        if rr.get("seed") is not None:
            st.set_seed(rr["seed"], pinned=bool(rr.get("seed_pinned")))
        st.set_result(c.result, dict(c.evaluation), dict(rr))
        if self.controller is not None:
            # the release now matches the settings again (the report's curves check this)
            self.controller.result_sig = self.controller.settings_signature()
            self.controller.sig_status.emit(
                f"Run #{c.number} restored: its settings are in the form and its release is "
                "the current result."
            )
        self.sig_restored.emit(c.number)
        return True

    def restore_selected(self) -> bool:
        c = self.selected()
        return self.restore(c.number) if c is not None else False

    def export_selected(self) -> bool:
        """Restore the selected run, then ask for the export (the window's dialog)."""
        if not self.restore_selected():
            return False
        self.sig_export_requested.emit()
        return True

    def remove_selected(self) -> None:
        c = self.selected()
        if c is not None:
            self.candidates.remove(c)
            self._rebuild()

    def clear_unpinned(self) -> None:
        self.candidates = [c for c in self.candidates if c.pinned]
        self._rebuild()

    def clear(self) -> None:
        """Another table was loaded: the runs of the previous one cannot be restored."""
        self.candidates = []
        if self.isVisible():
            self._rebuild()
        else:  # hidden (a file is being opened): not in the turn of the load (issue 24 §5)
            turns.later(self._rebuild, owner=self, key="rebuild")

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        turns.flush(self, "rebuild")  # shown before its turn came: drawn now
        super().showEvent(event)

    def plane_points(self) -> list[tuple[int, float, float]]:
        """(run number, x, y) of the runs drawn on the plane (x: the plane's SSE scale)."""
        key = self._sse_key()
        out = []
        for c in self.candidates:
            x, y = c.measure(key), c.measure("rl")
            if x is not None and y is not None and x > 0 and math.isfinite(y):
                out.append((c.number, x, y))
        return out

    # --- Private
    def _rebuild(self) -> None:
        t = self.table
        t.blockSignals(True)
        t.setSortingEnabled(False)
        mcols = self.measure_columns()
        headers = FIXED_COLUMNS + [MEASURE_COLUMNS[k] for k in mcols] + [GUARANTEE]
        t.clear()
        t.setColumnCount(len(headers))
        t.setHorizontalHeaderLabels(headers)
        try:
            from dpstudio.app.widgets.help_dialog import annotate_headers

            annotate_headers(t, [""] * len(FIXED_COLUMNS) + mcols + [""])
        except ImportError:  # pragma: no cover
            pass
        t.setRowCount(len(self.candidates))
        for i, c in enumerate(self.candidates):
            res = c.result
            vals: list[tuple[str, Any]] = [
                (f"#{c.number}", c.number),
                ("", None),
                (c.time.strftime("%H:%M:%S"), None),
                (res.method_name, None),
                (c.params_text(), None),
                ("yes" if res.is_dp else "no", None),
            ]
            vals += [(_fmt(c.measure(k)), c.measure(k)) for k in mcols]
            vals += [(res.guarantee, None)]
            gcol = len(vals) - 1
            for j, (text, num) in enumerate(vals):
                it = _SortItem(text)
                if j == 0:
                    it.setData(Qt.ItemDataRole.UserRole, c.number)
                elif num is not None:
                    it.setData(Qt.ItemDataRole.UserRole, float(num))
                if len(FIXED_COLUMNS) <= j < gcol:
                    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if j == PIN_COL:
                    it.setFlags(it.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                    it.setCheckState(Qt.CheckState.Checked if c.pinned else Qt.CheckState.Unchecked)
                    it.setData(Qt.ItemDataRole.UserRole, 1.0 if c.pinned else 0.0)
                if j in (3, 4):  # method, parameters: the whole text (the column is narrow)
                    it.setToolTip(text)
                if j == gcol:
                    it.setToolTip(f"<p>{html.escape(res.guarantee)}</p>")
                if c.pinned:
                    it.setBackground(QBrush(QColor("#fff4d6")))
                t.setItem(i, j, it)
        t.setSortingEnabled(True)
        t.resizeColumnsToContents()
        gcol = t.columnCount() - 1
        t.setColumnWidth(gcol, min(t.columnWidth(gcol), 420))
        t.horizontalHeader().setSectionResizeMode(gcol, QHeaderView.ResizeMode.Interactive)
        pcol = FIXED_COLUMNS.index("Parameters")
        t.setColumnWidth(pcol, min(t.columnWidth(pcol), 220))
        t.blockSignals(False)
        self._update_caption()
        self._update_buttons()
        self._draw_plane()
        number, self._select_after = self._select_after, None
        if number is not None:  # the run add_current recorded
            self.select(number)

    def _on_item_changed(self, it: QTableWidgetItem) -> None:
        if it.column() != PIN_COL:
            return
        num = self.table.item(it.row(), 0)
        if num is not None:
            self.set_pinned(int(num.data(Qt.ItemDataRole.UserRole)), it.checkState() == Qt.CheckState.Checked)

    def _toggle_pin_selected(self) -> None:
        c = self.selected()
        if c is not None:
            self.set_pinned(c.number, not c.pinned)

    def _update_buttons(self) -> None:
        has = bool(self.candidates)
        for b in (self.restore_btn, self.export_btn, self.pin_btn, self.remove_btn):
            b.setEnabled(has)
        self.clear_btn.setEnabled(any(not c.pinned for c in self.candidates))

    def _update_caption(self) -> None:
        n, p = len(self.candidates), sum(c.pinned for c in self.candidates)
        if not n:
            self.caption.setText(
                "<b>Candidate releases</b>: every Protect run of this session "
                "appears here, to compare, pin, restore and export. Nothing is "
                "written to disk until you export."
            )
            return
        where = (
            "below"
            if self.own_plane
            else "on the risk–utility plane of tab 3 (◆ numbered; the selected one ringed)"
        )
        self.caption.setText(
            f"<b>{n} candidate release{'s' if n != 1 else ''}</b>"
            f"{f', {p} pinned' if p else ''} — in memory only. Click a column "
            f"to sort; the runs are also shown {where}. Keeps the last "
            f"{MAX_UNPINNED} unpinned runs."
        )

    def _draw_plane(self) -> None:
        for lab in self.labels:
            self.plane.removeItem(lab)
        self.labels = []
        pts = self.plane_points()
        if not pts:
            self.points.setData([], [])
            self.selected_point.setData([], [])
            return
        xs = np.array([p[1] for p in pts])
        ys = np.array([p[2] for p in pts])
        self.points.setData(xs, ys)
        for text, lx, y in plane_label_groups(pts):
            lab = pg.TextItem(text, color=HIGHLIGHT, anchor=(-0.15, 1.0))
            lab.setPos(lx, y)  # TextItem is not log-aware: view coordinates
            lab.setZValue(91)
            self.plane.addItem(lab)
            self.labels.append(lab)
        sel = self.selected()
        hit = [p for p in pts if sel is not None and p[0] == sel.number]
        if hit:
            self.selected_point.setData([hit[0][1]], [hit[0][2]])
        else:
            self.selected_point.setData([], [])


def plane_label_groups(pts, near: float = 0.05) -> list[tuple[str, float, float]]:
    """The numbers of candidates whose points lie within ``near`` of the plot's extent of
    each other (log10 of x, y) as one label ``#2, #3`` at the first one's place: labels of
    neighbouring points overlapped (issue 24 §8).  Returns (text, log10 x, y).
    """
    if not pts:
        return []
    lx = [math.log10(x) for _n, x, _y in pts]
    ys = [y for _n, _x, y in pts]
    sx = (max(lx) - min(lx)) or 1.0
    sy = (max(ys) - min(ys)) or 1.0
    groups: list[list[int]] = []
    for i in range(len(pts)):
        for g in groups:
            j = g[0]
            if abs(lx[i] - lx[j]) <= near * sx and abs(ys[i] - ys[j]) <= near * sy:
                g.append(i)
                break
        else:
            groups.append([i])
    return [(", ".join(f"#{pts[i][0]}" for i in g), lx[g[0]], ys[g[0]]) for g in groups]


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    from dpstudio import engine
    from dpstudio.app.resources import sample_path
    from dpstudio.engine.measures import evaluate

    app = QApplication(sys.argv)
    st = AppState()
    df = engine.read_table(str(sample_path())) if hasattr(engine, "read_table") else None
    import pandas as pd

    df = pd.read_csv(sample_path()) if df is None else df
    st.set_data(df, str(sample_path()))
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    st.set_roles({c: "k-quasi" for c in cols})
    w = HistoryPanel(st)
    for k in (3, 5, 10):
        st.set_method("mdav", {"k": k})
        res = engine.protect(df, "mdav", {c: "k-quasi" for c in cols}, k=k)
        st.set_result(
            res,
            evaluate(res.aligned_original(), res.data, res.protected_attributes, result=res),
            {"method": "mdav", "params": {"k": k}},
        )
        w.add_current()
    w.resize(1100, 600)
    w.show()
    app.exec()
