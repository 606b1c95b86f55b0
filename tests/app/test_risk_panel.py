"""Issue 10, app: the Risk view shows exactly the engine's (sdcMicro's) figures for the roles set,
recomputes when roles change, counts records above the threshold, and shows the release next
to the original after a protection run (a local-suppression release judged with missing values
matching any value)."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio import engine
from dpstudio.app.resources import FREE1_ROLES, free1_sample_path
from dpstudio.app.state import AppState
from dpstudio.app.widgets import risk_panel as RP
from dpstudio.app.widgets.method_panel import list_methods
from dpstudio.engine.algorithms.local_suppression import local_suppression

KEYS = ["SEX", "AGE", "MARSTAT", "KINDPERS", "NUMYOUNG", "NUMOLD"]


def _reference() -> dict:
    return json.loads((free1_sample_path().parent / "free1_sdcmicro_reference.json").read_text())


def _wait(qtbot, panel, timeout=20000):
    qtbot.waitUntil(lambda: not panel.pending() and panel.result is not None, timeout=timeout)


def _open_free1(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_free1_sample()
    assert len(win.state.df) == 4000
    _wait(qtbot, win.risk_panel)
    return win.risk_panel


def test_free1_sample_presets_roles_and_shows_the_engines_figures(qtbot, window):
    win = window
    panel = _open_free1(qtbot, win)
    st = win.state
    assert {c: st.roles[c] for c in FREE1_ROLES} == FREE1_ROLES
    # the same call the CLI / API makes with these settings
    ref = engine.assess_risk(st.df, KEYS, weight="WEIGHT", sensitive=["EDUC1"])
    rep = panel.report()
    for f in ("records", "key_combinations", "sample_uniques", "records_fk_lt_2",
              "records_fk_lt_3", "records_fk_lt_5"):
        assert getattr(rep, f) == getattr(ref, f), f
    assert rep.global_risk == ref.global_risk
    assert rep.expected_reidentifications == ref.expected_reidentifications
    assert rep.individual_risk_summary == ref.individual_risk_summary
    assert rep.l_diversity == ref.l_diversity
    np.testing.assert_array_equal(rep.individual_risk, ref.individual_risk)
    # ... and they are sdcMicro's figures for free1
    sdc = _reference()
    assert rep.sample_uniques == sdc["sample_uniques"] == 510
    assert rep.records_fk_lt_3 == sdc["fk_lt_3"]
    assert rep.global_risk == pytest.approx(sdc["global_risk"], rel=1e-4)
    assert rep.l_diversity["EDUC1"]["records_l1"] == sdc["ldiv_distinct_n_eq1"]
    # what is on screen is those numbers
    assert panel.figure("sample_uniques") == "510"
    assert panel.figure("records_fk_lt_5") == f"{sdc['fk_lt_5']:,}"
    assert panel.figure("global_risk") == RP.fmt_share(ref.global_risk)
    assert panel.figure("global_risk").startswith("0.004291")
    assert panel.figure("individual_risk.max") == RP.fmt_float(ref.individual_risk_summary["max"])
    assert panel.figure("l_diversity.EDUC1.records_l1") == "653"
    assert "WEIGHT" in panel.settings_label.text() and "matches any value" in panel.settings_label.text()
    assert not panel.shows_release()
    # riskiest combinations: sorted by risk, f_k / F_k of those very records
    top = panel.result["original_top"]
    assert list(top["risk"]) == sorted(top["risk"], reverse=True)
    assert top["risk"].iloc[0] == pytest.approx(ref.individual_risk.max())
    first = top.iloc[0]
    hit = np.ones(len(st.df), bool)
    for k in KEYS:
        hit &= st.df[k].to_numpy() == first[k]
    assert int(first["fk"]) == int(hit.sum()) == int(ref.fk[hit][0])
    assert float(first["Fk"]) == pytest.approx(st.df.loc[hit, "WEIGHT"].sum())
    assert panel.combos.rowCount() == len(top) > 0
    assert panel.combos.horizontalHeaderItem(0).text() == "SEX"


def test_recomputed_when_roles_change_and_threshold_counts(qtbot, window):
    win = window
    panel = _open_free1(qtbot, win)
    st = win.state
    before = panel.report().sample_uniques
    # AGE no longer a key: fewer uniques, and exactly the engine's figure for five keys
    st.set_role("AGE", "other")
    _wait(qtbot, panel)
    qtbot.waitUntil(lambda: panel.report().keys == [k for k in KEYS if k != "AGE"], timeout=10000)
    ref5 = engine.assess_risk(st.df, [k for k in KEYS if k != "AGE"], weight="WEIGHT",
                              sensitive=["EDUC1"])
    assert panel.report().sample_uniques == ref5.sample_uniques < before
    assert panel.figure("sample_uniques") == f"{ref5.sample_uniques:,}"
    st.set_role("AGE", "k-quasi")
    qtbot.waitUntil(lambda: panel.report().sample_uniques == before, timeout=10000)
    # the threshold field counts records with individual risk above it
    rk = panel.report().individual_risk
    panel.threshold.setValue(0.01)
    n = int((rk > 0.01).sum())
    assert 0 < n < len(rk)
    assert panel.threshold_counts() == (n, None)
    assert f"original: {n:,} of 4,000" in panel.threshold_label.text()
    panel.threshold.setValue(0.05)  # sdcApp's default: no free1 record is above it
    assert panel.threshold_counts() == (0, None)
    assert "original: 0 of 4,000" in panel.threshold_label.text()
    # without the weight the file is the population: risk 1/f_k
    st.set_role("WEIGHT", "other")
    qtbot.waitUntil(lambda: not panel.pending() and panel.report().weight is None, timeout=10000)
    r = panel.report()
    np.testing.assert_allclose(r.individual_risk, 1.0 / r.fk)


def test_bad_roles_give_one_line_not_figures(qtbot, window):
    win = window
    panel = _open_free1(qtbot, win)
    win.state.set_role("INCOME", "weight")  # two weights
    qtbot.waitUntil(lambda: panel.result is None and not panel.pending(), timeout=10000)
    text = panel.banner.text()
    assert "Only one column can be the sampling weight" in text and "INCOME" in text
    win.state.set_roles({"INCOME": "other", "WEIGHT": "other", "EDUC2": "weight"})
    # EDUC2 has values below 1: the engine's one-line message
    qtbot.waitUntil(lambda: "weight column 'EDUC2'" in panel.banner.text(), timeout=10000)
    assert panel.result is None and "\n" not in panel.banner.text()
    win.state.set_roles({c: "other" for c in win.state.roles})
    qtbot.waitUntil(lambda: "No key variables" in panel.banner.text(), timeout=10000)


def test_before_after_for_a_local_suppression_release(qtbot):
    """A local-suppression release (k = 3): the release column appears, judged with missing
    values matching any value, so it is 3-anonymous: no record with f_k < 3."""
    df = pd.read_csv(free1_sample_path())
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    st.set_data(df, str(free1_sample_path()))
    st.set_roles(FREE1_ROLES)
    _wait(qtbot, panel)
    assert not panel.shows_release()
    release, info = local_suppression(df, KEYS, 3)
    assert info["suppressed_total"] > 0
    st.set_result(SimpleNamespace(data=release), None, None)
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None,
                    timeout=10000)
    rel = panel.report("release")
    ref = engine.assess_risk(release, KEYS, weight="WEIGHT", sensitive=["EDUC1"], missing="any")
    assert rel.missing == "any"
    assert rel.records_fk_lt_3 == ref.records_fk_lt_3 == 0
    assert rel.sample_uniques == 0 and rel.global_risk == ref.global_risk
    assert rel.global_risk < panel.report().global_risk
    assert panel.shows_release()
    assert panel.figure("records_fk_lt_3", "release") == "0"
    assert panel.figure("records_fk_lt_3") == "840"
    assert panel.figure("global_risk", "release") == RP.fmt_share(ref.global_risk)
    panel.threshold.setValue(0.01)
    n0 = int((panel.report().individual_risk > 0.01).sum())
    n1 = int((ref.individual_risk > 0.01).sum())
    assert panel.threshold_counts() == (n0, n1)
    assert f"release: {n1:,} of 4,000" in panel.threshold_label.text()
    # the riskiest release combinations: every one matches at least 3 records
    panel.combo_source.setCurrentIndex(panel.combo_source.findData("release"))
    fk_col = KEYS.__len__() + 1
    assert panel.combos.horizontalHeaderItem(fk_col).text() == "f_k"
    shown = [int(panel.combos.item(r, fk_col).text()) for r in range(panel.combos.rowCount())]
    assert shown and min(shown) >= 3
    assert panel.result["release_top"]["risk"].iloc[0] == pytest.approx(ref.individual_risk.max())
    # the result is cleared (roles changed): the release column goes
    st.set_role("EDUC1", "other")
    qtbot.waitUntil(lambda: not panel.pending() and not panel.shows_release(), timeout=10000)
    panel.runner.cancel()


def test_before_after_after_protect_in_the_app(qtbot, window):
    """A real Protect run through the window: the release appears next to the original.
    Local suppression when the engine has it as a method, else MDAV on the same keys."""
    win = window
    panel = _open_free1(qtbot, win)
    mid = "local-suppression" if "local-suppression" in [m["id"] for m in list_methods()] \
        else "mdav"
    assert win.method_panel.select_method(mid)
    win.state.update_params(k=3)
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None,
                    timeout=20000)
    rel = panel.report("release")
    ref = engine.assess_risk(win.state.result.data, KEYS, weight="WEIGHT", sensitive=["EDUC1"],
                             missing="any")
    assert rel.sample_uniques == ref.sample_uniques
    assert rel.global_risk == ref.global_risk
    assert rel.records_fk_lt_3 == 0  # k = 3 (suppressed values match any value)
    assert panel.shows_release()
    assert panel.figure("sample_uniques", "release") == f"{ref.sample_uniques:,}"


def test_label_value_uses_value_labels():
    assert RP.label_value(1.0, {1: "male", 2: "female"}) == "1 = male"
    assert RP.label_value(2, {2.0: "female"}) == "2 = female"
    assert RP.label_value(3, {1: "male"}) == "3"
    assert RP.label_value(np.nan, {1: "male"}) == "(missing)"
    assert RP.label_value(pd.NA, None) == "(missing)"


def test_first_visit_shows_an_applicable_method(qtbot, window):
    """Issue 11 (defect 10): on a file whose roles rule out the recommended method, the method
    panel shows an applicable one instead of a 'not applicable' default."""
    win = window
    win.controller.open_free1_sample()
    qtbot.waitUntil(lambda: win.state.df is not None, timeout=20000)
    qtbot.waitUntil(lambda: win.method_panel.applicability_error() == "", timeout=5000)
    assert win.method_panel.current_method() != "ir-dp"
    assert win.method_panel.protect_btn.isEnabled()
