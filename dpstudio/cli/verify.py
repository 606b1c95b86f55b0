"""``dpstudio verify RELEASE``: check a release against the digests its metadata names."""

from __future__ import annotations

import argparse
from typing import Any

NAME = "verify"
SUMMARY = "check a release against its metadata (exit 0 OK, 1 MISMATCH)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``verify`` command and its argument."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("release", metavar="RELEASE", help="the released file or its .metadata.json")
    return p


def run(args: argparse.Namespace) -> int:
    """Check a release and its tables against the digests its metadata names (0 OK, 1 MISMATCH)."""
    from dpstudio.engine.export import verify_release

    ok, line = verify_release(args.release)
    print(line)
    return 0 if ok else 1
