"""Command line: ``dpstudio methods | protect | evaluate | sweep``.  Engine only, no Qt.

(Being built: see issue 2.)
"""

from __future__ import annotations

import sys

COMMANDS = ("methods", "protect", "evaluate", "sweep", "demo")


def main(argv: list[str] | None = None) -> int:
    print("dpstudio command line: not built yet", file=sys.stderr)
    return 2
