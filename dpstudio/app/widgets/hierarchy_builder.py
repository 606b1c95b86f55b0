"""The hierarchy / recode builder (issue 24): intervals (fixed width, custom breaks,
quantiles), category groups by a mapping table or by dragging the categories (with their
value labels) onto a group, masking of codes; a preview of every level
(groups, smallest group, records in groups smaller than k, this column alone) and of the
counts per label at a chosen level; saved and loaded as the ARX CSV the command line reads
(``--hierarchy COL=FILE``).  The engine builds the hierarchies
(:mod:`dpstudio.engine.hierarchies.build`); this dialog only collects the settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from PySide6.QtCore import QMimeData, QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
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
    QTreeView,
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


#: the group of a drop on the "new group" row: a fresh name is made
NEW_GROUP = "\x00new"
#: the drag payload: the categories' values (canonical text) as a JSON list
CATEGORY_MIME = "application/x-dpstudio-categories"
#: item data: what a row of the group tree is ("ungrouped", "group", "new", "category") ...
KIND_ROLE = int(Qt.ItemDataRole.UserRole) + 1
#: ... and its value (a category) or its group name (a group)
VALUE_ROLE = int(Qt.ItemDataRole.UserRole) + 2


class CategoryGroupModel(QStandardItemModel):
    """The categories of a column grouped, as a tree for drag and drop: one row for the
    ungrouped categories (each keeps its own value), one per group, and a "new group" row;
    the categories (value — label, records) under them.  A drop does not move rows itself: it
    emits :attr:`sig_regroup` (the values and the target group name, ``""`` = ungrouped) and
    the builder writes the mapping table, the one source of the hierarchy, from which this
    tree is filled again (:meth:`fill`).  So grouping by drag and typing the same group names
    in the table give the same hierarchy by construction.
    """

    sig_regroup = Signal(list, str)
    """(values, group): put these categories into that group ("" = ungrouped)."""
    sig_rename = Signal(str, str)
    """(old, new): a group's name edited in the tree."""

    def __init__(self, parent=None) -> None:
        super().__init__(0, 2, parent)
        self._filling = False
        self.itemChanged.connect(self._on_item_changed)

    def fill(self, rows: list[tuple[str, str, int, str]]) -> None:
        """Fill from the mapping table's rows: (value, label, records, group)."""
        self._filling = True
        self.clear()
        self.setHorizontalHeaderLabels(["group / category (value — label)", "records"])
        groups: dict[str, list[tuple[str, str, int]]] = {}
        for v, lab, n, g in rows:
            groups.setdefault(g, []).append((v, lab, n))
        order = [""] + sorted((g for g in groups if g), key=lambda g: (_num_key(g), g))
        for g in order:
            members = groups.get(g, [])
            if g:
                head = QStandardItem(g)
                head.setToolTip("A group: drop categories here; double-click to rename it.")
                head.setFlags(
                    Qt.ItemFlag.ItemIsEnabled
                    | Qt.ItemFlag.ItemIsSelectable
                    | Qt.ItemFlag.ItemIsEditable
                    | Qt.ItemFlag.ItemIsDragEnabled
                    | Qt.ItemFlag.ItemIsDropEnabled
                )
                head.setData("group", KIND_ROLE)
            else:
                head = QStandardItem("(ungrouped: each keeps its own value)")
                head.setToolTip("Drop categories here to take them out of their group.")
                head.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsDropEnabled)
                head.setData("ungrouped", KIND_ROLE)
            head.setData(g, VALUE_ROLE)
            f = head.font()
            f.setBold(True)
            head.setFont(f)
            total = QStandardItem(f"{sum(n for _v, _l, n in members):,}")
            total.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsDropEnabled)
            for v, lab, n in members:
                it = QStandardItem(f"{v} — {lab}" if lab else v)
                it.setData("category", KIND_ROLE)
                it.setData(v, VALUE_ROLE)
                # a drop on a category puts the dragged ones into its group
                it.setFlags(
                    Qt.ItemFlag.ItemIsEnabled
                    | Qt.ItemFlag.ItemIsSelectable
                    | Qt.ItemFlag.ItemIsDragEnabled
                    | Qt.ItemFlag.ItemIsDropEnabled
                )
                cnt = QStandardItem(f"{n:,}")
                cnt.setFlags(
                    Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsDropEnabled
                )
                head.appendRow([it, cnt])
            self.appendRow([head, total])
        new = QStandardItem("＋ New group (drop categories here)")
        new.setData("new", KIND_ROLE)
        new.setData("", VALUE_ROLE)
        new.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsDropEnabled)
        new.setForeground(QBrush(QColor("darkblue")))
        blank = QStandardItem("")
        blank.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsDropEnabled)
        self.appendRow([new, blank])
        self._filling = False

    def groups(self) -> dict[str, list[str]]:
        """The tree as shown: group name ("" = ungrouped) → values of its categories."""
        out: dict[str, list[str]] = {}
        for r in range(self.rowCount()):
            head = self.item(r, 0)
            if head is None or head.data(KIND_ROLE) == "new":
                continue
            out[str(head.data(VALUE_ROLE))] = [
                str(head.child(i, 0).data(VALUE_ROLE)) for i in range(head.rowCount())
            ]
        return out

    def group_row(self, group: str) -> QModelIndex:
        """The index of a group's row ("" = the ungrouped row); invalid when there is none."""
        for r in range(self.rowCount()):
            head = self.item(r, 0)
            if head is not None and head.data(KIND_ROLE) != "new" and head.data(VALUE_ROLE) == group:
                return head.index()
        return QModelIndex()

    def new_group_row(self) -> QModelIndex:
        return self.index(self.rowCount() - 1, 0)

    def category_index(self, value: str) -> QModelIndex:
        for r in range(self.rowCount()):
            head = self.item(r, 0)
            for i in range(head.rowCount() if head is not None else 0):
                if head.child(i, 0).data(VALUE_ROLE) == value:
                    return head.child(i, 0).index()
        return QModelIndex()

    # --- drag and drop
    def supportedDropActions(self) -> Qt.DropAction:  # noqa: N802 - Qt API
        return Qt.DropAction.MoveAction | Qt.DropAction.CopyAction

    def mimeTypes(self) -> list[str]:  # noqa: N802 - Qt API
        return [CATEGORY_MIME]

    def mimeData(self, indexes) -> QMimeData:  # noqa: N802 - Qt API
        """The dragged categories' values (a dragged group: all its categories)."""
        values: list[str] = []
        for ix in indexes:
            it = self.itemFromIndex(ix.siblingAtColumn(0))
            if it is None:
                continue
            kind = it.data(KIND_ROLE)
            if kind == "category":
                values.append(str(it.data(VALUE_ROLE)))
            elif kind == "group":
                values += [str(it.child(i, 0).data(VALUE_ROLE)) for i in range(it.rowCount())]
        md = QMimeData()
        md.setData(CATEGORY_MIME, json.dumps(list(dict.fromkeys(values))).encode())
        return md

    @staticmethod
    def payload(data: QMimeData) -> list[str] | None:
        """The values in a drag's data, or None when it is not this builder's."""
        if data is None or not data.hasFormat(CATEGORY_MIME):
            return None
        try:
            vals = json.loads(bytes(data.data(CATEGORY_MIME).data()).decode())
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
            return None
        return vals

    def target_group(self, parent: QModelIndex) -> str | None:
        """The group a drop on ``parent`` puts categories into ("" = ungrouped; None = a new
        group: on the "new group" row or below the last row).
        """
        if not parent.isValid():
            return None
        it = self.itemFromIndex(parent.siblingAtColumn(0))
        if it is None:
            return None
        kind = it.data(KIND_ROLE)
        if kind == "category":
            it = it.parent()
            kind = it.data(KIND_ROLE) if it is not None else None
        if kind in ("group", "ungrouped"):
            return str(it.data(VALUE_ROLE))
        return None

    def canDropMimeData(self, data, action, row, column, parent) -> bool:  # noqa: N802 - Qt API
        return self.payload(data) is not None

    def dropMimeData(self, data, action, row, column, parent) -> bool:  # noqa: N802 - Qt API
        vals = self.payload(data)
        if not vals:
            return False
        target = self.target_group(parent)
        self.sig_regroup.emit(vals, NEW_GROUP if target is None else target)
        return True

    def removeRows(self, row: int, count: int, parent=QModelIndex()) -> bool:  # noqa: N802 - Qt API
        """Never by the view after a move: the tree is filled again from the mapping table."""
        return False

    def _on_item_changed(self, it: QStandardItem) -> None:
        if self._filling or it.data(KIND_ROLE) != "group":
            return
        old, new = str(it.data(VALUE_ROLE)), it.text().strip()
        if new != old:
            self.sig_rename.emit(old, new)


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
        self.pages["groups"] = self._build_groups_page()
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

    def _build_groups_page(self) -> QWidget:
        """The page of kind "groups": the mapping table, and the tree to drag categories in."""
        w = QWidget()
        v = QVBoxLayout(w)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(
            QLabel(
                "Type a group name for each value (values left empty keep their own value), or "
                "drag categories onto a group on the right (onto ＋ New group for a new one)."
            )
        )
        gsplit = QSplitter(Qt.Orientation.Horizontal)
        self.mapping = QTableWidget(0, 4)
        self.mapping.setObjectName("builder_mapping")
        self.mapping.setHorizontalHeaderLabels(["value", "label", "records", "group"])
        self.mapping.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.mapping.setMinimumHeight(240)
        gsplit.addWidget(self.mapping)
        self.group_model = CategoryGroupModel(self)
        self.group_tree = QTreeView()
        self.group_tree.setObjectName("builder_group_tree")
        self.group_tree.setModel(self.group_model)
        self.group_tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.group_tree.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        self.group_tree.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.group_tree.setDragEnabled(True)
        self.group_tree.setAcceptDrops(True)
        self.group_tree.setDropIndicatorShown(True)
        # a drop lands ON a row (its group), never between two rows
        self.group_tree.setDragDropOverwriteMode(True)
        self.group_tree.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.group_tree.setToolTip(
            "Drag categories (several with Ctrl/Shift) onto a group, onto '＋ New group' or "
            "onto '(ungrouped)'; double-click a group to rename it."
        )
        self.group_tree.setMinimumHeight(240)
        gsplit.addWidget(self.group_tree)
        gsplit.setSizes([430, 430])
        v.addWidget(gsplit)
        self.group_model.sig_regroup.connect(self.regroup)
        self.group_model.sig_rename.connect(self.rename_group)
        return w

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
        self.mapping.setColumnWidth(3, max(self.mapping.columnWidth(3), 130))

    def _on_mapping_edited(self, it: QTableWidgetItem) -> None:
        if it.column() == 3:
            self.rebuild()

    def mapping_dict(self) -> dict[str, str]:
        """The mapping table: value (canonical text) → group name, for the values given one."""
        m = {}
        for r in range(self.mapping.rowCount()):
            g = _cell(self.mapping, r, 3).strip()
            if g:
                m[_cell(self.mapping, r, 0)] = g
        return m

    def _fill_groups(self) -> None:
        """The drag tree, from the mapping table (its one source)."""
        rows = []
        for r in range(self.mapping.rowCount()):
            n = _cell(self.mapping, r, 2).replace(",", "")
            rows.append(
                (
                    _cell(self.mapping, r, 0),
                    _cell(self.mapping, r, 1),
                    int(n) if n.isdigit() else 0,
                    _cell(self.mapping, r, 3).strip(),
                )
            )
        self.group_model.fill(rows)
        self.group_tree.expandAll()
        self.group_tree.resizeColumnToContents(0)

    def _new_group_name(self) -> str:
        used = set(self.mapping_dict().values())
        i = 1
        while f"Group {i}" in used:
            i += 1
        return f"Group {i}"

    def regroup(self, values: list[str], group: str) -> None:
        """Put the categories ``values`` into ``group`` (``""``: ungrouped, each keeps its
        own value; :data:`NEW_GROUP`: a new group named "Group N"), as if that name were typed
        in the table's group cells: what a drop in the group tree does.
        """
        if group == NEW_GROUP:
            group = self._new_group_name()
        wanted = set(values)
        self.mapping.blockSignals(True)
        for r in range(self.mapping.rowCount()):
            it = self.mapping.item(r, 3)
            if _cell(self.mapping, r, 0) in wanted and it is not None:
                it.setText(group)
        self.mapping.blockSignals(False)
        self._rebuild(tree_now=False)

    def rename_group(self, old: str, new: str) -> None:
        """Rename a group (an empty name puts its categories back to their own values)."""
        self.regroup([v for v, g in self.mapping_dict().items() if g == old], new)

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
        # the stack takes the height of the page shown (not of its tallest page: the groups)
        for k, page in self.pages.items():
            pol = QSizePolicy.Policy.Preferred if k == kid else QSizePolicy.Policy.Ignored
            page.setSizePolicy(pol, pol)
        self.stack.setCurrentWidget(self.pages[kid])
        self.stack.adjustSize()
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
            return B.mapping_hierarchy(s, self.mapping_dict(), name=name)
        if kid == "masking":
            return B.masking_hierarchy(s, name=name)
        return B.flat_hierarchy(s, name=name)

    def rebuild(self, *_args) -> None:
        """The hierarchy of the current settings and its preview (and the group tree)."""
        self._rebuild(tree_now=True)

    def _rebuild(self, *, tree_now: bool) -> None:
        if self.kind.currentData() == "groups":
            if tree_now:
                self._fill_groups()
            else:  # called from the tree's own drop or edit: refilled once that returned
                QTimer.singleShot(0, self._fill_groups)
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
