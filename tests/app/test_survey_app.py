"""Issue 24 in the app: a wiped k-quasi said before and after a run with the way out (the
hierarchy builder), the builder itself (kinds, preview, ARX CSV the CLI reads), declared
types shown.  On an SPSS file with value labels made here with pyreadstat.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pyreadstat = pytest.importorskip("pyreadstat")

PID = {
    0.0: "Strong Democrat",
    1.0: "Weak Democrat",
    2.0: "Ind-Democrat",
    3.0: "Independent",
    4.0: "Ind-Republican",
    5.0: "Weak Republican",
    6.0: "Strong Republican",
}


def _anes(path, n=918, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n).astype(float),
            "educ": rng.integers(1, 8, n).astype(float),
            "PID": rng.integers(0, 7, n).astype(float),
            "income": rng.integers(0, 150_000, n).astype(float),
        }
    )
    pyreadstat.write_sav(
        df,
        str(path),
        variable_value_labels={"PID": PID},
        variable_format={"income": "F8.0", "age": "F3.0"},
        variable_measure={"PID": "nominal", "age": "scale", "income": "scale", "educ": "scale"},
    )
    return df


def _idle(qtbot, win, timeout=60000):
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=timeout)
    qtbot.wait(20)


def _open(qtbot, win, path):
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        assert win.open_data(str(path))


def test_wiped_k_quasi_before_and_after_the_run(qtbot, window, tmp_path):
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    st = window.state
    # declared in the file: shown as such (issue 24 §2)
    assert st.column_type("income") == ("integer", False) and st.type_origin("income") == "from the file"
    assert st.column_type("PID")[0] == "categorical"
    window.roles_panel.set_roles(
        {"age": "k-quasi", "PID": "k-quasi", "educ": "k-quasi", "income": "eps-quasi"}
    )
    window.method_panel.select_method("k-eps")
    window.method_panel.set_values({"k": 5, "epsilon": 1.0})
    mp = window.method_panel
    qtbot.waitUntil(lambda: not mp.preview_pending(), timeout=30000)
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    res = st.result
    text = window.results_panel.generalisation.text()
    assert "Generalisation of the k-quasi-identifiers" in text
    wiped = [c for c in ("age", "educ", "PID") if (res.data[c].astype(str) == "*").all()]
    assert wiped  # the reported case: a k-quasi '*' in every record
    for c in wiped:
        assert f"build:{c}" in text and "fully generalised" in text
    banner = window.results_panel.warn.text()
    assert "generalised to the top" in banner
    # the link opens the builder for that column
    opened = []
    window.open_hierarchy_builder = lambda c: opened.append(c)  # (the signal is bound already)
    window.results_panel.sig_build_hierarchy.disconnect()
    window.results_panel.sig_build_hierarchy.connect(window.open_hierarchy_builder)
    window.results_panel._on_generalisation_link(f"build:{wiped[0]}")
    assert opened == [wiped[0]]


def test_pre_run_warning_names_the_column(qtbot, window, tmp_path):
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    window.state.set_type("PID", "categorical")
    df = window.state.df
    window.state.df = df.assign(PID=df["PID"].map(lambda v: PID[float(v)]))  # as text: no intervals
    window.roles_panel.set_roles({"PID": "k-quasi", "income": "eps-quasi"})
    mp = window.method_panel
    mp.select_method("k-eps")
    mp.set_values({"k": 500, "epsilon": 1.0})
    qtbot.waitUntil(lambda: not mp.preview_pending(), timeout=30000)
    qtbot.waitUntil(lambda: mp.wipe_banner.isVisible() or bool(mp.wipe_banner.label.text()), timeout=10000)
    t = mp.wipe_banner.label.text()
    assert "'PID' will be '*' in every record" in t and "build:PID" in t


def test_builder_breaks_groups_and_the_cli_reads_its_file(qtbot, window, tmp_path):
    from dpstudio import cli

    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    b = window.hierarchy_builder("age")
    qtbot.addWidget(b)
    b.set_kind("breaks")
    b.breaks.setText("18, 30, 45, 65")
    b.rebuild()
    assert b.hierarchy is not None and b.hierarchy.height == 5
    labels = [b.levels.item(1, 4).text()]
    assert labels == ["18-29, 30-44, 45-64, ≥65"]
    # level 0 has more values than the preview lists: it says so (it read as the whole level)
    n0 = int(b.levels.item(0, 1).text().replace(",", ""))
    assert n0 > 6 and b.levels.item(0, 4).text().endswith(", …")
    assert len(b.levels.item(0, 4).text().split(", ")) == 7  # six values and the ellipsis
    assert b.counts.rowCount() == 4  # level 1's groups and their counts
    total = sum(int(b.counts.item(r, 1).text().replace(",", "")) for r in range(4))
    assert total == 918
    # each level's k: smallest group and records below k, as the engine counts them
    from dpstudio.engine.hierarchies.build import level_table

    lt = level_table(window.state.df["age"], b.hierarchy, b.k.value())
    assert b.levels.item(1, 2).text() == f"{int(lt['smallest group'][1]):,}"
    out = tmp_path / "age.csv"
    assert b.save_and_use(str(out))
    assert "age" in window.state.hierarchies and window.state.hierarchy_sources["age"] == {"path": str(out)}
    # the CLI reads the same file
    rc = cli.main(
        [
            "protect",
            str(tmp_path / "anes.sav"),
            str(tmp_path / "o.csv"),
            "--method",
            "k-eps",
            "--k",
            "5",
            "--role",
            "age=k-quasi",
            "--role",
            "PID=k-quasi",
            "--hierarchy",
            f"age={out}",
            "--seed",
            "1",
        ]
    )
    assert rc == 0
    rel = pd.read_csv(tmp_path / "o.csv", dtype=str)
    assert set(rel["age"]) <= {"18-29", "30-44", "45-64", "≥65", "<30", "30-64", "<65", "*"}
    # category groups by the mapping table, with the value labels shown
    g = window.hierarchy_builder("PID")
    qtbot.addWidget(g)
    assert g.kind.currentData() == "groups"  # labelled codes
    assert g.mapping.item(0, 1).text() == "Strong Democrat"
    g.set_mapping(
        {
            "0": "Democrat",
            "1": "Democrat",
            "2": "Independent",
            "3": "Independent",
            "4": "Independent",
            "5": "Republican",
            "6": "Republican",
        }
    )
    assert g.hierarchy.height == 3 and g.levels.item(1, 1).text() == "3"


def test_value_labels_toggle_in_every_view(qtbot, window, tmp_path):
    """Issue 24 §3: PID showed 0–6, never 'Strong Democrat'."""
    df0 = _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    st = window.state
    col = list(st.df.columns).index("PID")
    m = window.data_panel.model
    row = int(np.flatnonzero(df0["PID"].to_numpy() == 0)[0])
    cell = lambda: m.data(m.index(row, col))  # noqa: E731
    assert window.data_panel.labels_cb.isVisibleTo(window) and st.show_labels
    assert cell() == "Strong Democrat"
    window.labels_action.trigger()  # View → Value labels (Ctrl+L) off
    assert not st.show_labels and cell() == "0"
    assert not window.release_view.labels_cb.isChecked() and not window.risk_panel.labels_cb.isChecked()
    # Attributes: the histogram's categories
    rp = window.roles_panel
    rp.table.selectRow(col)
    rp._update_stats()
    assert "Strong Democrat" not in rp.hist.toolTip()
    window.roles_panel.labels_cb.setChecked(True)
    assert st.show_labels and cell() == "Strong Democrat"
    assert "Strong Democrat" in rp.hist.toolTip()
    # Release: records and category frequencies, original vs release
    window.roles_panel.set_roles({"PID": "k-quasi", "educ": "k-quasi"})
    window.method_panel.select_method("k-eps")
    window.method_panel.set_values({"k": 3})
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    rv = window.release_view
    assert "PID" in rv.categorical_attributes()
    rv.select_frequency_attribute("PID")
    cats = [r[0] for r in rv.frequency_rows()]
    assert any("Strong Democrat" in c for c in cats), cats
    rm = rv.release_model
    pcol = list(st.result.data.columns).index("PID")
    texts = {rm.data(rm.index(r, pcol)) for r in range(rm.rowCount())}
    assert "Strong Democrat" in texts or "*" in texts
    window.labels_action.trigger()
    assert not any("Strong Democrat" in r[0] for r in rv.frequency_rows())
    # Risk: the key combinations table
    rk = window.risk_panel
    assert not rk.labels_cb.isChecked()


def _with_missing(path, n=600, seed=4):
    rng = np.random.default_rng(seed)
    econ = rng.integers(1, 5, n).astype(float)
    age = rng.integers(0, 90, n).astype(float)
    econ[age < 16] = np.nan  # children: no economic status
    df = pd.DataFrame({"age": age, "econ": econ, "income": rng.integers(0, 90_000, n).astype(float)})
    pyreadstat.write_sav(
        df,
        str(path),
        variable_value_labels={"econ": {1.0: "employed", 2.0: "unemployed", 3.0: "retired", 4.0: "other"}},
    )
    return df


def test_missing_values_said_in_the_apps_words_before_the_run(qtbot, window, tmp_path):
    """Issue 24 §4: missing values in a categorical key were a red 'impute or drop' problem
    under local suppression (which keeps them, as sdcMicro), and a method refusing them failed
    only after the run, in the command line's words."""
    from dpstudio.app.models.roles_model import check_column

    df = _with_missing(tmp_path / "m.sav")
    _open(qtbot, window, tmp_path / "m.sav")
    st = window.state
    window.roles_panel.set_roles({"econ": "k-quasi", "age": "k-quasi"})
    window.method_panel.select_method("local-suppression")
    msg, level = check_column(st, "econ")
    assert level == "info" and "matching any value" in msg
    assert window.roles_panel.model.problems() == 0
    # a method that refuses them: said at once, in the app's words
    window.roles_panel.set_roles({"econ": "other", "age": "other", "income": "eps-quasi"})
    st.set_domain("income", (0, 100_000))
    df2 = st.df.copy()
    df2.loc[::7, "income"] = np.nan
    st.df = df2
    st.stats["income"] = type(st.stats["income"])(
        **{**st.stats["income"].__dict__, "missing": int(df2["income"].isna().sum())}
    )
    window.method_panel.select_method("laplace")
    window.method_panel.set_values({"epsilon": 1.0})
    msg, level = check_column(st, "income")
    assert level == "error" and "drop records with missing values" in msg and "--drop" not in msg
    banner = window.method_panel.missing_banner.text()
    assert "drop records with missing values" in banner and "--drop-missing" not in banner
    errors = []
    window.controller.sig_error.connect(lambda m, _d: errors.append(m))
    assert window.controller.run_protect() is False  # refused before any work
    assert not window.controller.busy
    assert errors and "Advanced parameters" in errors[-1] and "drop_missing=True" not in errors[-1]
    # ticked: the run goes ahead without those records
    window.method_panel.set_values({"epsilon": 1.0, "drop_missing": True})
    assert window.method_panel.missing_banner.text() == ""
    assert check_column(st, "income")[1] == "warning"
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    assert len(st.result.data) == int(df2["income"].notna().sum())
    del df


