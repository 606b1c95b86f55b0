#!/usr/bin/env python3
"""The window never stalls (issue 27.4): event-loop gaps while a new user opens a large file,
types the roles, looks at the risk, sweeps and protects; and how soon a long sweep shows
progress.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_app_workflow.py [--rows 200000]
        [--sweep-rows 20000] [--stacks] [--events] [--out results/bench_app_workflow.txt]

A QTimer ticks every 10 ms in the GUI thread; a gap between two ticks is a time the window
could not react (target: none over 100 ms).  Each phase reports the longest gap in wall time
with the GUI thread's own CPU time in it (and the process's), and the gap with the most GUI-
thread CPU: on a loaded machine the wall time of a gap is mostly waiting for a core, and the
GUI thread's CPU is what the code costs; a gap with little GUI CPU but much process CPU was a
wait for the GIL held by a worker thread; so each phase also names the gap in which the
process's other threads ran the most CPU (a worker thread holding the GIL, in CPU time: robust
on a loaded machine).  Garbage collections in the GUI thread are counted.  Phases, on a household survey file of ``--rows``
records (hh_id text with leading zeros, region, sex, age, income, weight, a free-text comment;
tests/app/test_new_user_file.py's generator):

0. the window's first turns (its first paint and layout; before the file, which takes no event-loop
   turn to write, is opened);
1. open it through the window (sniff, confirm, read, the panels filled);
2. give the roles one column at a time, as typed in the Attributes panel (household id,
   three k-quasi-identifiers, the income as ε-quasi-identifier, the weight), types and domains;
3. the Risk tab computes the file's re-identification risk;
4. a k-eps sweep (k = 2, 5, 10, ε = 1, one repeat);
5. Protect (k-eps, k = 5, ε = 1).

Then the issue's long sweep: MDAV, k = 2..60, on ``--sweep-rows`` numeric records: the time to
the first progress above 0 % and to the first point drawn (target: progress within 1 s).

``--stacks``: a watchdog thread samples the GUI thread's stack every 10 ms while it is late (no
tick for 50 ms) and charges each sample the GUI thread's CPU since the previous one: the report
names where the GUI thread's CPU went in its late moments ("in Qt": painting, layout, events,
with no Python frame).  ``--events``: the application's ``notify`` timed, so the three gaps
with the most GUI CPU list the events (type, receiver) it went to -- the outermost ones (a
timer's slot with all it caused, a paint of the window) and each one's own time (a few µs per
event of overhead: use it to find culprits, not for the figures).  The user's actions of a
phase are paced (0.15 s apart, each its own event, as a user makes them).
results/run_quiet_issue24.sh runs it as the issue asks.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-bench-")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PySide6.QtCore import QEvent, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class _TimedApp(QApplication):
    """``--events``: every event's delivery timed (:class:`EventLog`)."""

    def notify(self, obj, ev) -> bool:  # noqa: D102 - Qt API
        log = globals().get("EVENTS")
        return log.around(super().notify, obj, ev) if log is not None else super().notify(obj, ev)


#: this script imported again as ``__mp_main__`` by a worker child the app spawns (reading,
#: sweeps, runs): the child needs none of the window -- without this it made a QApplication and
#: imported every widget before its task, which the app's own children (started from
#: ``dpstudio.app.main``) never do
_CHILD = __name__ == "__mp_main__"
app = None if _CHILD else QApplication.instance() or (_TimedApp if "--events" in sys.argv else QApplication)(sys.argv)

import dpstudio.app  # noqa: E402,F401  (PySide6 refcount guard)
from dpstudio import __version__  # noqa: E402

if not _CHILD:
    from dpstudio.app.main_window import MainWindow  # noqa: E402

from _household import COMMENTS, household  # noqa: E402,F401  (one file for both app benchmarks)


