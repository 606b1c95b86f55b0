"""``dpstudio methods``: the protection methods and their parameters."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpstudio.cli._output import jsonable

NAME = "methods"
SUMMARY = "list the protection methods and their parameters"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``methods`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def run(args: argparse.Namespace) -> int:
    """Print every registered method: id, name, what it protects, its parameters."""
    from dpstudio.engine.api import methods as list_methods

    ms = list_methods()
    if args.json:
        print(json.dumps(jsonable(ms), indent=2, ensure_ascii=False, default=str))
        return 0
    for m in ms:
        params = ", ".join(
            f"{p['name']}={p['default']}" + (f" [{'|'.join(map(str, p['choices']))}]" if p["choices"] else "")
            for p in m["params"]
        )
        print(f"{m['id']:<16} {m['name']}")
        print(
            f"{'':<16} protects: {', '.join(m['protects'])}"
            f"{'; needs declared domains' if m['needs_domain'] else ''}; params: {params}"
        )
    return 0
