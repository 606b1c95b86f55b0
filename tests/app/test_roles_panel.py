"""The attributes (roles) panel as a user drives it: model/view editing, types, undo/redo,
hierarchy generation through the engine, wide files, opening another file (issues 9, 10, 11, 15).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import Qt

from dpstudio import engine
from dpstudio.app.models.roles_model import C_HIER, C_LO, C_ROLE, C_TYPE


@pytest.fixture
def survey():
    rng = np.random.default_rng(7)
    n = 300
    return pd.DataFrame(
        {
            "SEX": rng.integers(1, 3, n),  # codes: suggested categorical
            "AGE": rng.integers(18, 90, n),
            "INCOME": rng.normal(3000, 500, n).round(2),
            "REGION": rng.choice(["north", "south", "east"], n),
        }
    )


def _edit_with_editor(qtbot, rp, column: str, cell: int, value) -> None:
    """Open the delegate's editor on the cell (as a double-click does), pick ``value``."""
    rp.delegate.popup = False
    idx = rp.model.index(rp.model.row_of(column), cell)
    rp.table.setCurrentIndex(idx)
    rp.table.edit(idx)
    ed = rp.table.indexWidget(idx)
    assert ed is not None, "no editor opened"
    i = ed.findData(value)
    assert i >= 0
    ed.setCurrentIndex(i)
    ed.activated.emit(i)  # the user picks the item: written at once
    qtbot.waitUntil(lambda: rp.table.indexWidget(idx) is None, timeout=2000)


def test_role_edit_through_the_delegate_undo_redo(qtbot, window, survey):
    win = window
    st, rp = win.state, win.roles_panel
    st.set_data(survey, None)
    assert not win.act_undo.isEnabled()
    _edit_with_editor(qtbot, rp, "AGE", C_ROLE, "k-quasi")
    assert st.roles["AGE"] == "k-quasi"
    assert rp.model.data(rp.model.index(rp.model.row_of("AGE"), C_ROLE)).startswith("k-quasi-identifier")
    assert win.act_undo.isEnabled() and "AGE" in win.act_undo.text()
    win.act_undo.trigger()
    assert st.roles["AGE"] == "other"
    assert rp.model.data(rp.model.index(rp.model.row_of("AGE"), C_ROLE)).startswith("Other")
    win.act_redo.trigger()
    assert st.roles["AGE"] == "k-quasi"
    # the standard shortcuts
    assert win.act_undo.shortcut().matches(Qt.Modifier.CTRL | Qt.Key.Key_Z).name == "ExactMatch"


def test_bulk_role_change_is_one_undo_step(qtbot, window, survey):
    win = window
    st, rp = win.state, win.roles_panel
    st.set_data(survey, None)
    rp.set_roles({"SEX": "k-quasi", "AGE": "k-quasi"}, "preset")
    rp.table.selectAll()
    rp.set_selected_role("eps-quasi")  # four columns, one step
    assert set(st.roles.values()) == {"eps-quasi"}
    assert st.undo_stack.count() == 2
    win.act_undo.trigger()
    assert st.roles == {"SEX": "k-quasi", "AGE": "k-quasi", "INCOME": "other", "REGION": "other"}
    rp.reset_roles()  # "All columns to Other": one step
    assert set(st.roles.values()) == {"other"}
    win.act_undo.trigger()
    assert st.roles["SEX"] == "k-quasi" and st.roles["AGE"] == "k-quasi"


def test_undo_of_domain_type_and_hierarchy(qtbot, window, survey):
    win = window
    st, rp = win.state, win.roles_panel
    st.set_data(survey.assign(CODE=survey["AGE"].astype(str).str.zfill(4)), None)
    rp.edit_cell("INCOME", C_LO, "0")
    rp.edit_cell("INCOME", 4, "150000")
    assert st.domains["INCOME"] == (0.0, 150000.0)
    rp.edit_cell("CODE", C_TYPE, "numeric")  # text -> numbers
    assert pd.api.types.is_numeric_dtype(st.df["CODE"])
    assert rp._generate_hierarchy("AGE")
    assert "AGE" in st.hierarchies
    win.act_undo.trigger()  # the hierarchy
    assert "AGE" not in st.hierarchies and "AGE" not in st.hierarchy_sources
    win.act_undo.trigger()  # the type: the text as read comes back ('0042', not 42)
    assert st.df["CODE"].tolist() == survey["AGE"].astype(str).str.zfill(4).tolist()
    assert "CODE" not in st.types
    win.act_undo.trigger()  # the domain (one step for the pair of bounds)
    assert "INCOME" not in st.domains
    assert rp.model.data(rp.model.index(rp.model.row_of("INCOME"), C_LO)) == ""
    for _ in range(3):
        win.act_redo.trigger()
    assert st.domains["INCOME"] == (0.0, 150000.0) and st.types["CODE"] == "numeric"
    assert "AGE" in st.hierarchies


