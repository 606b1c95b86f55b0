"""The hierarchy / recode builder (issue 24): intervals (fixed width, custom breaks,
quantiles), category groups by a mapping table, masking of codes; a preview of every level
(groups, smallest group, records in groups smaller than k, this column alone) and of the
counts per label at a chosen level; saved and loaded as the ARX CSV the command line reads
(``--hierarchy COL=FILE``).  The engine builds the hierarchies
(:mod:`dpstudio.engine.hierarchies.build`); this dialog only collects the settings.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from dpstudio import engine
from dpstudio.app.state import AppState
from dpstudio.engine.hierarchies import build as B
from dpstudio.engine.hierarchies.hierarchy import Hierarchy

#: the kinds offered, in menu order: (id, label)
KINDS = (
    ("fixed", "Intervals of fixed width"),
    ("breaks", "Intervals with custom breaks"),
    ("quantiles", "Intervals by quantiles"),
    ("groups", "Group categories (mapping table)"),
    ("masking", "Mask codes from the right (postcodes)"),
    ("flat", "None: value → * (kept or wiped)"),
)
NUMERIC_KINDS = ("fixed", "breaks", "quantiles")


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


class HierarchyBuilder(QDialog):
    """Build a hierarchy for ``column`` of ``state.df``; "Save and use" writes it as an ARX
    CSV and attaches it to the column (one undo step).
    """

    def __init__(self, state: AppState, column: str, *, k: int = 5, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.column = column
        assert state.df is not None  # the builder opens on a loaded table
        self.values = state.df[column]
        self.hierarchy: Hierarchy | None = None
        self.error = ""
        self.saved_path: str | None = None
        self.setWindowTitle(f"Hierarchy builder — {column}")
        self.setObjectName("hierarchy_builder")
        self.resize(980, 640)
        lay = QVBoxLayout(self)
        top = QFormLayout()
        self.kind = QComboBox()
        self.kind.setObjectName("builder_kind")
        numeric = _is_numeric(self.values)
        for kid, label in KINDS:
            if kid in NUMERIC_KINDS and not numeric:
                continue
            self.kind.addItem(label, kid)
        top.addRow("Kind", self.kind)
        self.stack = QStackedWidget()
        self.pages: dict[str, QWidget] = {}
        # fixed width
        w = QWidget()
        f = QFormLayout(w)
        self.width_edit = QLineEdit()
        self.width_edit.setPlaceholderText("automatic (a round width near range/32)")
        self.start_edit = QLineEdit()
        self.start_edit.setPlaceholderText("automatic")
        f.addRow("Width of the first level (doubles per level)", self.width_edit)
        f.addRow("Start", self.start_edit)
        self.pages["fixed"] = w
        # custom breaks
        w = QWidget()
        f = QFormLayout(w)
        self.breaks = QLineEdit()
        self.breaks.setObjectName("builder_breaks")
        self.breaks.setPlaceholderText("e.g. 18, 30, 45, 65")
        f.addRow("Breaks (each starts an interval)", self.breaks)
        self.pages["breaks"] = w
        # quantiles
        w = QWidget()
        f = QFormLayout(w)
        self.q_levels = QSpinBox()
        self.q_levels.setRange(1, 8)
        self.q_levels.setValue(3)
        f.addRow("Levels (level 1: 2^(levels−1) bins of equal counts)", self.q_levels)
        self.q_note = QLabel("The bins' limits are the values shown in the preview below.")
        f.addRow("", self.q_note)
        self.pages["quantiles"] = w
        # groups
        w = QWidget()
        v = QVBoxLayout(w)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(QLabel("Type a group name for each value (values left empty keep their own value)."))
        self.mapping = QTableWidget(0, 4)
        self.mapping.setObjectName("builder_mapping")
        self.mapping.setHorizontalHeaderLabels(["value", "label", "records", "group"])
        self.mapping.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        v.addWidget(self.mapping)
        self.pages["groups"] = w
        self.pages["masking"] = QLabel(
            "Characters are masked from the right, one per level (12345 → 1234* → …)."
        )
        self.pages["flat"] = QLabel("Two levels only: the value, or * in every record.")
        for kid in [k for k, _ in KINDS]:
            self.stack.addWidget(self.pages[kid])
        self.stack.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        top.addRow(self.stack)
        self.k = QSpinBox()
        self.k.setRange(1, 1_000_000)
        self.k.setValue(max(int(k or 2), 1))
        top.addRow("k (for the preview)", self.k)
        lay.addLayout(top)
        self.message = QLabel("")
        self.message.setObjectName("builder_message")
        self.message.setWordWrap(True)
        lay.addWidget(self.message)
        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(QLabel("<b>Levels</b> (this column alone: other k-quasis only split groups further)"))
        self.levels = QTableWidget(0, 5)
        self.levels.setObjectName("builder_levels")
        self.levels.setHorizontalHeaderLabels(
            ["level", "groups", "smallest group", "records in groups < k", "labels"]
        )
        self.levels.horizontalHeader().setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.levels.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.levels.verticalHeader().setVisible(False)
        self.levels.currentCellChanged.connect(lambda r, *_: self._show_counts(r))
        lv.addWidget(self.levels)
        split.addWidget(left)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.counts_title = QLabel("<b>Records per group</b>")
        rv.addWidget(self.counts_title)
        self.counts = QTableWidget(0, 2)
        self.counts.setObjectName("builder_counts")
        self.counts.setHorizontalHeaderLabels(["group", "records"])
        self.counts.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.counts.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        rv.addWidget(self.counts)
        split.addWidget(right)
        split.setSizes([620, 340])
        lay.addWidget(split, 1)
        btns = QHBoxLayout()
        self.load_btn = QPushButton("Load ARX CSV…")
        self.save_btn = QPushButton("Save as ARX CSV…")
        self.use_btn = QPushButton("Save and use for this column")
        self.use_btn.setObjectName("builder_use")
        self.use_btn.setDefault(True)
        close = QPushButton("Close")
        for b in (self.load_btn, self.save_btn):
            btns.addWidget(b)
        btns.addStretch(1)
        btns.addWidget(self.use_btn)
        btns.addWidget(close)
        lay.addLayout(btns)
        self.load_btn.clicked.connect(self._load)
        self.save_btn.clicked.connect(lambda: self.save())
        self.use_btn.clicked.connect(lambda: self.save_and_use())
        close.clicked.connect(self.reject)
        self._fill_mapping()
        self.kind.currentIndexChanged.connect(self._on_kind)
        for e in (self.width_edit, self.start_edit, self.breaks):
            e.editingFinished.connect(self.rebuild)
        self.q_levels.valueChanged.connect(self.rebuild)
        self.k.valueChanged.connect(self.rebuild)
        self.mapping.itemChanged.connect(self._on_mapping_edited)
        if numeric and self.values.nunique(dropna=True) <= 20 and self._labels():
            self.set_kind("groups")  # labelled codes: group them by name
        self._on_kind()

    # --- settings
    def _labels(self) -> dict:
        from dpstudio.app.models.roles_model import value_labels_of

        return value_labels_of(self.state, self.column)

    def _fill_mapping(self) -> None:
        from dpstudio.app.models.roles_model import label_of

        s = self.values.dropna()
        codes, labels = B.factorize_strings(s)
        cnt = pd.Series(codes).value_counts()
        raw = pd.unique(s)
        labels_map = self._labels()
        by_text = {}
        for v in raw:
            _, t = B.factorize_strings(pd.Series([v]))
            by_text[str(t[0])] = v
        order = sorted(range(len(labels)), key=lambda i: (_num_key(str(labels[i])), str(labels[i])))
        self.mapping.blockSignals(True)
        self.mapping.setRowCount(len(order))
        for r, i in enumerate(order):
            text = str(labels[i])
            lab = label_of(labels_map, by_text.get(text, text)) if labels_map else None
            for c, val in enumerate((text, lab or "", f"{int(cnt.get(i, 0)):,}")):
                it = QTableWidgetItem(val)
                it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.mapping.setItem(r, c, it)
            self.mapping.setItem(r, 3, QTableWidgetItem(""))
        self.mapping.blockSignals(False)
        self.mapping.resizeColumnsToContents()

    def _on_mapping_edited(self, it: QTableWidgetItem) -> None:
        if it.column() == 3:
            self.rebuild()

    def set_kind(self, kid: str) -> None:
        i = self.kind.findData(kid)
        if i >= 0:
            self.kind.setCurrentIndex(i)

    def set_mapping(self, mapping: dict[str, str]) -> None:
        """Group names by value (canonical text, e.g. '3'), as if typed in the table."""
        self.mapping.blockSignals(True)
        for r in range(self.mapping.rowCount()):
            v = _cell(self.mapping, r, 0)
            it = self.mapping.item(r, 3)
            if v in mapping and it is not None:
                it.setText(str(mapping[v]))
        self.mapping.blockSignals(False)
        self.rebuild()

    def _on_kind(self, *_args) -> None:
        kid = self.kind.currentData()
        self.stack.setCurrentWidget(self.pages[kid])
        self.rebuild()

    def build(self) -> Hierarchy:
        """The hierarchy of the current settings (the engine's builders; missing values are
        no leaves).
        """
        kid = self.kind.currentData()
        s = self.values.dropna()
        name = self.column
        if kid == "fixed":
            width = float(self.width_edit.text()) if self.width_edit.text().strip() else None
            start = float(self.start_edit.text()) if self.start_edit.text().strip() else None
            return B.interval_hierarchy(s, width=width, start=start, name=name)
        if kid == "breaks":
            parts = [p for p in self.breaks.text().replace(";", ",").split(",") if p.strip()]
            if not parts:
                raise engine.ParameterError("Type the breaks, e.g. 18, 30, 45, 65.")
            try:
                br = [float(p) for p in parts]
            except ValueError:
                raise engine.ParameterError(f"Breaks must be numbers: {self.breaks.text()!r}.") from None
            return B.breaks_hierarchy(s, br, name=name)
        if kid == "quantiles":
            return B.interval_hierarchy(s, method="quantile", levels=self.q_levels.value(), name=name)
        if kid == "groups":
            m = {}
            for r in range(self.mapping.rowCount()):
                g = _cell(self.mapping, r, 3).strip()
                if g:
                    m[_cell(self.mapping, r, 0)] = g
            return B.mapping_hierarchy(s, m, name=name)
        if kid == "masking":
            return B.masking_hierarchy(s, name=name)
        return B.flat_hierarchy(s, name=name)

    def rebuild(self, *_args) -> None:
        try:
            self.hierarchy = self.build()
            self.error = ""
        except (engine.DPStudioError, ValueError) as exc:
            self.hierarchy, self.error = None, str(exc).splitlines()[0]
        self._preview()

    # --- preview
    def _preview(self) -> None:
        h = self.hierarchy
        self.use_btn.setEnabled(h is not None)
        self.save_btn.setEnabled(h is not None)
        if h is None:
            self.message.setText(f"<span style='color:#b00020'>{self.error}</span>")
            self.levels.setRowCount(0)
            self.counts.setRowCount(0)
            return
        tab = B.level_table(self.values, h, self.k.value())
        self.table = tab
        self.levels.setRowCount(len(tab))
        for r, row in enumerate(tab.itertuples(index=False)):
            vals = [str(row[0]), f"{row[1]:,}", f"{row[2]:,}", f"{row[3]:,}", str(row[4])]
            for c, t in enumerate(vals):
                it = QTableWidgetItem(t)
                if c == 3 and row[3] > 0:
                    it.setForeground(Qt.GlobalColor.darkRed)
                self.levels.setItem(r, c, it)
        self.levels.resizeColumnsToContents()
        ok = tab[tab["records in groups < k"] == 0]
        first_ok = int(ok["level"].min()) if len(ok) else None
        top = h.height - 1
        if first_ok is None or first_ok >= top:
            self.message.setText(
                f"<span style='color:#b00020'>⚠ Only the top level ('*', nothing released) gives every "
                f"group at least k = {self.k.value()} records for this column alone.</span>"
            )
        else:
            self.message.setText(
                f"{h.height} levels. Alone, this column reaches k = {self.k.value()} at level {first_ok} "
                f"(of {top}); with the other k-quasis OLA may need a higher level."
            )
        self.levels.selectRow(min(1, len(tab) - 1))
        self._show_counts(min(1, len(tab) - 1))

    def _show_counts(self, level: int) -> None:
        h = self.hierarchy
        if h is None or level < 0:
            return
        cnt = B.level_counts(self.values, h, level)
        self.counts_title.setText(f"<b>Records per group at level {level}</b>")
        self.counts.setRowCount(len(cnt))
        k = self.k.value()
        for r, (lab, n) in enumerate(cnt.items()):
            a, b = QTableWidgetItem(str(lab)), QTableWidgetItem(f"{int(n):,}")
            if n < k:
                b.setForeground(Qt.GlobalColor.darkRed)
            self.counts.setItem(r, 0, a)
            self.counts.setItem(r, 1, b)

    # --- files
    def _suggest(self) -> str:
        from dpstudio.app.widgets.roles_panel import suggest_hierarchy_path

        p = suggest_hierarchy_path(self.state.path, self.column)
        if p and Path(p).is_file():
            return p
        base = (
            Path(p)
            if p and Path(p).is_dir()
            else (Path(self.state.path).parent if self.state.path else Path.cwd())
        )
        stem = Path(self.state.path).stem if self.state.path else "data"
        return str(base / f"{stem}_hierarchy_{self.column}.csv")

    def ask_save_path(self) -> str:
        path, _ = QFileDialog.getSaveFileName(
            self, f"Save the hierarchy of {self.column}", self._suggest(), "ARX hierarchy (*.csv)"
        )
        return path

    def save(self, path: str | None = None) -> str | None:
        """Write the hierarchy as an ARX CSV (never over the data file); its path, or None."""
        if self.hierarchy is None:
            return None
        path = path or self.ask_save_path()
        if not path:
            return None
        try:
            self.hierarchy.write_arx(path, protect=(self.state.path,) if self.state.path else ())
        except (engine.DPStudioError, OSError) as exc:
            self.message.setText(f"<span style='color:#b00020'>{exc}</span>")
            return None
        self.saved_path = path
        return path

    def save_and_use(self, path: str | None = None) -> bool:
        """Save, then attach the saved file to the column (as 'Load ARX hierarchy' does)."""
        p = self.save(path)
        if not p:
            return False
        h = Hierarchy.read_arx(p, name=Path(p).name)
        with self.state.undo_step(f"Build hierarchy of {self.column}"):
            self.state.set_hierarchy(self.column, h, str(p))
        self.accept()
        return True

    def load(self, path: str) -> bool:
        """Show an ARX CSV's levels (kind 'as loaded')."""
        try:
            h = Hierarchy.read_arx(path, name=Path(path).name)
            h.check_values(self.values.dropna(), self.column)
        except engine.DPStudioError as exc:
            self.message.setText(f"<span style='color:#b00020'>{exc}</span>")
            return False
        self.hierarchy, self.error = h, ""
        self._preview()
        return True

    def _load(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, f"Hierarchy for {self.column}", self._suggest(), "ARX hierarchy (*.csv);;All files (*)"
        )
        if path:
            self.load(path)


def _cell(table: QTableWidget, r: int, c: int) -> str:
    it = table.item(r, c)
    return it.text() if it is not None else ""


def _num_key(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("inf")
