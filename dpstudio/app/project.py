"""The private project file (``.dpsproj``): a :class:`~dpstudio.engine.recipe.Recipe` as JSON.

Everything needed to reproduce a release exactly: input file (and how it was read), roles,
types, domains, precision, hierarchies, method, parameters, seed (and whether it is pinned)
and the sweep settings.  It contains the seed, so it is written with owner-only permissions
and must not be published (the export writes only public metadata).  The schema, its
migrations (schema 1: an int seed; 2: hex seed; 3: precision and seed pinning) and the
keeping of unknown keys are the engine's (:mod:`dpstudio.engine.recipe`).  The query desk's
budget ledger is a file of its own; the project only names it (``query_ledger_file``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dpstudio import engine
from dpstudio.engine.io import read_json_file
from dpstudio.engine.query.ledger import LEGACY_PROJECT_KEY
from dpstudio.engine.random import seed_warning
from dpstudio.engine.recipe import KNOWN_KEYS, SCHEMA_VERSION, Recipe  # noqa: F401 (re-export)
from dpstudio.engine.safe_write import WritePlan

SUFFIX = ".dpsproj"


def save(path: str | os.PathLike, recipe: Recipe, *, protect: tuple | list = ()) -> str:
    """Write atomically with owner-only permissions (the file holds the seed), through the one
    guarded writer (never over ``protect``: the data file and hierarchy files the project
    reads; never over a FIFO, device, folder, link or read-only file).  Keys of an existing
    file at ``path`` that the recipe does not know are kept.
    """
    plan = WritePlan(inputs=protect)
    key = plan.file(path, what="project file", private=True)
    plan.check()  # before the old file is read: a FIFO is never opened
    p = Path(key)
    data = recipe.to_dict()
    try:  # keys written meanwhile by another tool (e.g. dpstudio query's ledger) are kept
        old = read_json_file(p, what="Project file") if p.is_file() else {}
    except engine.InputError:
        old = {}
    if isinstance(old, dict):
        for k, v in old.items():  # not the ledger an older version kept inside: it has its own file now
            if k not in KNOWN_KEYS and k not in data and k != LEGACY_PROJECT_KEY:
                data[k] = v
    return plan.write_text(key, json.dumps(data, indent=2, ensure_ascii=False))


def inputs_of(recipe: Recipe, data_path: str | os.PathLike | None = None) -> list[str]:
    """The files a project reads (its data file and hierarchy files): never written over."""
    out = [os.fspath(data_path)] if data_path else []
    if recipe.input_path:
        out.append(str(recipe.input_path))
    for src in (recipe.hierarchies or {}).values():
        if isinstance(src, dict) and src.get("path"):
            out.append(str(src["path"]))
    return out


def load(path: str | os.PathLike) -> Recipe:
    """Read and migrate a project file (one-line :class:`InputError` when it is not one)."""
    data = read_json_file(path, what="Project file")  # regular files only, size-limited
    if not isinstance(data, dict) or "schema_version" not in data:
        raise engine.InputError(f"{Path(path).name} is not a dpstudio project file.")
    try:
        return Recipe.from_dict(data)
    except engine.InputError as exc:
        raise engine.InputError(f"{Path(path).name}: {exc}") from None


def seed_note(seed: int | None) -> str:
    """A warning for a loaded project's weak seed ('' when it is strong or absent)."""
    if seed is None:
        return ""
    if int(seed) == 0:
        return (
            "This project uses seed 0 (the default of earlier versions): anyone can "
            "regenerate its noise. Press New next to the seed before protecting."
        )
    w = seed_warning(seed)
    return (f"This project's seed is weak: {w} Press New next to the seed.") if w else ""
