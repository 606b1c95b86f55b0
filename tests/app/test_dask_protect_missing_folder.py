"""Polish 5: protect-on-Dask (sample mode, issue 12) refuses a missing output folder with the
in-memory export's message (``missing_folder_message``) before any work starts: no traceback,
no OS "[Errno 2]" text, no folder created, no Dask cluster started."""

import shutil

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

from dpstudio.app import large_file as LF  # noqa: E402
from dpstudio.app.controller import missing_folder_message  # noqa: E402
from tests.app.test_large_file import _open_large, _setup_ir_dp, big, small_threshold  # noqa: E402,F401


@pytest.fixture
def sample_mode(qtbot, window, big, small_threshold, monkeypatch):  # noqa: F811
    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    started = []

    def no_work(*a, **kw):  # any work on Dask would start here
        started.append(a)
        raise AssertionError("the Dask run started")

    monkeypatch.setattr(LF, "protect_whole_file", no_work)
    return window, started


def _check_refused(window, started, statuses, target, want):
    assert want and window.errors, "no message shown"
    msg, details = window.errors[-1]
    assert msg == want and details == ""  # the export's one line, no traceback
    assert "errno" not in msg.lower() and "Traceback" not in msg
    assert any(want in s for s in statuses)  # the status bar says why, too
    assert not started and not window.controller.busy
    assert not target.exists()  # nothing created silently
    assert window.state.dask_release is None


@pytest.mark.parametrize("how", ["protect", "export"])
def test_dask_protect_refuses_a_missing_folder(qtbot, sample_mode, tmp_path, how):
    window, started = sample_mode
    missing = tmp_path / "no" / "such"
    out = missing / "release"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    statuses = []
    window.controller.sig_status.connect(statuses.append)
    if how == "protect":  # Protect asks for the release's location
        assert not window.controller.run_protect()
    else:  # Export in sample mode writes the whole file on Dask at the dialog's path
        assert not window.controller.export(str(out), fmt="csv")
    want = missing_folder_message(str(out))
    assert "does not exist" in want and str(missing) in want
    _check_refused(window, started, statuses, missing, want)
    assert not (tmp_path / "no").exists()


def test_dask_protect_refuses_a_file_as_folder(qtbot, sample_mode, tmp_path):
    window, started = sample_mode
    afile = tmp_path / "plain.txt"
    afile.write_text("x")
    out = afile / "release"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    statuses = []
    window.controller.sig_status.connect(statuses.append)
    assert not window.controller.run_protect()
    want = missing_folder_message(str(out))
    assert "is a file, not a folder" in want
    _check_refused(window, started, statuses, out, want)
    assert afile.read_text() == "x"


def test_folder_removed_during_the_run_gives_the_same_message(
    qtbot,
    window,
    big,
    small_threshold,
    tmp_path,
    monkeypatch,  # noqa: F811
):
    """The folder exists at the check and is gone when the release is written: the worker's
    OS error becomes the same one-line message (the real writer, not a stub)."""
    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    folder = tmp_path / "goes-away"
    folder.mkdir()
    out = folder / "release"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    real = LF.protect_whole_file

    def remove_then_run(*a, **kw):
        shutil.rmtree(folder)
        return real(*a, **kw)

    monkeypatch.setattr(LF, "protect_whole_file", remove_then_run)
    assert missing_folder_message(str(out)) == ""  # the check before the run passes
    assert window.controller.run_protect()
    qtbot.waitUntil(lambda: bool(window.errors), timeout=120000)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60000)
    want = missing_folder_message(str(out))
    msg, details = window.errors[-1]
    assert msg == want and "does not exist" in msg and "errno" not in msg.lower()
    assert not folder.exists() and window.state.dask_release is None
