"""Small shared widgets: error dialog, banners, a log-scale slider."""

from __future__ import annotations

import math
import sys

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMessageBox, QSlider, QToolButton, QWidget

BANNER_STYLES = {
    "info": "background:#e8f1fb; border:1px solid #9cc3ea; color:#123;",
    "warning": "background:#fff4d6; border:1px solid #e0b84c; color:#4a3800;",
    "error": "background:#fde2e1; border:1px solid #e08a85; color:#5c0b06;",
    "ok": "background:#e4f5e6; border:1px solid #8cc995; color:#0c3d14;",
}


def show_error(
    parent: QWidget | None, message: str, details: str = "", title: str = "dpstudio"
) -> QMessageBox:
    """A readable message with the details (traceback) on demand; non-blocking."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setText(message)
    if details:
        box.setDetailedText(details)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setWindowModality(Qt.WindowModality.WindowModal)
    box.open()
    return box


class WrapLabel(QLabel):
    """A word-wrapped label whose size hints cost one layout of its text, not four.

    QLabel's own hints of a word-wrapped (rich) text lay it out at width 0 (every word on a
    line of its own: the minimum width), on one line (the minimum height) and at a trial width
    (the preferred size), again after every ``setText``: for the Results tab's guarantee,
    generalisation table and warnings that was most of the ~140 ms of the tab's first show
    after a Protect (issue 24 §5).  Here the minimum is a dozen characters by one line (the
    text wraps to the width it is given: its layout asks ``heightForWidth``) and the
    preferred size the text's height at :attr:`HINT_WIDTH`.
    """

    HINT_WIDTH = 480

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)
        self._hfw: dict[int, int] = {}  # width -> height of the current text (and font)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        if text != self.text():
            self._hfw.clear()
        super().setText(text)

    def clear(self) -> None:  # noqa: D102 - QLabel's
        self._hfw.clear()
        super().clear()

    def setTextFormat(self, fmt) -> None:  # noqa: N802 - Qt API
        self._hfw.clear()
        super().setTextFormat(fmt)

    def changeEvent(self, ev) -> None:  # noqa: N802 - Qt API
        self._hfw.clear()  # a font, style or margin change lays the text out anew
        super().changeEvent(ev)

    def heightForWidth(self, w: int) -> int:  # noqa: N802 - Qt API
        h = self._hfw.get(w)
        if h is None:
            if len(self._hfw) > 16:
                self._hfw.clear()
            h = self._hfw[w] = super().heightForWidth(w)
        return h

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        m = self.contentsMargins()
        return QSize(12 * fm.averageCharWidth() + m.left() + m.right(), fm.height() + m.top() + m.bottom())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(self.HINT_WIDTH, self.heightForWidth(self.HINT_WIDTH))


class Banner(QWidget):
    """A coloured, word-wrapped message line that can be hidden."""

    def __init__(self, parent: QWidget | None = None, closable: bool = True) -> None:
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.label = WrapLabel()
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setContentsMargins(6, 4, 6, 4)
        lay.addWidget(self.label, 1)
        if closable:
            b = QToolButton()
            b.setText("✕")
            b.setAutoRaise(True)
            b.setToolTip("Hide this message")
            b.clicked.connect(self.hide)
            lay.addWidget(b, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str, kind: str = "info") -> None:
        if not text:
            self.hide()
            return
        self.label.setText(text)
        self.label.setStyleSheet(BANNER_STYLES.get(kind, BANNER_STYLES["info"]) + "border-radius:3px;")
        self.show()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    def set_veiled(self, veiled: bool) -> None:
        """Hide (True) or show the message's label and button without hiding the banner
        itself (its text and shown state stay as set): a view lays the message out in a
        later turn of the event loop (issue 24 §5).
        """
        for w in self.findChildren(QWidget):
            if w.parent() is self:
                w.setVisible(not veiled)


def labels_checkbox(state, parent: QWidget | None = None):
    """A "Value labels" check box bound to ``state.show_labels`` (every view has one, as SPSS's
    View → Value Labels; shown only when the file has labels; issue 24 §3).
    """
    from PySide6.QtWidgets import QCheckBox

    cb = QCheckBox("Value labels", parent)
    cb.setObjectName("labels_checkbox")
    cb.setToolTip("Show the value labels of the file (e.g. 'Strong Democrat') instead of the codes (Ctrl+L).")
    cb.setChecked(state.show_labels)
    cb.toggled.connect(state.set_show_labels)

    def sync(on: bool) -> None:
        cb.blockSignals(True)
        cb.setChecked(on)
        cb.blockSignals(False)

    state.sig_labels_changed.connect(sync)
    state.sig_data_changed.connect(lambda: cb.setVisible(state.has_value_labels()))
    cb.setVisible(state.has_value_labels())
    return cb


class LogSlider(QSlider):
    """A horizontal slider over [lo, hi] on a log10 scale; emits the float value."""

    valueChangedFloat = Signal(float)

    def __init__(
        self, lo: float = 1e-3, hi: float = 100.0, steps: int = 500, parent: QWidget | None = None
    ) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self._lo, self._hi = math.log10(lo), math.log10(hi)
        self.setRange(0, steps)
        self.valueChanged.connect(self._emit)

    def _emit(self, pos: int) -> None:
        self.valueChangedFloat.emit(self.float_value())

    def float_value(self) -> float:
        t = self.value() / max(self.maximum(), 1)
        return float(10 ** (self._lo + t * (self._hi - self._lo)))

    def set_float_value(self, v: float) -> None:
        if v <= 0:
            return
        t = (math.log10(v) - self._lo) / (self._hi - self._lo)
        pos = int(round(min(max(t, 0.0), 1.0) * self.maximum()))
        self.blockSignals(True)
        self.setValue(pos)
        self.blockSignals(False)


if __name__ == "__main__":  # preview: a banner and a log slider
    from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

    app = QApplication(sys.argv)
    w = QWidget()
    lay = QVBoxLayout(w)
    b = Banner(w)
    b.show_message("Bounds suggested from the data leak information about individuals.", "warning")
    lay.addWidget(b)
    lay.addWidget(LogSlider(1e-3, 100.0))
    w.resize(500, 120)
    w.show()
    app.exec()


def filter_example(df) -> str:
    """A query-filter example on the loaded table's own columns ("e.g. income > 21000 and
    region == 'north' (optional)"): a numeric column compared with a round number near its
    median, and a text column (or a second numeric one) compared with one of its values.
    """
    import re

    import numpy as np
    import pandas as pd

    default = "e.g. a filter such as column > 100 and other == 'text' (optional)"
    if df is None or df.shape[1] == 0:
        return default

    def name(c) -> str:
        c = str(c)
        return c if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", c) else f"`{c}`"

    parts: list[str] = []
    for c in df.columns:
        s = df[c]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            v = s.to_numpy(dtype=float, na_value=np.nan)
            v = v[np.isfinite(v)]
            if v.size and np.ptp(v) > 0:
                med = float(np.median(v))
                digits = 2 - int(math.floor(math.log10(abs(med)))) - 1 if med else 0
                r = round(med, digits)
                lit = f"{int(r)}" if float(r).is_integer() else f"{r:g}"
                parts.append(f"{name(c)} {'>' if not parts else '<='} {lit}")
        elif not pd.api.types.is_numeric_dtype(s):
            vals = s.dropna().astype(str)
            if len(vals) and "'" not in vals.iloc[0] and len(vals.iloc[0]) <= 24:
                parts.append(f"{name(c)} == '{vals.iloc[0]}'")
        if len(parts) == 2:
            break
    return f"e.g. {' and '.join(parts)} (optional)" if parts else default
