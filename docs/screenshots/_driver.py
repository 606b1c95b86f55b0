"""What the screenshot scripts share: pumping the Qt event loop, waiting for the app's
workers, grabbing a widget into this folder.
"""

from __future__ import annotations

import time
from pathlib import Path


class Driver:
    """Drive ``app`` (a QApplication) and save pictures to ``out``."""

    def __init__(self, app, out: Path) -> None:
        self.app, self.out = app, out

    def pump(self, seconds: float) -> None:
        """Process events for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def wait_idle(self, win, timeout: float = 300.0) -> None:
        """Until the window's controller has no job running (or ``timeout`` seconds)."""
        self.pump(0.2)
        end = time.monotonic() + timeout
        while win.controller.busy and time.monotonic() < end:
            self.pump(0.05)
        self.pump(0.5)

    def shot(self, widget, name: str) -> None:
        """Save ``widget`` as ``name`` in the output folder."""
        self.pump(0.6)
        widget.grab().save(str(self.out / name))
        print("saved", name, flush=True)
