"""Issue 15, item 1: opening a file never freezes the window.

Sniffing, reading and previewing run in the load worker (a QTimer keeps firing during the
open); Cancel stops the open and keeps the data loaded before; an implausible guessed shape
(tens of thousands of columns) is questioned before any table is built; a file that cannot
be read gives a message, never a traceback.
"""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QTimer

from dpstudio.app import compute, io_adapter
from dpstudio.app.controller import Controller
from dpstudio.app.resources import sample_path
from dpstudio.app.state import AppState


@pytest.fixture
def ctl(qtbot):
    st = AppState()
    c = Controller(st)
    c.errors = []
    c.sig_error.connect(lambda m, d: c.errors.append((m, d)))
    yield c
    c.shutdown()


def _open_sample(qtbot, ctl):
    with qtbot.waitSignal(ctl.sig_loaded, timeout=20000):
        ctl.open_file(str(sample_path()), confirm=False)


def _slow(fn, seconds, checks=None):
    """``fn`` after ``seconds`` of cooperative work (cancel points every 10 ms)."""

    def wrapped(*a, check_cancel=None, **kw):
        t = time.monotonic()
        while time.monotonic() - t < seconds:
            if check_cancel is not None:
                check_cancel()
            time.sleep(0.01)
        return fn(*a, check_cancel=check_cancel, **kw) if check_cancel else fn(*a, **kw)

    return wrapped


def _csv(tmp_path, name="d.csv"):
    p = tmp_path / name
    p.write_text("a,b,c\n" + "".join(f"{i},{i * 0.5},x{i}\n" for i in range(50)), encoding="utf-8")
    return p


def test_open_runs_in_a_worker_and_the_ui_stays_responsive(qtbot, ctl, tmp_path, monkeypatch):
    monkeypatch.setattr(io_adapter, "sniff_for_open", _slow(io_adapter.sniff_for_open, 0.4))
    monkeypatch.setattr(compute, "load_table", _slow(compute.load_table, 0.4))
    ticks = []
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    p = _csv(tmp_path)
    with qtbot.waitSignal(ctl.sig_loaded, timeout=20000):
        assert ctl.open_file(str(p), confirm=False)
        assert ctl.load_runner.busy  # returned at once: the work is in the pool
    timer.stop()
    assert ctl.state.path == str(p) and ctl.state.df.shape == (50, 3)
    assert len(ticks) >= 10  # the event loop kept running during ~0.8 s of sniffing + reading
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.35  # never blocked for a whole step


@pytest.mark.parametrize("step", ["sniff", "read"])
def test_cancel_keeps_the_previous_data(qtbot, ctl, tmp_path, monkeypatch, step):
    _open_sample(qtbot, ctl)
    before_df, before_path = ctl.state.df, ctl.state.path
    if step == "sniff":
        monkeypatch.setattr(io_adapter, "sniff_for_open", _slow(io_adapter.sniff_for_open, 1.0))
    else:
        monkeypatch.setattr(compute, "load_table", _slow(compute.load_table, 5.0))
    loaded = []
    ctl.sig_loaded.connect(loaded.append)
    ctl.open_file(str(_csv(tmp_path)), confirm=False)
    if step == "read":
        qtbot.waitUntil(lambda: not ctl.load_runner._live[0][0].ended, timeout=5000)
        qtbot.wait(300)  # the sniff finished; the read is running
    ctl.cancel_all()
    assert not ctl.busy
    qtbot.wait(1500)  # late events of the cancelled task are dropped
    ctl.load_runner.wait(10)
    assert ctl.state.df is before_df and ctl.state.path == before_path
    assert not loaded and not ctl.errors


def _wide(tmp_path, n=4000):
    """A tab file with 3 columns whose fields hold commas: ',' is guessed, 3n - 2 columns."""
    p = tmp_path / "wide.csv"
    head = "\t".join(",".join(f"h{j}_{i}" for i in range(n)) for j in range(3))
    rows = ["\t".join(",".join([f"{w}{j}"] * n) for j in range(3)) for w in ("v", "w", "é")]
    p.write_text("\n".join([head, *rows]) + "\n", encoding="latin-1")
    return p


def test_implausible_shape_is_questioned_before_building(qtbot, ctl, tmp_path, monkeypatch):
    _open_sample(qtbot, ctl)
    before = ctl.state.df
    asked = []
    built = []
    monkeypatch.setattr(
        compute,
        "load_table",
        lambda *a, **k: built.append(a) or (_ for _ in ()).throw(AssertionError("table built")),
    )
    ctl.ask_shape = lambda path, shape: asked.append(shape) or None  # Cancel
    p = _wide(tmp_path)
    ctl.open_file(str(p))
    qtbot.waitUntil(lambda: bool(asked), timeout=20000)
    qtbot.waitUntil(lambda: not ctl.busy, timeout=5000)
    assert asked[0]["n_columns"] == 11998 and asked[0]["sep"] == ","
    assert asked[0]["widths"]["\t"] == 3
    assert not built and ctl.state.df is before


