import gc
import os
import time

import pytest

import dpstudio.app  # noqa: F401  (PySide6 6.12 refcount guard, see dpstudio/app/__init__.py)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _config_dir(tmp_path, monkeypatch):
    """Settings and the recovery file go to a temporary folder."""
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("DPSTUDIO_CONFIG_DIR", str(d))
    return d


#: a modal dialog open longer than this (s) is taken as one nobody will answer (offscreen)
MODAL_LIMIT = 60.0


@pytest.fixture(autouse=True)
def _qt_test_hygiene(request):
    """A modal dialog left open (offscreen nobody clicks it: ``exec()`` would wait forever)
    is closed after MODAL_LIMIT seconds and fails the test, naming the dialog, instead of
    hanging the suite until pytest-timeout.  Patch or auto-answer every dialog a test opens.
    Then the test's cyclic garbage is collected in the GUI thread.
    """
    if "qapp" not in request.fixturenames and "qtbot" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("qapp")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QDialog, QMessageBox

    first_seen: dict[int, float] = {}
    left_open: list[str] = []

    def check() -> None:
        w = QApplication.activeModalWidget()
        if w is None or not w.isVisible():
            first_seen.clear()
            return
        t0 = first_seen.setdefault(id(w), time.monotonic())
        if time.monotonic() - t0 > MODAL_LIMIT:
            text = w.text() if isinstance(w, QMessageBox) else ""
            left_open.append(f"{type(w).__name__} {w.windowTitle()!r}: {text[:200]!r}")
            first_seen.pop(id(w), None)
            if isinstance(w, QDialog):
                w.reject()
            else:
                w.close()

    timer = QTimer()
    timer.setInterval(500)
    timer.timeout.connect(check)
    timer.start()
    yield
    timer.stop()
    # Qt objects the test left in reference cycles are destroyed here, in the GUI thread, not
    # by a later collection in whatever thread allocates then (dask's threads in
    # test_large_file run outside dpstudio's workers): see dpstudio/app/workers.py
    gc.collect()
    assert not left_open, f"modal dialog(s) left unanswered for {MODAL_LIMIT:.0f} s: {left_open}"


@pytest.fixture
def no_dialogs(monkeypatch):
    """Record error dialogs instead of showing them."""
    shown = []

    def fake(parent, message, details="", title="dpstudio"):
        shown.append((message, details))
        return None

    import dpstudio.app.main_window as mw
    import dpstudio.app.widgets.common as common
    import dpstudio.app.widgets.roles_panel as rp

    monkeypatch.setattr(mw, "show_error", fake)
    monkeypatch.setattr(common, "show_error", fake)
    monkeypatch.setattr(rp, "show_error", fake)
    return shown


@pytest.fixture
def window(qtbot, no_dialogs):
    from dpstudio.app.main_window import MainWindow

    win = MainWindow(offer_recovery=False)
    qtbot.addWidget(win)
    win.errors = no_dialogs
    yield win
    win.shutdown()
    win.state.mark_dirty(False)
    win.state.project_path = None
