"""Issue 8 §1 in the app: a fresh 128-bit seed per session and per new data file, full-width
pinned seeds (hex or decimal) with a weak-seed warning, old projects migrated (seed 0 warned),
and the seed only ever in the owner-only project and recovery files."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

import json
import os
import stat
from pathlib import Path

from dpstudio import engine
from dpstudio.app import project
from dpstudio.app import settings as app_settings
from dpstudio.engine.random import STRONG_SEED, format_seed

QUASI = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
PINNED = 0x5EED_C0DE_0BAD_F00D_1234_5678_9ABC_DEF1  # full width


@pytest.fixture(autouse=True)
def _no_close_question(monkeypatch):
    """A failing assertion must not leave a modal "Save project?" question at teardown."""
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Discard)


def _new_window(qtbot):
    from dpstudio.app.main_window import MainWindow

    w = MainWindow(offer_recovery=False)
    qtbot.addWidget(w)
    return w


def _close(w):
    w.shutdown()
    w.state.mark_dirty(False)
    w.state.project_path = None


def _open_sample(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()


def _wait_idle(qtbot, win, timeout=90000):
    qtbot.waitUntil(lambda: not any(r.busy for r in win.controller.runners), timeout=timeout)
    for r in win.controller.runners:
        assert r.wait(30)
    qtbot.wait(20)


def _needles(seed: int) -> list[bytes]:
    return [str(seed).encode(), format(seed, "x").encode(), format(seed, "X").encode()]


def _holding(root: Path, seed: int) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in _needles(seed))}


def test_two_fresh_windows_have_different_strong_seeds(qtbot, no_dialogs):
    a, b = _new_window(qtbot), _new_window(qtbot)
    try:
        sa, sb = a.state.recipe.seed, b.state.recipe.seed
        assert sa != sb
        assert sa >= STRONG_SEED and sb >= STRONG_SEED
        # the field holds the seed in full (hex), hidden unless "Show"; no warning
        for w, s in ((a, sa), (b, sb)):
            assert w.method_panel.seed.text() == format_seed(s)
            assert w.method_panel.seed.value() == s
            assert w.method_panel.seed_message() == ""
            assert "secret" in w.method_panel.seed_explain.text()
    finally:
        _close(a)
        _close(b)


def test_new_button_and_new_data_draw_fresh_seeds(qtbot, window):
    win = window
    s0 = win.state.recipe.seed
    win.method_panel.seed_new.click()
    s1 = win.state.recipe.seed
    assert s1 != s0 and s1 >= STRONG_SEED
    assert win.method_panel.seed.value() == s1
    _open_sample(qtbot, win)  # a new data file is a new project
    s2 = win.state.recipe.seed
    assert s2 not in (s0, s1) and s2 >= STRONG_SEED
    assert win.method_panel.seed.value() == s2


def test_pinning_a_seed_hex_decimal_weak_and_bad(qtbot, window):
    win = window
    mp = win.method_panel
    mp.seed.setText(hex(PINNED))
    assert win.state.recipe.seed == PINNED and mp.seed_message() == ""
    mp.seed.setText(str(PINNED + 1))  # decimal, 128 bits: no precision lost
    assert win.state.recipe.seed == PINNED + 1 and mp.seed_message() == ""
    mp.seed.setText("0x1234")
    assert win.state.recipe.seed == 0x1234
    assert "Weak seed" in mp.seed_message() and "2^64" in mp.seed_message()
    mp.seed.setText("12g4")
    assert win.state.recipe.seed == 0x1234  # the last valid seed is kept
    msg = mp.seed_message()
    assert "seed" in msg and "12g4" in msg and "Traceback" not in msg
    # protecting with a bad seed text is refused with a message, not a traceback
    _open_sample(qtbot, win)
    mp.seed.setText("-7")
    assert not win.controller.run_protect()
    assert win.errors and "seed" in win.errors[-1][0] and "Traceback" not in win.errors[-1][0]
    mp.seed.setText(hex(PINNED))
    assert mp.seed_error() == "" and win.state.recipe.seed == PINNED


def _save_old_project(path: Path, seed) -> None:
    from dpstudio.app.resources import sample_path

    data = {
        "schema_version": 1,
        "software_version": "0.9",
        "input": {"path": str(sample_path()), "read_options": {}},
        "roles": {"FICA": "eps-quasi"},
        "domains": {},
        "method": "ir-dp",
        "params": {"k": 5, "epsilon": 1.0},
        "sweep": {},
    }
    if seed is not None:
        data["seed"] = seed
    path.write_text(json.dumps(data))


def test_old_project_with_seed_zero_loads_with_a_warning(qtbot, window, tmp_path):
    win = window
    old = tmp_path / "old.dpsproj"
    _save_old_project(old, 0)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_project(str(old))
    qtbot.waitUntil(lambda: win.state.roles.get("FICA") == "eps-quasi", timeout=5000)
    assert win.state.recipe.seed == 0  # kept: it reproduces the old release ...
    msg = win.method_panel.seed_message()
    assert "seed 0" in msg and "New" in msg  # ... but the user is told, and offered New
    assert "seed 0" in win.task_label.text()
    win.method_panel.seed_new.click()
    assert win.state.recipe.seed >= STRONG_SEED and win.method_panel.seed_message() == ""
    # saved again: schema 2, the seed as hex text, owner-only
    new = tmp_path / "new.dpsproj"
    assert win.controller.save_project_to(str(new))
    d = json.loads(new.read_text())
    assert d["schema_version"] == project.SCHEMA_VERSION == 3
    assert d["seed"] == format_seed(win.state.recipe.seed)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600


def test_old_projects_small_seed_and_missing_seed(qtbot, window, tmp_path):
    win = window
    old = tmp_path / "small.dpsproj"
    _save_old_project(old, 918273645)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_project(str(old))
    qtbot.waitUntil(lambda: win.state.recipe.seed == 918273645, timeout=5000)
    assert "weak" in win.method_panel.seed_message()
    nos = tmp_path / "noseed.dpsproj"
    _save_old_project(nos, None)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_project(str(nos))
    qtbot.waitUntil(lambda: win.state.roles.get("FICA") == "eps-quasi", timeout=5000)
    qtbot.wait(50)
    assert win.state.recipe.seed >= STRONG_SEED and win.method_panel.seed_message() == ""


def test_project_seed_round_trip_and_bad_seed(tmp_path):
    from dpstudio.engine.recipe import Recipe

    for seed in (PINNED, 2**256 - 1, 0, 7):
        p = tmp_path / "p.dpsproj"
        project.save(p, Recipe(input_path="x.csv", method="ir-dp", seed=seed))
        raw = json.loads(p.read_text())
        assert isinstance(raw["seed"], str) and raw["seed"].startswith("0x")
        assert project.load(p).seed == seed  # exact, whatever the width
    p.write_text(json.dumps({"schema_version": 2, "seed": "0xnothex"}))
    with pytest.raises(engine.InputError, match="seed"):
        project.load(p)
    p.write_text(json.dumps({"schema_version": 1, "seed": 12.5}))
    with pytest.raises(engine.InputError, match="seed"):
        project.load(p)


def test_default_config_dir_is_owner_only(tmp_path, monkeypatch):
    from PySide6.QtCore import QStandardPaths

    monkeypatch.delenv("DPSTUDIO_CONFIG_DIR", raising=False)
    base = tmp_path / "cfg"
    monkeypatch.setattr(QStandardPaths, "writableLocation", lambda _loc: str(base))
    d = app_settings.config_dir()
    assert d == base / "dpstudio" and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o755)
    app_settings.config_dir()
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_seed_only_in_owner_only_private_files(qtbot, window, tmp_path, _config_dir):
    """Protect, sweep, export (release + metadata + report), save the project, autosave, save
    the UI settings: grep every file written for the seed (decimal and hex).  It is only in the
    project and recovery files, both 0600."""
    win = window
    _open_sample(qtbot, win)
    seed = win.state.recipe.seed  # the fresh default seed
    assert seed >= STRONG_SEED
    win.state.set_roles({c: "eps-quasi" for c in QUASI} | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    win.method_panel.select_method("ir-dp")
    win.method_panel.set_values({"k": 5, "epsilon": 1.0})
    assert win.state.recipe.seed == seed
    ep = win.explore_panel
    ep.ks.setText("2, 5")
    ep.eps.setText("1")
    ep.repeats.setValue(1)
    assert win.controller.run_sweep()
    _wait_idle(qtbot, win)
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    _wait_idle(qtbot, win)
    # unpinned: the run drew a fresh seed, which the project now records (issue 8 follow-up)
    before, seed = seed, win.state.recipe.seed
    assert seed != before and seed >= STRONG_SEED
    assert win.state.result_recipe["seed"] == seed and not win.state.recipe.seed_pinned
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert win.controller.export(str(out_dir / "release.csv"), fmt="csv", release_note=True, assessment=True)
    _wait_idle(qtbot, win)
    # another stem: release.xlsx would share release.csv's metadata, which export refuses
    assert win.controller.export(
        str(out_dir / "release_x.xlsx"), fmt="xlsx", release_note=True, assessment=True
    )
    _wait_idle(qtbot, win)
    assert not win.errors, win.errors  # both exports really ran
    proj = tmp_path / "study.dpsproj"
    assert win.controller.save_project_to(str(proj))
    win.state.mark_dirty(True)
    win.controller.autosave()
    win.save_ui()
    rec = app_settings.recovery_path()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len([p for p in written if p.parent == out_dir]) >= 4  # releases, metadata, reports
    assert any(p.suffix == ".ini" for p in written)
    assert _holding(tmp_path, seed) == {proj, rec}
    assert _holding(tmp_path, before) == set()  # the unused pre-run seed is written nowhere
    for p in (proj, rec):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
        assert project.load(p).seed == seed
    assert rec.parent == _config_dir
