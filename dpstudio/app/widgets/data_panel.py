"""Step 1: the loaded table (a model over the DataFrame) and how to open another."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView, QVBoxLayout, QWidget

from dpstudio.app import turns
from dpstudio.app.models import DataFrameModel
from dpstudio.app.state import AppState


class DataPanel(QWidget):
    sig_open_requested = Signal()
    """The user asked to open a file."""
    sig_sample_requested = Signal()
    """The user asked for the bundled sample."""

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.info = QLabel("No data loaded. Open a file (Ctrl+O), drop one here, or open the sample.")
        self.info.setWordWrap(True)
        top.addWidget(self.info, 1)
        from dpstudio.app.widgets.common import labels_checkbox

        self.labels_cb = labels_checkbox(state, self)
        top.addWidget(self.labels_cb)
        self.open_btn = QPushButton("&Open file…")
        self.open_btn.setToolTip(
            "Open CSV, Excel, Parquet, Stata or SPSS data (Ctrl+O). You can also drag a file onto the window."
        )
        self.open_btn.clicked.connect(self.sig_open_requested)
        self.sample_btn = QPushButton("Open &sample")
        self.sample_btn.setToolTip(
            "Open the bundled CASC Census sample (1,080 records, 13 numeric attributes)."
        )
        self.sample_btn.clicked.connect(self.sig_sample_requested)
        top.addWidget(self.open_btn)
        top.addWidget(self.sample_btn)
        lay.addLayout(top)
        from dpstudio.app.large_file import add_sample_label

        self.sample_label = add_sample_label(state, lay, "data")  # issue 12: a large file's sample
        self.model = DataFrameModel()
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setAlternatingRowColors(True)
        vh = self.view.verticalHeader()
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(22)
        self.view.horizontalHeader().setDefaultSectionSize(110)
        lay.addWidget(self.view, 1)
        state.sig_data_changed.connect(self._on_state_data_changed)
        state.sig_roles_changed.connect(self._on_state_roles_changed)
        state.sig_types_changed.connect(lambda _c: self.model.set_frame(state.df))
        state.sig_labels_changed.connect(self._on_labels_toggled)

    def _on_labels_toggled(self, _on: bool) -> None:
        self.model.set_value_labels(self.state.value_labels())
        self._fit_labelled_columns()

    def _fit_labelled_columns(self) -> None:
        """Labelled columns as wide as their labels on the first rows (at most 240 px): the
        fixed width cut 'Densely populated' to 'Densely …' (issue 24 §3).
        """
        st = self.state
        if st.df is None:
            return
        hh = self.view.horizontalHeader()
        hh.setResizeContentsPrecision(60)
        for j, c in enumerate(st.df.columns):
            if str(c) in st.value_labels():
                self.view.resizeColumnToContents(j)
                hh.resizeSection(j, min(max(hh.sectionSize(j), 80), 240))
            elif hh.sectionSize(j) != hh.defaultSectionSize():
                hh.resizeSection(j, hh.defaultSectionSize())

    def _on_state_data_changed(self) -> None:
        st = self.state
        # the new table's first paint in a turn of its own, not in the turn that installs the
        # file (with every panel's handler it was one stall, issue 24 §5); it shows the old
        # picture until then.  Nothing when hidden.
        turns.paint_later(self.view, owner=self, key="paint")
        self.model.set_value_labels(st.value_labels())
        self.model.set_frame(st.df)
        self._fit_labelled_columns()
        if st.df is None:
            self.info.setText("No data loaded.")
            return
        n_missing = sum(s.missing for s in st.stats.values())
        miss = f", {n_missing:,} missing cells (shaded)" if n_missing else ""
        self._head = (
            f"<b>{Path(st.path).name if st.path else 'data'}</b> — "
            f"{len(st.df):,} records × {st.df.shape[1]} columns{miss}"
            f"<br><span style='color:#666'>{st.path or ''}</span>"
        )
        self._show_next()

    def _show_next(self) -> None:
        """The next step: roles while none is set (a project brings its own, issue 11)."""
        n = len(self.state.active_roles())
        nxt = (
            f"{n} attribute(s) have a role; next: choose the method in <b>3 · Method</b> (Ctrl+3)."
            if n
            else "Next: give the attributes their roles in <b>2 · Attributes</b> (Ctrl+2)."
        )
        self.info.setText(self._head + f"<br><span style='color:#0b4f8a'>{nxt}</span>")

    def _on_state_roles_changed(self) -> None:
        self.model.set_roles(self.state.roles)
        if self.state.df is not None and getattr(self, "_head", ""):
            self._show_next()


if __name__ == "__main__":
    import pandas as pd
    from PySide6.QtWidgets import QApplication

    from dpstudio.app.resources import sample_path

    app = QApplication(sys.argv)
    st = AppState()
    w = DataPanel(st)
    st.set_data(pd.read_csv(sample_path()), str(sample_path()))
    w.resize(900, 600)
    w.show()
    app.exec()
