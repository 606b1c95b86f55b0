"""See the release: the protected records next to the original ones, changed cells marked, and a
before/after frequency table for categorical attributes (issue 11).

The original is the result's :meth:`~dpstudio.engine.types.ProtectionResult.aligned_original`
(row j of the release next to the original record it came from).  Both tables use the lazy
:class:`~dpstudio.app.models.dataframe_model.DataFrameModel` (cells formatted on demand) and
share one row order: sorting either table by a column sorts both, so a row always shows the
same record on the two sides.  Everything here is for the operator's eyes only (it shows the
original data); nothing is written anywhere.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import turns
from dpstudio.app.models.dataframe_model import DataFrameModel, column_values, format_value
from dpstudio.app.state import AppState

CHANGED_BRUSH = QBrush(QColor("#ffe9a8"))
"""Background of a released cell whose value differs from the original's."""
FREQ_TOP = 200  # categories listed in the frequency table (most frequent of either side)
RESIZE_ROWS = 60  # rows a column's width is fitted to (Qt's default: 1,000)


def changed_mask(orig: pd.Series, prot: pd.Series) -> np.ndarray:
    """True where the released value differs from the original (missing == missing; numbers
    compared as numbers, 39 == 39.0; anything else as text).
    """
    n = min(len(orig), len(prot))
    a, b = orig.iloc[:n].reset_index(drop=True), prot.iloc[:n].reset_index(drop=True)
    na_a, na_b = a.isna().to_numpy(), b.isna().to_numpy()
    num = (
        pd.api.types.is_numeric_dtype(a)
        and pd.api.types.is_numeric_dtype(b)
        and not pd.api.types.is_bool_dtype(a)
        and not pd.api.types.is_bool_dtype(b)
    )
    if num:
        x = a.to_numpy(dtype=np.float64, na_value=np.nan)
        y = b.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            diff = x != y
    else:
        # as text, compared by pandas' text arrays (Arrow), not one Python object per cell
        diff = (a.astype(str) != b.astype(str)).to_numpy(dtype=bool)
    return np.where(na_a | na_b, na_a != na_b, diff)


def frequency_table(orig: pd.Series | None, prot: pd.Series, top: int = FREQ_TOP) -> pd.DataFrame:
    """Counts and shares per category, original vs released (categories of either side, most
    frequent first; missing values as '(missing)').
    """

    def counts(s):
        # the counts of the texts of the values: the values counted first (the texts of the
        # distinct values only, not of every cell), the same order as value_counts of texts
        vc = s.value_counts(dropna=False)
        vc = vc[vc > 0]  # (a categorical lists its unused categories)
        keys = ["(missing)" if pd.isna(v) else str(v) for v in vc.index]
        if len(set(keys)) == len(keys):
            return pd.Series(vc.to_numpy(), index=pd.Index(keys, dtype=object), name="count")
        return s.astype(object).where(s.notna(), "(missing)").astype(str).value_counts()

    b = counts(prot)
    a = counts(orig) if orig is not None else pd.Series(dtype=float)
    cats = a.add(b, fill_value=0).sort_values(ascending=False, kind="stable").index[:top]
    out = pd.DataFrame(index=cats)
    out["original"] = a.reindex(cats).fillna(0).astype(int)
    out["released"] = b.reindex(cats).fillna(0).astype(int)
    na, nb = max(int(a.sum()), 1), max(int(b.sum()), 1)
    out["original %"] = 100.0 * out["original"] / na
    out["released %"] = 100.0 * out["released"] / nb
    out["Δ pp"] = out["released %"] - out["original %"]
    out.index.name = "category"
    return out


