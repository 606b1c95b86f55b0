"""Issue 9 problem 4 and issue 8 follow-ups: one source of truth (panel -> AppState ->
controller -> engine), a fresh seed per unpinned Protect, precision passed through, exact
domain bounds, the recipe's round trip and migrations."""

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio import engine
from dpstudio.app import compute, project
from dpstudio.engine.random import STRONG_SEED
from dpstudio.engine.recipe import SCHEMA_VERSION, Recipe, migrate

QUASI = ["FICA", "FEDTAX"]


def _census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    win.state.set_roles({c: "eps-quasi" for c in QUASI} | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()


def _spy_protect(monkeypatch):
    """Record the arguments each Protect run gives the engine."""
    calls = []
    real = compute.protect_and_evaluate

    def spy(df, method, roles, domains, hier, seed, params, **kw):
        calls.append({"method": method, "seed": seed, "params": dict(params), "domains": dict(domains)})
        return real(df, method, roles, domains, hier, seed, params, **kw)

    monkeypatch.setattr(compute, "protect_and_evaluate", spy)
    return calls


def _protect(qtbot, win):
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)


def test_panel_edit_goes_through_state_to_protect(qtbot, window, monkeypatch):
    win = window
    calls = _spy_protect(monkeypatch)
    _census(qtbot, win)
    mp = win.method_panel
    assert mp.select_method("ir-dp")
    assert win.state.recipe.method == "ir-dp"
    # the user edits k in the form: the recipe changes at once
    mp.fields["k"].editor.setValue(7)
    assert win.state.recipe.params["k"] == 7
    mp.fields["epsilon"].editor.setValue(2.5)
    assert win.state.recipe.params["epsilon"] == 2.5
    # the state changed elsewhere (a point of the curves, a project): the form follows
    win.state.update_params(k=9)
    assert mp.fields["k"].editor.value() == 9
    _protect(qtbot, win)
    assert calls[-1]["method"] == "ir-dp"
    assert calls[-1]["params"]["k"] == 9 and calls[-1]["params"]["epsilon"] == 2.5
    assert win.state.result.params["k"] == 9


def test_fresh_seed_per_unpinned_protect_and_pinned_reuse(qtbot, window, monkeypatch):
    win = window
    calls = _spy_protect(monkeypatch)
    _census(qtbot, win)
    win.method_panel.select_method("ir-dp")
    assert not win.state.recipe.seed_pinned
    _protect(qtbot, win)
    _protect(qtbot, win)
    s1, s2 = calls[-2]["seed"], calls[-1]["seed"]
    assert s1 != s2 and min(s1, s2) >= STRONG_SEED
    assert win.state.recipe.seed == s2 == win.state.result_recipe["seed"]  # what is recorded
    assert not win.state.result.data.equals(pd.DataFrame())  # a real release
    # typing a seed pins it: every run uses it, the releases repeat bit for bit
    win.method_panel.seed.setText(hex(STRONG_SEED + 12345))
    assert win.state.recipe.seed_pinned and win.method_panel.seed_pin.isChecked()
    _protect(qtbot, win)
    first = win.state.result.data.copy()
    _protect(qtbot, win)
    assert calls[-1]["seed"] == calls[-2]["seed"] == STRONG_SEED + 12345
    pd.testing.assert_frame_equal(first, win.state.result.data)
    # unpinning: fresh again
    win.method_panel.seed_pin.setChecked(False)
    _protect(qtbot, win)
    assert calls[-1]["seed"] != STRONG_SEED + 12345


def test_pinned_seed_reused_for_another_export_is_warned(qtbot, window, tmp_path):
    win = window
    _census(qtbot, win)
    win.method_panel.select_method("ir-dp")
    win.method_panel.seed.setText(hex(STRONG_SEED + 99))
    _protect(qtbot, win)
    assert win.controller.export(str(tmp_path / "a.csv"), fmt="csv")
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    (tmp_path / "x").mkdir()  # (beside a.csv, a.xlsx would take over a.csv's metadata: refused)
    assert win.controller.export(str(tmp_path / "x" / "a.xlsx"), fmt="xlsx")  # the same release
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    assert not any("already used" in m for m, _ in win.errors)
    win.state.update_params(k=8)  # another release, same pinned seed
    _protect(qtbot, win)
    assert win.controller.export(str(tmp_path / "b.csv"), fmt="csv")
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    assert any("already used for another exported release" in m for m, _ in win.errors)
    assert "⚠" in win.task_label.text()


