"""Help: the user guide and the glossary in a QTextBrowser, glossary tooltips on measure labels,
plain readings next to the measures, guarantee sentences rendered readably (issue 11).

The texts are the engine's: ``docs/user_guide.md`` and ``docs/glossary.md`` (read through
:mod:`dpstudio.engine.glossary`), :func:`dpstudio.engine.measures.readings.reading` and
:func:`dpstudio.engine.report.guarantee_html`.  When one of those is not available (an older
engine, a bundle without ``docs/``) the app shows no help for it instead of failing: no tooltip,
no reading, the guarantee sentence as plain escaped text.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

#: measures that get a plain reading next to their value
READING_KEYS = ("sse_normalized", "rl")
READING_HEADER = "Reading"


# ---------------------------------------------------------------- engine texts (guarded)
def _glossary():
    try:
        from dpstudio.engine import glossary
    except ImportError:  # pragma: no cover - an engine without the glossary
        return None
    return glossary


def measure_tooltip(key: str) -> str:
    """The glossary's text for measure (or term) ``key``; '' when there is none."""
    g = _glossary()
    if g is None:
        return ""
    try:
        tip = g.tooltip(str(key))
    except Exception:  # noqa: BLE001 - help never breaks the results
        return ""
    return (tip + "\n\n(Double-click: the glossary)") if tip else ""


def measure_term(key: str) -> str | None:
    """The glossary term (anchor) that explains measure ``key``."""
    g = _glossary()
    if g is None:
        return None
    return key if key in g.load() else g.term_for_measure(str(key))


def measure_reading(key: str, value, context: dict | None = None) -> str:
    """The plain reading of ``value`` of measure ``key`` ('' when there is none)."""
    try:
        from dpstudio.engine.measures.readings import reading
    except ImportError:  # pragma: no cover - an engine without readings
        return ""
    try:
        return reading(str(key), value, context or {})
    except Exception:  # noqa: BLE001
        return ""


def guarantee_rich(sentence: str) -> str:
    """The guarantee sentence as readable HTML (one clause per line, scope in bold, e^ε as a
    formula): the engine's :func:`guarantee_html`, else the sentence escaped.
    """
    try:
        from dpstudio.engine.report import guarantee_html
    except ImportError:  # pragma: no cover - an engine without it
        return html.escape(str(sentence or ""))
    return guarantee_html(str(sentence or ""))


def annotate_measure_row(table: QTableWidget, row: int, key: str, value, context: dict | None = None) -> None:
    """Tooltip from the glossary on the measure's label (and value) of ``row``; for the
    measures in :data:`READING_KEYS`, the plain reading in a "Reading" column.
    """
    tip = measure_tooltip(key)
    for col in (0, 1):
        it = table.item(row, col)
        if it is not None and tip:
            it.setToolTip(tip)
            it.setData(Qt.ItemDataRole.UserRole, key)
    text = measure_reading(key, value, context) if key in READING_KEYS else ""
    if not text:
        if table.columnCount() >= 3:
            table.setItem(row, 2, QTableWidgetItem(""))  # no stale reading of a former result
        return
    if table.columnCount() < 3:
        table.setColumnCount(3)
        table.setHorizontalHeaderItem(2, QTableWidgetItem(READING_HEADER))
    it = QTableWidgetItem(text)
    it.setToolTip(text)
    table.setItem(row, 2, it)


def annotate_headers(table: QTableWidget, keys: list[str]) -> None:
    """Glossary tooltips on the horizontal header of ``table`` (one measure key per column)."""
    for j, key in enumerate(keys):
        it = table.horizontalHeaderItem(j)
        tip = measure_tooltip(key)
        if it is not None and tip:
            it.setToolTip(tip)


# ---------------------------------------------------------------- the documents
def docs_dir() -> Path | None:
    """``docs/`` of the source tree, else of a PyInstaller bundle, else None."""
    here = Path(__file__).resolve()
    cands = [here.parents[3] / "docs"]
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        cands.append(Path(bundle) / "docs")
    return next((p for p in cands if p.is_dir()), None)


