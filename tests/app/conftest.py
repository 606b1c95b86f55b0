import os

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