@pytest.fixture
def low_limit(monkeypatch):
    """Implausible above 50 columns: the 'open' paths build a small table (quick under load)."""
    from dpstudio.engine import io as dio
    from dpstudio.engine.io import reading

    monkeypatch.setattr(reading, "MAX_SNIFFED_COLUMNS", 50)  # where sniff_csv looks it up
    monkeypatch.setattr(dio, "MAX_SNIFFED_COLUMNS", 50)  # where the app looks it up


def test_implausible_shape_choose_another_separator(qtbot, ctl, tmp_path, low_limit):
    offered = []

    def confirm(path, sniffed):
        offered.append(sniffed)
        return {"sep": sniffed["sep"], "encoding": sniffed["encoding"], "decimal": "."}

    ctl.confirm_csv = confirm
    ctl.ask_shape = lambda path, shape: "choose"
    with qtbot.waitSignal(ctl.sig_loaded, timeout=20000):
        ctl.open_file(str(_wide(tmp_path, 40)))
    assert not ctl.errors
    assert offered[0]["sep"] == "\t"  # the plausible separator is preselected
    assert ctl.state.df.shape == (3, 3)


def test_implausible_shape_open_anyway(qtbot, ctl, tmp_path, low_limit):
    ctl.ask_shape = lambda path, shape: "open"
    with qtbot.waitSignal(ctl.sig_loaded, timeout=60000):
        ctl.open_file(str(_wide(tmp_path, 40)))
    assert not ctl.errors
    assert ctl.state.df.shape == (3, 118)


@pytest.mark.parametrize(
    "content",
    [
        b'a,b\n1,2\r3,4\r\n"5,6\n7,8\r',  # mixed line endings, an unterminated quote
        b"a,b\n1,2\n\x00\x01\x02\x03" * 50,  # binary
        b"a,a\n1,2\n",  # duplicate header
    ],
)
def test_a_file_that_errors_gives_a_message(qtbot, ctl, tmp_path, content):
    _open_sample(qtbot, ctl)
    before = ctl.state.df
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    ctl.confirm_csv = lambda path, sniffed: {k: sniffed[k] for k in ("sep", "encoding", "decimal")}
    ctl.open_file(str(p))
    qtbot.waitUntil(lambda: bool(ctl.errors), timeout=20000)
    msg, details = ctl.errors[0]
    assert "bad.csv" in msg and "Traceback" not in msg and "\n" not in msg.strip()
    assert details == ""
    assert ctl.state.df is before


def test_mixed_line_endings_open_quickly_in_the_app_path(qtbot, ctl, tmp_path):
    p = tmp_path / "mixed.csv"
    ends = ["\r\n", "\r", "\n"]
    p.write_bytes(
        "".join(
            ln + ends[i % 3]
            for i, ln in enumerate(["id,x,name"] + [f"{i},{i * 1.5},n{i}" for i in range(60)])
        ).encode()
    )
    ctl.confirm_csv = lambda path, sniffed: {k: sniffed[k] for k in ("sep", "encoding", "decimal")}
    with qtbot.waitSignal(ctl.sig_loaded, timeout=20000):
        ctl.open_file(str(p))
    assert ctl.state.df.shape == (60, 3)


def test_preview_dialog_reads_in_a_worker(qtbot, tmp_path, monkeypatch):
    from dpstudio.app.widgets.csv_dialog import CsvPreviewDialog

    p = _csv(tmp_path)
    calls = []
    real = io_adapter.preview_frame
    monkeypatch.setattr(
        io_adapter, "preview_frame", lambda *a, **k: calls.append(a) or _slow(real, 0.3)(*a, **k)
    )
    dlg = CsvPreviewDialog(str(p), io_adapter.sniff_csv(str(p)))
    qtbot.addWidget(dlg)
    assert not calls  # the sniffed preview is shown as is
    assert dlg.model.columnCount() == 3
    dlg.sep.setCurrentIndex(dlg.sep.findData(";"))
    assert dlg.runner.busy  # the new preview is being read in the pool
    qtbot.waitUntil(lambda: not dlg.runner.busy, timeout=10000)
    assert dlg.model.columnCount() == 1 and "Only one column" in dlg.status.text()
    dlg.runner.wait(5)
