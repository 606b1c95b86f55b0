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

import pyqtgraph as pg  # noqa: E402

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
    assert all(st.types.get(c) == "categorical" for c in KEYS)  # sdcMicro's keys are codes
    # the same call the CLI / API makes with these settings
    ref = engine.assess_risk(st.df, KEYS, weight="WEIGHT", sensitive=["EDUC1"])
    rep = panel.report()
    for f in (
        "records",
        "key_combinations",
        "sample_uniques",
        "records_fk_lt_2",
        "records_fk_lt_3",
        "records_fk_lt_5",
    ):
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
    ref5 = engine.assess_risk(st.df, [k for k in KEYS if k != "AGE"], weight="WEIGHT", sensitive=["EDUC1"])
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
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None, timeout=10000)
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
    mid = "local-suppression" if "local-suppression" in [m["id"] for m in list_methods()] else "mdav"
    assert win.method_panel.select_method(mid)
    win.state.update_params(k=3)
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None, timeout=20000)
    rel = panel.report("release")
    ref = engine.assess_risk(win.state.result.data, KEYS, weight="WEIGHT", sensitive=["EDUC1"], missing="any")
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


def test_export_per_record_risk_equals_the_cli_and_is_private(qtbot, window, tmp_path, monkeypatch):
    """Risk tab › Export per-record risk…: the file dialog (patched) names the file; its content
    is byte for byte the CLI's ``risk --per-record`` file for the same settings, owner-only."""
    from dpstudio.cli import main

    win = window
    panel = _open_free1(qtbot, win)
    assert panel.export_button.isEnabled()
    target = tmp_path / "app_per_record.csv"
    asked = []

    def fake_dialog(parent, title, name, filt):
        asked.append((title, name))
        return str(target), filt

    monkeypatch.setattr(RP.QFileDialog, "getSaveFileName", staticmethod(fake_dialog))
    panel.export_button.click()
    assert asked and "private" in asked[0][0]
    assert target.is_file() and (target.stat().st_mode & 0o777) == 0o600
    cli_file = tmp_path / "cli_per_record.csv"
    argv = [
        "risk",
        str(free1_sample_path()),
        "--weight",
        "WEIGHT",
        "--role",
        "EDUC1=confidential",
        "--per-record",
        str(cli_file),
    ] + [a for k in KEYS for a in ("--role", f"{k}=k-quasi")]
    assert main(argv) == 0
    assert target.read_bytes() == cli_file.read_bytes()
    per = pd.read_csv(target)
    assert list(per.columns) == ["record", "fk", "Fk", "individual_risk"] and len(per) == 4000
    np.testing.assert_array_equal(per["fk"], panel.report().fk)
    assert "written" in panel.banner.text() and "private" in panel.banner.text()
    # cancelled dialog: nothing written, no error
    monkeypatch.setattr(RP.QFileDialog, "getSaveFileName", staticmethod(lambda *a: ("", "")))
    panel.export_button.click()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".csv") == [
        "app_per_record.csv",
        "cli_per_record.csv",
    ]


def test_export_per_record_risk_of_the_release(qtbot, tmp_path, monkeypatch):
    """After a run, the release's per-record risk when the release is chosen (standalone panel)."""
    df = pd.read_csv(free1_sample_path())
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    assert not panel.export_button.isEnabled()  # nothing computed yet
    st.set_data(df, str(free1_sample_path()))
    st.set_roles(FREE1_ROLES)
    _wait(qtbot, panel)
    release, _ = local_suppression(df, KEYS, 3)
    st.set_result(SimpleNamespace(data=release), None, None)
    qtbot.waitUntil(lambda: not panel.pending() and panel.report("release") is not None, timeout=20000)
    panel.combo_source.setCurrentIndex(panel.combo_source.findData("release"))
    target2 = tmp_path / "release_per_record.csv"
    monkeypatch.setattr(RP.QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(target2), "")))
    panel.export_button.click()
    rel = pd.read_csv(target2)
    assert rel["fk"].min() >= 3 and (target2.stat().st_mode & 0o777) == 0o600
    np.testing.assert_array_equal(rel["individual_risk"], panel.report("release").individual_risk)
    # the input file is never overwritten: a one-line message instead
    monkeypatch.setattr(
        RP.QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(free1_sample_path()), ""))
    )
    before = free1_sample_path().read_bytes()
    panel.export_button.click()
    assert free1_sample_path().read_bytes() == before
    assert "failed" in panel.banner.text() and "\n" not in panel.banner.text()
    panel.runner.cancel()


