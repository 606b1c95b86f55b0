"""The step list of the Method tab (issues 23 §2, 24): build a chain, run it off the UI thread,
undo a step instantly from the kept outcomes, re-run from a step, risk and utility after every
step, before/after and weighted estimates tables, the pipeline JSON and the equivalent
command line shown and saved -- and that command line makes the same release."""

from __future__ import annotations

import json
import os
import shlex

import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio import cli, engine  # noqa: E402

SEED = 0x5EED5EED5EED5EED5EED5EED5EED5EED


def _free1(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        win.controller.open_free1_sample()
    st = win.state
    # the keys SEX, AGE, MARSTAT (k-quasi, categorical) and INCOME as an ε-quasi-identifier
    st.set_roles(
        {
            c: ("other" if r == "k-quasi" and c not in ("SEX", "AGE", "MARSTAT") else r)
            for c, r in st.roles.items()
        }
        | {"INCOME": "eps-quasi"}
    )
    st.set_domain("INCOME", (0.0, 2_000_000.0))
    st.set_seed(SEED, pinned=True)
    return st


def _run(qtbot, panel, **kw):
    with qtbot.waitSignal(panel.sig_chain_changed, timeout=120000):
        assert panel.run_chain(**kw)
    assert panel.wait(30)


def _table(t):
    return [
        [t.item(r, c).text() if t.item(r, c) else "" for c in range(t.columnCount())]
        for r in range(t.rowCount())
    ]


def test_build_run_undo_rerun_and_log(qtbot, window, tmp_path, monkeypatch):
    win = window
    st = _free1(qtbot, win)
    p = win.step_panel
    win.method_panel.select_method("local-suppression")
    win.method_panel.set_values({"k": 3})
    assert p.add_current_method()
    assert p.add_step("laplace", {"epsilon": 1.0})
    assert not p.add_step("nope", {}) and "nope" in p.banner.text()  # the engine's check
    assert [s["method"] for s in p.steps] == ["local-suppression", "laplace"]
    # reorder and back
    p.move_step(1, -1)
    assert [s["method"] for s in p.steps] == ["laplace", "local-suppression"]
    p.move_step(0, +1)
    _run(qtbot, p)
    assert len(p.run) == 2 and len(p.figures) == 2
    res = p.result()
    # the app's chain is the engine's for the same settings (pinned seed)
    want = engine.protect_chain(
        st.df, p.steps, st.active_roles(), st.active_domains(), types=dict(st.types), seed=SEED
    )
    pd.testing.assert_frame_equal(res.data, want.data)
    assert res.guarantee == want.guarantee and p.status.toolTip() == res.guarantee
    # the composed claim in a few words: ε-DP for INCOME, not for the suppressed keys
    assert "ε = 1" in p.status.text() and "not covering SEX, AGE, MARSTAT" in p.status.text()
    # after every step: a row for the original and one per step, with the engine's figures
    rows = _table(p.step_table)
    assert [r[:2] for r in rows] == [["0", "original"], ["1", "local-suppression"], ["2", "laplace"]]
    f1 = engine.assess(p.run.result(0), level="step")
    col = [
        h
        for h in range(p.step_table.columnCount())
        if p.step_table.horizontalHeaderItem(h).text() == "Suppressed cells"
    ][0]
    assert (
        rows[1][col] == f"{int(f1.measures['suppressed_cells']):,}"
        and int(f1.measures["suppressed_cells"]) > 0
    )
    fk = [
        h
        for h in range(p.step_table.columnCount())
        if p.step_table.horizontalHeaderItem(h).text() == "Records f_k < 3"
    ][0]
    assert int(rows[0][fk].replace(",", "")) > 0 and rows[1][fk] == "0"  # suppression removed the risk
    ba = {r[0]: r[1:] for r in _table(p.before_after)}
    assert ba["Records f_k < 3"][1] == "0" and ba["Records f_k < 3"][0] == rows[0][fk]
    est = _table(p.estimates)
    assert any(r[0] == "INCOME" and r[1] == "total" for r in est)
    # the log: pipeline JSON and the equivalent command line
    text = p.log.toPlainText()
    assert json.dumps(p.pipeline(), indent=2) in text and "dpstudio protect" in text and "--pipeline" in text
    a, b = p.save_log(str(tmp_path / "steps.json"))
    assert json.loads(open(a).read()) == p.pipeline()
    assert os.stat(a).st_mode & 0o077 == 0 and os.stat(b).st_mode & 0o077 == 0
    # running the saved command line gives the app's release, bit for bit
    argv = shlex.split(open(b).read().splitlines()[0])
    assert argv[:2] == ["dpstudio", "protect"]
    out = tmp_path / "rel.csv"
    argv[3] = str(out)
    monkeypatch.chdir(tmp_path)  # the pipeline file is named relative to the command line's folder
    assert cli.main([*argv[1:], "--no-measures"]) == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(out), pd.read_csv(pd.io.common.StringIO(res.data.to_csv(index=False)))
    )

    # undo: instant (no worker), the release after step 1 exactly as it was
    kept = p.run.result(0).data.copy()
    assert p.undo()
    assert not p.runner.busy and len(p.run) == 1 and [s["method"] for s in p.steps] == ["local-suppression"]
    pd.testing.assert_frame_equal(p.result().data, kept)
    assert len(_table(p.step_table)) == 2
    # re-run from a step: step 1 kept, step 2 runs
    p.add_step("laplace", {"epsilon": 1.0})
    first = p.run.records[0].result  # step 1's outcome, kept (not run again)
    _run(qtbot, p)
    assert p.run.records[0].result is first and len(p.run) == 2
    second = p.run.records[1].result
    _run(qtbot, p, start=1)  # "Re-run from here" on step 2
    assert p.run.records[0].result is first and p.run.records[1].result is not second
    # remove a step: the list shows it pending, the run is unchanged until run again
    p.remove(1)
    assert len(p.steps) == 1 and len(p.run) == 2


