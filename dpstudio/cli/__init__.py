r"""Command line: ``dpstudio methods | protect | evaluate | sweep | risk | query | verify | demo``.
Engine only, no Qt.

One module per command (pip's layout): ``dpstudio/cli/<command>.py`` declares
``add_parser(subparsers)`` (its options) and ``run(args)`` (exit code).  :data:`COMMAND_MODULES`
names them; only the module of the command being run is imported (``--version`` imports
none), so start-up stays fast.  Shared pieces: ``_common`` (parsing helpers), ``_options``
(option groups), ``_settings`` (the recipe and the command line as one settings object),
``_dask`` (the Dask options and client), ``_output`` (what is printed).

Every error caused by the input (a bad file, value, role, domain or parameter) is
printed as one line ``dpstudio: error: ...`` on stderr with exit code 2, never a
traceback.  The input file is never modified.

Examples::

    dpstudio methods
    dpstudio protect census.csv out.csv --method ir-dp --k 10 --epsilon 1 \
        --role FICA=eps-quasi --domain FICA=0:7500 --report out.html
    dpstudio evaluate census.csv out.csv --attributes FICA --json
    dpstudio sweep census.csv --method ir-dp --role FICA=eps-quasi --domain FICA=0:7500 \
        --k 2:20 --epsilon 0.1,1,10 --repeats 10 --out sweep.csv
    dpstudio protect census.csv out.csv --recipe study.dpsproj --epsilon 2 \
        --save-recipe out.recipe.json   # the app's settings; options override them
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from types import ModuleType
from typing import NoReturn

#: Every command and its module, in the order ``dpstudio --help`` lists them.
COMMAND_MODULES = {
    "methods": "dpstudio.cli.methods",
    "protect": "dpstudio.cli.protect",
    "evaluate": "dpstudio.cli.evaluate",
    "sweep": "dpstudio.cli.sweep",
    "risk": "dpstudio.cli.risk",
    "query": "dpstudio.cli.query",
    "verify": "dpstudio.cli.verify",
    "demo": "dpstudio.cli.demo",
}
COMMANDS = tuple(COMMAND_MODULES)


class _UsageError(Exception):
    """Bad command-line syntax (reported on one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (imported on first use)."""
    return importlib.import_module(COMMAND_MODULES[name])


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The top-level parser for ``argv``: the own parser of the command ``argv`` names (its
    first word that is not an option), a bare entry for every other command (its name is a
    choice, its module is not imported); every command's parser when the top-level help is
    asked for (it lists them all).
    """
    from dpstudio import __version__

    parser = _Parser(prog="dpstudio", description="Protect microdata files before release.")
    parser.add_argument("--version", action="version", version=f"dpstudio {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    wanted = argv[first] if first < len(argv) else None
    top_help = any(a == "-h" or a.startswith("--h") for a in argv[:first])
    for name in COMMAND_MODULES:
        if name == wanted or top_help:
            command_module(name).add_parser(sub)
        else:
            sub.add_parser(name)
    return parser


def _run(args: argparse.Namespace) -> int:
    from dpstudio.cli._output import warn
    from dpstudio.engine.errors import PrivacyLeakWarning

    if getattr(args, "seed", None) is not None:
        from dpstudio.engine.random import seed_warning

        if seed_warning(args.seed):  # never echo the seed itself
            warn("--seed: " + seed_warning(args.seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return int(command_module(args.command).run(args) or 0)
        finally:
            seen = set()
            for w in caught:
                msg = str(w.message)
                if msg not in seen and issubclass(w.category, (UserWarning, PrivacyLeakWarning)):
                    seen.add(msg)
                    warn(msg)


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code: 0 done, 1 (verify) mismatch, 2 bad input (one line on
    stderr), 130 interrupted or cancelled.
    """
    from dpstudio.cli._output import OUT_OF_MEMORY, err
    from dpstudio.engine.errors import Cancelled, DPStudioError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = _parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_usage(sys.stderr)
            return 2
        return _run(args)
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except _UsageError as exc:
        err(str(exc))
        return 2
    except DPStudioError as exc:
        err(str(exc))
        return 2
    except BrokenPipeError:  # e.g. 'dpstudio methods | head'
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as exc:
        if exc.filename and exc.strerror:
            err(f"{exc.filename}: {exc.strerror}")
        else:
            err(str(exc) or type(exc).__name__)
        return 2
    except MemoryError:
        err(OUT_OF_MEMORY)
        return 2
    except Cancelled:
        err("cancelled")
        return 130
    except KeyboardInterrupt:
        err("interrupted")
        return 130
