"""Confirm how a CSV file is read: delimiter, encoding, decimal mark, with a live preview."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import io_adapter
from dpstudio.app.models import DataFrameModel

SEPARATORS = [(",", "Comma  ,"), (";", "Semicolon  ;"), ("\t", "Tab"), ("|", "Pipe  |"), (" ", "Space")]
ENCODINGS = ["utf-8", "utf-8-sig", "cp1252", "latin-1", "utf-16"]
DECIMALS = [(".", "Point  1.5"), (",", "Comma  1,5")]


class CsvPreviewDialog(QDialog):
    """Shows the first rows as they will be read; returns the chosen options."""

    def __init__(self, path: str, sniffed: dict | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Open CSV — {path}")
        self.resize(820, 520)
        self.path = path
        sn = dict(sniffed or io_adapter.sniff_csv(path))
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.sep = QComboBox()
        for v, label in SEPARATORS:
            self.sep.addItem(label, v)
        self._select(self.sep, sn.get("sep", ","))
        self.sep.setToolTip("Character between fields (detected from the file).")
        self.enc = QComboBox()
        self.enc.setEditable(True)
        self.enc.addItems(ENCODINGS)
        self.enc.setCurrentText(str(sn.get("encoding") or "utf-8"))
        self.enc.setToolTip("Text encoding of the file (detected). Wrong accents? Try cp1252.")
        self.dec = QComboBox()
        for v, label in DECIMALS:
            self.dec.addItem(label, v)
        self._select(self.dec, sn.get("decimal", "."))
        self.dec.setToolTip("Decimal mark of numbers (detected).")
        form.addRow("&Delimiter:", self.sep)
        form.addRow("&Encoding:", self.enc)
        form.addRow("Decimal &mark:", self.dec)
        lay.addLayout(form)
        self.status = QLabel()
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.model = DataFrameModel()
        self.view = QTableView()
        self.view.setModel(self.model)
        lay.addWidget(self.view, 1)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        self.buttons = bb
        lay.addWidget(bb)
        for w in (self.sep, self.dec):
            w.currentIndexChanged.connect(self.refresh)
        self.enc.currentTextChanged.connect(self.refresh)
        self.refresh()

    @staticmethod
    def _select(combo: QComboBox, value) -> None:
        i = combo.findData(value)
        if i < 0:
            combo.addItem(repr(value), value)
            i = combo.count() - 1
        combo.setCurrentIndex(i)

    def options(self) -> dict:
        return {
            "sep": self.sep.currentData(),
            "encoding": self.enc.currentText().strip(),
            "decimal": self.dec.currentData(),
        }

    def refresh(self) -> None:
        o = self.options()
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        try:
            df = io_adapter.preview_frame(self.path, o["sep"], o["encoding"], o["decimal"])
        except Exception as exc:  # noqa: BLE001 - shown in the dialog
            self.model.set_frame(None)
            self.status.setText(
                f"<span style='color:#a00'>Cannot read with these settings: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                "</span>"
            )
            ok.setEnabled(False)
            return
        self.model.set_frame(df)
        ncols = df.shape[1]
        hint = ""
        if ncols == 1:
            hint = " Only one column: is the delimiter right?"
        self.status.setText(f"First {len(df)} rows, {ncols} columns.{hint}")
        ok.setEnabled(ncols > 0)


if __name__ == "__main__":  # preview
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    from dpstudio.app.resources import sample_path

    d = CsvPreviewDialog(str(sys.argv[1] if len(sys.argv) > 1 else sample_path()))
    d.show()
    app.exec()
