"""The private project file: everything needed to reproduce a release exactly.

JSON with ``schema_version``: input file (and how it was read), roles, domains, hierarchies,
method, parameters, seed and the sweep settings.  It contains the seed, so it is written with
owner-only permissions and must not be published (the export writes only public metadata).

Schema 2 stores the seed as hex text (``"0x…"``, 128 bits by default): JSON readers that map
numbers to doubles would otherwise lose its low bits.  Schema-1 files (an int seed, 31 bits at
most, often the old default 0) still load; :func:`seed_note` says when their seed is weak.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dpstudio import __version__, engine
from dpstudio.engine.random import format_seed, parse_seed, seed_warning

SCHEMA_VERSION = 2
SUFFIX = ".dpsproj"


def to_dict(state, sweep: dict | None = None) -> dict:
    hier: dict[str, Any] = {}
    for col, src in state.hierarchy_sources.items():
        if isinstance(src, str):
            hier[col] = {"path": src}
        elif isinstance(src, dict):
            hier[col] = dict(src)
    return {
        "schema_version": SCHEMA_VERSION,
        "software_version": __version__,
        "input": {"path": state.path, "read_options": dict(state.read_options or {})},
        "roles": {c: r for c, r in state.roles.items() if r != "other"},
        "types": dict(getattr(state, "types", {}) or {}),
        "domains": {c: [float(a), float(b)] for c, (a, b) in state.domains.items()},
        "hierarchies": hier,
        "method": state.recipe.method,
        "params": _jsonable(state.recipe.params),
        "seed": format_seed(state.recipe.seed),
        "sweep": dict(sweep or {}),
    }


def save(path: str | os.PathLike, data: dict) -> None:
    """Write atomically with owner-only permissions (the file holds the seed)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:  # a stale .part left with other permissions: owner-only before the seed is written
        os.fchmod(fd, 0o600)
    except (OSError, AttributeError):  # pragma: no cover - e.g. Windows
        pass
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
    os.replace(tmp, p)
    try:
        os.chmod(p, 0o600)
    except OSError:  # pragma: no cover - e.g. some network drives
        pass


def load(path: str | os.PathLike) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise engine.InputError(f"Cannot read project file {Path(path).name}: {exc}") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise engine.InputError(f"{Path(path).name} is not a dpstudio project file.")
    return migrate(data)


def migrate(data: dict) -> dict:
    v = int(data.get("schema_version", 0))
    if v > SCHEMA_VERSION:
        raise engine.InputError(
            f"This project was saved by a newer dpstudio (schema {v}); update dpstudio to open it.")
    data.setdefault("input", {"path": None, "read_options": {}})
    for key, default in (("roles", {}), ("types", {}), ("domains", {}), ("hierarchies", {}),
                         ("params", {}),
                         ("sweep", {}), ("method", None)):
        data.setdefault(key, default)
    # seed: hex text (schema 2) or an int (schema 1); missing -> None (the app draws a fresh one)
    seed = data.get("seed")
    if seed is not None:
        try:
            data["seed"] = parse_seed(seed, "seed of the project")
        except engine.DPStudioError as exc:
            raise engine.InputError(f"{exc} Correct the project file or remove its seed.") from None
    else:
        data["seed"] = None
    data["schema_version"] = SCHEMA_VERSION
    return data


def seed_note(seed: int | None) -> str:
    """A warning for a loaded project's weak seed ('' when it is strong or absent)."""
    if seed is None:
        return ""
    if int(seed) == 0:
        return ("This project uses seed 0 (the default of earlier versions): anyone can "
                "regenerate its noise. Press New next to the seed before protecting.")
    w = seed_warning(seed)
    return (f"This project's seed is weak: {w} Press New next to the seed.") if w else ""


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item"):
        return v.item()
    return v
