"""The private project file: everything needed to reproduce a release exactly.

JSON with ``schema_version``: input file (and how it was read), roles, domains, hierarchies,
method, parameters, seed and the sweep settings.  It contains the seed, so it is written with
owner-only permissions and must not be published (the export writes only public metadata).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dpstudio import __version__, engine

SCHEMA_VERSION = 1
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
        "seed": int(state.recipe.seed),
        "sweep": dict(sweep or {}),
    }


def save(path: str | os.PathLike, data: dict) -> None:
    """Write atomically with owner-only permissions (the file holds the seed)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
                         ("seed", 0), ("sweep", {}), ("method", None)):
        data.setdefault(key, default)
    data["schema_version"] = SCHEMA_VERSION
    return data


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item"):
        return v.item()
    return v
