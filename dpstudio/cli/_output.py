"""What the command line prints: one-line errors and warnings, private notes and steps (all on
stderr), and numbers as the summaries show them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Any

#: The line for a MemoryError anywhere in a command.
OUT_OF_MEMORY = (
    "out of memory: the input is too big for memory (or for this process's memory limit). "
    "Use --engine dask (pip install 'dpstudio[scale]'), or run with more memory."
)


def _one_line(msg: object) -> str:
    return " ".join(str(msg).split())


def err(msg: object) -> None:
    """``dpstudio: error: …`` on one line (stderr)."""
    print("dpstudio: error: " + _one_line(msg), file=sys.stderr)


def warn(msg: object) -> None:
    """``dpstudio: warning: …`` on one line (stderr)."""
    print("dpstudio: warning: " + _one_line(msg), file=sys.stderr)


def note(text: str) -> None:
    """A PRIVATE note about the data (stderr only, never a file): ``[code]`` names its kind
    (the code a :class:`~dpstudio.engine.validation.PrivateNote` carries).
    """
    from dpstudio.engine.validation import note_code

    print(f"dpstudio: private note [{note_code(text)}]: " + _one_line(text), file=sys.stderr)


def report_warnings(public: Iterable[str], private: Iterable[str], skip_codes: Iterable[str] = ()) -> None:
    """Public warnings (also in the metadata) as warnings, then the private notes (facts about
    the original data: shown here, never written to a public file).

    Standard output is flushed first, so that where both streams go to one place (a terminal,
    ``2>&1``) every warning and note starts on a line of its own after what was printed before.
    """
    from dpstudio.engine.validation import note_code

    sys.stdout.flush()
    for w in public:
        warn(w)
    skip = set(skip_codes)
    for w in private:
        if note_code(w) not in skip:
            note(w)


def step(msg: str) -> None:
    """A step of a long run (the Dask ranked methods), on a terminal's stderr."""
    print("dpstudio: " + msg, file=sys.stderr, flush=True)


def fmt(v: Any) -> str:
    """A value as the summaries print it (6 significant digits, ``n/a`` for NaN)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.6g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt(x)}" for k, x in v.items())
    return str(v)


def jsonable(v: Any) -> Any:
    """``v`` ready for ``json.dumps`` (the engine's conversion)."""
    from dpstudio.engine.types import jsonable as _jsonable

    return _jsonable(v)


def print_json(v: Any) -> None:
    """``v`` as indented JSON on stdout (non-ASCII kept)."""
    import json

    print(json.dumps(jsonable(v), indent=2, ensure_ascii=False))
