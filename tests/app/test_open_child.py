"""Issue 24 §5, the last gap: a file of a few MB is read in the warm child process, not in a
thread of the window's process.

Typing the texts of a 200,000-record file (pandas' converters) and its column statistics hold
the GIL for 50-250 ms in one call each; in a thread of the window's process the window waited
that long (one event-loop gap of 108 ms on a quiet machine).  Files over
``controller.BIG_FILE_BYTES`` (1 MB) are now read in the spare child: the same table, dtypes,
metadata, statistics and remembered text codes as the thread gives; cancel, progress and one-
line errors as before; a file that vanishes, turns into a FIFO or a device, or changes between
the sniff and the read, is handled as in the thread.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio import engine  # noqa: E402
from dpstudio.app import compute, controller, subproc  # noqa: E402
from dpstudio.app.controller import Controller  # noqa: E402
from dpstudio.app.state import AppState  # noqa: E402
from dpstudio.engine import codes  # noqa: E402

COMMENTS = ["à l'école", "Zürich — Ångström", "niño", "", "café crème", "0012 Straße"]


def household(n: int, seed: int = 11) -> pd.DataFrame:
    """bench_app_workflow's file: ids with leading zeros, codes, floats, free text."""
    rng = np.random.default_rng(seed)
    hh = np.repeat(np.arange(1, n // 3 + 2), 3)[:n]
    return pd.DataFrame(
        {
            "hh_id": [f"{h:06d}" for h in hh],
            "region": rng.choice([11, 12, 21, 22, 31], n),
            "sex": rng.choice([1, 2], n),
            "age": rng.integers(16, 96, n),
            "income": np.round(rng.lognormal(10, 0.8, n), 2),
            "weight": np.round(rng.uniform(50, 400, n), 3),
            "comment": rng.choice(COMMENTS, n),
        }
    )


@pytest.fixture
def ctl(qtbot, monkeypatch):
    monkeypatch.setenv("DPSTUDIO_SPARE_WORKER", "1")
    st = AppState()
    c = Controller(st)
    c.errors = []
    c.sig_error.connect(lambda m, d: c.errors.append((m, d)))
    c.confirm_csv = lambda path, info: {k: info.get(k) for k in ("sep", "encoding", "decimal")}
    yield c
    c.shutdown()


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """~2 MB: over the child bound (1 MB), far under the old one (16 MB)."""
    p = tmp_path_factory.mktemp("open") / "household.csv"
    household(45_000).to_csv(p, index=False)
    assert 1024 * 1024 < p.stat().st_size < 16 * 1024 * 1024
    return p


def test_a_file_of_a_few_mb_is_not_parsed_in_the_window_process(qtbot, ctl, big_csv, monkeypatch):
    """Fails on the old code: the file was read by compute.load_table in a pool thread."""
    from dpstudio.engine import io as engine_io

    here: list[str] = []
    real_load, real_read = compute.load_table, engine_io.read_table

    def load_here(*a, **kw):
        here.append("compute.load_table")
        return real_load(*a, **kw)

    def read_here(*a, **kw):
        here.append("read_table")
        return real_read(*a, **kw)

    # (a spawned child imports the real functions: only calls in this process are seen)
    monkeypatch.setattr(compute, "load_table", load_here)
    monkeypatch.setattr(engine_io, "read_table", read_here)
    progress: list[float] = []
    ctl.load_runner.sig_progress.connect(progress.append)
    with qtbot.waitSignal(ctl.sig_loaded, timeout=120_000):
        assert ctl.open_file(str(big_csv))
    assert not ctl.errors, ctl.errors
    assert here == [], f"parsed in the window's process: {here}"
    assert big_csv.stat().st_size > controller.BIG_FILE_BYTES
    df = ctl.state.df
    assert df.shape == (45_000, 7)
    assert str(df["hh_id"].iloc[0]) == "000001"  # leading zeros kept: text
    assert df["age"].dtype == np.int64 and df["income"].dtype == np.float64
    assert ctl.state.stats["age"].numeric and not ctl.state.stats["hh_id"].numeric
    assert any(0 < f < 1 for f in progress), progress  # the child's progress reached the bar
    # the reader's codes of the text columns came along (never hashed again here)
    assert codes.known(df["comment"]) and codes.known(df["hh_id"])


def load_both(items, *, check_cancel, progress):
    """Runs in the child: :func:`compute.load_table_to_send` of every (path, options)."""
    return [compute.load_table_to_send(p, o, check_cancel=check_cancel, progress=progress) for p, o in items]


def _files(tmp: Path) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    hh = household(3_000, seed=5)
    p = tmp / "texts.csv"
    hh.to_csv(p, index=False)
    out.append((str(p), {}))
    # missing values, texts kept aside (1.50, NA, +3), a boolean column, a mixed column
    n = 2_000
    rng = np.random.default_rng(2)
    lines = ["id,x,y,flag,code,mixed"]
    for i in range(n):
        x = "" if i % 17 == 0 else ("NA" if i % 23 == 0 else f"{rng.integers(0, 100)}.50")
        y = "+3" if i % 11 == 0 else str(int(rng.integers(-5, 5)))
        flag = "TRUE" if i % 2 else "FALSE"
        mixed = "abc" if i % 97 == 0 else str(i)
        lines.append(f"{i},{x},{y},{flag},{i % 7:03d},{mixed}")
    p = tmp / "missing.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out.append((str(p), {}))
    # decimal comma, semicolons, cp1252
    p = tmp / "comma.csv"
    rows = ["name;amount;rate"] + [f"Müller {i};{i * 3},{i % 10};0,{i % 100:02d}" for i in range(1_500)]
    p.write_bytes(("\n".join(rows) + "\n").encode("cp1252"))
    out.append((str(p), {"sep": ";", "decimal": ",", "encoding": "cp1252"}))
    pyreadstat = pytest.importorskip("pyreadstat")
    df = pd.DataFrame(
        {
            "pid": np.arange(1_000, dtype=float) % 7,
            "age": (np.arange(1_000) % 80 + 16).astype(float),
            "inc": np.linspace(0, 1e5, 1_000),
        }
    )
    df.loc[5, "inc"] = np.nan
    labels = {"pid": {0.0: "Strong Democrat", 1.0: "Weak Democrat", 6.0: "Strong Republican"}}
    p = tmp / "survey.sav"
    pyreadstat.write_sav(df, str(p), variable_value_labels=labels, column_labels=["party", "age", "income"])
    out.append((str(p), {}))
    p = tmp / "survey.dta"
    pyreadstat.write_dta(df, str(p), variable_value_labels={"pid": {k: v for k, v in labels["pid"].items()}})
    out.append((str(p), {}))
    return out


def _same_meta(a, b) -> None:
    va, vb = dict(vars(a)), dict(vars(b))
    ta, tb = va.pop("typed"), vb.pop("typed")
    xa, xb = va.pop("texts"), vb.pop("texts")
    assert va == vb
    assert list(ta) == list(tb)
    for c in ta:
        pd.testing.assert_series_equal(ta[c], tb[c], check_exact=True)
    assert list(xa) == list(xb)
    for c in xa:
        assert np.array_equal(np.asarray(xa[c], dtype=object), np.asarray(xb[c], dtype=object))


def test_the_child_gives_the_table_the_thread_gives(tmp_path):
    subproc.discard_spare()
    items = _files(tmp_path)
    (sent,) = list(
        subproc.stream(f"{__name__}:load_both", (items,), check_cancel=lambda: None, progress=lambda f: None)
    )
    assert len(sent) == len(items)
    kept_texts = 0
    for (path, opts), one in zip(items, sent):
        df_c, meta_c, stats_c = compute.table_received(one)
        df_t, meta_t, stats_t = compute.load_table(path, opts, check_cancel=lambda: None, progress=None)
        pd.testing.assert_frame_equal(df_c, df_t, check_exact=True)
        assert list(df_c.dtypes) == list(df_t.dtypes), path
        assert stats_c == stats_t, path
        _same_meta(meta_c, meta_t)
        # meta.typed holds the table's own columns, as the thread's does
        for c, s in meta_c.typed.items():
            pd.testing.assert_series_equal(s, df_c[c], check_exact=True)
        kept_texts += len(meta_c.texts)
        assert [codes.known(df_c[c]) for c in df_c] == [codes.known(df_t[c]) for c in df_t], path
        for c in df_c:
            if codes.known(df_c[c]):
                kc, uc = codes.factorize(df_c[c])
                kt, ut = codes.factorize(df_t[c])
                assert np.array_equal(kc, kt) and list(uc) == list(ut), (path, c)
    assert kept_texts >= 2  # the files did exercise the kept-aside texts
    assert sent[3][1].value_labels["pid"][0.0] == "Strong Democrat"


def test_a_vanished_file_in_the_child_is_one_line(tmp_path):
    gone = tmp_path / "gone.csv"
    with pytest.raises(engine.DPStudioError) as e:
        list(
            subproc.stream(
                "dpstudio.app.compute:load_table_to_send", (str(gone), {}), check_cancel=lambda: None
            )
        )
    assert "gone.csv" in str(e.value) and "no longer there" in str(e.value) and "\n" not in str(e.value)


def _no_hang(seconds: float):
    def on_alarm(signum, frame):  # pragma: no cover - only when it hangs
        raise AssertionError("the open blocked")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return old


@pytest.mark.parametrize("change", ["vanish", "fifo", "device", "emptied", "grown"])
def test_a_file_changed_between_sniff_and_read(qtbot, ctl, tmp_path, big_csv, change):
    """The sniff ran on the old file; the read finds it gone, a FIFO, a device, empty, or grown
    past the child bound: one line (the data loaded before kept), or the new content."""
    with qtbot.waitSignal(ctl.sig_loaded, timeout=60_000):
        ctl.open_file(str(_small(tmp_path)))
    before = ctl.state.df
    p = tmp_path / "moving.csv"
    p.write_text("a,b\n1,2\n3,4\n", encoding="utf-8")

    def confirm(path, info):
        os.unlink(p)
        if change == "fifo":
            os.mkfifo(p)
        elif change == "device":
            os.symlink("/dev/zero", p)
        elif change == "emptied":
            p.write_bytes(b"")
        elif change == "grown":
            p.write_bytes(big_csv.read_bytes())
        return {k: info.get(k) for k in ("sep", "encoding", "decimal")}

    ctl.confirm_csv = confirm
    ctl.errors.clear()
    old = _no_hang(60)
    try:
        if change == "grown":
            with qtbot.waitSignal(ctl.sig_loaded, timeout=120_000):
                ctl.open_file(str(p))
        else:
            ctl.open_file(str(p))
            qtbot.waitUntil(lambda: bool(ctl.errors), timeout=30_000)
            qtbot.waitUntil(lambda: not ctl.busy, timeout=30_000)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if change == "grown":
        assert not ctl.errors and ctl.state.df.shape == (45_000, 7)
        return
    msg, details = ctl.errors[0]
    assert "moving.csv" in msg and "\n" not in msg.strip() and "Traceback" not in msg
    assert details == ""
    assert ctl.state.df is before


def _small(tmp_path: Path) -> Path:
    p = tmp_path / "small.csv"
    p.write_text("x,y\n" + "".join(f"{i},{i * 2}\n" for i in range(30)), encoding="utf-8")
    return p


def test_cancel_while_the_child_reads_keeps_the_data(qtbot, ctl, tmp_path, big_csv):
    with qtbot.waitSignal(ctl.sig_loaded, timeout=60_000):
        ctl.open_file(str(_small(tmp_path)))
    before = ctl.state.df
    loaded: list = []
    ctl.sig_loaded.connect(loaded.append)
    subproc.prestart()
    ctl.open_file(str(big_csv), options={"sep": ",", "encoding": "utf-8", "decimal": "."})
    qtbot.waitUntil(lambda: not subproc._spare or not ctl.busy, timeout=30_000)  # the task handed over
    ctl.cancel_all()
    assert not ctl.busy
    ctl.load_runner.wait(15)
    qtbot.wait(500)  # late events of the cancelled task are dropped
    assert ctl.state.df is before and not loaded and not ctl.errors