def test_cancel_keeps_the_chain(qtbot, window):
    win = window
    _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    p.add_step("laplace", {"epsilon": 1.0})
    _run(qtbot, p)
    before = p.run
    p.add_step("laplace", {"epsilon": 2.0})
    assert p.run_chain()
    p.runner.cancel()
    qtbot.wait(50)
    assert p.wait(60)
    assert p.run is before and len(p.figures) == 2


def test_an_incomplete_chain_runs_and_says_so(qtbot, window):
    win = window
    _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    _run(qtbot, p)
    assert "INCOME" in p.status.text() and "protect" in p.status.text()


def test_screenshot_of_the_step_list(qtbot, window, tmp_path):
    win = window
    _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    p.add_step("laplace", {"epsilon": 1.0})
    _run(qtbot, p)
    win.resize(1400, 1000)
    win.tabs.setCurrentIndex(2)
    win.show()
    qtbot.wait(100)
    path = os.environ.get("DPSTUDIO_SHOT_DIR")
    img = p.grab()
    assert not img.isNull() and img.width() > 200
    if path:
        img.save(os.path.join(path, "step_list.png"))
        p.tabs.setCurrentIndex(1)
        p.grab().save(os.path.join(path, "step_list_before_after.png"))
        p.tabs.setCurrentIndex(3)
        p.grab().save(os.path.join(path, "step_list_log.png"))


def test_use_the_chain_as_the_release_and_export(qtbot, window, tmp_path):
    win = window
    st = _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    _run(qtbot, p)
    assert not p.use_as_release() and "INCOME" in p.banner.text()  # incomplete: refused
    p.add_step("laplace", {"epsilon": 1.0})
    assert not p.use_as_release()  # a step has not run yet
    _run(qtbot, p)
    with qtbot.waitSignal(p.sig_release_set, timeout=60000):
        assert p.use_as_release()
    assert st.result is not None and st.result.method == "chain" and "rl" in st.evaluation
    qtbot.waitUntil(lambda: win.tabs.currentIndex() == 3, timeout=5000)  # Results & export
    full = engine.assess(p.result(), level="full", weighted=False)
    assert st.evaluation["sse_normalized"] == full.measures["sse_normalized"]
    out = tmp_path / "rel.csv"
    with qtbot.waitSignal(win.controller.sig_exported, timeout=60000):
        assert win.controller.export(str(out))
    md = json.loads((tmp_path / "rel.metadata.json").read_text())
    assert md["method"] == "chain" and md["guarantee"] == p.result().guarantee
    pd.testing.assert_frame_equal(
        pd.read_csv(out), pd.read_csv(pd.io.common.StringIO(p.result().data.to_csv(index=False)))
    )


def test_the_step_list_is_kept_in_the_project(qtbot, window, tmp_path):
    win = window
    _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    p.add_step("laplace", {"epsilon": 1.0})
    proj = tmp_path / "survey.dpsproj"
    assert win.controller.save_project_to(str(proj))
    d = json.loads(proj.read_text())
    assert d["step_list"] == p.steps and "steps" not in d  # not a chain recipe for the CLI
    p.remove(1)
    p.remove(0)
    assert p.steps == []
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        assert win.controller.open_project(str(proj))
    qtbot.waitUntil(lambda: len(p.steps) == 2, timeout=10000)
    assert [s["method"] for s in p.steps] == ["local-suppression", "laplace"]
    # emptied and saved: the empty list is kept (not the old file's)
    p.remove(1)
    p.remove(0)
    assert win.controller.save_project_to(str(proj))
    assert json.loads(proj.read_text())["step_list"] == []


def test_choose_the_weighted_estimates_variables(qtbot, window):
    win = window
    _free1(qtbot, win)
    p = win.step_panel
    p.add_step("local-suppression", {"k": 3})
    p.add_step("laplace", {"epsilon": 1.0})
    _run(qtbot, p)
    run = p.run
    assert not p.set_estimate_variables("INCOME, NOPE") and "NOPE" in p.banner.text()
    with qtbot.waitSignal(p.sig_chain_changed, timeout=60000):
        assert p.set_estimate_variables("MONEY, SEX")  # SEX typed categorical: shares
    assert p.run is run  # measured again, not run again
    est = _table(p.estimates)
    assert {(r[0], r[1]) for r in est} >= {("MONEY", "total"), ("MONEY", "mean"), ("SEX", "share")}
    assert not any(r[0] == "INCOME" for r in est)
    want = engine.assess(
        run.result(), level="step", weighted={"totals": ["MONEY"], "means": ["MONEY"], "shares": ["SEX"]}
    ).weighted.table
    assert len(est) == len(want)
    # a later run keeps the choice
    p.add_step("laplace", {"epsilon": 2.0})
    p.remove(1)
    _run(qtbot, p)
    assert any(r[0] == "MONEY" for r in _table(p.estimates))