def _as_number(text):
    """A category's text as the number it writes ('3', '3.0' -> 3.0), else the text."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


_ALIGNED: list = []  # [(result, its aligned original, {column: changed mask}, {attribute: table})]


def _entry(res) -> tuple:
    """The cache entry of ``res`` (the last result only): its original in the release's row
    order (None when not kept), the changed-cell masks and frequency tables computed so far.
    """
    hit = _ALIGNED[0] if _ALIGNED else None
    if hit is not None and hit[0] is res:
        return hit
    try:
        out = res.aligned_original()
    except (AttributeError, ValueError):
        out = None
    entry = (res, out, {}, {})
    _ALIGNED[:] = [entry]
    return entry


def _aligned(res) -> pd.DataFrame | None:
    """The result's original in the release's row order, or None when it is not kept
    (computed once per result: the view asks for it several times per refresh).
    """
    return _entry(res)[1]


def changed_masks(res) -> dict[str, np.ndarray]:
    """{column: cells of the release that differ from the original} (columns both have; {}
    when the original is not kept or has other rows), computed once per result.
    """
    _res, orig, masks, _freq = _entry(res)
    data = res.data
    if orig is None or len(orig) != len(data):
        return {}
    for c in data.columns:
        if c in orig.columns and str(c) not in masks:
            masks[str(c)] = changed_mask(orig[c], data[c])
    return masks


def result_frequency_table(res, attr: str) -> pd.DataFrame:
    """:func:`frequency_table` of ``attr`` in the original (aligned) and the release, computed
    once per result and attribute.
    """
    _res, orig, _masks, freq = _entry(res)
    t = freq.get(attr)
    if t is None:
        o = orig[attr] if orig is not None and attr in orig.columns else None
        t = freq[attr] = frequency_table(o, res.data[attr])
    return t


def categorical_columns(res, labelled: set, types: dict) -> list[str]:
    """Columns of the release that hold categories: text in the release or the original, with
    value labels (``labelled``) or typed categorical/ordinal/text in ``types`` (protected ones
    first).
    """
    orig = _aligned(res)
    out = []
    for c in res.data.columns:
        s = res.data[c]
        o = orig[c] if orig is not None and c in orig.columns else None
        text = (
            str(c) in labelled
            or not pd.api.types.is_numeric_dtype(s)
            or (o is not None and not pd.api.types.is_numeric_dtype(o))
            or types.get(str(c)) in ("categorical", "ordinal", "text")
        )
        if text:
            out.append(str(c))
    prot = set(map(str, res.protected_attributes))
    cols = list(res.data.columns)
    return sorted(out, key=lambda c: (c not in prot, cols.index(c)))


def prime(res, *, labelled: set, types: dict, limit: int = 12) -> None:
    """Compute, in the worker that made ``res``, what the view reads from the whole tables
    (the aligned original, the changed cells, the frequency tables of the categorical
    attributes): issue 27.4, 0.3 s of the GUI thread after a Protect of 200,000 records.
    """
    changed_masks(res)
    for attr in categorical_columns(res, labelled, types)[:limit]:
        result_frequency_table(res, attr)


class PairedFrameModel(DataFrameModel):
    """A :class:`DataFrameModel` that shows its rows in a shared order (``order``) and, when
    given the aligned original, marks changed cells (colour + tooltip "was …").
    """

    sig_order_changed = Signal()

    def __init__(self, df: pd.DataFrame | None = None, parent=None) -> None:
        self._order: np.ndarray | None = None
        self._orig: pd.DataFrame | None = None
        self._changed: dict[int, np.ndarray] = {}
        self._orig_cols: dict[int, np.ndarray] = {}
        self.partner: PairedFrameModel | None = None
        super().__init__(df, parent)

    # --- Public API
    def set_frame(self, df: pd.DataFrame | None) -> None:  # noqa: D102 - as the base
        self._order = None
        self._orig, self._changed, self._orig_cols = None, {}, {}
        super().set_frame(df)

    def set_original(self, orig: pd.DataFrame | None, masks: dict[str, np.ndarray] | None = None) -> None:
        """Mark the cells that differ from ``orig`` (same rows in the same order); ``masks``:
        the changed cells of each column, when already computed (:func:`changed_masks`).
        """
        self.beginResetModel()
        self._orig, self._changed, self._orig_cols = orig, {}, {}
        if orig is not None and len(orig) == len(self._df):
            for j, name in enumerate(self._names):
                if name in orig.columns:
                    m = (masks or {}).get(name)
                    self._changed[j] = m if m is not None else changed_mask(orig[name], self._df.iloc[:, j])
                    self._orig_cols[j] = column_values(orig[name])
        self.endResetModel()

    def changed_share(self) -> dict[str, float]:
        """Column -> share of its cells changed (columns compared with the original only)."""
        return {self._names[j]: float(m.mean()) if m.size else 0.0 for j, m in self._changed.items()}

    def is_changed(self, row: int, col: int) -> bool:
        m = self._changed.get(col)
        return bool(m is not None and m[self.source_row(row)])

    def source_row(self, row: int) -> int:
        """The frame row shown at view row ``row``."""
        return int(self._order[row]) if self._order is not None else row

    def set_order(self, order: np.ndarray | None) -> None:
        self.layoutAboutToBeChanged.emit()
        self._order = order
        self.layoutChanged.emit()

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:  # noqa: D102
        if not (0 <= column < len(self._cols)):
            return
        perm = sort_order(self._df.iloc[:, column], order == Qt.SortOrder.DescendingOrder)
        self.set_order(perm)
        if self.partner is not None:
            self.partner.set_order(perm)
        self.sig_order_changed.emit()

    # --- Qt model API
    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.source_row(index.row())
        if r != index.row():
            index = self.index(r, index.column(), QModelIndex())
        if role == Qt.ItemDataRole.BackgroundRole:
            m = self._changed.get(index.column())
            if m is not None and m[r]:
                return CHANGED_BRUSH
        if role == Qt.ItemDataRole.ToolTipRole:
            m = self._changed.get(index.column())
            if m is not None and m[r]:
                was = format_value(self._orig_cols[index.column()][r])
                return f"was {was}" if was != "" else "was missing"
            return None
        return super().data(index, role)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Vertical and role == Qt.ItemDataRole.DisplayRole:
            return str(self.source_row(section) + 1)
        return super().headerData(section, orientation, role)


def sort_order(s: pd.Series, descending: bool = False) -> np.ndarray:
    """A stable permutation sorting ``s`` (numbers as numbers, text as text, missing last)."""
    s = s.reset_index(drop=True)
    if not (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)):
        s = s.astype(str).where(s.notna(), None)
    return s.sort_values(ascending=not descending, kind="stable", na_position="last").index.to_numpy(
        dtype=np.int64
    )


class _NumItem(QTableWidgetItem):
    """A table item that sorts by its number (UserRole) rather than its text."""

    def __lt__(self, other):  # noqa: D105
        a, b = self.data(Qt.ItemDataRole.UserRole), other.data(Qt.ItemDataRole.UserRole)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        return super().__lt__(other)


class ReleaseView(QWidget):
    """The release next to the original (shared row order, changed cells marked) and, for
    categorical attributes, the before/after frequency table.
    """

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.summary = QLabel("No release yet: choose a method and press Protect (Ctrl+R).")
        self.summary.setObjectName("release_summary")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        from dpstudio.app.widgets.common import labels_checkbox

        self.labels_cb = labels_checkbox(state, self)
        lay.addWidget(self.labels_cb)
        self.tabs = QTabWidget()
        lay.addWidget(self.tabs, 1)
        # --- records, side by side
        rec = QWidget()
        rl = QVBoxLayout(rec)
        rl.setContentsMargins(0, 0, 0, 0)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("release_splitter")
        self.release_model = PairedFrameModel()
        self.original_model = PairedFrameModel()
        self.release_model.partner = self.original_model
        self.original_model.partner = self.release_model
        self.release_table = self._make_view(self.release_model, "release_table")
        self.original_table = self._make_view(self.original_model, "original_table")
        for title, view in (
            ("<b>Released</b> (changed cells marked; hover: the original value)", self.release_table),
            ("<b>Original</b> (the same records; private)", self.original_table),
        ):
            w = QWidget()
            wl = QVBoxLayout(w)
            wl.setContentsMargins(0, 0, 0, 0)
            lab = QLabel(title)
            lab.setWordWrap(True)
            wl.addWidget(lab)
            wl.addWidget(view, 1)
            self.splitter.addWidget(w)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 1)
        rl.addWidget(self.splitter, 1)
        # one vertical scroll for both, and the other header's sort indicator follows
        a, b = self.release_table.verticalScrollBar(), self.original_table.verticalScrollBar()
        a.valueChanged.connect(b.setValue)
        b.valueChanged.connect(a.setValue)
        # the two tables have the same columns in the same order: scroll sideways together
        ha, hb = (self.release_table.horizontalScrollBar(), self.original_table.horizontalScrollBar())
        ha.valueChanged.connect(hb.setValue)
        hb.valueChanged.connect(ha.setValue)
        self.release_model.sig_order_changed.connect(
            lambda: self._sync_indicator(self.release_table, self.original_table)
        )
        self.original_model.sig_order_changed.connect(
            lambda: self._sync_indicator(self.original_table, self.release_table)
        )
        self.tabs.addTab(rec, "Records")
        # --- frequencies
        fw = QWidget()
        fl = QVBoxLayout(fw)
        fl.setContentsMargins(0, 0, 0, 0)
        hl = QHBoxLayout()
        hl.addWidget(QLabel("Categorical attribute:"))
        self.freq_attr = QComboBox()
        self.freq_attr.setObjectName("freq_attr")
        self.freq_attr.setToolTip(
            "A categorical attribute of the release: how often each "
            "category occurs before and after protection."
        )
        self.freq_attr.currentTextChanged.connect(self._draw_freq)
        hl.addWidget(self.freq_attr, 1)
        fl.addLayout(hl)
        self.freq_note = QLabel("")
        self.freq_note.setWordWrap(True)
        fl.addWidget(self.freq_note)
        self.freq = QTableWidget(0, 6)
        self.freq.setObjectName("freq_table")
        self.freq.setHorizontalHeaderLabels(
            ["Category", "Original", "Original %", "Released", "Released %", "Δ (pp)"]
        )
        self.freq.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.freq.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.freq.setSortingEnabled(True)
        self.freq.verticalHeader().setVisible(False)
        fl.addWidget(self.freq, 1)
        self.tabs.addTab(fw, "Category frequencies")
        self._resize_pending = False
        # a new result is shown in a turn of the event loop of its own, apart from the other
        # views' work on the same signal (issue 27.4: one long stall became short slices;
        # dpstudio.app.turns)
        self._refresh_due = False
        state.sig_result_changed.connect(self._schedule_refresh)
        state.sig_labels_changed.connect(self._on_labels_toggled)
        self.refresh()

    # --- Public API
    def categorical_attributes(self) -> list[str]:
        """Columns of the release that hold categories: text in the release or the original,
        or typed 'text' by the user (protected ones first).
        """
        self._refresh_if_due()
        res = self.state.result
        if res is None:
            return []
        labelled = set(getattr(self.state.input_meta, "value_labels", None) or {})  # coded categories
        return categorical_columns(res, labelled, dict(self.state.types))

    def _schedule_refresh(self) -> None:
        self._refresh_due = True
        turns.later(self._refresh_if_due, owner=self, key="refresh")

    def _refresh_if_due(self) -> None:
        if self._refresh_due:
            self.refresh()

    def refresh(self) -> None:
        self._refresh_due = False
        res = self.state.result
        self.release_table.horizontalHeader().setSortIndicatorShown(False)
        self.original_table.horizontalHeader().setSortIndicatorShown(False)
        if res is None:
            self.release_model.set_frame(None)
            self.original_model.set_frame(None)
            self.freq_attr.clear()
            self.freq.setRowCount(0)
            self.summary.setText(
                "No release yet (or the settings changed since the last run): press Protect (Ctrl+R)."
            )
            return
        data = res.data
        orig = _aligned(res)
        for m in (self.release_model, self.original_model):
            m.set_value_labels(self.state.value_labels())
        self.release_model.set_frame(data)
        self.release_model.set_roles(dict(res.roles))
        if orig is not None and len(orig) == len(data):
            cols = [c for c in data.columns if c in orig.columns]
            self.original_model.set_frame(orig[cols])
            self.original_model.set_roles(dict(res.roles))
            self.release_model.set_original(orig, changed_masks(res))
            share = self.release_model.changed_share()
            changed = [f"{c} {100 * s:.3g} %" for c, s in share.items() if s > 0]
            same = [c for c, s in share.items() if s == 0]
            self.summary.setText(
                f"<b>{len(data):,} records released</b> by {getattr(res, 'method_name', '')}. Cells changed: "
                + (", ".join(changed) if changed else "none")
                + (f"; unchanged columns: {', '.join(same)}" if same else "")
                + ". Sorting either table sorts both; the row number is the record's."
            )
        else:
            self.original_model.set_frame(None)
            why = (
                "the original is not kept with this result"
                if orig is None
                else "the release does not keep one record per original record"
            )
            self.summary.setText(
                f"<b>{len(data):,} records released</b> by "
                f"{getattr(res, 'method_name', '')}. No side-by-side comparison: {why}."
            )
        cats = self.categorical_attributes()
        cur = self.freq_attr.currentText()
        self.freq_attr.blockSignals(True)
        self.freq_attr.clear()
        self.freq_attr.addItems(cats)
        if cur in cats:
            self.freq_attr.setCurrentText(cur)
        self.freq_attr.blockSignals(False)
        self._draw_freq(self.freq_attr.currentText())
        self._resize_pending = True
        if self.isVisible():
            self._resize_columns()

    def showEvent(self, ev) -> None:  # noqa: N802 - Qt API
        super().showEvent(ev)
        if self._resize_pending:
            self._resize_columns()

    def _resize_columns(self) -> None:
        """Fit the columns to their contents (on the first rows only; done when the view is
        shown: a hidden view's sizing was 0.2 s of the GUI thread after every Protect).
        """
        self._resize_pending = False
        for v in (self.release_table, self.original_table):
            v.resizeColumnsToContents()

    def _on_labels_toggled(self, _on: bool) -> None:
        for m in (self.release_model, self.original_model):
            m.set_value_labels(self.state.value_labels())
        self._draw_freq(self.freq_attr.currentText())

    def select_frequency_attribute(self, name: str) -> None:
        self._refresh_if_due()
        self.freq_attr.setCurrentText(name)

    def frequency_rows(self) -> list[tuple]:
        """The rows of the frequency table as shown (category, original, released …)."""
        self._refresh_if_due()
        out = []
        for i in range(self.freq.rowCount()):
            out.append(tuple(self.freq.item(i, j).text() for j in range(self.freq.columnCount())))
        return out

    # --- Private
    @staticmethod
    def _make_view(model, name: str) -> QTableView:
        v = QTableView()
        v.setObjectName(name)
        v.setModel(model)
        v.setSortingEnabled(True)
        v.horizontalHeader().setSortIndicatorShown(False)
        v.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        v.setAlternatingRowColors(False)
        vh = v.verticalHeader()
        vh.setDefaultSectionSize(22)
        # rows of one height: a new release of 200,000 rows is not measured row by row
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        # column widths from the first rows, not from 1,000 (each a round of Python calls)
        v.horizontalHeader().setResizeContentsPrecision(RESIZE_ROWS)
        return v

    def _sync_indicator(self, src: QTableView, dst: QTableView) -> None:
        sh = src.horizontalHeader()
        sh.setSortIndicatorShown(True)
        name = src.model().headerData(
            sh.sortIndicatorSection(), Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole
        )
        dh = dst.horizontalHeader()
        dm = dst.model()
        # the same column on the other side, if it has it
        col = next(
            (
                j
                for j in range(dm.columnCount())
                if dm.headerData(j, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) == name
            ),
            -1,
        )
        dh.blockSignals(True)
        dh.setSortIndicatorShown(col >= 0)
        if col >= 0:
            dh.setSortIndicator(col, sh.sortIndicatorOrder())
        dh.blockSignals(False)

    def _draw_freq(self, attr: str) -> None:
        self.freq.setSortingEnabled(False)
        self.freq.setRowCount(0)
        res = self.state.result
        if res is None or not attr or attr not in res.data.columns:
            self.freq_note.setText("No categorical attribute in this release." if res is not None else "")
            self.freq.setSortingEnabled(True)
            return
        orig_full = _aligned(res)
        orig = orig_full[attr] if orig_full is not None and attr in orig_full.columns else None
        t = result_frequency_table(res, attr)
        self.freq.setRowCount(len(t))
        from dpstudio.app.models.roles_model import label_of

        labels = self.state.value_labels().get(attr) or {}
        for i, (cat, row) in enumerate(t.iterrows()):
            lab = label_of(labels, _as_number(cat)) if labels else None
            self.freq.setItem(i, 0, QTableWidgetItem(f"{cat}  {lab}" if lab else str(cat)))
            for j, (col, kind) in enumerate(
                (
                    ("original", "i"),
                    ("original %", "f"),
                    ("released", "i"),
                    ("released %", "f"),
                    ("Δ pp", "f"),
                ),
                start=1,
            ):
                v = row[col]
                it = _NumItem(f"{v:,.0f}" if kind == "i" else f"{v:+.2f}" if col == "Δ pp" else f"{v:.2f}")
                it.setData(Qt.ItemDataRole.UserRole, float(v))
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == "Δ pp" and abs(v) >= 0.005:
                    a = min(abs(v) / 10.0, 1.0)
                    c = (
                        QColor(255, int(255 - 90 * a), int(255 - 90 * a))
                        if v < 0
                        else QColor(int(255 - 90 * a), int(255 - 90 * a), 255)
                    )
                    it.setBackground(QBrush(c))
                self.freq.setItem(i, j, it)
        self.freq.setSortingEnabled(True)
        # most frequent first (original counts), whatever column was sorted before
        self.freq.sortByColumn(1 if orig is not None else 3, Qt.SortOrder.DescendingOrder)
        new = [str(c) for c in t.index if t.at[c, "original"] == 0] if orig is not None else []
        gone = [str(c) for c in t.index if t.at[c, "released"] == 0]
        bits = [
            f"{len(t)} categor{'y' if len(t) == 1 else 'ies'} shown"
            + (f" (the {FREQ_TOP} most frequent)" if len(t) >= FREQ_TOP else "")
        ]
        if orig is None:
            bits.append("the original is not available: released counts only")
        if new:
            bits.append(
                "only in the release: "
                + ", ".join(new[:8])
                + (f" and {len(new) - 8} more" if len(new) > 8 else "")
            )
        if gone:
            bits.append(
                "no longer in the release: "
                + ", ".join(gone[:8])
                + (f" and {len(gone) - 8} more" if len(gone) > 8 else "")
            )
        self.freq_note.setText("; ".join(bits) + ". Δ: released % − original % (percentage points).")
        self.freq.resizeColumnsToContents()


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    from dpstudio import engine
    from dpstudio.app.resources import adult_sample_path

    app = QApplication(sys.argv)
    st = AppState()
    df = pd.read_csv(adult_sample_path()).head(2000)
    st.set_data(df, None)
    st.set_roles({"age": "k-quasi", "sex": "k-quasi", "race": "k-quasi"})
    res = engine.protect(df, "mdav", {"age": "k-quasi"}, params={"k": 5}, seed=1)
    st.set_result(res, {}, {})
    w = ReleaseView(st)
    w.resize(1200, 650)
    w.show()
    app.exec()