def test_precision_typed_goes_to_protect_and_sweep(qtbot, window, monkeypatch):
    win = window
    calls = _spy_protect(monkeypatch)
    _census(qtbot, win)
    rp = win.roles_panel
    from dpstudio.app.models.roles_model import C_PREC

    cell = rp.model.index(rp.model.row_of("FICA"), C_PREC)
    assert rp.model.data(cell).startswith("auto:")  # the engine's default, shown greyed
    assert rp.edit_cell("FICA", C_PREC, "100")
    assert win.state.precision == {"FICA": 100.0}
    win.method_panel.select_method("ir-dp")
    _protect(qtbot, win)
    assert calls[-1]["params"]["precision"] == {"FICA": 100.0}
    vals = win.state.result.data["FICA"].to_numpy(dtype=float)
    assert np.all(np.mod(vals, 100.0) == 0)  # the release is on the typed grid
    # a bad precision is refused with one line, and blocks runs until corrected
    rp.edit_cell("FICA", C_PREC, "-3")
    assert "precision of column 'FICA'" in win.state.input_error()
    assert rp.model.data(cell) == "-3"  # what was typed stays, marked
    assert not win.controller.run_protect()
    assert "FICA" in win.errors[-1][0]
    rp.edit_cell("FICA", C_PREC, "")
    assert win.state.input_error() == "" and win.state.precision == {}


def test_domain_bounds_kept_exactly_as_typed(qtbot, window):
    """Issue 11 defect 2: bounds were shown with 6 significant digits and read back rounded."""
    win = window
    _census(qtbot, win)
    rp = win.roles_panel
    from dpstudio.app.models.roles_model import C_HI, C_LO

    m, r = rp.model, rp.model.row_of("FICA")
    rp.edit_cell("FICA", C_LO, "0.1")
    assert win.state.domains["FICA"][0] == 0.1  # the other bound (suggested) kept
    rp.edit_cell("FICA", C_HI, "123456789.25")
    assert win.state.domains["FICA"] == (0.1, 123456789.25)
    assert m.data(m.index(r, C_HI)) == "123456789.25"
    rp.edit_cell("FICA", C_LO, m.data(m.index(r, C_LO)))  # editing the other bound again changes nothing
    assert win.state.domains["FICA"] == (0.1, 123456789.25)
    win.state.set_domain("FICA", (0.0, 1234567.0))
    assert m.data(m.index(r, C_HI)) == "1234567" and m.data(m.index(r, C_LO)) == "0"
    rp.edit_cell("FICA", C_LO, "15382214")  # issue 11 defect 2: no 1.53822e+07
    assert m.data(m.index(r, C_LO)) == "15382214"


def test_guarantee_preview_is_the_release_sentence(qtbot, window):
    win = window
    _census(qtbot, win)
    mp = win.method_panel
    mp.select_method("ir-dp")
    mp.set_values({"k": 5, "epsilon": 1.0})
    qtbot.waitUntil(lambda: not mp.preview_pending(), timeout=10000)
    shown = mp.guarantee_text
    _protect(qtbot, win)
    assert win.state.result.guarantee == shown


def test_recipe_round_trip_keeps_unknown_keys_and_migrates(tmp_path):
    r = Recipe(
        input_path="x.csv",
        roles={"a": "eps-quasi", "b": "other"},
        types={"c": "text"},
        domains={"a": (0.1, 123456789.25)},
        precision={"a": 0.01},
        hierarchies={"c": {"generated": True}},
        method="ir-dp",
        params={"k": np.int64(5), "epsilon": 1.0},
        seed=2**127 + 3,
        seed_pinned=True,
        sweep={"ks": "2-5", "epsilons": "1", "repeats": 2},
        extra={"query_ledger": {"spent": [0.5, 0.25]}},
    )
    p = tmp_path / "r.dpsproj"
    project.save(p, r)
    back = project.load(p)
    assert back.to_dict() == r.to_dict()
    assert back.extra == {"query_ledger": {"spent": [0.5, 0.25]}}
    assert back.domains["a"] == (0.1, 123456789.25) and back.seed == 2**127 + 3
    # a key written by another tool meanwhile (dpstudio query) survives the app's save
    d = json.loads(p.read_text())
    d["query_ledger_v2"] = [1]
    p.write_text(json.dumps(d))
    project.save(p, back)
    assert json.loads(p.read_text())["query_ledger_v2"] == [1]
    # the public part never has the seed
    assert "seed" not in json.dumps(r.public_dict())


