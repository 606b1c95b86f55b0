"""Step 2: classify attributes — role, type, domain, hierarchy, live validation, statistics."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QSplitter,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app import settings as app_settings
from dpstudio.app import turns
from dpstudio.app.models.roles_model import (  # noqa: F401  (re-exported: the panel's vocabulary)
    C_CHECK,
    C_HI,
    C_HIER,
    C_LO,
    C_NAME,
    C_PREC,
    C_ROLE,
    C_TYPE,
    COLS,
    ROLE_HELP,
    ROLE_LABELS,
    RolesModel,
    format_exact,
    label_of,
    parse_exact,
    value_labels_of,
)
from dpstudio.app.state import ROLE_VALUES, TYPE_VALUES, AppState
from dpstudio.app.widgets.common import Banner, show_error
from dpstudio.app.widgets.roles_delegate import RolesDelegate
from dpstudio.engine.hierarchies.hierarchy import Hierarchy

LEAK_WARNING = (
    "Bounds suggested from the data (0 … 1.5 × max) are derived from individuals' "
    "values and leak information about them; the papers use them for experiments. "
    "For a real release, replace them with public bounds (e.g. legal or "
    "administrative limits)."
)


def generate_hierarchy(series: pd.Series, column: str) -> Hierarchy:
    """The engine's automatic hierarchy for ``column``
    (:func:`dpstudio.engine.hierarchies.build.auto_hierarchy`: numbers → intervals of doubling
    width, dates → month → year → …, equal-length digit codes → masking, other values → ``*``).

    It is the hierarchy the engine builds itself when a method needs one and none is given,
    so "Generate" in the app and ``dpstudio protect`` without ``--hierarchy`` give the same
    hierarchy, and a project that records ``{"generated": True}`` rebuilds the same one.
    """
    from dpstudio.engine.hierarchies.build import auto_hierarchy

    # missing values are no leaves (a method drops or refuses those records)
    return auto_hierarchy(series.dropna(), name=column)


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


def top_counts(col: pd.Series, n: int) -> pd.Series:
    """``col.value_counts().head(n)`` from the column's integer codes (remembered for a column
    read from a file: engine.codes): one bincount instead of a hash of every value.
    """
    from dpstudio.engine.codes import factorize

    codes, uniques = factorize(col)
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    order = np.argsort(-counts, kind="stable")[:n]
    return pd.Series(counts[order], index=uniques[order], name="count")


class RolesPanel(QWidget):
    sig_column_selected = Signal(str)
    """The user selected a column (name)."""
    #: a column to open the hierarchy builder for (issue 24)
    sig_build_hierarchy = Signal(str)

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        lay = QVBoxLayout(self)
        self._stats_later = False  # set while a file's table is installed in a hidden panel
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
        self.set_role_btn = QToolButton()
        self.set_role_btn.setText("Set role of selected ▾")
        self.set_role_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.set_role_btn)
        for r in ROLE_VALUES:
            act = menu.addAction(ROLE_LABELS[r])
            act.setToolTip(ROLE_HELP[r])
            act.triggered.connect(lambda _=False, r=r: self.set_selected_role(r))
        menu.addSeparator()
        menu.addAction("All columns to Other", self.reset_roles)
        self.set_role_btn.setMenu(menu)
        self.set_role_btn.setToolTip("Give all selected columns the same role (one undo step).")
        tools.addWidget(self.set_role_btn)
        self.set_type_btn = QToolButton()
        self.set_type_btn.setText("Set type of selected ▾")
        self.set_type_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        tmenu = QMenu(self.set_type_btn)
        for t in TYPE_VALUES:
            tmenu.addAction(t, lambda t=t: self.set_selected_type(t))
        tmenu.addSeparator()
        tmenu.addAction(
            "Accept the suggested types (selected, or all with a role)", self.accept_suggested_types
        )
        self.set_type_btn.setMenu(tmenu)
        self.set_type_btn.setToolTip(
            "Give all selected columns the same type, or make the engine's suggestions (italic) "
            "your choice (one undo step)."
        )
        tools.addWidget(self.set_type_btn)
        self.suggest_btn = QPushButton("Suggest domain 0 … 1.5 × max")
        self.suggest_btn.setToolTip(
            "Fill empty bounds of the selected numeric columns (or of all "
            "protected ones) with 0 … 1.5 × max, as in the papers. "
            "Warning: bounds from the data leak."
        )
        self.suggest_btn.clicked.connect(self._on_suggest_clicked)
        tools.addWidget(self.suggest_btn)
        tools.addStretch(1)
        ll.addLayout(tools)

        self.model = RolesModel(state, self)
        self.model.sig_error.connect(lambda m: show_error(self, m))
        self.table = QTableView()
        self.table.setObjectName("roles_table")
        self.table.setModel(self.model)
        self.delegate = RolesDelegate(self.table)
        self.table.setItemDelegate(self.delegate)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.SelectedClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.AnyKeyPressed
        )
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        vh = self.table.verticalHeader()
        vh.setVisible(False)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)  # no per-row size hints: O(visible)
        vh.setDefaultSectionSize(24)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        for c, w in (
            (C_NAME, 120),
            (C_ROLE, 150),
            (C_TYPE, 200),
            (C_LO, 96),
            (C_HI, 96),
            (C_PREC, 80),
            (C_HIER, 84),
        ):
            self.table.setColumnWidth(c, w)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.clicked.connect(self._on_cell_clicked)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_context_menu)
        ll.addWidget(self.table, 1)
        self.splitter.addWidget(left)

        # column statistics
        right = QGroupBox("Column statistics")
        rl = QVBoxLayout(right)
        form = QFormLayout()
        self.stat_labels = {}
        for key in ("Column", "Label", "Type", "Missing", "Distinct", "Minimum", "Maximum", "Check"):
            lab = QLabel("–")
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            lab.setWordWrap(True)
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
        # the categories in full when their tick labels had to be shortened (issue 24 §8)
        self.cat_legend = QLabel()
        self.cat_legend.setObjectName("category_legend")
        self.cat_legend.setWordWrap(True)
        self.cat_legend.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.cat_legend.hide()
        rl.addWidget(self.cat_legend)
        self.hier_label = QLabel()
        self.hier_label.setWordWrap(True)
        rl.addWidget(self.hier_label)
        from dpstudio.app.widgets.common import labels_checkbox

        self.labels_cb = labels_checkbox(state, self)
        rl.addWidget(self.labels_cb)
        state.sig_labels_changed.connect(lambda _on: self._update_stats())
        right.setMinimumWidth(240)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        lay.addWidget(self.splitter, 1)

        # a column's histogram / most frequent values, computed once (issue 27: a 200,000-row
        # column's value counts took 40-400 ms of the GUI thread at every role change); the
        # cache is emptied before the panel redraws for new data or a changed type
        self._plot_cache: dict[tuple, tuple] = {}
        state.sig_data_changed.connect(self._plot_cache.clear)
        state.sig_types_changed.connect(lambda _c: self._plot_cache.clear())
        state.sig_data_changed.connect(self._on_state_data_changed)
        state.sig_roles_changed.connect(self._on_state_roles_changed)
        state.sig_input_errors_changed.connect(self._update_summary)

    # --- Public API
    def set_selected_role(self, role: str) -> None:
        cols = self.selected_columns()
        if cols:
            self.set_roles({c: role for c in cols}, f"Role of {len(cols)} column(s): {ROLE_LABELS[role]}")

    def set_roles(self, roles: dict[str, str], text: str = "Set roles") -> None:
        """Several roles at once: one undo step."""
        with self.state.undo_step(text):
            self.state.set_roles(roles)

    def reset_roles(self) -> None:
        """Every column back to 'other' (one undo step)."""
        st = self.state
        changed = {c: "other" for c, r in st.roles.items() if r != "other"}
        if changed:
            self.set_roles(changed, f"All {len(changed)} role(s) to Other")

    def set_selected_type(self, kind: str) -> None:
        self.set_types({c: kind for c in self.selected_columns()}, f"Type of selected: {kind}")

    def set_types(self, types: dict[str, str | None], text: str = "Set types") -> list[str]:
        """Several types at once (one undo step); returns the columns refused (each reported)."""
        refused = []
        with self.state.undo_step(text):
            for c, t in types.items():
                try:
                    self.state.set_type(c, t)
                except engine.DPStudioError as exc:
                    refused.append(c)
                    if len(refused) == 1:
                        show_error(self, str(exc))
        return refused

    def accept_suggested_types(self) -> None:
        """Make the engine's suggestions the user's types: for the selected columns, else for
        every column with a role (one undo step).
        """
        st = self.state
        cols = self.selected_columns() or [c for c in st.roles if st.roles[c] != "other"]
        todo = {c: st.suggested_type(c) for c in cols if c not in st.types}
        if todo:
            self.set_types(todo, f"Accept suggested types of {len(todo)} column(s)")

    def selected_columns(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        if not rows:
            rows = sorted({i.row() for i in self.table.selectionModel().selectedIndexes()})
        return [self.model.name(r) for r in rows]

    def select_column(self, name: str) -> None:
        r = self.model.row_of(name)
        if r >= 0:
            self.table.selectRow(r)
            self.table.scrollTo(self.model.index(r, 0))
        turns.flush(self, "stats")  # (already selected: its stats may still wait for their turn)

    def row_check(self, column: str) -> str:
        """The validation message of ``column`` ('' if fine)."""
        return self.model.check(column)[0] if self.model.row_of(column) >= 0 else ""

    def edit_cell(self, column: str, cell: int, value) -> bool:
        """Write ``value`` into a cell as the editor would (Role/Type: the role or type value;
        bounds and precision: the text typed).
        """
        r = self.model.row_of(column)
        return r >= 0 and self.model.setData(self.model.index(r, cell), value)

    def suggest_domains(self, columns: list[str] | None = None) -> list[str]:
        """Fill 0 … 1.5 × max for numeric columns without a domain; returns the columns set
        (one undo step).
        """
        st = self.state
        if columns is None:
            columns = [c for c, r in st.roles.items() if r not in ("other", "identifier")]
        new = {}
        for c in columns:
            s = st.stats.get(c)
            if s is None or not s.numeric or s.maximum is None or c in st.domains:
                continue
            lo = min(0.0, s.minimum if s.minimum is not None else 0.0)
            hi = 1.5 * s.maximum if s.maximum > 0 else (s.maximum + 1.0)
            if hi <= lo:
                hi = lo + 1.0
            new[c] = (float(lo), float(hi))
        if new:
            with st.undo_step(f"Suggest domains of {len(new)} column(s)"):
                st.domains.update(new)
                last = list(new)[-1]
                st.set_domain(last, new[last])  # emits once
            self.banner.show_message(LEAK_WARNING, "warning")
        return list(new)

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
        self.banner.hide()
        self._stats_later = not self.isVisible()  # the selection's stats too (below)
        try:
            if self.state.df is not None and self.model.rowCount():
                self.table.selectRow(0)
            self._on_state_roles_changed()
        finally:
            self._stats_later = False

    def _on_state_roles_changed(self) -> None:
        if self.state.df is None:
            self.summary.setText("")
            self.hist.clear()
            return
        self._update_summary()
        self._stats_soon(later=not self.isVisible())

    def _stats_soon(self, *, later: bool) -> None:
        """The selected column's statistics and histogram: now, or (hidden: a file is being
        opened, roles applied) in a turn of their own, not in the turn of the change (issue
        24 §5); several changes in one turn draw them once.  Shown: drawn at once.
        """
        if later:
            turns.later(self._update_stats, owner=self, key="stats")
        else:
            self._update_stats()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        turns.flush(self, "stats")  # shown before its turn came: drawn now
        super().showEvent(event)

    def _update_summary(self) -> None:
        st = self.state
        if st.df is None:
            return
        counts = {r: 0 for r in ROLE_VALUES}
        for r in st.roles.values():
            counts[r] = counts.get(r, 0) + 1
        problems = self.model.problems()
        parts = [f"{n} {ROLE_LABELS[r].lower()}" for r, n in counts.items() if n and r != "other"]
        self.summary.setText(
            (
                "Roles: " + ", ".join(parts)
                if parts
                else "Give each attribute a role (double-click the Role cell, or select rows and use "
                "“Set role of selected”). Hover a role for what it means. Undo: Ctrl+Z."
            )
            + (f" — <b style='color:#b00020'>{problems} problem(s)</b>" if problems else "")
        )

    def _on_cell_clicked(self, index: QModelIndex) -> None:
        if index.column() == C_HIER:
            rect = self.table.visualRect(index)
            self._hierarchy_menu(self.model.name(index.row())).popup(
                self.table.viewport().mapToGlobal(rect.bottomLeft())
            )

    def _hierarchy_menu(self, name: str) -> QMenu:
        m = QMenu(self)
        m.addAction("Build a hierarchy…", lambda: self.sig_build_hierarchy.emit(name))
        m.addAction("Load ARX hierarchy…", lambda: self._load_hierarchy(name))
        m.addAction("Generate (the engine's automatic hierarchy)", lambda: self._generate_hierarchy(name))
        rm = m.addAction("Remove", lambda: self.remove_hierarchy(name))
        rm.setEnabled(name in self.state.hierarchies)
        return m

    def _on_context_menu(self, pos: QPoint) -> None:
        index = self.table.indexAt(pos)
        if not index.isValid():
            return
        cols = self.selected_columns()
        name = self.model.name(index.row())
        if name not in cols:
            self.table.selectRow(index.row())
            cols = [name]
        m = QMenu(self)
        rm = m.addMenu(f"Role of {len(cols)} column(s)")
        for r in ROLE_VALUES:
            rm.addAction(ROLE_LABELS[r], lambda r=r: self.set_selected_role(r))
        tm = m.addMenu(f"Type of {len(cols)} column(s)")
        for t in TYPE_VALUES:
            tm.addAction(t, lambda t=t: self.set_selected_type(t))
        tm.addAction(
            "Back to the suggestion", lambda: self.set_types({c: None for c in cols}, "Types to suggested")
        )
        m.addMenu(self._hierarchy_menu(name)).setText(f"Hierarchy of {name}")
        m.popup(self.table.viewport().mapToGlobal(pos))

    def _on_selection_changed(self, *_args) -> None:
        self._stats_soon(later=self._stats_later)
        cols = self.selected_columns()
        if cols:
            self.sig_column_selected.emit(cols[0])

    def _update_stats(self) -> None:
        st = self.state
        cols = self.selected_columns()
        self.hist.clear()
        self.hist.setToolTip("")
        ax = self.hist.getAxis("bottom")
        ax.setTicks(None)  # a text column's labels must not stay on the next numeric one
        if st.df is None or not cols:
            return
        name = cols[0]
        s = st.stats[name]
        L = self.stat_labels
        L["Column"].setText(f"<b>{name}</b> ({ROLE_LABELS[st.roles.get(name, 'other')]})")
        label = (getattr(st.input_meta, "column_labels", None) or {}).get(name)
        L["Label"].setText(label or "–")
        kind, suggested = st.column_type(name)
        origin = st.type_origin(name)
        L["Type"].setText(f"{kind}{f' ({origin})' if origin else ''}, stored as {s.dtype}")
        L["Missing"].setText(
            f"{s.missing:,}" + (f" ({100 * s.missing / len(st.df):.1f} %)" if s.missing else "")
        )
        L["Distinct"].setText(f"{s.distinct:,}")
        L["Minimum"].setText("–" if s.minimum is None else f"{s.minimum:g}")
        L["Maximum"].setText("–" if s.maximum is None else f"{s.maximum:g}")
        msg, level = self.model.check(name)
        L["Check"].setText(msg or "–")  # in full: the table's column cuts long messages
        L["Check"].setStyleSheet("color:#b00020;" if level == "error" else "")
        self.cat_legend.hide()
        col = st.df[name]
        labels = value_labels_of(st, name)
        if s.numeric and not (labels or (kind in ("categorical", "ordinal") and s.distinct <= 40)):
            key = ("hist", name)
            if key not in self._plot_cache:
                vals = col.to_numpy(dtype=float, na_value=np.nan)
                vals = vals[np.isfinite(vals)]
                self._plot_cache[key] = np.histogram(vals, bins=30) if vals.size else (None, None)
            counts, edges = self._plot_cache[key]
            if counts is not None:
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
            key = ("top", name)
            if key not in self._plot_cache:
                self._plot_cache[key] = (top_counts(col, 20),)
            vc = self._plot_cache[key][0]
            if s.numeric or kind == "ordinal":  # codes in their order (1, 2, …), not by count
                vc = vc.sort_index()
            texts = []
            for v in vc.index:
                lab = label_of(labels, v) if labels else None
                code = (
                    format_exact(v)
                    if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                    else str(v)
                )
                texts.append(f"{code} {lab}" if lab else code)
            self.hist.addItem(
                pg.BarGraphItem(x=np.arange(len(vc)), height=vc.to_numpy(), width=0.8, brush="#5b8fd0")
            )
            room = max(self.hist.width(), 240) // 8
            ticks = [short_label(t, len(vc), room) for t in texts]
            ax.setTicks([list(enumerate(ticks))])
            if ticks != texts:
                self.cat_legend.setText(
                    "; ".join(f"{t}: {n:,}" for t, n in zip(texts, vc.to_numpy(), strict=True))
                )
                self.cat_legend.show()
            self.hist.setToolTip("\n".join(f"{t}: {n:,}" for t, n in zip(texts, vc.to_numpy())))
        h = st.hierarchies.get(name)
        src = st.hierarchy_sources.get(name) or {}
        self.hier_label.setText(
            f"Hierarchy: {h.height} levels, {len(h.leaves):,} leaves "
            f"({Path(src['path']).name if src.get('path') else 'generated by the engine'})"
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
        with self.state.undo_step(f"Load hierarchy of {name}"):
            self.state.set_hierarchy(name, h, str(path))
        return True

    def _generate_hierarchy(self, name: str) -> bool:
        try:
            h = generate_hierarchy(self.state.df[name], name)
        except engine.DPStudioError as exc:
            show_error(self, str(exc))
            return False
        with self.state.undo_step(f"Generate hierarchy of {name}"):
            self.state.set_hierarchy(name, h, {"generated": True})
        return True

    def remove_hierarchy(self, name: str) -> None:
        if name in self.state.hierarchies:
            with self.state.undo_step(f"Remove hierarchy of {name}"):
                self.state.set_hierarchy(name, None, None)


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
