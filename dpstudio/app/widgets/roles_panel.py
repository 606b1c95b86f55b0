"""Step 2: classify attributes — role, type, domain, hierarchy, live validation, statistics."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app import settings as app_settings
from dpstudio.app.state import ROLE_VALUES, AppState
from dpstudio.app.widgets.common import Banner, show_error
from dpstudio.engine.hierarchies.hierarchy import Hierarchy

ROLE_HELP = {
    "identifier": "Identifier: directly identifies a person (name, ID number, phone). Removed "
    "from every output.",
    "k-quasi": "k-quasi-identifier: could be linked with outside data (age, zip code…). "
    "Protected by the k-anonymity step (microaggregation or generalisation).",
    "eps-quasi": "ε-quasi-identifier: protected by differential-privacy noise (possibly after "
    "microaggregation). Needs a declared domain.",
    "confidential": "Confidential: the sensitive value (income, diagnosis). Kept as is unless "
    "the method protects it too.",
    "other": "Other: released unchanged and not used by the method.",
    "weight": "Sampling weight: released unchanged; the risk models use it (one column).",
    "household": "Household id: used for household risk; not released as is (one column).",
}
ROLE_LABELS = {
    "identifier": "Identifier",
    "k-quasi": "k-quasi-identifier",
    "eps-quasi": "ε-quasi-identifier",
    "confidential": "Confidential",
    "other": "Other",
    "weight": "Sampling weight",
    "household": "Household id",
}
COLS = ["Column", "Role", "Type", "Lower bound", "Upper bound", "Precision", "Hierarchy", "Check"]
C_NAME, C_ROLE, C_TYPE, C_LO, C_HI, C_PREC, C_HIER, C_CHECK = range(8)
BAD_STYLE = "background:#fde2e1;"
LEAK_WARNING = (
    "Bounds suggested from the data (0 … 1.5 × max) are derived from individuals' "
    "values and leak information about them; the papers use them for experiments. "
    "For a real release, replace them with public bounds (e.g. legal or "
    "administrative limits)."
)


def generate_hierarchy(series: pd.Series, column: str, levels: int = 10) -> Hierarchy:
    """A simple generalisation hierarchy: value → interval (numeric) → ``*``; text: value → ``*``."""
    s = series.dropna()
    values = pd.unique(s)
    if len(values) > 20000:
        raise engine.InputError(
            f"Column {column!r} has {len(values):,} distinct values: too many "
            "for a generated hierarchy. Load an ARX hierarchy file instead."
        )
    if len(values) == 0:
        raise engine.InputError(f"Column {column!r} has no values to build a hierarchy from.")
    if pd.api.types.is_numeric_dtype(s):
        values = pd.Series(values).sort_values().to_numpy()
        vals = values.astype(float)
        leaves = pd.Series(values).astype(str).tolist()  # as check_values sees them
        lo, hi = float(vals[0]), float(vals[-1])
        edges = np.linspace(lo, hi, levels + 1) if hi > lo else np.array([lo, lo + 1])
        idx = np.clip(np.searchsorted(edges, vals, side="right") - 1, 0, len(edges) - 2)
        labels = [
            f"[{edges[i]:g}, {edges[i + 1]:g}{']' if i == len(edges) - 2 else ')'}"
            for i in range(len(edges) - 1)
        ]
        rows = [[leaf, labels[i], "*"] for leaf, i in zip(leaves, idx)]
    else:
        rows = [[str(v), "*"] for v in sorted(map(str, values))]
    return Hierarchy.from_rows(rows, name=f"{column} (generated)")


def short_label(v, n: int, room: int = 84) -> str:
    """A category's tick label, short enough that ``n`` of them do not overlap."""
    t = str(v)
    m = max(3, room // max(n, 1))
    return t if len(t) <= m else t[: m - 1] + "…"


def suggest_hierarchy_path(data_path: str | None, column: str) -> str:
    """Where the hierarchy dialog opens: an ARX file named after the column (as ARX names
    them, ``*_hierarchy_<column>.csv``) next to the data or in its ``hierarchies`` folder;
    else that folder; '' when the data has no folder.
    """
    if not data_path:
        return ""
    d = Path(data_path).parent
    folders = [f for f in (d / "hierarchies", d) if f.is_dir()]
    for f in folders:
        hits = sorted(
            p for p in f.glob("*.csv") if p.stem.lower().endswith(column.lower()) and p != Path(data_path)
        )
        if hits:
            return str(hits[0])
    return str(folders[0]) if folders else ""


class RolesPanel(QWidget):
    sig_column_selected = Signal(str)
    """The user selected a column (name)."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self._updating = False
        lay = QVBoxLayout(self)
        self.banner = Banner(self)
        lay.addWidget(self.banner)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("roles_splitter")
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        tools = QHBoxLayout()
        self.suggest_btn = QPushButton("Suggest domain 0 … 1.5 × max")
        self.suggest_btn.setToolTip(
            "Fill empty bounds of the selected numeric columns (or of all "
            "protected ones) with 0 … 1.5 × max, as in the papers. "
            "Warning: bounds from the data leak."
        )
        self.suggest_btn.clicked.connect(self._on_suggest_clicked)
        tools.addWidget(self.suggest_btn)
        self.set_role_btn = QToolButton()
        self.set_role_btn.setText("Set role of selected ▾")
        self.set_role_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.set_role_btn)
        for r in ROLE_VALUES:
            act = menu.addAction(ROLE_LABELS[r])
            act.setToolTip(ROLE_HELP[r])
            act.triggered.connect(lambda _=False, r=r: self.set_selected_role(r))
        self.set_role_btn.setMenu(menu)
        self.set_role_btn.setToolTip("Give all selected columns the same role.")
        tools.addWidget(self.set_role_btn)
        tools.addStretch(1)
        ll.addLayout(tools)
        self.table = QTableWidget(0, len(COLS))
        self.table.setHorizontalHeaderLabels(COLS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(28)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        for c, w in (
            (C_NAME, 100),
            (C_ROLE, 140),
            (C_TYPE, 84),
            (C_LO, 84),
            (C_HI, 84),
            (C_PREC, 70),
            (C_HIER, 80),
        ):
            self.table.setColumnWidth(c, w)
        tips = {
            C_ROLE: "What the attribute is: identifier, k-quasi, ε-quasi, confidential or other.",
            C_LO: "Smallest value the attribute can take in the population (public "
            "knowledge, not this file's minimum).",
            C_HI: "Largest value the attribute can take in the population.",
            C_PREC: "Output precision γ of a noisy numeric attribute: noise is drawn on "
            "the grid of multiples of γ and the release carries no finer digits. "
            "Empty: the default (1 for whole-number columns, else about a "
            "millionth of the declared domain's width).",
            C_HIER: "Generalisation hierarchy / taxonomy (for (k,ε)-anonymity and "
            "categorical methods): load an ARX CSV or generate one.",
            C_CHECK: "Problems found with the current roles and domains.",
        }
        for c, t in tips.items():
            self.table.horizontalHeaderItem(c).setToolTip(t)
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        ll.addWidget(self.table, 1)
        self.splitter.addWidget(left)

        # column statistics
        right = QGroupBox("Column statistics")
        rl = QVBoxLayout(right)
        form = QFormLayout()
        self.stat_labels = {}
        for key in ("Column", "Type", "Missing", "Distinct", "Minimum", "Maximum"):
            lab = QLabel("–")
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.stat_labels[key] = lab
            form.addRow(key + ":", lab)
        rl.addLayout(form)
        self.hist = pg.PlotWidget()
        self.hist.setBackground("w")
        self.hist.setMinimumHeight(140)
        self.hist.setMouseEnabled(False, False)
        self.hist.hideButtons()
        self.hist.getAxis("left").setWidth(36)
        rl.addWidget(self.hist, 1)
        self.hier_label = QLabel()
        self.hier_label.setWordWrap(True)
        rl.addWidget(self.hier_label)
        right.setMinimumWidth(240)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        lay.addWidget(self.splitter, 1)

        state.sig_data_changed.connect(self._on_state_data_changed)
        state.sig_roles_changed.connect(self._on_state_roles_changed)

    # --- Public API
    def set_selected_role(self, role: str) -> None:
        cols = self.selected_columns()
        if cols:
            self.state.set_roles({c: role for c in cols})

    def selected_columns(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.table.item(r, C_NAME).text() for r in rows if self.table.item(r, C_NAME)]

    def select_column(self, name: str) -> None:
        for r in range(self.table.rowCount()):
            if self.table.item(r, C_NAME).text() == name:
                self.table.selectRow(r)
                return

    def row_check(self, column: str) -> str:
        """The validation message of ``column`` ('' if fine)."""
        for r in range(self.table.rowCount()):
            if self.table.item(r, C_NAME).text() == column:
                return self.table.item(r, C_CHECK).text()
        return ""

    def suggest_domains(self, columns: list[str] | None = None) -> list[str]:
        """Fill 0 … 1.5 × max for numeric columns without a domain; returns the columns set."""
        st = self.state
        if columns is None:
            columns = [c for c, r in st.roles.items() if r not in ("other", "identifier")]
        done = []
        for c in columns:
            s = st.stats.get(c)
            if s is None or not s.numeric or s.maximum is None or c in st.domains:
                continue
            lo = min(0.0, s.minimum if s.minimum is not None else 0.0)
            hi = 1.5 * s.maximum if s.maximum > 0 else (s.maximum + 1.0)
            if hi <= lo:
                hi = lo + 1.0
            st.domains[c] = (float(lo), float(hi))
            done.append(c)
        if done:
            st.set_domain(done[-1], st.domains[done[-1]])  # emits once
            self.banner.show_message(LEAK_WARNING, "warning")
        return done

    # --- Slots
    def _on_suggest_clicked(self) -> None:
        cols = self.selected_columns() or None
        done = self.suggest_domains(cols)
        if not done:
            self.banner.show_message(
                "No numeric column without a domain among the "
                + ("selected columns." if cols else "protected columns (give columns a role first)."),
                "info",
            )

    def _on_state_data_changed(self) -> None:
        st = self.state
        self._updating = True
        self.table.setRowCount(0)
        self.banner.hide()
        if st.df is None:
            self._updating = False
            return
        names = [str(c) for c in st.df.columns]
        self.table.setRowCount(len(names))
        for r, name in enumerate(names):
            it = QTableWidgetItem(name)
            it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
            self.table.setItem(r, C_NAME, it)
            combo = QComboBox()
            combo.setObjectName(f"role_{name}")
            for i, role in enumerate(ROLE_VALUES):
                combo.addItem(ROLE_LABELS[role], role)
                combo.setItemData(i, ROLE_HELP[role], Qt.ItemDataRole.ToolTipRole)
            combo.setToolTip(f"Role of {name}. " + " ".join(ROLE_HELP.values()))
            combo.currentIndexChanged.connect(
                lambda _i, c=combo, n=name: self._on_role_combo(n, c.currentData())
            )
            self.table.setCellWidget(r, C_ROLE, combo)
            tc = QComboBox()
            tc.setObjectName(f"type_{name}")
            tc.addItem("numeric", "numeric")
            tc.addItem("text", "text")
            tc.currentIndexChanged.connect(lambda _i, c=tc, n=name: self._on_type_combo(n, c))
            self.table.setCellWidget(r, C_TYPE, tc)
            self._show_type(r, name)
            for c, what in ((C_LO, "lower"), (C_HI, "upper")):
                le = QLineEdit()
                le.setObjectName(f"{what}_{name}")
                le.setFrame(False)
                le.setToolTip(
                    "Declared domain bound (public knowledge), kept exactly as typed. Type a "
                    "number; leave both empty for no domain."
                )
                le.editingFinished.connect(lambda n=name: self._on_bounds_edited(n))
                self.table.setCellWidget(r, c, le)
            pe = QLineEdit()
            pe.setObjectName(f"precision_{name}")
            pe.setFrame(False)
            pe.setToolTip(self.table.horizontalHeaderItem(C_PREC).toolTip())
            pe.editingFinished.connect(lambda n=name: self._on_precision_edited(n))
            self.table.setCellWidget(r, C_PREC, pe)
            hb = QToolButton()
            hb.setText("none")
            hb.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
            hb.setToolTip(
                f"Hierarchy of {name}: load an ARX hierarchy CSV or generate a simple "
                "one (value → interval → *)."
            )
            m = QMenu(hb)
            m.addAction("Load ARX hierarchy…", lambda n=name: self._load_hierarchy(n))
            m.addAction("Generate", lambda n=name: self._generate_hierarchy(n))
            m.addAction("Remove", lambda n=name: self.state.set_hierarchy(n, None, None))
            hb.setMenu(m)
            self.table.setCellWidget(r, C_HIER, hb)
            ck = QTableWidgetItem("")
            ck.setFlags(ck.flags() & ~Qt.ItemFlag.ItemIsEditable)
            self.table.setItem(r, C_CHECK, ck)
        self._updating = False
        self._on_state_roles_changed()
        if names:
            self.table.selectRow(0)

    def _on_state_roles_changed(self) -> None:
        st = self.state
        if st.df is None:
            return
        self._updating = True
        problems = 0
        counts = {r: 0 for r in ROLE_VALUES}
        for r in range(self.table.rowCount()):
            name = self.table.item(r, C_NAME).text()
            role = st.roles.get(name, "other")
            counts[role] += 1
            combo = self.table.cellWidget(r, C_ROLE)
            i = combo.findData(role)
            if combo.currentIndex() != i:
                combo.blockSignals(True)
                combo.setCurrentIndex(i)
                combo.blockSignals(False)
            dom = st.domains.get(name)
            for c, v in ((C_LO, dom[0] if dom else None), (C_HI, dom[1] if dom else None)):
                le = self.table.cellWidget(r, c)
                if f"bounds:{name}" not in st.input_errors and not _same_number(le.text(), v):
                    le.setText(format_exact(v))
            pe = self.table.cellWidget(r, C_PREC)
            g = st.precision.get(name)
            if f"precision:{name}" not in st.input_errors and not _same_number(pe.text(), g):
                pe.setText(format_exact(g))
            default = self._default_precision(name)
            pe.setPlaceholderText(f"auto: {format_exact(default)}" if default else "")
            pe.setEnabled(bool(st.stats[name].numeric))
            h = st.hierarchies.get(name)
            self.table.cellWidget(r, C_HIER).setText(f"{h.height} levels" if h is not None else "none")
            msg, level = self._check(name, role)
            ck = self.table.item(r, C_CHECK)
            ck.setText(msg)
            ck.setToolTip(msg)
            color = {"error": "#b00020", "warning": "#8a5a00", "ok": "#2e7d32"}.get(level, "#555")
            ck.setForeground(QBrush(QColor(color)))
            if level == "error":
                problems += 1
        self._updating = False
        parts = [f"{n} {ROLE_LABELS[r].lower()}" for r, n in counts.items() if n and r != "other"]
        self.summary.setText(
            (
                "Roles: " + ", ".join(parts)
                if parts
                else "Give each attribute a role (select rows and use “Set role of selected”, or the "
                "Role column). Hover a role for what it means."
            )
            + (f" — <b style='color:#b00020'>{problems} problem(s)</b>" if problems else "")
        )
        self._update_stats()

    def _check(self, name: str, role: str) -> tuple[str, str]:
        st = self.state
        s = st.stats[name]
        if role == "other":
            return "", ""
        if role == "identifier":
            return "removed from the release", "info"
        msgs = []
        level = "ok"
        if s.missing:
            msgs.append(f"{s.missing:,} missing value(s): impute or drop those records")
            level = "error"
        if s.non_numeric and s.numeric is False and s.minimum is not None:
            msgs.append(f"{s.non_numeric:,} non-numeric cell(s)")
            level = "error"
        dom = st.domains.get(name)
        if dom is not None:
            lo, hi = dom
            if not lo < hi:
                msgs.append("lower bound must be below the upper bound")
                level = "error"
            elif s.minimum is not None and (s.minimum < lo or s.maximum > hi):
                vals = pd.to_numeric(st.df[name], errors="coerce").to_numpy(dtype=float)
                nout = int(np.sum((vals < lo) | (vals > hi)))
                msgs.append(f"{nout:,} value(s) outside [{lo:g}, {hi:g}]")
                level = "error"
        elif s.numeric and role in ("eps-quasi", "k-quasi", "confidential"):
            msgs.append("no domain (DP methods need one)")
            if level == "ok":
                level = "warning"
        if not s.numeric and role in ("k-quasi", "eps-quasi") and name not in st.hierarchies:
            msgs.append("text: needs a hierarchy or a categorical method")
            if level == "ok":
                level = "warning"
        return ("; ".join(msgs) if msgs else "OK"), level

    def _show_type(self, r: int, name: str) -> None:
        s = self.state.stats[name]
        tc = self.table.cellWidget(r, C_TYPE)
        tc.blockSignals(True)
        tc.setCurrentIndex(0 if s.numeric else 1)
        tc.blockSignals(False)
        hint = ""
        if not s.numeric and s.minimum is not None:
            hint = (
                f" Looks numeric: {s.non_numeric:,} cell(s) are not numbers."
                if s.non_numeric
                else " All values are numbers: switch to numeric to measure and mask them as numbers."
            )
        tc.setToolTip(
            f"Type of {name} (pandas {s.dtype}). numeric: masked and measured as "
            "numbers (domain bounds apply). text: treated as categories (a hierarchy "
            "gives them a distance); choose it for numeric codes such as a region "
            "number." + hint
        )

    def _on_type_combo(self, name: str, combo: QComboBox) -> None:
        if self._updating:
            return
        try:
            self.state.set_type(name, combo.currentData())
        except engine.DPStudioError as exc:
            show_error(self, str(exc))
            for r in range(self.table.rowCount()):
                if self.table.item(r, C_NAME).text() == name:
                    self._show_type(r, name)
        else:
            for r in range(self.table.rowCount()):
                if self.table.item(r, C_NAME).text() == name:
                    self._show_type(r, name)

    def _on_role_combo(self, name: str, role: str) -> None:
        if not self._updating:
            self.state.set_role(name, role)

    def _row_of(self, name: str) -> int:
        for r in range(self.table.rowCount()):
            if self.table.item(r, C_NAME).text() == name:
                return r
        return -1

    def _on_bounds_edited(self, name: str) -> None:
        """Both bounds as typed: numbers -> the state's domain (exact); empty -> no domain."""
        if self._updating:
            return
        r = self._row_of(name)
        eds = [self.table.cellWidget(r, c) for c in (C_LO, C_HI)]
        texts = [e.text().strip() for e in eds]
        vals = [parse_exact(t) for t in texts]
        bad = [t != "" and v is None for t, v in zip(texts, vals)]
        for e, b in zip(eds, bad):
            e.setStyleSheet(BAD_STYLE if b else "")
        if any(bad):
            self.state.set_input_error(
                f"bounds:{name}",
                f"The domain bounds of column {name!r} must be numbers "
                f"(e.g. 0 and 150000). Got {texts[bad.index(True)]!r}.",
            )
            self.table.item(r, C_CHECK).setText("bounds must be numbers")
            return
        self.state.set_input_error(f"bounds:{name}", None)
        if texts == ["", ""]:
            self.state.set_domain(name, None)
        elif "" not in texts:
            self.state.set_domain(name, (vals[0], vals[1]))

    def _on_precision_edited(self, name: str) -> None:
        if self._updating:
            return
        r = self._row_of(name)
        pe = self.table.cellWidget(r, C_PREC)
        t = pe.text().strip()
        v = parse_exact(t)
        if t and (v is None or v <= 0):
            pe.setStyleSheet(BAD_STYLE)
            self.state.set_input_error(
                f"precision:{name}",
                f"The precision of column {name!r} must be a number > 0 (e.g. 1, 0.01 or 100). Got {t!r}.",
            )
            return
        pe.setStyleSheet("")
        self.state.set_input_error(f"precision:{name}", None)
        self.state.set_precision(name, v if t else None)

    def _default_precision(self, name: str) -> float | None:
        """The engine's default γ for ``name`` (shown greyed in the empty field)."""
        from dpstudio.engine.algorithms.noise import default_precision, pd_is_integer

        st = self.state
        if not st.stats[name].numeric:
            return None
        return default_precision(st.domains.get(name), pd_is_integer(st.df[name]))

    def _on_selection_changed(self) -> None:
        self._update_stats()
        cols = self.selected_columns()
        if cols:
            self.sig_column_selected.emit(cols[0])

    def _update_stats(self) -> None:
        st = self.state
        cols = self.selected_columns()
        self.hist.clear()
        self.hist.getAxis("bottom").setTicks(None)  # a text column's category ticks (issue 11 #4)
        self.hist.setToolTip("")
        if st.df is None or not cols:
            return
        name = cols[0]
        s = st.stats[name]
        L = self.stat_labels
        L["Column"].setText(f"<b>{name}</b> ({ROLE_LABELS[st.roles.get(name, 'other')]})")
        L["Type"].setText(("numeric" if s.numeric else "text") + f" ({s.dtype})")
        L["Missing"].setText(
            f"{s.missing:,}" + (f" ({100 * s.missing / len(st.df):.1f} %)" if s.missing else "")
        )
        L["Distinct"].setText(f"{s.distinct:,}")
        L["Minimum"].setText("–" if s.minimum is None else f"{s.minimum:g}")
        L["Maximum"].setText("–" if s.maximum is None else f"{s.maximum:g}")
        col = st.df[name]
        if s.numeric:
            vals = col.to_numpy(dtype=float, na_value=np.nan)
            vals = vals[np.isfinite(vals)]
            if vals.size:
                counts, edges = np.histogram(vals, bins=30)
                self.hist.addItem(
                    pg.BarGraphItem(
                        x0=edges[:-1], x1=edges[1:], height=counts, brush="#5b8fd0", pen="#3a6aa8"
                    )
                )
                dom = st.domains.get(name)
                if dom:
                    for b in dom:
                        self.hist.addItem(
                            pg.InfiniteLine(b, pen=pg.mkPen("#c0392b", width=1, style=Qt.PenStyle.DashLine))
                        )
        else:
            vc = col.astype(str).value_counts().head(20)
            self.hist.addItem(
                pg.BarGraphItem(x=np.arange(len(vc)), height=vc.to_numpy(), width=0.8, brush="#5b8fd0")
            )
            ax = self.hist.getAxis("bottom")
            room = max(self.hist.width(), 240) // 8
            ax.setTicks([[(i, short_label(v, len(vc), room)) for i, v in enumerate(vc.index)]])
            self.hist.setToolTip("\n".join(f"{v}: {n:,}" for v, n in vc.items()))
        h = st.hierarchies.get(name)
        self.hier_label.setText(
            f"Hierarchy: {h.height} levels, {len(h.leaves)} leaves"
            f" ({st.hierarchy_sources.get(name, {}) if isinstance(st.hierarchy_sources.get(name), str) else 'generated'})"
            if h is not None
            else ""
        )

    def _load_hierarchy(self, name: str) -> None:
        start = suggest_hierarchy_path(self.state.path, name) or app_settings.last_folder()
        path, _ = QFileDialog.getOpenFileName(
            self, f"Hierarchy for {name}", start, "ARX hierarchy (*.csv);;All files (*)"
        )
        if not path:
            return
        self.load_hierarchy_file(name, path)

    def load_hierarchy_file(self, name: str, path: str) -> bool:
        try:
            h = Hierarchy.read_arx(path, name=Path(path).name)
            col = self.state.df[name].dropna()
            if hasattr(h, "check_values"):
                h.check_values(col, name)
        except engine.DPStudioError as exc:
            show_error(self, str(exc))
            return False
        self.state.set_hierarchy(name, h, str(path))
        return True

    def _generate_hierarchy(self, name: str) -> None:
        try:
            h = generate_hierarchy(self.state.df[name], name)
        except engine.DPStudioError as exc:
            show_error(self, str(exc))
            return
        self.state.set_hierarchy(name, h, {"generated": True})


def parse_exact(text: str) -> float | None:
    """The finite number typed (``None`` if it is not one).  Parsed to the nearest double, as
    the engine uses it, with no rounding to display digits.
    """
    t = text.strip().replace("_", "").replace(" ", "")
    if not t:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def format_exact(v: float | None) -> str:
    """``v`` in the shortest text that reads back as the same double (123456789 stays
    '123456789', 0.1 stays '0.1'; never rounded to 6 digits); '' for ``None``.
    """
    if v is None:
        return ""
    f = float(v)
    if f == int(f) and abs(f) < 1e16:
        return str(int(f))
    return repr(f)


def _same_number(text: str, v: float | None) -> bool:
    p = parse_exact(text)
    return (p is None and v is None and not text.strip()) or (
        p is not None and v is not None and p == float(v)
    )


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    from dpstudio.app.resources import sample_path

    app = QApplication(sys.argv)
    st = AppState()
    w = RolesPanel(st)
    st.set_data(pd.read_csv(sample_path()), str(sample_path()))
    w.resize(1100, 600)
    w.show()
    app.exec()