class EventLog:
    """``--events``: the application's ``notify`` timed (the GUI thread's CPU clock) for every
    event the GUI thread delivers, nested events apart: each event is charged its own time
    (its receiver's handler without the events it sent on) under "self", and the whole of each
    outermost event (a timer's slot with everything it caused, a paint of the window) under
    "top".  In a gap with much GUI CPU the report lists both.  (Timing ``notify`` in Python
    costs a few µs per event: its figures name the culprits; the timings are from runs
    without it.)
    """

    def __init__(self) -> None:
        self.main = threading.get_ident()
        self.depth = 0
        self.child: list[float] = [0.0]  # time of nested events, per open level
        self.self_ms: dict[str, float] = {}
        self.top_ms: dict[str, float] = {}
        self.by_gap: list[tuple[float, float, dict, dict]] = []

    @staticmethod
    def key(obj, ev) -> str:
        try:
            name = QEvent.Type(int(ev.type())).name
        except ValueError:
            name = str(int(ev.type()))
        try:
            cls = type(obj).__name__
            on = obj.objectName() if hasattr(obj, "objectName") else ""
            par = obj.parent() if hasattr(obj, "parent") else None
            ctx = ""
            if par is not None and (cls in ("QWidget", "QObject") or on.startswith("qt_")):
                pp = par.parent() if hasattr(par, "parent") else None
                ctx = f" in {type(par).__name__}" + (f"/{type(pp).__name__}" if pp is not None else "")
        except RuntimeError:  # deleted
            cls, on, ctx = "?", "", ""
        return f"{name}: {cls}{'[' + on + ']' if on else ''}{ctx}"

    def around(self, deliver, obj, ev):
        if threading.get_ident() != self.main:
            return deliver(obj, ev)
        k = self.key(obj, ev)
        t0 = time.thread_time()
        self.depth += 1
        self.child.append(0.0)
        try:
            return deliver(obj, ev)
        finally:
            dt = time.thread_time() - t0
            inner = self.child.pop()
            self.depth -= 1
            self.child[-1] += dt
            self.self_ms[k] = self.self_ms.get(k, 0.0) + 1000 * (dt - inner)
            if self.depth == 0:
                self.top_ms[k] = self.top_ms.get(k, 0.0) + 1000 * dt

    def close_tick(self, wall: float, cpu: float) -> None:
        own, top = self.self_ms, self.top_ms
        self.self_ms, self.top_ms = {}, {}
        if cpu >= 0.04:
            self.by_gap.append((wall * 1000, cpu * 1000, own, top))

    def report(self, n: int = 10) -> list[str]:
        lines = []
        for wall, cpu, own, top in sorted(self.by_gap, key=lambda g: -g[1])[:3]:
            lines.append(f"    gap {wall:.0f} ms wall, {cpu:.0f} ms GUI CPU; outermost events:")
            lines += [f"        {ms:6.1f} ms  {k}" for k, ms in sorted(top.items(), key=lambda kv: -kv[1])[:5]]
            lines.append("      each event's own time:")
            lines += [f"        {ms:6.1f} ms  {k}" for k, ms in sorted(own.items(), key=lambda kv: -kv[1])[:n]]
        self.by_gap = []
        return lines


EVENTS = EventLog() if "--events" in sys.argv else None


