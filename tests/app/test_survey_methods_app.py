"""The app forms of recode, top-bottom-coding and PRAM (issue 23 §1) come from the registry:
their per-column parameters render as one-line-per-column editors and a run from the form
gives the engine's release under the same seed; the Risk tab shows the household risk of the
release, its records grouped by their original households (issue 23 §3)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QPlainTextEdit

from dpstudio import engine
from dpstudio.app.state import AppState
from dpstudio.app.widgets import risk_panel as RP
from dpstudio.app.widgets.method_panel import parse_per_column_text, per_column_text
from dpstudio.engine.measures.survey_risk import release_with_household_ids

ROOT = Path(__file__).resolve().parents[2]
FREE1 = ROOT / "resources" / "free1" / "free1.csv"
TESTDATA = ROOT / "resources" / "testdata" / "testdata.csv"
SEED = 0x5EED_1234_5678_9ABC_DEF0


def _open(qtbot, win, path):
    assert path == FREE1
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        assert win.controller.open_free1_sample()
    assert win.state.df is not None


def _run(qtbot, win):
    errors: list = []
    win.controller.sig_error.connect(lambda m, _d: errors.append(m))
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=60000, raising=False) as blocker:
        assert win.controller.run_protect(), errors
    assert blocker.signal_triggered, errors
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    assert win.state.result is not None
    return win.state.result


def _unused(qtbot, win):
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=60000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    assert win.state.result is not None
    return win.state.result


def test_per_column_text_round_trip():
    v = {"AGE": "0,10,20", "MARSTAT": "1+2:12,3+4:34"}
    assert parse_per_column_text(per_column_text(v)) == v
    assert parse_per_column_text("\n  \n") is None
    assert parse_per_column_text("AGE = 0,10\nINCOME=p99:5") == {"AGE": "0,10", "INCOME": "p99:5"}


@pytest.mark.parametrize(
    "method, typed, params",
    [
        (
            "recode",
            {"breaks": "AGE=0,20,40,60,120", "merge": "MARSTAT=1+2:12"},
            {"breaks": {"AGE": "0,20,40,60,120"}, "merge": {"MARSTAT": "1+2:12"}},
        ),
        (
            "top-bottom-coding",
            {"top": "INCOME=900000:950000", "bottom": "INCOME=p5"},
            {"top": {"INCOME": "900000:950000"}, "bottom": {"INCOME": "p5"}},
        ),
        (
            "pram",
            {"variables": "MARSTAT,EDUC1", "strata": "SEX"},
            {"variables": "MARSTAT,EDUC1", "strata": "SEX"},
        ),
    ],
)
def test_form_renders_and_a_run_equals_the_engine(qtbot, window, tmp_path, method, typed, params):
    win = window
    _open(qtbot, win, FREE1)
    if method == "recode":
        # the sample types sdcMicro's keys as categories: recoding AGE into intervals is refused
        # with one line (seen) until it is typed numeric
        assert win.method_panel.select_method(method)
        win.method_panel.fields["breaks"].editor.setPlainText("AGE=0,20")
        errors: list = []
        win.controller.sig_error.connect(lambda m, _d: errors.append(m))
        win.method_panel.seed.setValue(SEED)
        if win.controller.run_protect():
            qtbot.waitUntil(lambda: bool(errors) or not win.controller.busy, timeout=30000)
        qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
        assert errors and "typed categorical" in errors[-1] and "\n" not in errors[-1]
        win.state.set_type("AGE", "numeric")
    assert win.method_panel.select_method(method)
    for name, text in typed.items():
        field = win.method_panel.fields[name]
        if field.kind == "per-column":
            assert isinstance(field.editor, QPlainTextEdit)
            assert "one column per line" in field.editor.placeholderText()
            field.editor.setPlainText(text)
        else:
            field.editor.setText(text)
            field.editor.editingFinished.emit()
    win.method_panel.seed.setValue(SEED)
    for name, v in params.items():
        assert win.state.recipe.params[name] == v, name
    assert win.method_panel.applicability_error() == ""
    res = _run(qtbot, win)
    # the engine on the app's data (as typed there) and roles, with the parameters typed into
    # the form, under the same seed: the same release
    st = win.state
    ref = engine.protect(
        st.df, method, st.active_roles(), st.active_domains(), seed=SEED, types=dict(st.types), **params
    )
    assert {k: v for k, v in res.params.items()} == ref.params
    for c in ref.data.columns:
        assert res.data[c].astype(str).tolist() == ref.data[c].astype(str).tolist(), c
    assert res.guarantee == ref.guarantee
    if method == "pram":
        assert "transition_matrix" in res.tables
        assert "Not k-anonymity and not differential privacy" in res.guarantee
        # the app's export writes the matrix as a public file of the release (the one writer)
        out = tmp_path / "rel.csv"
        assert win.controller.export(str(out), fmt="csv")
        qtbot.waitUntil(
            lambda: not win.controller.busy and (tmp_path / "rel.metadata.json").exists(), timeout=30000
        )
        qtbot.waitUntil(lambda: not any(r.busy for r in win.controller.runners), timeout=30000)
        m = tmp_path / "rel.transition_matrix.csv"
        assert m.exists() and os.stat(m).st_mode & 0o044
        t = pd.read_csv(m)
        assert np.allclose(t["probability"], res.tables["transition_matrix"]["probability"])


def test_form_shows_a_recipe_s_per_column_values(qtbot, window):
    win = window
    _open(qtbot, win, FREE1)
    assert win.method_panel.select_method("top-bottom-coding")
    win.method_panel.set_values({"top": {"INCOME": "p99"}})
    assert win.method_panel.fields["top"].editor.toPlainText() == "INCOME=p99"
    assert win.state.recipe.params["top"] == {"INCOME": "p99"}


def test_bad_per_column_text_is_one_line_and_no_run(qtbot, window):
    win = window
    _open(qtbot, win, FREE1)
    assert win.method_panel.select_method("recode")
    win.state.set_type("AGE", "numeric")
    win.method_panel.fields["breaks"].editor.setPlainText("AGE=20,10")
    errors: list = []
    win.controller.sig_error.connect(lambda m, _d: errors.append(m))
    if win.controller.run_protect():
        qtbot.waitUntil(lambda: bool(errors) or not win.controller.busy, timeout=30000)
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    assert win.state.result is None
    assert errors and "'AGE'" in errors[-1] and "breaks" in errors[-1] and "\n" not in errors[-1]


def test_risk_tab_household_risk_after_from_original_households(qtbot):
    td = pd.read_csv(TESTDATA)
    keys = ["urbrur", "roof", "sex", "age"]
    roles = {"ori_hid": "household", **{k: "k-quasi" for k in keys}}
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    st.set_data(td, str(TESTDATA))
    st.set_roles(roles)
    qtbot.waitUntil(lambda: not panel.pending() and panel.result is not None, timeout=20000)
    res = engine.protect(td, "recode", roles, breaks={"age": "0,15,30,45,60,120"}, seed=1)
    assert "ori_hid" not in res.data.columns
    st.set_result(res, None, None)
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None, timeout=20000)
    rel = panel.report("release")
    ref = engine.assess_risk(release_with_household_ids(res, "ori_hid"), keys, household="ori_hid")
    before = engine.assess_risk(td, keys, household="ori_hid")
    assert rel.household_expected_reidentifications == ref.household_expected_reidentifications
    assert rel.household_expected_reidentifications < before.household_expected_reidentifications
    assert panel.figure("household_expected_reidentifications", "release") == RP.fmt_float(
        ref.household_expected_reidentifications
    )
    assert any("original households" in n for n in panel.result["release_notes"])
    assert "ori_hid" not in res.data.columns  # the release is untouched
    panel.runner.cancel()
