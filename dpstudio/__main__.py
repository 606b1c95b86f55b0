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
    except ImportError as exc:  # app not installed / not built yet
        print(f"dpstudio: the desktop app is not available ({exc}); "
              "use 'dpstudio --help' for the command line.", file=sys.stderr)
        return 2
    return app_main(argv)


if __name__ == "__main__":
    sys.exit(main())
