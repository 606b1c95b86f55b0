"""Issue 8 §5 in the app: the method panel shows the release's own (scope-first) guarantee, the
remedies, and offers the separate-tables layout."""

import pandas as pd


def test_method_panel_scope_remedy_and_layout(window):
    win = window
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "y": list("aabbcc")})
    win.state.set_data(df, None)
    win.state.set_roles({"x": "eps-quasi", "y": "confidential"})
    win.state.set_domain("x", (0.0, 10.0))
    mp = win.method_panel
    assert mp.select_method("ir-dp")
    mp.set_values({"k": 2, "epsilon": 1.0})
    mp._update_info()
    assert mp.guarantee_text.startswith("Per-attribute only — not ε-differential privacy")
    page = mp.info.toPlainText()
    assert "Remedies" in page and "Separate table per attribute" in page
    assert "layout" in mp.fields  # the choice is offered in the form
    mp.set_values({"layout": "separate-tables"})
    mp._update_info()
    assert mp.guarantee_text.startswith("1-differential privacy")
    assert "Remedies" not in mp.info.toPlainText()
    # no unchanged column: no scope clause, no remedy
    mp.set_values({"layout": "records"})
    win.state.set_roles({"x": "eps-quasi", "y": "identifier"})
    mp._update_info()
    assert mp.guarantee_text.startswith("1-differential privacy")
