"""The generalisation levels OLA weighed (issue 24; ARX's explorer shows the lattice): a table
of the nodes -- each column's level, the records that would be suppressed, whether that is
within the limit, the loss -- the chosen one marked.  Computed in a worker
(:func:`dpstudio.engine.transformation.levels_weighed`) on the run's own records.
"""

from __future__ import annotations

import math

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app.workers import TaskRunner

CHOSEN = QBrush(QColor("#d7ecff"))
OVER = QColor("#8a8a8a")


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
    }


class LatticeDialog(QDialog):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Generalisation levels weighed by OLA")
        self.setObjectName("lattice_dialog")
        self.resize(820, 560)
        lay = QVBoxLayout(self)
        self.note = QLabel("Computing…")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("lattice_table")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        lay.addWidget(self.table, 1)
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
            f"k = {a['k']}. OLA takes the one of least loss (highlighted); greyed ones would "
            "suppress too many records."
        )
