"""Issue 12, the app's way to files larger than memory: a uniform sample for the views, the
whole file protected on Dask in the background (the release equals ``dpstudio protect ...
--engine dask`` under the same seed), cancel, and the methods that do not run on Dask marked."""

import threading
import time

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

from dpstudio import engine  # noqa: E402
from dpstudio.app import large_file as LF  # noqa: E402
from dpstudio.app import settings as app_settings  # noqa: E402
from dpstudio.engine.random import STRONG_SEED  # noqa: E402

N = 3000
ROLES = {"id": "identifier", "age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
DOMAINS = {"age": (0, 120), "income": (0, 1_000_000), "hours": (0, 100)}


@pytest.fixture
def big(tmp_path):
    rng = np.random.default_rng(7)
    df = pd.DataFrame(
        {
            "id": np.arange(N),
            "age": rng.integers(18, 90, N),
            "income": np.round(rng.gamma(2.0, 20000.0, N), 2),
            "hours": rng.integers(0, 80, N).astype(float),
            "region": rng.choice(list("abc"), N),
        }
    )
    src = tmp_path / "big.parquet"
    df.to_parquet(src, row_group_size=500)
    return src, df


@pytest.fixture
def small_threshold():
    """Files over 4 kB count as large; samples of 1,000 records; Dask workers as threads."""
    app_settings.set_large_file_bytes(4096)
    app_settings.set_sample_rows(1000)
    app_settings.set_dask_processes(False)


def _open_large(qtbot, win, path, answer=True):
    asked = []

    def ask(p, info):
        asked.append((p, info))
        return answer

    win.controller.ask_large = ask
    with qtbot.waitSignal(win.sig_loaded, timeout=60000):
        assert win.controller.open_file(str(path), confirm=False)
    return asked


def test_default_threshold_is_a_quarter_of_available_memory():
    psutil = pytest.importorskip("psutil")
    avail = psutil.virtual_memory().available
    got = app_settings.large_file_bytes()
    assert 0.15 * avail < got < 0.35 * avail  # available memory moves between the two calls
    app_settings.set_large_file_bytes(123)
    assert app_settings.large_file_bytes() == 123


def test_sample_is_uniform_without_replacement_and_reproducible(big):
    src, df = big
    s1, info = LF.read_sample(str(src), 1000)
    assert len(s1) == 1000 and info["n_total"] == N and info["n_sample"] == 1000
    assert s1["id"].is_unique and s1["id"].is_monotonic_increasing  # file order, no repeats
    # every sampled record is a record of the file, value for value
    pd.testing.assert_frame_equal(s1, df.set_index("id").loc[s1["id"]].reset_index()[list(df.columns)])
    assert s1["region"].dtype == pd.read_parquet(src)["region"].dtype  # as the in-memory reader
    again, _ = LF.read_sample(str(src), 1000, seed=info["seed"])
    pd.testing.assert_frame_equal(again, s1)  # the recorded seed redraws it
    other, info2 = LF.read_sample(str(src), 1000)
    assert info2["seed"] != info["seed"] and not other["id"].equals(s1["id"])  # OS entropy
    # uniform: over 40 samples every position is drawn about n/N = 1/3 of the time
    hits = np.zeros(N)
    for s in range(40):
        hits[LF.read_sample(str(src), 1000, seed=s)[0]["id"].to_numpy()] += 1
    assert abs(hits[: N // 2].mean() - hits[N // 2 :].mean()) < 0.2
    assert abs(hits.mean() - 40 / 3) < 1e-9
    whole, info3 = LF.read_sample(str(src), 10 * N)  # fewer when the file is smaller
    assert len(whole) == N and info3["n_sample"] == N


def test_small_file_opens_normally(qtbot, window, big):
    src, df = big
    window.controller.ask_large = lambda p, info: pytest.fail("asked for a small file")
    with qtbot.waitSignal(window.sig_loaded, timeout=30000):
        window.controller.open_file(str(src), confirm=False)
    assert window.state.sample_of is None and len(window.state.df) == N
    assert window.data_panel.sample_label.isHidden()


def test_large_file_offers_sample_mode_and_says_so(qtbot, window, big, small_threshold):
    src, _df = big
    asked = _open_large(qtbot, window, src)
    assert len(asked) == 1 and asked[0][1]["n_sample"] == 1000 and asked[0][1]["bytes"] > 4096
    st = window.state
    assert len(st.df) == 1000 and st.sample_of["n_total"] == N and st.sample_of["n_sample"] == 1000
    want = "Curves from a 1,000-record sample of 3,000 records"
    for panel in (window.data_panel, window.explore_panel, window.results_panel):
        assert not panel.sample_label.isHidden()
        assert want in panel.sample_label.text()
    # the sweep's n is the sample's: k values up to n/2 of the sample
    assert st.sweep_request()["ks"]


def test_cancel_at_the_question_keeps_the_data(qtbot, window, big, small_threshold):
    src, _ = big
    window.controller.ask_large = lambda p, info: False
    assert not window.controller.open_file(str(src), confirm=False)
    assert window.state.df is None and window.state.sample_of is None


def test_methods_not_on_dask_are_not_applicable(qtbot, window, big, small_threshold):
    src, _ = big
    _open_large(qtbot, window, src)
    st = window.state
    st.set_roles({"age": "k-quasi", "income": "k-quasi"})
    why = st.applicability("mdav")
    assert "does not run on Dask" in why
    mp = window.method_panel
    from dpstudio.app.widgets.method_panel import ID_ROLE

    items = {mp.list.item(i).data(ID_ROLE): mp.list.item(i) for i in range(mp.list.count())}
    mdav = next(it for oid, it in items.items() if oid == "mdav")
    assert "(not applicable)" in mdav.text() and "does not run on Dask" in mdav.toolTip()
    st.set_roles({"age": "eps-quasi", "income": "eps-quasi"})
    assert st.applicability("ir-dp") == ""
    st.set_method("insensitive-dp", {"variant": "multi"})
    assert "single-order" in st.applicability("insensitive-dp")


def _setup_ir_dp(win):
    st = win.state
    st.set_roles(ROLES)
    for c, b in DOMAINS.items():
        st.set_domain(c, b)
    st.set_method("ir-dp", {"k": 5, "epsilon": 1.0})
    st.set_seed(STRONG_SEED, pinned=True)


def test_protect_runs_whole_file_on_dask_like_the_cli(qtbot, window, big, small_threshold, tmp_path):
    from dpstudio.cli import main

    src, df = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    out = tmp_path / "release-app"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    with qtbot.waitSignal(window.controller.sig_exported, timeout=120000) as blocker:
        assert window.controller.run_protect()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30000)
    paths = blocker.args[0]
    app_rel = pd.read_parquet(out / "release").reset_index(drop=True)
    assert len(app_rel) == N  # the whole file, not the sample
    args = [str(src), str(tmp_path / "release-cli"), "--method", "ir-dp", "--k", "5", "--epsilon", "1"]
    args += ["--seed", str(STRONG_SEED), "--engine", "dask", "--workers", "1"]
    for c, r in ROLES.items():
        args += ["--role", f"{c}={r}"]
    for c, (lo, hi) in DOMAINS.items():
        args += ["--domain", f"{c}={lo}:{hi}"]
    assert main(["protect", *args]) == 0
    cli_rel = pd.read_parquet(tmp_path / "release-cli" / "release").reset_index(drop=True)
    pd.testing.assert_frame_equal(app_rel, cli_rel)
    assert not app_rel.equals(df.drop(columns="id"))  # protected, not copied
    # public metadata without the seed; the private audit trail owner-only
    meta = (out / "metadata.json").read_text()
    assert str(STRONG_SEED) not in meta
    assert (tmp_path / "release-app.private.json").stat().st_mode & 0o777 == 0o600
    assert paths["private"].endswith("release-app.private.json")
    rel = window.state.dask_release
    assert (
        rel["records"] == N
        and rel["guarantee"] in window.results_panel.sample_label.text()
        or ("Released 3,000 records on Dask" in window.results_panel.sample_label.text())
    )


def test_protect_never_over_the_input(qtbot, window, big, small_threshold):
    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    window.controller.ask_release_path = lambda p: (str(src), "parquet")
    assert not window.controller.run_protect()
    assert window.errors and "input" in window.errors[-1][0].lower()


@pytest.mark.parametrize("when", ["at once", "on Dask"])
def test_cancel_stops_the_dask_run_and_writes_nothing(
    qtbot, window, big, small_threshold, tmp_path, monkeypatch, when
):
    import contextlib

    src, _ = big
    _open_large(qtbot, window, src)
    _setup_ir_dp(window)
    out = tmp_path / "never"
    window.controller.ask_release_path = lambda p: (str(out), "parquet")
    statuses = []
    window.controller.sig_status.connect(statuses.append)
    on_dask = threading.Event()
    real_client = LF.dask_client

    @contextlib.contextmanager
    def client(*a, **kw):
        with real_client(*a, **kw) as c:
            on_dask.set()
            time.sleep(1.0)  # room for the cancel while the client is up
            yield c

    monkeypatch.setattr(LF, "dask_client", client)
    assert window.controller.run_protect()
    if when == "on Dask":
        qtbot.waitUntil(on_dask.is_set, timeout=60000)
    window.controller.cancel_all()
    qtbot.waitUntil(lambda: any("cancelled" in s for s in statuses), timeout=60000)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60000)
    assert not out.exists() and window.state.dask_release is None
    assert not list(tmp_path.glob(".dpstudio-*"))  # no temporary folder left


def test_cancel_closes_the_client_during_a_computation():
    """The watch thread turns a cancel into closing the client: the blocked computation fails
    and the tasks not yet started never run."""
    import dask

    ran = []

    def step(i):
        time.sleep(0.05)
        ran.append(i)
        return i

    flag = threading.Event()

    def check_cancel():
        if flag.is_set():
            raise engine.Cancelled()

    with pytest.raises(Exception):  # noqa: B017,PT011 - distributed's cancel error type varies
        with LF.dask_client("", processes=False) as client, LF._Watch(client, check_cancel, lambda f: None):
            with dask.config.set(scheduler=client.get):
                threading.Timer(0.5, flag.set).start()
                dask.compute(*[dask.delayed(step)(i) for i in range(200)])
    assert len(ran) < 200