class Ticker:
    """Gaps between 10 ms timer ticks in the GUI thread, with the GUI thread's own CPU time in
    each gap (a loaded machine stretches the wall time of a gap, not the CPU the GUI thread
    spent in it) and the process's CPU (all its threads: a gap whose GUI CPU is small but whose
    process CPU is large was a wait for the GIL held by a worker thread).

    ``stacks``: a watchdog thread samples the GUI thread's stack every 10 ms while the GUI
    thread is late (no tick for 50 ms) and charges it the GUI thread's CPU time spent since the
    previous sample: the report names the code the GUI thread's CPU went to.
    """

    def __init__(self, stacks: bool) -> None:
        self.events = EVENTS
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.main_id = threading.get_ident()
        self._clock = time.pthread_getcpuclockid(self.main_id) if hasattr(time, "pthread_getcpuclockid") else None
        self.last = time.perf_counter()
        self.last_cpu = time.thread_time()
        self.last_proc = time.process_time()
        #: (wall gap s, GUI-thread CPU s, process CPU s, time of its end)
        self.gaps: list[tuple[float, float, float, float]] = []
        self.culprits: dict[str, float] = {}  # stack key -> GUI-thread CPU seconds (late only)
        self._stop = threading.Event()
        #: (generation, GUI-thread CPU ms) of each garbage collection in the GUI thread
        self.collections: list[tuple[int, float]] = []
        self._gc_t0 = 0.0
        gc.callbacks.append(self._on_gc)
        if stacks:
            threading.Thread(target=self._watch, daemon=True).start()

    def _on_gc(self, phase: str, info: dict) -> None:
        if threading.get_ident() != self.main_id:
            return
        if phase == "start":
            self._gc_t0 = time.thread_time()
        else:
            self.collections.append((int(info.get("generation", 0)), 1000 * (time.thread_time() - self._gc_t0)))

    def _tick(self) -> None:
        now, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
        self.gaps.append((now - self.last, cpu - self.last_cpu, proc - self.last_proc, now))
        if self.events is not None:
            self.events.close_tick(now - self.last, cpu - self.last_cpu)
        self.last, self.last_cpu, self.last_proc = now, cpu, proc

    def _main_cpu(self) -> float:
        return time.clock_gettime(self._clock) if self._clock is not None else 0.0

    def _watch(self) -> None:
        keep = ("dpstudio", "pandas", "numpy", "pyqtgraph", "pyarrow", "PySide6", "shiboken")
        prev_cpu, prev_tick = self._main_cpu(), self.last
        while not self._stop.wait(0.01):
            cpu, tick = self._main_cpu(), self.last
            late = time.perf_counter() - tick
            if late > 0.05 and tick == prev_tick:
                fr = sys._current_frames().get(self.main_id)
                st = []
                while fr is not None and len(st) < 80:  # (no source lines read: cheap)
                    st.append((fr.f_code.co_filename, fr.f_lineno, fr.f_code.co_name))
                    fr = fr.f_back
                ours = [f for f in st if "dpstudio" in f[0] and "bench_app_workflow" not in f[0]]
                libs = [f for f in st if any(k in f[0] for k in keep)]
                leaf = libs[0] if libs else (st[0] if st else ("?", 0, "?"))
                # the innermost two frames of ours, the outermost two (the slot), the library leaf
                top = ours[:2] + [f for f in ours[-2:] if f not in ours[:2]]
                if leaf not in top:
                    top = [leaf, *top]
                if not top or (st and top == [st[0]] and "bench_app_workflow" in st[0][0]):
                    key = "(in Qt: painting, layout, events; no Python frame)"
                else:
                    key = " <- ".join(f"{Path(f[0]).name}:{f[1]} {f[2]}" for f in top)
                self.culprits[key] = self.culprits.get(key, 0.0) + max(0.0, cpu - prev_cpu)
            prev_cpu, prev_tick = cpu, tick

    def start(self) -> None:
        self.gaps, self.culprits, self.collections = [], {}, []
        if self.events is not None:
            self.events.self_ms, self.events.top_ms, self.events.by_gap = {}, {}, []
        self.last, self.last_cpu, self.last_proc = time.perf_counter(), time.thread_time(), time.process_time()
        self.timer.start()

    def stop(self) -> dict:
        self.timer.stop()
        gaps = self.gaps or [(0.0, 0.0, 0.0, 0.0)]
        wall = np.array([g[0] for g in gaps]) * 1000
        cpu = np.array([g[1] for g in gaps]) * 1000
        others = np.maximum(np.array([g[2] - g[1] for g in gaps]) * 1000, 0.0)
        i_wall, i_cpu, i_oth = int(wall.argmax()), int(cpu.argmax()), int(others.argmax())
        where = [f"{ms * 1000:.0f} ms GUI CPU: {key}" for key, ms in
                 sorted(self.culprits.items(), key=lambda kv: -kv[1])[:6] if ms >= 0.02]
        return {
            "ticks": len(gaps),
            "max_ms": float(wall.max()),
            "max_cpu_of_max_ms": float(cpu[i_wall]),
            "max_proc_of_max_ms": float(gaps[i_wall][2] * 1000),
            "max_cpu_ms": float(cpu.max()),
            "wall_of_max_cpu_ms": float(wall[i_cpu]),
            "p99_ms": float(np.percentile(wall, 99)),
            # the gap in which the process's other threads ran the most CPU: the GUI thread's
            # wait for the GIL a worker thread held (issue 24 §5), measured in CPU, not wall
            "others_ms": float(others.max()),
            "wall_of_others_ms": float(wall[i_oth]),
            "cpu_of_others_ms": float(cpu[i_oth]),
            "over_100": int((wall > 100).sum()),
            "cpu_over_100": int((cpu > 100).sum()),
            "cpu_over_50": int((cpu > 50).sum()),
            "where": where + (self.events.report() if self.events is not None else []),
            "gc": self.collections,
        }


