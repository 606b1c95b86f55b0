"""Entry point: ``dpstudio`` with a sub-command runs the command line; otherwise the app."""

from __future__ import annotations

import sys

from dpstudio.cli import COMMANDS


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version")):
        from dpstudio.cli import main as cli_main

        return cli_main(argv)
    try:
        from dpstudio.app.main import main as app_main
    except ImportError as exc:  # Qt libraries missing on this machine
        print(
            f"dpstudio: the desktop app cannot start here ({exc}); running the command-line "
            "demo instead ('dpstudio --help' lists the commands).",
            file=sys.stderr,
        )
        from dpstudio.cli import main as cli_main

        return cli_main(["demo"])
    return app_main(argv)


if __name__ == "__main__":
    sys.exit(main())