def doc_markdown(name: str) -> str | None:
    """The text of ``docs/<name>`` ready for Qt's markdown (HTML anchor lines removed), or
    None when it is not there.
    """
    d = docs_dir()
    p = d / name if d else None
    if p is None or not p.is_file():
        return None
    text = p.read_text(encoding="utf-8")
    return re.sub(r'(?m)^\s*<a\s+id="[^"]*"\s*>\s*</a>\s*$\n?', "", text)


class HelpDialog(QDialog):
    """One of the documents (``user_guide.md`` or ``glossary.md``) in a browser; links to the
    other document or to a glossary term (``glossary.md#rl``) are followed inside.
    """

    def __init__(self, doc: str = "user_guide.md", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("help_dialog")
        self.resize(820, 680)
        lay = QVBoxLayout(self)
        self.browser = QTextBrowser()
        self.browser.setObjectName("help_browser")
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._on_anchor)
        lay.addWidget(self.browser, 1)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)
        self.doc = ""
        self.show_doc(doc)

    def show_doc(self, name: str) -> bool:
        """Show ``docs/<name>``; a short note when it is missing. True when shown."""
        text = doc_markdown(name)
        self.doc = name
        title = {"user_guide.md": "User guide", "glossary.md": "Glossary"}.get(name, name)
        self.setWindowTitle(f"dpstudio — {title}")
        if text is None:
            self.browser.setHtml(
                f"<p>The {html.escape(title.lower())} ({html.escape(name)}) is "
                "not installed with this copy of dpstudio.</p>"
            )
            return False
        self.browser.setMarkdown(text)
        return True

    def show_term(self, term_or_key: str) -> bool:
        """Open the glossary at the entry for a term (anchor) or a measure key."""
        if self.doc != "glossary.md":
            self.show_doc("glossary.md")
        term = measure_term(term_or_key) or term_or_key
        g = _glossary()
        entry = g.entries().get(term) if g is not None else None
        if entry is None:
            return False
        doc = self.browser.document()
        block = doc.begin()
        while block.isValid():
            if block.blockFormat().headingLevel() and block.text().strip() == entry.title:
                self.browser.setTextCursor(QTextCursor(block))
                # the heading at the top of the view, not just somewhere visible
                top = doc.documentLayout().blockBoundingRect(block).top()
                self.browser.verticalScrollBar().setValue(int(top))
                return True
            block = block.next()
        return False

    def current_heading(self) -> str:
        """The text of the heading the cursor is on (for tests)."""
        return self.browser.textCursor().block().text()

    def _on_anchor(self, url: QUrl) -> None:
        s = url.toString()
        if s.startswith("#"):
            self.show_term(s[1:])
            return
        base, _, frag = s.partition("#")
        name = Path(base).name
        if name in ("glossary.md", "user_guide.md", "methods.md", "measures.md"):
            self.show_doc(name)
            if frag:
                self.show_term(frag)
            return
        if url.scheme() in ("http", "https"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)


def open_help(parent: QWidget | None, doc: str, term: str | None = None) -> HelpDialog:
    """Show a non-modal help window (kept on ``parent`` so there is one per document)."""
    attr = "_help_dialogs"
    dialogs = getattr(parent, attr, None) if parent is not None else None
    if dialogs is None:
        dialogs = {}
        if parent is not None:
            setattr(parent, attr, dialogs)
    dlg = dialogs.get(doc)
    if dlg is None:
        dlg = HelpDialog(doc, parent)
        dialogs[doc] = dlg
    else:
        dlg.show_doc(doc)
    dlg.show()
    dlg.raise_()
    if term:
        dlg.show_term(term)  # after show: the document is laid out at the window's width
    return dlg


def open_measure_help(parent: QWidget | None, item: QTableWidgetItem | None) -> HelpDialog | None:
    """The glossary at the entry of the measure in ``item``'s row (set by
    :func:`annotate_measure_row`); None when the measure has no entry.
    """
    if item is None:
        return None
    table = item.tableWidget()
    lab = table.item(item.row(), 0) if table is not None else item
    key = lab.data(Qt.ItemDataRole.UserRole) if lab is not None else None
    if not key or not measure_term(str(key)):
        return None
    return open_help(parent, "glossary.md", str(key))


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    d = HelpDialog(sys.argv[1] if len(sys.argv) > 1 else "user_guide.md")
    d.show()
    app.exec()
