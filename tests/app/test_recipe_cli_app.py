"""Issue 9: the app's project file (its recipe) run through ``dpstudio protect --recipe`` gives
the app's release bit for bit under the same pinned seed; the app's export refuses the input
through the engine's one check (``engine.io.check_output_not_input``)."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio import cli
from dpstudio.app.resources import sample_path
from dpstudio.engine.random import STRONG_SEED

SEED = STRONG_SEED + 12345


def _open(qtbot, win, path):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_file(str(path), confirm=False)


def _protect(qtbot, win):
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=60000, raising=False):
        assert win.controller.run_protect(), win.errors
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    assert win.state.result is not None, win.errors


def _export(qtbot, win, path) -> None:
    assert win.controller.export(str(path), fmt="csv")
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)


@pytest.mark.parametrize(
    "method,params,roles",
    [
        ("ir-dp", {"k": 5, "epsilon": 1.5}, {"FICA": "eps-quasi", "FEDTAX": "eps-quasi"}),
        ("mdav", {"k": 4}, {"FICA": "k-quasi", "FEDTAX": "k-quasi"}),
    ],
)
def test_app_project_through_cli_gives_the_same_release(
    qtbot, window, tmp_path, capsys, method, params, roles
):
    win = window
    data = tmp_path / "census.csv"
    shutil.copy(sample_path(), data)
    _open(qtbot, win, data)
    st = win.state
    st.set_roles(roles | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    st.set_domain("FICA", (0.0, 8000.25))  # typed by the user (exact bounds)
    st.set_precision("FEDTAX", 0.5)
    assert win.method_panel.select_method(method)
    st.update_params(**params)
    st.set_seed(SEED, pinned=True)
    _protect(qtbot, win)
    _export(qtbot, win, tmp_path / "app.csv")
    proj = tmp_path / "study.dpsproj"
    assert win.controller.save_project_to(str(proj))

    code = cli.main(["protect", str(data), str(tmp_path / "cli.csv"), "--recipe", str(proj), "--no-measures"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (tmp_path / "app.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()

    # the seed matters: an explicit --seed overrides the project's pinned one
    code = cli.main(
        [
            "protect",
            str(data),
            str(tmp_path / "cli2.csv"),
            "--recipe",
            str(proj),
            "--no-measures",
            "--seed",
            hex(SEED + 1),
        ]
    )
    assert code == 0, capsys.readouterr().err
    if method == "ir-dp":
        assert (tmp_path / "app.csv").read_bytes() != (tmp_path / "cli2.csv").read_bytes()


def test_app_export_refuses_the_input_through_the_one_check(qtbot, window, tmp_path, monkeypatch):
    from dpstudio.engine import io as dio

    win = window
    data = tmp_path / "census.csv"
    shutil.copy(sample_path(), data)
    before = data.read_bytes()
    _open(qtbot, win, data)
    win.state.set_roles({"FICA": "eps-quasi", "AFNLWGT": "identifier"})
    win.state.set_domain("FICA", (0.0, 9000.0))
    assert win.method_panel.select_method("laplace")
    win.state.update_params(epsilon=1.0)
    _protect(qtbot, win)
    calls = []
    real = dio.check_output_not_input

    def spy(output, inputs=(), **kw):
        calls.append(str(output))
        return real(output, inputs, **kw)

    import dpstudio.engine.safe_write as sw  # the one guarded writer calls it for every file

    monkeypatch.setattr(sw, "check_output_not_input", spy)
    hard = tmp_path / "hard.csv"
    os.link(data, hard)
    link = tmp_path / "link.csv"
    os.symlink(data, link)
    for target in (data, tmp_path / "." / "census.csv", hard, link):
        win.errors.clear()
        calls.clear()
        assert not win.controller.export(str(target), fmt="csv")
        assert calls[0] == os.path.abspath(str(target))  # the release, before any other file
        ((msg, _),) = win.errors
        assert msg.startswith("Refusing to write the release ") and str(data) in msg, msg
    assert data.read_bytes() == before
    # the export dialog shows the same refusal and disables Save
    from PySide6.QtWidgets import QDialogButtonBox

    from dpstudio.app.widgets.export_dialog import ExportDialog

    dlg = ExportDialog(win.state.result, str(data), parent=win)
    qtbot.addWidget(dlg)
    calls.clear()
    dlg.path.setText(str(hard))
    assert not dlg._validate()
    assert os.path.abspath(str(hard)) in calls
    assert not dlg.buttons.button(QDialogButtonBox.StandardButton.Save).isEnabled()
    dlg.path.setText(str(tmp_path / "release.csv"))
    assert dlg._validate()
