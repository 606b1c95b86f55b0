"""The generalisation levels OLA weighed (issue 24; ARX's explorer shows the lattice): the
lattice drawn -- one node per combination of levels, in rows by the sum of its levels (the
original values at the bottom, '*' everywhere at the top), edges between neighbours (one
level up in one column), each node coloured by its state: k-anonymous within the
suppression limit, not, not evaluated, or the optimum OLA chose; its tooltip the records it
would suppress and its loss -- and the same nodes as a table (a tab of the dialog).  Both
from one frame computed in a worker (:func:`dpstudio.engine.transformation.levels_weighed`)
on the run's own records.  The drawing stays responsive on lattices of thousands of nodes:
positions are numpy arrays, only the visible nodes and edges are painted, and a node
narrower than a few pixels is a dot (zoom with the wheel, drag to pan, double-click to fit).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from PySide6.QtCore import QEvent, QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app.workers import TaskRunner

CHOSEN = QBrush(QColor("#d7ecff"))
OVER = QColor("#8a8a8a")

#: the states of a drawn node, in drawing order (the chosen one last, on top)
STATES = ("unknown", "not", "anonymous", "chosen")
STATE_TEXT = {
    "anonymous": "k-anonymous within the limit",
    "not": "not k-anonymous within the limit",
    "unknown": "not evaluated",
    "chosen": "chosen by OLA (least loss)",
}
STATE_COLOUR = {
    "anonymous": QColor("#3c9a4c"),
    "not": QColor("#d0453a"),
    "unknown": QColor("#c8c8c8"),
    "chosen": QColor("#f2b01e"),
}
#: the nodes a lattice may have to be drawn whole (a larger one: only the nodes weighed)
MAX_DRAWN = 200_000
#: more visible edges than this are not drawn (zoom in to see them)
EDGE_LIMIT = 20_000
#: nodes weighed by the dialog's worker (every node of a lattice this small)
MAX_WEIGHED = 2_000


def lattice_inputs(state) -> dict | None:
    """What :func:`lattice_table` needs for the current result (None: not an OLA run)."""
    res = state.result
    info = getattr(res, "info", None) or {}
    gen = info.get("generalisation") or {}
    if res is None or gen.get("algorithm") != "ola" or not gen.get("node"):
        return None
    data = res.original if getattr(res, "original", None) is not None else state.df
    kq = list(info.get("k_quasis") or [])
    if data is None or not kq or any(c not in data.columns for c in kq):
        return None
    p = res.params
    return {
        "df": data[kq],
        "columns": kq,
        "k": int(p["k"]),
        "chosen": tuple(gen["node"]),
        "hierarchies": dict(getattr(res, "hierarchies", None) or {}) or None,
        "suppression": float(p.get("suppression") if p.get("suppression") is not None else 0.05),
        "loss": p.get("loss") or "precision",
        "max_nodes": MAX_WEIGHED,
    }


class LatticeCanvas(QWidget):
    """The lattice of :func:`lattice_table`'s frame, drawn (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lattice_canvas")
        self.setMouseTracking(True)
        self.setMinimumSize(480, 320)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.columns: list[str] = []
        self.heights = np.zeros(0, dtype=np.int64)
        self.levels = np.zeros((0, 0), dtype=np.int64)  # node -> level of each column
        self.state = np.zeros(0, dtype=np.int8)  # node -> index into STATES
        self.suppressed = np.zeros(0)
        self.loss = np.zeros(0)
        self.nx = np.zeros(0)  # rank in its row, centred
        self.ny = np.zeros(0)  # sum of its levels
        self.edges = np.zeros((0, 2), dtype=np.int64)
        self.row_width = 1  # nodes in the widest row
        self.rows = 0  # the highest sum of levels
        self.whole = True  # every node of the lattice is drawn
        self.size_total = 0
        self.zoom = 1.0
        self.pan = QPointF(0.0, 0.0)
        self._drag: QPointF | None = None
        self.last_painted = 0  # nodes painted by the last paint (tests, the note)

    # --- data
    def set_frame(self, t: pd.DataFrame, columns: list[str]) -> None:
        """The nodes of ``t`` (one row per node weighed: the level of every column,
        'suppressed', 'within limit', 'loss', 'chosen'); the lattice's heights are read off
        it (the top node is always weighed).
        """
        cols = list(columns)
        self.columns = cols
        h = np.array([int(t[c].max()) + 1 if len(t) else 1 for c in cols], dtype=np.int64)
        self.heights = h
        total = int(np.prod(h.astype(float))) if len(h) else 0
        self.size_total = total
        strides = np.ones(len(h), dtype=np.int64)
        for j in range(len(h) - 2, -1, -1):
            strides[j] = strides[j + 1] * h[j + 1]
        tl = t[cols].to_numpy(dtype=np.int64).reshape(len(t), len(cols))
        tid = tl @ strides if len(t) else np.zeros(0, dtype=np.int64)
        self.whole = total <= MAX_DRAWN
        if self.whole:
            ids = np.arange(total, dtype=np.int64)
            lv = np.stack(np.unravel_index(ids, tuple(int(v) for v in h)), axis=1).astype(np.int64)
        else:
            ids = np.unique(tid)
            lv = np.stack(np.unravel_index(ids, tuple(int(v) for v in h)), axis=1).astype(np.int64)
        n = len(ids)
        pos = np.searchsorted(ids, tid)
        state = np.zeros(n, dtype=np.int8)  # unknown
        sup = np.full(n, np.nan)
        loss = np.full(n, np.nan)
        within = t["within limit"].to_numpy(dtype=bool)
        chosen = t["chosen"].to_numpy(dtype=bool)
        state[pos] = np.where(chosen, STATES.index("chosen"), np.where(within, STATES.index("anonymous"), 1))
        sup[pos] = t["suppressed"].to_numpy(dtype=float)
        loss[pos] = t["loss"].to_numpy(dtype=float)
        self.levels, self.state, self.suppressed, self.loss = lv, state, sup, loss
        # rows by the sum of the levels; in a row, the nodes in lattice (lexicographic) order
        sums = lv.sum(axis=1)
        order = np.lexsort((ids, sums))
        counts = np.bincount(sums, minlength=int(sums.max()) + 1 if n else 1)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.empty(n, dtype=np.float64)
        rank[order] = np.arange(n) - starts[sums[order]]
        self.nx = rank - (counts[sums] - 1) / 2.0
        self.ny = sums.astype(np.float64)
        self.row_width = int(counts.max()) if n else 1
        self.rows = int(sums.max()) if n else 0
        # edges: one level up in one column, both ends drawn
        src, dst = [], []
        for j in range(len(h)):
            up = np.flatnonzero(lv[:, j] < h[j] - 1)
            nxt = ids[up] + strides[j]
            at = np.searchsorted(ids, nxt)
            ok = (at < n) & (ids[np.minimum(at, n - 1)] == nxt)
            src.append(up[ok])
            dst.append(at[ok])
        self.edges = (
            np.stack([np.concatenate(src), np.concatenate(dst)], axis=1)
            if src
            else np.zeros((0, 2), dtype=np.int64)
        )
        self.reset_view()

    def counts(self) -> dict[str, int]:
        """Nodes drawn per state."""
        return {name: int((self.state == i).sum()) for i, name in enumerate(STATES)}

    def index_of(self, levels) -> int:
        """The drawn node with these levels (-1: none)."""
        hit = np.flatnonzero((self.levels == np.asarray(levels, dtype=np.int64)).all(axis=1))
        return int(hit[0]) if hit.size else -1

    def state_of(self, levels) -> str | None:
        i = self.index_of(levels)
        return STATES[int(self.state[i])] if i >= 0 else None

    # --- view
    def reset_view(self) -> None:
        self.zoom, self.pan = 1.0, QPointF(0.0, 0.0)
        self.update()

    def _scale(self) -> tuple[float, float]:
        m = 28.0
        sx = (self.width() - 2 * m) / max(self.row_width - 1, 1)
        sy = (self.height() - 2 * m) / max(self.rows, 1)
        return sx * self.zoom, sy * self.zoom

    def node_coords(self) -> tuple[np.ndarray, np.ndarray]:
        """The widget coordinates of every node."""
        sx, sy = self._scale()
        cx = self.width() / 2.0 + self.pan.x()
        cy = self.height() / 2.0 + self.pan.y()
        return cx + self.nx * sx, cy + (self.rows / 2.0 - self.ny) * sy

    def node_point(self, levels) -> QPointF | None:
        i = self.index_of(levels)
        if i < 0:
            return None
        X, Y = self.node_coords()
        return QPointF(float(X[i]), float(Y[i]))

    def _radius(self) -> float:
        sx, sy = self._scale()
        return float(np.clip(min(sx, sy) * 0.3, 1.5, 9.0))

    def node_at(self, p: QPointF) -> int:
        """The node under ``p`` (-1: none)."""
        if not len(self.nx):
            return -1
        X, Y = self.node_coords()
        d2 = (X - p.x()) ** 2 + (Y - p.y()) ** 2
        i = int(np.argmin(d2))
        return i if d2[i] <= max(self._radius() + 2.0, 6.0) ** 2 else -1

    def tooltip_text(self, i: int) -> str:
        lv = ", ".join(f"{c} {int(v)}" for c, v in zip(self.columns, self.levels[i]))
        st = STATES[int(self.state[i])]
        text = f"Levels: {lv}\n{STATE_TEXT[st]}"
        if not math.isnan(self.suppressed[i]):
            text += f"\nrecords suppressed: {int(self.suppressed[i]):,}"
            text += "\nloss: –" if math.isnan(self.loss[i]) else f"\nloss: {self.loss[i]:.4g}"
        return text

    def paintEvent(self, _ev) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.fillRect(self.rect(), QColor("white"))
        n = len(self.nx)
        if not n:
            p.end()
            return
        X, Y = self.node_coords()
        r = self._radius()
        pad = r + 2.0
        vis = (X >= -pad) & (X <= self.width() + pad) & (Y >= -pad) & (Y <= self.height() + pad)
        # edges with an end in view (a long edge crossing the view without one is left out)
        e = self.edges
        if len(e):
            ev = e[vis[e[:, 0]] | vis[e[:, 1]]]
            if len(ev) <= EDGE_LIMIT:
                # thousands of hairlines: aliased (antialiasing them costs most of a paint)
                p.setRenderHint(QPainter.RenderHint.Antialiasing, len(ev) <= 2000)
                p.setPen(QPen(QColor(150, 150, 150, 140), 1.0))
                x0, y0, x1, y1 = X[ev[:, 0]], Y[ev[:, 0]], X[ev[:, 1]], Y[ev[:, 1]]
                p.drawLines(
                    [
                        QLineF(a, b, c, d)
                        for a, b, c, d in zip(x0.tolist(), y0.tolist(), x1.tolist(), y1.tolist())
                    ]
                )
                p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painted = 0
        for si, name in enumerate(STATES):
            idx = np.flatnonzero(vis & (self.state == si))
            if not idx.size:
                continue
            col = STATE_COLOUR[name]
            painted += int(idx.size)
            if name == "chosen":
                rr = max(r + 2.0, 5.0)
                p.setPen(QPen(QColor("black"), 1.5))
                p.setBrush(QBrush(col))
                for i in idx.tolist():
                    p.drawEllipse(QPointF(X[i], Y[i]), rr, rr)
            elif r >= 3.0:
                p.setPen(QPen(col.darker(130), 1.0))
                p.setBrush(QBrush(col))
                for i in idx.tolist():
                    p.drawEllipse(QPointF(X[i], Y[i]), r, r)
            else:  # many nodes: dots, one call per state
                p.setPen(QPen(QBrush(col), 2.0 * r, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
                p.drawPoints(QPolygonF([QPointF(a, b) for a, b in zip(X[idx].tolist(), Y[idx].tolist())]))
        # the level vectors when there is room for them
        sx, _sy = self._scale()
        fm = p.fontMetrics()
        label_w = fm.horizontalAdvance("0," * len(self.columns))
        if sx >= label_w + 6 and painted <= 600:
            p.setPen(QColor("#333333"))
            for i in np.flatnonzero(vis).tolist():
                t = ",".join(str(int(v)) for v in self.levels[i])
                w = fm.horizontalAdvance(t)
                p.drawText(QRectF(X[i] - w / 2 - 2, Y[i] + r + 1, w + 4, fm.height()), t)
        self.last_painted = painted
        p.end()

    def event(self, ev) -> bool:
        if ev.type() == QEvent.Type.ToolTip:
            i = self.node_at(QPointF(ev.pos()))
            if i >= 0:
                QToolTip.showText(ev.globalPos(), self.tooltip_text(i), self)
            else:
                QToolTip.hideText()
                ev.ignore()
            return True
        return super().event(ev)

    def wheelEvent(self, ev) -> None:  # noqa: N802 - Qt API
        f = 1.25 ** (ev.angleDelta().y() / 120.0)
        new = float(np.clip(self.zoom * f, 1.0, 400.0))
        f = new / self.zoom
        c = QPointF(self.width() / 2.0, self.height() / 2.0)
        at = ev.position()
        # keep the point under the cursor where it is
        self.pan = (self.pan + c - at) * f - (c - at)
        self.zoom = new
        if new == 1.0:
            self.pan = QPointF(0.0, 0.0)
        self.update()

    def mousePressEvent(self, ev) -> None:  # noqa: N802 - Qt API
        self._drag = ev.position()

    def mouseMoveEvent(self, ev) -> None:  # noqa: N802 - Qt API
        if self._drag is not None and ev.buttons():
            self.pan += ev.position() - self._drag
            self._drag = ev.position()
            self.update()

    def mouseReleaseEvent(self, _ev) -> None:  # noqa: N802 - Qt API
        self._drag = None

    def mouseDoubleClickEvent(self, _ev) -> None:  # noqa: N802 - Qt API
        self.reset_view()


class LatticeDialog(QDialog):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Generalisation levels weighed by OLA")
        self.setObjectName("lattice_dialog")
        self.resize(900, 640)
        lay = QVBoxLayout(self)
        self.note = QLabel("Computing…")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("lattice_tabs")
        drawn = QWidget()
        dl = QVBoxLayout(drawn)
        dl.setContentsMargins(0, 0, 0, 0)
        self.canvas = LatticeCanvas()
        dl.addWidget(self.canvas, 1)
        self.legend = QLabel("")
        self.legend.setObjectName("lattice_legend")
        self.legend.setWordWrap(True)
        dl.addWidget(self.legend)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("lattice_table")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.tabs.addTab(drawn, "Lattice")
        self.tabs.addTab(self.table, "Table")
        lay.addWidget(self.tabs, 1)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignRight)
        self.frame: pd.DataFrame | None = None
        self.runner = TaskRunner("lattice", self)
        args = lattice_inputs(state)
        if args is None:
            self.note.setText("Only an OLA generalisation (k-eps) weighs levels.")
            return
        self.args = args

        def work(_progress, check_cancel):
            from dpstudio.engine.transformation import levels_weighed

            return levels_weighed(check_cancel=check_cancel, **args)

        self.runner.start(work, finished=self.show_table, errored=lambda m, _d: self.note.setText(m))

    def show_table(self, t: pd.DataFrame) -> None:
        self.frame = t
        full = t
        a = self.args
        self.canvas.set_frame(full, list(a["columns"]))
        self._fill_legend()
        t = t.sort_values(["within limit", "loss"], ascending=[False, True], kind="stable")
        cols = list(a["columns"]) + ["suppressed", "within limit", "loss", "chosen"]
        self.table.setColumnCount(len(cols))
        self.table.setHorizontalHeaderLabels(
            [f"{c} (level)" for c in a["columns"]]
            + ["records suppressed", "within the limit", f"loss ({a['loss']})", "chosen"]
        )
        self.table.setRowCount(len(t))
        for i, row in enumerate(t.itertuples(index=False)):
            vals = list(row)
            for j, v in enumerate(vals):
                if cols[j] == "loss":
                    text = "–" if (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
                elif cols[j] in ("within limit", "chosen"):
                    text = "✔" if v else ""
                else:
                    text = f"{int(v):,}"
                it = QTableWidgetItem(text)
                if vals[cols.index("chosen")]:
                    it.setBackground(CHOSEN)
                elif not vals[cols.index("within limit")]:
                    it.setForeground(OVER)
                self.table.setItem(i, j, it)
        self.table.resizeColumnsToContents()
        n_ok = int(full["within limit"].sum())
        self.note.setText(
            f"{len(full):,} combinations of levels (level 0 = the original values; the top "
            f"level = '*'), {n_ok:,} within the suppression limit of {a['suppression']:g} "
            f"(at most {math.floor(a['suppression'] * len(a['df']) + 1e-9):,} records) for "
            f"k = {a['k']}. OLA takes the one of least loss (gold in the lattice, highlighted in "
            "the table); red nodes, greyed rows, would suppress too many records."
        )

    def _fill_legend(self) -> None:
        c = self.canvas
        n = c.counts()
        parts = [
            f"<span style='color:{STATE_COLOUR[s].name()}'>●</span> {STATE_TEXT[s]}: {n[s]:,}"
            for s in ("anonymous", "not", "unknown", "chosen")
        ]
        where = (
            f"all {c.size_total:,} nodes"
            if c.whole
            else f"the {len(c.nx):,} nodes weighed of {c.size_total:,}"
        )
        self.legend.setText(
            " &nbsp; ".join(parts)
            + f"<br><span style='color:#666'>Drawn: {where}; bottom row: the original values, "
            "top: '*' in every column; rows by the sum of the levels, lines join nodes one level "
            "apart in one column. Hover a node for its loss and suppression; wheel to zoom, "
            "drag to pan, double-click to fit.</span>"
        )
