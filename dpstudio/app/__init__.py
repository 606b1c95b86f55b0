"""The dpstudio desktop app: a thin PySide6 layer over :mod:`dpstudio.engine`.

Nothing here is imported by the engine or the command line.
"""

from __future__ import annotations

import sys


def _guard_pyside_none_refcount() -> None:
    """Work around a PySide6 6.12 binding bug on CPython < 3.12.

    In PySide6 6.12.0 every call of a Qt method that returns ``void`` (``QWidget.update``,
    ``QTimer.stop``, ``QGraphicsItem.setPos``…) releases one reference to ``None`` that it
    never took, and emitting a ``Signal(bool)`` does the same to ``True``/``False``.  On
    CPython 3.12+ these singletons are immortal and nothing happens; on 3.11 the count
    reaches zero after some tens of thousands of calls and the interpreter aborts with
    "Fatal Python error: none_dealloc" / "bool_dealloc" (a pyqtgraph redraw makes dozens of
    such calls).  A correct program never deallocates these singletons, so giving them a huge
    reference count (what 3.12 does by design) is safe.  Remove once PySide6 is fixed or the
    project requires Python >= 3.12.
    """
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return
    try:
        import PySide6

        if tuple(PySide6.__version_info__[:2]) < (6, 12):
            return
        import ctypes

        for singleton in (None, True, False):
            refcnt = ctypes.c_ssize_t.from_address(id(singleton))  # ob_refcnt: first field
            if refcnt.value < (1 << 40):
                refcnt.value += 1 << 40
    except Exception:  # noqa: BLE001 - never prevent the app from starting
        pass


_guard_pyside_none_refcount()
