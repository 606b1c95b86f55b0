"""Issue 21 part 1 in the app: every file the app writes (export, project, recovery autosave,
ledger into the project and its audit export, per-record risk, the whole-file release on Dask)
goes through the one guarded writer, and every target is checked before any work starts."""

from __future__ import annotations

import os
import stat

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from tests.app.test_large_file import _open_large, _setup_ir_dp, big, small_threshold  # noqa: E402,F401
from tests.app.test_query_panel import _answer, _fill  # noqa: E402
from tests.app.test_risk_panel import _open_free1  # noqa: E402
from tests.write_spy import WriteSpy  # noqa: E402

QUASI = ["FICA", "FEDTAX"]


def _census_protected(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    win.state.set_roles({c: "eps-quasi" for c in QUASI} | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    assert win.method_panel.select_method("ir-dp")
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)


def _wait_export(qtbot, win):
    with qtbot.waitSignal(win.controller.sig_exported, timeout=60000) as blocker:
        pass
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    return blocker.args[0]


def test_every_app_writer_goes_through_the_one_writer(qtbot, window, tmp_path, monkeypatch):
    win = window
    _census_protected(qtbot, win)
    w = tmp_path / "w"
    w.mkdir()
    spy = WriteSpy(tmp_path).install(monkeypatch)
    # the export: release, metadata, release note, assessment, audit trail
    with qtbot.waitSignal(win.controller.sig_exported, timeout=60000):
        assert win.controller.export(str(w / "rel.csv"), fmt="csv", release_note=True, assessment=True)
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    # the project, the recovery autosave
    assert win.controller.save_project_to(str(w / "p.dpsproj"))
    win.state.mark_dirty(True)
    win.controller.autosave()
    # the query desk: the data set's ledger file (and its lock file), and its audit export
    p = win.query_panel
    _fill(p, eps="0.1")
    _answer(qtbot, p)
    assert p.export_ledger(str(w / "audit.csv"))
    win.state.project_path = None
    # the Risk tab's per-record export
    panel = _open_free1(qtbot, win)
    assert panel.export_per_record(str(w / "risk.csv"))
    assert spy.violations() == []
    finals = spy.finals()
    want = {
        "rel.csv",
        "rel.metadata.json",
        "rel.release-note.html",
        "rel.assessment.private.html",
        "rel.private.json",
        "p.dpsproj",
        "recovery.dpsproj",
        "audit.csv",
        "risk.csv",
    }
    assert want <= finals, want - finals
    assert any(n.endswith(".ledger.json") for n in finals), finals
    assert any(op == "create" and p.endswith(".ledger.json.lock") for op, p, _, _ in spy.ops)
    assert stat.S_IMODE(os.stat(w / "p.dpsproj").st_mode) == 0o600


def test_whole_file_release_on_dask_goes_through_the_one_writer(
    qtbot,
    window,
    tmp_path,
    monkeypatch,
    big,
    small_threshold,  # noqa: F811
):
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("distributed")
    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    out = tmp_path / "release-app"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    spy = WriteSpy(tmp_path).install(monkeypatch)
    with qtbot.waitSignal(window.controller.sig_exported, timeout=120000):
        assert window.controller.run_protect()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30000)
    assert spy.violations() == []
    assert {"release-app", "release-app.private.json"} <= spy.finals()


# ------------------------------------------------------------------ refused before any work


def test_export_to_a_fifo_or_over_a_read_only_file_is_refused_before_any_work(qtbot, window, tmp_path):
    win = window
    _census_protected(qtbot, win)
    os.mkfifo(tmp_path / "rel.csv")
    (tmp_path / "ok.release-note.html").write_text("kept")
    os.chmod(tmp_path / "ok.release-note.html", 0o444)
    before = sorted(os.listdir(tmp_path))
    for target, needle in ((tmp_path / "rel.csv", "FIFO"), (tmp_path / "ok.csv", "read-only")):
        win.errors.clear()
        assert not win.controller.export(str(target), fmt="csv", release_note=True)
        assert not win.controller.busy  # no work started
        ((msg, _),) = win.errors
        assert msg.startswith("Refusing to write ") and needle in msg, msg
    assert sorted(os.listdir(tmp_path)) == before
    assert stat.S_ISFIFO(os.lstat(tmp_path / "rel.csv").st_mode)
    assert (tmp_path / "ok.release-note.html").read_text() == "kept"


def test_export_dialog_shows_the_writers_refusal(qtbot, window, tmp_path):
    from PySide6.QtWidgets import QDialogButtonBox

    from dpstudio.app.widgets.export_dialog import ExportDialog

    win = window
    _census_protected(qtbot, win)
    os.mkfifo(tmp_path / "x.private.json")
    dlg = ExportDialog(win.state.result, str(win.state.path), parent=win)
    qtbot.addWidget(dlg)
    dlg.path.setText(str(tmp_path / "x.csv"))
    assert not dlg._validate()
    assert "FIFO" in dlg.banner.text()
    assert not dlg.buttons.button(QDialogButtonBox.StandardButton.Save).isEnabled()
    dlg.audit.setChecked(False)  # the audit trail is not written: nothing refused any more
    assert dlg._validate()
    assert dlg.buttons.button(QDialogButtonBox.StandardButton.Save).isEnabled()


def test_project_save_refuses_inputs_fifos_and_read_only_files(qtbot, window, tmp_path):
    win = window
    _census_protected(qtbot, win)
    data = str(win.state.path)
    os.symlink(data, tmp_path / "alias.dpsproj")  # another name of the data file
    os.mkfifo(tmp_path / "pipe.dpsproj")
    (tmp_path / "ro.dpsproj").write_text("{}")
    os.chmod(tmp_path / "ro.dpsproj", 0o444)
    before = sorted(os.listdir(tmp_path))
    for name, needle in (("alias.dpsproj", "input"), ("pipe.dpsproj", "FIFO"), ("ro.dpsproj", "read-only")):
        win.errors.clear()
        assert not win.controller.save_project_to(str(tmp_path / name))
        ((msg, _),) = win.errors
        assert needle in msg, msg
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "ro.dpsproj").read_text() == "{}"


def test_dask_release_with_a_fifo_audit_trail_is_refused_before_the_cluster(
    qtbot,
    window,
    tmp_path,
    monkeypatch,
    big,
    small_threshold,  # noqa: F811
):
    pytest.importorskip("dask.dataframe")
    from dpstudio.app import large_file as LF

    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    started = []
    monkeypatch.setattr(LF, "protect_whole_file", lambda *a, **k: started.append(a))
    os.mkfifo(tmp_path / "rel.private.json")
    window.controller.ask_release_path = lambda p: (str(tmp_path / "rel"), "parquet")
    window.errors.clear()
    assert not window.controller.run_protect()
    assert not started and window.errors and "FIFO" in window.errors[-1][0]
    assert not (tmp_path / "rel").exists()


def test_ledger_and_risk_exports_refuse_the_data_file(qtbot, window, tmp_path):
    """Through a link in tmp_path (if the guard failed, only that link would be replaced)."""
    win = window
    _census_protected(qtbot, win)
    alias = tmp_path / "alias.csv"
    os.symlink(win.state.path, alias)
    p = win.query_panel
    _fill(p, eps="0.1")
    _answer(qtbot, p)
    assert p.export_ledger(str(alias)) is None
    assert "input" in p.error_label.text()
    panel = _open_free1(qtbot, win)
    alias2 = tmp_path / "alias2.csv"
    os.symlink(win.state.path, alias2)
    assert panel.export_per_record(str(alias2)) is None
    assert os.path.islink(alias) and os.path.islink(alias2)