def test_loading_another_file_clears_the_undo_stack(qtbot, window, survey):
    st = window.state
    st.set_data(survey, None)
    window.roles_panel.set_roles({"AGE": "k-quasi"})
    assert st.undo_stack.canUndo()
    st.set_data(survey.copy(), None)
    assert not st.undo_stack.canUndo() and st.undo_stack.count() == 0


def test_type_column_shows_the_suggestion_and_stores_the_choice(qtbot, window, survey):
    win = window
    st, rp = win.state, win.roles_panel
    st.set_data(survey, None)
    m = rp.model
    sex = m.index(m.row_of("SEX"), C_TYPE)
    inc = m.index(m.row_of("INCOME"), C_TYPE)
    assert m.data(sex).startswith("categorical (suggested)")  # integer codes, ≤ 20 values
    assert m.data(sex, Qt.ItemDataRole.FontRole).italic()
    assert m.data(inc).startswith("numeric (suggested)")
    assert st.types == {}  # a suggestion is not a choice
    _edit_with_editor(qtbot, rp, "SEX", C_TYPE, "ordinal")
    assert st.types == {"SEX": "ordinal"} and st.recipe.types == {"SEX": "ordinal"}
    assert m.data(sex).startswith("ordinal") and "suggested" not in m.data(sex)
    assert not m.data(sex, Qt.ItemDataRole.FontRole)
    assert st.df["SEX"].equals(survey["SEX"])  # the codes are not rewritten
    # the run gets the type (numeric-only methods then refuse the column)
    assert win.controller._engine_params({})["types"] == {"SEX": "ordinal"}
    rp.table.selectAll()
    rp.accept_suggested_types()  # one step; the user's own choice is kept
    # whole numbers are suggested integer (issue 21 §3: a suggestion until accepted)
    assert st.types == {"SEX": "ordinal", "AGE": "integer", "INCOME": "numeric", "REGION": "categorical"}
    win.act_undo.trigger()
    assert st.types == {"SEX": "ordinal"}


def test_categorical_type_makes_mdav_not_applicable_before_protect(qtbot, window, survey):
    """Issue 11 defect 3: a column the user typed categorical is never touched by a numeric-only
    method; the method tab says so, with the engine's reason, before Protect.
    """
    win = window
    st, rp, mp = win.state, win.roles_panel, win.method_panel
    st.set_data(survey[["SEX", "AGE", "INCOME"]], None)
    rp.set_roles({"SEX": "k-quasi", "AGE": "k-quasi"})
    mp.select_method("mdav")
    assert mp.protect_btn.isEnabled()
    rp.edit_cell("SEX", C_TYPE, "categorical")
    assert mp.current_method() == "mdav"
    why = mp.applicability_error()
    assert "'SEX'" in why and "categorical" in why and "mdav" in why
    assert not mp.protect_btn.isEnabled()
    with pytest.raises(engine.NotApplicableError) as exc:  # the same reason as the engine's refusal
        engine.protect(st.df, "mdav", st.active_roles(), types=st.types, k=3, seed=1)
    assert str(exc.value) in why
    listed = [mp.list.item(i).text() for i in range(mp.list.count())]
    assert any("MDAV" in t and "not applicable" in t for t in listed)
    win.act_undo.trigger()  # the suggestion again: mdav applies
    assert mp.protect_btn.isEnabled() and not mp.applicability_error()


def test_ten_thousand_columns_build_without_a_widget_per_column(qtbot, window):
    """Issue 15: one combo box per column froze the UI; the model/view table creates none."""
    st, rp = window.state, window.roles_panel
    df = pd.DataFrame(np.zeros((5, 10_000)), columns=[f"c{i}" for i in range(10_000)])
    st.set_data(df, None)
    m = rp.model
    assert m.rowCount() == 10_000
    assert m.data(m.index(9_999, 0)) == "c9999"
    assert rp.table.indexWidget(m.index(9_999, C_ROLE)) is None
    from PySide6.QtWidgets import QComboBox, QLineEdit

    assert rp.table.findChildren(QComboBox) == [] and rp.table.findChildren(QLineEdit) == []
    rp.select_column("c9999")
    assert rp.selected_columns() == ["c9999"]
    rp.set_selected_role("eps-quasi")
    assert st.roles["c9999"] == "eps-quasi" and rp.row_check("c9999")