@pytest.mark.parametrize("schema,seed", [(1, 918273645), (2, hex(918273645)), (1, None)])
def test_recipe_migrates_schema_1_and_2(schema, seed):
    old = {
        "schema_version": schema,
        "input": {"path": "x.csv", "read_options": {}},
        "roles": {"FICA": "eps-quasi"},
        "method": "ir-dp",
        "params": {"k": 5},
        "query_ledger": {"n": 1},
    }
    if seed is not None:
        old["seed"] = seed
    m = migrate(old)
    assert m["schema_version"] == SCHEMA_VERSION == 3
    assert old["schema_version"] == schema  # not changed in place
    r = Recipe.from_dict(old)
    assert r.seed == (None if seed is None else 918273645)
    assert r.seed_pinned is (seed is not None)  # an old file's seed made its release
    assert r.precision == {} and r.extra == {"query_ledger": {"n": 1}}


def test_recipe_refuses_bad_values_with_one_line():
    with pytest.raises(engine.InputError, match="newer"):
        migrate({"schema_version": 99})
    with pytest.raises(engine.InputError, match="domain of column 'a'"):
        Recipe.from_dict({"schema_version": 3, "domains": {"a": [0, "x"]}})
    with pytest.raises(engine.InputError, match="precision of column 'a'"):
        Recipe.from_dict({"schema_version": 3, "precision": {"a": 0}})
    with pytest.raises(engine.InputError, match="seed"):
        Recipe.from_dict({"schema_version": 2, "seed": "0xzz"})


def test_record_order_is_a_labelled_choice_and_mdav_releases_in_random_order(qtbot, window):
    """Issue 21 §3: the form offers the record order with labelled values; the default is the
    keyed random order for every method (here mdav); keeping the input order says so in the
    guarantee preview and the release."""
    win = window
    _census(qtbot, win)
    win.state.set_roles({c: "k-quasi" for c in QUASI} | {"AFNLWGT": "identifier"})
    mp = win.method_panel
    assert mp.select_method("mdav")
    f = mp.fields["order"]
    labels = [f.editor.itemText(i) for i in range(f.editor.count())]
    assert labels == [
        "Random order (default)",
        "Keep input order (weakens the guarantee)",
        "Households as units, random order (household id needed)",
        "Households as units, members in input order (household id needed)",
    ]
    assert f.value() == "random"
    _protect(qtbot, win)
    res = win.state.result
    assert res.row_map is not None and not np.array_equal(res.row_map, np.sort(res.row_map))
    assert "random order" in res.guarantee
    mp.set_values({"order": "input"})
    assert not f.warning.isHidden() and "does not cover" in f.warning.text()
    qtbot.waitUntil(lambda: not mp.preview_pending(), timeout=10000)
    assert "INPUT ORDER" in mp.guarantee_text
    _protect(qtbot, win)
    assert "INPUT ORDER" in win.state.result.guarantee and win.state.result.row_map is None


def test_results_show_private_notes_apart_from_public_warnings(qtbot, window):
    """Facts about the data (here: domains from the '0 … 1.5 × max' suggestion) are shown as
    private notes; they are not in the guarantee or the public warnings."""
    win = window
    _census(qtbot, win)  # domains suggested from the data's maximum
    mp = win.method_panel
    assert mp.select_method("ir-dp")
    mp.set_values({"k": 5, "epsilon": 1.0})
    _protect(qtbot, win)
    res = win.state.result
    assert any(n.code == "domain-at-data-bound" for n in res.private_notes)
    assert not any("coincides" in w for w in res.public_warnings) and "coincides" not in res.guarantee
    text = win.results_panel.warn.text()
    assert "Private note (not published)" in text and "coincides" in text
    # no emoji (the lock rendered as an empty box without an emoji font): every character of
    # the banner in the Basic Multilingual Plane, and drawn by the label's own font
    from PySide6.QtGui import QFontMetrics

    fm = QFontMetrics(win.results_panel.warn.label.font())
    shown = win.results_panel.warn.label.text()
    assert all(ord(ch) < 0x10000 for ch in shown), [ch for ch in shown if ord(ch) >= 0x10000]
    assert all(fm.inFontUcs4(ord(ch)) for ch in shown if not ch.isspace()), [
        ch for ch in shown if not ch.isspace() and not fm.inFontUcs4(ord(ch))
    ]


def test_an_old_projects_shuffle_becomes_order(qtbot):
    from dpstudio.app.state import AppState

    st = AppState()
    st.set_method("ir-dp", {"k": 5, "shuffle": False})
    assert st.recipe.params == {"k": 5, "order": "input"}
    st.set_params({"k": 5, "shuffle": True, "order": "input"})  # the newer setting wins
    assert st.recipe.params == {"k": 5, "order": "input"}
