"""Step 6: export the release.

Two clearly separated groups: **Public — publish these** (the protected file, its metadata,
the release note) and **Private — keep internal** (the audit trail and the assessment report,
written owner-only 0600 with "private" in their names).
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from dpstudio.app import io_adapter
from dpstudio.app.controller import missing_folder_message
from dpstudio.app.widgets.common import Banner


class ExportDialog(QDialog):
    def __init__(
        self,
        result,
        input_path: str | None,
        parent: QWidget | None = None,
        roles: dict | None = None,
        sample_folder: str | None = None,
        export_folder: str | None = None,
        extra_inputs: list[str] | tuple = (),
    ) -> None:
        """``sample_folder``: the folder of the bundled samples (a release of a sample is
        proposed in the home folder instead).  ``export_folder``: where the last release was
        exported; the release is proposed there, else in the home folder -- never by default
        next to the input, which usually sits with other unprotected microdata (issue 11 #10).
        """
        super().__init__(parent)
        self.setWindowTitle("Export protected file")
        self.resize(720, 460)
        self.result = result
        self.input_path = input_path
        self.extra_inputs = tuple(extra_inputs)  # other files the project reads (hierarchies)
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
        lay.addLayout(form)
        ident = [c for c, r in (roles or result.roles).items() if r == "identifier"]
        kept = list(result.data.columns)

        pub = QGroupBox("Public — publish these")
        pub.setObjectName("public_group")
        pub.setStyleSheet("QGroupBox::title { color: #1f5fa8; font-weight: bold; }")
        pl = QVBoxLayout(pub)
        self.summary = QLabel(
            f"<b>The protected file</b>: {len(result.data):,} records, {len(kept)} columns"
            + (f"; identifier column(s) <b>{html.escape(', '.join(ident))}</b> are dropped" if ident else "")
            + ".<br><b>&lt;name&gt;.metadata.json</b>: method, parameters, "
            "guarantee, software version and the digest of the released file — nothing "
            "computed from the original data, never the seed."
        )
        self.summary.setWordWrap(True)
        pl.addWidget(self.summary)
        self.release_note = QCheckBox(
            "Release note <name>.release-note.html: method, parameters, "
            "guarantee, what it does not cover, schema, statistics of "
            "the release only"
        )
        self.release_note.setObjectName("release_note")
        self.release_note.setToolTip(
            "Public. Built from the parameters and the released file only; prints cleanly to PDF."
        )
        self.release_note.setChecked(True)
        pl.addWidget(self.release_note)
        lay.addWidget(pub)

        priv = QGroupBox("Private — keep internal (owner-only files, never publish)")
        priv.setObjectName("private_group")
        priv.setStyleSheet("QGroupBox::title { color: #b00020; font-weight: bold; }")
        vl = QVBoxLayout(priv)
        self.audit = QCheckBox(
            "Audit trail <name>.private.json: input file name and SHA-256, "
            "records in the input and dropped, notes about the data"
        )
        self.audit.setObjectName("audit")
        self.audit.setToolTip("Private (0600): facts about the original data. Keep it with the project file.")
        self.audit.setChecked(True)
        vl.addWidget(self.audit)
        self.assessment = QCheckBox(
            "Assessment report <name>.assessment.private.html: measures "
            "against the original (SSE, record linkage, Δ mean), "
            "histograms, curves with the chosen point"
        )
        self.assessment.setObjectName("assessment")
        self.assessment.setToolTip(
            "Private (0600), marked 'INTERNAL — do not publish' on every "
            "page: with the release, its figures reveal records."
        )
        self.assessment.setChecked(True)
        vl.addWidget(self.assessment)
        for box in (self.release_note, self.audit, self.assessment):  # they change the files written
            box.toggled.connect(self._validate)
        lay.addWidget(priv)
        self.banner = Banner(self, closable=False)
        lay.addWidget(self.banner)
        lay.addStretch(1)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self._on_accept)
        bb.rejected.connect(self.reject)
        self.buttons = bb
        lay.addWidget(bb)
        if input_path:
            p = Path(input_path)
            folder = Path(export_folder) if export_folder and Path(export_folder).is_dir() else Path.home()
            self.path.setText(str(folder / (p.stem + "_protected" + self._ext())))
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
        path, _ = QFileDialog.getSaveFileName(
            self, "Export protected file", self.path.text(), f"{label} ({' '.join('*' + e for e in exts)})"
        )
        if path:
            if not Path(path).suffix:
                path += self._ext()
            self.path.setText(path)

    def _validate(self) -> bool:
        t = self.path.text().strip()
        err = ""
        if not t:
            err = "Choose where to write the protected file."
        elif missing := missing_folder_message(t):
            err = missing
        elif refusal := self._refusal(t):
            err = refusal
        self.banner.show_message(err, "error")
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not err)
        return not err

    def _refusal(self, t: str) -> str:
        """The one guarded writer's one-line refusal of any file this export would write (over
        an input, a FIFO/device/folder/link, a read-only file, ...), else "".
        """
        return io_adapter.release_refusal(
            t,
            inputs=[p for p in (self.input_path, *self.extra_inputs) if p],
            fmt=self.fmt.currentData(),
            release_note=self.release_note.isChecked(),
            assessment=self.assessment.isChecked(),
            audit=self.audit.isChecked(),
        )

    def _on_accept(self) -> None:
        if self._validate():
            self.accept()

    def options(self) -> dict:
        return {
            "path": self.path.text().strip(),
            "fmt": self.fmt.currentData(),
            "release_note": self.release_note.isChecked(),
            "assessment": self.assessment.isChecked(),
            "audit": self.audit.isChecked(),
        }


if __name__ == "__main__":  # pragma: no cover - manual preview
    import pandas as pd
    from PySide6.QtWidgets import QApplication

    from dpstudio import engine
    from dpstudio.app.resources import resources_dir, sample_path

    app = QApplication(sys.argv)
    df = pd.read_csv(sample_path())
    res = engine.protect(df, "mdav", {"FICA": "k-quasi", "FEDTAX": "k-quasi", "AFNLWGT": "identifier"}, k=5)
    w = ExportDialog(res, str(sample_path()), sample_folder=str(resources_dir()))
    w.show()
    app.exec()
