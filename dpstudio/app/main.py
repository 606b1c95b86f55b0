"""``dpstudio [FILE]``: start the desktop app (``--version`` is handled by the CLI)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping

from dpstudio.app.resources import resources_dir, sample_path  # noqa: F401

_window = None

#: What ``dpstudio`` says, and exits 2 with, when there is no display to open a window on.
NO_DISPLAY = (
    "dpstudio: no display; use `dpstudio demo` (or `dpstudio --help` for the command line) "
    "or set QT_QPA_PLATFORM=offscreen"
)


def display_problem(
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    *,
    probe: Callable[[str], bool] | None = None,
) -> str | None:
    """Why the app cannot open a window here, or ``None``.  On Linux and other X11/Wayland
    systems Qt needs ``DISPLAY`` or ``WAYLAND_DISPLAY`` unless ``QT_QPA_PLATFORM`` picks a
    platform; without them it aborted (exit 134) with a misleading libxcb message -- and so it
    did with ``DISPLAY`` set to a server that does not answer (issue 24 §8): ``DISPLAY`` is
    therefore tried (``probe(display)``: can a client connect?; default: the real connection
    when ``environ`` is the process's own environment, no check for a given one).
    """
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    if plat.startswith(("win", "darwin", "cygwin")):
        return None
    if env.get("QT_QPA_PLATFORM"):
        return None
    if probe is None and environ is None:
        probe = x_display_answers
    wl = env.get("WAYLAND_DISPLAY")
    if wl:
        sock = wl if os.path.isabs(wl) else os.path.join(env.get("XDG_RUNTIME_DIR", ""), wl)
        if probe is None or os.path.exists(sock):
            return None
    disp = env.get("DISPLAY")
    if disp:
        if probe is None or probe(disp):
            return None
        return (
            f"dpstudio: cannot open a window: DISPLAY is {disp!r} but no X server accepts a "
            "connection there (start one, e.g. `Xvfb " + disp.split(".")[0] + " &`, check "
            "XAUTHORITY, or unset DISPLAY); use `dpstudio demo` (or `dpstudio --help` for the "
            "command line) or set QT_QPA_PLATFORM=offscreen"
        )
    if wl:
        return (
            f"dpstudio: cannot open a window: WAYLAND_DISPLAY is {wl!r} but there is no such "
            "socket; use `dpstudio demo` or set QT_QPA_PLATFORM=offscreen"
        )
    return NO_DISPLAY


def _x_socket_answers(display: str, timeout: float = 2.0) -> bool:
    """Whether something listens where ``display`` (``[host]:n[.screen]``) points."""
    import socket

    host, _, rest = display.rpartition(":")
    try:
        num = int(rest.split(".")[0])
    except ValueError:
        return False
    try:
        if host in ("", "unix") or host.startswith("/"):
            path = host if host.startswith("/") else f"/tmp/.X11-unix/X{num}"
            for addr in (path, "\0" + path):  # the file socket, or Linux's abstract one
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(timeout)
                    try:
                        s.connect(addr)
                        return True
                    except OSError:
                        continue
            return False
        with socket.create_connection((host, 6000 + num), timeout=timeout):
            return True
    except OSError:
        return False


def x_display_answers(display: str) -> bool:
    """Whether an X client can connect to ``display``: the listening socket first (with a
    timeout: a remote host that does not answer must not hang the start), then libxcb's own
    connection, as Qt makes it (authorisation included) when libxcb is there.
    """
    if not _x_socket_answers(display):
        return False
    try:
        import ctypes
        import ctypes.util

        lib = ctypes.CDLL(ctypes.util.find_library("xcb") or "libxcb.so.1")
    except OSError:
        return True  # no libxcb to ask: the socket answered
    lib.xcb_connect.restype = ctypes.c_void_p
    lib.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    lib.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    lib.xcb_disconnect.argtypes = [ctypes.c_void_p]
    conn = lib.xcb_connect(display.encode(), None)
    try:
        return lib.xcb_connection_has_error(conn) == 0
    finally:
        lib.xcb_disconnect(conn)


def _excepthook(exc_type, exc, tb) -> None:
    """Show unexpected errors in a dialog instead of crashing; the app stays usable."""
    details = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write(details)
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    try:
        from dpstudio import engine
        from dpstudio.app.widgets.common import show_error

        msg = (
            str(exc)
            if isinstance(exc, engine.DPStudioError)
            else f"Unexpected error: {exc_type.__name__}: {exc}\n\nYour data and settings are "
            "unchanged. Please report this with the details."
        )
        show_error(_window, msg, details)
    except Exception:  # noqa: BLE001 - never fail inside the hook
        pass


def main(argv: list[str] | None = None) -> int:
    global _window
    import multiprocessing

    multiprocessing.freeze_support()  # frozen app: child processes of sweeps start here
    argv = list(sys.argv[1:] if argv is None else argv)
    from PySide6.QtWidgets import QApplication

    problem = None if QApplication.instance() is not None else display_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QIcon

    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication.instance() or QApplication([sys.argv[0]] + argv)
    app.setApplicationName("dpstudio")
    app.setOrganizationName("dpstudio")
    icon = resources_dir() / "icon.png"
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    qss = resources_dir() / "style.qss"
    if qss.exists():
        app.setStyleSheet(qss.read_text(encoding="utf-8"))
    from dpstudio.app.main_window import MainWindow

    files = [a for a in argv if not a.startswith("-")]
    smoke = "--smoke-test" in argv
    sys.excepthook = _excepthook
    win = MainWindow(offer_recovery=not files and not smoke)
    _window = win
    win.show()
    if files:
        target = files[0]
        if target.endswith(".dpsproj"):
            win.controller.open_project(target)
        else:
            start_clean(win)
            win.controller.open_file(target)
    else:
        start_clean(win)
        win.controller.open_sample()
    if smoke:
        return _smoke(app, win)
    rc = app.exec()
    sys.excepthook = sys.__excepthook__
    return int(rc)


def start_clean(win) -> None:
    """The file the app opens by itself at start (the sample, or the file named on the command
    line) is no change of the user's: the window title must not show '*' right after start
    (issue 24 §8).  One shot: the next load that reads that file leaves the project clean.
    """

    def loaded(*_args) -> None:
        try:
            win.sig_loaded.disconnect(loaded)
        except (RuntimeError, TypeError):  # pragma: no cover - already disconnected
            pass
        if not win.state.project_path:
            win.state.mark_dirty(False)

    win.sig_loaded.connect(loaded)


def _smoke(app, win) -> int:
    """``--smoke-test``: open the sample, protect it once, print a line and quit (packaging)."""
    import time

    from dpstudio import __version__
    from dpstudio.app.widgets.method_panel import list_methods

    def wait(cond, timeout=60.0):
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)
        return cond()

    ok = wait(lambda: win.state.df is not None)
    n_methods = len(list_methods())
    n_points = 0
    if ok and n_methods:
        cols = [c for c in win.state.df.columns[-4:]]
        win.state.set_roles({c: "k-quasi" for c in cols})
        win.state.set_method("mdav")
        win.state.set_sweep(ks="2, 5", repeats=1)
        win.controller.run_sweep()  # in a child process: checks that those start when frozen
        ok = wait(lambda: not win.controller.sweep_runner.busy)
        n_points = len(win.explore_panel.points)
        ok = ok and n_points == 2
        win.controller.run_protect()
        ok = ok and wait(lambda: win.state.result is not None)
    win.shutdown()
    print(
        f"dpstudio {__version__} smoke test: {'OK' if ok else 'FAILED'} "
        f"({n_methods} methods, sample {'loaded' if win.state.df is not None else 'missing'}, "
        f"sweep points: {n_points}, protected: {win.state.result is not None})"
    )
    win.state.mark_dirty(False)
    win.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
