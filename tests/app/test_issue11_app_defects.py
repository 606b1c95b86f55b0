"""Issue 11's app defects 4, 5, 7, 8 (and issue 10's categorical sweep plot), each driven as a user
would; the no-display check of ``dpstudio`` (app/main.py)."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

import numpy as np
import pandas as pd

from dpstudio.app.state import AppState


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "income": rng.lognormal(10, 1, n).round(2),
            "age": rng.integers(18, 90, n),
            "region": rng.choice(["north", "south", "east", "west"], n),
            "weight": rng.uniform(1, 5, n).round(3),
        }
    )


# ------------------------------------------------------------------ defect 4
def _bottom_ticks(plot):
    return plot.getAxis("bottom")._tickLevels


def test_numeric_histogram_drops_the_category_tick_labels_of_a_text_column(qtbot):
    from dpstudio.app.widgets.roles_panel import RolesPanel

    st = AppState()
    panel = RolesPanel(st)
    qtbot.addWidget(panel)
    st.set_data(_frame(), "a.csv")
    panel.select_column("region")
    assert _bottom_ticks(panel.hist) is not None  # the categories are the ticks
    panel.select_column("income")
    assert _bottom_ticks(panel.hist) is None  # numeric: the axis's own numbers again
    panel.select_column("region")
    st.set_data(_frame(seed=1).drop(columns="region"), "b.csv")  # the next file
    panel.select_column("age")
    assert _bottom_ticks(panel.hist) is None