def test_generated_hierarchy_is_the_engines_and_the_clis(qtbot, window, tmp_path, survey):
    """Issue 9 item 6: one generator. The app's "Generate" is the hierarchy the engine builds
    when none is given, so the app and ``dpstudio protect`` (without --hierarchy) agree.
    """
    from dpstudio.app.widgets.roles_panel import generate_hierarchy
    from dpstudio.cli import main
    from dpstudio.engine.algorithms.generalization import resolve_hierarchies
    from dpstudio.engine.hierarchies.build import value_strings

    st, rp = window.state, window.roles_panel
    df = survey[["AGE", "REGION", "INCOME"]]
    st.set_data(df, None)
    for c in ("AGE", "REGION"):
        assert rp._generate_hierarchy(c)
        ref = resolve_hierarchies(df, [c], None)[c]
        assert np.array_equal(st.hierarchies[c].table, ref.table)
        assert np.array_equal(generate_hierarchy(df[c], c).table, ref.table)
    st.set_roles({"AGE": "k-quasi", "REGION": "k-quasi"})
    kw = dict(k=5, epsilon=1.0, seed=11)
    app = engine.protect(df, "k-eps", st.active_roles(), hierarchies=st.active_hierarchies(), **kw)
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    out = tmp_path / "out.csv"
    rc = main(
        [
            "protect",
            str(src),
            str(out),
            "--method",
            "k-eps",
            "--k",
            "5",
            "--epsilon",
            "1",
            "--seed",
            "11",
            "--role",
            "AGE=k-quasi",
            "--role",
            "REGION=k-quasi",
            "--no-measures",
        ]
    )
    assert rc == 0
    cli = pd.read_csv(out, dtype=str, keep_default_na=False)
    for c in ("AGE", "REGION"):
        got = [x if x is not None else "" for x in value_strings(app.data[c])]
        assert cli[c].tolist() == got


def test_opening_another_file_asks_and_keeps_roles_of_same_names(
    qtbot, window, tmp_path, survey, monkeypatch
):
    win = window
    st = win.state
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    survey.to_csv(a, index=False)
    survey.rename(columns={"INCOME": "WAGE"}).to_csv(b, index=False)
    win.controller.confirm_csv = None
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.open_data(str(a))  # no roles yet: no question
    win.roles_panel.set_roles({"AGE": "k-quasi", "INCOME": "eps-quasi"})
    st.set_type("SEX", "categorical")
    asked = []
    monkeypatch.setattr(win, "_ask_keep_roles", lambda p: asked.append(p) or None)
    assert not win.open_data(str(b))  # cancelled: nothing changes
    assert st.path == str(a) and st.roles["AGE"] == "k-quasi"
    monkeypatch.setattr(win, "_ask_keep_roles", lambda p: asked.append(p) or True)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.open_data(str(b))
    qtbot.waitUntil(lambda: st.roles.get("AGE") == "k-quasi", timeout=5000)
    assert st.path == str(b) and len(asked) == 2
    assert st.roles == {"SEX": "other", "AGE": "k-quasi", "WAGE": "other", "REGION": "other"}
    assert st.types == {"SEX": "categorical"}
    monkeypatch.setattr(win, "_ask_keep_roles", lambda p: False)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        assert win.open_data(str(a))
    assert set(st.roles.values()) == {"other"}


def test_data_tab_next_step_follows_the_roles(qtbot, window, survey):
    win = window
    win.state.set_data(survey, None)
    assert "give the attributes their roles" in win.data_panel.info.text()
    win.state.set_roles({"AGE": "k-quasi"})  # e.g. a project with roles was applied
    assert "give the attributes their roles" not in win.data_panel.info.text()
    assert "1 attribute(s) have a role" in win.data_panel.info.text()


def test_value_labels_shown_where_codes_are(qtbot, window, survey):
    from dpstudio.engine.io import TableMeta

    st, rp = window.state, window.roles_panel
    meta = TableMeta(value_labels={"SEX": {1: "male", 2: "female"}}, column_labels={"SEX": "Sex of person"})
    st.set_data(survey, None, meta)
    rp.select_column("SEX")
    tip = rp.hist.toolTip()
    assert "1 male" in tip and "2 female" in tip
    assert rp.stat_labels["Label"].text() == "Sex of person"
    m = rp.model
    assert "1 = male" in m.data(m.index(m.row_of("SEX"), 0), Qt.ItemDataRole.ToolTipRole)


def test_hierarchy_cell_offers_the_menu_and_the_check_column_speaks(qtbot, window, survey):
    st, rp = window.state, window.roles_panel
    st.set_data(survey, None)
    m = rp.model
    menu = rp._hierarchy_menu("AGE")
    texts = [a.text() for a in menu.actions()]
    assert any("Generate" in t for t in texts) and any("Load ARX" in t for t in texts)
    rp.set_roles({"SEX": "k-quasi"})
    assert "looks categorical" in rp.row_check("SEX")
    rp.edit_cell("SEX", C_TYPE, "categorical")
    assert "typed categorical" in rp.row_check("SEX")
    assert m.data(m.index(m.row_of("AGE"), C_HIER)).startswith("none")
