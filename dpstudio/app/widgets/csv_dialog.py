"""Confirm how a CSV file is read: delimiter, encoding, decimal mark, with a live preview."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QMessageBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import io_adapter
from dpstudio.app.models import DataFrameModel
from dpstudio.app.workers import TaskRunner

#: the preview shows at most this many columns (a wide file's preview stays quick to show)
PREVIEW_COLUMNS = 200


def ask_implausible_shape(path: str, shape: dict, parent: QWidget | None = None) -> str | None:
    """Ask before building an implausibly wide table: 'open' (with that separator), 'choose'
    (another separator, in the preview dialog) or None (cancel: keep the current data).
    """
    from pathlib import Path

    sep = shape["sep"]
    shown = {"\t": "tab", " ": "space"}.get(sep, repr(sep))
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Implausible number of columns")
    box.setText(
        f"{Path(path).name} would have {int(shape['n_columns']):,} columns with separator {shown} "
        f"(encoding {shape.get('encoding')}). Is that right?"
    )
    box.setInformativeText(
        "A wrong separator or encoding often splits every line into thousands of fields. "
        "Choose another separator to see a preview first."
    )
    choose = box.addButton("&Choose another separator…", QMessageBox.ButtonRole.AcceptRole)
    anyway = box.addButton("&Open anyway", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(choose)
    box.exec()
    clicked = box.clickedButton()
    if clicked is choose:
        return "choose"
    if clicked is anyway:
        return "open"
    return None


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
        # the preview is read in a worker (a wide or odd file never freezes the dialog);
        # without a sniffed dict the options start from the defaults
        self.runner = TaskRunner("csv-preview", self)
        sn = dict(sniffed or {})
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
        pre = sn.get("preview")
        if pre is not None and {"sep", "encoding", "decimal"} <= sn.keys():
            self._show(pre)  # sniffed with these very options: no second read
        else:
            self.refresh()
        self.finished.connect(lambda _r: self.runner.cancel())

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
        """Read the preview with the chosen options in a worker (the last request wins)."""
        o = self.options()
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        ok.setEnabled(False)
        self.status.setText("Reading the first rows…")
        path = self.path

        def work(progress, check_cancel):
            return io_adapter.preview_frame(path, o["sep"], o["encoding"], o["decimal"])

        self.runner.start(work, finished=self._show, errored=self._failed)

    def _failed(self, msg: str, _details: str) -> None:
        self.model.set_frame(None)
        self.status.setText(
            "<span style='color:#a00'>Cannot read with these settings: "
            f"{msg.splitlines()[0] if msg else 'unknown error'}</span>"
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Open).setEnabled(False)

    def _show(self, df) -> None:
        ncols = df.shape[1]
        self.model.set_frame(df.iloc[:, :PREVIEW_COLUMNS] if ncols > PREVIEW_COLUMNS else df)
        hint = ""
        if ncols == 1:
            hint = " Only one column: is the delimiter right?"
        elif ncols > io_adapter.engine_io.MAX_SNIFFED_COLUMNS:
            hint = (
                f" <span style='color:#a00'>{ncols:,} columns is implausible: is the delimiter "
                "(or the encoding) right?</span>"
            )
        if ncols > PREVIEW_COLUMNS:
            hint += f" (first {PREVIEW_COLUMNS} columns shown)"
        self.status.setText(f"First {len(df)} rows, {ncols:,} columns.{hint}")
        self.buttons.button(QDialogButtonBox.StandardButton.Open).setEnabled(ncols > 0)


if __name__ == "__main__":  # preview
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    from dpstudio.app.resources import sample_path

    d = CsvPreviewDialog(str(sys.argv[1] if len(sys.argv) > 1 else sample_path()))
    d.show()
    app.exec()
