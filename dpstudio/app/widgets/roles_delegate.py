"""Editors of the attributes table, created only for the cell being edited (issue 15)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtWidgets import QComboBox, QLineEdit, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from dpstudio.app.models.roles_model import (
    C_HI,
    C_LO,
    C_PREC,
    C_ROLE,
    C_TYPE,
    ROLE_HELP,
    ROLE_LABELS,
    TYPE_HELP,
)
from dpstudio.app.state import ROLE_VALUES, TYPE_VALUES

Index = QModelIndex | QPersistentModelIndex


class RolesDelegate(QStyledItemDelegate):
    """A combo box for role and type (the choice is written as soon as it is picked), a line
    edit for the bounds and the precision (written when editing finishes).
    """

    #: open the combo's list at once (off in tests that drive the editor without a popup)
    popup = True

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: Index) -> QWidget:  # noqa: N802
        c = index.column()
        model = index.model()
        name = model.data(model.index(index.row(), 0))
        if c in (C_ROLE, C_TYPE):
            combo = QComboBox(parent)
            if c == C_ROLE:
                combo.setObjectName(f"role_{name}")
                for i, r in enumerate(ROLE_VALUES):
                    combo.addItem(ROLE_LABELS[r], r)
                    combo.setItemData(i, ROLE_HELP[r], Qt.ItemDataRole.ToolTipRole)
            else:
                combo.setObjectName(f"type_{name}")
                state = getattr(model, "state", None)
                suggested = state.suggested_type(name) if state is not None else None
                for i, t in enumerate(TYPE_VALUES):
                    combo.addItem(t + ("  (suggested)" if t == suggested else ""), t)
                    combo.setItemData(i, TYPE_HELP[t], Qt.ItemDataRole.ToolTipRole)
            combo.activated.connect(lambda _i, e=combo: self._commit(e))
            if self.popup:
                QTimer.singleShot(0, combo.showPopup)
            return combo
        if c in (C_LO, C_HI, C_PREC):
            le = QLineEdit(parent)
            le.setObjectName({C_LO: "lower", C_HI: "upper", C_PREC: "precision"}[c] + f"_{name}")
            le.setFrame(False)
            le.setToolTip(str(model.data(index, Qt.ItemDataRole.ToolTipRole) or ""))
            if c == C_PREC:
                shown = str(model.data(index) or "")
                le.setPlaceholderText(shown if shown.startswith("auto") else "")
            return le
        return super().createEditor(parent, option, index)

    def setEditorData(self, editor: QWidget, index: Index) -> None:  # noqa: N802
        v = index.model().data(index, Qt.ItemDataRole.EditRole)
        if isinstance(editor, QComboBox):
            i = editor.findData(v)
            editor.blockSignals(True)
            editor.setCurrentIndex(max(i, 0))
            editor.blockSignals(False)
        elif isinstance(editor, QLineEdit):
            editor.setText("" if v is None else str(v))
        else:
            super().setEditorData(editor, index)

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: Index) -> None:  # noqa: N802
        if isinstance(editor, QComboBox):
            model.setData(index, editor.currentData(), Qt.ItemDataRole.EditRole)
        elif isinstance(editor, QLineEdit):
            model.setData(index, editor.text(), Qt.ItemDataRole.EditRole)
        else:
            super().setModelData(editor, model, index)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: Index) -> None:  # noqa: N802
        editor.setGeometry(option.rect)

    def _commit(self, editor: Any) -> None:
        self.commitData.emit(editor)
        self.closeEditor.emit(editor, QStyledItemDelegate.EndEditHint.NoHint)