@pytest.mark.parametrize("ext", ["sav", "dta"])
def test_value_labels_of_a_labelled_file_in_riskiest_combinations(qtbot, window, tmp_path, ext):
    """SPSS / Stata value labels are shown next to the codes of the riskiest key combinations."""
    pyreadstat = pytest.importorskip("pyreadstat")
    rng = np.random.default_rng(3)
    n = 200
    df = pd.DataFrame(
        {
            "sex": rng.integers(1, 3, n).astype(float),
            "region": rng.integers(1, 5, n).astype(float),
            "age": rng.integers(20, 60, n).astype(float),
            "w": rng.uniform(10, 50, n).round(1),
        }
    )
    labels = {
        "sex": {1.0: "male", 2.0: "female"},
        "region": {1.0: "North", 2.0: "East", 3.0: "South", 4.0: "West"},
    }
    path = tmp_path / f"survey.{ext}"
    if ext == "sav":
        pyreadstat.write_sav(df, str(path), variable_value_labels=labels)
    else:
        pyreadstat.write_dta(df, str(path), variable_value_labels=labels)
    win = window
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.controller.open_file(str(path), confirm=False)
    st = win.state
    assert st.input_meta is not None and st.input_meta.value_labels.get("sex")
    st.set_roles({"sex": "k-quasi", "region": "k-quasi", "age": "k-quasi", "w": "weight"})
    panel = win.risk_panel
    qtbot.waitUntil(
        lambda: (
            not panel.pending()
            and panel.report() is not None
            and panel.report().keys == ["sex", "region", "age"]
        ),
        timeout=20000,
    )
    heads = [panel.combos.horizontalHeaderItem(j).text() for j in range(panel.combos.columnCount())]
    top = panel.result["original_top"]
    assert panel.combos.rowCount() == len(top) > 0
    for r in range(panel.combos.rowCount()):
        sex = panel.combos.item(r, heads.index("sex")).text()
        reg = panel.combos.item(r, heads.index("region")).text()
        age = panel.combos.item(r, heads.index("age")).text()
        code_s, code_r = int(top["sex"].iloc[r]), int(top["region"].iloc[r])
        assert sex == f"{code_s} = {labels['sex'][code_s]}"
        assert reg == f"{code_r} = {labels['region'][code_r]}"
        assert "=" not in age  # no labels for age: the code alone


# ---------------------------------------------------------------- issue 23: ARX models, SUDA2


def test_arx_models_rows_equal_the_engine(qtbot, window):
    panel = _open_free1(qtbot, window)
    m = engine.assess_risk(window.state.df, KEYS, weight="WEIGHT").reid_models()
    assert panel.figure("reidentification_models.prosecutor.highest") == RP.fmt_float(
        m["prosecutor"]["highest"]
    )
    assert panel.figure("reidentification_models.journalist.average") == RP.fmt_float(
        m["journalist"]["average"]
    )
    assert panel.figure("reidentification_models.marketer.average") == RP.fmt_float(m["marketer"]["average"])