def test_results_fit_local_suppression(qtbot, window, tmp_path):
    """Issue 24 §7: local suppression's results listed raw keys (suppressed_cells, global_risk)
    and Δ mean for columns typed categorical."""
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    window.roles_panel.set_roles({"age": "k-quasi", "educ": "k-quasi", "PID": "k-quasi"})
    window.roles_panel.set_types({"educ": "categorical", "PID": "categorical"})
    window.method_panel.select_method("local-suppression")
    window.method_panel.set_values({"k": 3})
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    t = window.results_panel.measures
    names = [t.item(i, 0).text() for i in range(t.rowCount())]
    assert names and not [n for n in names if "_" in n], names
    assert "Key values suppressed (cells)" in names and "Global risk (mean individual risk)" in names
    pa = window.results_panel.per_attr
    rows = [pa.verticalHeaderItem(i).text() for i in range(pa.rowCount())]
    heads = [pa.horizontalHeaderItem(j).text() for j in range(pa.columnCount())]
    for i, r in enumerate(rows):
        if r in ("educ", "PID"):
            for j, h in enumerate(heads):
                if h.startswith("Δ"):
                    assert pa.item(i, j).text() in ("", "nan", "–", "n/a"), (r, h, pa.item(i, j).text())
    rl = names.index("Record linkage RL (%)")
    reading = t.item(rl, 2).text()
    assert "× chance" not in reading and "-anonymous" in reading


