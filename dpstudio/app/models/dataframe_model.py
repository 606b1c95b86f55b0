"""A read-only table model over a DataFrame: cells are formatted on demand.

Each column is held once as a numpy array (a view) or pandas' own array (Arrow texts); nothing
is copied into the view, so 1,000,000 rows cost no more than the DataFrame itself.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

_MISSING_BRUSH = QBrush(QColor("#fde2e1"))
_DISPLAY = Qt.ItemDataRole.DisplayRole
_BACKGROUND = Qt.ItemDataRole.BackgroundRole
_TOOLTIP = Qt.ItemDataRole.ToolTipRole
_ALIGNMENT = Qt.ItemDataRole.TextAlignmentRole
_ROLES = frozenset((_DISPLAY, _BACKGROUND, _TOOLTIP, _ALIGNMENT))
_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def format_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return ""
        if float(v).is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.6g}"
    if v is pd.NA or v is pd.NaT:
        return ""
    return str(v)


def column_values(s: pd.Series):
    """The values of ``s`` indexable by row without a copy: numpy columns as their array, the
    others (Arrow texts, categoricals...) as pandas' own array -- never converted to one Python
    object per row on the GUI thread (issue 27: 0.35 s for a 200,000-row release).
    """
    if isinstance(s.dtype, np.dtype):
        return s.to_numpy()
    return s.array


def _label_maps(names: list[str], labels: dict[str, dict]) -> dict[int, dict]:
    """Column index -> {value: label}, numeric keys also as floats (codes read as 1.0 match a
    label keyed 1).
    """
    out: dict[int, dict] = {}
    for j, n in enumerate(names):
        lab = labels.get(n)
        if not lab:
            continue
        m: dict = {}
        for k, v in lab.items():
            m[k] = str(v)
            try:
                m[float(k)] = str(v)
            except (TypeError, ValueError):
                pass
        out[j] = m
    return out


def _lookup(labels: dict, v) -> str | None:
    try:
        hit = labels.get(v)
    except TypeError:  # unhashable
        return None
    if hit is None and isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        f = float(v)
        hit = labels.get(f) if f == f else None
    return hit


class DataFrameModel(QAbstractTableModel):
    """Shows ``df``; optionally a role per column in the header tooltip."""

    def __init__(self, df: pd.DataFrame | None = None, parent=None) -> None:
        super().__init__(parent)
        self._df = pd.DataFrame()
        self._cols: list[np.ndarray] = []
        self._names: list[str] = []
        self._roles: dict[str, str] = {}
        #: column index -> {value: label} shown instead of the codes (issue 24 §3)
        self._labels: dict[int, dict] = {}
        self._label_source: dict[str, dict] = {}
        if df is not None:
            self.set_frame(df)

    # --- Public API
    def set_frame(self, df: pd.DataFrame | None) -> None:
        self.beginResetModel()
        self._df = df if df is not None else pd.DataFrame()
        self._names = [str(c) for c in self._df.columns]
        self._cols = [column_values(self._df.iloc[:, i]) for i in range(self._df.shape[1])]
        self._labels = _label_maps(self._names, self._label_source)
        self.endResetModel()

    def set_value_labels(self, labels: dict[str, dict] | None) -> None:
        """Show the SPSS/Stata value labels of the columns (``None``: the codes)."""
        self._label_source = dict(labels or {})
        self._labels = _label_maps(self._names, self._label_source)
        if self._names and len(self._df):
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._df) - 1, len(self._names) - 1))

    def display(self, col: int, v) -> str:
        """The text of value ``v`` of column ``col`` (its label when labels are shown)."""
        lab = self._labels.get(col)
        if lab:
            hit = _lookup(lab, v)
            if hit is not None:
                return hit
        return format_value(v)

    def frame(self) -> pd.DataFrame:
        return self._df

    def set_roles(self, roles: dict[str, str]) -> None:
        self._roles = dict(roles)
        if self._names:
            self.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, len(self._names) - 1)

    # --- Qt model API
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._df)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._names)

    def data(self, index, role=_DISPLAY):
        # called for every visible cell and each of ~10 roles at every repaint: the roles not
        # shown here are answered first, without touching the cell (issue 27.4)
        if role not in _ROLES or not index.isValid():
            return None
        c = index.column()
        if role == _DISPLAY:
            return self.display(c, self._cols[c][index.row()])
        if role == _BACKGROUND:
            v = self._cols[c][index.row()]
            if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v)):
                return _MISSING_BRUSH
            return None
        if role == _TOOLTIP:
            if c not in self._labels:
                return None
            v = self._cols[c][index.row()]
            lab = _lookup(self._labels[c], v)
            return f"{format_value(v)} = {lab}" if lab is not None else None
        if c in self._labels:  # labels are text
            return _LEFT
        if self._cols[c].dtype.kind in "iuf":
            return _RIGHT
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal:
            if section >= len(self._names):
                return None
            name = self._names[section]
            if role == Qt.ItemDataRole.DisplayRole:
                r = self._roles.get(name, "other")
                return name if r == "other" else f"{name}\n[{r}]"
            if role == Qt.ItemDataRole.ToolTipRole:
                return f"{name} ({self._df.dtypes.iloc[section]}), role: {self._roles.get(name, 'other')}"
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return str(section + 1)
        return None