def test_suda2_on_demand_lists_top_records_with_their_msus(qtbot):
    df = pd.read_csv(free1_sample_path())
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    st.set_data(df, str(free1_sample_path()))
    st.set_roles(FREE1_ROLES)
    _wait(qtbot, panel)
    assert panel.suda_result is None  # on demand only
    panel.start_suda()
    qtbot.waitUntil(lambda: panel.suda_result is not None and not panel.suda_runner.busy, timeout=30000)
    ref = pd.read_csv(free1_sample_path().parent / "free1_suda2_per_record.csv")
    res = panel.suda_result
    np.testing.assert_allclose(res.dis, ref["suda_dis"], rtol=1e-9, atol=0)
    assert panel.suda_table.rowCount() == RP.TOP_SUDA_RECORDS
    top = int(panel.suda_table.item(0, 0).text()) - 1
    assert res.dis[top] == res.dis.max()
    msus = panel.suda_table.item(0, 3).text()
    assert msus and all("=" in part for part in msus.split("; "))
    assert "510 of 4,000 records" in panel.suda_label.text()
    assert panel.suda_button.isEnabled() and not panel.suda_cancel.isEnabled()
    st.set_roles({**FREE1_ROLES, "AGE": "other"})  # roles changed: the result is dropped
    assert panel.suda_result is None and panel.suda_table.rowCount() == 0


def test_suda2_cancel_leaves_no_result(qtbot, monkeypatch):
    import threading

    gate = threading.Event()

    def slow(df, keys, **kw):
        while not gate.wait(0.01):
            kw["check_cancel"]()
        raise AssertionError("not cancelled")

    monkeypatch.setattr(RP, "suda2", slow)
    df = pd.read_csv(free1_sample_path())
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    st.set_data(df, str(free1_sample_path()))
    st.set_roles(FREE1_ROLES)
    _wait(qtbot, panel)
    panel.start_suda()
    assert panel.suda_cancel.isEnabled() and not panel.suda_button.isEnabled()
    panel.cancel_suda()
    assert "cancelled" in panel.suda_label.text()
    assert panel.suda_runner.wait(10)
    gate.set()
    assert panel.suda_result is None and panel.suda_button.isEnabled()


def test_suda2_bad_max_size_is_one_line(qtbot):
    df = pd.read_csv(free1_sample_path())
    st = AppState()
    panel = RP.RiskPanel(st)
    qtbot.addWidget(panel)
    st.set_data(df, str(free1_sample_path()))
    st.set_roles(FREE1_ROLES)
    _wait(qtbot, panel)
    panel.suda_max_size.setValue(40)  # more than the 6 keys
    panel.start_suda()
    qtbot.waitUntil(lambda: not panel.suda_runner.busy, timeout=10000)
    qtbot.waitUntil(lambda: "suda_max_size" in panel.banner.text(), timeout=10000)
    assert panel.suda_result is None


def test_the_risk_panel_draws_its_table_and_histogram_in_later_turns(qtbot, window):
    """Issue 27.4: showing a risk result fills the figures at once, the riskiest combinations
    and the histogram each in a later turn of the event loop (pending() until drawn); a newer
    result drops what was left to draw of the older one.
    """
    panel = _open_free1(qtbot, window)
    out = panel.result
    assert panel.hist.getPlotItem().listDataItems() or panel.hist.getPlotItem().items
    panel._clear()
    assert not panel.pending()
    updated = []
    panel.sig_updated.connect(lambda: updated.append(1))
    panel._show(out)
    assert panel.pending() and panel.combos.rowCount() == 0 and not updated  # not yet
    assert panel.figures.rowCount() > 0  # the figures at once
    qtbot.waitUntil(lambda: not panel.pending(), timeout=5000)
    assert panel.combos.rowCount() > 0 and updated == [1]
    assert any(isinstance(it, pg.BarGraphItem) for it in panel.hist.getPlotItem().items)
    panel._show(out)
    panel._clear()  # before the drawing: nothing of the dropped result is drawn
    qtbot.wait(100)
    assert panel.combos.rowCount() == 0 and not panel.pending()