def run_until(cond, timeout: float) -> float:
    t0 = time.perf_counter()
    while not cond():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError
        app.processEvents()
        time.sleep(0.002)
    return time.perf_counter() - t0


def idle(win) -> bool:
    return not win.controller.busy and not win.risk_panel.pending()


def settle(win, timeout: float = 900) -> None:
    run_until(lambda: idle(win), timeout)
    end = time.perf_counter() + 0.3  # late repaints / debounced work
    run_until(lambda: time.perf_counter() > end and idle(win), timeout)


def summary(s: dict) -> str:
    return (f"event loop: max gap {s['max_ms']:.0f} ms wall (GUI thread CPU in it {s['max_cpu_of_max_ms']:.0f} ms, "
            f"process CPU {s['max_proc_of_max_ms']:.0f} ms), longest GUI-thread CPU in one gap "
            f"{s['max_cpu_ms']:.0f} ms (wall {s['wall_of_max_cpu_ms']:.0f} ms), most CPU of other threads in one "
            f"gap {s['others_ms']:.0f} ms (wall {s['wall_of_others_ms']:.0f} ms, GUI CPU {s['cpu_of_others_ms']:.0f} ms), "
            f"p99 {s['p99_ms']:.0f} ms; "
            f"gaps > 100 ms wall: {s['over_100']}, GUI CPU > 100 ms: {s['cpu_over_100']}, > 50 ms: {s['cpu_over_50']}; "
            f"GUI-thread garbage collections: {len(s['gc'])}, longest {max([ms for _g, ms in s['gc']], default=0):.0f} ms "
            f"(full: {sum(1 for g, _ms in s['gc'] if g == 2)})")


def phase(lines: list[str], ticker: Ticker, name: str, fn) -> None:
    ticker.start()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    s = ticker.stop()
    lines.append(f"  {name}: {dt:.2f} s; " + summary(s))
    lines.extend(f"      {w}" for w in s["where"])
    print("\n".join(lines[-1 - len(s["where"]):]), flush=True)


