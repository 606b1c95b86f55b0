"""Step 6: export the protected file, its public metadata and (optionally) the HTML report."""

from __future__ import annotations

import html
import sys
from pathlib import Path

from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QVBoxLayout, QWidget)

from dpstudio.app import io_adapter
from dpstudio.app.widgets.common import Banner


class ExportDialog(QDialog):
    def __init__(self, result, input_path: str | None, parent: QWidget | None = None,
                 roles: dict | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export protected file")
        self.resize(640, 360)
        self.result = result
        self.input_path = input_path
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.fmt = QComboBox()
        for fid, (label, exts) in io_adapter.FORMATS.items():
            self.fmt.addItem(f"{label} ({exts[0]})", fid)
        in_fmt = io_adapter.export_format_for(input_path)
        self.fmt.setCurrentIndex(max(self.fmt.findData(in_fmt), 0))
        self.fmt.setToolTip("File format of the release (default: the input's format).")
        self.fmt.currentIndexChanged.connect(self._on_format_changed)
        form.addRow("&Format:", self.fmt)
        row = QHBoxLayout()
        self.path = QLineEdit()
        self.path.setObjectName("export_path")
        self.path.setToolTip("Where the protected file is written (never over the input).")
        self.path.textChanged.connect(self._validate)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        form.addRow("File:", row)
        self.report = QCheckBox("Also write an HTML report (parameters, guarantee, curves with "
                                "the chosen point, measures, roles and domains)")
        self.report.setToolTip("<stem>.report.html next to the file; prints cleanly to PDF.")
        self.report.setChecked(True)
        form.addRow("", self.report)
        lay.addLayout(form)
        ident = [c for c, r in (roles or result.roles).items() if r == "identifier"]
        kept = list(result.data.columns)
        self.summary = QLabel(
            f"{len(result.data):,} records, {len(kept)} columns will be written"
            + (f"; identifier column(s) <b>{html.escape(', '.join(ident))}</b> are dropped"
               if ident else "")
            + ".<br>Next to it: <i>&lt;name&gt;.metadata.json</i> with the method, parameters, "
              "guarantee, software version and checksums. The seed is never written to the "
              "release or its metadata.")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        self.banner = Banner(self, closable=False)
        lay.addWidget(self.banner)
        lay.addStretch(1)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                              | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self._on_accept)
        bb.rejected.connect(self.reject)
        self.buttons = bb
        lay.addWidget(bb)
        if input_path:
            p = Path(input_path)
            from dpstudio.app.main_window import resources_dir

            if p.parent.resolve() == resources_dir().resolve():  # the bundled sample
                p = Path.home() / p.name
            self.path.setText(str(p.with_name(p.stem + "_protected" + self._ext())))
        self._validate()

    def _ext(self) -> str:
        return io_adapter.FORMATS[self.fmt.currentData()][1][0]

    def _on_format_changed(self) -> None:
        t = self.path.text().strip()
        if t:
            self.path.setText(str(Path(t).with_suffix(self._ext())))

    def _browse(self) -> None:
        fid = self.fmt.currentData()
        label, exts = io_adapter.FORMATS[fid]
        path, _ = QFileDialog.getSaveFileName(self, "Export protected file", self.path.text(),
                                              f"{label} ({' '.join('*' + e for e in exts)})")
        if path:
            if not Path(path).suffix:
                path += self._ext()
            self.path.setText(path)

    def _validate(self) -> bool:
        t = self.path.text().strip()
        err = ""
        if not t:
            err = "Choose where to write the protected file."
        elif self.input_path and (Path(t).resolve() == Path(self.input_path).resolve()
                                  or io_adapter.same_file(t, self.input_path)):
            err = "This is the input file: the release is never written over the original."
        elif not Path(t).parent.exists():
            err = f"Folder {Path(t).parent} does not exist."
        self.banner.show_message(err, "error")
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not err)
        return not err

    def _on_accept(self) -> None:
        if self._validate():
            self.accept()

    def options(self) -> dict:
        return {"path": self.path.text().strip(), "fmt": self.fmt.currentData(),
                "report": self.report.isChecked()}


if __name__ == "__main__":  # pragma: no cover - manual preview
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    print("run the app: python -m dpstudio")
