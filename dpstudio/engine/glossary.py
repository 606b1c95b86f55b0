"""The glossary (``docs/glossary.md``) as data: {term: text} for tooltips and help (issue 11).

Each ``## Title`` section of the file is one entry; its term is the stable anchor given by the
``<a id="…">`` line under the heading; an optional line ``*Measure keys:* `a`, `b``` lists
the measure names (keys of :func:`dpstudio.engine.evaluate`, of sweeps and of the survey risk
report) the entry explains.

The file is read from the source tree (``<repo>/docs/glossary.md``) or, in a PyInstaller
bundle, from ``<bundle>/docs/glossary.md``; when neither exists the glossary is empty (tooltips
then show no help; nothing fails).

>>> g = load()
>>> "rl" in g and "chance level" in g["rl"]
True
>>> term_for_measure("sse_normalized")
'sse-normalised'
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

_ANCHOR = re.compile(r'<a\s+id="([^"]+)"\s*>\s*</a>')
_KEYS = re.compile(r"^\*Measure keys:\*\s*(.+)$")


@dataclass(frozen=True)
class Entry:
    term: str  # the stable anchor
    title: str
    text: str  # plain text (markdown kept; HTML tags removed)
    measure_keys: tuple[str, ...] = field(default=())


def glossary_path() -> Path | None:
    """Where ``glossary.md`` is: the source tree, else a PyInstaller bundle, else None."""
    here = Path(__file__).resolve()
    cands = [here.parents[2] / "docs" / "glossary.md"]
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        cands.append(Path(bundle) / "docs" / "glossary.md")
    return next((p for p in cands if p.is_file()), None)


def parse(text: str) -> dict[str, Entry]:
    """The entries of a glossary in the format above, by term (anchor)."""
    out: dict[str, Entry] = {}
    for block in re.split(r"(?m)^## ", text)[1:]:
        head, _, body = block.partition("\n")
        m = _ANCHOR.search(body)
        if not m:
            continue
        keys: tuple[str, ...] = ()
        lines = []
        for line in body.splitlines():
            if _ANCHOR.fullmatch(line.strip()):
                continue
            k = _KEYS.match(line.strip())
            if k:
                keys = tuple(re.findall(r"`([^`]+)`", k.group(1)))
                continue
            lines.append(line)
        plain = re.sub(r"<sup>(.*?)</sup>", r"^\1", "\n".join(lines))
        plain = re.sub(r"<[^>]+>", "", plain)
        plain = re.sub(r"\[([^\]]+)\]\(#[^)]+\)", r"\1", plain)  # internal links -> words
        plain = re.sub(r"\n{3,}", "\n\n", plain).strip()
        out[m.group(1)] = Entry(m.group(1), head.strip(), plain, keys)
    return out


@lru_cache(maxsize=1)
def entries() -> dict[str, Entry]:
    p = glossary_path()
    return parse(p.read_text(encoding="utf-8")) if p else {}


def load() -> dict[str, str]:
    """{term: text} of every entry (empty when the file is not available)."""
    return {t: e.text for t, e in entries().items()}


def term_for_measure(key: str) -> str | None:
    """The glossary term that explains measure ``key`` (``None`` when none does)."""
    for t, e in entries().items():
        if key in e.measure_keys:
            return t
    return None


def tooltip(key: str) -> str:
    """Tooltip text for a measure key or a term: "Title — text" ("" when unknown)."""
    t = key if key in entries() else term_for_measure(key)
    if t is None:
        return ""
    e = entries()[t]
    return f"{e.title} — {e.text}"


__all__ = ["Entry", "parse", "entries", "load", "term_for_measure", "tooltip", "glossary_path"]
