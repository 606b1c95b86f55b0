"""A command's settings as one object (issue 22): the command line parsed into a
:class:`~dpstudio.engine.recipe.Recipe`, merged over the ``--recipe`` file's (the command
line wins per column and per parameter); the command runs from that object, and
``--save-recipe`` writes it.

Only ``protect``, ``sweep`` and ``evaluate`` take settings.  What each takes from a recipe:

- all three: the method and its parameters (those of another method are not carried over),
  the roles, the column types, the hierarchies of the protected columns;
- ``protect`` and ``sweep`` also: the domains and precisions of the protected columns (what
  the app passes), the read options, the seed only if the user pinned it;
- ``sweep`` also: the grid (ks, epsilons, repeats).

The commands import this module inside ``run()``: ``engine.recipe`` imports
``engine.random``, which imports numpy, and a command's ``--help`` must not
(``tests/engine/test_startup_imports.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpstudio.cli._common import (
    READ_OPTIONS,
    check_hierarchy_exists,
    parse_domains,
    parse_hierarchies,
    parse_param_value,
    parse_precision,
    parse_roles,
    parse_types,
    read_options,
)
from dpstudio.cli._options import COMMON_PARAMS, PER_COLUMN_OPTIONS
from dpstudio.engine.recipe import Recipe

if TYPE_CHECKING:
    from dpstudio.engine.safe_write import WritePlan

#: The app's column types -> the engine's (the app's "text" is a category).
RECIPE_TYPES = {"numeric": "numeric", "text": "categorical"}

#: Roles of columns a method leaves alone: the recipe's domains, precisions and hierarchies of
#: such columns are not passed (what the app does).
UNPROTECTED_ROLES = ("other", "identifier")

#: The sweep's grid parameters: set by the grid, never by a single value.
GRID_PARAMS = ("k", "epsilon")


def input_of(args: argparse.Namespace) -> str | None:
    """The data file the settings are applied to (``IN`` or ``ORIGINAL``)."""
    return getattr(args, "input", None) or getattr(args, "original", None)


def from_command_line(args: argparse.Namespace, command: str) -> Recipe:
    """What the command line gives, nothing else.  The parameters stay as typed (text, or
    ``True`` for ``--drop-missing``): :func:`merge` reads them against the method's Params.
    """
    from dpstudio.cli._common import split_assign

    params: dict[str, Any] = {}
    for name in COMMON_PARAMS:
        if command == "sweep" and name in GRID_PARAMS:
            continue  # the grid
        v = getattr(args, name, None)
        if v is not None:
            params[name] = str(v)
    for it in getattr(args, "param", None) or []:
        name, raw = split_assign(it, "--param", "NAME=VALUE (e.g. budget=per-attribute)")
        params[name] = raw
    for opt, name in PER_COLUMN_OPTIONS.items():
        items = getattr(args, opt.replace("-", "_"), None)
        if items:  # (column, text) pairs in order: merge() joins them by the Param's rule
            params[name] = PerColumnItems(
                split_assign(it, f"--{opt}", "COLUMN=TEXT (see 'dpstudio protect --help')") for it in items
            )
    if getattr(args, "drop_missing", False):
        params["drop_missing"] = True
    roles = parse_roles(args.role)
    hierarchies = parse_hierarchies(getattr(args, "hierarchy", None))
    steps: list[dict[str, Any]] = []
    if getattr(args, "pipeline", None):
        from dpstudio.engine.chain import load_pipeline

        steps = [st.to_dict() for st in load_pipeline(args.pipeline, what="--pipeline")]
    sweep: dict[str, Any] = {}
    if command == "sweep":
        sweep = {"ks": args.k, "epsilons": args.epsilon, "repeats": args.repeats}
    return Recipe(
        input_path=input_of(args),
        read_options={k: v for k, v in read_options(args).items() if v is not None},
        roles=roles,
        types=parse_types(getattr(args, "type", None)),
        domains=parse_domains(getattr(args, "domain", None)),
        precision=parse_precision(getattr(args, "precision", None)),
        hierarchies={c: {"path": p} for c, p in hierarchies.items()},
        method=getattr(args, "method", None) or None,
        params=params,
        seed=getattr(args, "seed", None),
        seed_pinned=getattr(args, "seed", None) is not None,
        sweep=sweep,
        steps=steps,
    )


class PerColumnItems(list):
    """The ``(column, text)`` pairs of a repeatable per-column option (``--top INCOME=p99``),
    in the order given; :func:`merge` turns them into the parameter's dict.
    """


def per_column_value(spec: Any, name: str, items: PerColumnItems, base: Any) -> Any:
    """The dict of per-column parameter ``name`` of ``spec``: ``base`` (the recipe's dict, or
    None) with the command line's ``items`` over it per column; a column given twice on the
    command line joins its texts with the Param's ``join`` (empty: the later wins).  A
    parameter the method does not have is returned as given, for check_params to name.
    """
    try:
        p = spec.param(name)
    except KeyError:
        return dict(items)
    if p.kind != "per-column":
        return dict(items)
    out: dict[str, Any] = dict(base) if isinstance(base, dict) else {}
    seen: set[str] = set()
    for col, text in items:
        if col in seen and p.join and isinstance(out.get(col), str):
            out[col] = f"{out[col]}{p.join}{text}"
        else:
            out[col] = text
        seen.add(col)
    return out


def _grid_text(grid: Any) -> str:
    """A recipe's grid (text, or a list of numbers) as the text of a grid option."""
    return ",".join(str(x) for x in grid) if isinstance(grid, list) else str(grid)


