#!/usr/bin/env python3
"""Adult × N as a CSV (issue 12 benchmarks; not committed data): the bundled
``resources/adult/adult.csv`` (30,162 records, ';'-separated) repeated N times.

Usage::

    python benchmarks/make_adult_copies.py 10 /tmp/adult10.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> None:
    copies, out = int(argv[0]), Path(argv[1])
    text = (ROOT / "resources" / "adult" / "adult.csv").read_text(encoding="utf-8")
    header, _, body = text.partition("\n")
    body = body if body.endswith("\n") else body + "\n"
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(header + "\n")
        for _ in range(copies):
            fh.write(body)


if __name__ == "__main__":
    main(sys.argv[1:])