def workflow(win, ticker, rows: int) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="dps-wf-"))
    path = tmp / f"household_{rows}.csv"
    household(rows).to_csv(path, index=False)
    lines = [f"Household survey file, {rows:,} records ({path.stat().st_size / 1e6:.0f} MB), load average "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs:"]
    win.controller.confirm_csv = lambda p, info: {k: info.get(k) for k in ("sep", "encoding", "decimal")}
    st = win.state
    # the window's first turns (its first paint, pyqtgraph's first layout of every plot and
    # the polish of their context menus) are a phase of their own: writing the file above ran
    # no event loop, so they were left for the open phase's first turn, which they are not part of
    phase(lines, ticker, "startup (the window's first turns)", lambda: settle(win))

    def open_it():
        win.tabs.setCurrentIndex(0)
        assert win.open_data(str(path))
        run_until(lambda: st.path == str(path), 600)
        settle(win)

    def pace() -> None:
        """A user's pace between two actions (each its own event; done in one go they were
        one turn of the event loop, which no user makes)."""
        end = time.perf_counter() + 0.15
        run_until(lambda: time.perf_counter() > end, 60)

    def roles():
        win.tabs.setCurrentIndex(1)
        for col, role in (("hh_id", "household"), ("region", "k-quasi"), ("sex", "k-quasi"),
                          ("age", "k-quasi"), ("income", "eps-quasi"), ("weight", "weight")):
            win.roles_panel.set_roles({col: role})
            pace()
        win.roles_panel.set_types({"region": "categorical", "sex": "categorical"})
        st.set_domain("age", (0, 110))
        st.set_domain("income", (0, 5_000_000))
        settle(win)

    def risk():
        win.tabs.setCurrentIndex(win.tabs.indexOf(win.risk_panel))
        win.risk_panel.schedule()
        settle(win)

    def sweep():
        win.tabs.setCurrentIndex(2)
        pace()
        win.method_panel.select_method("k-eps")
        pace()
        win.method_panel.set_values({"k": 5, "epsilon": 1.0})
        pace()
        ep = win.explore_panel
        ep.ks.setText("2, 5, 10")
        ep.eps.setText("1")
        ep.repeats.setValue(1)
        pace()
        assert win.controller.run_sweep()
        settle(win)

    def protect():
        assert win.controller.run_protect()
        settle(win)

    for name, fn in (("open", open_it), ("roles, types, domains", roles), ("risk", risk),
                     ("sweep (k-eps, k = 2, 5, 10)", sweep), ("protect (k-eps, k = 5)", protect)):
        phase(lines, ticker, name, fn)
    assert not win.errors, win.errors
    path.unlink()
    return lines


def long_sweep(win, ticker, rows: int) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="dps-ls-"))
    path = tmp / f"numbers_{rows}.csv"
    rng = np.random.default_rng(3)
    pd.DataFrame({f"x{i}": np.round(rng.gamma(2.0, 1000.0, rows), 1) for i in range(4)}).to_csv(path, index=False)
    st = win.state
    win.controller.confirm_csv = lambda p, info: {k: info.get(k) for k in ("sep", "encoding", "decimal")}
    # the first file has roles: the window asks (a modal box) whether to keep them -- discard
    win._ask_keep_roles = lambda p: False
    assert win.open_data(str(path))
    run_until(lambda: st.path == str(path), 600)
    settle(win)
    win.roles_panel.set_roles({f"x{i}": "k-quasi" for i in range(4)})
    win.method_panel.select_method("mdav")
    ep = win.explore_panel
    ep.ks.setText("2-60")
    ep.repeats.setValue(1)
    settle(win)
    prog: list[tuple[float, float]] = []
    t0 = time.perf_counter()
    win.controller.sweep_runner.sig_progress.connect(lambda f: prog.append((time.perf_counter() - t0, f)))
    ticker.start()
    assert win.controller.run_sweep()
    def drawn() -> int:  # the points drawn now (ExplorePanel.n_plotted forces a pending redraw)
        return sum(len(s.sse.xData) if s.sse.xData is not None else 0 for s in ep.series.values())

    first_point = run_until(lambda: drawn() > 0, 900)
    settle(win)
    total = time.perf_counter() - t0
    s = ticker.stop()
    moved = [t for t, f in prog if f > 0]
    return [f"MDAV sweep, k = 2..60, {rows:,} records × 4: {total:.1f} s; first progress above 0 % after "
            f"{moved[0] if moved else float('nan'):.2f} s (target < 1 s), {len(prog)} progress updates, "
            f"first point drawn after {first_point:.2f} s; " + summary(s), *(f"      {w}" for w in s["where"])]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--sweep-rows", type=int, default=20_000)
    ap.add_argument("--stacks", action="store_true")
    ap.add_argument("--events", action="store_true", help="name the events the GUI CPU of long gaps went to")
    ap.add_argument("--skip-workflow", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.environ.get("DPS_BENCH_HANG"):
        faulthandler.dump_traceback_later(float(os.environ["DPS_BENCH_HANG"]), exit=True)
    win = MainWindow(offer_recovery=False)
    win.errors = []
    win.controller.sig_error.connect(lambda m, d: win.errors.append(m))
    win.resize(1366, 740)
    win.show()
    ticker = Ticker(a.stacks)
    lines = [f"dpstudio {__version__} app workflow benchmark — {time.strftime('%Y-%m-%d %H:%M')} — "
             f"{platform.machine()}, {os.cpu_count()} CPUs, Qt platform {app.platformName()}"]
    if not a.skip_workflow:
        lines += workflow(win, ticker, a.rows)
    if not a.skip_sweep:
        lines += long_sweep(win, ticker, a.sweep_rows)
        print(lines[-1], flush=True)
    lines.append(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    win.controller.shutdown()
    win.state.mark_dirty(False)
    win.close()
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