def merge(given: Recipe, source: Recipe | None, command: str, *, source_name: str = "") -> Recipe:
    """The effective settings: ``source`` (the ``--recipe``; None: none) with ``given`` (the
    command line) over it, per column and per parameter.  The parameters are read against the
    method's Params (:func:`~dpstudio.cli._common.parse_param_value`); every hierarchy file
    must exist.
    """
    from dpstudio.engine.errors import ParameterError

    src = source if source is not None else Recipe()
    if given.method and given.steps:
        raise ParameterError(
            "Give either --method (one method) or --pipeline (a release made of steps), not both."
        )
    if given.steps and given.params:
        raise ParameterError(
            f"--pipeline: the steps' parameters are in the pipeline file; remove "
            f"{', '.join('--' + n.replace('_', '-') for n in given.params)} from the command line."
        )
    # the command line wins: a --method replaces the recipe's steps, a --pipeline its method
    steps = given.steps or ([] if given.method else list(src.steps))
    method = None if steps else (given.method or src.method)
    if steps and given.params:
        raise ParameterError(
            f"--recipe {source_name} is a release made of steps: their parameters are in the "
            f"recipe; remove {', '.join('--' + n.replace('_', '-') for n in given.params)} "
            "from the command line."
        )
    roles = {**src.roles, **given.roles}
    active = {c for c, r in roles.items() if r not in UNPROTECTED_ROLES}
    types = {**{c: RECIPE_TYPES.get(t, t) for c, t in src.types.items()}, **given.types}
    hierarchies: dict[str, dict[str, Any]] = {}
    for c, h in src.hierarchies.items():
        if c not in active or c in given.hierarchies:
            continue
        if not h.get("path"):
            raise ParameterError(
                f"--recipe {source_name}: the hierarchy of column {c!r} was generated in "
                f"the app; give it as a file: --hierarchy {c}=FILE."
            )
        check_hierarchy_exists(c, h["path"])
        hierarchies[c] = {"path": h["path"]}
    hierarchies.update(given.hierarchies)

    params: dict[str, Any] = {}
    if method:
        from dpstudio.engine.registry import get_method, legacy_params

        spec = get_method(method)
        # the recipe's (an old recipe's 'shuffle' read as 'order' first, so that --order
        # overrides it like any other option), the command line's over them
        params = legacy_params(dict(src.params) if src.method == spec.id else {}, spec.id)
        for name, raw in given.params.items():
            if isinstance(raw, PerColumnItems):
                params[name] = per_column_value(spec, name, raw, params.get(name))
            else:
                params[name] = parse_param_value(spec, name, raw) if isinstance(raw, str) else raw
        if command == "sweep":
            for name in GRID_PARAMS:  # a recipe's single values: the grid sets them
                params.pop(name, None)

    eff = Recipe(
        input_path=os.path.abspath(given.input_path) if given.input_path else None,
        roles=roles,
        types=types,
        hierarchies=hierarchies,
        method=method,
        params=params,
        sweep=dict(src.sweep),
        extra=dict(src.extra),
        steps=steps,
    )
    if command == "evaluate":
        return eff
    eff.domains = {**{c: d for c, d in src.domains.items() if c in active}, **given.domains}
    eff.precision = {**{c: g for c, g in src.precision.items() if c in active}, **given.precision}
    eff.read_options = {
        k: v
        for k in READ_OPTIONS
        for v in [given.read_options.get(k, src.read_options.get(k))]
        if v is not None
    }
    if given.seed is not None:
        eff.seed = given.seed
    elif src.seed_pinned and src.seed is not None:
        eff.seed = src.seed
    eff.seed_pinned = eff.seed is not None
    if command == "sweep":
        ks, eps, repeats = (given.sweep.get(key) for key in ("ks", "epsilons", "repeats"))
        if ks is None and src.sweep.get("ks"):
            ks = _grid_text(src.sweep["ks"])
        if eps is None and src.sweep.get("epsilons"):
            eps = _grid_text(src.sweep["epsilons"])
        if repeats is None and src.sweep.get("repeats"):
            repeats = int(src.sweep["repeats"])
        eff.sweep = {"ks": ks, "epsilons": eps, "repeats": repeats}
    return eff


