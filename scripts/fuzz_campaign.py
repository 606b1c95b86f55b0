"""The full fuzz campaign of issue 15: 10,000 seeded mutated files through the readers and
``dpstudio protect`` (in-process), with the figures for the release note.

    PYTHONPATH=. python3 scripts/fuzz_campaign.py [--cases 10000] [--seed 15]
    PYTHONPATH=. python3 scripts/fuzz_campaign.py --settings [--cases 10000] [--seed 21]

``--settings`` runs the issue-21 fuzzer instead: recipes, query expressions, ledgers and
release metadata (tests/fuzz/settings_fuzzer.py).

Exit code 1 when a case raised an uncaught exception, ran over 20 s or altered an
unprotected cell (each such case is listed with its number; re-run it with the same seed).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fuzz import fuzzer, settings_fuzzer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--protect-share", type=float, default=0.2)
    ap.add_argument("--settings", action="store_true", help="recipes, queries, ledgers, metadata")
    a = ap.parse_args()
    if a.settings:
        sfig = settings_fuzzer.run(a.cases, seed=a.seed if a.seed != 15 else 21,
                                   progress=lambda f: print(f"  ... {f.cases} cases", file=sys.stderr, flush=True))
        print(f"settings fuzz campaign: {sfig.line()}")
        for case, kind, what in sfig.failures:
            print(f"  case {case} ({kind}): {what}")
        return 1 if (sfig.uncaught or sfig.slow or sfig.wrong) else 0
    fig = fuzzer.run(a.cases, seed=a.seed, protect_share=a.protect_share,
                     progress=lambda f: print(f"  ... {f.cases} cases", file=sys.stderr, flush=True))
    print(f"fuzz campaign (seed {a.seed}): {fig.line()}")
    for case, kind, what in fig.failures:
        print(f"  case {case} ({kind}): {what}")
    return 1 if (fig.uncaught or fig.slow or fig.altered) else 0


if __name__ == "__main__":
    sys.exit(main())