def test_polish_issue24_8(qtbot, window, tmp_path):
    import os
    import subprocess
    import sys

    from dpstudio.app.main import display_problem, x_display_answers
    from dpstudio.app.widgets.help_dialog import open_help
    from dpstudio.app.widgets.history_panel import plane_label_groups

    # candidate labels: neighbouring points share one label, far ones keep their own
    groups = plane_label_groups([(1, 0.10, 5.0), (2, 0.50, 40.0), (3, 0.51, 40.2), (4, 2.0, 80.0)])
    assert [g[0] for g in groups] == ["#1", "#2, #3", "#4"]
    # the glossary opens with words for users
    dlg = open_help(window, "glossary.md")
    text = dlg.browser.toPlainText()
    assert "Each entry is one" not in text and "For developers" not in text
    assert text.strip().splitlines()[0].strip() == "Glossary"
    assert "Record linkage (RL)" in text  # the entries are all there
    dlg.close()
    # no '*' in the title right after start (the app opens the sample by itself)
    from dpstudio.app.main import start_clean

    start_clean(window)
    with qtbot.waitSignal(window.sig_loaded, timeout=30000):
        window.controller.open_sample()
    qtbot.wait(50)
    assert "*" not in window.windowTitle() and not window.state.dirty
    window.roles_panel.set_roles({"FICA": "eps-quasi"})
    assert window.state.dirty and "*" in window.windowTitle()
    window.roles_panel.set_roles({"FICA": "other"})
    window.state.mark_dirty(False)
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    # the full check message next to the statistics
    rp = window.roles_panel
    rp.set_roles({"age": "k-quasi"})
    rp.table.selectRow(list(window.state.df.columns).index("age"))
    rp._update_stats()
    assert rp.stat_labels["Check"].text() == rp.model.check("age")[0]
    # DISPLAY set but no X server: a clear line, exit 2 (was: abort, exit 134)
    assert display_problem({"DISPLAY": ":0"}, "linux", probe=lambda d: True) is None
    msg = display_problem({"DISPLAY": ":57"}, "linux", probe=lambda d: False)
    assert msg and "':57'" in msg and "QT_QPA_PLATFORM=offscreen" in msg
    assert x_display_answers(":987") is False and x_display_answers("nonsense") is False
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env["DISPLAY"] = ":987"
    p = subprocess.run(
        [sys.executable, "-m", "dpstudio"], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2, (p.returncode, p.stderr[-400:])
    assert "no X server accepts a connection" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_levels_weighed_by_ola(qtbot, window, tmp_path):
    """Issue 24 (missing piece): the generalisation levels tried and chosen, with their
    suppression and loss; the chosen node is the least-loss one within the limit."""
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    window.roles_panel.set_roles({"age": "k-quasi", "educ": "k-quasi", "PID": "k-quasi"})
    window.method_panel.select_method("k-eps")
    window.method_panel.set_values({"k": 5})
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    rp = window.results_panel
    assert rp.lattice_btn.isVisibleTo(window)
    dlg = rp.open_lattice()
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.frame is not None, timeout=60000)
    t = dlg.frame
    gen = window.state.result.info["generalisation"]
    chosen = t[t["chosen"]]
    assert len(chosen) == 1
    assert tuple(int(chosen.iloc[0][c]) for c in ("age", "educ", "PID")) == tuple(gen["node"])
    ok = t[t["within limit"]]
    assert abs(float(chosen.iloc[0]["loss"]) - ok["loss"].min()) < 1e-12  # OLA's optimum
    assert abs(float(chosen.iloc[0]["loss"]) - gen["loss"]) < 1e-12
    assert int(chosen.iloc[0]["suppressed"]) == gen["suppressed_records"]
    assert dlg.table.rowCount() == len(t) and "within the suppression limit" in dlg.note.text()