def settings(args: argparse.Namespace, command: str) -> Recipe:
    """The effective settings of ``command`` (``protect``, ``sweep`` or ``evaluate``): the
    ``--recipe`` file read, the command line parsed and merged over it.
    """
    from dpstudio.engine.errors import ParameterError

    source = None
    if getattr(args, "recipe", None):
        from dpstudio.engine.recipe import load_recipe

        source = load_recipe(args.recipe, what="--recipe")
    piped = bool(getattr(args, "pipeline", None)) or bool(source and source.steps)
    if getattr(args, "save_recipe", None) and not (args.method or piped or (source and source.method)):
        raise ParameterError("--save-recipe needs a method: give --method (or a --recipe that names one).")
    name = Path(args.recipe).name if source is not None else ""
    if source is None and command != "evaluate" and not (args.method or piped):
        raise ParameterError(
            "--method is required (or give --recipe FILE"
            + (", or --pipeline STEPS.json)." if command == "protect" else ").")
        )
    if source is not None:
        from dpstudio.cli._output import warn
        from dpstudio.engine.io import same_file

        inp = input_of(args)
        if source.input_path and inp and not same_file(source.input_path, inp):
            warn(f"the recipe was made for {source.input_path}; applying it to {inp}.")
        if source.steps and command != "protect":
            raise ParameterError(
                f"--recipe {name} is a release made of steps (a pipeline): only 'dpstudio protect' runs it."
            )
        if command != "evaluate" and not (args.method or source.method or piped):
            raise ParameterError(f"--recipe {name} names no method: give --method.")
    return merge(from_command_line(args, command), source, command, source_name=name)


def write_plan(args: argparse.Namespace, s: Recipe, *inputs: str) -> WritePlan:
    """The command's plan for the one guarded writer: every file it reads (``inputs``, the
    --recipe file, the hierarchy files of ``s``) and, with --save-recipe, the recipe; the
    command adds its other targets and calls ``check()`` before any work (a refusal writes
    nothing).
    """
    from dpstudio.engine.safe_write import WritePlan

    hier = [h["path"] for h in s.hierarchies.values() if h.get("path")]
    if s.method:  # the method's settings files (a PRAM matrix, a mapping of categories)
        from dpstudio.engine.params import input_paths
        from dpstudio.engine.registry import get_method

        hier += input_paths(get_method(s.method).params, s.params)
    # settings files count as inputs when they are files (a folder or FIFO given as one is
    # refused by its reader, with its own message)
    files = [
        p
        for p in (getattr(args, "recipe", None), getattr(args, "pipeline", None), *hier)
        if p and os.path.isfile(p)
    ]
    plan = WritePlan(inputs=[*inputs, *files])
    if getattr(args, "save_recipe", None):
        plan.file(args.save_recipe, what="recipe (--save-recipe)", private=True)
    return plan


def save_recipe(args: argparse.Namespace, s: Recipe, plan: WritePlan, command: str) -> None:
    """``--save-recipe FILE``: the effective settings ``s``, PRIVATE (0600); the seed only if
    pinned (given with --seed or pinned in the --recipe), never a fresh one; the parameters as
    the engine reads them; hierarchy paths made absolute.  Written through the command's
    ``plan`` (:func:`write_plan`, checked before any work).
    """
    if not getattr(args, "save_recipe", None):
        return
    import json

    from dpstudio.engine.registry import get_method

    typed = {}
    if s.method is not None:  # settings() refuses --save-recipe without a method or steps
        spec = get_method(s.method)
        for name, v in s.params.items():  # as the engine reads them (the text of an option coerced)
            try:
                typed[name] = spec.param(name).check(v, spec.id)
            except KeyError:
                typed[name] = v
    sweep = s.sweep
    if command == "sweep":
        sweep = {
            "ks": s.sweep["ks"] or "",
            "epsilons": s.sweep["epsilons"] or "",
            "repeats": s.sweep["repeats"],
        }
    rec = dataclasses.replace(
        s,
        read_options={k: v for k, v in s.read_options.items() if v},
        hierarchies={c: {"path": os.path.abspath(h["path"])} for c, h in s.hierarchies.items()},
        params={k: v for k, v in typed.items() if k != "precision"},
        sweep=sweep,
    )
    text = json.dumps(rec.to_dict(), indent=2, ensure_ascii=False)
    plan.write_text(args.save_recipe, text)
    print(f"Recipe: {args.save_recipe} (private: keep internal)", file=sys.stderr)
